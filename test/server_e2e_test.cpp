// End-to-end tests of the line-echo server of examples/server_core.hpp over real sockets on 127.0.0.1:
// the server runs on its own thread with its own io_context, the clients on the test thread with another.
// Every case is bounded: the clients run with io_context::run_for, the server's drain has a time limit.
// "Not before the limit" is measured from when the client starts connecting (or sends its first byte): the
// server cannot have started its clock earlier.
#include "../examples/server_core.hpp"
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using asio::ip::tcp;
using sys::error_code;
using clock_type = std::chrono::steady_clock;
using tock_examples::line_server;
using tock_examples::server_config;
using tock_examples::server_counters;
using namespace std::chrono_literals;

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// Limits for the one-client cases. The request limit is below the idle one, so that a slowloris client is
// always stopped by the request limit however late its bytes are scheduled.
server_config short_limits() {
  server_config config;
  config.idle = 150ms;
  config.request = 100ms;
  config.write = 100ms;
  return config;
}

// The server on its own thread: run_until_stopped() from construction until stop().
class running_server {
 public:
  explicit running_server(server_config config)
      : server_(ctx_, std::move(config)), thread_([this] {
          try {
            final_ = server_.run_until_stopped();
          } catch (...) {
            failure_ = std::current_exception();
          }
          done_.store(true, std::memory_order_release);
        }) {}

  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;

  ~running_server() {
    if (thread_.joinable()) stop();
  }

  tcp::endpoint endpoint() const { return server_.local_endpoint(); }

  // Thread-safe: asks the server to shut down gracefully.
  void request_stop() { server_.stop(); }

  // The counters now (each read atomically).
  server_counters live() const { return server_.counters(); }

  // Polls the live counters until `pred` holds or `limit` passes; returns whether it held.
  bool wait_for(const std::function<bool(const server_counters&)>& pred, clock_type::duration limit) const {
    const auto end = clock_type::now() + limit;
    while (!pred(live())) {
      if (clock_type::now() > end) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }

  // Waits (bounded) for every connection to be closed, then stops the server and returns its final counters.
  server_counters drain_and_stop() {
    BOOST_TEST(wait_for([](const server_counters& c) { return c.open_connections == 0; }, 10s),
               "connections still open on the server: " << live().open_connections);
    return stop();
  }

  // Stops the server and joins its thread, with a bound: a drain that hangs fails the case instead.
  server_counters stop() {
    server_.stop();
    const auto end = clock_type::now() + 20s;
    while (!done_.load(std::memory_order_acquire) && clock_type::now() < end) std::this_thread::sleep_for(2ms);
    if (!done_.load(std::memory_order_acquire)) {
      BOOST_ERROR("the server did not drain within 20 s after stop()");
      ctx_.stop();
    }
    thread_.join();
    if (failure_) {
      try {
        std::rethrow_exception(failure_);
      } catch (const std::exception& e) {
        BOOST_ERROR("the server thread threw: " << e.what());
      }
    }
    return final_;
  }

 private:
  asio::io_context ctx_;
  line_server server_;
  server_counters final_;
  std::exception_ptr failure_;
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: starts once everything above exists
};

// Runs client coroutines on the test thread with a time limit.
class clients {
 public:
  void spawn(asio::awaitable<void> a) {
    asio::co_spawn(ctx_, std::move(a), [this](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        errors_.push_back(ex.what());
      }
    });
  }

  // Runs them until they have all finished (true) or `limit` has passed (false).
  bool run(clock_type::duration limit) {
    ctx_.run_for(limit);
    return ctx_.stopped();
  }

  const std::vector<std::string>& errors() const { return errors_; }
  asio::io_context& context() { return ctx_; }
  std::size_t pending_timers() { return tock::timer_service::of(ctx_.get_executor()).pending(); }

 private:
  asio::io_context ctx_;
  std::vector<std::string> errors_;
};

void check_client_run(clients& c, clock_type::duration limit) {
  const auto start = clock_type::now();
  BOOST_TEST_REQUIRE(c.run(limit), "the clients did not finish within "
                                       << std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()
                                       << " ms");
  BOOST_TEST_MESSAGE(
      "clients ran for " << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start).count()
                         << " ms");
  for (const auto& e : c.errors()) BOOST_ERROR("client: " << e);
  BOOST_TEST(c.pending_timers() == 0u);
}

long long ms(clock_type::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

bool closed_by_server(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

// Every counter but those named in `expected` must be 0; `expected` gives the others.
void check_counters(const server_counters& actual, const server_counters& expected) {
  BOOST_TEST_MESSAGE("server counters:\n" << actual);
  BOOST_TEST(actual.accepted == expected.accepted);
  BOOST_TEST(actual.closed_idle == expected.closed_idle);
  BOOST_TEST(actual.closed_request_timeout == expected.closed_request_timeout);
  BOOST_TEST(actual.closed_write_timeout == expected.closed_write_timeout);
  BOOST_TEST(actual.closed_by_peer == expected.closed_by_peer);
  BOOST_TEST(actual.rejected_over_limit == expected.rejected_over_limit);
  BOOST_TEST(actual.closed_by_shutdown == expected.closed_by_shutdown);
  BOOST_TEST(actual.closed_other == 0u);
  BOOST_TEST(actual.open_connections == 0u);
  BOOST_TEST(actual.pending_timers == 0u);
}

// --- Client behaviours. Each records what it saw; the test case checks it after the run.

// When a client's connection was open, as the client saw it (for the peak number of connections).
struct open_interval {
  clock_type::time_point connected_at{};  // stays at the epoch if it never connected
  clock_type::time_point ended_at{};
};

// Marks a connection open from its construction to its destruction (whichever way the client ends).
class open_marker {
 public:
  explicit open_marker(open_interval& r) : r_(r) { r_.connected_at = clock_type::now(); }
  open_marker(const open_marker&) = delete;
  open_marker& operator=(const open_marker&) = delete;
  ~open_marker() { r_.ended_at = clock_type::now(); }

 private:
  open_interval& r_;
};

struct active_result : open_interval {
  int echoed = 0;
  bool wrong_echo = false;
  error_code ec;  // set if the connection failed before the client closed it
  clock_type::duration ran{};
};

// Connects, then a line every `interval` for `run_for`, each echo checked; then closes.
asio::awaitable<void> active_client(tcp::endpoint server, clock_type::duration interval, clock_type::duration run_for,
                                    active_result& r) {
  tcp::socket socket(co_await asio::this_coro::executor);
  auto [cec] = co_await socket.async_connect(server, tock::timeout(5s, tuple_awaitable));
  if (cec) {
    r.ec = cec;
    co_return;
  }
  const open_marker open(r);
  const auto start = clock_type::now();
  std::string received;
  for (int i = 0; clock_type::now() - start < run_for; ++i) {
    const std::string line = "line " + std::to_string(i) + " from an active client\n";
    auto [wec, written] = co_await asio::async_write(socket, asio::buffer(line), tock::timeout(5s, tuple_awaitable));
    if (wec) {
      r.ec = wec;
      co_return;
    }
    auto [rec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(received), '\n',
                                                    tock::timeout(5s, tuple_awaitable));
    if (rec) {
      r.ec = rec;
      co_return;
    }
    if (received.compare(0, n, line) != 0) r.wrong_echo = true;
    received.erase(0, n);
    ++r.echoed;
    co_await tock::sleep_until(start + interval * (i + 1));
  }
  r.ran = clock_type::now() - start;
}

struct close_result : open_interval {
  error_code ec;                 // how the connection ended
  clock_type::duration after{};  // when, after the client started connecting (or after its first byte)
  std::size_t bytes_sent = 0;
};

// Connects and sends nothing: waits (at most `limit`) for the server to close the connection.
asio::awaitable<void> idle_client(tcp::endpoint server, clock_type::duration limit, close_result& r) {
  tcp::socket socket(co_await asio::this_coro::executor);
  const auto start = clock_type::now();  // the server cannot have accepted it earlier
  auto [cec] = co_await socket.async_connect(server, tock::timeout(5s, tuple_awaitable));
  if (cec) {
    r.ec = cec;
    co_return;
  }
  const open_marker open(r);
  char byte;
  auto [ec, n] = co_await socket.async_read_some(asio::buffer(&byte, 1), tock::timeout(limit, tuple_awaitable));
  r.ec = n > 0 ? make_error_code(sys::errc::protocol_error) : ec;
  r.after = clock_type::now() - start;
}

// Connects and sends a byte every `interval`, never a newline, until the server closes it (at most `limit`).
// `after` counts from the first byte.
asio::awaitable<void> slowloris_client(tcp::endpoint server, clock_type::duration interval, clock_type::duration limit,
                                       close_result& r) {
  tcp::socket socket(co_await asio::this_coro::executor);
  auto [cec] = co_await socket.async_connect(server, tock::timeout(5s, tuple_awaitable));
  if (cec) {
    r.ec = cec;
    co_return;
  }
  const open_marker open(r);
  const auto start = clock_type::now();
  for (int i = 0;; ++i) {
    if (clock_type::now() - start > limit) {
      r.ec = make_error_code(tock::error::timed_out);
      break;
    }
    const char byte = 'x';
    auto [wec, written] =
        co_await asio::async_write(socket, asio::buffer(&byte, 1), tock::timeout(5s, tuple_awaitable));
    if (wec) {
      r.ec = wec;
      break;
    }
    r.bytes_sent += written;
    // Until the next byte is due, watch for the server closing the connection.
    char reply;
    auto [rec, n] = co_await socket.async_read_some(asio::buffer(&reply, 1),
                                                    tock::timeout_at(start + interval * (i + 1), tuple_awaitable));
    if (rec == tock::error::timed_out) continue;
    r.ec = n > 0 ? make_error_code(sys::errc::protocol_error) : rec;
    break;
  }
  r.after = clock_type::now() - start;
}

// Connects with small socket buffers and sends lines as fast as it can, never reading, until the server
// resets the connection (at most `limit`).
asio::awaitable<void> nonreading_client(tcp::endpoint server, clock_type::duration limit, close_result& r) {
  tcp::socket socket(co_await asio::this_coro::executor);
  const auto start = clock_type::now();
  socket.open(tcp::v4());
  socket.set_option(asio::socket_base::receive_buffer_size(4096));
  socket.set_option(asio::socket_base::send_buffer_size(4096));
  auto [cec] = co_await socket.async_connect(server, tock::timeout(5s, tuple_awaitable));
  if (cec) {
    r.ec = cec;
    co_return;
  }
  const open_marker open(r);
  std::string block;
  while (block.size() < 16 * 1024) block += "a line that its sender will never read back\n";
  const auto end = start + limit;
  for (;;) {
    auto [ec, n] = co_await asio::async_write(socket, asio::buffer(block), tock::timeout_at(end, tuple_awaitable));
    r.bytes_sent += n;
    if (ec) {
      r.ec = ec;
      break;
    }
  }
  r.after = clock_type::now() - start;
}

// The most connections open at once, from the clients' records.
template <typename... Results>
std::size_t peak_open(const Results&... results) {
  std::vector<std::pair<clock_type::time_point, int>> events;  // at equal times, closes (-1) sort first
  auto add = [&events](const auto& rs) {
    for (const open_interval& r : rs) {
      if (r.connected_at == clock_type::time_point{}) continue;
      events.emplace_back(r.connected_at, 1);
      events.emplace_back(r.ended_at, -1);
    }
  };
  (add(results), ...);
  std::sort(events.begin(), events.end());
  if (!events.empty()) {
    clock_type::time_point first = clock_type::time_point::max(), last{};
    for (const auto& e : events) {
      if (e.second < 0) continue;
      first = std::min(first, e.first);
      last = std::max(last, e.first);
    }
    BOOST_TEST_MESSAGE("the clients connected within " << ms(last - first) << " ms");
  }
  long open = 0, peak = 0;
  for (const auto& e : events) {
    open += e.second;
    peak = std::max(peak, open);
  }
  return static_cast<std::size_t>(peak);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(server_e2e_test)

BOOST_AUTO_TEST_CASE(active_client_outlives_the_idle_limit) {
  const server_config config = short_limits();
  running_server server(config);
  clients c;
  active_result r;
  c.spawn(active_client(server.endpoint(), 25ms, 4 * config.idle, r));
  check_client_run(c, 20s);

  BOOST_TEST(!r.ec, "the connection failed: " << r.ec.message());
  BOOST_TEST(!r.wrong_echo);
  BOOST_TEST(r.ran >= 4 * config.idle);
  BOOST_TEST(r.echoed >= 10);

  const server_counters counters = server.drain_and_stop();
  server_counters expected;
  expected.accepted = 1;
  expected.closed_by_peer = 1;
  check_counters(counters, expected);
  BOOST_TEST(counters.served_lines == static_cast<std::uint64_t>(r.echoed));
}

BOOST_AUTO_TEST_CASE(idle_client_is_closed_at_the_idle_limit) {
  const server_config config = short_limits();
  running_server server(config);
  clients c;
  close_result r;
  c.spawn(idle_client(server.endpoint(), config.idle + 5s, r));
  check_client_run(c, 20s);

  BOOST_TEST(closed_by_server(r.ec), "not closed by the server: " << r.ec.message());
  BOOST_TEST_MESSAGE("idle client closed " << ms(r.after) << " ms after connecting");
  BOOST_TEST(r.after >= config.idle, "closed too early: after " << ms(r.after) << " ms");
  BOOST_TEST(r.after < config.idle + 2s, "closed too late: after " << ms(r.after) << " ms");

  server_counters expected;
  expected.accepted = 1;
  expected.closed_idle = 1;
  check_counters(server.drain_and_stop(), expected);
}

BOOST_AUTO_TEST_CASE(slowloris_client_is_closed_at_the_request_limit) {
  const server_config config = short_limits();
  running_server server(config);
  clients c;
  close_result r;
  c.spawn(slowloris_client(server.endpoint(), 20ms, config.request + 5s, r));
  check_client_run(c, 20s);

  BOOST_TEST(closed_by_server(r.ec), "not closed by the server: " << r.ec.message());
  BOOST_TEST_MESSAGE("slowloris client closed " << ms(r.after) << " ms after its first byte, " << r.bytes_sent
                                                << " bytes sent");
  BOOST_TEST(r.after >= config.request, "closed too early: after " << ms(r.after) << " ms");
  BOOST_TEST(r.after < config.request + 2s, "closed too late: after " << ms(r.after) << " ms");
  BOOST_TEST(r.bytes_sent >= 2u);

  server_counters expected;
  expected.accepted = 1;
  expected.closed_request_timeout = 1;
  check_counters(server.drain_and_stop(), expected);
}

BOOST_AUTO_TEST_CASE(nonreading_client_is_closed_at_the_write_limit) {
  const server_config config = short_limits();
  running_server server(config);
  clients c;
  close_result r;
  c.spawn(nonreading_client(server.endpoint(), 10s, r));
  check_client_run(c, 20s);

  BOOST_TEST(closed_by_server(r.ec), "not closed by the server: " << r.ec.message());
  BOOST_TEST_MESSAGE("non-reading client closed " << ms(r.after) << " ms after connecting, " << r.bytes_sent
                                                  << " bytes sent");
  BOOST_TEST(r.after >= config.write);
  BOOST_TEST(r.after < config.write + 3s, "closed too late: after " << ms(r.after) << " ms");

  server_counters expected;
  expected.accepted = 1;
  expected.closed_write_timeout = 1;
  const server_counters counters = server.drain_and_stop();
  check_counters(counters, expected);
  BOOST_TEST(counters.served_lines > 0u);  // it was echoing until the client's buffers were full
}

BOOST_AUTO_TEST_CASE(connections_past_the_limit_are_turned_away) {
  server_config config = short_limits();
  config.idle = 10s;
  config.max_connections = 2;
  running_server server(config);
  clients c;
  error_code third_ec;
  clock_type::duration third_after{};
  // A named lambda: the coroutine refers to its captures, so the closure must outlive it.
  auto connect_three = [&]() -> asio::awaitable<void> {
    const auto ex = co_await asio::this_coro::executor;
    tcp::socket a(ex), b(ex), extra(ex);
    co_await a.async_connect(server.endpoint(), tock::timeout(5s, asio::use_awaitable));
    co_await b.async_connect(server.endpoint(), tock::timeout(5s, asio::use_awaitable));
    for (int i = 0; server.live().accepted < 2 && i < 5000; ++i) co_await tock::sleep_for(1ms);
    const auto start = clock_type::now();
    co_await extra.async_connect(server.endpoint(), tock::timeout(5s, asio::use_awaitable));
    char byte;
    auto [ec, n] = co_await extra.async_read_some(asio::buffer(&byte, 1), tock::timeout(5s, tuple_awaitable));
    third_ec = ec;
    third_after = clock_type::now() - start;
  };
  c.spawn(connect_three());
  check_client_run(c, 20s);

  BOOST_TEST(closed_by_server(third_ec), "the third connection was not closed: " << third_ec.message());
  BOOST_TEST(third_after < 2s);

  server_counters expected;
  expected.accepted = 2;
  expected.rejected_over_limit = 1;
  expected.closed_by_peer = 2;  // the first two, closed by the client when its coroutine ended
  check_counters(server.drain_and_stop(), expected);
}

BOOST_AUTO_TEST_CASE(stop_closes_every_connection_and_drains) {
  server_config config = short_limits();
  config.idle = 10s;
  running_server server(config);
  clients c;
  constexpr int count = 5;
  std::vector<close_result> results(count);
  for (auto& r : results) c.spawn(idle_client(server.endpoint(), 5s, r));
  auto stop_once_connected = [&]() -> asio::awaitable<void> {  // named: it must outlive its coroutine
    for (int i = 0; server.live().accepted < count && i < 5000; ++i) co_await tock::sleep_for(1ms);
    server.request_stop();
  };
  c.spawn(stop_once_connected());
  check_client_run(c, 20s);
  for (const auto& r : results) {
    BOOST_TEST(closed_by_server(r.ec), "not closed by the server: " << r.ec.message());
    BOOST_TEST(r.after < 3s);
  }

  server_counters expected;
  expected.accepted = count;
  expected.closed_by_shutdown = count;
  check_counters(server.stop(), expected);
}

// 2,000 connections at once, of every kind. Longer limits than above, with wide margins: under TSan both
// sides are busy, and a client whose coroutine runs late would really be idle, or really slow.
BOOST_AUTO_TEST_CASE(two_thousand_mixed_connections) {
  constexpr std::size_t n_active = 800, n_idle = 600, n_slowloris = 400, n_nonreading = 200;
  constexpr std::size_t total = n_active + n_idle + n_slowloris + n_nonreading;
  const auto files = tock_examples::raise_open_file_limit();
  BOOST_TEST_REQUIRE(files >= 2 * total + 100, "open file limit " << files << " is too low for this case");

  server_config config;
  config.idle = 2000ms;
  config.request = 2500ms;  // above the idle limit: a byte every 250 ms keeps a slowloris client from idling out
  config.write = 1500ms;    // every limit is well past the time it takes to open all the connections
  const auto active_interval = 250ms, active_run = 2500ms, slowloris_interval = 250ms;
  running_server server(config);
  const tcp::endpoint endpoint = server.endpoint();

  std::vector<active_result> active(n_active);
  std::vector<close_result> idle(n_idle), slowloris(n_slowloris), nonreading(n_nonreading);
  enum kind { k_active, k_idle, k_slowloris, k_nonreading };
  std::vector<std::pair<kind, std::size_t>> plan;  // interleaved, so every kind connects early and late
  for (std::size_t i = 0; i < total; ++i) {
    if (i < n_active) plan.emplace_back(k_active, i);
    if (i < n_idle) plan.emplace_back(k_idle, i);
    if (i < n_slowloris) plan.emplace_back(k_slowloris, i);
    if (i < n_nonreading) plan.emplace_back(k_nonreading, i);
  }

  clients c;  // every connection at once: the listen backlog (SOMAXCONN) holds them
  for (const auto& [k, i] : plan) {
    switch (k) {
      case k_active: c.spawn(active_client(endpoint, active_interval, active_run, active[i])); break;
      case k_idle: c.spawn(idle_client(endpoint, 10s, idle[i])); break;
      case k_slowloris: c.spawn(slowloris_client(endpoint, slowloris_interval, 10s, slowloris[i])); break;
      case k_nonreading: c.spawn(nonreading_client(endpoint, 10s, nonreading[i])); break;
    }
  }
  check_client_run(c, 60s);

  const std::size_t peak = peak_open(active, idle, slowloris, nonreading);
  BOOST_TEST_MESSAGE("at most " << peak << " connections were open at once");
  BOOST_TEST(peak == total);

  std::size_t active_ok = 0, echoed = 0;
  for (const auto& r : active) {
    active_ok += !r.ec && !r.wrong_echo && r.ran >= active_run;
    echoed += static_cast<std::size_t>(r.echoed);
  }
  BOOST_TEST(active_ok == n_active);
  auto check_closed = [](const char* what, const std::vector<close_result>& results, clock_type::duration at_least) {
    std::size_t closed = 0, too_early = 0;
    clock_type::duration latest{};
    for (const auto& r : results) {
      closed += closed_by_server(r.ec);
      too_early += r.after < at_least;
      latest = std::max(latest, r.after);
    }
    BOOST_TEST_MESSAGE(what << ": " << closed << " of " << results.size() << " closed by the server, the last after "
                            << ms(latest) << " ms");
    BOOST_TEST(closed == results.size(), what << ": " << closed << " of " << results.size() << " closed by the server");
    BOOST_TEST(too_early == 0u, what << ": " << too_early << " closed too early");
  };
  check_closed("idle", idle, config.idle);
  check_closed("slowloris", slowloris, config.request);
  check_closed("nonreading", nonreading, config.write);

  const server_counters counters = server.drain_and_stop();
  server_counters expected;
  expected.accepted = total;
  expected.closed_by_peer = n_active;
  expected.closed_idle = n_idle;
  expected.closed_request_timeout = n_slowloris;
  expected.closed_write_timeout = n_nonreading;
  check_counters(counters, expected);
  BOOST_TEST(counters.served_lines >= echoed);
}

BOOST_AUTO_TEST_SUITE_END()
