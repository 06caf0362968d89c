// tock/detail/op_memory.hpp: where operations live when their handler names no allocator of its own.
#ifndef TOCK_DETAIL_OP_MEMORY_HPP
#define TOCK_DETAIL_OP_MEMORY_HPP

#include <tock/detail/sanitizers.hpp>

#include <cstddef>
#include <cstdint>
#include <new>

// Under AddressSanitizer the cache is off, so that a use of a freed operation is reported rather than
// hidden by a recycled block.
#ifndef TOCK_OP_MEMORY_CACHE
#define TOCK_OP_MEMORY_CACHE (!TOCK_ASAN)
#endif

namespace tock::detail {

// A thread-local cache of freed operation blocks, by size class. Two things Asio's recycling allocator does
// not do: it keeps many blocks (timers are cancelled and restarted in batches, which a cache of two blocks per
// thread cannot absorb), and it adds no tag byte (Asio's turns a 32-byte operation into a 48-byte request, a
// 64-byte malloc chunk). Classes are malloc's own chunk payloads (24, 40, 56... bytes), so a block costs
// exactly one chunk. A block freed on another thread joins that thread's cache.
//
// What it keeps is bounded by `budget`, and each cached block may pin a page that malloc_trim could otherwise
// return (after a burst of connections, the blocks lie scattered among the pages the connections used). 16 KiB:
// a burst of 2,000 connections leaves 0.86 MB resident instead of 3.4 MB with 128 KiB, for more malloc calls
// when one batch frees more than the budget (churn; bench/burst_rss.cpp, both measured in bench/README.md).
class op_memory {
 public:
  static constexpr std::size_t largest = 248;        // larger blocks go straight to operator new
  static constexpr std::size_t budget = 16 * 1024;   // bytes a thread keeps cached, all classes together

  // Bytes this thread's cache holds, for tests. O(1).
  static std::size_t cached_bytes() noexcept {
    const cache* k = local();
    return k != nullptr ? k->bytes : 0;
  }

  static void* allocate(std::size_t bytes) {
    if (bytes <= largest) {
      const std::size_t c = class_of(bytes);
      if (cache* k = local()) {
        if (block* b = k->free[c]) {
          k->free[c] = b->next;
          k->bytes -= payload(c);
          return b;
        }
      }
      return ::operator new(payload(c));
    }
    return ::operator new(bytes);
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (bytes <= largest) {
      const std::size_t c = class_of(bytes);
      cache* k = local();
      if (k != nullptr && (k->bytes + payload(c) <= budget || k->make_room(c))) {
        block* b = static_cast<block*>(p);
        b->next = k->free[c];
        k->free[c] = b;
        k->bytes += payload(c);
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  struct block {
    block* next;
  };
  static constexpr std::size_t classes = (largest + 8) / 16;

  struct cache {
    block* free[classes] = {};
    std::size_t bytes = 0;

    // A full cache gives way to the class being freed now: blocks of other classes go back to malloc, the
    // largest first, until this one fits. Without it a cache filled by one kind of operation (a burst of
    // sleeps) would turn every later kind (each timed request) into a malloc and a free for good. False if
    // only blocks of class c are cached: the cache already holds what is in use. O(classes) per evicted block.
    bool make_room(std::size_t c) noexcept {
      std::size_t victim = classes;
      while (bytes + payload(c) > budget) {
        while (victim > 0 && (victim - 1 == c || free[victim - 1] == nullptr)) --victim;
        if (victim == 0) return false;
        block* b = free[victim - 1];
        free[victim - 1] = b->next;
        bytes -= payload(victim - 1);
        ::operator delete(b);
      }
      return true;
    }
    ~cache() {
      dead() = true;
      for (block*& head : free)
        while (block* b = head) {
          head = b->next;
          ::operator delete(b);
        }
    }
  };

  // Payloads of malloc chunks are 16n + 8 bytes: class c holds blocks of 16c + 24 bytes.
  static constexpr std::size_t class_of(std::size_t bytes) noexcept { return bytes <= 24 ? 0 : (bytes - 9) / 16; }
  static constexpr std::size_t payload(std::size_t c) noexcept { return 16 * c + 24; }

  static bool& dead() noexcept {
    static thread_local bool is_dead = false;  // trivially destructible: readable during thread exit
    return is_dead;
  }

  // Null once the thread's cache is destroyed (blocks freed later by other thread_local destructors), and
  // always without the cache.
  static cache* local() noexcept {
    if (!TOCK_OP_MEMORY_CACHE || dead()) return nullptr;
    static thread_local cache k;
    return &k;
  }
};

// The allocator of operations whose handler has none of its own.
template <typename T>
class op_allocator {
 public:
  using value_type = T;

  op_allocator() noexcept = default;
  template <typename U>
  op_allocator(const op_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    else
      return static_cast<T*>(op_memory::allocate(n * sizeof(T)));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p, std::align_val_t(alignof(T)));
    else
      op_memory::deallocate(p, n * sizeof(T));
  }

  template <typename U>
  bool operator==(const op_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace tock::detail

#endif
