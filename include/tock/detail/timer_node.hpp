// tock/detail/timer_node.hpp: what a timer object holds of the service's state.
#ifndef TOCK_DETAIL_TIMER_NODE_HPP
#define TOCK_DETAIL_TIMER_NODE_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/time_arith.hpp>
#include <tock/detail/wait_op.hpp>

#include <atomic>
#include <cstddef>
#include <type_traits>

namespace tock::detail {

// Lazy extension: the ground rules, written once here; timer_queue.hpp, timer_service.hpp and
// docs/design.md rely on them.
//
// 0. Slack: a timer's waits may fire anywhere in [expiry, expiry + slack] (its *latest* time), so the heap is
//    keyed by latest times and the driver armed at the top's; a wake-up fires every entry at the top whose
//    expiry has passed (timer_queue::settle). With slack 0, latest = expiry and everything below reads as
//    without slack. Linux hrtimers key their tree the same way (soft and hard expiry).
// 1. A timer's heap key is never later than its latest time (key <= expiry + slack). Moving the expiry later
//    only stores it: the heap keeps the old, earlier key. When that key surfaces, the driver wakes early,
//    sees key < latest, and re-keys the node at its latest time (timer_queue::settle). An idle timeout
//    pushed back on every read costs O(1) per push and one O(log N) sift per timeout period. Moving it
//    earlier sifts at once.
// 2. A key earlier than the latest time ranks nothing but its own surfacing: such a timer is re-sequenced (takes
//    its oldest waiting wait's sequence number) when it surfaces, not when its waits change.
// 3. The later move takes no lock (try_move_later): only the timer's owner writes the expiry (the object is
//    not shared between threads without synchronisation, as with Asio's objects) and the service only reads
//    it, so between two locked changes the stored expiries only grow; a key the driver took from any of
//    them is never later than the latest time that follows, and rule 1 holds without the lock. A relaxed
//    load and store suffice (no fence): a move that races with the firing of the same timer is ordered
//    after it. Anything else (earlier, to or from max(), which parks) takes the lock.
// 4. A timer left in the heap without waits (a cancel or reset, or its last wait fired) keeps its slot and
//    any key until it surfaces or its next wait starts; it does not count against the service's capacity.
//    A timer waited on again from its own handler is thus re-keyed in place (one sift), not removed and
//    pushed back.
// 5. The slack changes only under the lock (timer_queue::set_slack), which re-keys a timer whose key would
//    pass its new latest time.

// The latest time of an entry due at `at` with `slack` >= 0 (rule 0): never max() unless `at` is, as max()
// means "never fires".
template <typename TimePoint>
TimePoint latest_time(const TimePoint& at, const typename TimePoint::duration& slack) noexcept {
  if (slack == TimePoint::duration::zero() || at == TimePoint::max()) return at;
  const TimePoint latest = saturating_add(at, slack);
  return latest == TimePoint::max() ? TimePoint::max() - typename TimePoint::duration(1) : latest;
}

// A timer's entry in its service: one heap slot however many waits it has, the ring of those waits, its
// expiry (atomic, for rule 3) and its slack.
template <typename TimePoint>
struct timer_node {
  using duration = typename TimePoint::duration;

  // First, so that an owner keeping its service pointer just before this timer_node (timer_object) touches
  // one cache line for the lock-free move (rule 3), the per-read cost of an idle timeout.
  std::atomic<TimePoint> expiry_{TimePoint()};
  heap_node node;  // a heap_node* of a timer converts back with from_node()
  wait_ring ring;
  duration slack{};  // rules 0 and 5

  timer_node() noexcept { node.is_timer = 1; }

  TimePoint expiry() const noexcept { return expiry_.load(std::memory_order_relaxed); }
  TimePoint latest() const noexcept { return latest_time(expiry(), slack); }
  void set_expiry(const TimePoint& t) noexcept { expiry_.store(t, std::memory_order_relaxed); }

  // The lock-free move (rule 3): true if `t` could be stored without touching the heap, i.e. it is not
  // earlier than the expiry and not max(). A wait that starts later, or the driver when the old key
  // surfaces, picks the new expiry up.
  bool try_move_later(const TimePoint& t) noexcept {
    if (t == TimePoint::max() || t < expiry_.load(std::memory_order_relaxed)) return false;
    expiry_.store(t, std::memory_order_relaxed);
    return true;
  }
  timer_node(const timer_node&) = delete;
  timer_node& operator=(const timer_node&) = delete;

  // from_node and of_ring find the timer from a member (offsetof needs a standard-layout timer_node).
  static timer_node* from_node(heap_node* n) noexcept {
    static_assert(std::is_standard_layout_v<timer_node>, "tock: the clock's time_point must be standard-layout");
    return reinterpret_cast<timer_node*>(reinterpret_cast<char*>(n) - offsetof(timer_node, node));
  }
  static timer_node& of_ring(wait_ring& r) noexcept {
    return *reinterpret_cast<timer_node*>(reinterpret_cast<char*>(&r) - offsetof(timer_node, ring));
  }
};

}  // namespace tock::detail

#endif
