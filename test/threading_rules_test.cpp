// Concurrency where users put it (design.md, "Threads"): operations started from a thread that does not run
// their context, cancellation signals emitted or destroyed on another context's strand while a third thread
// cancels, contexts destroyed with completions still queued elsewhere. Each case began as a reproducer of a
// bug (shared/repro r1..r5); the races show under TSan and ASan (CI runs this suite under both), the lost
// timeouts and the host that stopped in every build. Where tock replaces steady_timer, the case runs on
// Asio's timer too, as the control.
#include "test_support.hpp"

#include <tock/detail/sanitizers.hpp>  // TOCK_ASAN, TOCK_TSAN: smaller runs under a sanitizer
#include <tock/tock.hpp>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace tock_test;
using strand_type = asio::strand<asio::io_context::executor_type>;
using work_type = asio::executor_work_guard<asio::io_context::executor_type>;

#if TOCK_ASAN || TOCK_TSAN
constexpr int race_rounds = 300;
constexpr int timed_ops = 20000;
constexpr int due_sleeps = 50000;
#else
constexpr int race_rounds = 2000;
constexpr int timed_ops = 20000;
constexpr int due_sleeps = 100000;
#endif

// Waits (yielding) until `done()` or `limit` passed; true if done. Tests fail on false instead of hanging.
template <typename Done>
bool wait_until(Done&& done, steady_clock::duration limit = 10s) {
  const auto end = steady_clock::now() + limit;
  while (!done())
    if (steady_clock::now() > end)
      return false;
    else
      std::this_thread::yield();
  return true;
}

// Spins for about `n` short steps: staggers two threads differently from round to round, so that each side
// of a race comes first in some rounds.
inline void spin(int n) {
  std::atomic<int> steps{0};
  for (int k = 0; k < n * 256; ++k) steps.fetch_add(1, std::memory_order_relaxed);
}

// A context run by its own thread until stop().
struct running_context {
  asio::io_context ctx;
  std::optional<work_type> work{ctx.get_executor()};
  std::thread thread{[this] { ctx.run(); }};
  void stop() {
    work.reset();
    thread.join();
  }
  ~running_context() {
    if (thread.joinable()) stop();
  }
};

// Runs `f` on `strand` and waits until it has run.
template <typename F>
void run_on(const strand_type& strand, F&& f) {
  std::atomic<bool> done{false};
  asio::post(strand, [&] {
    f();
    done.store(true);
  });
  while (!done.load()) std::this_thread::yield();
}

// --- r1: a fired wait whose handler waits on another context's strand; its own context is destroyed; the
// strand emits the slot before the handler runs. tock documents that such a wait outlives its service.
// (Asio's steady_timer fails the timer half: shared/repro/r1_asio_control.cpp, a use-after-free.)

template <typename Start>
void emit_after_own_context_is_gone(Start start, const error_code& expected) {
  asio::cancellation_signal sig;
  asio::io_context other;
  auto strand = asio::make_strand(other);
  completion c;
  bool on_strand = false;
  asio::post(strand, [&] { sig.emit(asio::cancellation_type::terminal); });  // runs before the handler
  {
    auto ctx = std::make_unique<asio::io_context>();
    start(*ctx, asio::bind_cancellation_slot(sig.slot(), asio::bind_executor(strand, [&](const error_code& ec) {
                                               on_strand = strand.running_in_this_thread();
                                               record(c)(ec);
                                             })));
  }
  other.run();
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(c.ec == expected);
  BOOST_TEST(on_strand);
}

BOOST_AUTO_TEST_SUITE(threading_rules_test)

BOOST_AUTO_TEST_CASE(timer_wait_fired_then_context_destroyed_then_slot_emitted) {
  // The timer goes before its context: its fired wait, not run yet, is aborted (tock's cancel guarantee).
  emit_after_own_context_is_gone(
      [](asio::io_context& ctx, auto handler) {
        tock::timer timer(ctx, 1ms);
        timer.async_wait(std::move(handler));
        ctx.run();
      },
      aborted);
}

BOOST_AUTO_TEST_CASE(sleep_fired_then_context_destroyed_then_slot_emitted) {
  emit_after_own_context_is_gone(
      [](asio::io_context& ctx, auto handler) {
        tock::async_sleep_for(ctx, 1ms, std::move(handler));
        ctx.run();
      },
      error_code());
}

// The same through tock::timeout around one of Asio's own operations (found by fuzz_threads): the deadline's
// cancellation, and the user's emit forwarded by the timeout, would reach Asio's canceller in the destroyed
// context; once the entry has left a service that is gone, the timeout emits nothing. Asio destroys the
// aborted wait, still queued, with its context: the handler is destroyed once and never called.
BOOST_AUTO_TEST_CASE(timeout_fired_then_context_destroyed_then_slot_emitted) {
  asio::cancellation_signal sig;
  asio::io_context other;
  auto strand = asio::make_strand(other);
  completion c;
  auto sentinel = std::make_shared<int>(0);
  const std::weak_ptr<int> handler_alive = sentinel;
  asio::post(strand, [&] { sig.emit(asio::cancellation_type::terminal); });  // runs before the handler
  {
    auto ctx = std::make_unique<asio::io_context>();
    asio::steady_timer inner(*ctx, 1h);
    inner.async_wait(tock::timeout(
        0ms, asio::bind_cancellation_slot(
                 sig.slot(), asio::bind_executor(
                                 strand, [&c, held = std::move(sentinel)](const error_code& ec) { record(c)(ec); }))));
    // The entry fires: its cancellation is dispatched to the strand, which does not run yet.
    for (int i = 0; i < 1000 && service_of(*ctx).stats().fired == 0; ++i) {
      ctx->restart();
      ctx->run_one_for(1ms);
    }
    BOOST_TEST(service_of(*ctx).stats().fired == 1u);
  }  // the Asio timer goes first (its wait is queued, aborted), then its context, destroying that wait
  other.run();
  BOOST_TEST(c.calls == 0);
  BOOST_TEST(handler_alive.expired());
  sig.emit(asio::cancellation_type::terminal);  // the slot was left: nothing of the operation is reached
}

// The operation of a tock::timeout completed (its handler queued on a strand of another context, run by its
// own thread) while its entry is still scheduled; the strand runs the handler, which takes the entry out,
// while this thread destroys the entry's context (found by fuzz_threads_asan: the handler locked the destroyed
// service's mutex). A handler on a foreign executor holds the service's core and leaves through it.
BOOST_AUTO_TEST_CASE(timeout_completed_on_foreign_strand_while_its_context_is_destroyed) {
  running_context other;
  const auto strand = asio::make_strand(other.ctx);
  std::atomic<int> calls{0}, failed{0};
  constexpr int rounds = 4000;  // the window is a few instructions wide: many rounds, finely staggered
  for (int i = 0; i < rounds; ++i) {
    std::atomic<bool> hold{true};
    asio::post(strand, [&] {  // keeps the handler queued behind it
      while (hold.load()) std::this_thread::yield();
    });
    auto ctx = std::make_unique<asio::io_context>();
    {
      asio::steady_timer op(*ctx, 0ms);
      op.async_wait(tock::timeout(1h, asio::bind_executor(strand, [&](const error_code& ec) {
                                    if (ec) failed.fetch_add(1);
                                    calls.fetch_add(1);
                                  })));
      std::this_thread::sleep_for(200us);  // the wait is due: a poll completes it, queueing the handler on the strand
      for (int k = 0; k < 3; ++k) ctx->poll();
      BOOST_REQUIRE_EQUAL(service_of(*ctx).pending(), 1u);  // the timeout's entry is still scheduled
    }  // (had the wait not completed, destroying `op` would abort it: the handler checks for success)
    std::thread release([&, n = i % 97] {
      std::atomic<int> steps{0};
      while (steps.fetch_add(1, std::memory_order_relaxed) < n * 40) {
      }
      hold.store(false);
    });
    ctx.reset();  // while the strand may be running the handler
    release.join();
    BOOST_REQUIRE(wait_until([&] { return calls.load() == i + 1; }));
  }
  other.stop();
  BOOST_CHECK_EQUAL(calls.load(), rounds);
  BOOST_CHECK_EQUAL(failed.load(), 0);
}

// --- r2: a timer used by one thread is cancelled, reset, moved onto or destroyed while its handler's strand,
// on another context, emits or destroys the signal its wait is bound to. Only the strand touches the signal.

enum class ending { cancel, reset, move_onto, destroy };
enum class on_strand { emit, destroy_signal };

template <typename Timer>
void end_wait_while_strand_touches_signal(ending how, on_strand what) {
  running_context own, other;
  auto strand = asio::make_strand(other.ctx);
  std::atomic<int> completions{0};
  std::optional<Timer> timer(std::in_place, own.ctx);
  for (int i = 0; i < race_rounds; ++i) {
    auto sig = std::make_shared<std::unique_ptr<asio::cancellation_signal>>();
    run_on(strand, [&] { *sig = std::make_unique<asio::cancellation_signal>(); });
    if (!timer) timer.emplace(own.ctx);
    timer->expires_after(1h);
    timer->async_wait(asio::bind_cancellation_slot(
        (*sig)->slot(), asio::bind_executor(strand, [&](const error_code&) { completions.fetch_add(1); })));
    // Every other round the strand waits until the timer's thread has ended the wait: relaxed flags, so that
    // TSan sees no order between the two sides, as with two threads that merely happen to run in that order.
    const bool ender_first = i % 2 == 1;
    std::atomic<bool> go{false}, ended{false};
    asio::post(strand, [&, sig, i, ender_first] {
      go.store(true, std::memory_order_relaxed);
      if (ender_first)
        while (!ended.load(std::memory_order_relaxed)) {
        }
      else
        spin(i % 7);
      if (what == on_strand::destroy_signal)
        sig->reset();
      else
        (*sig)->emit(asio::cancellation_type::terminal);
    });
    while (!go.load(std::memory_order_relaxed)) {
    }
    if (!ender_first) spin(i % 5);
    switch (how) {
      case ending::cancel: timer->cancel(); break;
      case ending::reset: timer->expires_after(1h); break;
      case ending::move_onto: *timer = Timer(own.ctx); break;
      case ending::destroy: timer.reset(); break;
    }
    ended.store(true, std::memory_order_relaxed);
    BOOST_REQUIRE(wait_until([&] { return completions.load() == i + 1; }));
    asio::post(strand, [sig] { sig->reset(); });
  }
  timer.reset();
  own.stop();
  other.stop();
  BOOST_TEST(completions.load() == race_rounds);
}

using timer_types = boost::mpl::list<tock::timer, asio::steady_timer>;

BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_while_strand_emits, Timer, timer_types) {
  end_wait_while_strand_touches_signal<Timer>(ending::cancel, on_strand::emit);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(cancel_while_strand_destroys_signal, Timer, timer_types) {
  end_wait_while_strand_touches_signal<Timer>(ending::cancel, on_strand::destroy_signal);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(reset_while_strand_emits, Timer, timer_types) {
  end_wait_while_strand_touches_signal<Timer>(ending::reset, on_strand::emit);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(move_onto_while_strand_destroys_signal, Timer, timer_types) {
  end_wait_while_strand_touches_signal<Timer>(ending::move_onto, on_strand::destroy_signal);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(destroy_while_strand_emits, Timer, timer_types) {
  end_wait_while_strand_touches_signal<Timer>(ending::destroy, on_strand::emit);
}

// --- r3: a wait fires on its context's thread while the handler's strand destroys the signal.

template <typename Start>
void fire_while_strand_destroys_signal(Start start) {
  running_context own, other;
  auto strand = asio::make_strand(other.ctx);
  std::atomic<int> completions{0};
  tock::timer timer(own.ctx);
  for (int i = 0; i < race_rounds; ++i) {
    auto sig = std::make_shared<std::unique_ptr<asio::cancellation_signal>>();
    run_on(strand, [&] { *sig = std::make_unique<asio::cancellation_signal>(); });
    start(own.ctx, timer,
          asio::bind_cancellation_slot(
              (*sig)->slot(), asio::bind_executor(strand, [&](const error_code&) { completions.fetch_add(1); })));
    asio::post(strand, [sig, i] {
      spin(i % 7);
      sig->reset();
    });
    BOOST_REQUIRE(wait_until([&] { return completions.load() == i + 1; }));
  }
  own.stop();
  other.stop();
  BOOST_TEST(completions.load() == race_rounds);
}

BOOST_AUTO_TEST_CASE(sleep_fires_while_strand_destroys_signal) {
  fire_while_strand_destroys_signal(
      [](asio::io_context& ctx, tock::timer&, auto h) { tock::async_sleep_for(ctx, 0ms, std::move(h)); });
}

BOOST_AUTO_TEST_CASE(timer_wait_fires_while_strand_destroys_signal) {
  fire_while_strand_destroys_signal([](asio::io_context&, tock::timer& timer, auto h) {
    timer.expires_after(0ms);
    timer.async_wait(std::move(h));
  });
}

// --- r4: timed operations started from a thread that does not run their single-threaded context. Their
// deadline has passed already, so the entry may fire before the initiation returns: the operation must still
// time out, every time. (Asio's own cancel_after loses some in this pattern: shared/repro/r4_asio_control.cpp.)

// Binder(ctx) makes the tokens: built after the context and destroyed before it, as I/O objects must be.
template <typename Binder>
void timed_ops_started_off_context() {
  asio::io_context ctx(1);
  auto work = asio::make_work_guard(ctx);
  // Due sleeps keep the driver popping, one lock per entry, so that it takes each new entry at once.
  std::atomic<int> slept{0};
  const auto t0 = steady_clock::now();
  for (int i = 0; i < due_sleeps; ++i) tock::async_sleep_until(ctx, t0, [&](const error_code&) { slept.fetch_add(1); });
  std::thread runner([&] { ctx.run(); });
  BOOST_REQUIRE(wait_until([&] { return slept.load() > 0; }));
  std::atomic<int> timed_out_count{0}, other_count{0};
  bool all = false;
  {
    Binder bind(ctx);
    std::vector<std::unique_ptr<asio::steady_timer>> timers;
    for (int i = 0; i < timed_ops; ++i) {
      auto& t = timers.emplace_back(std::make_unique<asio::steady_timer>(ctx, 1h));
      t->async_wait(bind(
          [&](const error_code& ec) { (ec == tock_test::timed_out ? timed_out_count : other_count).fetch_add(1); }));
    }
    all = wait_until([&] { return timed_out_count.load() + other_count.load() == timed_ops; });
    for (auto& t : timers) t->cancel();  // let run() return, whatever happened
    BOOST_REQUIRE(wait_until([&] { return timed_out_count.load() + other_count.load() == timed_ops; }));
  }
  work.reset();
  runner.join();
  BOOST_TEST(all);
  BOOST_TEST(timed_out_count.load() == timed_ops);
  BOOST_TEST(other_count.load() == 0);
}

struct timeout_binder {
  explicit timeout_binder(asio::io_context&) {}
  template <typename Handler>
  auto operator()(Handler h) const {
    return tock::timeout(-10s, std::move(h));
  }
};

struct deadline_binder {
  tock::deadline dl;
  explicit deadline_binder(asio::io_context& ctx) : dl(ctx.get_executor(), -10s) {}
  template <typename Handler>
  auto operator()(Handler h) {
    return dl.bind(std::move(h));
  }
};

BOOST_AUTO_TEST_CASE(timeout_started_off_context_thread_is_never_lost) {
  timed_ops_started_off_context<timeout_binder>();
}

BOOST_AUTO_TEST_CASE(deadline_bind_started_off_context_thread_is_never_lost) {
  timed_ops_started_off_context<deadline_binder>();
}

// --- A deadline's link (detail/deadline_link.hpp): its owner, on a thread that does not run the context,
// attaches each next bound operation and lets go of the last one while, on the context's thread, that one
// completes (withdrawn) or its deadline fires (claimed) and the driver re-keys or drops the deadline's node.
// Now and then the owner destroys the deadline with its operation pending (detached: it ends by itself). Each
// operation ends once, as its own timer or its deadline said.
BOOST_AUTO_TEST_CASE(deadline_link_attached_off_context_while_its_entries_fire_and_withdraw) {
  running_context rc;
  std::atomic<int> ended{0}, succeeded{0}, timed_out_count{0}, other{0};
  {
    std::optional<tock::deadline> dl(std::in_place, rc.ctx.get_executor());
    asio::steady_timer op(rc.ctx);  // the bound operation: Asio's own wait, which supports cancellation
    std::uint32_t seed = 7;
    auto next = [&seed] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
    for (int i = 0; i < race_rounds; ++i) {
      dl->expires_after(std::chrono::microseconds(next() % 200));
      op.expires_after(std::chrono::microseconds(next() % 200));
      op.async_wait(dl->bind([&](const error_code& ec) {
        (!ec ? succeeded : ec == tock_test::timed_out ? timed_out_count : other).fetch_add(1);
        ended.fetch_add(1);
      }));
      spin(static_cast<int>(next() % 4));
      if (i % 16 == 15) dl.emplace(rc.ctx.get_executor());  // destroyed with its operation pending
      BOOST_REQUIRE(wait_until([&] { return ended.load() == i + 1; }));
    }
    BOOST_CHECK(tock::timer_service::of(rc.ctx).stats().balanced());
  }
  rc.stop();
  BOOST_CHECK_EQUAL(ended.load(), race_rounds);
  BOOST_CHECK_EQUAL(other.load(), 0);
  BOOST_CHECK_EQUAL(succeeded.load() + timed_out_count.load(), race_rounds);
  BOOST_CHECK(tock::timer_service::of(rc.ctx).invariants_hold());
}

// The owner binds operations to a deadline while the context's thread fires the deadline's own waits, whose
// handlers run on a strand of a context not yet run: each stays in the ring as fired (wait_ring::due, written
// under the lock). The bind reads nothing of the ring without the lock (deadline_link.hpp, rule 6): fuzz_threads
// found attach() reading the has_link bit beside `due`, a data race under TSan. Every wait and operation ends once.
BOOST_AUTO_TEST_CASE(deadline_bound_off_context_while_its_strand_waits_fire) {
  constexpr int rounds = 200;
  running_context rc;
  asio::io_context other;  // run at the end: the fired waits stay due until then
  strand_type strand(other.get_executor());
  std::atomic<int> reads{0}, read_errors{0};
  int waits = 0, wait_errors = 0;  // on this thread, which runs `other`
  {
    tock::deadline dl(rc.ctx.get_executor());
    asio::steady_timer op(rc.ctx, 1h);  // the bound operation, timed out by the deadline
    for (int i = 0; i < rounds; ++i) {
      dl.expires_after(0ms);
      dl.async_wait(asio::bind_executor(strand, [&](const error_code& ec) {
        ++waits;
        if (ec && ec != aborted) ++wait_errors;
      }));
      std::this_thread::sleep_for(200us);  // no synchronisation: the wait fires meanwhile, on rc's thread
      op.async_wait(dl.bind([&](const error_code& ec) {
        if (ec != tock_test::timed_out) read_errors.fetch_add(1);
        reads.fetch_add(1);
      }));
    }
    BOOST_REQUIRE(wait_until([&] { return reads.load() == rounds; }));
    BOOST_REQUIRE(wait_until([&] {
      other.restart();
      other.poll();
      return waits == rounds;
    }));
    BOOST_CHECK(tock::timer_service::of(rc.ctx).stats().balanced());
  }
  rc.stop();
  BOOST_CHECK_EQUAL(read_errors.load(), 0);
  BOOST_CHECK_EQUAL(wait_errors, 0);
  BOOST_CHECK(tock::timer_service::of(rc.ctx).invariants_hold());
}

// An executor of one context (`inner`) that can hold up the thread of another (`held_on`) at its first copy
// there once armed, until `go`, and counts copies taken from one already destroyed: the test's way to stop
// a thread inside tock between two steps and to see what it then reads.
struct executor_probe {
  asio::io_context::executor_type held_on;
  std::atomic<bool> armed{false}, held{false}, go{false};
  std::atomic<int> copies_of_destroyed{0};

  void copying() {
    if (held_on.running_in_this_thread() && armed.exchange(false)) {
      held.store(true);
      if (!wait_until([&] { return go.load(); })) copies_of_destroyed.fetch_add(1000);  // never let go: fail
    }
  }
};

class probe_executor {
 public:
  probe_executor(asio::io_context::executor_type inner, executor_probe& probe) noexcept
      : inner_(inner), probe_(&probe) {}
  probe_executor(const probe_executor& other) noexcept
      : inner_(read(other)), probe_(other.probe_), never_(other.never_) {}
  probe_executor& operator=(const probe_executor& other) noexcept {
    inner_ = read(other);
    probe_ = other.probe_;
    never_ = other.never_;
    return *this;
  }
  ~probe_executor() { alive_.store(dead, std::memory_order_relaxed); }  // atomic: not a dead store to drop

  asio::io_context& query(asio::execution::context_t) const noexcept { return inner_.context(); }
  asio::execution::blocking_t query(asio::execution::blocking_t) const noexcept {
    return never_ ? asio::execution::blocking_t(asio::execution::blocking.never) : asio::execution::blocking.possibly;
  }
  probe_executor require(asio::execution::blocking_t::never_t) const noexcept { return with_never(true); }
  probe_executor require(asio::execution::blocking_t::possibly_t) const noexcept { return with_never(false); }
  template <typename F>
  void execute(F&& f) const {
    if (never_)
      asio::require(inner_, asio::execution::blocking.never).execute(std::forward<F>(f));
    else
      inner_.execute(std::forward<F>(f));  // in place on the context's thread, else posted
  }
  bool operator==(const probe_executor& other) const noexcept { return inner_ == other.inner_; }

 private:
  static constexpr std::uint32_t live = 0x600d, dead = 0xdead;
  probe_executor with_never(bool never) const noexcept {
    probe_executor e(*this);
    e.never_ = never;
    return e;
  }
  static asio::io_context::executor_type read(const probe_executor& other) noexcept {
    other.probe_->copying();
    if (other.alive_.load(std::memory_order_relaxed) != live) other.probe_->copies_of_destroyed.fetch_add(1);
    return other.inner_;
  }
  asio::io_context::executor_type inner_;
  executor_probe* probe_;
  bool never_ = false;
  std::atomic<std::uint32_t> alive_{live};
};

// A bound operation that completes by itself (on its handler's context, B) just after its deadline fired (on
// the deadline's, A): the driver has claimed the entry and is dispatching the cancellation through the
// handler's executor, a copy of which the entry keeps. The completion must leave that executor alone (only a
// withdrawn entry lets go of it early: timed_op::retire_done). The probe holds A's driver at its first copy
// of the executor until the operation has completed, then sees whether it was destroyed meanwhile.
BOOST_AUTO_TEST_CASE(deadline_fires_while_its_bound_operation_completes_on_another_context) {
  running_context a, b;
  executor_probe probe{a.ctx.get_executor()};
  {
    asio::steady_timer op(b.ctx, 1h);
    tock::basic_deadline<tock::manual_clock> dl(a.ctx.get_executor());
    dl.expires_after(10ms);
    std::atomic<int> calls{0};
    error_code result;
    op.async_wait(dl.bind(asio::bind_executor(probe_executor(b.ctx.get_executor(), probe), [&](const error_code& ec) {
      result = ec;
      calls.fetch_add(1);
    })));
    probe.armed.store(true);
    tock::manual_clock::advance(10ms);  // A's driver fires the deadline: it claims the entry, then dispatches
    BOOST_REQUIRE(wait_until([&] { return probe.held.load(); }));
    asio::post(b.ctx, [&] { op.cancel(); });  // the operation ends by itself, on B, before the cancellation
    BOOST_REQUIRE(wait_until([&] { return calls.load() == 1; }));
    probe.go.store(true);
    a.stop();
    b.stop();
    BOOST_CHECK_EQUAL(calls.load(), 1);
    BOOST_CHECK_EQUAL(result, aborted);  // its own end: the deadline's cancellation came after it
  }
  BOOST_CHECK_EQUAL(probe.copies_of_destroyed.load(), 0);
  BOOST_CHECK(tock::basic_timer_service<tock::manual_clock>::of(a.ctx).invariants_hold());
}

// A deadline's bound operation on another context (B), its handler on the deadline's context (A) with the
// user's cancellation slot, which is used on A: B is destroyed with the operation unrun, on this thread,
// while A runs. The handler is destroyed here, but the slot is left on A, where the signal lives (design.md,
// "Threads"), not here while A may be emitting it.
BOOST_AUTO_TEST_CASE(bound_operation_dropped_with_another_context_leaves_the_slot_on_its_handlers) {
  running_context a;
  tock::deadline dl(a.ctx.get_executor());
  asio::cancellation_signal signal;  // used on A only, once the operation has started
  std::atomic<int> calls{0};
  std::atomic<bool> held{false}, go{false}, hooked_while_held{false};
  {
    asio::io_context b;  // never run: its destruction drops the operation
    async_post_success(
        b, dl.bind(asio::bind_cancellation_slot(
               signal.slot(), asio::bind_executor(a.ctx.get_executor(), [&](error_code) { calls.fetch_add(1); }))));
    BOOST_REQUIRE(signal.slot().has_handler());
    asio::post(a.ctx, [&] {
      held.store(true);
      wait_until([&] { return go.load(); });
      hooked_while_held.store(signal.slot().has_handler());  // A's side of the slot, as an emit would read it
    });
    BOOST_REQUIRE(wait_until([&] { return held.load(); }));
  }  // b destroyed: the operation is dropped here, A still held
  go.store(true);
  a.stop();
  BOOST_CHECK(hooked_while_held.load());  // not cleared off A's thread
  BOOST_CHECK(!signal.slot().has_handler());  // cleared on A, after the hold
  BOOST_CHECK_EQUAL(calls.load(), 0);
  BOOST_CHECK(tock::timer_service::of(a.ctx).invariants_hold());
}

// --- r5: a periodic task on a pool, its timer on a host context run without a work guard: between the wait
// that fired and the run that waits again, the host must not run out of work.

BOOST_AUTO_TEST_CASE(periodic_task_on_pool_keeps_its_host_running) {
  asio::thread_pool pool(2);
  asio::io_context host;
  std::atomic<bool> host_returned{false};
  auto h = tock::schedule_at_fixed_rate(host, pool.get_executor(), 0ms, 1ms, [] {});
  std::thread t([&] {
    host.run();
    host_returned.store(true);
  });
  const bool ran = wait_until([&] { return h.runs() >= 10 || host_returned.load(); });
  BOOST_TEST(ran);
  BOOST_TEST(!host_returned.load());
  BOOST_TEST(h.scheduled());
  BOOST_TEST(h.runs() >= 10u);
  h.cancel();  // the host's work goes with the task: run() returns
  BOOST_TEST(wait_until([&] { return host_returned.load(); }));
  t.join();
  pool.join();
}

BOOST_AUTO_TEST_CASE(cancelled_periodic_task_lets_its_host_return) {
  asio::io_context host;
  // The control, on the same context: what poll() runs while Asio's own timer waits an hour. None of the
  // wait's handlers; the backend's own, if it has any (none on epoll; some on Asio's io_uring backend).
  std::size_t control = 0;
  {
    asio::steady_timer t(host, 1h);
    bool called = false;
    t.async_wait([&](const sys::error_code&) { called = true; });
    control = host.poll();
    BOOST_TEST(!called);
    t.cancel();
    BOOST_TEST(run_until_idle(host));
    BOOST_TEST(called);
    host.restart();
  }
  auto h = tock::schedule_with_fixed_delay(host, host.get_executor(), 1h, 1h, [] {});
  const std::size_t ran = host.poll();
  BOOST_TEST(ran == control, "poll() ran " << ran << " handlers for the task, " << control << " for steady_timer");
  BOOST_TEST(!host.stopped());
  h.cancel();
  BOOST_TEST(run_until_idle(host));
}

// --- Shutdown while another context's strand emits: what the dying context drops, it leaves to the strand.

// A sleep pending when its context is destroyed: its handler is destroyed (never called), exactly once,
// while the strand emits its slot.
BOOST_AUTO_TEST_CASE(sleep_dropped_at_shutdown_while_strand_emits) {
  running_context other;
  auto strand = asio::make_strand(other.ctx);
  for (int i = 0; i < race_rounds / 4; ++i) {
    auto sig = std::make_shared<asio::cancellation_signal>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> watch = alive;
    std::atomic<bool> dying{false};
    {
      asio::io_context ctx;
      tock::async_sleep_for(
          ctx, 1h,
          asio::bind_cancellation_slot(
              sig->slot(),
              asio::bind_executor(strand, [calls, a = std::move(alive)](const error_code&) { calls->fetch_add(1); })));
      asio::post(strand, [&, sig] {
        while (!dying.load(std::memory_order_relaxed)) {
        }
        sig->emit(asio::cancellation_type::terminal);
      });
      dying.store(true, std::memory_order_relaxed);
    }
    BOOST_REQUIRE(wait_until([&] { return watch.expired(); }));
    run_on(strand, [&] { sig.reset(); });
    BOOST_TEST(calls->load() == 0);
  }
}

// A timed operation dropped with its context: the user's slot stays with the strand, which may emit it and
// destroy its signal later.
BOOST_AUTO_TEST_CASE(timeout_dropped_at_shutdown_leaves_the_slot_to_its_strand) {
  running_context other;
  auto strand = asio::make_strand(other.ctx);
  for (int i = 0; i < race_rounds / 4; ++i) {
    auto sig = std::make_shared<asio::cancellation_signal>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    std::atomic<bool> dying{false};
    {
      asio::io_context ctx;
      async_post_success(
          ctx, tock::timeout(
                   never, asio::bind_cancellation_slot(
                              sig->slot(), asio::bind_executor(strand, [calls](error_code) { calls->fetch_add(1); }))));
      asio::post(strand, [&, sig] {
        while (!dying.load(std::memory_order_relaxed)) {
        }
        sig->emit(asio::cancellation_type::terminal);
      });
      dying.store(true, std::memory_order_relaxed);
    }
    run_on(strand, [&] {
      sig->emit(asio::cancellation_type::terminal);  // after the operation is gone: forwards nothing
      sig.reset();
    });
    BOOST_TEST(calls->load() == 0);
  }
}

// A one-shot task dropped with its host: its handler's slot stays with the handler's strand.
BOOST_AUTO_TEST_CASE(scheduled_task_dropped_with_host_leaves_the_slot_to_its_strand) {
  running_context other;
  auto strand = asio::make_strand(other.ctx);
  for (int i = 0; i < race_rounds / 4; ++i) {
    auto sig = std::make_shared<asio::cancellation_signal>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    std::atomic<bool> dying{false};
    {
      asio::io_context host;
      tock::schedule(
          host, host.get_executor(), 1h, [] {},
          asio::bind_cancellation_slot(
              sig->slot(), asio::bind_executor(strand, [calls](std::exception_ptr) { calls->fetch_add(1); })));
      asio::post(strand, [&, sig] {
        while (!dying.load(std::memory_order_relaxed)) {
        }
        sig->emit(asio::cancellation_type::terminal);
      });
      dying.store(true, std::memory_order_relaxed);
    }
    run_on(strand, [&] {
      sig->emit(asio::cancellation_type::terminal);
      sig.reset();
    });
    BOOST_TEST(calls->load() == 0);
  }
}

// A one-shot task whose handler runs on a strand of another context: the slot is left there, before the call.
BOOST_AUTO_TEST_CASE(scheduled_task_completes_on_its_strand_and_leaves_the_slot_there) {
  running_context host, other;
  auto strand = asio::make_strand(other.ctx);
  for (int i = 0; i < race_rounds / 4; ++i) {
    auto sig = std::make_shared<std::unique_ptr<asio::cancellation_signal>>();
    run_on(strand, [&] { *sig = std::make_unique<asio::cancellation_signal>(); });
    std::atomic<int> calls{0};
    tock::schedule(
        host.ctx, host.ctx.get_executor(), 0ms, [] {},
        asio::bind_cancellation_slot((*sig)->slot(),
                                     asio::bind_executor(strand, [&](std::exception_ptr) { calls.fetch_add(1); })));
    asio::post(strand, [sig] { sig->reset(); });
    BOOST_REQUIRE(wait_until([&] { return calls.load() == 1; }));
  }
  // The host's thread, which dispatched to the strand, may still hold a copy of it for a moment after the
  // handler ran (as any Asio operation's work guard does): stop it before the strand's context goes.
  host.stop();
  other.stop();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
