// deadline_heap against a reference model: random push / remove / rekey / pop / relocate sequences.
#include <tock/detail/deadline_heap.hpp>
#include <tock/detail/op_memory.hpp>
#include <tock/detail/sanitizers.hpp>  // TOCK_ASAN, TOCK_TSAN: smaller runs under a sanitizer

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace {

using tock::detail::deadline_heap;
using tock::detail::heap_node;

#if TOCK_ASAN || TOCK_TSAN
constexpr int op_count = 20000;
#else
constexpr int op_count = 60000;
#endif

// What the service does: a caller-side counter, truncated into the node's 31-bit seq field.
std::uint32_t seq_bits(std::uint64_t seq) { return static_cast<std::uint32_t>(seq) & 0x7FFF'FFFFu; }

// Keys drawn from a small range, so that ties are common.
struct int_keys {
  using key_type = std::int64_t;
  key_type operator()(std::mt19937_64& rng) const { return std::uniform_int_distribution<std::int64_t>(0, 300)(rng); }
};

struct time_point_keys {
  using key_type = std::chrono::steady_clock::time_point;
  key_type base = std::chrono::steady_clock::now();
  key_type operator()(std::mt19937_64& rng) const {
    return base + std::chrono::microseconds(std::uniform_int_distribution<int>(-150, 150)(rng));
  }
};

// A heap and a model of it: the set of (key, full sequence number) that must pop in that order.
template <typename Key, std::size_t Arity>
class harness {
 public:
  struct item {
    heap_node node;
    std::uint64_t seq = 0;       // the full (unwrapped) sequence number of node.seq
    std::size_t live_index = 0;  // where it sits in live_
    bool tracked = true;         // untracked: leaves only through pop(), and its key is kept here
    Key key{};
  };

  explicit harness(std::uint64_t first_seq) : next_seq_(first_seq) {}

  ~harness() {
    // Leave no node pointing at freed memory, whatever a failed check left behind.
    heap_.drain([](heap_node&) {});
  }

  std::size_t size() const { return live_.size(); }
  const deadline_heap<Key, Arity>& heap() const { return heap_; }

  item& push(const Key& key, bool tracked = true) {
    auto owned = std::make_unique<item>();
    item& it = *owned;
    it.seq = next_seq_++;
    it.node.seq = seq_bits(it.seq);
    it.live_index = live_.size();
    it.tracked = tracked;
    it.key = key;
    live_.push_back(std::move(owned));
    heap_.push(it.node, key, tracked);
    BOOST_REQUIRE_EQUAL(it.node.position == heap_node::untracked, !tracked);
    BOOST_REQUIRE(model_.emplace(key, it.seq).second);
    by_seq_[it.seq] = &it;
    return it;
  }

  item& any(std::mt19937_64& rng) {
    return *live_[std::uniform_int_distribution<std::size_t>(0, live_.size() - 1)(rng)];
  }

  // A tracked node (one that remove, rekey and relocate may take), or null if a few draws found none.
  item* any_tracked(std::mt19937_64& rng) {
    for (int i = 0; i < 8 && !live_.empty(); ++i)
      if (item& it = any(rng); it.tracked) return &it;
    return nullptr;
  }

  void remove(item& it) {
    const Key key = heap_.key_of(it.node);
    BOOST_REQUIRE(key == it.key);
    BOOST_REQUIRE_EQUAL(model_.erase({key, it.seq}), 1u);
    by_seq_.erase(it.seq);
    heap_.remove(it.node);
    BOOST_REQUIRE(!it.node.in_heap());
    forget(it);
  }

  // A new key for the node; with `new_seq`, it also becomes the most recently scheduled (as when a wait
  // restarts on a timer).
  void rekey(item& it, const Key& key, bool new_seq) {
    const Key old_key = heap_.key_of(it.node);
    BOOST_REQUIRE_EQUAL(model_.erase({old_key, it.seq}), 1u);
    by_seq_.erase(it.seq);
    if (new_seq) {
      it.seq = next_seq_++;
      it.node.seq = seq_bits(it.seq);
    }
    heap_.rekey(it.node, key);
    it.key = key;
    BOOST_REQUIRE(model_.emplace(key, it.seq).second);
    by_seq_[it.seq] = &it;
  }

  // Pops the top (with pop(), or remove() if `by_remove` and it is tracked), checks that it is the model's
  // first, and returns its (key, seq).
  std::pair<Key, std::uint64_t> pop(bool by_remove = false) {
    BOOST_REQUIRE(!heap_.empty());
    BOOST_REQUIRE(!model_.empty());
    const auto expected = *model_.begin();
    const auto& top = heap_.top();
    item& it = *reinterpret_cast<item*>(top.node());  // node is the first member of item
    BOOST_REQUIRE(top.key == expected.first);
    BOOST_REQUIRE(it.key == expected.first);
    BOOST_REQUIRE_EQUAL(it.seq, expected.second);
    BOOST_REQUIRE_EQUAL(top.tracked(), it.tracked);
    if (by_remove && it.tracked) {
      remove(it);
      return expected;
    }
    model_.erase(model_.begin());
    by_seq_.erase(it.seq);
    heap_.pop();
    BOOST_REQUIRE_EQUAL(it.node.position, heap_node::nowhere);
    forget(it);
    return expected;
  }

  // Moves the node to new memory, as moving a timer does.
  void relocate(item& it) {
    auto owned = std::make_unique<item>();
    item& to = *owned;
    to.seq = it.seq;
    to.key = it.key;
    to.node.seq = it.node.seq;
    to.node.is_timer = it.node.is_timer;
    to.node.position = it.node.position;
    heap_.relocate(it.node, to.node);
    it.node.position = heap_node::nowhere;
    to.live_index = it.live_index;
    by_seq_[to.seq] = &to;
    live_[to.live_index] = std::move(owned);  // frees the old item
  }

  // The heap agrees with the model: size, the top, and every node's key.
  void check() {
    BOOST_REQUIRE(heap_.valid());
    BOOST_REQUIRE_EQUAL(heap_.size(), model_.size());
    BOOST_REQUIRE_EQUAL(live_.size(), model_.size());
    if (!model_.empty()) {
      const auto& top = heap_.top();
      BOOST_REQUIRE(top.key == model_.begin()->first);
      BOOST_REQUIRE_EQUAL(reinterpret_cast<item*>(top.node())->seq, model_.begin()->second);
    }
  }

  void check_every_key() {
    for (const auto& [key, seq] : model_) {
      const item* it = by_seq_.at(seq);
      BOOST_REQUIRE(it->key == key);
      if (!it->tracked) {
        BOOST_REQUIRE_EQUAL(it->node.position, heap_node::untracked);
        BOOST_REQUIRE(!it->node.in_heap() && !it->node.parked());
        continue;
      }
      BOOST_REQUIRE(it->node.in_heap());
      BOOST_REQUIRE(heap_.key_of(it->node) == key);
      BOOST_REQUIRE(heap_.at(it->node.position).node() == &it->node);
    }
  }

 private:
  void forget(item& it) {
    const std::size_t i = it.live_index;
    if (i + 1 != live_.size()) {
      live_[i] = std::move(live_.back());
      live_[i]->live_index = i;
    }
    live_.pop_back();
  }

  deadline_heap<Key, Arity> heap_;
  std::vector<std::unique_ptr<item>> live_;
  std::set<std::pair<Key, std::uint64_t>> model_;
  std::map<std::uint64_t, item*> by_seq_;
  std::uint64_t next_seq_;
};

// Random operations, biased to keep a few hundred nodes, then pops everything; checks the heap against the
// model after every step and that the pops come out sorted by (key, seq).
template <typename Keys, std::size_t Arity>
void run_random_model(std::uint64_t seed, std::uint64_t first_seq, int untracked_percent = 0) {
  using key_type = typename Keys::key_type;
  std::mt19937_64 rng(seed);
  Keys keys;
  harness<key_type, Arity> h(first_seq);
  using item_type = typename harness<key_type, Arity>::item;
  std::uniform_int_distribution<int> pick(0, 99);
  std::size_t target = 300;

  for (int i = 0; i < op_count; ++i) {
    if (i % 5000 == 0) target = std::uniform_int_distribution<std::size_t>(1, 600)(rng);
    const int p = pick(rng);
    item_type* tracked = h.size() > 0 ? h.any_tracked(rng) : nullptr;
    if (h.size() == 0 || (h.size() < target && p < 40) || p < 25) {
      h.push(keys(rng), pick(rng) >= untracked_percent);
    } else if (!tracked || p >= 75) {
      if (p < 90 || !tracked)
        h.pop(pick(rng) < 50);
      else
        h.relocate(*tracked);
    } else if (p < 45) {
      h.remove(*tracked);
    } else if (p < 60) {  // rekey earlier
      const key_type old_key = h.heap().key_of(tracked->node);
      key_type k = keys(rng);
      if (old_key < k) k = old_key;
      h.rekey(*tracked, k, pick(rng) < 30);
    } else {  // rekey later
      const key_type old_key = h.heap().key_of(tracked->node);
      key_type k = keys(rng);
      if (k < old_key) k = old_key;
      h.rekey(*tracked, k, pick(rng) < 30);
    }
    h.check();
    if (i % 1000 == 0) h.check_every_key();
  }

  h.check_every_key();
  std::pair<key_type, std::uint64_t> last{};
  bool first = true;
  while (h.size() > 0) {
    const auto popped = h.pop();
    if (!first) BOOST_REQUIRE(last < popped);
    last = popped;
    first = false;
    h.check();
  }
  BOOST_TEST(h.heap().empty());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(heap_test)

BOOST_AUTO_TEST_CASE(random_operations_on_int_keys_agree_with_a_sorted_model) { run_random_model<int_keys, 4>(1, 0); }

BOOST_AUTO_TEST_CASE(random_operations_on_time_point_keys_agree_with_a_sorted_model) {
  run_random_model<time_point_keys, 4>(2, 0);
}

BOOST_AUTO_TEST_CASE(random_operations_agree_with_the_model_for_other_arities) {
  run_random_model<int_keys, 2>(3, 0);
  run_random_model<int_keys, 3>(4, 0);
  run_random_model<int_keys, 8>(5, 0);
}

BOOST_AUTO_TEST_CASE(random_operations_agree_with_the_model_while_sequence_numbers_wrap) {
  // The counter passes 2^31 (where the 31-bit field wraps) about a third of the way through.
  run_random_model<int_keys, 4>(6, (std::uint64_t{1} << 31) - 10000);
  run_random_model<time_point_keys, 4>(7, (std::uint64_t{1} << 32) - 7000);
}

// A sift picks the least child without a branch in the heap's first levels (likely cached) and with one below
// them: a heap deep enough for both, with many equal keys (the tie-break on both paths), agrees with the model.
BOOST_AUTO_TEST_CASE(a_heap_deeper_than_its_branch_free_levels_agrees_with_the_model) {
  std::mt19937_64 rng(12);
  harness<std::int64_t, 4> h(0);
  std::uniform_int_distribution<std::int64_t> key(0, 3000);
  std::uniform_int_distribution<int> pick(0, 99);
  for (int i = 0; i < 100'000; ++i) h.push(key(rng));  // 9 levels: the deepest sifts pass index 16384
  h.check();
  for (int i = 0; i < 30'000; ++i) {
    const int p = pick(rng);
    auto& it = *h.any_tracked(rng);  // every node is tracked
    if (p < 25) {
      h.pop();
    } else if (p < 45) {
      h.remove(it);
    } else if (p < 70) {
      h.rekey(it, key(rng), p < 55);
    } else {
      h.push(key(rng));
    }
  }
  h.check();
  h.check_every_key();
  std::pair<std::int64_t, std::uint64_t> last{-1, 0};
  while (h.size() > 0) {
    const auto popped = h.pop();
    BOOST_REQUIRE(last < popped);
    last = popped;
  }
}

BOOST_AUTO_TEST_CASE(equal_keys_pop_in_push_order) {
  harness<std::int64_t, 4> h(0);
  std::vector<std::uint64_t> pushed;
  for (int i = 0; i < 2000; ++i) pushed.push_back(h.push(42).seq);
  h.check();
  for (std::uint64_t seq : pushed) BOOST_REQUIRE_EQUAL(h.pop().second, seq);
}

BOOST_AUTO_TEST_CASE(equal_keys_pop_in_push_order_among_other_keys) {
  std::mt19937_64 rng(11);
  harness<std::int64_t, 4> h(0);
  std::map<std::int64_t, std::vector<std::uint64_t>> pushed;  // key -> seqs in push order
  for (int i = 0; i < 3000; ++i) {
    const std::int64_t key = std::uniform_int_distribution<std::int64_t>(0, 9)(rng);
    pushed[key].push_back(h.push(key).seq);
  }
  for (const auto& [key, seqs] : pushed) {
    for (std::uint64_t seq : seqs) {
      const auto popped = h.pop();
      BOOST_REQUIRE_EQUAL(popped.first, key);
      BOOST_REQUIRE_EQUAL(popped.second, seq);
    }
  }
}

BOOST_AUTO_TEST_CASE(rekey_with_a_new_seq_moves_a_node_behind_its_equals) {
  harness<std::int64_t, 4> h(0);
  auto& first = h.push(5);
  const std::uint64_t second = h.push(5).seq;
  const std::uint64_t third = h.push(5).seq;
  h.rekey(first, 5, true);
  const std::uint64_t renewed = first.seq;
  h.check();
  BOOST_TEST(h.pop().second == second);
  BOOST_TEST(h.pop().second == third);
  BOOST_TEST(h.pop().second == renewed);
}

BOOST_AUTO_TEST_CASE(equal_keys_pop_in_push_order_across_the_31_bit_wrap) {
  // Seqs 2^31 - 1000 .. 2^31 + 999: the field goes 0x7FFFFC18 .. 0x7FFFFFFF, then 0 .. 999.
  harness<std::int64_t, 4> h((std::uint64_t{1} << 31) - 1000);
  std::vector<std::uint64_t> pushed;
  for (int i = 0; i < 2000; ++i) pushed.push_back(h.push(7).seq);
  BOOST_REQUIRE(pushed.front() % (std::uint64_t{1} << 31) > pushed.back() % (std::uint64_t{1} << 31));
  h.check();
  for (std::uint64_t seq : pushed) BOOST_REQUIRE_EQUAL(h.pop().second, seq);
}

BOOST_AUTO_TEST_CASE(equal_keys_pop_in_push_order_just_across_the_wrap_in_a_binary_heap) {
  // The nodes with wrapped (numerically small) seqs are pushed last and must still pop last.
  harness<std::int64_t, 2> h((std::uint64_t{1} << 31) - 3);
  std::vector<std::uint64_t> pushed;
  for (int i = 0; i < 6; ++i) pushed.push_back(h.push(1).seq);
  for (std::uint64_t seq : pushed) BOOST_REQUIRE_EQUAL(h.pop().second, seq);
}

BOOST_AUTO_TEST_CASE(nodes_far_apart_in_seq_still_order_by_key) {
  // Keys decide whenever they differ, however far apart (or wrapped) the sequence numbers are.
  deadline_heap<std::int64_t> heap;
  heap_node a, b, c;
  a.seq = 0;
  b.seq = 0x3000'0000u;
  c.seq = 0x6000'0000u;
  heap.push(c, 1);
  heap.push(b, 2);
  heap.push(a, 3);
  BOOST_REQUIRE(heap.valid());
  BOOST_TEST(heap.top().node() == &c);
  heap.remove(c);
  BOOST_TEST(heap.top().node() == &b);
  heap.remove(b);
  BOOST_TEST(heap.top().node() == &a);
  heap.remove(a);
  BOOST_TEST(heap.empty());
}

BOOST_AUTO_TEST_CASE(relocated_nodes_keep_their_place_and_can_be_removed) {
  std::mt19937_64 rng(21);
  harness<std::int64_t, 4> h(0);
  for (int i = 0; i < 500; ++i) h.push(std::uniform_int_distribution<std::int64_t>(0, 50)(rng));
  for (int i = 0; i < 2000; ++i) {
    h.relocate(h.any(rng));
    if (i % 100 == 0) h.check_every_key();
  }
  h.check();
  h.check_every_key();
  for (int i = 0; i < 250; ++i) h.remove(h.any(rng));
  h.check();
  h.check_every_key();
  std::pair<std::int64_t, std::uint64_t> last{-1, 0};
  while (h.size() > 0) {
    const auto popped = h.pop();
    BOOST_REQUIRE(last < popped);
    last = popped;
  }
}

BOOST_AUTO_TEST_CASE(remove_of_the_last_entry_and_of_the_top_keep_the_heap_valid) {
  deadline_heap<std::int64_t> heap;
  std::vector<heap_node> nodes(64);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].seq = static_cast<std::uint32_t>(i);
    heap.push(nodes[i], static_cast<std::int64_t>(nodes.size() - i));
  }
  BOOST_REQUIRE(heap.valid());
  // The last entry in the array.
  heap_node* last = heap.at(heap.size() - 1).node();
  heap.remove(*last);
  BOOST_TEST(!last->in_heap());
  BOOST_REQUIRE(heap.valid());
  std::int64_t previous = 0;
  while (!heap.empty()) {
    heap_node* top = heap.top().node();
    BOOST_REQUIRE(heap.top().key >= previous);
    previous = heap.top().key;
    heap.remove(*top);
    BOOST_REQUIRE(!top->in_heap());
    BOOST_REQUIRE(heap.valid());
  }
}

BOOST_AUTO_TEST_CASE(valid_detects_a_broken_heap) {
  // The checks above rely on valid(); it must see a wrong position and a wrong order.
  deadline_heap<std::int64_t, 2> heap;
  std::vector<heap_node> nodes(8);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].seq = static_cast<std::uint32_t>(i);
    heap.push(nodes[i], static_cast<std::int64_t>(i));
  }
  BOOST_REQUIRE(heap.valid());
  heap_node* last = heap.at(heap.size() - 1).node();
  const std::uint32_t saved = last->position;
  last->position = 0;
  BOOST_TEST(!heap.valid());
  last->position = saved;
  BOOST_REQUIRE(heap.valid());
  // A child keyed earlier than its parent, written behind the heap's back.
  heap_node& child = *heap.at(1).node();
  const_cast<std::int64_t&>(heap.key_of(child)) = -1;
  BOOST_TEST(!heap.valid());
  heap.rekey(child, 100);  // a proper re-key repairs it
  BOOST_TEST(heap.valid());
}

BOOST_AUTO_TEST_CASE(drain_visits_every_node_once_and_empties_the_heap) {
  deadline_heap<std::int64_t> heap;
  std::vector<heap_node> nodes(100);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].seq = static_cast<std::uint32_t>(i);
    heap.push(nodes[i], static_cast<std::int64_t>(i % 7));
  }
  std::multiset<heap_node*> seen;
  heap.drain([&](heap_node& n) {
    BOOST_REQUIRE(!n.in_heap());
    BOOST_REQUIRE(!n.parked());
    seen.insert(&n);
  });
  BOOST_TEST(heap.empty());
  BOOST_TEST(heap.size() == 0u);
  BOOST_REQUIRE_EQUAL(seen.size(), nodes.size());
  for (heap_node& n : nodes) BOOST_TEST(seen.count(&n) == 1u);
  BOOST_TEST(heap.valid());
}

BOOST_AUTO_TEST_CASE(node_positions_say_whether_it_is_in_the_heap_or_parked) {
  heap_node n;
  BOOST_TEST(!n.in_heap());
  BOOST_TEST(!n.parked());
  deadline_heap<std::int64_t> heap;
  heap.push(n, 1);
  BOOST_TEST(n.in_heap());
  BOOST_TEST(!n.parked());
  heap.remove(n);
  BOOST_TEST(!n.in_heap());
  n.position = heap_node::parked_flag | 5u;
  BOOST_TEST(!n.in_heap());
  BOOST_TEST(n.parked());
}

BOOST_AUTO_TEST_CASE(an_untracked_node_is_neither_in_the_heap_by_position_nor_parked) {
  // Its position says only that the heap holds it somewhere: a sleep's unschedule() must never find it.
  heap_node n;
  deadline_heap<std::int64_t> heap;
  heap.push(n, 1, false);
  BOOST_TEST(n.position == heap_node::untracked);
  BOOST_TEST(!n.in_heap());
  BOOST_TEST(!n.parked());
  BOOST_TEST(!heap.top().tracked());
  BOOST_TEST(heap.top().node() == &n);
  heap.pop();
  BOOST_TEST(n.position == heap_node::nowhere);
  BOOST_TEST(heap.empty());
}

BOOST_AUTO_TEST_CASE(random_operations_agree_with_the_model_with_untracked_nodes) {
  // Untracked nodes leave only through pop(); the tracked ones around them are removed, re-keyed and moved.
  run_random_model<int_keys, 4>(8, 0, 40);
  run_random_model<time_point_keys, 4>(9, 0, 70);
  run_random_model<int_keys, 2>(10, 0, 50);
  run_random_model<int_keys, 4>(12, (std::uint64_t{1} << 31) - 10000, 50);
}

BOOST_AUTO_TEST_CASE(sifts_never_write_an_untracked_nodes_position) {
  // The point of untracked nodes: the heap leaves their memory alone until pop() or drain().
  deadline_heap<std::int64_t> heap;
  std::vector<heap_node> tracked(200), untracked(200);
  for (std::size_t i = 0; i < untracked.size(); ++i) {
    untracked[i].seq = static_cast<std::uint32_t>(2 * i);
    heap.push(untracked[i], static_cast<std::int64_t>((i * 37) % 101), false);
    tracked[i].seq = static_cast<std::uint32_t>(2 * i + 1);
    heap.push(tracked[i], static_cast<std::int64_t>((i * 53) % 103));
  }
  for (std::size_t i = 0; i < tracked.size(); i += 2) heap.remove(tracked[i]);
  for (std::size_t i = 1; i < tracked.size(); i += 2) heap.rekey(tracked[i], static_cast<std::int64_t>(i % 13));
  BOOST_REQUIRE(heap.valid());
  for (const heap_node& n : untracked) BOOST_REQUIRE_EQUAL(n.position, heap_node::untracked);
  // valid() sees an untracked node given a position behind the heap's back.
  untracked[7].position = 0;
  BOOST_TEST(!heap.valid());
  untracked[7].position = heap_node::untracked;
  BOOST_REQUIRE(heap.valid());
  std::size_t popped = 0;
  std::int64_t previous = 0;
  while (!heap.empty()) {
    BOOST_REQUIRE(heap.top().key >= previous);
    previous = heap.top().key;
    heap_node* top = heap.top().node();
    heap.pop();
    BOOST_REQUIRE_EQUAL(top->position, heap_node::nowhere);
    BOOST_REQUIRE(heap.valid());
    ++popped;
  }
  BOOST_TEST(popped == untracked.size() + tracked.size() / 2);
}

BOOST_AUTO_TEST_CASE(drain_resets_untracked_nodes_too) {
  deadline_heap<std::int64_t> heap;
  std::vector<heap_node> nodes(50);
  for (std::size_t i = 0; i < nodes.size(); ++i) heap.push(nodes[i], static_cast<std::int64_t>(i % 5), i % 2 == 0);
  std::multiset<heap_node*> seen;
  heap.drain([&](heap_node& n) {
    BOOST_REQUIRE_EQUAL(n.position, heap_node::nowhere);
    seen.insert(&n);
  });
  BOOST_REQUIRE_EQUAL(seen.size(), nodes.size());
  for (heap_node& n : nodes) {
    BOOST_TEST(seen.count(&n) == 1u);  // the untracked ones by their own address, not a tagged one
    BOOST_TEST(n.position == heap_node::nowhere);
  }
  BOOST_TEST(heap.empty());
}

// The operation cache (op_memory.hpp) keeps at most its budget, however many blocks a burst frees: each
// block it keeps may pin a page after the burst (bench/burst_rss.cpp measures it).
BOOST_AUTO_TEST_CASE(operation_cache_keeps_at_most_its_budget) {
  using tock::detail::op_memory;
  std::vector<void*> blocks;
  for (int i = 0; i < 10000; ++i) blocks.push_back(op_memory::allocate(40 + 16 * (i % 4)));
  const std::size_t before = op_memory::cached_bytes();
  for (std::size_t i = 0; i < blocks.size(); ++i) op_memory::deallocate(blocks[i], 40 + 16 * (i % 4));
  BOOST_TEST(op_memory::cached_bytes() <= op_memory::budget);
  if (TOCK_OP_MEMORY_CACHE) BOOST_TEST(op_memory::cached_bytes() > before);  // it does cache (not under ASan)
  BOOST_TEST(op_memory::budget <= 16u * 1024u);
  // What it kept is reused first.
  const std::size_t kept = op_memory::cached_bytes();
  void* p = op_memory::allocate(40);
  if (TOCK_OP_MEMORY_CACHE) BOOST_TEST(op_memory::cached_bytes() < kept);
  op_memory::deallocate(p, 40);
}

// A cache filled by one kind of operation (a burst of sleeps) gives way to the kind in use now (timed
// requests): else each of those would be a malloc and a free for good (the timeouts bench found it).
BOOST_AUTO_TEST_CASE(operation_cache_gives_way_to_the_kind_in_use) {
  using tock::detail::op_memory;
  if (!TOCK_OP_MEMORY_CACHE) return;  // no cache under ASan: nothing to give way
  auto burst = [](std::size_t bytes, int n) {
    std::vector<void*> blocks;
    for (int i = 0; i < n; ++i) blocks.push_back(op_memory::allocate(bytes));
    for (void* b : blocks) op_memory::deallocate(b, bytes);
  };
  burst(200, 2000);  // fills the budget with 200-byte blocks
  const std::size_t full = op_memory::cached_bytes();
  BOOST_TEST(full + 200 > op_memory::budget);
  burst(40, 100);  // 40-byte operations, now the ones in use
  BOOST_TEST(op_memory::cached_bytes() <= op_memory::budget);
  // 100 of them are kept: each allocation of 40 bytes is served from the cache.
  const std::size_t before = op_memory::cached_bytes();
  std::vector<void*> again;
  for (int i = 0; i < 100; ++i) again.push_back(op_memory::allocate(40));
  BOOST_TEST(before - op_memory::cached_bytes() == 100u * 40u);
  for (void* b : again) op_memory::deallocate(b, 40);
  BOOST_TEST(op_memory::cached_bytes() == before);
  // Only blocks of the class being freed: the cache keeps what it has and frees the rest.
  burst(40, 2000);
  BOOST_TEST(op_memory::cached_bytes() <= op_memory::budget);
  BOOST_TEST(op_memory::cached_bytes() + 40 > op_memory::budget);
}

BOOST_AUTO_TEST_SUITE_END()
