// examples/server_core.hpp: the line-echo server of examples/server.cpp, as a class that a test can run
// in-process on its own thread and io_context.
//
// Each connection is a coroutine that reads chunks, echoes every complete line back and enforces:
//   - an idle limit: no byte for `idle` (a tock::deadline bound to the reads, moved later on every chunk),
//   - a request limit: a line must be complete `request` after its first byte arrived (slowloris defense;
//     the same read deadline, moved to whichever of the two limits comes first),
//   - a write limit: each echo must be written within `write` (a second deadline, bound to the writes), so a
//     client that stops reading is dropped once its socket buffers are full (accepted sockets get a small
//     SO_SNDBUF to make that happen soon),
//   - a connection limit: past `max_connections` open connections, new ones are accepted and closed at once.
// stop() (thread-safe) closes the acceptor and every connection; run_until_stopped() returns once the
// io_context has drained, with the final counters.
//
// Single-threaded by design: one io_context run by one thread (per-operation cancellation, which deadlines
// use, is not thread-safe in Asio without strands).
#ifndef TOCK_EXAMPLES_SERVER_CORE_HPP
#define TOCK_EXAMPLES_SERVER_CORE_HPP

#include <tock/deadline.hpp>
#include <tock/timeout.hpp>
#include <tock/tock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iostream>
#include <list>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace tock_examples {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

struct server_config {
    asio::ip::address address = asio::ip::make_address("127.0.0.1");
    unsigned short port = 0;                    // 0: an ephemeral port, see line_server::local_endpoint()
    std::chrono::milliseconds idle{5000};       // no byte received for this long: closed (closed_idle)
    std::chrono::milliseconds request{3000};    // a line not complete this long after its first byte: closed
    std::chrono::milliseconds write{3000};      // an echo not written within this: closed (closed_write_timeout)
    std::size_t max_connections = 10000;        // open connections past which new ones are accepted and closed
    int send_buffer = 4096;                     // SO_SNDBUF of accepted sockets; 0 keeps the system's default
    std::size_t max_line = 64 * 1024;           // a longer line closes the connection (closed_other)
};

// What the server did. Every accepted connection is open or was closed for exactly one reason:
// accepted == open_connections + closed_idle + closed_request_timeout + closed_write_timeout + closed_by_peer
//             + closed_by_shutdown + closed_other.
// Rejected connections (over the limit) are not counted in accepted.
struct server_counters {
    std::uint64_t accepted = 0;
    std::uint64_t served_lines = 0;  // lines echoed back completely
    std::uint64_t closed_idle = 0;
    std::uint64_t closed_request_timeout = 0;
    std::uint64_t closed_write_timeout = 0;
    std::uint64_t closed_by_peer = 0;  // end of stream, or reset, from the client
    std::uint64_t rejected_over_limit = 0;
    std::uint64_t open_connections = 0;
    std::uint64_t pending_timers = 0;      // tock::timer_service::pending() of the server's io_context
    std::uint64_t closed_by_shutdown = 0;  // open when stop() was called
    std::uint64_t closed_other = 0;        // a line longer than max_line, or an unexpected socket error

    template <typename F>
    void for_each(F&& f) const {
        f("accepted", accepted);
        f("served_lines", served_lines);
        f("closed_idle", closed_idle);
        f("closed_request_timeout", closed_request_timeout);
        f("closed_write_timeout", closed_write_timeout);
        f("closed_by_peer", closed_by_peer);
        f("rejected_over_limit", rejected_over_limit);
        f("open_connections", open_connections);
        f("pending_timers", pending_timers);
        f("closed_by_shutdown", closed_by_shutdown);
        f("closed_other", closed_other);
    }
};

// One counter per line, as `name: value`.
inline std::ostream& operator<<(std::ostream& os, const server_counters& c) {
    c.for_each([&os](const char* name, std::uint64_t value) { os << name << ": " << value << '\n'; });
    return os;
}

// Raises the soft limit on open files to the hard limit; returns the new soft limit.
inline std::uint64_t raise_open_file_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return static_cast<std::uint64_t>(limit.rlim_cur);
}

class line_server {
public:
    using clock = std::chrono::steady_clock;

    // Opens, binds and listens at once (throws boost::system::system_error if it cannot), so local_endpoint()
    // is known before the context runs. `ctx` must outlive the server and be run by one thread at a time.
    line_server(asio::io_context& ctx, server_config config) : ctx_(ctx), config_(std::move(config)), acceptor_(ctx) {
        const tcp::endpoint endpoint(config_.address, config_.port);
        acceptor_.open(endpoint.protocol());
        acceptor_.set_option(asio::socket_base::reuse_address(true));
        acceptor_.bind(endpoint);
        acceptor_.listen(asio::socket_base::max_listen_connections);
        endpoint_ = acceptor_.local_endpoint();
    }

    line_server(const line_server&) = delete;
    line_server& operator=(const line_server&) = delete;

    // Where the server listens. Thread-safe.
    tcp::endpoint local_endpoint() const { return endpoint_; }

    const server_config& config() const noexcept { return config_; }

    // Starts accepting (once the context runs). Call once, before the context runs or from its thread.
    void start() {
        asio::co_spawn(ctx_, accept_loop(), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    }

    // Stops accepting and closes every connection; the context's run() then returns once they have wound
    // down. Thread-safe, idempotent; the server must outlive the context's run().
    void stop() {
        asio::post(ctx_, [this] { shut_down(); });
    }

    // A snapshot of the counters. Thread-safe; while the server runs each value is read on its own.
    server_counters counters() const {
        server_counters c;
        c.accepted = accepted_.load(std::memory_order_relaxed);
        c.served_lines = served_lines_.load(std::memory_order_relaxed);
        c.closed_idle = closed_idle_.load(std::memory_order_relaxed);
        c.closed_request_timeout = closed_request_timeout_.load(std::memory_order_relaxed);
        c.closed_write_timeout = closed_write_timeout_.load(std::memory_order_relaxed);
        c.closed_by_peer = closed_by_peer_.load(std::memory_order_relaxed);
        c.rejected_over_limit = rejected_over_limit_.load(std::memory_order_relaxed);
        c.open_connections = open_connections_.load(std::memory_order_relaxed);
        c.closed_by_shutdown = closed_by_shutdown_.load(std::memory_order_relaxed);
        c.closed_other = closed_other_.load(std::memory_order_relaxed);
        c.pending_timers = tock::timer_service::of(ctx_.get_executor()).pending();
        return c;
    }

    // start(), then runs the context on the calling thread until stop() has closed everything and the context
    // has nothing left to do. Returns the final counters (pending_timers: what is left in the timer service).
    server_counters run_until_stopped() {
        start();
        ctx_.run();
        return counters();
    }

private:
    enum class close_reason { peer, idle, request, write, shutdown, other };

    struct connection {
        explicit connection(tcp::socket s) : socket(std::move(s)) {}
        tcp::socket socket;
    };

    // Registers a connection for shut_down() for as long as its coroutine runs.
    class registration {
    public:
        registration(std::list<connection*>& list, connection& c) : list_(list), pos_(list.insert(list.end(), &c)) {}
        registration(const registration&) = delete;
        registration& operator=(const registration&) = delete;
        ~registration() { list_.erase(pos_); }

    private:
        std::list<connection*>& list_;
        std::list<connection*>::iterator pos_;
    };

    static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
        counter.fetch_add(n, std::memory_order_relaxed);
    }

    void shut_down() {
        if (stopping_) return;
        stopping_ = true;
        error_code ignored;
        acceptor_.close(ignored);
        // Closing a socket completes its pending operation with operation_aborted (and any later one with
        // bad_descriptor), so every connection coroutine ends at its next step.
        for (connection* c : connections_) c->socket.close(ignored);
    }

    asio::awaitable<void> accept_loop() {
        const auto ex = co_await asio::this_coro::executor;
        while (!stopping_) {
            auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
            if (stopping_) break;
            if (ec) {
                if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) break;
                // Out of file descriptors or memory, or a connection reset while queued: back off a little, and
                // say so at most once a second.
                ++accept_errors_;
                if (clock::now() >= next_accept_report_) {
                    std::cerr << "accept: " << ec.message() << " (" << accept_errors_ << " accept errors so far)"
                              << std::endl;
                    next_accept_report_ = clock::now() + std::chrono::seconds(1);
                }
                co_await tock::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            if (open_connections_.load(std::memory_order_relaxed) >= config_.max_connections) {
                error_code ignored;
                socket.close(ignored);
                add(rejected_over_limit_);
                continue;
            }
            add(accepted_);
            add(open_connections_);
            error_code ignored;
            if (config_.send_buffer > 0)
                socket.set_option(asio::socket_base::send_buffer_size(config_.send_buffer), ignored);
            socket.set_option(tcp::no_delay(true), ignored);
            asio::co_spawn(ex, session(std::move(socket)), [](std::exception_ptr e) {
                if (e) std::rethrow_exception(e);
            });
        }
    }

    // One connection: read a chunk, echo its complete lines, repeat.
    asio::awaitable<void> session(tcp::socket socket) {
        connection conn(std::move(socket));
        registration reg(connections_, conn);
        const auto ex = co_await asio::this_coro::executor;
        tock::deadline read_deadline(ex, config_.idle);
        tock::deadline write_deadline(ex);

        std::array<char, 4096> chunk;
        std::string partial;  // the start of a line whose end has not arrived
        std::optional<clock::time_point> first_byte;  // when the first byte of `partial` arrived
        bool request_limit_first = false;  // the read deadline is the request limit, not the idle one
        std::string echo;
        close_reason reason = close_reason::other;

        for (;;) {
            auto [ec, n] = co_await conn.socket.async_read_some(
                asio::buffer(chunk), read_deadline.bind(asio::as_tuple(asio::use_awaitable)));
            if (ec) {
                if (ec == tock::error::timed_out)
                    reason = request_limit_first ? close_reason::request : close_reason::idle;
                else
                    reason = peer_or_other(ec);
                break;
            }

            // Split off the complete lines, each echoed with its '\n'.
            echo.clear();
            std::uint64_t lines = 0;
            const char* p = chunk.data();
            const char* const end = p + n;
            while (p != end) {
                const char* newline = std::find(p, end, '\n');
                if (newline == end) {
                    if (partial.empty()) first_byte = clock::now();
                    partial.append(p, end);
                    break;
                }
                if (partial.empty()) {
                    echo.append(p, newline + 1);
                } else {
                    echo += partial;
                    echo.append(p, newline + 1);
                    partial.clear();
                    first_byte.reset();
                }
                ++lines;
                p = newline + 1;
            }
            if (partial.size() > config_.max_line) {
                reason = close_reason::other;
                break;
            }

            if (!echo.empty()) {
                write_deadline.expires_after(config_.write);
                auto [wec, written] = co_await asio::async_write(
                    conn.socket, asio::buffer(echo), write_deadline.bind(asio::as_tuple(asio::use_awaitable)));
                if (wec) {
                    reason = wec == tock::error::timed_out ? close_reason::write : peer_or_other(wec);
                    break;
                }
                add(served_lines_, lines);
            }

            // Idle counts from now (after any echo was written); a started line must also end in time. This
            // mostly moves the deadline later, which is O(1); only the start of a line with a request limit
            // shorter than the idle one moves it earlier (O(log N)).
            const clock::time_point idle_end = clock::now() + config_.idle;
            if (first_byte && *first_byte + config_.request <= idle_end) {
                request_limit_first = true;
                read_deadline.expires_at(*first_byte + config_.request);
            } else {
                request_limit_first = false;
                read_deadline.expires_at(idle_end);
            }
        }

        if (stopping_) reason = close_reason::shutdown;  // whatever ended it, stop() was called meanwhile
        count_close(reason);
        error_code ignored;
        conn.socket.close(ignored);  // with unread data this resets the connection, which is what we want
    }

    close_reason peer_or_other(const error_code& ec) const {
        if (stopping_) return close_reason::shutdown;
        if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe)
            return close_reason::peer;
        return close_reason::other;
    }

    void count_close(close_reason reason) {
        switch (reason) {
            case close_reason::peer: add(closed_by_peer_); break;
            case close_reason::idle: add(closed_idle_); break;
            case close_reason::request: add(closed_request_timeout_); break;
            case close_reason::write: add(closed_write_timeout_); break;
            case close_reason::shutdown: add(closed_by_shutdown_); break;
            case close_reason::other: add(closed_other_); break;
        }
        open_connections_.fetch_sub(1, std::memory_order_relaxed);
    }

    asio::io_context& ctx_;
    const server_config config_;
    tcp::acceptor acceptor_;
    tcp::endpoint endpoint_;
    bool stopping_ = false;  // only touched on the context's thread
    std::list<connection*> connections_;  // likewise
    std::uint64_t accept_errors_ = 0;  // likewise
    clock::time_point next_accept_report_{};

    std::atomic<std::uint64_t> accepted_{0};
    std::atomic<std::uint64_t> served_lines_{0};
    std::atomic<std::uint64_t> closed_idle_{0};
    std::atomic<std::uint64_t> closed_request_timeout_{0};
    std::atomic<std::uint64_t> closed_write_timeout_{0};
    std::atomic<std::uint64_t> closed_by_peer_{0};
    std::atomic<std::uint64_t> rejected_over_limit_{0};
    std::atomic<std::uint64_t> open_connections_{0};
    std::atomic<std::uint64_t> closed_by_shutdown_{0};
    std::atomic<std::uint64_t> closed_other_{0};
};

}  // namespace tock_examples

#endif
