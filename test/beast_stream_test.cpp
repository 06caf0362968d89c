// tock::beast::basic_stream behaves as boost::beast::basic_stream does: every templated case runs against
// Beast's stream (the control) and tock's, on loopback sockets, and expects the same results. Timeouts are
// tens of milliseconds and the cases assert what happened (a timeout, or none) and in which order, with
// margins, never how long a machine took. The tock-only cases at the end cover where tock promises more.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/mpl/list.hpp>
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
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tock_test::error_code;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;

// The two implementations, as templates over the rate policy.
struct beast_kind {
  template <typename RatePolicy>
  using stream = beast::basic_stream<tcp, asio::any_io_executor, RatePolicy>;
  static constexpr bool is_tock = false;
};
struct tock_kind {
  template <typename RatePolicy>
  using stream = tock::beast::basic_stream<tcp, asio::any_io_executor, RatePolicy>;
  static constexpr bool is_tock = true;
};
using kinds = boost::mpl::list<beast_kind, tock_kind>;

template <typename Kind>
using tcp_stream_of = typename Kind::template stream<beast::unlimited_rate_policy>;

static_assert(std::is_same_v<tcp_stream_of<beast_kind>, beast::tcp_stream>);
static_assert(std::is_same_v<tcp_stream_of<tock_kind>, tock::beast::tcp_stream>);

const error_code aborted = asio::error::operation_aborted;
const error_code timeout = beast::error::timeout;

// What a completion handler saw, and when.
struct result {
  int calls = 0;
  error_code ec;
  std::size_t n = 0;
  steady_clock::time_point at{};
};

// A void(error_code, std::size_t) handler writing into `r`; record0 for void(error_code).
auto record(result& r) {
  return [&r](const error_code& ec, std::size_t n) {
    ++r.calls;
    r.ec = ec;
    r.n = n;
    r.at = steady_clock::now();
  };
}
auto record0(result& r) {
  return [&r](const error_code& ec) {
    ++r.calls;
    r.ec = ec;
    r.at = steady_clock::now();
  };
}

tcp::endpoint loopback() { return tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0); }

// Connects `s` to a new plain socket `peer` on loopback (blocking: no context run needed).
template <typename Stream>
void connect_pair(asio::io_context& ctx, Stream& s, tcp::socket& peer) {
  tcp::acceptor acceptor(ctx, loopback());
  s.connect(acceptor.local_endpoint());
  acceptor.accept(peer);
}

// Runs `ctx` until it has no work, for at most `limit`; a case asserts on it rather than hang.
bool run(asio::io_context& ctx, steady_clock::duration limit = 5s) {
  ctx.restart();
  return run_until_idle(ctx, limit);
}

// For tock's stream: its context's timer service has nothing left. Nothing for Beast's.
template <typename Kind>
void check_service_idle(asio::io_context& ctx) {
  if constexpr (Kind::is_tock) tock_test::check_idle(ctx);
}

// A listener whose accept queue is full: a connect to it gets no answer (Linux drops the SYN), so it stays
// pending until something ends it. listen(0) queues one connection; `filler` takes that place.
struct unanswered_listener {
  explicit unanswered_listener(asio::io_context& ctx) : acceptor(ctx), filler(ctx) {
    acceptor.open(tcp::v4());
    acceptor.bind(loopback());
    acceptor.listen(0);
    filler.connect(acceptor.local_endpoint());
  }
  tcp::endpoint endpoint() const { return acceptor.local_endpoint(); }
  tcp::acceptor acceptor;
  tcp::socket filler;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(beast_stream_test)

// --- Reading and writing, with and without a timeout

BOOST_AUTO_TEST_CASE_TEMPLATE(reads_what_the_peer_sent_with_or_without_a_timeout, Kind, kinds) {
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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
    asio::io_context ctx;
    tcp_stream_of<Kind> s(ctx);
    tcp::socket peer(ctx);
    connect_pair(ctx, s, peer);
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
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  tcp::socket peer(ctx);
  connect_pair(ctx, s, peer);
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

// --- tock only

BOOST_AUTO_TEST_CASE(the_stream_holds_no_heap_object) {
  // Two deadlines and the socket, in place (Beast: a shared_ptr to an impl with three Asio timers).
  BOOST_TEST_MESSAGE("sizeof(tock::beast::tcp_stream) = " << sizeof(tock::beast::tcp_stream));
  BOOST_CHECK_LE(sizeof(tock::beast::tcp_stream), sizeof(tcp::socket) + 2 * sizeof(tock::deadline) + 16);
}

BOOST_AUTO_TEST_SUITE_END()
