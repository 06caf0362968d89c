// tock/detail/deadline_heap.hpp: the d-ary min-heap of deadlines that a timer service owns.
#ifndef TOCK_DETAIL_DEADLINE_HEAP_HPP
#define TOCK_DETAIL_DEADLINE_HEAP_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tock::detail {

// Anything the heap can hold. The node records where it sits so that removal and re-keying are O(log N)
// without a search. The key itself lives in the heap array, next to the node pointer, so that sifting
// compares keys without touching the nodes (scattered memory) except to write back their positions.
// A node that only ever leaves from the top (a sleep nothing can cancel) is pushed *untracked*: the heap
// never writes its position, which saves a write to cold memory per level that the sift moves it.
struct heap_node {
  // Positions at or above parked_flag are not heap positions: see basic_timer_service's parked list.
  static constexpr std::uint32_t parked_flag = 0x8000'0000u;
  static constexpr std::uint32_t untracked = 0xFFFF'FFFEu;  // in the heap, where is not recorded
  static constexpr std::uint32_t nowhere = 0xFFFF'FFFFu;
  static constexpr std::uint32_t max_position = parked_flag - 1;

  std::uint32_t position = nowhere;
  std::uint32_t seq : 31 = 0;        // schedule order: breaks ties between equal keys (compared modulo 2^31)
  std::uint32_t is_timer : 1 = 0;    // a timer_node (holds a ring of waits) rather than a sleep operation

  bool in_heap() const noexcept { return position < parked_flag; }
  bool parked() const noexcept { return position >= parked_flag && position < untracked; }
};

// Nodes that are in no heap and never fire (a wait at time_point::max()), in a side array, each knowing its
// index (its position with parked_flag set), so that removal is O(1).
class parked_nodes {
 public:
  const std::vector<heap_node*>& nodes() const noexcept { return nodes_; }

  // Makes room for one more, so that push() cannot throw. Amortised O(1).
  void reserve_one() {
    if (nodes_.size() == nodes_.capacity()) nodes_.reserve(nodes_.empty() ? 16 : nodes_.size() * 2);
  }
  void push(heap_node& n) noexcept {
    n.position = static_cast<std::uint32_t>(nodes_.size()) | heap_node::parked_flag;
    nodes_.push_back(&n);
  }
  void remove(heap_node& n) noexcept {
    const std::size_t i = n.position & ~heap_node::parked_flag;
    heap_node* last = nodes_.back();
    nodes_[i] = last;
    last->position = static_cast<std::uint32_t>(i) | heap_node::parked_flag;
    nodes_.pop_back();
    n.position = heap_node::nowhere;
  }
  void relocate(heap_node& from, heap_node& to) noexcept { nodes_[from.position & ~heap_node::parked_flag] = &to; }

  // Every node, for shutdown (the caller resets their positions). Leaves the list empty.
  template <typename F>
  void drain(F&& f) {
    std::vector<heap_node*> all;
    all.swap(nodes_);
    for (heap_node* n : all) f(*n);
  }
  bool valid() const noexcept {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i]->position != (heap_node::parked_flag | i)) return false;
    return true;
  }

 private:
  std::vector<heap_node*> nodes_;
};

// Invariant: for every i > 0, !before(entries_[i], entries_[parent(i)]), and entries_[i].node()->position == i
// (heap_node::untracked for an untracked node). Nothing else is promised about sibling order.
template <typename Key, std::size_t Arity = 4>
class deadline_heap {
  static_assert(Arity >= 2);

 public:
  struct entry {
    Key key;
    std::uintptr_t link;  // the node's address, with untracked_bit set if the heap does not track its position
    heap_node* node() const noexcept { return reinterpret_cast<heap_node*>(link & ~untracked_bit); }
    bool tracked() const noexcept { return (link & untracked_bit) == 0; }
  };
  static constexpr std::uintptr_t untracked_bit = 1;  // free: nodes are aligned

  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }
  const entry& top() const noexcept { return entries_.front(); }
  const entry& at(std::size_t i) const noexcept { return entries_[i]; }
  const Key& key_of(const heap_node& n) const noexcept { return entries_[n.position].key; }

  // Makes room for one more entry, so that the push that follows cannot throw. Amortised O(1).
  void reserve_one() {
    if (entries_.size() == entries_.capacity()) entries_.reserve(entries_.empty() ? 64 : entries_.size() * 2);
  }
  // The same, for callers that cannot throw: false (nothing changed) if the memory is not there.
  bool try_reserve_one() noexcept {
    try {
      reserve_one();
      return true;
    } catch (...) {
      return false;
    }
  }

  // O(log N). The caller checks size() < heap_node::max_position first, and calls reserve_one() if it
  // needs the push not to throw. An untracked node (`tracked` false) can then only leave through pop().
  void push(heap_node& n, const Key& key, bool tracked = true) {
    static_assert(alignof(heap_node) > untracked_bit);
    entries_.push_back(entry{key, reinterpret_cast<std::uintptr_t>(&n) | (tracked ? 0 : untracked_bit)});
    n.position = tracked ? static_cast<std::uint32_t>(entries_.size() - 1) : heap_node::untracked;
    sift_up(entries_.size() - 1);
  }

  // O(log N): removes a tracked node that is in the heap.
  void remove(heap_node& n) noexcept {
    const std::size_t i = n.position;
    n.position = heap_node::nowhere;
    remove_at(i);
  }

  // O(log N): removes the top, tracked or not. Requires !empty().
  void pop() noexcept {
    top().node()->position = heap_node::nowhere;
    remove_at(0);
  }

  // O(log N): gives a node in the heap a new key (or a new seq), earlier or later.
  void rekey(heap_node& n, const Key& key) noexcept {
    const std::size_t i = n.position;
    entries_[i].key = key;
    if (i > 0 && before(entries_[i], entries_[parent(i)]))
      sift_up(i);
    else
      sift_down(i);
  }

  // O(log N): `in` takes the place of `out`, which leaves, with its own key (a lane's next head: sleep_lanes.hpp).
  void replace(heap_node& out, heap_node& in, const Key& key) noexcept {
    const std::uint32_t i = out.position;
    out.position = heap_node::nowhere;
    entries_[i].link = reinterpret_cast<std::uintptr_t>(&in);
    in.position = i;
    rekey(in, key);
  }

  // O(1): the node object moved to new memory (a timer was moved).
  void relocate(heap_node& from, heap_node& to) noexcept {
    entries_[from.position].link = reinterpret_cast<std::uintptr_t>(&to);
  }

  // O(N): every entry, for shutdown. Leaves the heap empty.
  template <typename F>
  void drain(F&& f) {
    std::vector<entry> all;
    all.swap(entries_);
    for (entry& e : all) {
      e.node()->position = heap_node::nowhere;
      f(*e.node());
    }
  }

  // O(N): checks the invariant; for tests.
  bool valid() const noexcept {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const heap_node& n = *entries_[i].node();
      if (n.position != (entries_[i].tracked() ? i : heap_node::untracked)) return false;
      if (i > 0 && before(entries_[i], entries_[parent(i)])) return false;
    }
    return true;
  }

 private:
  static std::size_t parent(std::size_t i) noexcept { return (i - 1) / Arity; }

  static bool before(const entry& a, const entry& b) noexcept {
    if (a.key < b.key) return true;
    if (b.key < a.key) return false;
    // Equal keys: the one scheduled first wins, comparing 31-bit sequence numbers modulo 2^31.
    const std::uint32_t diff = (a.node()->seq - b.node()->seq) & 0x7FFF'FFFFu;
    return diff >= 0x4000'0000u;
  }

  // Which child is least is a coin toss on every level of a sift: a branch the processor mispredicts half the
  // time. Where the entries are likely cached (the heap's first 256 KiB) the children are compared without a
  // branch; deeper, a miss costs more than a misprediction, and the predicted branch lets the processor
  // fetch the next level while the compare waits (branch-free was 12% slower popping 1M sleeps).
  static constexpr std::size_t cached_entries = (std::size_t{256} << 10) / sizeof(entry);
  std::size_t earlier_child(std::size_t c, std::size_t best) const noexcept {
    const Key& a = entries_[c].key;
    const Key& b = entries_[best].key;
    bool first = a < b;
    if (!(a < b) && !(b < a)) [[unlikely]]
      first = before(entries_[c], entries_[best]);
    return first ? c : best;
  }

  void place(std::size_t i, const entry& e) noexcept {
    entries_[i] = e;
    if (e.tracked()) reinterpret_cast<heap_node*>(e.link)->position = static_cast<std::uint32_t>(i);  // no tag
  }

  void remove_at(std::size_t i) noexcept {
    const std::size_t last = entries_.size() - 1;
    if (i != last) {
      const entry moved = entries_[last];
      entries_.pop_back();
      place(i, moved);
      if (i > 0 && before(entries_[i], entries_[parent(i)]))
        sift_up(i);
      else
        sift_down(i);
    } else {
      entries_.pop_back();
    }
  }

  void sift_up(std::size_t i) noexcept {
    const entry moving = entries_[i];
    while (i > 0) {
      const std::size_t p = parent(i);
      if (!before(moving, entries_[p])) break;
      place(i, entries_[p]);
      i = p;
    }
    place(i, moving);
  }

  // The earliest of the children [first, end): a full family of four as a tournament of two independent pairs,
  // so that the two compares overlap.
  std::size_t earliest_child(std::size_t first, std::size_t end) const noexcept {
    if (first >= cached_entries) {
      std::size_t best = first;
      for (std::size_t c = first + 1; c < end; ++c)
        if (before(entries_[c], entries_[best])) best = c;
      return best;
    }
    if constexpr (Arity == 4) {
      if (end - first == 4) {
        const std::size_t a = earlier_child(first + 1, first), b = earlier_child(first + 3, first + 2);
        return earlier_child(b, a);
      }
    }
    std::size_t best = first;
    for (std::size_t c = first + 1; c < end; ++c) best = earlier_child(c, best);
    return best;
  }

  // Bottom-up (Floyd's): the hole goes down to a leaf along the earliest children without comparing them to
  // the entry that moves, which then climbs back from there. A timer's key mostly moves later by a whole
  // timeout or period, and a pop moves the last entry to the top: either belongs near the bottom, where the
  // climb stops at once, so this saves a compare per level (one sift per tick: 381 -> 298 instructions in
  // callgrind, periodic workload, 1000 timers).
  void sift_down(std::size_t i) noexcept {
    const entry moving = entries_[i];
    const std::size_t n = entries_.size(), start = i;
    for (std::size_t first = i * Arity + 1; first < n; first = i * Arity + 1) {
      const std::size_t best = earliest_child(first, first + Arity < n ? first + Arity : n);
      place(i, entries_[best]);
      i = best;
    }
    while (i > start) {
      const std::size_t p = parent(i);
      if (!before(moving, entries_[p])) break;
      place(i, entries_[p]);
      i = p;
    }
    place(i, moving);
  }

  std::vector<entry> entries_;
};

}  // namespace tock::detail

#endif
