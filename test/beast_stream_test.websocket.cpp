// beast_stream_test, continued (see beast_stream_test.cpp): WebSocket over the stream (a translation unit of
// its own: Beast's WebSocket is the heaviest part of the suite to compile).
#include "beast_stream_support.hpp"
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <string>

using namespace beast_test;
namespace websocket = boost::beast::websocket;

BOOST_AUTO_TEST_SUITE(beast_stream_test)

BOOST_AUTO_TEST_CASE_TEMPLATE(websocket_handshake_echo_and_close_go_through, Kind, kinds) {
  using ws_type = websocket::stream<tcp_stream_of<Kind>>;
  asio::io_context ctx;
  ws_type client(ctx), server(ctx);
  {
    tcp::acceptor acceptor(ctx, loopback());
    beast::get_lowest_layer(client).connect(acceptor.local_endpoint());
    acceptor.accept(beast::get_lowest_layer(server).socket());
  }
  beast::get_lowest_layer(client).expires_after(5s);
  beast::get_lowest_layer(server).expires_after(5s);
  beast::flat_buffer server_buf, client_buf;
  result accepted, handshaken, echoed, client_read, closed, server_end;
  server.async_accept([&](const error_code& ec) {
    record0(accepted)(ec);
    server.async_read(server_buf, [&](const error_code& ec2, std::size_t n) {
      record(echoed)(ec2, n);
      server.text(true);
      server.async_write(server_buf.data(), [&](const error_code&, std::size_t) {
        server_buf.consume(server_buf.size());
        server.async_read(server_buf, record(server_end));  // ends when the client closes
      });
    });
  });
  const std::string hello = "hello";
  client.async_handshake("127.0.0.1", "/", [&](const error_code& ec) {
    record0(handshaken)(ec);
    client.async_write(asio::buffer(hello), [&](const error_code&, std::size_t) {
      client.async_read(client_buf, [&](const error_code& ec2, std::size_t n) {
        record(client_read)(ec2, n);
        client.async_close(websocket::close_code::normal, record0(closed));
      });
    });
  });
  BOOST_REQUIRE(run(ctx));
  for (const result* r : {&accepted, &handshaken, &echoed, &client_read, &closed}) {
    BOOST_CHECK_EQUAL(r->calls, 1);
    BOOST_CHECK(!r->ec);
  }
  BOOST_CHECK_EQUAL(beast::buffers_to_string(client_buf.data()), "hello");
  BOOST_CHECK_EQUAL(server_end.calls, 1);
  BOOST_CHECK_EQUAL(server_end.ec, error_code(websocket::error::closed));
  BOOST_CHECK(!beast::get_lowest_layer(client).socket().is_open());  // teardown closed it
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_SUITE_END()
