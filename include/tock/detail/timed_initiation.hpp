// tock/detail/timed_initiation.hpp: wraps an Asio initiation so that its operation is tied to a deadline.
#ifndef TOCK_DETAIL_TIMED_INITIATION_HPP
#define TOCK_DETAIL_TIMED_INITIATION_HPP

#include <tock/config.hpp>
#include <tock/detail/timed_handler.hpp>
#include <tock/detail/timed_op.hpp>
#include <tock/error.hpp>

#include <concepts>
#include <exception>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tock::detail {

// The executor an operation's handler runs on by default: the initiation's (its I/O object's), as Asio's
// operations decide it.
template <typename Initiation>
auto initiation_executor(const Initiation& init) {
  if constexpr (requires { init.get_executor(); })
    return init.get_executor();
  else
    return asio::system_executor();
}

template <typename Signature>
struct first_signature_args;

template <typename R, typename... Args>
struct first_signature_args<R(Args...)> {
  // Completes a handler with `ec` and value-initialised results, when the operation could not be started.
  template <typename Handler>
  static void complete_with(Handler& h, const error_code& ec) {
    if constexpr (sizeof...(Args) > 0) complete_with_first<Handler, std::decay_t<Args>...>(h, ec);
  }

 private:
  template <typename Handler, typename First, typename... Rest>
  static void complete_with_first(Handler& h, const error_code& ec) {
    std::move(h)(outcome<First>(ec), Rest{}...);
  }

  // `ec` as the first argument says it (timeout_outcome.hpp: the only kinds a timed operation has).
  template <typename First>
  static First outcome(const error_code& ec) {
    if constexpr (std::is_same_v<First, error_code>) {
      return ec;
    } else if constexpr (std::is_same_v<First, std::exception_ptr>) {
      return std::make_exception_ptr(sys::system_error(ec));
    } else {
      First values{};
      std::get<0>(values) = outcome<std::tuple_element_t<0, First>>(ec);
      return values;
    }
  }
};

// Where a timed operation's deadline entry goes: a heap slot of its own for tock::timeout (link_type
// sleep_entry), a deadline's ring for bind() (wait_op); which service keeps it; and the cancellation type
// the deadline emits.
template <typename R>
concept timed_registrar =
    requires(const R& r, typename R::service_type& s, typename R::link_type& entry, const asio::any_io_executor& ex) {
      { r.service_for(ex) } -> std::same_as<typename R::service_type&>;
      { r.add(s, entry) } -> std::same_as<error_code>;
      { r.type() } -> std::same_as<asio::cancellation_type>;
    };

// The executor type of an initiation that has one (an I/O object's), for timed_initiation to expose.
template <typename Initiation>
struct initiation_executor_type {};

template <typename Initiation>
  requires requires { typename Initiation::executor_type; }
struct initiation_executor_type<Initiation> {
  using executor_type = typename Initiation::executor_type;
};

// The initiation of a timed operation: registers its deadline entry, then starts the wrapped initiation (an
// entry that ends before the initiation returns is handled by timed_op: see initiated()). It
// exposes the wrapped one's executor_type and get_executor(), as Asio's own initiations do, because adapters
// outside (asio::cancel_after's timer, immediate completion) take the I/O object's executor from there.
template <typename Initiation, timed_registrar Registrar, typename FirstSignature>
class timed_initiation : public initiation_executor_type<Initiation> {
 public:
  timed_initiation(Initiation init, Registrar registrar) : init_(std::move(init)), registrar_(std::move(registrar)) {}

  auto get_executor() const noexcept
    requires requires(const Initiation& i) { i.get_executor(); }
  {
    return init_.get_executor();
  }

  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, Args&&... args) && {
    const auto ex = asio::get_associated_executor(handler, initiation_executor(init_));
    auto& service = service_for(ex);
    using service_type = std::decay_t<decltype(service)>;
    using op_type =
        timed_op<service_type, std::decay_t<Handler>, std::decay_t<decltype(ex)>, typename Registrar::link_type>;
    op_type* op = op_type::create(std::forward<Handler>(handler), service, ex, operation_on(service.core()->context()),
                                  registrar_.type());
    // Last to go: once the initiation has returned, a cancellation that came during it is sent (timed_op).
    struct initiator {
      op_type* op;
      ~initiator() { op->initiated(); }
    } initiating{op};
    timed_handler<op_type> bound(op);
    error_code ec;
    try {
      ec = registrar_.add(service, *op);
    } catch (...) {
      // add() throws before scheduling (the service arms its driver first): drop the entry's reference
      // (`bound` drops the other). Were it scheduled, `bound` would unschedule it and drop both.
      if (!is_scheduled(*op)) op->unscheduled();
      throw;
    }
    if (ec) {
      op->unscheduled();
      if (ec == error::capacity_exceeded) {
        asio::post(
            ex, [h = std::move(bound), ec]() mutable { first_signature_args<FirstSignature>::complete_with(h, ec); });
      }
      return;  // shut down: the handler is destroyed, as Asio does after shutdown
    }
    std::move(init_)(std::move(bound), std::forward<Args>(args)...);
  }

 private:
  static bool is_scheduled(const sleep_entry& entry) noexcept { return entry.node.position != heap_node::nowhere; }
  static bool is_scheduled(const wait_op& entry) noexcept { return entry.next != nullptr; }

  // Whether the operation's I/O object is on `ctx` (one without is: its service is its handler's). A deadline's
  // bound operation may be on another context, and dropped with it on any thread (timed_op::abandon).
  bool operation_on(const asio::io_context& ctx) const noexcept {
    if constexpr (requires { init_.get_executor(); })
      return &asio::query(init_.get_executor(), asio::execution::context) ==
             &static_cast<const asio::execution_context&>(ctx);
    else
      return true;
  }

  // The service of the I/O object's context; without an I/O object, that of the handler's executor. (The
  // handler's executor may be one no context owns, such as use_future's.)
  template <typename Executor>
  auto& service_for(const Executor& ex) const {
    if constexpr (requires { init_.get_executor(); }) {
      return registrar_.service_for(init_.get_executor());
    } else {
      static_assert(!std::is_same_v<Executor, asio::system_executor>,
                    "tock: a timed operation needs an I/O object's executor or a handler with an associated executor");
      return registrar_.service_for(ex);
    }
  }

  Initiation init_;
  Registrar registrar_;
};

}  // namespace tock::detail

#endif
