// tock/timeout.hpp: tock::timeout(d, token), a time limit on any Asio operation that supports cancellation.
#ifndef TOCK_TIMEOUT_HPP
#define TOCK_TIMEOUT_HPP

#include <tock/config.hpp>
#include <tock/detail/partial_token.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timed_token.hpp>
#include <tock/timer_service.hpp>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

namespace tock {

// The completion token tock::timeout and tock::timeout_at return: `token`, with a deadline.
namespace detail {

// When a timed operation's deadline is: `after` its initiation, or `at` a fixed time, on `Clock`.
template <typename Clock>
struct timeout_spec {
  std::optional<typename Clock::duration> after;
  typename Clock::time_point at;
  asio::cancellation_type type;

  typename Clock::time_point deadline() const { return after ? saturating_add(Clock::now(), *after) : at; }
};

}  // namespace detail

/// The completion token tock::timeout and tock::timeout_at return: `token`, with a deadline on `Clock` (the
/// service of that clock on the operation's context keeps it: tock::manual_clock for tests in virtual time).
template <typename Token, typename Clock = std::chrono::steady_clock>
class timeout_t {
 public:
  /// The clock the deadline is on.
  using clock_type = Clock;
  /// `token` with the deadline `spec` (tock::timeout and tock::timeout_at make it).
  timeout_t(Token token, const detail::timeout_spec<Clock>& spec) : token_(std::move(token)), spec_(spec) {}

  /// The wrapped completion token.
  Token& token() noexcept { return token_; }
  /// When the deadline is (a delay after the initiation, or a time point) and the cancellation it emits.
  const detail::timeout_spec<Clock>& spec() const noexcept { return spec_; }

 private:
  Token token_;
  detail::timeout_spec<Clock> spec_;
};

namespace detail {

// What tock::timeout(d) and tock::timeout_at(t) keep until they are given a token.
template <typename Clock>
struct timeout_maker {
  timeout_spec<Clock> spec;

  template <typename Token>
  timeout_t<std::decay_t<Token>, Clock> operator()(Token&& token) const {
    return timeout_t<std::decay_t<Token>, Clock>(std::forward<Token>(token), spec);
  }
};

template <typename Clock, typename Rep, typename Period>
timeout_spec<Clock> timeout_after(const std::chrono::duration<Rep, Period>& d, asio::cancellation_type type) {
  return {saturating_cast<typename Clock::duration>(d), {}, type};
}

template <typename Clock, typename Duration>
timeout_spec<Clock> timeout_until(const std::chrono::time_point<Clock, Duration>& t, asio::cancellation_type type) {
  using time_point = typename Clock::time_point;
  return {std::nullopt, time_point(saturating_cast<typename time_point::duration>(t.time_since_epoch())), type};
}

}  // namespace detail

/// Ties an operation to a deadline `d` after its initiation: if the deadline passes first, a cancellation of
/// `type` is emitted on the operation's slot and its operation_aborted is reported as tock::error::timed_out
/// (an exception_ptr completion, as co_spawn's, gets a system_error of timed_out instead of operation_aborted);
/// if the operation completes first, the deadline is removed. The user's own cancellation slot still works.
/// Costs one heap entry, O(log N) (or, when `d` repeats, a place in its lane: O(1) but for the lane's oldest)
/// and one allocation (through the handler's allocator); no timer object. The operation must support per-operation
/// cancellation of `type` and complete with an error_code or exception_ptr first (a static_assert says so); on a
/// context run by several threads, bind its handler to a strand (cancellation signals are not thread-safe in
/// Asio); it may be started from a thread that does not run the context (docs/design.md, "Threads"). A negative
/// `d` times out at once. On another clock: tock::timeout<tock::manual_clock>(d, token).
template <typename Clock = std::chrono::steady_clock, typename Token, typename Rep, typename Period>
  requires(!detail::is_cancellation_type_v<Token>)
timeout_t<std::decay_t<Token>, Clock> timeout(const std::chrono::duration<Rep, Period>& d, Token&& token,
                                              asio::cancellation_type type = asio::cancellation_type::terminal) {
  return timeout_t<std::decay_t<Token>, Clock>(std::forward<Token>(token), detail::timeout_after<Clock>(d, type));
}

/// The partial form, as asio::cancel_after(d): `co_await sock.async_read_some(buf, tock::timeout(5s))` uses the
/// operation's default token (its executor's default_completion_token, else asio::deferred);
/// tock::timeout(5s)(token) is tock::timeout(5s, token). O(1), no allocation until the operation starts.
template <typename Clock = std::chrono::steady_clock, typename Rep, typename Period>
[[nodiscard]] detail::partial_token<detail::timeout_maker<Clock>> timeout(
    const std::chrono::duration<Rep, Period>& d, asio::cancellation_type type = asio::cancellation_type::terminal) {
  return detail::partial_token<detail::timeout_maker<Clock>>({detail::timeout_after<Clock>(d, type)});
}

/// The same with an absolute deadline, on the time point's clock.
template <typename Token, typename Clock, typename Duration>
  requires(!detail::is_cancellation_type_v<Token>)
timeout_t<std::decay_t<Token>, Clock> timeout_at(const std::chrono::time_point<Clock, Duration>& t, Token&& token,
                                                 asio::cancellation_type type = asio::cancellation_type::terminal) {
  return timeout_t<std::decay_t<Token>, Clock>(std::forward<Token>(token), detail::timeout_until(t, type));
}

/// The partial form of timeout_at, as tock::timeout(d) is of tock::timeout(d, token).
template <typename Clock, typename Duration>
[[nodiscard]] detail::partial_token<detail::timeout_maker<Clock>> timeout_at(
    const std::chrono::time_point<Clock, Duration>& t,
    asio::cancellation_type type = asio::cancellation_type::terminal) {
  return detail::partial_token<detail::timeout_maker<Clock>>({detail::timeout_until(t, type)});
}

namespace detail {

// Computes the deadline when the operation is really initiated (with asio::deferred, that is when the
// deferred operation is invoked, not when the token was made).
template <typename Clock>
class timeout_registrar {
 public:
  using link_type = sleep_entry;
  using service_type = basic_timer_service<Clock>;

  explicit timeout_registrar(const timeout_spec<Clock>& spec) noexcept : spec_(spec) {}

  template <typename Executor>
  service_type& service_for(const Executor& ex) const {
    return service_type::of(ex);
  }
  error_code add(service_type& s, sleep_entry& entry) const {
    using duration = typename Clock::duration;
    return s.schedule(entry, spec_.deadline(), spec_.after ? *spec_.after : duration::zero());
  }
  asio::cancellation_type type() const noexcept { return spec_.type; }

 private:
  timeout_spec<Clock> spec_;
};

template <typename Token, typename Clock>
struct timed_token_traits<timeout_t<Token, Clock>> {
  using inner_type = Token;
  using registrar_type = timeout_registrar<Clock>;
  static registrar_type registrar(timeout_t<Token, Clock>& t) noexcept { return registrar_type(t.spec()); }
  static Token&& take_inner(timeout_t<Token, Clock>& t) noexcept { return std::move(t.token()); }
};

}  // namespace detail
}  // namespace tock

// Asio's adapters compose from outside too: bind_cancellation_slot(slot, timeout(d, h)) is
// timeout(d, bind_cancellation_slot(slot, h)); likewise bind_executor, bind_allocator, redirect_error, as_tuple.
template <typename Token, typename Clock, typename Signature, typename... Signatures>
struct TOCK_ASIO_NAMESPACE::async_result<tock::timeout_t<Token, Clock>, Signature, Signatures...>
    : tock::detail::timed_async_result<tock::timeout_t<Token, Clock>, Signature, Signatures...> {};

#endif
