// tock/basic_timer.hpp: a drop-in for asio::basic_waitable_timer that waits in the context's timer service.
#ifndef TOCK_BASIC_TIMER_HPP
#define TOCK_BASIC_TIMER_HPP

#include <tock/config.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timer_object.hpp>
#include <tock/timer_service.hpp>

#include <chrono>
#include <cstddef>
#include <thread>
#include <type_traits>
#include <utility>

namespace tock {

/// A timer with the interface of asio::basic_waitable_timer. Its waits live in the io_context's
/// basic_timer_service: one heap slot per timer whatever its number of waits, and no Asio timer of its own.
/// Unlike Asio's, once cancel() or expires_at() returns, a wait that had already fired but whose handler had
/// not yet run on its executor completes with operation_aborted.
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe (as for Asio's timers). Start, cancel or destroy
/// from any thread; emit a wait's slot on its handler's executor (docs/design.md, "Threads").
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>, typename Executor = asio::any_io_executor>
class basic_timer {
 public:
  ///@{
  /// The executor, the clock and its types, the wait traits and the service, as asio::basic_waitable_timer's.
  using executor_type = Executor;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using traits_type = WaitTraits;
  using service_type = basic_timer_service<Clock, WaitTraits>;
  ///@}

  /// Rebinds the timer type to another executor.
  template <typename Executor1>
  struct rebind_executor {
    /// The timer type on `Executor1`.
    using other = basic_timer<Clock, WaitTraits, Executor1>;
  };

  /// A timer with no expiry set (a default time point), on `ex`'s io_context. O(1) after the first use of
  /// the context, which creates its service.
  explicit basic_timer(const executor_type& ex) : object_(ex, time_point()) {}

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  explicit basic_timer(ExecutionContext& ctx) : basic_timer(executor_type(ctx.get_executor())) {}

  /// A timer that expires at `t`.
  basic_timer(const executor_type& ex, const time_point& t) : object_(ex, t) {}

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_timer(ExecutionContext& ctx, const time_point& t) : basic_timer(executor_type(ctx.get_executor()), t) {}

  /// A timer that expires `d` from now. Any duration type, so that a huge one saturates at time_point::max()
  /// instead of overflowing on its way to Clock::duration; a negative `d` is already due.
  template <typename Rep, typename Period>
  basic_timer(const executor_type& ex, const std::chrono::duration<Rep, Period>& d)
      : object_(ex, detail::saturating_add(Clock::now(), d)) {}

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext, typename Rep, typename Period,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_timer(ExecutionContext& ctx, const std::chrono::duration<Rep, Period>& d)
      : basic_timer(executor_type(ctx.get_executor()), d) {}

  /// Takes over `other`'s expiry and pending waits. As in Asio, `other` is left as if constructed from its
  /// executor alone: it keeps its service and executor (a copy), its expiry is time_point(). O(waits).
  basic_timer(basic_timer&& other) : object_(std::move(other.object_), time_point()) {}

  /// The same from a timer with another executor type that converts to this one (`other` keeps its own).
  template <typename Executor1, std::enable_if_t<std::is_convertible_v<Executor1, Executor>, int> = 0>
  basic_timer(basic_timer<Clock, WaitTraits, Executor1>&& other) : object_(std::move(other.object_), time_point()) {}

  /// Aborts this timer's waits, then takes over `other`'s; `other` is left as after a move construction.
  basic_timer& operator=(basic_timer&& other) {
    object_.assign(std::move(other.object_), time_point());
    return *this;
  }

  /// The same from a timer with another executor type that converts to this one.
  template <typename Executor1, std::enable_if_t<std::is_convertible_v<Executor1, Executor>, int> = 0>
  basic_timer& operator=(basic_timer<Clock, WaitTraits, Executor1>&& other) {
    object_.assign(std::move(other.object_), time_point());
    return *this;
  }

  // Pending waits complete with operation_aborted. O(log N + waits). (timer_object's destructor)

  basic_timer(const basic_timer&) = delete;
  basic_timer& operator=(const basic_timer&) = delete;

  /// The executor given at construction (a copy; a moved-from timer keeps it). O(1).
  executor_type get_executor() noexcept { return object_.get_executor(); }

  /// Aborts every pending wait (operation_aborted), even one that fired but has not run; returns how many.
  /// O(waits of this timer).
  std::size_t cancel() { return object_.service().cancel(object_.impl()); }

  /// Aborts the oldest pending wait; returns 0 or 1. O(1).
  std::size_t cancel_one() { return object_.service().cancel_one(object_.impl()); }

  /// The expiry as an absolute time. O(1).
  time_point expiry() const { return object_.service().expiry(object_.impl()); }

  ///@{
  /// How late its waits may complete: in [expiry, expiry + slack], so that the service can complete several
  /// at one wake-up (tock's, not Asio's; a new timer takes the service's default_slack(), 0 unless set).
  /// set_slack applies to pending waits too; throws std::invalid_argument if `slack` < 0, with nothing
  /// changed. O(1) / O(log N).
  duration slack() const noexcept { return object_.impl().slack; }
  void set_slack(const duration& slack) { object_.service().set_slack(object_.impl(), slack); }
  ///@}

  /// Aborts pending waits and sets the expiry; returns how many waits were aborted. O(waits): a later
  /// expiry does not touch the heap, the timer is re-keyed lazily when its old key surfaces.
  std::size_t expires_at(const time_point& t) { return object_.service().expires_at(object_.impl(), t); }

  /// The same, `d` from now (any duration type, saturating; a negative `d` is already due).
  template <typename Rep, typename Period>
  std::size_t expires_after(const std::chrono::duration<Rep, Period>& d) {
    return object_.service().expires_at(object_.impl(), detail::saturating_add(Clock::now(), d));
  }

  /// Asio's deprecated members, present exactly when this Asio's basic_waitable_timer still has them
  /// (config.hpp): Boost 1.81 unless BOOST_ASIO_NO_DEPRECATED is defined; none in Asio 1.38.
  /// (Deprecated: Use non-error_code overload.) Cancel any asynchronous operations that are waiting on the
  /// timer. As cancel(); `ec` is cleared. O(waits of this timer).
  std::size_t cancel(error_code& ec)
    requires detail::asio_timer_has_deprecated_members
  {
    ec = error_code();
    return cancel();
  }

  /// (Deprecated: Use non-error_code overload.) Cancels one asynchronous operation that is waiting on the
  /// timer. As cancel_one(); `ec` is cleared. O(1).
  std::size_t cancel_one(error_code& ec)
    requires detail::asio_timer_has_deprecated_members
  {
    ec = error_code();
    return cancel_one();
  }

  /// (Deprecated: Use expiry().) Get the timer's expiry time as an absolute time. O(1).
  time_point expires_at() const
    requires detail::asio_timer_has_deprecated_members
  {
    return expiry();
  }

  /// (Deprecated: Use non-error_code overload.) Set the timer's expiry time as an absolute time. As
  /// expires_at(t); `ec` is cleared.
  std::size_t expires_at(const time_point& t, error_code& ec)
    requires detail::asio_timer_has_deprecated_members
  {
    ec = error_code();
    return expires_at(t);
  }

  /// (Deprecated: Use expiry().) Get the timer's expiry time relative to now (saturating). O(1).
  duration expires_from_now() const
    requires detail::asio_timer_has_deprecated_members
  {
    return detail::saturating_add(expiry(), -Clock::now().time_since_epoch()).time_since_epoch();
  }

  /// (Deprecated: Use expires_after().) Set the timer's expiry time relative to now. As expires_after(d).
  std::size_t expires_from_now(const duration& d)
    requires detail::asio_timer_has_deprecated_members
  {
    return expires_after(d);
  }

  /// (Deprecated: Use expires_after().) Set the timer's expiry time relative to now. As expires_after(d);
  /// `ec` is cleared.
  std::size_t expires_from_now(const duration& d, error_code& ec)
    requires detail::asio_timer_has_deprecated_members
  {
    ec = error_code();
    return expires_after(d);
  }

  /// Blocks the calling thread until the expiry has passed (sleeping, as Asio's). Never fails.
  void wait() {
    error_code ec;
    wait(ec);
  }

  /// The same; `ec` is cleared.
  void wait(error_code& ec) {
    for (time_point now = Clock::now(); now < expiry(); now = Clock::now())
      std::this_thread::sleep_for(WaitTraits::to_wait_duration(expiry() - now));
    ec = error_code();
  }

  /// Starts a wait for the expiry; completes with void(error_code): success, operation_aborted (cancel,
  /// reset, destruction, or a cancellation slot of any type), or tock::error::capacity_exceeded.
  /// O(log N): one heap operation, and none when the timer already holds a slot for an earlier key.
  /// At most one allocation, through the handler's associated allocator.
  template <typename WaitToken = asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = asio::default_completion_token_t<executor_type>()) {
    return object_.async_wait(std::forward<WaitToken>(token));
  }

 private:
  template <typename, typename, typename>
  friend class basic_timer;

  detail::timer_object<Clock, WaitTraits, Executor> object_;
};

}  // namespace tock

#endif
