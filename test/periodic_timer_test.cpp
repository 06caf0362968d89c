// tock::basic_periodic_timer in virtual time (tock::manual_clock): each missed-tick policy through stalls
// with exact missed counts, no drift over a million ticks, set_period, cancel, destruction, moves, one wait
// at a time, tokens and cancellation slots. Every case measures from manual_clock::now() (the virtual time
// is shared by the whole process).
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/manual_clock.hpp>
#include <tock/periodic_timer.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <stdexcept>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock::error_code;
using tock::manual_clock;
using tock::missed_ticks;
using periodic = tock::basic_periodic_timer<manual_clock>;

const error_code aborted = asio::error::operation_aborted;

// One tick as a handler saw it.
struct tick {
  error_code ec;
  std::uint64_t missed = 0;
  manual_clock::time_point at{};
};

auto record_tick(std::vector<tick>& ticks) {
  return [&ticks](const error_code& ec, std::uint64_t missed) { ticks.push_back({ec, missed, manual_clock::now()}); };
}

// Waits once and runs what is ready: the tick, if one is due.
void wait_and_settle(periodic& t, asio::io_context& ctx, std::vector<tick>& ticks) {
  t.async_wait(record_tick(ticks));
  tock_test::settle(ctx);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(periodic_timer_test)

BOOST_AUTO_TEST_CASE(ticks_every_period_and_never_before) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  for (int n = 1; n <= 3; ++n) {
    t.async_wait(record_tick(ticks));
    tock_test::advance_by(ctx, 9s + 999ms);
    BOOST_REQUIRE_EQUAL(ticks.size(), std::size_t(n - 1));
    tock_test::advance_by(ctx, 1ms);
    BOOST_REQUIRE_EQUAL(ticks.size(), std::size_t(n));
    BOOST_CHECK(!ticks.back().ec);
    BOOST_CHECK_EQUAL(ticks.back().missed, 0u);
    BOOST_CHECK(ticks.back().at == start + n * 10s);
  }
  BOOST_CHECK_EQUAL(t.ticks(), 3u);
  BOOST_CHECK(t.next_tick() == start + 40s);
}

BOOST_AUTO_TEST_CASE(skip_drops_missed_ticks_and_stays_on_the_grid) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);  // skip is the default
  BOOST_CHECK(t.policy() == missed_ticks::skip);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 10s);
  manual_clock::advance(25s);  // a stall: now start + 35s; the tick at 20s is late, 30s passed as well
  wait_and_settle(t, ctx, ticks);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[1].missed, 1u);  // (35 - 20) / 10: the tick at 30s is dropped
  BOOST_CHECK(t.next_tick() == start + 40s);
  wait_and_settle(t, ctx, ticks);
  BOOST_CHECK_EQUAL(ticks.size(), 2u);  // nothing due until 40s
  tock_test::advance_by(ctx, 5s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 3u);
  BOOST_CHECK_EQUAL(ticks[2].missed, 0u);
  BOOST_CHECK(ticks[2].at == start + 40s);
}

BOOST_AUTO_TEST_CASE(burst_delivers_missed_ticks_back_to_back_then_stays_on_the_grid) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s, missed_ticks::burst);
  std::vector<tick> ticks;
  manual_clock::advance(42s);  // ticks at 10, 20, 30, 40 are all due
  for (int i = 0; i < 4; ++i) wait_and_settle(t, ctx, ticks);
  BOOST_REQUIRE_EQUAL(ticks.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_CHECK(!ticks[i].ec);
    BOOST_CHECK_EQUAL(ticks[i].missed, 3 - i);  // the ticks still due behind this one
  }
  BOOST_CHECK(t.next_tick() == start + 50s);
  wait_and_settle(t, ctx, ticks);
  BOOST_CHECK_EQUAL(ticks.size(), 4u);
  tock_test::advance_by(ctx, 8s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 5u);
  BOOST_CHECK(ticks[4].at == start + 50s);
}

BOOST_AUTO_TEST_CASE(delay_counts_the_period_from_the_next_wait) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s, missed_ticks::delay);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  manual_clock::advance(5s);  // the handler's work took 5 s: the next tick is 10 s after the next wait
  BOOST_CHECK(t.next_tick() == start + 25s);
  t.async_wait(record_tick(ticks));
  BOOST_CHECK(t.next_tick() == start + 25s);
  tock_test::advance_by(ctx, 32s);  // a stall: the tick at 25s runs at 47s
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[1].missed, 2u);  // (47 - 25) / 10
  wait_and_settle(t, ctx, ticks);
  BOOST_CHECK(t.next_tick() == start + 57s);
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 3u);
  BOOST_CHECK(ticks[2].at == start + 57s);
}

BOOST_AUTO_TEST_CASE(a_million_ticks_stay_on_the_grid) {
  asio::io_context ctx;
  const auto first = manual_clock::now() + 1s;
  const auto period = 1ms + 7ns;  // not a round number: adding it up in any inexact way would show
  periodic t(ctx, first, period);
  std::uint64_t ticks = 0, missed = 0;
  constexpr std::uint64_t n = 1'000'000;
  manual_clock::advance_to(first);
  for (std::uint64_t i = 0; i < n; ++i) {
    t.async_wait([&](const error_code& ec, std::uint64_t m) {
      ticks += !ec;
      missed += m;
    });
    ctx.restart();
    ctx.poll();
    manual_clock::advance(period);
  }
  BOOST_CHECK_EQUAL(ticks, n);
  BOOST_CHECK_EQUAL(missed, 0u);
  BOOST_CHECK(t.next_tick() == first + static_cast<std::int64_t>(n) * period);
}

BOOST_AUTO_TEST_CASE(set_period_applies_from_the_next_tick) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  t.set_period(3s);  // the pending wait keeps its tick at 10s
  BOOST_CHECK(t.period() == 3s);
  BOOST_CHECK(t.next_tick() == start + 10s);
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(t.next_tick() == start + 13s);
  BOOST_CHECK_THROW(t.set_period(0s), std::invalid_argument);
  BOOST_CHECK_THROW(t.set_period(-1s), std::invalid_argument);
  BOOST_CHECK(t.period() == 3s);
  BOOST_CHECK(t.next_tick() == start + 13s);
}

BOOST_AUTO_TEST_CASE(a_non_positive_period_is_refused) {
  asio::io_context ctx;
  BOOST_CHECK_THROW(periodic(ctx, 0s), std::invalid_argument);
  BOOST_CHECK_THROW(periodic(ctx, manual_clock::now(), -5ms), std::invalid_argument);
}

// Periods of any duration type convert as basic_timer's expires_after converts them: saturating, not
// overflowing on the way to manual_clock::duration (nanoseconds), where hours::max() would wrap.
BOOST_AUTO_TEST_CASE(a_huge_period_saturates_and_its_ticks_never_come) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, std::chrono::hours::max());
  BOOST_CHECK(t.period() == manual_clock::duration::max());
  BOOST_CHECK(t.next_tick() == manual_clock::time_point::max());
  tock::basic_timer<manual_clock> control(ctx);  // where basic_timer puts the same duration
  control.expires_after(std::chrono::hours::max());
  BOOST_CHECK(control.expiry() == t.next_tick());
  periodic first_given(ctx, start + 1s, std::chrono::hours::max());
  BOOST_CHECK(first_given.period() == manual_clock::duration::max());
  std::vector<tick> ticks, first_ticks;
  t.async_wait(record_tick(ticks));
  first_given.async_wait(record_tick(first_ticks));
  tock_test::advance_by(ctx, 1s);
  BOOST_REQUIRE_EQUAL(first_ticks.size(), 1u);
  BOOST_CHECK(first_ticks.back().at == start + 1s);
  BOOST_CHECK(first_given.next_tick() == manual_clock::time_point::max());  // start + 1s + max: out of range
  tock_test::advance_by(ctx, 100h);
  BOOST_CHECK(ticks.empty());
  BOOST_CHECK_EQUAL(t.cancel(), 1u);
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(ticks.back().ec == aborted);
}

BOOST_AUTO_TEST_CASE(set_period_saturates_a_huge_period) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  t.set_period(std::chrono::hours::max());  // the pending wait keeps its tick at 10s
  BOOST_CHECK(t.period() == manual_clock::duration::max());
  BOOST_CHECK(t.next_tick() == start + 10s);
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(!ticks.back().ec);
  BOOST_CHECK(t.next_tick() == manual_clock::time_point::max());
  t.set_period(std::chrono::duration<double>(2.5));  // and back, from a floating-point duration
  BOOST_CHECK(t.period() == 2500ms);
  BOOST_CHECK(t.next_tick() == manual_clock::time_point::max());  // the next tick keeps its time
}

BOOST_AUTO_TEST_CASE(a_non_positive_period_of_any_type_is_refused_with_nothing_changed) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  BOOST_CHECK_THROW(periodic(ctx, std::chrono::hours::min()), std::invalid_argument);
  BOOST_CHECK_THROW(periodic(ctx, start, std::chrono::minutes(-1)), std::invalid_argument);
  BOOST_CHECK_THROW(periodic(ctx, std::chrono::duration<double>(0.0)), std::invalid_argument);
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  BOOST_CHECK_THROW(t.set_period(std::chrono::hours::min()), std::invalid_argument);
  BOOST_CHECK_THROW(t.set_period(std::chrono::seconds::zero()), std::invalid_argument);
  BOOST_CHECK_THROW(t.set_period(std::chrono::duration<double, std::milli>(-0.5)), std::invalid_argument);
  BOOST_CHECK(t.period() == 10s);
  BOOST_CHECK(t.next_tick() == start + 10s);
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(!ticks.back().ec);
  BOOST_CHECK(t.next_tick() == start + 20s);
}

// On a clock coarser than the duration (picoseconds on manual_clock's nanoseconds), the fraction of a tick is
// dropped as basic_timer drops it: 1.5 ns is 1 ns; 0.999 ns is 0, which is not a period.
BOOST_AUTO_TEST_CASE(a_sub_tick_period_converts_as_basic_timer_converts_it) {
  using picoseconds = std::chrono::duration<std::int64_t, std::pico>;
  asio::io_context ctx;
  tock::basic_timer<manual_clock> control(ctx);
  const auto start = manual_clock::now();
  control.expires_after(picoseconds(1500));
  BOOST_CHECK(control.expiry() == start + 1ns);
  control.expires_after(picoseconds(999));
  BOOST_CHECK(control.expiry() == start);
  periodic t(ctx, picoseconds(1500));
  BOOST_CHECK(t.period() == 1ns);
  BOOST_CHECK(t.next_tick() == start + 1ns);
  BOOST_CHECK_THROW(periodic(ctx, picoseconds(999)), std::invalid_argument);
  BOOST_CHECK_THROW(t.set_period(picoseconds(999)), std::invalid_argument);
  BOOST_CHECK(t.period() == 1ns);
  t.set_period(picoseconds(2999));
  BOOST_CHECK(t.period() == 2ns);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 1ns);  // the next tick kept its time
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(ticks[0].at == start + 1ns);
  t.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 1ns);
  BOOST_CHECK_EQUAL(ticks.size(), 1u);
  tock_test::advance_by(ctx, 1ns);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK(ticks[1].at == start + 3ns);
  BOOST_CHECK_EQUAL(ticks[1].missed, 0u);
}

BOOST_AUTO_TEST_CASE(cancel_aborts_the_wait_and_keeps_its_tick) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  BOOST_CHECK_EQUAL(t.cancel(), 1u);
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK_EQUAL(ticks[0].ec, aborted);
  BOOST_CHECK_EQUAL(ticks[0].missed, 0u);
  BOOST_CHECK_EQUAL(t.cancel(), 0u);
  BOOST_CHECK_EQUAL(t.ticks(), 0u);
  BOOST_CHECK(t.next_tick() == start + 10s);
  t.async_wait(record_tick(ticks));  // waits for the same tick
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK(!ticks[1].ec);
  BOOST_CHECK(ticks[1].at == start + 10s);
}

BOOST_AUTO_TEST_CASE(a_wait_may_start_right_after_cancel) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  BOOST_CHECK_EQUAL(t.cancel(), 1u);
  t.async_wait(record_tick(ticks));  // before the aborted handler has run
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[0].ec, aborted);
  BOOST_CHECK(!ticks[1].ec);
  BOOST_CHECK(ticks[1].at == start + 10s);
  t.async_wait(record_tick(ticks));  // the aborted handler did not leave the timer busy
  BOOST_CHECK_EQUAL(t.cancel(), 1u);
  tock_test::settle(ctx);
}

BOOST_AUTO_TEST_CASE(a_deferred_wait_launched_after_the_timer_is_gone_throws) {
  asio::io_context ctx;
  std::optional<periodic> t(std::in_place, ctx, 10s);
  auto op = t->async_wait(asio::deferred);
  t.reset();
  BOOST_CHECK_THROW(std::move(op)([](const error_code&, std::uint64_t) {}), std::logic_error);
  tock_test::settle(ctx);
}

BOOST_AUTO_TEST_CASE(a_cancellation_slot_aborts_the_wait) {
  asio::io_context ctx;
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  asio::cancellation_signal sig;
  t.async_wait(asio::bind_cancellation_slot(sig.slot(), record_tick(ticks)));
  sig.emit(asio::cancellation_type::terminal);
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK_EQUAL(ticks[0].ec, aborted);
  t.async_wait(record_tick(ticks));  // the timer can wait again
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK(!ticks[1].ec);
}

BOOST_AUTO_TEST_CASE(destruction_aborts_the_pending_wait) {
  asio::io_context ctx;
  std::vector<tick> ticks;
  {
    periodic t(ctx, 10s);
    t.async_wait(record_tick(ticks));
  }
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK_EQUAL(ticks[0].ec, aborted);
  tock_test::check_idle(ctx);
}

BOOST_AUTO_TEST_CASE(one_wait_at_a_time) {
  asio::io_context ctx;
  periodic t(ctx, 10s);
  std::vector<tick> ticks;
  t.async_wait(record_tick(ticks));
  try {
    t.async_wait(record_tick(ticks));
    BOOST_FAIL("a second wait was accepted");
  } catch (const sys::system_error& e) {
    BOOST_CHECK_EQUAL(e.code(), asio::error::already_started);
  }
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);  // the first wait is untouched
  BOOST_CHECK(!ticks[0].ec);
}

BOOST_AUTO_TEST_CASE(a_move_takes_the_grid_and_the_pending_wait) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic a(ctx, 10s);
  std::vector<tick> ticks;
  a.async_wait(record_tick(ticks));
  periodic b(std::move(a));
  BOOST_CHECK(a.get_executor() == b.get_executor());  // a moved-from timer keeps its executor
  BOOST_CHECK_THROW(a.async_wait(record_tick(ticks)), std::logic_error);
  BOOST_CHECK_THROW(a.next_tick(), std::logic_error);
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(!ticks[0].ec);
  BOOST_CHECK(b.next_tick() == start + 20s);
  periodic c(ctx, 1s);
  c.async_wait(record_tick(ticks));
  c = std::move(b);  // c's pending wait is aborted
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[1].ec, aborted);
  BOOST_CHECK(c.next_tick() == start + 20s);
  a = std::move(c);  // a moved-from timer can be assigned to
  BOOST_CHECK(a.next_tick() == start + 20s);
}

BOOST_AUTO_TEST_CASE(use_awaitable_returns_the_missed_count) {
  asio::io_context ctx;
  // A default token through rebind_executor, as with Asio's I/O objects.
  using awaitable_periodic = asio::use_awaitable_t<>::as_default_on_t<periodic>;
  awaitable_periodic t(ctx, 10s);
  std::vector<std::uint64_t> missed;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 2; ++i) missed.push_back(co_await t.async_wait());
      },
      asio::detached);
  tock_test::settle(ctx);
  tock_test::advance_by(ctx, 10s);
  tock_test::advance_by(ctx, 30s);  // the second tick (20s) runs at 40s
  BOOST_REQUIRE_EQUAL(missed.size(), 2u);
  BOOST_CHECK_EQUAL(missed[0], 0u);
  BOOST_CHECK_EQUAL(missed[1], 2u);
}

BOOST_AUTO_TEST_CASE(use_future_gives_the_missed_count_or_the_error) {
  asio::io_context ctx;
  periodic t(ctx, 10s);
  std::future<std::uint64_t> f = t.async_wait(asio::use_future);
  tock_test::advance_by(ctx, 25s);
  BOOST_REQUIRE(f.wait_for(0s) == std::future_status::ready);
  BOOST_CHECK_EQUAL(f.get(), 1u);
  std::future<std::uint64_t> g = t.async_wait(asio::use_future);
  t.cancel();
  tock_test::settle(ctx);
  BOOST_CHECK_THROW(g.get(), sys::system_error);
}

// The missed count is read from the wake-up that completed the tick when its batch runs the handler: one
// clock read per wake-up (detail/wakeup_time.hpp). A handler that moves the clock on does not move it for the
// ticks completed by the same wake-up.
BOOST_AUTO_TEST_CASE(missed_is_counted_at_the_wake_up_that_completed_the_tick) {
  asio::io_context ctx;
  periodic first(ctx, 10s, missed_ticks::burst), second(ctx, 10s, missed_ticks::burst);
  std::vector<tick> ticks;
  first.async_wait([&](const error_code& ec, std::uint64_t missed) {
    ticks.push_back({ec, missed, manual_clock::now()});
    manual_clock::advance(25s);  // two more periods pass before the next handler of this wake-up runs
  });
  second.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK(!ticks[0].ec && !ticks[1].ec);
  BOOST_CHECK_EQUAL(ticks[0].missed, 0u);
  BOOST_CHECK_EQUAL(ticks[1].missed, 0u);  // counted at the wake-up, not at 35s
  BOOST_CHECK(ticks[1].at == ticks[0].at + 25s);
  // The next wake-up reads the clock again: both are two periods behind.
  ticks.clear();
  first.async_wait(record_tick(ticks));
  second.async_wait(record_tick(ticks));
  tock_test::settle(ctx);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[0].missed, 1u);  // tick 20s at 35s
  BOOST_CHECK_EQUAL(ticks[1].missed, 1u);
}

// Skip places its next tick after the time it counts from, so it reads the clock: a slow handler before it in
// the same wake-up must not leave its next tick in the past (a second tick back to back).
BOOST_AUTO_TEST_CASE(skip_reads_the_clock_after_a_slow_handler_of_the_same_wake_up) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  periodic slow(ctx, 10s, missed_ticks::burst), ticker(ctx, 10s, missed_ticks::skip);
  std::vector<tick> ticks;
  slow.async_wait([&](const error_code& ec, std::uint64_t missed) {
    ticks.push_back({ec, missed, manual_clock::now()});
    manual_clock::advance(25s);  // the handler takes 25 s
  });
  ticker.async_wait(record_tick(ticks));
  tock_test::advance_by(ctx, 10s);
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[1].missed, 2u);  // its tick at 10s, run at 35s: 20s and 30s dropped
  BOOST_CHECK(ticker.next_tick() == start + 40s);
  ticker.async_wait(record_tick(ticks));
  tock_test::settle(ctx);
  BOOST_CHECK_EQUAL(ticks.size(), 2u);  // not due before 40s
}

// The wake-up's reading is its own service's: a tick of another service run inside that batch (here a
// handler queued on the batch's context, run by a poll nested in one of its handlers) reads the clock.
BOOST_AUTO_TEST_CASE(a_tick_run_inside_another_services_wake_up_reads_the_clock) {
  asio::io_context a, b;
  periodic t(a, 10s, missed_ticks::burst);
  tock::basic_timer<manual_clock> other(b, 20s);
  std::vector<tick> ticks;
  t.async_wait(asio::bind_executor(b, record_tick(ticks)));
  bool nested = false;
  other.async_wait([&](const error_code&) {
    manual_clock::advance(30s);
    b.poll();  // runs t's tick, queued behind this wake-up
    nested = true;
  });
  manual_clock::advance(20s);  // b's wake-up, at 20s, is queued on b
  tock_test::settle(a);         // t fires (its tick was at 10s); its handler is queued on b behind the wake-up
  BOOST_CHECK(ticks.empty());
  tock_test::settle(b);
  BOOST_CHECK(nested);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK_EQUAL(ticks[0].missed, 4u);  // its tick at 10s, run at 50s (b's wake-up read 20s: 1)
}

// A tick whose handler runs on another context's executor runs after its wake-up, outside its batch: it
// counts the periods missed when it runs.
BOOST_AUTO_TEST_CASE(a_tick_run_on_another_context_counts_missed_when_it_runs) {
  asio::io_context ctx, other;
  periodic t(ctx, 10s, missed_ticks::burst);
  std::vector<tick> ticks;
  t.async_wait(asio::bind_executor(other, record_tick(ticks)));
  tock_test::advance_by(ctx, 10s);  // fires: the handler is queued on `other`
  BOOST_CHECK(ticks.empty());
  manual_clock::advance(25s);
  tock_test::settle(other);
  BOOST_REQUIRE_EQUAL(ticks.size(), 1u);
  BOOST_CHECK(!ticks[0].ec);
  BOOST_CHECK_EQUAL(ticks[0].missed, 2u);  // tick 10s run at 35s
}

// A handler may run another context's batch inside its own: each tick counts from its own wake-up, and the
// outer batch's reading is back for the handlers after it.
BOOST_AUTO_TEST_CASE(a_nested_wake_up_counts_its_own_ticks_and_restores_the_outer_one) {
  asio::io_context outer, inner;
  periodic a(outer, 10s, missed_ticks::burst), b(outer, 10s, missed_ticks::burst);
  periodic c(inner, 10s, missed_ticks::burst);
  std::vector<tick> ticks, inner_ticks;
  c.async_wait(record_tick(inner_ticks));
  a.async_wait([&](const error_code& ec, std::uint64_t missed) {
    ticks.push_back({ec, missed, manual_clock::now()});
    manual_clock::advance(25s);
    tock_test::settle(inner);  // c's wake-up, at 35s, inside a's handler
  });
  b.async_wait(record_tick(ticks));
  manual_clock::advance(10s);
  tock_test::settle(outer);
  BOOST_REQUIRE_EQUAL(inner_ticks.size(), 1u);
  BOOST_CHECK_EQUAL(inner_ticks[0].missed, 2u);  // c's tick at 10s, its wake-up at 35s
  BOOST_REQUIRE_EQUAL(ticks.size(), 2u);
  BOOST_CHECK_EQUAL(ticks[0].missed, 0u);
  BOOST_CHECK_EQUAL(ticks[1].missed, 0u);  // b: the outer wake-up's reading, at 10s
}

BOOST_AUTO_TEST_CASE(ticks_on_the_steady_clock_in_order_and_never_early) {
  // Real time is the point: the default clock and the real driver.
  asio::io_context ctx;
  const auto start = std::chrono::steady_clock::now();
  tock::periodic_timer t(ctx, 2ms);
  std::vector<std::chrono::steady_clock::time_point> at;
  std::function<void(const error_code&, std::uint64_t)> on_tick = [&](const error_code& ec, std::uint64_t) {
    BOOST_REQUIRE(!ec);
    at.push_back(std::chrono::steady_clock::now());
    if (at.size() < 3) t.async_wait(on_tick);
  };
  t.async_wait(on_tick);
  ctx.run_for(10s);  // bounded: returns once the three ticks are done
  BOOST_REQUIRE_EQUAL(at.size(), 3u);
  for (std::size_t i = 0; i < at.size(); ++i) BOOST_CHECK(at[i] >= start + static_cast<int>(i + 1) * 2ms);
}

BOOST_AUTO_TEST_SUITE_END()
