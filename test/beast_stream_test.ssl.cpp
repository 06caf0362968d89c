// beast_stream_test, continued (see beast_stream_test.cpp): SSL over the stream, where OpenSSL is installed (a
// translation unit of its own: Asio's and Beast's SSL streams are heavy to compile).
#include "beast_stream_support.hpp"
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
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
#include <string>

using namespace beast_test;

BOOST_AUTO_TEST_SUITE(beast_stream_test)

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

BOOST_AUTO_TEST_SUITE_END()
