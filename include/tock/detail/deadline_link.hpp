// tock/detail/deadline_link.hpp: a deadline's first bound operation, attached and withdrawn without the lock.
#ifndef TOCK_DETAIL_DEADLINE_LINK_HPP
#define TOCK_DETAIL_DEADLINE_LINK_HPP

#include <tock/detail/timer_node.hpp>
#include <tock/detail/wait_op.hpp>

#include <atomic>
#include <cstdint>

namespace tock::detail {

// The ground rules, written once here; timer_queue.hpp, timer_service.hpp and timed_op.hpp rely on them.
//
// A server binds one operation at a time to each of its deadlines (a read, then the next read), and the
// operation nearly always completes first. So a deadline keeps one bound operation in its link, attached by
// the deadline's owner and withdrawn by the operation's completion, neither of them taking the service's
// lock; an operation bound while another is attached goes to the deadline's ring under the lock, as a wait.
//
// 1. The link is one word: the address of a bound entry (a timed_op's wait_op) or null, and two bits. It holds
//    the entry's reference (timed_op): the one the service holds for a ring's entry. An entry the link holds
//    leaves it in one of two ways. Claimed under the lock (it fired, was cancelled, its deadline goes away,
//    shutdown), it is taken out with that reference, as a ring's entry would be. Withdrawn (its operation
//    completed first), it stays until the owner lets go of it (op_action::unlink): when it attaches the next
//    entry in its place, or when the deadline goes away. The owner alone lets go, so the service never frees
//    an operation on its own thread, and nothing it reads under the lock is freed meanwhile (rule 5).
// 2. Whether the entry is attached is the entry's own state (wait_op::link_state), because the deadline may
//    move while its operation completes: the completion never touches the deadline. It withdraws with one
//    compare-and-swap (attached -> withdrawn); a claim swaps attached -> claimed. Exactly one of them wins.
// 3. Not `unpinned`: the deadline's node is in the heap, with a key no later than its latest time (for a
//    deadline an earlier move re-keys at once, even without waits: timer_queue::move_expiry), or parked (at
//    max()). The owner may then attach with one compare-and-swap of the word: null or a withdrawn entry ->
//    the new one. `unpinned`: the node is in neither, and the owner takes the lock. The bit is set and
//    cleared under the lock, and set only while nothing is attached.
// 4. Attached entries are counted (link_count): the driver stays armed while one is (a deadline left in the
//    heap may be holding one), and the completion that brings the count back to zero disarms it under the
//    lock if nothing else waits, so that run() can return. The owner counts before it attaches; it attaches
//    without the lock only if others were counted before it *and* the count is `covered`: an owner that
//    attached under the lock armed the driver for the top (which every pinned node's key follows) and then
//    said so. Otherwise it takes the lock, arms, attaches and covers. So an owner that counted first and was
//    then refused (capacity, shutdown) leaves nobody unarmed: those that counted after it took the lock too.
//    The mark goes, under the lock, once the count is back to zero, at the latest when the driver is let go or
//    a batch ends unarmed (timer_driver.hpp): an owner that counts after the zero takes the lock.
// 5. Under the lock, whoever is not the owner (the driver, shutdown, a ring's entry leaving) reads the entry
//    through an `inspection`, which sets `busy` in the word for its length: an owner that finds it set takes
//    the lock (it waits for the inspection to end), so the entry it would let go of is not freed while read.
// 6. Without the lock, the owner reads nothing of the node but its link and its expiry (an atomic): the
//    ring's counters share words that the driver writes under the lock (wait_ring's `due` beside `has_link`),
//    so a deadline's node is known by its type (attach takes a deadline_node), never by reading has_link.
//
// 7. The link holds only entries of operations on the deadline's own context whose memory is tock's own
//    (wait_op::linkable). A withdrawn entry waits in the link for its owner, so an operation whose memory
//    is the user's (a handler's allocator of its own) would still hold it when its handler runs, against
//    Asio's rule that an operation's memory goes before the upcall; and an attached entry holds no work on
//    the deadline's context (its I/O operation does, on its own context). Such entries go to the ring under
//    the lock, as waits: their operation's completion takes them out, and a parked one holds the context's
//    work as any parked wait does.
// 8. An entry the driver claims whose cancellation runs on a foreign executor (wait_op::checked_at_run) leaves
//    the link for the ring's due prefix (link_state none again), as a timer's fired wait on a foreign executor
//    does, so that the deadline's destruction before that cancellation runs still reaches it (timed_op::settle).

// wait_op::link_state. `detached`: not a link's state but a mark, under the lock, on a bound entry that fired
// and waits in its deadline's ring for its cancellation to run on a foreign executor, when the deadline goes
// away meanwhile (timed_op::settle): that cancellation is then not emitted.
enum class link_state : std::uint8_t { none = 0, attached = 1, withdrawn = 2, claimed = 3, detached = 4 };

inline std::atomic_ref<std::uint8_t> link_state_of(wait_op& op) noexcept {
  return std::atomic_ref<std::uint8_t>(op.link_state);
}
// Whether the entry went to a deadline's link and is still in it, or was claimed from it (rule 8 returns a fired
// one to the ring: none again).
inline bool linked(wait_op& op) noexcept {
  const std::uint8_t s = link_state_of(op).load(std::memory_order_relaxed);
  return s != std::uint8_t(link_state::none) && s != std::uint8_t(link_state::detached);
}

// Rule 2, for `from` (attached) to `to`, on whichever side is swapping.
inline bool swap_link_state(wait_op& op, link_state to) noexcept {
  auto expected = std::uint8_t(link_state::attached);
  return link_state_of(op).compare_exchange_strong(expected, std::uint8_t(to), std::memory_order_acq_rel);
}

// The completion's side: true if it took the entry out (it was attached, rule 2). Lock-free.
inline bool withdraw(wait_op& op) noexcept { return swap_link_state(op, link_state::withdrawn); }

class deadline_link {
 public:
  deadline_link() = default;
  deadline_link(const deadline_link&) = delete;
  deadline_link& operator=(const deadline_link&) = delete;

  // --- The owner's side.

  // Attaches `op` (not yet published; an entry of the deadline's service) without the lock; false (nothing
  // changed) if the owner must take it: the node is unpinned, or inspected, or an entry is attached already.
  // On success, `replaced` is the withdrawn entry it let go of (the caller unlinks it), or null.
  bool try_attach(wait_op& op, wait_op*& replaced) noexcept {
    std::uintptr_t w = word_.load(std::memory_order_acquire);
    if ((w & (unpinned_bit | busy_bit)) != 0) return false;
    wait_op* old = entry_of(w);
    if (old != nullptr && is_attached(*old)) return false;
    link_state_of(op).store(std::uint8_t(link_state::attached), std::memory_order_relaxed);
    if (!word_.compare_exchange_strong(w, address(op), std::memory_order_acq_rel, std::memory_order_acquire)) {
      op.link_state = std::uint8_t(link_state::none);
      return false;
    }
    replaced = old;
    return true;
  }

  // Under the lock, by the owner: whether an entry is attached, and the same attachment with the node
  // placed (pinned) by the caller; `replaced` as above. Requires !attached().
  bool attached() const noexcept {
    const wait_op* op = entry_of(word_.load(std::memory_order_acquire));
    return op != nullptr && is_attached(*op);
  }
  void attach_locked(wait_op& op, wait_op*& replaced) noexcept {
    link_state_of(op).store(std::uint8_t(link_state::attached), std::memory_order_relaxed);
    replaced = entry_of(word_.exchange(address(op), std::memory_order_acq_rel));
  }

  // Under the lock, by the owner, once anything attached was claimed: what is left (a withdrawn entry, for
  // the caller to unlink), the link left unpinned, as a new deadline's.
  wait_op* release() noexcept { return entry_of(word_.exchange(unpinned_bit, std::memory_order_acq_rel)); }

  // Under the lock: the moved-to deadline takes the moved-from one's link; `from` is left as new.
  void take_from(deadline_link& from) noexcept {
    word_.store(from.word_.exchange(unpinned_bit, std::memory_order_acq_rel), std::memory_order_release);
  }

  // --- Under the lock, by anyone (rule 5).

  class inspection {
   public:
    explicit inspection(deadline_link& link) noexcept : link_(link), word_(link.word_.load(std::memory_order_acquire)) {
      while (!link_.word_.compare_exchange_weak(word_, word_ | busy_bit, std::memory_order_acquire)) {
      }
    }
    ~inspection() { link_.word_.store(word_, std::memory_order_release); }
    inspection(const inspection&) = delete;
    inspection& operator=(const inspection&) = delete;

    bool attached() const noexcept { return entry() != nullptr && is_attached(*entry()); }
    bool pinned() const noexcept { return (word_ & unpinned_bit) == 0; }
    // Takes the attached entry out (rule 1), or null if none is attached.
    wait_op* claim() noexcept {
      wait_op* op = entry();
      if (op == nullptr || !swap_link_state(*op, link_state::claimed)) return nullptr;
      word_ &= unpinned_bit;
      return op;
    }
    // The node left the heap and the parked list. Requires !attached().
    void unpin() noexcept { word_ |= unpinned_bit; }
    void pin() noexcept { word_ &= ~unpinned_bit; }

   private:
    wait_op* entry() const noexcept { return entry_of(word_); }
    deadline_link& link_;
    std::uintptr_t word_;
  };

 private:
  static constexpr std::uintptr_t unpinned_bit = 1, busy_bit = 2;
  static_assert(alignof(wait_op) > (unpinned_bit | busy_bit));

  static bool is_attached(const wait_op& op) noexcept {
    return std::atomic_ref<std::uint8_t>(const_cast<std::uint8_t&>(op.link_state)).load(std::memory_order_acquire) ==
           std::uint8_t(link_state::attached);
  }
  static wait_op* entry_of(std::uintptr_t w) noexcept {
    return reinterpret_cast<wait_op*>(w & ~(unpinned_bit | busy_bit));
  }
  static std::uintptr_t address(wait_op& op) noexcept { return reinterpret_cast<std::uintptr_t>(&op); }

  std::atomic<std::uintptr_t> word_{unpinned_bit};  // a new deadline's node is in no heap
};

// How many entries are attached to links, and how many were withdrawn (rule 4): the low half counts the
// first (its top bit is the `covered` mark), the high half the second modulo 2^32, so that a withdrawal is
// one atomic add; wraps of the high half are counted under the lock. Lock-free but where said.
class link_count {
 public:
  // Before an attachment: what the low half was (see may_attach_lock_free and attached_in).
  std::uint64_t attaching() noexcept { return word_.fetch_add(1, std::memory_order_acq_rel); }
  static bool may_attach_lock_free(std::uint64_t was) noexcept { return (was & count) != 0 && (was & covered) != 0; }
  static std::uint64_t attached_in(std::uint64_t was) noexcept { return was & count; }

  // Under the lock: an attachment made under it, with the driver armed for the top.
  void cover() noexcept {
    if ((word_.load(std::memory_order_relaxed) & covered) == 0) word_.fetch_or(covered, std::memory_order_acq_rel);
  }
  // Under the lock: an attachment that did not happen after all; a claimed entry.
  void not_attached() noexcept { leave_locked(); }
  void claimed() noexcept { leave_locked(); }
  // A withdrawn one: true if the caller must take the lock (the count reached zero, or the high half wrapped:
  // it then calls wrapped() and idle() under it).
  bool withdrawn(bool& wrapped) noexcept {
    const std::uint64_t was = word_.fetch_add(high_one - 1, std::memory_order_acq_rel);
    wrapped = (was >> 32) == 0xFFFF'FFFFu;
    return (was & count) == 1 || wrapped;
  }
  void wrapped() noexcept { wraps_ += 1; }
  // Under the lock: the mark goes once nothing is attached (an owner counting meanwhile takes the lock).
  void idle() noexcept {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    if ((w & count) == 0 && (w & covered) != 0) word_.fetch_and(~covered, std::memory_order_acq_rel);
  }

  std::uint64_t attached() const noexcept { return word_.load(std::memory_order_acquire) & count; }
  bool covered_attached() const noexcept {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    return (w & count) != 0 && (w & covered) != 0;
  }
  // For stats(), under the lock: attached now, and withdrawn in all.
  void read(std::uint64_t& attached, std::uint64_t& withdrawn) const noexcept {
    const std::uint64_t w = word_.load(std::memory_order_acquire);
    attached = w & count;
    withdrawn = (wraps_ << 32) + (w >> 32);
  }

 private:
  void leave_locked() noexcept {
    if ((word_.fetch_sub(1, std::memory_order_acq_rel) & count) == 1) idle();
  }
  static constexpr std::uint64_t count = 0x7FFF'FFFFu, covered = 0x8000'0000u, high_one = std::uint64_t(1) << 32;
  std::atomic<std::uint64_t> word_{0};
  std::uint64_t wraps_ = 0;  // under the lock
};

// A deadline's entry in its service: a timer's (one heap slot, a ring of waits) and its link.
template <typename TimePoint>
struct deadline_node : timer_node<TimePoint> {
  deadline_link link;

  deadline_node() noexcept { this->ring.has_link = 1; }

  // The link of a deadline's node. Requires t.ring.has_link. The address goes through an empty asm: GCC
  // cannot see that callers check has_link first, and would warn of an access past a timer's node.
  static deadline_link& of(timer_node<TimePoint>& t) noexcept {
    deadline_node* d = static_cast<deadline_node*>(&t);
    asm("" : "+r"(d));
    return d->link;
  }

  // What the queue asks of any timer's node, under the lock (rule 5), for a deadline's: the node entered the
  // heap or the parked list (pinned: rule 3); it may leave them once it has no waits and nothing is attached
  // (unpinned then: false, nothing changed, while an entry is attached); whether an entry is attached
  // (requires has_link); whether the link is pinned, as it must be while the node is placed.
  static void pin(timer_node<TimePoint>& t) noexcept {
    if (t.ring.has_link) deadline_link::inspection(of(t)).pin();
  }
  static bool may_leave(timer_node<TimePoint>& t) noexcept {
    if (!t.ring.has_link) return true;
    deadline_link::inspection held(of(t));
    if (held.attached()) return false;
    held.unpin();
    return true;
  }
  static bool attached(timer_node<TimePoint>& t) noexcept { return deadline_link::inspection(of(t)).attached(); }
  static bool pinned(timer_node<TimePoint>& t) noexcept {
    return !t.ring.has_link || deadline_link::inspection(of(t)).pinned();
  }
};

}  // namespace tock::detail

#endif
