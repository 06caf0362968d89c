// tock/timer.hpp: tock::timer, the drop-in for asio::steady_timer.
#ifndef TOCK_TIMER_HPP
#define TOCK_TIMER_HPP

#include <tock/basic_timer.hpp>

#include <chrono>

/// Timers for Asio (Boost.Asio or standalone, see config.hpp): every name tock offers (detail:: holds its internals).
namespace tock {

/// The timer most code wants: std::chrono::steady_clock, any_io_executor.
using timer = basic_timer<std::chrono::steady_clock>;

}  // namespace tock

#endif
