// tock/detail/partial_token.hpp: the token an operation gets when the caller gives none, and tock's partial
// tokens (tock::timeout(d), tock::timeout_at(t), a deadline's bind()), which stand for it.
#ifndef TOCK_DETAIL_PARTIAL_TOKEN_HPP
#define TOCK_DETAIL_PARTIAL_TOKEN_HPP

#define TOCK_DETAIL_WANT_ASIO_DEFERRED
#include <tock/config.hpp>

#include <type_traits>
#include <utility>

namespace tock::detail {

// Tells a cancellation type from a completion token in overloads that take either.
template <typename T>
inline constexpr bool is_cancellation_type_v = std::is_same_v<std::decay_t<T>, asio::cancellation_type_t>;

// An executor's default completion token, as Asio >= 1.29 decides it: the executor's own
// (use_awaitable_t<>::as_default_on...), else asio::deferred. Asio 1.26 (Boost 1.81) has no fallback (its
// default_completion_token_t is void there), so tock supplies it: one rule on both.
template <typename Executor>
using default_token_t = std::conditional_t<std::is_void_v<asio::default_completion_token_t<Executor>>, asio::deferred_t,
                                           asio::default_completion_token_t<Executor>>;

// The default token of the operation an initiation starts: that of its I/O object's executor.
template <typename Initiation>
using operation_default_token_t = default_token_t<asio::associated_executor_t<std::decay_t<Initiation>>>;

// A token still to be given: make(token) is the complete one. Used as a token itself, it completes with the
// operation's default token, as Asio's partial tokens (asio::cancel_after(d), asio::as_tuple) do.
template <typename Make>
class partial_token {
 public:
  explicit partial_token(Make make) noexcept(std::is_nothrow_move_constructible_v<Make>) : make_(std::move(make)) {}

  template <typename Token>
  [[nodiscard]] auto operator()(Token&& token) const {
    return make_(std::forward<Token>(token));
  }

 private:
  Make make_;
};

}  // namespace tock::detail

template <typename Make, typename... Signatures>
struct TOCK_ASIO_NAMESPACE::async_result<tock::detail::partial_token<Make>, Signatures...> {
  template <typename Initiation>
  using full_token = decltype(std::declval<const tock::detail::partial_token<Make>&>()(
      std::declval<tock::detail::operation_default_token_t<Initiation>>()));

  // The return type is spelled out so that an unevaluated use (decltype, completion_token_for) does not
  // instantiate the operation.
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& init, RawToken&& partial, Args&&... args)
      -> decltype(asio::async_initiate<full_token<Initiation>, Signatures...>(std::forward<Initiation>(init),
                                                                              std::declval<full_token<Initiation>&>(),
                                                                              std::forward<Args>(args)...)) {
    auto full = partial(tock::detail::operation_default_token_t<Initiation>{});
    return asio::async_initiate<full_token<Initiation>, Signatures...>(std::forward<Initiation>(init), full,
                                                                       std::forward<Args>(args)...);
  }
};

#endif
