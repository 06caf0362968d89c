// bench/bench_util.hpp: clocks, RSS, statistics, result rows and argument parsing for timer_bench.
#ifndef TOCK_BENCH_UTIL_HPP
#define TOCK_BENCH_UTIL_HPP

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

inline constexpr double none = std::numeric_limits<double>::quiet_NaN();

// CPU time of the whole process (all threads), in nanoseconds.
inline double cpu_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Resident set size from /proc/self/statm, in bytes.
inline long rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A syscall nobody else makes, so that `strace` can see where the measured phase starts and ends.
inline void strace_marker() { syscall(SYS_getppid); }

inline double median(std::vector<double> v) {
  if (v.empty()) return none;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Nearest-rank percentile of a sorted sample, p in (0, 1].
template <typename T>
T percentile_sorted(const std::vector<T>& sorted, double p) {
  std::size_t rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  if (rank == 0) rank = 1;
  return sorted[rank - 1];
}

// Set by main() for error messages.
inline std::string current_config = "?";

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "timer_bench: %s: FAILED: %s\n", current_config.c_str(), what.c_str());
  std::exit(2);
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// "expected X, got Y" for the handler counts.
// malloc calls on this thread so far, at every entry point (malloc, calloc, realloc, reallocarray,
// aligned_alloc, posix_memalign, memalign, valloc, pvalloc; operator new through them; free not counted):
// counted by timer_bench.cpp's replacements of them (a thread-local increment: no atomic instruction in the
// other workloads' measured phases).
inline thread_local std::size_t allocation_count = 0;
inline std::size_t allocations() { return allocation_count; }

inline void check_count(const char* what, std::uint64_t got, std::uint64_t expected) {
  if (got != expected) {
    std::ostringstream s;
    s << what << ": expected " << expected << " completions, got " << got;
    fail(s.str());
  }
}

// One CSV row: workload,system,n,ns_per_op,bytes_per_timer,p50_us,p99_us,max_us,wakeups,ops_per_s,repeats,
// allocs_per_op
struct row {
  std::string workload, system;
  std::size_t n = 0;
  double ns_per_op = none, bytes_per_timer = none, p50_us = none, p99_us = none, max_us = none, wakeups = none,
         ops_per_s = none, allocs_per_op = none;
  int repeats = 1;
};

inline const char* csv_header =
    "workload,system,n,ns_per_op,bytes_per_timer,p50_us,p99_us,max_us,wakeups,ops_per_s,repeats,allocs_per_op";

inline std::string fmt_field(double v, int decimals) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

inline std::string to_csv(const row& r) {
  std::ostringstream s;
  s << r.workload << ',' << r.system << ',' << r.n << ',' << fmt_field(r.ns_per_op, 1) << ','
    << fmt_field(r.bytes_per_timer, 1) << ',' << fmt_field(r.p50_us, 1) << ',' << fmt_field(r.p99_us, 1) << ','
    << fmt_field(r.max_us, 1) << ',' << fmt_field(r.wakeups, 0) << ',' << fmt_field(r.ops_per_s, 0) << ',' << r.repeats
    << ',' << fmt_field(r.allocs_per_op, 6);  // 6 decimals: one call in 1M operations still reads as non-zero
  return s.str();
}

inline double parse_field(const std::string& s) {
  if (s.empty()) return none;
  return std::strtod(s.c_str(), nullptr);
}

inline bool from_csv(const std::string& line, row& r) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      f.push_back(cur);
      cur.clear();
    } else if (c != '\r' && c != '\n') {
      cur += c;
    }
  }
  f.push_back(cur);
  if (f.size() != 12 || f[0] == "workload") return false;
  r.workload = f[0];
  r.system = f[1];
  r.n = static_cast<std::size_t>(std::strtoull(f[2].c_str(), nullptr, 10));
  r.ns_per_op = parse_field(f[3]);
  r.bytes_per_timer = parse_field(f[4]);
  r.p50_us = parse_field(f[5]);
  r.p99_us = parse_field(f[6]);
  r.max_us = parse_field(f[7]);
  r.wakeups = parse_field(f[8]);
  r.ops_per_s = parse_field(f[9]);
  r.repeats = std::atoi(f[10].c_str());
  r.allocs_per_op = parse_field(f[11]);
  return true;
}

// --key=value arguments; a bare --flag has the value "1".
struct args {
  std::vector<std::pair<std::string, std::string>> kv;

  args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        std::fprintf(stderr, "timer_bench: unexpected argument '%s'\n", argv[i]);
        std::exit(64);
      }
      a = a.substr(2);
      const auto eq = a.find('=');
      if (eq == std::string::npos)
        kv.emplace_back(a, "1");
      else
        kv.emplace_back(a.substr(0, eq), a.substr(eq + 1));
    }
  }

  // The last value given for `key` (a later --key=value overrides an earlier one, as scripts/bench.sh's
  // traced sparse run relies on: it appends --repeats=1).
  std::string get(const std::string& key, const std::string& fallback = "") const {
    for (auto it = kv.rbegin(); it != kv.rend(); ++it)
      if (it->first == key) return it->second;
    return fallback;
  }

  bool has(const std::string& key) const {
    for (const auto& [k, v] : kv)
      if (k == key) return true;
    return false;
  }
};

// "10k", "1M", "100000".
inline std::size_t parse_count(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end && (*end == 'k' || *end == 'K')) v *= 1e3;
  if (end && (*end == 'm' || *end == 'M')) v *= 1e6;
  return static_cast<std::size_t>(v);
}

}  // namespace bench

#endif
