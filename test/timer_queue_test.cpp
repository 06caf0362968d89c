// The timer queue alone (detail/timer_queue.hpp): no service, no lock, no driver, no Asio. Operations are
// stand-ins that only record how they were completed; the queue never calls them.
#include <tock/detail/timer_queue.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace {

using namespace std::chrono_literals;
using time_point = std::chrono::steady_clock::time_point;
using queue = tock::detail::timer_queue<time_point>;
using timer = queue::timer;
using tock::detail::sleep_entry;
using tock::detail::wait_op;

const time_point t0{};

void never(wait_op*, tock::detail::service_core&, tock::detail::op_action, const tock::error_code&) {}
void never_sleep(sleep_entry*, tock::detail::service_core&, tock::detail::op_action, const tock::error_code&) {}

struct test_wait : wait_op {
  test_wait() : wait_op{&never, nullptr, false, false, 0} {}
};
struct test_sleep : sleep_entry {
  test_sleep() : sleep_entry(&never_sleep) {}
};

void link(queue& q, timer& t, test_wait& w) {
  q.reserve_wait(t);
  q.link_wait(t, w);
}
void push(queue& q, test_sleep& s, time_point at, bool cancellable = true) {
  q.reserve_at(at);
  q.push_sleep(s, at, at, queue::lanes_type::none, cancellable);
}

// What pop_due(now) yields, in order, until nothing is due.
std::vector<const void*> pop_all(queue& q, time_point now) {
  std::vector<const void*> out;
  while (auto d = q.pop_due(now)) out.push_back(d.sleep != nullptr ? static_cast<const void*>(d.sleep) : d.wait);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(timer_queue_test)

BOOST_AUTO_TEST_CASE(pop_due_yields_timers_and_sleeps_in_deadline_then_start_order) {
  queue q;
  timer a, b;
  a.set_expiry(t0 + 2s);
  b.set_expiry(t0 + 1s);
  test_wait a1, a2, b1;
  test_sleep s1, s2;
  link(q, a, a1);
  push(q, s1, t0 + 2s);
  link(q, b, b1);
  link(q, a, a2);
  push(q, s2, t0 + 1s);
  BOOST_TEST(q.pending() == 5u);
  BOOST_TEST(q.valid());
  BOOST_TEST(pop_all(q, t0 + 500ms).empty());
  const std::vector<const void*> expected{&b1, &s2, &a1, &s1, &a2};
  BOOST_TEST(pop_all(q, t0 + 2s) == expected, boost::test_tools::per_element());
  BOOST_TEST(q.pending() == 0u);
  BOOST_TEST(q.valid());
}

BOOST_AUTO_TEST_CASE(sleeps_pushed_not_cancellable_pop_in_order_among_the_others) {
  // Their positions are not tracked (deadline_heap.hpp): they leave only from the top, as they fire, while
  // cancellable sleeps and timers around them are taken out and moved.
  queue q;
  timer a;
  a.set_expiry(t0 + 3s);
  test_wait a1;
  std::vector<test_sleep> fixed(40), cancellable(40);
  for (std::size_t i = 0; i < fixed.size(); ++i) {
    push(q, fixed[i], t0 + std::chrono::milliseconds(100 * ((i * 7) % 40)), false);
    push(q, cancellable[i], t0 + std::chrono::milliseconds(100 * ((i * 11) % 40) + 50));
  }
  link(q, a, a1);
  BOOST_TEST(fixed[3].node.position == tock::detail::heap_node::untracked);
  for (std::size_t i = 0; i < cancellable.size(); i += 2) BOOST_TEST(q.unschedule(cancellable[i]));
  q.reserve_move(a, t0 + 1s);
  q.move_expiry(a, t0 + 1s);
  BOOST_TEST(q.valid());
  BOOST_TEST(q.pending() == 61u);
  std::vector<const void*> expected;
  for (int step = 0; step < 80; ++step) {  // 50 ms apart: fixed at even steps, cancellable at odd ones
    const int ms = 50 * step;
    for (std::size_t i = 0; i < fixed.size(); ++i)
      if (step % 2 == 0 && static_cast<int>(100 * ((i * 7) % 40)) == ms) expected.push_back(&fixed[i]);
    if (ms == 1000) expected.push_back(&a1);  // after the sleep due at the same time: started before the wait
    for (std::size_t i = 1; i < cancellable.size(); i += 2)
      if (static_cast<int>(100 * ((i * 11) % 40) + 50) == ms) expected.push_back(&cancellable[i]);
  }
  BOOST_TEST(pop_all(q, t0 + 4s) == expected, boost::test_tools::per_element());
  for (const test_sleep& s : fixed) BOOST_TEST(s.node.position == tock::detail::heap_node::nowhere);
  BOOST_TEST(q.pending() == 0u);
  BOOST_TEST(q.valid());
}

BOOST_AUTO_TEST_CASE(a_later_expiry_keeps_the_old_key_until_it_surfaces) {
  queue q;
  timer t;
  t.set_expiry(t0 + 1s);
  test_wait w;
  link(q, t, w);
  BOOST_TEST(t.try_move_later(t0 + 5s));  // lock-free: the heap still holds 1s
  BOOST_TEST((q.top_key() == t0 + 1s));
  BOOST_TEST(pop_all(q, t0 + 1s).empty());  // surfaced, re-keyed at its expiry, not due
  BOOST_TEST((q.top_key() == t0 + 5s));
  BOOST_TEST(q.valid());
  const std::vector<const void*> expected{&w};
  BOOST_TEST(pop_all(q, t0 + 5s) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(take_waits_defers_the_waiting_and_leaves_the_timer_lingering) {
  queue q;
  timer t;
  t.set_expiry(t0 + 1s);
  test_wait w1, w2;
  link(q, t, w1);
  link(q, t, w2);
  std::vector<wait_op*> deferred;
  BOOST_TEST(q.take_waits(t, 1, [&](wait_op& op) { deferred.push_back(&op); }) == 1u);
  BOOST_TEST(deferred == std::vector<wait_op*>{&w1}, boost::test_tools::per_element());
  BOOST_TEST(q.pending() == 1u);
  q.take_waits(t, static_cast<std::size_t>(-1), [&](wait_op& op) { deferred.push_back(&op); });
  BOOST_TEST(q.pending() == 0u);
  BOOST_TEST(t.node.in_heap());  // lingering: it leaves when it surfaces or its object goes
  BOOST_TEST(q.valid());
  BOOST_TEST(pop_all(q, t0 + 1s).empty());
  BOOST_TEST(!t.node.in_heap());
}

BOOST_AUTO_TEST_CASE(a_wait_at_max_parks_and_moves_into_the_heap_when_its_expiry_does) {
  queue q;
  timer t;
  t.set_expiry(time_point::max());
  test_wait w;
  link(q, t, w);
  BOOST_TEST(t.node.parked());
  BOOST_TEST(q.parked_waits() == 1u);
  BOOST_TEST(q.heap_empty());
  BOOST_TEST((q.move_key(t, t0 + 1s) == t0 + 1s));  // where the driver must be armed first
  q.reserve_move(t, t0 + 1s);
  q.move_expiry(t, t0 + 1s);
  BOOST_TEST(q.parked_waits() == 0u);
  BOOST_TEST(q.heap_waits() == 1u);
  BOOST_TEST(q.valid());
  const std::vector<const void*> expected{&w};
  BOOST_TEST(pop_all(q, t0 + 1s) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_fired_wait_that_could_not_run_waits_again_first) {
  queue q;
  timer t;
  t.set_expiry(t0 + 1s);
  test_wait w1, w2;
  w1.checked_at_run = true;  // runs on a foreign executor: stays in its ring, due, until it runs
  link(q, t, w1);
  link(q, t, w2);
  auto d = q.pop_due(t0 + 1s);
  BOOST_TEST(d.wait == &w1);
  BOOST_TEST(std::uint32_t{t.ring.due} == 1u);
  BOOST_TEST(q.wait_again(w1));
  BOOST_TEST(std::uint32_t{t.ring.due} == 0u);
  BOOST_TEST(t.ring.first_waiting() == &w1);
  BOOST_TEST(q.valid());
  const std::vector<const void*> expected{&w1};
  BOOST_TEST(pop_all(q, t0 + 1s).front() == expected.front());
}

BOOST_AUTO_TEST_CASE(capacity_counts_heap_slots_not_parked_waits_or_lingering_timers) {
  queue q;
  q.set_capacity(1);
  timer a, b, parked;
  a.set_expiry(t0 + 1s);
  b.set_expiry(t0 + 2s);
  parked.set_expiry(time_point::max());
  test_wait a1, p1;
  BOOST_TEST(!q.wait_past_capacity(a));
  link(q, a, a1);
  BOOST_TEST(q.wait_past_capacity(b));
  BOOST_TEST(q.sleep_past_capacity(t0 + 1s));
  BOOST_TEST(!q.sleep_past_capacity(time_point::max()));
  BOOST_TEST(!q.wait_past_capacity(parked));
  link(q, parked, p1);
  q.take_waits(a, 1, [](wait_op&) {});
  BOOST_TEST(!q.wait_past_capacity(b));  // a lingers, but holds no slot
}

BOOST_AUTO_TEST_SUITE_END()
