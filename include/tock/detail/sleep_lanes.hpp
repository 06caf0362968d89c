// tock/detail/sleep_lanes.hpp: same-duration lanes: sleeps of a repeated duration kept in FIFO order, of which
// only the oldest sits in the heap. A pure data structure; timer_queue.hpp owns one and keeps its heads in the heap.
#ifndef TOCK_DETAIL_SLEEP_LANES_HPP
#define TOCK_DETAIL_SLEEP_LANES_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/wait_op.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tock::detail {

// The ground rules of lanes, written once here; timer_queue.hpp relies on them.
//
// 1. Why: in a server almost every timeout is `now + d` for a few distinct `d`, so sleeps of one duration
//    arrive in deadline order and a FIFO of them is already sorted (Netty's and Kafka's wheels exploit the
//    same fact with a tick; a lane keeps exact deadlines). Appending is O(1), withdrawing O(1), and the heap
//    holds one entry per lane instead of one per sleep.
// 2. Which sleeps: one started relative to now (async_sleep_for, tock::timeout(d)), which tells its duration
//    (its *span*). A lane serves one (span, slack). A span gets a lane when it repeats: when it is among the
//    last `history` spans that went to the heap, and one of the `max_lanes` lanes is unused or empty. A lane
//    is never taken from its span while it holds sleeps.
// 3. Order: a sleep joins its lane only if its key is not earlier than the lane's last key (keys come from
//    Clock::now() read before the lock, so threads may race, and a clock may step); else it goes to the heap.
//    Within a lane, keys never decrease and start order (seq) increases, so the lane's oldest is its first in
//    the heap's order (key, then seq), and only it needs to be in the heap.
// 4. Where things are: the lane's oldest (its *head*) is in the heap, its node.position a heap position.
//    Every other sleep of the lane has its slot index as node.position. Every sleep of a lane has
//    `slack = -1 - lane id` (a sleep's slack is otherwise >= 0): the lane keeps the slack, and a sleep's
//    deadline is its key less it. So a sleep whose key latest_time() clamped short of max() (a slack too
//    large to add) has no lane: key - slack would be earlier than its deadline.
// 5. Withdrawing a sleep that is not the head leaves a hole (a null slot) in O(1); holes at the front are
//    skipped when the head leaves. A full lane closes its holes in place if at least half of it is holes,
//    else doubles: each sleep is moved O(1) times on average.
template <typename TimePoint>
class sleep_lanes {
 public:
  using duration = typename TimePoint::duration;
  static constexpr std::size_t max_lanes = 16;
  static constexpr std::size_t history = 4;
  static constexpr std::int32_t none = -1;

  struct slot {
    TimePoint key;
    sleep_entry* op;  // null: a hole (withdrawn)
  };

  class lane {
    static constexpr std::size_t max_ring = std::size_t(1) << 30;

   public:
    bool empty() const noexcept { return live_ == 0; }
    std::uint32_t size() const noexcept { return live_; }
    const duration& span() const noexcept { return span_; }
    const duration& slack() const noexcept { return slack_; }
    sleep_entry* head() const noexcept { return live_ ? ring_[front_ & mask()].op : nullptr; }
    const TimePoint& head_key() const noexcept { return ring_[front_ & mask()].key; }

    // Rule 3: whether a sleep at `key` keeps the lane sorted (and the lane can still grow: slot indices are
    // positions, below heap_node::parked_flag).
    bool accepts(const TimePoint& key) const noexcept {
      if (live_ == 0) return true;
      if (ring_.size() >= max_ring && back_ - front_ == ring_.size() && live_ > ring_.size() / 2) return false;
      return !(key < ring_[(back_ - 1) & mask()].key);
    }

    // Makes room so that push() cannot throw (rule 5). Throws std::bad_alloc with nothing changed.
    void reserve_one() {
      if (ring_.empty()) {
        ring_.resize(64);
        return;
      }
      if (back_ - front_ < ring_.size() || live_ <= ring_.size() / 2) return;
      std::vector<slot> bigger(ring_.size() * 2);
      std::uint32_t n = 0;
      for (std::uint32_t i = front_; i != back_; ++i)
        if (slot& s = ring_[i & mask()]; s.op) bigger[n++] = s;
      ring_.swap(bigger);
      renumber(0, n);
    }

    // Appends a sleep (after reserve_one() and accepts()). True if it is the new head, which goes in the heap.
    bool push(sleep_entry& op, const TimePoint& key, std::int64_t tag) noexcept {
      if (back_ - front_ == ring_.size()) compact();
      const std::uint32_t at = back_++ & mask();
      ring_[at] = slot{key, &op};
      op.slack = tag;
      if (live_++ == 0) return true;
      op.node.position = at;
      return false;
    }

    // Takes out a sleep that is not the head (rule 5). O(1).
    void withdraw(sleep_entry& op) noexcept {
      ring_[op.node.position].op = nullptr;
      --live_;
    }

    // Takes out the head; returns the next one (to take its place in the heap), or null. O(holes skipped).
    sleep_entry* pop_head() noexcept {
      ++front_;
      if (--live_ == 0) {
        front_ = back_ = 0;
        return nullptr;
      }
      while (!ring_[front_ & mask()].op) ++front_;
      return ring_[front_ & mask()].op;
    }

    // A lane given to another span: it is empty, and keeps its memory.
    void assign(const duration& span, const duration& slack) noexcept {
      span_ = span;
      slack_ = slack;
    }

    // Every sleep but the head, for shutdown; leaves the lane empty.
    template <typename F>
    void drain(F&& f) noexcept {
      if (live_ > 0)
        for (std::uint32_t i = front_ + 1; i != back_; ++i)
          if (sleep_entry* op = ring_[i & mask()].op) f(*op);
      front_ = back_ = live_ = 0;
    }

    // Rules 3 and 4, for tests. `heap_key` is the head's key in the heap.
    bool valid(std::int64_t tag, const TimePoint* heap_key) const noexcept {
      if ((live_ == 0) != (heap_key == nullptr)) return false;
      std::uint32_t live = 0;
      for (std::uint32_t i = front_; i != back_; ++i) {
        const slot& s = ring_[i & mask()];
        if (i != front_ && s.key < ring_[(i - 1) & mask()].key) return false;
        if (!s.op) continue;
        if (s.op->slack != tag || (i != front_ && s.op->node.position != (i & mask()))) return false;
        ++live;
      }
      return live == live_ &&
             (live_ == 0 || (ring_[front_ & mask()].op && !(*heap_key < head_key()) && !(head_key() < *heap_key)));
    }

   private:
    std::uint32_t mask() const noexcept { return static_cast<std::uint32_t>(ring_.size() - 1); }

    // Closes the holes in place (rule 5); the head stays where it is.
    void compact() noexcept {
      std::uint32_t to = front_;
      for (std::uint32_t i = front_; i != back_; ++i)
        if (slot& s = ring_[i & mask()]; s.op) ring_[to++ & mask()] = s;
      renumber(front_, to);
    }

    // Slots [from, to) hold the lane in order: set the positions of all but the head.
    void renumber(std::uint32_t from, std::uint32_t to) noexcept {
      front_ = from;
      back_ = to;
      for (std::uint32_t i = from + 1; i != to; ++i) ring_[i & mask()].op->node.position = i & mask();
    }

    std::vector<slot> ring_;  // a power of two in size; slots [front_, back_) modulo that size
    std::uint32_t front_ = 0, back_ = 0, live_ = 0;
    duration span_{}, slack_{};
  };

  // Rule 2: the lane a sleep of `span` and `slack` at `key` joins, or none (the heap). Claims a lane for a span
  // that repeats. The lane then needs lane(i).reserve_one(). O(max_lanes + history).
  std::int32_t choose(const duration& span, const duration& slack, const TimePoint& key) {
    if (span <= duration::zero()) return none;
    std::int32_t free = none;
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      lane& l = lanes_[i];
      if (l.span() == span && l.slack() == slack) return l.accepts(key) ? static_cast<std::int32_t>(i) : none;
      if (free == none && l.empty()) free = static_cast<std::int32_t>(i);
    }
    bool repeated = false;
    for (const auto& r : recent_) repeated |= r.span == span && r.slack == slack;
    if (!repeated) {
      recent_[next_recent_++ % history] = {span, slack};
      return none;
    }
    if (free == none) {
      if (lanes_.size() == max_lanes) return none;
      if (lanes_.capacity() == 0) lanes_.reserve(max_lanes);
      lanes_.emplace_back();
      free = static_cast<std::int32_t>(lanes_.size() - 1);
    }
    lanes_[free].assign(span, slack);
    return free;
  }

  lane& at(std::int32_t i) noexcept { return lanes_[static_cast<std::size_t>(i)]; }
  std::size_t queued() const noexcept { return queued_; }  // sleeps behind their lanes' heads: not in the heap

  // Appends a sleep to lane `i` (chosen, then reserved); a new head goes in `heap`. O(1), or O(log N) for a head.
  template <typename Heap>
  void push(std::int32_t i, sleep_entry& op, const TimePoint& key, Heap& heap) noexcept {
    if (at(i).push(op, key, tag_of(i)))
      heap.push(op.node, key);
    else
      ++queued_;
  }

  // Takes a sleep of a lane out; the lane's next sleep takes a leaving head's place in `heap`. O(1) behind the
  // head, O(log N) for the head.
  template <typename Heap>
  void remove(sleep_entry& op, Heap& heap) noexcept {
    lane& l = at(id_of(op));
    if (l.head() != &op) {
      l.withdraw(op);
      op.node.position = heap_node::nowhere;
    } else if (sleep_entry* next = l.pop_head()) {
      heap.replace(op.node, next->node, l.head_key());
    } else {
      heap.remove(op.node);
      return;
    }
    --queued_;
  }

  // A lane's sleep is due at its key less its lane's slack (rule 4).
  TimePoint deadline(const sleep_entry& op, const TimePoint& key) const noexcept {
    return key - lanes_[static_cast<std::size_t>(id_of(op))].slack();
  }

  // Every sleep behind a head, for shutdown (the heads are in the heap); leaves the lanes empty.
  template <typename F>
  void drain(F&& f) noexcept {
    for (lane& l : lanes_) l.drain(f);
    queued_ = 0;
  }

  // Rules 3 and 4 and the count, against the heap, for tests. O(N).
  template <typename Heap>
  bool valid(const Heap& heap) const noexcept {
    std::size_t queued = 0;
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      const lane& l = lanes_[i];
      const sleep_entry* head = l.head();
      if (head && !head->node.in_heap()) return false;
      if (!l.valid(tag_of(static_cast<std::int32_t>(i)), head ? &heap.key_of(head->node) : nullptr)) return false;
      queued += l.size() - (head != nullptr);
    }
    return queued == queued_;
  }

  // The slack word of a lane's sleeps (rule 4), and back.
  static std::int64_t tag_of(std::int32_t i) noexcept { return -1 - static_cast<std::int64_t>(i); }
  static bool in_lane(const sleep_entry& op) noexcept { return op.slack < 0; }
  static std::int32_t id_of(const sleep_entry& op) noexcept { return static_cast<std::int32_t>(-1 - op.slack); }

 private:
  struct span_slack {
    duration span{}, slack{};
  };
  std::vector<lane> lanes_;
  std::size_t queued_ = 0;
  span_slack recent_[history]{};
  std::size_t next_recent_ = 0;
};

}  // namespace tock::detail

#endif
