// tock/detail/wait_op.hpp: the type-erased records of pending waits, and the ring a timer keeps them in.
#ifndef TOCK_DETAIL_WAIT_OP_HPP
#define TOCK_DETAIL_WAIT_OP_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/error.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <mutex>

namespace tock::detail {

// What the service asks of an operation whose handler it no longer holds on to.
enum class op_action {
  invoke,   // the wait is over: run the handler now (called from the driver, inside the context's run())
  post,     // complete later through the handler's executor (called from user code: cancel, reset, destroy)
  destroy,  // shutdown: destroy the handler without invoking it
};

class service_core;

// A wait on a timer. Waits of one timer form a ring through `next` that starts and ends at a sentinel held
// by the timer; a sentinel is the one link with no completion function, which is how a walk recognises it.
// The ring is ordered oldest first; the first `due` waits have fired but still wait to run on a foreign
// executor (see `checked_at_run`), the rest are still waiting.
struct wait_op {
  using complete_fn = void (*)(wait_op*, service_core&, op_action, const error_code&);

  complete_fn complete = nullptr;
  wait_op* next = nullptr;  // null once the wait has left its ring
  // Completes on an executor other than the context's own, so its handler runs some time after it fires.
  // Such a wait stays in its ring until it runs, so that a cancel() in between still aborts it.
  bool checked_at_run = false;
  std::uint32_t seq = 0;  // when the wait started: ranks its timer among equal deadlines while it is the oldest
};

struct wait_ring {
  wait_op sentinel{nullptr, &sentinel, false, 0};
  std::uint32_t waiting = 0;  // waits that have not fired
  std::uint32_t due = 0;      // fired waits, at the front of the ring, whose handlers have not run yet

  wait_ring() = default;
  wait_ring(const wait_ring&) = delete;
  wait_ring& operator=(const wait_ring&) = delete;

  bool empty() const noexcept { return sentinel.next == &sentinel; }

  // O(waits in the ring).
  void push_back(wait_op& op) noexcept {
    wait_op* last = &sentinel;
    while (last->next != &sentinel) last = last->next;
    op.next = &sentinel;
    last->next = &op;
    ++waiting;
  }

  // The oldest wait that has not fired, or null. O(due).
  wait_op* first_waiting() noexcept {
    wait_op* op = sentinel.next;
    for (std::uint32_t i = 0; i < due; ++i) op = op->next;
    return op == &sentinel ? nullptr : op;
  }

  // Fires the oldest waiting wait: it leaves the ring, or joins the due prefix if it `checked_at_run`.
  // Requires waiting > 0. O(due).
  wait_op& fire_first() noexcept {
    wait_op* prev = &sentinel;
    for (std::uint32_t i = 0; i < due; ++i) prev = prev->next;
    wait_op& op = *prev->next;
    --waiting;
    if (op.checked_at_run)
      ++due;
    else
      unlink_after(*prev, op);
    return op;
  }

  // Takes the oldest waiting wait out of the ring, leaving fired ones. Requires waiting > 0. O(due).
  wait_op& take_first_waiting() noexcept {
    wait_op* prev = &sentinel;
    for (std::uint32_t i = 0; i < due; ++i) prev = prev->next;
    wait_op& op = *prev->next;
    --waiting;
    unlink_after(*prev, op);
    return op;
  }

  // Takes the oldest wait out of the ring; `was_due` tells whether it had fired. Requires !empty(). O(1).
  wait_op& take_front(bool& was_due) noexcept {
    wait_op& op = *sentinel.next;
    was_due = due > 0;
    if (was_due)
      --due;
    else
      --waiting;
    unlink_after(sentinel, op);
    return op;
  }

  // Takes `op`, whose predecessor is `prev`, out of the ring. O(1).
  static void unlink_after(wait_op& prev, wait_op& op) noexcept {
    prev.next = op.next;
    op.next = nullptr;
  }

  // The ring a linked wait belongs to, and the wait before it. O(waits in the ring).
  static wait_ring& ring_of(wait_op& op, wait_op*& prev) noexcept {
    wait_op* s = op.next;
    while (s->complete != nullptr) s = s->next;
    wait_ring& ring = *reinterpret_cast<wait_ring*>(s);  // the sentinel is the ring's first member
    prev = s;
    while (prev->next != &op) prev = prev->next;
    return ring;
  }

  // Position of a linked wait from the front: it is due if the position is below `due`.
  std::uint32_t index_of(const wait_op& op) const noexcept {
    std::uint32_t i = 0;
    for (const wait_op* p = sentinel.next; p != &op; p = p->next) ++i;
    return i;
  }

  // The ring object moved to `*this` from `from`: repoint the last wait at the new sentinel.
  void take_from(wait_ring& from) noexcept {
    waiting = from.waiting;
    due = from.due;
    if (from.empty()) {
      sentinel.next = &sentinel;
    } else {
      sentinel.next = from.sentinel.next;
      wait_op* last = sentinel.next;
      while (last->next != &from.sentinel) last = last->next;
      last->next = &sentinel;
    }
    from.sentinel.next = &from.sentinel;
    from.waiting = 0;
    from.due = 0;
  }
};

// A sleep: a wait without a timer object, which sits in the heap itself.
struct sleep_op_base {
  using complete_fn = void (*)(sleep_op_base*, service_core&, op_action, const error_code&);

  heap_node node;  // first member: a heap_node* of a sleep converts back with from_node()
  complete_fn complete;

  explicit sleep_op_base(complete_fn f) noexcept : complete(f) {}
  static sleep_op_base* from_node(heap_node* n) noexcept { return reinterpret_cast<sleep_op_base*>(n); }
};

// The part of a timer service that its operations reach: the lock, the context, and the hand-over of a
// fired wait that runs on a foreign executor. Not a template, so the operations need not know the clock.
class service_core : public std::enable_shared_from_this<service_core> {
 public:
  explicit service_core(boost::asio::io_context& ctx) noexcept : ctx_(ctx) {}

  boost::asio::io_context& context() const noexcept { return ctx_; }
  std::mutex& mutex() noexcept { return mutex_; }

  // Called on the handler's executor when a fired wait that `checked_at_run` is about to run: true if it
  // still counts as fired, false if it was cancelled in between (it is then reported as aborted).
  bool settle_fired(wait_op& op) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (op.next == nullptr) return false;
    wait_op* prev = nullptr;
    wait_ring& ring = wait_ring::ring_of(op, prev);
    wait_ring::unlink_after(*prev, op);
    --ring.due;
    return true;
  }

 private:
  boost::asio::io_context& ctx_;
  std::mutex mutex_;
};

}  // namespace tock::detail

#endif
