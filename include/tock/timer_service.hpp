// tock/timer_service.hpp: one heap of deadlines per io_context and clock, driven by a single Asio timer.
#ifndef TOCK_TIMER_SERVICE_HPP
#define TOCK_TIMER_SERVICE_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/driver.hpp>
#include <tock/detail/io_context_of.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/timer_node.hpp>
#include <tock/detail/wait_handlers.hpp>
#include <tock/detail/wait_op.hpp>
#include <tock/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/wait_traits.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tock {

namespace asio = boost::asio;

// The timer service of one io_context for one clock: every tock timer and sleep on that context waits in
// its heap, and one Asio timer (the driver) wakes it at the earliest deadline. Found with
// asio::use_service or basic_timer_service::of(executor); an io_context creates at most one per clock.
//
// Thread safety: every member may be called from any thread; one mutex guards the heap, the driver and
// every timer's waits. A wait's handler always runs through its associated executor, never under the lock.
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>>
class basic_timer_service : public asio::execution_context::service {
 public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using traits_type = WaitTraits;
  using implementation_type = detail::timer_node<time_point>;

  static asio::execution_context::id id;

  // Called by asio::use_service<basic_timer_service>(io_context&).
  explicit basic_timer_service(asio::io_context& ctx)
      : asio::execution_context::service(ctx), core_(std::make_shared<detail::service_core>(ctx)), driver_(ctx.get_executor()) {}

  ~basic_timer_service() override { detail::service_epoch.fetch_add(1, std::memory_order_acq_rel); }

  basic_timer_service(const basic_timer_service&) = delete;
  basic_timer_service& operator=(const basic_timer_service&) = delete;

  // The service of the io_context behind `ex`, created on first use. O(services on the context), locks the
  // context's service registry. Throws std::invalid_argument if `ex` does not run on an io_context.
  template <typename Executor, std::enable_if_t<!std::is_convertible_v<Executor&, asio::io_context&>, int> = 0>
  static basic_timer_service& of(const Executor& ex) {
    return of_context(detail::io_context_of(ex));
  }

  // The service of `ctx` itself, as of_context(ctx).
  static basic_timer_service& of(asio::io_context& ctx) { return of_context(ctx); }

  // The same for a context. After the first call on a thread, O(1) and lock-free while the same context is
  // used: a one-entry thread-local cache, invalidated whenever any timer service is destroyed (so a new
  // context at a dead one's address is never mistaken for it).
  static basic_timer_service& of_context(asio::io_context& ctx) {
    struct cache_entry {
      asio::io_context* context;
      basic_timer_service* service;
      std::uint64_t epoch;
    };
    static thread_local cache_entry last{nullptr, nullptr, 0};
    const std::uint64_t epoch = detail::service_epoch.load(std::memory_order_acquire);
    if (last.context == &ctx && last.epoch == epoch) return *last.service;
    basic_timer_service& service = asio::use_service<basic_timer_service>(ctx);
    last = cache_entry{&ctx, &service, epoch};
    return service;
  }

  // Waits that have not fired yet (in the heap or parked at time_point::max()). O(1).
  std::size_t pending() const {
    std::lock_guard<std::mutex> lock(core_->mutex());
    return heap_waits_ + parked_waits_;
  }

  // The most heap slots (timers with waits, plus sleeps) the service holds; a wait past it completes with
  // tock::error::capacity_exceeded. O(1).
  std::size_t capacity() const {
    std::lock_guard<std::mutex> lock(core_->mutex());
    return capacity_;
  }

  // Sets capacity(), clamped to what the heap can index. Waits already pending are kept. O(1).
  void set_capacity(std::size_t n) {
    std::lock_guard<std::mutex> lock(core_->mutex());
    capacity_ = n < detail::heap_node::max_position ? n : detail::heap_node::max_position;
  }

  // Checks the heap and the accounting against each other, for tests. O(N).
  bool invariants_hold() const {
    std::lock_guard<std::mutex> lock(core_->mutex());
    if (!heap_.valid()) return false;
    std::size_t in_heap = 0;
    std::size_t lingering = 0;
    for (std::size_t i = 0; i < heap_.size(); ++i) {
      const detail::heap_node* n = heap_.at(i).node;
      if (!n->is_timer) {
        ++in_heap;
      } else {
        const auto& t = *implementation_type::from_node(const_cast<detail::heap_node*>(n));
        // A timer with waits is keyed no later than its expiry; one without waits may linger with any key
        // until it surfaces (its next wait re-keys it).
        if (t.ring.waiting > 0 && (heap_.at(i).key > t.expiry() || t.expiry() == time_point::max())) return false;
        in_heap += t.ring.waiting;
        lingering += t.ring.waiting == 0;
      }
    }
    std::size_t parked = 0;
    for (std::size_t i = 0; i < parked_.size(); ++i) {
      const detail::heap_node* n = parked_[i];
      if (n->position != (detail::heap_node::parked_flag | i)) return false;
      parked += n->is_timer ? implementation_type::from_node(const_cast<detail::heap_node*>(n))->ring.waiting : 1;
    }
    const bool driver_ok = (heap_waits_ == 0) == (armed_at_ == time_point::max()) || shut_down_ || firing_;
    // The service's own Asio operations fit their pools, so the paths that must not fail never allocate.
    const bool pools_ok = driver_.fallbacks() == 0 && core_->drain_fallbacks() == 0;
    return in_heap == heap_waits_ && parked == parked_waits_ && lingering == lingering_ && driver_ok &&
           !idle_work_ && pools_ok;
  }

  // --- The implementation of basic_timer. Each is O(log N) unless noted; `impl` is not shared between
  // threads without synchronisation (as for Asio's timers), the service itself may be.

  void construct(implementation_type&) noexcept {}

  // Aborts the timer's waits (operation_aborted) and removes it from the heap.
  void destroy(implementation_type& impl) {
    idle_work idle(*this);
    drain_request drain;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      take_waits_locked(impl, static_cast<std::size_t>(-1), drain);
      if (impl.node.in_heap()) {
        heap_.remove(impl.node);
        --lingering_;
      }
      idle.collect_locked();
    }
    drain.post(*core_);
  }

  // Moves `from`'s expiry and waits to `to`, which holds nothing yet; `from` is left as a new timer with
  // expiry `from_expiry` (Asio resets it to time_point()). O(waits of the timer).
  void move_construct(implementation_type& to, implementation_type& from,
                      const time_point& from_expiry = time_point()) noexcept {
    std::lock_guard<std::mutex> lock(core_->mutex());
    to.set_expiry(from.expiry());
    from.set_expiry(from_expiry);
    to.ring.take_from(from.ring);
    to.node.seq = from.node.seq;
    to.node.position = from.node.position;
    if (from.node.in_heap())
      heap_.relocate(from.node, to.node);
    else if (from.node.parked())
      parked_[from.node.position & ~detail::heap_node::parked_flag] = &to.node;
    from.node.position = detail::heap_node::nowhere;
  }

  time_point expiry(const implementation_type& impl) const noexcept { return impl.expiry(); }

  // Aborts every pending wait and sets the expiry; returns how many waits it aborted. Setting a later
  // expiry leaves the heap as it is (the timer is re-keyed when it surfaces), an earlier one is applied when
  // the next wait starts.
  std::size_t expires_at(implementation_type& impl, const time_point& t) {
    idle_work idle(*this);
    drain_request drain;
    std::size_t n;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      n = take_waits_locked(impl, static_cast<std::size_t>(-1), drain);
      impl.set_expiry(t);
      idle.collect_locked();
    }
    drain.post(*core_);
    return n;
  }

  // Aborts every pending wait, including one that fired but whose handler has not run. Returns the count.
  std::size_t cancel(implementation_type& impl) { return cancel_some(impl, static_cast<std::size_t>(-1)); }

  // Aborts the oldest pending wait. Returns 0 or 1.
  std::size_t cancel_one(implementation_type& impl) { return cancel_some(impl, 1); }

  // Blocks the calling thread until the expiry has passed.
  void wait(implementation_type& impl, error_code& ec) {
    time_point now = Clock::now();
    while (now < impl.expiry()) {
      std::this_thread::sleep_for(WaitTraits::to_wait_duration(impl.expiry() - now));
      now = Clock::now();
    }
    ec = error_code();
  }

  // Starts a wait on a timer. One allocation through the handler's associated allocator.
  template <typename Handler, typename IoExecutor>
  void async_wait(implementation_type& impl, Handler&& handler, const IoExecutor& io_ex) {
    using handler_type = std::decay_t<Handler>;
    const auto ex = asio::get_associated_executor(handler, io_ex);
    if (runs_in_context(ex)) {
      using op = detail::timer_wait_op<handler_type, detail::run_in_context>;
      start_wait(impl, detail::allocate_op<op>(std::forward<Handler>(handler), detail::run_in_context{}));
    } else {
      using work_executor = std::decay_t<decltype(asio::prefer(ex, asio::execution::outstanding_work.tracked))>;
      using target = detail::run_on_executor<work_executor>;
      using op = detail::timer_wait_op<handler_type, target>;
      start_wait(impl, detail::allocate_op<op>(std::forward<Handler>(handler),
                                               target{asio::prefer(ex, asio::execution::outstanding_work.tracked)}));
    }
  }

  // Starts a wait with no timer object until `t`. One allocation through the handler's associated allocator.
  template <typename Handler, typename IoExecutor>
  void async_sleep_until(const time_point& t, Handler&& handler, const IoExecutor& io_ex) {
    using handler_type = std::decay_t<Handler>;
    const auto ex = asio::get_associated_executor(handler, io_ex);
    if (runs_in_context(ex)) {
      using op = detail::sleep_op<handler_type, detail::run_in_context>;
      start_sleep(t, detail::allocate_op<op>(std::forward<Handler>(handler), detail::run_in_context{}));
    } else {
      using work_executor = std::decay_t<decltype(asio::prefer(ex, asio::execution::outstanding_work.tracked))>;
      using target = detail::run_on_executor<work_executor>;
      using op = detail::sleep_op<handler_type, target>;
      start_sleep(t, detail::allocate_op<op>(std::forward<Handler>(handler),
                                             target{asio::prefer(ex, asio::execution::outstanding_work.tracked)}));
    }
  }

  // Whether a handler with associated executor `ex` is called in place by the driver (it is this io_context's
  // own executor), rather than dispatched to it. O(1).
  template <typename Executor>
  bool runs_in_context(const Executor& ex) const noexcept {
    if constexpr (std::is_same_v<Executor, asio::io_context::executor_type>) {
      return &ex.context() == &core_->context();
    } else if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      const auto* io = ex.template target<asio::io_context::executor_type>();
      return io != nullptr && &io->context() == &core_->context();
    } else {
      return false;
    }
  }

  // --- Entries embedded in other objects (tock::timeout, tock::deadline's bound operations). The owner keeps
  // the entry alive until it has fired (its completion function was called) or has been unscheduled.

  // Schedules an entry at `t`; it fires through its completion function (op_action::invoke, from inside the
  // context's run()) unless unscheduled first. Returns tock::error::shut_down or capacity_exceeded when it
  // could not be scheduled, in which case it will never be called.
  error_code schedule(detail::sleep_op_base& entry, const time_point& t) {
    std::lock_guard<std::mutex> lock(core_->mutex());
    if (shut_down_) return make_error_code(error::shut_down);
    if (t == time_point::max()) {
      reserve_parked_one();
      park_locked(entry.node);
      ++parked_waits_;
      update_work_locked();
      return error_code();
    }
    if (slots_in_use_locked() >= capacity_) return make_error_code(error::capacity_exceeded);
    heap_.reserve_one();
    arm_for_locked(t);
    entry.node.seq = next_seq_++;
    heap_.push(entry.node, t);
    ++heap_waits_;
    return error_code();
  }

  // Removes a scheduled entry without calling it; false if it has already fired (or was never scheduled).
  bool unschedule(detail::sleep_op_base& entry) {
    idle_work idle(*this);
    std::lock_guard<std::mutex> lock(core_->mutex());
    const bool removed = unschedule_locked(entry);
    idle.collect_locked();
    return removed;
  }

  // Moves a timer's expiry without aborting its waits: they now wait for `t`. A later expiry is O(1) (the
  // timer is re-keyed when its old key surfaces); an earlier one is O(log N).
  void move_expiry(implementation_type& impl, const time_point& t) {
    if (impl.try_move_later(t)) return;  // the common idle-timeout push: no lock, no heap
    idle_work idle(*this);
    std::lock_guard<std::mutex> lock(core_->mutex());
    move_expiry_locked(impl, t);
    idle.collect_locked();
  }

  // Adds an entry to a timer's waits: it fires with them (op_action::invoke) and is aborted with them
  // (op_action::deliver) unless detached first. Same errors as schedule().
  error_code attach(implementation_type& impl, detail::wait_op& entry) {
    std::lock_guard<std::mutex> lock(core_->mutex());
    if (shut_down_) return make_error_code(error::shut_down);
    if (needs_slot_past_capacity_locked(impl)) return make_error_code(error::capacity_exceeded);
    link_wait_locked(impl, entry);
    return error_code();
  }

  // Takes an attached entry out of its timer without calling it; false if it has already fired or been aborted.
  bool detach(detail::wait_op& entry) {
    idle_work idle(*this);
    std::lock_guard<std::mutex> lock(core_->mutex());
    const bool detached = detach_locked(entry) != unlinked::nothing;
    idle.collect_locked();
    return detached;
  }


 private:
  using wait_op = detail::wait_op;
  using heap_node = detail::heap_node;
  using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;

  // Declared before the lock and the completions of a call that may end the last parked wait: collects the
  // parked-work guard under the lock and drops it last, after the completions were posted.
  class idle_work {
   public:
    explicit idle_work(basic_timer_service& s) noexcept : service_(s) {}
    void collect_locked() noexcept { guard_ = std::move(service_.idle_work_); }

   private:
    basic_timer_service& service_;
    std::unique_ptr<work_guard> guard_;
  };

  // Whether a call deferred a completion that needs a drain posted (see service_core): posted once the
  // lock is released. Never allocates.
  struct drain_request {
    bool needed = false;
    void post(detail::service_core& core) {
      if (needed) core.post_drain();
    }
  };

  // The service's handler in a wait's or sleep's cancellation slot: cancels it on any type. Its constructor
  // and destructor tell the operation whether it is in the slot (see wait_handlers.hpp), so that a slot
  // whose signal was destroyed first is never touched. Op is wait_op or detail::sleep_op_base.
  template <typename Op>
  class slot_cancellation {
   public:
    slot_cancellation(basic_timer_service* s, Op* op) noexcept : service_(s), core_(s->core_.get()), op_(op) {
      op_->complete(op_, *core_, detail::op_action::hooked, error_code());
    }
    // Through the core, not the service: a fired wait run on another context's executor may clear its slot
    // after this service is gone (the core lives on with it).
    ~slot_cancellation() { op_->complete(op_, *core_, detail::op_action::unhooked, error_code()); }
    slot_cancellation(const slot_cancellation&) = delete;
    slot_cancellation& operator=(const slot_cancellation&) = delete;

    void operator()(asio::cancellation_type type) {
      if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                   asio::cancellation_type::total)) != asio::cancellation_type::none)
        service_->cancel_op(*op_);  // may destroy *this (the slot is cleared): nothing after it
    }

   private:
    basic_timer_service* service_;
    detail::service_core* core_;
    Op* op_;
  };

  struct driver_handler {
    basic_timer_service* service;
    std::uint64_t generation;
    void operator()(const error_code&) const { service->on_driver_fired(generation); }
  };

  // Destroys the handler of an operation that could not be started, when the start throws.
  template <typename Op>
  struct unstarted_op {
    Op* op;
    detail::service_core& core;
    ~unstarted_op() {
      if (op) op->complete(op, core, detail::op_action::destroy, error_code());
    }
  };

  template <typename Op>
  void start_wait(implementation_type& impl, Op* op) {
    unstarted_op<detail::wait_op> guard{op, *core_};
    auto slot = asio::get_associated_cancellation_slot(op->handler());
    if (slot.is_connected()) slot.template emplace<slot_cancellation<wait_op>>(this, op);

    std::unique_lock<std::mutex> lock(core_->mutex());
    if (shut_down_) {
      lock.unlock();
      return;  // Asio's rule after shutdown: the handler is destroyed, never invoked
    }
    if (needs_slot_past_capacity_locked(impl)) {
      refuse_locked(guard, lock);
      return;
    }
    link_wait_locked(impl, *op);
    guard.op = nullptr;
  }

  // Refuses a wait that found no heap slot: it completes with capacity_exceeded from the context. Throws
  // only while `guard` still owns the operation.
  template <typename Op>
  void refuse_locked(unstarted_op<Op>& guard, std::unique_lock<std::mutex>& lock) {
    Op* op = std::exchange(guard.op, nullptr);
    const bool post = core_->defer_locked(*op, detail::deferred::capacity_exceeded);
    lock.unlock();
    if (post) core_->post_drain();
  }

  // Equal deadlines fire in the order their waits started, across timers too: a timer in the heap carries
  // the sequence number of its oldest waiting wait, and is re-sifted when that wait leaves. O(log N), and
  // only for timers with several waits. A timer keyed earlier than its expiry (a lazy key) is re-sequenced
  // when it surfaces instead, as its key only ranks it then.
  void resequence_locked(implementation_type& impl) noexcept {
    const std::uint32_t seq = impl.ring.first_waiting()->seq;
    if (impl.node.seq == (seq & 0x7FFF'FFFFu)) return;
    const time_point key = heap_.key_of(impl.node);
    if (key < impl.expiry()) return;
    impl.node.seq = seq;
    heap_.rekey(impl.node, key);
  }

  // Heap slots held by waits: timers left in the heap without waits (see take_waits_locked) do not count,
  // since they leave when they surface or when their next wait starts.
  std::size_t slots_in_use_locked() const noexcept { return heap_.size() - lingering_; }

  // Throws only before anything changed.
  void move_expiry_locked(implementation_type& impl, const time_point& t) {
    if (impl.ring.waiting == 0) {
      impl.set_expiry(t);
      return;  // placed when a wait starts
    }
    const std::size_t n = impl.ring.waiting;
    if (t == time_point::max()) {
      if (!impl.node.parked()) {
        reserve_parked_one();
        heap_.remove(impl.node);
        heap_waits_ -= n;
        park_locked(impl.node);
        parked_waits_ += n;
        disarm_if_idle_locked();
        update_work_locked();
      }
    } else if (impl.node.parked()) {
      heap_.reserve_one();
      arm_for_locked(t);
      unpark_locked(impl.node);
      parked_waits_ -= n;
      impl.node.seq = impl.ring.first_waiting()->seq;
      heap_.push(impl.node, t);
      heap_waits_ += n;
      update_work_locked();
    } else if (!(heap_.key_of(impl.node) < t)) {
      arm_for_locked(t);
      impl.node.seq = impl.ring.first_waiting()->seq;  // a lazy key may carry an older wait's
      heap_.rekey(impl.node, t);
    }
    impl.set_expiry(t);
  }

  enum class unlinked { nothing, due, waiting };

  // Takes a wait out of whatever ring it is in, and says what it was: already gone, fired but not yet run,
  // or still waiting. O(waits of its timer).
  unlinked detach_locked(detail::wait_op& entry) noexcept {
    if (entry.next == nullptr || detail::deferred_queue::is_queued(entry)) return unlinked::nothing;
    detail::wait_op** link = nullptr;
    detail::wait_ring& ring = detail::wait_ring::ring_of(entry, link);
    const bool was_due = ring.index_of(entry) < ring.due;
    detail::wait_ring::unlink(link, entry);
    if (was_due) {
      --ring.due;
      return unlinked::due;
    }
    --ring.waiting;
    waits_left_locked(timer_of(ring), 1);
    return unlinked::waiting;
  }

  // A new wait would need a heap slot for the timer, and none is left.
  bool needs_slot_past_capacity_locked(const implementation_type& impl) const noexcept {
    return !impl.node.in_heap() && !impl.node.parked() && impl.expiry() != time_point::max() &&
           slots_in_use_locked() >= capacity_;
  }

  // Links a wait into a timer's ring and places the timer: parked at time_point::max(), else in the heap.
  // Throws only before anything changed.
  void link_wait_locked(implementation_type& impl, wait_op& op) {
    if (impl.expiry() == time_point::max()) {
      reserve_parked_one();
      op.seq = next_seq_++;
      impl.ring.push_back(op);
      if (impl.node.in_heap()) {
        heap_.remove(impl.node);
        --lingering_;
      }
      if (!impl.node.parked()) park_locked(impl.node);
      ++parked_waits_;
      update_work_locked();
      return;
    }
    heap_.reserve_one();
    const bool first = impl.ring.waiting == 0;
    // Left in the heap by an earlier wait (a cancel or reset), a timer keeps a key earlier than its expiry,
    // heap untouched: it is re-keyed, with this wait's sequence number, when it surfaces. Otherwise its key
    // becomes the expiry. A timer already waiting is in the heap where the driver expects it.
    const bool keeps_key = impl.node.in_heap() && heap_.key_of(impl.node) < impl.expiry();
    if (first) arm_for_locked(keeps_key ? heap_.key_of(impl.node) : impl.expiry());
    op.seq = next_seq_++;
    impl.ring.push_back(op);
    ++heap_waits_;
    // A timer ranks among equal deadlines by its oldest waiting wait (see resequence_locked).
    if (!first) return;
    if (impl.node.in_heap()) {
      --lingering_;
      if (!keeps_key) {
        impl.node.seq = op.seq;
        heap_.rekey(impl.node, impl.expiry());
      }
    } else {
      impl.node.seq = op.seq;
      heap_.push(impl.node, impl.expiry());
    }
  }

  template <typename Op>
  void start_sleep(const time_point& t, Op* op) {
    unstarted_op<detail::sleep_op_base> guard{op, *core_};
    auto slot = asio::get_associated_cancellation_slot(op->handler());
    if (slot.is_connected()) slot.template emplace<slot_cancellation<detail::sleep_op_base>>(this, op);

    std::unique_lock<std::mutex> lock(core_->mutex());
    if (shut_down_) {
      lock.unlock();
      return;  // Asio's rule after shutdown: the handler is destroyed, never invoked
    }
    if (t == time_point::max()) {
      reserve_parked_one();
      guard.op = nullptr;
      park_locked(op->node);
      ++parked_waits_;
      update_work_locked();
      return;
    }
    if (slots_in_use_locked() >= capacity_) {
      refuse_locked(guard, lock);
      return;
    }
    heap_.reserve_one();
    arm_for_locked(t);
    guard.op = nullptr;
    op->node.seq = next_seq_++;
    heap_.push(op->node, t);
    ++heap_waits_;
  }

  std::size_t cancel_some(implementation_type& impl, std::size_t limit) {
    idle_work idle(*this);
    drain_request drain;
    std::size_t n;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      n = take_waits_locked(impl, limit, drain);
      idle.collect_locked();
    }
    drain.post(*core_);
    return n;
  }

  // Takes up to `limit` waits of a timer, oldest first. Fired waits whose handlers have not run are only
  // unlinked (their runner reports them aborted); waiting ones are deferred as aborted (the caller posts
  // the drain once the lock is released). The timer stays in the heap: a later wait will likely reuse its
  // slot. Never throws.
  std::size_t take_waits_locked(implementation_type& impl, std::size_t limit, drain_request& drain) noexcept {
    std::size_t taken = 0;
    std::size_t waiting_taken = 0;
    while (taken < limit && !impl.ring.empty()) {
      bool was_due = false;
      wait_op& op = impl.ring.take_front(was_due);
      if (!was_due) {
        drain.needed |= core_->defer_locked(op, detail::deferred::aborted);
        ++waiting_taken;
      }
      ++taken;
    }
    if (waiting_taken > 0) waits_left_locked(impl, waiting_taken);
    return taken;
  }

  // Accounts for `n` waits that left a timer's ring before firing.
  void waits_left_locked(implementation_type& impl, std::size_t n) noexcept {
    if (impl.node.in_heap()) {
      heap_waits_ -= n;
      if (impl.ring.waiting > 0) {
        resequence_locked(impl);
      } else {
        ++lingering_;
      }
      disarm_if_idle_locked();
    } else if (impl.node.parked()) {
      parked_waits_ -= n;
      if (impl.ring.waiting == 0) unpark_locked(impl.node);
      update_work_locked();
    }
  }

  void cancel_op(wait_op& op) {
    idle_work idle(*this);
    drain_request drain;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      // A fired wait is left to its runner, which reports it aborted now that it is out of its ring.
      if (detach_locked(op) == unlinked::waiting) drain.needed = core_->defer_locked(op, detail::deferred::aborted);
      idle.collect_locked();
    }
    drain.post(*core_);
  }

  void cancel_op(detail::sleep_op_base& op) {
    idle_work idle(*this);
    drain_request drain;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      if (unschedule_locked(op)) drain.needed = core_->defer_locked(op, detail::deferred::aborted);  // else fired
      idle.collect_locked();
    }
    drain.post(*core_);
  }

  bool unschedule_locked(detail::sleep_op_base& op) noexcept {
    if (op.node.in_heap()) {
      heap_.remove(op.node);
      --heap_waits_;
      disarm_if_idle_locked();
    } else if (op.node.parked()) {
      unpark_locked(op.node);
      --parked_waits_;
      update_work_locked();
    } else {
      return false;
    }
    return true;
  }

  static implementation_type& timer_of(detail::wait_ring& ring) noexcept {
    return *reinterpret_cast<implementation_type*>(reinterpret_cast<char*>(&ring) -
                                                   offsetof(implementation_type, ring));
  }

  // Parked waits (expiry time_point::max()) never fire and take no heap slot, but they are outstanding
  // work, as Asio's are: run() does not return while one is pending.
  void park_locked(heap_node& n) {
    n.position = static_cast<std::uint32_t>(parked_.size()) | heap_node::parked_flag;
    parked_.push_back(&n);
  }

  // Makes room for one more parked wait, and takes the parked work if none is held yet, so that parking
  // cannot throw. Parking follows in the same locked section.
  void reserve_parked_one() {
    if (parked_.size() == parked_.capacity()) parked_.reserve(parked_.empty() ? 16 : parked_.size() * 2);
    if (!parked_work_) parked_work_ = std::make_unique<work_guard>(core_->context().get_executor());
  }

  void unpark_locked(heap_node& n) noexcept {
    const std::size_t i = n.position & ~heap_node::parked_flag;
    heap_node* last = parked_.back();
    parked_[i] = last;
    last->position = static_cast<std::uint32_t>(i) | heap_node::parked_flag;
    parked_.pop_back();
    n.position = heap_node::nowhere;
  }

  // The parked work is taken by reserve_parked_one(); let go of it with the last parked wait.
  void update_work_locked() noexcept {
    if (parked_waits_ == 0 && parked_work_) {
      // Let go only once the caller has posted its completions (see idle_work): were the work count to
      // reach zero first, the context would stop with the aborted completion still queued.
      idle_work_ = std::move(parked_work_);
    }
  }

  // The driver is armed exactly while some wait sits in the heap, at or before the top's key. It is re-armed
  // only when the top becomes earlier than what it is armed for; a later top is found by waking early.
  // During a batch nothing is armed: the batch re-arms once at its end (each arming is a timerfd_settime,
  // and the superseded wait an extra completion). Arming can fail (Asio allocates), so a call that places a
  // wait arms for it first (arm_for_locked), before anything changes; calls that only take waits out never
  // arm (disarm_if_idle_locked), so they cannot fail.

  // Arms for a wait about to be placed at `key`, so that the top after placing it is covered. Throws with
  // nothing changed (see asio_driver::arm).
  void arm_for_locked(time_point key) {
    if (!heap_.empty() && heap_.top().key < key) key = heap_.top().key;
    if (!firing_ && key < armed_at_) arm_locked(key);
  }

  // The generation is published only once the wait is in: a failed arm leaves the pending wait current. A
  // new wait that fires before it is published is not taken for a stale one (see on_driver_fired).
  void arm_locked(const time_point& at) {
    const std::uint64_t generation = driver_generation_.load(std::memory_order_relaxed) + 1;
    driver_.arm(at, driver_handler{this, generation});
    driver_generation_.store(generation, std::memory_order_relaxed);
    armed_at_ = at;
  }

  // Once no wait is in the heap, the driver's wait goes, so that run() can return. Never throws.
  void disarm_if_idle_locked() noexcept {
    if (firing_ || heap_waits_ != 0 || armed_at_ == time_point::max()) return;
    armed_at_ = time_point::max();
    driver_generation_.fetch_add(1, std::memory_order_relaxed);
    driver_.cancel();
  }

  // Fires every wait that is due, in deadline order, then re-arms for what is left.
  void on_driver_fired(std::uint64_t generation) {
    // A superseded wait (the driver was re-armed or disarmed since) returns without taking the lock; a wait
    // newer than the generation read here is being armed, and the lock waits for it.
    if (generation < driver_generation_.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(core_->mutex());
    if (generation != driver_generation_.load(std::memory_order_relaxed) || shut_down_) return;
    armed_at_ = time_point::max();

    // Re-arms even when a handler throws out of the batch (the exception leaves run(), as Asio's do).
    struct rearm {
      basic_timer_service& service;
      std::unique_lock<std::mutex>& lock;
      // The wait that fired returned its memory to the driver, so the re-arm finds it (see asio_driver);
      // should Asio's own timer queue fail to grow, run() is left with that exception, unless a handler's
      // already leaves it.
      ~rearm() noexcept(false) {
        if (!lock.owns_lock()) lock.lock();
        service.firing_ = false;
        try {
          if (service.heap_waits_ != 0) service.arm_locked(service.heap_.top().key);
        } catch (...) {
          if (std::uncaught_exceptions() == 0) throw;
        }
      }
    } guard{*this, lock};

    firing_ = true;
    const time_point now = Clock::now();
    // Bounded by what was pending on entry, so that waits started by the handlers of this batch, even due
    // ones, wait for the next wake-up rather than starve the context.
    std::size_t budget = heap_waits_;
    while (budget > 0 && !heap_.empty()) {
      const auto& top = heap_.top();
      if (now < top.key) break;
      heap_node& n = *top.node;
      if (!n.is_timer) {
        detail::sleep_op_base* op = detail::sleep_op_base::from_node(&n);
        heap_.remove(n);
        --heap_waits_;
        --budget;
        lock.unlock();
        invoke_unlocked(*op);
        lock.lock();
        continue;
      }
      implementation_type& t = *implementation_type::from_node(&n);
      if (t.ring.waiting == 0) {  // left behind by a cancel or reset
        heap_.remove(n);
        --lingering_;
        continue;
      }
      if (const time_point expiry = t.expiry(); top.key < expiry) {  // extended lazily: re-key now
        n.seq = t.ring.first_waiting()->seq;  // see resequence_locked
        heap_.rekey(n, expiry);
        continue;
      }
      wait_op& op = t.ring.fire_first();
      --heap_waits_;
      --budget;
      if (t.ring.waiting == 0) {
        heap_.remove(n);
      } else {
        resequence_locked(t);
      }
      lock.unlock();
      invoke_unlocked(op);
      lock.lock();
    }
  }

  // Runs a fired wait or sleep. One whose dispatch to its executor could not allocate is kept (see
  // complete_op) and placed again (refire) before the exception leaves run(): nothing is lost.
  template <typename Op>
  void invoke_unlocked(Op& op) {
    detail::completion_kept = false;
    try {
      op.complete(&op, *core_, detail::op_action::invoke, error_code());
    } catch (...) {
      if (std::exchange(detail::completion_kept, false)) refire(op);
      throw;
    }
  }

  // A sleep, or an entry (which fired: the deadline passed), completes as fired from the next drain.
  void refire(detail::sleep_op_base& op) noexcept { core_->requeue_fired(op); }

  // A timer wait waits again, first of its timer, so that it fires at the next wake-up and a cancel() in
  // between still aborts it; if one came already it completes as aborted. A deadline's entry, or a wait
  // whose timer cannot be placed again, completes as fired from the next drain.
  void refire(wait_op& op) noexcept {
    if (op.checked_at_run) {
      drain_request drain;
      bool placed = true;
      {
        std::lock_guard<std::mutex> lock(core_->mutex());
        if (op.next == nullptr)
          drain.needed = core_->defer_locked(op, detail::deferred::aborted);
        else
          placed = wait_again_locked(op);
      }
      drain.post(*core_);
      if (placed) return;
    }
    core_->requeue_fired(op);
  }

  bool wait_again_locked(wait_op& op) noexcept {
    wait_op** link = nullptr;
    detail::wait_ring& ring = detail::wait_ring::ring_of(op, link);
    implementation_type& t = timer_of(ring);
    if (t.expiry() == time_point::max()) return false;
    if (!t.node.in_heap()) {
      try {
        heap_.reserve_one();
      } catch (...) {
        return false;
      }
    }
    const bool was_idle = ring.waiting == 0;
    ring.unfire(link, op);
    ++heap_waits_;
    if (!t.node.in_heap()) {
      t.node.seq = op.seq;
      heap_.push(t.node, t.expiry());
    } else {
      if (was_idle) --lingering_;
      resequence_locked(t);
    }
    return true;
  }

  // Asio's rule: pending handlers are destroyed, not invoked. They are destroyed outside the lock, since a
  // handler's destructor may destroy a timer or start a wait (which is then destroyed too).
  void shutdown() override {
    std::vector<detail::sleep_op_base*> sleeps;
    std::vector<wait_op*> waits;
    {
      std::lock_guard<std::mutex> lock(core_->mutex());
      shut_down_ = true;
      auto collect = [&](heap_node& n) {
        n.position = heap_node::nowhere;
        if (!n.is_timer) {
          sleeps.push_back(detail::sleep_op_base::from_node(&n));
          return;
        }
        // Fired waits stay: their runners, queued on other executors, own them.
        implementation_type& t = *implementation_type::from_node(&n);
        detail::wait_ring& ring = t.ring;
        while (ring.waiting > 0) waits.push_back(&ring.take_first_waiting());
      };
      heap_.drain(collect);
      for (heap_node* n : parked_) collect(*n);
      parked_.clear();
      heap_waits_ = 0;
      parked_waits_ = 0;
      lingering_ = 0;
      parked_work_.reset();
      armed_at_ = time_point::max();
      driver_generation_.fetch_add(1, std::memory_order_relaxed);
      driver_.cancel();
    }
    for (detail::sleep_op_base* op : sleeps) op->complete(op, *core_, detail::op_action::destroy, error_code());
    for (wait_op* op : waits) op->complete(op, *core_, detail::op_action::destroy, error_code());
  }

  // Shared with fired waits still queued on other executors, which may outlive the service.
  std::shared_ptr<detail::service_core> core_;
  detail::deadline_heap<time_point> heap_;
  std::vector<heap_node*> parked_;
  std::size_t heap_waits_ = 0;    // waits whose timer or sleep is in the heap
  std::size_t parked_waits_ = 0;  // waits parked at time_point::max()
  std::size_t lingering_ = 0;     // timers left in the heap with no waits
  std::size_t capacity_ = heap_node::max_position;
  std::uint32_t next_seq_ = 0;
  bool shut_down_ = false;
  bool firing_ = false;  // the driver is running a batch: it re-arms when the batch ends
  std::unique_ptr<work_guard> parked_work_;  // held while waits are parked
  std::unique_ptr<work_guard> idle_work_;    // no longer needed; dropped by the caller after its posts
  typename detail::driver_for<Clock, WaitTraits>::type driver_;
  time_point armed_at_ = time_point::max();  // max: the driver is not armed
  std::atomic<std::uint64_t> driver_generation_{0};  // written under the lock; read first without it
};

template <typename Clock, typename WaitTraits>
asio::execution_context::id basic_timer_service<Clock, WaitTraits>::id;

// The service behind tock::timer and tock::async_sleep_for.
using timer_service = basic_timer_service<std::chrono::steady_clock>;

}  // namespace tock

#endif
