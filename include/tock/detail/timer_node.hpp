// tock/detail/timer_node.hpp: what a timer object holds of the service's state.
#ifndef TOCK_DETAIL_TIMER_NODE_HPP
#define TOCK_DETAIL_TIMER_NODE_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/wait_op.hpp>

namespace tock::detail {

// A timer's entry in its service: one heap slot however many waits it has, the ring of those waits, and its
// expiry. The heap key may be earlier than `expiry` (a lazy extension); it is never later.
template <typename TimePoint>
struct timer_node {
  heap_node node;  // first member: a heap_node* of a timer converts back with from_node()
  wait_ring ring;
  TimePoint expiry{};

  timer_node() noexcept { node.is_timer = 1; }
  timer_node(const timer_node&) = delete;
  timer_node& operator=(const timer_node&) = delete;

  static timer_node* from_node(heap_node* n) noexcept { return reinterpret_cast<timer_node*>(n); }
};

}  // namespace tock::detail

#endif
