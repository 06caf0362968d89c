// Shared by the tests of timed operations (tock::timeout, tock::deadline::bind): a loopback socket pair,
// recorders for I/O completions, a bounded coroutine runner, an operation that records the cancellation
// type emitted on it, a handler that counts its destruction, and for timed_ops_test: the two adapters behind
// one interface (with_deadline, with_timeout), the macros that run a case with each, the prelude of a pending
// read, a tally of outcomes, and the steps of virtual time.
#ifndef TOCK_TEST_TIMED_OPS_SUPPORT_HPP
#define TOCK_TEST_TIMED_OPS_SUPPORT_HPP

#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/deadline.hpp>
#include <tock/manual_clock.hpp>
#include <tock/timeout.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace tock_test {

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

// What a void(error_code, std::size_t) handler made by record_io() saw (`at` in real time, `virtual_at` on
// tock::manual_clock).
struct io_result {
  int calls = 0;
  error_code ec;
  std::size_t bytes = 0;
  steady_clock::time_point at{};
  tock::manual_clock::time_point virtual_at{};
};

inline auto record_io(io_result& r) {
  return [&r](const error_code& ec, std::size_t n) {
    ++r.calls;
    r.ec = ec;
    r.bytes = n;
    r.at = steady_clock::now();
    r.virtual_at = tock::manual_clock::now();
  };
}

// record_io(r), then `then()`: what a case also does when the operation completes (cancel a reference timer,
// look at the service). One handler type for all such cases, so each operation is compiled once for it.
inline auto record_io_then(io_result& r, std::function<void()> then) {
  return [&r, then = std::move(then)](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    then();
  };
}

// Virtual time (tock::manual_clock): what waits on it completes only when the case moves it, so a case can
// check that nothing completed before a deadline and that it completed at the very advance that reached it.

// The smallest step of the manual clock: `t - tick` is the last moment before `t`.
inline constexpr tock::manual_clock::duration tick{1};

// run_until_idle(ctx), for a context that settle() or advance_to() may have left stopped.
inline bool rerun_until_idle(asio::io_context& ctx) {
  ctx.restart();
  return run_until_idle(ctx);
}

// Runs `ctx` until `done()`, for no longer than `limit`: for real I/O, which completes in real time, while a
// virtual wait still pending keeps `ctx` from running out of work. True if done().
inline bool run_until(asio::io_context& ctx, const std::function<bool()>& done,
                      steady_clock::duration limit = std::chrono::seconds(5)) {
  ctx.restart();
  const auto end = steady_clock::now() + limit;
  while (!done() && !ctx.stopped() && steady_clock::now() < end) ctx.run_one_until(end);
  return done();
}

// Runs `f` as a coroutine on `ctx` until the context runs out of work (bounded). True if the coroutine
// finished; rethrows what escaped it. With `meanwhile`, that is called once what the coroutine can do at once
// is done (to move virtual time). (std::functions, so that co_spawn is compiled once, not per case.)
inline bool run_coroutine(asio::io_context& ctx, std::function<asio::awaitable<void>()> f,
                          const std::function<void()>& meanwhile = nullptr) {
  bool done = false;
  std::exception_ptr escaped;
  asio::co_spawn(ctx, std::move(f), [&](std::exception_ptr e) {
    done = true;
    escaped = e;
  });
  if (meanwhile) {
    settle(ctx);
    meanwhile();
    ctx.restart();
  }
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

// The two adapters, behind one interface: `A limit(ex_or_ctx, d)` or `A limit(ctx, t)` sets the limit,
// `limit.bind(token[, type])` makes the token of an operation it bounds, `limit.expires_after(d)` sets it for
// the operations bound next, and no bound operation may time out before `limit.not_before()`. On `Clock`:
// tock::manual_clock (virtual time) for most cases, steady_clock for those where real time is the point.

// tock::basic_deadline: one movable deadline, set when the adapter is made, for every operation bound to it.
template <typename Clock>
struct with_deadline {
  using clock = Clock;
  static constexpr bool is_deadline = true;

  template <typename ExecutorOrContext>
  with_deadline(ExecutorOrContext& ex, typename Clock::duration d) : deadline(ex, d) {}
  with_deadline(asio::io_context& ctx, typename Clock::time_point t) : deadline(ctx.get_executor(), t) {}

  template <typename Token>
  auto bind(Token&& token) {
    return deadline.bind(std::forward<Token>(token));
  }
  template <typename Token>
  auto bind(Token&& token, asio::cancellation_type type) {
    return deadline.bind(std::forward<Token>(token), type);
  }

  void expires_after(typename Clock::duration d) { deadline.expires_after(d); }
  typename Clock::time_point not_before() const { return deadline.expiry(); }

  tock::basic_deadline<Clock> deadline;
};

// tock::timeout<Clock>(d, token), or tock::timeout_at(t, token) when made with a time point: a deadline per
// operation, `d` after its initiation (so not before `d` after the first bind(), which comes first; in virtual
// time, exactly then, as the clock does not move between the two).
template <typename Clock>
struct with_timeout {
  using clock = Clock;
  static constexpr bool is_deadline = false;

  template <typename ExecutorOrContext>
  with_timeout(ExecutorOrContext&, typename Clock::duration d) : after_(d) {}
  with_timeout(asio::io_context&, typename Clock::time_point t) : at_(t) {}

  template <typename Token>
  auto bind(Token&& token) {
    if (!after_) return tock::timeout_at(at_, std::forward<Token>(token));
    note_bind();
    return tock::timeout<Clock>(*after_, std::forward<Token>(token));
  }
  template <typename Token>
  auto bind(Token&& token, asio::cancellation_type type) {
    if (!after_) return tock::timeout_at(at_, std::forward<Token>(token), type);
    note_bind();
    return tock::timeout<Clock>(*after_, std::forward<Token>(token), type);
  }

  void expires_after(typename Clock::duration d) {
    after_ = d;
    first_bind_.reset();
  }
  typename Clock::time_point not_before() const { return after_ ? first_bind_.value() + *after_ : at_; }

 private:
  void note_bind() {
    if (!first_bind_) first_bind_ = Clock::now();
  }

  std::optional<typename Clock::duration> after_;
  typename Clock::time_point at_{};
  std::optional<typename Clock::time_point> first_bind_;
};

// An empty fixture, for TIMED_OPS_CASE.
struct no_fixture {};

// The prelude of most cases: a context and a socket pair whose server end reads into `buf` (`read(token)`)
// and records into `r`. Nothing is sent unless the case writes, so the read pends.
struct pending_read {
  asio::io_context ctx;
  socket_pair s{ctx};
  std::array<char, 16> buf{};
  io_result r;

  template <typename Token>
  auto read(Token&& token) {
    return s.server.async_read_some(asio::buffer(buf), std::forward<Token>(token));
  }
};

// How operations raced against their deadline completed: success, timed_out or anything else (a bug).
struct tally {
  int succeeded = 0;
  int timeouts = 0;
  int other = 0;

  // A void(error_code) handler that counts its call in `calls[k]` and its outcome here.
  auto count(std::vector<int>& calls, std::size_t k) {
    return [this, &calls, k](const error_code& ec) {
      ++calls[k];
      if (!ec)
        ++succeeded;
      else if (ec == timed_out)
        ++timeouts;
      else
        ++other;
    };
  }
};

// A void(error_code) handler that does nothing.
inline void do_nothing(const error_code&) {}

}  // namespace tock_test

// A case that both adapters pass: the body that follows runs with `A` = with_deadline<Clock> as the case
// <suite>/deadline/NAME, and with `A` = with_timeout<Clock> as <suite>/timeout/NAME, in a `Fixture` made for
// each run (its members are the body's). As BOOST_FIXTURE_TEST_CASE_TEMPLATE, but as plain cases in a
// sub-suite per adapter: the names stay short, and the suite compiles about a fifth faster (a template case
// costs some 0.2 s of -O3 compile time per type for its registration alone; a plain case, a third of that).
// Each case runs on one clock only, so that its operations are compiled once per adapter, not per clock too.
#define TIMED_OPS_FIXTURE_CASE_ON(Clock, name, Fixture)                                \
  template <typename A>                                                                \
  struct name##_spec : Fixture {                                                       \
    void run();                                                                        \
  };                                                                                   \
  BOOST_AUTO_TEST_SUITE(deadline)                                                      \
  BOOST_AUTO_TEST_CASE(name) { name##_spec<tock_test::with_deadline<Clock>>().run(); } \
  BOOST_AUTO_TEST_SUITE_END()                                                          \
  BOOST_AUTO_TEST_SUITE(timeout)                                                       \
  BOOST_AUTO_TEST_CASE(name) { name##_spec<tock_test::with_timeout<Clock>>().run(); }  \
  BOOST_AUTO_TEST_SUITE_END()                                                          \
  template <typename A>                                                                \
  void name##_spec<A>::run()

// In virtual time (tock::manual_clock): the case moves time itself.
#define TIMED_OPS_FIXTURE_CASE(name, Fixture) TIMED_OPS_FIXTURE_CASE_ON(tock::manual_clock, name, Fixture)
#define TIMED_OPS_CASE(name) TIMED_OPS_FIXTURE_CASE(name, tock_test::no_fixture)

// On steady_clock, in real time: for the few cases whose point is real time. Each says why. (The others run
// on manual_clock even when no deadline passes, so that a file compiles its operations for one clock only.)
#define TIMED_OPS_STEADY_FIXTURE_CASE(name, Fixture) TIMED_OPS_FIXTURE_CASE_ON(std::chrono::steady_clock, name, Fixture)
#define TIMED_OPS_STEADY_CASE(name) TIMED_OPS_STEADY_FIXTURE_CASE(name, tock_test::no_fixture)

#endif
