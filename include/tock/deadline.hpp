// tock/deadline.hpp: tock::deadline, a movable deadline for a connection and the operations bound to it.
#ifndef TOCK_DEADLINE_HPP
#define TOCK_DEADLINE_HPP

#include <tock/config.hpp>
#include <tock/detail/deadline_link.hpp>
#include <tock/detail/partial_token.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timed_initiation.hpp>
#include <tock/detail/timer_object.hpp>
#include <tock/timer_service.hpp>

#include <chrono>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace tock {

template <typename Deadline, typename Token>
class deadline_bound_token;

/// A deadline that moves without completing anything: expires_after()/expires_at() re-aim pending waits and
/// bound operations at the new time (Beast's tcp_stream::expires_after, for any operation and with no timer
/// per stream). Operations started with bind(token) are cancelled and report tock::error::timed_out when the
/// deadline passes; async_wait() completes then. Use one deadline per direction for distinct read and write
/// limits. cancel() aborts its waits and cancels its bound operations (operation_aborted) before it returns
/// when called on their handlers' executor. Destroying it (or assigning over it) aborts its waits and lets its
/// bound operations go on without a limit: the deadline and the I/O object of a connection go away together,
/// in either order, and a cancellation then would reach an I/O object already gone (docs/design.md, "Threads").
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe (the lock-free later move relies on it: only
/// the owner writes the expiry). Bound operations on a context run by several threads need a strand, as
/// every per-operation cancellation does in Asio. Operations may be bound from a thread that does not run the
/// context (docs/design.md, "Threads").
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>, typename Executor = asio::any_io_executor>
class basic_deadline {
 public:
  ///@{
  /// The executor, the clock and its types, and the service.
  using executor_type = Executor;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using service_type = basic_timer_service<Clock, WaitTraits>;
  ///@}

  /// A deadline at time_point::max() (never) on `ex`'s io_context.
  explicit basic_deadline(const executor_type& ex) : object_(ex, time_point::max()) {}

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  explicit basic_deadline(ExecutionContext& ctx) : basic_deadline(executor_type(ctx.get_executor())) {}

  /// A deadline `d` from now (any duration type, saturating).
  template <typename Rep, typename Period>
  basic_deadline(const executor_type& ex, const std::chrono::duration<Rep, Period>& d) : basic_deadline(ex) {
    expires_after(d);
  }

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext, typename Rep, typename Period,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_deadline(ExecutionContext& ctx, const std::chrono::duration<Rep, Period>& d)
      : basic_deadline(executor_type(ctx.get_executor()), d) {}

  /// A deadline at `t`.
  basic_deadline(const executor_type& ex, const time_point& t) : basic_deadline(ex) { expires_at(t); }

  /// The same, on `ctx`'s executor.
  template <typename ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>, int> = 0>
  basic_deadline(ExecutionContext& ctx, const time_point& t) : basic_deadline(executor_type(ctx.get_executor()), t) {}

  /// Takes over `other`'s expiry, waits and bound operations. `other` is left as if constructed from its
  /// executor alone: same service and executor (a copy), expiry time_point::max(), usable. O(attached).
  basic_deadline(basic_deadline&& other) : object_(std::move(other.object_), time_point::max()) {}

  /// Aborts this deadline's waits and detaches its bound operations (as destruction does), then takes over
  /// `other`'s; `other` is left as after a move construction. O(attached).
  basic_deadline& operator=(basic_deadline&& other) {
    object_.assign(std::move(other.object_), time_point::max());
    return *this;
  }

  basic_deadline(const basic_deadline&) = delete;
  basic_deadline& operator=(const basic_deadline&) = delete;

  // Aborts waits and detaches bound operations (they go on without a limit). O(log N + attached).
  // (timer_object's destructor)

  /// The executor given at construction (a copy; a moved-from deadline keeps it). O(1).
  executor_type get_executor() noexcept { return object_.get_executor(); }

  /// The deadline as an absolute time (time_point::max() if never). O(1).
  time_point expiry() const noexcept { return object_.impl().expiry(); }

  ///@{
  /// How late its waits and bound operations may complete, as basic_timer::slack(). O(1) / O(log N).
  duration slack() const noexcept { return object_.impl().slack; }
  void set_slack(const duration& slack) { object_.service().set_slack(object_.impl(), slack); }
  ///@}

  /// Moves the deadline; waits and bound operations now wait for `t`. Later: O(1), the heap entry is
  /// re-keyed lazily when its old key surfaces; earlier: O(log N). time_point::max() means never.
  void expires_at(const time_point& t) { object_.service().move_expiry(object_.impl(), t); }

  /// The same, `d` from now (any duration type, saturating; a negative `d` is due at once).
  template <typename Rep, typename Period>
  void expires_after(const std::chrono::duration<Rep, Period>& d) {
    expires_at(detail::saturating_add(Clock::now(), d));
  }

  /// No limit: waits and bound operations wait on until the next expires_at() or expires_after() (Beast's
  /// stream.expires_never()); expires_at(time_point::max()). O(1).
  void expires_never() { expires_at(time_point::max()); }

  /// Aborts pending waits (operation_aborted) and cancels bound operations, at once when called on their
  /// handlers' executor (else dispatched there); returns how many. O(attached).
  std::size_t cancel() { return object_.service().cancel(object_.impl()); }

  /// Completes with void(error_code) when the deadline passes (success), or operation_aborted on cancel()
  /// or destruction. O(log N) for the first wait or bound operation, O(attached) after.
  template <typename WaitToken = detail::default_token_t<executor_type>>
  auto async_wait(WaitToken&& token = detail::default_token_t<executor_type>()) {
    return object_.async_wait(std::forward<WaitToken>(token));
  }

  /// A completion token for any Asio operation supporting per-operation cancellation: the operation is
  /// cancelled with `type` when this deadline passes and its operation_aborted becomes tock::error::timed_out.
  /// One allocation per operation, through the handler's allocator; no heap slot beyond the deadline's one.
  template <typename Token>
    requires(!detail::is_cancellation_type_v<Token>)
  deadline_bound_token<basic_deadline, std::decay_t<Token>> bind(
      Token&& token, asio::cancellation_type type = asio::cancellation_type::terminal) {
    return deadline_bound_token<basic_deadline, std::decay_t<Token>>(*this, std::forward<Token>(token), type);
  }

  /// The partial form: `co_await sock.async_read_some(buf, dl.bind())` uses the operation's default token (its
  /// executor's default_completion_token, else asio::deferred); dl.bind()(token) is dl.bind(token). O(1).
  [[nodiscard]] auto bind(asio::cancellation_type type = asio::cancellation_type::terminal) {
    return detail::partial_token(
        [self = this, type](auto&& token) { return self->bind(std::forward<decltype(token)>(token), type); });
  }

 private:
  template <typename, typename>
  friend class deadline_bound_token;

  detail::timer_object<Clock, WaitTraits, Executor, detail::deadline_node<time_point>> object_;
};

/// The deadline most code wants: std::chrono::steady_clock, any_io_executor.
using deadline = basic_deadline<std::chrono::steady_clock>;

/// The token basic_deadline::bind returns.
template <typename Deadline, typename Token>
class deadline_bound_token {
 public:
  /// `token`, cancelled with `type` when `d` passes (basic_deadline::bind makes it).
  deadline_bound_token(Deadline& d, Token token, asio::cancellation_type type)
      : deadline_(&d), token_(std::move(token)), type_(type) {}

  /// The wrapped completion token.
  Token& token() noexcept { return token_; }

  /// Where the operation's entry goes: among the deadline's waits.
  class registrar {
   public:
    ///@{
    /// The entry an operation gets (a wait among the deadline's), and the service that keeps it.
    using link_type = detail::wait_op;
    using service_type = typename Deadline::service_type;
    ///@}

    /// For the deadline `d`, cancelling with `type`.
    registrar(Deadline* d, asio::cancellation_type type) noexcept : deadline_(d), type_(type) {}
    /// The deadline's service, whatever the operation's executor. O(1).
    template <typename Executor>
    service_type& service_for(const Executor&) const noexcept {
      return deadline_->object_.service();
    }
    /// Adds the operation's entry to the deadline's waits, as basic_timer_service::attach.
    error_code add(service_type& s, detail::wait_op& entry) const { return s.attach(deadline_->object_.impl(), entry); }
    /// The cancellation emitted on the operation when the deadline passes.
    asio::cancellation_type type() const noexcept { return type_; }

   private:
    Deadline* deadline_;
    asio::cancellation_type type_;
  };

  /// Where the operation's entry goes, for its initiation (detail/timed_initiation.hpp).
  registrar make_registrar() const noexcept { return registrar(deadline_, type_); }

 private:
  Deadline* deadline_;
  Token token_;
  asio::cancellation_type type_;
};

}  // namespace tock

// The async_result machinery shared with tock::timeout, and its adapters applied from outside:
// bind_cancellation_slot(slot, dl.bind(h)) is dl.bind(bind_cancellation_slot(slot, h)), and so on.
#include <tock/detail/timed_token.hpp>

template <typename Deadline, typename Token>
struct tock::detail::timed_token_traits<tock::deadline_bound_token<Deadline, Token>> {
  using inner_type = Token;
  using registrar_type = typename tock::deadline_bound_token<Deadline, Token>::registrar;
  static registrar_type registrar(tock::deadline_bound_token<Deadline, Token>& t) noexcept {
    return t.make_registrar();
  }
  static Token&& take_inner(tock::deadline_bound_token<Deadline, Token>& t) noexcept { return std::move(t.token()); }
};

template <typename Deadline, typename Token, typename Signature, typename... Signatures>
struct TOCK_ASIO_NAMESPACE::async_result<tock::deadline_bound_token<Deadline, Token>, Signature, Signatures...>
    : tock::detail::timed_async_result<tock::deadline_bound_token<Deadline, Token>, Signature, Signatures...> {};

#endif
