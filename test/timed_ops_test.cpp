// timed_ops_test: timed operations, tock::timeout(d, token) / tock::timeout_at(t, token) and tock::deadline's
// bind(token), on real Asio operations: a read on a connected loopback socket pair (which pends until data is
// written), Asio's composed reads, a connect, a resolve, a steady_timer wait, a tock sleep, and an operation
// that records the cancellation type. A TIMED_OPS_CASE runs once with each adapter (with_deadline and
// with_timeout, timed_ops_support.hpp), as timed_ops_test/deadline/NAME and timed_ops_test/timeout/NAME; the
// cases for one adapter only are in its sub-suite, written out. Most cases run in virtual time
// (tock::manual_clock): they move time themselves, and check that nothing times out before its deadline and
// that it times out at the very advance that reaches it, however loaded the machine. The cases on
// steady_clock (TIMED_OPS_STEADY_CASE) say why; their timings are only checked as "not before the deadline".
// Every run of the context is bounded.
//
// The suite is in two files, which compile in parallel. This one: what the operation completes with (the
// deadline passes first, the operation completes first, both are due at once), the user's own cancellation
// slot, the cancellation type, shutdown, several threads. timed_ops_test.part2.cpp: completion tokens, then
// what only a deadline does (moving it, waiting on it, cancelling, destroying and moving it) and what only a
// timeout does.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace tock_test;  // test_support.hpp (never, service_of, check_idle, ...), timed_ops_support.hpp
using tock::manual_clock;

}  // namespace

BOOST_AUTO_TEST_SUITE(timed_ops_test)

// --- The deadline passes first: the operation is cancelled and completes with timed_out, not before it.

TIMED_OPS_FIXTURE_CASE(read_times_out_after_deadline, pending_read) {
  A limit(ctx, 20ms);
  read(limit.bind(record_io(r)));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 1u);
  BOOST_CHECK(limit.not_before() == manual_clock::now() + 20ms);
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.ec == sys::errc::timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 0u);
  BOOST_CHECK(r.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(read_times_out_at_time_point, pending_read) {
  const auto at = manual_clock::now() + 20ms;
  A limit(ctx, at);
  read(limit.bind(record_io(r)));
  advance_to(ctx, at - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, at));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == at);
  check_idle<manual_clock>(ctx);
}

// Virtual time stands still here: only the deadline, already passed, can end the read.
TIMED_OPS_FIXTURE_CASE(negative_duration_times_out_read_at_once, pending_read) {
  const auto start = manual_clock::now();
  A limit(ctx, -5ms);
  read(limit.bind(record_io(r)));
  BOOST_REQUIRE(settle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == start);
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(past_time_point_times_out_read_at_once, pending_read) {
  const auto start = manual_clock::now();
  A limit(ctx, start - 1s);
  read(limit.bind(record_io(r)));
  BOOST_REQUIRE(settle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == start);
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_CASE(timer_wait_times_out) {
  asio::io_context ctx;
  asio::steady_timer t(ctx, never);
  completion c;
  A limit(ctx, 10ms);
  t.async_wait(limit.bind(record(c)));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(c.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_CASE(sleep_times_out) {
  asio::io_context ctx;
  completion c;
  A limit(ctx, 10ms);
  // The sleep's initiation has no I/O object: the handler carries the executor.
  tock::async_sleep_until(ctx, manual_clock::now() + never, limit.bind(asio::bind_executor(ctx, record(c))));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 2u);  // the sleep and its deadline
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(c.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(async_read_times_out_with_bytes_so_far, pending_read) {
  asio::write(s.client, asio::buffer("ab", 2));
  A limit(ctx, 20ms);
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), limit.bind(record_io(r)));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(r.bytes, 2u);
  BOOST_CHECK(r.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(read_until_times_out_without_delimiter, pending_read) {
  asio::write(s.client, asio::buffer("abc", 3));
  A limit(ctx, 20ms);
  std::string line;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', limit.bind(record_io(r)));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

// Connecting to a listener whose accept queue is full pends on Linux (the SYN is dropped and retried after a
// second); the queue is filled with connections of its own, each bounded the same way. Whether a connect
// pends is the kernel's doing, seen only in real time: one still pending after 100 ms is taken to pend, and
// only then does virtual time move (a late success then counts as a connection, as it would have).
TIMED_OPS_CASE(connect_to_full_backlog_times_out) {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx);
  acceptor.open(tcp::v4());
  acceptor.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  acceptor.listen(0);
  const std::array<tcp::endpoint, 1> endpoints{acceptor.local_endpoint()};
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  int connected = 0;
  error_code last;
  manual_clock::time_point last_at{};
  manual_clock::time_point last_deadline{};
  while (sockets.size() < 16) {
    sockets.push_back(std::make_unique<tcp::socket>(ctx));
    int calls = 0;
    A limit(ctx, 20ms);
    asio::async_connect(*sockets.back(), endpoints, limit.bind([&](const error_code& ec, const tcp::endpoint&) {
      ++calls;
      last = ec;
      last_at = manual_clock::now();
    }));
    last_deadline = limit.not_before();
    if (!run_until(
            ctx, [&] { return calls > 0; }, 100ms)) {
      advance_to(ctx, last_deadline - tick);
      if (calls == 0) advance_to(ctx, last_deadline);
    }
    BOOST_REQUIRE(rerun_until_idle(ctx));
    BOOST_REQUIRE_EQUAL(calls, 1);
    if (last) break;
    ++connected;
  }
  BOOST_TEST_MESSAGE("connections accepted into the queue before one pended: " << connected);
  BOOST_CHECK_EQUAL(last, timed_out);
  BOOST_CHECK(last_at == last_deadline);
  check_idle<manual_clock>(ctx);
}

// --- The operation completes first: it succeeds and its deadline entry is gone, even from its own handler.

// Virtual time stands still until the read is done: only the data can complete it.
TIMED_OPS_FIXTURE_CASE(read_completes_before_deadline, pending_read) {
  asio::write(s.client, asio::buffer("hello", 5));
  A limit(ctx, 20ms);
  std::size_t pending_in_handler = 99;
  read(limit.bind(record_io_then(r, [&] { pending_in_handler = service_of<manual_clock>(ctx).pending(); })));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 5u);
  BOOST_CHECK_EQUAL(std::string(buf.data(), r.bytes), "hello");
  BOOST_CHECK(r.virtual_at < limit.not_before());
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
  BOOST_CHECK(advance_by(ctx, 60ms));  // well past the deadline: nothing else may run
  BOOST_CHECK_EQUAL(r.calls, 1);
  check_idle<manual_clock>(ctx);
}

// The data is written at the last moment before the deadline.
TIMED_OPS_FIXTURE_CASE(read_completes_when_data_arrives_in_time, pending_read) {
  A limit(ctx, 20ms);
  read(limit.bind(record_io(r)));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  asio::write(s.client, asio::buffer("x", 1));
  BOOST_REQUIRE(rerun_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 1u);
  BOOST_CHECK(r.virtual_at == limit.not_before() - tick);
  BOOST_CHECK(advance_by(ctx, 20ms));
  BOOST_CHECK_EQUAL(r.calls, 1);
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(async_read_completes_before_deadline, pending_read) {
  asio::write(s.client, asio::buffer("abcd", 4));
  A limit(ctx, 20ms);
  asio::async_read(s.server, asio::buffer(buf), asio::transfer_exactly(4), limit.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  BOOST_CHECK(r.virtual_at < limit.not_before());
  BOOST_CHECK(advance_by(ctx, 40ms));  // past the deadline: nothing else may run
  BOOST_CHECK_EQUAL(r.calls, 1);
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(read_until_completes_before_deadline, pending_read) {
  asio::write(s.client, asio::buffer("abc\n", 4));
  A limit(ctx, 20ms);
  std::string line;
  asio::async_read_until(s.server, asio::dynamic_buffer(line), '\n', limit.bind(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 4u);
  BOOST_CHECK_EQUAL(line, "abc\n");
  BOOST_CHECK(r.virtual_at < limit.not_before());
  BOOST_CHECK(advance_by(ctx, 40ms));  // past the deadline: nothing else may run
  BOOST_CHECK_EQUAL(r.calls, 1);
  check_idle<manual_clock>(ctx);
}

// However long the resolver's thread takes, the deadline does not pass until the case moves time.
TIMED_OPS_CASE(resolve_completes_before_deadline) {
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
                           pending_in_handler = service_of<manual_clock>(ctx).pending();
                         }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(calls, 1);
  BOOST_CHECK(!result);
  BOOST_CHECK_GE(entries, 1u);
  BOOST_CHECK_EQUAL(pending_in_handler, 0u);
  BOOST_CHECK(advance_by(ctx, 5s));
  BOOST_CHECK_EQUAL(calls, 1);
  check_idle<manual_clock>(ctx);
}

// --- The deadline and the operation are due at the same time: each completes once, with either outcome.

// Each round, six steady timers due around the deadline (before, with and after it); a deadline's own wait
// completes with success too.
// Real time: the race is between Asio's own timers and the deadline, and only real time makes both due.
TIMED_OPS_STEADY_CASE(timer_due_with_deadline_completes_once) {
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

// The sleeps and the deadline have the same key, and in virtual time all come due in the same advance.
TIMED_OPS_CASE(sleep_due_with_deadline_completes_once) {
  asio::io_context ctx;
  constexpr int rounds = 20;
  constexpr std::size_t per_round = 8;
  tally outcomes;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> calls(per_round, 0);
    const auto at = manual_clock::now() + 2ms;
    A limit(ctx, at);
    for (std::size_t k = 0; k < per_round; ++k)
      tock::async_sleep_until(ctx, at, limit.bind(asio::bind_executor(ctx, outcomes.count(calls, k))));
    advance_to(ctx, at - tick);
    for (std::size_t k = 0; k < per_round; ++k) BOOST_REQUIRE_EQUAL(calls[k], 0);
    BOOST_REQUIRE(advance_to(ctx, at));
    for (std::size_t k = 0; k < per_round; ++k) BOOST_REQUIRE_EQUAL(calls[k], 1);
  }
  BOOST_TEST_MESSAGE("success: " << outcomes.succeeded << ", timed_out: " << outcomes.timeouts);
  BOOST_CHECK_EQUAL(outcomes.succeeded + outcomes.timeouts, rounds * static_cast<int>(per_round));
  BOOST_CHECK_EQUAL(outcomes.other, 0);
  check_idle<manual_clock>(ctx);
}

// --- The user's own cancellation slot, bound to the handler inside the adapter's token. (The other nesting
// behaves the same: see composition_test.cpp.)

TIMED_OPS_FIXTURE_CASE(users_slot_aborts_read, pending_read) {
  A limit(ctx, never);
  asio::cancellation_signal signal;
  read(limit.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  check_idle<manual_clock>(ctx);
  BOOST_CHECK(!signal.slot().has_handler());
}

TIMED_OPS_FIXTURE_CASE(read_times_out_with_users_slot_bound, pending_read) {
  A limit(ctx, 10ms);
  asio::cancellation_signal signal;
  read(limit.bind(asio::bind_cancellation_slot(signal.slot(), record_io(r))));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == limit.not_before());
  BOOST_CHECK(!signal.slot().has_handler());  // the adapter's forwarder was taken off the user's slot
}

TIMED_OPS_FIXTURE_CASE(users_slot_cleared_when_read_completes, pending_read) {
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

TIMED_OPS_CASE(emits_terminal_cancellation_by_default) {
  asio::io_context ctx;
  A limit(ctx, 5ms);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, limit.bind(record(c)));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(rec.emitted, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::terminal);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

TIMED_OPS_CASE(emits_requested_cancellation_type) {
  for (auto requested : {asio::cancellation_type::partial, asio::cancellation_type::total}) {
    BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(requested)) {
      asio::io_context ctx;
      A limit(ctx, 5ms);
      cancellation_record rec;
      completion c;
      async_wait_for_cancellation(ctx, rec, limit.bind(record(c), requested));
      advance_to(ctx, limit.not_before() - tick);
      BOOST_CHECK_EQUAL(rec.emitted, 0);
      BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
      BOOST_CHECK_EQUAL(rec.emitted, 1);
      BOOST_CHECK(rec.type == requested);
      BOOST_CHECK_EQUAL(c.calls, 1);
      BOOST_CHECK_EQUAL(c.ec, timed_out);
    }
  }
}

TIMED_OPS_CASE(time_point_form_emits_requested_cancellation_type) {
  asio::io_context ctx;
  const auto at = manual_clock::now() + 5ms;
  A limit(ctx, at);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, limit.bind(record(c), asio::cancellation_type::partial));
  advance_to(ctx, at - tick);
  BOOST_CHECK_EQUAL(rec.emitted, 0);
  BOOST_REQUIRE(advance_to(ctx, at));
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::partial);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
}

TIMED_OPS_FIXTURE_CASE(read_times_out_under_partial_cancellation, pending_read) {
  A limit(ctx, 10ms);
  read(limit.bind(record_io(r), asio::cancellation_type::partial));
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == limit.not_before());
}

// --- Shutdown: a pending handler is destroyed once, never called.

TIMED_OPS_CASE(shutdown_destroys_pending_read_handler_once) {
  probe p;
  {
    shutdown_context ctx;
    {
      socket_pair s(ctx);
      A limit(ctx, never);
      std::array<char, 16> buf{};
      s.server.async_read_some(asio::buffer(buf), limit.bind(tracked_handler(p)));
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

// The deadline passed and cancelled the read, whose completion is queued when the context shuts down.
TIMED_OPS_CASE(shutdown_after_deadline_fired_destroys_read_handler_once) {
  probe p;
  {
    shutdown_context ctx;
    {
      socket_pair s(ctx);
      A limit(ctx, 1ms);
      std::array<char, 16> buf{};
      s.server.async_read_some(asio::buffer(buf), limit.bind(tracked_handler(p)));
      ctx.poll();  // what is ready before the deadline, so that the next handler to run is the driver's
      BOOST_CHECK_EQUAL(p.alive(), 1);
      manual_clock::advance(1ms);
      BOOST_REQUIRE_EQUAL(ctx.run_one_for(5s), 1u);  // the service's driver: the deadline passes
      BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
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

// Each connection has a strand; its sockets and its adapter are created on it and its handlers are bound to
// it inside the adapter's token. Iterations alternate: no data (the deadline passes; a deadline's own wait
// completes too), data written first (the read wins), and data written when the deadline is due (either may
// win).
// Real time: real sockets racing real deadlines on two threads, which virtual time would serialise.
TIMED_OPS_STEADY_CASE(strand_reads_on_two_threads_complete_once) {
  asio::io_context ctx(2);
  constexpr int connections = 8;
  constexpr int per_connection = 25;  // 200 operations

  struct connection {
    explicit connection(asio::io_context& ctx)
        : strand(asio::make_strand(ctx)), sockets(strand), limit(strand, never), writer(strand) {}
    asio::strand<asio::io_context::executor_type> strand;
    socket_pair sockets;
    A limit;
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
  // The next iteration starts once every part of this one (read, deadline wait, delayed write) is done.
  auto part_done = [&](connection& c, int i) {
    if (--c.parts == 0) start(c, i + 1);
  };
  start = [&](connection& c, int i) {
    if (i == per_connection) return;
    const int kind = i % 3;
    const bool deadline_wait = A::is_deadline && kind == 0;
    c.parts = 1 + (kind == 2 ? 1 : 0) + (deadline_wait ? 1 : 0);
    if (kind == 1) {
      asio::write(c.sockets.client, asio::buffer("x", 1));
      ++c.unread;
    }
    c.limit.expires_after(kind == 0 ? 2ms : kind == 1 ? never : 1ms);
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
    c.sockets.server.async_read_some(asio::buffer(c.buf), c.limit.bind(asio::bind_executor(c.strand, handler)));
    if constexpr (A::is_deadline) {
      if (deadline_wait) {
        c.limit.deadline.async_wait(asio::bind_executor(c.strand, [&, i](const error_code& ec) {
          if (!c.strand.running_in_this_thread()) ++outside_strand;
          if (ec) ++unexpected;
          ++c.waits[i];
          part_done(c, i);
        }));
      }
    }
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
  for (auto& c : conns) {
    for (int n : c->calls) BOOST_REQUIRE_EQUAL(n, 1);
    if constexpr (A::is_deadline)
      for (int i = 0; i < per_connection; ++i) BOOST_REQUIRE_EQUAL(c->waits[i], i % 3 == 0 ? 1 : 0);
  }
  BOOST_TEST_MESSAGE("successes: " << successes.load() << ", timeouts: " << timeouts.load()
                                   << ", races the deadline won: " << races_timed_out.load());
  BOOST_CHECK_EQUAL(successes.load() + timeouts.load(), connections * per_connection);
  BOOST_CHECK_GT(timeouts.load(), 0);
  BOOST_CHECK_GT(successes.load(), 0);
  BOOST_CHECK_EQUAL(unexpected.load(), 0);
  BOOST_CHECK_EQUAL(outside_strand.load(), 0);
  check_idle(ctx);
}

BOOST_AUTO_TEST_SUITE_END()
