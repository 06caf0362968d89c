// tock/detail/compact_executor.hpp: how a timer object keeps its executor in fewer bytes.
#ifndef TOCK_DETAIL_COMPACT_EXECUTOR_HPP
#define TOCK_DETAIL_COMPACT_EXECUTOR_HPP

#include <tock/config.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tock::detail {

// Holds an executor of type Executor; get() returns a copy, with() calls a function with the executor in
// the most specific type it has. In general it is simply the executor.
template <typename Executor>
class compact_executor {
 public:
  explicit compact_executor(const Executor& ex) : ex_(ex) {}

  // From a holder of another executor type that converts to this one.
  template <typename Other>
  explicit compact_executor(const compact_executor<Other>& other) : ex_(other.get()) {}

  Executor get() const noexcept { return ex_; }

  template <typename F>
  decltype(auto) with(F&& f) const {
    return std::forward<F>(f)(ex_);
  }

 private:
  Executor ex_;
};

// asio::any_io_executor is 56 bytes of type-erased storage, almost always holding an io_context's own
// executor. That one is kept as one word: its context's address, with its two runtime properties
// (blocking.never, relationship.continuation) in the low bits that the context's alignment leaves free, and
// rebuilt through Asio's require/prefer when asked for; any other executor goes to the heap, its box's address
// tagged with `boxed_bit`. A timer holding it shrinks by 48 bytes, and its waits find the io_context's executor
// without a type-erased call.
// A partial specialization (constrained), not an explicit one: its members are then instantiated where they are
// used, rather than in every translation unit that includes this header (any_io_executor's constructors are
// among the costliest templates Asio has to compile).
template <typename Executor>
  requires std::is_same_v<Executor, asio::any_io_executor>
class compact_executor<Executor> {
  using any = asio::any_io_executor;
  using io = asio::io_context::executor_type;

 public:
  explicit compact_executor(const any& ex) { assign(ex); }

  template <typename Other>
  explicit compact_executor(const compact_executor<Other>& other) {
    assign(any(other.get()));
  }

  // A copy holds the same executor; a boxed one is copied into a new box (one allocation).
  compact_executor(const compact_executor& other) { word_ = other.is_boxed() ? box(*other.boxed()) : other.word_; }

  compact_executor& operator=(const compact_executor& other) {
    if (this != &other) {
      compact_executor tmp(other);  // may throw (a new box): leaves *this as it was
      reset();
      word_ = std::exchange(tmp.word_, 0);
    }
    return *this;
  }

  // A moved-from holder is empty, as a moved-from any_io_executor is.
  compact_executor(compact_executor&& other) noexcept : word_(std::exchange(other.word_, 0)) {}

  compact_executor& operator=(compact_executor&& other) noexcept {
    if (this != &other) {
      reset();
      word_ = std::exchange(other.word_, 0);
    }
    return *this;
  }

  ~compact_executor() { reset(); }

  any get() const noexcept {
    if (is_boxed()) return *boxed();
    return word_ != 0 ? any(io_executor()) : any();
  }

  template <typename F>
  decltype(auto) with(F&& f) const {
    if (is_boxed()) return std::forward<F>(f)(*boxed());
    if (word_ != 0) return std::forward<F>(f)(io_executor());
    return std::forward<F>(f)(any());
  }

 private:
  static constexpr std::uintptr_t never_bit = 1, continuation_bit = 2, boxed_bit = 4;
  static_assert(alignof(asio::io_context) > (never_bit | continuation_bit) && alignof(any) > boxed_bit);

  bool is_boxed() const noexcept { return (word_ & boxed_bit) != 0; }
  any* boxed() const noexcept { return reinterpret_cast<any*>(word_ & ~boxed_bit); }
  static std::uintptr_t box(const any& ex) { return reinterpret_cast<std::uintptr_t>(new any(ex)) | boxed_bit; }

  void assign(const any& ex) {
    if (const io* e = ex.target<io>()) {
      word_ = reinterpret_cast<std::uintptr_t>(&e->context());
      if (asio::query(*e, asio::execution::blocking) == asio::execution::blocking.never) word_ |= never_bit;
      if (asio::query(*e, asio::execution::relationship) == asio::execution::relationship.continuation)
        word_ |= continuation_bit;
    } else if (ex) {
      word_ = box(ex);
    }
  }

  io io_executor() const noexcept {
    io ex = reinterpret_cast<asio::io_context*>(word_ & ~(never_bit | continuation_bit))->get_executor();
    if ((word_ & never_bit) != 0) ex = asio::require(ex, asio::execution::blocking.never);
    if ((word_ & continuation_bit) != 0) ex = asio::prefer(ex, asio::execution::relationship.continuation);
    return ex;
  }

  void reset() noexcept {
    if (is_boxed()) delete boxed();
    word_ = 0;
  }

  std::uintptr_t word_ = 0;  // 0: empty, as a moved-from any_io_executor
};

}  // namespace tock::detail

#endif
