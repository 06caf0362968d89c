// test/fuzz/fuzz_threads.cpp: libFuzzer target for ThreadSanitizer. Two threads each decode half of the
// input into operations on their own timers, deadlines and sleeps (tock::manual_clock), on one io_context
// run by two more threads; time is advanced from both. Objects whose waits use per-operation cancellation
// live on their thread's strand and are only touched there (as Asio requires); the others are touched by
// their thread only, with handlers on the context's executor. Checks: every wait completes exactly once or
// is destroyed at shutdown, with an allowed error, never before its expiry; invariants_hold() at the end;
// no TSan report. Bounded: at most 100 operations per thread, no sleeping.
#include <tock/tock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

// A sleep whose handler is bound to a strand and a cancellation slot, emitted on that strand while another
// thread fires it, is a library bug (test/fuzz/repro/sleep_emit_race.cpp): such sleeps get no slot unless 1.
#ifndef TOCK_FUZZ_SLEEP_EMIT_RACE
#define TOCK_FUZZ_SLEEP_EMIT_RACE 1
#endif

namespace {

namespace asio = boost::asio;
using error_code = boost::system::error_code;
using clock_type = tock::manual_clock;
using time_point = clock_type::time_point;
using timer_type = tock::basic_timer<clock_type>;
using deadline_type = tock::basic_deadline<clock_type>;
using service_type = tock::basic_timer_service<clock_type>;
using strand_type = asio::strand<asio::io_context::executor_type>;
using socket_type = asio::local::stream_protocol::socket;
using std::chrono::milliseconds;

constexpr std::size_t ops_per_thread = 100;
constexpr std::size_t max_waits = 2 * ops_per_thread;

// The input being run, saved by fail(): abort() would go through libFuzzer's crash handler, which is not
// async-signal-safe and can deadlock under TSan while other threads hold its internal locks.
const std::uint8_t* current_data = nullptr;
std::size_t current_size = 0;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_threads: check failed: %s\n", what);
  const char* path = std::getenv("TOCK_FUZZ_FAILED_INPUT");
  if (path == nullptr) path = "fuzz_threads-failed-input";
  if (std::FILE* f = std::fopen(path, "wb")) {
    std::fwrite(current_data, 1, current_size, f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz_threads: input written to %s\n", path);
  }
  std::fflush(stderr);
  std::_Exit(1);
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) fail(#cond); \
  } while (0)

struct wait_rec {
  std::atomic<int> completions{0};
  std::atomic<int> destructions{0};
  time_point expiry{};  // written before the wait starts; max(): no time check (deadline waits)
};

struct model {
  std::array<wait_rec, max_waits> waits;
  std::atomic<int> next{0};
  std::atomic<bool> shutting_down{false};

  int add(time_point expiry) {
    const int id = next.fetch_add(1);
    CHECK(id < static_cast<int>(max_waits));
    waits[id].expiry = expiry;
    return id;
  }
};

struct guard {
  model* m;
  int id;
  bool called = false;
  guard(model* m_, int id_) : m(m_), id(id_) {}
  guard(guard&& o) noexcept : m(o.m), id(o.id), called(o.called) { o.m = nullptr; }
  guard& operator=(guard&&) = delete;
  ~guard() {
    if (m && !called) {
      CHECK(m->shutting_down.load());
      CHECK(m->waits[id].destructions.fetch_add(1) + m->waits[id].completions.load() == 0);
    }
  }
};

struct wait_handler {
  guard g;
  void operator()(const error_code& ec) {
    g.called = true;
    wait_rec& w = g.m->waits[g.id];
    CHECK(w.completions.fetch_add(1) == 0);
    CHECK(!ec || ec == asio::error::operation_aborted || ec == tock::error::capacity_exceeded);
    if (!ec) CHECK(w.expiry != time_point::max() ? !(clock_type::now() < w.expiry) : true);
  }
};

// A read's handler, on the strand: also clears the worker's "a read is pending" flag.
struct read_handler {
  guard g;
  bool* reading;
  void operator()(const error_code& ec, std::size_t) {
    g.called = true;
    *reading = false;
    CHECK(g.m->waits[g.id].completions.fetch_add(1) == 0);
    CHECK(!ec || ec == asio::error::operation_aborted || ec == tock::error::timed_out ||
          ec == tock::error::capacity_exceeded);
  }
};

// One issuing thread's objects and operations.
struct worker {
  model& m;
  asio::io_context& ctx;
  FuzzedDataProvider in;
  std::optional<strand_type> strand;  // reset before the context goes
  // Touched by this thread only; handlers on the context's executor.
  std::array<std::optional<timer_type>, 2> timers;
  std::array<time_point, 2> timer_expiry{};
  std::optional<deadline_type> dl;
  // Touched on the strand only; handlers on the strand.
  std::optional<timer_type> stimer;
  time_point stimer_expiry{};
  std::array<asio::cancellation_signal, 2> signals;
  std::array<int, 2> sig_wait{-1, -1};
  std::optional<deadline_type> sdl;
  std::optional<socket_type> reader;  // reads are started on the strand
  bool reading = false;
  std::array<char, 1> buf{};
  // Written to by this thread only.
  std::optional<socket_type> writer;

  worker(model& m_, asio::io_context& c, const std::uint8_t* data, std::size_t size)
      : m(m_), ctx(c), in(data, size), strand(std::in_place, c.get_executor()) {
    reader.emplace(c);
    writer.emplace(c);
    asio::local::connect_pair(*reader, *writer);
  }

  time_point pick_time() {
    const time_point now = clock_type::now();
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: return time_point::max();
      case 1: return now - milliseconds(1);
      default: return now + milliseconds(in.ConsumeIntegralInRange<int>(0, 8));
    }
  }

  // Runs `f` on the strand and waits for it (the context's runners execute it).
  template <typename F>
  void on_strand(F f) {
    std::promise<void> done;
    asio::post(*strand, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  bool sig_free(int s) const {
    const int id = sig_wait[s];
    return id < 0 || m.waits[id].completions.load() + m.waits[id].destructions.load() > 0;
  }

  void step() {
    const int t = in.ConsumeIntegralInRange<int>(0, 1);
    switch (in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
        timer_expiry[t] = pick_time();
        timers[t].emplace(ctx.get_executor(), timer_expiry[t]);
        break;
      case 1: timers[t].reset(); break;
      case 2:
        if (timers[t] && !timers[1 - t]) {
          timers[1 - t].emplace(std::move(*timers[t]));
          timer_expiry[1 - t] = timer_expiry[t];
          timers[t].reset();  // moved-from: destroyed (see TOCK_FUZZ_KNOWN_BUGS in fuzz_ops)
        } else if (timers[t] && timers[1 - t]) {
          *timers[1 - t] = std::move(*timers[t]);
          timer_expiry[1 - t] = timer_expiry[t];
          timers[t].reset();
        }
        break;
      case 3:
        if (timers[t]) timers[t]->async_wait(wait_handler{guard(&m, m.add(timer_expiry[t]))});
        break;
      case 4:
        if (timers[t]) timers[t]->cancel();
        break;
      case 5:
        if (timers[t]) timers[t]->cancel_one();
        break;
      case 6:
        if (timers[t]) {
          timer_expiry[t] = pick_time();
          timers[t]->expires_at(timer_expiry[t]);
        }
        break;
      case 7: {
        const time_point e = pick_time();
        if (!dl)
          dl.emplace(ctx.get_executor(), e);
        else
          dl->expires_at(e);
        break;
      }
      case 8:
        if (dl) dl->async_wait(wait_handler{guard(&m, m.add(time_point::max()))});
        break;
      case 9:
        if (dl && in.ConsumeBool())
          dl->cancel();
        else
          dl.reset();
        break;
      case 10: {
        const time_point e = pick_time();
        tock::async_sleep_until(ctx, e, wait_handler{guard(&m, m.add(e))});
        break;
      }
      case 11: clock_type::advance(milliseconds(in.ConsumeIntegralInRange<int>(0, 4))); break;
      case 15:
        if (in.ConsumeBool()) {
          const char b = 'x';
          asio::write(*writer, asio::buffer(&b, 1));
          break;
        }
        [[fallthrough]];
      case 12: {
        const std::size_t n = in.ConsumeBool() ? 1u << 20 : in.ConsumeIntegralInRange<std::size_t>(0, 4);
        service_type::of(ctx.get_executor()).set_capacity(n);
        break;
      }
      default: strand_step(); break;
    }
  }

  // Operations with per-operation cancellation: on the strand.
  void strand_step() {
    const int op = in.ConsumeIntegralInRange<int>(0, 9);
    const int s = in.ConsumeIntegralInRange<int>(0, 1);
    const time_point e = pick_time();
    const auto type = in.ConsumeBool() ? asio::cancellation_type::terminal : asio::cancellation_type::partial;
    on_strand([&] {
      switch (op) {
        case 0:
          stimer_expiry = e;
          stimer.emplace(ctx.get_executor(), e);
          break;
        case 1:
          if (stimer && sig_free(s)) {
            const int id = m.add(stimer_expiry);
            sig_wait[s] = id;
            stimer->async_wait(asio::bind_cancellation_slot(signals[s].slot(),
                                                            asio::bind_executor(*strand, wait_handler{guard(&m, id)})));
          }
          break;
        case 2:
          if (!TOCK_FUZZ_SLEEP_EMIT_RACE) {
            tock::async_sleep_until(ctx, e, asio::bind_executor(*strand, wait_handler{guard(&m, m.add(e))}));
          } else if (sig_free(s)) {
            const int id = m.add(e);
            sig_wait[s] = id;
            tock::async_sleep_until(ctx, e,
                                    asio::bind_cancellation_slot(
                                        signals[s].slot(), asio::bind_executor(*strand, wait_handler{guard(&m, id)})));
          }
          break;
        case 3: signals[s].emit(type); break;
        case 4:
          if (stimer) stimer->cancel();
          break;
        case 5: stimer.reset(); break;
        case 6:  // a read bound to the strand's deadline
          if (sdl && !reading) {
            reading = true;
            const int id = m.add(time_point::max());
            if (sig_free(s)) {
              sig_wait[s] = id;
              reader->async_read_some(
                  asio::buffer(buf),
                  asio::bind_cancellation_slot(
                      signals[s].slot(),
                      sdl->bind(asio::bind_executor(*strand, read_handler{guard(&m, id), &reading}), type)));
            } else {
              reader->async_read_some(asio::buffer(buf),
                                      sdl->bind(asio::bind_executor(*strand, read_handler{guard(&m, id), &reading})));
            }
          }
          break;
        case 7:  // a read with a steady_clock timeout that never fires in a run, or is due at once
          if (!reading) {
            reading = true;
            const int id = m.add(time_point::max());
            const auto d = e == time_point::max() ? std::chrono::steady_clock::duration(0)
                                                  : std::chrono::steady_clock::duration(std::chrono::hours(10));
            reader->async_read_some(
                asio::buffer(buf),
                tock::timeout(d, asio::bind_executor(*strand, read_handler{guard(&m, id), &reading}), type));
          }
          break;
        case 8:
          if (!sdl)
            sdl.emplace(ctx.get_executor(), e);
          else
            sdl->expires_at(e);
          break;
        default:
          if (sdl && type == asio::cancellation_type::terminal)
            sdl->cancel();
          else
            sdl.reset();
          break;
      }
    });
  }

  void work() {
    for (std::size_t i = 0; i < ops_per_thread && in.remaining_bytes() > 0; ++i) step();
    timers[0].reset();
    timers[1].reset();
    dl.reset();
    on_strand([&] {
      stimer.reset();
      sdl.reset();
      reader.reset();
      for (auto& s : signals) s.emit(asio::cancellation_type::terminal);
    });
    writer.reset();  // after the reader: a pending read is aborted, it does not see the end of the stream
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  current_data = data;
  current_size = size;
  auto m = std::make_unique<model>();
  {
    std::optional<asio::io_context> ctx(std::in_place, 2);
    service_type::of(ctx->get_executor()).set_capacity(1u << 20);
    auto work = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(ctx->get_executor());
    std::vector<std::thread> runners;
    for (int i = 0; i < 2; ++i) runners.emplace_back([&] { ctx->run(); });
    {
      const std::size_t half = size / 2;
      worker a(*m, *ctx, data, half), b(*m, *ctx, data + half, size - half);
      std::thread ta([&] { a.work(); });
      std::thread tb([&] { b.work(); });
      ta.join();
      tb.join();
      // Let what is due complete, then stop: waits at time_point::max() or in the future stay pending.
      std::promise<void> flushed;
      asio::post(*ctx, [&] { flushed.set_value(); });
      flushed.get_future().wait();
      ctx->stop();
      for (auto& r : runners) r.join();
      CHECK(service_type::of(ctx->get_executor()).invariants_hold());
      work.reset();
      a.strand.reset();
      b.strand.reset();
      m->shutting_down = true;
      ctx.reset();  // destroys the pending handlers (the workers' signals are still alive)
    }
  }
  for (int i = 0; i < m->next.load(); ++i) CHECK(m->waits[i].completions.load() + m->waits[i].destructions.load() == 1);
  return 0;
}
