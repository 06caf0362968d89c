// The Beast HTTP server of scripts/compile_cost.sh, over any stream with Beast's tcp_stream interface
// (beast_tock.cpp: tock::beast::tcp_stream, beast_asio.cpp: boost::beast::tcp_stream). It serves keep-alive
// requests under idle, read and write limits, and a client in the same process checks it: two requests on one
// connection, then it stays silent until the server's idle limit closes the connection. Prints what happened.
#ifndef TOCK_BENCH_COMPILE_COST_BEAST_SERVER_HPP
#define TOCK_BENCH_COMPILE_COST_BEAST_SERVER_HPP

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <iostream>
#include <string>

namespace compile_cost {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

struct counters {
  int requests = 0, closed_idle = 0, closed_other = 0;
};

template <typename Stream>
asio::awaitable<void> session(Stream stream, counters& c) {
  constexpr auto token = asio::as_tuple(asio::use_awaitable);
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    stream.expires_after(200ms);  // the idle and read limit
    if (auto [ec, n] = co_await http::async_read(stream, buffer, req, token); ec) {
      ++(ec == beast::error::timeout ? c.closed_idle : c.closed_other);
      break;
    }
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain");
    res.keep_alive(req.keep_alive());
    res.body() = "hello " + std::string(req.target()) + "\n";
    res.prepare_payload();
    stream.expires_after(1s);  // the write limit
    if (auto [ec, n] = co_await http::async_write(stream, res, token); ec) {
      ++c.closed_other;
      break;
    }
    ++c.requests;
    if (!res.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

template <typename Stream>
asio::awaitable<void> serve(tcp::acceptor& acceptor, counters& c) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    asio::co_spawn(acceptor.get_executor(), session(Stream(std::move(socket)), c), asio::detached);
  }
}

// A plain client: two requests, then silence until the server closes the connection.
inline asio::awaitable<void> client(tcp::endpoint server, tcp::acceptor& acceptor) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(server, asio::use_awaitable);
  beast::flat_buffer buffer;
  for (const char* target : {"/a", "/b"}) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "localhost");
    co_await http::async_write(socket, req, asio::use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(socket, buffer, res, asio::use_awaitable);
    std::cout << "client: " << res.result_int() << " " << res.body();
  }
  char byte;
  auto [ec, n] = co_await socket.async_read_some(asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
  std::cout << "client: closed by the server: " << (ec == asio::error::eof) << "\n";
  acceptor.close();
}

template <typename Stream>
int run() {
  asio::io_context ctx(1);
  tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  counters c;
  asio::co_spawn(ctx, serve<Stream>(acceptor, c), asio::detached);
  asio::co_spawn(ctx, client(acceptor.local_endpoint(), acceptor), asio::detached);
  ctx.run();
  std::cout << "server: requests " << c.requests << ", closed idle " << c.closed_idle << ", other " << c.closed_other
            << "\n";
  return c.requests == 2 && c.closed_idle == 1 ? 0 : 1;
}

}  // namespace compile_cost

#endif
