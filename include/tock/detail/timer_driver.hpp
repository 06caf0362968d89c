// tock/detail/timer_driver.hpp: the one timer that wakes a service, when it arms, and the firing loop.
#ifndef TOCK_DETAIL_TIMER_DRIVER_HPP
#define TOCK_DETAIL_TIMER_DRIVER_HPP

#include <tock/config.hpp>
#include <tock/detail/driver.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timer_queue.hpp>
#include <tock/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

namespace tock::detail {

// The arming rule: the driver is armed exactly while some wait sits in the queue's heap, at or before the
// top's key (a latest time: with slack, entries due before it wait for it, and fire together). It is re-armed only when
// the top becomes earlier than what it is armed for; a later top is found by waking early. During a batch nothing is
// armed: the batch re-arms once at its end (each arming is a timerfd_settime, and the superseded wait an extra
// completion). Arming can fail (Asio allocates), so a call that places a wait arms for it first (arm_for_locked),
// before anything changes; calls that only take waits out never arm (disarm_if_idle_locked), so they cannot fail. The
// *_locked members run under the core's lock.
template <typename Clock, typename WaitTraits>
class timer_driver {
 public:
  using time_point = typename Clock::time_point;
  using queue_type = timer_queue<time_point>;

  timer_driver(service_core& core, queue_type& queue)
      : core_(core), queue_(queue), driver_(core.context().get_executor()) {}

  // Arms for an entry about to be placed at `key` (max(): placed nowhere in the heap), so that the top after
  // placing it is covered. Throws with nothing changed (see asio_driver::arm).
  void arm_for_locked(const time_point& key) {
    if (key == time_point::max() || stopped_) return;
    if (firing_) {  // the batch re-arms; its runner must know that something may now rank before its rest
      note_batch_change_locked();
      return;
    }
    const time_point at = queue_.earliest_with(key);
    if (at < armed_at_) arm_locked(at);
  }

  // Once no wait is in the heap, the driver's wait goes, so that run() can return. Never throws.
  void disarm_if_idle_locked() noexcept {
    if (firing_ || queue_.heap_waits() != 0 || armed_at_ == time_point::max()) return;
    armed_at_ = time_point::max();
    generation_.fetch_add(1, std::memory_order_relaxed);
    driver_.cancel();
  }

  // A sleep that left the queue is cancelled (its slot emitted): if it waits in the running batch, it will
  // complete as aborted instead of running (see run_batch). False if it is not there (it ran, or is running).
  // O(batch) (32), only for a sleep found out of the queue.
  bool abort_in_batch_locked(const sleep_entry& op) noexcept {
    // From another thread the emit races the runner as it raced a single pop: the sleep counts as fired.
    if (batch_size_ == 0 || std::this_thread::get_id() != batch_thread_) return false;
    for (std::size_t i = 0; i < batch_size_; ++i)
      if (batch_[i].sleep == &op) {
        batch_aborted_ |= std::uint32_t(1) << i;
        note_batch_change_locked();
        return true;
      }
    return false;
  }

  // Shutdown: the driver never arms again.
  void stop_locked() noexcept {
    stopped_ = true;
    armed_at_ = time_point::max();
    generation_.fetch_add(1, std::memory_order_relaxed);
    driver_.cancel();
  }

  // The arming rule holds, and the driver's operations fit their pool, for tests.
  bool valid_locked() const {
    const bool armed_ok = (queue_.heap_waits() == 0) == (armed_at_ == time_point::max()) || stopped_ || firing_;
    return armed_ok && driver_.fallbacks() == 0;
  }

 private:
  struct handler {
    timer_driver* driver;
    std::uint64_t generation;
    void operator()(const error_code&) const { driver->on_fired(generation); }
  };

  // The generation is published only once the wait is in: a failed arm leaves the pending wait current. A
  // new wait that fires before it is published is not taken for a stale one (see on_fired).
  void arm_locked(const time_point& at) {
    const std::uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
    driver_.arm(at, handler{this, generation});
    generation_.store(generation, std::memory_order_relaxed);
    armed_at_ = at;
    ++core_.stats_locked().driver_arms;
  }

  // Fires every wait that is due, in deadline order, then re-arms for what is left.
  void on_fired(std::uint64_t generation) {
    // A superseded wait (the driver was re-armed or disarmed since) returns without taking the lock; a wait
    // newer than the generation read here is being armed, and the lock waits for it.
    if (generation < generation_.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(core_.mutex());
    if (generation != generation_.load(std::memory_order_relaxed) || stopped_) return;
    armed_at_ = time_point::max();
    const time_point now = Clock::now();

    // Re-arms even when a handler throws out of the batch (the exception leaves run(), as Asio's do), for
    // the top once settled: a timer waited on again from its handler keeps its past key until then.
    struct rearm {
      timer_driver& driver;
      std::unique_lock<std::mutex>& lock;
      const time_point& now;
      // The wait that fired returned its memory to the driver, so the re-arm finds it (see asio_driver);
      // should Asio's own timer queue fail to grow, run() is left with that exception, unless a handler's
      // already leaves it.
      ~rearm() noexcept(false) {
        if (!lock.owns_lock()) lock.lock();
        driver.firing_ = false;
        try {
          // Also with no wait left: a timer that fired and stays in the heap (rule 4) would keep its past
          // key there, which the next arming would take for the top.
          driver.queue_.settle(now);
          if (driver.queue_.heap_waits() != 0) driver.arm_locked(driver.queue_.top_key());
        } catch (...) {
          if (std::uncaught_exceptions() == 0) throw;
        }
      }
    } guard{*this, lock, now};

    firing_ = true;
    timer_stats& stats = core_.stats_locked();
    ++stats.wakeups;
    bool fired = false;
    // Bounded by what was pending on entry, so that waits started by the handlers of this batch, even due
    // ones, wait for the next wake-up rather than starve the context. Entries are popped under the lock and
    // run without it, in batches: up to batch_size sleeps, or a timer wait alone. A popped timer wait has
    // fired, so it is popped only once every handler before it has run: a handler that cancels or moves its
    // timer must still abort or move it (tock completes no stale success). A batch of sleeps keeps the order
    // and the cancellations that single pops would give (run_batch).
    std::size_t budget = queue_.heap_waits();
    batch_array batch;
    while (budget > 0) {
      const typename queue_type::due first = queue_.pop_due(now);
      if (!first) break;
      --budget;
      fired = true;
      count_fired(stats, now, first.at);
      if (first.wait != nullptr) {
        lock.unlock();
        invoke_unlocked(*first.wait);
        lock.lock();
        continue;
      }
      batch[0] = first;
      std::size_t n = 1;
      for (; n < batch_size && budget > 0; ++n, --budget) {
        batch[n] = queue_.pop_due(now, true);
        if (!batch[n]) break;
        count_fired(stats, now, batch[n].at);
      }
      run_batch(lock, now, batch, n, budget);
    }
    if (!fired) ++stats.empty_wakeups;
  }

  // Sleeps popped under one lock: 32 save 31 lock round trips in 32 and keep a batch's stack small. Left
  // uninitialised: most wake-ups fire one or two entries, and zeroing 32 would cost more than they do.
  static constexpr std::size_t batch_size = 32;  // at most the bits of batch_aborted_
  struct batch_array {
    union slot {
      typename queue_type::due d;
      slot() noexcept {}
    } slots[batch_size];
    typename queue_type::due& operator[](std::size_t i) noexcept { return slots[i].d; }
    const typename queue_type::due& operator[](std::size_t i) const noexcept { return slots[i].d; }
  };

  // `uncount` takes back a sleep counted as fired that is aborted before it runs (run_batch), but for
  // max_lateness, a maximum.
  static void count_fired(timer_stats& stats, const time_point& now, const time_point& at,
                          bool uncount = false) noexcept {
    const auto late = saturating_cast<std::chrono::nanoseconds>(saturating_sub(now, at));
    auto& bucket = stats.lateness_buckets[timer_stats::bucket_of(late)];
    if (uncount) {
      --stats.fired;
      --bucket;
      return;
    }
    ++stats.fired;
    ++bucket;
    if (late > stats.max_lateness) stats.max_lateness = late;
  }

  // Runs a fired wait or sleep. One whose dispatch to its executor could not allocate is kept (see
  // complete_op) and placed again (refire) before the exception leaves run(): nothing is lost.
  template <typename Op>
  void invoke_unlocked(Op& op) {
    completion_kept = false;
    try {
      op.complete(&op, core_, op_action::invoke, error_code());
    } catch (...) {
      if (std::exchange(completion_kept, false)) refire(op);
      throw;
    }
  }

  // Runs a batch of fired sleeps, in order, unlocked (the lock is held on entry and on return). The batch
  // behaves as single pops would, for anything its own handlers do: an entry one of them places that is due
  // and ranks before the rest of the batch (a wait started at a past time, a deadline moved earlier) runs
  // first, and a sleep of the batch whose slot one of them emits completes as aborted. A relaxed count of such
  // changes (written under the lock) tells the runner when to look, so that it takes the lock only then. If
  // a handler throws, the sleeps of the batch not yet run are queued again as fired (or aborted).
  void run_batch(std::unique_lock<std::mutex>& lock, const time_point& now, const batch_array& batch, std::size_t n,
                 std::size_t& budget) {
    batch_ = &batch[0];
    batch_size_ = n;
    batch_aborted_ = 0;
    batch_thread_ = std::this_thread::get_id();
    std::uint64_t seen = batch_changes_.load(std::memory_order_relaxed);
    std::size_t unrun = 0;  // the first sleep of the batch not yet handed to invoke_unlocked
    lock.unlock();
    try {
      for (std::size_t i = 0; i < n; ++i) {
        if (batch_changes_.load(std::memory_order_relaxed) != seen) {
          lock.lock();
          typename queue_type::due d;
          while (budget > 0 && queue_.due_before(now, batch[i]) && (d = queue_.pop_due(now))) {
            --budget;
            count_fired(core_.stats_locked(), now, d.at);
            lock.unlock();
            if (d.sleep != nullptr)
              invoke_unlocked(*d.sleep);
            else
              invoke_unlocked(*d.wait);
            lock.lock();
          }
          seen = batch_changes_.load(std::memory_order_relaxed);
          lock.unlock();
        }
        unrun = i + 1;
        if (batch_aborted_ >> i & 1) {  // only this thread sets its bits (abort_in_batch_locked)
          bool drain = false;
          lock.lock();
          abort_unrun_locked(now, batch, i, i + 1, drain);
          lock.unlock();
          if (drain) core_.post_drain();
          continue;
        }
        invoke_unlocked(*batch[i].sleep);
      }
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      bool drain = false;
      abort_unrun_locked(now, batch, unrun, n, drain);
      batch_size_ = 0;
      lock.unlock();
      if (drain) core_.post_drain();
      for (; unrun < n; ++unrun)
        if (!(batch_aborted_ >> unrun & 1)) refire(*batch[unrun].sleep);
      throw;
    }
    lock.lock();
    batch_size_ = 0;
  }

  // Completes as aborted (deferred) each sleep of batch[from, to) whose slot was emitted, which had been
  // counted as fired. `drain`: post_drain() once unlocked.
  void abort_unrun_locked(const time_point& now, const batch_array& batch, std::size_t from, std::size_t to,
                          bool& drain) {
    for (std::size_t i = from; i < to; ++i) {
      if (!(batch_aborted_ >> i & 1)) continue;
      count_fired(core_.stats_locked(), now, batch[i].at, true);
      drain |= core_.defer_locked(*batch[i].sleep, deferred::aborted);
    }
  }

  // A sleep, or an entry (which fired: the deadline passed), completes as fired from the next drain.
  void refire(sleep_entry& op) noexcept { core_.requeue_fired(op); }

  // A timer wait waits again, first of its timer, so that it fires at the next wake-up and a cancel() in
  // between still aborts it. Anything else (a deadline's entry, a wait cancelled since it fired, a wait whose
  // timer cannot be placed again) is queued again: it completes from the next drain, as fired or aborted.
  void refire(wait_op& op) noexcept {
    if (op.checked_at_run) {
      std::lock_guard<std::mutex> lock(core_.mutex());
      if (op.next != nullptr && queue_.wait_again(op)) {
        --core_.stats_locked().fired;  // it fires again
        return;
      }
    }
    core_.requeue_fired(op);
  }

  service_core& core_;
  queue_type& queue_;
  typename driver_for<Clock, WaitTraits>::type driver_;
  time_point armed_at_ = time_point::max();  // max: the driver is not armed
  std::atomic<std::uint64_t> generation_{0};  // written under the lock; read first without it
  bool firing_ = false;  // a batch runs: it re-arms when it ends
  bool stopped_ = false;
  // The running batch (see run_batch): its sleeps, which of them were cancelled since they were popped, and
  // a count of the changes its runner must look at (placements, cancellations), read by it without the lock.
  const typename queue_type::due* batch_ = nullptr;
  std::size_t batch_size_ = 0;
  std::uint32_t batch_aborted_ = 0;
  std::thread::id batch_thread_;
  std::atomic<std::uint64_t> batch_changes_{0};

  void note_batch_change_locked() noexcept {
    batch_changes_.store(batch_changes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

}  // namespace tock::detail

#endif
