// tock/async_sleep.hpp: waits with no timer object, for any completion token and inside coroutines.
#ifndef TOCK_ASYNC_SLEEP_HPP
#define TOCK_ASYNC_SLEEP_HPP

#include <tock/config.hpp>
#include <tock/detail/asio_awaitable.hpp>
#include <tock/detail/partial_token.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/timer_service.hpp>

#include <chrono>
#include <type_traits>
#include <utility>

namespace tock {
namespace detail {

template <typename T>
inline constexpr bool is_executor_v = asio::execution::is_executor<T>::value || asio::is_executor<T>::value;

template <typename T>
inline constexpr bool is_context_v = std::is_convertible_v<T&, asio::execution_context&>;

template <typename T>
inline constexpr bool is_duration_v = false;
template <typename Rep, typename Period>
inline constexpr bool is_duration_v<std::chrono::duration<Rep, Period>> = true;

template <typename Clock, typename Duration>
typename Clock::time_point to_clock_time_point(const std::chrono::time_point<Clock, Duration>& t) noexcept {
  return typename Clock::time_point(saturating_cast<typename Clock::duration>(t.time_since_epoch()));
}

// A sleep's duration from now, which lets it join a lane (detail/sleep_lanes.hpp).
template <typename Duration>
struct sleep_span {
  Duration d;
};

// Holds the executor as Asio's I/O objects' initiations do, so that adapters (tock::timeout, a deadline's bind())
// find the operation's default executor through get_executor() when the handler has none of its own.
template <typename Clock, typename Executor>
class initiate_sleep_until {
 public:
  using executor_type = Executor;

  explicit initiate_sleep_until(const Executor& ex) noexcept : ex_(ex) {}

  const executor_type& get_executor() const noexcept { return ex_; }

  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t) const {
    basic_timer_service<Clock>::of(ex_).async_sleep_until(t, std::forward<Handler>(handler), ex_);
  }

  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t, const typename Clock::duration& slack) const {
    basic_timer_service<Clock>::of(ex_).async_sleep_until(t, slack, std::forward<Handler>(handler), ex_);
  }

  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t,
                  const sleep_span<typename Clock::duration>& span) const {
    basic_timer_service<Clock>::of(ex_).async_sleep_for(t, span.d, std::forward<Handler>(handler), ex_);
  }

  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t, const typename Clock::duration& slack,
                  const sleep_span<typename Clock::duration>& span) const {
    basic_timer_service<Clock>::of(ex_).async_sleep_for(t, span.d, slack, std::forward<Handler>(handler), ex_);
  }

 private:
  Executor ex_;
};

// For the coroutine forms: the executor is the one the handler carries, i.e. the coroutine's.
template <typename Clock>
class initiate_sleep_on_handler_executor {
 public:
  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t) const {
    const auto ex = asio::get_associated_executor(handler);
    basic_timer_service<Clock>::of(ex).async_sleep_until(t, std::forward<Handler>(handler), ex);
  }

  template <typename Handler>
  void operator()(Handler&& handler, const typename Clock::time_point& t,
                  const sleep_span<typename Clock::duration>& span) const {
    const auto ex = asio::get_associated_executor(handler);
    basic_timer_service<Clock>::of(ex).async_sleep_for(t, span.d, std::forward<Handler>(handler), ex);
  }
};

}  // namespace detail

/// Completes with void(error_code) at `t` (success), or with operation_aborted when the handler's cancellation
/// slot is emitted (any type), or with tock::error::capacity_exceeded. `t` at time_point::max() never fires.
/// It may complete up to the service's default_slack() late. O(log N); at most one allocation, through the
/// handler's associated allocator. Thread-safe: start from any thread (docs/design.md, "Threads").
template <typename Executor, typename Clock, typename Duration, typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor> && !detail::is_duration_v<std::decay_t<Token>>, int> = 0>
auto async_sleep_until(const Executor& ex, const std::chrono::time_point<Clock, Duration>& t,
                       Token&& token = detail::default_token_t<Executor>()) {
  return asio::async_initiate<Token, void(error_code)>(detail::initiate_sleep_until<Clock, Executor>(ex), token,
                                                       detail::to_clock_time_point(t));
}

/// The same, completing in [t, t + slack] (slack >= 0, else std::invalid_argument): the service may complete
/// it with other entries at one wake-up.
template <typename Executor, typename Clock, typename Duration, typename Rep, typename Period,
          typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
auto async_sleep_until(const Executor& ex, const std::chrono::time_point<Clock, Duration>& t,
                       const std::chrono::duration<Rep, Period>& slack,
                       Token&& token = detail::default_token_t<Executor>()) {
  return asio::async_initiate<Token, void(error_code)>(detail::initiate_sleep_until<Clock, Executor>(ex), token,
                                                       detail::to_clock_time_point(t),
                                                       detail::saturating_cast<typename Clock::duration>(slack));
}

/// The same on `ctx`'s executor.
template <typename ExecutionContext, typename Clock, typename Duration,
          typename Token = detail::default_token_t<typename ExecutionContext::executor_type>,
          std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&> &&
                               !detail::is_duration_v<std::decay_t<Token>>,
                           int> = 0>
auto async_sleep_until(ExecutionContext& ctx, const std::chrono::time_point<Clock, Duration>& t,
                       Token&& token = detail::default_token_t<typename ExecutionContext::executor_type>()) {
  return tock::async_sleep_until(ctx.get_executor(), t, std::forward<Token>(token));
}

/// The same with `slack`, on `ctx`'s executor.
template <typename ExecutionContext, typename Clock, typename Duration, typename Rep, typename Period,
          typename Token = detail::default_token_t<typename ExecutionContext::executor_type>,
          std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
auto async_sleep_until(ExecutionContext& ctx, const std::chrono::time_point<Clock, Duration>& t,
                       const std::chrono::duration<Rep, Period>& slack,
                       Token&& token = detail::default_token_t<typename ExecutionContext::executor_type>()) {
  return tock::async_sleep_until(ctx.get_executor(), t, slack, std::forward<Token>(token));
}

/// Completes `d` from now on steady_clock (saturating: a huge `d` never fires, a negative one is due at once).
/// Same completions and thread safety as async_sleep_until; when `d` repeats it queues in a lane
/// (detail/sleep_lanes.hpp): O(1) to start and cancel, O(log N) only for the oldest of its lane.
template <typename Executor, typename Rep, typename Period, typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor> && !detail::is_duration_v<std::decay_t<Token>>, int> = 0>
auto async_sleep_for(const Executor& ex, const std::chrono::duration<Rep, Period>& d,
                     Token&& token = detail::default_token_t<Executor>()) {
  using clock = std::chrono::steady_clock;
  const auto span = detail::saturating_cast<clock::duration>(d);
  return asio::async_initiate<Token, void(error_code)>(detail::initiate_sleep_until<clock, Executor>(ex), token,
                                                       detail::saturating_add(clock::now(), d),
                                                       detail::sleep_span<clock::duration>{span});
}

/// The same, completing up to `slack` late (see async_sleep_until).
template <typename Executor, typename Rep, typename Period, typename Rep2, typename Period2,
          typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
auto async_sleep_for(const Executor& ex, const std::chrono::duration<Rep, Period>& d,
                     const std::chrono::duration<Rep2, Period2>& slack,
                     Token&& token = detail::default_token_t<Executor>()) {
  using clock = std::chrono::steady_clock;
  const auto span = detail::saturating_cast<clock::duration>(d);
  return asio::async_initiate<Token, void(error_code)>(
      detail::initiate_sleep_until<clock, Executor>(ex), token, detail::saturating_add(clock::now(), d),
      detail::saturating_cast<clock::duration>(slack), detail::sleep_span<clock::duration>{span});
}

/// The same on `ctx`'s executor.
template <typename ExecutionContext, typename Rep, typename Period,
          typename Token = detail::default_token_t<typename ExecutionContext::executor_type>,
          std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&> &&
                               !detail::is_duration_v<std::decay_t<Token>>,
                           int> = 0>
auto async_sleep_for(ExecutionContext& ctx, const std::chrono::duration<Rep, Period>& d,
                     Token&& token = detail::default_token_t<typename ExecutionContext::executor_type>()) {
  return tock::async_sleep_for(ctx.get_executor(), d, std::forward<Token>(token));
}

/// The same with `slack`, on `ctx`'s executor.
template <typename ExecutionContext, typename Rep, typename Period, typename Rep2, typename Period2,
          typename Token = detail::default_token_t<typename ExecutionContext::executor_type>,
          std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
auto async_sleep_for(ExecutionContext& ctx, const std::chrono::duration<Rep, Period>& d,
                     const std::chrono::duration<Rep2, Period2>& slack,
                     Token&& token = detail::default_token_t<typename ExecutionContext::executor_type>()) {
  return tock::async_sleep_for(ctx.get_executor(), d, slack, std::forward<Token>(token));
}

/// `co_await tock::sleep_until(t);` inside asio::awaitable<>: sleeps on the coroutine's own executor. Throws
/// sys::system_error(operation_aborted) if the coroutine's cancellation slot is emitted.
template <typename Clock, typename Duration>
asio::awaitable<void> sleep_until(const std::chrono::time_point<Clock, Duration>& t) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code)>(
      detail::initiate_sleep_on_handler_executor<Clock>(), asio::use_awaitable, detail::to_clock_time_point(t));
}

/// `co_await tock::sleep_for(100ms);` inside asio::awaitable<>: as sleep_until(steady_clock::now() + d).
template <typename Rep, typename Period>
asio::awaitable<void> sleep_for(const std::chrono::duration<Rep, Period>& d) {
  using clock = std::chrono::steady_clock;
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code)>(
      detail::initiate_sleep_on_handler_executor<clock>(), asio::use_awaitable, detail::saturating_add(clock::now(), d),
      detail::sleep_span<clock::duration>{detail::saturating_cast<clock::duration>(d)});
}

}  // namespace tock

#endif
