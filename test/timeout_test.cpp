// tock::timeout and tock::timeout_at on real Asio operations: a read on a connected loopback socket pair (no
// data sent, so it pends), Asio's composed reads, a steady_timer wait, a tock sleep, a resolve, and a custom
// operation that records the cancellation type. Timings are only checked as "not before the deadline" and
// against generous bounds; every run of the context is bounded.
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
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
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


void check_timeout_emits(asio::cancellation_type requested) {
  asio::io_context ctx;
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, tock::timeout(5ms, record(c), requested));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == requested);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(timeout_test)

// --- The deadline passes first.

BOOST_AUTO_TEST_CASE(a_pending_read_times_out_with_timed_out_not_before_the_deadline) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  const auto start = steady_clock::now();
  s.server.async_read_some(asio::buffer(buf), tock::timeout(20ms, record_io(r)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.ec == boost::system::errc::timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 0u);
  BOOST_CHECK(r.at - start >= 20ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(timeout_at_times_out_a_pending_read_not_before_the_time_point) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  const auto at = steady_clock::now() + 20ms;
  s.server.async_read_some(asio::buffer(buf), tock::timeout_at(at, record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= at);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_negative_timeout_times_out_a_pending_read_at_once) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  asio::steady_timer reference(ctx, 2s);
  reference.async_wait([](const error_code&) {});
  s.server.async_read_some(asio::buffer(buf), tock::timeout(-5ms, [&](const error_code& ec, std::size_t n) {
                             record_io(r)(ec, n);
                             reference.cancel();
                           }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
}

BOOST_AUTO_TEST_CASE(a_pending_steady_timer_wait_times_out) {
  asio::io_context ctx;
  asio::steady_timer t(ctx, never);
  completion c;
  const auto start = steady_clock::now();
  t.async_wait(tock::timeout(10ms, record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at - start >= 10ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_pending_tock_sleep_times_out) {
  asio::io_context ctx;
  completion c;
  const auto start = steady_clock::now();
  // The sleep's initiation has no I/O object: the handler carries the executor.
  tock::async_sleep_for(ctx, never, tock::timeout(10ms, asio::bind_executor(ctx, record(c))));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 2u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at - start >= 10ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(async_read_with_transfer_exactly_times_out_with_the_bytes_it_got) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("ab", 2));
  std::array<char, 8> buf{};
  io_result r;
  const auto start = steady_clock::now();
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), tock::timeout(20ms, record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 2u);
  BOOST_CHECK(r.at - start >= 20ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(async_read_until_times_out_without_the_delimiter) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("abc", 3));
  std::string line;
  io_result r;
  const auto start = steady_clock::now();
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', tock::timeout(20ms, record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at - start >= 20ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// Connecting to a listener whose accept queue is full pends on Linux (the SYN is dropped and retried after a
// second); the queue is filled with connections of its own, each bounded by a timeout.
BOOST_AUTO_TEST_CASE(async_connect_to_a_listener_with_a_full_accept_queue_times_out) {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx);
  acceptor.open(tcp::v4());
  acceptor.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  acceptor.listen(0);
  const std::array<tcp::endpoint, 1> endpoints{acceptor.local_endpoint()};
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  int connected = 0;
  error_code last;
  steady_clock::duration last_took{};
  while (sockets.size() < 16) {
    sockets.push_back(std::make_unique<tcp::socket>(ctx));
    int calls = 0;
    const auto start = steady_clock::now();
    asio::async_connect(*sockets.back(), endpoints,
                        tock::timeout(20ms, [&](const error_code& ec, const tcp::endpoint&) {
                          ++calls;
                          last = ec;
                          last_took = steady_clock::now() - start;
                        }));
    BOOST_REQUIRE(run_until_idle(ctx));
    ctx.restart();
    BOOST_REQUIRE_EQUAL(calls, 1);
    if (last) break;
    ++connected;
  }
  BOOST_TEST_MESSAGE("connections accepted into the queue before one pended: " << connected);
  BOOST_CHECK_EQUAL(last, timed_out);
  BOOST_CHECK(last_took >= 20ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// --- The operation completes first.

BOOST_AUTO_TEST_CASE(a_read_that_completes_first_succeeds_and_removes_its_deadline_entry) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("hello", 5));
  std::array<char, 16> buf{};
  io_result r;
  std::size_t pending_in_handler = 99;
  s.server.async_read_some(asio::buffer(buf), tock::timeout(20ms, [&](const error_code& ec, std::size_t n) {
                             record_io(r)(ec, n);
                             pending_in_handler = service_of(ctx).pending();
                           }));
  // Keep the context running well past the deadline: nothing else may complete.
  asio::steady_timer past(ctx, 60ms);
  past.async_wait([](const error_code&) {});
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 5u);
  BOOST_CHECK_EQUAL(std::string(buf.data(), r.bytes), "hello");
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_read_that_data_reaches_before_the_deadline_succeeds) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), tock::timeout(never, record_io(r)));
  asio::steady_timer writer(ctx, 5ms);
  writer.async_wait([&](const error_code&) { asio::write(s.client, asio::buffer("x", 1)); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 1u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(async_read_with_transfer_exactly_succeeds_when_all_bytes_arrive_first) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("abcd", 4));
  std::array<char, 8> buf{};
  io_result r;
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), tock::timeout(20ms, record_io(r)));
  asio::steady_timer past(ctx, 40ms);
  past.async_wait([](const error_code&) {});
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(async_read_until_succeeds_when_the_delimiter_arrives_first) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("abc\n", 4));
  std::string line;
  io_result r;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', tock::timeout(20ms, record_io(r)));
  asio::steady_timer past(ctx, 40ms);
  past.async_wait([](const error_code&) {});
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  BOOST_CHECK_EQUAL(line, "abc\n");
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(async_resolve_completes_first_and_removes_its_deadline_entry) {
  asio::io_context ctx;
  tcp::resolver resolver(ctx);
  int calls = 0;
  error_code result;
  std::size_t entries = 0;
  std::size_t pending_in_handler = 99;
  resolver.async_resolve("127.0.0.1", "0",
                         tock::timeout(5s, [&](const error_code& ec, const tcp::resolver::results_type& results) {
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
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// --- The deadline and the operation are due at the same time.

BOOST_AUTO_TEST_CASE(a_steady_timer_due_with_its_timeout_completes_exactly_once_with_success_or_timed_out) {
  asio::io_context ctx;
  allocation_counts counts;
  constexpr int rounds = 40;
  const std::array<steady_clock::duration, 6> offsets{-100us, -10us, 0us, 0us, 10us, 100us};
  int succeeded = 0;
  int timeouts = 0;
  int other = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(offsets.size(), 0);
    std::vector<std::unique_ptr<asio::steady_timer>> timers;
    const auto at = steady_clock::now() + 2ms;
    for (std::size_t k = 0; k < offsets.size(); ++k) {
      timers.push_back(std::make_unique<asio::steady_timer>(ctx, at + offsets[k]));
      timers.back()->async_wait(
          tock::timeout_at(at, asio::bind_allocator(counting_allocator<void>(counts), [&, k](const error_code& ec) {
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
  BOOST_CHECK_GT(counts.allocations.load(), 0u);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_tock_sleep_due_with_its_timeout_completes_exactly_once_with_success_or_timed_out) {
  asio::io_context ctx;
  constexpr int rounds = 20;
  constexpr int per_round = 8;
  int succeeded = 0;
  int timeouts = 0;
  int other = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(per_round, 0);
    const auto at = steady_clock::now() + 2ms;
    for (int k = 0; k < per_round; ++k) {
      tock::async_sleep_until(ctx, at, tock::timeout_at(at, asio::bind_executor(ctx, [&, k](const error_code& ec) {
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
    for (int k = 0; k < per_round; ++k) BOOST_REQUIRE_EQUAL(calls[k], 1);
  }
  BOOST_CHECK_EQUAL(succeeded + timeouts, rounds * per_round);
  BOOST_CHECK_EQUAL(other, 0);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

// --- The user's own cancellation slot.

// The documented nesting: the slot is bound to the handler inside the timeout.
BOOST_AUTO_TEST_CASE(the_users_slot_bound_inside_the_timeout_aborts_the_read_with_operation_aborted) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf),
                           tock::timeout(never, asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// The other nesting, asio::bind_cancellation_slot(signal.slot(), tock::timeout(d, handler)), behaves the same:
// see composition_test.cpp.

BOOST_AUTO_TEST_CASE(the_timeout_still_fires_with_the_users_slot_bound_inside) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf),
                           tock::timeout(10ms, asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(!signal.slot().has_handler());  // the adapter's forwarder was taken off the user's slot
}

BOOST_AUTO_TEST_CASE(the_users_slot_is_cleared_when_the_operation_completes_first) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("x", 1));
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf),
                           tock::timeout(never, asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  BOOST_CHECK(signal.slot().has_handler());
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK(!signal.slot().has_handler());
  signal.emit(asio::cancellation_type::terminal);  // nothing is left to cancel
  BOOST_CHECK_EQUAL(r.calls, 1);
}

// --- The cancellation type.

BOOST_AUTO_TEST_CASE(the_timeout_emits_terminal_cancellation_by_default) {
  asio::io_context ctx;
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, tock::timeout(5ms, record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::terminal);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

BOOST_AUTO_TEST_CASE(the_timeout_emits_partial_cancellation_when_asked) {
  check_timeout_emits(asio::cancellation_type::partial);
}

BOOST_AUTO_TEST_CASE(the_timeout_emits_total_cancellation_when_asked) {
  check_timeout_emits(asio::cancellation_type::total);
}

BOOST_AUTO_TEST_CASE(timeout_at_emits_the_cancellation_type_asked_for) {
  asio::io_context ctx;
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec,
                              tock::timeout_at(steady_clock::now() + 5ms, record(c), asio::cancellation_type::partial));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::partial);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

BOOST_AUTO_TEST_CASE(a_read_times_out_under_partial_cancellation) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, record_io(r), asio::cancellation_type::partial));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
}

// --- Completion tokens.

BOOST_AUTO_TEST_CASE(a_timed_out_read_with_use_awaitable_throws_system_error_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  error_code thrown;
  bool returned = false;
  const auto start = steady_clock::now();
  steady_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    try {
      co_await s.server.async_read_some(asio::buffer(buf), tock::timeout(20ms, asio::use_awaitable));
      returned = true;
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
      at = steady_clock::now();
    }
  }));
  BOOST_CHECK(!returned);
  BOOST_CHECK_EQUAL(thrown, timed_out);
  BOOST_CHECK(thrown == boost::system::errc::timed_out);
  BOOST_CHECK(at - start >= 20ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_timed_out_read_with_as_tuple_use_awaitable_inside_returns_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto [ec, n] =
        co_await s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, asio::as_tuple(asio::use_awaitable)));
    result = ec;
    BOOST_CHECK_EQUAL(n, 0u);
  }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// as_tuple around the timeout token: the timeout's handler then sees the tuple, not the error code.
BOOST_AUTO_TEST_CASE(a_timed_out_read_with_as_tuple_outside_the_timeout_returns_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto [ec, n] =
        co_await s.server.async_read_some(asio::buffer(buf), asio::as_tuple(tock::timeout(10ms, asio::use_awaitable)));
    result = ec;
    BOOST_CHECK_EQUAL(n, 0u);
  }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_read_with_use_awaitable_that_completes_first_returns_its_bytes) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::write(s.client, asio::buffer("abc", 3));
  std::size_t got = 0;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    got = co_await s.server.async_read_some(asio::buffer(buf), tock::timeout(never, asio::use_awaitable));
  }));
  BOOST_CHECK_EQUAL(got, 3u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_deferred_timed_read_times_out_once_invoked) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  auto op = s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, asio::deferred));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);  // nothing is started before the invocation
  std::move(op)(record_io(r));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// A relative timeout counts from the initiation, which for a deferred operation is its invocation.
BOOST_AUTO_TEST_CASE(a_deferred_timed_reads_timeout_counts_from_its_invocation) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  auto op = s.server.async_read_some(asio::buffer(buf), tock::timeout(20ms, asio::deferred));
  std::this_thread::sleep_for(30ms);
  const auto invoked = steady_clock::now();
  std::move(op)(record_io(r));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_MESSAGE(r.at - invoked >= 20ms,
                      "timed out " << std::chrono::duration_cast<std::chrono::microseconds>(r.at - invoked).count()
                                   << " us after the invocation, before the 20 ms timeout");
}

BOOST_AUTO_TEST_CASE(a_deferred_timed_read_awaited_with_use_awaitable_throws_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  error_code thrown;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto op = s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, asio::deferred));
    try {
      co_await std::move(op)(asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
      thrown = e.code();
    }
  }));
  BOOST_CHECK_EQUAL(thrown, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(or_with_a_longer_sleep_returns_the_timed_out_read_and_cancels_the_sleep) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::size_t index = 99;
  error_code result;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto v = co_await (
        s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, asio::as_tuple(asio::use_awaitable))) ||
        tock::sleep_for(never));
    index = v.index();
    if (v.index() == 0) result = std::get<0>(std::get<0>(v));
  }));
  BOOST_CHECK_EQUAL(index, 0u);
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

// The group's cancellation of the losing read goes through the coroutine's slot into the timeout's
// operation: the read is aborted (not timed out) and its deadline entry removed.
BOOST_AUTO_TEST_CASE(or_with_a_shorter_sleep_aborts_the_timed_read_and_removes_its_deadline_entry) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::size_t index = 99;
  error_code read_error;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    auto timed_read = [&]() -> asio::awaitable<void> {
      std::array<char, 16> buf{};
      try {
        co_await s.server.async_read_some(asio::buffer(buf), tock::timeout(never, asio::use_awaitable));
      } catch (const boost::system::system_error& e) {
        read_error = e.code();
        throw;
      }
    };
    auto v = co_await (timed_read() || tock::sleep_for(10ms));
    index = v.index();
  }));
  BOOST_CHECK_EQUAL(index, 1u);
  BOOST_CHECK_EQUAL(read_error, aborted);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(the_timeout_allocates_through_the_handlers_allocator_and_frees_it_all) {
  asio::io_context ctx;
  socket_pair s(ctx);
  allocation_counts counts;
  std::array<char, 16> buf{};
  io_result r;
  s.server.async_read_some(asio::buffer(buf),
                           tock::timeout(5ms, asio::bind_allocator(counting_allocator<void>(counts), record_io(r))));
  BOOST_CHECK_GT(counts.allocations.load(), 0u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
}

// --- Shutdown.

BOOST_AUTO_TEST_CASE(shutting_down_with_a_timed_read_pending_destroys_the_handler_once_without_calling_it) {
  probe p;
  {
    shutdown_context ctx;
    {
      socket_pair s(ctx);
      std::array<char, 16> buf{};
      s.server.async_read_some(asio::buffer(buf), tock::timeout(never, tracked_handler(p)));
      ctx.poll();
      BOOST_CHECK_EQUAL(p.alive(), 1);
      ctx.shut_down();
      BOOST_CHECK_EQUAL(p.alive(), 0);
    }
  }
  BOOST_CHECK_EQUAL(p.invoked, 0);
  BOOST_CHECK_EQUAL(p.destroyed, 1);
  BOOST_CHECK_EQUAL(p.alive(), 0);
}

BOOST_AUTO_TEST_CASE(destroying_the_context_with_a_timed_sleep_pending_destroys_the_handler_once_without_calling_it) {
  probe p;
  {
    asio::io_context ctx;
    tock::async_sleep_for(ctx, never, tock::timeout(never, asio::bind_executor(ctx, tracked_handler(p))));
    ctx.poll();
    BOOST_CHECK_EQUAL(p.alive(), 1);
  }
  BOOST_CHECK_EQUAL(p.invoked, 0);
  BOOST_CHECK_EQUAL(p.destroyed, 1);
  BOOST_CHECK_EQUAL(p.alive(), 0);
}

// The deadline passed and cancelled the read, whose completion is queued when the context shuts down.
BOOST_AUTO_TEST_CASE(shutting_down_after_the_timeout_fired_but_before_the_read_completed_destroys_the_handler_once) {
  probe p;
  {
    shutdown_context ctx;
    {
      socket_pair s(ctx);
      std::array<char, 16> buf{};
      s.server.async_read_some(asio::buffer(buf), tock::timeout(1ms, tracked_handler(p)));
      BOOST_REQUIRE_EQUAL(ctx.run_one_for(5s), 1u);  // the service's driver: the deadline passes
      BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
      BOOST_CHECK_EQUAL(p.invoked, 0);
      BOOST_CHECK_EQUAL(p.alive(), 1);
      ctx.shut_down();
      BOOST_CHECK_EQUAL(p.alive(), 0);
    }
  }
  BOOST_CHECK_EQUAL(p.invoked, 0);
  BOOST_CHECK_EQUAL(p.destroyed, 1);
}

// --- Several threads.

// Each connection's operations run on its strand (the socket is created on it and the handler bound to it
// inside the timeout). Iterations alternate: no data (the timeout wins), data written first (the read wins),
// and data written first with a deadline already due (either may win; both are fine).
BOOST_AUTO_TEST_CASE(timed_reads_on_strands_of_a_two_thread_context_complete_exactly_once) {
  asio::io_context ctx(2);
  constexpr int connections = 8;
  constexpr int per_connection = 25;  // 200 operations

  struct connection {
    explicit connection(asio::io_context& ctx) : strand(asio::make_strand(ctx)), sockets(strand), writer(strand) {}
    asio::strand<asio::io_context::executor_type> strand;
    socket_pair sockets;
    asio::steady_timer writer;
    int parts = 0;
    std::array<char, 64> buf{};
    std::size_t unread = 0;  // bytes written and not yet read
    std::array<int, per_connection> calls{};
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
  // The next iteration starts once the read and, if any, the delayed write of this one are done.
  auto part_done = [&](connection& c, int i) {
    if (--c.parts == 0) start(c, i + 1);
  };
  start = [&](connection& c, int i) {
    if (i == per_connection) return;
    const int kind = i % 3;
    c.parts = kind == 2 ? 2 : 1;
    if (kind == 1) {
      asio::write(c.sockets.client, asio::buffer("x", 1));
      ++c.unread;
    }
    const steady_clock::duration limit = kind == 0 ? 2ms : kind == 1 ? never : 1ms;
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
    c.sockets.server.async_read_some(asio::buffer(c.buf), tock::timeout(limit, asio::bind_executor(c.strand, handler)));
    if (kind == 2) {  // the data and the deadline are due at about the same time
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
  for (auto& c : conns)
    for (int n : c->calls) BOOST_REQUIRE_EQUAL(n, 1);
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
