// tock/tock.hpp: everything tock offers.
#ifndef TOCK_TOCK_HPP
#define TOCK_TOCK_HPP

#include <tock/async_sleep.hpp>
#include <tock/basic_timer.hpp>
#include <tock/cancel_after.hpp>
#include <tock/deadline.hpp>
#include <tock/error.hpp>
#include <tock/manual_clock.hpp>
#include <tock/periodic_timer.hpp>
#include <tock/schedule.hpp>
#include <tock/timeout.hpp>
#include <tock/timer.hpp>
#include <tock/timer_service.hpp>
#include <tock/timer_stats.hpp>

#endif
