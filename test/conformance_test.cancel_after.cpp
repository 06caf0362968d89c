// tock::cancel_after and tock::cancel_at with a tock::timer behave as asio::cancel_after and asio::cancel_at
// do with an asio::steady_timer: every templated case runs against both. Asio has those forms from 1.31 on,
// tock mirrors them from the same version, so on Boost 1.81 (Asio 1.26) this part of the suite is empty.
// Each operation here completes only when told to or when cancelled, so the timer deciding it is never a
// race with the operation: a case does not depend on how fast the machine is.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#if TOCK_ASIO_VERSION >= 103100

#include <boost/mpl/list.hpp>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

namespace {

using namespace std::chrono_literals;
using tock_test::aborted;
using tock_test::error_code;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;

using timer_types = boost::mpl::list<asio::steady_timer, tock::timer>;

// An operation that completes, with void(error_code, int), only when finish() is called or when its
// cancellation slot is emitted, recording the type; its completion is posted, as Asio's operations' are.
class manual_op {
 public:
  explicit manual_op(asio::io_context& ctx) : ctx_(ctx) {}

  template <typename Token>
  auto async_run(Token&& token) {
    return asio::async_initiate<Token, void(error_code, int)>(initiation{this}, token);
  }

  void finish(int value) { complete(error_code(), value); }

  std::optional<asio::cancellation_type> cancelled_with;

 private:
  struct initiation {
    manual_op* self;

    template <typename Handler>
    void operator()(Handler&& handler) const {
      self->handler_.emplace(std::forward<Handler>(handler));
      // The stored handler's slot: any_completion_handler takes over the one of the handler it wraps.
      auto slot = asio::get_associated_cancellation_slot(*self->handler_);
      if (slot.is_connected()) {
        slot.assign([op = self](asio::cancellation_type type) {
          op->cancelled_with = type;
          op->complete(aborted, 0);
        });
      }
    }
  };

  void complete(const error_code& ec, int value) {
    if (!handler_) return;
    asio::post(ctx_, [h = std::move(*handler_), ec, value]() mutable { std::move(h)(ec, value); });
    handler_.reset();
  }

  asio::io_context& ctx_;
  std::optional<asio::any_completion_handler<void(error_code, int)>> handler_;
};

// What the operation's handler saw.
struct outcome {
  int calls = 0;
  error_code ec;
  int value = -1;
};

auto record(outcome& o) {
  return [&o](const error_code& ec, int value) {
    ++o.calls;
    o.ec = ec;
    o.value = value;
  };
}

// asio::cancel_after / cancel_at for Asio's timer, tock's for tock's.
template <typename Timer, typename... Args>
auto cancel_after_on(Timer& timer, Args&&... args) {
  if constexpr (std::is_same_v<Timer, tock::timer>)
    return tock::cancel_after(timer, std::forward<Args>(args)...);
  else
    return asio::cancel_after(timer, std::forward<Args>(args)...);
}

template <typename Timer, typename... Args>
auto cancel_at_on(Timer& timer, Args&&... args) {
  if constexpr (std::is_same_v<Timer, tock::timer>)
    return tock::cancel_at(timer, std::forward<Args>(args)...);
  else
    return asio::cancel_at(timer, std::forward<Args>(args)...);
}

template <typename Timer>
void check_service_idle(asio::io_context& ctx) {
  if constexpr (std::is_same_v<Timer, tock::timer>) tock_test::check_idle(ctx);
}

// The operation outlives the timer's expiry: it is cancelled with `type`, not before the expiry the call set.
template <typename Timer>
void check_cancelled_at_expiry(std::optional<asio::cancellation_type> type) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  const auto before = steady_clock::now();
  if (type)
    op.async_run(cancel_after_on(timer, 20ms, *type, record(out)));
  else
    op.async_run(cancel_after_on(timer, 20ms, record(out)));
  BOOST_TEST((timer.expiry() >= before + 20ms && timer.expiry() <= steady_clock::now() + 20ms));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.calls == 1);
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == type.value_or(asio::cancellation_type::terminal)));
  BOOST_TEST((steady_clock::now() >= timer.expiry()));
  BOOST_TEST(timer.cancel() == 0u);
  check_service_idle<Timer>(ctx);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conformance_test)

// --- cancel_after / cancel_at with the caller's timer (Asio >= 1.31) -----------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_after_cancels_the_operation_at_expiry_terminal_by_default, Timer, timer_types) {
  check_cancelled_at_expiry<Timer>(std::nullopt);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_after_cancels_the_operation_at_expiry_with_the_given_type, Timer, timer_types) {
  check_cancelled_at_expiry<Timer>(asio::cancellation_type::partial);
  check_cancelled_at_expiry<Timer>(asio::cancellation_type::total);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_operation_completing_first_cancels_the_timers_wait, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(cancel_after_on(timer, 1h, record(out)));
  BOOST_TEST((timer.expiry() > steady_clock::now() + 59min));
  op.finish(42);

  // Ends at once: the handler waited for the timer's wait, which the completion cancelled, not for the hour.
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.calls == 1);
  BOOST_TEST(!out.ec);
  BOOST_TEST(out.value == 42);
  BOOST_TEST(!op.cancelled_with.has_value());
  BOOST_TEST(timer.cancel() == 0u);
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_at_a_past_time_cancels_the_operation_at_once, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  const auto past = steady_clock::now() - 1s;
  op.async_run(cancel_at_on(timer, past, asio::cancellation_type::partial, record(out)));
  BOOST_TEST((timer.expiry() == past));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.calls == 1);
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::partial));
  check_service_idle<Timer>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_at_with_a_token_is_terminal, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(cancel_at_on(timer, steady_clock::now() + 10ms, record(out)));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::terminal));
}

// The partial token as the completion token: the operation's default one (deferred, here) is adapted.
BOOST_AUTO_TEST_CASE_TEMPLATE(the_partial_forms_adapt_the_default_token, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome after, at;
  auto deferred_after = op.async_run(cancel_after_on(timer, 10ms, asio::cancellation_type::total));
  std::move(deferred_after)(record(after));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(after.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::total));

  ctx.restart();
  auto deferred_at = op.async_run(cancel_at_on(timer, steady_clock::now()));
  std::move(deferred_at)(record(at));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(at.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::terminal));
}

// Called with a token. (Asio 1.38.2's partial_cancel_after_timer::operator() does not compile: it leaves out
// the timer. Its cancel_at counterpart does, so that one runs against both.)
BOOST_AUTO_TEST_CASE_TEMPLATE(the_partial_cancel_at_adapts_the_token_it_is_called_with, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(cancel_at_on(timer, steady_clock::now(), asio::cancellation_type::partial)(record(out)));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::partial));
}

BOOST_AUTO_TEST_CASE(tock_partial_cancel_after_adapts_the_token_it_is_called_with) {
  asio::io_context ctx;
  tock::timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(tock::cancel_after(timer, 10ms, asio::cancellation_type::partial)(record(out)));
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::partial));
  tock_test::check_idle(ctx);
}

// The caller's own cancellation slot still reaches the operation, with the caller's type.
BOOST_AUTO_TEST_CASE_TEMPLATE(the_callers_slot_still_cancels_the_operation, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  asio::cancellation_signal signal;
  outcome out;
  op.async_run(cancel_after_on(timer, 1h, asio::bind_cancellation_slot(signal.slot(), record(out))));
  signal.emit(asio::cancellation_type::total);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::total));
  BOOST_TEST(timer.cancel() == 0u);
  check_service_idle<Timer>(ctx);
}

// The timer is the caller's: cancelling it ends its wait, which cancels the operation as the expiry would.
BOOST_AUTO_TEST_CASE_TEMPLATE(cancelling_the_timer_cancels_the_operation, Timer, timer_types) {
  asio::io_context ctx;
  Timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(cancel_after_on(timer, 1h, asio::cancellation_type::partial, record(out)));
  BOOST_TEST(timer.cancel() == 1u);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.ec == aborted);
  BOOST_TEST((op.cancelled_with == asio::cancellation_type::partial));
  check_service_idle<Timer>(ctx);
}

// Any duration type, saturating where Asio's takes Clock::duration only.
BOOST_AUTO_TEST_CASE(tock_cancel_after_saturates_a_huge_duration) {
  asio::io_context ctx;
  tock::timer timer(ctx);
  manual_op op(ctx);
  outcome out;
  op.async_run(tock::cancel_after(timer, std::chrono::hours::max(), record(out)));
  BOOST_TEST((timer.expiry() == tock::timer::time_point::max()));
  op.finish(7);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(out.value == 7);
  tock_test::check_idle(ctx);
}

BOOST_AUTO_TEST_SUITE_END()

#endif
