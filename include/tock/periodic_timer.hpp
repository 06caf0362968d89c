// tock/periodic_timer.hpp: a timer that ticks every period on a fixed grid, with a policy for missed ticks.
#ifndef TOCK_PERIODIC_TIMER_HPP
#define TOCK_PERIODIC_TIMER_HPP

#include <tock/basic_timer.hpp>
#include <tock/config.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timer_object.hpp>
#include <tock/detail/wakeup_time.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace tock {

/// What a periodic timer does about the ticks that passed while its loop was stalled or its handler slow.
enum class missed_ticks : unsigned char {
  skip,   ///< drop them: the next tick is the first point of the grid after now (the default)
  /// deliver them back to back until caught up, staying on the grid; being earlier, they come before every later
  /// deadline of the service (deadline order), which waits meanwhile
  burst,
  delay,  ///< start over: the next tick is one period after the wait that follows a tick starts
};

namespace detail {

// What a periodic timer owns, shared with its pending wait's handler so that the handler may run (or be
// destroyed at shutdown) after the timer object is gone or has moved. Tick n is at origin + n * period,
// computed by multiplication from the grid's origin, never by adding periods, so that it does not drift.
template <typename Clock, typename WaitTraits, typename Executor>
struct periodic_state {
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  static_assert(std::is_integral_v<typename duration::rep>, "a periodic timer's grid is computed in integers");

  // The timer: reset when the owner goes. Its waits are this state's, one at a time, so that between two it
  // has none and moving its expiry later takes no lock (timer_service::move_expiry).
  std::optional<timer_object<Clock, WaitTraits, Executor>> timer;
  time_point origin;
  std::uint64_t next = 0;  // the index of the next tick on the grid
  duration period;
  missed_ticks policy;
  bool restart = false;      // delay: the next wait starts the period over from its own start
  std::uint64_t waiting = 0;  // the id of the pending wait, or 0: one wait at a time, as a tick goes to one
  std::uint64_t last_id = 0;  // the id of the last wait started
  std::uint64_t ticks = 0;

  // The pending wait `id` has ended (or been cancelled): another may start.
  void ended(std::uint64_t id) noexcept {
    if (waiting == id) waiting = 0;
  }

  // The time of tick `next` (time_point::max() once the grid leaves the clock's range).
  time_point tick_time() const noexcept { return grid_point(origin, period, next); }

  // When a successful wait completes. Skip places the next tick after it, so it reads the clock: a handler
  // before it in the same wake-up may have taken long. Burst and delay only report it: the reading of the
  // wake-up that completed the tick when that wake-up's batch runs the handler, else the clock's
  // (wakeup_time.hpp).
  time_point completion_time() const {
    if (policy == missed_ticks::skip || !timer) return Clock::now();
    return wakeup_time<Clock>::of(timer->service().core().get());
  }

  // A successful wait for tick `next` completed at `now`: moves to the next tick by the policy and returns how
  // many whole periods have passed since the tick's time.
  std::uint64_t consume(const time_point& now) noexcept {
    const time_point at = tick_time();
    const std::uint64_t missed = now > at ? static_cast<std::uint64_t>(saturating_sub(now, at) / period) : 0;
    ++ticks;
    switch (policy) {
      case missed_ticks::skip: next += 1 + missed; break;  // cannot wrap: missed < 2^63
      case missed_ticks::burst: next += 1; break;
      case missed_ticks::delay: restart = true; break;
    }
    return missed;
  }
};

// The handler given to the periodic timer's inner timer: on success it consumes the tick, then calls the
// user's handler with (error_code, missed). Its associators are the user handler's.
template <typename State, typename Handler>
class tick_handler {
 public:
  tick_handler(std::shared_ptr<State> state, std::uint64_t id, Handler handler)
      : state_(std::move(state)), id_(id), handler_(std::move(handler)) {}
  tick_handler(tick_handler&&) = default;
  tick_handler& operator=(tick_handler&&) = delete;
  // Destroyed without being called (a failed start, shutdown): the timer may wait again.
  ~tick_handler() {
    if (state_) state_->ended(id_);
  }

  void operator()(const error_code& ec) {
    const std::shared_ptr<State> state = std::move(state_);
    state->ended(id_);
    const std::uint64_t missed = ec ? 0 : state->consume(state->completion_time());
    std::move(handler_)(ec, missed);
  }

  const Handler& user_handler() const noexcept { return handler_; }

 private:
  std::shared_ptr<State> state_;
  std::uint64_t id_;
  Handler handler_;
};

}  // namespace detail

/// A timer that completes a wait at each tick of a grid: every `period` from a first tick, each completion
/// reporting how many ticks it missed. One heap slot per timer, kept from tick to tick: a wait started from
/// the tick's handler re-keys it in place (one O(log N) sift, see timer_node.hpp rule 4) and moves its
/// expiry without a lock; no allocation per tick beyond the wait's own operation, which tock recycles.
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe (as for Asio's timers); the wait's handler
/// updates the timer's state when it runs or is destroyed, so run it where the timer is used (its executor
/// or strand). See docs/design.md, "Threads".
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>, typename Executor = asio::any_io_executor>
class basic_periodic_timer {
  using state = detail::periodic_state<Clock, WaitTraits, Executor>;

 public:
  ///@{
  /// The executor, the clock and its types.
  using executor_type = Executor;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  ///@}

  /// Rebinds the periodic timer type to another executor.
  template <typename Executor1>
  struct rebind_executor {
    /// The periodic timer type on `Executor1`.
    using other = basic_periodic_timer<Clock, WaitTraits, Executor1>;
  };

  /// Ticks every `period`, the first tick one period from now. Any duration type, converted as
  /// basic_timer::expires_after converts it: a huge one saturates at duration::max() (the ticks after the
  /// first leave the clock's range: they never come), a fraction of the clock's tick is dropped. Throws
  /// std::invalid_argument if the converted period is not positive. Allocates once (the state, which stays
  /// put when the timer moves).
  template <typename Rep, typename Period>
  basic_periodic_timer(const executor_type& ex, const std::chrono::duration<Rep, Period>& period,
                       missed_ticks policy = missed_ticks::skip)
      : basic_periodic_timer(ex, detail::saturating_add(Clock::now(), checked(period)), period, policy) {}

  /// Ticks every `period` (any duration type, as above), the first tick at `first` (a past time is due at
  /// once). Throws as above.
  template <typename Rep, typename Period>
  basic_periodic_timer(const executor_type& ex, const time_point& first,
                       const std::chrono::duration<Rep, Period>& period, missed_ticks policy = missed_ticks::skip)
      : executor_(ex), state_(std::make_shared<state>()) {
    state_->period = checked(period);  // first: a refused period creates no timer
    state_->timer.emplace(ex, first);
    state_->origin = first;
    state_->policy = policy;
  }

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext, typename Rep, typename Period,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_periodic_timer(ExecutionContext& ctx, const std::chrono::duration<Rep, Period>& period,
                       missed_ticks policy = missed_ticks::skip)
      : basic_periodic_timer(executor_type(ctx.get_executor()), period, policy) {}

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext, typename Rep, typename Period,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_periodic_timer(ExecutionContext& ctx, const time_point& first, const std::chrono::duration<Rep, Period>& period,
                       missed_ticks policy = missed_ticks::skip)
      : basic_periodic_timer(executor_type(ctx.get_executor()), first, period, policy) {}

  /// Takes over `other`'s grid and pending wait; `other` keeps its executor and may be destroyed or assigned
  /// to (any other call throws std::logic_error). O(1), no allocation.
  basic_periodic_timer(basic_periodic_timer&& other) noexcept
      : executor_(other.executor_), state_(std::move(other.state_)) {}

  /// Aborts this timer's pending wait (operation_aborted), then takes over `other`'s.
  basic_periodic_timer& operator=(basic_periodic_timer&& other) noexcept {
    if (this != &other) {
      release();
      executor_ = other.executor_;
      state_ = std::move(other.state_);
    }
    return *this;
  }

  /// A pending wait completes with operation_aborted. O(log N).
  ~basic_periodic_timer() { release(); }

  basic_periodic_timer(const basic_periodic_timer&) = delete;
  basic_periodic_timer& operator=(const basic_periodic_timer&) = delete;

  /// The executor given at construction (a moved-from timer keeps it). O(1).
  executor_type get_executor() const noexcept { return executor_; }

  ///@{
  /// The period and the policy. O(1).
  duration period() const { return get().period; }
  missed_ticks policy() const { return get().policy; }
  ///@}

  /// When the next wait completes: the next tick's time (under delay, once a tick completed and until the
  /// next wait starts: one period from now). O(1).
  time_point next_tick() const {
    const state& s = get();
    return s.restart ? detail::saturating_add(Clock::now(), s.period) : s.tick_time();
  }

  ///@{
  /// How late a tick may complete, as basic_timer::slack(); the grid does not move. O(1) / O(log N).
  duration slack() const { return get().timer->impl().slack; }
  void set_slack(const duration& slack) {
    auto& t = *get().timer;
    t.service().set_slack(t.impl(), slack);
  }
  ///@}

  /// How many ticks have completed so far. O(1).
  std::uint64_t ticks() const { return get().ticks; }

  /// From the next tick on (which keeps its time, even if a wait for it is pending), ticks are `period`
  /// apart (any duration type, converted as by the constructors). Throws std::invalid_argument, with nothing
  /// changed, if the converted period is not positive. O(1).
  template <typename Rep, typename Period>
  void set_period(const std::chrono::duration<Rep, Period>& period) {
    state& s = get();
    const duration p = checked(period);
    s.origin = s.tick_time();
    s.next = 0;
    s.period = p;
  }

  /// Aborts the pending wait (operation_aborted) and returns how many were aborted (0 or 1); a new wait may
  /// start at once and is for the same tick. (A wait aborted through its cancellation slot instead leaves
  /// the timer busy until its handler has run.) O(1).
  std::size_t cancel() {
    state& s = get();
    const std::size_t n = s.timer->service().cancel(s.timer->impl());
    s.waiting = 0;
    return n;
  }

  /// Waits for the next tick; completes with void(error_code, std::uint64_t missed): success and the number
  /// of whole periods between the tick's time and the completion (skip: the ticks dropped, counted when the
  /// handler runs; burst: the ticks still due after this one; delay: how late it ran; these two counted at the
  /// wake-up that completed the tick when that wake-up runs the handler: one clock read per wake-up), or
  /// operation_aborted (cancel(), destruction, or a cancellation slot of any type) or
  /// tock::error::capacity_exceeded, with missed = 0 and the tick kept.
  /// One wait at a time: throws sys::system_error (asio::error::already_started) if one is
  /// pending. O(log N) at most (O(1) when the tick moves later), as basic_timer::async_wait.
  template <typename WaitToken = asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = asio::default_completion_token_t<executor_type>()) {
    return asio::async_initiate<WaitToken, void(error_code, std::uint64_t)>(initiate_wait{executor_, state_}, token);
  }

 private:
  class initiate_wait {
   public:
    using executor_type = Executor;

    initiate_wait(const executor_type& ex, std::shared_ptr<state> s) : executor_(ex), state_(std::move(s)) {
      if (!state_) throw std::logic_error("tock::basic_periodic_timer: used after a move");
    }

    executor_type get_executor() const noexcept { return executor_; }

    // Called once, as Asio calls an initiation: the state's reference moves into the tick's handler (a copy
    // of a deferred operation calls a copy), so that a tick costs one reference count up and one down.
    template <typename Handler>
    void operator()(Handler&& handler) && {
      state& s = *state_;
      // A deferred initiation may run after its timer was destroyed or assigned over.
      if (!s.timer) throw std::logic_error("tock::basic_periodic_timer: waited on after its destruction");
      if (s.waiting) throw sys::system_error(asio::error::already_started, "tock::periodic_timer");
      const std::uint64_t id = s.last_id + 1;
      detail::tick_handler<state, std::decay_t<Handler>> tick(std::move(state_), id, std::forward<Handler>(handler));
      s.waiting = ++s.last_id;  // the tick handler ends it however it ends, including when the start throws
      // Nothing of the grid changes until the wait is in: a start that throws leaves it as it was.
      const time_point at = s.restart ? detail::saturating_add(Clock::now(), s.period) : s.tick_time();
      auto& timer = *s.timer;
      if (timer.impl().expiry() != at) timer.service().move_expiry(timer.impl(), at);  // no wait to abort
      timer.async_wait(std::move(tick));
      if (s.restart) {
        s.restart = false;
        s.origin = at;
        s.next = 0;
      }
    }
    template <typename Handler>
    void operator()(Handler&& handler) const& {
      initiate_wait (*this)(std::forward<Handler>(handler));
    }

   private:
    executor_type executor_;
    std::shared_ptr<state> state_;
  };

  // Saturating (std::chrono's conversion would overflow a huge period into a negative one, which would pass
  // as a wrapped positive one or be refused depending on the bits), then checked in the clock's ticks, so that
  // a period below one tick is refused rather than becoming a grid whose points all coincide.
  template <typename Rep, typename Period>
  static duration checked(const std::chrono::duration<Rep, Period>& period) {
    const duration p = detail::saturating_cast<duration>(period);
    if (!(p > duration::zero())) throw std::invalid_argument("tock::basic_periodic_timer: period <= 0");
    return p;
  }

  state& get() const {
    if (!state_) throw std::logic_error("tock::basic_periodic_timer: used after a move");
    return *state_;
  }

  void release() noexcept {
    if (state_) state_->timer.reset();
    state_.reset();
  }

  executor_type executor_;
  std::shared_ptr<state> state_;
};

/// The periodic timer most code wants: std::chrono::steady_clock, any_io_executor.
using periodic_timer = basic_periodic_timer<std::chrono::steady_clock>;

}  // namespace tock

namespace TOCK_ASIO_NAMESPACE {

template <template <typename, typename> class Associator, typename State, typename Handler, typename DefaultCandidate>
struct associator<Associator, tock::detail::tick_handler<State, Handler>, DefaultCandidate> {
  using type = typename Associator<Handler, DefaultCandidate>::type;

  static type get(const tock::detail::tick_handler<State, Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.user_handler());
  }

  static auto get(const tock::detail::tick_handler<State, Handler>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.user_handler(), c)) {
    return Associator<Handler, DefaultCandidate>::get(h.user_handler(), c);
  }
};

}  // namespace TOCK_ASIO_NAMESPACE

#endif
