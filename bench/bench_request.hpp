// bench/bench_request.hpp: pending_request, the asynchronous operation of the timeouts workload: an operation
// that completes on demand (a stand-in for a server's read, with no socket, so that the workload measures the
// timer and not I/O).
//
// It behaves as an Asio I/O object's operation: async_wait(token) goes through asio::async_initiate with an
// initiation that exposes the object's executor (tock::timeout and a deadline's bind() find the service
// there); the handler is stored until complete() (success) or cancel() (operation_aborted, as closing a
// socket does), or until its cancellation slot is emitted (operation_aborted), which it installs a handler in
// as Asio's sockets do; the handler is then dispatched to its associated executor (by default the object's)
// with its associated allocator, so that a completion made inside the context's run() runs in place.
//
// The handler is kept in a buffer inside the object (no allocation of its own), so that the workload's
// allocation count is the timer system's; it costs every system the same.
#ifndef TOCK_BENCH_REQUEST_HPP
#define TOCK_BENCH_REQUEST_HPP

#include "bench_util.hpp"
#include "test_asio.hpp"

#include <tock/config.hpp>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace bench {

class pending_request {
 public:
  using executor_type = asio::io_context::executor_type;

  pending_request() = default;  // open(ctx) before the first async_wait
  pending_request(const pending_request&) = delete;
  pending_request& operator=(const pending_request&) = delete;
  // A pending handler is destroyed, not invoked (as Asio does at shutdown).
  ~pending_request() {
    if (finish_ != nullptr) finish_(*this, finish_how::destroy, error_code());
  }

  void open(asio::io_context& ctx) noexcept { ctx_ = &ctx; }
  executor_type get_executor() const noexcept { return ctx_->get_executor(); }
  bool pending() const noexcept { return finish_ != nullptr; }

  // Completes with void(error_code).
  template <typename Token>
  auto async_wait(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(initiation{this}, token);
  }

  // The operation succeeds / is aborted (operation_aborted); nothing if none is pending.
  void complete() {
    if (finish_ != nullptr) finish_(*this, finish_how::call, error_code());
  }
  void cancel() {
    if (finish_ != nullptr) finish_(*this, finish_how::call, asio::error::operation_aborted);
  }

 private:
  using error_code = sys::error_code;
  enum class finish_how { call, destroy };

  struct initiation {
    using executor_type = pending_request::executor_type;
    pending_request* self;
    executor_type get_executor() const noexcept { return self->get_executor(); }
    template <typename Handler>
    void operator()(Handler&& h) const {
      self->start(std::forward<Handler>(h));
    }
  };

  // In the handler's cancellation slot: any cancellation type aborts the operation.
  struct on_cancel {
    pending_request* self;
    void operator()(asio::cancellation_type type) {
      if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                   asio::cancellation_type::total)) != asio::cancellation_type::none)
        self->cancel();  // clears the slot, which destroys *this: nothing after it
    }
  };

  // The handler and its result, dispatched as one function object (with the handler's allocator bound).
  template <typename Handler>
  struct completion {
    Handler h;
    error_code ec;
    void operator()() { std::move(h)(ec); }
  };

  template <typename Handler>
  void start(Handler&& h) {
    using H = std::decay_t<Handler>;
    static_assert(sizeof(H) <= sizeof(buf_) && alignof(H) <= alignof(std::max_align_t),
                  "pending_request: the handler does not fit in its buffer");
    if (finish_ != nullptr) fail("pending_request: async_wait while an operation is pending");
    H* p = ::new (static_cast<void*>(buf_)) H(std::forward<Handler>(h));
    finish_ = &finish<H>;
    slot_ = asio::get_associated_cancellation_slot(*p);
    if (slot_.is_connected()) slot_.template emplace<on_cancel>(this);
  }

  template <typename H>
  static void finish(pending_request& self, finish_how how, const error_code& ec) {
    if (self.slot_.is_connected()) self.slot_.clear();
    self.slot_ = asio::cancellation_slot();
    H* p = std::launder(reinterpret_cast<H*>(self.buf_));
    H h(std::move(*p));
    p->~H();
    self.finish_ = nullptr;  // the handler may start the next operation
    if (how == finish_how::destroy) return;
    const auto ex = asio::get_associated_executor(h, self.get_executor());
    const auto alloc = asio::get_associated_allocator(h);
    asio::dispatch(ex, asio::bind_allocator(alloc, completion<H>{std::move(h), ec}));
  }

  asio::io_context* ctx_ = nullptr;
  void (*finish_)(pending_request&, finish_how, const error_code&) = nullptr;  // null: nothing pending
  asio::cancellation_slot slot_;
  alignas(std::max_align_t) unsigned char buf_[48];
};

}  // namespace bench

#endif
