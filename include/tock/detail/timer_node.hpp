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
// The expiry is atomic so that a deadline can be moved later without the service's lock. Only the timer's
// owner writes it (the service reads it), so its values only grow between locked changes: a later expiry
// can never fall below a key the driver took from an earlier one, and the store alone keeps key <= expiry.
template <typename TimePoint>
struct timer_node {
  heap_node node;  // first member: a heap_node* of a timer converts back with from_node()
  wait_ring ring;
  std::atomic<TimePoint> expiry_{TimePoint()};

  timer_node() noexcept { node.is_timer = 1; }

  TimePoint expiry() const noexcept { return expiry_.load(std::memory_order_relaxed); }
  void set_expiry(const TimePoint& t) noexcept { expiry_.store(t, std::memory_order_relaxed); }

  // The lock-free move: true if `t` could be stored without touching the heap, i.e. it is not earlier than
  // the expiry (which is at or after the key, if the timer is in the heap) and not max() (which parks).
  // A wait that starts later, or the driver when the old key surfaces, picks the new expiry up.
  bool try_move_later(const TimePoint& t) noexcept {
    if (t == TimePoint::max() || t < expiry_.load(std::memory_order_relaxed)) return false;
    expiry_.store(t, std::memory_order_relaxed);
    return true;
  }
  timer_node(const timer_node&) = delete;
  timer_node& operator=(const timer_node&) = delete;

  static timer_node* from_node(heap_node* n) noexcept { return reinterpret_cast<timer_node*>(n); }
};

}  // namespace tock::detail

#endif
