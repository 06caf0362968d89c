// tock::beast::basic_stream behaves as boost::beast::basic_stream does: every templated case runs against
// Beast's stream (the control) and tock's, on loopback sockets, and expects the same results. Timeouts are
// tens of milliseconds and the cases assert what happened (a timeout, or none) and in which order, with
// margins, never how long a machine took. Here: reading, writing, timeouts, cancel, close, destruction and
// connecting; in beast_stream_test.protocols.cpp, .websocket.cpp and .ssl.cpp: rate limits, HTTP, moves,
// where tock promises more, WebSocket and SSL.
#include "beast_stream_support.hpp"
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

using namespace beast_test;

BOOST_AUTO_TEST_SUITE(beast_stream_test)

// --- Reading and writing, with and without a timeout

BOOST_AUTO_TEST_CASE_TEMPLATE(reads_what_the_peer_sent_with_or_without_a_timeout, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result timed, untimed;
  asio::write(peer, asio::buffer("hello", 5));
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(timed));
  BOOST_REQUIRE(run(ctx));
  asio::write(peer, asio::buffer("abc", 3));
  s.expires_never();
  s.async_read_some(asio::buffer(buf), record(untimed));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(timed.calls, 1);
  BOOST_CHECK(!timed.ec);
  BOOST_CHECK_EQUAL(timed.n, 5u);
  BOOST_CHECK_EQUAL(untimed.calls, 1);
  BOOST_CHECK(!untimed.ec);
  BOOST_CHECK_EQUAL(untimed.n, 3u);
  BOOST_CHECK(s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(writes_to_the_peer, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  result w;
  s.expires_after(5s);
  s.async_write_some(asio::buffer("abc", 3), record(w));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(w.calls, 1);
  BOOST_CHECK(!w.ec);
  BOOST_CHECK_EQUAL(w.n, 3u);
  char buf[3];
  asio::read(peer, asio::buffer(buf));
  BOOST_CHECK_EQUAL(std::string(buf, 3), "abc");
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_or_write_of_no_bytes_completes_at_once, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  result r, w;
  s.expires_after(5s);
  s.async_read_some(asio::mutable_buffer(), record(r));
  s.async_write_some(asio::const_buffer(), record(w));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.n, 0u);
  BOOST_CHECK_EQUAL(w.calls, 1);
  BOOST_CHECK(!w.ec);
  BOOST_CHECK(s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

// Blocking calls (no timeout, as Beast): connect to a sequence of endpoints and over iterators, with a condition
// and with an error_code; read_some and write_some, throwing and with an error_code.
BOOST_AUTO_TEST_CASE_TEMPLATE(blocking_connect_forms_and_transfers, Kind, kinds) {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx, loopback());
  const std::vector<tcp::endpoint> eps{acceptor.local_endpoint()};
  const auto any = [](const error_code&, const tcp::endpoint&) { return true; };
  error_code ec;
  std::vector<tcp::socket> peers;
  for (int form = 0; form < 5; ++form) {
    tcp_stream_of<Kind> s(ctx);
    switch (form) {
      case 0: BOOST_CHECK(s.connect(eps) == eps[0]); break;
      case 1: BOOST_CHECK(s.connect(eps, ec) == eps[0] && !ec); break;
      case 2: BOOST_CHECK(s.connect(eps, any) == eps[0]); break;
      case 3: BOOST_CHECK(s.connect(eps.begin(), eps.end()) == eps.begin()); break;
      default: BOOST_CHECK(s.connect(eps.begin(), eps.end(), any, ec) == eps.begin() && !ec); break;
    }
    peers.push_back(acceptor.accept());
    BOOST_CHECK_EQUAL(s.write_some(asio::buffer("ab", 2)), 2u);
    char buf[2];
    BOOST_CHECK_EQUAL(asio::read(peers.back(), asio::buffer(buf)), 2u);
    asio::write(peers.back(), asio::buffer("cd", 2));
    BOOST_CHECK_EQUAL(s.read_some(asio::buffer(buf), ec), 2u);
    BOOST_CHECK(!ec);
    BOOST_CHECK_EQUAL(s.write_some(asio::buffer("e", 1), ec), 1u);
    BOOST_CHECK(!ec);
    asio::write(peers.back(), asio::buffer("f", 1));
    BOOST_CHECK_EQUAL(s.read_some(asio::buffer(buf, 1)), 1u);
  }
}

// --- Timeouts

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_times_out_and_closes_the_socket, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result r;
  const auto start = steady_clock::now();
  s.expires_after(20ms);
  s.async_read_some(asio::buffer(buf), record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timeout);
  BOOST_CHECK(r.at - start >= 20ms);
  BOOST_CHECK(!s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_write_times_out_when_the_peer_does_not_read, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  s.socket().set_option(asio::socket_base::send_buffer_size(4096));
  peer.set_option(asio::socket_base::receive_buffer_size(4096));
  std::vector<char> big(16 << 20);
  result w;
  s.expires_after(30ms);
  asio::async_write(s, asio::buffer(big), record(w));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(w.calls, 1);
  BOOST_CHECK_EQUAL(w.ec, timeout);
  BOOST_CHECK_LT(w.n, big.size());
  BOOST_CHECK(!s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

// The read's expiry passes: the socket is closed, so the write pending in the other direction (set when no
// expiry applied) completes with operation_aborted, not timeout.
BOOST_AUTO_TEST_CASE_TEMPLATE(each_direction_has_its_own_expiry, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  s.socket().set_option(asio::socket_base::send_buffer_size(4096));
  peer.set_option(asio::socket_base::receive_buffer_size(4096));
  std::vector<char> big(16 << 20);
  char buf[16];
  result w, r;
  s.expires_never();
  asio::async_write(s, asio::buffer(big), record(w));  // pending: expires_after below does not apply to it
  s.expires_after(20ms);
  s.async_read_some(asio::buffer(buf), record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timeout);
  BOOST_CHECK_EQUAL(w.calls, 1);
  BOOST_CHECK_EQUAL(w.ec, aborted);
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(expires_never_removes_the_timeout, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result r;
  s.expires_after(10ms);
  s.expires_never();
  s.async_read_some(asio::buffer(buf), record(r));
  asio::steady_timer later(ctx, 80ms);  // well past the 10 ms that no longer apply
  later.async_wait([&](const error_code&) { asio::write(peer, asio::buffer("x", 1)); });
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK(!r.ec);
  BOOST_CHECK_EQUAL(r.n, 1u);
  BOOST_CHECK(s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

// Beast: "if the timer expires while no operations are outstanding, and the expiration is not set again,
// the next operation will time out immediately" (a transfer of no bytes too).
BOOST_AUTO_TEST_CASE_TEMPLATE(an_operation_started_after_the_expiry_passed_times_out, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result r;
  s.expires_after(10ms);
  std::this_thread::sleep_for(30ms);
  s.async_read_some(asio::buffer(buf), record(r));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, timeout);
  BOOST_CHECK(!s.socket().is_open());

  tcp_stream_of<Kind> s2(ctx);
  tcp::socket peer2(ctx);
  connect_pair(ctx, s2, peer2);
  result empty;
  s2.expires_at(steady_clock::now());
  s2.async_read_some(asio::mutable_buffer(), record(empty));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(empty.calls, 1);
  BOOST_CHECK_EQUAL(empty.ec, timeout);
  BOOST_CHECK(!s2.socket().is_open());
  check_service_idle<Kind>(ctx);
}

// An operation that fails at once (no socket open) leaves nothing behind when its expiry passes later.
BOOST_AUTO_TEST_CASE_TEMPLATE(an_operation_that_failed_is_not_timed_out_later, Kind, kinds) {
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  char buf[16];
  result r;
  s.expires_after(20ms);
  s.async_read_some(asio::buffer(buf), record(r));
  std::this_thread::sleep_for(40ms);
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, error_code(asio::error::bad_descriptor));
  check_service_idle<Kind>(ctx);
}

// --- cancel, close, destruction, per-operation cancellation

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_aborts_the_pending_read_and_the_stream_reads_again, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result first, second;
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(first));
  asio::post(ctx, [&] { s.cancel(); });
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(first.calls, 1);
  BOOST_CHECK_EQUAL(first.ec, aborted);
  BOOST_CHECK(s.socket().is_open());
  asio::write(peer, asio::buffer("x", 1));
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(second));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(second.calls, 1);
  BOOST_CHECK(!second.ec);
  BOOST_CHECK_EQUAL(second.n, 1u);
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(close_aborts_the_pending_read, Kind, kinds) {
  connected_stream<tcp_stream_of<Kind>> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result r;
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(r));
  asio::post(ctx, [&] { s.close(); });
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK(!s.socket().is_open());
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_stream_destroyed_with_operations_pending_aborts_them_once, Kind, kinds) {
  asio::io_context ctx;
  tcp::socket peer_timed(ctx), peer_untimed(ctx);
  result timed, untimed, connecting;
  char buf[16];
  {
    tcp_stream_of<Kind> s_timed(ctx), s_untimed(ctx), s_connecting(ctx);
    unanswered_listener listener(ctx);
    connect_pair(ctx, s_timed, peer_timed);
    connect_pair(ctx, s_untimed, peer_untimed);
    s_timed.expires_after(5s);
    s_timed.async_read_some(asio::buffer(buf), record(timed));
    s_untimed.async_read_some(asio::buffer(buf), record(untimed));
    s_connecting.expires_after(5s);
    s_connecting.async_connect(listener.endpoint(), record0(connecting));
    BOOST_REQUIRE(run(ctx, 20ms) == false);  // all pending
  }
  BOOST_REQUIRE(run(ctx));
  for (const result* r : {&timed, &untimed, &connecting}) {
    BOOST_CHECK_EQUAL(r->calls, 1);
    BOOST_CHECK_EQUAL(r->ec, aborted);
  }
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_read_is_cancelled_through_its_slot_whatever_the_type, Kind, kinds) {
  for (auto type :
       {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
    connected_stream<tcp_stream_of<Kind>> c;
    auto& [ctx, s, peer] = c;
    char buf[16];
    result r;
    asio::cancellation_signal signal;
    s.expires_after(5s);
    s.async_read_some(asio::buffer(buf), asio::bind_cancellation_slot(signal.slot(), record(r)));
    asio::post(ctx, [&] { signal.emit(type); });
    BOOST_REQUIRE(run(ctx));
    BOOST_CHECK_EQUAL(r.calls, 1);
    BOOST_CHECK_EQUAL(r.ec, aborted);
    BOOST_CHECK(s.socket().is_open());
    check_service_idle<Kind>(ctx);
  }
}

// --- Connecting

BOOST_AUTO_TEST_CASE_TEMPLATE(async_connect_connects_to_an_endpoint_a_sequence_or_iterators, Kind, kinds) {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx, loopback());
  tcp::acceptor closed(ctx, loopback());
  const tcp::endpoint good = acceptor.local_endpoint();
  const std::vector<tcp::endpoint> endpoints{closed.local_endpoint(), good};
  closed.close();  // its port now refuses
  tcp_stream_of<Kind> a(ctx), b(ctx), c(ctx), d(ctx);
  result ra, rb, rc, rd;
  tcp::endpoint got_b, got_c;
  auto got_d = endpoints.end();
  a.expires_after(5s);
  a.async_connect(good, record0(ra));
  b.expires_after(5s);
  b.async_connect(endpoints, [&](const error_code& ec, const tcp::endpoint& ep) {
    record0(rb)(ec);
    got_b = ep;
  });
  c.async_connect(
      endpoints, [&](const error_code&, const tcp::endpoint& ep) { return ep == good; },
      [&](const error_code& ec, const tcp::endpoint& ep) {
        record0(rc)(ec);
        got_c = ep;
      });
  d.expires_after(5s);
  d.async_connect(endpoints.begin(), endpoints.end(), [&](const error_code& ec, auto it) {
    record0(rd)(ec);
    got_d = it;
  });
  BOOST_REQUIRE(run(ctx));
  for (const result* r : {&ra, &rb, &rc, &rd}) {
    BOOST_CHECK_EQUAL(r->calls, 1);
    BOOST_CHECK(!r->ec);
  }
  BOOST_CHECK(got_b == good);
  BOOST_CHECK(got_c == good);
  BOOST_CHECK(got_d == endpoints.begin() + 1);
  BOOST_CHECK(a.socket().is_open() && b.socket().is_open() && c.socket().is_open() && d.socket().is_open());
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(async_connect_times_out_when_nobody_answers, Kind, kinds) {
  asio::io_context ctx;
  unanswered_listener listener(ctx);
  tcp_stream_of<Kind> a(ctx), b(ctx);
  result ra, rb;
  const auto start = steady_clock::now();
  a.expires_after(30ms);
  a.async_connect(listener.endpoint(), record0(ra));
  b.expires_after(30ms);
  b.async_connect(std::vector<tcp::endpoint>{listener.endpoint()},
                  [&](const error_code& ec, const tcp::endpoint&) { record0(rb)(ec); });
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(ra.calls, 1);
  BOOST_CHECK_EQUAL(ra.ec, timeout);
  BOOST_CHECK(ra.at - start >= 30ms);
  BOOST_CHECK_EQUAL(rb.calls, 1);
  BOOST_CHECK_EQUAL(rb.ec, timeout);
  BOOST_CHECK(!a.socket().is_open());
  BOOST_CHECK(!b.socket().is_open());
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_SUITE_END()
