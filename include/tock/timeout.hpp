// tock/timeout.hpp: tock::timeout(d, token), a time limit on any Asio operation that supports cancellation.
#ifndef TOCK_TIMEOUT_HPP
#define TOCK_TIMEOUT_HPP

#include <tock/detail/time_arith.hpp>
#include <tock/detail/timed_token.hpp>
#include <tock/timer_service.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

namespace tock {

// The completion token tock::timeout and tock::timeout_at return: `token`, with a deadline.
namespace detail {

// When a timed operation's deadline is: `after` its initiation, or `at` a fixed time.
struct timeout_spec {
  std::optional<std::chrono::steady_clock::duration> after;
  std::chrono::steady_clock::time_point at;
  asio::cancellation_type type;

  std::chrono::steady_clock::time_point deadline() const {
    return after ? saturating_add(std::chrono::steady_clock::now(), *after) : at;
  }
};

}  // namespace detail

// The completion token tock::timeout and tock::timeout_at return: `token`, with a deadline.
template <typename Token>
class timeout_t {
 public:
  timeout_t(Token token, const detail::timeout_spec& spec) : token_(std::move(token)), spec_(spec) {}

  Token& token() noexcept { return token_; }
  const detail::timeout_spec& spec() const noexcept { return spec_; }

 private:
  Token token_;
  detail::timeout_spec spec_;
};

// Ties an operation to a deadline `d` after its initiation: if the deadline passes first, a cancellation of
// `type` is emitted on the operation's slot and its operation_aborted is reported as tock::error::timed_out;
// if the operation completes first, the deadline is removed. The user's own cancellation slot still works.
// Costs one heap entry and one allocation (through the handler's allocator); no timer object. The operation
// must support per-operation cancellation of `type`; on a context run by several threads, bind its handler
// to a strand (cancellation signals are not thread-safe in Asio). A negative `d` times out at once.
template <typename Token, typename Rep, typename Period>
timeout_t<std::decay_t<Token>> timeout(const std::chrono::duration<Rep, Period>& d, Token&& token,
                                       asio::cancellation_type type = asio::cancellation_type::terminal) {
  using duration = std::chrono::steady_clock::duration;
  return timeout_t<std::decay_t<Token>>(std::forward<Token>(token),
                                        detail::timeout_spec{detail::saturating_cast<duration>(d), {}, type});
}

// The same with an absolute deadline.
template <typename Token, typename Duration>
timeout_t<std::decay_t<Token>> timeout_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
                                          Token&& token,
                                          asio::cancellation_type type = asio::cancellation_type::terminal) {
  using time_point = std::chrono::steady_clock::time_point;
  const time_point at(detail::saturating_cast<time_point::duration>(t.time_since_epoch()));
  return timeout_t<std::decay_t<Token>>(std::forward<Token>(token), detail::timeout_spec{std::nullopt, at, type});
}

namespace detail {

// Computes the deadline when the operation is really initiated (with asio::deferred, that is when the
// deferred operation is invoked, not when the token was made).
class timeout_registrar {
 public:
  using link_type = sleep_op_base;

  explicit timeout_registrar(const timeout_spec& spec) noexcept : spec_(spec) {}

  template <typename Executor>
  timer_service& service_for(const Executor& ex) const {
    return timer_service::of(ex);
  }
  error_code add(timer_service& s, sleep_op_base& entry) const { return s.schedule(entry, spec_.deadline()); }
  asio::cancellation_type type() const noexcept { return spec_.type; }

 private:
  timeout_spec spec_;
};

template <typename Token>
struct timed_token_traits<timeout_t<Token>> {
  using inner_type = Token;
  using registrar_type = timeout_registrar;
  static registrar_type registrar(timeout_t<Token>& t) noexcept { return registrar_type(t.spec()); }
  static Token&& take_inner(timeout_t<Token>& t) noexcept { return std::move(t.token()); }
};

}  // namespace detail
}  // namespace tock

// Asio's adapters compose from outside too: bind_cancellation_slot(slot, timeout(d, h)) is
// timeout(d, bind_cancellation_slot(slot, h)); likewise bind_executor, bind_allocator, redirect_error, as_tuple.
template <typename Token, typename Signature, typename... Signatures>
struct boost::asio::async_result<tock::timeout_t<Token>, Signature, Signatures...>
    : tock::detail::timed_async_result<tock::timeout_t<Token>, Signature, Signatures...> {};

#endif
