// tock/timeout.hpp: tock::timeout(d, token), a time limit on any Asio operation that supports cancellation.
#ifndef TOCK_TIMEOUT_HPP
#define TOCK_TIMEOUT_HPP

#include <tock/detail/initiate_with_deadline.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/timer_service.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

namespace tock {

// The completion token tock::timeout and tock::timeout_at return: `token`, with a deadline.
template <typename Token>
class timeout_t {
 public:
  using clock_type = std::chrono::steady_clock;

  timeout_t(Token token, std::optional<clock_type::duration> after, clock_type::time_point at,
            asio::cancellation_type type)
      : token_(std::move(token)), after_(after), at_(at), type_(type) {}

  // The deadline of an operation initiated now (a relative timeout counts from the initiation).
  clock_type::time_point deadline() const {
    return after_ ? detail::saturating_add(clock_type::now(), *after_) : at_;
  }
  asio::cancellation_type type() const noexcept { return type_; }
  Token& token() noexcept { return token_; }

 private:
  Token token_;
  std::optional<clock_type::duration> after_;
  clock_type::time_point at_;
  asio::cancellation_type type_;
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
  return timeout_t<std::decay_t<Token>>(std::forward<Token>(token), detail::saturating_cast<duration>(d), {}, type);
}

// The same with an absolute deadline.
template <typename Token, typename Duration>
timeout_t<std::decay_t<Token>> timeout_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
                                          Token&& token,
                                          asio::cancellation_type type = asio::cancellation_type::terminal) {
  using time_point = std::chrono::steady_clock::time_point;
  return timeout_t<std::decay_t<Token>>(
      std::forward<Token>(token), std::nullopt,
      time_point(detail::saturating_cast<time_point::duration>(t.time_since_epoch())), type);
}

namespace detail {

class timeout_registrar {
 public:
  using link_type = sleep_op_base;

  timeout_registrar(std::chrono::steady_clock::time_point at, asio::cancellation_type type) noexcept
      : at_(at), type_(type) {}

  template <typename Executor>
  timer_service& service_for(const Executor& ex) const {
    return timer_service::of(ex);
  }
  error_code add(timer_service& s, sleep_op_base& entry) const { return s.schedule(entry, at_); }
  asio::cancellation_type type() const noexcept { return type_; }

 private:
  std::chrono::steady_clock::time_point at_;
  asio::cancellation_type type_;
};

}  // namespace detail
}  // namespace tock

template <typename Token, typename Signature, typename... Signatures>
struct boost::asio::async_result<tock::timeout_t<Token>, Signature, Signatures...> {
  template <typename Initiation>
  using wrapped = tock::detail::initiate_with_deadline<std::decay_t<Initiation>, tock::detail::timeout_registrar,
                                                       Signature>;

  // The return type is spelled out so that Asio's completion_token_for checks do not instantiate the body.
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& init, RawToken&& token, Args&&... args)
      -> decltype(boost::asio::async_initiate<Token, Signature, Signatures...>(
          std::declval<wrapped<Initiation>>(), std::declval<Token&>(), std::declval<Args>()...)) {
    return boost::asio::async_initiate<Token, Signature, Signatures...>(
        wrapped<Initiation>(std::forward<Initiation>(init),
                            tock::detail::timeout_registrar(token.deadline(), token.type())),
        token.token(), std::forward<Args>(args)...);
  }
};

#endif
