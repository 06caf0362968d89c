// tock/detail/timeout_outcome.hpp: how a timed operation says its deadline ended it. The operation reports
// operation_aborted, as for any cancellation; when the deadline emitted that cancellation, tock::timeout and a
// deadline's bind() turn it into tock::error::timed_out, in the first argument of the completion: an error_code,
// or an exception_ptr (co_spawn's), or either first in a tuple (asio::as_tuple applied outside the tock token).
// An operation whose completion has neither has nowhere to say it: tock does not take it (timeout_reportable).
#ifndef TOCK_DETAIL_TIMEOUT_OUTCOME_HPP
#define TOCK_DETAIL_TIMEOUT_OUTCOME_HPP

#include <tock/config.hpp>
#include <tock/error.hpp>

#include <exception>
#include <tuple>
#include <type_traits>

namespace tock::detail {

template <typename T>
inline constexpr bool is_tuple_v = false;
template <typename... T>
inline constexpr bool is_tuple_v<std::tuple<T...>> = true;

template <typename T>
inline constexpr bool is_outcome_v = std::is_same_v<T, error_code> || std::is_same_v<T, std::exception_ptr>;
template <typename T, typename... Rest>
inline constexpr bool is_outcome_v<std::tuple<T, Rest...>> = is_outcome_v<T>;

// Whether a completion signature can carry timed_out: its first argument is an outcome.
template <typename Signature>
struct timeout_reportable : std::false_type {};
template <typename R, typename First, typename... Rest>
struct timeout_reportable<R(First, Rest...)> : std::bool_constant<is_outcome_v<std::decay_t<First>>> {};
template <typename R, typename... Args>
struct timeout_reportable<R(Args...)&> : timeout_reportable<R(Args...)> {};
template <typename R, typename... Args>
struct timeout_reportable<R(Args...) &&> : timeout_reportable<R(Args...)> {};
template <typename R, typename... Args>
struct timeout_reportable<R(Args...) noexcept> : timeout_reportable<R(Args...)> {};
template <typename R, typename... Args>
struct timeout_reportable<R(Args...) & noexcept> : timeout_reportable<R(Args...)> {};
template <typename R, typename... Args>
struct timeout_reportable<R(Args...) && noexcept> : timeout_reportable<R(Args...)> {};

template <typename... Signatures>
inline constexpr bool timeout_reportable_v = (timeout_reportable<Signatures>::value && ...);

// The deadline caused the operation's end: its operation_aborted becomes timed_out; any other outcome (success,
// another error, another exception) is the operation's own and is kept.
inline void translate_timeout(error_code& ec) noexcept {
  if (ec == asio::error::operation_aborted) ec = make_error_code(error::timed_out);
}

// An exception_ptr says operation_aborted with a system_error (what co_spawn gives when the coroutine's awaited
// operation was cancelled). Only read when the deadline fired, so an exception is rethrown only then.
inline void translate_timeout(std::exception_ptr& e) noexcept {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const sys::system_error& x) {
    if (x.code() == asio::error::operation_aborted)
      e = std::make_exception_ptr(sys::system_error(make_error_code(error::timed_out)));
  } catch (...) {
  }
}

}  // namespace tock::detail

#endif
