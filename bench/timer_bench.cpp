// bench/timer_bench.cpp: tock against asio::steady_timer, the watchdog pattern and a bare 4-ary heap.
//
//   timer_bench --workload=W --system=S --n=N [--repeats=R] [--ops=OPS]
//       runs one configuration in this process and prints one CSV row (no header)
//   timer_bench --list [--quick]       the configurations scripts/bench.sh runs, one argument line each
//   timer_bench --header               the CSV header
//   timer_bench --report=CSV [--syscalls=CSV]   Markdown tables, ratios to asio, targets met or missed
//
// Workloads: fire expire churn touch memory lateness sparse threads check periodic tasks timeouts.
// Systems:   asio tock_timer tock_sleep tock_deadline tock_timeout watchdog heap tock_periodic tock_tasks
// asio_cancel_after no_timeout (timeouts: the request with no time limit, the baseline); not every workload applies
// to every system. CPU time is CLOCK_PROCESS_CPUTIME_ID around the measured phase; see bench/README.md for what
// each measures. Allocations are counted as malloc calls (below).
#include "bench_report.hpp"
#include "bench_tasks.hpp"
#include "bench_util.hpp"
#include "bench_workloads.hpp"

#include <malloc.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

// Counts allocations for the periodic, tasks and timeouts workloads (bench::allocations()) as calls to malloc,
// at every entry point an allocation can come through: operator new (libstdc++'s calls malloc; its aligned
// form, aligned_alloc) and what calls the C allocator directly (Asio's recycling allocator and cancellation
// slots take their memory from aligned_alloc, which a count of operator new calls did not see). Each entry
// point is replaced here, in the executable, which every library's call resolves to (glibc supports replacing
// its allocator so), counts one call and forwards to glibc's own implementation (__libc_*), so the memory and
// its placement are glibc's as before. free is not counted; realloc counts once per call. The count is a
// thread-local increment (no atomic instruction in the measured phases); check_malloc_counting() proves it is
// wired before any figure is taken.
extern "C" {
void* __libc_malloc(std::size_t) noexcept;
void* __libc_calloc(std::size_t, std::size_t) noexcept;
void* __libc_realloc(void*, std::size_t) noexcept;
void* __libc_memalign(std::size_t, std::size_t) noexcept;
void* __libc_valloc(std::size_t) noexcept;
void* __libc_pvalloc(std::size_t) noexcept;
void __libc_free(void*) noexcept;

void* malloc(std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_calloc(count, size);
}
void* realloc(void* p, std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_realloc(p, size);
}
void* reallocarray(void* p, std::size_t count, std::size_t size) noexcept {
  ++bench::allocation_count;
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, bytes);
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(std::size_t align, std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_memalign(align, size);
}
// glibc 2.36's aligned_alloc is its memalign (one symbol); the C17 rule (a power of two) is checked here, as
// later glibc does, since nothing here relies on more.
void* aligned_alloc(std::size_t align, std::size_t size) noexcept {
  ++bench::allocation_count;
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return __libc_memalign(align, size);
}
int posix_memalign(void** out, std::size_t align, std::size_t size) noexcept {
  ++bench::allocation_count;
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0 || align == 0) return EINVAL;
  void* p = __libc_memalign(align, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_valloc(size);
}
void* pvalloc(std::size_t size) noexcept {
  ++bench::allocation_count;
  return __libc_pvalloc(size);
}
}

namespace {

using namespace bench;

// A list of systems (adapters, bench_systems.hpp), in the order --list prints them.
template <typename... S>
struct systems {
  static std::vector<std::string> names() { return {S::name...}; }
  // Calls f.template operator()<X>() for the system X named `name` (one of them: see applies()).
  template <typename F>
  static void with(const std::string& name, F&& f) {
    (void)((name == S::name && (f.template operator()<S>(), true)) || ...);
  }
};

using asio_timers = timer_objects<asio::steady_timer>;
using tock_timers = timer_objects<tock::timer>;
using tock_deadlines = timer_objects<tock::deadline>;

// Which systems each workload runs (churn's sleeps are bound to cancellation signals, the others' are not).
using fire_systems = systems<asio_timers, tock_timers, tock_sleeps<false>, tock_sleeps_slack, heap>;
using expire_systems = systems<asio_timers, tock_timers, tock_sleeps<false>, heap>;
using churn_systems = systems<asio_timers, tock_timers, tock_sleeps<true>, heap>;
using touch_systems = systems<asio_timers, tock_timers, tock_deadlines, watchdog, heap>;
using memory_systems = systems<asio_timers, tock_timers, tock_sleeps<false>, tock_deadlines, heap>;
using lateness_systems = systems<asio_timers, tock_timers, tock_sleeps<false>>;
using sparse_systems = systems<asio_timers, tock_timers, tock_sleeps<false>, tock_sleeps_slack>;
using threads_systems = systems<asio_timers, tock_timers>;
using check_systems = systems<asio_timers, tock_timers, tock_deadlines, watchdog>;
using periodic_systems = systems<asio_periodic, tock_periodic>;
using tasks_systems = systems<asio_tasks, tock_tasks>;
using timeouts_systems = systems<no_timeout_requests, timer_requests<asio::steady_timer>, tock_timeout_requests,
                                 tock_deadline_requests, timer_requests<tock::timer>, tock_sleep_requests, heap_requests
#if TOCK_ASIO_VERSION >= 103100
                                 ,
                                 asio_cancel_after_requests
#endif
                                 >;

const std::vector<std::pair<std::string, std::vector<std::string>>>& workload_systems() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> v = {
      {"fire", fire_systems::names()},     {"expire", expire_systems::names()},
      {"churn", churn_systems::names()},   {"touch", touch_systems::names()},
      {"memory", memory_systems::names()}, {"lateness", lateness_systems::names()},
      {"sparse", sparse_systems::names()}, {"threads", threads_systems::names()},
      {"check", check_systems::names()},   {"periodic", periodic_systems::names()},
      {"tasks", tasks_systems::names()},   {"timeouts", timeouts_systems::names()},
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

// Keeps an allocation the compiler could otherwise elide (a new/delete or malloc/free pair whose pointer is unused).
inline void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Each entry point of the allocation count, tried once: every allocating call must count exactly one malloc call
// and a release none, or every figure of allocations per operation would be wrong (a count that stayed at 0
// would report any system as allocation-free).
void check_malloc_counting() {
  struct alignas(64) wide {
    unsigned char b[64];
  };
  auto expect_calls = [](const char* what, std::size_t expected, auto&& f) {
    const std::size_t before = allocations();
    f();
    const std::size_t got = allocations() - before;
    if (got != expected)
      fail(std::string("malloc counting: ") + what + " counted " + std::to_string(got) + " calls, expected " +
           std::to_string(expected));
  };
  expect_calls("std::make_unique<int> (operator new, then delete)", 1, [] { escape(std::make_unique<int>(1).get()); });
  expect_calls("aligned operator new, then delete", 1, [] { escape(std::make_unique<wide>().get()); });
  void* p = nullptr;
  expect_calls("malloc", 1, [&] { escape(p = std::malloc(24)); });
  expect_calls("realloc", 1, [&] { escape(p = std::realloc(p, 4096)); });
  expect_calls("free", 0, [&] { std::free(p); });
  expect_calls("calloc", 1, [&] { escape(p = std::calloc(3, 8)); });
  std::free(p);
  expect_calls("reallocarray", 1, [&] { escape(p = reallocarray(nullptr, 3, 8)); });
  std::free(p);
  expect_calls("aligned_alloc", 1, [&] { escape(p = std::aligned_alloc(64, 128)); });
  std::free(p);
  int rc = -1;
  expect_calls("posix_memalign", 1, [&] { rc = posix_memalign(&p, 64, 128); });
  check(rc == 0, "posix_memalign failed");  // outside: the message is a std::string, which allocates
  escape(p);
  std::free(p);
  expect_calls("memalign", 1, [&] { escape(p = memalign(64, 128)); });
  std::free(p);
  expect_calls("valloc", 1, [&] { escape(p = valloc(128)); });
  std::free(p);
  expect_calls("pvalloc", 1, [&] { escape(p = pvalloc(128)); });
  std::free(p);
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
    auto one = [&]<typename S>() { r.ns_per_op = median_of(repeats, [&] { return fire<S>(n, off, markers); }); };
    if (markers)
      sparse_systems::with(s, one);
    else
      fire_systems::with(s, one);
  } else if (w == "expire") {
    expire_systems::with(s, [&]<typename S>() { r.ns_per_op = median_of(repeats, [&] { return expire<S>(n); }); });
  } else if (w == "churn") {
    const auto initial = uniform_offsets(n, hour);
    std::vector<std::int64_t> init(initial.size());
    for (std::size_t i = 0; i < n; ++i) init[i] = hour + initial[i];
    const op_input in = random_ops(n, ops, hour, 2 * hour);
    churn_systems::with(s,
                        [&]<typename S>() { r.ns_per_op = median_of(repeats, [&] { return churn<S>(n, init, in); }); });
  } else if (w == "touch") {
    const op_input in = random_ops(n, ops, 0, 0);
    touch_systems::with(s, [&]<typename S>() { r.ns_per_op = median_of(repeats, [&] { return touch<S>(n, in); }); });
  } else if (w == "memory") {
    r.repeats = 1;  // RSS is only meaningful on a fresh process
    memory_systems::with(s, [&]<typename S>() { r.bytes_per_timer = memory<S>(n); });
  } else if (w == "lateness") {
    std::vector<double> p50, p99, mx;
    for (int i = 0; i < repeats; ++i) {
      lateness_result l{};
      lateness_systems::with(s, [&]<typename S>() { l = lateness<S>(n); });
      p50.push_back(l.p50_us);
      p99.push_back(l.p99_us);
      mx.push_back(l.max_us);
    }
    r.p50_us = median(p50);
    r.p99_us = median(p99);
    r.max_us = median(mx);
  } else if (w == "threads") {
    threads_systems::with(s,
                          [&]<typename S>() { r.ops_per_s = median_of(repeats, [&] { return threads<S>(n, ops); }); });
  } else if (w == "periodic") {
    periodic_systems::with(s, [&]<typename S>() {
      r.ns_per_op = median_of(repeats, [&] { return periodic<S>(n, ops, r.allocs_per_op); });
    });
  } else if (w == "tasks") {
    tasks_systems::with(
        s, [&]<typename S>() { r.ns_per_op = median_of(repeats, [&] { return tasks<S>(n, ops, r.allocs_per_op); }); });
  } else if (w == "timeouts") {
    const op_input in = random_ops(n, ops, 0, 0);  // which slot's request completes; the limit is always 30 s
    timeouts_systems::with(s, [&]<typename S>() {
      r.ns_per_op = median_of(repeats, [&] { return timeouts<S>(n, in.idx, r.allocs_per_op); });
    });
  } else if (w == "check") {
    check_systems::with(s, []<typename S>() { check_idle<S>(); });
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
      } else if (w == "periodic" || w == "tasks") {
        std::printf("%s --n=1000 --repeats=%d%s\n", head.c_str(), quick ? 1 : 3, ops.c_str());
      } else if (w == "threads") {  // N: the threads running the one context
        for (int t : {1, 2, 4})
          std::printf("%s --n=%d --repeats=%d --ops=%d\n", head.c_str(), t, quick ? 1 : 3, quick ? 200000 : 1000000);
      } else {
        for (const auto& [n, rep] : sizes)
          std::printf("%s --n=%zu --repeats=%d%s\n", head.c_str(), n, w == "memory" ? 1 : rep, ops.c_str());
      }
    }
  }
}

int usage() {
  std::fprintf(stderr, "usage: timer_bench --workload=W --system=S --n=N [--repeats=R] [--ops=OPS]\n"
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
  check_malloc_counting();
  const row r = run(w, s, n, repeats, ops);
  if (w == "check") {
    std::fprintf(stderr, "timer_bench: %s: ok\n", current_config.c_str());
    return 0;
  }
  std::printf("%s\n", to_csv(r).c_str());
  return 0;
}
