// tock/detail/asio_awaitable.hpp: Asio's coroutine support (asio::awaitable, asio::use_awaitable), for the
// headers that offer awaitables; the rest of tock does without it (see config.hpp).
#ifndef TOCK_DETAIL_ASIO_AWAITABLE_HPP
#define TOCK_DETAIL_ASIO_AWAITABLE_HPP

#define TOCK_DETAIL_WANT_ASIO_AWAITABLE
#include <tock/config.hpp>

#endif
