// Uses tock (installed, a subproject, pkg-config or the .deb): one sleep on an io_context, then prints "ok".
#include <tock/tock.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <iostream>

int main() {
    boost::asio::io_context ctx;
    bool slept = false;
    tock::async_sleep_for(ctx.get_executor(), std::chrono::milliseconds(10),
                          [&](boost::system::error_code ec) { slept = !ec; });
    ctx.run();
    std::cout << (slept ? "ok" : "failed") << '\n';
    return slept ? 0 : 1;
}
