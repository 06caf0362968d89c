// Server bench: what a 30 s idle timeout per read costs a TCP server with many idle-ish connections.
//
//   build/release/bench/server_bench [--connections=10000] [--period-ms=250] [--seconds=3] [--warmup-seconds=1]
//                                    [--mode=all|none,deadline,...] [--runs=3] [--csv=FILE]
//
// A line server on 127.0.0.1 (ephemeral port), one thread and io_context, reads lines from C connections with
// a callback chain of async_read_some (it only reads: no reply, so the request is the read and its timeout,
// the part that differs between modes). A load generator on a second thread and io_context holds the C client
// ends and sends one 16-byte line on each every P ms, the clients' phases spread at random over the period.
// P defaults to 250 ms: 9,900 clients then offer 40k lines/s, which one generator thread sustains on 2 cores;
// at a few ms it cannot (it reached 2-3% of the offered rate), and the rate, not the timeouts, set the figure.
// The figure is the server thread's CPU time (CLOCK_THREAD_CPUTIME_ID, read on that thread) over the measured
// window divided by the lines it read in that window. Runs interleave the modes (run 1 of every mode, then run
// 2...) so that a change in the machine's load falls on all of them alike. The 30 s limit never fires: a run
// fails unless it ends with no timeout, no error and every line sent read.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto limit = 30s;
constexpr std::size_t line_size = 16;
constexpr int phase_slots = 20;  // sends happen in 20 bursts per period, each client in one of them
constexpr int connect_batch = 256;

enum class mode { none, deadline, timeout, steady_timer, watchdog, cancel_after };
constexpr const char* mode_names[] = {"none", "deadline", "timeout", "steady_timer", "watchdog", "cancel_after"};

// The calling thread's CPU time: the server's alone, whatever the generator's thread does.
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// Ends the process from any thread: _Exit, because exit() would destroy what the other threads still use.
[[noreturn]] void fail(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "server_bench: %s\n", what.c_str());
  std::_Exit(1);
}

struct server;

// The server's end of one connection: reads until end of file, timing each read as `how` does.
struct connection {
  server* srv;
  tcp::socket sock;
  mode how;
  std::array<char, 64> buf{};
  std::optional<tock::deadline> deadline;
  std::optional<asio::steady_timer> timer;
  steady::time_point due{};  // watchdog: what the timer checks when it wakes

  // Starts the read loop (and the watchdog's one wait): the connection must not move afterwards.
  connection(server* s, tcp::socket so, mode m) : srv(s), sock(std::move(so)), how(m) {
    if (how == mode::deadline) deadline.emplace(sock.get_executor());
    if (how == mode::steady_timer || how == mode::watchdog) timer.emplace(sock.get_executor());
    if (how == mode::watchdog) {
      due = steady::now() + limit;
      timer->expires_at(due);
      watch();
    }
    read();
  }

  void read();
  void on_read(const sys::error_code& ec, std::size_t n);
  void watch();
  void close();
};

// Accepts C connections, counts the lines they bring, stops its context when the last one has closed.
struct server {
  asio::io_context ctx{1};
  tcp::acceptor acceptor{ctx};
  mode how;
  long expected;
  long accepted = 0, closed = 0, requests = 0, timeouts = 0, errors = 0;
  std::string first_error;
  std::vector<std::unique_ptr<connection>> conns;
  std::promise<void> all_accepted;

  server(mode m, long c) : how(m), expected(c) {
    const tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), 0);
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen(asio::socket_base::max_listen_connections);
    conns.reserve(static_cast<std::size_t>(c));
  }

  // One accept at a time, each starting its connection's read loop, until C have come.
  void accept() {
    acceptor.async_accept([this](const sys::error_code& ec, tcp::socket s) {
      if (ec) fail("accept: " + ec.message());
      conns.push_back(std::make_unique<connection>(this, std::move(s), how));
      if (++accepted < expected) return accept();
      acceptor.close();
      all_accepted.set_value();
    });
  }

  // The last end of file ends the run: every line sent has been read by then.
  void closed_one() {
    if (++closed == expected) ctx.stop();
  }
};

// Starts one read, with the time limit of the mode.
void connection::read() {
  auto on = [this](const sys::error_code& ec, std::size_t n) { on_read(ec, n); };
  auto b = asio::buffer(buf);
  switch (how) {
    case mode::none: sock.async_read_some(b, on); break;
    case mode::deadline:
      deadline->expires_after(limit);
      sock.async_read_some(b, deadline->bind(on));
      break;
    case mode::timeout: sock.async_read_some(b, tock::timeout(limit, on)); break;
    case mode::steady_timer:
      timer->expires_after(limit);  // cancels the previous read's wait: its handler gets operation_aborted
      timer->async_wait([this](const sys::error_code& ec) {
        if (ec) return;  // may run after the connection is gone: only an expiry touches it
        ++srv->timeouts;
        close();
      });
      sock.async_read_some(b, on);
      break;
    case mode::watchdog:
      due = steady::now() + limit;  // the timer finds it when it wakes; nothing else per read
      sock.async_read_some(b, on);
      break;
    case mode::cancel_after:
#if TOCK_ASIO_VERSION >= 103100
      sock.async_read_some(b, asio::cancel_after(limit, on));
#endif
      break;
  }
}

// Counts the lines read and reads again; end of file (or anything else) closes the connection.
void connection::on_read(const sys::error_code& ec, std::size_t n) {
  if (!ec) {
    srv->requests += std::count(buf.data(), buf.data() + n, '\n');
    return read();
  }
  // Anything but end of file fails the run; a time limit shows here as tock::error::timed_out or
  // operation_aborted (the tock modes, cancel_after, or a socket closed by an expired Asio timer).
  if (ec != asio::error::eof && srv->errors++ == 0) srv->first_error = ec.message();
  close();
  srv->closed_one();
}

// Asio's watchdog: one wait per connection that re-arms itself while the reads keep moving `due`.
void connection::watch() {
  timer->async_wait([this](const sys::error_code& ec) {
    if (ec) return;
    if (due > steady::now()) {
      timer->expires_at(due);
      return watch();
    }
    ++srv->timeouts;
    close();
  });
}

// Closes the socket and withdraws its time limit (the pending wait completes with operation_aborted).
void connection::close() {
  sys::error_code ignored;
  sock.close(ignored);
  if (timer) timer->cancel();
  if (deadline) deadline->cancel();
}

// The load generator: C client sockets, each sending a line every period in its own phase slot.
struct client {
  asio::io_context ctx{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{ctx.get_executor()};
  tcp::endpoint target;
  std::vector<tcp::socket> socks;
  std::vector<std::size_t> owed;  // bytes not yet accepted by the socket (a partial write)
  std::vector<std::vector<std::size_t>> slots;
  asio::steady_timer tick{ctx};
  steady::duration tick_len;
  steady::time_point start;
  long next_slot = 0, connected = 0, started = 0, lines = 0;
  bool stopping = false;
  std::promise<void> all_connected;
  std::array<char, 64 * line_size> text{};

  client(tcp::endpoint ep, long c, std::chrono::milliseconds period, unsigned seed)
      : target(ep), owed(static_cast<std::size_t>(c)), slots(phase_slots),
        tick_len(std::chrono::duration_cast<steady::duration>(period) / phase_slots) {
    socks.reserve(owed.size());
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < owed.size(); ++i) {
      socks.emplace_back(ctx);
      slots[rng() % phase_slots].push_back(i);
    }
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = i % line_size == line_size - 1 ? '\n' : 'a' + i % 26;
    for (int i = 0; i < connect_batch; ++i) connect_next();
  }

  // Keeps connect_batch connects in flight, so that the listen backlog never overflows.
  void connect_next() {
    if (started == static_cast<long>(socks.size())) return;
    auto& s = socks[static_cast<std::size_t>(started++)];
    s.async_connect(target, [this, &s](const sys::error_code& ec) {
      if (ec) fail("connect: " + ec.message() + " (ephemeral ports or file descriptors exhausted?)");
      s.set_option(tcp::no_delay(true));
      s.non_blocking(true);
      if (++connected == static_cast<long>(socks.size())) all_connected.set_value();
      connect_next();
    });
  }

  // Writes what socket i owes, from where its current line stands, as far as the socket takes it.
  void write_owed(std::size_t i) {
    const std::size_t at = (line_size - owed[i] % line_size) % line_size;
    sys::error_code ec;
    owed[i] -= socks[i].write_some(asio::buffer(text.data() + at, std::min(owed[i], text.size() - at)), ec);
    if (ec && ec != asio::error::would_block) fail("send: " + ec.message() + " (the server closed a connection?)");
  }

  // Queues one line on socket i and writes what the socket takes now; the rest goes with its next line.
  void send(std::size_t i) {
    owed[i] += line_size;
    write_owed(i);
    ++lines;
  }

  // Waits for the next phase slot (the first: one tick after `start`).
  void arm() {
    tick.expires_at(start + (next_slot + 1) * tick_len);
    tick.async_wait([this](const sys::error_code& ec) {
      if (ec || stopping) return;
      on_tick();
    });
  }

  // Sends for every slot due by now; a slot a period late or more is skipped (its clients send a period later).
  void on_tick() {
    const long due = static_cast<long>((steady::now() - start) / tick_len);
    for (; next_slot <= due; ++next_slot) {
      const auto& slot = slots[static_cast<std::size_t>(next_slot % phase_slots)];
      if (due - next_slot < phase_slots)
        for (auto i : slot) send(i);
    }
    arm();
  }

  // Writes what is owed (blocking), then half-closes every socket: the server reads each to its end of file.
  void stop() {
    stopping = true;
    tick.cancel();
    for (std::size_t i = 0; i < socks.size(); ++i) {
      socks[i].non_blocking(false);
      while (owed[i] > 0) write_owed(i);
      sys::error_code ignored;  // a connection the server closed fails the run by its counts, not here
      socks[i].shutdown(tcp::socket::shutdown_send, ignored);
    }
    work.reset();
  }
};

// Aborts the process when a run overruns its budget: a hang must not block bench.sh. Returns the re-arm.
std::function<void(steady::duration)> start_watchdog() {
  static std::atomic<steady::rep> deadline{steady::time_point::max().time_since_epoch().count()};
  std::thread([] {
    while (std::this_thread::sleep_for(1s), steady::now().time_since_epoch().count() < deadline.load()) {
    }
    std::fflush(stdout);
    std::fprintf(stderr, "server_bench: a run took too long (hung?): aborting\n");
    std::abort();
  }).detach();
  return [](steady::duration d) { deadline = (steady::now() + d).time_since_epoch().count(); };
}

struct options {
  long connections, period_ms;
  double seconds, warmup;
  int runs;
  std::vector<mode> modes;
  std::string csv;
};

// One run of one mode: connect, warm up, measure, close, check the counts, print a line. Returns CPU ns
// per request and the share of the offered rate the generator reached.
std::pair<double, double> run_once(const options& o, mode how, int run) {
  const unsigned seed = 1234u + static_cast<unsigned>(run);
  server srv(how, o.connections);
  client cli(srv.acceptor.local_endpoint(), o.connections, std::chrono::milliseconds(o.period_ms), seed);
  srv.accept();
  auto accepted = srv.all_accepted.get_future();
  auto connected = cli.all_connected.get_future();
  std::thread server_thread([&] { srv.ctx.run(); });
  std::thread client_thread([&] { cli.ctx.run(); });
  accepted.wait();
  connected.wait();
  asio::post(cli.ctx, [&] {
    cli.start = steady::now();
    cli.arm();
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));

  // The window's edges are read on the server thread, between two of its handlers.
  auto mark = [&] {
    std::promise<std::pair<double, long>> p;
    asio::post(srv.ctx, [&] { p.set_value({thread_cpu_ns(), srv.requests}); });
    return p.get_future().get();
  };
  const auto [cpu0, req0] = mark();
  const auto wall0 = steady::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const auto [cpu1, req1] = mark();
  const double wall = std::chrono::duration<double>(steady::now() - wall0).count();
  asio::post(cli.ctx, [&] { cli.stop(); });
  client_thread.join();
  server_thread.join();
  srv.conns.clear();
  srv.ctx.restart();
  srv.ctx.poll();  // the aborted waits of the last reads

  if (srv.timeouts || srv.errors || srv.requests != cli.lines)
    fail(std::string(mode_names[int(how)]) + ": " + std::to_string(srv.timeouts) + " Asio timer expiries, " +
         std::to_string(srv.errors) + " reads ended by an error (the first: '" + srv.first_error + "'), " +
         std::to_string(cli.lines) + " lines sent and " + std::to_string(srv.requests) + " read; expected no " +
         "expiry, no error and every line read");
  const long n = req1 - req0;
  if (n <= 0) fail("no request in the measured window");
  const double cpu = cpu1 - cpu0, share = n / wall / (o.connections * 1000.0 / o.period_ms);
  std::printf("run %d %-13s %7.0f CPU ns/request  %9ld requests  %8.0f/s (%5.1f%% of offered)  server busy %3.0f%%\n",
              run + 1, mode_names[int(how)], cpu / n, n, n / wall, 100 * share, 100 * cpu / (wall * 1e9));
  std::fflush(stdout);
  return {cpu / static_cast<double>(n), share};
}

// Raises the soft fd limit to the hard one and returns how many connections fit (2 fds each, 200 spare).
long fitting_connections(long wanted) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  const long fit = (static_cast<long>(rl.rlim_cur) - 200) / 2;
  if (wanted <= fit) return wanted;
  std::printf("note: %ld connections need %ld file descriptors in one process (2 each, 200 spare); the limit is "
              "%ld: using %ld connections\n",
              wanted, 2 * wanted + 200, static_cast<long>(rl.rlim_cur), fit);
  return fit;
}

// The command line: --key=value options (the comment at the top), every one optional.
options parse(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) fail("bad argument '" + a + "' (expected --key=value)");
    args[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  auto get = [&](const std::string& key, const char* otherwise) {
    const auto it = args.find(key);
    const std::string v = it == args.end() ? otherwise : it->second;
    if (it != args.end()) args.erase(it);
    return v;
  };
  options o;
  o.connections = std::stol(get("connections", "10000"));
  o.period_ms = std::stol(get("period-ms", "250"));
  o.seconds = std::stod(get("seconds", "3"));
  o.warmup = std::stod(get("warmup-seconds", "1"));
  o.runs = std::stoi(get("runs", "3"));
  o.csv = get("csv", "");
  const std::string modes = get("mode", "all");
  if (!args.empty()) fail("unknown option --" + args.begin()->first + " (see the top of bench/server_bench.cpp)");
  if (o.connections < 1 || o.period_ms < 1 || o.seconds <= 0 || o.warmup < 0 || o.runs < 1) fail("bad arguments");
  for (int m = 0; m < 6; ++m) {
    const std::string name = mode_names[m];
    const bool listed = modes == "all" || ("," + modes + ",").find("," + name + ",") != std::string::npos;
    if (!listed) continue;
    if (m == int(mode::cancel_after) && TOCK_ASIO_VERSION < 103100) {
      if (modes != "all") fail("cancel_after needs Asio >= 1.31 (the standalone build)");
      continue;
    }
    o.modes.push_back(mode(m));
  }
  if (o.modes.empty()) fail("--mode: none of all, none, deadline, timeout, steady_timer, watchdog, cancel_after");
  return o;
}

// Median, min and max of one column.
std::array<double, 3> summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return {v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2, v.front(), v.back()};
}

}  // namespace

// Runs every mode R times, interleaved, then prints the table (and the CSV).
int main(int argc, char** argv) {
  options o = parse(argc, argv);
  o.connections = fitting_connections(o.connections);
  std::printf("Asio %d.%d.%d; %ld connections on 127.0.0.1, a %zu-byte line every %ld ms each (%.0f lines/s "
              "offered), %g s warm-up + %g s measured, %d run(s) per mode; server reads only\n",
              TOCK_ASIO_VERSION / 100000, TOCK_ASIO_VERSION / 100 % 1000, TOCK_ASIO_VERSION % 100, o.connections,
              line_size, o.period_ms, o.connections * 1000.0 / o.period_ms, o.warmup, o.seconds, o.runs);
  const auto arm_watchdog = start_watchdog();
  const auto budget =
      60s + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(o.warmup + o.seconds));
  std::vector<double> results[6];  // CPU ns per request by mode, one per run
  double least_share = 1;           // of the offered rate, over the runs
  for (int r = 0; r < o.runs; ++r) {
    for (std::size_t m = 0; m < o.modes.size(); ++m) {
      arm_watchdog(budget);
      const auto [ns, share] = run_once(o, o.modes[m], r);
      results[int(o.modes[m])].push_back(ns);
      least_share = std::min(least_share, share);
    }
  }
  arm_watchdog(std::chrono::hours(24));

  // Ratios are taken within a run (mode / none of the same run), then their median.
  const auto& none = results[int(mode::none)];
  const auto& asio_timer = results[int(mode::steady_timer)];
  std::printf("\n%-13s %26s %14s %24s\n", "mode", "CPU ns/request (min-max)", "vs none", "overhead vs steady_timer");
  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (!o.csv.empty() && !csv) fail("cannot write " + o.csv);
  if (csv) std::fprintf(csv, "workload,system,n,ns_per_op\n");
  for (const mode m : o.modes) {
    const auto& ns = results[int(m)];
    std::vector<double> vs_none, vs_timer;
    for (std::size_t r = 0; r < none.size(); ++r) {
      vs_none.push_back(ns[r] / none[r]);
      if (!asio_timer.empty()) vs_timer.push_back((ns[r] - none[r]) / (asio_timer[r] - none[r]));
    }
    const auto [median, min, max] = summarize(ns);
    char range[64], ratio[32] = "-", over[32] = "-";
    std::snprintf(range, sizeof range, "%.0f (%.0f-%.0f)", median, min, max);
    if (!vs_none.empty()) std::snprintf(ratio, sizeof ratio, "%.2fx", summarize(vs_none)[0]);
    if (!vs_timer.empty() && m != mode::none) std::snprintf(over, sizeof over, "%.2f", summarize(vs_timer)[0]);
    std::printf("%-13s %26s %14s %24s\n", mode_names[int(m)], range, ratio, over);
    if (csv) std::fprintf(csv, "server,%s,%ld,%.1f\n", mode_names[int(m)], o.connections, median);
  }
  if (csv) std::fclose(csv);
  if (least_share < 0.9)  // then the generator's CPU share sets the rate, and each mode ran at its own
    std::printf("\nnote: the load generator reached only %.0f%% of the offered rate in some runs: the rate and the "
                "batching per wake-up differed between runs; a longer --period-ms gives a fixed rate\n",
                100 * least_share);
}
