// beast_stream_test, continued (see beast_stream_test.cpp): rate limits, Beast's protocols over the stream
// (HTTP, WebSocket, SSL where OpenSSL is installed), moves, and where tock promises more than Beast.
#include "beast_stream_support.hpp"
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/test/unit_test.hpp>

#if !defined(TOCK_TEST_OPENSSL) && __has_include(<openssl/ssl.h>)
#define TOCK_TEST_OPENSSL 1
#endif
#if TOCK_TEST_OPENSSL
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#endif

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace beast_test;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;

BOOST_AUTO_TEST_SUITE(beast_stream_test)

// --- Rate limits (Beast's simple_rate_policy: bytes per second, per direction)

BOOST_AUTO_TEST_CASE_TEMPLATE(a_write_limit_caps_each_write_and_waits_for_the_next_second, Kind, kinds) {
  using stream_type = typename Kind::template stream<beast::simple_rate_policy>;
  asio::io_context ctx;
  stream_type s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
  s.rate_policy().write_limit(1000);
  std::vector<char> data(2500, 'x');
  result w1, w2, w3;
  s.expires_after(5s);
  s.async_write_some(asio::buffer(data), [&](const error_code& ec, std::size_t n) {
    record(w1)(ec, n);
    s.async_write_some(asio::buffer(data), [&](const error_code& ec2, std::size_t n2) {
      record(w2)(ec2, n2);
      s.async_write_some(asio::buffer(data), [&](const error_code& ec3, std::size_t n3) {
        record(w3)(ec3, n3);
        s.close();  // Beast's rate timer ticks until then
      });
    });
  });
  BOOST_REQUIRE(run(ctx));
  for (const result* w : {&w1, &w2, &w3}) {
    BOOST_CHECK_EQUAL(w->calls, 1);
    BOOST_CHECK(!w->ec);
    BOOST_CHECK_GE(w->n, 1u);
    BOOST_CHECK_LE(w->n, 1000u);
  }
  // The first second's allowance is spent by the first two (the first slice starts, refilled, when the
  // first write ran out); the third waits for the next.
  BOOST_CHECK(w3.at - w2.at >= 500ms);
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_limit_caps_each_read, Kind, kinds) {
  using stream_type = typename Kind::template stream<beast::simple_rate_policy>;
  asio::io_context ctx;
  beast::simple_rate_policy policy;
  policy.read_limit(100);
  stream_type s(policy, ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
  std::vector<char> data(300, 'x');
  asio::write(peer, asio::buffer(data));
  char buf[300];
  result r;
  s.async_read_some(asio::buffer(buf), record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.n, 100u);
  check_service_idle<Kind>(ctx);
}

// --- Beast's protocols over the stream

BOOST_AUTO_TEST_CASE_TEMPLATE(http_request_and_response_go_through, Kind, kinds) {
  using stream_type = tcp_stream_of<Kind>;
  asio::io_context ctx;
  stream_type client(ctx), server(ctx);
  {
    tcp::acceptor acceptor(ctx, loopback());
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server.socket());
  }
  http::request<http::string_body> req{http::verb::post, "/echo", 11};
  req.body() = "ping";
  req.prepare_payload();
  beast::flat_buffer server_buf, client_buf;
  http::request<http::string_body> got_req;
  http::response<http::string_body> res, got_res;
  result server_read, server_write, client_write, client_read;
  server.expires_after(5s);
  http::async_read(server, server_buf, got_req, [&](const error_code& ec, std::size_t n) {
    record(server_read)(ec, n);
    res = http::response<http::string_body>{http::status::ok, 11};
    res.body() = got_req.body() + " pong";
    res.prepare_payload();
    server.expires_after(5s);
    http::async_write(server, res, record(server_write));
  });
  client.expires_after(5s);
  http::async_write(client, req, [&](const error_code& ec, std::size_t n) {
    record(client_write)(ec, n);
    client.expires_after(5s);
    http::async_read(client, client_buf, got_res, record(client_read));
  });
  BOOST_REQUIRE(run(ctx));
  for (const result* r : {&server_read, &server_write, &client_write, &client_read}) {
    BOOST_CHECK_EQUAL(r->calls, 1);
    BOOST_CHECK(!r->ec);
  }
  BOOST_CHECK_EQUAL(got_req.target(), "/echo");
  BOOST_CHECK_EQUAL(got_res.result(), http::status::ok);
  BOOST_CHECK_EQUAL(got_res.body(), "ping pong");
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_http_read_times_out_on_a_silent_peer, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  asio::write(peer, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n")));  // and nothing more
  beast::flat_buffer buf;
  http::request<http::string_body> req;
  result r;
  s.expires_after(30ms);
  http::async_read(s, buf, req, record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timeout);
  check_service_idle<Kind>(ctx);
}

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

#if TOCK_TEST_OPENSSL

namespace {

// A self-signed P-256 certificate for 127.0.0.1 (valid until 2126), for the SSL cases only.
const char* const test_cert = R"(-----BEGIN CERTIFICATE-----
MIIBfjCCASWgAwIBAgIUDYhabFOoVenNvHM9scqiL7XdmDIwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTIwMzA5Mjg0MloYDzIxMjYxMTA5
MDkyODQyWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAARL1qolmNNrwBK6BIeP89T4LgFSQWcNql+B4KtcKjozchiLtWvstCTj
IPEseaYX6yWgETvsB9Psthdr4r3yBIfco1MwUTAdBgNVHQ4EFgQUg495j/hm2CHT
CpPJ3/9vdsGV3u0wHwYDVR0jBBgwFoAUg495j/hm2CHTCpPJ3/9vdsGV3u0wDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAWNP5vkme0d567I5yNACIU
v6rZrLp+tDU6GDox9MsvzwIgGkBQoijCUFlv9MhtQPeSyFYBJChuZ2dii1PI2Kza
oc4=
-----END CERTIFICATE-----
)";
const char* const test_key = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwBl87lvN+XrshgR4
xfMz5OpOdEoIAPPzBU1cEJUrRsWhRANCAARL1qolmNNrwBK6BIeP89T4LgFSQWcN
ql+B4KtcKjozchiLtWvstCTjIPEseaYX6yWgETvsB9Psthdr4r3yBIfc
-----END PRIVATE KEY-----
)";

asio::ssl::context server_context() {
  asio::ssl::context c(asio::ssl::context::tls_server);
  c.use_certificate_chain(asio::buffer(test_cert, std::char_traits<char>::length(test_cert)));
  c.use_private_key(asio::buffer(test_key, std::char_traits<char>::length(test_key)), asio::ssl::context::pem);
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(ssl_handshake_echo_and_shutdown_go_through, Kind, kinds) {
  using ssl_type = beast::ssl_stream<tcp_stream_of<Kind>>;
  asio::io_context ctx;
  asio::ssl::context server_ctx = server_context();
  asio::ssl::context client_ctx(asio::ssl::context::tls_client);
  client_ctx.set_verify_mode(asio::ssl::verify_none);
  ssl_type client(ctx, client_ctx), server(ctx, server_ctx);
  {
    tcp::acceptor acceptor(ctx, loopback());
    beast::get_lowest_layer(client).connect(acceptor.local_endpoint());
    acceptor.accept(beast::get_lowest_layer(server).socket());
  }
  beast::get_lowest_layer(client).expires_after(5s);
  beast::get_lowest_layer(server).expires_after(5s);
  char server_buf[5], client_buf[5];
  result server_hs, client_hs, server_read, client_read, shut;
  server.async_handshake(asio::ssl::stream_base::server, [&](const error_code& ec) {
    record0(server_hs)(ec);
    asio::async_read(server, asio::buffer(server_buf), [&](const error_code& ec2, std::size_t n) {
      record(server_read)(ec2, n);
      asio::async_write(server, asio::buffer(server_buf), [](const error_code&, std::size_t) {});
    });
  });
  client.async_handshake(asio::ssl::stream_base::client, [&](const error_code& ec) {
    record0(client_hs)(ec);
    asio::async_write(client, asio::buffer("hello", 5), [&](const error_code&, std::size_t) {
      asio::async_read(client, asio::buffer(client_buf), [&](const error_code& ec2, std::size_t n) {
        record(client_read)(ec2, n);
        beast::get_lowest_layer(client).expires_after(5s);
        beast::get_lowest_layer(server).close();  // the client's shutdown then ends without waiting
        client.async_shutdown(record0(shut));
      });
    });
  });
  BOOST_REQUIRE(run(ctx));
  for (const result* r : {&server_hs, &client_hs, &server_read, &client_read}) {
    BOOST_CHECK_EQUAL(r->calls, 1);
    BOOST_CHECK(!r->ec);
  }
  BOOST_CHECK_EQUAL(std::string(client_buf, 5), "hello");
  BOOST_CHECK_EQUAL(shut.calls, 1);
  BOOST_CHECK(shut.ec != timeout);
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_ssl_handshake_times_out_on_a_silent_peer, Kind, kinds) {
  using ssl_type = beast::ssl_stream<tcp_stream_of<Kind>>;
  asio::io_context ctx;
  asio::ssl::context client_ctx(asio::ssl::context::tls_client);
  ssl_type client(ctx, client_ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, beast::get_lowest_layer(client), peer);
  result hs;
  beast::get_lowest_layer(client).expires_after(30ms);
  client.async_handshake(asio::ssl::stream_base::client, record0(hs));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(hs.calls, 1);
  BOOST_CHECK_EQUAL(hs.ec, timeout);
  check_service_idle<Kind>(ctx);
}

#endif

// --- Moves

BOOST_AUTO_TEST_CASE_TEMPLATE(a_moved_from_stream_is_like_a_new_one, Kind, kinds) {
  asio::io_context ctx;
  tcp_stream_of<Kind> from(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, from, peer);
  tcp_stream_of<Kind> to(std::move(from));
  BOOST_CHECK(!from.socket().is_open());
  BOOST_CHECK(from.get_executor() == asio::any_io_executor(ctx.get_executor()));
  BOOST_CHECK(to.socket().is_open());
  // Both work: the moved-to reads, the moved-from connects and times out as a new stream would.
  char buf[4];
  result r_to, r_from;
  asio::write(peer, asio::buffer("x", 1));
  to.async_read_some(asio::buffer(buf), record(r_to));
  tcp::socket peer2(ctx);
  connect_pair(ctx, from, peer2);
  from.expires_after(20ms);
  from.async_read_some(asio::buffer(buf), record(r_from));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r_to.calls, 1);
  BOOST_CHECK(!r_to.ec);
  BOOST_CHECK_EQUAL(r_from.calls, 1);
  BOOST_CHECK_EQUAL(r_from.ec, timeout);
  check_service_idle<Kind>(ctx);
}

// release_socket() cancels the pending operations as cancel() does and gives the open socket away; the stream
// keeps a closed one.
BOOST_AUTO_TEST_CASE_TEMPLATE(release_socket_cancels_and_gives_the_open_socket_away, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[4];
  result r, after;
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(r));
  std::optional<tcp::socket> released;
  asio::post(ctx, [&] { released.emplace(s.release_socket()); });
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_REQUIRE(released);
  BOOST_CHECK(released->is_open());
  BOOST_CHECK(!s.socket().is_open());
  asio::write(peer, asio::buffer("x", 1));
  released->async_read_some(asio::buffer(buf), record(after));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(after.calls, 1);
  BOOST_CHECK_EQUAL(after.n, 1u);
  check_service_idle<Kind>(ctx);
}

// A stream on one executor type gives its socket to a stream on another (the converting constructor; here from
// a strand's, which rebind_executor names, to the default's). Its timeouts work there.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_stream_on_another_executor_takes_over_the_socket, Kind, kinds) {
  using strand_type = asio::strand<asio::io_context::executor_type>;
  using strand_stream = typename tcp_stream_of<Kind>::template rebind_executor<strand_type>::other;
  static_assert(std::is_same_v<typename strand_stream::executor_type, strand_type>);
  asio::io_context ctx;
  strand_stream from(asio::make_strand(ctx));
  tcp::socket peer(ctx);
  connect_pair(ctx, from, peer);
  tcp_stream_of<Kind> to(std::move(from));
  BOOST_CHECK(to.socket().is_open());
  BOOST_CHECK(!from.socket().is_open());
  char buf[4];
  result r;
  to.expires_after(20ms);
  to.async_read_some(asio::buffer(buf), record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timeout);
  BOOST_CHECK(!to.socket().is_open());
  check_service_idle<Kind>(ctx);
}

// --- tock only

BOOST_AUTO_TEST_CASE(the_stream_holds_no_heap_object) {
  // Two deadlines and the socket, in place (Beast: a shared_ptr to an impl with three Asio timers).
  BOOST_TEST_MESSAGE("sizeof(tock::beast::tcp_stream) = " << sizeof(tock::beast::tcp_stream));
  BOOST_CHECK_LE(sizeof(tock::beast::tcp_stream), sizeof(tcp::socket) + 2 * sizeof(tock::deadline) + 16);
}

BOOST_AUTO_TEST_SUITE_END()
