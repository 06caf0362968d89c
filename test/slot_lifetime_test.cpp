// Cancellation slots whose signal dies first. Asio never touches a slot after emplacing its handler, so a
// program may destroy a cancellation_signal while an operation bound to its slot is pending, and never emit
// it. tock must be as safe: the cases below destroy the signal, scribble over its memory (so that any later
// use of the slot crashes, in every build, not only under ASan), then let the wait fire, be cancelled, be
// destroyed or be dropped at shutdown. Templated cases run the same on Asio's type as the control.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock_test::completion;
using tock_test::error_code;
using tock_test::record;
using tock_test::run_until_idle;

using timer_types = boost::mpl::list<asio::steady_timer, tock::timer>;

// A cancellation_signal that can be killed: destroyed, then its memory overwritten with a pattern that is
// no valid pointer, so that a slot used after kill() faults at once.
class mortal_signal {
 public:
  mortal_signal() { ::new (static_cast<void*>(storage_)) asio::cancellation_signal(); }
  ~mortal_signal() {
    if (alive_) get().~cancellation_signal();
  }
  mortal_signal(const mortal_signal&) = delete;
  mortal_signal& operator=(const mortal_signal&) = delete;

  asio::cancellation_slot slot() { return get().slot(); }
  asio::cancellation_signal& get() { return *std::launder(reinterpret_cast<asio::cancellation_signal*>(storage_)); }

  void kill() {
    get().~cancellation_signal();
    alive_ = false;
    std::memset(storage_, 0xA5, sizeof storage_);
  }

 private:
  alignas(asio::cancellation_signal) unsigned char storage_[sizeof(asio::cancellation_signal)];
  bool alive_ = true;
};

// A handler that only counts its calls; put in a slot by the user, replacing the operation's.
struct user_handler {
  int* calls;
  void operator()(asio::cancellation_type) { ++*calls; }
};


}  // namespace

BOOST_AUTO_TEST_SUITE(slot_lifetime_test)

BOOST_AUTO_TEST_CASE(a_sleep_without_a_slot_is_untracked_in_the_heap_and_one_with_a_slot_is_tracked) {
  // Nothing can take a sleep without a slot out early, so the heap keeps no position for it
  // (detail/deadline_heap.hpp); one with a slot must be found again when its signal is emitted.
  asio::io_context ctx;
  tock_test::allocation_counts spy;
  const tock_test::counting_allocator<void> alloc(spy);
  std::vector<error_code> results;
  auto handler = [&](const error_code& ec) { results.push_back(ec); };
  const auto later = tock::timer::clock_type::now() + 1h;
  tock::async_sleep_until(ctx, later - 1min, asio::bind_allocator(alloc, handler));  // fills the heap's top
  tock::async_sleep_until(ctx, later, asio::bind_allocator(alloc, handler));
  BOOST_REQUIRE(spy.last_sleep_memory.load() != nullptr);
  BOOST_TEST(spy.last_sleep().node.position == tock::detail::heap_node::untracked);
  asio::cancellation_signal sig;
  spy.last_sleep_memory.store(nullptr);
  tock::async_sleep_until(ctx, later, asio::bind_cancellation_slot(sig.slot(), asio::bind_allocator(alloc, handler)));
  BOOST_REQUIRE(spy.last_sleep_memory.load() != nullptr);
  BOOST_TEST(spy.last_sleep().node.in_heap());
  sig.emit(asio::cancellation_type::terminal);
  ctx.poll();
  BOOST_REQUIRE_EQUAL(results.size(), 1u);
  BOOST_TEST(results[0] == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_whose_signal_died_is_cancelled, Timer, timer_types) {
  mortal_signal sig;
  asio::io_context ctx;
  Timer timer(ctx, 1h);
  completion c;
  timer.async_wait(asio::bind_cancellation_slot(sig.slot(), record(c)));
  sig.kill();
  BOOST_TEST(timer.cancel() == 1u);
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(c.ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_whose_signal_died_fires, Timer, timer_types) {
  mortal_signal sig;
  asio::io_context ctx;
  Timer timer(ctx, 1ms);
  completion c;
  timer.async_wait(asio::bind_cancellation_slot(sig.slot(), record(c)));
  sig.kill();
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_whose_signal_died_is_aborted_by_its_timers_destruction, Timer, timer_types) {
  mortal_signal sig;
  asio::io_context ctx;
  completion c;
  {
    Timer timer(ctx, 1h);
    timer.async_wait(asio::bind_cancellation_slot(sig.slot(), record(c)));
    sig.kill();
  }
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(c.ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_whose_signal_died_is_destroyed_at_shutdown, Timer, timer_types) {
  mortal_signal sig;
  tock_test::probe p;
  {
    tock_test::shutdown_context ctx;
    Timer timer(ctx, 1h);
    timer.async_wait(asio::bind_cancellation_slot(sig.slot(), tock_test::tracked_handler(p)));
    sig.kill();
    ctx.shut_down();
    BOOST_TEST(p.alive() == 0);
  }
  BOOST_TEST(p.invoked == 0);
  BOOST_TEST(p.destroyed == 1);
}

// The user may put another handler in the slot while the wait is pending; the operation must not clear it.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_handler_that_replaced_the_waits_in_its_slot_stays_there, Timer, timer_types) {
  asio::cancellation_signal sig;
  asio::io_context ctx;
  Timer timer(ctx, 1h);
  completion c;
  timer.async_wait(asio::bind_cancellation_slot(sig.slot(), record(c)));
  int user_calls = 0;
  sig.slot().emplace<user_handler>(user_handler{&user_calls});
  timer.cancel();
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(sig.slot().has_handler());
  sig.emit(asio::cancellation_type::terminal);
  BOOST_TEST(user_calls == 1);
}

// A wait that fired on one context and runs on a strand of another, after the first context is gone: its
// slot is cleared then, and nothing of the dead service may be touched.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_wait_run_on_another_context_after_its_own_is_gone_clears_its_slot, Timer, timer_types) {
  asio::cancellation_signal sig;
  asio::io_context other;
  completion c;
  {
    auto ctx = std::make_unique<asio::io_context>();
    Timer timer(*ctx, 1ms);
    timer.async_wait(
        asio::bind_cancellation_slot(sig.slot(), asio::bind_executor(asio::make_strand(other), record(c))));
    BOOST_TEST(run_until_idle(*ctx));  // fired: the handler is queued on `other`
  }
  BOOST_TEST(run_until_idle(other));
  BOOST_TEST(c.calls == 1);
  // tock's stronger rule: destroying the timer aborts a fired wait whose handler has not run yet.
  if constexpr (std::is_same_v<Timer, tock::timer>)
    BOOST_TEST(c.ec == asio::error::operation_aborted);
  else
    BOOST_TEST(!c.ec);
  // tock cleared the slot, so a stale emit finds nothing; Asio's handler, left in the slot, would reach into
  // its destroyed service.
  if constexpr (std::is_same_v<Timer, tock::timer>) {
    sig.emit(asio::cancellation_type::terminal);
    BOOST_TEST(!sig.slot().has_handler());
  }
}

// A read bound to a deadline (or under tock::timeout) completes on a strand of another context that outlives
// the read's own: its handler runs, or is destroyed, after the timer service is gone, and must not reach it.
// The control: the same read with Asio alone.
BOOST_AUTO_TEST_CASE(a_bound_read_run_on_another_context_after_its_own_is_gone) {
  asio::io_context other;
  tock_test::io_result deadline_read, timeout_read, plain_read;
  {
    auto ctx = std::make_unique<asio::io_context>();
    tock_test::socket_pair a(*ctx), b(*ctx), c(*ctx);
    std::array<char, 16> buf_c{};
    c.server.async_read_some(asio::buffer(buf_c),
                             asio::bind_executor(asio::make_strand(other), tock_test::record_io(plain_read)));
    asio::write(c.client, asio::buffer("x", 1));
    tock::deadline dl(*ctx, 30s);
    std::array<char, 16> buf_a{}, buf_b{};
    a.server.async_read_some(asio::buffer(buf_a), dl.bind(asio::bind_executor(asio::make_strand(other),
                                                                              tock_test::record_io(deadline_read))));
    b.server.async_read_some(
        asio::buffer(buf_b),
        tock::timeout(30s, asio::bind_executor(asio::make_strand(other), tock_test::record_io(timeout_read))));
    asio::write(a.client, asio::buffer("x", 1));
    asio::write(b.client, asio::buffer("x", 1));
    for (int i = 0; i < 100 && ctx->poll() > 0; ++i) {
    }
  }
  BOOST_TEST(run_until_idle(other));
  BOOST_TEST(plain_read.calls == 1);
  BOOST_TEST(!plain_read.ec);
  BOOST_TEST(deadline_read.calls == 1);
  BOOST_TEST(timeout_read.calls == 1);
  BOOST_TEST(!deadline_read.ec);
  BOOST_TEST(!timeout_read.ec);
}

BOOST_AUTO_TEST_CASE(a_sleep_whose_signal_died_fires) {
  mortal_signal sig;
  asio::io_context ctx;
  completion c;
  tock::async_sleep_for(ctx, 1ms, asio::bind_cancellation_slot(sig.slot(), record(c)));
  sig.kill();
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
}

BOOST_AUTO_TEST_CASE(a_sleep_whose_signal_died_is_destroyed_at_shutdown) {
  mortal_signal sig;
  tock_test::probe p;
  {
    tock_test::shutdown_context ctx;
    tock::async_sleep_for(ctx, 1h, asio::bind_cancellation_slot(sig.slot(), tock_test::tracked_handler(p)));
    sig.kill();
    ctx.shut_down();
  }
  BOOST_TEST(p.invoked == 0);
  BOOST_TEST(p.destroyed == 1);
}

BOOST_AUTO_TEST_CASE(a_sleep_leaves_a_handler_that_replaced_its_own_in_the_slot) {
  asio::cancellation_signal sig;
  asio::io_context ctx;
  completion c;
  tock::async_sleep_for(ctx, 1ms, asio::bind_cancellation_slot(sig.slot(), record(c)));
  int user_calls = 0;
  sig.slot().emplace<user_handler>(user_handler{&user_calls});
  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(sig.slot().has_handler());
}

// Reads whose user slot died: plain (Asio's control), under tock::timeout, and bound to a tock::deadline.
namespace {

struct plain_read {
  template <typename Token>
  static auto wrap(asio::io_context&, Token token) {
    return token;
  }
};
struct timeout_read {
  template <typename Token>
  static auto wrap(asio::io_context&, Token token) {
    return tock::timeout(1h, std::move(token));
  }
};
struct deadline_read {
  std::optional<tock::deadline> dl;
  template <typename Token>
  auto wrap(asio::io_context& ctx, Token token) {
    dl.emplace(ctx, 1h);
    return dl->bind(std::move(token));
  }
};

using read_kinds = boost::mpl::list<plain_read, timeout_read, deadline_read>;

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_whose_signal_died_completes, Kind, read_kinds) {
  mortal_signal sig;
  asio::io_context ctx;
  Kind kind;
  tock_test::socket_pair s(ctx);
  char byte = 0;
  tock_test::io_result r;
  s.server.async_read_some(asio::buffer(&byte, 1),
                           kind.wrap(ctx, asio::bind_cancellation_slot(sig.slot(), tock_test::record_io(r))));
  sig.kill();
  asio::write(s.client, asio::buffer("x", 1));
  ctx.run_for(5s);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.bytes == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_whose_signal_died_is_destroyed_at_shutdown, Kind, read_kinds) {
  mortal_signal sig;
  tock_test::probe p;
  {
    tock_test::shutdown_context ctx;
    Kind kind;
    tock_test::socket_pair s(ctx);
    char byte = 0;
    s.server.async_read_some(asio::buffer(&byte, 1),
                             kind.wrap(ctx, asio::bind_cancellation_slot(sig.slot(), tock_test::tracked_handler(p))));
    sig.kill();
    ctx.shut_down();
  }
  BOOST_TEST(p.invoked == 0);
  BOOST_TEST(p.destroyed == 1);
}

BOOST_AUTO_TEST_SUITE_END()
