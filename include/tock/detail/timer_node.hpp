// tock/detail/timer_node.hpp: what a timer object holds of the service's state.
#ifndef TOCK_DETAIL_TIMER_NODE_HPP
#define TOCK_DETAIL_TIMER_NODE_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/wait_op.hpp>

#include <atomic>

namespace tock::detail {

// A timer's entry in its service: one heap slot however many waits it has, the ring of those waits, and its
// expiry. The heap key may be earlier than the expiry (a lazy extension); it is never later.
//
// The expiry and the `lazy_floor` are atomics so that a deadline can be moved later without the service's
// lock: while the timer sits in the heap with waits, `lazy_floor` is its heap key, and any new expiry at or
// after it needs nothing but the store (the driver re-keys when the old key surfaces). Otherwise the floor is
// time_point::max() and moves take the locked path. Both are written under the lock except that store.
template <typename TimePoint>
struct timer_node {
  heap_node node;  // first member: a heap_node* of a timer converts back with from_node()
  wait_ring ring;
  std::atomic<TimePoint> expiry_{TimePoint()};
  std::atomic<TimePoint> lazy_floor{TimePoint::max()};

  timer_node() noexcept { node.is_timer = 1; }

  TimePoint expiry() const noexcept { return expiry_.load(std::memory_order_relaxed); }
  void set_expiry(const TimePoint& t) noexcept { expiry_.store(t, std::memory_order_relaxed); }

  // The lock-free move: true if `t` could be stored without touching the heap. The driver may raise the floor
  // (re-keying the timer to the expiry it read) between our check and our store; so the store is followed by
  // a second look at the floor, and the driver re-reads the expiry after raising it (both sequentially
  // consistent): one of the two sees the other, and a move that fell below the new key is redone under the
  // lock (false) or picked up by the driver.
  bool try_move_later(const TimePoint& t) noexcept {
    if (t == TimePoint::max() || t < lazy_floor.load(std::memory_order_seq_cst)) return false;
    expiry_.store(t, std::memory_order_seq_cst);
    return !(t < lazy_floor.load(std::memory_order_seq_cst));
  }
  timer_node(const timer_node&) = delete;
  timer_node& operator=(const timer_node&) = delete;

  static timer_node* from_node(heap_node* n) noexcept { return reinterpret_cast<timer_node*>(n); }
};

}  // namespace tock::detail

#endif
