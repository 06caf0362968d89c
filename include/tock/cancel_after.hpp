// tock/cancel_after.hpp: asio::cancel_after and asio::cancel_at with a tock timer of the caller's (Asio >= 1.31).
//
// Asio's timer forms take only its basic_waitable_timer: these take a tock::basic_timer, with Asio's
// semantics. The operation gets a cancellation slot of its own; a wait on the caller's timer, started with
// the operation, emits `type` on it when it completes, whether by expiry or because the timer was cancelled
// or re-armed meanwhile (as Asio's). The operation completing first cancels the timer. The handler runs once
// both have ended; the caller's own slot, if any, is forwarded to the operation until then. Threads: as the
// timer's (docs/design.md, "Threads").
#ifndef TOCK_CANCEL_AFTER_HPP
#define TOCK_CANCEL_AFTER_HPP

#include <tock/basic_timer.hpp>
#include <tock/config.hpp>
#include <tock/detail/partial_token.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timed_initiation.hpp>

#if TOCK_ASIO_VERSION >= 103100

#include <chrono>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace tock {
namespace detail {

// The arguments of a completion signature, as stored until the handler can run.
template <typename Signature>
struct completion_args;
template <typename R, typename... Args>
struct completion_args<R(Args...)> {
  using type = std::tuple<std::decay_t<Args>...>;
};
template <typename R, typename... Args>
struct completion_args<R(Args...)&> : completion_args<R(Args...)> {};
template <typename R, typename... Args>
struct completion_args<R(Args...) &&> : completion_args<R(Args...)> {};

// What an operation tied to a caller's timer shares between its two handlers (the operation's and the
// timer wait's): whichever ends last calls the caller's handler. Used on one strand, as Asio's.
template <typename Handler, typename Timer, typename... Signatures>
class timer_cancel_state {
 public:
  using handler_type = Handler;

  timer_cancel_state(Handler handler, Timer& timer, asio::cancellation_type_t type)
      : handler_(std::move(handler)), timer_(timer), type_(type) {}
  timer_cancel_state(const timer_cancel_state&) = delete;
  timer_cancel_state& operator=(const timer_cancel_state&) = delete;
  ~timer_cancel_state() { unforward(); }

  const Handler& handler() const noexcept { return handler_; }
  asio::cancellation_slot slot() noexcept { return signal_.slot(); }
  Timer& timer() noexcept { return timer_; }

  // The caller's slot cancels the operation too, for as long as it runs.
  void forward_caller_slot() {
    auto caller = asio::get_associated_cancellation_slot(handler_);
    if (caller.is_connected()) forward_ = &caller.template emplace<forwarder>(this);
  }

  template <typename... Args>
  static void operation_done(std::shared_ptr<timer_cancel_state> s, Args&&... args) {
    s->unforward();
    using stored = std::tuple<std::decay_t<Args>...>;
    s->result_.template emplace<stored>(std::forward<Args>(args)...);
    if (s->timer_pending_) {
      s->timer_.cancel();  // its handler, now aborted, ends the whole
    } else if (!s->emitting_) {
      finish(std::move(s));
    }
  }

  static void timer_done(std::shared_ptr<timer_cancel_state> s) {
    s->timer_pending_ = false;
    if (s->result_.index() == 0) {
      // The operation may complete inside emit(): then it leaves the handler to this call, which holds the
      // state (and so the signal being emitted) until emit() has returned.
      s->emitting_ = true;
      s->signal_.emit(s->type_);
      s->emitting_ = false;
      if (s->result_.index() == 0) return;  // the operation ends later and calls finish()
    }
    finish(std::move(s));
  }

 private:
  struct forwarder {
    explicit forwarder(timer_cancel_state* s) noexcept : state(s) {}
    forwarder(const forwarder&) = delete;
    forwarder& operator=(const forwarder&) = delete;
    // Gone with the caller's slot (reassigned, or its signal destroyed) before the state: unlink.
    ~forwarder() {
      if (state) state->forward_ = nullptr;
    }
    void operator()(asio::cancellation_type_t type) {
      if (state) state->signal_.emit(type);
    }
    timer_cancel_state* state;
  };

  // Not clear(): this may run inside the caller's emit(), which calls the forwarder being cleared.
  void unforward() noexcept {
    if (forward_) forward_->state = nullptr;
    forward_ = nullptr;
  }

  // Frees the state before the upcall, as Asio's operations do.
  static void finish(std::shared_ptr<timer_cancel_state> s) {
    Handler handler(std::move(s->handler_));
    auto result(std::move(s->result_));
    s.reset();
    std::visit(
        [&handler](auto& args) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(args)>, std::monostate>)
            std::apply(std::move(handler), std::move(args));
        },
        result);
  }

  Handler handler_;
  Timer& timer_;
  asio::cancellation_signal signal_;
  asio::cancellation_type_t type_;
  std::variant<std::monostate, typename completion_args<Signatures>::type...> result_;
  forwarder* forward_ = nullptr;
  bool timer_pending_ = true;
  bool emitting_ = false;
};

// The handler the operation gets: its cancellation slot is the state's, its other associators the caller's.
template <typename State>
class timer_cancel_op_handler {
 public:
  using cancellation_slot_type = asio::cancellation_slot;

  explicit timer_cancel_op_handler(std::shared_ptr<State> s) noexcept : state_(std::move(s)) {}
  timer_cancel_op_handler(timer_cancel_op_handler&&) noexcept = default;
  timer_cancel_op_handler& operator=(timer_cancel_op_handler&&) = delete;

  cancellation_slot_type get_cancellation_slot() const noexcept { return state_->slot(); }
  const typename State::handler_type& caller_handler() const noexcept { return state_->handler(); }

  template <typename... Args>
  void operator()(Args&&... args) {
    State::operation_done(std::move(state_), std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<State> state_;
};

// The handler of the wait on the caller's timer: no cancellation slot (the caller's goes to the operation),
// the other associators the caller's, so that it runs where the caller's handler would.
template <typename State>
class timer_cancel_wait_handler {
 public:
  using cancellation_slot_type = asio::cancellation_slot;

  explicit timer_cancel_wait_handler(std::shared_ptr<State> s) noexcept : state_(std::move(s)) {}
  timer_cancel_wait_handler(timer_cancel_wait_handler&&) noexcept = default;
  timer_cancel_wait_handler& operator=(timer_cancel_wait_handler&&) = delete;

  cancellation_slot_type get_cancellation_slot() const noexcept { return {}; }
  const typename State::handler_type& caller_handler() const noexcept { return state_->handler(); }

  void operator()(const error_code&) { State::timer_done(std::move(state_)); }

 private:
  std::shared_ptr<State> state_;
};

// When the timer expires: a duration from the operation's start, or a time point.
template <typename Timer>
void arm(Timer& timer, const typename Timer::duration& d) {
  timer.expires_after(d);
}
template <typename Timer>
void arm(Timer& timer, const typename Timer::time_point& t) {
  timer.expires_at(t);
}

// Wraps the operation's initiation: arms the caller's timer, waits on it, then starts the operation.
template <typename Initiation, typename Timer, typename When, typename... Signatures>
class timer_cancel_initiation : public initiation_executor_type<Initiation> {
 public:
  timer_cancel_initiation(Initiation init, Timer& timer, const When& when, asio::cancellation_type_t type)
      : init_(std::move(init)), timer_(timer), when_(when), type_(type) {}

  auto get_executor() const noexcept
    requires requires(const Initiation& i) { i.get_executor(); }
  {
    return init_.get_executor();
  }

  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, Args&&... args) && {
    start(std::move(init_), std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, Args&&... args) const& {
    start(init_, std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

 private:
  template <typename Init, typename Handler, typename... Args>
  void start(Init&& init, Handler&& handler, Args&&... args) const {
    using state = timer_cancel_state<std::decay_t<Handler>, Timer, Signatures...>;
    const auto alloc = asio::get_associated_allocator(handler);
    auto s = std::allocate_shared<state>(alloc, std::forward<Handler>(handler), timer_, type_);
    arm(timer_, when_);
    s->forward_caller_slot();
    timer_.async_wait(timer_cancel_wait_handler<state>(s));
    try {
      std::forward<Init>(init)(timer_cancel_op_handler<state>(std::move(s)), std::forward<Args>(args)...);
    } catch (...) {
      timer_.cancel();  // the wait's handler drops the state now rather than at expiry
      throw;
    }
  }

  Initiation init_;
  Timer& timer_;
  When when_;
  asio::cancellation_type_t type_;
};

// The completion token of the forms given one: the caller's token, tied to the caller's timer.
template <typename Token, typename Timer, typename When>
struct timer_cancel_token {
  Token token;
  Timer* timer;
  When when;
  asio::cancellation_type_t type;
};

// The forms given no token: adapts one (operator()) or, used as a token, the operation's default one.
template <typename Timer, typename When>
class partial_timer_cancel {
 public:
  partial_timer_cancel(Timer& timer, const When& when, asio::cancellation_type_t type) noexcept
      : timer_(&timer), when_(when), type_(type) {}

  template <typename Token>
  [[nodiscard]] timer_cancel_token<std::decay_t<Token>, Timer, When> operator()(Token&& token) const {
    return {std::forward<Token>(token), timer_, when_, type_};
  }

  Timer* timer_;
  When when_;
  asio::cancellation_type_t type_;
};

}  // namespace detail

/// Asio's `asio::cancel_after(timer, d, ...)` with a tock timer: the operation is cancelled with `type`
/// (terminal by default) if it has not completed `d` after it starts, the time kept by `timer`, whose expiry
/// the start sets (aborting its other waits); an operation completing first cancels `timer`'s waits. `d`
/// of any duration type, saturating. This form returns a partial token: call it with a completion token, or
/// pass it as the token to use the operation's default one. Run the operation on a strand (the timer's
/// completion emits the cancellation), as with Asio's. Present with Asio >= 1.31 only (not with Boost 1.81,
/// whose Asio is 1.26). O(log N) at the start; one allocation, through the handler's allocator.
template <typename Clock, typename WaitTraits, typename Executor, typename Rep, typename Period>
[[nodiscard]] auto cancel_after(basic_timer<Clock, WaitTraits, Executor>& timer,
                                const std::chrono::duration<Rep, Period>& d,
                                asio::cancellation_type_t type = asio::cancellation_type::terminal) {
  using timer_type = basic_timer<Clock, WaitTraits, Executor>;
  return detail::partial_timer_cancel<timer_type, typename Clock::duration>(
      timer, detail::saturating_cast<typename Clock::duration>(d), type);
}

/// The same, adapting `token`, with terminal cancellation.
template <typename Clock, typename WaitTraits, typename Executor, typename Rep, typename Period, typename Token>
  requires(!detail::is_cancellation_type_v<Token>)
[[nodiscard]] auto cancel_after(basic_timer<Clock, WaitTraits, Executor>& timer,
                                const std::chrono::duration<Rep, Period>& d, Token&& token) {
  return tock::cancel_after(timer, d)(std::forward<Token>(token));
}

/// The same, adapting `token`, with cancellation `type`.
template <typename Clock, typename WaitTraits, typename Executor, typename Rep, typename Period, typename Token>
[[nodiscard]] auto cancel_after(basic_timer<Clock, WaitTraits, Executor>& timer,
                                const std::chrono::duration<Rep, Period>& d, asio::cancellation_type_t type,
                                Token&& token) {
  return tock::cancel_after(timer, d, type)(std::forward<Token>(token));
}

/// Asio's `asio::cancel_at(timer, t, ...)` with a tock timer: as cancel_after, the operation cancelled with
/// `type` if it has not completed by `t` (`timer` expires at `t`; a past `t` cancels it as soon as the timer's
/// wait completes). `t` of `timer`'s clock, any duration, saturating. Asio >= 1.31 only, as cancel_after.
template <typename Clock, typename WaitTraits, typename Executor, typename Duration>
[[nodiscard]] auto cancel_at(basic_timer<Clock, WaitTraits, Executor>& timer,
                             const std::chrono::time_point<Clock, Duration>& t,
                             asio::cancellation_type_t type = asio::cancellation_type::terminal) {
  using timer_type = basic_timer<Clock, WaitTraits, Executor>;
  return detail::partial_timer_cancel<timer_type, typename Clock::time_point>(
      timer, typename Clock::time_point(detail::saturating_cast<typename Clock::duration>(t.time_since_epoch())), type);
}

/// The same, adapting `token`, with terminal cancellation.
template <typename Clock, typename WaitTraits, typename Executor, typename Duration, typename Token>
  requires(!detail::is_cancellation_type_v<Token>)
[[nodiscard]] auto cancel_at(basic_timer<Clock, WaitTraits, Executor>& timer,
                             const std::chrono::time_point<Clock, Duration>& t, Token&& token) {
  return tock::cancel_at(timer, t)(std::forward<Token>(token));
}

/// The same, adapting `token`, with cancellation `type`.
template <typename Clock, typename WaitTraits, typename Executor, typename Duration, typename Token>
[[nodiscard]] auto cancel_at(basic_timer<Clock, WaitTraits, Executor>& timer,
                             const std::chrono::time_point<Clock, Duration>& t, asio::cancellation_type_t type,
                             Token&& token) {
  return tock::cancel_at(timer, t, type)(std::forward<Token>(token));
}

}  // namespace tock

namespace TOCK_ASIO_NAMESPACE {

template <typename Token, typename Timer, typename When, typename... Signatures>
struct async_result<tock::detail::timer_cancel_token<Token, Timer, When>, Signatures...>
    : async_result<Token, Signatures...> {
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    using inner = std::conditional_t<std::is_const_v<std::remove_reference_t<RawToken>>, const Token, Token>;
    using wrapped = tock::detail::timer_cancel_initiation<std::decay_t<Initiation>, Timer, When, Signatures...>;
    return async_initiate<inner, Signatures...>(
        wrapped(std::forward<Initiation>(initiation), *token.timer, token.when, token.type), token.token,
        std::forward<Args>(args)...);
  }
};

template <typename Timer, typename When, typename... Signatures>
struct async_result<tock::detail::partial_timer_cancel<Timer, When>, Signatures...> {
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    using default_token = tock::detail::operation_default_token_t<Initiation>;
    tock::detail::timer_cancel_token<default_token, Timer, When> full{default_token{}, token.timer_, token.when_,
                                                                      token.type_};
    return async_initiate<decltype(full), Signatures...>(std::forward<Initiation>(initiation), full,
                                                         std::forward<Args>(args)...);
  }
};

template <template <typename, typename> class Associator, typename State, typename DefaultCandidate>
struct associator<Associator, tock::detail::timer_cancel_op_handler<State>, DefaultCandidate>
    : Associator<typename State::handler_type, DefaultCandidate> {
  static typename Associator<typename State::handler_type, DefaultCandidate>::type get(
      const tock::detail::timer_cancel_op_handler<State>& h) noexcept {
    return Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler());
  }

  static auto get(const tock::detail::timer_cancel_op_handler<State>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler(), c)) {
    return Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler(), c);
  }
};

template <template <typename, typename> class Associator, typename State, typename DefaultCandidate>
struct associator<Associator, tock::detail::timer_cancel_wait_handler<State>, DefaultCandidate>
    : Associator<typename State::handler_type, DefaultCandidate> {
  static typename Associator<typename State::handler_type, DefaultCandidate>::type get(
      const tock::detail::timer_cancel_wait_handler<State>& h) noexcept {
    return Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler());
  }

  static auto get(const tock::detail::timer_cancel_wait_handler<State>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler(), c)) {
    return Associator<typename State::handler_type, DefaultCandidate>::get(h.caller_handler(), c);
  }
};

}  // namespace TOCK_ASIO_NAMESPACE

#endif  // TOCK_ASIO_VERSION >= 103100

#endif
