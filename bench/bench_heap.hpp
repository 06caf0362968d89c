// bench/bench_heap.hpp: the floor. A bare 4-ary min-heap of {int64 deadline, uint32 id} with an index array
// (position of each id), no event loop, no locking, no handlers: what scheduling, cancelling and firing cost
// when nothing but the data structure is paid for.
#ifndef TOCK_BENCH_HEAP_HPP
#define TOCK_BENCH_HEAP_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

class bare_heap {
 public:
  static constexpr std::uint32_t nowhere = 0xFFFF'FFFFu;

  struct entry {
    std::int64_t deadline;
    std::uint32_t id;
  };

  // Ids are 0..max_ids-1. Reserves everything up front (default-constructed: reserve() before the first push).
  bare_heap() = default;
  explicit bare_heap(std::size_t max_ids) { reserve(max_ids); }

  void reserve(std::size_t max_ids) {
    pos_.assign(max_ids, nowhere);
    entries_.reserve(max_ids);
  }

  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }
  const entry& top() const noexcept { return entries_.front(); }
  bool contains(std::uint32_t id) const noexcept { return pos_[id] != nowhere; }

  void push(std::uint32_t id, std::int64_t deadline) {
    entries_.push_back(entry{deadline, id});
    sift_up(entries_.size() - 1);
  }

  void pop() noexcept { remove_at(0); }

  void remove(std::uint32_t id) noexcept { remove_at(pos_[id]); }

  void rekey(std::uint32_t id, std::int64_t deadline) noexcept {
    const std::size_t i = pos_[id];
    entries_[i].deadline = deadline;
    if (i > 0 && deadline < entries_[(i - 1) / 4].deadline)
      sift_up(i);
    else
      sift_down(i);
  }

 private:
  void remove_at(std::size_t i) noexcept {
    pos_[entries_[i].id] = nowhere;
    const std::size_t last = entries_.size() - 1;
    if (i == last) {
      entries_.pop_back();
      return;
    }
    entries_[i] = entries_[last];
    entries_.pop_back();
    if (i > 0 && entries_[i].deadline < entries_[(i - 1) / 4].deadline)
      sift_up(i);
    else
      sift_down(i);
  }

  void place(std::size_t i, const entry& e) noexcept {
    entries_[i] = e;
    pos_[e.id] = static_cast<std::uint32_t>(i);
  }

  void sift_up(std::size_t i) noexcept {
    const entry moving = entries_[i];
    while (i > 0) {
      const std::size_t p = (i - 1) / 4;
      if (!(moving.deadline < entries_[p].deadline)) break;
      place(i, entries_[p]);
      i = p;
    }
    place(i, moving);
  }

  void sift_down(std::size_t i) noexcept {
    const entry moving = entries_[i];
    const std::size_t n = entries_.size();
    for (;;) {
      const std::size_t first = i * 4 + 1;
      if (first >= n) break;
      const std::size_t end = first + 4 < n ? first + 4 : n;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < end; ++c)
        if (entries_[c].deadline < entries_[best].deadline) best = c;
      if (!(entries_[best].deadline < moving.deadline)) break;
      place(i, entries_[best]);
      i = best;
    }
    place(i, moving);
  }

  std::vector<entry> entries_;
  std::vector<std::uint32_t> pos_;
};

}  // namespace bench

#endif
