// tock/detail/dispatching.hpp: what a runner whose dispatch failed tells the code that dispatched it.
#ifndef TOCK_DETAIL_DISPATCHING_HPP
#define TOCK_DETAIL_DISPATCHING_HPP

#include <exception>
#include <utility>

namespace tock::detail {

// Set by an operation asked to deliver (op_action::deliver) whose dispatch to its executor threw before
// taking it: the operation is left as it was, and the drain queues it again, ahead of the rest.
inline thread_local bool completion_kept = false;

// The operation a runner (a function object that owns it) is being dispatched for on this thread. Asio
// moves the function into wrappers of its own before it allocates, so a dispatch that cannot allocate
// destroys the runner while the exception unwinds; such a runner gives its operation back (give_back)
// instead of finishing it, and the dispatcher keeps it. Nested dispatches (a handler run in place that
// dispatches its own) save and restore it.
class dispatching {
 public:
  explicit dispatching(const void* op) noexcept : saved_(std::exchange(current_, op)) {}
  ~dispatching() { current_ = saved_; }
  dispatching(const dispatching&) = delete;
  dispatching& operator=(const dispatching&) = delete;

  // Called by a runner's destructor that still owns `op`: true if that is the failed dispatch of `op`.
  static bool give_back(const void* op) noexcept {
    if (op != current_ || std::uncaught_exceptions() == 0) return false;
    current_ = nullptr;
    return true;
  }
  // After the dispatch threw: whether the runner gave the operation back.
  bool given_back() const noexcept { return current_ == nullptr; }
  // Whether a runner is being dispatched on this thread (the fault-injection test tells tock's dispatches
  // from Asio's own with it).
  static bool active() noexcept { return current_ != nullptr; }

 private:
  inline static thread_local const void* current_ = nullptr;
  const void* saved_;
};

}  // namespace tock::detail

#endif
