// tock/detail/wait_handlers.hpp: the concrete operations that own a user's handler until a wait completes.
#ifndef TOCK_DETAIL_WAIT_HANDLERS_HPP
#define TOCK_DETAIL_WAIT_HANDLERS_HPP

#include <tock/detail/wait_op.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>

#include <memory>
#include <utility>

namespace tock::detail {

namespace asio = boost::asio;

// Operations are allocated through the handler's associated allocator; by default Asio's thread-local
// recycling allocator, so a handler that waits again reuses the memory its last wait released.
template <typename Handler>
auto handler_allocator(const Handler& h) noexcept {
  return asio::get_associated_allocator(h, asio::recycling_allocator<void>());
}

template <typename Op, typename Handler>
using op_allocator_t = typename std::allocator_traits<
    decltype(handler_allocator(std::declval<const Handler&>()))>::template rebind_alloc<Op>;

template <typename Op, typename Handler, typename... Args>
Op* allocate_op(Handler&& handler, Args&&... args) {
  op_allocator_t<Op, std::decay_t<Handler>> alloc(handler_allocator(handler));
  Op* p = std::allocator_traits<decltype(alloc)>::allocate(alloc, 1);
  try {
    return ::new (static_cast<void*>(p)) Op(std::forward<Handler>(handler), std::forward<Args>(args)...);
  } catch (...) {
    std::allocator_traits<decltype(alloc)>::deallocate(alloc, p, 1);
    throw;
  }
}

// Destroys an operation whose handler and target were moved out to `handler`.
template <typename Op, typename Handler>
void deallocate_op(Op* p, const Handler& handler) noexcept {
  op_allocator_t<Op, Handler> alloc(handler_allocator(handler));
  p->~Op();
  std::allocator_traits<decltype(alloc)>::deallocate(alloc, p, 1);
}

// Where a handler whose associated executor is the service's own io_context runs: the driver is already
// inside that context's run(), so a fired wait's handler is called in place with no post.
struct run_in_context {
  static constexpr bool checked_at_run = false;

  template <typename Handler>
  void dispatch(Handler& h, service_core&, const error_code& ec) { std::move(h)(ec); }

  template <typename Handler>
  void post(Handler& h, service_core& core, const error_code& ec) {
    asio::post(core.context().get_executor(), asio::append(std::move(h), ec));
  }
};

// Where a handler with any other associated executor runs (a strand, another context...). Holds that
// executor with outstanding work tracked, as Asio's operations do, for as long as the wait is pending.
template <typename WorkExecutor>
struct run_on_executor {
  static constexpr bool checked_at_run = true;
  WorkExecutor executor;

  template <typename Handler>
  void dispatch(Handler& h, service_core&, const error_code& ec) {
    asio::dispatch(executor, asio::append(std::move(h), ec));
  }

  // Queued on the service's context first, then dispatched, as Asio's own operations do: posting straight
  // to the handler's executor would run a system_executor or use_future handler on Asio's hidden thread
  // pool instead of inside the context's run().
  template <typename Handler>
  void post(Handler& h, service_core& core, const error_code& ec) {
    asio::post(core.context().get_executor(),
               dispatch_later<Handler>{std::move(executor), std::move(h), ec});
  }

 private:
  template <typename Handler>
  struct dispatch_later {
    using allocator_type = asio::associated_allocator_t<Handler>;

    WorkExecutor executor;
    Handler handler;
    error_code ec;

    allocator_type get_allocator() const noexcept { return asio::get_associated_allocator(handler); }
    void operator()() { asio::dispatch(executor, asio::append(std::move(handler), ec)); }
  };
};

// Releases the operation before the upcall, so that the handler may start its next wait in the same memory,
// then does what `action` says (`call` runs the handler right here, already on its executor).
enum class finish_how { dispatch, post, call, destroy };

template <typename Op>
void finish_op(Op* op, service_core& core, finish_how how, const error_code& ec) {
  auto handler(std::move(op->handler_));
  auto target(std::move(op->target_));
  deallocate_op(op, handler);
  asio::get_associated_cancellation_slot(handler).clear();
  switch (how) {
    case finish_how::dispatch: target.dispatch(handler, core, ec); break;
    case finish_how::post: target.post(handler, core, ec); break;
    case finish_how::call: std::move(handler)(ec); break;
    case finish_how::destroy: break;
  }
}

inline finish_how finish_for(op_action a) noexcept {
  return a == op_action::invoke ? finish_how::dispatch
         : a == op_action::post ? finish_how::post
                                : finish_how::destroy;
}

template <typename Handler, typename Target>
class sleep_op : public sleep_op_base {
 public:
  template <typename H>
  sleep_op(H&& h, Target t) : sleep_op_base(&do_complete), handler_(std::forward<H>(h)), target_(std::move(t)) {}

  Handler& handler() noexcept { return handler_; }

 private:
  template <typename Op> friend void finish_op(Op*, service_core&, finish_how, const error_code&);

  static void do_complete(sleep_op_base* base, service_core& core, op_action a, const error_code& ec) {
    finish_op(static_cast<sleep_op*>(base), core, finish_for(a), ec);
  }

  Handler handler_;
  Target target_;
};

// Runs a fired wait that completes on a foreign executor, once it gets there: only then is it decided
// whether it fired or was cancelled in between. Destroyed unrun (its executor shut down), it destroys the
// wait's handler. Holds the service's core, which the timer's context may no longer have.
template <typename Op>
class fired_wait_runner {
 public:
  fired_wait_runner(service_core& core, Op* op) : core_(core.shared_from_this()), op_(op) {}
  fired_wait_runner(fired_wait_runner&& other) noexcept
      : core_(std::move(other.core_)), op_(std::exchange(other.op_, nullptr)) {}
  fired_wait_runner& operator=(fired_wait_runner&&) = delete;

  ~fired_wait_runner() {
    if (op_ != nullptr) {
      core_->settle_fired(*op_);
      finish_op(op_, *core_, finish_how::destroy, error_code());
    }
  }

  void operator()() {
    Op* op = std::exchange(op_, nullptr);
    const bool fired = core_->settle_fired(*op);
    finish_op(op, *core_, finish_how::call, fired ? error_code() : error_code(asio::error::operation_aborted));
  }

 private:
  std::shared_ptr<service_core> core_;
  Op* op_;
};

template <typename Handler, typename Target>
class timer_wait_op : public wait_op {
 public:
  template <typename H>
  timer_wait_op(H&& h, Target t)
      : wait_op{&do_complete, nullptr, Target::checked_at_run, 0}, handler_(std::forward<H>(h)), target_(std::move(t)) {}

  Handler& handler() noexcept { return handler_; }

 private:
  template <typename Op> friend void finish_op(Op*, service_core&, finish_how, const error_code&);

  static void do_complete(wait_op* base, service_core& core, op_action a, const error_code& ec) {
    auto* self = static_cast<timer_wait_op*>(base);
    if constexpr (Target::checked_at_run) {
      if (a == op_action::invoke) {
        auto executor = self->target_.executor;
        asio::dispatch(executor, fired_wait_runner<timer_wait_op>(core, self));
        return;
      }
    }
    finish_op(self, core, finish_for(a), ec);
  }

  Handler handler_;
  Target target_;
};

}  // namespace tock::detail

#endif
