// The Asio backend the tests run on is the one the build chose: Asio's io_uring service in place of epoll with
// TOCK_ASIO_IO_URING (test/CMakeLists.txt then defines TOCK_TEST_IO_URING), Asio's default otherwise (epoll on
// Linux). Checked at compile time, on the macros Asio derives from the build's, and at run time, on the service an
// io_context's timers (Asio's and tock's) are scheduled by; where the kernel or the container refuses io_uring,
// the run-time check says so.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>

// What Asio made of the build's macros, 0 or 1, under one name for Boost.Asio and standalone Asio.
#if defined(ASIO_HAS_IO_URING_AS_DEFAULT) || defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define TOCK_TEST_HAS_IO_URING_AS_DEFAULT 1
#else
#define TOCK_TEST_HAS_IO_URING_AS_DEFAULT 0
#endif
#if defined(ASIO_HAS_IO_URING) || defined(BOOST_ASIO_HAS_IO_URING)
#define TOCK_TEST_HAS_IO_URING 1
#else
#define TOCK_TEST_HAS_IO_URING 0
#endif
#if defined(ASIO_HAS_EPOLL) || defined(BOOST_ASIO_HAS_EPOLL)
#define TOCK_TEST_HAS_EPOLL 1
#else
#define TOCK_TEST_HAS_EPOLL 0
#endif

#if defined(TOCK_TEST_IO_URING)
#if !TOCK_TEST_HAS_IO_URING || !TOCK_TEST_HAS_IO_URING_AS_DEFAULT
#error "TOCK_ASIO_IO_URING: Asio is not on its io_uring backend ([BOOST_]ASIO_HAS_IO_URING_AS_DEFAULT is undefined)"
#endif
#if TOCK_TEST_HAS_EPOLL
#error "TOCK_ASIO_IO_URING: Asio still has epoll ([BOOST_]ASIO_DISABLE_EPOLL did not reach it)"
#endif
#elif TOCK_TEST_HAS_IO_URING_AS_DEFAULT
#error "Asio is on its io_uring backend, but the build did not ask for it (TOCK_ASIO_IO_URING=OFF)"
#endif

namespace {

using namespace std::chrono_literals;

}  // namespace

BOOST_AUTO_TEST_SUITE(backend_test)

BOOST_AUTO_TEST_CASE(timers_are_scheduled_by_the_backend_the_build_chose) {
  try {
    asio::io_context ctx;
    asio::steady_timer control(ctx, 0ns);
    tock::timer t(ctx, 0ns);
    int calls = 0;
    control.async_wait([&](const sys::error_code& ec) { calls += !ec ? 1 : 100; });
    t.async_wait([&](const sys::error_code& ec) { calls += !ec ? 1 : 100; });
    ctx.run();
    BOOST_TEST(calls == 2);
#if defined(TOCK_TEST_IO_URING)
    BOOST_TEST(asio::has_service<asio::detail::io_uring_service>(ctx), "the timers did not run on io_uring");
#elif TOCK_TEST_HAS_EPOLL
    BOOST_TEST(asio::has_service<asio::detail::epoll_reactor>(ctx), "the timers did not run on epoll");
#endif
  } catch (const sys::system_error& e) {
    // Asio's io_uring service throws from io_uring_queue_init when io_uring_setup fails (EPERM in a container
    // whose seccomp profile forbids it, ENOSYS on a kernel without it, or kernel.io_uring_disabled).
    BOOST_FAIL("io_uring is not usable here, so this build cannot test tock on it: " << e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
