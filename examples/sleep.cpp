// Three ways to wait with tock on one io_context, about 0.4 s in all:
//   1. a coroutine that co_awaits tock::sleep_for and tock::sleep_until,
//   2. a callback passed to tock::async_sleep_for,
//   3. a tock::timer whose wait is cancelled before it expires (operation_aborted).
#include <tock/tock.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

const auto program_start = std::chrono::steady_clock::now();

void log(const std::string& what) {
    auto elapsed = std::chrono::steady_clock::now() - program_start;
    std::cout << "[" << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms] " << what
              << std::endl;
}

asio::awaitable<void> count_down() {
    for (int i = 3; i > 0; --i) {
        log("coroutine: " + std::to_string(i));
        co_await tock::sleep_for(100ms);
    }
    co_await tock::sleep_until(std::chrono::steady_clock::now() + 50ms);
    log("coroutine: done");
}

}  // namespace

int main() {
    asio::io_context ctx;
    bool cancelled = false;

    asio::co_spawn(ctx, count_down(), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
    });

    tock::async_sleep_for(ctx.get_executor(), 50ms,
                          [](boost::system::error_code ec) { log("callback: 50 ms sleep finished: " + ec.message()); });

    tock::timer long_wait(ctx, 1s);
    long_wait.async_wait([&](boost::system::error_code ec) {
        cancelled = ec == asio::error::operation_aborted;
        log("timer: 1 s wait ended early: " + ec.message());
    });
    tock::async_sleep_for(ctx.get_executor(), 150ms, [&](boost::system::error_code) {
        log("cancelling the 1 s timer");
        long_wait.cancel();
    });

    ctx.run();
    log(cancelled ? "all done" : "error: the timer was not cancelled");
    return cancelled ? 0 : 1;
}
