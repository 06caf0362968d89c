// Shared by the beast_stream_test files: the two streams as test-case types (Beast's, the control, and
// tock's), completion recorders, a connected stream, a bounded run of the context and a listener that never
// answers.
#ifndef TOCK_TEST_BEAST_STREAM_SUPPORT_HPP
#define TOCK_TEST_BEAST_STREAM_SUPPORT_HPP

#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <type_traits>

namespace beast_test {

using namespace std::chrono_literals;
using tock_test::error_code;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;
namespace beast = boost::beast;

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
inline auto record(result& r) {
  return [&r](const error_code& ec, std::size_t n) {
    ++r.calls;
    r.ec = ec;
    r.n = n;
    r.at = steady_clock::now();
  };
}
inline auto record0(result& r) {
  return [&r](const error_code& ec) {
    ++r.calls;
    r.ec = ec;
    r.at = steady_clock::now();
  };
}

inline tcp::endpoint loopback() { return tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0); }

// Connects `s` to a new plain socket `peer` on loopback (blocking: no context run needed).
template <typename Stream>
void connect_pair(asio::io_context& ctx, Stream& s, tcp::socket& peer) {
  tcp::acceptor acceptor(ctx, loopback());
  s.connect(acceptor.local_endpoint());
  acceptor.accept(peer);
}

// A stream connected to a plain socket `peer` on loopback, on a context of its own: most cases start with one
// (`connected_stream<...> c; auto& [ctx, s, peer] = c;`).
template <typename Stream>
struct connected_stream {
  asio::io_context ctx;
  Stream s{ctx};
  tcp::socket peer{ctx};
  connected_stream() { connect_pair(ctx, s, peer); }
};

// Runs `ctx` until it has no work, for at most `limit`; a case asserts on it rather than hang.
inline bool run(asio::io_context& ctx, steady_clock::duration limit = 5s) {
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

}  // namespace beast_test

#endif
