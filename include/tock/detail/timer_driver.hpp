// tock/detail/timer_driver.hpp: the one timer that wakes a service, when it arms, and the firing loop.
#ifndef TOCK_DETAIL_TIMER_DRIVER_HPP
#define TOCK_DETAIL_TIMER_DRIVER_HPP

#include <tock/config.hpp>
#include <tock/detail/driver.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timer_queue.hpp>
#include <tock/detail/wakeup_time.hpp>
#include <tock/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>

namespace tock::detail {

// The arming rule: the driver is armed exactly while something can fire (a wait in the queue's heap, or an
// entry attached to a deadline's link: deadline_link.hpp, rule 4) and the heap is not empty, at or before the
// top's key (a latest time: with slack, entries due before it wait for it, and fire together). It is re-armed only when
// the top becomes earlier than what it is armed for; a later top is found by waking early. During a batch nothing is
// armed: the batch re-arms once at its end (each arming is a timerfd_settime, and the superseded wait an extra
// completion). Arming can fail (Asio allocates), so a call that places a wait arms for it first (arm_for_locked),
// before anything changes; calls that only take waits out never arm (disarm_if_idle_locked), so they cannot fail. The
// *_locked members run under the core's lock.
//
// Who runs the due entries: on a context run by one thread (service_core::one_thread), the wake-up's batch calls
// them one after another, nothing armed until it ends (as above). On a context that several threads may run, a
// slow handler must hold back only its own thread, as with Asio: before it calls a handler (in place, or
// dispatched to an idle strand), the batch hands over what is left: if another entry is due, it posts a
// continuation (at most one queued: it runs a batch of its own, so an idle thread takes the next entry, and on
// one thread it finds it done), else it arms for the top; and arming goes on while its handlers run (a wait
// started meanwhile arms as at any other time). Entries still leave the heap one per lock, in deadline order.
template <typename Clock, typename WaitTraits>
class timer_driver {
 public:
  using time_point = typename Clock::time_point;
  using queue_type = timer_queue<time_point>;

  timer_driver(service_core& core, queue_type& queue)
      : core_(core), queue_(queue), driver_(core.context().get_executor()), one_thread_(core.one_thread()) {
    if (!one_thread_) continuation_memory_.reserve(1);
  }

  // Arms for an entry about to be placed at `key` (max(): placed nowhere in the heap), so that the top after
  // placing it is covered. Throws with nothing changed (see asio_driver::arm).
  void arm_for_locked(const time_point& key) {
    if (key == time_point::max() || firing_ || continuing_ || stopped_) return;
    const time_point at = queue_.earliest_with(key);
    if (at < armed_at_) arm_locked(at);
  }

  // Once nothing in the heap can fire, the driver's wait goes, so that run() can return. Never throws.
  void disarm_if_idle_locked() noexcept {
    queue_.links().idle();  // nothing attached: the count is no longer covered (deadline_link.hpp, rule 4)
    if (firing_ || (queue_.can_fire() && !queue_.heap_empty()) || armed_at_ == time_point::max()) return;
    armed_at_ = time_point::max();
    generation_.fetch_add(1, std::memory_order_relaxed);
    driver_.cancel();
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
    const bool armed_ok = (queue_.can_fire() && !queue_.heap_empty()) == (armed_at_ != time_point::max()) || stopped_ ||
                          firing_ || continuing_;
    return armed_ok && covers_top_locked() && driver_.fallbacks() == 0 && continuation_memory_.fallbacks() == 0;
  }

  // The half of the arming rule that timeliness rests on: while anything can fire, the driver is armed no
  // later than the top's key (a batch, or a queued continuation, arms when it ends). What can fire: a wait in
  // the heap, or an entry attached to a link while the count is covered (an owner that counted and has not
  // taken the lock yet arms there: deadline_link.hpp, rule 4). Checked after each locked section in the
  // sanitizer builds (TOCK_CHECK_INVARIANTS).
  bool covers_top_locked() const noexcept {
    return firing_ || continuing_ || stopped_ || !queue_.must_cover() || queue_.heap_empty() ||
           !(queue_.top_key() < armed_at_);
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

  // The batch that takes over from one whose handler is about to run (several threads only). Its memory is the
  // driver's own block: at most one is queued, and Asio returns the block before it runs. Destroyed unrun at
  // the context's shutdown, before the service that owns the driver.
  struct continuation {
    using allocator_type = block_pool::allocator<void>;
    timer_driver* driver;
    allocator_type get_allocator() const noexcept { return allocator_type(driver->continuation_memory_); }
    void operator()() const { driver->on_continued(); }
  };

  // Fires every wait that is due, in deadline order, then re-arms for what is left.
  void on_fired(std::uint64_t generation);

  void on_continued() {
    std::unique_lock<futex_mutex> lock(core_.mutex());
    continuing_ = false;
    if (!stopped_) run_batch(lock, false);
  }

  // Under the lock, which it releases around each handler.
  void run_batch(std::unique_lock<futex_mutex>& lock, bool wakeup);

  // Before a handler runs, on a context several threads may run: makes sure that what is left does not wait
  // for it. If the top's key has passed, or its deadline (slack), true: the caller posts a continuation once
  // it has unlocked (a passed key may be only a timer that fired and lingers, rule 4, or a lazy key: the
  // continuation then finds nothing, but settling here would drop the lingering timer that the handler is
  // about to wait on again, and its re-key in place with it). Else arms for the top unless armed for it or
  // earlier (if that fails, a continuation arms when it runs). O(1) but the arming, never throws.
  bool hand_over_locked(const time_point& now) noexcept;

  static void count_fired(timer_stats& stats, const time_point& now, const time_point& at) noexcept {
    ++stats.fired;
    const auto late = saturating_cast<std::chrono::nanoseconds>(saturating_sub(now, at));
    ++stats.lateness_buckets[timer_stats::bucket_of(late)];
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

  // A sleep, or an entry (which fired: the deadline passed), completes as fired from the next drain.
  void refire(sleep_entry& op) noexcept { core_.requeue_fired(op); }

  // A timer wait waits again, first of its timer, so that it fires at the next wake-up and a cancel() in
  // between still aborts it. Anything else (a deadline's entry, a wait cancelled since it fired, a wait whose
  // timer cannot be placed again) is queued again: it completes from the next drain, as fired or aborted.
  void refire(wait_op& op) noexcept;

  service_core& core_;
  queue_type& queue_;
  typename driver_for<Clock, WaitTraits>::type driver_;
  time_point armed_at_ = time_point::max();  // max: the driver is not armed
  std::atomic<std::uint64_t> generation_{0};  // written under the lock; read first without it
  bool firing_ = false;  // a batch runs on a context with one thread: it re-arms when it ends
  bool stopped_ = false;
  const bool one_thread_;  // see service_core::one_thread
  bool continuing_ = false;  // a continuation is queued: it arms when it ends (several threads only)
  block_pool continuation_memory_;  // the continuation's block
};

template <typename Clock, typename WaitTraits>
void timer_driver<Clock, WaitTraits>::on_fired(std::uint64_t generation) {
  // A superseded wait (the driver was re-armed or disarmed since) returns without taking the lock; a wait
  // newer than the generation read here is being armed, and the lock waits for it.
  if (generation < generation_.load(std::memory_order_relaxed)) return;
  std::unique_lock<futex_mutex> lock(core_.mutex());
  if (generation != generation_.load(std::memory_order_relaxed) || stopped_) return;
  armed_at_ = time_point::max();
  ++core_.stats_locked().wakeups;
  run_batch(lock, true);
}

template <typename Clock, typename WaitTraits>
void timer_driver<Clock, WaitTraits>::run_batch(std::unique_lock<futex_mutex>& lock, bool wakeup) {
  const time_point now = Clock::now();

  // Re-arms even when a handler throws out of the batch (the exception leaves run(), as Asio's do), for
  // the top once settled: a timer waited on again from its handler keeps its past key until then.
  struct rearm {
    timer_driver& driver;
    std::unique_lock<futex_mutex>& lock;
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
        // Armed for an earlier key (the batch armed before a handler, for a top it then fired early, by
        // slack): armed again, as a wake-up for nothing costs more than a re-arm.
        if (!driver.continuing_ && driver.queue_.can_fire() && !driver.queue_.heap_empty() &&
            driver.queue_.top_key() != driver.armed_at_)
          driver.arm_locked(driver.queue_.top_key());
        if (driver.armed_at_ == time_point::max()) driver.queue_.links().idle();  // unarmed: rule 4 of the links
      } catch (...) {
        if (std::uncaught_exceptions() == 0) throw;
      }
    }
  } guard{*this, lock, now};

  firing_ = one_thread_;
  const typename wakeup_time<Clock>::scope reading(core_, now);  // for the handlers the batch calls
  timer_stats& stats = core_.stats_locked();
  bool fired = false;
  // Bounded by the count pending on entry, so that handlers that keep starting due waits cannot keep the
  // batch going and starve the context's other handlers: past it, what is left waits for the next wake-up.
  // Within it the pops stay in deadline order, so a due wait a handler starts may come before older ones.
  for (std::size_t budget = queue_.heap_waits() + queue_.links().attached(); budget > 0; --budget) {
    const typename queue_type::due next = queue_.pop_due(now);
    if (!next) break;
    fired = true;
    stats.started += next.linked;  // a linked entry's start was not counted (basic_timer_service::stats)
    count_fired(stats, now, next.at);
    const bool post = !one_thread_ && hand_over_locked(now);
    queue_.prefetch_top();
    lock.unlock();
    if (post) asio::post(core_.context().get_executor(), continuation{this});  // never allocates
    if (next.sleep != nullptr)
      invoke_unlocked(*next.sleep);
    else
      invoke_unlocked(*next.wait);
    lock.lock();
  }
  if (!fired && wakeup) ++stats.empty_wakeups;
}

template <typename Clock, typename WaitTraits>
bool timer_driver<Clock, WaitTraits>::hand_over_locked(const time_point& now) noexcept {
  if (continuing_ || !queue_.can_fire() || queue_.heap_empty()) return false;
  if (now < queue_.top_key() && !queue_.settle(now)) {  // settle() changes nothing before the top's key
    if (!(queue_.top_key() < armed_at_)) return false;
    try {
      arm_locked(queue_.top_key());
      return false;
    } catch (...) {
    }
  }
  continuing_ = true;
  return true;
}

template <typename Clock, typename WaitTraits>
void timer_driver<Clock, WaitTraits>::refire(wait_op& op) noexcept {
  if (op.checked_at_run) {
    std::lock_guard<futex_mutex> lock(core_.mutex());
    if (op.next != nullptr && queue_.wait_again(op)) {
      --core_.stats_locked().fired;  // it fires again
      return;
    }
  }
  core_.requeue_fired(op);
}

}  // namespace tock::detail

#endif
