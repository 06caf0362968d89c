// tock::timer behaves as asio::steady_timer does: every templated case below runs against both and expects
// the same observable results. The tock-only cases at the end cover where tock promises more than Asio.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/tock.hpp>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock_test::allocation_counts;
using tock_test::completion;
using tock_test::counting_allocator;
using tock_test::error_code;
using tock_test::record;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;

using timer_types = boost::mpl::list<asio::steady_timer, tock::timer>;

// Long enough never to pass during a test: a wait with this expiry completes only if it is aborted.
constexpr auto never = 1h;

// A handler that appends `id` to `log` (and nothing else), for completion-order checks.
auto log_as(std::vector<int>& log, int id) {
  return [&log, id](const error_code&) { log.push_back(id); };
}

// For tock timers: the context's service has no wait left and its heap is consistent. Nothing for Asio's.
template <typename Timer>
void check_service_idle(asio::io_context& ctx) {
  if constexpr (std::is_same_v<Timer, tock::timer>) {
    auto& service = tock::timer_service::of(ctx.get_executor());
    BOOST_TEST(service.pending() == 0u);
    BOOST_TEST(service.invariants_hold());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conformance_test)

// --- Moved-from timers: as Asio documents, a moved-from timer is in the state of one constructed
// from its executor alone: same executor, expiry time_point(), and usable again.

namespace {

// Waits on `moved_from` again (expires_after, async_wait) and checks the wait completes with success, while
// the wait that moved away is aborted by cancelling `to`.
template <typename Timer, typename To>
void check_waits_again(asio::io_context& ctx, Timer& moved_from, To& to, completion& moved_wait) {
  BOOST_CHECK(moved_from.expiry() == typename Timer::time_point());
  BOOST_CHECK(moved_from.get_executor() == typename Timer::executor_type(ctx.get_executor()));
  completion again;
  moved_from.expires_after(5ms);
  moved_from.async_wait(record(again));
  BOOST_CHECK_EQUAL(to.cancel(), 1u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(moved_wait.calls, 1);
  BOOST_CHECK_EQUAL(moved_wait.ec, asio::error::operation_aborted);
  BOOST_CHECK_EQUAL(again.calls, 1);
  BOOST_CHECK(!again.ec);
  BOOST_CHECK_EQUAL(moved_from.cancel(), 0u);
  check_service_idle<Timer>(ctx);
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_moved_from_timer_waits_again_like_a_new_one, Timer, timer_types) {
  asio::io_context ctx;
  Timer from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  Timer to(std::move(from));
  check_waits_again(ctx, from, to, moved_wait);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_move_assigned_from_timer_waits_again_like_a_new_one, Timer, timer_types) {
  asio::io_context ctx;
  Timer from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  Timer to(ctx, never);
  to = std::move(from);
  check_waits_again(ctx, from, to, moved_wait);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_timer_moved_from_by_a_converting_move_waits_again_like_a_new_one, Timer, timer_types) {
  using io_timer = typename Timer::template rebind_executor<asio::io_context::executor_type>::other;
  asio::io_context ctx;
  {
    io_timer from(ctx.get_executor(), never);
    completion moved_wait;
    from.async_wait(record(moved_wait));
    Timer to(std::move(from));
    check_waits_again(ctx, from, to, moved_wait);
  }
  ctx.restart();
  {
    io_timer from(ctx.get_executor(), never);
    completion moved_wait;
    from.async_wait(record(moved_wait));
    Timer to(ctx, never);
    to = std::move(from);
    check_waits_again(ctx, from, to, moved_wait);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_moved_from_timer_with_a_strand_keeps_it, Timer, timer_types) {
  asio::io_context ctx;
  const auto typed_strand = asio::make_strand(ctx);
  const asio::any_io_executor strand = typed_strand;
  Timer from(strand, never);
  Timer to(std::move(from));
  BOOST_CHECK(from.get_executor() == strand);
  BOOST_CHECK(to.get_executor() == strand);
  Timer assigned(ctx);
  assigned = std::move(to);
  BOOST_CHECK(to.get_executor() == strand);
  BOOST_CHECK(assigned.get_executor() == strand);
  bool in_strand = false;
  from.expires_after(1ms);
  from.async_wait([&](const error_code&) { in_strand = typed_strand.running_in_this_thread(); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK(in_strand);
}

// --- Asio's deprecated members: tock::timer has them exactly when this Asio's steady_timer does (Boost 1.81
// unless BOOST_ASIO_NO_DEPRECATED is defined; Asio 1.38 has none). Each case runs where they exist.

template <typename Timer>
inline constexpr bool deprecated_members = tock::detail::has_deprecated_timer_members<Timer>;

// A timer set to `never` with one wait pending, which the case's change of expiry aborts.
template <typename Timer>
struct pending_wait {
  asio::io_context ctx;
  Timer timer{ctx, never};
  completion aborted;
  pending_wait() { timer.async_wait(record(aborted)); }
};

BOOST_AUTO_TEST_CASE(tock_timers_have_the_deprecated_members_exactly_when_asios_do) {
  static_assert(deprecated_members<tock::timer> == deprecated_members<asio::steady_timer>);
  static_assert(deprecated_members<tock::basic_timer<tock::manual_clock>> ==
                deprecated_members<asio::basic_waitable_timer<tock::manual_clock>>);
#if defined(TOCK_STANDALONE_ASIO) && ASIO_VERSION >= 103800
  static_assert(!deprecated_members<asio::steady_timer>, "Asio 1.38 removed them");
#elif !defined(TOCK_STANDALONE_ASIO) && BOOST_ASIO_VERSION == 102600 && !defined(BOOST_ASIO_NO_DEPRECATED)
  static_assert(deprecated_members<asio::steady_timer>, "Boost 1.81 has them");
#endif
  BOOST_TEST_MESSAGE("deprecated timer members: " << (deprecated_members<tock::timer> ? "present" : "absent"));
}

// Asio's own strand tests re-arm a timer this way.
BOOST_AUTO_TEST_CASE_TEMPLATE(expires_at_getter_re_arms_a_timer_as_asios_strand_tests_do, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    asio::io_context ctx;
    Timer timer(ctx, steady_clock::now());
    const auto first = timer.expires_at();
    BOOST_CHECK(first == timer.expiry());
    timer.expires_at(timer.expires_at() + 2ms);
    BOOST_CHECK(timer.expiry() == first + 2ms);
    completion c;
    timer.async_wait(record(c));
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK_EQUAL(c.calls, 1);
    BOOST_CHECK(!c.ec);
    BOOST_CHECK(c.at >= first + 2ms);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_from_now_getter_is_the_expiry_relative_to_now, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    asio::io_context ctx;
    Timer timer(ctx, 1h);
    const typename Timer::duration left = timer.expires_from_now();
    BOOST_CHECK(left <= 1h);
    BOOST_CHECK(left > 59min);
    timer.expires_at(steady_clock::now() - 1s);
    BOOST_CHECK(timer.expires_from_now() < -999ms);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_from_now_sets_the_expiry_and_aborts_the_pending_wait, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    pending_wait<Timer> w;
    auto& [ctx, timer, aborted] = w;
    const auto before = steady_clock::now();
    BOOST_CHECK_EQUAL(timer.expires_from_now(typename Timer::duration(5ms)), 1u);
    BOOST_CHECK(timer.expiry() >= before + 5ms);
    BOOST_CHECK(timer.expiry() <= steady_clock::now() + 5ms);
    completion c;
    timer.async_wait(record(c));
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK_EQUAL(aborted.ec, asio::error::operation_aborted);
    BOOST_CHECK_EQUAL(c.calls, 1);
    BOOST_CHECK(!c.ec);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_from_now_with_an_error_code_clears_it, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    pending_wait<Timer> w;
    auto& [ctx, timer, aborted] = w;
    error_code ec = asio::error::invalid_argument;
    BOOST_CHECK_EQUAL(timer.expires_from_now(typename Timer::duration(5ms), ec), 1u);
    BOOST_CHECK(!ec);
    BOOST_CHECK(timer.expiry() <= steady_clock::now() + 5ms);
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK_EQUAL(aborted.ec, asio::error::operation_aborted);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_at_with_an_error_code_sets_the_expiry_and_clears_it, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    pending_wait<Timer> w;
    auto& [ctx, timer, aborted] = w;
    error_code ec = asio::error::invalid_argument;
    const auto t = steady_clock::now() + 5ms;
    BOOST_CHECK_EQUAL(timer.expires_at(t, ec), 1u);
    BOOST_CHECK(!ec);
    BOOST_CHECK(timer.expiry() == t);
    BOOST_CHECK_EQUAL(timer.expires_at(t, ec), 0u);
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK_EQUAL(aborted.ec, asio::error::operation_aborted);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_with_an_error_code_aborts_every_wait_and_clears_it, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    asio::io_context ctx;
    Timer timer(ctx, never);
    completion a, b;
    timer.async_wait(record(a));
    timer.async_wait(record(b));
    error_code ec = asio::error::invalid_argument;
    BOOST_CHECK_EQUAL(timer.cancel(ec), 2u);
    BOOST_CHECK(!ec);
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK_EQUAL(a.ec, asio::error::operation_aborted);
    BOOST_CHECK_EQUAL(b.ec, asio::error::operation_aborted);
    ec = asio::error::invalid_argument;
    BOOST_CHECK_EQUAL(timer.cancel(ec), 0u);
    BOOST_CHECK(!ec);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_one_with_an_error_code_aborts_the_oldest_wait_and_clears_it, Timer, timer_types) {
  if constexpr (deprecated_members<Timer>) {
    asio::io_context ctx;
    Timer timer(ctx, never);
    std::vector<int> log;
    timer.async_wait(log_as(log, 1));
    timer.async_wait(log_as(log, 2));
    error_code ec = asio::error::invalid_argument;
    BOOST_CHECK_EQUAL(timer.cancel_one(ec), 1u);
    BOOST_CHECK(!ec);
    ctx.poll();
    BOOST_CHECK(log == std::vector<int>{1});
    BOOST_CHECK_EQUAL(timer.cancel_one(ec), 1u);
    BOOST_CHECK_EQUAL(timer.cancel_one(ec), 0u);
    BOOST_CHECK(!ec);
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_CHECK((log == std::vector<int>{1, 2}));
  }
}


BOOST_AUTO_TEST_CASE_TEMPLATE(a_timer_rebound_to_use_awaitable_as_default_waits_with_no_token, Timer, timer_types) {
  // use_awaitable_t<>::as_default_on_t rebinds the executor to a wrapper of any_io_executor.
  using awaitable_timer = typename asio::use_awaitable_t<>::template as_default_on_t<Timer>;
  asio::io_context ctx;
  awaitable_timer t(ctx, std::chrono::steady_clock::now());
  bool done = false;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await t.async_wait();
        done = true;
      },
      asio::detached);
  ctx.run_for(std::chrono::seconds(10));  // bounded; returns once the coroutine is done
  BOOST_CHECK(done);
}

BOOST_AUTO_TEST_CASE(tock_timer_service_of_takes_a_context_as_of_context_does) {
  asio::io_context ctx;
  tock::timer_service& by_context = tock::timer_service::of(ctx);
  BOOST_CHECK(&by_context == &tock::timer_service::of_context(ctx));
  BOOST_CHECK(&by_context == &tock::timer_service::of(ctx.get_executor()));
  BOOST_CHECK(&by_context == &tock::timer_service::of(asio::make_strand(ctx)));
  asio::io_context other;
  BOOST_CHECK(&tock::timer_service::of(other) != &by_context);
}

// --- Completion order -------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(timers_complete_in_expiry_order_whatever_order_their_waits_started, Timer, timer_types) {
  asio::io_context ctx;
  std::vector<int> log;
  const auto base = steady_clock::now();
  std::vector<std::unique_ptr<Timer>> timers;
  for (int id : {3, 0, 4, 2, 1}) {  // timer `id` expires (id + 1) * 5 ms after base
    timers.push_back(std::make_unique<Timer>(ctx, base + (id + 1) * 5ms));
    timers.back()->async_wait(log_as(log, id));
  }

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(log == (std::vector<int>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(waits_on_one_timer_complete_in_the_order_they_started, Timer, timer_types) {
  asio::io_context ctx;
  std::vector<int> log;
  Timer timer(ctx, 5ms);
  for (int id = 0; id < 4; ++id) timer.async_wait(log_as(log, id));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(log == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_completes_with_success_not_before_the_expiry, Timer, timer_types) {
  asio::io_context ctx;
  completion c;
  Timer timer(ctx, 10ms);
  const auto expiry = timer.expiry();
  timer.async_wait(record(c));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST((c.at >= expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_on_an_expired_timer_completes_with_success, Timer, timer_types) {
  asio::io_context ctx;
  completion expired_by_duration, expired_at_past_time, never_set;
  Timer negative(ctx, -5ms);
  Timer past(ctx, steady_clock::now() - 1s);
  Timer unset(ctx);  // a default time point: long past
  negative.async_wait(record(expired_by_duration));
  past.async_wait(record(expired_at_past_time));
  unset.async_wait(record(never_set));

  BOOST_TEST(run_until_idle(ctx));
  for (const completion* c : {&expired_by_duration, &expired_at_past_time, &never_set}) {
    BOOST_TEST(c->calls == 1);
    BOOST_TEST(!c->ec);
  }
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_lvalue_handler_is_copied_and_stays_usable, Timer, timer_types) {
  asio::io_context ctx;
  completion first, second;
  Timer timer(ctx, 1ms);
  auto handler = record(first);
  const auto const_handler = record(second);
  timer.async_wait(handler);
  timer.async_wait(const_handler);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(first.calls == 1);
  BOOST_TEST(second.calls == 1);
  handler(error_code());  // the caller's copy is left intact
  BOOST_TEST(first.calls == 2);
  check_service_idle<Timer>(ctx);
}

// --- Aborted waits ----------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_aborts_every_pending_wait, Timer, timer_types) {
  asio::io_context ctx;
  completion first, second;
  Timer timer(ctx, never);
  timer.async_wait(record(first));
  timer.async_wait(record(second));

  timer.cancel();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(first.calls == 1);
  BOOST_TEST(first.ec == asio::error::operation_aborted);
  BOOST_TEST(second.calls == 1);
  BOOST_TEST(second.ec == asio::error::operation_aborted);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_one_aborts_the_oldest_wait_only, Timer, timer_types) {
  asio::io_context ctx;
  std::vector<int> log;
  completion oldest, middle, newest;
  Timer timer(ctx, 10ms);
  timer.async_wait([&](const error_code& ec) {
    record(oldest)(ec);
    log.push_back(0);
  });
  timer.async_wait([&](const error_code& ec) {
    record(middle)(ec);
    log.push_back(1);
  });
  timer.async_wait([&](const error_code& ec) {
    record(newest)(ec);
    log.push_back(2);
  });

  timer.cancel_one();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(oldest.ec == asio::error::operation_aborted);
  BOOST_TEST(!middle.ec);
  BOOST_TEST(!newest.ec);
  BOOST_TEST(log == (std::vector<int>{0, 1, 2}), boost::test_tools::per_element());
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_after_aborts_the_pending_wait_and_a_new_wait_uses_the_new_expiry, Timer,
                              timer_types) {
  asio::io_context ctx;
  completion before_reset, after_reset;
  Timer timer(ctx, never);
  timer.async_wait(record(before_reset));

  timer.expires_after(5ms);
  const auto new_expiry = timer.expiry();
  timer.async_wait(record(after_reset));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(before_reset.calls == 1);
  BOOST_TEST(before_reset.ec == asio::error::operation_aborted);
  BOOST_TEST(after_reset.calls == 1);
  BOOST_TEST(!after_reset.ec);
  BOOST_TEST((after_reset.at >= new_expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_at_aborts_the_pending_wait_and_a_new_wait_uses_the_new_expiry, Timer,
                              timer_types) {
  asio::io_context ctx;
  completion before_reset, after_reset;
  Timer timer(ctx, never);
  timer.async_wait(record(before_reset));

  const auto new_expiry = steady_clock::now() + 5ms;
  timer.expires_at(new_expiry);
  timer.async_wait(record(after_reset));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(before_reset.calls == 1);
  BOOST_TEST(before_reset.ec == asio::error::operation_aborted);
  BOOST_TEST(after_reset.calls == 1);
  BOOST_TEST(!after_reset.ec);
  BOOST_TEST((after_reset.at >= new_expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_earlier_expiry_set_by_expires_after_takes_effect, Timer, timer_types) {
  asio::io_context ctx;
  completion c;
  Timer timer(ctx, 20ms);
  timer.async_wait([](const error_code&) {});
  timer.expires_after(never);  // a later expiry first, with a wait pending...
  timer.async_wait([](const error_code&) {});
  timer.expires_after(5ms);  // ...then an earlier one: the last wait must not wait for `never`
  timer.async_wait(record(c));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(destroying_a_timer_aborts_its_pending_waits, Timer, timer_types) {
  asio::io_context ctx;
  completion first, second;
  auto timer = std::make_unique<Timer>(ctx, never);
  timer->async_wait(record(first));
  timer->async_wait(record(second));

  timer.reset();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(first.calls == 1);
  BOOST_TEST(first.ec == asio::error::operation_aborted);
  BOOST_TEST(second.calls == 1);
  BOOST_TEST(second.ec == asio::error::operation_aborted);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(aborting_one_timer_leaves_the_other_timers_waits_alone, Timer, timer_types) {
  asio::io_context ctx;
  completion aborted, kept;
  Timer cancelled_timer(ctx, 5ms);
  Timer other_timer(ctx, 10ms);
  cancelled_timer.async_wait(record(aborted));
  other_timer.async_wait(record(kept));

  cancelled_timer.cancel();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(aborted.ec == asio::error::operation_aborted);
  BOOST_TEST(kept.calls == 1);
  BOOST_TEST(!kept.ec);
  check_service_idle<Timer>(ctx);
}

// --- Counts -----------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_returns_the_number_of_waits_it_aborted, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, never);
  BOOST_TEST(timer.cancel() == 0u);
  for (int i = 0; i < 3; ++i) timer.async_wait([](const error_code&) {});
  BOOST_TEST(timer.cancel() == 3u);
  BOOST_TEST(timer.cancel() == 0u);
  BOOST_TEST(run_until_idle(ctx));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_one_returns_one_while_waits_are_pending_then_zero, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, never);
  BOOST_TEST(timer.cancel_one() == 0u);
  timer.async_wait([](const error_code&) {});
  timer.async_wait([](const error_code&) {});
  BOOST_TEST(timer.cancel_one() == 1u);
  BOOST_TEST(timer.cancel_one() == 1u);
  BOOST_TEST(timer.cancel_one() == 0u);
  BOOST_TEST(run_until_idle(ctx));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_after_and_expires_at_return_the_number_of_waits_they_aborted, Timer,
                              timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, never);
  BOOST_TEST(timer.expires_after(never) == 0u);
  timer.async_wait([](const error_code&) {});
  timer.async_wait([](const error_code&) {});
  BOOST_TEST(timer.expires_after(never) == 2u);
  timer.async_wait([](const error_code&) {});
  BOOST_TEST(timer.expires_at(steady_clock::now() + never) == 1u);
  BOOST_TEST(timer.expires_at(steady_clock::now() + never) == 0u);
  BOOST_TEST(run_until_idle(ctx));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_after_the_waits_completed_returns_zero, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, 1ms);
  timer.async_wait([](const error_code&) {});
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(timer.cancel() == 0u);
  BOOST_TEST(timer.cancel_one() == 0u);
  check_service_idle<Timer>(ctx);
}

// --- Per-operation cancellation ---------------------------------------------------------------------------

namespace {

// Three waits: two on one timer, one on another; the first is bound to a cancellation slot. Emitting `type`
// aborts that wait only.
template <typename Timer>
void check_slot_aborts_just_its_wait(asio::cancellation_type type) {
  asio::io_context ctx;
  asio::cancellation_signal signal;
  completion bound, sibling, other;
  Timer timer(ctx, 10ms);
  Timer other_timer(ctx, 10ms);
  timer.async_wait(asio::bind_cancellation_slot(signal.slot(), record(bound)));
  timer.async_wait(record(sibling));
  other_timer.async_wait(record(other));

  signal.emit(type);

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(bound.calls == 1);
  BOOST_TEST(bound.ec == asio::error::operation_aborted);
  BOOST_TEST(sibling.calls == 1);
  BOOST_TEST(!sibling.ec);
  BOOST_TEST(other.calls == 1);
  BOOST_TEST(!other.ec);
  BOOST_TEST(timer.cancel() == 0u);
  check_service_idle<Timer>(ctx);
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(terminal_cancellation_through_a_slot_aborts_just_that_wait, Timer, timer_types) {
  check_slot_aborts_just_its_wait<Timer>(asio::cancellation_type::terminal);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(partial_cancellation_through_a_slot_aborts_just_that_wait, Timer, timer_types) {
  check_slot_aborts_just_its_wait<Timer>(asio::cancellation_type::partial);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(total_cancellation_through_a_slot_aborts_just_that_wait, Timer, timer_types) {
  check_slot_aborts_just_its_wait<Timer>(asio::cancellation_type::total);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_slot_aborts_a_wait_that_is_not_the_oldest, Timer, timer_types) {
  asio::io_context ctx;
  asio::cancellation_signal signal;
  std::vector<int> log;
  completion bound;
  Timer timer(ctx, 10ms);
  timer.async_wait(log_as(log, 0));
  timer.async_wait(asio::bind_cancellation_slot(signal.slot(), record(bound)));
  timer.async_wait(log_as(log, 2));

  signal.emit(asio::cancellation_type::terminal);

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(bound.ec == asio::error::operation_aborted);
  BOOST_TEST(log == (std::vector<int>{0, 2}), boost::test_tools::per_element());
  check_service_idle<Timer>(ctx);
}

// --- Moves ------------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(move_construction_carries_pending_waits_and_the_expiry, Timer, timer_types) {
  asio::io_context ctx;
  std::vector<int> log;
  completion last;
  Timer from(ctx, 10ms);
  const auto expiry = from.expiry();
  from.async_wait(log_as(log, 0));
  from.async_wait([&](const error_code& ec) {
    record(last)(ec);
    log.push_back(1);
  });

  Timer to(std::move(from));

  BOOST_TEST((to.expiry() == expiry));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(log == (std::vector<int>{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(!last.ec);
  BOOST_TEST((last.at >= expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(the_moved_to_timer_owns_the_moved_waits, Timer, timer_types) {
  asio::io_context ctx;
  completion first, second;
  Timer from(ctx, never);
  from.async_wait(record(first));
  from.async_wait(record(second));

  Timer to(std::move(from));

  BOOST_TEST(to.cancel() == 2u);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(first.ec == asio::error::operation_aborted);
  BOOST_TEST(second.ec == asio::error::operation_aborted);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(converting_move_construction_carries_pending_waits, Timer, timer_types) {
  using typed_timer = typename Timer::template rebind_executor<asio::io_context::executor_type>::other;
  asio::io_context ctx;
  completion c;
  typed_timer from(ctx, 10ms);
  const auto expiry = from.expiry();
  from.async_wait(record(c));

  Timer to(std::move(from));

  BOOST_TEST((to.expiry() == expiry));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST((c.at >= expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(move_assignment_carries_pending_waits_and_the_expiry, Timer, timer_types) {
  asio::io_context ctx;
  completion c;
  Timer from(ctx, 10ms);
  const auto expiry = from.expiry();
  from.async_wait(record(c));
  Timer to(ctx, never);

  to = std::move(from);

  BOOST_TEST((to.expiry() == expiry));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST((c.at >= expiry));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(move_assignment_aborts_the_waits_of_the_assigned_to_timer, Timer, timer_types) {
  asio::io_context ctx;
  completion overwritten, moved;
  Timer from(ctx, 10ms);
  from.async_wait(record(moved));
  Timer to(ctx, never);
  to.async_wait(record(overwritten));

  to = std::move(from);

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(overwritten.calls == 1);
  BOOST_TEST(overwritten.ec == asio::error::operation_aborted);
  BOOST_TEST(moved.calls == 1);
  BOOST_TEST(!moved.ec);
  check_service_idle<Timer>(ctx);
}

// --- Allocation -------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_allocates_through_its_associated_allocator_and_frees_it_all, Timer, timer_types) {
  asio::io_context ctx;
  allocation_counts counts;
  completion c;
  {
    Timer timer(ctx, 5ms);
    timer.async_wait(asio::bind_allocator(counting_allocator<char>(counts), record(c)));
    BOOST_TEST(counts.allocations.load() >= 1u);  // the wait itself, at initiation

    BOOST_TEST(run_until_idle(ctx));
  }
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(counts.deallocations.load() == counts.allocations.load());
  BOOST_TEST(counts.live_bytes.load() == 0);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_aborted_wait_frees_all_it_allocated_through_its_allocator, Timer, timer_types) {
  asio::io_context ctx;
  allocation_counts counts;
  completion c;
  {
    Timer timer(ctx, never);
    timer.async_wait(asio::bind_allocator(counting_allocator<char>(counts), record(c)));
    BOOST_TEST(counts.allocations.load() >= 1u);
    timer.cancel();

    BOOST_TEST(run_until_idle(ctx));
  }
  BOOST_TEST(c.ec == asio::error::operation_aborted);
  BOOST_TEST(counts.deallocations.load() == counts.allocations.load());
  BOOST_TEST(counts.live_bytes.load() == 0);
  check_service_idle<Timer>(ctx);
}

// --- Blocking waits and expiry ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(blocking_wait_returns_not_before_the_expiry, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, 10ms);
  const auto expiry = timer.expiry();

  timer.wait();

  BOOST_TEST((steady_clock::now() >= expiry));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(blocking_wait_with_error_code_returns_success_not_before_the_expiry, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, 10ms);
  const auto expiry = timer.expiry();
  error_code ec = asio::error::would_block;

  timer.wait(ec);

  BOOST_TEST(!ec);
  BOOST_TEST((steady_clock::now() >= expiry));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(blocking_wait_on_an_expired_timer_returns_at_once_with_success, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx, steady_clock::now() - 1s);
  error_code ec = asio::error::would_block;

  timer.wait(ec);

  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expiry_reports_what_was_set, Timer, timer_types) {
  asio::io_context ctx;
  const auto t = steady_clock::now() + 1s;

  Timer at_construction(ctx, t);
  BOOST_TEST((at_construction.expiry() == t));

  Timer unset(ctx);
  BOOST_TEST((unset.expiry() == steady_clock::time_point()));

  unset.expires_at(t + 1s);
  BOOST_TEST((unset.expiry() == t + 1s));

  const auto before = steady_clock::now();
  Timer after_duration(ctx, 2s);
  unset.expires_after(3s);
  const auto after = steady_clock::now();
  BOOST_TEST((after_duration.expiry() >= before + 2s));
  BOOST_TEST((after_duration.expiry() <= after + 2s));
  BOOST_TEST((unset.expiry() >= before + 3s));
  BOOST_TEST((unset.expiry() <= after + 3s));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(get_executor_returns_the_executor_it_was_made_with, Timer, timer_types) {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  Timer on_context(ctx);
  Timer on_strand(strand);
  BOOST_TEST((on_context.get_executor() == typename Timer::executor_type(ctx.get_executor())));
  BOOST_TEST((on_strand.get_executor() == typename Timer::executor_type(strand)));
}

// --- Where handlers run -----------------------------------------------------------------------------------
//
// A handler's associated executor decides where it runs; Asio submits a completion to it as if by dispatch()
// from the thread that runs the timer's context. asio::system_executor runs a dispatched function in place,
// so the handler runs on the thread that runs the context, whether the wait fired or was aborted.

namespace {

// The thread a wait's handler, bound to asio::system_executor, runs on; and the code it saw.
template <typename Timer>
std::pair<std::thread::id, error_code> where_a_system_executor_handler_runs(bool abort) {
  asio::io_context ctx;
  auto ran = std::make_shared<std::promise<std::pair<std::thread::id, error_code>>>();
  auto result = ran->get_future();
  Timer timer(ctx, abort ? steady_clock::duration(never) : steady_clock::duration(1ms));
  timer.async_wait(asio::bind_executor(asio::system_executor(), [ran](const error_code& ec) {
    ran->set_value({std::this_thread::get_id(), ec});
  }));
  if (abort) timer.cancel();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_REQUIRE(result.wait_for(5s) == std::future_status::ready);
  return result.get();
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_fired_wait_runs_a_system_executor_handler_on_the_thread_running_the_context, Timer,
                              timer_types) {
  const auto [thread, ec] = where_a_system_executor_handler_runs<Timer>(false);
  BOOST_TEST(!ec);
  BOOST_TEST((thread == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_aborted_wait_runs_a_system_executor_handler_on_the_thread_running_the_context, Timer,
                              timer_types) {
  const auto [thread, ec] = where_a_system_executor_handler_runs<Timer>(true);
  BOOST_TEST(ec == asio::error::operation_aborted);
  BOOST_TEST((thread == std::this_thread::get_id()));
}

// --- Where tock promises more than Asio -------------------------------------------------------------------
//
// A wait whose handler runs on a foreign executor (here a strand) fires, then waits for the strand, which is
// busy. Asio would still report success to a handler that runs after a cancel(); tock promises that once
// cancel() (or expires_after, or the wait's cancellation slot) returns, that wait completes with
// operation_aborted, and that it is counted.

namespace {

struct fired_behind_a_busy_strand {
  asio::io_context ctx{2};
  asio::strand<asio::io_context::executor_type> strand = asio::make_strand(ctx);
  tock::timer timer{ctx, 10ms};
  completion c;
  bool had_fired = false;       // the wait had left the service's heap when the action ran
  bool handler_had_run = true;  // the handler had run when the action ran

  // Starts a wait with `handler` bound to the strand, blocks the strand until the wait has fired, then runs
  // `action` in the strand, all on a context run by two threads (one runs the service while the strand is
  // busy on the other).
  template <typename Handler, typename Action>
  void run(Handler handler, Action action) {
    auto& service = tock::timer_service::of(ctx.get_executor());
    timer.async_wait(asio::bind_executor(strand, std::move(handler)));
    asio::post(strand, [&] {
      const auto give_up = steady_clock::now() + 5s;
      while (service.pending() != 0 && steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
      had_fired = service.pending() == 0;
      std::this_thread::sleep_for(20ms);  // the fired wait is now queued behind the next job
    });
    asio::post(strand, [&, action]() mutable {
      handler_had_run = c.calls != 0;
      action();
    });
    std::thread second([&] { ctx.run(); });
    ctx.run();
    second.join();
    BOOST_TEST(had_fired);
    BOOST_TEST(!handler_had_run);
    BOOST_TEST(c.calls == 1);
    BOOST_TEST(c.ec == asio::error::operation_aborted);
    BOOST_TEST(service.pending() == 0u);
    BOOST_TEST(service.invariants_hold());
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(tock_cancel_aborts_and_counts_a_wait_that_fired_but_waits_for_its_strand) {
  fired_behind_a_busy_strand f;
  std::size_t cancelled = 0;
  f.run(record(f.c), [&] { cancelled = f.timer.cancel(); });
  BOOST_TEST(cancelled == 1u);
}

BOOST_AUTO_TEST_CASE(tock_cancel_one_aborts_a_wait_that_fired_but_waits_for_its_strand) {
  fired_behind_a_busy_strand f;
  std::size_t cancelled = 0;
  f.run(record(f.c), [&] { cancelled = f.timer.cancel_one(); });
  BOOST_TEST(cancelled == 1u);
}

BOOST_AUTO_TEST_CASE(tock_expires_after_aborts_a_wait_that_fired_but_waits_for_its_strand) {
  fired_behind_a_busy_strand f;
  std::size_t aborted = 0;
  f.run(record(f.c), [&] { aborted = f.timer.expires_after(1h); });
  BOOST_TEST(aborted == 1u);
}

BOOST_AUTO_TEST_CASE(tock_a_slot_aborts_a_wait_that_fired_but_waits_for_its_strand) {
  fired_behind_a_busy_strand f;
  asio::cancellation_signal signal;
  f.run(asio::bind_cancellation_slot(signal.slot(), record(f.c)),
        [&] { signal.emit(asio::cancellation_type::terminal); });
}

BOOST_AUTO_TEST_CASE(tock_move_assigning_over_a_timer_aborts_its_wait_that_fired_but_waits_for_its_strand) {
  fired_behind_a_busy_strand f;
  tock::timer other(f.ctx);
  f.run(record(f.c), [&] { f.timer = std::move(other); });
}

BOOST_AUTO_TEST_SUITE_END()
