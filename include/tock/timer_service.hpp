// tock/timer_service.hpp: one heap of deadlines per io_context and clock, driven by a single Asio timer.
#ifndef TOCK_TIMER_SERVICE_HPP
#define TOCK_TIMER_SERVICE_HPP

#include <tock/config.hpp>
#include <tock/detail/io_context_of.hpp>
#include <tock/detail/libtock_abi.hpp>
#include <tock/detail/locked_section.hpp>
#include <tock/detail/sanitizers.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/service_lookup.hpp>
#include <tock/detail/slot_cancellation.hpp>
#include <tock/detail/timer_driver.hpp>
#include <tock/detail/timer_node.hpp>
#include <tock/detail/timer_queue.hpp>
#include <tock/detail/wait_handlers.hpp>
#include <tock/detail/wait_op.hpp>
#include <tock/error.hpp>
#include <tock/timer_stats.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace tock {

/// The timer service of one io_context for one clock: every tock timer and sleep on that context waits in
/// its queue (detail/timer_queue.hpp), and one Asio timer (the driver, detail/timer_driver.hpp) wakes it at
/// the earliest deadline. This layer holds the lock, allocates the operations, hooks their cancellation
/// slots, defers aborted completions (detail/service_core.hpp) and is the API. Found with asio::use_service or
/// basic_timer_service::of(executor); an io_context creates at most one per clock.
///
/// Thread safety: every member may be called from any thread (docs/design.md, "Threads"); one mutex guards the
/// queue, the driver and every timer's waits. Handlers run through their associated executor, never locked.
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>>
class basic_timer_service : public asio::execution_context::service, private detail::op_canceller {
 public:
  ///@{
  /// The clock and its types, the wait traits, and a timer's entry in the service (basic_timer's implementation).
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using traits_type = WaitTraits;
  using implementation_type = detail::timer_node<time_point>;
  ///@}

  /// The service's key among its context's services (Asio's service id).
  static asio::execution_context::id id;

  /// Called by asio::use_service<basic_timer_service>(io_context&).
  explicit basic_timer_service(asio::io_context& ctx);

  ~basic_timer_service() override;

  basic_timer_service(const basic_timer_service&) = delete;
  basic_timer_service& operator=(const basic_timer_service&) = delete;

  /// The service of the io_context behind `ex`, created on first use. O(services on the context), locks the
  /// context's service registry. Throws std::invalid_argument if `ex` does not run on an io_context.
  template <typename Executor, std::enable_if_t<!std::is_convertible_v<Executor&, asio::io_context&>, int> = 0>
  static basic_timer_service& of(const Executor& ex) {
    return of_context(detail::io_context_of(ex));
  }

  /// The service of `ctx` itself, as of_context(ctx).
  static basic_timer_service& of(asio::io_context& ctx) { return of_context(ctx); }

  /// The same for a context. After the first call on a thread, O(1) and lock-free while the same context is
  /// used: a one-entry thread-local cache, invalidated whenever any timer service is destroyed (so a new
  /// context at a dead one's address is never mistaken for it).
  static basic_timer_service& of_context(asio::io_context& ctx) {
    return detail::use_service_cached<basic_timer_service>(ctx);
  }

  /// Waits that have not fired yet (in the heap or parked at time_point::max()). O(1).
  std::size_t pending() const {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    return queue_.pending();
  }

  /// The most heap slots (timers with waits, plus sleeps, in the heap or a lane) the service holds; a wait past
  /// it completes with tock::error::capacity_exceeded. O(1).
  std::size_t capacity() const {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    return queue_.capacity();
  }

  /// Sets capacity(), clamped to what the heap can index. Waits already pending are kept. O(1).
  void set_capacity(std::size_t n) {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    queue_.set_capacity(n);
  }

  ///@{
  /// How late an entry may fire, for timers created and sleeps and timeouts started from now on that name
  /// none (0 unless set): they fire in [deadline, deadline + slack], so that one wake-up serves many. O(1),
  /// lock-free. set_default_slack throws std::invalid_argument, with nothing changed, if `slack` < 0.
  duration default_slack() const noexcept { return default_slack_.load(std::memory_order_relaxed); }
  void set_default_slack(const duration& slack) {
    default_slack_.store(checked_slack(slack), std::memory_order_relaxed);
  }
  ///@}

  /// A consistent snapshot of the service's counters (see timer_stats.hpp). O(1); takes the lock.
  timer_stats stats() const;

  /// Checks the queue, the driver and the accounting against each other, for tests. O(N).
  bool invariants_hold() const {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    return queue_.valid() && driver_.valid_locked() && !idle_work_ && core_->drain_fallbacks() == 0;
  }

  // --- The implementation of basic_timer. Each is O(log N) unless noted; `impl` is not shared between
  // threads without synchronisation (as for Asio's timers), the service itself may be. Calls that only take
  // waits out never allocate and never throw.

  /// Gives a new timer's entry the default slack. O(1).
  void construct(implementation_type& impl) noexcept { impl.slack = default_slack(); }

  /// Aborts the timer's waits (operation_aborted) and removes it from the heap; a deadline's bound operations
  /// are detached: they go on without a limit (timed_op::on_entry says why).
  void destroy(implementation_type& impl) noexcept;

  /// Moves `from`'s expiry and waits to `to`, which holds nothing yet; `from` is left as a new timer with
  /// expiry `from_expiry` (Asio resets it to time_point()). O(waits of the timer).
  void move_construct(implementation_type& to, implementation_type& from,
                      const time_point& from_expiry = time_point()) noexcept {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    queue_.move_timer(to, from, from_expiry);
  }

  /// The timer's expiry. O(1).
  time_point expiry(const implementation_type& impl) const noexcept { return impl.expiry(); }

  /// Sets how late the timer's waits may fire; pending waits too (an earlier latest time re-keys them).
  /// Throws std::invalid_argument if `slack` < 0, or std::bad_alloc (arming the driver), with nothing
  /// changed. O(log N).
  void set_slack(implementation_type& impl, const duration& slack) {
    checked_slack(slack);
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    driver_.arm_for_locked(queue_.slack_key(impl, slack));
    queue_.set_slack(impl, slack);
    check_locked();
  }

  /// Aborts every pending wait and sets the expiry; returns how many waits it aborted. Setting a later
  /// expiry leaves the heap as it is (the timer is re-keyed when it surfaces), an earlier one is applied when
  /// the next wait starts.
  std::size_t expires_at(implementation_type& impl, const time_point& t) noexcept {
    locked_section section(*this);
    const std::size_t n = take_waits_locked(section, impl, static_cast<std::size_t>(-1));
    impl.set_expiry(t);
    return n;
  }

  /// Aborts every pending wait, including one that fired but whose handler has not run. Returns the count.
  std::size_t cancel(implementation_type& impl) noexcept {
    locked_section section(*this);
    return take_waits_locked(section, impl, static_cast<std::size_t>(-1));
  }

  /// Aborts the oldest pending wait. Returns 0 or 1.
  std::size_t cancel_one(implementation_type& impl) noexcept {
    locked_section section(*this);
    return take_waits_locked(section, impl, 1);
  }

  /// Starts a wait on a timer. One allocation through the handler's associated allocator; throws
  /// std::bad_alloc with nothing changed.
  template <typename Handler, typename IoExecutor>
  void async_wait(implementation_type& impl, Handler&& handler, const IoExecutor& io_ex) {
    start<detail::timer_wait_op>(impl, std::forward<Handler>(handler), io_ex);
  }

  /// Starts a wait with no timer object until `t`, which may fire up to `slack` (>= 0) late. The same cost
  /// and guarantee; throws std::invalid_argument if `slack` < 0.
  template <typename Handler, typename IoExecutor>
  void async_sleep_until(const time_point& t, const duration& slack, Handler&& handler, const IoExecutor& io_ex) {
    sleep_time at{t, checked_slack(slack), duration::zero()};
    start<detail::sleep_op>(at, std::forward<Handler>(handler), io_ex);
  }

  /// The same with the default slack.
  template <typename Handler, typename IoExecutor>
  void async_sleep_until(const time_point& t, Handler&& handler, const IoExecutor& io_ex) {
    async_sleep_until(t, default_slack(), std::forward<Handler>(handler), io_ex);
  }

  /// A sleep until `t` that was computed as now + `span`: the same, but sleeps of a repeated span (the idle,
  /// request or write timeout of a server) queue in O(1) (detail/sleep_lanes.hpp). `slack` as above.
  template <typename Handler, typename IoExecutor>
  void async_sleep_for(const time_point& t, const duration& span, const duration& slack, Handler&& handler,
                       const IoExecutor& io_ex) {
    sleep_time at{t, checked_slack(slack), span};
    start<detail::sleep_op>(at, std::forward<Handler>(handler), io_ex);
  }

  /// The same with the default slack.
  template <typename Handler, typename IoExecutor>
  void async_sleep_for(const time_point& t, const duration& span, Handler&& handler, const IoExecutor& io_ex) {
    async_sleep_for(t, span, default_slack(), std::forward<Handler>(handler), io_ex);
  }

  /// Whether a handler with associated executor `ex` is called in place by the driver (it is this io_context's
  /// own executor), rather than dispatched to it. O(1).
  template <typename Executor>
  bool runs_in_context(const Executor& ex) const noexcept {
    return detail::is_own_executor_of(ex, core_->context());
  }

  // --- Entries embedded in other objects (tock::timeout, tock::deadline's bound operations). The owner keeps
  // the entry alive until it has fired (its completion function was called) or has been unscheduled.

  /// Schedules an entry at `t` (with the default slack); it fires through its completion function (op_action::invoke,
  /// from inside the context's run()) unless unscheduled first. Returns tock::error::shut_down or capacity_exceeded
  /// when it could not be scheduled, in which case it will never be called. Throws std::bad_alloc with nothing changed.
  /// A `span` > 0 says that `t` is now + span (see async_sleep_for).
  error_code schedule(detail::sleep_entry& entry, const time_point& t, const duration& span = duration::zero()) {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    if (shut_down_) return make_error_code(error::shut_down);
    if (queue_.sleep_past_capacity(t)) return core_->refused_locked();
    place_locked(sleep_time{t, default_slack(), span}, entry);
    return error_code();
  }

  /// Removes a scheduled entry without calling it; false if it has already fired (or was never scheduled).
  bool unschedule(detail::sleep_entry& entry) noexcept {
    locked_section section(*this);
    return core_->count_withdrawn_locked(queue_.unschedule(entry));
  }

  /// Moves a timer's expiry without aborting its waits: they now wait for `t`. A later expiry is O(1), lock-free
  /// and inlined (re-keyed when its old key surfaces); an earlier one is O(log N) and may throw std::bad_alloc
  /// (arming the driver) with nothing changed.
  void move_expiry(implementation_type& impl, const time_point& t) {
    if (!impl.try_move_later(t)) return move_expiry_locked(impl, t);
    lazy_extensions_.store(lazy_extensions_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// Adds an entry to a deadline's waits: it fires with them (op_action::invoke) and is aborted with them
  /// (op_action::deliver) unless taken out first (withdraw while its link holds it, else detach). The first
  /// entry goes to the deadline's link: O(1) and lock-free when its node is placed and the service has other
  /// entries attached (detail/deadline_link.hpp); else O(log N) under the lock, as a wait. Same errors as
  /// schedule().
  [[gnu::always_inline]] error_code attach(detail::deadline_node<time_point>& node, detail::wait_op& entry);

  /// Takes out an entry its deadline's link holds, its operation having completed: lock-free (but when no
  /// entry is left attached: the driver is then disarmed). False if it fired or was aborted or detached first.
  [[gnu::always_inline]] bool withdraw(detail::wait_op& entry) noexcept;

  /// Takes an attached entry out of its timer without calling it; false if it has already fired (it may still
  /// be in the ring until its cancellation runs) or been aborted.
  bool detach(detail::wait_op& entry) noexcept {
    locked_section section(*this);
    return detach_locked(entry);
  }

  /// What an entry's operation may hold to reach the service (service_core::leave) while its context is being
  /// destroyed on another thread. O(1).
  const std::shared_ptr<detail::service_core>& core() const noexcept { return core_; }

 private:
  using wait_op = detail::wait_op;
  using sleep_entry = detail::sleep_entry;
  using queue_type = detail::timer_queue<time_point>;
  using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;

  struct sleep_time {  // where a sleep goes
    time_point at;
    duration slack;
    duration span;  // at = now + span, if > 0: it may join a lane
  };

  static const duration& checked_slack(const duration& slack) {
    if (slack < duration::zero()) throw std::invalid_argument("tock: negative slack");
    return slack;
  }

  template <typename>
  friend class detail::locked_section;
  using locked_section = detail::locked_section<basic_timer_service>;

  // Allocates the operation (of kind Op: timer_wait_op or sleep_op) for a handler, with the handler's
  // executor as its target unless that is the context's own, and starts it at `where` (a timer, or a time).
  template <template <typename, typename> class Op, typename Where, typename Handler, typename IoExecutor>
  void start(Where& where, Handler&& handler, const IoExecutor& io_ex);

  template <typename Where, typename Op>
  void start_op(Where& where, Op* op);

  bool past_capacity_locked(const implementation_type& impl) const noexcept { return queue_.wait_past_capacity(impl); }

  // An entry the link may not hold (deadline_link.hpp, rule 7): to the ring, as a wait.
  error_code wait_locked(implementation_type& impl, wait_op& entry) {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    return attach_locked(impl, entry);
  }

  // A lock-free attach raises the peak (timer_stats) without the lock: relaxed reads of the queue's counts
  // (`attached`: the link count with this entry), and a compare-and-swap only when the peak grows.
  void note_lock_free_peak(std::size_t attached) noexcept {
    const std::size_t now = attached + queue_.heap_waits() + queue_.parked_waits();
    std::size_t peak = lock_free_peak_.load(std::memory_order_relaxed);
    while (now > peak && !lock_free_peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  error_code attach_locked(implementation_type& impl, wait_op& entry) {
    if (shut_down_) return make_error_code(error::shut_down);
    if (queue_.wait_past_capacity(impl)) return core_->refused_locked();
    place_locked(impl, entry);
    return error_code();
  }

  // A deadline's entry for its link, already counted (deadline_link.hpp, rule 4: whoever counts from zero
  // arms the driver), or for its ring if an entry is attached already. Throws (arming) with nothing changed.
  error_code link_locked(implementation_type& impl, detail::deadline_link& link, wait_op& entry);

  // The count of attached entries went to zero (or its withdrawn half wrapped): the driver may go.
  void links_idle(bool wrapped) noexcept;

  // The link let go of a withdrawn entry it held (deadline_link.hpp, rule 1), outside the lock.
  void unlink(wait_op& entry) noexcept { entry.complete(&entry, *core_, detail::op_action::unlink, error_code()); }
  bool past_capacity_locked(const sleep_time& t) const noexcept { return queue_.sleep_past_capacity(t.at); }

  // Places a wait or an entry: the memory first, then the driver (see timer_driver.hpp), then the queue.
  // Throws only before anything changed. A sleep without a slot cannot be cancelled: nothing unschedules it.
  void place_locked(implementation_type& impl, wait_op& op, bool cancellable = true);
  void place_locked(const sleep_time& t, sleep_entry& op, bool cancellable = true);

  // The rules the code relies on, checked in the sanitizer builds (TOCK_CHECK_INVARIANTS) where a call lets
  // the lock go: the driver is armed no later than the top's key while anything can fire (timer_driver.hpp),
  // and parked waits hold the context's work (reserve_parked_work). Nothing otherwise.
  void check_locked() const noexcept {
#if TOCK_CHECK_INVARIANTS
    if (!driver_.covers_top_locked()) detail::invariant_broken("the driver is armed later than the top's key");
    if (queue_.parked_waits() > 0 && !parked_work_ && !shut_down_)
      detail::invariant_broken("parked waits hold no work on the context");
#endif
  }

  // An earlier move, or one to or from max(), which parks: under the lock (see move_expiry).
  void move_expiry_locked(implementation_type& impl, const time_point& t);

  // Parked waits (expiry time_point::max()) never fire and take no heap slot, but they are outstanding
  // work, as Asio's are: run() does not return while one is pending. The work is taken before the first
  // one parks, and let go with the last (see locked_section).
  void reserve_parked_work() {
    if (!parked_work_) parked_work_ = std::make_unique<work_guard>(core_->context().get_executor());
  }

  // A deadline's linked entry first, then its ring's waits, oldest first.
  std::size_t take_waits_locked(locked_section& section, implementation_type& impl, std::size_t limit) noexcept;

  // A slot was emitted (service_core::cancel). A fired wait is left to its runner, which reports it aborted
  // now that it is out of its ring; a deferred or fired sleep is in no queue, so nothing happens.
  void cancel_locked(wait_op& op, std::unique_lock<detail::futex_mutex>& held) noexcept override {
    locked_section section(*this, held);
    if (queue_.detach(op) == queue_type::unlinked::waiting) section.defer(op);
  }
  void cancel_locked(sleep_entry& op, std::unique_lock<detail::futex_mutex>& held) noexcept override {
    locked_section section(*this, held);
    if (queue_.unschedule(op)) section.defer(op);  // else it fired, or its completion is already queued
  }

  // An entry's operation ended first, on an executor other than this context's (service_core::leave): as
  // detach() or withdraw(), or unschedule() for a sleep, with the lock held.
  bool leave_locked(wait_op& op, std::unique_lock<detail::futex_mutex>& held) noexcept override {
    locked_section section(*this, held);
    if (!detail::linked(op)) return detach_locked(op);
    if (!detail::withdraw(op)) return false;
    bool wrapped = false;
    queue_.links().withdrawn(wrapped);  // the section's end lets the driver and the covered mark go if idle
    if (wrapped) queue_.links().wrapped();
    return true;
  }
  bool leave_locked(sleep_entry& op, std::unique_lock<detail::futex_mutex>& held) noexcept override {
    locked_section section(*this, held);
    return core_->count_withdrawn_locked(queue_.unschedule(op));
  }

  // True if the entry was waiting: a fired one's reference is its runner's (timed_op::settle).
  bool detach_locked(wait_op& entry) noexcept {
    const bool waiting = queue_.detach(entry) == queue_type::unlinked::waiting;
    core_->count_withdrawn_locked(waiting);  // fired: already counted as fired
    return waiting;
  }

  // Asio's rule: pending handlers are destroyed, not invoked. They are destroyed outside the lock, since a
  // handler's destructor may destroy a timer or start a wait (which is then destroyed too); one that runs on
  // another executor and whose slot may still hold our handler is destroyed there (drop_op).
  void shutdown() override;

  // Shared with fired waits still queued on other executors, which may outlive the service.
  std::shared_ptr<detail::service_core> core_;
  queue_type queue_;
  detail::timer_driver<Clock, WaitTraits> driver_;
  bool shut_down_ = false;
  std::unique_ptr<work_guard> parked_work_;  // held while waits are parked
  std::unique_ptr<work_guard> idle_work_;  // no longer needed; dropped by locked_section after its posts
  // Lazy extensions take no lock: a relaxed load and store, not an atomic add, so that the push costs no
  // locked instruction; pushes from several threads at once may undercount (stats() says so).
  alignas(64) std::atomic<std::uint64_t> lazy_extensions_{0};
  std::atomic<duration> default_slack_{duration::zero()};
  std::atomic<std::size_t> lock_free_peak_{0};  // the peak pending count seen by lock-free attaches
};

template <typename Clock, typename WaitTraits>
asio::execution_context::id basic_timer_service<Clock, WaitTraits>::id;

/// The service behind tock::timer and tock::async_sleep_for.
using timer_service = basic_timer_service<std::chrono::steady_clock>;

}  // namespace tock

#include <tock/impl/timer_service.hpp>

#if TOCK_DETAIL_EXTERN_STEADY_SERVICE
// The steady_clock service is compiled once, in libtock (src/timer_service.cpp), not in every user's translation
// unit: its members that are not templates over the user's handlers or executors are taken from there.
namespace tock {
extern template class basic_timer_service<std::chrono::steady_clock>;
namespace detail {
extern template class timer_queue<std::chrono::steady_clock::time_point>;
extern template class deadline_heap<std::chrono::steady_clock::time_point>;
extern template class sleep_lanes<std::chrono::steady_clock::time_point>;
extern template class timer_driver<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>>;
extern template class locked_section<basic_timer_service<std::chrono::steady_clock>>;
}  // namespace detail
}  // namespace tock
#endif

#endif
