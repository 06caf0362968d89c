// tock::manual_clock: timers, deadlines and sleeps in virtual time fire when the test moves time past them,
// in deadline order, and never before, whatever the real time. Every case measures from manual_clock::now()
// (the virtual time is shared by the whole process).
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock::error_code;
using tock::manual_clock;
using manual_timer = tock::basic_timer<manual_clock>;
using manual_deadline = tock::basic_deadline<manual_clock>;

const error_code aborted = asio::error::operation_aborted;

}  // namespace

BOOST_AUTO_TEST_SUITE(manual_clock_test)

BOOST_AUTO_TEST_CASE(a_timer_fires_when_time_is_moved_past_its_expiry_and_not_before) {
  asio::io_context ctx;
  manual_timer t(ctx, 10s);
  tock_test::completion c;
  t.async_wait(tock_test::record(c));
  std::this_thread::sleep_for(20ms);  // real time does not matter
  tock_test::settle(ctx);
  BOOST_CHECK_EQUAL(c.calls, 0);
  tock_test::advance_by(ctx, 9s);
  BOOST_CHECK_EQUAL(c.calls, 0);
  tock_test::advance_by(ctx, 1s);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(manual_clock::now() >= t.expiry());
}

BOOST_AUTO_TEST_CASE(timers_and_sleeps_fire_in_deadline_order_in_one_advance) {
  asio::io_context ctx;
  std::vector<int> order;
  const auto start = manual_clock::now();
  manual_timer a(ctx, start + 3s), b(ctx, start + 1s);
  a.async_wait([&](const error_code&) { order.push_back(3); });
  b.async_wait([&](const error_code&) { order.push_back(1); });
  tock::async_sleep_until(ctx, start + 2s, [&](const error_code&) { order.push_back(2); });
  tock::async_sleep_until(ctx, start + 1h, [&](const error_code& ec) { order.push_back(ec == aborted ? -1 : 99); });
  tock_test::advance_by(ctx, 5s);
  const std::vector<int> want{1, 2, 3};
  BOOST_CHECK_EQUAL_COLLECTIONS(order.begin(), order.end(), want.begin(), want.end());
  BOOST_CHECK_EQUAL(tock::basic_timer_service<manual_clock>::of(ctx.get_executor()).pending(), 1u);
}

BOOST_AUTO_TEST_CASE(a_deadline_pushed_later_fires_at_the_last_expiry) {
  asio::io_context ctx;
  manual_deadline dl(ctx, 10s);
  tock_test::completion c;
  dl.async_wait(tock_test::record(c));
  manual_clock::advance(5s);
  dl.expires_after(10s);  // later: the heap keeps the old key until it surfaces
  tock_test::advance_by(ctx, 6s);  // the old key passes: the driver re-keys, nothing fires
  BOOST_CHECK_EQUAL(c.calls, 0);
  tock_test::advance_by(ctx, 3s);
  BOOST_CHECK_EQUAL(c.calls, 0);
  tock_test::advance_by(ctx, 1s);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
}

BOOST_AUTO_TEST_CASE(an_idle_read_times_out_in_virtual_time) {
  asio::io_context ctx;
  tock_test::socket_pair s(ctx);
  manual_deadline idle(ctx, 30s);
  std::array<char, 16> buf{};
  tock_test::io_result r;
  s.server.async_read_some(asio::buffer(buf), idle.bind(tock_test::record_io(r)));
  tock_test::settle(ctx);
  BOOST_CHECK_EQUAL(r.calls, 0);
  tock_test::advance_by(ctx, 29s);
  BOOST_CHECK_EQUAL(r.calls, 0);
  manual_clock::advance(1s);
  BOOST_REQUIRE(tock_test::run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == tock::error::timed_out);
}

BOOST_AUTO_TEST_CASE(timeout_on_the_manual_clock_times_a_read_out_in_virtual_time) {
  asio::io_context ctx;
  tock_test::socket_pair s(ctx);
  std::array<char, 16> buf{};
  tock_test::io_result r;
  s.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(30s, tock_test::record_io(r)));
  auto& service = tock::basic_timer_service<manual_clock>::of(ctx);
  BOOST_CHECK_EQUAL(service.pending(), 1u);  // on the manual clock's service, not the steady one's
  BOOST_CHECK_EQUAL(tock::timer_service::of(ctx).pending(), 0u);
  tock_test::advance_by(ctx, 29s);
  BOOST_CHECK_EQUAL(r.calls, 0);
  manual_clock::advance(1s);
  BOOST_REQUIRE(tock_test::run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == tock::error::timed_out);
  BOOST_CHECK(service.invariants_hold());
}

BOOST_AUTO_TEST_CASE(timeout_at_on_the_manual_clock_is_removed_when_the_read_completes_first) {
  asio::io_context ctx;
  tock_test::socket_pair s(ctx);
  std::array<char, 16> buf{};
  tock_test::io_result r;
  s.server.async_read_some(asio::buffer(buf), tock::timeout_at(manual_clock::now() + 30s, tock_test::record_io(r)));
  auto& service = tock::basic_timer_service<manual_clock>::of(ctx);
  BOOST_CHECK_EQUAL(service.pending(), 1u);
  asio::write(s.client, asio::buffer("x", 1));
  BOOST_REQUIRE(tock_test::run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(service.pending(), 0u);
  tock_test::advance_by(ctx, 30s);
  BOOST_CHECK_EQUAL(r.calls, 1);
}

BOOST_AUTO_TEST_CASE(a_pending_virtual_wait_is_outstanding_work_until_time_moves) {
  asio::io_context ctx;
  manual_timer t(ctx, 1s);
  tock_test::completion c;
  t.async_wait(tock_test::record(c));
  ctx.run_for(20ms);
  BOOST_CHECK(!ctx.stopped());  // still waiting: run() would not return
  BOOST_CHECK_EQUAL(c.calls, 0);
  std::thread mover([] {
    std::this_thread::sleep_for(10ms);
    manual_clock::advance(1s);
  });
  BOOST_CHECK(tock_test::run_until_idle(ctx));
  mover.join();
  BOOST_CHECK_EQUAL(c.calls, 1);
}

BOOST_AUTO_TEST_CASE(cancelling_needs_no_time_to_pass) {
  asio::io_context ctx;
  manual_timer t(ctx, 1h);
  tock_test::completion c;
  t.async_wait(tock_test::record(c));
  BOOST_CHECK_EQUAL(t.cancel(), 1u);
  BOOST_REQUIRE(tock_test::run_until_idle(ctx));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, aborted);
}

BOOST_AUTO_TEST_CASE(the_context_shuts_down_with_virtual_waits_pending) {
  tock_test::completion c;
  {
    asio::io_context ctx;
    manual_timer t(ctx, 1s);
    t.async_wait(tock_test::record(c));
  }
  manual_clock::advance(2s);  // the service and its driver are gone: nothing to wake
  BOOST_CHECK_EQUAL(c.calls, 0);  // aborted by the timer's destructor, destroyed unrun with the context
}

BOOST_AUTO_TEST_SUITE_END()
