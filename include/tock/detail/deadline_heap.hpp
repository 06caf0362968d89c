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
struct heap_node {
  // Positions at or above parked_flag are not heap positions: see basic_timer_service's parked list.
  static constexpr std::uint32_t parked_flag = 0x8000'0000u;
  static constexpr std::uint32_t nowhere = 0xFFFF'FFFFu;
  static constexpr std::uint32_t max_position = parked_flag - 1;

  std::uint32_t position = nowhere;
  std::uint32_t seq : 31 = 0;        // schedule order: breaks ties between equal keys (compared modulo 2^31)
  std::uint32_t is_timer : 1 = 0;    // a timer_node (holds a ring of waits) rather than a sleep operation

  bool in_heap() const noexcept { return position < parked_flag; }
  bool parked() const noexcept { return position != nowhere && position >= parked_flag; }
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

// Invariant: for every i > 0, !before(entries_[i], entries_[parent(i)]), and
// entries_[i].node->position == i. Nothing else is promised about sibling order.
template <typename Key, std::size_t Arity = 4>
class deadline_heap {
  static_assert(Arity >= 2);

 public:
  struct entry {
    Key key;
    heap_node* node;
  };

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
  // needs the push not to throw.
  void push(heap_node& n, const Key& key) {
    entries_.push_back(entry{key, &n});
    n.position = static_cast<std::uint32_t>(entries_.size() - 1);
    sift_up(entries_.size() - 1);
  }

  // O(log N): removes a node that is in the heap.
  void remove(heap_node& n) noexcept {
    const std::size_t i = n.position;
    n.position = heap_node::nowhere;
    const std::size_t last = entries_.size() - 1;
    if (i != last) {
      entries_[i] = entries_[last];
      entries_[i].node->position = static_cast<std::uint32_t>(i);
      entries_.pop_back();
      if (i > 0 && before(entries_[i], entries_[parent(i)]))
        sift_up(i);
      else
        sift_down(i);
    } else {
      entries_.pop_back();
    }
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
    entries_[i].node = &in;
    in.position = i;
    rekey(in, key);
  }

  // O(1): the node object moved to new memory (a timer was moved).
  void relocate(heap_node& from, heap_node& to) noexcept { entries_[from.position].node = &to; }

  // O(N): every entry, for shutdown. Leaves the heap empty.
  template <typename F>
  void drain(F&& f) {
    std::vector<entry> all;
    all.swap(entries_);
    for (entry& e : all) {
      e.node->position = heap_node::nowhere;
      f(*e.node);
    }
  }

  // O(N): checks the invariant; for tests.
  bool valid() const noexcept {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].node->position != i) return false;
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
    const std::uint32_t diff = (a.node->seq - b.node->seq) & 0x7FFF'FFFFu;
    return diff >= 0x4000'0000u;
  }

  void place(std::size_t i, const entry& e) noexcept {
    entries_[i] = e;
    e.node->position = static_cast<std::uint32_t>(i);
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

  void sift_down(std::size_t i) noexcept {
    const entry moving = entries_[i];
    const std::size_t n = entries_.size();
    for (;;) {
      const std::size_t first = i * Arity + 1;
      if (first >= n) break;
      const std::size_t end = first + Arity < n ? first + Arity : n;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < end; ++c)
        if (before(entries_[c], entries_[best])) best = c;
      if (!before(entries_[best], moving)) break;
      place(i, entries_[best]);
      i = best;
    }
    place(i, moving);
  }

  std::vector<entry> entries_;
};

}  // namespace tock::detail

#endif
