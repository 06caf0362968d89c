// tock/detail/timed_handler.hpp: the handler that an operation started with tock::timeout or bind() completes.
#ifndef TOCK_DETAIL_TIMED_HANDLER_HPP
#define TOCK_DETAIL_TIMED_HANDLER_HPP

#include <tock/config.hpp>

#include <utility>

namespace tock::detail {

// The handler an operation started with tock::timeout or bind() completes. Its cancellation slot is the
// deadline's; its executor and allocator are those of the user's handler.
// Its allocator is kept in the handler itself: Asio frees an operation that failed to start through the
// allocator of the handler it moved from.
template <typename Op>
class timed_handler {
 public:
  using cancellation_slot_type = asio::cancellation_slot;
  using allocator_type = asio::associated_allocator_t<typename Op::handler_type>;

  explicit timed_handler(Op* op) noexcept : op_(op), alloc_(asio::get_associated_allocator(op->handler())) {}
  timed_handler(timed_handler&& other) noexcept : op_(std::exchange(other.op_, nullptr)), alloc_(other.alloc_) {}
  timed_handler& operator=(timed_handler&&) = delete;
  ~timed_handler() {
    if (op_ != nullptr) op_->abandon();
  }

  cancellation_slot_type get_cancellation_slot() const noexcept { return op_->operation_slot(); }
  allocator_type get_allocator() const noexcept { return alloc_; }
  const typename Op::handler_type& user_handler() const noexcept { return op_->handler(); }

  template <typename... Args>
  void operator()(Args&&... args) {
    std::exchange(op_, nullptr)->complete(std::forward<Args>(args)...);
  }

 private:
  Op* op_;
  [[no_unique_address]] allocator_type alloc_;
};

}  // namespace tock::detail

namespace TOCK_ASIO_NAMESPACE {

template <template <typename, typename> class Associator, typename Op, typename DefaultCandidate>
struct associator<Associator, tock::detail::timed_handler<Op>, DefaultCandidate> {
  using inner = typename Op::handler_type;
  using type = typename Associator<inner, DefaultCandidate>::type;

  static type get(const tock::detail::timed_handler<Op>& h) noexcept {
    return Associator<inner, DefaultCandidate>::get(h.user_handler());
  }

  static auto get(const tock::detail::timed_handler<Op>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<inner, DefaultCandidate>::get(h.user_handler(), c)) {
    return Associator<inner, DefaultCandidate>::get(h.user_handler(), c);
  }
};

}  // namespace TOCK_ASIO_NAMESPACE

#endif
