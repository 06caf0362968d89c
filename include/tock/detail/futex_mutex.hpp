// tock/detail/futex_mutex.hpp: the lock of a timer service, a futex word with a one-instruction fast path.
#ifndef TOCK_DETAIL_FUTEX_MUTEX_HPP
#define TOCK_DETAIL_FUTEX_MUTEX_HPP

#include <atomic>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tock::detail {

// A mutex for std::lock_guard / std::unique_lock. Uncontended, lock() is one compare-and-swap and unlock()
// one exchange: pthread_mutex_lock + unlock cost about 106 instructions per round trip (callgrind), and the
// firing loop takes the service's lock once per fired entry. Contended, it sleeps in the kernel as glibc's
// mutex does (no spinning: a holder may be in timerfd_settime for tens of microseconds). The word's states:
// 0 free, 1 held, 2 held with possible sleepers; unlock wakes one sleeper only from state 2 (Drepper,
// "Futexes Are Tricky", mutex 3). Not recursive; unlock() from a thread that does not hold it is undefined,
// as for std::mutex.
class futex_mutex {
 public:
  futex_mutex() noexcept = default;
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  void lock() noexcept {
    int expected = 0;
    if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
      lock_contended(expected);
  }

  bool try_lock() noexcept {
    int expected = 0;
    return word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (word_.exchange(0, std::memory_order_release) == 2) wake_one();
  }

 private:
  // Marks the word "held with sleepers" and sleeps until an exchange finds it free; the thread that gets
  // it that way leaves 2 behind, so its unlock wakes the next sleeper (at worst one spurious wake-up).
  [[gnu::noinline]] void lock_contended(int seen) noexcept {
    if (seen != 2) seen = word_.exchange(2, std::memory_order_acquire);
    while (seen != 0) {
      sleep_while_contended();
      seen = word_.exchange(2, std::memory_order_acquire);
    }
  }

#if defined(__linux__)
  // std::atomic<int> is a plain int here (lock-free, same size), which the futex calls take by address.
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
  int* address() noexcept { return reinterpret_cast<int*>(&word_); }
  // Returns at once if the word is no longer 2, on a wake-up, or spuriously: the caller retries.
  void sleep_while_contended() noexcept { ::syscall(SYS_futex, address(), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0); }
  void wake_one() noexcept { ::syscall(SYS_futex, address(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0); }
#else
  void sleep_while_contended() noexcept { word_.wait(2, std::memory_order_relaxed); }
  void wake_one() noexcept { word_.notify_one(); }
#endif

  std::atomic<int> word_{0};
};

}  // namespace tock::detail

#endif
