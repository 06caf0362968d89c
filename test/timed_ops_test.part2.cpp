// timed_ops_test, continued (see timed_ops_test.cpp): completion tokens, then what only a deadline does
// (moving it, waiting on it, cancelling, destroying and moving it) and what only a timeout does. All in
// virtual time (tock::basic_deadline<tock::manual_clock>, tock::timeout<tock::manual_clock>).
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using namespace tock_test;  // test_support.hpp (never, service_of, check_idle, ...), timed_ops_support.hpp
using tock::manual_clock;
using manual_deadline = tock::basic_deadline<manual_clock>;
using manual_timer = tock::basic_timer<manual_clock>;

}  // namespace

BOOST_AUTO_TEST_SUITE(timed_ops_test)

// --- Completion tokens inside the adapter: use_awaitable, as_tuple (inside and outside), deferred, and the
// awaitable operators.

TIMED_OPS_FIXTURE_CASE(use_awaitable_read_throws_timed_out, pending_read) {
  A limit(ctx, 20ms);
  error_code thrown;
  bool returned = false;
  manual_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(
      ctx,
      [&]() -> asio::awaitable<void> {
        try {
          co_await read(limit.bind(asio::use_awaitable));
          returned = true;
        } catch (const sys::system_error& e) {
          thrown = e.code();
          at = manual_clock::now();
        }
      },
      [&] {
        advance_to(ctx, limit.not_before() - tick);
        BOOST_CHECK(!thrown && !returned);
        manual_clock::advance_to(limit.not_before());
      }));
  BOOST_CHECK(!returned);
  BOOST_CHECK_EQUAL(thrown, timed_out);
  BOOST_CHECK(thrown == sys::errc::timed_out);
  BOOST_CHECK(at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(as_tuple_read_returns_timed_out, pending_read) {
  A limit(ctx, 10ms);
  error_code result;
  manual_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto [ec, n] = co_await read(limit.bind(asio::as_tuple(asio::use_awaitable)));
        result = ec;
        at = manual_clock::now();
        BOOST_CHECK_EQUAL(n, 0u);
      },
      [&] {
        advance_to(ctx, limit.not_before() - tick);
        BOOST_CHECK(at == manual_clock::time_point{});
        manual_clock::advance_to(limit.not_before());
      }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK(at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

// as_tuple around the adapter's token: the adapter's handler then sees the tuple, not the error code.
TIMED_OPS_FIXTURE_CASE(as_tuple_outside_returns_timed_out, pending_read) {
  A limit(ctx, 10ms);
  error_code result;
  manual_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto [ec, n] = co_await read(asio::as_tuple(limit.bind(asio::use_awaitable)));
        result = ec;
        at = manual_clock::now();
        BOOST_CHECK_EQUAL(n, 0u);
      },
      [&] {
        advance_to(ctx, limit.not_before() - tick);
        BOOST_CHECK(at == manual_clock::time_point{});
        manual_clock::advance_to(limit.not_before());
      }));
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK(at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(use_awaitable_read_returns_bytes_before_deadline, pending_read) {
  asio::write(s.client, asio::buffer("abc", 3));
  A limit(ctx, never);
  std::size_t got = 0;
  BOOST_REQUIRE(
      run_coroutine(ctx, [&]() -> asio::awaitable<void> { got = co_await read(limit.bind(asio::use_awaitable)); }));
  BOOST_CHECK_EQUAL(got, 3u);
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(deferred_read_times_out_once_invoked, pending_read) {
  A limit(ctx, 15ms);
  auto op = read(limit.bind(asio::deferred));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);  // nothing is started before the invocation
  std::move(op)(record_io(r));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 1u);
  advance_to(ctx, limit.not_before() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(deferred_read_awaited_throws_timed_out, pending_read) {
  A limit(ctx, 10ms);
  error_code thrown;
  manual_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto op = read(limit.bind(asio::deferred));
        try {
          co_await std::move(op)(asio::use_awaitable);
        } catch (const sys::system_error& e) {
          thrown = e.code();
          at = manual_clock::now();
        }
      },
      [&] {
        advance_to(ctx, limit.not_before() - tick);
        BOOST_CHECK(!thrown);
        manual_clock::advance_to(limit.not_before());
      }));
  BOOST_CHECK_EQUAL(thrown, timed_out);
  BOOST_CHECK(at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(or_with_longer_sleep_returns_timed_out_read, pending_read) {
  A limit(ctx, 10ms);
  std::size_t index = 99;
  error_code result;
  manual_clock::time_point at{};
  BOOST_REQUIRE(run_coroutine(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto v = co_await (read(limit.bind(asio::as_tuple(asio::use_awaitable))) ||
                           tock::sleep_until(manual_clock::now() + never));
        index = v.index();
        at = manual_clock::now();
        if (v.index() == 0) result = std::get<0>(std::get<0>(v));
      },
      [&] {
        advance_to(ctx, limit.not_before() - tick);
        BOOST_CHECK_EQUAL(index, 99u);
        manual_clock::advance_to(limit.not_before());
      }));
  BOOST_CHECK_EQUAL(index, 0u);
  BOOST_CHECK_EQUAL(result, timed_out);
  BOOST_CHECK(at == limit.not_before());
  check_idle<manual_clock>(ctx);
}

// The group's cancellation of the losing read reaches the adapter's operation through the coroutine's slot:
// the read is aborted (not timed out) and its deadline entry removed. A deadline's own wait is untouched.
TIMED_OPS_FIXTURE_CASE(or_with_shorter_sleep_aborts_read, pending_read) {
  A limit(ctx, never);
  completion wait;
  if constexpr (A::is_deadline) limit.deadline.async_wait(record(wait));
  std::size_t index = 99;
  error_code read_error;
  std::size_t pending_after = 99;
  const auto sleep_end = manual_clock::now() + 10ms;
  auto race = [&]() -> asio::awaitable<void> {
    auto limited_read = [&]() -> asio::awaitable<void> {
      try {
        co_await read(limit.bind(asio::use_awaitable));
      } catch (const sys::system_error& e) {
        read_error = e.code();
        throw;
      }
    };
    auto v = co_await (limited_read() || tock::sleep_until(sleep_end));
    index = v.index();
    pending_after = service_of<manual_clock>(ctx).pending();
    if constexpr (A::is_deadline) limit.deadline.cancel();
  };
  BOOST_REQUIRE(run_coroutine(ctx, race, [&] {
    advance_to(ctx, sleep_end - tick);
    BOOST_CHECK_EQUAL(index, 99u);
    manual_clock::advance_to(sleep_end);
  }));
  BOOST_CHECK_EQUAL(index, 1u);
  BOOST_CHECK_EQUAL(read_error, aborted);
  BOOST_CHECK_EQUAL(pending_after, A::is_deadline ? 1u : 0u);  // a deadline's own wait
  if constexpr (A::is_deadline) {
    BOOST_CHECK_EQUAL(wait.calls, 1);
    BOOST_CHECK_EQUAL(wait.ec, aborted);  // by the cancel() above, not by the read
  }
  check_idle<manual_clock>(ctx);
}

TIMED_OPS_FIXTURE_CASE(allocates_through_handler_allocator_and_frees_all, pending_read) {
  allocation_counts counts;
  A limit(ctx, 5ms);
  read(limit.bind(asio::bind_allocator(counting_allocator<void>(counts), record_io(r))));
  BOOST_CHECK_GT(counts.allocations.load(), 0u);
  BOOST_REQUIRE(advance_to(ctx, limit.not_before()));
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
}

// === tock::deadline only (timed_ops_test/deadline): what a deadline object does besides bounding operations.

BOOST_AUTO_TEST_SUITE(deadline)

// --- Moving the deadline: bound operations and waits follow it (a deferred operation, as it is when invoked).

BOOST_FIXTURE_TEST_CASE(deadline_extended_repeatedly_times_out_at_last_expiry, pending_read) {
  const auto start = manual_clock::now();
  manual_deadline dl(ctx, 10ms);
  read(dl.bind(record_io(r)));
  dl.expires_after(20ms);
  dl.expires_after(30ms);
  dl.expires_after(40ms);
  const auto last = dl.expiry();
  BOOST_CHECK(last == start + 40ms);
  for (auto passed : {10ms, 20ms, 30ms}) {  // each earlier expiry passes, and with it its heap key
    advance_to(ctx, start + passed);
    BOOST_CHECK_EQUAL(r.calls, 0);
  }
  advance_to(ctx, last - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, last));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == last);
  check_idle<manual_clock>(ctx);
}

// Moves made from inside the context while the read pends, each well before the deadline it replaces.
BOOST_FIXTURE_TEST_CASE(deadline_extended_while_read_pends_times_out_at_last_expiry, pending_read) {
  manual_deadline dl(ctx, 25ms);
  read(dl.bind(record_io(r)));
  manual_timer tick_timer(ctx);
  int moves = 0;
  int moves_after_completion = 0;
  manual_clock::time_point last{};
  std::function<void()> schedule = [&] {
    tick_timer.expires_after(5ms);
    tick_timer.async_wait([&](const error_code&) {
      if (r.calls > 0) ++moves_after_completion;
      dl.expires_after(25ms);
      last = dl.expiry();
      if (++moves < 4) schedule();
    });
  };
  schedule();
  for (int i = 0; i < 4; ++i) advance_by(ctx, 5ms);
  BOOST_CHECK_EQUAL(moves, 4);
  BOOST_CHECK_EQUAL(r.calls, 0);
  advance_to(ctx, last - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, last));
  BOOST_CHECK_EQUAL(moves_after_completion, 0);
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == last);
  check_idle<manual_clock>(ctx);
}

BOOST_FIXTURE_TEST_CASE(deadline_moved_earlier_times_out_read_earlier, pending_read) {
  manual_deadline dl(ctx, never);
  read(dl.bind(record_io(r)));
  settle(ctx);
  dl.expires_after(15ms);
  const auto moved = dl.expiry();
  advance_to(ctx, moved - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, moved));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == moved);  // not at the first expiry, `never` later
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

BOOST_FIXTURE_TEST_CASE(deadline_moved_to_max_holds_read_until_moved_back, pending_read) {
  manual_deadline dl(ctx, 10ms);
  read(dl.bind(record_io(r)));
  dl.expires_at(manual_deadline::time_point::max());
  advance_by(ctx, 50ms);  // well past the first expiry
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 1u);
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  dl.expires_after(5ms);
  const auto moved = dl.expiry();
  advance_to(ctx, moved - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, moved));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == moved);
  check_idle<manual_clock>(ctx);
}

BOOST_FIXTURE_TEST_CASE(deadline_without_expiry_holds_read_until_set, pending_read) {
  manual_deadline dl(ctx);
  BOOST_CHECK(dl.expiry() == manual_deadline::time_point::max());
  read(dl.bind(record_io(r)));
  advance_by(ctx, 20ms);
  BOOST_CHECK_EQUAL(r.calls, 0);
  dl.expires_after(5ms);
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == dl.expiry());
}

BOOST_AUTO_TEST_CASE(deadline_wait_completes_when_passed_not_when_moved) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  manual_deadline dl(ctx, never);
  completion w;
  dl.async_wait(record(w));
  dl.expires_after(500ms);  // earlier
  dl.expires_after(600ms);  // later
  settle(ctx);
  BOOST_CHECK_EQUAL(w.calls, 0);
  dl.expires_after(30ms);  // earlier
  const auto earlier = dl.expiry();
  int moves_seen_completed = 0;
  manual_timer mid(ctx, 5ms);
  mid.async_wait([&](const error_code&) {
    moves_seen_completed += w.calls;
    dl.expires_after(30ms);  // later, while the wait is in the heap
  });
  advance_by(ctx, 5ms);
  const auto last = dl.expiry();
  BOOST_CHECK(last == start + 35ms);
  advance_to(ctx, earlier);  // the expiry it was moved from passes
  BOOST_CHECK_EQUAL(w.calls, 0);
  advance_to(ctx, last - tick);
  BOOST_CHECK_EQUAL(w.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, last));
  BOOST_CHECK_EQUAL(moves_seen_completed, 0);
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  BOOST_CHECK(!w.ec);
  BOOST_CHECK(w.virtual_at == last);
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

// A deferred operation is tied to the deadline as it is when the operation is invoked.
BOOST_FIXTURE_TEST_CASE(deferred_read_follows_deadline_moved_before_invocation, pending_read) {
  const auto start = manual_clock::now();
  manual_deadline dl(ctx, 1ms);
  auto op = read(dl.bind(asio::deferred));
  dl.expires_after(20ms);
  std::move(op)(record_io(r));
  advance_to(ctx, start + 1ms);
  BOOST_CHECK_EQUAL(r.calls, 0);
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == dl.expiry());
}

// One deadline per direction: the read's passing leaves the write pending; the write then times out on its own.
BOOST_FIXTURE_TEST_CASE(read_and_write_deadlines_are_independent, pending_read) {
  // Small buffers and a peer that never reads: a large write pends.
  s.server.set_option(asio::socket_base::send_buffer_size(4096));
  s.client.set_option(asio::socket_base::receive_buffer_size(4096));
  manual_deadline read_deadline(ctx, 10ms);
  manual_deadline write_deadline(ctx, never);
  std::vector<char> payload(8 * 1024 * 1024, 'x');
  io_result w;
  asio::async_write(s.server, asio::buffer(payload), write_deadline.bind(record_io(w)));
  int writes_done_when_read_timed_out = -1;
  manual_clock::time_point write_expiry{};
  read(read_deadline.bind(record_io_then(r, [&] {
    writes_done_when_read_timed_out = w.calls;
    write_deadline.expires_after(10ms);
    write_expiry = write_deadline.expiry();
  })));
  advance_to(ctx, read_deadline.expiry());
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == read_deadline.expiry());
  BOOST_CHECK_EQUAL(writes_done_when_read_timed_out, 0);
  BOOST_CHECK_EQUAL(w.calls, 0);
  advance_to(ctx, write_expiry - tick);
  BOOST_CHECK_EQUAL(w.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, write_expiry));
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  BOOST_CHECK_EQUAL(w.ec, timed_out);
  BOOST_CHECK_LT(w.bytes, payload.size());
  BOOST_CHECK(w.virtual_at == write_expiry);
  BOOST_CHECK(read_deadline.expiry() < write_expiry);
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

// A deadline moved from a thread other than the one running the context, while that thread's driver re-keys
// it (a lazy extension surfacing): a move to a time after the heap key but before the current expiry takes
// the lock-free path, and must not be lost to the re-key. A sleep due with the heap key runs first in the
// driver's batch and signals when to move. Checked by the service's invariants (no deadline keyed later than
// its expiry), so without any timing assumption; stops at the first broken round. The threads race in real
// time; the clock is virtual, so that no deadline passes before the case moves time, however slow a thread.
BOOST_AUTO_TEST_CASE(deadline_moved_during_driver_rekey_is_not_lost) {
  asio::io_context ctx;
  auto work = asio::make_work_guard(ctx);
  std::thread runner([&] { ctx.run_for(30s); });
  constexpr int rounds = 100;
  constexpr int per_round = 32;
  int broken_rounds = 0;
  int rounds_run = 0;
  std::atomic<int> failed_waits{0};
  std::atomic<int> early_waits{0};  // completed before the expiry they were moved to
  for (int round = 0; round < rounds && broken_rounds == 0; ++round, ++rounds_run) {
    std::vector<std::unique_ptr<manual_deadline>> deadlines;
    std::atomic<int> done{0};
    std::atomic<bool> batch_started{false};
    const auto key = manual_clock::now() + 1ms;
    tock::async_sleep_until(ctx, key, [&](const error_code&) { batch_started.store(true); });
    for (int i = 0; i < per_round; ++i) {
      deadlines.push_back(std::make_unique<manual_deadline>(ctx.get_executor(), key));
      deadlines.back()->async_wait([&, key](const error_code& ec) {
        if (ec && ec != aborted) ++failed_waits;
        if (!ec && manual_clock::now() < key + 3ms) ++early_waits;
        ++done;
      });
      deadlines.back()->expires_at(key + 50ms);  // later: only the expiry moves; the heap keeps `key`
    }
    manual_clock::advance_to(key);  // the driver's batch starts on the runner's thread
    const auto spin_limit = steady_clock::now() + 5s;
    while (!batch_started.load() && steady_clock::now() < spin_limit) {
    }
    for (auto& d : deadlines) d->expires_at(key + 3ms);  // after the heap key, before the current expiry
    if (!service_of<manual_clock>(ctx).invariants_hold()) ++broken_rounds;
    if (broken_rounds > 0)
      for (auto& d : deadlines) d->cancel();
    manual_clock::advance_to(key + 3ms);
    const auto limit = steady_clock::now() + 5s;
    while (done.load() < per_round && steady_clock::now() < limit) std::this_thread::sleep_for(100us);
    BOOST_REQUIRE_EQUAL(done.load(), per_round);
  }
  work.reset();
  runner.join();
  BOOST_TEST_MESSAGE("rounds run: " << rounds_run);
  BOOST_CHECK_EQUAL(broken_rounds, 0);
  BOOST_CHECK_EQUAL(failed_waits.load(), 0);
  BOOST_CHECK_EQUAL(early_waits.load(), 0);
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

// --- One deadline, many operations: one completing leaves the others alone, they time out together, cancel(),
// the destructor and shutdown end them all, and a deadline that has passed or was cancelled bounds new ones.

BOOST_FIXTURE_TEST_CASE(read_completing_first_leaves_deadline_waits_alone, pending_read) {
  asio::write(s.client, asio::buffer("x", 1));
  manual_deadline dl(ctx, 20ms);
  completion wait;
  dl.async_wait(record(wait));
  read(dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 3u);
  BOOST_REQUIRE(run_until(ctx, [&] { return r.calls > 0; }));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK(r.virtual_at < dl.expiry());
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(wait.calls, 0);
  BOOST_CHECK_EQUAL(timer_wait.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(wait.calls, 1);
  BOOST_CHECK(!wait.ec);
  BOOST_CHECK(wait.virtual_at == dl.expiry());
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, timed_out);
  BOOST_CHECK(timer_wait.virtual_at == dl.expiry());
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

BOOST_FIXTURE_TEST_CASE(deadline_times_out_all_bound_operations_together, pending_read) {
  manual_deadline dl(ctx, 20ms);
  read(dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  completion sleep;
  // The sleep's initiation has no I/O object: the handler carries the executor.
  tock::async_sleep_until(ctx, manual_clock::now() + never, dl.bind(asio::bind_executor(ctx, record(sleep))));
  completion wait;
  dl.async_wait(record(wait));
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 5u);  // three bound, the sleep itself, one wait
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(r.calls + timer_wait.calls + sleep.calls + wait.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_REQUIRE_EQUAL(timer_wait.calls, 1);
  BOOST_REQUIRE_EQUAL(sleep.calls, 1);
  BOOST_REQUIRE_EQUAL(wait.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK_EQUAL(timer_wait.ec, timed_out);
  BOOST_CHECK_EQUAL(sleep.ec, timed_out);
  BOOST_CHECK(!wait.ec);
  for (auto at : {r.virtual_at, timer_wait.virtual_at, sleep.virtual_at, wait.virtual_at})
    BOOST_CHECK(at == dl.expiry());  // all at the one advance that reached it
  check_idle<manual_clock>(ctx);
}

BOOST_FIXTURE_TEST_CASE(deadline_cancel_aborts_waits_and_bound_operations, pending_read) {
  manual_deadline dl(ctx, never);
  completion w1;
  completion w2;
  dl.async_wait(record(w1));
  dl.async_wait(record(w2));
  read(dl.bind(record_io(r)));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl.bind(record(timer_wait)));
  ctx.poll();
  BOOST_CHECK_EQUAL(dl.cancel(), 4u);
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(w1.calls, 1);
  BOOST_CHECK_EQUAL(w1.ec, aborted);
  BOOST_CHECK_EQUAL(w2.calls, 1);
  BOOST_CHECK_EQUAL(w2.ec, aborted);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, aborted);
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  BOOST_CHECK_EQUAL(dl.cancel(), 0u);
}

BOOST_FIXTURE_TEST_CASE(deadline_binds_again_after_cancel, pending_read) {
  manual_deadline dl(ctx, never);
  read(dl.bind(record_io(r)));
  dl.cancel();
  BOOST_REQUIRE(settle(ctx));
  BOOST_CHECK_EQUAL(r.ec, aborted);
  dl.expires_after(10ms);
  io_result second;
  read(dl.bind(record_io(second)));
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(second.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(second.calls, 1);
  BOOST_CHECK_EQUAL(second.ec, timed_out);
  BOOST_CHECK(second.virtual_at == dl.expiry());
  check_idle<manual_clock>(ctx);
}

// A cancelled deadline stays in the heap, re-keyed when its latest time moves earlier (deadline_link.hpp, rule
// 3), but nothing it holds can fire: after `change` (an earlier latest time) the context must run out of work,
// not wait for that key (found by fuzz_ops: set_slack and an earlier expiry armed the driver for it). It still
// limits the next read.
template <typename Change>
void cancelled_deadline_keeps_the_context_idle(pending_read& f, manual_deadline& dl, Change change) {
  f.read(dl.bind(record_io(f.r)));
  f.ctx.poll();
  dl.cancel();
  BOOST_REQUIRE(settle(f.ctx));
  BOOST_CHECK_EQUAL(f.r.ec, aborted);
  change();
  BOOST_CHECK(service_of<manual_clock>(f.ctx).invariants_hold());
  f.ctx.restart();
  f.ctx.poll();
  BOOST_CHECK(f.ctx.stopped());  // no work left: run() would return
  io_result second;
  f.read(dl.bind(record_io(second)));
  advance_to(f.ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(second.calls, 0);
  BOOST_REQUIRE(advance_to(f.ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(second.calls, 1);
  BOOST_CHECK_EQUAL(second.ec, timed_out);
  BOOST_CHECK(second.virtual_at == dl.expiry());
  check_idle<manual_clock>(f.ctx);
}

BOOST_FIXTURE_TEST_CASE(deadline_cancelled_then_given_less_slack_keeps_the_context_idle, pending_read) {
  manual_deadline dl(ctx, 10ms);
  dl.set_slack(4ms);
  cancelled_deadline_keeps_the_context_idle(*this, dl, [&] { dl.set_slack(0ms); });
}

BOOST_FIXTURE_TEST_CASE(deadline_cancelled_then_moved_earlier_keeps_the_context_idle, pending_read) {
  manual_deadline dl(ctx, 10ms);
  cancelled_deadline_keeps_the_context_idle(*this, dl, [&] { dl.expires_after(5ms); });
}

// A deadline that goes away aborts its waits and leaves its bound operations to their I/O objects, without a
// limit (timed_op::on_entry: a cancellation then could reach an I/O object already destroyed).
BOOST_FIXTURE_TEST_CASE(deadline_destroyed_aborts_waits_detaches_bound_operations_and_frees_all, pending_read) {
  allocation_counts counts;
  const counting_allocator<void> alloc(counts);
  auto dl = std::make_unique<manual_deadline>(ctx, 5ms);
  read(dl->bind(asio::bind_allocator(alloc, record_io(r))));
  asio::steady_timer t(ctx, never);
  completion timer_wait;
  t.async_wait(dl->bind(asio::bind_allocator(alloc, record(timer_wait))));
  completion wait;
  dl->async_wait(asio::bind_allocator(alloc, record(wait)));
  ctx.poll();
  BOOST_CHECK_GT(counts.live_bytes.load(), 0);
  dl.reset();
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
  advance_by(ctx, 10ms);  // past the limit the deadline had
  BOOST_CHECK_EQUAL(wait.calls, 1);
  BOOST_CHECK_EQUAL(wait.ec, aborted);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_CHECK_EQUAL(timer_wait.calls, 0);
  // They end as their I/O objects say, with their own results.
  asio::write(s.client, asio::buffer("x", 1));
  t.cancel();
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.bytes, 1u);
  BOOST_CHECK_EQUAL(timer_wait.calls, 1);
  BOOST_CHECK_EQUAL(timer_wait.ec, aborted);
  BOOST_CHECK_EQUAL(counts.allocations.load(), counts.deallocations.load());
  BOOST_CHECK_EQUAL(counts.live_bytes.load(), 0);
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  BOOST_CHECK(service_of<manual_clock>(ctx).stats().balanced());
}

BOOST_AUTO_TEST_CASE(shutdown_destroys_deadline_wait_and_bound_sleep_once) {
  probe wait_probe;
  probe sleep_probe;
  {
    shutdown_context ctx;
    {
      manual_deadline dl(ctx, never);
      dl.async_wait(tracked_handler(wait_probe));
      tock::async_sleep_until(ctx, manual_clock::now() + never,
                              dl.bind(asio::bind_executor(ctx, tracked_handler(sleep_probe))));
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

// Virtual time stands still once the deadline passed: only that can end the new read.
BOOST_FIXTURE_TEST_CASE(deadline_passed_times_out_new_read_at_once, pending_read) {
  manual_deadline dl(ctx, 5ms);
  completion w;
  dl.async_wait(record(w));
  BOOST_REQUIRE(advance_to(ctx, dl.expiry()));
  BOOST_REQUIRE_EQUAL(w.calls, 1);
  read(dl.bind(record_io(r)));
  BOOST_REQUIRE(settle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == dl.expiry());
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 0u);
}

// --- A deadline's link (detail/deadline_link.hpp): its first bound operation is attached and withdrawn
// without the service's lock, and the deadline keeps its heap slot in between.

namespace {

// A handler that can only be copied (moving it copies), holding a share of `token`.
struct copy_only_handler {
  std::shared_ptr<int> token;
  io_result* r;
  copy_only_handler(std::shared_ptr<int> t, io_result& result) : token(std::move(t)), r(&result) {}
  copy_only_handler(const copy_only_handler&) = default;
  copy_only_handler& operator=(const copy_only_handler&) = default;
  void operator()(const error_code& ec, std::size_t n) { record_io (*r)(ec, n); }
};

}  // namespace

// The deadline outlives its operation, as a connection's does between requests: what the completed operation
// held (its handler's executor, here one that keeps the context running; its handler) is let go of then, so
// that run() returns and nothing of the handler is kept.
BOOST_FIXTURE_TEST_CASE(deadline_kept_after_its_operation_completed_keeps_nothing_of_it, pending_read) {
  manual_deadline dl(ctx, 1h);
  asio::write(s.client, asio::buffer("x", 1));
  read(dl.bind(
      asio::bind_executor(asio::prefer(ctx.get_executor(), asio::execution::outstanding_work.tracked), record_io(r))));
  BOOST_REQUIRE(run_until_idle(ctx));  // the executor's work went with the operation
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);

  auto token = std::make_shared<int>(0);
  io_result second;
  asio::write(s.client, asio::buffer("y", 1));
  read(dl.bind(copy_only_handler(token, second)));
  BOOST_REQUIRE(rerun_until_idle(ctx));
  BOOST_CHECK_EQUAL(second.calls, 1);
  BOOST_CHECK_EQUAL(token.use_count(), 1);  // the deadline still exists, and holds no copy of the handler
  check_idle<manual_clock>(ctx);
}

// One operation after another on one deadline, as a server's reads: each bound and withdrawn without the
// lock, counted all the same.
BOOST_FIXTURE_TEST_CASE(deadline_bound_one_operation_after_another_keeps_the_books, pending_read) {
  manual_deadline dl(ctx);
  constexpr int n = 50;
  for (int i = 0; i < n; ++i) {
    dl.expires_after(1s);
    asio::write(s.client, asio::buffer("x", 1));
    read(dl.bind(record_io(r)));
    BOOST_REQUIRE(rerun_until_idle(ctx));
    BOOST_REQUIRE_EQUAL(r.calls, i + 1);
    BOOST_REQUIRE(!r.ec);
  }
  const tock::timer_stats stats = service_of<manual_clock>(ctx).stats();
  BOOST_CHECK_EQUAL(stats.started, std::uint64_t(n));
  BOOST_CHECK_EQUAL(stats.withdrawn, std::uint64_t(n));
  BOOST_CHECK_EQUAL(stats.pending, 0u);
  BOOST_CHECK(stats.balanced());
  check_idle<manual_clock>(ctx);
}

// The deadline's node stays in the heap with its old key once its operation completed; that key passes with
// nothing attached (the node leaves), then a later operation bound to it times out at its new expiry.
BOOST_FIXTURE_TEST_CASE(deadline_whose_old_key_passed_times_out_a_later_operation, pending_read) {
  manual_deadline dl(ctx, 10ms);
  completion other;  // keeps the driver armed past the old key, which then surfaces with nothing attached
  manual_timer keeper(ctx, 40ms);
  keeper.async_wait(record(other));
  asio::write(s.client, asio::buffer("x", 1));
  read(dl.bind(record_io(r)));
  BOOST_REQUIRE(run_until(ctx, [&] { return r.calls > 0; }));
  advance_by(ctx, 20ms);  // the old key passes
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  dl.expires_after(10ms);
  io_result later;
  read(dl.bind(record_io(later)));
  advance_to(ctx, dl.expiry() - tick);
  BOOST_CHECK_EQUAL(later.calls, 0);
  advance_to(ctx, dl.expiry());  // the keeper still waits: work is left
  BOOST_REQUIRE_EQUAL(later.calls, 1);
  BOOST_CHECK_EQUAL(later.ec, timed_out);
  BOOST_CHECK(later.virtual_at == dl.expiry());
  BOOST_REQUIRE(advance_to(ctx, keeper.expiry()));
  BOOST_CHECK_EQUAL(other.calls, 1);
  check_idle<manual_clock>(ctx);
}

// An entry attached to a deadline parked at max() never fires: once the heap is empty the driver is disarmed,
// though an entry is attached (found by fuzz_ops).
BOOST_FIXTURE_TEST_CASE(deadline_parked_with_its_operation_leaves_the_driver_disarmed, pending_read) {
  completion w;
  std::optional<manual_timer> t(std::in_place, ctx, 10ms);
  t->async_wait(record(w));  // the driver is armed for it
  manual_deadline dl(ctx);   // never
  read(dl.bind(record_io(r)));
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  t.reset();  // the heap is left empty
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
  BOOST_CHECK_EQUAL(service_of<manual_clock>(ctx).pending(), 1u);
  asio::write(s.client, asio::buffer("x", 1));
  BOOST_REQUIRE(run_until(ctx, [&] { return r.calls > 0 && w.calls > 0; }));
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(w.ec, aborted);
  check_idle<manual_clock>(ctx);
}

// --- Moving the deadline object: its bound operations go with it, and the moved-from deadline is as if made
// from its executor alone, usable again.

BOOST_FIXTURE_TEST_CASE(moved_deadline_keeps_bound_operations, pending_read) {
  std::optional<manual_deadline> from(std::in_place, ctx, 15ms);
  read(from->bind(record_io(r)));
  manual_deadline to(std::move(*from));
  from.reset();  // the moved-from deadline has nothing left to abort
  advance_to(ctx, to.expiry() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, to.expiry()));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == to.expiry());
  BOOST_CHECK(service_of<manual_clock>(ctx).invariants_hold());
}

namespace {

// `from` was moved from while `to` took its wait: `from` behaves as a deadline made from the executor alone
// (never, same executor) and is usable again: a wait and a bound read on it time out, `to` still works.
void check_deadline_used_again(asio::io_context& ctx, manual_deadline& from, manual_deadline& to,
                               completion& moved_wait) {
  BOOST_CHECK(from.expiry() == manual_deadline::time_point::max());
  BOOST_CHECK(from.get_executor() == asio::any_io_executor(ctx.get_executor()));
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  completion again;
  from.expires_after(5ms);
  from.async_wait(record(again));
  s.server.async_read_some(asio::buffer(buf), from.bind(record_io(r)));
  to.expires_after(1ms);
  advance_to(ctx, to.expiry());
  BOOST_CHECK_EQUAL(moved_wait.calls, 1);
  BOOST_CHECK(!moved_wait.ec);
  BOOST_CHECK(moved_wait.virtual_at == to.expiry());
  advance_to(ctx, from.expiry() - tick);
  BOOST_CHECK_EQUAL(again.calls, 0);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, from.expiry()));
  BOOST_CHECK_EQUAL(again.calls, 1);
  BOOST_CHECK(!again.ec);
  BOOST_CHECK(again.virtual_at == from.expiry());
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == from.expiry());
  check_idle<manual_clock>(ctx);
}
}  // namespace

BOOST_AUTO_TEST_CASE(moved_from_deadline_is_usable_again) {
  asio::io_context ctx;
  manual_deadline from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  manual_deadline to(std::move(from));
  check_deadline_used_again(ctx, from, to, moved_wait);
}

BOOST_AUTO_TEST_CASE(move_assigned_from_deadline_is_usable_again) {
  asio::io_context ctx;
  manual_deadline from(ctx, never);
  completion moved_wait;
  from.async_wait(record(moved_wait));
  manual_deadline to(ctx, never);
  to = std::move(from);
  check_deadline_used_again(ctx, from, to, moved_wait);
}

// The moved-from expiry is max() even when it was earlier: the lock-free later move must not see the old one.
BOOST_AUTO_TEST_CASE(moved_from_deadline_waits_for_new_expiry) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  manual_deadline from(ctx, 1ms);
  manual_deadline to(std::move(from));
  to.cancel();
  const auto t = start + 10ms;
  from.expires_at(t);
  BOOST_CHECK(from.expiry() == t);
  completion c;
  from.async_wait(record(c));
  advance_to(ctx, start + 1ms);  // the expiry it had before the move
  BOOST_CHECK_EQUAL(c.calls, 0);
  advance_to(ctx, t - tick);
  BOOST_CHECK_EQUAL(c.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, t));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(c.virtual_at == t);
}

BOOST_AUTO_TEST_CASE(deadline_at_time_point_from_context_or_executor) {
  asio::io_context ctx;
  const auto t = manual_clock::now() + 5ms;
  manual_deadline by_context(ctx, t);
  manual_deadline by_executor(ctx.get_executor(), t);
  BOOST_CHECK(by_context.expiry() == t);
  BOOST_CHECK(by_executor.expiry() == t);
  BOOST_CHECK(by_context.get_executor() == asio::any_io_executor(ctx.get_executor()));
  completion c;
  by_context.async_wait(record(c));
  advance_to(ctx, t - tick);
  BOOST_CHECK_EQUAL(c.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, t));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(c.virtual_at == t);
}

// cancel() inside the context cancels the bound operations before it returns, as a socket's cancel() would:
// the caller may destroy the socket next.
BOOST_AUTO_TEST_CASE(deadline_cancelled_in_context_cancels_bound_operation_before_it_returns) {
  asio::io_context ctx;
  manual_deadline dl(ctx, 1h);
  cancellation_record rec;
  completion c;
  async_wait_for_cancellation(ctx, rec, dl.bind(record(c)));
  int emitted_on_return = -1;
  asio::post(ctx, [&] {
    dl.cancel();
    emitted_on_return = rec.emitted;
  });
  run_until_idle(ctx);
  BOOST_CHECK_EQUAL(emitted_on_return, 1);
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(c.ec == asio::error::operation_aborted);
}

// Moving onto a deadline detaches its bound operations, as its destruction does; they keep no limit.
BOOST_FIXTURE_TEST_CASE(deadline_moved_onto_detaches_bound_operations, pending_read) {
  manual_deadline dl(ctx, 5ms), other(ctx, 1h);
  read(dl.bind(record_io(r)));
  dl = std::move(other);
  advance_by(ctx, 10ms);
  BOOST_CHECK_EQUAL(r.calls, 0);
  asio::write(s.client, asio::buffer("x", 1));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
}

// The same with a real socket: a connection object whose socket and deadline go together, inside the context,
// in the order of its members (`Connection`), with a read bound to the deadline pending. Under ASan, the
// previous code read the freed socket (socket first, deadline second: the deadline's queued cancellation;
// the other order: a cancellation in place, the socket's handler still in the slot).
template <typename Connection>
void destroy_connection_with_bound_read() {
  asio::io_context ctx;
  auto conn = std::make_unique<Connection>(ctx);
  std::array<char, 16> buf{};
  io_result r;
  conn->sockets.client.async_read_some(asio::buffer(buf), conn->dl.bind(record_io(r)));
  asio::post(ctx, [&] { conn.reset(); });
  run_until_idle(ctx);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == asio::error::operation_aborted);
}

struct socket_then_deadline {  // the deadline, declared last, is destroyed first
  explicit socket_then_deadline(asio::io_context& c) : sockets(c), dl(c, 1h) {}
  socket_pair sockets;
  manual_deadline dl;
};
struct deadline_then_socket {
  explicit deadline_then_socket(asio::io_context& c) : dl(c, 1h), sockets(c) {}
  manual_deadline dl;
  socket_pair sockets;
};

BOOST_AUTO_TEST_CASE(connection_destroyed_in_context_with_bound_read_pending) {
  destroy_connection_with_bound_read<socket_then_deadline>();
}

BOOST_AUTO_TEST_CASE(connection_destroyed_socket_first_in_context_with_bound_read_pending) {
  destroy_connection_with_bound_read<deadline_then_socket>();
}

// A deadline's bound operation on another context (B) outlives the deadline and the deadline's context (A):
// B's timer is the operation's I/O object, so A's going says nothing of its canceller, and the user's
// cancellation still reaches it, as it does without the deadline (the control). The previous code asked A's
// service and dropped it: the wait stayed pending.
BOOST_AUTO_TEST_CASE(bound_operation_on_another_context_is_cancelled_after_the_deadlines_context_goes) {
  for (const bool with_deadline : {false, true}) {
    BOOST_TEST_CONTEXT("with_deadline " << with_deadline) {
      asio::io_context b;
      asio::steady_timer t(b, 1h);
      asio::cancellation_signal signal;
      completion c;
      {
        asio::io_context a;
        manual_deadline dl(a, 1h);
        auto handler = asio::bind_cancellation_slot(signal.slot(), record(c));
        if (with_deadline)
          t.async_wait(dl.bind(std::move(handler)));
        else
          t.async_wait(std::move(handler));
      }  // the deadline, then its context, go
      signal.emit(asio::cancellation_type::terminal);
      BOOST_REQUIRE(run_until_idle(b));
      BOOST_CHECK_EQUAL(c.calls, 1);
      BOOST_CHECK(c.ec == asio::error::operation_aborted);
    }
  }
}

// The deadline fired while its bound operation's handler runs on B, so its cancellation waits on B; A and
// the deadline go before B runs it. The operation on B still times out.
BOOST_AUTO_TEST_CASE(deadline_fired_for_another_context_times_out_after_its_own_context_goes) {
  asio::io_context b;
  asio::steady_timer t(b, 1h);
  completion c;
  {
    asio::io_context a;
    manual_deadline dl(a, 5ms);
    t.async_wait(dl.bind(record(c)));
    BOOST_REQUIRE(advance_by(a, 5ms));  // fired: the cancellation is queued on B
    BOOST_CHECK_EQUAL(c.calls, 0);
  }
  BOOST_REQUIRE(run_until_idle(b));
  BOOST_CHECK_EQUAL(c.calls, 1);
  BOOST_CHECK(c.ec == tock::error::timed_out);
}

// An I/O object with one operation at a time, standing for a socket: its canceller, hooked into the operation's
// slot, reads the object (a socket's reads its reactor data), so an emit after the object is gone is counted
// (where a socket's would read freed memory); its destruction completes the operation with operation_aborted.
class fake_socket {
 public:
  explicit fake_socket(asio::io_context& ctx) : ctx_(ctx) {}
  fake_socket(const fake_socket&) = delete;
  fake_socket& operator=(const fake_socket&) = delete;
  ~fake_socket() {
    state_->alive = false;
    finish();
  }

  template <typename Token>
  auto async_read(Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(initiation{this}, token);
  }
  struct state {
    bool alive = true;
    int emits_after_destruction = 0;
  };
  // What outlives the object: whether it lives, and the emits that came after it.
  std::shared_ptr<const state> monitor() const { return state_; }

 private:
  struct canceller {
    std::shared_ptr<state> s;
    fake_socket* self;
    void operator()(asio::cancellation_type) {
      if (!s->alive) return void(++s->emits_after_destruction);
      self->finish();
    }
  };
  struct initiation {
    using executor_type = asio::io_context::executor_type;
    executor_type get_executor() const noexcept { return self->ctx_.get_executor(); }
    template <typename Handler>
    void operator()(Handler&& handler) const {
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected()) slot.template emplace<canceller>(self->state_, self);
      self->pending_ = std::make_unique<pending_op<std::decay_t<Handler>>>(std::forward<Handler>(handler));
    }
    fake_socket* self;
  };
  struct pending_base {
    virtual ~pending_base() = default;
    virtual void complete(const error_code& ec) = 0;
  };
  template <typename Handler>
  struct pending_op : pending_base {
    template <typename H>
    explicit pending_op(H&& h) : handler(std::forward<H>(h)) {}
    void complete(const error_code& ec) override {  // on the handler's executor, as Asio's operations complete
      const auto ex = asio::get_associated_executor(handler);
      asio::dispatch(ex, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
    }
    Handler handler;
  };
  void finish() {
    if (!pending_) return;
    asio::post(ctx_, [p = std::move(pending_)] { p->complete(asio::error::operation_aborted); });
  }

  asio::io_context& ctx_;
  std::shared_ptr<state> state_ = std::make_shared<state>();
  std::unique_ptr<pending_base> pending_;
};

// A connection's deadline fired for its reads, whose handlers run on a strand (of another context here, not run
// yet, so that the cancellations wait there); the connection, its sockets and its deadline, is destroyed on that
// strand before they run: the reads complete with operation_aborted and nothing is emitted into their slots,
// whose I/O objects are gone. With one read the deadline's link holds it, with two the second is in its ring.
// The previous code emitted both cancellations there (a real socket's canceller then read the freed socket; Asio's
// cancel_after does the same). An operation on another context still gets its fired cancellation
// (deadline_fired_for_another_context_times_out_after_its_own_context_goes).
BOOST_AUTO_TEST_CASE(deadline_destroyed_on_the_strand_before_its_fired_cancellation_runs_emits_nothing) {
  for (const int reads : {1, 2}) {
    BOOST_TEST_CONTEXT("reads " << reads) {
      asio::io_context ctx, other;
      auto strand = asio::make_strand(other);
      struct connection {
        explicit connection(asio::io_context& c) : a(c), b(c), dl(c, 5ms) {}
        fake_socket a, b;
        manual_deadline dl;
      };
      auto conn = std::make_unique<connection>(ctx);
      std::array<completion, 2> c;
      conn->a.async_read(conn->dl.bind(asio::bind_executor(strand, record(c[0]))));
      if (reads == 2) conn->b.async_read(conn->dl.bind(asio::bind_executor(strand, record(c[1]))));
      const std::array<std::shared_ptr<const fake_socket::state>, 2> sockets{conn->a.monitor(), conn->b.monitor()};
      asio::post(strand, [&] { conn.reset(); });
      BOOST_REQUIRE(advance_by(ctx, 5ms));  // fired: the cancellations wait on the strand, behind the destroyer
      BOOST_CHECK_EQUAL(c[0].calls + c[1].calls, 0);
      BOOST_REQUIRE(run_until_idle(other));
      BOOST_REQUIRE(rerun_until_idle(ctx));
      BOOST_REQUIRE(rerun_until_idle(other));
      for (int i = 0; i < reads; ++i) {
        BOOST_CHECK_EQUAL(c[i].calls, 1);
        BOOST_CHECK(c[i].ec == asio::error::operation_aborted);
      }
      BOOST_CHECK(!sockets[0]->alive);
      BOOST_CHECK_EQUAL(sockets[0]->emits_after_destruction + sockets[1]->emits_after_destruction, 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// === tock::timeout only (timed_ops_test/timeout).

BOOST_AUTO_TEST_SUITE(timeout)

// A relative timeout counts from the initiation, which for a deferred operation is its invocation. (A
// deadline's deferred operation follows the deadline instead: see
// deadline/deferred_read_follows_deadline_moved_before_invocation.)
BOOST_FIXTURE_TEST_CASE(deferred_read_timeout_counts_from_invocation, pending_read) {
  auto op = read(tock::timeout<manual_clock>(20ms, asio::deferred));
  advance_by(ctx, 30ms);  // longer than the timeout, between making the operation and invoking it
  const auto invoked = manual_clock::now();
  std::move(op)(record_io(r));
  advance_to(ctx, invoked + 20ms - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  BOOST_REQUIRE(advance_to(ctx, invoked + 20ms));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.virtual_at == invoked + 20ms);
  check_idle<manual_clock>(ctx);
}

// A deadline may not outlive its context: deadline/shutdown_destroys_deadline_wait_and_bound_sleep_once is its
// case.
BOOST_AUTO_TEST_CASE(context_destroyed_with_timed_sleep_destroys_handler_once) {
  probe p;
  {
    asio::io_context ctx;
    tock::async_sleep_until(ctx, manual_clock::now() + never,
                            tock::timeout<manual_clock>(never, asio::bind_executor(ctx, tracked_handler(p))));
    ctx.poll();
    BOOST_CHECK_EQUAL(p.alive(), 1);
  }
  BOOST_CHECK_EQUAL(p.invoked, 0);
  BOOST_CHECK_EQUAL(p.destroyed, 1);
  BOOST_CHECK_EQUAL(p.alive(), 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE_END()
