// beast_stream_test, continued (see beast_stream_test.cpp): rate limits, HTTP over the stream, moves, and where
// tock promises more than Beast. WebSocket and SSL: beast_stream_test.websocket.cpp and .ssl.cpp.
#include "beast_stream_support.hpp"
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using namespace beast_test;
namespace http = boost::beast::http;

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

// The stream is destroyed on its strand while its expiry's cancellation waits on that strand behind it (two
// threads run the context: one holds the strand until the deadline has fired on the other). The cancellation
// must not reach the destroyed socket; the read completes once, as a timeout, or as aborted if the socket's
// abort got onto the strand before the cancellation (the fire is counted just before it is sent there).
BOOST_AUTO_TEST_CASE(a_stream_destroyed_before_its_queued_expiry_runs) {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  auto s = std::make_unique<tock::beast::tcp_stream>(strand);  // on the heap: ASan sees a use after it
  tcp::socket peer(ctx);
  connect_pair(ctx, *s, peer);
  char buf[4];
  result r;
  bool fired = false;
  s->expires_after(20ms);
  s->async_read_some(asio::buffer(buf), record(r));
  auto& service = tock::timer_service::of(ctx);
  asio::post(strand, [&] {
    asio::post(strand, [&] { s.reset(); });  // queued before the expiry's cancellation
    const auto limit = steady_clock::now() + 5s;
    while (service.stats().fired == 0 && steady_clock::now() < limit) std::this_thread::sleep_for(1ms);
    fired = service.stats().fired > 0;
  });
  std::thread other([&] { ctx.run(); });
  ctx.run();
  other.join();
  BOOST_CHECK(fired);
  BOOST_CHECK(!s);
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_MESSAGE(r.ec == timeout || r.ec == aborted, r.ec.message());
  tock_test::check_idle(ctx);
}

BOOST_AUTO_TEST_CASE(the_stream_holds_no_heap_object) {
  // Two deadlines and the socket, in place (Beast: a shared_ptr to an impl with three Asio timers).
  BOOST_TEST_MESSAGE("sizeof(tock::beast::tcp_stream) = " << sizeof(tock::beast::tcp_stream));
  BOOST_CHECK_LE(sizeof(tock::beast::tcp_stream), sizeof(tcp::socket) + 2 * sizeof(tock::deadline) + 16);
}

BOOST_AUTO_TEST_SUITE_END()
