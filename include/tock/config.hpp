// tock/config.hpp: the one place that picks the Asio tock is built on, and the only header that names it.
//
// Boost.Asio by default (`boost::asio`, `boost::system::error_code`); standalone Asio (`asio`, `std::error_code`)
// when TOCK_STANDALONE_ASIO is defined, as the CMake option TOCK_ASIO=standalone does for the tock target and
// its users. Every other tock file spells Asio `asio::` and its error types `sys::` (the aliases
// tock::asio and tock::sys below). Both backends need Asio
// >= 1.26 (Boost >= 1.81): Asio 1.22 has append and as_tuple only as experimental.
//
// The core list below leaves out Asio's coroutine support: <tock/timer.hpp>, a drop-in for
// <asio/steady_timer.hpp>, must bring no more of Asio, or names such as asio::throw_exception
// (asio/disposition.hpp, which Asio 1.38's awaitable.hpp brings) make unqualified calls ambiguous in code
// under `using namespace asio`. The coroutine headers come apart, at the end, for the headers that offer
// awaitables (tock/detail/asio_awaitable.hpp).
#ifndef TOCK_CONFIG_HPP
#define TOCK_CONFIG_HPP

#if defined(TOCK_STANDALONE_ASIO)

#if !defined(ASIO_STANDALONE)
#define ASIO_STANDALONE
#endif
#include <asio/version.hpp>
#if ASIO_VERSION < 102600
#error \
    "tock needs standalone Asio >= 1.26 (asio::append and asio::as_tuple; Debian 12's libasio-dev, 1.22, has them only as experimental)"
#endif
#include <system_error>

#define TOCK_ASIO_VERSION ASIO_VERSION
// For specializations, which must be declared in Asio's own namespace, and for error-code traits.
#define TOCK_ASIO_NAMESPACE asio
#define TOCK_SYSTEM_NAMESPACE std

#include <asio/any_io_executor.hpp>
#include <asio/append.hpp>
#include <asio/as_tuple.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/associator.hpp>
#include <asio/async_result.hpp>
#include <asio/basic_waitable_timer.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution/executor.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/is_executor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <asio/wait_traits.hpp>

#else

#include <boost/asio/version.hpp>
#if BOOST_ASIO_VERSION < 102600
#error "tock needs Boost >= 1.81 (Boost.Asio >= 1.26; Debian 12: apt-get install libboost1.81-dev)"
#endif
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#define TOCK_ASIO_VERSION BOOST_ASIO_VERSION
#define TOCK_ASIO_NAMESPACE boost::asio
#define TOCK_SYSTEM_NAMESPACE boost::system

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/wait_traits.hpp>

#endif

namespace tock {

/// The Asio tock is built on: boost::asio, or standalone Asio's namespace asio.
namespace asio = ::TOCK_ASIO_NAMESPACE;

/// The namespace of that Asio's error types (error_code, system_error, error_category...): boost::system or std.
namespace sys = ::TOCK_SYSTEM_NAMESPACE;

/// The error code every tock completion carries: sys::error_code.
using error_code = sys::error_code;

namespace detail {

// Whether this Asio's basic_waitable_timer still has its deprecated members (expires_at() as a getter,
// expires_from_now, cancel(ec)...): Boost.Asio 1.81 does unless BOOST_ASIO_NO_DEPRECATED is defined, Asio
// 1.38 has none. tock::basic_timer offers them exactly when this holds, so old code moves over unchanged.
template <typename Timer>
inline constexpr bool has_deprecated_timer_members = requires(Timer& t) { t.expires_from_now(); };
inline constexpr bool asio_timer_has_deprecated_members =
    has_deprecated_timer_members<asio::basic_waitable_timer<std::chrono::steady_clock>>;

}  // namespace detail
}  // namespace tock

#endif

// The coroutine part of Asio, outside the include guard: read again, it adds it once asked for. Only
// tock/detail/asio_awaitable.hpp asks, so that this file stays the only one to name the backend.
#if defined(TOCK_DETAIL_WANT_ASIO_AWAITABLE) && !defined(TOCK_CONFIG_ASIO_AWAITABLE_INCLUDED)
#define TOCK_CONFIG_ASIO_AWAITABLE_INCLUDED
#if defined(TOCK_STANDALONE_ASIO)
#include <asio/awaitable.hpp>
#include <asio/use_awaitable.hpp>
#else
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#endif
#endif

// asio::deferred, the default token of tock's own operations where the executor names none (Asio 1.26 has no
// such fallback): tock/detail/partial_token.hpp asks, as above.
#if defined(TOCK_DETAIL_WANT_ASIO_DEFERRED) && !defined(TOCK_CONFIG_ASIO_DEFERRED_INCLUDED)
#define TOCK_CONFIG_ASIO_DEFERRED_INCLUDED
#if defined(TOCK_STANDALONE_ASIO)
#include <asio/deferred.hpp>
#else
#include <boost/asio/deferred.hpp>
#endif
#endif
