// The minimal program of scripts/compile_cost.sh, with tock: a sleep, then a read under a time limit that passes
// (nobody writes). minimal_asio.cpp does the same with Asio alone; both print the same lines.
#include <tock/tock.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <cstddef>
#include <iostream>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

int main() {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(ctx), server(ctx);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  char buf[64];
  int status = 1;
  tock::async_sleep_for(ctx.get_executor(), 10ms, [&](boost::system::error_code ec) {
    std::cout << "slept: " << (ec ? ec.message() : "ok") << "\n";
    server.async_read_some(asio::buffer(buf), tock::timeout(50ms, [&](boost::system::error_code ec, std::size_t n) {
                             const bool timed_out = ec == std::errc::timed_out;
                             std::cout << "read: " << (timed_out ? "timed out" : ec.message()) << ", " << n
                                       << " bytes\n";
                             status = timed_out ? 0 : 1;
                           }));
  });
  ctx.run();
  return status;
}
