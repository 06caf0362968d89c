// <tock/timer.hpp>, the drop-in for <asio/steady_timer.hpp>, brings no more of Asio than that header: none of
// Asio's coroutine support. Asio 1.38's awaitable.hpp brings disposition.hpp and its
// asio::throw_exception(Disposition&&), which made code under `using namespace asio` with a throw_exception
// of its own (as Asio's tests have) ambiguous.
// This file is built without the precompiled headers (test/CMakeLists.txt) and includes <tock/timer.hpp>
// first, so that the checks below see only what it brings; a header that breaks the rule breaks the build.
#include <tock/timer.hpp>

// The include guards of the coroutine headers, Boost.Asio's and standalone Asio's: an undeclared template
// cannot be detected from C++, a guard can.
#if defined(BOOST_ASIO_AWAITABLE_HPP) || defined(ASIO_AWAITABLE_HPP)
#error "<tock/timer.hpp> includes asio/awaitable.hpp"
#endif
#if defined(BOOST_ASIO_USE_AWAITABLE_HPP) || defined(ASIO_USE_AWAITABLE_HPP)
#error "<tock/timer.hpp> includes asio/use_awaitable.hpp"
#endif
#if defined(BOOST_ASIO_CO_SPAWN_HPP) || defined(ASIO_CO_SPAWN_HPP)
#error "<tock/timer.hpp> includes asio/co_spawn.hpp"
#endif
#if defined(BOOST_ASIO_THIS_CORO_HPP) || defined(ASIO_THIS_CORO_HPP)
#error "<tock/timer.hpp> includes asio/this_coro.hpp"
#endif
#if defined(BOOST_ASIO_EXPERIMENTAL_AWAITABLE_OPERATORS_HPP) || defined(ASIO_EXPERIMENTAL_AWAITABLE_OPERATORS_HPP) || \
    defined(BOOST_ASIO_EXPERIMENTAL_CORO_HPP) || defined(ASIO_EXPERIMENTAL_CORO_HPP) ||                               \
    defined(BOOST_ASIO_EXPERIMENTAL_USE_CORO_HPP) || defined(ASIO_EXPERIMENTAL_USE_CORO_HPP)
#error "<tock/timer.hpp> includes Asio's experimental coroutine support"
#endif

#include <utility>

// The pattern of Asio's tests: a throw_exception of their own, found next to Asio's names by an unqualified call.
// Were asio::throw_exception(Disposition&&) declared, the call in throws() would be ambiguous.
template <typename Exception>
[[noreturn]] void throw_exception(Exception&& e) {
  throw std::forward<Exception>(e);
}

#if defined(TOCK_STANDALONE_ASIO)
using namespace asio;
#else
using namespace boost::asio;
#endif

namespace {

[[noreturn]] void throws(const tock::error_code& ec) { throw_exception(ec); }

}  // namespace

// The control: the header tock::timer replaces, after the checks (it would pass them too).
#if defined(TOCK_STANDALONE_ASIO)
#include <asio/steady_timer.hpp>
#else
#include <boost/asio/steady_timer.hpp>
#endif

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>

namespace {

// A wait on a timer that is already due, through the names `using namespace` brought in: ctx.run() returns the
// number of handlers it ran, which is the backend's business as much as the timer's (one on epoll; on Asio's
// io_uring backend, its own handlers too), so the caller compares it with Asio's.
template <typename Timer>
std::size_t wait_on_a_due_timer(io_context& ctx) {
  Timer t(ctx, std::chrono::nanoseconds(0));
  tock::error_code result = error::operation_aborted;
  t.async_wait([&](const tock::error_code& ec) { result = ec; });
  ctx.restart();
  const std::size_t ran = ctx.run();
  BOOST_TEST(!result);
  return ran;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(include_hygiene_test)

BOOST_AUTO_TEST_CASE(code_under_using_namespace_asio_calls_its_own_throw_exception) {
  BOOST_CHECK_THROW(throws(error::operation_aborted), tock::error_code);
}

BOOST_AUTO_TEST_CASE(tock_timer_waits_as_steady_timer_does) {
  io_context ctx;
  const std::size_t control = wait_on_a_due_timer<steady_timer>(ctx);  // on the same context, first
  BOOST_TEST(control >= 1u);  // at least the wait's own handler
  const std::size_t ran = wait_on_a_due_timer<tock::timer>(ctx);
  BOOST_TEST(ran == control, "tock::timer's wait ran " << ran << " handlers, steady_timer's " << control);
}

BOOST_AUTO_TEST_SUITE_END()
