// Uses tock (installed, a subproject, pkg-config or the .deb): one sleep on an io_context, then prints "ok".
// tock::asio is the Asio tock was built on (Boost.Asio or standalone), so this file builds against either.
#include <tock/tock.hpp>

#include <chrono>
#include <iostream>

int main() {
    tock::asio::io_context ctx;
    bool slept = false;
    tock::async_sleep_for(ctx.get_executor(), std::chrono::milliseconds(10), [&](tock::error_code ec) { slept = !ec; });
    ctx.run();
    std::cout << (slept ? "ok" : "failed") << '\n';
    return slept ? 0 : 1;
}
