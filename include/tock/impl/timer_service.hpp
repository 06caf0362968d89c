// tock/impl/timer_service.hpp: the bodies of basic_timer_service's larger members (included by timer_service.hpp).
#ifndef TOCK_IMPL_TIMER_SERVICE_HPP
#define TOCK_IMPL_TIMER_SERVICE_HPP

namespace tock {

template <typename Clock, typename WaitTraits>
basic_timer_service<Clock, WaitTraits>::basic_timer_service(asio::io_context& ctx)
    : asio::execution_context::service(ctx), core_(std::make_shared<detail::service_core>(ctx)),
      driver_(*core_, queue_) {
  core_->set_owner(this);
}

template <typename Clock, typename WaitTraits>
basic_timer_service<Clock, WaitTraits>::~basic_timer_service() {
  core_->set_owner(nullptr);  // slots emitted from now on (of fired waits on other contexts) find no service
  detail::service_epoch.fetch_add(1, std::memory_order_acq_rel);
}

template <typename Clock, typename WaitTraits>
void basic_timer_service<Clock, WaitTraits>::place_locked(implementation_type& impl, wait_op& op,
                                                          bool /*cancellable*/) {
  queue_.reserve_wait(impl);
  if (impl.expiry() == time_point::max()) reserve_parked_work();
  driver_.arm_for_locked(queue_.wait_key(impl));
  queue_.link_wait(impl, op);
  // A wait that parks takes its timer out of the heap, which may leave it empty: the driver goes then.
  if (impl.expiry() == time_point::max()) driver_.disarm_if_idle_locked();
  core_->count_started_locked(queue_.pending());
  check_locked();
}

template <typename Clock, typename WaitTraits>
void basic_timer_service<Clock, WaitTraits>::place_locked(const sleep_time& t, sleep_entry& op, bool cancellable) {
  const time_point latest = detail::latest_time(t.at, t.slack);
  const std::int32_t lane = queue_.reserve_sleep(t.at, latest, t.span, t.slack);
  if (t.at == time_point::max()) reserve_parked_work();
  driver_.arm_for_locked(latest);
  queue_.push_sleep(op, t.at, latest, lane, cancellable);
  core_->count_started_locked(queue_.pending());
  check_locked();
}

template <typename Clock, typename WaitTraits>
timer_stats basic_timer_service<Clock, WaitTraits>::stats() const {
  std::lock_guard<detail::futex_mutex> lock(core_->mutex());
  std::uint64_t attached = 0, withdrawn = 0;  // deadlines' linked entries, counted without the lock
  queue_.links().read(attached, withdrawn);
  timer_stats s = core_->snapshot_locked(queue_.rekeys(), queue_.heap_waits() + queue_.parked_waits() + attached,
                                         lazy_extensions_.load(std::memory_order_relaxed));
  s.started += attached + withdrawn;
  s.withdrawn += withdrawn;
  s.peak_pending = std::max({s.peak_pending, s.pending, std::size_t(lock_free_peak_.load(std::memory_order_relaxed))});
  return s;
}

template <typename Clock, typename WaitTraits>
void basic_timer_service<Clock, WaitTraits>::destroy(implementation_type& impl) noexcept {
  detail::wait_op* left = nullptr;  // a deadline's withdrawn entry, let go of once unlocked
  {
    locked_section section(*this);
    section.detach_bound();
    take_waits_locked(section, impl, static_cast<std::size_t>(-1));
    queue_.remove_timer(impl);
    if (impl.ring.has_link) left = detail::deadline_node<time_point>::of(impl).release();
  }
  if (left != nullptr) unlink(*left);
}

// Inlined into the bound operation's initiation: out of line (as GCC 12 leaves it) it costs a bound request
// 26 more instructions (callgrind, timer_bench --workload=timeouts --system=tock_deadline --n=10k).
template <typename Clock, typename WaitTraits>
[[gnu::always_inline]] inline error_code basic_timer_service<Clock, WaitTraits>::attach(
    detail::deadline_node<time_point>& node, detail::wait_op& entry) {
  if (!entry.linkable) return wait_locked(node, entry);  // deadline_link.hpp, rule 7
  detail::wait_op* replaced = nullptr;                   // no read of node.ring here: rule 6
  const std::uint64_t was = queue_.links().attaching();
  if (!detail::link_count::may_attach_lock_free(was) || !node.link.try_attach(entry, replaced))
    return link_locked(node, node.link, entry);
  note_lock_free_peak(detail::link_count::attached_in(was) + 1);
  if (replaced != nullptr) unlink(*replaced);
  return error_code();
}

// Inlined into the bound operation's completion (as attach()); the rare locked part is not.
template <typename Clock, typename WaitTraits>
[[gnu::always_inline]] inline bool basic_timer_service<Clock, WaitTraits>::withdraw(detail::wait_op& entry) noexcept {
  if (!detail::withdraw(entry)) return false;
  bool wrapped = false;
  if (queue_.links().withdrawn(wrapped)) [[unlikely]]
    links_idle(wrapped);
  return true;
}

template <typename Clock, typename WaitTraits>
[[gnu::noinline]] void basic_timer_service<Clock, WaitTraits>::links_idle(bool wrapped) noexcept {
  locked_section section(*this);  // lets the driver go, and the count's covered mark, if nothing is left to fire
  if (wrapped) queue_.links().wrapped();
}

template <typename Clock, typename WaitTraits>
template <template <typename, typename> class Op, typename Where, typename Handler, typename IoExecutor>
void basic_timer_service<Clock, WaitTraits>::start(Where& where, Handler&& handler, const IoExecutor& io_ex) {
  using handler_type = std::decay_t<Handler>;
  const auto ex = asio::get_associated_executor(handler, io_ex);
  if (runs_in_context(ex)) {
    using op = Op<handler_type, detail::run_in_context>;
    start_op(where, detail::allocate_op<op>(std::forward<Handler>(handler), detail::run_in_context{}));
  } else {
    auto work = asio::prefer(ex, asio::execution::outstanding_work.tracked);
    using target = detail::run_on_executor<decltype(work)>;
    using op = Op<handler_type, target>;
    start_op(where, detail::allocate_op<op>(std::forward<Handler>(handler), target{std::move(work)}));
  }
}

template <typename Clock, typename WaitTraits>
template <typename Where, typename Op>
void basic_timer_service<Clock, WaitTraits>::start_op(Where& where, Op* op) {
  using base = std::conditional_t<std::is_base_of_v<wait_op, Op>, wait_op, sleep_entry>;
  detail::unstarted_op<base> guard{op, *core_};
  auto slot = asio::get_associated_cancellation_slot(op->handler());
  const bool cancellable = slot.is_connected();
  if (cancellable) slot.template emplace<detail::slot_cancellation<base>>(core_.get(), op);

  std::unique_lock<detail::futex_mutex> lock(core_->mutex());
  if (shut_down_) return;  // Asio's rule after shutdown: the handler is destroyed (unlocked), never invoked
  if (past_capacity_locked(where)) {
    // Refused: it completes with capacity_exceeded from the context.
    const bool post =
        core_->defer_locked(static_cast<base&>(*std::exchange(guard.op, nullptr)), detail::deferred::capacity_exceeded);
    lock.unlock();
    if (post) core_->post_drain();
    return;
  }
  place_locked(where, static_cast<base&>(*op), cancellable);
  guard.op = nullptr;
}

template <typename Clock, typename WaitTraits>
error_code basic_timer_service<Clock, WaitTraits>::link_locked(implementation_type& impl, detail::deadline_link& link,
                                                               wait_op& entry) {
  wait_op* replaced = nullptr;
  error_code ec;
  {
    locked_section section(*this);  // disarms the driver if the count went back to zero
    struct uncount {
      detail::link_count& links;
      bool armed = true;
      ~uncount() {
        if (armed) links.not_attached();
      }
    } counted{queue_.links()};
    if (shut_down_) {
      ec = make_error_code(error::shut_down);
    } else if (link.attached()) {
      ec = attach_locked(impl, entry);  // a second operation bound at once
    } else if (queue_.link_past_capacity(impl)) {
      ec = core_->refused_locked();
    } else {
      queue_.reserve_link(impl);
      driver_.arm_for_locked(queue_.link_arming_key(impl));
      queue_.place_for_link(impl);
      link.attach_locked(entry, replaced);
      counted.armed = false;
      queue_.links().cover();  // the driver covers the top: others may attach without the lock (rule 4)
      timer_stats& stats = core_->stats_locked();
      stats.peak_pending = std::max(stats.peak_pending, queue_.pending());
    }
  }
  if (replaced != nullptr) unlink(*replaced);
  return ec;
}

template <typename Clock, typename WaitTraits>
std::size_t basic_timer_service<Clock, WaitTraits>::take_waits_locked(locked_section& section,
                                                                      implementation_type& impl,
                                                                      std::size_t limit) noexcept {
  std::size_t taken = 0;
  if (impl.ring.has_link && limit > 0) {
    detail::deadline_link::inspection link(detail::deadline_node<time_point>::of(impl));
    if (wait_op* op = link.claim()) {
      queue_.links().claimed();
      ++core_->stats_locked().started;  // a linked entry's start was not counted (stats())
      section.defer(*op);
      ++taken;
      --limit;
    }
  }
  // A bound entry that fired and waits for its cancellation to run on a foreign executor is detached when its
  // deadline goes away (deadline_link.hpp, rule 8): timed_op::settle reads the mark once it gets there.
  auto fired = [&](wait_op& op) {
    if (op.bound && section.detaching())
      detail::link_state_of(op).store(std::uint8_t(detail::link_state::detached), std::memory_order_relaxed);
  };
  return taken + queue_.take_waits(
                     impl, limit, [&](wait_op& op) { section.defer(op); }, fired);
}

template <typename Clock, typename WaitTraits>
void basic_timer_service<Clock, WaitTraits>::move_expiry_locked(implementation_type& impl, const time_point& t) {
  locked_section section(*this);
  queue_.reserve_move(impl, t);
  if (t == time_point::max() && impl.ring.waiting > 0) reserve_parked_work();
  driver_.arm_for_locked(queue_.move_key(impl, t));
  queue_.move_expiry(impl, t);
}

template <typename Clock, typename WaitTraits>
void basic_timer_service<Clock, WaitTraits>::shutdown() {
  std::vector<sleep_entry*> sleeps;
  std::vector<wait_op*> waits;
  {
    std::lock_guard<detail::futex_mutex> lock(core_->mutex());
    shut_down_ = true;
    queue_.clear([&](sleep_entry& op) { sleeps.push_back(&op); }, [&](wait_op& op) { waits.push_back(&op); });
    parked_work_.reset();
    driver_.stop_locked();
  }
  for (sleep_entry* op : sleeps) op->complete(op, *core_, detail::op_action::shutdown, error_code());
  for (wait_op* op : waits) op->complete(op, *core_, detail::op_action::shutdown, error_code());
}
}  // namespace tock

#endif
