// The minimal program of scripts/compile_cost.sh, with Asio alone: the same work as minimal_tock.cpp, the sleep
// on a steady_timer and the read's time limit a steady_timer that emits a terminal cancellation on its slot (Boost
// 1.81 has no asio::cancel_after).
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
  asio::steady_timer sleep(ctx, 10ms), limit(ctx);
  asio::cancellation_signal cancel;
  bool limit_passed = false;
  sleep.async_wait([&](boost::system::error_code ec) {
    std::cout << "slept: " << (ec ? ec.message() : "ok") << "\n";
    limit.expires_after(50ms);
    limit.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      limit_passed = true;
      cancel.emit(asio::cancellation_type::terminal);
    });
    server.async_read_some(
        asio::buffer(buf),
        asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code ec, std::size_t n) {
          limit.cancel();
          const bool timed_out = limit_passed && ec == asio::error::operation_aborted;
          std::cout << "read: " << (timed_out ? "timed out" : ec.message()) << ", " << n << " bytes\n";
          status = timed_out ? 0 : 1;
        }));
  });
  ctx.run();
  return status;
}
