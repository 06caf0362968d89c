// tock/detail/futex_mutex.hpp: the lock of a timer service, a futex word with a one-instruction fast path.
#ifndef TOCK_DETAIL_FUTEX_MUTEX_HPP
#define TOCK_DETAIL_FUTEX_MUTEX_HPP

#include <tock/detail/sanitizers.hpp>

#include <atomic>
#include <cerrno>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// Under ThreadSanitizer the lock says what it is, so that TSan still reports lock-order inversions and double
// locks through it, and names it in race reports.
#if TOCK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace tock::detail {

// A mutex for std::lock_guard / std::unique_lock. Uncontended, lock() is one compare-and-swap and unlock()
// one exchange: 11 instructions a pair against 66 for pthread_mutex_lock + unlock (callgrind, in a loop), and
// the firing loop takes the service's lock once per fired entry. Contended, it sleeps in the kernel as
// glibc's mutex does, with no spinning: a holder may be in timerfd_settime (about a microsecond, at times
// tens). The word's states: 0 free, 1 held, 2 held with possible sleepers; unlock wakes one sleeper only
// from state 2 (Drepper, "Futexes Are Tricky", mutex 3). Not recursive; unlock() from a thread that does not
// hold it is undefined, as for std::mutex. errno is left as it was.
class futex_mutex {
 public:
#if TOCK_TSAN
  futex_mutex() noexcept { __tsan_mutex_create(this, 0); }
  ~futex_mutex() { __tsan_mutex_destroy(this, 0); }
#else
  futex_mutex() noexcept = default;
#endif
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  void lock() noexcept {
    annotate_pre_lock(0);
    int expected = 0;
    if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
      lock_contended(expected);
    annotate_post_lock(0);
  }

  bool try_lock() noexcept {
    annotate_pre_lock(try_flag);
    int expected = 0;
    const bool locked =
        word_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
    annotate_post_lock(locked ? try_flag : try_flag | try_failed_flag);
    return locked;
  }

  void unlock() noexcept {
    annotate_pre_unlock();
    if (word_.exchange(0, std::memory_order_release) == 2) wake_one();
    annotate_post_unlock();
  }

 private:
  // Marks the word "held with sleepers" and sleeps until an exchange finds it free; the thread that gets
  // it that way leaves 2 behind, so its unlock wakes the next sleeper (at worst one spurious wake-up).
  [[gnu::noinline]] void lock_contended(int seen) noexcept {
    const int saved_errno = errno;  // the futex call may set it (EAGAIN, EINTR); pthread's lock never does
    if (seen != 2) seen = word_.exchange(2, std::memory_order_acquire);
    while (seen != 0) {
      sleep_while_contended();
      seen = word_.exchange(2, std::memory_order_acquire);
    }
    errno = saved_errno;
  }

#if defined(__linux__) && defined(SYS_futex)
  // The kernel reads the word through its address: std::atomic<int> must be a plain int in memory.
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && alignof(std::atomic<int>) == alignof(int) &&
                std::atomic<int>::is_always_lock_free);
  void* address() noexcept { return static_cast<void*>(&word_); }
  // Returns at once if the word is no longer 2, on a wake-up, on a signal, or spuriously: the caller retries.
  void sleep_while_contended() noexcept { ::syscall(SYS_futex, address(), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0); }
  void wake_one() noexcept { ::syscall(SYS_futex, address(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0); }
#else
  void sleep_while_contended() noexcept { word_.wait(2, std::memory_order_relaxed); }
  void wake_one() noexcept { word_.notify_one(); }
#endif

#if TOCK_TSAN
  static constexpr unsigned try_flag = __tsan_mutex_try_lock;
  static constexpr unsigned try_failed_flag = __tsan_mutex_try_lock_failed;
  void annotate_pre_lock(unsigned flags) noexcept { __tsan_mutex_pre_lock(this, flags); }
  void annotate_post_lock(unsigned flags) noexcept { __tsan_mutex_post_lock(this, flags, 0); }
  void annotate_pre_unlock() noexcept { __tsan_mutex_pre_unlock(this, 0); }
  void annotate_post_unlock() noexcept { __tsan_mutex_post_unlock(this, 0); }
#else
  static constexpr unsigned try_flag = 0, try_failed_flag = 0;
  void annotate_pre_lock(unsigned) noexcept {}
  void annotate_post_lock(unsigned) noexcept {}
  void annotate_pre_unlock() noexcept {}
  void annotate_post_unlock() noexcept {}
#endif

  std::atomic<int> word_{0};
};

}  // namespace tock::detail

#endif
