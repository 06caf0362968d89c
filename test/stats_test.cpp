// basic_timer_service::stats() in virtual time (tock::manual_clock): every counter equals the operations
// performed, and the books balance (started == fired + aborted + withdrawn + pending) through a random mix.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock::error_code;
using tock::manual_clock;
using manual_timer = tock::basic_timer<manual_clock>;
using manual_deadline = tock::basic_deadline<manual_clock>;
using manual_service = tock::basic_timer_service<manual_clock>;

tock::timer_stats stats_of(asio::io_context& ctx) { return manual_service::of(ctx.get_executor()).stats(); }

void check_balanced(const tock::timer_stats& s) {
  BOOST_CHECK_MESSAGE(s.balanced(), "started " << s.started << " != fired " << s.fired << " + aborted " << s.aborted
                                               << " + withdrawn " << s.withdrawn << " + pending " << s.pending);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stats_test)

BOOST_AUTO_TEST_CASE(a_new_service_counts_nothing) {
  asio::io_context ctx;
  const tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.started + s.fired + s.aborted + s.withdrawn + s.refused, 0u);
  BOOST_CHECK_EQUAL(s.driver_arms + s.wakeups + s.empty_wakeups + s.lazy_extensions + s.rekeys, 0u);
  BOOST_CHECK(s.p99() == 0ns);
}

BOOST_AUTO_TEST_CASE(started_fired_aborted_and_pending_add_up) {
  asio::io_context ctx;
  manual_timer a(ctx, 10s), b(ctx, 20s), c(ctx, 30s);
  tock_test::completion ca, cb, cc, cs;
  a.async_wait(tock_test::record(ca));
  b.async_wait(tock_test::record(cb));
  c.async_wait(tock_test::record(cc));
  tock::async_sleep_until(ctx, manual_clock::now() + 5s, tock_test::record(cs));
  BOOST_CHECK_EQUAL(b.cancel(), 1u);
  tock_test::advance_by(ctx, 10s);
  const tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.started, 4u);
  BOOST_CHECK_EQUAL(s.fired, 2u);  // the sleep and a
  BOOST_CHECK_EQUAL(s.aborted, 1u);
  BOOST_CHECK_EQUAL(s.pending, 1u);
  BOOST_CHECK_EQUAL(s.peak_pending, 4u);
  BOOST_CHECK_EQUAL(s.refused, 0u);
  check_balanced(s);
}

BOOST_AUTO_TEST_CASE(refusals_are_counted_apart) {
  asio::io_context ctx;
  manual_service::of(ctx.get_executor()).set_capacity(1);
  manual_timer a(ctx, 10s), b(ctx, 20s);
  tock_test::completion ca, cb;
  a.async_wait(tock_test::record(ca));
  b.async_wait(tock_test::record(cb));
  tock_test::settle(ctx);
  BOOST_CHECK(cb.ec == tock::error::capacity_exceeded);
  const tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.started, 1u);
  BOOST_CHECK_EQUAL(s.refused, 1u);
  check_balanced(s);
  a.cancel();
  tock_test::settle(ctx);
}

BOOST_AUTO_TEST_CASE(lazy_extensions_are_counted_and_their_surfacing_rekeys_once) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  manual_deadline dl(ctx, start + 10s);
  tock_test::completion c;
  dl.async_wait(tock_test::record(c));
  for (int i = 2; i <= 5; ++i) dl.expires_at(start + i * 10s);  // later each time: no lock, no heap
  tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.lazy_extensions, 4u);
  BOOST_CHECK_EQUAL(s.rekeys, 0u);
  BOOST_CHECK_EQUAL(s.driver_arms, 1u);
  tock_test::advance_by(ctx, 10s);  // the old key surfaces: one re-key at the last expiry, nothing fires
  s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.rekeys, 1u);
  BOOST_CHECK_EQUAL(s.wakeups, 1u);
  BOOST_CHECK_EQUAL(s.empty_wakeups, 1u);
  BOOST_CHECK_EQUAL(s.fired, 0u);
  BOOST_CHECK_EQUAL(s.driver_arms, 2u);
  tock_test::advance_by(ctx, 40s);
  s = stats_of(ctx);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(s.fired, 1u);
  BOOST_CHECK_EQUAL(s.wakeups, 2u);
  BOOST_CHECK_EQUAL(s.empty_wakeups, 1u);
  dl.expires_at(start + 10s);  // earlier, with no wait: nothing in the heap moves
  BOOST_CHECK_EQUAL(stats_of(ctx).rekeys, 1u);
  check_balanced(s);
}

BOOST_AUTO_TEST_CASE(the_driver_arms_only_when_the_top_moves_earlier) {
  asio::io_context ctx;
  manual_timer t30(ctx, 30s), t20(ctx, 20s), t10(ctx, 10s), t40(ctx, 40s);
  tock_test::completion c[4];
  t30.async_wait(tock_test::record(c[0]));
  t20.async_wait(tock_test::record(c[1]));
  t10.async_wait(tock_test::record(c[2]));
  t40.async_wait(tock_test::record(c[3]));
  BOOST_CHECK_EQUAL(stats_of(ctx).driver_arms, 3u);
  tock_test::advance_by(ctx, 10s);  // fires t10, re-arms for t20
  const tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.driver_arms, 4u);
  BOOST_CHECK_EQUAL(s.wakeups, 1u);
  BOOST_CHECK_EQUAL(s.fired, 1u);
  for (auto* t : {&t20, &t30, &t40}) t->cancel();
  tock_test::settle(ctx);
  check_balanced(stats_of(ctx));
}

BOOST_AUTO_TEST_CASE(lateness_is_measured_from_the_deadline) {
  asio::io_context ctx;
  manual_timer on_time(ctx, 10s), late(ctx, 20s);
  tock_test::completion c1, c2;
  on_time.async_wait(tock_test::record(c1));
  tock_test::advance_by(ctx, 10s);
  late.async_wait(tock_test::record(c2));
  tock_test::advance_by(ctx, 15s);  // 5 s late
  const tock::timer_stats s = stats_of(ctx);
  BOOST_CHECK_EQUAL(s.fired, 2u);
  BOOST_CHECK_EQUAL(s.lateness_buckets[0], 1u);
  BOOST_CHECK_EQUAL(s.lateness_buckets[tock::timer_stats::bucket_of(5s)], 1u);
  BOOST_CHECK(s.max_lateness == 5s);
  BOOST_CHECK(s.p50() == 0ns);
  BOOST_CHECK(s.p99() == 5s);  // the bucket's upper bound, capped at the maximum
  BOOST_CHECK_EQUAL(tock::timer_stats::bucket_of(1ns), 1u);
  BOOST_CHECK_EQUAL(tock::timer_stats::bucket_of(3ns), 2u);
  BOOST_CHECK_EQUAL(tock::timer_stats::bucket_of(-1ns), 0u);
}

BOOST_AUTO_TEST_CASE(a_timed_read_is_withdrawn_when_it_completes_and_fires_when_it_times_out) {
  asio::io_context ctx;
  tock_test::socket_pair s(ctx);
  std::array<char, 8> buf{};
  tock_test::io_result first, second;
  s.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(30s, tock_test::record_io(first)));
  asio::write(s.client, asio::buffer("x", 1));
  tock_test::run_until(
      ctx, [&] { return first.calls == 1; }, 5s);
  BOOST_REQUIRE_EQUAL(first.calls, 1);
  BOOST_CHECK(!first.ec);
  tock::timer_stats st = stats_of(ctx);
  BOOST_CHECK_EQUAL(st.withdrawn, 1u);
  BOOST_CHECK_EQUAL(st.fired, 0u);
  s.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(30s, tock_test::record_io(second)));
  manual_clock::advance(30s);
  tock_test::run_until(
      ctx, [&] { return second.calls == 1; }, 5s);
  BOOST_REQUIRE_EQUAL(second.calls, 1);
  BOOST_CHECK(second.ec == tock::error::timed_out);
  st = stats_of(ctx);
  BOOST_CHECK_EQUAL(st.fired, 1u);
  BOOST_CHECK_EQUAL(st.started, 2u);
  check_balanced(st);
}

BOOST_AUTO_TEST_CASE(a_random_mix_keeps_the_books_balanced) {
  asio::io_context ctx;
  std::mt19937 rng(42);
  std::vector<std::unique_ptr<manual_timer>> timers;
  for (int i = 0; i < 16; ++i) timers.push_back(std::make_unique<manual_timer>(ctx, manual_clock::now()));
  int completions = 0, starts = 0;
  auto count = [&](const error_code&) { ++completions; };
  for (int step = 0; step < 5000; ++step) {
    auto& t = *timers[rng() % timers.size()];
    switch (rng() % 7) {
      case 0:
      case 1:
        t.async_wait(count);
        ++starts;
        break;
      case 2: t.cancel(); break;
      case 3: t.expires_after(std::chrono::milliseconds(rng() % 50)); break;
      case 4:
        tock::async_sleep_until(ctx, manual_clock::now() + std::chrono::milliseconds(rng() % 50), count);
        ++starts;
        break;
      case 5: manual_clock::advance(std::chrono::milliseconds(rng() % 20)); break;
      default: tock_test::settle(ctx); break;
    }
    if (step % 500 == 0) check_balanced(stats_of(ctx));
  }
  for (auto& t : timers) t->cancel();
  tock_test::advance_by(ctx, 100ms);  // the sleeps left fire
  const tock::timer_stats s = stats_of(ctx);
  check_balanced(s);
  BOOST_CHECK_EQUAL(s.pending, 0u);
  BOOST_CHECK_EQUAL(s.started, static_cast<std::uint64_t>(starts));
  BOOST_CHECK_EQUAL(s.fired + s.aborted, static_cast<std::uint64_t>(completions));
}

BOOST_AUTO_TEST_SUITE_END()
