// tock/detail/wait_handlers.hpp: the concrete operations that own a user's handler until a wait completes.
#ifndef TOCK_DETAIL_WAIT_HANDLERS_HPP
#define TOCK_DETAIL_WAIT_HANDLERS_HPP

#include <tock/config.hpp>
#include <tock/detail/op_memory.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/wait_op.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace tock::detail {

// Operations are allocated through the handler's associated allocator; by default tock's thread-local cache
// (op_memory.hpp), so that a handler that waits again reuses the memory its last wait released.
template <typename Handler>
auto handler_allocator(const Handler& h) noexcept {
  return asio::get_associated_allocator(h, op_allocator<void>());
}

template <typename Op, typename Handler>
using op_allocator_t = typename std::allocator_traits<decltype(handler_allocator(
    std::declval<const Handler&>()))>::template rebind_alloc<Op>;

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
};

// Where a handler with any other associated executor runs (a strand, another context...). Holds that
// executor with outstanding work tracked, as Asio's operations do, for as long as the wait is pending.
// Completions reach it from inside the service's context (the driver, or the drain of deferred ones), then
// are dispatched (see foreign_runner): posting straight to the handler's executor would run a
// system_executor or use_future handler on Asio's hidden thread pool instead of inside the context's run().
template <typename WorkExecutor>
struct run_on_executor {
  static constexpr bool checked_at_run = true;
  WorkExecutor executor;
};

// Whether the service's cancellation handler sits in an operation's slot is told by which completion
// function the operation holds (do_complete<true> or <false>), so that it costs no byte: the handler's
// constructor and destructor switch it (op_action::hooked, unhooked). The slot is cleared only while our
// handler is in it, and only on the handler's executor, just before the handler runs or is destroyed there:
// that is where Asio lets code emit, clear or destroy a signal, so nothing else touches the slot meanwhile.
// Once the signal destroyed our handler (or another handler replaced it) the slot, and the memory of a
// signal that may be gone, is never touched again. Asio never clears a slot after emplacing; tock does,
// because its handler points at the operation, whose memory is about to be freed.

// Releases the operation before the upcall, so that the handler may start its next wait in the same memory,
// then calls the handler (already on its executor) or only destroys it. The service's cancellation handler
// leaves the handler's slot first if it is still there.
enum class finish_how { call, destroy };

template <typename Op>
void finish_op(Op* op, finish_how how, const error_code& ec) {
  if (Op::slot_hooked(op)) asio::get_associated_cancellation_slot(op->handler_).clear();
  auto handler(std::move(op->handler_));
  [[maybe_unused]] auto target(std::move(op->target_));  // its work is held until the handler has run
  deallocate_op(op, handler);
  if (how == finish_how::call) std::move(handler)(ec);
}

// Finishes a wait or sleep on its foreign executor, once it gets there. A fired timer wait is settled there
// (`settle`: fired, or cancelled in between), and either kind is freed only there, where its cancellation
// slot is emitted, so that an emit racing the driver never finds the operation gone. Destroyed unrun (its
// executor shut down), or sent only to be dropped (`drop`: its service shut down while its slot may still
// hold the service's handler), it destroys the handler. Holds the service's core, which the timer's context
// may no longer have. Its memory comes from the handler's associated allocator, as Asio's intermediate
// operations.
template <typename Op>
class foreign_runner {
 public:
  using allocator_type = asio::associated_allocator_t<typename Op::handler_type>;

  enum class mode : unsigned char { run, run_settled, drop };

  foreign_runner(service_core& core, Op* op, mode m, const error_code& ec)
      : core_(core.shared_from_this()), op_(op), ec_(ec), mode_(m),
        alloc_(asio::get_associated_allocator(op->handler())) {}
  foreign_runner(foreign_runner&& other) noexcept
      : core_(std::move(other.core_)), op_(std::exchange(other.op_, nullptr)), ec_(other.ec_), mode_(other.mode_),
        alloc_(other.alloc_) {}
  foreign_runner& operator=(foreign_runner&&) = delete;

  ~foreign_runner() {
    if (op_ != nullptr && !dispatching::give_back(op_)) {
      settle();
      finish_op(op_, finish_how::destroy, error_code());
    }
  }

  allocator_type get_allocator() const noexcept { return alloc_; }

  // Gives the operation back if the runner still holds it (its dispatch threw before taking it).
  bool release() noexcept { return std::exchange(op_, nullptr) != nullptr; }

  void operator()() {
    if (mode_ == mode::drop) return finish_op(std::exchange(op_, nullptr), finish_how::destroy, error_code());
    const bool fired = settle();
    finish_op(std::exchange(op_, nullptr), finish_how::call, fired ? ec_ : error_code(asio::error::operation_aborted));
  }

 private:
  bool settle() {
    if constexpr (std::is_base_of_v<wait_op, Op>)
      return mode_ != mode::run_settled || core_->settle_fired(*op_);
    else
      return true;
  }

  std::shared_ptr<service_core> core_;
  Op* op_;
  error_code ec_;
  mode mode_;
  [[no_unique_address]] allocator_type alloc_;
};

// Dispatches `op` to its executor through a foreign_runner. If the dispatch throws before taking the runner
// (it could not allocate), the operation is left as it was and `kept` runs before the exception goes on.
// (If Asio took it and then failed, e.g. a strand that queued it but could not schedule itself, it is
// Asio's: it runs when the strand next runs.)
template <typename Op, typename Kept>
void dispatch_to_executor(Op* op, service_core& core, typename foreign_runner<Op>::mode m, const error_code& ec,
                          Kept kept) {
  foreign_runner<Op> runner(core, op, m, ec);
  auto executor = op->target_.executor;  // the runner may free the operation before dispatch returns
  dispatching guard(op);
  try {
    asio::dispatch(executor, std::move(runner));
  } catch (...) {
    if (runner.release() || guard.given_back()) kept();
    throw;
  }
}

// Destroys the handler of an operation that will never complete (its service shut down, or its deferred
// completion was dropped with its context). If the service's handler may still be in its slot and the
// handler runs on a foreign executor, where the slot may be emitted or its signal destroyed right now, the
// handler is destroyed there (as a foreign_runner); if even that cannot allocate, here.
template <typename Op>
void drop_op(Op* op, service_core& core) noexcept {
  constexpr bool foreign = std::decay_t<decltype(op->target_)>::checked_at_run;
  if constexpr (foreign) {
    if (Op::slot_hooked(op)) {
      bool kept = false;
      try {
        dispatch_to_executor(op, core, foreign_runner<Op>::mode::drop, error_code(), [&] { kept = true; });
        return;
      } catch (...) {
        if (!kept) return;  // Asio took it: it is destroyed on its executor, as asked
      }
    }
  }
  finish_op(op, finish_how::destroy, error_code());
}

// What a timer wait or sleep does for each op_action. One whose handler runs on a foreign executor is
// finished there by a foreign_runner; if that dispatch cannot allocate, nothing is lost: the operation is
// kept as it was (completion_kept) for its caller to place again (the driver) or queue again (the drain),
// and the exception leaves run() as Asio's do.
template <typename Op, typename Base>
void complete_op(Op* op, service_core& core, op_action a, const error_code& ec) {
  using runner_mode = typename foreign_runner<Op>::mode;
  constexpr bool foreign = std::decay_t<decltype(op->target_)>::checked_at_run;
  switch (a) {
    case op_action::invoke:
      if constexpr (foreign)
        dispatch_to_executor(op, core, runner_mode::run_settled, ec, [] { completion_kept = true; });
      else
        finish_op(op, finish_how::call, ec);
      break;
    case op_action::hooked: static_cast<Base*>(op)->complete = &Op::template do_complete<true>; break;
    case op_action::unhooked: static_cast<Base*>(op)->complete = &Op::template do_complete<false>; break;
    case op_action::deliver:
      if constexpr (foreign)
        dispatch_to_executor(op, core, runner_mode::run, ec, [] { completion_kept = true; });
      else
        finish_op(op, finish_how::call, ec);
      break;
    case op_action::discard:
    case op_action::shutdown: drop_op(op, core); break;
    case op_action::destroy: finish_op(op, finish_how::destroy, ec); break;
    case op_action::detach:
    case op_action::unlink: break;  // only a deadline's bound entry is detached, or held by a link
  }
}

// The operation that owns a user's handler until its wait completes: a timer wait (Base wait_op, in its
// timer's ring) or a sleep (Base sleep_entry, in the heap itself).
template <typename Base, typename Handler, typename Target>
class handler_op : public Base {
 public:
  template <typename H>
  handler_op(H&& h, Target t) : Base(make_base()), handler_(std::forward<H>(h)), target_(std::move(t)) {}

  using handler_type = Handler;
  Handler& handler() noexcept { return handler_; }

  template <bool Hooked>
  static void do_complete(Base* base, service_core& core, op_action a, const error_code& ec) {
    complete_op<handler_op, Base>(static_cast<handler_op*>(base), core, a, ec);
  }
  static bool slot_hooked(const handler_op* op) noexcept { return op->complete.get() == &do_complete<true>; }

 private:
  template <typename Op>
  friend void finish_op(Op*, finish_how, const error_code&);
  template <typename Op, typename B>
  friend void complete_op(Op*, service_core&, op_action, const error_code&);
  template <typename Op, typename Kept>
  friend void dispatch_to_executor(Op*, service_core&, typename foreign_runner<Op>::mode, const error_code&, Kept);
  template <typename Op>
  friend void drop_op(Op*, service_core&) noexcept;

  static Base make_base() noexcept {
    if constexpr (std::is_same_v<Base, wait_op>)
      return wait_op{&do_complete<false>, nullptr, Target::checked_at_run, false};
    else
      return sleep_entry(&do_complete<false>);
  }

  Handler handler_;
  [[no_unique_address]] Target target_;
};

template <typename Handler, typename Target>
using timer_wait_op = handler_op<wait_op, Handler, Target>;

template <typename Handler, typename Target>
using sleep_op = handler_op<sleep_entry, Handler, Target>;

}  // namespace tock::detail

#endif
