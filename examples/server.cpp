// A TCP line-echo server on 127.0.0.1 that drops the connections a server should not keep, with tock
// deadlines (see server_core.hpp): idle clients, slowloris clients (a request line that never ends), and
// clients that stop reading their echoes; past --max-conn it turns new connections away.
//
//   server [PORT] [--port N] [--idle-ms N] [--request-ms N] [--write-ms N] [--max-conn N] [--sndbuf BYTES]
//          [--stats-ms N] [--timer-stats-ms N]
//
// Defaults: idle 5000 ms (no byte received), request 3000 ms (a line not complete after its first byte),
// write 3000 ms (an echo not written), max-conn 10000, sndbuf 4096 (SO_SNDBUF of accepted sockets, small
// so that a client that stops reading soon blocks the server's writes).
// PORT 0 (the default) picks an ephemeral port. The first line of stdout is `listening on 127.0.0.1:PORT`.
// --stats-ms N (N > 0) then prints, every N ms while it runs, one line (flushed)
//   stats: t_ms=T connections=C pending_timers=P accepted=A served_lines=S closed_idle=... ...
// T: ms since the server started; C: open connections; P: tock::timer_service::pending() of its context;
// then the other counters below, as name=value. The line comes from an asio::steady_timer, so that it is not
// itself one of the pending tock timers it reports (scripts/soak.sh samples these lines).
// --timer-stats-ms N (N > 0) prints, every N ms, what the context's timer service has done (tock::timer_stats):
//   timer_stats: started=... fired=... aborted=... withdrawn=... refused=... lazy_extensions=... rekeys=...
//   pending=... peak_pending=... driver_arms=... wakeups=... empty_wakeups=... late_p50_us=... late_p99_us=...
//   late_max_us=...   (one line)
// SIGINT or SIGTERM stops it gracefully: it stops accepting, closes every connection, lets the io_context
// drain, and prints its counters, one per line as `name: value`, then one last `timer_stats:` line.
#include "server_core.hpp"

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void usage(const std::string& problem) {
    std::cerr << "server: " << problem << "\n"
              << "usage: server [PORT] [--port N] [--idle-ms N] [--request-ms N] [--write-ms N] [--max-conn N]"
                 " [--sndbuf BYTES] [--stats-ms N] [--timer-stats-ms N]\n";
    std::exit(2);
}

unsigned long long number(std::string_view flag, const char* text, unsigned long long max) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > max)
        usage(std::string(flag) + ": not a number up to " + std::to_string(max) + ": '" + text + "'");
    return value;
}

struct options {
    tock_examples::server_config config;  // its defaults are the ones above
    std::chrono::milliseconds stats{0};   // 0: no stats lines
    std::chrono::milliseconds timer_stats{0};  // 0: only the last timer_stats line
};

options parse(int argc, char** argv) {
    options opt;
    tock_examples::server_config& config = opt.config;
    const unsigned long long day_ms = 24ull * 3600 * 1000;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") usage("help");
        if (arg.substr(0, 2) != "--") {
            config.port = static_cast<unsigned short>(number("PORT", argv[i], 65535));
            continue;
        }
        static constexpr std::string_view flags[] = {"--port",     "--idle-ms", "--request-ms", "--write-ms",
                                                     "--max-conn", "--sndbuf",  "--stats-ms",   "--timer-stats-ms"};
        if (std::find(std::begin(flags), std::end(flags), arg) == std::end(flags))
            usage("unknown option " + std::string(arg));
        if (i + 1 == argc) usage(std::string(arg) + " needs a value");
        const char* value = argv[++i];
        if (arg == "--port")
            config.port = static_cast<unsigned short>(number(arg, value, 65535));
        else if (arg == "--idle-ms")
            config.idle = std::chrono::milliseconds(number(arg, value, day_ms));
        else if (arg == "--request-ms")
            config.request = std::chrono::milliseconds(number(arg, value, day_ms));
        else if (arg == "--write-ms")
            config.write = std::chrono::milliseconds(number(arg, value, day_ms));
        else if (arg == "--max-conn")
            config.max_connections = number(arg, value, 10'000'000);
        else if (arg == "--sndbuf")
            config.send_buffer = static_cast<int>(number(arg, value, 64 << 20));
        else if (arg == "--stats-ms")
            opt.stats = std::chrono::milliseconds(number(arg, value, day_ms));
        else  // --timer-stats-ms
            opt.timer_stats = std::chrono::milliseconds(number(arg, value, day_ms));
    }
    return opt;
}

// One `stats:` line (see the top of this file).
void print_stats(std::chrono::steady_clock::duration since_start, const tock_examples::server_counters& c) {
    std::ostringstream line;
    line << "stats: t_ms=" << std::chrono::duration_cast<std::chrono::milliseconds>(since_start).count()
         << " connections=" << c.open_connections << " pending_timers=" << c.pending_timers;
    c.for_each([&line](std::string_view name, std::uint64_t value) {
        if (name != "open_connections" && name != "pending_timers") line << ' ' << name << '=' << value;
    });
    std::cout << line.str() << std::endl;
}

// One `timer_stats:` line (see the top of this file).
void print_timer_stats(boost::asio::io_context& ctx) {
    const tock::timer_stats s = tock::timer_service::of(ctx.get_executor()).stats();
    const auto us = [](std::chrono::nanoseconds d) { return std::chrono::duration<double, std::micro>(d).count(); };
    std::ostringstream line;
    line << "timer_stats: started=" << s.started << " fired=" << s.fired << " aborted=" << s.aborted
         << " withdrawn=" << s.withdrawn << " refused=" << s.refused << " lazy_extensions=" << s.lazy_extensions
         << " rekeys=" << s.rekeys << " pending=" << s.pending << " peak_pending=" << s.peak_pending
         << " driver_arms=" << s.driver_arms << " wakeups=" << s.wakeups << " empty_wakeups=" << s.empty_wakeups
         << " late_p50_us=" << us(s.p50()) << " late_p99_us=" << us(s.p99()) << " late_max_us=" << us(s.max_lateness);
    std::cout << line.str() << std::endl;
}

// Calls `print()` every `period` (on the schedule start + k * period, so it does not drift) until the timer
// is cancelled.
template <typename Print>
void schedule_lines(boost::asio::steady_timer& timer, std::chrono::steady_clock::time_point start,
                    std::chrono::milliseconds period, std::uint64_t k, Print print) {
    timer.expires_at(start + period * k);
    timer.async_wait([&timer, start, period, k, print](const boost::system::error_code& ec) {
        if (ec) return;
        print();
        schedule_lines(timer, start, period, k + 1, print);
    });
}

}  // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    const tock_examples::server_config& config = opt.config;
    const auto started = std::chrono::steady_clock::now();
    const auto files = tock_examples::raise_open_file_limit();
    if (files < config.max_connections + 64)
        std::cerr << "server: warning: only " << files << " open files allowed, --max-conn is "
                  << config.max_connections << std::endl;
    try {
        boost::asio::io_context ctx;
        tock_examples::line_server server(ctx, config);
        boost::asio::steady_timer stats_timer(ctx), timer_stats_timer(ctx);

        boost::asio::signal_set signals(ctx, SIGINT, SIGTERM);
        signals.async_wait([&](const boost::system::error_code& ec, int signal) {
            if (ec) return;
            std::cerr << "server: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down" << std::endl;
            stats_timer.cancel();
            timer_stats_timer.cancel();
            server.stop();
        });

        const auto endpoint = server.local_endpoint();
        std::cout << "listening on " << endpoint.address().to_string() << ":" << endpoint.port() << std::endl;
        if (opt.stats.count() > 0)
            schedule_lines(stats_timer, started, opt.stats, 1,
                           [&] { print_stats(std::chrono::steady_clock::now() - started, server.counters()); });
        if (opt.timer_stats.count() > 0)
            schedule_lines(timer_stats_timer, started, opt.timer_stats, 1, [&] { print_timer_stats(ctx); });

        const tock_examples::server_counters counters = server.run_until_stopped();
        std::cout << counters << std::flush;
        print_timer_stats(ctx);
        return counters.open_connections == 0 && counters.pending_timers == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}
