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
constexpr std::size_t max_waits = 1024;  // the cross scenario's bursts of sleeps

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


// ---------------------------------------------------------------------------------------------------------
// The cross-context scenario (inputs that start with 'X'). Context A is run by ONE thread and owns every
// timer, deadline, sleep and timed operation but B's reads; they are all started, cancelled, re-aimed, moved
// and destroyed by the fuzzer's own thread (which does not run A), as Asio allows for objects used by one
// thread at a time. Context B is run by another thread; handlers may be bound to a strand of B and to the
// slot of a cancellation signal that lives on that strand (created, emitted and destroyed there only,
// concurrently with the fuzzer thread's calls on the timer or deadline). At the end, either everything is
// drained, or the strand is held, emits are queued on it, the waits fire, A is destroyed (its timers first)
// and only then the strand runs: the emits, then the handlers A left there. A periodic task on a host
// context without a work guard, running on B, must keep the host's run() going. A socket pair on B gives
// timed operations of another context: its reads bound to A's deadlines (or timed out by B's own service),
// their handlers on B or B's strand; a held strand holds them back, so they are closed after A is gone.
// Checks (besides the ones above): every timed operation whose deadline passed (a due tock::timeout, a
// deadline of A at or before now, B's reads included), every wait that fired or was aborted, completes
// within a bounded time (2 s); a periodic task keeps running and its host's run() does not return while it
// is scheduled.

using steady = std::chrono::steady_clock;
using steady_deadline = tock::basic_deadline<steady>;
using steady_service = tock::basic_timer_service<steady>;
using std::chrono::hours;

// A handler for waits (void(error_code)) and reads (void(error_code, size_t)); a timed operation may also
// report timed_out.
struct cross_handler {
  guard g;
  std::atomic<bool>* reading = nullptr;  // a read's: cleared on completion
  void done(const error_code& ec) {
    g.called = true;
    wait_rec& w = g.m->waits[g.id];
    CHECK(w.completions.fetch_add(1) == 0);
    CHECK(!ec || ec == asio::error::operation_aborted || ec == tock::error::timed_out ||
          ec == tock::error::capacity_exceeded);
    if (!ec && w.expiry != time_point::max()) CHECK(!(clock_type::now() < w.expiry));
  }
  void operator()(const error_code& ec) { done(ec); }
  void operator()(const error_code& ec, std::size_t) {
    if (reading) reading->store(false);
    done(ec);
  }
};

struct cross {
  static constexpr int n_sigs = 3;
  model& m;
  FuzzedDataProvider in;
  std::optional<asio::io_context> a;  // run by one thread
  std::optional<asio::io_context> b;  // run by another
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> a_work, b_work;
  std::thread ta, tb;
  std::optional<strand_type> strand;  // of B
  // The fuzzer thread's objects (on A). Each timer and deadline keeps the ids of the waits started on it,
  // for the progress check.
  std::array<std::optional<timer_type>, 3> timers;
  std::array<time_point, 3> timer_expiry{};
  std::array<std::vector<int>, 3> timer_waits;
  std::array<std::optional<steady_deadline>, 2> dls;
  std::array<steady::time_point, 2> dl_expiry{};
  std::array<std::vector<int>, 2> dl_waits;
  std::array<std::vector<int>, 2> dl_bound;  // its bound operations: detached, not aborted, when it goes away
  std::optional<asio::steady_timer> st;  // an operation to time out: a wait that never ends by itself
  std::optional<socket_type> reader, writer;
  std::atomic<bool> reading{false};
  // A socket pair on B: its reads are bound to A's deadlines (or timed out by B's own service); their handlers
  // run on B (or its strand), so a held strand holds them back (strand_bound).
  std::optional<socket_type> b_reader, b_writer;
  std::atomic<bool> b_reading{false};
  std::vector<int> required;  // ids that must complete: due, fired or aborted
  // On the strand only.
  std::array<std::unique_ptr<asio::cancellation_signal>, n_sigs> sigs;
  // The fuzzer thread's: the wait last bound to each signal.
  std::array<int, n_sigs> sig_wait{-1, -1, -1};

  cross(model& m_, const std::uint8_t* data, std::size_t size) : m(m_), in(data, size) {
    a.emplace(1);
    b.emplace(1);
    service_type::of(a->get_executor()).set_capacity(1u << 20);
    steady_service::of(a->get_executor()).set_capacity(1u << 20);
    a_work.emplace(a->get_executor());
    b_work.emplace(b->get_executor());
    strand.emplace(b->get_executor());
    st.emplace(*a, hours(10));
    reader.emplace(*a);
    writer.emplace(*a);
    asio::local::connect_pair(*reader, *writer);
    b_reader.emplace(*b);
    b_writer.emplace(*b);
    asio::local::connect_pair(*b_reader, *b_writer);
    ta = std::thread([this] { a->run(); });
    tb = std::thread([this] { b->run(); });
  }

  template <typename Ex, typename F>
  static void run_on(const Ex& ex, F f) {
    std::promise<void> done;
    asio::post(ex, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  time_point pick_time() {
    const time_point now = clock_type::now();
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: return time_point::max();
      case 1: return now - milliseconds(1);
      default: return now + milliseconds(in.ConsumeIntegralInRange<int>(0, 8));
    }
  }
  // A steady_clock delay that is already due or never comes in a run.
  steady::duration pick_delay() {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: return steady::duration(0);
      case 1: return -milliseconds(1);
      case 2: return -hours(1);
      default: return hours(10);
    }
  }
  asio::cancellation_type pick_type() {
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0: return asio::cancellation_type::terminal;
      case 1: return asio::cancellation_type::partial;
      default: return asio::cancellation_type::total;
    }
  }

  bool done(int id) const { return m.waits[id].completions.load() + m.waits[id].destructions.load() > 0; }
  void abort_all(std::vector<int>& ids) {
    required.insert(required.end(), ids.begin(), ids.end());
    ids.clear();
  }

  // A fresh signal on the strand for the next wait bound to signal `s`; its slot, for the fuzzer thread to
  // bind (nullopt while a wait bound to the old one is pending).
  std::optional<asio::cancellation_slot> fresh_slot(int s) {
    if (sig_wait[s] >= 0 && !done(sig_wait[s])) return std::nullopt;
    asio::cancellation_slot slot;
    run_on(*strand, [&] {
      sigs[s] = std::make_unique<asio::cancellation_signal>();
      slot = sigs[s]->slot();
    });
    return slot;
  }

  // Calls f(handler) with a handler for a new wait: on A's executor, or (if `on_strand` and signal `s` is
  // free) bound to B's strand and to a fresh signal's slot. Returns the wait's id, or -1 if none started.
  template <typename F>
  int start(time_point expiry, bool on_strand, int s, F f, bool read = false, bool on_b = false) {
    if (m.next.load() >= static_cast<int>(max_waits)) return -1;
    std::atomic<bool>* flag = !read ? nullptr : on_b ? &b_reading : &reading;
    if (on_strand) {
      const auto slot = fresh_slot(s);
      if (!slot) return -1;
      const int id = m.add(expiry);
      sig_wait[s] = id;
      strand_ids[id] = true;
      f(asio::bind_cancellation_slot(*slot, asio::bind_executor(*strand, cross_handler{guard(&m, id), flag})));
      return id;
    }
    const int id = m.add(expiry);
    strand_ids[id] = on_b;  // its handler runs on B (the read's executor)
    f(cross_handler{guard(&m, id), flag});
    return id;
  }

  // The inner operation of a timed operation: a read, a wait on an Asio timer that never fires, or a wait
  // on one of the fuzzer's timers. Returns false if it cannot be started now.
  template <typename Wrap>
  int timed(bool on_strand, int s, Wrap wrap) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 3:  // a read on B: a deadline of A bound to an operation of another context
        if (b_reading.load()) return -1;
        b_reading = true;
        {
          const int id = start(
              time_point::max(), on_strand, s,
              [&](auto h) { b_reader->async_read_some(asio::buffer(brbuf), wrap(std::move(h))); }, true, true);
          if (id < 0) b_reading = false;
          return id;
        }
      case 0:
        if (reading.load()) return -1;
        reading = true;
        {
          const int id = start(
              time_point::max(), on_strand, s,
              [&](auto h) { reader->async_read_some(asio::buffer(rbuf), wrap(std::move(h))); }, true);
          if (id < 0) reading = false;
          return id;
        }
      case 1: return start(time_point::max(), on_strand, s, [&](auto h) { st->async_wait(wrap(std::move(h))); });
      default: {
        const int t = in.ConsumeIntegralInRange<int>(0, 2);
        if (!timers[t]) return -1;
        const int id = start(timer_expiry[t], on_strand, s, [&](auto h) { timers[t]->async_wait(wrap(std::move(h))); });
        if (id >= 0) timer_waits[t].push_back(id);
        return id;
      }
    }
  }
  std::array<char, 1> rbuf{}, brbuf{};

  void step() {
    const int op = in.ConsumeIntegralInRange<int>(0, 19);
    const int t = in.ConsumeIntegralInRange<int>(0, 2);
    const int d = t & 1;
    const int s = in.ConsumeIntegralInRange<int>(0, n_sigs - 1);
    const bool on_strand = in.ConsumeBool();
    switch (op) {
      case 0:  // a timer: (re)made, its old one destroyed
        abort_all(timer_waits[t]);
        timer_expiry[t] = pick_time();
        timers[t].emplace(a->get_executor(), timer_expiry[t]);
        break;
      case 1:
        if (timers[t]) {
          const int id = start(timer_expiry[t], on_strand, s, [&](auto h) { timers[t]->async_wait(std::move(h)); });
          if (id >= 0) timer_waits[t].push_back(id);
        }
        break;
      case 2:
        if (timers[t]) {
          if (in.ConsumeBool()) {
            timers[t]->cancel();
            abort_all(timer_waits[t]);
          } else {
            timers[t]->cancel_one();  // which one is aborted is not modelled: none is required
          }
        }
        break;
      case 3:  // re-aimed: the pending waits are aborted
        if (timers[t]) {
          timer_expiry[t] = pick_time();
          if (in.ConsumeBool())
            timers[t]->expires_at(timer_expiry[t]);
          else
            timers[t]->expires_after(timer_expiry[t] - clock_type::now());
          abort_all(timer_waits[t]);
        }
        break;
      case 4: {  // moved onto another slot (constructed or assigned); the moved-from one is destroyed
        const int u = (t + 1 + (in.ConsumeBool() ? 1 : 0)) % 3;
        if (!timers[t]) break;
        if (timers[u]) {
          *timers[u] = std::move(*timers[t]);
          abort_all(timer_waits[u]);
        } else {
          timers[u].emplace(std::move(*timers[t]));
        }
        timer_expiry[u] = timer_expiry[t];
        timer_waits[u] = std::move(timer_waits[t]);
        timer_waits[t].clear();
        timers[t].reset();
        break;
      }
      case 5:
        timers[t].reset();
        abort_all(timer_waits[t]);
        break;
      case 6: {  // a sleep on manual time
        const time_point e = pick_time();
        const int id = start(e, on_strand, s, [&](auto h) { tock::async_sleep_until(*a, e, std::move(h)); });
        if (id >= 0 && e != time_point::max()) required.push_back(id);
        break;
      }
      case 7: {  // a deadline (steady_clock): made or re-aimed (its waits and bound operations follow it)
        const steady::duration delay = pick_delay();
        if (!dls[d])
          dls[d].emplace(a->get_executor(), delay);
        else
          dls[d]->expires_after(delay);
        dl_expiry[d] = dls[d]->expiry();
        break;
      }
      case 8:
        if (!dls[d]) break;
        switch (in.ConsumeIntegralInRange<int>(0, 2)) {
          case 0:
            dls[d]->cancel();
            abort_all(dl_bound[d]);
            break;
          case 1:
            dls[d].reset();
            dl_bound[d].clear();  // they go on without a limit
            break;
          default:
            if (dls[1 - d])
              *dls[1 - d] = std::move(*dls[d]);
            else
              dls[1 - d].emplace(std::move(*dls[d]));
            abort_all(dl_waits[1 - d]);
            dl_waits[1 - d] = std::move(dl_waits[d]);
            dl_waits[d].clear();
            dl_bound[1 - d] = std::move(dl_bound[d]);  // those of the deadline assigned over are detached
            dl_bound[d].clear();
            dl_expiry[1 - d] = dl_expiry[d];
            dl_expiry[d] = steady::time_point::max();  // left as if made from its executor alone
            if (in.ConsumeBool()) dls[d].reset();
            return;
        }
        abort_all(dl_waits[d]);
        break;
      case 9:
        if (dls[d]) {
          const int id = start(time_point::max(), on_strand, s, [&](auto h) { dls[d]->async_wait(std::move(h)); });
          if (id >= 0) dl_waits[d].push_back(id);
        }
        break;
      case 10:  // an operation bound to a deadline
        if (dls[d]) {
          const auto type = pick_type();
          const int id = timed(on_strand, s, [&](auto h) { return dls[d]->bind(std::move(h), type); });
          if (id >= 0) dl_bound[d].push_back(id);
        }
        break;
      case 11: {  // an operation with a tock::timeout, already due or never
        const steady::duration delay = pick_delay();
        const auto type = pick_type();
        const int id = timed(on_strand, s, [&](auto h) { return tock::timeout(delay, std::move(h), type); });
        if (id >= 0 && delay <= steady::duration::zero()) required.push_back(id);
        break;
      }
      case 12: {  // on the strand, while this thread goes on: emit the signal, or destroy it
        const auto type = pick_type();
        if (in.ConsumeBool())
          asio::post(*strand, [this, s, type] {
            if (sigs[s]) sigs[s]->emit(type);
          });
        else
          asio::post(*strand, [this, s] { sigs[s].reset(); });
        break;
      }
      case 13: clock_type::advance(milliseconds(in.ConsumeIntegralInRange<int>(0, 4))); break;
      case 14: burst(); break;
      case 15: periodic(on_strand); break;
      case 16: {
        const char c = 'x';
        asio::write(in.ConsumeBool() ? *b_writer : *writer, asio::buffer(&c, 1));
        break;
      }
      default: {  // a wait on an Asio timer, timed out by a deadline or by a due tock::timeout
        if (dls[d] && in.ConsumeBool()) {
          const int id =
              start(time_point::max(), on_strand, s, [&](auto h) { st->async_wait(dls[d]->bind(std::move(h))); });
          if (id >= 0) dl_bound[d].push_back(id);
        } else {
          const int id = start(time_point::max(), on_strand, s,
                               [&](auto h) { st->async_wait(tock::timeout(-milliseconds(1), std::move(h))); });
          if (id >= 0) required.push_back(id);
        }
        break;
      }
    }
  }

  // Due sleeps (steady_clock) that keep A's driver popping while this thread starts more operations.
  void burst() {
    const int n = 8 * (1 + in.ConsumeIntegralInRange<int>(0, 15));
    const auto due = steady::now();
    for (int i = 0; i < n && m.next.load() < static_cast<int>(max_waits); ++i) {
      const int id = m.add(time_point::max());
      required.push_back(id);
      tock::async_sleep_until(*a, due, [h = cross_handler{guard(&m, id)}](const error_code& ec) mutable {
        for (volatile int k = 0; k < 20; k = k + 1) {
        }
        h(ec);
      });
    }
  }

  // A periodic task with its timer on a host context (run by its own thread, no work guard) and its runs on
  // B: while it is scheduled, the host's run() must not return, and every period must bring a run.
  void periodic(bool on_strand) {
    const int rounds = 1 + in.ConsumeIntegralInRange<int>(0, 3);
    asio::io_context host(1);
    std::atomic<int> runs{0};
    std::atomic<bool> returned{false};
    tock::task_handle h = on_strand ? tock::schedule_at_fixed_rate<clock_type>(host, *strand, milliseconds(0),
                                                                               milliseconds(1), [&runs] { ++runs; })
                                    : tock::schedule_at_fixed_rate<clock_type>(host, b->get_executor(), milliseconds(0),
                                                                               milliseconds(1), [&runs] { ++runs; });
    std::thread th([&] {
      host.run();
      returned = true;
    });
    for (int i = 0; i < rounds; ++i) {
      const auto limit = steady::now() + std::chrono::seconds(2);
      while (runs.load() <= i && !returned.load()) {
        if (steady::now() > limit) fail("periodic task: no run within 2 s of its due time (host.run() still running)");
        std::this_thread::yield();
      }
      if (returned.load() && h.scheduled()) fail("periodic task: host.run() returned while the task is scheduled");
      clock_type::advance(milliseconds(1));
    }
    h.cancel();
    th.join();
    if (host.stopped()) {
      host.restart();
      host.poll();
    }
    run_on(*strand, [] {});  // a runner posted to B before cancel() has run before the host goes
    run_on(b->get_executor(), [] {});
  }

  void wait_for(const std::vector<int>& ids, const char* what) {
    const auto limit = steady::now() + std::chrono::seconds(2);
    for (int id : ids)
      while (!done(id)) {
        if (steady::now() > limit) fail(what);
        std::this_thread::yield();
      }
  }

  // The waits due by now that must complete: fired, aborted, or timed out.
  std::vector<int> due_now() {
    std::vector<int> ids = required;
    for (int t = 0; t < 3; ++t)
      if (timers[t] && timer_expiry[t] != time_point::max())
        ids.insert(ids.end(), timer_waits[t].begin(), timer_waits[t].end());
    const auto now = steady::now();
    for (int d = 0; d < 2; ++d)
      if (dls[d] && !(now < dl_expiry[d])) {
        ids.insert(ids.end(), dl_waits[d].begin(), dl_waits[d].end());
        ids.insert(ids.end(), dl_bound[d].begin(), dl_bound[d].end());
      }
    return ids;
  }

  void run() {
    const bool hold = in.ConsumeBool();  // r1's ending: A goes while its handlers wait on the strand
    for (std::size_t i = 0; i < ops_per_thread && in.remaining_bytes() > 0; ++i) step();
    std::optional<std::promise<void>> release;
    if (hold) {
      release.emplace();
      std::promise<void> entered;
      asio::post(*strand, [&entered, f = release->get_future()]() mutable {
        entered.set_value();
        f.wait();
      });
      entered.get_future().wait();
      const auto type = pick_type();
      for (int s = 0; s < n_sigs; ++s)
        asio::post(*strand, [this, s, type] {
          if (sigs[s]) sigs[s]->emit(type);
        });
    }
    clock_type::advance(hours(1));  // every finite manual time is due
    std::vector<int> due = due_now();
    if (hold) {  // only A's own handlers can run now
      std::vector<int> on_a;
      for (int id : due)
        if (!strand_bound(id)) on_a.push_back(id);
      wait_for(on_a, "progress: a due, fired or aborted wait (on A) did not complete within 2 s");
    } else {
      wait_for(due, "progress: a due, fired or aborted wait did not complete within 2 s");
    }
    // Teardown, timers first (as Asio requires); the Asio objects on A's own thread.
    for (auto& t : timers) t.reset();
    for (auto& d : dls) d.reset();
    // An emit into a read's slot (a timeout's, on the handler's strand; or one posted by the fuzzer) reads the
    // socket's state: a use of the socket, which Asio's rules let no other thread destroy meanwhile (Asio's
    // cancel_after emits there too). A running strand is drained and the read cancelled (cancel() and an emit
    // only read that state) and completed before A's thread destroys the socket. A held strand runs nothing
    // until A is gone, and then a timeout emits nothing into an operation whose context is gone.
    if (!hold) {
      run_on(*strand, [] {});
      run_on(a->get_executor(), [&] { reader->cancel(); });
      run_on(b->get_executor(), [&] { b_reader->cancel(); });
      const auto limit = steady::now() + std::chrono::seconds(2);
      while (reading.load() || b_reading.load()) {
        if (steady::now() > limit) fail("progress: a cancelled read did not complete within 2 s");
        std::this_thread::yield();
      }
      run_on(*strand, [] {});
    }
    run_on(a->get_executor(), [&] {
      st.reset();
      reader.reset();
      writer.reset();
    });
    auto close_b = [&] {
      run_on(b->get_executor(), [&] {
        b_reader.reset();
        b_writer.reset();
      });
    };
    if (!hold) close_b();  // else B's thread is held: after A is gone
    run_on(a->get_executor(), [] {});
    a->stop();  // waits at time_point::max() stay pending
    ta.join();
    a_work.reset();
    m.shutting_down = true;
    a.reset();  // destroys what is still pending on A (sleeps at time_point::max())
    if (release) {
      release->set_value();
      close_b();  // a read still bound to a deadline of A, gone: completes (aborted) without A's service
    }
    run_on(*strand, [&] {
      for (auto& s : sigs) s.reset();
    });
    strand.reset();
    b->stop();
    tb.join();
    b_work.reset();
    b.reset();
  }

  std::vector<bool> strand_ids = std::vector<bool>(max_waits, false);
  bool strand_bound(int id) const { return strand_ids[id]; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  current_data = data;
  current_size = size;
  auto m = std::make_unique<model>();
  if (size > 0 && data[0] == 'X') {  // the cross-context scenario
    cross(*m, data + 1, size - 1).run();
    for (int i = 0; i < m->next.load(); ++i)
      CHECK(m->waits[i].completions.load() + m->waits[i].destructions.load() == 1);
    return 0;
  }
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
