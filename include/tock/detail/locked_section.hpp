// tock/detail/locked_section.hpp: the lock of a timer service call that takes waits out, and what that call
// owes once it lets the lock go.
#ifndef TOCK_DETAIL_LOCKED_SECTION_HPP
#define TOCK_DETAIL_LOCKED_SECTION_HPP

#include <tock/detail/futex_mutex.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/wait_op.hpp>

#include <mutex>
#include <type_traits>
#include <utility>

namespace tock::detail {

// Once the call is done it lets the driver go if no wait is left in the heap and the parked work if none is
// parked, unlocks, posts the drain of the completions the call deferred, and only then drops the parked work:
// were the context's work count to reach zero first, it would stop with those completions still queued.
// Aborted bound operations of deadlines are not queued but cancelled after the unlock, on this thread, or
// detached if their deadline goes (timed_op::on_entry says why). Service: a basic_timer_service (a friend).
template <typename Service>
class locked_section {
 public:
  explicit locked_section(Service& s) : service_(s), lock_(s.core_->mutex()) {}
  locked_section(Service& s, std::unique_lock<futex_mutex>& held) noexcept : service_(s), lock_(std::move(held)) {}
  locked_section(const locked_section&) = delete;
  locked_section& operator=(const locked_section&) = delete;
  ~locked_section() {
    service_.driver_.disarm_if_idle_locked();
    if (service_.queue_.parked_waits() == 0) service_.idle_work_ = std::move(service_.parked_work_);
    auto idle = std::move(service_.idle_work_);
    service_.check_locked();
    lock_.unlock();
    if (drain_) service_.core_->post_drain();
    if (!bound_.empty()) service_.core_->run_now(bound_.take_all(), detach_);
  }

  // The waits taken out are those of a deadline going away: its bound operations are detached.
  void detach_bound() noexcept { detach_ = true; }
  bool detaching() const noexcept { return detach_; }

  template <typename Op>
  void defer(Op& op, deferred how = deferred::aborted) noexcept {
    if constexpr (std::is_same_v<Op, wait_op>) {
      if (op.bound && how == deferred::aborted) {
        ++(detach_ ? service_.core_->stats_locked().withdrawn : service_.core_->stats_locked().aborted);
        bound_.push_back(op, how);
        return;
      }
    }
    drain_ |= service_.core_->defer_locked(op, how);
  }

 private:
  Service& service_;
  std::unique_lock<futex_mutex> lock_;
  bool drain_ = false;
  bool detach_ = false;
  deferred_queue bound_;  // aborted bound operations, cancelled (or detached, if detach_) once unlocked
};

}  // namespace tock::detail

#endif
