// Same-duration lanes (detail/sleep_lanes.hpp): in the timer queue alone, against a reference model, and through
// the service on the manual clock.
#include "test_support.hpp"

#include <tock/detail/timer_queue.hpp>
#include <tock/manual_clock.hpp>
#include <tock/timer_service.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;
using time_point = std::chrono::steady_clock::time_point;
using duration = time_point::duration;
using queue = tock::detail::timer_queue<time_point>;
using tock::detail::sleep_entry;

const time_point t0{};

void never_sleep(sleep_entry*, tock::detail::service_core&, tock::detail::op_action, const tock::error_code&) {}

struct test_sleep : sleep_entry {
  test_sleep() : sleep_entry(&never_sleep) {}
  time_point at{};
  std::uint64_t order = 0;  // start order, for the reference model
};

// Starts a sleep of `span` from `now` with `slack`, as the service does.
void start(queue& q, test_sleep& s, time_point now, duration span, duration slack = 0s) {
  s.at = now + span;
  const time_point latest = tock::detail::latest_time(s.at, slack);
  const std::int32_t lane = q.reserve_sleep(s.at, latest, span, slack);
  q.push_sleep(s, s.at, latest, lane);
}

std::vector<test_sleep*> pop_all(queue& q, time_point now) {
  std::vector<test_sleep*> out;
  while (auto d = q.pop_due(now)) {
    auto* s = static_cast<test_sleep*>(d.sleep);
    BOOST_TEST((d.at == s->at));  // a lane's sleep finds its deadline from the lane's slack
    out.push_back(s);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sleep_lanes_test)

BOOST_AUTO_TEST_CASE(a_span_that_repeats_gets_a_lane_and_only_its_oldest_sleep_is_in_the_heap) {
  queue q;
  std::vector<test_sleep> s(5);
  for (int i = 0; i < 5; ++i) start(q, s[i], t0 + i * 1ms, 10s);
  // The first 10 s sleep goes to the heap (the span is new), the second claims a lane and heads it, the rest
  // queue behind it.
  BOOST_TEST(q.lane_sleeps() == 3u);
  BOOST_TEST(q.pending() == 5u);
  BOOST_TEST(q.valid());
  BOOST_TEST(q.unschedule(s[3]));  // behind the head: a hole
  BOOST_TEST(q.unschedule(s[1]));  // the head: s[2] takes its place in the heap
  BOOST_TEST(!q.unschedule(s[1]));
  BOOST_TEST(q.lane_sleeps() == 1u);
  BOOST_TEST(q.valid());
  const std::vector<test_sleep*> expected{&s[0], &s[2], &s[4]};
  BOOST_TEST(pop_all(q, t0 + 20s) == expected, boost::test_tools::per_element());
  BOOST_TEST(q.pending() == 0u);
  BOOST_TEST(q.lane_sleeps() == 0u);
  BOOST_TEST(q.valid());
}

BOOST_AUTO_TEST_CASE(a_sleep_that_would_unsort_its_lane_goes_to_the_heap) {
  queue q;
  std::vector<test_sleep> s(4);
  start(q, s[0], t0 + 5ms, 10s);
  start(q, s[1], t0 + 5ms, 10s);  // lane head
  start(q, s[2], t0 + 6ms, 10s);  // behind it
  start(q, s[3], t0 + 1ms, 10s);  // read its clock before the others took the lock: earlier than the lane's last
  BOOST_TEST(q.lane_sleeps() == 1u);
  BOOST_TEST(q.valid());
  const std::vector<test_sleep*> expected{&s[3], &s[0], &s[1], &s[2]};
  BOOST_TEST(pop_all(q, t0 + 20s) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(equal_deadlines_in_lanes_and_the_heap_fire_in_start_order) {
  queue q;
  std::vector<test_sleep> s(6);
  start(q, s[0], t0, 3s);        // heap (first of its span)
  start(q, s[1], t0, 3s);        // lane head, same deadline
  start(q, s[2], t0 + 1s, 2s);   // heap: same deadline, another span
  start(q, s[3], t0, 3s);        // lane
  start(q, s[4], t0 + 1s, 2s);   // claims a second lane: same deadline
  start(q, s[5], t0 + 3s, 0s);   // no span: the heap
  BOOST_TEST(q.valid());
  const std::vector<test_sleep*> expected{&s[0], &s[1], &s[2], &s[3], &s[4], &s[5]};
  BOOST_TEST(pop_all(q, t0 + 3s) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(lanes_are_bounded_and_an_empty_lane_goes_to_another_span) {
  using lanes = tock::detail::sleep_lanes<time_point>;
  queue q;
  std::vector<test_sleep> s(2 * (lanes::max_lanes + 1));
  for (std::size_t i = 0; i <= lanes::max_lanes; ++i) {  // max_lanes + 1 spans, each twice
    const duration span = 1s + i * 1ms;
    start(q, s[2 * i], t0, span);
    start(q, s[2 * i + 1], t0, span);
  }
  // Each lane holds only its head, so nothing queues behind heads; the span past the bound stays in the heap.
  BOOST_TEST(q.lane_sleeps() == 0u);
  test_sleep a, b, c;
  start(q, a, t0, 1s + lanes::max_lanes * 1ms);
  BOOST_TEST(q.lane_sleeps() == 0u);  // no lane for it
  start(q, b, t0, 1s);
  BOOST_TEST(q.lane_sleeps() == 1u);  // 1 s has its lane
  BOOST_TEST(q.valid());
  pop_all(q, t0 + 1s);  // empties the 1 s lane
  start(q, c, t0 + 1s, 1s + lanes::max_lanes * 1ms);
  test_sleep d;
  start(q, d, t0 + 1s, 1s + lanes::max_lanes * 1ms);
  BOOST_TEST(q.lane_sleeps() == 1u);  // the span took the emptied lane: c heads it, d queues
  BOOST_TEST(q.valid());
  pop_all(q, t0 + 1h);
  BOOST_TEST(q.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(sleeps_behind_lane_heads_count_against_capacity) {
  queue q;
  q.set_capacity(3);
  std::vector<test_sleep> s(3);
  for (int i = 0; i < 3; ++i) start(q, s[i], t0 + i * 1ms, 10s);
  BOOST_TEST(q.lane_sleeps() == 1u);
  BOOST_TEST(q.sleep_past_capacity(t0 + 10s));
  BOOST_TEST(q.unschedule(s[2]));
  BOOST_TEST(!q.sleep_past_capacity(t0 + 10s));
}

BOOST_AUTO_TEST_CASE(clear_passes_on_every_sleep_of_every_lane_once) {
  queue q;
  std::vector<test_sleep> s(300);
  for (int i = 0; i < 300; ++i) start(q, s[i], t0 + i * 1ms, i % 3 == 0 ? 10s : 20s);
  for (int i = 0; i < 300; i += 7) BOOST_TEST(q.unschedule(s[i]));
  std::set<const sleep_entry*> seen;
  std::size_t calls = 0;
  q.clear([&](sleep_entry& e) { seen.insert(&e), ++calls; }, [](tock::detail::wait_op&) {});
  BOOST_TEST(calls == 300u - 43u);
  BOOST_TEST(seen.size() == calls);
  BOOST_TEST(q.pending() == 0u);
  BOOST_TEST(q.lane_sleeps() == 0u);
  BOOST_TEST(q.valid());
  for (auto& e : s) BOOST_TEST(!q.unschedule(e));
}

// Random starts (a few repeated spans, with and without slack, one-offs, a clock that sometimes reads earlier
// than the last start), withdrawals and firings, checked against a sorted set: the queue must fire exactly
// the sleeps the model fires, in (key, start) order, through lanes that grow and close their holes. The
// second run is a server's pattern: many pending, rare firings, so that withdrawals leave holes in the middle.
BOOST_AUTO_TEST_CASE(random_starts_withdrawals_and_firings_match_a_sorted_model) {
  struct run {
    std::size_t pending_max;
    unsigned fire_percent;
    int step_ms;
  };
  for (const run& p : {run{200, 15, 3000}, run{20000, 1, 20}}) {
    const std::size_t pending_max = p.pending_max;
    queue q;
    std::mt19937_64 rng(pending_max);
    std::vector<std::unique_ptr<test_sleep>> live;
    using key = std::tuple<time_point, std::uint64_t, test_sleep*>;
    std::set<key> model;
    std::map<test_sleep*, time_point> keys;
    std::uint64_t order = 0;
    time_point now = t0 + 1h;
    const duration spans[] = {10s, 30s, 5s, 5s + 1ms};
    const std::size_t ops = pending_max * 20;
    for (std::size_t op = 0; op < ops; ++op) {
      const unsigned r = rng() % 100;
      if (r < 100 - p.fire_percent && r % 2 == 0 && live.size() < pending_max) {
        auto s = std::make_unique<test_sleep>();
        const time_point started = rng() % 50 == 0 ? now - std::chrono::microseconds(rng() % 5000) : now;
        const duration span =
            rng() % 5 == 0 ? std::chrono::milliseconds(rng() % 100000) : spans[rng() % std::size(spans)];
        const duration slack = rng() % 4 == 0 ? 1ms : 0ms;
        start(q, *s, started, span, slack);
        s->order = order++;
        const time_point k = tock::detail::latest_time(s->at, slack);
        model.insert({k, s->order, s.get()});
        keys[s.get()] = k;
        live.push_back(std::move(s));
      } else if (r < 100 - p.fire_percent && !live.empty()) {
        const std::size_t i = rng() % live.size();
        test_sleep* s = live[i].get();
        BOOST_REQUIRE(q.unschedule(*s));
        model.erase({keys[s], s->order, s});
        keys.erase(s);
        live[i] = std::move(live.back());
        live.pop_back();
      } else {
        now += std::chrono::milliseconds(rng() % p.step_ms);
        while (auto d = q.pop_due(now)) {
          auto* s = static_cast<test_sleep*>(d.sleep);
          BOOST_REQUIRE(!model.empty());
          BOOST_REQUIRE(std::get<2>(*model.begin()) == s);
          BOOST_REQUIRE((d.at == s->at));
          BOOST_REQUIRE(!(now < s->at));
          model.erase(model.begin());
          keys.erase(s);
          for (auto& p : live)
            if (p.get() == s) {
              p = std::move(live.back());
              live.pop_back();
              break;
            }
        }
        // Nothing the model says is due (deadline passed, latest key first) was left behind.
        BOOST_REQUIRE(model.empty() || now < std::get<2>(*model.begin())->at);
      }
      if (pending_max <= 200 || op % 5000 == 0) BOOST_REQUIRE(q.valid());
      BOOST_REQUIRE(q.pending() == model.size());
    }
    BOOST_TEST(q.valid());
  }
}

// Through the service: sleeps of one span on the manual clock, a third of them cancelled through their slots,
// complete exactly once, in deadline order.
BOOST_AUTO_TEST_CASE(service_sleeps_of_one_span_complete_once_in_order_and_cancel_through_their_slots) {
  using tock::manual_clock;
  asio::io_context ctx;
  auto& service = tock::basic_timer_service<manual_clock>::of(ctx);
  constexpr int n = 300;
  std::vector<int> fired;
  std::vector<asio::cancellation_signal> signals(n);
  int aborted = 0;
  const auto origin = manual_clock::now();
  for (int i = 0; i < n; ++i) {
    service.async_sleep_for(manual_clock::now() + 10s, 10s,
                            asio::bind_cancellation_slot(signals[i].slot(),
                                                         [&, i](const tock::error_code& ec) {
                                                           if (ec)
                                                             ++aborted;
                                                           else
                                                             fired.push_back(i);
                                                         }),
                            ctx.get_executor());
    manual_clock::advance(1ms);
  }
  BOOST_TEST(service.invariants_hold());
  for (int i = 0; i < n; i += 3) signals[i].emit(asio::cancellation_type::terminal);
  BOOST_TEST(service.invariants_hold());
  tock_test::advance_to(ctx, origin + 10s + 150ms);
  BOOST_TEST(service.invariants_hold());
  tock_test::advance_to(ctx, origin + 20s);
  BOOST_TEST(aborted == n / 3);
  BOOST_TEST(fired.size() == std::size_t(n - n / 3));
  for (std::size_t i = 1; i < fired.size(); ++i) BOOST_TEST(fired[i - 1] < fired[i]);
  BOOST_TEST(service.pending() == 0u);
  BOOST_TEST(service.invariants_hold());
}

// A sleep whose slack is too large to add to its deadline has its key clamped short of max(): a lane, which finds
// deadlines as key - slack, must not take it, or it would fire early (review finding). Run on both paths.
BOOST_AUTO_TEST_CASE(a_sleep_with_a_slack_too_large_to_add_fires_no_earlier_in_a_lane_than_in_the_heap) {
  using tock::manual_clock;
  for (const bool relative : {false, true}) {
    BOOST_TEST_INFO("relative: " << relative);
    asio::io_context ctx;
    auto& service = tock::basic_timer_service<manual_clock>::of(ctx);
    const auto huge = manual_clock::duration::max();
    const auto origin = manual_clock::now();
    int fired = 0;
    std::vector<asio::cancellation_signal> signals(3);
    for (int i = 0; i < 3; ++i) {
      auto h = asio::bind_cancellation_slot(signals[i].slot(), [&](const tock::error_code& ec) { fired += !ec; });
      if (relative)
        service.async_sleep_for(manual_clock::now() + 10s, 10s, huge, std::move(h), ctx.get_executor());
      else
        service.async_sleep_until(manual_clock::now() + 10s, huge, std::move(h), ctx.get_executor());
    }
    signals[0].emit(asio::cancellation_type::terminal);  // the first, in the heap, would hide the others
    bool other = false;
    service.async_sleep_until(
        origin + 1s, [&](const tock::error_code&) { other = true; }, ctx.get_executor());
    tock_test::advance_to(ctx, origin + 2s);  // a wake-up at 1 s, 8 s before the sleeps' deadline
    BOOST_TEST(other);
    BOOST_TEST(fired == 0);
    BOOST_TEST(service.invariants_hold());
    for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
    tock_test::settle(ctx);
  }
}

// Shutdown destroys the handlers of sleeps queued in lanes (ASan would see one leak).
BOOST_AUTO_TEST_CASE(shutdown_destroys_the_handlers_of_sleeps_in_lanes) {
  auto alive = std::make_shared<int>(0);
  {
    asio::io_context ctx;
    auto& service = tock::basic_timer_service<tock::manual_clock>::of(ctx);
    for (int i = 0; i < 100; ++i)
      service.async_sleep_for(
          tock::manual_clock::now() + 5s, 5s, [alive](const tock::error_code&) { ++*alive; }, ctx.get_executor());
    BOOST_TEST(alive.use_count() == 101);
  }
  BOOST_TEST(alive.use_count() == 1);
  BOOST_TEST(*alive == 0);
}

BOOST_AUTO_TEST_SUITE_END()
