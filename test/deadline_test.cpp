// tock::deadline on real Asio operations: bind() ties a read on a connected loopback socket pair (no data sent,
// so it pends), Asio's composed operations, a steady_timer wait and a tock sleep to a movable deadline;
// async_wait() completes when it passes. Timings are only checked as "not before the deadline" and against
// generous bounds; every run of the context is bounded.
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/completion_condition.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/errc.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;
using tock_test::allocation_counts;
using tock_test::completion;
using tock_test::counting_allocator;
using tock_test::error_code;
using tock_test::record;
using tock_test::run_until_idle;
using namespace tock_test;  // timed_ops_support.hpp
using steady_clock = std::chrono::steady_clock;

// Long enough never to pass during a test.
constexpr steady_clock::duration never = 1h;

tock::timer_service& service_of(asio::io_context& ctx) { return tock::timer_service::of(ctx.get_executor()); }

const error_code timed_out = make_error_code(tock::error::timed_out);
const error_code aborted = asio::error::operation_aborted;


void check_bind_emits(asio::cancellation_type requested) {
  asio::io_context ctx;
  tock::deadline dl(ctx, 5ms);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, dl.bind(record(c), requested));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == requested);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(deadline_test)

// --- The deadline passes first.

BOOST_AUTO_TEST_CASE(a_bound_read_times_out_with_timed_out_not_before_the_deadline) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 20ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.ec == boost::system::errc::timed_out);
  BOOST_CHECK(r.at >= dl.expiry());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_bound_steady_timer_wait_times_out) {
  asio::io_context ctx;
  tock::deadline dl(ctx, 10ms);
  asio::steady_timer t(ctx, never);
  completion c;
  t.async_wait(dl.bind(record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at >= dl.expiry());
}

BOOST_AUTO_TEST_CASE(a_bound_async_read_with_transfer_exactly_times_out_with_the_bytes_it_got) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("ab", 2));
  tock::deadline dl(ctx, 20ms);
  std::array<char, 8> buf{};
  io_result r;
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), dl.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 2u);
  BOOST_CHECK(r.at >= dl.expiry());
}

BOOST_AUTO_TEST_CASE(a_bound_async_read_until_times_out_without_the_delimiter) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("abc", 3));
  tock::deadline dl(ctx, 20ms);
  std::string line;
  io_result r;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', dl.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= dl.expiry());
}

// --- The operation completes first.

BOOST_AUTO_TEST_CASE(a_bound_read_that_completes_first_succeeds_and_leaves_nothing_pending) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("hello", 5));
  tock::deadline dl(ctx, 20ms);
  std::array<char, 16> buf{};
  io_result r;
  std::size_t pending_in_handler = 99;
  s.server.async_read_some(asio::buffer(buf), dl.bind([&](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    pending_in_handler = service_of(ctx).pending();
  }));
  asio::steady_timer past(ctx, 60ms);  // keeps the context running well past the deadline
  past.async_wait([](const error_code&) {});
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 5u);
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_bound_operation_that_completes_first_leaves_the_deadlines_other_waits_alone) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("x", 1));
  tock::deadline dl(ctx, 20ms);
  completion wait;
  dl.async_wait(record(wait));
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 3u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(wait.calls, 1);
  BOOST_CHECK(!wait.ec);
  BOOST_CHECK(wait.at >= dl.expiry());
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, timed_out);
  BOOST_CHECK(timer_wait.at >= dl.expiry());
  BOOST_CHECK(r.at < wait.at);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_bound_async_resolve_completes_first_and_leaves_nothing_pending) {
  asio::io_context ctx;
  tock::deadline dl(ctx, 5s);
  tcp::resolver resolver(ctx);
  int calls = 0;
  error_code result;
  std::size_t entries = 0;
  std::size_t pending_in_handler = 99;
  resolver.async_resolve("127.0.0.1", "0",
                         dl.bind([&](const error_code& ec, const tcp::resolver::results_type& results) {
                           ++calls;
                           result = ec;
                           entries = results.size();
                           pending_in_handler = service_of(ctx).pending();
                         }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(calls, 1);
  BOOST_CHECK(!result);
  BOOST_CHECK_GE(entries, 1u);
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
}

// --- The deadline and the operation are due at the same time.

BOOST_AUTO_TEST_CASE(steady_timers_due_with_their_deadline_complete_exactly_once_with_success_or_timed_out) {
  asio::io_context ctx;
  allocation_counts counts;
  constexpr int rounds = 40;
  const std::array<steady_clock::duration, 6> offsets{-100us, -10us, 0us, 0us, 10us, 100us};
  int succeeded = 0;
  int timeouts = 0;
  int other = 0;
  int waits = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(offsets.size(), 0);
    std::vector<std::unique_ptr<asio::steady_timer>> timers;
    const auto at = steady_clock::now() + 2ms;
    tock::deadline dl(ctx.get_executor(), at);
    dl.async_wait([&](const error_code& ec) { waits += ec ? 100 : 1; });
    for (std::size_t k = 0; k < offsets.size(); ++k) {
      timers.push_back(std::make_unique<asio::steady_timer>(ctx, at + offsets[k]));
      timers.back()->async_wait(
          dl.bind(asio::bind_allocator(counting_allocator<void>(counts), [&, k](const error_code& ec) {
            ++calls[k];
            if (!ec)
              ++succeeded;
            else if (ec == timed_out)
              ++timeouts;
            else
              ++other;
          })));
    }
    BOOST_REQUIRE(run_until_idle(ctx));
    ctx.restart();
    for (std::size_t k = 0; k < offsets.size(); ++k) BOOST_REQUIRE_EQUAL(calls[k], 1);
  }
  BOOST_TEST_MESSAGE("success: " << succeeded << ", timed_out: " << timeouts);
  BOOST_CHECK_EQUAL(succeeded + timeouts, rounds * static_cast<int>(offsets.size()));
  BOOST_CHECK_EQUAL(other, 0);
  BOOST_CHECK_EQUAL(waits, rounds);
  BOOST_CHECK_GT(counts.allocations.load(), 0u);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

// --- The user's own cancellation slot.

// bind(asio::bind_cancellation_slot(slot, handler)): the slot is bound to the handler inside the deadline's
// token. (The other nesting behaves the same: see composition_test.cpp.)
BOOST_AUTO_TEST_CASE(the_users_slot_bound_inside_bind_aborts_the_read_with_operation_aborted) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf), dl.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(!signal.slot().has_handler());
}

// --- The cancellation type.

BOOST_AUTO_TEST_CASE(bind_emits_terminal_cancellation_by_default) {
  asio::io_context ctx;
  tock::deadline dl(ctx, 5ms);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, dl.bind(record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::terminal);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

BOOST_AUTO_TEST_CASE(bind_emits_partial_cancellation_when_asked) { check_bind_emits(asio::cancellation_type::partial); }

BOOST_AUTO_TEST_CASE(bind_emits_total_cancellation_when_asked) { check_bind_emits(asio::cancellation_type::total); }

// --- Moving the deadline.

BOOST_AUTO_TEST_CASE(extending_the_deadline_several_times_times_out_not_before_the_last_expiry) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  dl.expires_after(20ms);
  dl.expires_after(30ms);
  dl.expires_after(40ms);
  const auto last = dl.expiry();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= last);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

// Moves made from inside the context while the read pends, each well before the deadline it replaces.
BOOST_AUTO_TEST_CASE(extending_the_deadline_while_a_bound_read_pends_times_out_not_before_the_last_expiry) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 25ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  asio::steady_timer tick(ctx);
  int moves = 0;
  int moves_after_completion = 0;
  steady_clock::time_point last{};
  std::function<void()> schedule = [&] {
    tick.expires_after(5ms);
    tick.async_wait([&](const error_code&) {
      if (r.calls > 0) ++moves_after_completion;
      dl.expires_after(25ms);
      last = dl.expiry();
      if (++moves < 4) schedule();
    });
  };
  schedule();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(moves, 4);
  BOOST_CHECK_EQUAL(moves_after_completion, 0);
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= last);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(moving_the_deadline_earlier_times_out_at_the_earlier_time) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  std::array<char, 16> buf{};
  io_result r;
  // A reference due long after the new deadline; the read's handler cancels it.
  asio::steady_timer reference(ctx, 2s);
  completion ref;
  reference.async_wait(record(ref));
  s.server.async_read_some(asio::buffer(buf), dl.bind([&](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    reference.cancel();
  }));
  ctx.poll();
  dl.expires_after(15ms);
  const auto moved = dl.expiry();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= moved);
  BOOST_CHECK_EQUAL(ref.ec, aborted);  // the read timed out before the reference
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_deadline_moved_to_time_point_max_never_times_out_until_moved_back) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  dl.expires_at(tock::deadline::time_point::max());
  ctx.run_for(50ms);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
  dl.expires_after(5ms);
  const auto moved = dl.expiry();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= moved);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_bound_read_on_a_deadline_constructed_without_an_expiry_waits_until_one_is_set) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx);
  BOOST_CHECK(dl.expiry() == tock::deadline::time_point::max());
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  ctx.run_for(20ms);
  BOOST_CHECK_EQUAL(r.calls, 0);
  dl.expires_after(5ms);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
}

BOOST_AUTO_TEST_CASE(async_wait_completes_with_success_when_the_deadline_passes_and_not_when_it_moves) {
  asio::io_context ctx;
  tock::deadline dl(ctx, never);
  completion w;
  dl.async_wait(record(w));
  dl.expires_after(500ms);  // earlier
  dl.expires_after(600ms);  // later
  ctx.poll();
  BOOST_CHECK_EQUAL(w.calls, 0);
  dl.expires_after(30ms);  // earlier
  steady_clock::time_point last = dl.expiry();
  int moves_seen_completed = 0;
  asio::steady_timer mid(ctx, 5ms);
  mid.async_wait([&](const error_code&) {
    moves_seen_completed += w.calls;
    dl.expires_after(20ms);  // later, while the wait is in the heap
    last = dl.expiry();
  });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(moves_seen_completed, 0);
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  BOOST_CHECK(!w.ec);
  BOOST_CHECK(w.at >= last);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(several_operations_bound_to_one_deadline_time_out_together) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 20ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  completion sleep;
  // The sleep's initiation has no I/O object: the handler carries the executor.
  tock::async_sleep_for(ctx, never, dl.bind(asio::bind_executor(ctx, record(sleep))));
  completion wait;
  dl.async_wait(record(wait));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 5u);  // three bound, the sleep itself, one wait
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_REQUIRE_EQUAL(timer_wait.calls, 1);
  BOOST_REQUIRE_EQUAL(sleep.calls, 1);
  BOOST_REQUIRE_EQUAL(wait.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(timer_wait.ec, timed_out);
  BOOST_CHECK_EQUAL(sleep.ec, timed_out);
  BOOST_CHECK(!wait.ec);
  const auto first = std::min({r.at, timer_wait.at, sleep.at, wait.at});
  const auto last = std::max({r.at, timer_wait.at, sleep.at, wait.at});
  BOOST_CHECK(first >= dl.expiry());
  BOOST_CHECK(last - first < 500ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(cancel_aborts_waits_and_bound_operations_with_operation_aborted) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  completion w1;
  completion w2;
  dl.async_wait(record(w1));
  dl.async_wait(record(w2));
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  ctx.poll();
  BOOST_CHECK_EQUAL(dl.cancel(), 4u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(w1.calls, 1);
  BOOST_CHECK_EQUAL(w1.ec, aborted);
  BOOST_CHECK_EQUAL(w2.calls, 1);
  BOOST_CHECK_EQUAL(w2.ec, aborted);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, aborted);
  BOOST_CHECK(service_of(ctx).invariants_hold());
  BOOST_CHECK_EQUAL(dl.cancel(), 0u);
}

BOOST_AUTO_TEST_CASE(a_deadline_binds_new_operations_after_cancel) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  std::array<char, 16> buf{};
  io_result first;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(first)));
  dl.cancel();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(first.ec, aborted);
  ctx.restart();
  dl.expires_after(10ms);
  io_result second;
  s.server.async_read_some(asio::buffer(buf), dl.bind(record_io(second)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(second.calls, 1);
  BOOST_CHECK_EQUAL(second.ec, timed_out);
  BOOST_CHECK(second.at >= dl.expiry());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(destroying_the_deadline_aborts_its_bound_operations_and_frees_everything) {
  asio::io_context ctx;
  socket_pair s(ctx);
  allocation_counts counts;
  const counting_allocator<void> alloc(counts);
  auto dl = std::make_unique<tock::deadline>(ctx, never);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl->bind(asio::bind_allocator(alloc, record_io(r))));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl->bind(asio::bind_allocator(alloc, record(timer_wait))));
  completion wait;
  dl->async_wait(asio::bind_allocator(alloc, record(wait)));
  ctx.poll();
  BOOST_CHECK_GT(counts.live_bytes.load(), 0);
  dl.reset();
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, aborted);
  BOOST_CHECK_EQUAL(wait.calls, 1);
  BOOST_CHECK_EQUAL(wait.ec, aborted);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(an_operation_bound_to_a_deadline_that_has_passed_times_out_at_once) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 5ms);
  completion w;
  dl.async_wait(record(w));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  ctx.restart();
  asio::steady_timer reference(ctx, 2s);
  completion ref;
  reference.async_wait(record(ref));
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind([&](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    reference.cancel();
  }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(ref.ec, aborted);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(an_operation_bound_to_a_deadline_set_in_the_past_times_out_at_once) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx.get_executor(), steady_clock::now() - 1s);
  asio::steady_timer reference(ctx, 2s);
  completion ref;
  reference.async_wait(record(ref));
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), dl.bind([&](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    reference.cancel();
  }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(ref.ec, aborted);
}

// One deadline per direction: the read's passing leaves the write pending; the write then times out on its own.
BOOST_AUTO_TEST_CASE(separate_read_and_write_deadlines_are_independent) {
  asio::io_context ctx;
  socket_pair s(ctx);
  // Small buffers and a peer that never reads: a large write pends.
  s.server.set_option(asio::socket_base::send_buffer_size(4096));
  s.client.set_option(asio::socket_base::receive_buffer_size(4096));
  tock::deadline read_deadline(ctx, 10ms);
  tock::deadline write_deadline(ctx, never);
  std::vector<char> payload(8 * 1024 * 1024, 'x');
  io_result w;
  asio::async_write(s.server, asio::buffer(payload), write_deadline.bind(record_io(w)));
  std::array<char, 16> buf{};
  io_result r;
  int writes_done_when_read_timed_out = -1;
  steady_clock::time_point write_expiry{};
  s.server.async_read_some(asio::buffer(buf), read_deadline.bind([&](const error_code& ec, std::size_t n) {
    record_io(r)(ec, n);
    writes_done_when_read_timed_out = w.calls;
    write_deadline.expires_after(10ms);
    write_expiry = write_deadline.expiry();
  }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(writes_done_when_read_timed_out, 0);
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  BOOST_CHECK_EQUAL(w.ec, timed_out);
  BOOST_CHECK_LT(w.bytes, payload.size());
  BOOST_CHECK(w.at >= write_expiry);
  BOOST_CHECK(read_deadline.expiry() < write_expiry);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_moved_deadline_keeps_its_bound_operations) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::optional<tock::deadline> from(std::in_place, ctx, 15ms);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), from->bind(record_io(r)));
  tock::deadline to(std::move(*from));
  from.reset();  // the moved-from deadline has nothing left to abort
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= to.expiry());
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

namespace {

// `from` was moved from while `to` took its wait: `from` behaves as a deadline made from the executor alone
// (never, same executor) and is usable again: a wait and a bound read on it time out, `to` still works.
void check_deadline_used_again(asio::io_context& ctx, tock::deadline& from, tock::deadline& to,
                               completion& moved_wait) {
  BOOST_CHECK(from.expiry() == steady_clock::time_point::max());
  BOOST_CHECK(from.get_executor() == asio::any_io_executor(ctx.get_executor()));
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  completion again;
  from.expires_after(5ms);
  from.async_wait(record(again));
  s.server.async_read_some(asio::buffer(buf), from.bind(record_io(r)));
  to.expires_after(1ms);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(moved_wait.calls, 1);
  BOOST_CHECK(!moved_wait.ec);
  BOOST_CHECK(moved_wait.at >= to.expiry());
  BOOST_CHECK_EQUAL(again.calls, 1);
  BOOST_CHECK(!again.ec);
  BOOST_CHECK(again.at >= from.expiry());
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_moved_from_deadline_is_usable_again_like_a_new_one) {
  asio::io_context ctx;
  tock::deadline from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  tock::deadline to(std::move(from));
  check_deadline_used_again(ctx, from, to, moved_wait);
}

BOOST_AUTO_TEST_CASE(a_move_assigned_from_deadline_is_usable_again_like_a_new_one) {
  asio::io_context ctx;
  tock::deadline from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  tock::deadline to(ctx, never);
  to = std::move(from);
  check_deadline_used_again(ctx, from, to, moved_wait);
}

// The moved-from expiry is max() even when it was earlier: the lock-free later move must not see the old one.
BOOST_AUTO_TEST_CASE(a_moved_from_deadline_that_was_due_soon_waits_for_its_new_expiry) {
  asio::io_context ctx;
  tock::deadline from(ctx, 1ms);
  tock::deadline to(std::move(from));
  to.cancel();
  const auto t = steady_clock::now() + 10ms;
  from.expires_at(t);
  BOOST_CHECK(from.expiry() == t);
  completion c;
  from.async_wait(record(c));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(c.at >= t);
}

BOOST_AUTO_TEST_CASE(a_deadline_at_a_time_point_takes_a_context_or_an_executor) {
  asio::io_context ctx;
  const auto t = steady_clock::now() + 5ms;
  tock::deadline by_context(ctx, t);
  tock::deadline by_executor(ctx.get_executor(), t);
  BOOST_CHECK(by_context.expiry() == t);
  BOOST_CHECK(by_executor.expiry() == t);
  BOOST_CHECK(by_context.get_executor() == asio::any_io_executor(ctx.get_executor()));
  completion c;
  by_context.async_wait(record(c));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(c.at >= t);
}

// A deadline moved from a thread other than the one running the context, while that thread's driver re-keys
// it (a lazy extension surfacing): a move to a time after the heap key but before the current expiry takes
// the lock-free path, and must not be lost to the re-key. A sleep due with the heap key runs first in the
// driver's batch and signals when to move. Checked by the service's invariants (no deadline keyed later than
// its expiry), so without any timing assumption; stops at the first broken round.
BOOST_AUTO_TEST_CASE(a_move_made_on_another_thread_while_the_driver_rekeys_the_deadline_is_not_lost) {
  asio::io_context ctx;
  auto work = asio::make_work_guard(ctx);
  std::thread runner([&] { ctx.run_for(30s); });
  constexpr int rounds = 100;
  constexpr int per_round = 32;
  int broken_rounds = 0;
  int rounds_run = 0;
  std::atomic<int> failed_waits{0};
  for (int round = 0; round < rounds && broken_rounds == 0; ++round, ++rounds_run) {
    std::vector<std::unique_ptr<tock::deadline>> deadlines;
    std::atomic<int> done{0};
    std::atomic<bool> batch_started{false};
    const auto key = steady_clock::now() + 1ms;
    tock::async_sleep_until(ctx, key, [&](const error_code&) { batch_started.store(true); });
    for (int i = 0; i < per_round; ++i) {
      deadlines.push_back(std::make_unique<tock::deadline>(ctx.get_executor(), key));
      deadlines.back()->async_wait([&](const error_code& ec) {
        if (ec && ec != aborted) ++failed_waits;
        ++done;
      });
      deadlines.back()->expires_at(key + 50ms);  // later: only the expiry moves; the heap keeps `key`
    }
    while (!batch_started.load() && steady_clock::now() < key + 5s) {
    }
    for (auto& d : deadlines) d->expires_at(key + 3ms);  // after the heap key, before the current expiry
    if (!service_of(ctx).invariants_hold()) ++broken_rounds;
    if (broken_rounds > 0)
      for (auto& d : deadlines) d->cancel();
    const auto limit = steady_clock::now() + 5s;
    while (done.load() < per_round && steady_clock::now() < limit) std::this_thread::sleep_for(100us);
    BOOST_REQUIRE_EQUAL(done.load(), per_round);
  }
  work.reset();
  runner.join();
  BOOST_TEST_MESSAGE("rounds run: " << rounds_run);
  BOOST_CHECK_EQUAL(broken_rounds, 0);
  BOOST_CHECK_EQUAL(failed_waits.load(), 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// --- Completion tokens.

BOOST_AUTO_TEST_CASE(a_bound_read_with_use_awaitable_throws_system_error_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 15ms);
  error_code thrown;
  bool returned = false;
  steady_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    try {
      co_await s.server.async_read_some(asio::buffer(buf), dl.bind(asio::use_awaitable));
      returned = true;
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
      at = steady_clock::now();
    }
  }));
  BOOST_CHECK(!returned);
  BOOST_CHECK_EQUAL(thrown, timed_out);
  BOOST_CHECK(at >= dl.expiry());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_bound_read_with_as_tuple_use_awaitable_returns_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto [ec, n] = co_await s.server.async_read_some(asio::buffer(buf), dl.bind(asio::as_tuple(asio::use_awaitable)));
    result = ec;
    BOOST_CHECK_EQUAL(n, 0u);
  }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// as_tuple around the bound token: the deadline's handler then sees the tuple, not the error code.
BOOST_AUTO_TEST_CASE(a_bound_read_with_as_tuple_outside_bind_returns_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto [ec, n] = co_await s.server.async_read_some(asio::buffer(buf), asio::as_tuple(dl.bind(asio::use_awaitable)));
    result = ec;
    BOOST_CHECK_EQUAL(n, 0u);
  }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_deferred_bound_read_times_out_once_invoked) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 15ms);
  std::array<char, 16> buf{};
  io_result r;
  auto op = s.server.async_read_some(asio::buffer(buf), dl.bind(asio::deferred));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);  // nothing is started before the invocation
  std::move(op)(record_io(r));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= dl.expiry());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// A deferred operation is tied to the deadline as it is when the operation is invoked.
BOOST_AUTO_TEST_CASE(a_deferred_bound_read_follows_moves_made_before_its_invocation) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 1ms);
  std::array<char, 16> buf{};
  io_result r;
  auto op = s.server.async_read_some(asio::buffer(buf), dl.bind(asio::deferred));
  dl.expires_after(20ms);
  std::move(op)(record_io(r));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= dl.expiry());
}

BOOST_AUTO_TEST_CASE(or_with_a_longer_sleep_returns_the_timed_out_bound_read_and_cancels_the_sleep) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  std::size_t index = 99;
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto v = co_await (s.server.async_read_some(asio::buffer(buf), dl.bind(asio::as_tuple(asio::use_awaitable))) ||
                       tock::sleep_for(never));
    index = v.index();
    if (v.index() == 0) result = std::get<0>(std::get<0>(v));
  }));
  BOOST_CHECK_EQUAL(index, 0u);
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

// The group's cancellation of the losing read reaches the bound operation through the coroutine's slot: the
// read is aborted (not timed out) and leaves the deadline, whose own wait is untouched.
BOOST_AUTO_TEST_CASE(or_with_a_shorter_sleep_aborts_the_bound_read_and_leaves_the_deadline_alone) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  completion wait;
  dl.async_wait(record(wait));
  std::size_t index = 99;
  error_code read_error;
  std::size_t pending_after = 99;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    auto bound_read = [&]() -> asio::awaitable<void> {
      std::array<char, 16> buf{};
      try {
        co_await s.server.async_read_some(asio::buffer(buf), dl.bind(asio::use_awaitable));
      } catch (const boost::system::system_error& e) {
        read_error = e.code();
        throw;
      }
    };
    auto v = co_await (bound_read() || tock::sleep_for(10ms));
    index = v.index();
    pending_after = service_of(ctx).pending();
    dl.cancel();
  }));
  BOOST_CHECK_EQUAL(index, 1u);
  BOOST_CHECK_EQUAL(read_error, aborted);
  BOOST_CHECK_EQUAL(pending_after, 1u);  // the deadline's own wait
  BOOST_CHECK_EQUAL(wait.calls, 1);
  BOOST_CHECK_EQUAL(wait.ec, aborted);  // by the cancel() above, not by the read
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// --- Shutdown.

BOOST_AUTO_TEST_CASE(shutting_down_with_a_bound_read_pending_destroys_the_handler_once_without_calling_it) {
  probe p;
  {
    shutdown_context ctx;
    {
      socket_pair s(ctx);
      tock::deadline dl(ctx, never);
      std::array<char, 16> buf{};
      s.server.async_read_some(asio::buffer(buf), dl.bind(tracked_handler(p)));
      ctx.poll();
      BOOST_CHECK_EQUAL(p.alive(), 1);
      ctx.shut_down();
      BOOST_CHECK_EQUAL(p.alive(), 0);
    }
  }
  BOOST_CHECK_EQUAL(p.invoked, 0);
  BOOST_CHECK_EQUAL(p.destroyed, 1);
}

BOOST_AUTO_TEST_CASE(shutting_down_with_a_wait_and_a_bound_sleep_pending_destroys_each_handler_once) {
  probe wait_probe;
  probe sleep_probe;
  {
    shutdown_context ctx;
    {
      tock::deadline dl(ctx, never);
      dl.async_wait(tracked_handler(wait_probe));
      tock::async_sleep_for(ctx, never, dl.bind(asio::bind_executor(ctx, tracked_handler(sleep_probe))));
      ctx.poll();
      BOOST_CHECK_EQUAL(wait_probe.alive(), 1);
      BOOST_CHECK_EQUAL(sleep_probe.alive(), 1);
      ctx.shut_down();
      BOOST_CHECK_EQUAL(wait_probe.alive(), 0);
      BOOST_CHECK_EQUAL(sleep_probe.alive(), 0);
    }
  }
  BOOST_CHECK_EQUAL(wait_probe.invoked, 0);
  BOOST_CHECK_EQUAL(wait_probe.destroyed, 1);
  BOOST_CHECK_EQUAL(sleep_probe.invoked, 0);
  BOOST_CHECK_EQUAL(sleep_probe.destroyed, 1);
}

// --- Several threads.

// Each connection has a strand, its sockets and deadline are created on it, and its handlers are bound to it
// inside bind(). Iterations alternate: no data (the deadline passes; a wait on the deadline completes too),
// data written first (the read wins), and data written when the deadline is due (either may win).
BOOST_AUTO_TEST_CASE(bound_reads_on_strands_of_a_two_thread_context_complete_exactly_once) {
  asio::io_context ctx(2);
  constexpr int connections = 8;
  constexpr int per_connection = 25;  // 200 operations

  struct connection {
    explicit connection(asio::io_context& ctx)
        : strand(asio::make_strand(ctx)), sockets(strand), deadline(strand), writer(strand) {}
    asio::strand<asio::io_context::executor_type> strand;
    socket_pair sockets;
    tock::deadline deadline;
    asio::steady_timer writer;
    std::array<char, 64> buf{};
    std::size_t unread = 0;  // bytes written and not yet read
    int parts = 0;
    std::array<int, per_connection> calls{};
    std::array<int, per_connection> waits{};
  };
  std::vector<std::unique_ptr<connection>> conns;
  for (int i = 0; i < connections; ++i) conns.push_back(std::make_unique<connection>(ctx));

  std::atomic<int> completions{0};
  std::atomic<int> timeouts{0};
  std::atomic<int> successes{0};
  std::atomic<int> unexpected{0};  // an error other than timed_out, or a result the iteration rules out
  std::atomic<int> outside_strand{0};
  std::atomic<int> races_timed_out{0};  // iterations of the third kind that the deadline won

  std::function<void(connection&, int)> start;
  // The next iteration starts once every part of this one (read, wait, delayed write) is done.
  auto part_done = [&](connection& c, int i) {
    if (--c.parts == 0) start(c, i + 1);
  };
  start = [&](connection& c, int i) {
    if (i == per_connection) return;
    const int kind = i % 3;
    c.parts = kind == 1 ? 1 : 2;
    if (kind == 1) {
      asio::write(c.sockets.client, asio::buffer("x", 1));
      ++c.unread;
    }
    c.deadline.expires_after(kind == 0 ? 2ms : kind == 1 ? never : 1ms);
    auto handler = [&, i, kind](const error_code& ec, std::size_t n) {
      if (!c.strand.running_in_this_thread()) ++outside_strand;
      ++c.calls[i];
      ++completions;
      if (!ec) {
        ++successes;
        if (n == 0 || n > c.unread) ++unexpected;
        c.unread -= n;
      } else if (ec == timed_out) {
        ++timeouts;
        if (kind == 2) ++races_timed_out;
        if (kind == 1 || (kind == 0 && c.unread > 0)) ++unexpected;  // the data was there first
      } else {
        ++unexpected;
      }
      part_done(c, i);
    };
    c.sockets.server.async_read_some(asio::buffer(c.buf), c.deadline.bind(asio::bind_executor(c.strand, handler)));
    if (kind == 0) {
      c.deadline.async_wait(asio::bind_executor(c.strand, [&, i](const error_code& ec) {
        if (!c.strand.running_in_this_thread()) ++outside_strand;
        if (ec) ++unexpected;
        ++c.waits[i];
        part_done(c, i);
      }));
    } else if (kind == 2) {  // the data and the deadline are due at about the same time
      // Around the 1 ms deadline: before, with, or after it.
      const std::array<steady_clock::duration, 3> delays{500us, 1ms, 1500us};
      c.writer.expires_after(delays[static_cast<std::size_t>(i / 3) % delays.size()]);
      c.writer.async_wait(asio::bind_executor(c.strand, [&, i](const error_code&) {
        asio::write(c.sockets.client, asio::buffer("y", 1));
        ++c.unread;
        part_done(c, i);
      }));
    }
  };
  for (auto& c : conns) asio::post(c->strand, [&, cp = c.get()] { start(*cp, 0); });

  std::thread other([&] { ctx.run_for(10s); });
  ctx.run_for(10s);
  other.join();

  BOOST_CHECK_EQUAL(completions.load(), connections * per_connection);
  for (auto& c : conns) {
    for (int n : c->calls) BOOST_REQUIRE_EQUAL(n, 1);
    for (int i = 0; i < per_connection; ++i) BOOST_REQUIRE_EQUAL(c->waits[i], i % 3 == 0 ? 1 : 0);
  }
  BOOST_TEST_MESSAGE("successes: " << successes.load() << ", timeouts: " << timeouts.load()
                                   << ", races the deadline won: " << races_timed_out.load());
  BOOST_CHECK_EQUAL(successes.load() + timeouts.load(), connections * per_connection);
  BOOST_CHECK_GT(timeouts.load(), 0);
  BOOST_CHECK_GT(successes.load(), 0);
  BOOST_CHECK_EQUAL(unexpected.load(), 0);
  BOOST_CHECK_EQUAL(outside_strand.load(), 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_SUITE_END()
