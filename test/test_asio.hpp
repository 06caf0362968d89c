// test/test_asio.hpp: all of Asio the tests use, from the Asio tock is built on (tock/config.hpp), so that
// one test source builds against Boost.Asio and standalone Asio alike: tests spell Asio `asio::` and its error
// types `sys::`. One header for every test file, so that it can be precompiled once per configuration.
#ifndef TOCK_TEST_ASIO_HPP
#define TOCK_TEST_ASIO_HPP

#include <tock/config.hpp>

#if defined(TOCK_STANDALONE_ASIO)
#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#else
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
namespace asio = boost::asio;
#endif

namespace sys = tock::sys;

#endif
