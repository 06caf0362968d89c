// A Beast HTTP/1.1 server on 127.0.0.1 with keep-alive and coroutines, whose time limits come from the stream
// chosen on the command line:
//   tock   tock::beast::tcp_stream (<tock/beast.hpp>): Beast's tcp_stream with tock's deadlines, no Asio timer
//   beast  boost::beast::tcp_stream: Beast's own, with its Asio timers (the control)
//   none   a plain tcp::socket: no time limits at all (the baseline of scripts/http_bench.sh)
// The session code is the same for all three: switching from Beast's stream to tock's is one type.
//
//   http_server [--stream tock|beast|none] [--port N] [--idle-ms N] [--header-ms N] [--body-ms N]
//               [--write-ms N] [--stats-ms N]
//
// Limits (defaults): idle 5000 ms (no byte of a next request), header 3000 ms (a request's header not complete
// after its first byte), body 3000 ms, write 3000 ms (a response not written: a client that stops reading).
// PORT 0 (the default) picks an ephemeral port. The first line of stdout is `listening on 127.0.0.1:PORT`.
// --stats-ms N prints every N ms: `stats: connections=C requests=R rss_kib=K`. SIGINT or SIGTERM stops it: it
// stops accepting, closes every connection, lets the io_context drain, and prints its counters, one per line
// as `name: value` (requests, connections, closed by each limit, cpu_us and cpu_us_per_request: the process's
// user + system CPU time since it started listening, max_rss_kib).
#include <tock/beast.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <list>
#include <string>
#include <string_view>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

struct options {
    std::string stream = "tock";
    unsigned short port = 0;
    std::chrono::milliseconds idle{5000}, header{3000}, body{3000}, write{3000}, stats{0};
};

[[noreturn]] void usage(const std::string& problem) {
    std::cerr << "http_server: " << problem << "\n"
              << "usage: http_server [--stream tock|beast|none] [--port N] [--idle-ms N] [--header-ms N]"
                 " [--body-ms N] [--write-ms N] [--stats-ms N]\n";
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

options parse(int argc, char** argv) {
    options opt;
    const unsigned long long day_ms = 24ull * 3600 * 1000;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") usage("help");
        if (i + 1 == argc) usage(std::string(arg) + " needs a value");
        const char* value = argv[++i];
        const auto ms = [&] { return std::chrono::milliseconds(number(arg, value, day_ms)); };
        if (arg == "--stream") {
            opt.stream = value;
            if (opt.stream != "tock" && opt.stream != "beast" && opt.stream != "none")
                usage("unknown stream " + opt.stream);
        } else if (arg == "--port") {
            opt.port = static_cast<unsigned short>(number(arg, value, 65535));
        } else if (arg == "--idle-ms") {
            opt.idle = ms();
        } else if (arg == "--header-ms") {
            opt.header = ms();
        } else if (arg == "--body-ms") {
            opt.body = ms();
        } else if (arg == "--write-ms") {
            opt.write = ms();
        } else if (arg == "--stats-ms") {
            opt.stats = ms();
        } else {
            usage("unknown option " + std::string(arg));
        }
    }
    return opt;
}

struct counters {
    std::uint64_t connections = 0, open = 0, requests = 0, closed_by_client = 0, closed_idle = 0, closed_header = 0,
                  closed_body = 0, closed_write = 0, bad_requests = 0;
};

long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    return -1;
}

std::chrono::microseconds cpu_time() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto us = [](const timeval& t) {
        return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
    };
    return us(u.ru_utime) + us(u.ru_stime);
}

// The stream's time limit for what follows; a plain socket has none.
template <typename Stream>
void limit(Stream& stream, std::chrono::milliseconds d) {
    if constexpr (requires { stream.expires_after(d); }) stream.expires_after(d);
}

template <typename Stream>
tcp::socket& socket_of(Stream& stream) {
    if constexpr (std::is_same_v<Stream, tcp::socket>)
        return stream;
    else
        return stream.socket();
}

// A limit passed: Beast's streams report beast::error::timeout.
bool timed_out(const beast::error_code& ec) { return ec == beast::error::timeout; }

// One connection: requests read and answered in turn, each phase under its limit.
template <typename Stream>
asio::awaitable<void> session(Stream& stream, const options& opt, counters& c) {
    constexpr auto token = asio::as_tuple(asio::use_awaitable);
    beast::flat_buffer buffer;
    for (;;) {
        // Idle: until the first byte of the next request (it may already be in the buffer).
        if (buffer.size() == 0) {
            limit(stream, opt.idle);
            auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), token);
            if (ec) {
                ++(timed_out(ec) ? c.closed_idle : c.closed_by_client);
                break;
            }
            buffer.commit(n);
        }
        http::request_parser<http::string_body> parser;
        parser.body_limit(1 << 20);
        limit(stream, opt.header);
        if (auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, token); ec) {
            ++(timed_out(ec)                      ? c.closed_header
               : ec == http::error::end_of_stream ? c.closed_by_client
                                                  : c.bad_requests);
            break;
        }
        if (!parser.is_done()) {
            limit(stream, opt.body);
            if (auto [ec, n] = co_await http::async_read(stream, buffer, parser, token); ec) {
                ++(timed_out(ec) ? c.closed_body : c.bad_requests);
                break;
            }
        }
        const http::request<http::string_body>& req = parser.get();
        http::response<http::string_body> res{http::status::ok, req.version()};
        res.set(http::field::server, "tock-example");
        res.set(http::field::content_type, "text/plain");
        res.keep_alive(req.keep_alive());
        res.body() = "hello from tock\n";
        res.prepare_payload();
        limit(stream, opt.write);
        if (auto [ec, n] = co_await http::async_write(stream, res, token); ec) {
            ++(timed_out(ec) ? c.closed_write : c.closed_by_client);
            break;
        }
        ++c.requests;
        if (!res.keep_alive()) break;
    }
    beast::error_code ignored;
    socket_of(stream).shutdown(tcp::socket::shutdown_send, ignored);
}

// Accepts until stopped; each connection a session on the chosen stream, registered so that a stop can close it.
template <typename Stream>
asio::awaitable<void> serve(tcp::acceptor& acceptor, const options& opt, counters& c, std::list<tcp::socket*>& live) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        if (ec) continue;  // out of descriptors, a connection reset before it was accepted: go on
        ++c.connections;
        ++c.open;
        // The stream lives in the coroutine's frame: its socket stays where `live` points until it ends.
        auto run = [](Stream s, const options& o, counters& k, std::list<tcp::socket*>& l) -> asio::awaitable<void> {
            const auto at = l.insert(l.end(), &socket_of(s));
            co_await session(s, o, k);
            l.erase(at);
            --k.open;
        };
        asio::co_spawn(acceptor.get_executor(), run(Stream(std::move(socket)), opt, c, live), asio::detached);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), opt.port));
    std::cout << "listening on 127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
    counters c;
    std::list<tcp::socket*> live;
    const auto cpu_start = cpu_time();

    if (opt.stream == "tock")
        asio::co_spawn(ctx, serve<tock::beast::tcp_stream>(acceptor, opt, c, live), asio::detached);
    else if (opt.stream == "beast")
        asio::co_spawn(ctx, serve<beast::tcp_stream>(acceptor, opt, c, live), asio::detached);
    else
        asio::co_spawn(ctx, serve<tcp::socket>(acceptor, opt, c, live), asio::detached);

    asio::signal_set signals(ctx, SIGINT, SIGTERM);
    asio::steady_timer stats(ctx);
    signals.async_wait([&](const beast::error_code& ec, int) {
        if (ec) return;
        acceptor.close();
        stats.cancel();
        for (tcp::socket* s : live) {
            beast::error_code ignored;
            s->close(ignored);
        }
    });
    if (opt.stats > 0ms) {
        auto tick = [&](auto& self) -> void {
            stats.expires_after(opt.stats);
            stats.async_wait([&, self](const beast::error_code& ec) {
                if (ec) return;
                std::cout << "stats: connections=" << c.open << " requests=" << c.requests << " rss_kib=" << rss_kib()
                          << std::endl;
                self(self);
            });
        };
        tick(tick);
    }
    ctx.run();

    const auto cpu = cpu_time() - cpu_start;
    std::cout << "stream: " << opt.stream << "\nrequests: " << c.requests << "\nconnections: " << c.connections
              << "\nclosed_by_client: " << c.closed_by_client << "\nclosed_idle: " << c.closed_idle
              << "\nclosed_header: " << c.closed_header << "\nclosed_body: " << c.closed_body
              << "\nclosed_write: " << c.closed_write << "\nbad_requests: " << c.bad_requests
              << "\ncpu_us: " << cpu.count() << "\ncpu_us_per_request: "
              << (c.requests > 0 ? static_cast<double>(cpu.count()) / static_cast<double>(c.requests) : 0.0)
              << "\nmax_rss_kib: " <<
        [] {
            rusage u{};
            getrusage(RUSAGE_SELF, &u);
            return u.ru_maxrss;
        }() << std::endl;
}
