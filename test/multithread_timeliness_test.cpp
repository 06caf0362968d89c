// On an io_context run by several threads, a slow handler holds back only its own thread (Asio's property):
// every other timer, sleep, task and aborted completion of the service runs on another thread meanwhile.
// Each case has a slow handler that blocks (bounded) until the other handler has run, and checks that it did,
// for tock and, in the same case, for asio::steady_timer as the control: so a pass does not depend on how long
// anything takes, and a failure costs the bound (2 s). From shared/repro r9 and r10.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using tock::error_code;

constexpr auto bound = 2s;  // how long a slow handler waits for the other one at most

// Set once by the other handler; the slow one waits for it (bounded) and records whether it came.
class rendezvous {
 public:
  void signal() {
    if (!signalled_.exchange(true)) promise_.set_value();
  }
  // In the slow handler: true if the other handler ran before `bound` passed.
  void wait() { seen_ = future_.wait_for(bound) == std::future_status::ready; }
  bool seen() const { return seen_.load(); }

 private:
  std::atomic<bool> signalled_{false};
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  std::atomic<bool> seen_{false};
};

// Runs `ctx` on two threads until it runs out of work.
void run_on_two_threads(asio::io_context& ctx) {
  std::thread other([&] { ctx.run(); });
  ctx.run();
  other.join();
}

enum class via { in_place, strands };

// A's handler (due first) waits for B's (due 40 ms later). In place on the context's executor, or each on
// its own strand (Asio's recommended pattern).
template <typename Timer>
bool timer_waits_for_timer(via how) {
  asio::io_context ctx;
  rendezvous r;
  Timer a(ctx, 20ms), b(ctx, 60ms);
  auto slow = [&](error_code) { r.wait(); };
  auto other = [&](error_code) { r.signal(); };
  if (how == via::strands) {
    a.async_wait(asio::bind_executor(asio::make_strand(ctx), slow));
    b.async_wait(asio::bind_executor(asio::make_strand(ctx), other));
  } else {
    a.async_wait(slow);
    b.async_wait(other);
  }
  run_on_two_threads(ctx);
  return r.seen();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(multithread_timeliness_test)

BOOST_AUTO_TEST_CASE(slow_timer_handler_does_not_hold_back_another_timer) {
  BOOST_TEST(timer_waits_for_timer<asio::steady_timer>(via::in_place));  // the control
  BOOST_TEST(timer_waits_for_timer<tock::timer>(via::in_place));
}

BOOST_AUTO_TEST_CASE(slow_handler_on_a_strand_does_not_hold_back_another_strand) {
  BOOST_TEST(timer_waits_for_timer<asio::steady_timer>(via::strands));
  BOOST_TEST(timer_waits_for_timer<tock::timer>(via::strands));
}

BOOST_AUTO_TEST_CASE(slow_sleep_handler_does_not_hold_back_another_sleep) {
  {
    asio::io_context ctx;
    rendezvous r;
    asio::steady_timer a(ctx, 20ms), b(ctx, 60ms);
    a.async_wait([&](error_code) { r.wait(); });
    b.async_wait([&](error_code) { r.signal(); });
    run_on_two_threads(ctx);
    BOOST_TEST(r.seen());
  }
  asio::io_context ctx;
  rendezvous r;
  tock::async_sleep_for(ctx, 20ms, [&](error_code) { r.wait(); });
  tock::async_sleep_for(ctx, 60ms, [&](error_code) { r.signal(); });
  run_on_two_threads(ctx);
  BOOST_TEST(r.seen());
}

// Due at the same wake-up: the second is handed to the idle thread, not run after the first.
BOOST_AUTO_TEST_CASE(timers_due_together_run_side_by_side) {
  for (int tock_side = 0; tock_side < 2; ++tock_side) {
    asio::io_context ctx;
    rendezvous r;
    const auto at = std::chrono::steady_clock::now() + 30ms;
    asio::steady_timer a1(ctx, at), b1(ctx, at);
    tock::timer a2(ctx, at), b2(ctx, at);
    if (tock_side) {
      a2.async_wait([&](error_code) { r.wait(); });
      b2.async_wait([&](error_code) { r.signal(); });
    } else {
      a1.async_wait([&](error_code) { r.wait(); });
      b1.async_wait([&](error_code) { r.signal(); });
    }
    run_on_two_threads(ctx);
    BOOST_TEST(r.seen(), (tock_side ? "tock" : "asio"));
  }
}

// A periodic task on a strand whose run is slow, and an unrelated timer due meanwhile.
BOOST_AUTO_TEST_CASE(slow_task_does_not_hold_back_a_timer) {
  for (int tock_side = 0; tock_side < 2; ++tock_side) {
    asio::io_context ctx;
    auto strand = asio::make_strand(ctx);
    rendezvous r;
    tock::task_handle h;
    asio::steady_timer a1(ctx, 20ms), b1(ctx, 60ms);
    tock::timer b2(ctx, 60ms);
    if (tock_side) {
      h = tock::schedule_at_fixed_rate(strand, 20ms, 10s, [&] {
        r.wait();
        h.cancel();
      });
      b2.async_wait([&](error_code) { r.signal(); });
    } else {
      a1.async_wait(asio::bind_executor(strand, [&](error_code) { r.wait(); }));
      b1.async_wait([&](error_code) { r.signal(); });
    }
    run_on_two_threads(ctx);
    BOOST_TEST(r.seen(), (tock_side ? "tock" : "asio"));
  }
}

// While a slow handler runs, another thread starts a short wait: it is armed at once, not when the slow
// handler returns.
template <typename Timer>
bool wait_started_during_slow_handler() {
  asio::io_context ctx;
  auto work = asio::make_work_guard(ctx);
  rendezvous r;
  std::promise<void> running;
  Timer slow(ctx, 10ms), fresh(ctx);
  slow.async_wait([&](error_code) {
    running.set_value();
    r.wait();
  });
  std::thread r1([&] { ctx.run(); }), r2([&] { ctx.run(); });
  const bool started = running.get_future().wait_for(bound) == std::future_status::ready;
  fresh.expires_after(10ms);
  fresh.async_wait([&](error_code) { r.signal(); });
  work.reset();
  r1.join();
  r2.join();
  return started && r.seen();
}

BOOST_AUTO_TEST_CASE(wait_started_during_a_slow_handler_is_not_held_back) {
  BOOST_TEST(wait_started_during_slow_handler<asio::steady_timer>());
  BOOST_TEST(wait_started_during_slow_handler<tock::timer>());
}

// Aborted completions: two cancelled waits whose handlers run side by side (Asio posts each).
template <typename Timer>
bool aborted_side_by_side() {
  asio::io_context ctx;
  rendezvous r;
  Timer a(ctx, 10s), b(ctx, 10s);
  error_code ea, eb;
  a.async_wait([&](error_code ec) {
    ea = ec;
    r.wait();
  });
  b.async_wait([&](error_code ec) {
    eb = ec;
    r.signal();
  });
  a.cancel();
  b.cancel();
  run_on_two_threads(ctx);
  return r.seen() && ea == asio::error::operation_aborted && eb == asio::error::operation_aborted;
}

BOOST_AUTO_TEST_CASE(aborted_completions_run_side_by_side) {
  BOOST_TEST(aborted_side_by_side<asio::steady_timer>());
  BOOST_TEST(aborted_side_by_side<tock::timer>());
}

// A refused wait (capacity) completes through the same queue as aborted ones.
BOOST_AUTO_TEST_CASE(refused_completion_runs_beside_a_slow_aborted_one) {
  asio::io_context ctx;
  tock::timer_service::of(ctx.get_executor()).set_capacity(1);
  rendezvous r;
  tock::timer a(ctx, 10s), b(ctx, 10s);
  error_code ea, eb;
  a.async_wait([&](error_code ec) {
    ea = ec;
    r.signal();
  });
  b.async_wait([&](error_code ec) {  // refused (a holds the only slot): queued first, it runs first
    eb = ec;
    r.wait();
  });
  a.cancel();
  run_on_two_threads(ctx);
  BOOST_TEST(r.seen());
  BOOST_TEST(ea == asio::error::operation_aborted);
  BOOST_TEST((eb == tock::error::capacity_exceeded));
}

// Which contexts get the one-thread batch: those whose hint makes Asio's scheduler assume one thread.
BOOST_AUTO_TEST_CASE(one_thread_is_read_from_the_concurrency_hint) {
  asio::io_context by_default, one(1), two(2);
  BOOST_TEST(!tock::detail::runs_on_one_thread(by_default));
  BOOST_TEST(tock::detail::runs_on_one_thread(one));
  BOOST_TEST(!tock::detail::runs_on_one_thread(two));
}

BOOST_AUTO_TEST_SUITE_END()
