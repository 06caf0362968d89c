// tock/schedule.hpp: run a function on any executor when it is due, once or periodically (a scheduled
// executor for code without coroutines).
//
// A task is one block (std::make_shared): its function, a basic_timer on the *host* io_context (the one
// whose timer service keeps the due time; for an io_context executor or a strand of one, its own context),
// and a mutex. A run flows: the timer's wait completes on the host context -> a runner is dispatched to the
// task's executor (called in place, inside the host's run(), when that is the host's own executor; else
// posted, to a strand or a pool; a periodic task's wait and post take turns in one block of its own) -> under the
// task's mutex it checks that the task was not cancelled and marks it started -> the function runs without the lock ->
// (periodic) under the lock again it computes the next due time and waits again. Every call on the timer is made under
// the task's mutex, since a timer object is not thread-safe, so cancel() may come from any thread; and since
// the "not cancelled -> start" check takes the same mutex, a cancel that returned before a run started means
// that run never starts. A task has one wait or one runner at a time: two runs of one task never overlap.
//
// A periodic task is outstanding work of its host while scheduled, as a pending wait is: the host's run()
// does not return between a wait that fired and the run on another executor that waits again (cancel the
// task to let it return). Threads: see docs/design.md, "Threads".
// The host context must outlive the runs: join a pool (or drop what was posted to the executor) before
// destroying the host. When the host context shuts down, the pending wait is destroyed (Asio's rule): a
// periodic task stops and releases its timer then, so its handle may outlive the context (its queries stay
// valid); a one-shot's handler is destroyed without being called.
#ifndef TOCK_SCHEDULE_HPP
#define TOCK_SCHEDULE_HPP

#include <tock/async_sleep.hpp>
#include <tock/config.hpp>
#include <tock/detail/io_context_of.hpp>
#include <tock/detail/partial_token.hpp>
#include <tock/detail/scheduled_task.hpp>
#include <tock/periodic_timer.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace tock {

/// The handle of a periodic task. Dropping it does NOT cancel the task: the task runs on until cancel(),
/// until its function throws, or until the host context shuts down (as Java's ScheduledFuture and Tokio's
/// JoinHandle). Movable; its queries and cancel() are thread-safe (each takes the task's mutex, O(1)).
class task_handle {
 public:
  /// An empty handle: cancel() returns false, scheduled() false, the counts 0.
  task_handle() noexcept = default;
  /// The handle of `task` (schedule_at_fixed_rate and schedule_with_fixed_delay make it).
  explicit task_handle(std::shared_ptr<detail::task_control> task) noexcept : task_(std::move(task)) {}

  /// No run starts after this returns; true if it stopped a scheduled task. A run starts when, on the
  /// task's executor, it finds the task still scheduled (under the task's mutex); one that started before is
  /// not interrupted, even if its function is entered just after this returns: it finishes (and is counted)
  /// but the task does not wait again. There is no join: to know when the function is done, signal it from
  /// the function. A wait refused (capacity_exceeded) stops the task with that error in error(). May be called
  /// from any thread, and from the task's own function. O(log N) (the timer leaves the heap); never throws,
  /// never allocates; the aborted wait completes inside the host's run().
  bool cancel() noexcept { return task_ && task_->cancel(); }

  /// Whether runs are still to come: not cancelled, not stopped by an exception or the host's shutdown.
  bool scheduled() const { return task_ && task_->scheduled(); }

  /// Runs that finished (returned or threw). Runs skipped by missed_ticks::skip are in missed() instead.
  std::uint64_t runs() const { return task_ ? task_->runs() : 0; }

  /// Grid points passed over (fixed rate with missed_ticks::skip); always 0 under burst and fixed delay.
  std::uint64_t missed() const { return task_ ? task_->missed() : 0; }

  /// The exception that stopped the task (its function's, or a refused or failed wait's), or null.
  std::exception_ptr error() const { return task_ ? task_->error() : nullptr; }

 private:
  std::shared_ptr<detail::task_control> task_;
};

/// Runs `fn()` on `ex` once `due` (a delay from now or a time point) has come, its timer kept by `host`'s
/// timer service; completes `token` with void(std::exception_ptr, R) (void(std::exception_ptr) if R is
/// void) as co_spawn does: R is fn's result (default-constructed if R is not void and fn threw or did not
/// run), the exception fn threw, or system_error(operation_aborted) if the token's cancellation slot was
/// emitted (any type) before fn started, or system_error(tock::error::capacity_exceeded) if the host's
/// service refused the wait: in both cases fn never starts. The handler runs on its associated
/// executor (default `ex`), which holds outstanding work meanwhile. O(log N); one allocation (the task)
/// plus the wait's (and a post's) recycled memory. Thread-safe. Throws std::bad_alloc, nothing scheduled.
/// Emit the slot where Asio requires (not concurrently with the completion: on a strand if `ex` has threads).
/// Without `token`: the executor's default completion token (asio::deferred if it names none).
template <typename Clock = void, typename Executor, typename Due, typename Fn,
          typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
auto schedule(asio::io_context& host, const Executor& ex, const Due& due, Fn&& fn,
              Token&& token = detail::default_token_t<Executor>()) {
  using clock = typename detail::due_clock<Clock, Due>::type;
  using R = std::invoke_result_t<std::decay_t<Fn>&>;
  static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                "tock::schedule: R must be default-constructible");
  return asio::async_initiate<Token, typename detail::schedule_signature<R>::type>(
      detail::initiate_schedule<clock>(), token, &host, ex, detail::due_time<clock>(due), std::forward<Fn>(fn));
}

/// The same on `ex`'s own io_context (an io_context executor, a strand of one, an any_io_executor holding one).
template <typename Clock = void, typename Executor, typename Due, typename Fn,
          typename Token = detail::default_token_t<Executor>,
          std::enable_if_t<detail::is_executor_v<Executor> && !detail::is_executor_v<Due>, int> = 0>
auto schedule(const Executor& ex, const Due& due, Fn&& fn, Token&& token = detail::default_token_t<Executor>()) {
  return tock::schedule<Clock>(detail::io_context_of(ex), ex, due, std::forward<Fn>(fn), std::forward<Token>(token));
}

/// The same on `ctx` and its executor.
template <typename Clock = void, typename ExecutionContext, typename Due, typename Fn,
          typename Token = detail::default_token_t<typename ExecutionContext::executor_type>,
          std::enable_if_t<detail::is_context_v<ExecutionContext> && !detail::is_executor_v<Due>, int> = 0>
auto schedule(ExecutionContext& ctx, const Due& due, Fn&& fn,
              Token&& token = detail::default_token_t<typename ExecutionContext::executor_type>()) {
  return tock::schedule<Clock>(ctx.get_executor(), due, std::forward<Fn>(fn), std::forward<Token>(token));
}

/// Runs `fn()` (its result ignored) on `ex` at `initial` (a delay or a time point), then at fixed rate: run n
/// is due at first + n * period; `policy` says what happens to the runs due while one was late or running
/// (skip: the next run is the first grid point not before now, the others count as missed; burst: they run
/// back to back; delay: as schedule_with_fixed_delay). Never two runs at once. Throws std::invalid_argument
/// if period <= 0, std::bad_alloc. One allocation; none per run, on any executor (the wait and the post
/// take turns in a block inside the task). O(log N) per run. Thread-safe. Dropping the handle does not cancel the task.
template <typename Clock = void, typename Executor, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
[[nodiscard]] task_handle schedule_at_fixed_rate(asio::io_context& host, const Executor& ex, const Due& initial,
                                                 const std::chrono::duration<Rep, Period>& period, Fn&& fn,
                                                 missed_ticks policy = missed_ticks::skip) {
  using clock = typename detail::due_clock<Clock, Due>::type;
  return task_handle(
      detail::start_periodic<clock>(host, ex, initial, period, std::forward<Fn>(fn), policy, /*fixed_delay=*/false));
}

/// The same on `ex`'s own io_context.
template <typename Clock = void, typename Executor, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
[[nodiscard]] task_handle schedule_at_fixed_rate(const Executor& ex, const Due& initial,
                                                 const std::chrono::duration<Rep, Period>& period, Fn&& fn,
                                                 missed_ticks policy = missed_ticks::skip) {
  return tock::schedule_at_fixed_rate<Clock>(detail::io_context_of(ex), ex, initial, period, std::forward<Fn>(fn),
                                             policy);
}

/// The same on `ctx` and its executor.
template <typename Clock = void, typename ExecutionContext, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_context_v<ExecutionContext> && !detail::is_executor_v<Due>, int> = 0>
[[nodiscard]] task_handle schedule_at_fixed_rate(ExecutionContext& ctx, const Due& initial,
                                                 const std::chrono::duration<Rep, Period>& period, Fn&& fn,
                                                 missed_ticks policy = missed_ticks::skip) {
  return tock::schedule_at_fixed_rate<Clock>(ctx.get_executor(), initial, period, std::forward<Fn>(fn), policy);
}

/// Runs `fn()` on `ex` at `initial`, then `delay` after each run finished (Java's fixed delay: a slow run
/// pushes the next ones back; nothing is missed). Same costs, throws and drop semantics as at fixed rate.
template <typename Clock = void, typename Executor, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
[[nodiscard]] task_handle schedule_with_fixed_delay(asio::io_context& host, const Executor& ex, const Due& initial,
                                                    const std::chrono::duration<Rep, Period>& delay, Fn&& fn) {
  using clock = typename detail::due_clock<Clock, Due>::type;
  return task_handle(detail::start_periodic<clock>(host, ex, initial, delay, std::forward<Fn>(fn), missed_ticks::delay,
                                                   /*fixed_delay=*/true));
}

/// The same on `ex`'s own io_context.
template <typename Clock = void, typename Executor, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_executor_v<Executor>, int> = 0>
[[nodiscard]] task_handle schedule_with_fixed_delay(const Executor& ex, const Due& initial,
                                                    const std::chrono::duration<Rep, Period>& delay, Fn&& fn) {
  return tock::schedule_with_fixed_delay<Clock>(detail::io_context_of(ex), ex, initial, delay, std::forward<Fn>(fn));
}

/// The same on `ctx` and its executor.
template <typename Clock = void, typename ExecutionContext, typename Due, typename Rep, typename Period, typename Fn,
          std::enable_if_t<detail::is_context_v<ExecutionContext> && !detail::is_executor_v<Due>, int> = 0>
[[nodiscard]] task_handle schedule_with_fixed_delay(ExecutionContext& ctx, const Due& initial,
                                                    const std::chrono::duration<Rep, Period>& delay, Fn&& fn) {
  return tock::schedule_with_fixed_delay<Clock>(ctx.get_executor(), initial, delay, std::forward<Fn>(fn));
}

}  // namespace tock

#endif
