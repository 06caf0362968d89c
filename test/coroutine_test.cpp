// tock inside C++20 coroutines (asio::awaitable): co_await tock::sleep_for / sleep_until, a timer's
// async_wait with use_awaitable, the awaitable operators, and cancellation of the coroutine.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <string>

namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using tock_test::error_code;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;

// Long enough never to pass during a test: a sleep this long ends only if it is cancelled.
constexpr auto never = 1h;

// A co_spawn completion that stores what the coroutine threw ("none" if nothing), for the test to check.
auto store_exception(std::string& what) {
  return [&what](std::exception_ptr e) {
    what = "none";
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
      what = "unknown";
    }
  };
}

tock::timer_service& service_of(asio::io_context& ctx) { return tock::timer_service::of(ctx.get_executor()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(coroutine_test)

BOOST_AUTO_TEST_CASE(sleep_for_resumes_the_coroutine_not_before_the_duration_has_passed) {
  asio::io_context ctx;
  std::string thrown;
  bool resumed = false;
  const auto deadline = steady_clock::now() + 10ms;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await tock::sleep_for(10ms);
        resumed = true;
        BOOST_TEST((steady_clock::now() >= deadline));
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(resumed);
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

BOOST_AUTO_TEST_CASE(sleep_until_resumes_the_coroutine_not_before_the_time_point) {
  asio::io_context ctx;
  std::string thrown;
  bool resumed = false;
  const auto deadline = steady_clock::now() + 10ms;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await tock::sleep_until(deadline);
        resumed = true;
        BOOST_TEST((steady_clock::now() >= deadline));
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(resumed);
}

BOOST_AUTO_TEST_CASE(sleeps_in_sequence_add_up) {
  asio::io_context ctx;
  std::string thrown;
  int resumed = 0;
  const auto deadline = steady_clock::now() + 15ms;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 3; ++i) {
          co_await tock::sleep_for(5ms);
          ++resumed;
        }
        BOOST_TEST((steady_clock::now() >= deadline));
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(resumed == 3);
}

BOOST_AUTO_TEST_CASE(sleep_for_in_a_coroutine_on_a_strand_resumes_in_the_strand) {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  std::string thrown;
  bool in_strand = false;

  asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<void> {
        co_await tock::sleep_for(5ms);
        in_strand = strand.running_in_this_thread();
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE(timer_async_wait_with_use_awaitable_resumes_not_before_the_expiry) {
  asio::io_context ctx;
  std::string thrown;
  bool resumed = false;
  tock::timer timer(ctx, 10ms);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await timer.async_wait(asio::use_awaitable);
        resumed = true;
        BOOST_TEST((steady_clock::now() >= timer.expiry()));
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(resumed);
}

BOOST_AUTO_TEST_CASE(timer_async_wait_with_use_awaitable_throws_operation_aborted_on_cancel) {
  asio::io_context ctx;
  std::string thrown;
  error_code code;
  tock::timer timer(ctx, never);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        asio::post(ctx, [&] { timer.cancel(); });  // runs once the coroutine is suspended in the wait
        try {
          co_await timer.async_wait(asio::use_awaitable);
        } catch (const sys::system_error& e) {
          code = e.code();
        }
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(code == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(or_of_a_short_and_a_long_sleep_cancels_the_long_one_and_disarms_the_service) {
  asio::io_context ctx;
  std::string thrown;
  std::size_t winner = 99;
  std::size_t pending_on_resume = 99;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto result = co_await (tock::sleep_for(5ms) || tock::sleep_for(never));
        winner = result.index();
        pending_on_resume = service_of(ctx).pending();
      },
      store_exception(thrown));

  // With nothing left to wait for, run() must return now, not when the long sleep would have ended.
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(winner == 0u);
  BOOST_TEST(pending_on_resume == 0u);
  BOOST_TEST(service_of(ctx).pending() == 0u);
  BOOST_TEST(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(or_of_a_sleep_and_a_timer_wait_cancels_the_timer_wait) {
  asio::io_context ctx;
  std::string thrown;
  std::size_t winner = 99;
  tock::timer timer(ctx, never);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto result = co_await (tock::sleep_for(5ms) || timer.async_wait(asio::use_awaitable));
        winner = result.index();
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(winner == 0u);
  BOOST_TEST(timer.cancel() == 0u);  // the wait was aborted by the operator, not left pending
  BOOST_TEST(service_of(ctx).pending() == 0u);
  BOOST_TEST(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(and_of_two_sleeps_completes_after_both) {
  asio::io_context ctx;
  std::string thrown;
  bool resumed = false;
  const auto deadline = steady_clock::now() + 20ms;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await (tock::sleep_for(20ms) && tock::sleep_for(5ms));
        resumed = true;
        BOOST_TEST((steady_clock::now() >= deadline));
        BOOST_TEST(service_of(ctx).pending() == 0u);
      },
      store_exception(thrown));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(resumed);
}

BOOST_AUTO_TEST_CASE(a_cancelled_coroutine_gets_operation_aborted_from_sleep_for) {
  asio::io_context ctx;
  asio::cancellation_signal signal;
  std::string thrown;
  error_code code;
  bool slept_through = false;

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        try {
          co_await tock::sleep_for(never);
          slept_through = true;
        } catch (const sys::system_error& e) {
          code = e.code();
        }
      },
      asio::bind_cancellation_slot(signal.slot(), store_exception(thrown)));
  tock::async_sleep_for(ctx, 5ms, [&](const error_code&) { signal.emit(asio::cancellation_type::terminal); });

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(thrown == "none");
  BOOST_TEST(!slept_through);
  BOOST_TEST(code == asio::error::operation_aborted);
  BOOST_TEST(service_of(ctx).pending() == 0u);
  BOOST_TEST(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_SUITE_END()
