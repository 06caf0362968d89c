// Slack in virtual time (tock::manual_clock): an entry with slack s completes in [deadline, deadline + s],
// never before and never after, on random inputs; one wake-up serves every entry whose window it falls in;
// the service's default; set_slack on pending waits; bad input. Time moves in steps that divide every
// deadline and slack, so the driver's armed times are met exactly and the bounds are exact.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/async_sleep.hpp>
#include <tock/basic_timer.hpp>
#include <tock/deadline.hpp>
#include <tock/detail/timer_queue.hpp>
#include <tock/manual_clock.hpp>
#include <tock/periodic_timer.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock::error_code;
using tock::manual_clock;
using manual_timer = tock::basic_timer<manual_clock>;
using manual_deadline = tock::basic_deadline<manual_clock>;
using service = tock::basic_timer_service<manual_clock>;

// One entry's window and when it completed (nullopt while pending).
struct entry {
  manual_clock::time_point due;
  manual_clock::duration slack;
  std::optional<manual_clock::time_point> done;
  error_code ec;
};

auto record(entry& e) {
  return [&e](const error_code& ec) {
    e.ec = ec;
    e.done = manual_clock::now();
  };
}

// Runs what is due now, then moves time in `step`s to `until`, settling the context at each.
void step_to(asio::io_context& ctx, manual_clock::time_point until, manual_clock::duration step) {
  tock_test::settle(ctx);
  while (manual_clock::now() < until) tock_test::advance_by(ctx, step);
}

void check_window(const entry& e, std::size_t i) {
  BOOST_TEST_CONTEXT("entry " << i) {
    BOOST_TEST_REQUIRE(e.done.has_value());
    BOOST_TEST(!e.ec);
    BOOST_TEST((*e.done >= e.due));            // never early
    BOOST_TEST((*e.done <= e.due + e.slack), "done " << (*e.done - e.due).count() << " ns after its deadline");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(slack_test)

BOOST_AUTO_TEST_CASE(every_kind_of_entry_completes_within_its_window_on_random_inputs) {
  constexpr auto step = 100us;
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      asio::io_context ctx;
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int> due_steps(0, 2000), slack_steps(0, 100), kind(0, 2);
      const auto t0 = manual_clock::now();
      std::deque<entry> entries;
      std::deque<manual_timer> timers;
      std::deque<manual_deadline> deadlines;
      for (int i = 0; i < 300; ++i) {
        entry& e = entries.emplace_back(entry{t0 + due_steps(rng) * step, slack_steps(rng) * step, {}, {}});
        switch (kind(rng)) {
          case 0: tock::async_sleep_until(ctx.get_executor(), e.due, e.slack, record(e)); break;
          case 1: {
            manual_timer& t = timers.emplace_back(ctx, e.due);
            t.set_slack(e.slack);
            t.async_wait(record(e));
            break;
          }
          default: {
            manual_deadline& d = deadlines.emplace_back(ctx.get_executor(), e.due);
            d.async_wait(record(e));
            d.set_slack(e.slack);  // on a pending wait
            break;
          }
        }
      }
      step_to(ctx, t0 + 2100 * step, step);
      for (std::size_t i = 0; i < entries.size(); ++i) check_window(entries[i], i);
      const tock::timer_stats stats = tock_test::service_of<manual_clock>(ctx).stats();
      BOOST_TEST(stats.fired == entries.size());
      BOOST_TEST(stats.wakeups < entries.size());  // windows overlap: some wake-ups served several
      BOOST_TEST(tock_test::service_of<manual_clock>(ctx).invariants_hold());
    }
  }
}

BOOST_AUTO_TEST_CASE(one_wake_up_serves_every_entry_whose_window_it_falls_in) {
  // 1,000 sleeps on distinct deadlines over 200 ms: one wake-up each without slack; with 1 ms, a wake-up at
  // the first pending latest time fires everything due by then, so the next is over 1 ms later: <= 201.
  auto wakeups_with = [](manual_clock::duration slack) {
    asio::io_context ctx;
    tock_test::service_of<manual_clock>(ctx).set_default_slack(slack);
    const auto t0 = manual_clock::now();
    std::deque<entry> entries;
    for (int i = 0; i < 1000; ++i) {
      entry& e = entries.emplace_back(entry{t0 + i * 200us, slack, {}, {}});
      tock::async_sleep_until(ctx.get_executor(), e.due, record(e));
    }
    step_to(ctx, t0 + 202ms, 100us);
    for (std::size_t i = 0; i < entries.size(); ++i) check_window(entries[i], i);
    return tock_test::service_of<manual_clock>(ctx).stats().wakeups;
  };
  BOOST_TEST(wakeups_with(0ms) == 1000u);
  BOOST_TEST(wakeups_with(1ms) <= 201u);
}

BOOST_AUTO_TEST_CASE(an_entry_with_slack_completes_at_an_earlier_entrys_wake_up) {
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  entry exact{t0 + 10ms, 0ms, {}, {}}, loose{t0 + 8ms, 5ms, {}, {}};
  manual_timer t(ctx, loose.due);
  t.set_slack(loose.slack);
  t.async_wait(record(loose));
  tock::async_sleep_until(ctx.get_executor(), exact.due, record(exact));
  step_to(ctx, t0 + 9ms, 1ms);
  BOOST_TEST(!loose.done.has_value());  // due, but its latest time is 13 ms
  step_to(ctx, t0 + 10ms, 1ms);
  BOOST_TEST_REQUIRE(loose.done.has_value());
  BOOST_TEST((*loose.done == t0 + 10ms));
  BOOST_TEST((*exact.done == t0 + 10ms));
  BOOST_TEST(tock_test::service_of<manual_clock>(ctx).stats().wakeups == 1u);
}

BOOST_AUTO_TEST_CASE(alone_an_entry_completes_at_its_latest_time) {
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  entry e{t0 + 10ms, 5ms, {}, {}};
  tock::async_sleep_until(ctx.get_executor(), e.due, 5ms, record(e));
  step_to(ctx, t0 + 14ms, 1ms);
  BOOST_TEST(!e.done.has_value());
  step_to(ctx, t0 + 15ms, 1ms);
  BOOST_TEST_REQUIRE(e.done.has_value());
  BOOST_TEST((*e.done == t0 + 15ms));
  tock_test::check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(the_default_slack_applies_to_timers_created_and_sleeps_started_after_it) {
  asio::io_context ctx;
  service& s = tock_test::service_of<manual_clock>(ctx);
  BOOST_TEST((s.default_slack() == 0ms));
  manual_timer before(ctx);
  s.set_default_slack(5ms);
  manual_timer after(ctx);
  manual_deadline deadline(ctx.get_executor());
  BOOST_TEST((before.slack() == 0ms));
  BOOST_TEST((after.slack() == 5ms));
  BOOST_TEST((deadline.slack() == 5ms));

  const auto t0 = manual_clock::now();
  entry sleep{t0 + 10ms, 5ms, {}, {}};
  tock::async_sleep_until(ctx.get_executor(), sleep.due, record(sleep));
  step_to(ctx, t0 + 14ms, 1ms);
  BOOST_TEST(!sleep.done.has_value());
  step_to(ctx, t0 + 15ms, 1ms);
  BOOST_TEST((sleep.done == t0 + 15ms));
}

BOOST_AUTO_TEST_CASE(set_slack_on_a_pending_wait_moves_its_latest_time_earlier) {
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  entry e{t0 + 10ms, 0ms, {}, {}};
  manual_timer t(ctx, e.due);
  t.set_slack(50ms);
  t.async_wait(record(e));
  tock_test::advance_by(ctx, 1ms);  // the driver is armed for 60 ms now
  t.set_slack(0ms);
  step_to(ctx, t0 + 10ms, 1ms);
  BOOST_TEST((e.done == t0 + 10ms));
  tock_test::check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(negative_slack_is_refused_with_nothing_changed) {
  asio::io_context ctx;
  service& s = tock_test::service_of<manual_clock>(ctx);
  manual_timer t(ctx);
  t.set_slack(2ms);
  BOOST_CHECK_THROW(t.set_slack(-1ns), std::invalid_argument);
  BOOST_TEST((t.slack() == 2ms));
  BOOST_CHECK_THROW(s.set_default_slack(-1ms), std::invalid_argument);
  BOOST_TEST((s.default_slack() == 0ms));
  bool ran = false;
  BOOST_CHECK_THROW(tock::async_sleep_for(ctx.get_executor(), 1ms, -1ms, [&](const error_code&) { ran = true; }),
                    std::invalid_argument);
  BOOST_TEST(s.pending() == 0u);
  tock_test::advance_by(ctx, 2ms);
  BOOST_TEST(!ran);
  tock_test::check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(a_moved_timer_keeps_its_slack_and_its_waits_window) {
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  entry e{t0 + 10ms, 4ms, {}, {}};
  manual_timer a(ctx, e.due);
  a.set_slack(e.slack);
  a.async_wait(record(e));
  manual_timer b(std::move(a));
  BOOST_TEST((b.slack() == 4ms));
  BOOST_TEST((a.slack() == 4ms));  // the moved-from object keeps its own setting
  step_to(ctx, t0 + 14ms, 1ms);
  BOOST_TEST((e.done == t0 + 14ms));
}

BOOST_AUTO_TEST_CASE(a_periodic_timer_with_slack_stays_on_its_grid) {
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  tock::basic_periodic_timer<manual_clock> p(ctx, t0 + 10ms, 10ms);
  p.set_slack(3ms);
  BOOST_TEST((p.slack() == 3ms));
  std::vector<manual_clock::time_point> at;
  std::vector<std::uint64_t> missed;
  std::function<void(const error_code&, std::uint64_t)> on_tick = [&](const error_code& ec, std::uint64_t m) {
    if (ec) return;
    at.push_back(manual_clock::now());
    missed.push_back(m);
    if (at.size() < 5) p.async_wait(on_tick);
  };
  p.async_wait(on_tick);
  step_to(ctx, t0 + 60ms, 1ms);
  BOOST_TEST_REQUIRE(at.size() == 5u);
  for (std::size_t i = 0; i < at.size(); ++i) {
    BOOST_TEST((at[i] == t0 + 10ms * (i + 1) + 3ms));  // alone: at each tick's latest time, the grid unmoved
    BOOST_TEST(missed[i] == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_periodic_tick_re_keys_its_timer_in_place) {
  // Waiting again from the tick's handler keeps the timer's heap slot: one re-key per tick, no removal, and
  // no empty wake-up for the stale key.
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  tock::basic_periodic_timer<manual_clock> p(ctx, t0 + 1ms, 1ms);
  manual_timer other(ctx, t0 + 1h);  // a second entry, so that the heap has an order to keep
  other.async_wait([](const error_code&) {});
  int ticks = 0;
  std::function<void(const error_code&, std::uint64_t)> on_tick = [&](const error_code& ec, std::uint64_t) {
    if (!ec && ++ticks < 100) p.async_wait(on_tick);
  };
  p.async_wait(on_tick);
  const tock::timer_stats before = tock_test::service_of<manual_clock>(ctx).stats();
  step_to(ctx, t0 + 100ms, 1ms);
  const tock::timer_stats after = tock_test::service_of<manual_clock>(ctx).stats();
  BOOST_TEST(ticks == 100);
  BOOST_TEST(after.wakeups - before.wakeups == 100u);
  BOOST_TEST(after.empty_wakeups == before.empty_wakeups);
  BOOST_TEST(after.rekeys - before.rekeys == 99u);
  BOOST_TEST(tock_test::service_of<manual_clock>(ctx).invariants_hold());
  other.cancel();
}

BOOST_AUTO_TEST_CASE(an_entry_fired_early_by_its_slack_leaves_no_wake_up_behind) {
  // b's window [8, 13] ms holds a's deadline, 10 ms: b fires with a, and waits again from its handler, as a
  // does. No wake-up may come for b's old latest time.
  asio::io_context ctx;
  const auto t0 = manual_clock::now();
  manual_timer a(ctx, t0 + 10ms), b(ctx, t0 + 8ms);
  b.set_slack(5ms);
  int na = 0, nb = 0;
  std::function<void(const error_code&)> on_a, on_b;
  on_a = [&](const error_code& ec) {
    if (ec || ++na == 10) return;
    a.expires_at(a.expiry() + 10ms);
    a.async_wait(on_a);
  };
  on_b = [&](const error_code& ec) {
    if (ec || ++nb == 10) return;
    b.expires_at(b.expiry() + 10ms);
    b.async_wait(on_b);
  };
  a.async_wait(on_a);
  b.async_wait(on_b);
  step_to(ctx, t0 + 120ms, 1ms);
  const tock::timer_stats s = tock_test::service_of<manual_clock>(ctx).stats();
  BOOST_TEST(na == 10);
  BOOST_TEST(nb == 10);
  BOOST_TEST(s.wakeups == 10u);  // one per pair
  BOOST_TEST(s.empty_wakeups == 0u);
  tock_test::check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(a_timer_waited_on_again_from_elsewhere_costs_no_extra_wake_up) {
  // The fired timer's stale key must not be taken for the top when its next wait starts outside its
  // handler (from a strand, or later from other code).
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  manual_timer t(ctx);
  int n = 0;
  std::function<void(const error_code&)> again = [&](const error_code& ec) {
    if (ec || ++n == 5) return;
    t.expires_after(10ms);
    t.async_wait(asio::bind_executor(strand, again));
  };
  t.expires_after(10ms);
  t.async_wait(asio::bind_executor(strand, again));
  for (int i = 0; i < 6; ++i) tock_test::advance_by(ctx, 10ms);
  entry e{};
  for (int i = 0; i < 5; ++i) {
    t.expires_after(10ms);
    t.async_wait(record(e));
    tock_test::settle(ctx);  // a driver armed at a stale past key would wake now, for nothing
    tock_test::advance_by(ctx, 10ms);
    tock_test::advance_by(ctx, 5ms);
  }
  const tock::timer_stats s = tock_test::service_of<manual_clock>(ctx).stats();
  BOOST_TEST(n == 5);
  BOOST_TEST(s.wakeups == 10u);
  BOOST_TEST(s.empty_wakeups == 0u);
  tock_test::check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(a_fired_timer_left_in_the_heap_holds_no_slot_against_the_capacity) {
  asio::io_context ctx;
  service& s = tock_test::service_of<manual_clock>(ctx);
  s.set_capacity(1);
  const auto t0 = manual_clock::now();
  manual_timer a(ctx, t0 + 10ms);
  entry first{}, sleep{}, again{};
  a.async_wait(record(first));
  step_to(ctx, t0 + 10ms, 10ms);
  BOOST_TEST_REQUIRE(first.done.has_value());
  tock::async_sleep_until(ctx.get_executor(), t0 + 1h, record(sleep));  // takes the one slot
  a.expires_after(1h);
  a.async_wait(record(again));
  tock_test::settle(ctx);
  BOOST_TEST((again.ec == tock::error::capacity_exceeded));
  BOOST_TEST(s.pending() == 1u);
  BOOST_TEST(s.invariants_hold());
}

BOOST_AUTO_TEST_CASE(the_queue_keeps_a_deadline_next_to_max_reachable_whatever_its_slack) {
  using time_point = std::chrono::steady_clock::time_point;
  tock::detail::timer_queue<time_point> q;
  tock::detail::sleep_entry s(
      [](tock::detail::sleep_entry*, tock::detail::service_core&, tock::detail::op_action, const error_code&) {});
  const time_point at = time_point::max() - 1h;
  q.reserve_at(at);
  q.push_sleep(s, at, tock::detail::latest_time(at, time_point::duration(2h)));  // clamped short of max()
  BOOST_TEST((q.top_key() == time_point::max() - time_point::duration(1)));
  BOOST_TEST(!q.pop_due(at - 1ns));  // never early
  const auto due = q.pop_due(at);
  BOOST_TEST(due.sleep == &s);
  BOOST_TEST((due.at == at));
}

BOOST_AUTO_TEST_SUITE_END()
