// tock/detail/timer_queue.hpp: the deadlines of one service: the heap, the parked list, the timers' rings and
// their accounting. A pure data structure, as Asio's timer_queue: no lock (the service holds its own around
// every call), no arming (timer_driver.hpp), no completion (the service and the driver run them).
#ifndef TOCK_DETAIL_TIMER_QUEUE_HPP
#define TOCK_DETAIL_TIMER_QUEUE_HPP

#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/deadline_link.hpp>
#include <tock/detail/sleep_lanes.hpp>
#include <tock/detail/timer_node.hpp>
#include <tock/detail/wait_op.hpp>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tock::detail {

// A count written under the lock and read without it (a lock-free attach reads the pending count for the
// peak: timer_stats): a relaxed load and store, as cheap as a plain one, no locked instruction.
class relaxed_count {
 public:
  operator std::size_t() const noexcept { return n_.load(std::memory_order_relaxed); }  // NOLINT: reads as one
  relaxed_count& operator=(std::size_t n) noexcept {
    n_.store(n, std::memory_order_relaxed);
    return *this;
  }
  relaxed_count& operator+=(std::size_t n) noexcept { return *this = *this + n; }
  relaxed_count& operator-=(std::size_t n) noexcept { return *this = *this - n; }
  relaxed_count& operator++() noexcept { return *this += 1; }
  relaxed_count& operator--() noexcept { return *this -= 1; }

 private:
  std::atomic<std::size_t> n_{0};
};

// Entries are timers (one heap slot however many waits) and sleeps (a sleep or a tock::timeout entry is its
// own node), keyed by their latest times (timer_node.hpp: the rules on keys); a deadline's timer also keeps one
// bound entry outside its ring, in its link (deadline_link.hpp: the rules on links). Sleeps of a repeated duration
// queue in lanes, of which only the oldest is in the heap (sleep_lanes.hpp: the rules on lanes). Waits at
// TimePoint::max() never fire: they are parked in a side list, and take no heap slot. Calls that may allocate come in
// two steps, a reserve_* that throws with nothing changed and a noexcept step that changes things.
template <typename TimePoint>
class timer_queue {
 public:
  using timer = timer_node<TimePoint>;
  using duration = typename TimePoint::duration;
  using lanes_type = sleep_lanes<TimePoint>;

  // What pop_due() found: a sleep out of the heap, or a timer's oldest waiting wait, fired, or a deadline's
  // attached entry, claimed (`linked`: its start was not counted).
  struct due {
    sleep_entry* sleep = nullptr;
    wait_op* wait = nullptr;
    TimePoint at{};  // its deadline (its expiry, not its latest time)
    bool linked = false;
    explicit operator bool() const noexcept { return sleep != nullptr || wait != nullptr; }
  };

  // What detach() found: the wait was gone, had fired but not run yet, or was still waiting.
  enum class unlinked { nothing, due, waiting };

  // Also without the lock, by a lock-free attach (for the peak): then an estimate, exact on one thread.
  std::size_t pending() const noexcept { return heap_waits_ + parked_waits_ + links_.attached(); }
  std::size_t heap_waits() const noexcept { return heap_waits_; }  // waits that can fire: in the heap or a lane
  // Entries attached to deadlines' links (rule 4 there; lock-free, as attaching and withdrawing are).
  link_count& links() noexcept { return links_; }
  const link_count& links() const noexcept { return links_; }
  // Whether anything can fire: the driver is armed exactly then (timer_driver.hpp).
  bool can_fire() const noexcept { return heap_waits_ != 0 || links_.attached() != 0; }
  // What the driver must cover now: waits in the heap, or entries attached while the count is covered (not only
  // counted by owners on their way to the lock: deadline_link.hpp, rule 4).
  bool must_cover() const noexcept { return heap_waits_ != 0 || links_.covered_attached(); }
  std::size_t parked_waits() const noexcept { return parked_waits_; }
  std::size_t lane_sleeps() const noexcept { return lanes_.queued(); }  // sleeps in lanes behind their heads
  std::uint64_t rekeys() const noexcept { return rekeys_; }  // heap re-keys so far (see timer_stats)
  std::size_t capacity() const noexcept { return capacity_; }
  void set_capacity(std::size_t n) noexcept { capacity_ = n < heap_node::max_position ? n : heap_node::max_position; }

  // The key the driver must be armed at once something is placed at `key`. Requires a key below max().
  TimePoint earliest_with(const TimePoint& key) const noexcept {
    return !heap_.empty() && heap_.top().key < key ? heap_.top().key : key;
  }
  bool heap_empty() const noexcept { return heap_.empty(); }
  const TimePoint& top_key() const noexcept { return heap_.top().key; }
  // Starts loading the top's node (a sleep operation or a timer object, cold at a large N) while the caller
  // does something else: the driver, while the handler of the entry it just popped runs. O(1), no effect.
  void prefetch_top() const noexcept { heap_.empty() ? void() : __builtin_prefetch(heap_.top().node()); }

  // --- A wait on a timer: wait_past_capacity, reserve_wait, then link_wait.

  // A new wait would need a heap slot for the timer (it has no waiting wait: a timer left in the heap
  // holds no slot, rule 4), and none is left.
  bool wait_past_capacity(const timer& t) const noexcept {
    return t.ring.waiting == 0 && t.expiry() != TimePoint::max() && slots_in_use() >= capacity_;
  }
  void reserve_wait(const timer& t) { reserve_at(t.expiry()); }

  // Where a new wait puts its timer in the heap, or max() if the heap keeps it where it is (it waits already,
  // or parks). A timer left in the heap without waits keeps a key earlier than its latest time (it is
  // re-keyed when it surfaces).
  TimePoint wait_key(const timer& t) const noexcept {
    if (t.ring.waiting > 0 || t.expiry() == TimePoint::max()) return TimePoint::max();
    const TimePoint latest = t.latest();
    return t.node.in_heap() && heap_.key_of(t.node) < latest ? heap_.key_of(t.node) : latest;
  }

  void link_wait(timer& t, wait_op& op) noexcept;

  // --- A deadline's link (deadline_link.hpp), by its owner under the lock.

  // Whether an entry attached now would need a heap slot for the deadline's node, and none is left.
  bool link_past_capacity(const timer& t) const noexcept {
    return !t.node.in_heap() && !t.node.parked() && t.expiry() != TimePoint::max() && slots_in_use() >= capacity_;
  }
  // Room for the node, if it is not placed yet: then place_for_link, which parks it at max() (parked nodes
  // are pinned, and never fire: rule 3). Throws std::bad_alloc with nothing changed.
  void reserve_link(const timer& t) {
    if (!t.node.in_heap() && !t.node.parked()) reserve_at(t.expiry());
  }
  // What the driver must be armed for once the entry is attached: the node's key, or the top's.
  TimePoint link_arming_key(const timer& t) const noexcept {
    if (t.node.in_heap()) return heap_.key_of(t.node);
    if (!t.node.parked() && t.expiry() != TimePoint::max()) return t.latest();
    return heap_.empty() ? TimePoint::max() : heap_.top().key;
  }
  void place_for_link(timer& t) noexcept {
    if (t.node.in_heap() || t.node.parked()) return;
    if (t.expiry() == TimePoint::max()) return park(t);
    t.node.seq = next_seq_++;
    push_timer(t, t.latest());
    ++lingering_;  // no wait of its ring: it counts as left behind (slots_in_use), as with any attached entry
  }

  // --- Sleeps and tock::timeout's entries: sleep_past_capacity, reserve_sleep, then push_sleep.

  bool sleep_past_capacity(const TimePoint& at) const noexcept {
    return at != TimePoint::max() && slots_in_use() >= capacity_;
  }

  // Makes room for one more entry at `at` (the heap, or the parked list for max()). Throws std::bad_alloc.
  void reserve_at(const TimePoint& at) { at != TimePoint::max() ? heap_.reserve_one() : parked_.reserve_one(); }

  // reserve_at, and for a sleep started `span` (> 0, or zero if unknown) from now with `slack`, the lane it
  // joins (sleep_lanes rules 2 and 4), or sleep_lanes::none. Throws std::bad_alloc; it may have claimed an
  // empty lane for the span by then, which changes nothing that the queue's users can observe.
  std::int32_t reserve_sleep(const TimePoint& at, const TimePoint& latest, const duration& span,
                             const duration& slack) {
    reserve_at(at);
    if (at == TimePoint::max() || latest - at != slack) return lanes_type::none;  // clamped: sleep_lanes rule 4
    const std::int32_t lane = lanes_.choose(span, slack, latest);
    if (lane != lanes_type::none) lanes_.at(lane).reserve_one();
    return lane;
  }

  // Places a sleep due at `at` that may complete as late as `latest` (latest_time(at, its slack)), its key, in
  // the lane reserve_sleep() chose. One that is not `cancellable` (nothing will unschedule() it) goes in the
  // heap untracked (deadline_heap.hpp), unless it joins a lane.
  void push_sleep(sleep_entry& op, const TimePoint& at, const TimePoint& latest, std::int32_t lane = lanes_type::none,
                  bool cancellable = true) noexcept {
    if (at == TimePoint::max()) {
      parked_.push(op.node);
      ++parked_waits_;
      return;
    }
    op.node.seq = next_seq_++;
    ++heap_waits_;
    if (lane != lanes_type::none) return lanes_.push(lane, op, latest, heap_);
    op.slack = static_cast<std::int64_t>((latest - at).count());  // its deadline is exactly key - slack
    heap_.push(op.node, latest, cancellable);
  }

  // Takes a sleep out; false if it is in neither the heap, a lane nor the parked list (it fired, or never
  // started). O(log N), O(1) for a sleep behind its lane's head. Requires a sleep pushed cancellable.
  bool unschedule(sleep_entry& op) noexcept;

  // --- Taking waits out.

  // Takes up to `limit` waits of a timer, oldest first: fired ones are unlinked and passed to `fired` (their
  // runner reports them aborted), waiting ones are passed to `defer`. The timer stays in the heap: a later
  // wait will likely reuse its slot. Returns how many were taken.
  template <typename Defer, typename Fired>
  std::size_t take_waits(timer& t, std::size_t limit, Defer&& defer, Fired&& fired) noexcept;
  template <typename Defer>
  std::size_t take_waits(timer& t, std::size_t limit, Defer&& defer) noexcept {
    return take_waits(t, limit, defer, [](wait_op&) {});
  }

  // Takes a wait out of whatever ring it is in. O(waits of its timer).
  unlinked detach(wait_op& op) noexcept;

  // A timer without waits, and with nothing attached to its link, leaves the heap or the parked list (its
  // object is going away).
  void remove_timer(timer& t) noexcept {
    if (t.node.in_heap()) {
      heap_.remove(t.node);
      --lingering_;
    } else if (t.node.parked()) {
      parked_.remove(t.node);
    }
  }

  // --- Moving a timer's expiry without aborting its waits: reserve_move, move_key, then move_expiry.

  // A timer without waits keeps its key (rule 4); a deadline's node does not (deadline_link.hpp, rule 3): it
  // moves with its link's entry, or parks for it, or leaves if nothing is attached. By the owner.
  void reserve_move(const timer& t, const TimePoint& at) {
    if (t.ring.waiting > 0 || t.ring.has_link) reserve_at(at);
  }

  // Where the move puts the node in the heap, earlier than it was, for the driver to cover (timer_driver.hpp:
  // armed no later than the top's key while anything can fire), or max() if nowhere earlier. A deadline with
  // nothing attached is re-keyed too (deadline_link.hpp, rule 3), so that an entry attached later without the
  // lock finds the driver armed for it: it counts while anything else can fire (else the attach that makes
  // something fire arms, under the lock: rule 4 there). A parked one with nothing attached leaves instead.
  TimePoint move_key(const timer& t, const TimePoint& at) const noexcept {
    if (at == TimePoint::max()) return TimePoint::max();
    const bool holds = holds_waits(t);
    if (!holds && !(t.ring.has_link && can_fire())) return TimePoint::max();
    const TimePoint latest = latest_time(at, t.slack);
    if (t.node.parked()) return holds ? latest : TimePoint::max();
    return t.node.in_heap() && !(heap_.key_of(t.node) < latest) ? latest : TimePoint::max();
  }

  void move_expiry(timer& t, const TimePoint& at) noexcept;

  // --- The slack of a timer (>= 0): slack_key, then set_slack.

  // Where the new slack puts the node in the heap, earlier than it was, or max() (as move_key).
  TimePoint slack_key(const timer& t, const duration& slack) const noexcept {
    if (!t.node.in_heap() || !(holds_waits(t) || (t.ring.has_link && can_fire()))) return TimePoint::max();
    const TimePoint latest = latest_time(t.expiry(), slack);
    return latest < heap_.key_of(t.node) ? latest : TimePoint::max();
  }

  // Sets the slack; a key past the new latest time moves to it (rule 5), any other stays.
  void set_slack(timer& t, const duration& slack) noexcept {
    t.slack = slack;
    if ((t.ring.waiting > 0 || t.ring.has_link) && t.node.in_heap() && t.latest() < heap_.key_of(t.node))
      rekey_at_latest(t);
  }

  // Moves `from`'s expiry, slack and waits to `to`, which holds nothing yet; `from` gets expiry
  // `from_expiry` and keeps its slack.
  void move_timer(timer& to, timer& from, const TimePoint& from_expiry) noexcept {
    to.slack = from.slack;
    to.set_expiry(from.expiry());
    from.set_expiry(from_expiry);
    to.ring.take_from(from.ring);
    if (to.ring.has_link) link::of(to).take_from(link::of(from));
    to.node.seq = from.node.seq;
    to.node.position = from.node.position;
    if (from.node.in_heap())
      heap_.relocate(from.node, to.node);
    else if (from.node.parked())
      parked_.relocate(from.node, to.node);
    from.node.position = heap_node::nowhere;
  }

  // --- Firing.

  // Brings the top to an entry that can fire at `now`: timers left without waits leave the heap on the way,
  // timers extended lazily are re-keyed at their latest time. True if the top is then due: a sleep or a
  // timer whose deadline has passed (not only its key: see slack, timer_node.hpp rule 0). O(log N) per
  // entry it passes.
  [[gnu::always_inline]] bool settle(const TimePoint& now) noexcept;

  // The next entry due at `now`, by latest time (by deadline, and by start order among equal deadlines, when
  // entries have equal slack): a sleep leaves the heap, a deadline's attached entry is claimed, else a timer's
  // oldest waiting wait fires (wait_ring::fire_first). A timer left without waits stays in the heap (rule 4): a
  // wait started from its handler re-keys it in place; settle() drops it otherwise. O(log N) per entry.
  due pop_due(const TimePoint& now) noexcept;

  // A fired wait that has not run waits again, first of its timer, at the timer's expiry. False (nothing
  // changed) if the timer parks now or the heap cannot take it back.
  bool wait_again(wait_op& op) noexcept;

  // Empties the queue (shutdown): every sleep and every waiting wait is passed on. Fired waits stay in their
  // rings: their runners, queued on other executors, own them.
  template <typename OnSleep, typename OnWait>
  void clear(OnSleep&& on_sleep, OnWait&& on_wait) noexcept;

  // The heap and the accounting checked against each other, for tests. O(N).
  bool valid() const;

 private:
  // Heap slots held by waits: timers left in the heap without waits do not count, since they leave when
  // they surface or when their next wait starts.
  std::size_t slots_in_use() const noexcept { return heap_.size() - lingering_ + lanes_.queued(); }

  // Equal deadlines fire in the order their waits started, across timers too: a timer in the heap carries
  // the sequence number of its oldest waiting wait, and is re-sifted when that wait leaves. O(log N), and
  // only for timers with several waits. A timer keyed earlier than its expiry (a lazy key) is re-sequenced
  // when it surfaces instead, as its key only ranks it then.
  void resequence(timer& t) noexcept {
    const std::uint32_t seq = t.ring.first_waiting()->seq;
    if (t.node.seq == (seq & 0x7FFF'FFFFu)) return;
    const TimePoint key = heap_.key_of(t.node);
    if (key < t.latest()) return;
    t.node.seq = seq;
    heap_.rekey(t.node, key);
  }

  // Keys a timer with waits at its latest time, ranked by its oldest waiting wait (which a lazy key may not
  // carry: see resequence). O(log N).
  void rekey_at_latest(timer& t) noexcept {
    if (const wait_op* first = t.ring.first_waiting()) t.node.seq = first->seq;  // a link's entry alone: as it was
    heap_.rekey(t.node, t.latest());
    ++rekeys_;
  }

  // Accounts for `n` waits that left a timer's ring before firing.
  void waits_left(timer& t, std::size_t n) noexcept;

  // A timer's node enters the heap or the parked list: a deadline's link is pinned (deadline_link.hpp, rule 3).
  void push_timer(timer& t, const TimePoint& key) noexcept {
    heap_.push(t.node, key);
    pin(t);
  }
  void park(timer& t) {
    parked_.push(t.node);
    pin(t);
  }
  // Whether the node must stay placed for what it holds: waits, or a link's attached entry (by the owner).
  static bool holds_waits(const timer& t) noexcept {
    return t.ring.waiting > 0 || (t.ring.has_link && link::of(const_cast<timer&>(t)).attached());
  }
  using link = deadline_node<TimePoint>;
  static void pin(timer& t) noexcept { link::pin(t); }
  static bool may_leave(timer& t) noexcept { return link::may_leave(t); }

  TimePoint sleep_deadline(const sleep_entry& op, const TimePoint& key) const noexcept {
    if (lanes_type::in_lane(op)) return lanes_.deadline(op, key);
    return key - duration(static_cast<typename duration::rep>(op.slack));
  }

  deadline_heap<TimePoint> heap_;
  lanes_type lanes_;
  parked_nodes parked_;
  relaxed_count heap_waits_;
  relaxed_count parked_waits_;  // waits parked at TimePoint::max()
  std::size_t lingering_ = 0;     // timers left in the heap with no waits
  std::uint64_t rekeys_ = 0;
  link_count links_;
  std::size_t capacity_ = heap_node::max_position;
  std::uint32_t next_seq_ = 0;
};

}  // namespace tock::detail

#include <tock/detail/impl/timer_queue.hpp>

#endif
