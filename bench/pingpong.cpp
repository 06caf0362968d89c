// Ping-pong over a socket pair: what a deadline per read costs relative to the raw read.
//
//   build/release/bench/pingpong [round_trips]
//
// One thread, one io_context. A 1-byte message goes back and forth between the two ends of a
// local::stream_protocol socket pair; each side reads with async_read_some and answers with async_write.
// Every read is timed in the way each variant would time it in a server, with a 30 s limit that never
// fires. CPU ns per round trip (two reads, two writes) from CLOCK_PROCESS_CPUTIME_ID, median of 5 runs.
// On Asio >= 1.31 (e.g. the standalone build, TOCK_ASIO=standalone) also asio::cancel_after per read.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

using socket_type = asio::local::stream_protocol::socket;
using namespace std::chrono_literals;

namespace {

constexpr auto limit = 30s;

double cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum class variant { raw, deadline_bind, timeout, asio_timer, cancel_after };

// One end of the pair: reads one byte, writes it back, until `remaining` reaches zero.
struct end_point {
  socket_type sock;
  variant how;
  long* remaining;
  std::array<char, 1> buf{};
  tock::deadline deadline;
  asio::steady_timer timer;

  asio::io_context* ctx;

  end_point(asio::io_context& c, socket_type s, variant v, long* r)
      : sock(std::move(s)), how(v), remaining(r), deadline(sock.get_executor()), timer(sock.get_executor()), ctx(&c) {}

  void read() {
    auto on_read = [this](sys::error_code ec, std::size_t) {
      if (how == variant::asio_timer) timer.cancel();
      if (*remaining <= 0) return;  // the run is over: the last pending read is being cancelled
      if (ec) {
        std::fprintf(stderr, "read failed: %s\n", ec.message().c_str());
        std::exit(1);
      }
      if (--*remaining <= 0) {
        ctx->stop();  // the other end still has a read pending
        return;
      }
      asio::async_write(sock, asio::buffer(buf), [](sys::error_code ec, std::size_t) {
        if (ec) std::exit(1);
      });
      read();
    };
    switch (how) {
      case variant::raw: sock.async_read_some(asio::buffer(buf), on_read); break;
      case variant::deadline_bind:
        deadline.expires_after(limit);  // the idle-timeout push: lock-free when later
        sock.async_read_some(asio::buffer(buf), deadline.bind(on_read));
        break;
      case variant::timeout: sock.async_read_some(asio::buffer(buf), tock::timeout(limit, on_read)); break;
      case variant::asio_timer:  // what Beast's tcp_stream::expires_after amounts to: a timer per read
        timer.expires_after(limit);
        timer.async_wait([this](sys::error_code ec) {
          if (!ec) sock.cancel();
        });
        sock.async_read_some(asio::buffer(buf), on_read);
        break;
      case variant::cancel_after:
#if TOCK_ASIO_VERSION >= 103100
        sock.async_read_some(asio::buffer(buf), asio::cancel_after(limit, on_read));
#endif
        break;
    }
  }
};

double run_once(variant how, long round_trips) {
  asio::io_context ctx(1);
  socket_type a(ctx), b(ctx);
  asio::local::connect_pair(a, b);
  long remaining = 2 * round_trips;  // reads on both ends
  end_point left(ctx, std::move(a), how, &remaining), right(ctx, std::move(b), how, &remaining);
  left.read();
  right.read();
  const double t0 = cpu_ns();
  asio::async_write(left.sock, asio::buffer("x", 1), [](sys::error_code, std::size_t) {});
  ctx.run();
  const double t1 = cpu_ns();
  left.deadline.cancel();
  right.deadline.cancel();
  left.sock.cancel();
  right.sock.cancel();
  ctx.restart();
  ctx.poll();  // the aborted waits and bound reads of the last round
  if (remaining > 0) {
    std::fprintf(stderr, "stopped with %ld reads left\n", remaining);
    std::exit(1);
  }
  return (t1 - t0) / static_cast<double>(round_trips);
}

}  // namespace

int main(int argc, char** argv) {
  const long round_trips = argc > 1 ? std::atol(argv[1]) : 200'000;
  const std::pair<variant, const char*> variants[] = {
    {variant::raw, "raw read"},
    {variant::deadline_bind, "tock::deadline push + bind"},
    {variant::timeout, "tock::timeout per read"},
    {variant::asio_timer, "asio::steady_timer per read"},
#if TOCK_ASIO_VERSION >= 103100
    {variant::cancel_after, "asio::cancel_after per read"},
#endif
  };
  double raw = 0;
  std::printf("Asio %d.%d.%d\n", TOCK_ASIO_VERSION / 100000, TOCK_ASIO_VERSION / 100 % 1000, TOCK_ASIO_VERSION % 100);
  std::printf("%-28s %14s %10s\n", "variant", "ns/round trip", "vs raw");
  for (const auto& [how, name] : variants) {
    std::vector<double> runs;
    for (int i = 0; i < 5; ++i) runs.push_back(run_once(how, round_trips));
    std::sort(runs.begin(), runs.end());
    const double median = runs[2];
    if (how == variant::raw) raw = median;
    std::printf("%-28s %14.0f %9.2fx\n", name, median, median / raw);
  }
}
