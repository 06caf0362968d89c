// bench/bench_tasks.hpp: the tasks workload: n periodic tasks run on the context's executor, every run
// already due (first run in the past, period 1 µs, runs caught up back to back), until `ops` runs in all.
// Measured: CPU ns per run (the wait, the fire, the run, the next wait; tock runs it in place, as it is
// on the host's own executor, Asio's hand-written loop posts it) and heap allocations per run (malloc calls,
// all entry points, counted by timer_bench.cpp); scheduling the tasks is outside the measured phase.
// Asio: a steady_timer per task, re-armed by hand on the grid after the run it posts;
// tock: tock::schedule_at_fixed_rate with missed_ticks::burst.
#ifndef TOCK_BENCH_TASKS_HPP
#define TOCK_BENCH_TASKS_HPP

#include "bench_systems.hpp"
#include "bench_util.hpp"
#include "test_asio.hpp"

#include <tock/schedule.hpp>

#include <cstddef>
#include <type_traits>
#include <vector>

namespace bench {

struct asio_tasks {
  static constexpr const char* name = "asio";
  static void warm_up(asio::io_context& ctx) { warm_up_timers<asio::steady_timer>(ctx); }

  // Runs body(i) for task i until it returns false.
  template <typename Body>
  static void start(asio::io_context& ctx, std::size_t n, clock::time_point first, clock::duration period, Body& body,
                    std::vector<asio::steady_timer>& timers) {
    timers.reserve(n);
    for (std::size_t i = 0; i < n; ++i) timers.emplace_back(ctx, first + nanoseconds(i));
    for (std::size_t i = 0; i < n; ++i) wait(ctx, timers[i], i, period, body);
  }

  template <typename Body>
  static void wait(asio::io_context& ctx, asio::steady_timer& t, std::size_t i, clock::duration period, Body& body) {
    t.async_wait([&ctx, &t, i, period, &body](const error_code& ec) {
      if (ec) return;
      asio::post(ctx, [&ctx, &t, i, period, &body] {
        if (!body(i)) return;
        t.expires_at(t.expiry() + period);
        wait(ctx, t, i, period, body);
      });
    });
  }
};

struct tock_tasks {
  static constexpr const char* name = "tock_tasks";
  static void warm_up(asio::io_context& ctx) { warm_up_timers<tock::timer>(ctx); }

  template <typename Body>
  static void start(asio::io_context& ctx, std::size_t n, clock::time_point first, clock::duration period, Body& body,
                    std::vector<tock::task_handle>& handles) {
    handles.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      handles.push_back(tock::schedule_at_fixed_rate(
          ctx.get_executor(), first + nanoseconds(i), period,
          [&body, &handles, i] {
            if (!body(i)) handles[i].cancel();
          },
          tock::missed_ticks::burst));
  }
};

template <typename S>
double tasks(std::size_t n, std::size_t ops, double& allocs_per_run) {
  asio::io_context ctx;
  S::warm_up(ctx);
  std::size_t runs = 0;
  auto body = [&](std::size_t) { return ++runs < ops; };  // the run that reaches `ops` stops its task
  std::vector<std::conditional_t<std::is_same_v<S, asio_tasks>, asio::steady_timer, tock::task_handle>> owned;
  S::start(ctx, n, clock::now() - std::chrono::seconds(1), std::chrono::microseconds(1), body, owned);
  const std::size_t allocs_before = allocations();
  const double cpu = measured_phase([&] {
    while (runs < ops) ctx.run_one();  // the tasks still scheduled then are destroyed with the context
  });
  allocs_per_run = static_cast<double>(allocations() - allocs_before) / static_cast<double>(runs);
  check_count("runs", runs, ops);
  return cpu / static_cast<double>(runs);
}

}  // namespace bench

#endif
