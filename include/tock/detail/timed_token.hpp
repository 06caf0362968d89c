// tock/detail/timed_token.hpp: the async_result shared by tock's completion tokens (tock::timeout, a deadline's
// bind()), and by Asio's token adapters applied around one (bind_cancellation_slot, bind_executor,
// bind_allocator, redirect_error, as_tuple, in any nesting).
#ifndef TOCK_DETAIL_TIMED_TOKEN_HPP
#define TOCK_DETAIL_TIMED_TOKEN_HPP

#include <tock/config.hpp>
#include <tock/detail/timed_initiation.hpp>
#include <tock/detail/timeout_outcome.hpp>

#include <type_traits>
#include <utility>

namespace tock::detail {

// A timed token T (a tock token, or an Asio adapter around one) specialises this with
//   using inner_type;      the token the operation completes, deadline removed (adapters kept, innermost first)
//   using registrar_type;  where the operation's deadline entry goes (a timed_registrar, timed_initiation.hpp)
//   static inner_type&& or inner_type take_inner(T&);  static registrar_type registrar(T&);
template <typename T>
struct timed_token_traits {};

template <typename T>
concept timed_token = requires { typename timed_token_traits<T>::registrar_type; };

// return_type, exactly when the inner token's async_result has one (as Asio's own adapters do): what
// initiate() returns for that token. Absent for tokens whose result depends on the initiation (deferred).
template <typename Inner, typename... Signatures>
struct timed_return_type {};

template <typename Inner, typename... Signatures>
  requires requires { typename asio::async_result<Inner, Signatures...>::return_type; }
struct timed_return_type<Inner, Signatures...> {
  using return_type = typename asio::async_result<Inner, Signatures...>::return_type;
};

// The async_result of every timed token: ties the operation to the deadline, then initiates it with the inner
// token. An adapter applied around the tock token is thus applied to the user's token, inside the deadline:
// its slot, executor or allocator is the user's own, and the deadline's operation_aborted is translated to
// timed_out before redirect_error or as_tuple sees it. (Asio's generic adapters would instead wrap the
// deadline's handler and hide its slot from the operation.)
template <typename Token, typename Signature, typename... Signatures>
struct timed_async_result
    : timed_return_type<typename timed_token_traits<Token>::inner_type, Signature, Signatures...> {
  using traits = timed_token_traits<Token>;
  using inner_type = typename traits::inner_type;

  template <typename Initiation>
  using wrapped = timed_initiation<std::decay_t<Initiation>, typename traits::registrar_type, Signature>;

  // The return type is spelled out so that Asio's completion_token_for checks do not instantiate the body.
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& init, RawToken&& token, Args&&... args)
      -> decltype(asio::async_initiate<inner_type, Signature, Signatures...>(std::declval<wrapped<Initiation>>(),
                                                                             std::declval<inner_type&>(),
                                                                             std::declval<Args>()...)) {
    static_assert(timeout_reportable_v<Signature, Signatures...>,
                  "tock: a timeout or a deadline's bind() reports tock::error::timed_out through the operation's "
                  "first completion argument, which must be an error_code or an exception_ptr (this operation's "
                  "completion has neither: time it with a tock::timer or asio::cancel_after instead)");
    wrapped<Initiation> timed(std::forward<Initiation>(init), traits::registrar(token));
    auto&& inner = traits::take_inner(token);
    return asio::async_initiate<inner_type, Signature, Signatures...>(std::move(timed), inner,
                                                                      std::forward<Args>(args)...);
  }
};

// Asio's adapters around a timed token T: the same adapter around T's inner token.
template <timed_token T, typename Slot>
struct timed_token_traits<asio::cancellation_slot_binder<T, Slot>> {
  using inner_type = asio::cancellation_slot_binder<typename timed_token_traits<T>::inner_type, Slot>;
  using registrar_type = typename timed_token_traits<T>::registrar_type;
  static registrar_type registrar(asio::cancellation_slot_binder<T, Slot>& b) {
    return timed_token_traits<T>::registrar(b.get());
  }
  static inner_type take_inner(asio::cancellation_slot_binder<T, Slot>& b) {
    return inner_type(b.get_cancellation_slot(), timed_token_traits<T>::take_inner(b.get()));
  }
};

template <timed_token T, typename Executor>
struct timed_token_traits<asio::executor_binder<T, Executor>> {
  using inner_type = asio::executor_binder<typename timed_token_traits<T>::inner_type, Executor>;
  using registrar_type = typename timed_token_traits<T>::registrar_type;
  static registrar_type registrar(asio::executor_binder<T, Executor>& b) {
    return timed_token_traits<T>::registrar(b.get());
  }
  static inner_type take_inner(asio::executor_binder<T, Executor>& b) {
    return inner_type(asio::executor_arg_t(), b.get_executor(), timed_token_traits<T>::take_inner(b.get()));
  }
};

template <timed_token T, typename Allocator>
struct timed_token_traits<asio::allocator_binder<T, Allocator>> {
  using inner_type = asio::allocator_binder<typename timed_token_traits<T>::inner_type, Allocator>;
  using registrar_type = typename timed_token_traits<T>::registrar_type;
  static registrar_type registrar(asio::allocator_binder<T, Allocator>& b) {
    return timed_token_traits<T>::registrar(b.get());
  }
  static inner_type take_inner(asio::allocator_binder<T, Allocator>& b) {
    return inner_type(b.get_allocator(), timed_token_traits<T>::take_inner(b.get()));
  }
};

template <timed_token T>
struct timed_token_traits<asio::redirect_error_t<T>> {
  using inner_type = asio::redirect_error_t<typename timed_token_traits<T>::inner_type>;
  using registrar_type = typename timed_token_traits<T>::registrar_type;
  static registrar_type registrar(asio::redirect_error_t<T>& r) { return timed_token_traits<T>::registrar(r.token_); }
  static inner_type take_inner(asio::redirect_error_t<T>& r) {
    return inner_type(timed_token_traits<T>::take_inner(r.token_), r.ec_);
  }
};

template <timed_token T>
struct timed_token_traits<asio::as_tuple_t<T>> {
  using inner_type = asio::as_tuple_t<typename timed_token_traits<T>::inner_type>;
  using registrar_type = typename timed_token_traits<T>::registrar_type;
  static registrar_type registrar(asio::as_tuple_t<T>& t) { return timed_token_traits<T>::registrar(t.token_); }
  static inner_type take_inner(asio::as_tuple_t<T>& t) {
    return inner_type(timed_token_traits<T>::take_inner(t.token_));
  }
};

}  // namespace tock::detail

// These are more specialised than Asio's own (constrained on a timed target), so they are chosen for a timed
// token; they keep Asio's shapes (one signature for the binders and redirect_error, any number for as_tuple).
namespace TOCK_ASIO_NAMESPACE {

template <tock::detail::timed_token T, typename Slot, typename Signature>
struct async_result<asio::cancellation_slot_binder<T, Slot>, Signature>
    : tock::detail::timed_async_result<asio::cancellation_slot_binder<T, Slot>, Signature> {};

template <tock::detail::timed_token T, typename Executor, typename Signature>
struct async_result<asio::executor_binder<T, Executor>, Signature>
    : tock::detail::timed_async_result<asio::executor_binder<T, Executor>, Signature> {};

template <tock::detail::timed_token T, typename Allocator, typename Signature>
struct async_result<asio::allocator_binder<T, Allocator>, Signature>
    : tock::detail::timed_async_result<asio::allocator_binder<T, Allocator>, Signature> {};

template <tock::detail::timed_token T, typename Signature>
struct async_result<asio::redirect_error_t<T>, Signature>
    : tock::detail::timed_async_result<asio::redirect_error_t<T>, Signature> {};

template <tock::detail::timed_token T, typename... Signatures>
struct async_result<asio::as_tuple_t<T>, Signatures...>
    : tock::detail::timed_async_result<asio::as_tuple_t<T>, Signatures...> {};

}  // namespace TOCK_ASIO_NAMESPACE

#endif
