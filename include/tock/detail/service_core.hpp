// tock/detail/service_core.hpp: the part of a timer service its operations reach, and the drain of its
// deferred completions (the queue: deferred_queue.hpp).
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
#include <exception>
#include <memory>
#include <mutex>
#include <utility>

namespace tock::detail {

// Whether `ctx` is run by one thread at most: its scheduler assumes so exactly when Asio's does (its
// `one_thread_`: a concurrency hint of 1, as `io_context(1)` gives, or a hint without the scheduler's or the
// reactor's locking). Only then may the service run one completion after another on the thread that found them
// (a wake-up's batch, a drain): elsewhere an idle thread must be able to take the next (design.md, "Threads").
// Read once, when the service is built.
inline bool runs_on_one_thread(asio::io_context& ctx) {
#if TOCK_ASIO_VERSION >= 103300  // Asio's configuration service holds the hint
  return asio::config(ctx).get("scheduler", "concurrency_hint", 0) == 1;
#elif defined(TOCK_STANDALONE_ASIO) && !defined(ASIO_HAS_IOCP)
  const int hint = asio::use_service<asio::detail::io_context_impl>(ctx).concurrency_hint();
  return hint == 1 || !ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
         !ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint);
#elif !defined(TOCK_STANDALONE_ASIO) && !defined(BOOST_ASIO_HAS_IOCP)
  const int hint = asio::use_service<asio::detail::io_context_impl>(ctx).concurrency_hint();
  return hint == 1 || !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
         !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint);
#else
  (void)ctx;
  return false;  // not known: as if several threads ran it
#endif
}

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
  explicit service_core(asio::io_context& ctx) : ctx_(ctx), one_thread_(runs_on_one_thread(ctx)) {
    drain_memory_.reserve(1);
  }
  service_core(const service_core&) = delete;
  service_core& operator=(const service_core&) = delete;
  ~service_core() { run(deferred_.take_all(), false); }  // left only when the context was gone first

  asio::io_context& context() const noexcept { return ctx_; }
  futex_mutex& mutex() noexcept { return mutex_; }
  // Whether at most one thread runs the context (runs_on_one_thread).
  bool one_thread() const noexcept { return one_thread_; }

  // The service registers itself once built, and leaves before it is destroyed. Takes the lock.
  void set_owner(op_canceller* owner) noexcept {
    std::lock_guard<futex_mutex> lock(mutex_);
    owner_ = owner;
    serving_.store(owner != nullptr, std::memory_order_release);
  }
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
  bool settle_fired(wait_op& op) {
    std::lock_guard<futex_mutex> lock(mutex_);
    return settle_fired_locked(op);
  }

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
  void run_now(deferred_queue::batch b, bool detach) noexcept {
    if (!detach) {
      try {
        run(b, true);
      } catch (...) {  // run() queued what is left under a drain: nothing is lost
      }
      return;
    }
    for (deferred_queue::link l = b.first; l != 0;) {
      const deferred_queue::link next = deferred_queue::next_of(l, b);
      auto* op = static_cast<wait_op*>(deferred_queue::address(l));
      // Its `next` keeps the queue's link: a detach() racing with this finds it taken already.
      op->complete(op, *this, op_action::detach, error_code());
      l = next;
    }
  }

  // Posts the drain that defer_locked() asked for. Never allocates (see the constructor).
  void post_drain() { asio::post(ctx_.get_executor(), drain{shared_from_this()}); }

  // Queues again a fired operation whose dispatch to its executor threw (see complete_op): a timer wait that
  // was cancelled since it fired completes as aborted. Takes the lock; never throws.
  void requeue_fired(wait_op& op) noexcept {
    queue_and_post([&] {
      const bool fired = !op.checked_at_run || settle_fired_locked(op);
      deferred_.push_back(op, fired ? deferred::fired : deferred::aborted);
    });
  }
  void requeue_fired(sleep_entry& op) noexcept {
    queue_and_post([&] { deferred_.push_back(op, deferred::fired); });
  }

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

  bool settle_fired_locked(wait_op& op) noexcept {
    if (op.next == nullptr) {  // cancelled since it fired: it completes as aborted after all
      --stats_.fired;
      ++stats_.aborted;
      return false;
    }
    wait_op** link = nullptr;
    wait_ring& ring = wait_ring::ring_of(op, link);
    wait_ring::unlink(link, op);
    --ring.due;
    return true;
  }

  // Runs (or, when the context shuts down with it queued, destroys) the completions queued before it
  // started. Its memory is the core's block, which the core (held by the drain) outlives.
  class drain {
   public:
    using allocator_type = block_pool::allocator<void>;

    explicit drain(std::shared_ptr<service_core> core) noexcept : core_(std::move(core)) {}
    drain(drain&&) noexcept = default;
    drain& operator=(drain&&) = delete;
    ~drain() {
      if (core_) core_->run(core_->take(), false);
    }
    allocator_type get_allocator() const noexcept { return allocator_type(core_->drain_memory_); }
    void operator()() {
      auto core = std::move(core_);
      if (core->one_thread_)
        core->run(core->take(), true);
      else
        core->run_shared();
    }

   private:
    std::shared_ptr<service_core> core_;
  };

  batch take() noexcept {
    std::lock_guard<futex_mutex> lock(mutex_);
    drain_posted_ = false;
    return deferred_.take_all();
  }

  // If a completion throws, the rest (and the one that threw, if it was kept) go back to the front of the
  // queue under a new drain, and the exception leaves run().
  void run(batch b, bool deliver) {
    deferred_queue::link l = b.first;
    while (l != 0) {
      const deferred_queue::link next = deferred_queue::next_of(l, b);
      completion_kept = false;
      try {
        complete(l, deliver);
      } catch (...) {
        requeue({completion_kept ? l : next, b.last});
        completion_kept = false;
        throw;
      }
      l = next;
    }
  }

  // A drain on a context that several threads may run: the completions queued when it starts, or as many,
  // one per lock (others may take some: a drain it posted, or one posted for later ones), each after posting
  // a drain for the rest unless one is posted. If a completion throws, it goes back to the front if it was
  // kept, a drain is posted for what is queued, and the exception leaves run().
  void run_shared() {
    std::unique_lock<futex_mutex> lock(mutex_);
    drain_posted_ = false;
    for (std::size_t budget = deferred_.size(); budget > 0; --budget) {
      const deferred_queue::link l = deferred_.pop_front();
      if (l == 0) break;
      const bool post = !deferred_.empty() && !std::exchange(drain_posted_, true);
      lock.unlock();
      if (post) post_drain();
      completion_kept = false;
      try {
        complete(l, true);
      } catch (...) {
        const deferred_queue::link kept = completion_kept ? l : 0;
        completion_kept = false;
        bool post_rest;
        {
          std::lock_guard<futex_mutex> relock(mutex_);
          deferred_.push_front({kept, kept});
          post_rest = !deferred_.empty() && !std::exchange(drain_posted_, true);
        }
        if (post_rest) post_drain();
        throw;
      }
      lock.lock();
    }
  }

  void requeue(const batch& rest) noexcept {
    if (rest.first != 0) queue_and_post([&] { deferred_.push_front(rest); });
  }

  // Queues completions (`queue` runs under the lock), then posts a drain unless one is pending.
  template <typename Queue>
  void queue_and_post(Queue&& queue) noexcept {
    bool post;
    {
      std::lock_guard<futex_mutex> lock(mutex_);
      queue();
      post = !std::exchange(drain_posted_, true);
    }
    if (post) post_drain();
  }

  void complete(deferred_queue::link l, bool deliver) {
    const error_code ec = error_of(deferred_queue::how(l));
    const op_action a = deliver ? op_action::deliver : op_action::discard;
    if (deferred_queue::is_sleep(l)) {
      auto* op = static_cast<sleep_entry*>(deferred_queue::address(l));
      op->complete(op, *this, a, ec);
    } else {
      auto* op = static_cast<wait_op*>(deferred_queue::address(l));
      op->complete(op, *this, a, ec);
    }
  }

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
