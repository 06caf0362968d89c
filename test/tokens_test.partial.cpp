// Partial tokens (tock::timeout(d), tock::timeout_at(t), deadline::bind()) and default tokens (tock's operations
// called without one), timeouts on operations that complete with an exception_ptr (co_spawn), and the overloads
// that take an execution context where others take an executor. In virtual time (tock::manual_clock): each
// case checks the exact moment a timeout completes, and that nothing completes one tick before it.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock::manual_clock;
using tock_test::aborted;
using tock_test::check_idle;
using tock_test::error_code;
using tock_test::io_result;
using tock_test::never;
using tock_test::record_io;
using tock_test::run_coroutine;
using tock_test::settle;
using tock_test::socket_pair;
using tock_test::tick;
using tock_test::timed_out;
using tcp = asio::ip::tcp;

// What an exception_ptr says: the error code of a system_error, or nothing.
std::optional<error_code> code_of(const std::exception_ptr& e) {
  if (!e) return std::nullopt;
  try {
    std::rethrow_exception(e);
  } catch (const sys::system_error& x) {
    return x.code();
  } catch (const asio::multiple_exceptions& x) {  // Asio's awaitable operators wrap the first one
    return code_of(x.first_exception());
  } catch (...) {
    return std::nullopt;
  }
}

// A coroutine that reads `s` once (nothing is ever sent, so only a cancellation ends it).
asio::awaitable<void> read_once(tcp::socket& s) {
  std::array<char, 16> buf{};
  co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
}

// The virtual moment `f` (a coroutine's body) ended and what it threw: once it has started, virtual time moves in
// two steps (to one tick before `deadline`, then to it), checking that it did not end before.
struct outcome {
  bool done = false;
  std::optional<error_code> code;
  manual_clock::time_point at{};
};

outcome run_with_deadline(asio::io_context& ctx, manual_clock::time_point deadline,
                          std::function<asio::awaitable<void>()> f) {
  outcome o;
  asio::co_spawn(ctx, std::move(f), [&](std::exception_ptr e) {
    o.done = true;
    o.code = code_of(e);
    o.at = manual_clock::now();
  });
  settle(ctx);  // the coroutine starts, and its timeouts with it, at the current virtual time
  tock_test::advance_to(ctx, deadline - tick);
  BOOST_CHECK(!o.done);
  tock_test::advance_to(ctx, deadline);
  tock_test::rerun_until_idle(ctx);
  return o;
}

BOOST_AUTO_TEST_SUITE(tokens_test)

BOOST_AUTO_TEST_CASE(timeout_without_a_token_is_awaited_on_a_plain_socket_and_times_out_on_time) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto deadline = manual_clock::now() + 20ms;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    // The socket's executor names no default token: the operation's is asio::deferred, which co_await takes.
    co_await pair.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(20ms));
  });
  BOOST_CHECK(o.done);
  BOOST_CHECK(o.code == timed_out);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_without_a_token_uses_the_executors_default_token) {
  asio::io_context ctx;
  using awaitable_socket = asio::use_awaitable_t<>::as_default_on_t<tcp::socket>;
  socket_pair pair(ctx);
  awaitable_socket server(ctx, tcp::v4(), pair.server.release());
  const auto deadline = manual_clock::now() + 20ms;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto op = server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(20ms));
    static_assert(std::is_same_v<decltype(op), asio::awaitable<std::size_t>>, "use_awaitable is the default here");
    co_await std::move(op);
  });
  BOOST_CHECK(o.code == timed_out);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(as_tuple_around_a_partial_timeout_returns_timed_out_without_throwing) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto deadline = manual_clock::now() + 20ms;
  error_code got;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto [ec, n] =
        co_await pair.server.async_read_some(asio::buffer(buf), asio::as_tuple(tock::timeout<manual_clock>(20ms)));
    got = ec;
    BOOST_CHECK_EQUAL(n, 0u);
  });
  BOOST_CHECK(o.done);
  BOOST_CHECK(!o.code);  // nothing thrown
  BOOST_CHECK(got == timed_out);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_applied_to_a_token_is_the_two_argument_form) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  std::array<char, 16> buf{};
  io_result r;
  const auto start = manual_clock::now();
  pair.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(20ms)(record_io(r)));
  tock_test::advance_to(ctx, start + 20ms - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  tock_test::advance_to(ctx, start + 20ms);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == timed_out);
  BOOST_CHECK(r.virtual_at == start + 20ms);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_partial_deferred_starts_only_when_invoked) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  std::array<char, 16> buf{};
  io_result r;
  auto op = pair.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(20ms));
  BOOST_CHECK_EQUAL(tock_test::service_of<manual_clock>(ctx).pending(), 0u);
  tock_test::advance_by(ctx, 1h);  // the deadline counts from the start, not from the token
  const auto start = manual_clock::now();
  std::move(op)(record_io(r));
  BOOST_CHECK_EQUAL(tock_test::service_of<manual_clock>(ctx).pending(), 1u);
  tock_test::advance_to(ctx, start + 20ms - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  tock_test::advance_to(ctx, start + 20ms);
  BOOST_CHECK(r.ec == timed_out);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_at_without_a_token_times_out_at_the_time_point) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto deadline = manual_clock::now() + 35ms;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    co_await pair.server.async_read_some(asio::buffer(buf), tock::timeout_at(deadline));
  });
  BOOST_CHECK(o.code == timed_out);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_partial_emits_the_cancellation_type_it_was_given) {
  asio::io_context ctx;
  tock_test::cancellation_record rec;
  error_code ec;
  tock_test::async_wait_for_cancellation(
      ctx, rec, tock::timeout<manual_clock>(5ms, asio::cancellation_type::partial)([&](error_code e) { ec = e; }));
  tock_test::advance_by(ctx, 5ms);
  BOOST_CHECK_EQUAL(rec.emitted, 1);
  BOOST_CHECK(rec.type == asio::cancellation_type::partial);
  BOOST_CHECK(ec == timed_out);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(a_partial_timeout_completes_before_its_deadline_with_the_operations_result) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  std::size_t got = 0;
  BOOST_CHECK(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    asio::write(pair.client, asio::buffer("hi", 2));
    std::array<char, 16> buf{};
    got = co_await pair.server.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(20ms));
  }));
  BOOST_CHECK_EQUAL(got, 2u);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(deadline_bind_without_a_token_is_awaited_and_times_out_with_the_deadline) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  tock::basic_deadline<manual_clock> limit(ctx, 20ms);
  const auto deadline = limit.expiry() + 10ms;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    limit.expires_after(30ms);  // moved later while the read pends too, below
    co_await pair.server.async_read_some(asio::buffer(buf), limit.bind());
  });
  BOOST_CHECK(o.code == timed_out);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(deadline_bind_applied_to_a_token_is_the_one_argument_form) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  tock::basic_deadline<manual_clock> limit(ctx, 20ms);
  std::array<char, 16> buf{};
  io_result r;
  pair.server.async_read_some(asio::buffer(buf), limit.bind(asio::cancellation_type::terminal)(record_io(r)));
  tock_test::advance_to(ctx, limit.expiry() - tick);
  BOOST_CHECK_EQUAL(r.calls, 0);
  tock_test::advance_to(ctx, limit.expiry());
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == timed_out);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(deadline_expires_never_lets_bound_operations_wait_until_moved_again) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  tock::basic_deadline<manual_clock> limit(ctx, 20ms);
  std::array<char, 16> buf{};
  io_result r;
  pair.server.async_read_some(asio::buffer(buf), limit.bind(record_io(r)));
  limit.expires_never();
  BOOST_CHECK(limit.expiry() == manual_clock::time_point::max());
  tock_test::advance_by(ctx, 24h);
  BOOST_CHECK_EQUAL(r.calls, 0);
  limit.expires_after(1ms);
  tock_test::advance_by(ctx, 1ms);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(r.ec == timed_out);
  check_idle<manual_clock>(ctx);
}

// co_spawn completes with void(std::exception_ptr): a timeout on it reports timed_out there, as it does in an
// error_code (Tokio's timeout(d, future)).
BOOST_AUTO_TEST_CASE(timeout_on_co_spawn_with_a_callback_reports_timed_out_in_the_exception) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  int calls = 0;
  std::optional<error_code> code;
  manual_clock::time_point at{};
  const auto start = manual_clock::now();
  asio::co_spawn(ctx, read_once(pair.server), tock::timeout<manual_clock>(100ms, [&](std::exception_ptr e) {
                   ++calls;
                   code = code_of(e);
                   at = manual_clock::now();
                 }));
  tock_test::advance_to(ctx, start + 100ms - tick);
  BOOST_CHECK_EQUAL(calls, 0);
  tock_test::advance_to(ctx, start + 100ms);
  BOOST_CHECK_EQUAL(calls, 1);
  BOOST_CHECK(code == timed_out);
  BOOST_CHECK(at == start + 100ms);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(co_spawn_cancelled_by_its_own_slot_still_reports_operation_aborted) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  asio::cancellation_signal cancel;
  std::optional<error_code> code;
  asio::co_spawn(
      ctx, read_once(pair.server),
      asio::bind_cancellation_slot(
          cancel.slot(), tock::timeout<manual_clock>(100ms, [&](std::exception_ptr e) { code = code_of(e); })));
  settle(ctx);
  cancel.emit(asio::cancellation_type::terminal);
  settle(ctx);
  BOOST_CHECK(code == aborted);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(co_spawn_that_throws_something_else_keeps_its_exception) {
  asio::io_context ctx;
  std::exception_ptr got;
  asio::co_spawn(
      ctx,
      []() -> asio::awaitable<void> {
        throw std::runtime_error("own");
        co_return;
      },
      tock::timeout<manual_clock>(100ms, [&](std::exception_ptr e) { got = e; }));
  settle(ctx);
  BOOST_REQUIRE(got);
  BOOST_CHECK_THROW(std::rethrow_exception(got), std::runtime_error);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_on_co_spawn_with_use_future_throws_timed_out) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto start = manual_clock::now();
  auto f = asio::co_spawn(ctx, read_once(pair.server), tock::timeout<manual_clock>(100ms, asio::use_future));
  tock_test::advance_to(ctx, start + 100ms - tick);
  BOOST_CHECK(f.wait_for(0s) == std::future_status::timeout);
  tock_test::advance_to(ctx, start + 100ms);
  BOOST_REQUIRE(f.wait_for(0s) == std::future_status::ready);
  try {
    f.get();
    BOOST_FAIL("no exception");
  } catch (const sys::system_error& e) {
    BOOST_CHECK(e.code() == timed_out);
  }
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(timeout_on_co_spawn_awaited_throws_timed_out_and_partial_form_too) {
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto deadline = manual_clock::now() + 50ms;
  int caught = 0;
  const auto o = run_with_deadline(ctx, deadline, [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    try {
      co_await asio::co_spawn(ex, read_once(pair.server), tock::timeout<manual_clock>(50ms, asio::use_awaitable));
    } catch (const sys::system_error& e) {
      if (e.code() == timed_out) ++caught;
    }
    // The same deadline again, now with the partial form (co_spawn's default token: asio::deferred).
    pair.client.close();  // the next read ends at once with eof: no timeout
    co_await asio::co_spawn(ex, read_once(pair.server), tock::timeout<manual_clock>(50ms));
  });
  BOOST_CHECK_EQUAL(caught, 1);
  BOOST_CHECK(o.code == asio::error::eof);
  BOOST_CHECK(o.at == deadline);
  check_idle<manual_clock>(ctx);
}

// Asio's awaitable operators: && ends at the first failure (the timeout, on time) and cancels the other; || waits
// for one success, so when both time out it reports the first one's timeout once the second has ended.
BOOST_AUTO_TEST_CASE(timeout_on_co_spawn_inside_awaitable_operators_reports_timed_out) {
  using namespace asio::experimental::awaitable_operators;
  asio::io_context ctx;
  socket_pair pair(ctx);
  const auto start = manual_clock::now();
  const auto both = run_with_deadline(ctx, start + 40ms, [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    co_await (asio::co_spawn(ex, read_once(pair.server), tock::timeout<manual_clock>(40ms, asio::use_awaitable)) &&
              tock::async_sleep_until(ex, start + 1h, asio::use_awaitable));
  });
  BOOST_CHECK(both.code == timed_out);
  BOOST_CHECK(both.at == start + 40ms);
  check_idle<manual_clock>(ctx);

  const auto next = manual_clock::now();
  const auto either = run_with_deadline(ctx, next + 60ms, [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    std::array<char, 16> buf{};
    co_await (asio::co_spawn(ex, read_once(pair.server), tock::timeout<manual_clock>(40ms, asio::use_awaitable)) ||
              pair.client.async_read_some(asio::buffer(buf), tock::timeout<manual_clock>(60ms, asio::use_awaitable)));
  });
  BOOST_CHECK(either.code == timed_out);
  BOOST_CHECK(either.at == next + 60ms);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(tock_operations_without_a_token_return_a_deferred_operation_on_a_plain_executor) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  error_code ec = aborted;
  manual_clock::time_point at{};
  tock::basic_deadline<manual_clock> limit(ctx, 30ms);
  const auto before = tock_test::service_of<manual_clock>(ctx).pending();
  auto sleep = tock::async_sleep_until(ctx, start + 10ms);
  auto wait = limit.async_wait();
  int runs = 0;
  auto task = tock::schedule(ctx, start + 20ms, [&] { return ++runs; });
  BOOST_CHECK_EQUAL(tock_test::service_of<manual_clock>(ctx).pending(), before);  // nothing started yet
  std::move(sleep)([&](error_code e) {
    ec = e;
    at = manual_clock::now();
  });
  int result = 0;
  std::move(task)([&](std::exception_ptr e, int r) {
    BOOST_CHECK(!e);
    result = r;
  });
  error_code wait_ec = aborted;
  std::move(wait)([&](error_code e) { wait_ec = e; });
  for (const auto step : {10ms, 20ms, 30ms}) tock_test::advance_to(ctx, start + step);
  BOOST_CHECK(!ec);
  BOOST_CHECK(at == start + 10ms);
  BOOST_CHECK_EQUAL(result, 1);
  BOOST_CHECK(!wait_ec);
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(context_overloads_take_the_contexts_executor) {
  asio::io_context ctx;
  const auto start = manual_clock::now();
  std::vector<std::pair<std::string, manual_clock::time_point>> log;
  auto note = [&](std::string what) { log.emplace_back(std::move(what), manual_clock::now()); };
  tock::async_sleep_until(ctx, start + 5ms, 1ms, [&](error_code) { note("sleep_until+slack"); });
  tock::schedule(
      ctx, start + 10ms, [&] { note("schedule"); }, asio::detached);
  auto rate = tock::schedule_at_fixed_rate(ctx, start + 20ms, 10ms, [&] { note("rate"); });
  auto delay = tock::schedule_with_fixed_delay(ctx, start + 25ms, 10ms, [&] { note("delay"); });
  for (auto t = start; t <= start + 36ms; t += 1ms) tock_test::advance_to(ctx, t);
  BOOST_CHECK(rate.cancel());
  BOOST_CHECK(delay.cancel());
  settle(ctx);
  const std::vector<std::pair<std::string, manual_clock::time_point>> expected{{"sleep_until+slack", start + 6ms},
                                                                               {"schedule", start + 10ms},
                                                                               {"rate", start + 20ms},
                                                                               {"delay", start + 25ms},
                                                                               {"rate", start + 30ms},
                                                                               {"delay", start + 35ms}};
  // The slack lets the sleep complete anywhere in [5, 6] ms.
  BOOST_REQUIRE_EQUAL(log.size(), expected.size());
  BOOST_CHECK(log[0].second >= start + 5ms && log[0].second <= start + 6ms);
  for (std::size_t i = 1; i < log.size(); ++i) {
    BOOST_CHECK_EQUAL(log[i].first, expected[i].first);
    BOOST_CHECK(log[i].second == expected[i].second);
  }
  check_idle<manual_clock>(ctx);
}

BOOST_AUTO_TEST_CASE(async_sleep_for_with_slack_on_a_context_completes_within_the_slack) {
  asio::io_context ctx;
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  error_code ec = aborted;
  tock::async_sleep_for(ctx, 2ms, 1ms, [&](error_code e) {
    ++calls;
    ec = e;
  });
  ctx.run();
  BOOST_CHECK_EQUAL(calls, 1);
  BOOST_CHECK(!ec);
  BOOST_CHECK(std::chrono::steady_clock::now() - start >= 2ms);
  check_idle(ctx);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
