// bench/timer_bench.cpp: tock against asio::steady_timer, the watchdog pattern and a bare 4-ary heap.
//
//   timer_bench --workload=W --system=S --n=N [--repeats=R] [--ops=OPS]
//       runs one configuration in this process and prints one CSV row (no header)
//   timer_bench --list [--quick]       the configurations scripts/bench.sh runs, one argument line each
//   timer_bench --header               the CSV header
//   timer_bench --report=CSV [--syscalls=CSV]   Markdown tables, ratios to asio, targets met or missed
//
// Workloads: fire churn touch memory lateness sparse threads check.
// Systems:   asio tock_timer tock_sleep tock_deadline watchdog heap (not every workload applies to every system).
// CPU time is CLOCK_PROCESS_CPUTIME_ID around the measured phase; see bench/README.md for what each measures.
#include "bench_report.hpp"
#include "bench_util.hpp"
#include "bench_workloads.hpp"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace bench;

// Which systems each workload runs.
const std::vector<std::pair<std::string, std::vector<std::string>>>& workload_systems() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> v = {
      {"fire", {"asio", "tock_timer", "tock_sleep", "heap"}},
      {"churn", {"asio", "tock_timer", "tock_sleep", "heap"}},
      {"touch", {"asio", "tock_timer", "tock_deadline", "watchdog", "heap"}},
      {"memory", {"asio", "tock_timer", "tock_sleep", "tock_deadline", "heap"}},
      {"lateness", {"asio", "tock_timer", "tock_sleep"}},
      {"sparse", {"asio", "tock_timer", "tock_sleep"}},
      {"threads", {"asio", "tock_timer"}},
      {"check", {"asio", "tock_timer", "tock_deadline", "watchdog"}},
  };
  return v;
}

bool applies(const std::string& w, const std::string& s) {
  for (const auto& [name, systems] : workload_systems())
    if (name == w)
      for (const auto& x : systems)
        if (x == s) return true;
  return false;
}

// Runs `once` `repeats` times and returns the median.
double median_of(int repeats, const std::function<double()>& once) {
  std::vector<double> v;
  for (int i = 0; i < repeats; ++i) v.push_back(once());
  std::string all;  // every repetition, for the log
  for (double x : v) all += " " + fmt_field(x, 1);
  std::fprintf(stderr, "timer_bench: %s: repeats:%s\n", current_config.c_str(), all.c_str());
  return median(v);
}

row run(const std::string& w, const std::string& s, std::size_t n, int repeats, std::size_t ops) {
  row r;
  r.workload = w;
  r.system = s;
  r.n = n;
  r.repeats = repeats;

  if (w == "fire" || w == "sparse") {
    const auto off = uniform_offsets(n, 200 * ms);
    const bool markers = w == "sparse";
    r.ns_per_op = median_of(repeats, [&] {
      if (s == "asio") return fire_timers<asio::steady_timer>(n, off, markers);
      if (s == "tock_timer") return fire_timers<tock::timer>(n, off, markers);
      if (s == "tock_sleep") return fire_sleeps(n, off, markers);
      return fire_heap(n, off);
    });
  } else if (w == "churn") {
    const auto initial = uniform_offsets(n, hour);
    std::vector<std::int64_t> init(initial.size());
    for (std::size_t i = 0; i < n; ++i) init[i] = hour + initial[i];
    const op_input in = random_ops(n, ops, hour, 2 * hour);
    r.ns_per_op = median_of(repeats, [&] {
      if (s == "asio") return churn_timers<asio::steady_timer>(n, init, in);
      if (s == "tock_timer") return churn_timers<tock::timer>(n, init, in);
      if (s == "tock_sleep") return churn_sleeps(n, init, in);
      return churn_heap(n, init, in);
    });
  } else if (w == "touch") {
    const op_input in = random_ops(n, ops, 0, 0);
    r.ns_per_op = median_of(repeats, [&] {
      if (s == "asio") return touch_timers<asio::steady_timer>(n, in);
      if (s == "tock_timer") return touch_timers<tock::timer>(n, in);
      if (s == "watchdog") return touch_watchdog(n, in);
      if (s == "tock_deadline") return touch_deadlines(n, in);
      return touch_heap(n, in);
    });
  } else if (w == "memory") {
    r.repeats = 1;  // RSS is only meaningful on a fresh process
    if (s == "asio") r.bytes_per_timer = memory_timers<asio::steady_timer>(n);
    if (s == "tock_timer") r.bytes_per_timer = memory_timers<tock::timer>(n);
    if (s == "tock_sleep") r.bytes_per_timer = memory_sleeps(n);
    if (s == "tock_deadline") r.bytes_per_timer = memory_timers<tock::deadline>(n);
    if (s == "heap") r.bytes_per_timer = memory_heap(n);
  } else if (w == "lateness") {
    std::vector<double> p50, p99, mx;
    for (int i = 0; i < repeats; ++i) {
      lateness_result l{};
      if (s == "asio") l = lateness_timers<asio::steady_timer>(n);
      if (s == "tock_timer") l = lateness_timers<tock::timer>(n);
      if (s == "tock_sleep") l = lateness_sleeps(n);
      p50.push_back(l.p50_us);
      p99.push_back(l.p99_us);
      mx.push_back(l.max_us);
    }
    r.p50_us = median(p50);
    r.p99_us = median(p99);
    r.max_us = median(mx);
  } else if (w == "threads") {
    r.ops_per_s = median_of(repeats, [&] {
      if (s == "asio") return threads_timers<asio::steady_timer>(n);
      return threads_timers<tock::timer>(n);
    });
  } else if (w == "check") {
    if (s == "asio") touch_check_timers<asio::steady_timer>();
    if (s == "tock_timer") touch_check_timers<tock::timer>();
    if (s == "watchdog") touch_check_watchdog();
    if (s == "tock_deadline") touch_check_deadline();
  }
  return r;
}

// The full suite: N in {10k, 100k, 1M}, each repeated in-process (7, 5, 3 times; the median is kept);
// --quick: one pass at 10k and 100k
// with 100k operations instead of 1M.
void list(bool quick) {
  const std::vector<std::pair<std::size_t, int>> sizes =
      quick ? std::vector<std::pair<std::size_t, int>>{{10000, 1}, {100000, 1}}
            : std::vector<std::pair<std::size_t, int>>{{10000, 7}, {100000, 5}, {1000000, 3}};
  const std::string ops = quick ? " --ops=100000" : "";
  for (const auto& [w, systems] : workload_systems()) {
    for (const auto& s : systems) {
      const std::string head = "--workload=" + w + " --system=" + s;
      if (w == "check") {
        std::printf("%s --n=200\n", head.c_str());
      } else if (w == "lateness") {
        std::printf("%s --n=100000 --repeats=%d\n", head.c_str(), quick ? 1 : 5);
      } else if (w == "sparse") {
        std::printf("%s --n=10000 --repeats=%d\n", head.c_str(), quick ? 1 : 7);
      } else if (w == "threads") {
        std::printf("%s --n=%d --repeats=%d\n", head.c_str(), quick ? 200000 : 1000000, quick ? 1 : 3);
      } else {
        for (const auto& [n, rep] : sizes)
          std::printf("%s --n=%zu --repeats=%d%s\n", head.c_str(), n, w == "memory" ? 1 : rep, ops.c_str());
      }
    }
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: timer_bench --workload=W --system=S --n=N [--repeats=R] [--ops=OPS]\n"
               "       timer_bench --list [--quick] | --header | --report=CSV [--syscalls=CSV]\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  const args a(argc, argv);
  if (a.has("help")) return usage(), 0;
  if (a.has("header")) {
    std::printf("%s\n", csv_header);
    return 0;
  }
  if (a.has("list")) {
    list(a.has("quick"));
    return 0;
  }
  if (a.has("report")) {
    print_report(load_results(a.get("report"), a.get("syscalls")));
    return 0;
  }
  const std::string w = a.get("workload"), s = a.get("system");
  const std::size_t n = parse_count(a.get("n", "0"));
  const int repeats = std::atoi(a.get("repeats", "1").c_str());
  const std::size_t ops = parse_count(a.get("ops", "1000000"));
  current_config = w + "/" + s + "/n=" + std::to_string(n);
  if (w.empty() || s.empty() || n == 0 || repeats < 1 || ops == 0) return usage();
  if (!applies(w, s)) {
    std::fprintf(stderr, "timer_bench: workload '%s' does not apply to system '%s'\n", w.c_str(), s.c_str());
    return 64;
  }
  const row r = run(w, s, n, repeats, ops);
  if (w == "check") {
    std::fprintf(stderr, "timer_bench: %s: ok\n", current_config.c_str());
    return 0;
  }
  std::printf("%s\n", to_csv(r).c_str());
  return 0;
}
