// A TCP line-echo server on 127.0.0.1 that drops the connections a server should not keep, with tock
// deadlines (see server_core.hpp): idle clients, slowloris clients (a request line that never ends), and
// clients that stop reading their echoes; past --max-conn it turns new connections away.
//
//   server [PORT] [--port N] [--idle-ms N] [--request-ms N] [--write-ms N] [--max-conn N] [--sndbuf BYTES]
//
// Defaults: idle 5000 ms (no byte received), request 3000 ms (a line not complete after its first byte),
// write 3000 ms (an echo not written), max-conn 10000, sndbuf 4096 (SO_SNDBUF of accepted sockets, small
// so that a client that stops reading soon blocks the server's writes).
// PORT 0 (the default) picks an ephemeral port. The first line of stdout is `listening on 127.0.0.1:PORT`.
// SIGINT or SIGTERM stops it gracefully: it stops accepting, closes every connection, lets the io_context
// drain, and prints its counters, one per line as `name: value`.
#include "server_core.hpp"

#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void usage(const std::string& problem) {
    std::cerr << "server: " << problem << "\n"
              << "usage: server [PORT] [--port N] [--idle-ms N] [--request-ms N] [--write-ms N] [--max-conn N]"
                 " [--sndbuf BYTES]\n";
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

tock_examples::server_config parse(int argc, char** argv) {
    tock_examples::server_config config;  // its defaults are the ones above
    const unsigned long long day_ms = 24ull * 3600 * 1000;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") usage("help");
        if (arg.substr(0, 2) != "--") {
            config.port = static_cast<unsigned short>(number("PORT", argv[i], 65535));
            continue;
        }
        static constexpr std::string_view flags[] = {"--port", "--idle-ms", "--request-ms", "--write-ms",
                                                     "--max-conn", "--sndbuf"};
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
        else  // --sndbuf
            config.send_buffer = static_cast<int>(number(arg, value, 64 << 20));
    }
    return config;
}

}  // namespace

int main(int argc, char** argv) {
    const tock_examples::server_config config = parse(argc, argv);
    const auto files = tock_examples::raise_open_file_limit();
    if (files < config.max_connections + 64)
        std::cerr << "server: warning: only " << files << " open files allowed, --max-conn is "
                  << config.max_connections << std::endl;
    try {
        boost::asio::io_context ctx;
        tock_examples::line_server server(ctx, config);

        boost::asio::signal_set signals(ctx, SIGINT, SIGTERM);
        signals.async_wait([&](const boost::system::error_code& ec, int signal) {
            if (ec) return;
            std::cerr << "server: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down" << std::endl;
            server.stop();
        });

        const auto endpoint = server.local_endpoint();
        std::cout << "listening on " << endpoint.address().to_string() << ":" << endpoint.port() << std::endl;

        const tock_examples::server_counters counters = server.run_until_stopped();
        std::cout << counters << std::flush;
        return counters.open_connections == 0 && counters.pending_timers == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}
