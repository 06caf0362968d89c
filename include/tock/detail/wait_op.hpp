// tock/detail/wait_op.hpp: the type-erased records of pending waits, and the ring a timer keeps them in.
#ifndef TOCK_DETAIL_WAIT_OP_HPP
#define TOCK_DETAIL_WAIT_OP_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tock::detail {

// What the service asks of an operation whose handler it no longer holds on to.
enum class op_action {
  invoke,   // the wait is over: run the handler now (called from the driver, inside the context's run())
  unhook,   // the wait was aborted or refused and its completion deferred (under the service's lock): take
            // the service's handler out of its cancellation slot now, since its signal may be gone by the
            // time the completion runs
  hooked,   // the service's cancellation handler was put in the handler's slot
  unhooked, // that handler left the slot (the signal was destroyed, another handler replaced it, or the
            // service cleared it): the slot must never be touched again, its signal may be gone
  deliver,  // a deferred completion runs (from the context's run()): run the handler now with the error,
            // in place or dispatched to the handler's executor
  discard,  // a deferred completion is dropped unrun (its context shut down): destroy the handler
  destroy,  // shutdown: destroy the handler of a pending wait without invoking it
};

class service_core;

// A wait on a timer. Waits of one timer form a list through `next` from the timer's ring, oldest first; the
// last wait links to the ring's end mark, a tagged pointer to the ring itself, which is how a wait finds its
// timer without holding a pointer to it (timers move). The first `due` waits have fired but still wait to
// run on a foreign executor (see `checked_at_run`), the rest are still waiting.
struct wait_op {
  using complete_fn = void (*)(wait_op*, service_core&, op_action, const error_code&);

  complete_fn complete = nullptr;
  wait_op* next = nullptr;  // null once the wait has left its ring
  // Completes on an executor other than the context's own, so its handler runs some time after it fires.
  // Such a wait stays in its ring until it runs, so that a cancel() in between still aborts it.
  bool checked_at_run = false;
  std::uint32_t seq = 0;  // when the wait started: ranks its timer among equal deadlines while it is the oldest
};

// The head of a timer's waits: 16 bytes.
struct wait_ring {
  wait_op* head;              // the oldest wait, or end() when there is none
  std::uint32_t waiting = 0;  // waits that have not fired
  std::uint32_t due = 0;      // fired waits, at the front, whose handlers have not run yet

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
    due = from.due;
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
struct sleep_op_base {
  using complete_fn = void (*)(sleep_op_base*, service_core&, op_action, const error_code&);

  heap_node node;  // first member: a heap_node* of a sleep converts back with from_node()
  complete_fn complete;

  explicit sleep_op_base(complete_fn f) noexcept : complete(f) {}
  static sleep_op_base* from_node(heap_node* n) noexcept { return reinterpret_cast<sleep_op_base*>(n); }
};

// The part of a timer service that its operations reach: the lock, the context, the hand-over of a fired
// wait that runs on a foreign executor, and the queue of deferred completions. Not a template, so the
// operations need not know the clock.
//
// Deferred completions: a wait that is aborted (cancel, reset, destroy, its slot) or refused (capacity)
// completes later, from the context, as Asio's do. Rather than post each one (an allocation and a trip
// through the scheduler per wait), its operation is queued here, still holding its handler, and one drain
// posted to the context runs every completion queued until it starts: one post per batch, no allocation per
// wait. A completion queued while a drain is pending runs in that drain, which was posted before it, so
// completions still run before anything posted after them.
class service_core : public std::enable_shared_from_this<service_core> {
 public:
  enum class deferred_error : std::uint8_t { aborted, capacity_exceeded };

  explicit service_core(boost::asio::io_context& ctx) noexcept : ctx_(ctx) {}
  service_core(const service_core&) = delete;
  service_core& operator=(const service_core&) = delete;
  ~service_core() { run_batch(deferred_, false); }  // only left when a drain could not be posted

  boost::asio::io_context& context() const noexcept { return ctx_; }
  std::mutex& mutex() noexcept { return mutex_; }

  // Called on the handler's executor when a fired wait that `checked_at_run` is about to run: true if it
  // still counts as fired, false if it was cancelled in between (it is then reported as aborted).
  bool settle_fired(wait_op& op) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (op.next == nullptr) return false;
    wait_op** link = nullptr;
    wait_ring& ring = wait_ring::ring_of(op, link);
    wait_ring::unlink(link, op);
    --ring.due;
    return true;
  }

  // Makes room for `n` more deferred completions, so that deferring them cannot throw. Under the lock.
  void reserve_deferred_locked(std::size_t n) {
    if (deferred_.capacity() - deferred_.size() < n)
      deferred_.reserve(std::max<std::size_t>(deferred_.size() + n, 2 * deferred_.capacity()));
  }

  // Queues the completion of an operation that left the service; true if the caller must post_drain() once
  // it has released the lock. Requires reserve_deferred_locked() first. O(1).
  bool defer_locked(wait_op& op, deferred_error e) noexcept {
    op.complete(&op, *this, op_action::unhook, error_code());
    return push_locked({&op, true, e});
  }
  bool defer_locked(sleep_op_base& op, deferred_error e) noexcept {
    op.complete(&op, *this, op_action::unhook, error_code());
    return push_locked({&op, false, e});
  }

  // Posts the drain that defer_locked() asked for.
  void post_drain() {
    try {
      boost::asio::post(ctx_.get_executor(), drain{shared_from_this(), {}});
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      drain_posted_ = false;  // the next deferral tries again
      throw;
    }
  }

 private:
  struct deferred_completion {
    void* op;
    bool is_wait;
    deferred_error error;
  };

  bool push_locked(const deferred_completion& c) noexcept {
    deferred_.push_back(c);  // cannot throw: reserved
    return !std::exchange(drain_posted_, true);
  }

  // Runs (or, when the context shuts down with it queued, destroys) the completions queued before it
  // started. If a handler throws, the rest go to a new drain and the exception leaves run().
  class drain {
   public:
    drain(std::shared_ptr<service_core> core, std::vector<deferred_completion> batch) noexcept
        : core_(std::move(core)), batch_(std::move(batch)) {}
    drain(drain&&) noexcept = default;
    drain& operator=(drain&&) = delete;
    ~drain() {
      if (core_) core_->destroy_unrun(batch_);
    }
    void operator()() { std::exchange(core_, nullptr)->run_drain(batch_); }

   private:
    std::shared_ptr<service_core> core_;
    std::vector<deferred_completion> batch_;
  };

  // A drain takes the queue unless it carries the rest of a batch whose handler threw.
  void take_queue(std::vector<deferred_completion>& batch) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (batch.empty()) {
      batch.swap(deferred_);
      drain_posted_ = false;
    }
  }

  void destroy_unrun(std::vector<deferred_completion>& batch) noexcept {
    take_queue(batch);
    run_batch(batch, false);
  }

  void run_drain(std::vector<deferred_completion>& batch) {
    take_queue(batch);
    std::size_t next = 0;
    try {
      while (next < batch.size()) {
        const deferred_completion c = batch[next++];
        complete(c, true);
      }
    } catch (...) {
      batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(next));
      if (!batch.empty()) boost::asio::post(ctx_.get_executor(), drain{shared_from_this(), std::move(batch)});
      throw;
    }
    // Hand the buffer back so that the next batch does not allocate.
    batch.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    if (deferred_.empty() && deferred_.capacity() < batch.capacity()) deferred_.swap(batch);
  }

  void run_batch(std::vector<deferred_completion>& batch, bool run) noexcept {
    for (const deferred_completion& c : batch) complete(c, run);
    batch.clear();
  }

  void complete(const deferred_completion& c, bool run) {
    const error_code ec = c.error == deferred_error::aborted ? error_code(boost::asio::error::operation_aborted)
                                                              : make_error_code(error::capacity_exceeded);
    const op_action a = run ? op_action::deliver : op_action::discard;
    if (c.is_wait) {
      auto* op = static_cast<wait_op*>(c.op);
      op->complete(op, *this, a, ec);
    } else {
      auto* op = static_cast<sleep_op_base*>(c.op);
      op->complete(op, *this, a, ec);
    }
  }

  boost::asio::io_context& ctx_;
  std::mutex mutex_;
  std::vector<deferred_completion> deferred_;  // under mutex_
  bool drain_posted_ = false;                  // a drain is queued and has not taken deferred_ yet
};

}  // namespace tock::detail

#endif
