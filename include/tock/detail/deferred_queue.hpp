// tock/detail/deferred_queue.hpp: the intrusive queue of a timer service's deferred completions.
#ifndef TOCK_DETAIL_DEFERRED_QUEUE_HPP
#define TOCK_DETAIL_DEFERRED_QUEUE_HPP

#include <tock/detail/wait_op.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tock::detail {

// How a deferred completion ends. Never zero: see deferred_queue.
enum class deferred : std::uint8_t { aborted = 1, capacity_exceeded = 2, fired = 3 };

// A first-in first-out queue of operations (timer waits and sleeps) linked through themselves, so that
// queueing never allocates. A link holds the next operation's address and, in the low bits its alignment
// leaves free, whether it is a sleep and how it completes (never zero, so that a queued timer wait, whose
// link sits in `next`, is told from one in a ring: ring links have those bits clear). Under the core's lock.
class deferred_queue {
 public:
  using link = std::uintptr_t;

  struct batch {
    link first = 0;  // 0: empty
    link last = 0;
  };

  bool empty() const noexcept { return head_.first == 0; }
  // How many are queued. O(1).
  std::size_t size() const noexcept { return size_; }
  void push_back(wait_op& op, deferred how) noexcept { push_back(make(&op, false, how)); }
  void push_back(sleep_entry& op, deferred how) noexcept { push_back(make(&op, true, how)); }

  batch take_all() noexcept {
    size_ = 0;
    return std::exchange(head_, batch{});
  }

  // Takes the oldest out: its link, or 0 if none is queued. O(1).
  link pop_front() noexcept {
    const link l = head_.first;
    if (l == 0) return 0;
    --size_;
    head_.first = l == head_.last ? 0 : next(l);
    if (head_.first == 0) head_.last = 0;
    return l;
  }

  // Puts `b` back in front of what is queued. O(size of b).
  void push_front(const batch& b) noexcept {
    if (b.first == 0) return;
    for (link l = b.first; l != 0; l = next_of(l, b)) ++size_;
    set_next(b.last, head_.first != 0 ? head_.first : end);
    if (head_.first == 0) head_.last = b.last;
    head_.first = b.first;
  }

  // The queued operation after `l` in its batch, or 0 after `last`.
  static link next_of(link l, const batch& b) noexcept { return l == b.last ? 0 : next(l); }

  static bool is_sleep(link l) noexcept { return (l & sleep_bit) != 0; }
  static deferred how(link l) noexcept { return static_cast<deferred>((l & kind_mask) >> 1); }
  static void* address(link l) noexcept { return reinterpret_cast<void*>(l & ~(sleep_bit | kind_mask)); }

 private:
  static constexpr link sleep_bit = 1;
  static constexpr link kind_mask = deferred_link_bits;
  static constexpr link end = link(deferred::aborted) << 1;  // after the last one: no address, kind bits set

  static_assert(alignof(wait_op) >= 8 && alignof(sleep_entry) >= 8);

  static link make(void* op, bool is_sleep, deferred how) noexcept {
    return reinterpret_cast<link>(op) | (is_sleep ? sleep_bit : 0) | (link(how) << 1);
  }

  static link next(link l) noexcept {
    if (is_sleep(l)) return static_cast<sleep_entry*>(address(l))->deferred_next;
    return reinterpret_cast<link>(static_cast<wait_op*>(address(l))->next);
  }

  static void set_next(link l, link to) noexcept {
    if (is_sleep(l))
      static_cast<sleep_entry*>(address(l))->deferred_next = to;
    else
      static_cast<wait_op*>(address(l))->next = reinterpret_cast<wait_op*>(to);
  }

  void push_back(link l) noexcept {
    ++size_;
    set_next(l, end);
    if (head_.first == 0)
      head_.first = l;
    else
      set_next(head_.last, l);
    head_.last = l;
  }

  batch head_;
  std::size_t size_ = 0;
};

}  // namespace tock::detail

#endif
