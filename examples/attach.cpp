// tock timers on an io_context that already does other work, all on one thread:
//   - a TCP echo server on 127.0.0.1 (ephemeral port) and a client that pings it,
//   - a few posted jobs,
//   - a heartbeat: a tock::timer re-armed at fixed intervals with expires_at(expiry() + period),
//   - a read timeout: a tock::timer that cancels the client's socket when no reply comes.
// Everything stops by itself after about 0.4 s; main prints a summary.
#include <tock/tock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

namespace {

const auto program_start = std::chrono::steady_clock::now();

long long ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

void log(const std::string& what) { std::cout << "[" << ms_since(program_start) << " ms] " << what << std::endl; }

void rethrow(std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
}

struct summary {
    int pings_echoed = 0;
    int heartbeats = 0;
    int posted_jobs = 0;
    bool read_timed_out = false;
};

// Beats every `period` until stopped. Re-arming from the previous expiry, not from now,
// keeps the beats on a fixed schedule however late a handler runs.
class heartbeat {
public:
    heartbeat(asio::io_context& ctx, std::chrono::milliseconds period, int& beats)
        : timer_(ctx, period), period_(period), beats_(beats) {
        wait();
    }
    void stop() { timer_.cancel(); }

private:
    void wait() {
        timer_.async_wait([this](error_code ec) {
            if (ec) return;  // stopped
            log("heartbeat " + std::to_string(++beats_));
            timer_.expires_at(timer_.expiry() + period_);
            wait();
        });
    }

    tock::timer timer_;
    std::chrono::milliseconds period_;
    int& beats_;
};

asio::awaitable<void> echo_session(tcp::socket socket) {
    char data[256];
    for (;;) {
        auto [ec, n] = co_await socket.async_read_some(asio::buffer(data), asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;  // the client closed the connection
        co_await asio::async_write(socket, asio::buffer(data, n), asio::use_awaitable);
    }
}

asio::awaitable<void> echo_server(tcp::acceptor& acceptor) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;  // the acceptor was closed
        asio::co_spawn(acceptor.get_executor(), echo_session(std::move(socket)), rethrow);
    }
}

asio::awaitable<void> client(tcp::endpoint server, summary& result) {
    // Shared with the timeout handler below, which may run after this coroutine has finished.
    auto socket = std::make_shared<tcp::socket>(co_await asio::this_coro::executor);
    co_await socket->async_connect(server, asio::use_awaitable);

    for (int i = 1; i <= 3; ++i) {
        std::string ping = "ping " + std::to_string(i), reply(ping.size(), '\0');
        auto sent = std::chrono::steady_clock::now();
        co_await asio::async_write(*socket, asio::buffer(ping), asio::use_awaitable);
        co_await asio::async_read(*socket, asio::buffer(reply), asio::use_awaitable);
        log("client: '" + reply + "' echoed in " + std::to_string(ms_since(sent)) + " ms");
        result.pings_echoed += reply == ping;
        co_await tock::sleep_for(50ms);
    }

    // Nothing was sent, so nothing comes back: the timeout ends the read.
    tock::timer timeout(socket->get_executor(), 200ms);
    timeout.async_wait([socket](error_code ec) {
        if (!ec) socket->cancel();
    });
    char byte;
    auto [ec, n] = co_await socket->async_read_some(asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
    timeout.cancel();
    result.read_timed_out = ec == asio::error::operation_aborted;
    log("client: read without reply ended: " + ec.message());
}

}  // namespace

int main() {
    asio::io_context ctx;
    summary result;

    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(ctx, echo_server(acceptor), rethrow);
    log("echo server on " + acceptor.local_endpoint().address().to_string() + ":" +
        std::to_string(acceptor.local_endpoint().port()));

    for (int i = 0; i < 3; ++i) asio::post(ctx, [&] { ++result.posted_jobs; });

    heartbeat beat(ctx, 100ms, result.heartbeats);

    asio::co_spawn(ctx, client(acceptor.local_endpoint(), result), [&](std::exception_ptr e) {
        beat.stop();
        acceptor.close();
        rethrow(e);
    });

    ctx.run();  // returns when the client, the server and the heartbeat have all finished

    log("summary: " + std::to_string(result.pings_echoed) + " pings echoed, " + std::to_string(result.heartbeats) +
        " heartbeats, " + std::to_string(result.posted_jobs) + " posted jobs, read timeout " +
        (result.read_timed_out ? "fired" : "did NOT fire"));
    bool ok = result.pings_echoed == 3 && result.read_timed_out && result.posted_jobs == 3 && result.heartbeats > 0;
    return ok ? 0 : 1;
}
