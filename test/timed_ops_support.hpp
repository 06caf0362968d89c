// Shared by the tests of timed operations (tock::timeout, tock::deadline::bind): a loopback socket pair,
// a recorder for I/O completions, a bounded coroutine runner, an operation that records the cancellation
// type emitted on it, and a handler that counts its destruction.
#ifndef TOCK_TEST_TIMED_OPS_SUPPORT_HPP
#define TOCK_TEST_TIMED_OPS_SUPPORT_HPP

#include "test_support.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace tock_test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using steady_clock = std::chrono::steady_clock;

// A connected TCP pair on 127.0.0.1. Nothing is sent unless a test writes, so a read on either end pends.
struct socket_pair {
  template <typename ExecutorOrContext>
  explicit socket_pair(ExecutorOrContext&& ex) : server(ex), client(ex) {
    tcp::acceptor acceptor(ex, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }

  tcp::socket server;
  tcp::socket client;
};

// What a void(error_code, std::size_t) handler made by record_io() saw.
struct io_result {
  int calls = 0;
  error_code ec;
  std::size_t bytes = 0;
  steady_clock::time_point at{};
};

inline auto record_io(io_result& r) {
  return [&r](const error_code& ec, std::size_t n) {
    ++r.calls;
    r.ec = ec;
    r.bytes = n;
    r.at = steady_clock::now();
  };
}

// Runs `f` (a callable returning asio::awaitable<void>) as a coroutine on `ctx` until the context runs out of
// work (bounded). True if the coroutine finished; rethrows what escaped it.
template <typename F>
bool run_coroutine(asio::io_context& ctx, F f) {
  bool done = false;
  std::exception_ptr escaped;
  asio::co_spawn(ctx, std::move(f), [&](std::exception_ptr e) {
    done = true;
    escaped = e;
  });
  run_until_idle(ctx);
  if (escaped) std::rethrow_exception(escaped);
  return done;
}

// An operation that supports every cancellation type and never completes by itself: it records the type
// emitted on its handler's slot, then completes with operation_aborted.
struct cancellation_record {
  int emitted = 0;
  asio::cancellation_type type = asio::cancellation_type::none;
};

template <typename Handler>
class recording_canceller {
 public:
  using executor_type = asio::io_context::executor_type;

  recording_canceller(Handler h, executor_type ex, cancellation_record* rec, asio::cancellation_slot slot)
      : handler_(std::move(h)), ex_(ex), rec_(rec), slot_(slot) {}

  void operator()(asio::cancellation_type type) {
    if (!handler_) return;
    ++rec_->emitted;
    rec_->type = type;
    asio::post(ex_, [h = std::move(*handler_), slot = slot_]() mutable {
      slot.clear();  // as Asio's operations do before completing
      std::move(h)(error_code(asio::error::operation_aborted));
    });
    handler_.reset();
  }

 private:
  std::optional<Handler> handler_;
  executor_type ex_;
  cancellation_record* rec_;
  asio::cancellation_slot slot_;
};

struct initiate_wait_for_cancellation {
  using executor_type = asio::io_context::executor_type;

  executor_type get_executor() const noexcept { return ex; }

  template <typename Handler>
  void operator()(Handler&& handler) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    BOOST_REQUIRE(slot.is_connected());
    slot.template emplace<recording_canceller<std::decay_t<Handler>>>(std::forward<Handler>(handler), ex, rec, slot);
  }

  executor_type ex;
  cancellation_record* rec;
};

template <typename Token>
auto async_wait_for_cancellation(asio::io_context& ctx, cancellation_record& rec, Token&& token) {
  return asio::async_initiate<Token, void(error_code)>(initiate_wait_for_cancellation{ctx.get_executor(), &rec}, token);
}

// Counts what happens to the handlers made from it: every live handler holds a copy of `token`, a moved-from
// one holds none.
struct probe {
  std::shared_ptr<int> token = std::make_shared<int>(0);
  int invoked = 0;
  int destroyed = 0;  // live handlers destroyed

  long alive() const { return token.use_count() - 1; }
};

class tracked_handler {
 public:
  explicit tracked_handler(probe& p) : probe_(&p), token_(p.token) {}
  tracked_handler(tracked_handler&& other) noexcept : probe_(other.probe_), token_(std::move(other.token_)) {}
  tracked_handler& operator=(tracked_handler&&) = delete;
  ~tracked_handler() {
    if (token_) ++probe_->destroyed;
  }

  template <typename... Args>
  void operator()(Args&&...) {
    ++probe_->invoked;
  }

 private:
  probe* probe_;
  std::shared_ptr<int> token_;
};

// An io_context whose shutdown (what its destructor does first) can be run while I/O objects still exist, so
// that they can be destroyed before the context object, as they must be.
class shutdown_context : public asio::io_context {
 public:
  void shut_down() { shutdown(); }
};

}  // namespace tock_test

#endif
