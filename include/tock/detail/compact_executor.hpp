// tock/detail/compact_executor.hpp: how a timer object keeps its executor in fewer bytes.
#ifndef TOCK_DETAIL_COMPACT_EXECUTOR_HPP
#define TOCK_DETAIL_COMPACT_EXECUTOR_HPP

#include <tock/config.hpp>

#include <new>
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
// executor (8 bytes). That one is kept as it is; any other goes to the heap. A timer holding it shrinks by
// 40 bytes, and its waits find the io_context's executor without a type-erased call.
template <>
class compact_executor<asio::any_io_executor> {
  using any = asio::any_io_executor;
  using io = asio::io_context::executor_type;

 public:
  explicit compact_executor(const any& ex) { assign(ex); }

  template <typename Other>
  explicit compact_executor(const compact_executor<Other>& other) {
    assign(any(other.get()));
  }

  // A copy holds the same executor; a boxed one is copied into a new box (one allocation).
  compact_executor(const compact_executor& other) { copy(other); }

  compact_executor& operator=(const compact_executor& other) {
    if (this != &other) {
      compact_executor tmp(other);  // may throw (a new box): leaves *this as it was
      reset();
      take(tmp);
    }
    return *this;
  }

  compact_executor(compact_executor&& other) noexcept { take(other); }

  compact_executor& operator=(compact_executor&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }

  ~compact_executor() { reset(); }

  any get() const noexcept {
    switch (kind_) {
      case kind::io: return any(io_);
      case kind::boxed: return *boxed_;
      default: return any();
    }
  }

  template <typename F>
  decltype(auto) with(F&& f) const {
    switch (kind_) {
      case kind::io: return std::forward<F>(f)(io_);
      case kind::boxed: return std::forward<F>(f)(*boxed_);
      default: return std::forward<F>(f)(any());
    }
  }

 private:
  enum class kind : unsigned char { empty, io, boxed };

  void assign(const any& ex) {
    if (const io* e = ex.target<io>()) {
      ::new (static_cast<void*>(&io_)) io(*e);
      kind_ = kind::io;
    } else if (ex) {
      boxed_ = new any(ex);
      kind_ = kind::boxed;
    }
  }

  void copy(const compact_executor& other) {
    if (other.kind_ == kind::io) {
      ::new (static_cast<void*>(&io_)) io(other.io_);
      kind_ = kind::io;
    } else if (other.kind_ == kind::boxed) {
      boxed_ = new any(*other.boxed_);
      kind_ = kind::boxed;
    }
  }

  // A moved-from holder is empty, as a moved-from any_io_executor is.
  void take(compact_executor& other) noexcept {
    if (other.kind_ == kind::io) {
      ::new (static_cast<void*>(&io_)) io(other.io_);
      kind_ = kind::io;
      other.reset();
    } else if (other.kind_ == kind::boxed) {
      boxed_ = other.boxed_;
      kind_ = kind::boxed;
      other.kind_ = kind::empty;
    }
  }

  void reset() noexcept {
    if (kind_ == kind::io)
      io_.~io();
    else if (kind_ == kind::boxed)
      delete boxed_;
    kind_ = kind::empty;
  }

  union {
    io io_;
    any* boxed_ = nullptr;  // initialised so that GCC 12 at -O1/-O2 does not take a boxed move for a read of io_
  };
  kind kind_ = kind::empty;
};

}  // namespace tock::detail

#endif
