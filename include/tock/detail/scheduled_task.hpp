// tock/detail/scheduled_task.hpp: the state of a task run by tock::schedule and its periodic forms (see
// tock/schedule.hpp for how a run flows and why every timer call is under the task's mutex).
#ifndef TOCK_DETAIL_SCHEDULED_TASK_HPP
#define TOCK_DETAIL_SCHEDULED_TASK_HPP

#include <tock/async_sleep.hpp>
#include <tock/basic_timer.hpp>
#include <tock/config.hpp>
#include <tock/detail/block_pool.hpp>
#include <tock/detail/io_context_of.hpp>
#include <tock/detail/op_memory.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/timer_object.hpp>
#include <tock/periodic_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

namespace tock {
namespace detail {

// The clock a task is timed on: the one named, else a due time point's own clock, else steady_clock.
template <typename Clock, typename Due>
struct due_clock {
  using type = Clock;
};
template <typename Due>
struct due_clock<void, Due> {
  using type = std::chrono::steady_clock;
};
template <typename C, typename D>
struct due_clock<void, std::chrono::time_point<C, D>> {
  using type = C;
};

// A delay from now (saturating) or a time point of the task's clock.
template <typename Clock, typename Due>
typename Clock::time_point due_time(const Due& due) {
  if constexpr (is_duration_v<Due>) {
    return saturating_add(Clock::now(), due);
  } else {
    static_assert(std::is_same_v<typename Due::clock, Clock>, "tock: the due time is on another clock than the task");
    return to_clock_time_point(due);
  }
}

template <typename Clock>
using task_timer = basic_timer<Clock, asio::wait_traits<Clock>, asio::io_context::executor_type>;

// Calls `fn` and returns its result with the exception it threw (and a default result), as co_spawn reports.
template <typename R>
struct run_result {
  std::exception_ptr error;
  R value{};
  template <typename Fn>
  void run(Fn& fn) {
    try {
      value = fn();
    } catch (...) {
      error = std::current_exception();
    }
  }
};
template <>
struct run_result<void> {
  std::exception_ptr error;
  template <typename Fn>
  void run(Fn& fn) {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }
};

// --- One-shot: the state shared by the timer's wait, the runner on the executor, and the slot.
template <typename Clock, typename Executor, typename Fn, typename Handler>
class oneshot_task {
 public:
  using result_type = std::invoke_result_t<Fn&>;
  using handler_executor = asio::associated_executor_t<Handler, Executor>;

  oneshot_task(const Executor& ex, Fn fn, Handler handler)
      : ex_(ex), fn_(std::move(fn)), handler_(std::move(handler)), work_(asio::get_associated_executor(*handler_, ex)) {
  }
  oneshot_task(const oneshot_task&) = delete;
  oneshot_task& operator=(const oneshot_task&) = delete;

  // Hooks the handler's slot and starts the wait; throws (std::bad_alloc) with the handler destroyed.
  static void start(const std::shared_ptr<oneshot_task>& self, asio::io_context& host,
                    const typename Clock::time_point& t) {
    oneshot_task& s = *self;
    std::lock_guard<std::mutex> lock(s.mutex_);
    s.timer_.emplace(host.get_executor(), t);
    auto slot = asio::get_associated_cancellation_slot(*s.handler_);
    if (slot.is_connected()) slot.template emplace<slot_handler>(self);
    s.timer_->async_wait(waiter{self});
    s.waiting_.store(true, std::memory_order_relaxed);
  }

 private:
  // In the handler's slot while the task may still be cancelled. Only the handler's executor clears the slot
  // (just before the handler runs there); a task destroyed without completing (the host or the executor shut
  // down) leaves it, so the handler holds the task weakly: emitted or destroyed later, it finds it gone.
  struct slot_handler {
    std::weak_ptr<oneshot_task> task;
    explicit slot_handler(const std::shared_ptr<oneshot_task>& t) noexcept : task(t) {
      t->in_slot_.store(true, std::memory_order_relaxed);
    }
    ~slot_handler() {
      if (auto t = task.lock()) t->in_slot_.store(false, std::memory_order_relaxed);
    }
    slot_handler(const slot_handler&) = delete;
    slot_handler& operator=(const slot_handler&) = delete;
    void operator()(asio::cancellation_type type) {
      if (type == asio::cancellation_type::none) return;
      const std::shared_ptr<oneshot_task> t = task.lock();
      if (!t) return;
      std::lock_guard<std::mutex> lock(t->mutex_);
      if (t->started_ || t->cancelled_) return;
      t->cancelled_ = true;
      if (t->timer_) t->timer_->cancel();  // else the runner is queued: it will see cancelled_
    }
  };

  // The timer's wait, on the host context: the timer is done with; the runner (whose post takes tock's
  // operation cache, as the periodic runner's) decides on the executor.
  struct waiter {
    std::shared_ptr<oneshot_task> task;
    waiter(std::shared_ptr<oneshot_task> t) noexcept : task(std::move(t)) {}
    waiter(waiter&&) = default;
    // Destroyed unrun (the host shuts down): the timer goes now, while its service lives; the task itself may
    // live on (its slot handler may hold it a moment). Not when async_wait threw: start() holds the lock.
    ~waiter() {
      if (!task || !task->waiting_.load(std::memory_order_relaxed)) return;
      std::lock_guard<std::mutex> lock(task->mutex_);
      task->timer_.reset();
    }
    void operator()(const error_code& ec) {
      std::shared_ptr<oneshot_task> t = std::move(task);
      {
        std::lock_guard<std::mutex> lock(t->mutex_);
        t->timer_.reset();
        if (ec && !t->cancelled_) t->failed_ = ec;  // not due: refused (capacity_exceeded)
      }
      const Executor ex = t->ex_;
      asio::dispatch(ex, runner{std::move(t)});  // in place on the host's own executor, else posted
    }
  };

  struct runner {
    using allocator_type = op_allocator<void>;  // as periodic_task::runner
    allocator_type get_allocator() const noexcept { return {}; }
    std::shared_ptr<oneshot_task> task;
    void operator()() {
      const std::shared_ptr<oneshot_task> t = std::move(task);
      run_result<result_type> r;
      {
        std::lock_guard<std::mutex> lock(t->mutex_);
        if (t->cancelled_)
          r.error = std::make_exception_ptr(sys::system_error(asio::error::operation_aborted));
        else if (t->failed_)
          r.error = std::make_exception_ptr(sys::system_error(t->failed_));
        else
          t->started_ = true;
      }
      if (!r.error) r.run(t->fn_);
      t->complete(t, std::move(r));
    }
  };

  // Dispatches the handler to its executor (by default the task's), as co_spawn does; there, it leaves the
  // slot first.
  void complete(const std::shared_ptr<oneshot_task>& self, run_result<result_type>&& r) {
    Handler h = std::move(*handler_);
    handler_.reset();
    auto work = std::move(*work_);
    work_.reset();
    auto leave_slot = [self](Handler& handler) {
      if (self->in_slot_.load(std::memory_order_relaxed)) asio::get_associated_cancellation_slot(handler).clear();
    };
    if constexpr (std::is_void_v<result_type>) {
      asio::dispatch(work.get_executor(), [h = std::move(h), e = r.error, leave_slot]() mutable {
        leave_slot(h);
        std::move(h)(e);
      });
    } else {
      asio::dispatch(work.get_executor(),
                     [h = std::move(h), e = r.error, v = std::move(r.value), leave_slot]() mutable {
                       leave_slot(h);
                       std::move(h)(e, std::move(v));
                     });
    }
  }

  std::mutex mutex_;
  bool cancelled_ = false, started_ = false;  // under mutex_
  std::atomic<bool> in_slot_{false};          // slot_handler is in the handler's slot (see slot_handler)
  std::atomic<bool> waiting_{false};          // the wait started (see waiter)
  error_code failed_;                                           // under mutex_: the wait's own error
  std::optional<task_timer<Clock>> timer_;                      // until the wait completes
  Executor ex_;
  Fn fn_;
  std::optional<Handler> handler_;
  std::optional<asio::executor_work_guard<handler_executor>> work_;
};

// What a one-shot completes with, as co_spawn: void(std::exception_ptr, R), or void(std::exception_ptr).
template <typename R>
struct schedule_signature {
  using type = void(std::exception_ptr, R);
};
template <>
struct schedule_signature<void> {
  using type = void(std::exception_ptr);
};

template <typename Clock>
class initiate_schedule {
 public:
  template <typename Handler, typename Executor, typename Fn>
  void operator()(Handler&& handler, asio::io_context* host, const Executor& ex, const typename Clock::time_point& t,
                  Fn&& fn) const {
    using task = oneshot_task<Clock, Executor, std::decay_t<Fn>, std::decay_t<Handler>>;
    const auto s = std::make_shared<task>(ex, std::forward<Fn>(fn), std::forward<Handler>(handler));
    task::start(s, *host, t);
  }
};

template <typename T>
using run_allocator = pool_allocator<T, run_memory>;

// --- Periodic: what a task_handle sees, whatever the task's types.
class task_control {
 public:
  virtual ~task_control() = default;

  bool cancel() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!scheduled_) return false;
    stop_locked();
    return true;
  }
  bool scheduled() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return scheduled_;
  }
  std::uint64_t runs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }
  std::uint64_t missed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return missed_;
  }
  std::exception_ptr error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 protected:
  // No more runs: releases the timer (aborting its wait). Under mutex_.
  virtual void stop_locked() noexcept = 0;

  mutable std::mutex mutex_;
  bool scheduled_ = true;
  std::uint64_t runs_ = 0, missed_ = 0;
  std::exception_ptr error_;
};

// A periodic task. Run n is due at origin_ + n * period_ (by multiplication: no drift). Fixed rate moves n
// by the policy after each run; fixed delay starts the grid over at the end of each run.
template <typename Clock, typename Executor, typename Fn>
class periodic_task final : public task_control {
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

 public:
  periodic_task(const Executor& ex, Fn fn, const time_point& first, const duration& period, missed_ticks policy,
                bool fixed_delay)
      : ex_(ex), fn_(std::move(fn)), origin_(first), period_(period), policy_(policy), fixed_delay_(fixed_delay) {}

  // Starts the first wait; throws (std::bad_alloc) with the task stopped.
  static void start(const std::shared_ptr<periodic_task>& self, asio::io_context& host) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->host_work_.emplace(host.get_executor());
    self->timer_.emplace(host.get_executor(), typename Clock::time_point());
    if (auto e = self->arm_locked(self)) std::rethrow_exception(e);
  }

 private:
  // The timer's wait, on the host context. Destroyed unrun (the host shut down, or inside a failed
  // async_wait), it stops the task.
  struct waiter {
    using allocator_type = run_allocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(task->memory_); }
    std::shared_ptr<periodic_task> task;
    waiter(std::shared_ptr<periodic_task> t) noexcept : task(std::move(t)) {}
    waiter(waiter&&) = default;
    ~waiter() {
      if (task) task->dropped();
    }
    void operator()(const error_code& ec) {
      std::shared_ptr<periodic_task> t = std::move(task);
      if (ec) {  // aborted by stop_locked(), or refused (capacity_exceeded): the task stops with it
        std::lock_guard<std::mutex> lock(t->mutex_);
        if (t->scheduled_) {
          t->error_ = std::make_exception_ptr(sys::system_error(ec));
          t->stop_locked();
        }
        return;
      }
      const Executor ex = t->ex_;
      asio::dispatch(ex, runner{std::move(t)});  // in place on the host's own executor, else posted
    }
  };

  // Posted (to a strand, a pool) in the task's run_memory, as the wait.
  struct runner {
    using allocator_type = run_allocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(task->memory_); }
    std::shared_ptr<periodic_task> task;
    runner(std::shared_ptr<periodic_task> t) noexcept : task(std::move(t)) {}
    runner(runner&&) = default;
    ~runner() {
      if (task) task->dropped();  // the executor was shut down (or the post failed)
    }
    void operator()() {
      const std::shared_ptr<periodic_task> t = std::move(task);
      {
        std::lock_guard<std::mutex> lock(t->mutex_);
        if (!t->scheduled_) return;
      }
      run_result<void> r;
      r.run(t->fn_);
      std::lock_guard<std::mutex> lock(t->mutex_);
      ++t->runs_;
      if (r.error) {
        t->error_ = r.error;
        if (t->scheduled_) t->stop_locked();
      } else if (t->scheduled_) {
        t->advance_locked();
        if (auto e = t->arm_locked(t)) t->error_ = e;
      }
    }
  };

  time_point due_locked() const noexcept { return grid_point(origin_, period_, next_); }

  // A run has finished: moves to the next run. Skip: the first grid point not before now, counting the
  // points passed over as missed; burst: the next point, however late; delay (and fixed delay): one period
  // from now. Burst reads no clock (a read costs a quarter of a run: bench/README.md, periodic).
  void advance_locked() noexcept {
    if (fixed_delay_ || policy_ == missed_ticks::delay) {
      origin_ = Clock::now();
      next_ = 1;
    } else if (policy_ == missed_ticks::burst) {
      ++next_;
    } else {
      const duration late = saturating_sub(Clock::now(), origin_);
      std::uint64_t at = 0;  // the index of the first grid point not before now
      if (late > duration::zero())
        at = static_cast<std::uint64_t>(late / period_) + (late % period_ != duration::zero() ? 1 : 0);
      const std::uint64_t n = at > next_ + 1 ? at : next_ + 1;
      missed_ += n - next_ - 1;
      next_ = n;
    }
  }

  // Waits for run next_. Returns the exception of a failed start, the task then stopped.
  std::exception_ptr arm_locked(const std::shared_ptr<periodic_task>& self) noexcept {
    std::exception_ptr e;
    // Between two runs the timer has no wait, so a later due time is a lock-free move (as a periodic_timer's).
    timer_->service().move_expiry(timer_->impl(), due_locked());
    arming_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    try {
      timer_->async_wait(waiter(self));
    } catch (...) {
      e = std::current_exception();
    }
    arming_.store(std::thread::id(), std::memory_order_relaxed);
    if (e || std::exchange(lost_, false)) stop_locked();
    return e;
  }

  // A waiter or runner was destroyed unrun. Inside arm_locked (the wait's start destroyed it: failed, or
  // the host is shut down) the lock is already held, and arm_locked stops the task; else stop it here.
  void dropped() noexcept {
    if (arming_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
      lost_ = true;
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (scheduled_) stop_locked();
  }

  void stop_locked() noexcept override {
    scheduled_ = false;
    timer_.reset();  // a pending wait completes with operation_aborted, from the host's run()
    host_work_.reset();
  }

  // While scheduled; used under mutex_ only.
  std::optional<timer_object<Clock, asio::wait_traits<Clock>, asio::io_context::executor_type>> timer_;
  // The host's work while scheduled: between a wait that fired and the run (on another executor) that
  // waits again, the host has nothing pending, and its run() would return with the task still scheduled.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> host_work_;
  Executor ex_;
  Fn fn_;  // called by the runner only, one run at a time
  time_point origin_;
  std::uint64_t next_ = 0;
  duration period_;
  missed_ticks policy_;
  bool fixed_delay_;
  bool lost_ = false;  // under mutex_
  std::atomic<std::thread::id> arming_;  // the thread inside arm_locked's async_wait
  run_memory memory_;                   // the wait's and the runner's, in turn
};

template <typename Clock, typename Executor, typename Fn, typename Due, typename Rep, typename Period>
std::shared_ptr<task_control> start_periodic(asio::io_context& host, const Executor& ex, const Due& initial,
                                             const std::chrono::duration<Rep, Period>& period, Fn&& fn,
                                             missed_ticks policy, bool fixed_delay) {
  const auto p = saturating_cast<typename Clock::duration>(period);
  if (!(p > Clock::duration::zero())) throw std::invalid_argument("tock: a periodic task's period must be positive");
  using task = periodic_task<Clock, Executor, std::decay_t<Fn>>;
  const auto s = std::make_shared<task>(ex, std::forward<Fn>(fn), due_time<Clock>(initial), p, policy, fixed_delay);
  task::start(s, host);
  return s;
}

}  // namespace detail
}  // namespace tock

#endif
