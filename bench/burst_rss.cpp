// bench/burst_rss.cpp: the memory a burst of connections leaves behind. A server accepts `--conns`
// connections; each holds state of its own (two buffers, as a socket's read and write sides) and, but for
// --mode=none, a timer with a pending wait (--mode=tock: tock::timer, --mode=asio: asio::steady_timer), the
// allocations interleaved as a server makes them. Then every connection closes (its wait aborted, its state
// freed), the context runs out of work, and malloc_trim(0) returns what malloc can. Prints the RSS that stays
// over the RSS before the burst; the difference between modes is what the timers' memory pins (a cache of
// freed operation blocks scattered among the pages the connections used).
//   burst_rss --mode=none|tock|asio [--conns=2000] [--rounds=3]
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

long rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

struct connection {
  std::unique_ptr<char[]> read_buffer;
  std::unique_ptr<tock::timer> tock_timer;
  std::unique_ptr<char[]> write_buffer;
  std::unique_ptr<asio::steady_timer> asio_timer;
};

// One burst: `n` connections open, each with a pending wait but for mode none, then all close.
void burst(asio::io_context& ctx, const std::string& mode, int n) {
  std::vector<connection> conns(static_cast<std::size_t>(n));
  for (auto& c : conns) {
    c.read_buffer.reset(new char[1024]);
    std::memset(c.read_buffer.get(), 1, 1024);
    if (mode == "tock") {
      c.tock_timer = std::make_unique<tock::timer>(ctx, std::chrono::hours(1));
      c.tock_timer->async_wait([](const tock::error_code&) {});
    } else if (mode == "asio") {
      c.asio_timer = std::make_unique<asio::steady_timer>(ctx, std::chrono::hours(1));
      c.asio_timer->async_wait([](const tock::error_code&) {});
    }
    c.write_buffer.reset(new char[512]);
    std::memset(c.write_buffer.get(), 2, 512);
  }
  for (auto& c : conns) {
    if (c.tock_timer) c.tock_timer->cancel();
    if (c.asio_timer) c.asio_timer->cancel();
  }
  ctx.restart();
  ctx.run();  // the aborted waits complete: their operations are freed
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "tock";
  int conns = 2000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0)
      mode = argv[i] + 7;
    else if (std::strncmp(argv[i], "--conns=", 8) == 0)
      conns = std::atoi(argv[i] + 8);
    else if (std::strncmp(argv[i], "--rounds=", 9) == 0)
      rounds = std::atoi(argv[i] + 9);
    else {
      std::fprintf(stderr, "usage: burst_rss --mode=none|tock|asio [--conns=N] [--rounds=N]\n");
      return 2;
    }
  }
  if (mode != "none" && mode != "tock" && mode != "asio") return 2;
  asio::io_context ctx;
  if (mode == "tock") tock::timer_service::of(ctx);  // the service exists before the first measurement
  {
    asio::steady_timer warm(ctx);  // Asio's timer queue too
  }
  malloc_trim(0);
  const long before = rss_bytes();
  for (int r = 0; r < rounds; ++r) burst(ctx, mode, conns);
  malloc_trim(0);
  const long after = rss_bytes();
  std::printf("mode=%s conns=%d rounds=%d rss_kib_before=%ld rss_kib_after=%ld kept_kib=%ld\n", mode.c_str(), conns,
              rounds, before / 1024, after / 1024, (after - before) / 1024);
}
