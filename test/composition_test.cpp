// Asio's completion-token adapters applied around tock's tokens (bind_cancellation_slot, bind_executor,
// bind_allocator, redirect_error and as_tuple outside tock::timeout or a deadline's bind(), alone and nested),
// their async_result's return_type, and a tock sleep timed with a plain handler (the executor comes from the
// sleep's initiation). Reads are on a connected loopback socket pair (no data sent, so they pend). Timings are
// only checked as "not before the deadline"; every run of the context is bounded.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <future>
#include <tuple>
#include <type_traits>
#include <utility>

namespace {

using namespace std::chrono_literals;
using namespace tock_test;  // test_support.hpp (never, service_of, timed_out, aborted), timed_ops_support.hpp
using steady_clock = std::chrono::steady_clock;

using read_signature = void(error_code, std::size_t);
using strand_type = asio::strand<asio::io_context::executor_type>;

// A read handler that also records whether it ran on `strand`.
struct strand_io_result : io_result {
  bool on_strand = false;
};

auto record_io_on(strand_io_result& r, const strand_type& strand) {
  return [&r, strand](const error_code& ec, std::size_t n) {
    ++r.calls;
    r.ec = ec;
    r.bytes = n;
    r.at = steady_clock::now();
    r.on_strand = strand.running_in_this_thread();
  };
}

// An initiating function declared the pre-async_initiate way (as Beast's are): its return type names the
// token's async_result<...>::return_type (what BOOST_ASIO_INITFN_RESULT_TYPE expands to), so it compiles only if
// that is defined and exact.
template <typename Token>
typename asio::async_result<std::decay_t<Token>, void(error_code)>::return_type legacy_async_sleep_for(
    asio::io_context& ctx, steady_clock::duration d, Token&& token) {
  return tock::async_sleep_for(ctx, d, std::forward<Token>(token));
}

template <typename Token, typename Signature>
using return_type_t = typename asio::async_result<std::decay_t<Token>, Signature>::return_type;

template <typename Token, typename Signature>
inline constexpr bool has_return_type_v = requires { typename return_type_t<Token, Signature>; };

using read_callback = decltype(record_io(std::declval<io_result&>()));
using timed_callback = tock::timeout_t<read_callback>;
using bound_callback = tock::deadline_bound_token<tock::deadline, read_callback>;

// return_type is the inner token's, which is what initiate() returns; a deferred token has none (its result
// type depends on the initiation), as with Asio's own adapters.
static_assert(std::is_same_v<return_type_t<timed_callback, read_signature>, void>);
static_assert(std::is_same_v<return_type_t<bound_callback, read_signature>, void>);
static_assert(std::is_same_v<return_type_t<tock::timeout_t<asio::use_awaitable_t<>>, read_signature>,
                             asio::awaitable<std::size_t>>);
static_assert(
    std::is_same_v<return_type_t<tock::deadline_bound_token<tock::deadline, asio::use_future_t<>>, read_signature>,
                   std::future<std::size_t>>);
static_assert(std::is_same_v<decltype(std::declval<tcp::socket&>().async_read_some(
                                 asio::mutable_buffer(), tock::timeout(1s, asio::use_awaitable))),
                             return_type_t<tock::timeout_t<asio::use_awaitable_t<>>, read_signature>>);
static_assert(!has_return_type_v<tock::timeout_t<asio::deferred_t>, read_signature>);

// The adapters' own return_type, from outside: Asio's binders would need it from the tock token's.
static_assert(
    std::is_same_v<
        return_type_t<asio::cancellation_slot_binder<tock::timeout_t<asio::use_awaitable_t<>>, asio::cancellation_slot>,
                      read_signature>,
        asio::awaitable<std::size_t>>);
static_assert(std::is_same_v<return_type_t<asio::executor_binder<bound_callback, strand_type>, read_signature>, void>);

}  // namespace

BOOST_AUTO_TEST_SUITE(composition_test)

// --- bind_cancellation_slot outside: the user's slot cancels the operation, and the deadline still does.

BOOST_AUTO_TEST_CASE(the_users_slot_bound_outside_the_timeout_aborts_the_read_with_operation_aborted) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf),
                           asio::bind_cancellation_slot(signal.slot(), tock::timeout(never, record_io(r))));
  BOOST_CHECK(signal.slot().has_handler());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 1u);
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(!signal.slot().has_handler());
}

BOOST_AUTO_TEST_CASE(the_timeout_still_fires_with_the_users_slot_bound_outside) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  asio::cancellation_signal signal;
  const auto start = steady_clock::now();
  s.server.async_read_some(asio::buffer(buf),
                           asio::bind_cancellation_slot(signal.slot(), tock::timeout(10ms, record_io(r))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at - start >= 10ms);
  BOOST_CHECK(!signal.slot().has_handler());
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(the_users_slot_bound_outside_bind_aborts_the_read_and_the_deadline_still_fires) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  std::array<char, 16> buf{};
  io_result first;
  io_result second;
  asio::cancellation_signal signal;
  s.server.async_read_some(asio::buffer(buf), asio::bind_cancellation_slot(signal.slot(), dl.bind(record_io(first))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(first.calls, 1);
  BOOST_CHECK_EQUAL(first.ec, aborted);
  BOOST_CHECK(!signal.slot().has_handler());

  ctx.restart();
  dl.expires_after(10ms);
  s.server.async_read_some(asio::buffer(buf), asio::bind_cancellation_slot(signal.slot(), dl.bind(record_io(second))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(second.calls, 1);
  BOOST_CHECK_EQUAL(second.ec, timed_out);
  BOOST_CHECK(second.at >= dl.expiry());
  BOOST_CHECK(!signal.slot().has_handler());
  BOOST_CHECK_EQUAL(first.calls, 1);
}

// --- bind_executor outside: the handler runs on the outer executor (a plain handler has none of its own).

BOOST_AUTO_TEST_CASE(a_timed_out_read_with_the_strand_bound_outside_the_timeout_completes_on_the_strand) {
  asio::io_context ctx;
  socket_pair s(ctx);
  const strand_type strand = asio::make_strand(ctx);
  std::array<char, 16> buf{};
  strand_io_result r;
  s.server.async_read_some(asio::buffer(buf),
                           asio::bind_executor(strand, tock::timeout(10ms, record_io_on(r, strand))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.on_strand);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_bound_read_with_the_strand_bound_outside_bind_completes_on_the_strand) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, 10ms);
  const strand_type strand = asio::make_strand(ctx);
  std::array<char, 16> buf{};
  strand_io_result r;
  s.server.async_read_some(asio::buffer(buf), asio::bind_executor(strand, dl.bind(record_io_on(r, strand))));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timed_out);
  BOOST_CHECK(r.at >= dl.expiry());
  BOOST_CHECK(r.on_strand);
}

// --- bind_allocator outside: the timeout's state goes through the outer allocator, as with the inside form.

BOOST_AUTO_TEST_CASE(the_allocator_bound_outside_the_timeout_serves_the_same_allocations_as_inside_and_frees_them) {
  allocation_counts inside;
  allocation_counts outside;
  for (allocation_counts* counts : {&inside, &outside}) {
    asio::io_context ctx;
    socket_pair s(ctx);
    std::array<char, 16> buf{};
    io_result r;
    const counting_allocator<void> alloc(*counts);
    if (counts == &inside)
      s.server.async_read_some(asio::buffer(buf), tock::timeout(5ms, asio::bind_allocator(alloc, record_io(r))));
    else
      s.server.async_read_some(asio::buffer(buf), asio::bind_allocator(alloc, tock::timeout(5ms, record_io(r))));
    BOOST_REQUIRE(run_until_idle(ctx));
    BOOST_REQUIRE_EQUAL(r.calls, 1);
    BOOST_CHECK_EQUAL(r.ec, timed_out);
  }
  BOOST_CHECK_GE(inside.allocations.load(), 2u);  // the timeout's state and the read's operation
  BOOST_CHECK_EQUAL(outside.allocations.load(), inside.allocations.load());
  BOOST_CHECK_EQUAL(outside.deallocations.load(), outside.allocations.load());
  BOOST_CHECK_EQUAL(outside.live_bytes.load(), 0);
}

// --- redirect_error and as_tuple outside: they see timed_out, not the operation's operation_aborted.

BOOST_AUTO_TEST_CASE(redirect_error_outside_the_timeout_redirects_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  error_code ec;
  int calls = 0;
  std::size_t bytes = 1;
  s.server.async_read_some(asio::buffer(buf), asio::redirect_error(tock::timeout(10ms,
                                                                                 [&](std::size_t n) {
                                                                                   ++calls;
                                                                                   bytes = n;
                                                                                 }),
                                                                   ec));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(calls, 1);
  BOOST_CHECK_EQUAL(ec, timed_out);
  BOOST_CHECK_EQUAL(bytes, 0u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(redirect_error_outside_bind_clears_the_error_of_a_read_that_completes_first) {
  asio::io_context ctx;
  socket_pair s(ctx);
  tock::deadline dl(ctx, never);
  asio::write(s.client, asio::buffer("x", 1));
  std::array<char, 16> buf{};
  error_code ec = asio::error::eof;
  std::size_t bytes = 0;
  s.server.async_read_some(asio::buffer(buf), asio::redirect_error(dl.bind([&](std::size_t n) { bytes = n; }), ec));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK(!ec);
  BOOST_CHECK_EQUAL(bytes, 1u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);

  ctx.restart();
  dl.expires_after(10ms);
  s.server.async_read_some(asio::buffer(buf), asio::redirect_error(dl.bind([&](std::size_t n) { bytes = n; }), ec));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(ec, timed_out);
}

// A plain handler: the read's executor comes from the socket's initiation, which as_tuple's wrapper hid.
BOOST_AUTO_TEST_CASE(as_tuple_outside_the_timeout_with_a_plain_handler_delivers_timed_out_in_the_tuple) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  int calls = 0;
  error_code ec;
  s.server.async_read_some(asio::buffer(buf),
                           asio::as_tuple(tock::timeout(10ms, [&](std::tuple<error_code, std::size_t> result) {
                             ++calls;
                             ec = std::get<0>(result);
                           })));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(calls, 1);
  BOOST_CHECK_EQUAL(ec, timed_out);
}

// --- Adapters nested outside, and inside a coroutine.

BOOST_AUTO_TEST_CASE(a_slot_and_a_strand_bound_outside_the_timeout_both_apply) {
  asio::io_context ctx;
  socket_pair s(ctx);
  const strand_type strand = asio::make_strand(ctx);
  std::array<char, 16> buf{};
  strand_io_result cancelled;
  strand_io_result expired;
  asio::cancellation_signal signal;
  asio::cancellation_signal unused;
  s.server.async_read_some(
      asio::buffer(buf),
      asio::bind_cancellation_slot(signal.slot(),
                                   asio::bind_executor(strand, tock::timeout(never, record_io_on(cancelled, strand)))));
  s.client.async_read_some(
      asio::buffer(buf),
      asio::bind_executor(
          strand, asio::bind_cancellation_slot(unused.slot(), tock::timeout(10ms, record_io_on(expired, strand)))));
  asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(cancelled.calls, 1);
  BOOST_CHECK_EQUAL(cancelled.ec, aborted);
  BOOST_CHECK(cancelled.on_strand);
  BOOST_REQUIRE_EQUAL(expired.calls, 1);
  BOOST_CHECK_EQUAL(expired.ec, timed_out);
  BOOST_CHECK(expired.on_strand);
  BOOST_CHECK(expired.at >= cancelled.at);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(co_await_with_as_tuple_and_a_slot_outside_the_timeout_returns_aborted_then_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  asio::cancellation_signal signal;
  error_code first;
  error_code second;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 16> buf{};
    auto token = [&](steady_clock::duration d) {
      return asio::as_tuple(asio::bind_cancellation_slot(signal.slot(), tock::timeout(d, asio::use_awaitable)));
    };
    asio::post(ctx, [&] { signal.emit(asio::cancellation_type::terminal); });  // runs once the read pends
    std::tie(first, std::ignore) = co_await s.server.async_read_some(asio::buffer(buf), token(never));
    std::tie(second, std::ignore) = co_await s.server.async_read_some(asio::buffer(buf), token(10ms));
  }));
  BOOST_CHECK_EQUAL(first, aborted);
  BOOST_CHECK_EQUAL(second, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// An initiating function whose declared return type is async_result<Token, ...>::return_type.
BOOST_AUTO_TEST_CASE(a_legacy_initiating_function_accepts_timed_tokens) {
  asio::io_context ctx;
  completion c;
  legacy_async_sleep_for(ctx, never, tock::timeout(10ms, record(c)));
  error_code awaited;
  BOOST_REQUIRE(run_coroutine(ctx, [&]() -> asio::awaitable<void> {
    std::tie(awaited) =
        co_await legacy_async_sleep_for(ctx, never, tock::timeout(5ms, asio::as_tuple(asio::use_awaitable)));
  }));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK_EQUAL(awaited, timed_out);
}

// --- A tock sleep timed with a plain handler: the sleep's initiation gives the executor.

BOOST_AUTO_TEST_CASE(a_sleep_timed_out_with_a_plain_handler_completes_with_timed_out_not_before_the_timeout) {
  asio::io_context ctx;
  completion c;
  const auto start = steady_clock::now();
  tock::async_sleep_for(ctx, never, tock::timeout(10ms, record(c)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 2u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at - start >= 10ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  BOOST_CHECK(service_of(ctx).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_sleep_that_ends_before_its_timeout_succeeds_and_removes_the_timeout) {
  asio::io_context ctx;
  completion c;
  const auto start = steady_clock::now();
  tock::async_sleep_for(ctx, 5ms, tock::timeout(never, record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK(!c.ec);
  BOOST_CHECK(c.at - start >= 5ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_sleep_on_a_strand_timed_out_with_a_plain_handler_completes_on_the_strand) {
  asio::io_context ctx;
  const strand_type strand = asio::make_strand(ctx);
  int calls = 0;
  bool on_strand = false;
  error_code ec;
  tock::async_sleep_for(strand, never, tock::timeout(10ms, [&](const error_code& e) {
                          ++calls;
                          ec = e;
                          on_strand = strand.running_in_this_thread();
                        }));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(calls, 1);
  BOOST_CHECK_EQUAL(ec, timed_out);
  BOOST_CHECK(on_strand);
}

BOOST_AUTO_TEST_CASE(a_sleep_bound_to_a_deadline_with_a_plain_handler_times_out_not_before_the_deadline) {
  asio::io_context ctx;
  tock::deadline dl(ctx, 10ms);
  completion c;
  tock::async_sleep_for(ctx, never, dl.bind(record(c)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK(c.at >= dl.expiry());
}

// The deferred operation keeps the initiation, executor included, until it is invoked with the timed token.
BOOST_AUTO_TEST_CASE(a_deferred_sleep_invoked_with_a_timeout_and_a_plain_handler_times_out) {
  asio::io_context ctx;
  completion c;
  auto sleep = tock::async_sleep_for(ctx.get_executor(), never, asio::deferred);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
  std::move(sleep)(tock::timeout(10ms, record(c)));
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 2u);
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(c.calls, 1);
  BOOST_CHECK_EQUAL(c.ec, timed_out);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

// --- use_future: its handler's executor belongs to no context; the deadline lives in the socket's.

BOOST_AUTO_TEST_CASE(a_read_with_a_timeout_and_use_future_fails_with_timed_out) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  const auto start = steady_clock::now();
  std::future<std::size_t> f = s.server.async_read_some(asio::buffer(buf), tock::timeout(10ms, asio::use_future));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE(f.wait_for(0s) == std::future_status::ready);
  try {
    f.get();
    BOOST_FAIL("the read did not fail");
  } catch (const sys::system_error& e) {
    BOOST_CHECK_EQUAL(e.code(), timed_out);
  }
  BOOST_CHECK(steady_clock::now() - start >= 10ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(a_read_that_beats_its_timeout_with_use_future_returns_its_bytes) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  asio::write(s.client, asio::buffer("abc", 3));
  std::future<std::size_t> f = s.server.async_read_some(asio::buffer(buf), tock::timeout(1h, asio::use_future));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_CHECK_EQUAL(f.get(), 3u);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

#if TOCK_ASIO_VERSION >= 103100
// --- asio::cancel_after (Asio >= 1.31) and tock's timeouts, nested either way round: the shorter limit ends the
// read, once; the other's timer goes with it (tock's entry leaves the heap; Asio's timer is cancelled, so that the
// context runs out of work long before the hour).

template <typename MakeToken>
void read_with(MakeToken make_token, const error_code& expected) {
  asio::io_context ctx;
  socket_pair s(ctx);
  std::array<char, 16> buf{};
  io_result r;
  const auto start = steady_clock::now();
  s.server.async_read_some(asio::buffer(buf), make_token(record_io(r)));
  BOOST_REQUIRE(run_until_idle(ctx));
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, expected);
  BOOST_CHECK(r.at - start >= 10ms);
  BOOST_CHECK_EQUAL(service_of(ctx).pending(), 0u);
}

BOOST_AUTO_TEST_CASE(cancel_after_outside_a_longer_timeout_aborts_the_read) {
  read_with([](auto h) { return asio::cancel_after(10ms, tock::timeout(1h, std::move(h))); }, aborted);
}

BOOST_AUTO_TEST_CASE(a_timeout_inside_a_longer_cancel_after_times_the_read_out) {
  read_with([](auto h) { return asio::cancel_after(1h, tock::timeout(10ms, std::move(h))); }, timed_out);
}

BOOST_AUTO_TEST_CASE(a_timeout_outside_a_longer_cancel_after_times_the_read_out) {
  read_with([](auto h) { return tock::timeout(10ms, asio::cancel_after(1h, std::move(h))); }, timed_out);
}

BOOST_AUTO_TEST_CASE(cancel_after_inside_a_longer_timeout_aborts_the_read) {
  read_with([](auto h) { return tock::timeout(1h, asio::cancel_after(10ms, std::move(h))); }, aborted);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
