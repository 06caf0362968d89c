// tock/detail/block_pool.hpp: memory for tock's own Asio operations, so that paths that must not fail (a
// re-arm at the end of a batch, a post from a destructor) never allocate, and a periodic task's runs don't.
#ifndef TOCK_DETAIL_BLOCK_POOL_HPP
#define TOCK_DETAIL_BLOCK_POOL_HPP

#include <tock/detail/op_memory.hpp>

#include <cstddef>
#include <mutex>
#include <new>
#include <utility>

namespace tock::detail {

// The allocator of an operation whose memory comes from `Pool` (allocate(bytes), deallocate(p, bytes)),
// which must outlive it. Copies and rebinds share the pool and compare equal.
template <typename T, typename Pool>
class pool_allocator {
 public:
  using value_type = T;
  explicit pool_allocator(Pool& pool) noexcept : pool_(&pool) {}
  template <typename U>
  pool_allocator(const pool_allocator<U, Pool>& other) noexcept : pool_(other.pool_) {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "tock: an over-aligned operation");
    return static_cast<T*>(pool_->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { pool_->deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const pool_allocator<U, Pool>& other) const noexcept {
    return pool_ == other.pool_;
  }

 private:
  template <typename, typename>
  friend class pool_allocator;
  Pool* pool_;
};

// Blocks of one size on a free list. Asio frees an operation's memory before its upcall, so a handler that
// starts the next operation of its kind (the driver re-arming when it fires) finds the block its own
// operation just returned: with reserve() at the points that may throw, the others never allocate.
// Thread-safe (Asio frees operations on whichever thread runs them). Requests larger than block_size go to
// operator new; tests check that the service's operations fit (fallbacks()).
class block_pool {
 public:
  static constexpr std::size_t block_size = 256;

  block_pool() = default;
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  // Every block must have been returned (the operations are destroyed at the context's shutdown, before it
  // destroys the service that owns the pool).
  ~block_pool() {
    while (free_ != nullptr) ::operator delete(std::exchange(free_, free_->next));
  }

  // Makes sure `n` blocks are free. Throws std::bad_alloc, leaving the pool as it was (or larger). O(n).
  void reserve(std::size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (free_count_ < n) push_locked(::operator new(block_size));
  }

  // A free block, or one from operator new (which may throw std::bad_alloc). O(1).
  void* allocate(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (bytes > block_size) {
        ++fallbacks_;
      } else if (free_ != nullptr) {
        --free_count_;
        return std::exchange(free_, free_->next);
      }
    }
    return ::operator new(bytes <= block_size ? block_size : bytes);
  }

  // Keeps up to max_free blocks for reuse. O(1), never throws.
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (bytes <= block_size) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_count_ < max_free) {
        push_locked(p);
        return;
      }
    }
    ::operator delete(p);
  }

  // Requests that were too large for a block, for tests. O(1).
  std::size_t fallbacks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fallbacks_;
  }

  // The allocator an operation's handler associates, so that Asio takes the operation's memory from here.
  template <typename T>
  using allocator = pool_allocator<T, block_pool>;

 private:
  // Enough for every operation a burst of re-arms leaves queued on a busy context to come back, without
  // keeping a burst's worth forever.
  static constexpr std::size_t max_free = 16;

  struct free_block {
    free_block* next;
  };

  void push_locked(void* p) noexcept {
    free_ = ::new (p) free_block{free_};
    ++free_count_;
  }

  mutable std::mutex mutex_;
  free_block* free_ = nullptr;
  std::size_t free_count_ = 0;
  std::size_t fallbacks_ = 0;
};

// One block that a periodic task's wait and its runner's post take in turn. A task has one or the other at
// a time, and each is freed before the next is allocated (tock and Asio free an operation before its
// upcall), so a run allocates nothing whichever threads run the host and the executor (a per-thread cache
// would not do: on a pool, memory taken on one thread is freed on the other). A larger request, or one
// while the block is taken, goes to tock's per-thread cache. Used by one thread at a time, in turn.
class run_memory {
 public:
  void* allocate(std::size_t bytes) {
    if (bytes > sizeof(block_) || busy_) return op_memory::allocate(bytes);
    busy_ = true;
    return block_;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    if (p == block_)
      busy_ = false;
    else
      op_memory::deallocate(p, bytes);
  }

 private:
  alignas(std::max_align_t) unsigned char block_[128];
  bool busy_ = false;
};

}  // namespace tock::detail

#endif
