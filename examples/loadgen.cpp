// A load generator for examples/server: many connections of four kinds against 127.0.0.1:PORT, each
// checked against what the server should do with it.
//   active      sends a line every --interval-ms and reads its echo    -> the server keeps it open
//   idle        connects and sends nothing                              -> closed by the server (idle limit)
//   slowloris   sends one byte every --interval-ms, never a newline     -> closed by the server (request limit)
//   nonreading  sends lines as fast as it can and never reads           -> closed by the server (write limit)
//
//   loadgen [127.0.0.1:]PORT [--active N] [--idle N] [--slowloris N] [--nonreading N] [--duration-ms D]
//           [--interval-ms I] [--connect-concurrency C] [--churn] [--lifetime-ms L] [--quiet]
//
// Defaults: 1000 active, 1000 idle, 500 slowloris, 100 non-reading, 3000 ms, a 200 ms interval; the server's
// limits must be well within --duration-ms (e.g. server --idle-ms 1000 --request-ms 1500 --write-ms 1000, as
// scripts/demo.sh runs it), and its idle limit above --interval-ms.
//
// By default each connection is opened once. With --churn the counts are connections open at a time, for the
// whole run: a connection that is over (the server closed it, or an active one whose lifetime is up) is
// replaced, after a random pause of up to --interval-ms, by a new one of the same kind, until the end of the
// run. Active connections then close themselves after a lifetime drawn uniformly from [L/2, 3L/2]
// (--lifetime-ms L, default 3000), so that they churn too. scripts/soak.sh runs it this way.
//
// It stops by itself after --duration-ms (every operation is timed with tock::timeout_at), prints a live
// progress line on stderr (at most 4 updates a second; one line a second when stderr is not a terminal) and
// a summary table, and exits 0 when every connection behaved as expected, 1 otherwise (2: bad arguments).
// Has at most active+idle+slowloris+nonreading connections open at a time, to a loopback address only.
#include <tock/timeout.hpp>
#include <tock/tock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

enum kind { active, idle, slowloris, nonreading, kinds };
constexpr std::array<const char*, kinds> kind_names = {"active", "idle", "slowloris", "nonreading"};

struct options {
    tcp::endpoint server;
    std::array<std::size_t, kinds> count = {1000, 1000, 500, 100};
    milliseconds duration{3000};
    milliseconds interval{200};
    std::size_t connect_concurrency = 256;
    bool churn = false;          // replace connections that are over, until the end of the run
    milliseconds lifetime{3000};  // under churn: an active connection's mean lifetime
    bool quiet = false;
};

[[noreturn]] void usage(const std::string& problem) {
    std::cerr << "loadgen: " << problem << "\n"
              << "usage: loadgen [127.0.0.1:]PORT [--active N] [--idle N] [--slowloris N] [--nonreading N]"
                 " [--duration-ms D] [--interval-ms I] [--connect-concurrency C] [--churn] [--lifetime-ms L]"
                 " [--quiet]\n";
    std::exit(2);
}

unsigned long long number(std::string_view what, const std::string& text, unsigned long long max) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || text[0] == '-' || value > max)
        usage(std::string(what) + ": not a number up to " + std::to_string(max) + ": '" + text + "'");
    return value;
}

options parse(int argc, char** argv) {
    options opt;
    bool have_port = false;
    std::string host = "127.0.0.1";
    unsigned short port = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") usage("help");
        if (arg == "--quiet") {
            opt.quiet = true;
            continue;
        }
        if (arg == "--churn") {
            opt.churn = true;
            continue;
        }
        if (arg.rfind("--", 0) != 0) {  // [HOST:]PORT
            const auto colon = arg.rfind(':');
            if (colon != std::string::npos) host = arg.substr(0, colon);
            const std::string digits = colon == std::string::npos ? arg : arg.substr(colon + 1);
            port = static_cast<unsigned short>(number("PORT", digits, 65535));
            have_port = true;
            continue;
        }
        static const std::vector<std::string> flags = {
            "--active",      "--idle",        "--slowloris",           "--nonreading",
            "--duration-ms", "--interval-ms", "--connect-concurrency", "--port",
            "--lifetime-ms"};
        if (std::find(flags.begin(), flags.end(), arg) == flags.end()) usage("unknown option " + arg);
        if (i + 1 == argc) usage(arg + " needs a value");
        const std::string value = argv[++i];
        const unsigned long long max_count = 100'000;
        if (arg == "--active")
            opt.count[active] = number(arg, value, max_count);
        else if (arg == "--idle")
            opt.count[idle] = number(arg, value, max_count);
        else if (arg == "--slowloris")
            opt.count[slowloris] = number(arg, value, max_count);
        else if (arg == "--nonreading")
            opt.count[nonreading] = number(arg, value, max_count);
        else if (arg == "--duration-ms")
            opt.duration = milliseconds(number(arg, value, 3'600'000));
        else if (arg == "--interval-ms")
            opt.interval = milliseconds(std::max(1ull, number(arg, value, 3'600'000)));
        else if (arg == "--connect-concurrency")
            opt.connect_concurrency = std::max(1ull, number(arg, value, 100'000));
        else if (arg == "--lifetime-ms")
            opt.lifetime = milliseconds(std::max(2ull, number(arg, value, 3'600'000)));
        else {  // --port
            port = static_cast<unsigned short>(number(arg, value, 65535));
            have_port = true;
        }
    }
    if (!have_port || port == 0) usage("the server's port is required");
    error_code ec;
    const auto address = asio::ip::make_address_v4(host, ec);
    if (ec || !address.is_loopback()) usage("only a 127.x.y.z address is allowed, not '" + host + "'");
    opt.server = tcp::endpoint(address, port);
    return opt;
}

// Raises the soft limit on open files to the hard limit; returns the new soft limit.
std::uint64_t raise_open_file_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return static_cast<std::uint64_t>(limit.rlim_cur);
}

long long ms_between(clock_type::time_point from, clock_type::time_point to) {
    return std::chrono::duration_cast<milliseconds>(to - from).count();
}

bool closed_by_peer(const error_code& ec) {
    return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

struct kind_stats {
    std::size_t opened = 0;
    std::size_t closed_by_server = 0;
    std::size_t finished = 0;             // connections (or connection attempts) that are over
    std::size_t open_at_end = 0;          // the run ended while they were open
    std::size_t ended_by_client = 0;      // active connections that closed themselves before the run ended
    std::size_t errors = 0;
    std::vector<long long> close_ms;      // when the server closed them, after connect
    std::uint64_t lines = 0;              // echoes checked (active)
    std::map<std::string, std::size_t> error_kinds;
};

class load_generator {
public:
    load_generator(asio::io_context& ctx, const options& opt)
        : ctx_(ctx), opt_(opt), start_(clock_type::now()), end_(start_ + opt.duration), rng_(6789),
          progress_timer_(ctx) {
        for (int k = 0; k < kinds; ++k) plan_.insert(plan_.end(), opt.count[k], static_cast<kind>(k));
        std::mt19937 rng(12345);  // mixed kinds while connecting, the same order every run
        std::shuffle(plan_.begin(), plan_.end(), rng);
        block_ = make_block();
    }

    void start() {
        const std::size_t workers = std::min(opt_.connect_concurrency, plan_.size());
        for (std::size_t i = 0; i < workers; ++i) asio::co_spawn(ctx_, connector(), rethrow);
        asio::co_spawn(ctx_, progress(), rethrow);
    }

    // Every planned connection (under --churn: every slot) is over.
    bool finished() const { return slots_done_ == plan_.size(); }

    // Prints the summary table; true when every kind behaved as expected.
    bool report(std::ostream& os) const {
        bool ok = finished();
        os << "loadgen: " << plan_.size() << (opt_.churn ? " connections at a time (churn)" : " connections") << " to "
           << opt_.server << " for " << opt_.duration.count() << " ms, interval " << opt_.interval.count() << " ms\n";
        os << std::left << std::setw(11) << "kind" << std::right << std::setw(7) << "wanted" << std::setw(8) << "opened"
           << std::setw(18) << "closed_by_server" << std::setw(28) << "closed at ms min/median/max" << std::setw(8)
           << "errors"
           << "  expected            result\n";
        for (int k = 0; k < kinds; ++k) {
            const kind_stats& s = stats_[k];
            const std::size_t wanted = opt_.count[k];
            const bool expect_closed = k != active;
            // Under --churn: every connection over and accounted for, each slot's first one (at least) closed by
            // the server for the kinds it must close, none by the server for active ones.
            const bool kind_ok =
                opt_.churn ? s.opened >= wanted && s.errors == 0 && s.finished == s.opened &&
                                 (expect_closed
                                      ? s.closed_by_server >= wanted && s.closed_by_server + s.open_at_end == s.opened
                                      : s.closed_by_server == 0 && s.ended_by_client + s.open_at_end == s.opened)
                           : s.opened == wanted && s.errors == 0 && s.finished == wanted &&
                                 s.closed_by_server == (expect_closed ? wanted : 0);
            ok = ok && kind_ok;
            std::string when = "-";
            if (!s.close_ms.empty()) {
                std::vector<long long> v = s.close_ms;
                std::sort(v.begin(), v.end());
                when =
                    std::to_string(v.front()) + "/" + std::to_string(v[v.size() / 2]) + "/" + std::to_string(v.back());
            }
            os << std::left << std::setw(11) << kind_names[k] << std::right << std::setw(7) << wanted << std::setw(8)
               << s.opened << std::setw(18) << s.closed_by_server << std::setw(28) << when << std::setw(8) << s.errors
               << "  " << std::left << std::setw(20)
               << (expect_closed ? "closed by server"
                   : opt_.churn  ? "closed by itself"
                                 : "open until the end")
               << (kind_ok ? "ok" : "UNEXPECTED") << std::right << "\n";
        }
        os << "(closed at: ms after the client started connecting)\n";
        if (opt_.churn) {
            os << "churn: wanted = open at a time, opened = over the whole run; still open when the run ended:";
            for (int k = 0; k < kinds; ++k) os << " " << kind_names[k] << " " << stats_[k].open_at_end;
            os << "; active closed by themselves (lifetime up): " << stats_[active].ended_by_client << "\n";
        }
        os << "active lines echoed: " << stats_[active].lines << "\n";
        for (int k = 0; k < kinds; ++k)
            for (const auto& [what, n] : stats_[k].error_kinds)
                os << "error: " << kind_names[k] << ": " << what << " x" << n << "\n";
        if (!finished())
            os << "error: " << plan_.size() - slots_done_ << (opt_.churn ? " slots" : " connections")
               << " did not finish in time\n";
        os << (ok ? "loadgen: as expected\n" : "loadgen: NOT as expected\n");
        return ok;
    }

private:
    static void rethrow(std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
    }

    // Operations end with tock::error::timed_out when the run is over.
    auto until_end() const { return tock::timeout_at(end_, tuple_awaitable); }

    // A planned connection (under --churn, a slot) is over.
    void slot_done() {
        ++slots_done_;
        if (finished()) progress_timer_.cancel();  // the progress line has nothing more to say
    }

    void error(kind k, const std::string& what) {
        ++stats_[k].errors;
        ++stats_[k].error_kinds[what];
    }

    // The server closed it: when, after the client started connecting.
    void closed(kind k, clock_type::time_point started) {
        ++stats_[k].closed_by_server;
        stats_[k].close_ms.push_back(ms_between(started, clock_type::now()));
    }

    // What a failed operation means for connection kind `k`: the run's end, the server closing it, or an error.
    void ended(kind k, const error_code& ec, clock_type::time_point started, const char* during) {
        if (ec == tock::error::timed_out) {  // the run is over and the server kept it open
            ++stats_[k].open_at_end;
            return;
        }
        if (closed_by_peer(ec))
            closed(k, started);
        else
            error(k, std::string(during) + ": " + ec.message());
    }

    // 16 KiB of lines for the non-reading clients.
    static std::string make_block() {
        std::string block;
        while (block.size() < 16 * 1024) block += "nonreading client line, never read back by its sender\n";
        return block;
    }

    // Opens a connection of kind `k`. Returns whether it is open, the socket, and when connecting started
    // (times are measured from there: the server cannot have accepted the connection earlier). A failure is
    // an error of kind `k` and a finished attempt, except, under --churn, a connect cut short by the run's end.
    asio::awaitable<std::tuple<bool, tcp::socket, clock_type::time_point>> connect(kind k) {
        const auto ex = co_await asio::this_coro::executor;
        tcp::socket socket(ex);
        error_code ec;
        socket.open(opt_.server.protocol(), ec);
        if (!ec && k == nonreading) {
            // Small buffers: the server's echoes back up (and its writes block) after a few KiB.
            socket.set_option(asio::socket_base::receive_buffer_size(4096), ec);
            socket.set_option(asio::socket_base::send_buffer_size(4096), ec);
        }
        const auto connecting = clock_type::now();
        if (!ec) {
            const auto limit = std::min(end_, connecting + std::chrono::seconds(5));
            std::tie(ec) = co_await socket.async_connect(opt_.server, tock::timeout_at(limit, tuple_awaitable));
        }
        if (ec) {
            error_code ignored;
            socket.close(ignored);
            if (!(opt_.churn && ec == tock::error::timed_out && clock_type::now() >= end_)) {
                error(k, "connect: " + ec.message());
                ++stats_[k].finished;
            }
            co_return std::make_tuple(false, std::move(socket), connecting);
        }
        ++stats_[k].opened;
        ++open_;
        co_return std::make_tuple(true, std::move(socket), connecting);
    }

    // Opens the planned connections, at most --connect-concurrency of these coroutines at a time.
    asio::awaitable<void> connector() {
        const auto ex = co_await asio::this_coro::executor;
        while (next_ < plan_.size()) {
            const kind k = plan_[next_++];
            auto [open, socket, connecting] = co_await connect(k);
            if (opt_.churn)
                asio::co_spawn(ex, churn_slot(k, std::move(socket), connecting, open), rethrow);
            else if (open)
                asio::co_spawn(ex, session(k, std::move(socket), connecting), rethrow);
            else
                slot_done();
        }
    }

    // Without --churn: one connection, then its slot is done.
    asio::awaitable<void> session(kind k, tcp::socket socket, clock_type::time_point started) {
        co_await connection(k, socket, started);
        slot_done();
    }

    // With --churn: the connection `socket` (if `open`), then new ones of the same kind, each after a random
    // pause of up to --interval-ms, until the end of the run.
    asio::awaitable<void> churn_slot(kind k, tcp::socket socket, clock_type::time_point started, bool open) {
        std::uniform_int_distribution<long long> pause_ms(0, opt_.interval.count());
        for (;;) {
            if (open) co_await connection(k, socket, started);
            if (clock_type::now() >= end_) break;
            co_await tock::sleep_until(std::min(end_, clock_type::now() + milliseconds(pause_ms(rng_))));
            if (clock_type::now() >= end_) break;
            std::tie(open, socket, started) = co_await connect(k);
        }
        slot_done();
    }

    // Runs an open connection of kind `k` until it is over, then closes it.
    asio::awaitable<void> connection(kind k, tcp::socket& socket, clock_type::time_point started) {
        switch (k) {
            case active: co_await run_active(socket, started); break;
            case idle: co_await run_idle(socket, started); break;
            case slowloris: co_await run_slowloris(socket, started); break;
            case nonreading: co_await run_nonreading(socket, started); break;
            default: break;
        }
        error_code ignored;
        socket.close(ignored);
        --open_;
        ++stats_[k].finished;
    }

    // A line every interval, each echo checked, until the end of the run (under --churn, of its lifetime).
    asio::awaitable<void> run_active(tcp::socket& socket, clock_type::time_point started) {
        error_code ignored;
        const std::string id = std::to_string(socket.local_endpoint(ignored).port());
        std::string received;
        auto stop = end_;
        if (opt_.churn) {
            const long long l = opt_.lifetime.count();
            std::uniform_int_distribution<long long> lifetime_ms(l / 2, l + l / 2);
            stop = std::min(end_, started + milliseconds(lifetime_ms(rng_)));
        }
        for (std::int64_t seq = 0;; ++seq) {
            if (clock_type::now() >= stop) break;
            const std::string line = "active " + id + " line " + std::to_string(seq) + "\n";
            auto [ec, n] = co_await asio::async_write(socket, asio::buffer(line), until_end());
            if (ec) co_return ended(active, ec, started, "write");
            auto [rec, m] = co_await asio::async_read_until(socket, asio::dynamic_buffer(received), '\n', until_end());
            if (rec) co_return ended(active, rec, started, "read");
            if (received.compare(0, m, line) != 0) co_return error(active, "wrong echo");
            received.erase(0, m);
            ++stats_[active].lines;
            const auto next = started + opt_.interval * (seq + 1);
            if (next >= stop) break;
            co_await tock::sleep_until(next);
        }
        if (clock_type::now() < end_)  // closed by itself (under --churn: its lifetime is up) before the run's end
            ++stats_[active].ended_by_client;
        else
            ++stats_[active].open_at_end;
    }

    // Nothing sent: waits for the server to close it.
    asio::awaitable<void> run_idle(tcp::socket& socket, clock_type::time_point started) {
        char byte;
        auto [ec, n] = co_await socket.async_read_some(asio::buffer(&byte, 1), until_end());
        if (!ec) co_return error(idle, "the server sent data");
        ended(idle, ec, started, "read");
    }

    // One byte per interval, never a newline; between bytes, a read that ends early if the server closes.
    asio::awaitable<void> run_slowloris(tcp::socket& socket, clock_type::time_point started) {
        for (std::int64_t i = 0;; ++i) {
            const char byte = static_cast<char>('a' + i % 26);
            auto [ec, n] = co_await asio::async_write(socket, asio::buffer(&byte, 1), until_end());
            if (ec) co_return ended(slowloris, ec, started, "write");
            const auto next = std::min(end_, started + opt_.interval * (i + 1));
            char reply;
            auto [rec, m] =
                co_await socket.async_read_some(asio::buffer(&reply, 1), tock::timeout_at(next, tuple_awaitable));
            if (!rec) co_return error(slowloris, "the server sent data");
            if (rec != tock::error::timed_out) co_return ended(slowloris, rec, started, "read");
            if (next == end_) {  // the run is over and the server kept it open
                ++stats_[slowloris].open_at_end;
                co_return;
            }
        }
    }

    // Lines as fast as the socket takes them, never reading: the server's echoes back up until it gives up.
    asio::awaitable<void> run_nonreading(tcp::socket& socket, clock_type::time_point started) {
        for (;;) {
            auto [ec, n] = co_await asio::async_write(socket, asio::buffer(block_), until_end());
            if (ec) co_return ended(nonreading, ec, started, "write");
        }
    }

    std::string progress_line() const {
        std::size_t opened = 0, errors = 0;
        for (const auto& s : stats_) {
            opened += s.opened;
            errors += s.errors;
        }
        std::ostringstream line;
        const std::chrono::duration<double> elapsed = clock_type::now() - start_;
        line << std::fixed << std::setprecision(1) << elapsed.count() << " s  connected " << opened;
        if (!opt_.churn) line << "/" << plan_.size();
        line << "  open " << open_ << "  closed by server:";
        for (int k = 0; k < kinds; ++k) line << " " << kind_names[k] << " " << stats_[k].closed_by_server;
        line << "  errors " << errors;
        return line.str();
    }

    // The live progress line: rewritten in place 4 times a second on a terminal, else a line a second.
    asio::awaitable<void> progress() {
        if (opt_.quiet) co_return;
        const bool tty = ::isatty(STDERR_FILENO) != 0;
        const milliseconds period(tty ? 250 : 1000);
        auto next = start_;
        while (!finished()) {
            next += period;
            progress_timer_.expires_at(next);
            co_await progress_timer_.async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled at the end
            if (finished()) break;
            if (tty)
                std::cerr << "\r" << progress_line() << "\x1b[K" << std::flush;
            else
                std::cerr << progress_line() << std::endl;
        }
        if (tty) std::cerr << "\r" << progress_line() << "\x1b[K" << std::endl;
    }

    asio::io_context& ctx_;
    const options opt_;
    const clock_type::time_point start_;
    const clock_type::time_point end_;
    std::vector<kind> plan_;
    std::size_t next_ = 0;
    std::size_t slots_done_ = 0;
    std::mt19937 rng_;  // pauses and lifetimes under --churn
    std::size_t open_ = 0;
    std::array<kind_stats, kinds> stats_;
    std::string block_;
    tock::timer progress_timer_;
};

}  // namespace

int main(int argc, char** argv) {
    const options opt = parse(argc, argv);
    std::size_t total = 0;
    for (std::size_t n : opt.count) total += n;
    const auto files = raise_open_file_limit();
    if (files < total + 64) {
        std::cerr << "loadgen: " << total << " connections need more open files than the " << files << " allowed\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        load_generator gen(ctx, opt);
        gen.start();
        // Every operation ends by the end of the run; the margin only matters if something is wrong.
        ctx.run_for(opt.duration + std::chrono::seconds(10));
        return gen.report(std::cout) ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "loadgen: " << e.what() << std::endl;
        return 1;
    }
}
