// tock/detail/slot_cancellation.hpp: what a timer service puts in a wait's cancellation slot, and the guard
// that destroys an operation whose start failed.
#ifndef TOCK_DETAIL_SLOT_CANCELLATION_HPP
#define TOCK_DETAIL_SLOT_CANCELLATION_HPP

#include <tock/config.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/wait_op.hpp>
#include <tock/error.hpp>

namespace tock::detail {

// The service's handler in a wait's or sleep's cancellation slot: cancels it on any type. Its constructor
// and destructor tell the operation whether it is in the slot (see wait_handlers.hpp), so that a slot whose
// signal was destroyed first is never touched. Op is wait_op or sleep_entry.
//
// It reaches the service through the core, never directly: a fired wait queued on another context's
// executor may be emitted there after its own context and service are gone, and the core, which that
// wait's runner holds, then says there is nothing left to take out. Two pointers, so that with the slot's
// own header it takes Asio's 32 bytes (a coroutine frame sized for Asio's handler reuses the block).
template <typename Op>
class slot_cancellation {
 public:
  slot_cancellation(service_core* core, Op* op) noexcept : core_(core), op_(op) {
    op_->complete(op_, *core_, op_action::hooked, error_code());
  }
  // Runs on the signal's side (emplace, clear, the signal's destruction): it only switches the operation's
  // completion function, which is all the operation asks of *core_ here.
  ~slot_cancellation() { op_->complete(op_, *core_, op_action::unhooked, error_code()); }
  slot_cancellation(const slot_cancellation&) = delete;
  slot_cancellation& operator=(const slot_cancellation&) = delete;

  void operator()(asio::cancellation_type type) {
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                 asio::cancellation_type::total)) != asio::cancellation_type::none)
      core_->cancel(*op_);
  }

 private:
  service_core* core_;
  Op* op_;
};

static_assert(sizeof(slot_cancellation<wait_op>) == 2 * sizeof(void*) &&
              sizeof(slot_cancellation<sleep_entry>) == 2 * sizeof(void*));

// Destroys the handler of an operation that could not be started, when the start throws.
template <typename Op>
struct unstarted_op {
  Op* op;
  service_core& core;
  ~unstarted_op() {
    if (op) op->complete(op, core, op_action::destroy, error_code());
  }
};

}  // namespace tock::detail

#endif
