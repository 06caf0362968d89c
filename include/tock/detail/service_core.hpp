// tock/detail/service_core.hpp: the part of a timer service its operations reach, and its queue of deferred
// completions. Not a template: its larger bodies are compiled once, in libtock (src/service_core.cpp).
#ifndef TOCK_DETAIL_SERVICE_CORE_HPP
#define TOCK_DETAIL_SERVICE_CORE_HPP

#include <tock/config.hpp>
#include <tock/detail/block_pool.hpp>
#include <tock/detail/deferred_queue.hpp>
#include <tock/detail/dispatching.hpp>
#include <tock/detail/futex_mutex.hpp>
#include <tock/detail/wait_op.hpp>
#include <tock/error.hpp>
#include <tock/timer_stats.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace tock::detail {

// Whether `ctx` is run by one thread at most: its scheduler assumes so exactly when Asio's does (its
// `one_thread_`: a concurrency hint of 1, as `io_context(1)` gives, or a hint without the scheduler's or the
// reactor's locking). Only then may the service run one completion after another on the thread that found them
// (a wake-up's batch, a drain): elsewhere an idle thread must be able to take the next (design.md, "Threads").
// Read once, when the service is built.
bool runs_on_one_thread(asio::io_context& ctx);

// What the core asks of the service that owns it: to take an operation out of its queue when the operation's
// cancellation slot is emitted (it completes as aborted), or when a timed operation's own operation ended
// first (leave_locked: true if the entry's reference is then the caller's, as with basic_timer_service::detach,
// unschedule and withdraw). The service registers itself for its lifetime (see service_core::cancel).
class op_canceller {
 public:
  // Under the core's lock, which the callee takes over (and releases) in `lock`.
  virtual void cancel_locked(wait_op& op, std::unique_lock<futex_mutex>& lock) noexcept = 0;
  virtual void cancel_locked(sleep_entry& op, std::unique_lock<futex_mutex>& lock) noexcept = 0;
  virtual bool leave_locked(wait_op& op, std::unique_lock<futex_mutex>& lock) noexcept = 0;
  virtual bool leave_locked(sleep_entry& op, std::unique_lock<futex_mutex>& lock) noexcept = 0;

 protected:
  ~op_canceller() = default;
};

// The part of a timer service that its operations reach: the lock, the context, the hand-over of a fired
// wait that runs on a foreign executor, the way from a cancellation slot to the service, and the queue of
// deferred completions. Not a template, so the operations need not know the clock. Shared with fired waits
// queued on other executors, which may outlive the service.
//
// Deferred completions: a wait that is aborted (cancel, reset, destroy, its slot) or refused (capacity)
// completes later, from the context, as Asio's do. Rather than post each one (an allocation and a trip
// through the scheduler per wait), its operation is queued here, still holding its handler, and one drain
// posted to the context runs every completion queued until it starts: one post per batch, no allocation at
// all (the queue is intrusive, the drain's memory is the core's own block). A completion queued while a
// drain is pending runs in that drain, which was posted before it, so completions still run before anything
// posted after them. A completion that could not be dispatched to its executor (no memory) is queued again.
// On a context that several threads may run (runs_on_one_thread), a drain takes one completion at a time and,
// before running it, posts a drain for the rest if more are queued and none is posted: an idle thread runs
// them beside it, as it would Asio's posted completions, while on one thread that drain finds them done.
class service_core : public std::enable_shared_from_this<service_core> {
 public:
  // Reserves the drain's block: at most one drain is queued at a time, and Asio returns its block before it
  // runs, so every later post finds it free.
  explicit service_core(asio::io_context& ctx);
  service_core(const service_core&) = delete;
  service_core& operator=(const service_core&) = delete;
  ~service_core();  // runs what is left queued: only when the context was gone first

  asio::io_context& context() const noexcept { return ctx_; }
  futex_mutex& mutex() noexcept { return mutex_; }
  // Whether at most one thread runs the context (runs_on_one_thread).
  bool one_thread() const noexcept { return one_thread_; }

  // The service registers itself once built, and leaves before it is destroyed. Takes the lock.
  void set_owner(op_canceller* owner) noexcept;
  // Whether the service (and so its context) still lives. O(1), lock-free.
  bool serving() const noexcept { return serving_.load(std::memory_order_acquire); }

  // An operation's cancellation slot was emitted (on the handler's executor). Once the service is gone the
  // operation has fired or was dropped at shutdown, and its runner (which holds this core) completes it:
  // nothing to take out. O(log N) (the service's cancel), takes the lock.
  template <typename Op>
  void cancel(Op& op) noexcept {
    std::unique_lock<futex_mutex> lock(mutex_);
    if (owner_ != nullptr) owner_->cancel_locked(op, lock);
  }

  // A timed operation's own operation ended first, on an executor other than the service's context, whose
  // destruction may run on another thread meanwhile: the entry leaves the service through the core (which
  // the operation holds) while the service lives. False, touching nothing, once it is gone. Takes the lock.
  template <typename Op>
  bool leave(Op& op) noexcept {
    std::unique_lock<futex_mutex> lock(mutex_);
    return owner_ != nullptr && owner_->leave_locked(op, lock);
  }

  // Called on the handler's executor when a fired wait that `checked_at_run` is about to run: true if it
  // still counts as fired, false if it was cancelled in between (it is then reported as aborted).
  bool settle_fired(wait_op& op);

  // Queues the completion of an operation that left the service; true if the caller must post_drain() once
  // it has released the lock. The operation's cancellation slot is left as it is: only the handler's
  // executor touches it (design.md, "Threads"), and an emit meanwhile finds the operation out of the queue.
  // O(1), never throws.
  template <typename Op>
  bool defer_locked(Op& op, deferred how) noexcept {
    ++(how == deferred::capacity_exceeded ? stats_.refused : stats_.aborted);
    deferred_.push_back(op, how);
    return !std::exchange(drain_posted_, true);
  }

  // The counters of stats(), under the lock (but lazy extensions: see basic_timer_service).
  timer_stats& stats_locked() noexcept { return stats_; }
  timer_stats snapshot_locked(std::uint64_t rekeys, std::size_t pending, std::uint64_t lazy) const noexcept {
    timer_stats s = stats_;
    s.rekeys = rekeys;
    s.pending = pending;
    s.lazy_extensions = lazy;
    return s;
  }
  void count_started_locked(std::size_t pending) noexcept {
    ++stats_.started;
    if (pending > stats_.peak_pending) stats_.peak_pending = pending;
  }
  error_code refused_locked() noexcept {
    ++stats_.refused;
    return make_error_code(error::capacity_exceeded);
  }
  // Counts an entry taken out because its operation ended first, if `taken`; returns `taken`.
  bool count_withdrawn_locked(bool taken) noexcept {
    stats_.withdrawn += taken;
    return taken;
  }

  // Drains whose operation did not fit the core's block, for tests.
  std::size_t drain_fallbacks() const { return drain_memory_.fallbacks(); }

  // Completes now, on this thread and unlocked, deadlines' bound operations taken out apart and aborted (see
  // detail/locked_section.hpp): cancelled as a drain would (one whose dispatch throws is queued with those
  // after it for a drain; the exception goes no further), or detached if their deadline is going away. Never
  // throws.
  void run_now(deferred_queue::batch b, bool detach) noexcept;

  // Posts the drain that defer_locked() asked for. Never allocates (see the constructor).
  void post_drain();

  // Queues again a fired operation whose dispatch to its executor threw (see complete_op): a timer wait that
  // was cancelled since it fired completes as aborted. Takes the lock; never throws.
  void requeue_fired(wait_op& op) noexcept;
  void requeue_fired(sleep_entry& op) noexcept;

  // The error a deferred completion carries.
  static error_code error_of(deferred how) noexcept {
    switch (how) {
      case deferred::aborted: return asio::error::operation_aborted;
      case deferred::capacity_exceeded: return make_error_code(error::capacity_exceeded);
      case deferred::fired: break;
    }
    return error_code();
  }

 private:
  using batch = deferred_queue::batch;
  class drain;

  bool settle_fired_locked(wait_op& op) noexcept;
  batch take() noexcept;
  void run(batch b, bool deliver);
  void run_shared();
  void requeue(const batch& rest) noexcept;
  template <typename Queue>
  void queue_and_post(Queue&& queue) noexcept;
  void complete(deferred_queue::link l, bool deliver);

  asio::io_context& ctx_;
  const bool one_thread_;
  futex_mutex mutex_;
  op_canceller* owner_ = nullptr;  // under mutex_: the service, while it lives
  std::atomic<bool> serving_{false};  // owner_ != nullptr, readable without the lock
  block_pool drain_memory_;
  deferred_queue deferred_;    // under mutex_
  bool drain_posted_ = false;  // a drain is queued and has not taken deferred_ yet
  timer_stats stats_;          // under mutex_
};

}  // namespace tock::detail

#endif
