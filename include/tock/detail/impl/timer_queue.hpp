// tock/detail/impl/timer_queue.hpp: the bodies of timer_queue's larger members (included by timer_queue.hpp).
#ifndef TOCK_DETAIL_IMPL_TIMER_QUEUE_HPP
#define TOCK_DETAIL_IMPL_TIMER_QUEUE_HPP

namespace tock::detail {

template <typename TimePoint>
void timer_queue<TimePoint>::link_wait(timer& t, wait_op& op) noexcept {
  const bool first = t.ring.waiting == 0;
  op.seq = next_seq_++;
  t.ring.push_back(op);
  if (t.expiry() == TimePoint::max()) {
    if (t.node.in_heap()) {
      heap_.remove(t.node);
      --lingering_;
    }
    if (!t.node.parked()) park(t);
    ++parked_waits_;
    return;
  }
  ++heap_waits_;
  // A timer ranks among equal deadlines by its oldest waiting wait (see resequence).
  if (!first) return;
  const TimePoint latest = t.latest();
  if (t.node.in_heap()) {
    --lingering_;
    if (heap_.key_of(t.node) < latest) return;  // a lazy key stays (wait_key)
    rekey_at_latest(t);
  } else {
    t.node.seq = op.seq;
    push_timer(t, latest);
  }
}

template <typename TimePoint>
bool timer_queue<TimePoint>::unschedule(sleep_entry& op) noexcept {
  assert(op.node.position != heap_node::untracked);
  if (op.node.parked()) {
    parked_.remove(op.node);
    --parked_waits_;
  } else if (op.node.in_heap()) {
    lanes_type::in_lane(op) ? lanes_.remove(op, heap_) : heap_.remove(op.node);
    --heap_waits_;
  } else {
    return false;
  }
  return true;
}

template <typename TimePoint>
template <typename Defer, typename Fired>
std::size_t timer_queue<TimePoint>::take_waits(timer& t, std::size_t limit, Defer&& defer, Fired&& fired) noexcept {
  std::size_t taken = 0, waiting_taken = 0;
  while (taken < limit && !t.ring.empty()) {
    bool was_due = false;
    wait_op& op = t.ring.take_front(was_due);
    if (!was_due) {
      defer(op);
      ++waiting_taken;
    } else {
      fired(op);
    }
    ++taken;
  }
  if (waiting_taken > 0) waits_left(t, waiting_taken);
  return taken;
}

template <typename TimePoint>
typename timer_queue<TimePoint>::unlinked timer_queue<TimePoint>::detach(wait_op& op) noexcept {
  if (op.next == nullptr || is_deferred(op)) return unlinked::nothing;
  wait_op** link = nullptr;
  wait_ring& ring = wait_ring::ring_of(op, link);
  const bool was_due = ring.index_of(op) < ring.due;
  wait_ring::unlink(link, op);
  if (was_due) {
    --ring.due;
    return unlinked::due;
  }
  --ring.waiting;
  waits_left(timer::of_ring(ring), 1);
  return unlinked::waiting;
}

template <typename TimePoint>
void timer_queue<TimePoint>::move_expiry(timer& t, const TimePoint& at) noexcept {
  t.set_expiry(at);
  const TimePoint latest = t.latest();
  const std::size_t n = t.ring.waiting;
  if (n == 0 && !t.ring.has_link) return;
  if (at == TimePoint::max()) {
    if (!t.node.in_heap()) return;
    heap_.remove(t.node);
    heap_waits_ -= n;
    lingering_ -= n == 0;
    if (n == 0 && may_leave(t)) return;
    park(t);
    parked_waits_ += n;
  } else if (t.node.parked()) {
    parked_.remove(t.node);
    parked_waits_ -= n;
    if (n == 0 && may_leave(t)) return;
    t.node.seq = n > 0 ? t.ring.first_waiting()->seq : next_seq_++;
    push_timer(t, latest);
    heap_waits_ += n;
    lingering_ += n == 0;
  } else if (t.node.in_heap() && !(heap_.key_of(t.node) < latest)) {
    rekey_at_latest(t);
  }
}

template <typename TimePoint>
[[gnu::always_inline]] inline bool timer_queue<TimePoint>::settle(const TimePoint& now) noexcept {
  while (!heap_.empty()) {
    const auto& top = heap_.top();
    heap_node& n = *top.node();
    const TimePoint key = top.key;
    if (!n.is_timer) return !(now < sleep_deadline(*sleep_entry::from_node(&n), key));
    timer& t = *timer::from_node(&n);
    if (t.ring.waiting == 0) {  // left behind by a cancel or reset, or fired (rule 4), unless its link holds one
      if (now < key) {
        if (!t.ring.has_link || !link::attached(t)) return false;
      } else if (may_leave(t)) {
        heap_.remove(n);
        --lingering_;
        continue;
      }
    }
    if (const TimePoint latest = t.latest(); key < latest) {  // extended lazily
      if (now < key) return false;
      rekey_at_latest(t);
      continue;
    }
    return !(now < t.expiry());
  }
  return false;
}

template <typename TimePoint>
typename timer_queue<TimePoint>::due timer_queue<TimePoint>::pop_due(const TimePoint& now) noexcept {
  while (settle(now)) {
    const auto& top = heap_.top();
    heap_node& n = *top.node();
    if (!n.is_timer) {
      sleep_entry* op = sleep_entry::from_node(&n);
      const TimePoint at = sleep_deadline(*op, top.key);
      lanes_type::in_lane(*op) ? lanes_.remove(*op, heap_) : heap_.pop();  // tracked or not
      --heap_waits_;
      return {op, nullptr, at};
    }
    timer& t = *timer::from_node(&n);
    const TimePoint at = t.expiry(), key = top.key;
    if (t.ring.has_link) {
      deadline_link::inspection held(link::of(t));
      if (wait_op* op = held.claim()) {
        links_.claimed();
        if (op->checked_at_run) {  // deadline_link.hpp, rule 8
          link_state_of(*op).store(std::uint8_t(link_state::none), std::memory_order_relaxed);
          t.ring.push_due(*op);
        }
        if (t.ring.waiting == 0 && now < key) {  // fired early (slack), as below
          heap_.remove(n);
          --lingering_;
          held.unpin();
        }
        return {nullptr, op, at, true};
      }
    }
    if (t.ring.waiting == 0) continue;  // its link's entry was withdrawn since settle(): it is left behind
    wait_op& op = t.ring.fire_first();
    --heap_waits_;
    if (t.ring.waiting > 0)
      resequence(t);
    else if (now < key && may_leave(t))  // fired early (slack): its key would wake the driver for nothing
      heap_.remove(n);
    else
      ++lingering_;  // rule 4: a wait from its handler re-keys it in place; settle() drops it otherwise
    return {nullptr, &op, at};
  }
  return {};
}

template <typename TimePoint>
bool timer_queue<TimePoint>::wait_again(wait_op& op) noexcept {
  wait_op** link = nullptr;
  wait_ring& ring = wait_ring::ring_of(op, link);
  timer& t = timer::of_ring(ring);
  if (t.expiry() == TimePoint::max() || (!t.node.in_heap() && !heap_.try_reserve_one())) return false;
  const bool was_idle = ring.waiting == 0;
  ring.unfire(link, op);
  ++heap_waits_;
  if (!t.node.in_heap()) {
    t.node.seq = op.seq;
    push_timer(t, t.latest());
    return true;
  }
  if (was_idle) --lingering_;
  if (t.latest() < heap_.key_of(t.node))  // its expiry moved earlier while it had no waiting wait (rule 1)
    rekey_at_latest(t);
  else
    resequence(t);
  return true;
}

template <typename TimePoint>
template <typename OnSleep, typename OnWait>
void timer_queue<TimePoint>::clear(OnSleep&& on_sleep, OnWait&& on_wait) noexcept {
  auto collect = [&](heap_node& n) {
    n.position = heap_node::nowhere;
    if (!n.is_timer) {
      on_sleep(*sleep_entry::from_node(&n));
      return;
    }
    timer& t = *timer::from_node(&n);
    while (t.ring.waiting > 0) on_wait(t.ring.take_first_waiting());
    if (!t.ring.has_link) return;
    deadline_link::inspection held(link::of(t));
    if (wait_op* op = held.claim()) {
      links_.claimed();
      on_wait(*op);
    }
    held.unpin();
  };
  heap_.drain(collect);
  lanes_.drain([&](sleep_entry& op) { collect(op.node); });
  parked_.drain(collect);
  heap_waits_ = 0;
  parked_waits_ = 0;
  lingering_ = 0;
}

template <typename TimePoint>
bool timer_queue<TimePoint>::valid() const {
  if (!heap_.valid()) return false;
  std::size_t in_heap = 0, lingering = 0, parked = 0;
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    const heap_node* n = heap_.at(i).node();
    timer* t = n->is_timer ? timer::from_node(const_cast<heap_node*>(n)) : nullptr;
    // A timer with waits is keyed no later than its latest time; one without may linger with any key, but
    // a deadline's (deadline_link.hpp, rule 3), whose link is pinned.
    if (t && (t->ring.waiting > 0 || t->ring.has_link) &&
        (heap_.at(i).key > t->latest() || t->expiry() == TimePoint::max() || !link::pinned(*t)))
      return false;
    in_heap += t ? t->ring.waiting : 1;
    lingering += t && t->ring.waiting == 0;
  }
  if (!parked_.valid()) return false;
  for (heap_node* n : parked_.nodes()) {
    if (!n->is_timer) {
      ++parked;
      continue;
    }
    timer& t = *timer::from_node(n);
    if (!link::pinned(t)) return false;
    parked += t.ring.waiting;
  }
  return lanes_.valid(heap_) && in_heap + lanes_.queued() == heap_waits_ && parked == parked_waits_ &&
         lingering == lingering_;
}

template <typename TimePoint>
void timer_queue<TimePoint>::waits_left(timer& t, std::size_t n) noexcept {
  if (t.node.in_heap()) {
    heap_waits_ -= n;
    if (t.ring.waiting > 0)
      resequence(t);
    else
      ++lingering_;
  } else if (t.node.parked()) {
    parked_waits_ -= n;
    if (t.ring.waiting == 0 && may_leave(t)) parked_.remove(t.node);
  }
}
}  // namespace tock::detail

#endif
