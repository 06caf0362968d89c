// timed_ops_test: timed operations, tock::timeout(d, token) / tock::timeout_at(t, token) and tock::deadline's
// bind(token), on real Asio operations: a read on a connected loopback socket pair (which pends until data is
// written), Asio's composed reads, a connect, a resolve, a steady_timer wait, a tock sleep, and an operation
// that records the cancellation type. A case templated over `adapters` (timed_ops_support.hpp) runs once for
// each adapter; a case for one adapter only says so in its name or comment. Timings are only checked as "not
// before the deadline" and against generous bounds; every run of the context is bounded.
//
// This file: what the operation completes with (the deadline passes first, the operation completes first,
// both are due at once), the user's own cancellation slot, the cancellation type. The suite goes on in
// timed_ops_test.part2.cpp: completion tokens, shutdown, several threads, and the deadline object's own
// behaviours (moving it, waiting on it, cancelling, destroying and moving it).
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/completion_condition.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/errc.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace tock_test;  // test_support.hpp (never, service_of, check_idle, ...), timed_ops_support.hpp

}  // namespace

BOOST_AUTO_TEST_SUITE(timed_ops_test)

// --- The deadline passes first: the operation is cancelled and completes with timed_out, not before it.

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_times_out_after_deadline, A, adapters, pending_read) {
  A limit(ctx, 20ms);
  read(limit.bind(record_io(r)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.ec == boost::system::errc::timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 0u);
  BOOST_CHECK(r.at >= limit.not_before());
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_times_out_at_time_point, A, adapters, pending_read) {
  const auto at = steady_clock::now() + 20ms;
  A limit(ctx, at);
  read(limit.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= at);
  check_idle(ctx);
}

// A reference timer due long after, which the read's handler cancels: aborted if the read came first.
BOOST_FIXTURE_TEST_CASE_TEMPLATE(negative_duration_times_out_read_at_once, A, adapters, pending_read) {
  asio::steady_timer reference(ctx, 2s);
  completion ref;
  reference.async_wait(record(ref));
  A limit(ctx, -5ms);
  read(limit.bind(record_io_then(r, [&] { reference.cancel(); })));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(ref.ec, aborted);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(past_time_point_times_out_read_at_once, A, adapters, pending_read) {
  asio::steady_timer reference(ctx, 2s);
  completion ref;
  reference.async_wait(record(ref));
  A limit(ctx, steady_clock::now() - 1s);
  read(limit.bind(record_io_then(r, [&] { reference.cancel(); })));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(ref.ec, aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(timer_wait_times_out, A, adapters) {
  asio::io_context ctx;
  asio::steady_timer t(ctx, never);
  completion c;
  A limit(ctx, 10ms);
  t.async_wait(limit.bind(record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at >= limit.not_before());
  check_idle(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sleep_times_out, A, adapters) {
  asio::io_context ctx;
  completion c;
  A limit(ctx, 10ms);
  // The sleep's initiation has no I/O object: the handler carries the executor.
  tock::async_sleep_for(ctx, never, limit.bind(asio::bind_executor(ctx, record(c))));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 2u);  // the sleep and its deadline
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at >= limit.not_before());
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(async_read_times_out_with_bytes_so_far, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("ab", 2));
  A limit(ctx, 20ms);
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), limit.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 2u);
  BOOST_CHECK(r.at >= limit.not_before());
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_until_times_out_without_delimiter, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("abc", 3));
  A limit(ctx, 20ms);
  std::string line;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', limit.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= limit.not_before());
  check_idle(ctx);
}

// Connecting to a listener whose accept queue is full pends on Linux (the SYN is dropped and retried after a
// second); the queue is filled with connections of its own, each bounded the same way.
BOOST_AUTO_TEST_CASE_TEMPLATE(connect_to_full_backlog_times_out, A, adapters) {
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
    A limit(ctx, 20ms);
    asio::async_connect(*sockets.back(), endpoints, limit.bind([&](const error_code& ec, const tcp::endpoint&) {
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
  check_idle(ctx);
}

// --- The operation completes first: it succeeds and its deadline entry is gone, even from its own handler.

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_completes_before_deadline, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("hello", 5));
  A limit(ctx, 20ms);
  std::size_t pending_in_handler = 99;
  read(limit.bind(record_io_then(r, [&] { pending_in_handler = service_of(ctx).pending(); })));
  asio::steady_timer past(ctx, 60ms);  // keeps the context running well past the deadline: nothing else may run
  past.async_wait(do_nothing);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 5u);
  BOOST_CHECK_EQUAL(std::string(buf.data(), r.bytes), "hello");
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_completes_when_data_arrives_in_time, A, adapters, pending_read) {
  A limit(ctx, never);
  read(limit.bind(record_io(r)));
  asio::steady_timer writer(ctx, 5ms);
  writer.async_wait([&](const error_code&) { asio::write(s.client, asio::buffer("x", 1)); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 1u);
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(async_read_completes_before_deadline, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("abcd", 4));
  A limit(ctx, 20ms);
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), limit.bind(record_io(r)));
  asio::steady_timer past(ctx, 40ms);
  past.async_wait(do_nothing);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_until_completes_before_deadline, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("abc\n", 4));
  A limit(ctx, 20ms);
  std::string line;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', limit.bind(record_io(r)));
  asio::steady_timer past(ctx, 40ms);
  past.async_wait(do_nothing);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  BOOST_CHECK_EQUAL(line, "abc\n");
  check_idle(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(resolve_completes_before_deadline, A, adapters) {
  asio::io_context ctx;
  tcp::resolver resolver(ctx);
  A limit(ctx, 5s);
  int calls = 0;
  error_code result;
  std::size_t entries = 0;
  std::size_t pending_in_handler = 99;
  resolver.async_resolve("127.0.0.1", "0",
                         limit.bind([&](const error_code& ec, const tcp::resolver::results_type& results) {
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
  check_idle(ctx);
}

BOOST_FIXTURE_TEST_CASE(read_completing_first_leaves_deadline_waits_alone, pending_read) {
  asio::write(s.client, asio::buffer("x", 1));
  tock::deadline dl(ctx, 20ms);
  completion wait;
  dl.async_wait(record(wait));
  read(dl.bind(record_io(r)));
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

// --- The deadline and the operation are due at the same time: each completes once, with either outcome.

// Each round, six steady timers due around the deadline (before, with and after it); a deadline's own wait
// completes with success too.
BOOST_AUTO_TEST_CASE_TEMPLATE(timer_due_with_deadline_completes_once, A, adapters) {
  asio::io_context ctx;
  allocation_counts counts;
  constexpr int rounds = 40;
  const std::array<steady_clock::duration, 6> offsets{-100us, -10us, 0us, 0us, 10us, 100us};
  tally outcomes;
  int waits = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(offsets.size(), 0);
    std::vector<std::unique_ptr<asio::steady_timer>> timers;
    const auto at = steady_clock::now() + 2ms;
    A limit(ctx, at);
    if constexpr (A::is_deadline) limit.deadline.async_wait([&](const error_code& ec) { waits += ec ? 100 : 1; });
    for (std::size_t k = 0; k < offsets.size(); ++k) {
      timers.push_back(std::make_unique<asio::steady_timer>(ctx, at + offsets[k]));
      timers.back()->async_wait(
          limit.bind(asio::bind_allocator(counting_allocator<void>(counts), outcomes.count(calls, k))));
    }
    BOOST_REQUIRE(run_until_idle(ctx));
    ctx.restart();
    for (std::size_t k = 0; k < offsets.size(); ++k) BOOST_REQUIRE_EQUAL(calls[k], 1);
  }
  BOOST_TEST_MESSAGE("success: " << outcomes.succeeded << ", timed_out: " << outcomes.timeouts);
  BOOST_CHECK_EQUAL(outcomes.succeeded + outcomes.timeouts, rounds * static_cast<int>(offsets.size()));
  BOOST_CHECK_EQUAL(outcomes.other, 0);
  if constexpr (A::is_deadline) BOOST_CHECK_EQUAL(waits, rounds);
  BOOST_CHECK_GT(counts.allocations.load(), 0u);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
  check_idle(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sleep_due_with_deadline_completes_once, A, adapters) {
  asio::io_context ctx;
  constexpr int rounds = 20;
  constexpr std::size_t per_round = 8;
  tally outcomes;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(per_round, 0);
    const auto at = steady_clock::now() + 2ms;
    A limit(ctx, at);
    for (std::size_t k = 0; k < per_round; ++k)
      tock::async_sleep_until(ctx, at, limit.bind(asio::bind_executor(ctx, outcomes.count(calls, k))));
    BOOST_REQUIRE(run_until_idle(ctx));
    ctx.restart();
    for (std::size_t k = 0; k < per_round; ++k) BOOST_REQUIRE_EQUAL(calls[k], 1);
  }
  BOOST_CHECK_EQUAL(outcomes.succeeded + outcomes.timeouts, rounds * static_cast<int>(per_round));
  BOOST_CHECK_EQUAL(outcomes.other, 0);
  check_idle(ctx);
}

// --- The user's own cancellation slot, bound to the handler inside the adapter's token. (The other nesting
// behaves the same: see composition_test.cpp.)

BOOST_FIXTURE_TEST_CASE_TEMPLATE(users_slot_aborts_read, A, adapters, pending_read) {
  A limit(ctx, never);
  asio::cancellation_signal signal;
  read(limit.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  check_idle(ctx);
  BOOST_CHECK(!signal.slot().has_handler());
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_times_out_with_users_slot_bound, A, adapters, pending_read) {
  A limit(ctx, 10ms);
  asio::cancellation_signal signal;
  read(limit.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(!signal.slot().has_handler());  // the adapter's forwarder was taken off the user's slot
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(users_slot_cleared_when_read_completes, A, adapters, pending_read) {
  asio::write(s.client, asio::buffer("x", 1));
  A limit(ctx, never);
  asio::cancellation_signal signal;
  read(limit.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  BOOST_CHECK(signal.slot().has_handler());
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK(!signal.slot().has_handler());
  signal.emit(asio::cancellation_type::terminal);  // nothing is left to cancel
  BOOST_CHECK_EQUAL(r.calls, 1);
}

// --- The cancellation type emitted when the deadline passes.

BOOST_AUTO_TEST_CASE_TEMPLATE(emits_terminal_cancellation_by_default, A, adapters) {
  asio::io_context ctx;
  A limit(ctx, 5ms);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, limit.bind(record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::terminal);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(emits_requested_cancellation_type, A, adapters) {
  for (auto requested : {asio::cancellation_type::partial, asio::cancellation_type::total}) {
    BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(requested)) {
      asio::io_context ctx;
      A limit(ctx, 5ms);
      cancellation_record rec;
      completion c;
      async_wait_for_cancellation(ctx, rec, limit.bind(record(c), requested));
      BOOST_REQUIRE(run_until_idle(ctx));
      BOOST_CHECK_EQUAL(rec.emitted, 1);
      BOOST_CHECK(rec.type == requested);
      BOOST_CHECK_EQUAL(c.calls, 1);
      BOOST_CHECK_EQUAL(c.ec, timed_out);
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(time_point_form_emits_requested_cancellation_type, A, adapters) {
  asio::io_context ctx;
  A limit(ctx, steady_clock::now() + 5ms);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, limit.bind(record(c), asio::cancellation_type::partial));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::partial);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(read_times_out_under_partial_cancellation, A, adapters, pending_read) {
  A limit(ctx, 10ms);
  read(limit.bind(record_io(r), asio::cancellation_type::partial));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
}

BOOST_AUTO_TEST_SUITE_END()
