// tock/timer_stats.hpp: what a timer service has done, as a snapshot (basic_timer_service::stats()).
#ifndef TOCK_TIMER_STATS_HPP
#define TOCK_TIMER_STATS_HPP

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tock {

/// A consistent snapshot of one service's counters, taken under its lock. Until the context shuts down, every
/// accepted wait, sleep or timed operation's entry is pending, or ended exactly once as fired, aborted or
/// withdrawn: started == fired + aborted + withdrawn + pending (shutdown destroys what is pending uncounted).
struct timer_stats {
  /// Waits, sleeps and timed operations' entries accepted.
  std::uint64_t started = 0;
  /// Completed because their time came (a timed operation's entry: the operation timed out).
  std::uint64_t fired = 0;
  /// Completed with operation_aborted (cancel, reset, destruction, a cancellation slot).
  std::uint64_t aborted = 0;
  /// Timed operations' entries taken out because their operation ended first.
  std::uint64_t withdrawn = 0;
  /// Not accepted: capacity_exceeded.
  std::uint64_t refused = 0;
  /// Expiries moved later (or kept) without the lock or the heap: deadlines pushed back, periodic timers'
  /// next ticks; counted without an atomic add, so pushes from several threads at once may undercount.
  std::uint64_t lazy_extensions = 0;
  /// Heap re-keys: a lazily extended key that surfaced (a periodic tick's, each tick), an earlier move or
  /// slack, a new wait on a timer left behind.
  std::uint64_t rekeys = 0;
  ///@{
  /// Pending now, and the most pending at once: the highest count any start saw, itself included (exact on one
  /// thread; a deadline's operation bound without the lock reads the count without it).
  std::size_t pending = 0;
  std::size_t peak_pending = 0;
  ///@}
  ///@{
  /// The driver's Asio timer (re-)armed; fired while still the current arming; and such wake-ups that
  /// completed nothing (they only re-keyed lazy keys, the price of lazy extension, or dropped timers left
  /// without waits).
  std::uint64_t driver_arms = 0;
  std::uint64_t wakeups = 0;
  std::uint64_t empty_wakeups = 0;
  ///@}

  /// Lateness of each firing (the batch's time - the deadline), in log-spaced buckets: bucket 0 holds 0 ns,
  /// bucket b >= 1 holds [2^(b-1), 2^b) ns. Every firing is sampled, including a wait cancelled after it fired
  /// (then counted aborted, not fired), so the buckets may sum to more than `fired`.
  std::array<std::uint64_t, 64> lateness_buckets{};
  /// The largest lateness of a firing.
  std::chrono::nanoseconds max_lateness{0};

  /// The lateness that a fraction `q` (0..1) of fired entries did not exceed, as the upper bound of its
  /// bucket (within a factor of 2; never above max_lateness). O(64).
  std::chrono::nanoseconds lateness_quantile(double q) const noexcept {
    q = q > 0 ? (q < 1 ? q : 1) : 0;  // a NaN too: 0
    std::uint64_t total = 0;
    for (std::uint64_t n : lateness_buckets) total += n;
    if (total == 0) return std::chrono::nanoseconds(0);
    // The nearest rank: the ceil(q * total)-th smallest, at least the first.
    const double exact = q * static_cast<double>(total);
    auto rank = static_cast<std::uint64_t>(exact);
    if (static_cast<double>(rank) < exact) ++rank;
    if (rank == 0) rank = 1;
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < lateness_buckets.size(); ++b) {
      seen += lateness_buckets[b];
      if (seen >= rank) {
        const std::chrono::nanoseconds upper(b == 0 ? 0 : (b >= 63 ? INT64_MAX : (std::int64_t(1) << b) - 1));
        return upper < max_lateness ? upper : max_lateness;
      }
    }
    return max_lateness;
  }
  /// The books balance: every accepted wait is pending or ended once (see above). O(1).
  bool balanced() const noexcept { return started == fired + aborted + withdrawn + pending; }

  ///@{
  /// The median and the 99th percentile lateness: lateness_quantile(0.5) and (0.99). O(64).
  std::chrono::nanoseconds p50() const noexcept { return lateness_quantile(0.5); }
  std::chrono::nanoseconds p99() const noexcept { return lateness_quantile(0.99); }
  ///@}

  /// The bucket of a lateness. O(1).
  static std::size_t bucket_of(std::chrono::nanoseconds late) noexcept {
    return late.count() <= 0 ? 0 : static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(late.count())));
  }
};

}  // namespace tock

#endif
