// test/fuzz/fuzz_ops.cpp: libFuzzer target. Decodes the input into a sequence of operations on one
// io_context with tock::manual_clock (timers, deadlines, sleeps, deadline.bind / tock::timeout on socket
// pairs, cancellation slots, capacity and slack changes, time advances, polls) and checks every wait against
// a reference model: exactly one completion or destruction at shutdown, the right error, never before its
// expiry and done by its latest time (expiry + slack), aborted waits in abort order, fired waits in order of
// latest time, invariants_hold() after every step.
// Timeliness of bound operations: reads on 4 socket pairs of the context and 2 of a second context (`ctx2`)
// are bound to the context's 3 deadlines, so that a deadline is bound while others hold bound reads, and a
// deadline's read may be an operation of another context. Deadlines are moved earlier and later and their
// slack changed while bound or idle; a server's turn (the pending read completes, both contexts polled, the
// deadline moved or its slack changed while nothing is bound to it, the next read bound to it) repeats the
// keep-alive pattern. After every advance and full poll (both contexts until neither has work ready): every
// bound read whose deadline's latest time has passed has completed; a read reports timed_out only if its
// deadline's expiry had passed while it was bound; and the context has not run out of work (stopped) while a
// wait of its service, or a read bound to one of its deadlines on either context, is pending.
// Built with -fsanitize=fuzzer,address,undefined (see test/fuzz/CMakeLists.txt, scripts/fuzz.sh).
#include <tock/tock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

// 0: pairs 4 and 5 are on ctx as well (no second context), same decoding: keeps the work check (which a
// bound read on another context trips at once on a library that lets its context run out of work) from hiding
// the timeliness checks (progress after a full poll).
#ifndef TOCK_FUZZ_CROSS_CONTEXT
#define TOCK_FUZZ_CROSS_CONTEXT 1
#endif

#ifndef TOCK_FUZZ_KNOWN_BUGS
#define TOCK_FUZZ_KNOWN_BUGS 1  // 1: use moved-from timers/deadlines, destroy signals with a pending wait
#endif

namespace {

namespace asio = boost::asio;
using error_code = boost::system::error_code;
using clock_type = tock::manual_clock;
using time_point = clock_type::time_point;
using timer_type = tock::basic_timer<clock_type>;
using deadline_type = tock::basic_deadline<clock_type>;
using service_type = tock::basic_timer_service<clock_type>;
using socket_type = asio::local::stream_protocol::socket;
using std::chrono::milliseconds;

constexpr std::size_t max_ops = 200;
constexpr std::size_t n_timers = 4, n_deadlines = 3, n_signals = 4;
// Socket pairs 0..3 are on the context of the timers and deadlines; 4 and 5 on a second context, `ctx2`, whose
// reads may be bound to the first context's deadlines (their handlers run on ctx2, or on ctx's strand).
constexpr std::size_t n_local_pairs = 4, n_pairs = 6;
constexpr std::size_t big_capacity = 1u << 20;  // capacity at or above this: no refusal is expected

[[noreturn]] void fail(const char* what, int id = -1) {
  std::fprintf(stderr, "fuzz_ops: check failed: %s (wait %d)\n", what, id);
  std::abort();
}
#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) fail(#cond, ##__VA_ARGS__); \
  } while (0)

enum class kind { timer_wait, deadline_wait, sleep, bound_read, timeout_read };
enum outcome : unsigned { ok = 1, aborted = 2, timed_out = 4, refused = 8 };

unsigned outcome_of(const error_code& ec) {
  if (!ec) return ok;
  if (ec == asio::error::operation_aborted) return aborted;
  if (ec == tock::error::timed_out) return timed_out;
  if (ec == tock::error::capacity_exceeded) return refused;
  return 0;
}

// What the model knows about one wait.
struct wait_rec {
  kind k;
  int owner;             // timer, deadline or socket pair index (follows moves)
  int dl = -1;           // bound_read: the deadline index
  time_point expiry{};   // timer_wait, sleep: fixed for the wait's life
  milliseconds slack{};  // sleep: fixed for its life (timers' and deadlines' are their owners')
  bool strand = false;   // handler bound to a strand (a foreign executor)
  int sig = -1;          // signal bound, or -1
  bool decided = false;  // timer/deadline/sleep: the outcome is already fixed (aborted or refused)
  bool fuzzy = false;  // strand timer wait emitted once due (may have fired), or in the ring at a cancel_one() that
                       // may have taken another: ok or aborted, maybe still pending
  unsigned expect = 0;  // when decided: that outcome; reads: the outcomes possible so far
  std::uint64_t abort_seq = 0;
  std::uint64_t start_seq = 0;
  bool zero_timeout = false;
  int completions = 0, destructions = 0;
  error_code ec;
  bool done() const { return completions + destructions > 0; }
};

struct model;

// Captured by every handler: counts a destruction without a call.
struct guard {
  model* m;
  int id;
  bool called = false;
  guard(model* m_, int id_) : m(m_), id(id_) {}
  guard(guard&& o) noexcept : m(o.m), id(o.id), called(o.called) { o.m = nullptr; }
  guard& operator=(guard&&) = delete;
  ~guard();
};

struct model {
  std::vector<wait_rec> waits;
  bool shutting_down = false;
  std::uint64_t seq = 0;
  std::uint64_t last_abort_seq = 0;  // of the last aborted completion checked, among in-context waits
  // Order of successful in-context completions since the last operation that was not a poll.
  std::optional<time_point> last_fire;
  std::array<std::uint64_t, n_timers> last_timer_start{};
  std::uint64_t last_sleep_start = 0;
  std::optional<time_point> last_sleep_latest;

  std::array<std::optional<time_point>, n_deadlines> dl_expiry;  // nullopt: no deadline there (or moved from)
  std::array<milliseconds, n_timers> timer_slack{};
  std::array<milliseconds, n_deadlines> dl_slack{};
  milliseconds default_slack{};  // the manual-clock service's, taken by new timers, deadlines and sleeps
  std::array<std::size_t, n_pairs> buffered{};
  std::array<int, n_pairs> reading = [] {
    std::array<int, n_pairs> r;
    r.fill(-1);
    return r;
  }();

  void reset_order() {
    last_fire.reset();
    last_timer_start.fill(0);
    last_sleep_start = 0;
    last_sleep_latest.reset();
  }

  // The latest time a wait may complete at (its expiry's, with its slack now), max() for never.
  time_point latest(const wait_rec& w) const {
    switch (w.k) {
      case kind::timer_wait:
        return tock::detail::latest_time(w.expiry,
                                         time_point::duration(w.owner >= 0 ? timer_slack[w.owner] : milliseconds()));
      case kind::sleep: return tock::detail::latest_time(w.expiry, time_point::duration(w.slack));
      case kind::deadline_wait:
        if (w.owner < 0 || !dl_expiry[w.owner]) return time_point::max();
        return tock::detail::latest_time(*dl_expiry[w.owner], time_point::duration(dl_slack[w.owner]));
      default: return time_point::max();
    }
  }

  void on_destroy(int id) {
    CHECK(shutting_down, id);  // a handler destroyed uncalled before shutdown: a lost completion
    ++waits[id].destructions;
    CHECK(waits[id].completions + waits[id].destructions == 1, id);
  }

  void on_complete(int id, const error_code& ec) {
    wait_rec& w = waits[id];
    ++w.completions;
    w.ec = ec;
    CHECK(w.completions + w.destructions == 1, id);
    const unsigned o = outcome_of(ec);
    CHECK(o != 0, id);
    const time_point now = clock_type::now();
    switch (w.k) {
      case kind::timer_wait:
      case kind::sleep:
      case kind::deadline_wait: {
        if (w.fuzzy) {
          CHECK(o == ok || o == aborted, id);
          if (o == ok) CHECK(!(now < w.expiry), id);
          break;
        }
        if (w.decided) {
          CHECK(o == w.expect, id);
          if (!w.strand) {
            CHECK(w.abort_seq > last_abort_seq, id);  // aborted waits complete in abort order
            last_abort_seq = w.abort_seq;
          }
          break;
        }
        CHECK(o == ok, id);
        const time_point e = w.k == kind::deadline_wait ? *dl_expiry[w.owner] : w.expiry;
        CHECK(e != time_point::max(), id);
        CHECK(!(now < e), id);  // never before the expiry
        if (!w.strand) {
          const time_point l = latest(w);
          CHECK(!last_fire || !(l < *last_fire), id);  // in order of latest time within a batch
          last_fire = l;
          if (w.k == kind::timer_wait) {
            CHECK(w.start_seq > last_timer_start[w.owner], id);  // a timer's waits in start order
            last_timer_start[w.owner] = w.start_seq;
          } else if (w.k == kind::sleep) {
            if (last_sleep_latest == l) CHECK(w.start_seq > last_sleep_start, id);
            last_sleep_latest = l;
            last_sleep_start = w.start_seq;
          }
        }
        break;
      }
      case kind::bound_read:
      case kind::timeout_read:
        CHECK((o & w.expect) != 0, id);
        if (reading[w.owner] == id) {  // not a read of a pair closed since
          if (o == ok) {
            CHECK(buffered[w.owner] > 0, id);
            --buffered[w.owner];
          }
          reading[w.owner] = -1;
        }
        break;
    }
  }

  void decide(wait_rec& w, unsigned o) {
    w.decided = true;
    w.expect = o;
    w.abort_seq = ++seq;
  }
};

guard::~guard() {
  if (m && !called) m->on_destroy(id);
}

struct wait_handler {
  guard g;
  void operator()(const error_code& ec) {
    g.called = true;
    g.m->on_complete(g.id, ec);
  }
};

struct read_handler {
  guard g;
  void operator()(const error_code& ec, std::size_t) {
    g.called = true;
    g.m->on_complete(g.id, ec);
  }
};

// One run: the objects and the model. Signals and the model outlive the context (handlers are destroyed at
// its shutdown, and tock clears their slots then).
struct run {
  FuzzedDataProvider& in;
  model m;
  std::array<std::unique_ptr<asio::cancellation_signal>, n_signals> signals;
  std::array<int, n_signals> sig_wait{-1, -1, -1, -1};
  std::array<bool, n_signals> sig_emitted{};
  std::optional<asio::io_context> ctx;
  std::optional<asio::io_context> ctx2;  // the other context: socket pairs 4 and 5 only
  std::optional<asio::strand<asio::io_context::executor_type>> strand;
  std::array<std::optional<timer_type>, n_timers> timers;
  std::array<bool, n_timers> timer_moved_from{};
  std::array<bool, n_timers> timer_on_strand{};
  std::array<time_point, n_timers> timer_expiry{};
  std::array<std::optional<deadline_type>, n_deadlines> deadlines;
  std::array<bool, n_deadlines> dl_moved_from{};
  std::array<std::optional<std::pair<socket_type, socket_type>>, n_pairs> pairs;
  std::size_t capacity = big_capacity;
  std::size_t steady_capacity = big_capacity;
  std::array<std::array<std::uint8_t, 1>, n_pairs> bufs{};

  explicit run(FuzzedDataProvider& p) : in(p) {
    ctx.emplace();
    ctx2.emplace();
    strand.emplace(ctx->get_executor());
    for (auto& s : signals) s = std::make_unique<asio::cancellation_signal>();
    service().set_capacity(big_capacity);
    steady_service().set_capacity(big_capacity);
  }

  service_type& service() { return service_type::of(ctx->get_executor()); }
  tock::timer_service& steady_service() { return tock::timer_service::of(ctx->get_executor()); }

  time_point pick_time() {
    const time_point now = clock_type::now();
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: return time_point::max();
      case 1: return now - milliseconds(in.ConsumeIntegralInRange<int>(1, 5));
      default: return now + milliseconds(in.ConsumeIntegralInRange<int>(0, 12));
    }
  }

  int new_wait(kind k, int owner) {
    wait_rec w;
    w.k = k;
    w.owner = owner;
    w.start_seq = ++m.seq;
    m.waits.push_back(w);
    return static_cast<int>(m.waits.size() - 1);
  }

  // A free signal for a new wait, or -1.
  int pick_signal() {
    if (!in.ConsumeBool()) return -1;
    const int s = in.ConsumeIntegralInRange<int>(0, n_signals - 1);
    if (!signals[s]) signals[s] = std::make_unique<asio::cancellation_signal>();
    if (sig_wait[s] >= 0 && !m.waits[sig_wait[s]].done()) return -1;
    return s;
  }

  void bind_sig(int id, int s) {
    m.waits[id].sig = s;
    if (s >= 0) {
      sig_wait[s] = id;
      sig_emitted[s] = false;
    }
  }

  void start_counted(int id, std::size_t before, std::size_t after, std::size_t cap) {
    if (after == before) {  // refused: the service took no slot for it
      CHECK(cap < big_capacity, id);
      m.decide(m.waits[id], refused);
    } else {
      CHECK(after == before + 1, id);
    }
  }

  // Waits of timer `t` that are still in its ring (started, not aborted, not completed), oldest first.
  std::vector<int> ring_of_timer(int t) {
    std::vector<int> r;
    for (std::size_t i = 0; i < m.waits.size(); ++i) {
      const wait_rec& w = m.waits[i];
      if (w.k == kind::timer_wait && w.owner == t && !w.decided && !w.fuzzy && !w.done())
        r.push_back(static_cast<int>(i));
    }
    return r;
  }

  // Strand waits of timer `t` emitted once due: in the ring or not, the model cannot tell.
  std::size_t fuzzy_of_timer(int t) {
    std::size_t n = 0;
    for (const auto& w : m.waits) n += w.k == kind::timer_wait && w.owner == t && w.fuzzy && !w.done();
    return n;
  }

  void abort_timer_waits(int t, std::size_t limit = static_cast<std::size_t>(-1)) {
    for (int id : ring_of_timer(t)) {
      if (limit-- == 0) break;
      m.decide(m.waits[id], aborted);
    }
  }

  // cancel(): waits are aborted, bound reads may be.
  void abort_deadline(int d) {
    for (auto& w : m.waits) {
      if (w.done() || w.decided) continue;
      if (w.k == kind::deadline_wait && w.owner == d) m.decide(w, aborted);
      if (w.k == kind::bound_read && w.dl == d) w.expect |= aborted;
    }
  }

  // The deadline goes away (destroyed, assigned over): waits are aborted, bound reads go on without a limit
  // (the caller unbinds them from `d`); one whose deadline had passed may have timed out already.
  void release_deadline(int d) {
    for (auto& w : m.waits)
      if (!w.done() && !w.decided && w.k == kind::deadline_wait && w.owner == d) m.decide(w, aborted);
  }

  // The deadline at `d` passed (or may have): its bound reads may time out.
  void deadline_moved(int d) {
    if (!m.dl_expiry[d] || clock_type::now() < *m.dl_expiry[d]) return;
    for (auto& w : m.waits)
      if (w.k == kind::bound_read && w.dl == d && !w.done()) w.expect |= timed_out;
  }

  bool usable_timer(int t) { return timers[t] && (TOCK_FUZZ_KNOWN_BUGS || !timer_moved_from[t]); }
  bool usable_deadline(int d) { return deadlines[d] && (TOCK_FUZZ_KNOWN_BUGS || !dl_moved_from[d]); }

  void timer_op(int t) {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:  // create (replacing: destroys the old one first)
        destroy_timer(t);
        timer_expiry[t] = pick_time();
        timer_on_strand[t] = in.ConsumeIntegralInRange<int>(0, 3) == 0;
        if (timer_on_strand[t])  // an any_io_executor that is not the context's: compact_executor boxes it
          timers[t].emplace(asio::any_io_executor(*strand), timer_expiry[t]);
        else
          timers[t].emplace(ctx->get_executor(), timer_expiry[t]);
        timer_moved_from[t] = false;
        m.timer_slack[t] = m.default_slack;
        break;
      case 1: destroy_timer(t); break;
      case 2: {  // move-construct into another slot
        const int to = in.ConsumeIntegralInRange<int>(0, n_timers - 1);
        if (to == t || !timers[t] || timer_moved_from[t]) break;
        destroy_timer(to);
        timers[to].emplace(std::move(*timers[t]));
        move_timer_model(t, to);
        break;
      }
      case 3: {  // move-assign into another live (or moved-from) timer
        const int to = in.ConsumeIntegralInRange<int>(0, n_timers - 1);
        if (to == t || !timers[t] || !timers[to] || timer_moved_from[t]) break;
        abort_timer_waits(to);
        *timers[to] = std::move(*timers[t]);
        move_timer_model(t, to);
        break;
      }
      case 4: {  // async_wait
        if (!usable_timer(t)) break;
        const int id = new_wait(kind::timer_wait, t);
        wait_rec& w = m.waits[id];
        w.expiry = timer_expiry[t];
        w.strand = timer_on_strand[t] || in.ConsumeBool();
        const int s = pick_signal();
        bind_sig(id, s);
        const std::size_t before = service().pending();
        if (timer_on_strand[t] && s >= 0)  // the timer's executor is the strand: the handler's by default
          timers[t]->async_wait(asio::bind_cancellation_slot(signals[s]->slot(), wait_handler{guard(&m, id)}));
        else if (timer_on_strand[t])
          timers[t]->async_wait(wait_handler{guard(&m, id)});
        else if (w.strand && s >= 0)
          timers[t]->async_wait(asio::bind_cancellation_slot(
              signals[s]->slot(), asio::bind_executor(*strand, wait_handler{guard(&m, id)})));
        else if (w.strand)
          timers[t]->async_wait(asio::bind_executor(*strand, wait_handler{guard(&m, id)}));
        else if (s >= 0)
          timers[t]->async_wait(asio::bind_cancellation_slot(signals[s]->slot(), wait_handler{guard(&m, id)}));
        else
          timers[t]->async_wait(wait_handler{guard(&m, id)});
        start_counted(id, before, service().pending(), capacity);
        break;
      }
      case 5: {
        if (!usable_timer(t)) break;
        const std::size_t expect = ring_of_timer(t).size(), fuzzy = fuzzy_of_timer(t);
        abort_timer_waits(t);
        const std::size_t n = timers[t]->cancel();
        CHECK(n >= expect && n <= expect + fuzzy);
        break;
      }
      case 6: {
        if (!usable_timer(t)) break;
        if (fuzzy_of_timer(t) > 0) {  // which wait is the oldest in the ring is unknown: any of them may go
          for (int id : ring_of_timer(t)) m.waits[id].fuzzy = true;
          CHECK(timers[t]->cancel_one() <= 1);
          break;
        }
        const std::size_t expect = ring_of_timer(t).empty() ? 0 : 1;
        abort_timer_waits(t, 1);
        CHECK(timers[t]->cancel_one() == expect);
        break;
      }
      default: {  // expires_at: earlier, later, max, past
        if (!usable_timer(t)) break;
        const std::size_t expect = ring_of_timer(t).size(), fuzzy = fuzzy_of_timer(t);
        abort_timer_waits(t);
        const time_point e = pick_time();
        const std::size_t n = timers[t]->expires_at(e);
        CHECK(n >= expect && n <= expect + fuzzy);
        timer_expiry[t] = e;
        CHECK(timers[t]->expiry() == e);
        break;
      }
    }
  }

  void move_timer_model(int from, int to) {
    for (auto& w : m.waits)
      if (w.k == kind::timer_wait && w.owner == from) w.owner = to;
    for (auto& w : m.waits)  // waits left at `to` (already decided or done) no longer matter; keep them apart
      if (w.k == kind::timer_wait && w.owner == to && (w.decided || w.done())) w.owner = -1;
    timer_expiry[to] = timer_expiry[from];
    timer_expiry[from] = time_point();  // as Asio's: a moved-from timer has a default expiry
    m.timer_slack[to] = m.timer_slack[from];  // which keeps its own
    timer_on_strand[to] = timer_on_strand[from];
    timer_moved_from[to] = false;
    timer_moved_from[from] = true;
    m.last_timer_start[to] = 0;
  }

  void destroy_timer(int t) {
    if (!timers[t]) return;
    abort_timer_waits(t);
    timers[t].reset();
    timer_moved_from[t] = false;
  }

  void deadline_op(int d) {
    switch (in.ConsumeIntegralInRange<int>(0, 8)) {
      case 0: {
        destroy_deadline(d);
        const time_point e = pick_time();
        deadlines[d].emplace(ctx->get_executor(), e);
        dl_moved_from[d] = false;
        m.dl_expiry[d] = e;
        m.dl_slack[d] = m.default_slack;
        break;
      }
      case 1: destroy_deadline(d); break;
      case 2: {
        const int to = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        if (to == d || !deadlines[d] || dl_moved_from[d]) break;
        destroy_deadline(to);
        deadlines[to].emplace(std::move(*deadlines[d]));
        move_deadline_model(d, to);
        break;
      }
      case 3: {
        const int to = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        if (to == d || !deadlines[d] || !deadlines[to] || dl_moved_from[d]) break;
        release_deadline(to);
        *deadlines[to] = std::move(*deadlines[d]);
        move_deadline_model(d, to);
        break;
      }
      case 4: {
        if (!usable_deadline(d)) break;
        const int id = new_wait(kind::deadline_wait, d);
        const int s = pick_signal();
        bind_sig(id, s);
        const std::size_t before = service().pending();
        if (s >= 0)
          deadlines[d]->async_wait(asio::bind_cancellation_slot(signals[s]->slot(), wait_handler{guard(&m, id)}));
        else
          deadlines[d]->async_wait(wait_handler{guard(&m, id)});
        start_counted(id, before, service().pending(), capacity);
        break;
      }
      case 5: {
        if (!usable_deadline(d)) break;
        std::size_t most = 0;
        for (const auto& w : m.waits)
          if (!w.done() && !w.decided &&
              ((w.k == kind::deadline_wait && w.owner == d) || (w.k == kind::bound_read && w.dl == d)))
            ++most;
        abort_deadline(d);
        CHECK(deadlines[d]->cancel() <= most);
        break;
      }
      default: {
        if (!usable_deadline(d)) break;
        const time_point e = pick_time();
        deadlines[d]->expires_at(e);
        CHECK(deadlines[d]->expiry() == e);
        m.dl_expiry[d] = e;
        deadline_moved(d);
        break;
      }
    }
  }

  void move_deadline_model(int from, int to) {
    for (auto& w : m.waits) {
      if (w.k == kind::deadline_wait && w.owner == from)
        w.owner = to;
      else if (w.k == kind::deadline_wait && w.owner == to)
        w.owner = -1;
      if (w.k == kind::bound_read && w.dl == from)
        w.dl = to;
      else if (w.k == kind::bound_read && w.dl == to)
        w.dl = -1;
    }
    m.dl_expiry[to] = m.dl_expiry[from];
    m.dl_slack[to] = m.dl_slack[from];
    // A moved-from deadline is as if constructed from its executor alone: never (time_point::max()).
    m.dl_expiry[from] = TOCK_FUZZ_KNOWN_BUGS ? std::optional<time_point>(time_point::max()) : std::nullopt;
    dl_moved_from[to] = false;
    dl_moved_from[from] = true;
  }

  void destroy_deadline(int d) {
    if (!deadlines[d]) return;
    if (!dl_moved_from[d] || TOCK_FUZZ_KNOWN_BUGS) release_deadline(d);
    deadlines[d].reset();
    for (auto& w : m.waits) {  // waits on this index are all decided now; keep them apart from a new one
      if (w.k == kind::deadline_wait && w.owner == d) w.owner = -1;
      if (w.k == kind::bound_read && w.dl == d) w.dl = -1;
    }
    m.dl_expiry[d].reset();
    dl_moved_from[d] = false;
  }

  // The default slack, or a timer's or deadline's (which applies to its pending waits).
  void slack_op(milliseconds slack) {
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        service().set_default_slack(slack);
        m.default_slack = slack;
        break;
      case 1: {
        const int t = in.ConsumeIntegralInRange<int>(0, n_timers - 1);
        if (!timers[t]) break;
        timers[t]->set_slack(slack);
        m.timer_slack[t] = slack;
        break;
      }
      default: {
        const int d = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        if (!deadlines[d]) break;
        deadlines[d]->set_slack(slack);
        m.dl_slack[d] = slack;
        break;
      }
    }
  }

  // A sleep until a time, or for one of three spans from now, which repeat and so queue in lanes
  // (detail/sleep_lanes.hpp).
  void sleep_op() {
    const int span_ms = in.ConsumeIntegralInRange<int>(0, 3);
    const clock_type::duration span = milliseconds(span_ms);
    const time_point e = span_ms > 0 ? clock_type::now() + span : pick_time();
    const int id = new_wait(kind::sleep, -1);
    m.waits[id].expiry = e;
    m.waits[id].slack = m.default_slack;
    const int s = pick_signal();
    bind_sig(id, s);
    const std::size_t before = service().pending();
    auto start = [&](auto&& h) {
      if (span_ms > 0)
        service().async_sleep_for(e, span, std::move(h), ctx->get_executor());
      else
        tock::async_sleep_until(*ctx, e, std::move(h));
    };
    if (s >= 0)
      start(asio::bind_cancellation_slot(signals[s]->slot(), wait_handler{guard(&m, id)}));
    else
      start(wait_handler{guard(&m, id)});
    start_counted(id, before, service().pending(), capacity);
  }

  static bool local_pair(int p) { return !TOCK_FUZZ_CROSS_CONTEXT || p < static_cast<int>(n_local_pairs); }
  asio::io_context& pair_ctx(int p) { return local_pair(p) ? *ctx : *ctx2; }

  void socket_op(int p) {
    if (!pairs[p]) {
      pairs[p].emplace(socket_type(pair_ctx(p)), socket_type(pair_ctx(p)));
      asio::local::connect_pair(pairs[p]->first, pairs[p]->second);
      m.buffered[p] = 0;
      m.reading[p] = -1;
      return;
    }
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: write_byte(p); break;
      case 1: {  // close both ends
        if (m.reading[p] >= 0) m.waits[m.reading[p]].expect |= aborted;
        pairs[p].reset();
        m.buffered[p] = 0;
        m.reading[p] = -1;
        break;
      }
      case 2: bind_read(p, in.ConsumeIntegralInRange<int>(0, n_deadlines - 1)); break;
      default: {  // a read with tock::timeout: hours (never fires in the run) or already due
        if (m.reading[p] >= 0) break;
        // On ctx2 the timeout's entry would be ctx2's steady_clock service's, which the model does not follow.
        if (!local_pair(p)) break;
        const int id = new_wait(kind::timeout_read, p);
        wait_rec& w = m.waits[id];
        const int choice = in.ConsumeIntegralInRange<int>(0, 3);
        const std::chrono::steady_clock::duration d =
            choice == 0   ? std::chrono::hours(10)
            : choice == 1 ? std::chrono::steady_clock::duration(0)
            : choice == 2 ? std::chrono::steady_clock::duration(-milliseconds(3))
                          : std::chrono::steady_clock::duration::max();  // saturates: parked, never fires
        if (choice == 1 || choice == 2) w.expect |= timed_out;
        w.zero_timeout = choice == 1 || choice == 2;
        if (m.buffered[p] > 0) w.expect |= ok;
        const int s = pick_signal();
        bind_sig(id, s);
        const asio::cancellation_type type = pick_type();
        const std::size_t before = steady_service().pending();
        auto buf = asio::buffer(bufs[p]);
        if (s < 0 && in.ConsumeBool())
          pairs[p]->first.async_read_some(
              buf, tock::timeout(d, asio::bind_executor(*strand, read_handler{guard(&m, id)}), type));
        else if (s < 0)
          pairs[p]->first.async_read_some(buf, tock::timeout(d, read_handler{guard(&m, id)}, type));
        else
          pairs[p]->first.async_read_some(
              buf,
              asio::bind_cancellation_slot(signals[s]->slot(), tock::timeout(d, read_handler{guard(&m, id)}, type)));
        const std::size_t after = steady_service().pending();
        if (after == before) {
          CHECK(steady_capacity < big_capacity, id);
          m.waits[id].expect = refused;
        } else {
          CHECK(after == before + 1, id);
          m.reading[p] = id;
        }
        break;
      }
    }
  }

  // The peer of pair `p` writes a byte: a pending read may complete.
  void write_byte(int p) {
    const std::uint8_t b = 'x';
    asio::write(pairs[p]->second, asio::buffer(&b, 1));
    ++m.buffered[p];
    if (m.reading[p] >= 0) m.waits[m.reading[p]].expect |= ok;
  }

  // A read on pair `p` bound to deadline `d` (ctx's); the pair may be on ctx2.
  void bind_read(int p, int d) {
    if (!pairs[p] || m.reading[p] >= 0) return;
    if (!usable_deadline(d) || dl_moved_from[d]) return;
    const int id = new_wait(kind::bound_read, p);
    wait_rec& w = m.waits[id];
    w.dl = d;
    if (m.buffered[p] > 0) w.expect |= ok;
    if (!(clock_type::now() < *m.dl_expiry[d])) w.expect |= timed_out;
    const int s = pick_signal();
    bind_sig(id, s);
    const asio::cancellation_type type = pick_type();
    const std::size_t before = service().pending();
    auto buf = asio::buffer(bufs[p]);
    if (s < 0 && in.ConsumeBool())  // on the strand: the deadline's cancellation is dispatched there
      pairs[p]->first.async_read_some(
          buf, deadlines[d]->bind(asio::bind_executor(*strand, read_handler{guard(&m, id)}), type));
    else if (s < 0)
      pairs[p]->first.async_read_some(buf, deadlines[d]->bind(read_handler{guard(&m, id)}, type));
    else if (in.ConsumeBool())  // the user's slot inside the deadline's token
      pairs[p]->first.async_read_some(
          buf, deadlines[d]->bind(asio::bind_cancellation_slot(signals[s]->slot(), read_handler{guard(&m, id)}), type));
    else  // and outside it
      pairs[p]->first.async_read_some(
          buf, asio::bind_cancellation_slot(signals[s]->slot(), deadlines[d]->bind(read_handler{guard(&m, id)}, type)));
    const std::size_t after = service().pending();
    if (after == before) {
      CHECK(capacity < big_capacity, id);
      m.waits[id].expect = refused;
    } else {
      CHECK(after == before + 1, id);
      m.reading[p] = id;
    }
  }

  // A server's turn on pair `p` (keep-alive: a request read under one limit, the next under another): the
  // read pending on it, bound to deadline `d` (or any read, and `d` from the input), completes (the peer writes, both
  // contexts are polled), `d` is moved (earlier, later, or its slack changed) while nothing of the pair is bound to it,
  // and the next read is bound to `d` again, while other pairs' reads may hold `d` or other deadlines.
  void server_turn(int p) {
    int d = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);  // if no read of the pair is bound to one
    const int how = in.ConsumeIntegralInRange<int>(0, 3);
    const int ms = in.ConsumeIntegralInRange<int>(0, 12);
    if (!pairs[p]) return;
    if (m.reading[p] >= 0) {
      const wait_rec& w = m.waits[m.reading[p]];
      if (w.k == kind::bound_read && w.dl >= 0) d = w.dl;  // the next read goes to the same deadline
      write_byte(p);
      poll_all();
      check_progress();
      if (m.reading[p] >= 0) return;  // another kind of read, refused, or still pending: leave it
    }
    make_deadline(d);
    if (!usable_deadline(d) || dl_moved_from[d]) return;
    switch (how) {
      case 0: move_deadline_earlier(d, ms); break;
      case 1: move_deadline(d, clock_type::now() + milliseconds(ms)); break;
      case 2: set_deadline_slack(d, milliseconds(ms % 5)); break;
      default: break;
    }
    bind_read(p, d);
  }

  // A connection's deadline: made at a picked time if there is none at `d`.
  void make_deadline(int d) {
    if (deadlines[d]) return;
    const time_point e = pick_time();
    deadlines[d].emplace(ctx->get_executor(), e);
    dl_moved_from[d] = false;
    m.dl_expiry[d] = e;
    m.dl_slack[d] = m.default_slack;
  }

  // Deadline `d` re-aimed at now + ms if that is earlier than its expiry (a shorter limit after a long one).
  void move_deadline_earlier(int d, int ms) {
    const time_point e = clock_type::now() + milliseconds(ms);
    if (e < *m.dl_expiry[d]) move_deadline(d, e);
  }
  void move_deadline(int d, time_point e) {
    deadlines[d]->expires_at(e);
    CHECK(deadlines[d]->expiry() == e);
    m.dl_expiry[d] = e;
    deadline_moved(d);
  }
  void set_deadline_slack(int d, milliseconds slack) {
    deadlines[d]->set_slack(slack);
    m.dl_slack[d] = slack;
  }

  asio::cancellation_type pick_type() {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: return asio::cancellation_type::partial;
      case 1: return asio::cancellation_type::total;
      default: return asio::cancellation_type::terminal;
    }
  }

  void signal_op(int s) {
    if (!in.ConsumeBool()) {  // destroy the signal (a new one is made on the next use)
      const int id = sig_wait[s];
      if (!signals[s]) return;
      const bool pending = id >= 0 && !m.waits[id].done();
      const bool left_slot = pending && m.waits[id].decided;  // aborted waits leave their slot at once
      if (pending && !left_slot && !TOCK_FUZZ_KNOWN_BUGS) return;  // known bug: see test/fuzz/repro/
      signals[s].reset();
      sig_wait[s] = -1;
      return;
    }
    if (!signals[s]) return;
    const asio::cancellation_type type = pick_type();
    const int id = sig_wait[s];
    if (id >= 0 && !m.waits[id].done() && !sig_emitted[s]) {
      wait_rec& w = m.waits[id];
      switch (w.k) {
        case kind::timer_wait:
        case kind::deadline_wait:
        case kind::sleep:
          if (w.decided || w.fuzzy) break;
          if (w.strand && w.expiry != time_point::max() && !(clock_type::now() < w.expiry))
            w.fuzzy = true;  // it may have fired, its handler not yet run on the strand
          else
            m.decide(w, aborted);
          break;
        default: w.expect |= aborted; break;
      }
      sig_emitted[s] = true;
    }
    signals[s]->emit(type);
  }

  // Whether a wait aborted or refused on the context's own executor has not completed yet: then a drain is
  // queued on the context, ready to run.
  bool drain_pending() const {
    for (const auto& w : m.waits)
      if (w.decided && !w.strand && !w.done() &&
          (w.k == kind::timer_wait || w.k == kind::deadline_wait || w.k == kind::sleep))
        return true;
    return false;
  }

  // After a full poll: every wait whose outcome is known, or whose time has come, has completed.
  void check_progress() {
    const time_point now = clock_type::now();
    for (std::size_t i = 0; i < m.waits.size(); ++i) {
      const wait_rec& w = m.waits[i];
      if (w.done()) continue;
      // Not `fuzzy`: a fuzzy wait may still be pending (a cancel_one() may have taken another of its timer), so
      // only its expiry makes it due.
      bool due = w.decided;
      switch (w.k) {
        case kind::timer_wait:
        case kind::sleep:
        case kind::deadline_wait: due = due || (m.latest(w) != time_point::max() && !(now < m.latest(w))); break;
        case kind::bound_read:
          due = (w.expect & (aborted | refused)) || m.buffered[w.owner] > 0 ||
                (w.dl >= 0 && m.dl_expiry[w.dl] &&
                 !(now < tock::detail::latest_time(*m.dl_expiry[w.dl], time_point::duration(m.dl_slack[w.dl]))));
          break;
        case kind::timeout_read: due = (w.expect & (aborted | refused)) || m.buffered[w.owner] > 0; break;
      }
      if (due) {
        std::fprintf(stderr,
                     "fuzz_ops: wait %zu (kind %d, owner %d, deadline %d, strand %d, signal %d, decided %d, "
                     "fuzzy %d, expect %u) due at %lld ns, now %lld ns, not completed after a full poll\n",
                     i, static_cast<int>(w.k), w.owner, w.dl, w.strand, w.sig, w.decided, w.fuzzy, w.expect,
                     static_cast<long long>(w.expiry.time_since_epoch().count()),
                     static_cast<long long>(now.time_since_epoch().count()));
        fail("!due", static_cast<int>(i));
      }
    }
  }

  // Polls both contexts until neither has a handler ready (a deadline of ctx fires into a read on ctx2, whose
  // completion may go to ctx's strand), then checks that ctx has not run out of work while anything of its
  // service can still complete.
  void poll_all() {
    for (int round = 0; round < 64; ++round) {
      if (ctx->stopped()) ctx->restart();
      std::size_t n = ctx->poll();
      if (ctx2->stopped()) ctx2->restart();
      n += ctx2->poll();
      if (n == 0) break;
    }
    check_work();
  }

  // The work rule (docs/design.md): while a wait of ctx's service is pending, or a read bound to one of its
  // deadlines (on either context), ctx's run() must not return: a poll that found no work left stops it. A
  // read on ctx2 whose deadline went away has no limit left and holds only ctx2.
  void check_work() {
    if (!ctx->stopped()) return;
    for (std::size_t i = 0; i < m.waits.size(); ++i) {
      const wait_rec& w = m.waits[i];
      if (w.done()) continue;
      if (w.k == kind::bound_read && !local_pair(w.owner) && w.dl < 0) continue;
      std::fprintf(stderr,
                   "fuzz_ops: wait %zu (kind %d, owner %d, deadline %d, expect %u) pending, but ctx ran out of work "
                   "(stopped after a full poll)\n",
                   i, static_cast<int>(w.k), w.owner, w.dl, w.expect);
      fail("!ctx->stopped()", static_cast<int>(i));
    }
  }

  void step() {
    const int op = in.ConsumeIntegralInRange<int>(0, 19);
    if (op != 11 && op != 12 && op != 13) m.reset_order();
    switch (op) {
      case 0:
      case 1:
      case 2: timer_op(in.ConsumeIntegralInRange<int>(0, n_timers - 1)); break;
      case 3:
      case 4: deadline_op(in.ConsumeIntegralInRange<int>(0, n_deadlines - 1)); break;
      case 5: sleep_op(); break;
      case 6:
      case 7: socket_op(in.ConsumeIntegralInRange<int>(0, n_pairs - 1)); break;
      case 8: signal_op(in.ConsumeIntegralInRange<int>(0, n_signals - 1)); break;
      case 9: {
        const int c = in.ConsumeIntegralInRange<int>(0, 4);
        const std::size_t n = c == 4 ? big_capacity : static_cast<std::size_t>(c);
        const int what = in.ConsumeIntegralInRange<int>(0, 3);  // 1 and 0 as the bool this was before slack
        if (what == 3) {
          slack_op(milliseconds(c));
        } else if (what == 1) {
          capacity = n;
          service().set_capacity(n);
        } else {
          steady_capacity = n;
          steady_service().set_capacity(n);
        }
        break;
      }
      case 10: {
        clock_type::advance(milliseconds(in.ConsumeIntegralInRange<int>(0, 6)));
        for (std::size_t d = 0; d < n_deadlines; ++d) deadline_moved(static_cast<int>(d));
        break;
      }
      case 11:
        poll_all();
        check_progress();
        break;
      case 12:
        if (ctx->stopped()) ctx->restart();
        ctx->poll_one();
        break;
      case 13:
        if (ctx->stopped()) ctx->restart();
        if (drain_pending())
          ctx->run_one();  // a drain is queued, so this returns (a hang here is a finding: -timeout)
        else
          ctx->run_one_for(std::chrono::seconds(0));  // never blocks: returns when nothing is ready
        break;
      case 14:
      case 15:
        clock_type::advance(milliseconds(in.ConsumeIntegralInRange<int>(1, 6)));
        for (std::size_t d = 0; d < n_deadlines; ++d) deadline_moved(static_cast<int>(d));
        poll_all();
        check_progress();
        break;
      case 16: {  // a deadline moved earlier (a shorter limit), whatever is bound to it
        const int d = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        const int ms = in.ConsumeIntegralInRange<int>(0, 12);
        if (usable_deadline(d) && !dl_moved_from[d]) move_deadline_earlier(d, ms);
        break;
      }
      case 17: {  // a deadline's slack changed (smaller: its latest time earlier), whatever is bound to it
        const int d = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        const int ms = in.ConsumeIntegralInRange<int>(0, 4);
        if (deadlines[d]) set_deadline_slack(d, milliseconds(ms));
        break;
      }
      case 18: server_turn(in.ConsumeIntegralInRange<int>(0, n_pairs - 1)); break;
      default: {  // a read on ctx2 bound to a deadline of ctx (the pair and the deadline made first if need be)
        const int p = static_cast<int>(n_local_pairs) + in.ConsumeIntegralInRange<int>(0, 1);
        const int d = in.ConsumeIntegralInRange<int>(0, n_deadlines - 1);
        if (!pairs[p]) socket_op(p);
        make_deadline(d);
        bind_read(p, d);
        break;
      }
    }
    CHECK(service().invariants_hold());
    CHECK(steady_service().invariants_hold());
    CHECK(service().stats().balanced());
    CHECK(steady_service().stats().balanced());
  }

  void finish() {
    const bool poll_first = in.ConsumeBool();
    if (poll_first) {
      poll_all();
      check_progress();
    }
    for (std::size_t t = 0; t < n_timers; ++t) destroy_timer(static_cast<int>(t));
    for (std::size_t d = 0; d < n_deadlines; ++d) destroy_deadline(static_cast<int>(d));
    for (std::size_t p = 0; p < n_pairs; ++p) {
      if (m.reading[p] >= 0) m.waits[m.reading[p]].expect |= aborted;
      pairs[p].reset();
      m.reading[p] = -1;
    }
    if (in.ConsumeBool()) poll_all();
    CHECK(service().invariants_hold());
    m.shutting_down = true;
    ctx2.reset();  // its pending handlers (reads' completions) are destroyed, never called
    strand.reset();
    ctx.reset();  // pending handlers are destroyed, never called
    for (std::size_t i = 0; i < m.waits.size(); ++i)
      CHECK(m.waits[i].completions + m.waits[i].destructions == 1, static_cast<int>(i));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  run r(in);
  for (std::size_t i = 0; i < max_ops && in.remaining_bytes() > 0; ++i) r.step();
  r.finish();
  return 0;
}
