// tock/detail/wait_op.hpp: the type-erased records of pending waits, and the ring a timer keeps them in.
#ifndef TOCK_DETAIL_WAIT_OP_HPP
#define TOCK_DETAIL_WAIT_OP_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/error.hpp>

#include <atomic>
#include <cstdint>

namespace tock::detail {

// What the service asks of an operation whose handler it no longer holds on to.
enum class op_action {
  invoke,   // the wait is over: run the handler now (called from the driver, inside the context's run())
  hooked,   // the service's cancellation handler was put in the handler's slot
  unhooked, // that handler left the slot (the signal was destroyed, another handler replaced it, or the
            // operation cleared it): the slot must never be touched again, its signal may be gone
  deliver,  // a deferred completion runs (from the context's run()): run the handler now with the error,
            // in place or dispatched to the handler's executor
  discard,  // a deferred completion is dropped unrun (its context shut down): destroy the handler
  shutdown, // the service shuts down with the wait pending: destroy the handler, without invoking it
  destroy,  // the wait could not be started: destroy the handler in place, on the starting thread
  detach,   // a deadline's bound entry left its deadline, which is going away (destroyed or assigned over): the
            // operation goes on without a time limit (timed_op; never a timer wait or a sleep)
  unlink,   // a deadline's link let go of the withdrawn entry it held (deadline_link.hpp, rule 1): drop the
            // link's reference (timed_op)
};

// An operation's completion function. Which function it holds also says whether the service's handler is in
// the operation's cancellation slot (see wait_handlers.hpp), and the signal's thread switches it while the
// driver or a canceller may read it: hence an atomic, relaxed (a plain load and store on x86), since either
// function does the same thing and only the handler's executor acts on the difference.
template <typename Fn>
class completion_fn {
 public:
  constexpr completion_fn(Fn f) noexcept : fn_(f) {}  // NOLINT: converts, as the pointer it replaces
  completion_fn(const completion_fn& other) noexcept : fn_(other.get()) {}
  completion_fn& operator=(const completion_fn&) = delete;
  completion_fn& operator=(Fn f) noexcept {
    fn_.store(f, std::memory_order_relaxed);
    return *this;
  }
  Fn get() const noexcept { return fn_.load(std::memory_order_relaxed); }
  template <typename... Args>
  void operator()(Args&&... args) const {
    get()(static_cast<Args&&>(args)...);
  }

 private:
  std::atomic<Fn> fn_;
};

class service_core;

// A wait on a timer. Waits of one timer form a list through `next` from the timer's ring, oldest first; the
// last wait links to the ring's end mark, a tagged pointer to the ring itself, which is how a wait finds its
// timer without holding a pointer to it (timers move). The first `due` waits have fired but still wait to
// run on a foreign executor (see `checked_at_run`), the rest are still waiting.
struct wait_op {
  using complete_fn = void (*)(wait_op*, service_core&, op_action, const error_code&);

  completion_fn<complete_fn> complete = nullptr;
  wait_op* next = nullptr;  // null once the wait has left its ring; its link while deferred (deferred_queue)
  // Completes on an executor other than the context's own, so its handler runs some time after it fires.
  // Such a wait stays in its ring until it runs, so that a cancel() in between still aborts it.
  bool checked_at_run = false;
  // A deadline's bound operation (timed_op): cancelled by its deadline's cancel() right after the lock is let
  // go, on the cancelling thread, not queued behind a drain; detached when its deadline goes away (see
  // detail/locked_section.hpp).
  bool bound = false;
  // A bound operation's entry that may go to its deadline's link (deadline_link.hpp, rule 7); else to the ring.
  bool linkable = false;
  // For an entry held by a deadline's link (deadline_link.hpp, rule 2): attached, withdrawn or claimed. Set
  // before the link publishes the entry, then changed only by compare-and-swap (link_state_of); none otherwise.
  std::uint8_t link_state = 0;
  std::uint32_t seq = 0;  // when the wait started: ranks its timer among equal deadlines while it is the oldest
};

// A wait queued as a deferred completion (see deferred_queue in service_core.hpp) links through `next` too,
// with some of these low bits set, which a ring link never has.
inline constexpr std::uintptr_t deferred_link_bits = 6;
inline bool is_deferred(const wait_op& op) noexcept {
  return (reinterpret_cast<std::uintptr_t>(op.next) & deferred_link_bits) != 0;
}

// The head of a timer's waits: 16 bytes.
struct wait_ring {
  wait_op* head;              // the oldest wait, or end() when there is none
  std::uint32_t waiting = 0;  // waits that have not fired
  std::uint32_t due : 31 = 0;  // fired waits, at the front, whose handlers have not run yet
  // The timer is a deadline, which keeps one more bound operation outside the ring (deadline_link.hpp).
  std::uint32_t has_link : 1 = 0;

  wait_ring() noexcept : head(end()) {}
  wait_ring(const wait_ring&) = delete;
  wait_ring& operator=(const wait_ring&) = delete;

  // What the last wait links to: this ring, tagged in the low bit (waits and rings are aligned).
  wait_op* end() noexcept { return reinterpret_cast<wait_op*>(reinterpret_cast<std::uintptr_t>(this) | 1u); }
  static bool is_end(const wait_op* p) noexcept { return (reinterpret_cast<std::uintptr_t>(p) & 1u) != 0; }

  bool empty() const noexcept { return is_end(head); }

  // O(waits in the ring).
  void push_back(wait_op& op) noexcept {
    wait_op** link = &head;
    while (!is_end(*link)) link = &(*link)->next;
    op.next = *link;
    *link = &op;
    ++waiting;
  }

  // The oldest wait that has not fired, or null. O(due).
  wait_op* first_waiting() noexcept {
    wait_op* op = *link_to_first_waiting();
    return is_end(op) ? nullptr : op;
  }

  // Fires the oldest waiting wait: it leaves the ring, or joins the due prefix if it `checked_at_run`.
  // Requires waiting > 0. O(due).
  wait_op& fire_first() noexcept {
    wait_op** link = link_to_first_waiting();
    wait_op& op = **link;
    --waiting;
    if (op.checked_at_run)
      ++due;
    else
      unlink(link, op);
    return op;
  }

  // A fired wait that was kept elsewhere (a deadline's link) joins the due prefix, first. O(1).
  void push_due(wait_op& op) noexcept {
    op.next = head;
    head = &op;
    ++due;
  }

  // Takes the oldest waiting wait out of the ring, leaving fired ones. Requires waiting > 0. O(due).
  wait_op& take_first_waiting() noexcept {
    wait_op** link = link_to_first_waiting();
    wait_op& op = **link;
    --waiting;
    unlink(link, op);
    return op;
  }

  // Takes the oldest wait out of the ring; `was_due` tells whether it had fired. Requires !empty(). O(1).
  wait_op& take_front(bool& was_due) noexcept {
    wait_op& op = *head;
    was_due = due > 0;
    if (was_due)
      --due;
    else
      --waiting;
    unlink(&head, op);
    return op;
  }

  // A fired wait that has not run becomes the oldest waiting one again, given the link that points to it.
  // O(due).
  void unfire(wait_op** link, wait_op& op) noexcept {
    unlink(link, op);
    --due;
    wait_op** at = link_to_first_waiting();
    op.next = *at;
    *at = &op;
    ++waiting;
  }

  // Takes `op` out of the ring, given the link that points to it. O(1).
  static void unlink(wait_op** link, wait_op& op) noexcept {
    *link = op.next;
    op.next = nullptr;
  }

  // The ring a linked wait belongs to, and the link that points to the wait. O(waits in the ring).
  static wait_ring& ring_of(wait_op& op, wait_op**& link) noexcept {
    wait_op* p = op.next;
    while (!is_end(p)) p = p->next;
    wait_ring& ring = *reinterpret_cast<wait_ring*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t(1));
    link = &ring.head;
    while (*link != &op) link = &(*link)->next;
    return ring;
  }

  // Position of a linked wait from the front: it is due if the position is below `due`.
  std::uint32_t index_of(const wait_op& op) const noexcept {
    std::uint32_t i = 0;
    for (const wait_op* p = head; p != &op; p = p->next) ++i;
    return i;
  }

  // The ring object moved to `*this` from `from`: repoint the last wait at the new end mark.
  void take_from(wait_ring& from) noexcept {
    waiting = from.waiting;
    due = from.due;  // has_link is the timer's own: it stays
    if (from.empty()) {
      head = end();
    } else {
      head = from.head;
      wait_op* last = head;
      while (!is_end(last->next)) last = last->next;
      last->next = end();
    }
    from.head = from.end();
    from.waiting = 0;
    from.due = 0;
  }

 private:
  wait_op** link_to_first_waiting() noexcept {
    wait_op** link = &head;
    for (std::uint32_t i = 0; i < due; ++i) link = &(*link)->next;
    return link;
  }
};

// A sleep: a wait without a timer object, which sits in the heap itself.
struct sleep_entry {
  using complete_fn = void (*)(sleep_entry*, service_core&, op_action, const error_code&);

  heap_node node;  // first member: a heap_node* of a sleep converts back with from_node()
  completion_fn<complete_fn> complete;
  // One word, two lives (a sleep is queued only once out of the heap): while in the heap, its slack in clock
  // ticks (its key is its deadline + slack, timer_node.hpp rule 0); while queued in the core's
  // deferred_queue, its link there. A sleep stays 24 bytes before its handler.
  union {
    std::int64_t slack = 0;
    std::uintptr_t deferred_next;
  };

  explicit sleep_entry(complete_fn f) noexcept : complete(f) {}
  static sleep_entry* from_node(heap_node* n) noexcept { return reinterpret_cast<sleep_entry*>(n); }
};

}  // namespace tock::detail

#endif
