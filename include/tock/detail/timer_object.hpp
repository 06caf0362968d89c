// tock/detail/timer_object.hpp: what tock::basic_timer and tock::basic_deadline hold, and what they share.
#ifndef TOCK_DETAIL_TIMER_OBJECT_HPP
#define TOCK_DETAIL_TIMER_OBJECT_HPP

#include <tock/config.hpp>
#include <tock/detail/compact_executor.hpp>
#include <tock/error.hpp>
#include <tock/timer_service.hpp>

#include <utility>

namespace tock::detail {

// The service, the executor and the timer node of a timer or a deadline (a deadline_node, with its link), as
// Asio's io_object_impl is for its I/O objects. `Reset` is the expiry of a new object and of a moved-from one:
// time_point() for a timer (as Asio's), time_point::max() (never) for a deadline. The owner is not shared between
// threads without synchronisation (as for Asio's objects).
template <typename Clock, typename WaitTraits, typename Executor,
          typename Node = typename basic_timer_service<Clock, WaitTraits>::implementation_type>
class timer_object {
 public:
  using service_type = basic_timer_service<Clock, WaitTraits>;
  using time_point = typename Clock::time_point;
  using implementation_type = Node;

  // On `ex`'s io_context, expiring at `expiry`. O(1) after the first use of the context.
  // Its slack is the service's default.
  timer_object(const Executor& ex, const time_point& expiry) : service_(&service_type::of(ex)), executor_(ex) {
    service_->construct(impl_);
    impl_.set_expiry(expiry);
  }

  // Takes over `other`'s expiry and waits; `other` keeps its service and executor (a copy) and gets expiry
  // `reset`, as a new object. O(waits).
  template <typename Executor1>
  timer_object(timer_object<Clock, WaitTraits, Executor1, Node>&& other, const time_point& reset)
      : service_(other.service_), executor_(other.executor_) {
    service_->move_construct(impl_, other.impl_, reset);
  }

  // Aborts this object's waits, then takes over `other`'s, as a move construction. The executor is copied
  // first (a boxed one may throw) so that a throw changes nothing.
  template <typename Executor1>
  void assign(timer_object<Clock, WaitTraits, Executor1, Node>&& other, const time_point& reset) {
    if (static_cast<void*>(this) == static_cast<void*>(&other)) return;
    compact_executor<Executor> ex(other.executor_);
    service_->destroy(impl_);
    other.service_->move_construct(impl_, other.impl_, reset);
    service_ = other.service_;
    executor_ = std::move(ex);
  }

  ~timer_object() { service_->destroy(impl_); }
  timer_object(const timer_object&) = delete;
  timer_object& operator=(const timer_object&) = delete;

  Executor get_executor() const noexcept { return executor_.get(); }
  service_type& service() const noexcept { return *service_; }
  implementation_type& impl() noexcept { return impl_; }
  const implementation_type& impl() const noexcept { return impl_; }

  // Starts a wait for the expiry: void(error_code).
  template <typename WaitToken>
  auto async_wait(WaitToken&& token) {
    return asio::async_initiate<WaitToken, void(error_code)>(initiate_async_wait(this), token);
  }

 private:
  template <typename, typename, typename, typename>
  friend class timer_object;

  class initiate_async_wait {
   public:
    using executor_type = Executor;

    explicit initiate_async_wait(timer_object* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_.get(); }

    template <typename WaitHandler>
    void operator()(WaitHandler&& handler) const {
      self_->executor_.with(
          [&](const auto& ex) { self_->service_->async_wait(self_->impl_, std::forward<WaitHandler>(handler), ex); });
    }

   private:
    timer_object* self_;
  };

  service_type* service_;  // next to impl_'s expiry: a later move reads both (see timer_node)
  implementation_type impl_;
  compact_executor<Executor> executor_;
};

}  // namespace tock::detail

#endif
