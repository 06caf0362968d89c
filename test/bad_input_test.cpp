// Edge and bad input: negative and overflowing durations, extreme time points, waits parked at
// time_point::max(), the capacity limit, and tock's error codes.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <ratio>
#include <string>
#include <system_error>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using tock::error_code;

// The outcome of one wait, in the order waits completed.
class outcomes {
 public:
  auto handler(int id) {
    return [this, id](const error_code& ec) { done_.push_back({id, ec}); };
  }
  std::size_t size() const { return done_.size(); }
  int count(int id) const {
    int n = 0;
    for (const auto& d : done_) n += d.id == id ? 1 : 0;
    return n;
  }
  // The error code `id` completed with; requires that it completed exactly once.
  error_code ec(int id) const {
    BOOST_REQUIRE_EQUAL(count(id), 1);
    for (const auto& d : done_)
      if (d.id == id) return d.ec;
    return {};
  }
  std::size_t index_of(int id) const {
    BOOST_REQUIRE_EQUAL(count(id), 1);
    for (std::size_t i = 0; i < done_.size(); ++i)
      if (done_[i].id == id) return i;
    return 0;
  }

 private:
  struct entry {
    int id;
    error_code ec;
  };
  std::vector<entry> done_;
};

const error_code aborted_ec(asio::error::operation_aborted);
const error_code exceeded_ec = tock::make_error_code(tock::error::capacity_exceeded);

}  // namespace

BOOST_AUTO_TEST_SUITE(bad_input_test)

BOOST_AUTO_TEST_CASE(negative_durations_complete_at_once_with_success) {
  asio::io_context ctx;
  outcomes out;
  {
    tock::timer a(ctx), b(ctx, -1s);
    BOOST_TEST(a.expires_after(-5s) == 0u);
    BOOST_TEST((a.expiry() < clock_type::now()));
    BOOST_TEST((b.expiry() < clock_type::now()));
    a.async_wait(out.handler(0));
    b.async_wait(out.handler(1));
    tock::async_sleep_for(ctx, -1h, out.handler(2));
    tock::async_sleep_for(ctx, std::chrono::hours::min(), out.handler(3));
    tock::async_sleep_for(ctx, std::chrono::duration<double>(-1e300), out.handler(4));
    tock::async_sleep_for(ctx, -1ns, out.handler(5));
    tock::async_sleep_for(ctx, 50ms, out.handler(100));  // reference: due later than all of them
    ctx.run();
  }
  for (int id = 0; id <= 5; ++id) {
    BOOST_TEST_CONTEXT("wait " << id) {
      BOOST_TEST(!out.ec(id));
      BOOST_TEST(out.index_of(id) < out.index_of(100));
    }
  }
}

BOOST_AUTO_TEST_CASE(huge_durations_saturate_to_time_point_max) {
  asio::io_context ctx;
  tock::timer t(ctx);
  t.expires_after(std::chrono::nanoseconds::max());
  BOOST_TEST((t.expiry() == time_point::max()));
  t.expires_after(std::chrono::nanoseconds::max() - 1s);  // fits the duration, overflows when added to now
  BOOST_TEST((t.expiry() == time_point::max()));
  tock::timer constructed(ctx, std::chrono::nanoseconds::max());
  BOOST_TEST((constructed.expiry() == time_point::max()));
}

// Durations of other types must saturate too, not overflow while being converted to nanoseconds.
BOOST_AUTO_TEST_CASE(huge_durations_of_other_types_saturate_a_timers_expiry_to_time_point_max) {
  asio::io_context ctx;
  tock::timer t(ctx);
  auto from_now = [](time_point at) {
    return std::chrono::duration_cast<std::chrono::seconds>(at - clock_type::now()).count();
  };
  t.expires_after(std::chrono::hours::max());
  BOOST_TEST((t.expiry() == time_point::max()), "hours::max(): expiry is " << from_now(t.expiry()) << " s from now");
  t.expires_after(std::chrono::duration<double>(1e300));
  BOOST_TEST((t.expiry() == time_point::max()), "1e300 s: expiry is " << from_now(t.expiry()) << " s from now");
  t.expires_after(std::chrono::duration<std::int64_t, std::ratio<31'556'952>>(1'000));  // 1000 years
  BOOST_TEST((t.expiry() == time_point::max()), "1000 years: expiry is " << from_now(t.expiry()) << " s from now");
  tock::timer constructed(ctx, std::chrono::hours::max());
  BOOST_TEST((constructed.expiry() == time_point::max()),
             "constructed: expiry is " << from_now(constructed.expiry()) << " s from now");
}

BOOST_AUTO_TEST_CASE(huge_negative_durations_of_other_types_are_due_at_once) {
  asio::io_context ctx;
  tock::timer t(ctx);
  t.expires_after(std::chrono::hours::min());
  BOOST_TEST((t.expiry() < clock_type::now()));
  t.expires_after(std::chrono::duration<double>(-1e300));
  BOOST_TEST((t.expiry() < clock_type::now()));
}

// A sleep's deadline is not observable, but one at time_point::max() is parked and needs no heap slot: with a
// capacity of zero, only saturated sleeps are accepted (and never complete).
BOOST_AUTO_TEST_CASE(huge_sleep_durations_of_any_type_saturate_to_time_point_max) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  service.set_capacity(0);
  outcomes out;
  std::vector<asio::cancellation_signal> signals(5);
  auto slot = [&](int id) {
    return asio::bind_cancellation_slot(signals[static_cast<std::size_t>(id)].slot(), out.handler(id));
  };
  tock::async_sleep_for(ctx, std::chrono::hours::max(), slot(0));
  tock::async_sleep_for(ctx, std::chrono::nanoseconds::max() - 1s, slot(1));
  tock::async_sleep_for(ctx, std::chrono::duration<double>(1e300), slot(2));
  tock::async_sleep_for(ctx, std::chrono::duration<std::int64_t, std::ratio<31'556'952>>(1'000),
                        slot(3));  // 1000 years
  tock::async_sleep_for(ctx, std::chrono::duration<long double, std::ratio<1, 1000>>(1e30L), slot(4));
  BOOST_TEST(service.pending() == 5u);
  ctx.run_for(10ms);
  BOOST_TEST(out.size() == 0u);  // neither fired nor refused for capacity
  for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
  ctx.run();
  for (int id = 0; id < 5; ++id) BOOST_TEST(out.ec(id) == aborted_ec);
}

BOOST_AUTO_TEST_CASE(large_durations_that_fit_do_not_saturate) {
  asio::io_context ctx;
  tock::timer t(ctx);
  const time_point before = clock_type::now();
  t.expires_after(std::chrono::hours(24 * 365));
  BOOST_TEST((t.expiry() != time_point::max()));
  BOOST_TEST((t.expiry() >= before + std::chrono::hours(24 * 365)));
}

BOOST_AUTO_TEST_CASE(waits_with_saturated_deadlines_never_fire_until_cancelled) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  asio::cancellation_signal first, second;
  {
    tock::timer t(ctx);
    t.expires_after(std::chrono::nanoseconds::max());
    t.async_wait(out.handler(0));
    tock::async_sleep_for(ctx, std::chrono::nanoseconds::max(),
                          asio::bind_cancellation_slot(first.slot(), out.handler(1)));
    tock::async_sleep_until(ctx, std::chrono::time_point<clock_type, std::chrono::hours>::max(),
                            asio::bind_cancellation_slot(second.slot(), out.handler(2)));
    BOOST_TEST(service.pending() == 3u);
    ctx.run_for(20ms);
    BOOST_TEST(out.size() == 0u);
    BOOST_TEST(!ctx.stopped());
    BOOST_TEST(t.cancel() == 1u);
    first.emit(asio::cancellation_type::terminal);
    second.emit(asio::cancellation_type::terminal);
    ctx.run();  // returns: nothing is pending any more
  }
  BOOST_TEST(out.ec(0) == aborted_ec);
  BOOST_TEST(out.ec(1) == aborted_ec);
  BOOST_TEST(out.ec(2) == aborted_ec);
  BOOST_TEST(service.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(time_point_min_and_far_past_time_points_complete_at_once) {
  asio::io_context ctx;
  outcomes out;
  {
    tock::timer a(ctx), b(ctx.get_executor(), time_point::min()), c(ctx);
    a.expires_at(time_point::min());
    a.async_wait(out.handler(0));
    b.async_wait(out.handler(1));
    c.async_wait(out.handler(2));  // a default expiry: the clock's epoch
    tock::async_sleep_until(ctx, time_point::min(), out.handler(3));
    tock::async_sleep_until(ctx, clock_type::now() - 1000h, out.handler(4));
    tock::async_sleep_until(ctx, std::chrono::time_point<clock_type, std::chrono::hours>::min(), out.handler(5));
    tock::async_sleep_for(ctx, 50ms, out.handler(100));
    ctx.run();
  }
  for (int id = 0; id <= 5; ++id) {
    BOOST_TEST_CONTEXT("wait " << id) {
      BOOST_TEST(!out.ec(id));
      BOOST_TEST(out.index_of(id) < out.index_of(100));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_wait_at_time_point_max_takes_no_heap_slot) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  service.set_capacity(1);
  {
    tock::timer never(ctx.get_executor(), time_point::max());
    never.async_wait(out.handler(0));
    never.async_wait(out.handler(1));
    tock::async_sleep_until(ctx, time_point::max(), out.handler(2));
    tock::async_sleep_for(ctx, 1ms, out.handler(3));  // the one heap slot is still free
    BOOST_TEST(service.pending() == 4u);
    BOOST_TEST(service.invariants_hold());
    while (out.count(3) == 0) ctx.run_one();
    BOOST_TEST(out.size() == 1u);
    BOOST_TEST(!out.ec(3));
    never.cancel();
  }
  ctx.run_for(20ms);  // the parked sleep keeps the context busy: run() would not return
  BOOST_TEST(out.ec(0) == aborted_ec);
  BOOST_TEST(out.ec(1) == aborted_ec);
  BOOST_TEST(out.count(2) == 0);
}

BOOST_AUTO_TEST_CASE(a_wait_at_time_point_max_is_accepted_with_zero_capacity) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  service.set_capacity(0);
  {
    tock::timer never(ctx.get_executor(), time_point::max());
    never.async_wait(out.handler(0));
    tock::async_sleep_for(ctx, 1ms, out.handler(1));  // needs a heap slot: refused
    ctx.run_for(20ms);
    BOOST_TEST(out.ec(1) == exceeded_ec);
    BOOST_TEST(out.count(0) == 0);
  }
  ctx.run();
  BOOST_TEST(out.ec(0) == aborted_ec);
}

BOOST_AUTO_TEST_CASE(a_wait_at_time_point_max_keeps_run_from_returning_until_cancelled) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  tock::timer t(ctx.get_executor(), time_point::max());
  t.async_wait(out.handler(0));
  BOOST_TEST(service.pending() == 1u);
  ctx.run_for(20ms);  // returns for the time limit, not for lack of work
  BOOST_TEST(out.size() == 0u);
  BOOST_TEST(!ctx.stopped());
  BOOST_TEST(t.cancel() == 1u);
  const std::size_t ran = ctx.run();  // runs the aborted handler, then returns: nothing is pending any more
  BOOST_TEST(ran == 1u, "run() after cancel() ran " << ran << " handlers; stopped() was " << ctx.stopped());
  BOOST_TEST(out.count(0) == 1);
  if (out.count(0) == 1) BOOST_TEST(out.ec(0) == aborted_ec);
  BOOST_TEST(service.pending() == 0u);
  BOOST_TEST(service.invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_sleep_at_time_point_max_keeps_run_from_returning_until_cancelled) {
  asio::io_context ctx;
  outcomes out;
  asio::cancellation_signal signal;
  tock::async_sleep_until(ctx, time_point::max(), asio::bind_cancellation_slot(signal.slot(), out.handler(0)));
  ctx.run_for(20ms);
  BOOST_TEST(out.size() == 0u);
  BOOST_TEST(!ctx.stopped());
  signal.emit(asio::cancellation_type::partial);
  const std::size_t ran = ctx.run();
  BOOST_TEST(ran == 1u, "run() after the cancellation ran " << ran << " handlers");
  BOOST_TEST(out.count(0) == 1);
  if (out.count(0) == 1) BOOST_TEST(out.ec(0) == aborted_ec);
}

BOOST_AUTO_TEST_CASE(a_parked_timer_moved_keeps_its_waits) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  {
    std::optional<tock::timer> a(std::in_place, ctx.get_executor(), time_point::max());
    tock::timer b(ctx.get_executor(), time_point::max());
    a->async_wait(out.handler(0));
    b.async_wait(out.handler(1));
    tock::timer moved(std::move(*a));
    a.reset();
    BOOST_TEST(service.pending() == 2u);
    BOOST_TEST(service.invariants_hold());
    BOOST_TEST(moved.cancel() == 1u);
    BOOST_TEST(service.invariants_hold());
    BOOST_TEST(b.cancel() == 1u);
    ctx.run();
  }
  BOOST_TEST(out.ec(0) == aborted_ec);
  BOOST_TEST(out.ec(1) == aborted_ec);
}

BOOST_AUTO_TEST_CASE(sleeps_past_capacity_complete_with_capacity_exceeded) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  service.set_capacity(3);
  BOOST_TEST(service.capacity() == 3u);
  for (int i = 0; i < 5; ++i) tock::async_sleep_for(ctx, 2ms, out.handler(i));
  BOOST_TEST(service.pending() == 3u);
  ctx.run();
  for (int i = 0; i < 3; ++i) BOOST_TEST(!out.ec(i));
  BOOST_TEST(out.ec(3) == exceeded_ec);
  BOOST_TEST(out.ec(4) == exceeded_ec);
  BOOST_TEST((out.ec(3) == tock::error::capacity_exceeded));
}

BOOST_AUTO_TEST_CASE(timer_waits_past_capacity_complete_with_capacity_exceeded) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  service.set_capacity(2);
  {
    const time_point t = clock_type::now() + 2ms;
    tock::timer a(ctx.get_executor(), t), b(ctx.get_executor(), t), c(ctx.get_executor(), t);
    a.async_wait(out.handler(0));
    b.async_wait(out.handler(1));
    c.async_wait(out.handler(2));  // a third slot: refused
    a.async_wait(out.handler(3));  // a already holds a slot: accepted
    ctx.run();
  }
  BOOST_TEST(!out.ec(0));
  BOOST_TEST(!out.ec(1));
  BOOST_TEST(out.ec(2) == exceeded_ec);
  BOOST_TEST(!out.ec(3));
}

BOOST_AUTO_TEST_CASE(capacity_counts_only_timers_with_waits_and_sleeps) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  service.set_capacity(2);
  {
    tock::timer a(ctx.get_executor(), clock_type::now() + 1h), b(ctx.get_executor(), clock_type::now() + 1h);
    a.async_wait(out.handler(0));
    b.async_wait(out.handler(1));
    a.cancel();
    b.cancel();
    ctx.run();
    ctx.restart();
    BOOST_TEST(service.pending() == 0u);
    // Both timers are alive but wait for nothing: the two slots are free for these sleeps.
    tock::async_sleep_for(ctx, 1ms, out.handler(2));
    tock::async_sleep_for(ctx, 1ms, out.handler(3));
    ctx.run();
  }
  BOOST_TEST(out.ec(0) == aborted_ec);
  BOOST_TEST(out.ec(1) == aborted_ec);
  BOOST_TEST(!out.ec(2), "the first sleep completed with: " << out.ec(2).message());
  BOOST_TEST(!out.ec(3), "the second sleep completed with: " << out.ec(3).message());
}

BOOST_AUTO_TEST_CASE(lowering_capacity_keeps_waits_already_pending) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  for (int i = 0; i < 5; ++i) tock::async_sleep_for(ctx, 2ms, out.handler(i));
  service.set_capacity(2);
  tock::async_sleep_for(ctx, 2ms, out.handler(5));
  ctx.run();
  for (int i = 0; i < 5; ++i) BOOST_TEST(!out.ec(i));
  BOOST_TEST(out.ec(5) == exceeded_ec);
}

BOOST_AUTO_TEST_CASE(capacity_is_clamped_to_what_the_heap_can_index) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  service.set_capacity(std::numeric_limits<std::size_t>::max());
  BOOST_TEST(service.capacity() == std::size_t{tock::detail::heap_node::max_position});
}

BOOST_AUTO_TEST_CASE(timed_out_compares_equal_to_errc_timed_out) {
  const error_code ec = tock::make_error_code(tock::error::timed_out);
  BOOST_TEST((ec == sys::errc::timed_out));
  BOOST_TEST((ec == std::errc::timed_out));
  BOOST_TEST((ec == tock::error::timed_out));
  BOOST_TEST((ec != sys::errc::operation_canceled));
  BOOST_TEST(ec != error_code(asio::error::operation_aborted));
  BOOST_TEST(!ec.message().empty());
  BOOST_TEST(std::string(ec.category().name()) == "tock");
}

BOOST_AUTO_TEST_CASE(other_tock_errors_have_messages_and_do_not_match_timed_out) {
  for (const tock::error e : {tock::error::capacity_exceeded, tock::error::shut_down}) {
    const error_code ec = tock::make_error_code(e);
    BOOST_TEST(!ec.message().empty());
    BOOST_TEST((ec != sys::errc::timed_out));
    BOOST_TEST(ec != tock::make_error_code(tock::error::timed_out));
    BOOST_TEST(static_cast<bool>(ec));
  }
  BOOST_TEST(tock::make_error_code(tock::error::capacity_exceeded).message() !=
             tock::make_error_code(tock::error::shut_down).message());
}

BOOST_AUTO_TEST_CASE(a_huge_sleep_on_a_bound_cancellation_slot_can_be_cancelled) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  asio::cancellation_signal signal;
  tock::async_sleep_for(ctx, std::chrono::hours::max(), asio::bind_cancellation_slot(signal.slot(), out.handler(0)));
  BOOST_TEST(service.pending() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(service.pending() == 0u);
  const std::size_t ran = ctx.run();
  BOOST_TEST(ran == 1u, "run() after the cancellation ran " << ran << " handlers");
  BOOST_TEST(out.count(0) == 1);
  if (out.count(0) == 1) BOOST_TEST(out.ec(0) == aborted_ec);
}

BOOST_AUTO_TEST_CASE(a_timer_wait_at_a_saturated_expiry_on_a_bound_cancellation_slot_can_be_cancelled) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  outcomes out;
  asio::cancellation_signal signal;
  {
    tock::timer t(ctx, std::chrono::nanoseconds::max());
    t.async_wait(out.handler(0));
    t.async_wait(asio::bind_cancellation_slot(signal.slot(), out.handler(1)));
    signal.emit(asio::cancellation_type::total);
    BOOST_TEST(service.pending() == 1u);
    BOOST_TEST(service.invariants_hold());
    ctx.run_for(10ms);
    BOOST_TEST(out.ec(1) == aborted_ec);
    BOOST_TEST(out.count(0) == 0);
  }
  ctx.run();
  BOOST_TEST(out.ec(0) == aborted_ec);
}

// Like Asio's timers, tock accepts an lvalue completion handler and copies it.
BOOST_AUTO_TEST_CASE(lvalue_handlers_are_copied_as_asio_does) {
  asio::io_context ctx;
  int calls = 0;
  struct counting {
    int* calls;
    void operator()(const error_code& ec) const { *calls += ec ? 100 : 1; }
  };
  const counting handler{&calls};
  {
    tock::timer t(ctx, 1ms);
    t.async_wait(handler);
    tock::async_sleep_for(ctx, 1ms, handler);
    ctx.run();
  }
  BOOST_TEST(calls == 2);
}

BOOST_AUTO_TEST_SUITE_END()
