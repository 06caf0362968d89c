// tock/detail/wait_handlers.hpp: the concrete operations that own a user's handler until a wait completes.
#ifndef TOCK_DETAIL_WAIT_HANDLERS_HPP
#define TOCK_DETAIL_WAIT_HANDLERS_HPP

#include <tock/detail/op_memory.hpp>
#include <tock/detail/wait_op.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace tock::detail {

namespace asio = boost::asio;

// Operations are allocated through the handler's associated allocator; by default tock's thread-local cache
// (op_memory.hpp), so that a handler that waits again reuses the memory its last wait released.
template <typename Handler>
auto handler_allocator(const Handler& h) noexcept {
  return asio::get_associated_allocator(h, op_allocator<void>());
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

// Where a handler whose associated executor is the service's own io_context runs: the driver and the drain
// of deferred completions are already inside that context's run(), so the handler is called in place.
struct run_in_context {
  static constexpr bool checked_at_run = false;

  template <typename Handler>
  void dispatch(Handler& h, service_core&, const error_code& ec) { std::move(h)(ec); }
};

// Where a handler with any other associated executor runs (a strand, another context...). Holds that
// executor with outstanding work tracked, as Asio's operations do, for as long as the wait is pending.
// Completions reach it from inside the service's context (the driver, or the drain of deferred ones), then
// are dispatched: posting straight to the handler's executor would run a system_executor or use_future
// handler on Asio's hidden thread pool instead of inside the context's run().
template <typename WorkExecutor>
struct run_on_executor {
  static constexpr bool checked_at_run = true;
  WorkExecutor executor;

  template <typename Handler>
  void dispatch(Handler& h, service_core&, const error_code& ec) {
    asio::dispatch(executor, asio::append(std::move(h), ec));
  }
};

// Whether the service's cancellation handler sits in an operation's slot is told by which completion
// function the operation holds (do_complete<true> or <false>), so that it costs no byte: the handler's
// constructor and destructor switch it (op_action::hooked, unhooked). The slot is cleared only while our
// handler is in it; once the signal destroyed it (or another handler replaced it) the slot, and the memory
// of a signal that may be gone, is never touched again. Asio never touches a slot after emplacing; tock
// clears it on completion because its handler points at the operation, so a stale emit() stays harmless.

// Releases the operation before the upcall, so that the handler may start its next wait in the same memory,
// then does what `how` says (`call` runs the handler right here, already on its executor). The service's
// cancellation handler leaves the handler's slot first if it is still there.
enum class finish_how { dispatch, call, destroy };

template <typename Op>
void finish_op(Op* op, service_core& core, finish_how how, const error_code& ec) {
  if (Op::slot_hooked(op)) asio::get_associated_cancellation_slot(op->handler_).clear();
  auto handler(std::move(op->handler_));
  auto target(std::move(op->target_));
  deallocate_op(op, handler);
  switch (how) {
    case finish_how::dispatch: target.dispatch(handler, core, ec); break;
    case finish_how::call: std::move(handler)(ec); break;
    case finish_how::destroy: break;
  }
}

template <typename Op>
class fired_wait_runner;

// What a timer wait or sleep does for each op_action. A fired one whose handler runs on a foreign executor
// is finished there by a runner: a timer wait is settled there (fired or cancelled since), and either is
// freed only there, where its cancellation slot is emitted, so that an emit racing the driver never finds
// the operation gone.
template <typename Op, typename Base>
void complete_op(Op* op, service_core& core, op_action a, const error_code& ec) {
  switch (a) {
    case op_action::invoke:
      if constexpr (std::decay_t<decltype(op->target_)>::checked_at_run) {
        auto executor = op->target_.executor;
        asio::dispatch(executor, fired_wait_runner<Op>(core, op));
      } else {
        finish_op(op, core, finish_how::dispatch, ec);
      }
      break;
    case op_action::unhook:
      if (Op::slot_hooked(op)) asio::get_associated_cancellation_slot(op->handler_).clear();
      break;
    case op_action::hooked: static_cast<Base*>(op)->complete = &Op::template do_complete<true>; break;
    case op_action::unhooked: static_cast<Base*>(op)->complete = &Op::template do_complete<false>; break;
    case op_action::deliver: finish_op(op, core, finish_how::dispatch, ec); break;
    case op_action::discard:
    case op_action::destroy: finish_op(op, core, finish_how::destroy, ec); break;
  }
}

template <typename Handler, typename Target>
class sleep_op : public sleep_op_base {
 public:
  template <typename H>
  sleep_op(H&& h, Target t)
      : sleep_op_base(&do_complete<false>), handler_(std::forward<H>(h)), target_(std::move(t)) {}

  Handler& handler() noexcept { return handler_; }

  template <bool Hooked>
  static void do_complete(sleep_op_base* base, service_core& core, op_action a, const error_code& ec) {
    complete_op<sleep_op, sleep_op_base>(static_cast<sleep_op*>(base), core, a, ec);
  }
  static bool slot_hooked(const sleep_op* op) noexcept { return op->complete == &do_complete<true>; }

 private:
  template <typename Op> friend void finish_op(Op*, service_core&, finish_how, const error_code&);
  template <typename Op, typename Base> friend void complete_op(Op*, service_core&, op_action, const error_code&);

  Handler handler_;
  [[no_unique_address]] Target target_;
};

// Runs a fired wait or sleep that completes on a foreign executor, once it gets there: only then is it
// decided whether a timer wait fired or was cancelled in between (a fired sleep has left the service and
// completes with success). Destroyed unrun (its executor shut down), it destroys the handler. Holds the
// service's core, which the timer's context may no longer have.
template <typename Op>
class fired_wait_runner {
 public:
  fired_wait_runner(service_core& core, Op* op) : core_(core.shared_from_this()), op_(op) {}
  fired_wait_runner(fired_wait_runner&& other) noexcept
      : core_(std::move(other.core_)), op_(std::exchange(other.op_, nullptr)) {}
  fired_wait_runner& operator=(fired_wait_runner&&) = delete;

  ~fired_wait_runner() {
    if (op_ != nullptr) {
      settle(*op_);
      finish_op(op_, *core_, finish_how::destroy, error_code());
    }
  }

  void operator()() {
    Op* op = std::exchange(op_, nullptr);
    const bool fired = settle(*op);
    finish_op(op, *core_, finish_how::call, fired ? error_code() : error_code(asio::error::operation_aborted));
  }

 private:
  bool settle(Op& op) {
    if constexpr (std::is_base_of_v<wait_op, Op>)
      return core_->settle_fired(op);
    else
      return true;
  }

  std::shared_ptr<service_core> core_;
  Op* op_;
};

template <typename Handler, typename Target>
class timer_wait_op : public wait_op {
 public:
  template <typename H>
  timer_wait_op(H&& h, Target t)
      : wait_op{&do_complete<false>, nullptr, Target::checked_at_run, 0},
        handler_(std::forward<H>(h)),
        target_(std::move(t)) {}

  Handler& handler() noexcept { return handler_; }

  template <bool Hooked>
  static void do_complete(wait_op* base, service_core& core, op_action a, const error_code& ec) {
    complete_op<timer_wait_op, wait_op>(static_cast<timer_wait_op*>(base), core, a, ec);
  }
  static bool slot_hooked(const timer_wait_op* op) noexcept { return op->complete == &do_complete<true>; }

 private:
  template <typename Op> friend void finish_op(Op*, service_core&, finish_how, const error_code&);
  template <typename Op, typename Base> friend void complete_op(Op*, service_core&, op_action, const error_code&);

  Handler handler_;
  [[no_unique_address]] Target target_;
};

}  // namespace tock::detail

#endif
