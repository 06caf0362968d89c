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
// signal was destroyed first is never touched. Op is wait_op or sleep_entry; Service has cancel_op(Op&).
template <typename Service, typename Op>
class slot_cancellation {
 public:
  slot_cancellation(Service* s, service_core* core, Op* op) noexcept : service_(s), core_(core), op_(op) {
    op_->complete(op_, *core_, op_action::hooked, error_code());
  }
  // Through the core, not the service: a fired wait run on another context's executor may clear its slot
  // after its service is gone (the core lives on with it).
  ~slot_cancellation() { op_->complete(op_, *core_, op_action::unhooked, error_code()); }
  slot_cancellation(const slot_cancellation&) = delete;
  slot_cancellation& operator=(const slot_cancellation&) = delete;

  void operator()(asio::cancellation_type type) {
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                 asio::cancellation_type::total)) != asio::cancellation_type::none)
      service_->cancel_op(*op_);  // may destroy *this (the slot is cleared): nothing after it
  }

 private:
  Service* service_;
  service_core* core_;
  Op* op_;
};

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
