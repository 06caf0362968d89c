// bench/bench_systems.hpp: the systems timer_bench compares, each behind a small adapter, so that every
// workload in bench_workloads.hpp is written once, as a template over the adapter.
//
// An adapter holds the system's timers for one repetition (`i` is a timer's index, 0..n-1) and implements the
// operations that the workloads it takes part in use; a workload that does not apply to a system (see the
// lists in timer_bench.cpp) is never instantiated with it. Every operation is an inline template that does
// exactly what the workload did with the system directly, with the caller's handler, duration and time point
// types passed through unchanged (tock's expires_after is a template over the duration): no virtual call, no
// type erasure in the measured phases.
//
//   context                     the type of the context the workload creates (an io_context but for the heap)
//   static warm_up(ctx)         creates the services and fills the caches (before the adapter, not measured)
//   reserve(n)                  room for n timers, before the first start (memory counts it)
//   start_at(i, t, h)           timer i (i == the number started so far) with a wait due at t, handler h
//   start_after(i, d, h)        the same, due d from now (touch and check: the idle timeout)
//   add(i)                      timer i with no wait (threads)
//   restart(i, d, h)            cancel timer i's wait and start another, due d from now (churn, threads)
//   touch(i, d, h)              move timer i's idle deadline to now + d, the system's idiomatic way
//   cancel(i), cancel_all()     cancel timer i's wait / every wait (teardown)
//   poll(), run()               the event loop (the heap has none: poll() is nothing, run() pops everything)
//   verify(pending)             checks what the system can tell about its pending waits
//   expiry(i)                   timer i's current deadline (check)
//   touch_aborts                operation_aborted completions per touch; stale_allowed: see the check workload
//
// The timeouts workload's adapters (below, after the heap) hold request slots instead: request i is a
// pending_request (bench_request.hpp) limited in time the system's way, or not at all (no_timeout, the
// baseline that the others' overhead is taken over).
//   start(i, d, h)              request i starts (its slot is free), limited to d from now; h: its handler
//   complete(i)                 request i completes (success; in place when called inside the context)
//   close_all()                 every pending request is aborted (operation_aborted), as closing sockets does
//   in_context(f)               runs f inside the context's run() (post, then poll()); the heap calls f
//   timer_waits, timer_side     1 if the system's timer completes a wait of its own per request (the idiom:
//                               cancelled when the request completes), and those completions (0 and none
//                               for no_timeout, which has no timer)
#ifndef TOCK_BENCH_SYSTEMS_HPP
#define TOCK_BENCH_SYSTEMS_HPP

#include "bench_heap.hpp"
#include "bench_request.hpp"
#include "bench_util.hpp"
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace bench {

using clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;
using error_code = sys::error_code;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<nanoseconds>(clock::now().time_since_epoch()).count();
}

template <typename Rep, typename Period>
constexpr std::int64_t to_ns(const std::chrono::duration<Rep, Period>& d) {
  return std::chrono::duration_cast<nanoseconds>(d).count();
}

// Completions seen by the handlers of one run.
struct counts {
  std::uint64_t ok = 0, aborted = 0, other = 0;
  void add(const error_code& ec) {
    if (!ec)
      ++ok;
    else if (ec == asio::error::operation_aborted)
      ++aborted;
    else
      ++other;
  }
};

// The handler every system gets: a small lambda holding one pointer.
inline auto counting(counts& c) {
  return [c = &c](const error_code& ec) { c->add(ec); };
}

inline void expect(const counts& c, std::uint64_t ok, std::uint64_t aborted, const char* when) {
  std::string w(when);
  check_count((w + ", success").c_str(), c.ok, ok);
  check_count((w + ", operation_aborted").c_str(), c.aborted, aborted);
  check_count((w + ", other errors").c_str(), c.other, 0);
}

// The completions a run of system S must have seen (the heap's overload is below).
template <typename S>
void expect(const S&, const counts& c, std::uint64_t ok, std::uint64_t aborted, const char* when) {
  expect(c, ok, aborted, when);
}

// ---------------------------------------------------------------------------------------------------------
// Warm-up: creates the services (tock's timer service and its driver), fills the recycling caches and pages
// in the code paths: a few due timers, resets and cancels, run to completion. Leaves the context restarted.

template <typename Timer>
void warm_up_timers(asio::io_context& ctx) {
  counts c;
  std::vector<Timer> t;
  t.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    t.emplace_back(ctx, clock::now());
    t.back().async_wait(counting(c));
  }
  for (int i = 0; i < 500; ++i) {
    t[i].expires_after(std::chrono::hours(1));
    t[i].async_wait(counting(c));
    t[i].expires_after(std::chrono::hours(2));  // aborts the wait just started
    t[i].async_wait(counting(c));
    t[i].cancel();
  }
  ctx.run();
  ctx.restart();
  check(c.ok + c.aborted == 2000 && c.other == 0, "warm-up completions");
}

inline void warm_up_sleeps(asio::io_context& ctx) {
  counts c;
  std::vector<asio::cancellation_signal> sig(500);
  for (int i = 0; i < 1000; ++i) tock::async_sleep_until(ctx, clock::now(), counting(c));
  for (auto& s : sig) {
    tock::async_sleep_for(ctx, std::chrono::hours(1), asio::bind_cancellation_slot(s.slot(), counting(c)));
    s.emit(asio::cancellation_type::terminal);
  }
  ctx.run();
  ctx.restart();
  check(c.ok == 1000 && c.aborted == 500 && c.other == 0, "warm-up completions");
}

inline void check_pending(asio::io_context& ctx, std::size_t n) {
  const std::size_t p = tock::timer_service::of(ctx.get_executor()).pending();
  if (p != n) fail("pending() is " + std::to_string(p) + ", expected " + std::to_string(n));
}

// ---------------------------------------------------------------------------------------------------------
// asio, tock_timer, tock_deadline: one object per timer, in a vector reserved up front, constructed from the
// io_context. A touch of a timer is a reset (expires_after, which aborts the pending wait) and a new
// async_wait; a touch of a tock::deadline is expires_after alone, which moves the pending wait.

template <typename Timer>
struct timer_objects {
  using context = asio::io_context;
  static constexpr bool is_asio = std::is_same_v<Timer, asio::steady_timer>;
  static constexpr bool is_deadline = std::is_same_v<Timer, tock::deadline>;
  static constexpr const char* name = is_asio ? "asio" : is_deadline ? "tock_deadline" : "tock_timer";
  static constexpr std::uint64_t touch_aborts = is_deadline ? 0 : 1;
  static constexpr bool stale_allowed = is_asio;  // asio#878: see the check workload

  // tock::deadline has no time_point warm-up of its own: its service is tock::timer's.
  static void warm_up(asio::io_context& ctx) {
    warm_up_timers<std::conditional_t<is_deadline, tock::timer, Timer>>(ctx);
  }

  asio::io_context& ctx;
  std::vector<Timer> timers;

  explicit timer_objects(asio::io_context& c) : ctx(c) {}
  void reserve(std::size_t n) { timers.reserve(n); }
  void add(std::size_t) { timers.emplace_back(ctx); }

  template <typename When, typename H>
  void start_at(std::size_t, const When& when, H&& h) {
    timers.emplace_back(ctx, when);
    timers.back().async_wait(std::forward<H>(h));
  }
  template <typename D, typename H>
  void start_after(std::size_t i, const D& d, H&& h) {
    start_at(i, d, std::forward<H>(h));  // the constructors take a time point or a duration
  }

  template <typename D, typename H>
  void restart(std::size_t i, const D& d, H&& h) {
    Timer& t = timers[i];
    t.expires_after(d);  // aborts the pending wait
    t.async_wait(std::forward<H>(h));
  }

  template <typename D, typename H>
  void touch(std::size_t i, const D& d, H&& h) {
    if constexpr (is_deadline)
      timers[i].expires_after(d);  // moves the pending wait (later: lazily), completes nothing
    else
      restart(i, d, std::forward<H>(h));
  }

  void cancel(std::size_t i) { timers[i].cancel(); }
  void cancel_all() {
    for (auto& t : timers) t.cancel();
  }
  void poll() { ctx.poll(); }
  void run() { ctx.run(); }
  clock::time_point expiry(std::size_t i) const { return timers[i].expiry(); }
  void verify(std::size_t pending) const {
    if constexpr (!is_asio) check_pending(ctx, pending);
  }
};

// ---------------------------------------------------------------------------------------------------------
// tock_sleep: tock::async_sleep_until / async_sleep_for, no object. With Signals (churn), sleep i is bound to
// cancellation signal i (bind_cancellation_slot), emitted to cancel it; without, a sleep cannot be cancelled
// and the pending ones are destroyed with the context (memory).

template <bool Signals>
struct tock_sleeps {
  using context = asio::io_context;
  static constexpr const char* name = "tock_sleep";
  static void warm_up(asio::io_context& ctx) { warm_up_sleeps(ctx); }

  asio::io_context& ctx;
  std::vector<asio::cancellation_signal> sig;

  explicit tock_sleeps(asio::io_context& c) : ctx(c) {}
  void reserve(std::size_t n) {
    if constexpr (Signals) sig = std::vector<asio::cancellation_signal>(n);
  }

  template <typename T, typename H>
  void start_at(std::size_t i, const T& t, H&& h) {
    if constexpr (Signals)
      tock::async_sleep_until(ctx, t, asio::bind_cancellation_slot(sig[i].slot(), std::forward<H>(h)));
    else
      tock::async_sleep_until(ctx, t, std::forward<H>(h));
  }

  template <typename D, typename H>
    requires(!Signals)
  void start_after(std::size_t, const D& d, H&& h) {
    tock::async_sleep_for(ctx, d, std::forward<H>(h));
  }

  template <typename D, typename H>
    requires Signals
  void restart(std::size_t i, const D& d, H&& h) {
    asio::cancellation_signal& s = sig[i];
    s.emit(asio::cancellation_type::terminal);
    tock::async_sleep_for(ctx, d, asio::bind_cancellation_slot(s.slot(), std::forward<H>(h)));
  }

  void cancel_all() {
    for (auto& s : sig) s.emit(asio::cancellation_type::terminal);  // nothing without signals
  }
  void poll() { ctx.poll(); }
  void run() { ctx.run(); }
  void verify(std::size_t pending) const { check_pending(ctx, pending); }
};

// tock_sleep_slack: the same sleeps, each allowed to complete up to 1 ms late (the service's default slack),
// so that one wake-up serves every sleep due within that window.
struct tock_sleeps_slack : tock_sleeps<false> {
  static constexpr const char* name = "tock_sleep_slack";
  explicit tock_sleeps_slack(asio::io_context& c) : tock_sleeps<false>(c) {
    tock::timer_service::of(c).set_default_slack(std::chrono::milliseconds(1));
  }
};

// ---------------------------------------------------------------------------------------------------------
// watchdog: the pattern of Asio's example/cpp20/coroutines/timeout.cpp, with callbacks. Activity only stores
// the deadline; one steady_timer per connection fires at the deadline it was armed for, re-checks the stored
// deadline and re-arms if it moved, else the connection has timed out. The adapter's handler sees the final
// completion only (the timeout, or operation_aborted); re-arms are counted beside it.

struct watchdog_conn {
  clock::time_point deadline;
  asio::steady_timer timer;
  std::function<void(const error_code&, bool rearmed)> on_complete;  // not called in the measured phases

  watchdog_conn(asio::io_context& ctx, clock::time_point d, std::function<void(const error_code&, bool)> f)
      : deadline(d), timer(ctx), on_complete(std::move(f)) {}

  void arm() {
    timer.expires_at(deadline);
    timer.async_wait([this](const error_code& ec) { on_timer(ec); });
  }

  void on_timer(const error_code& ec) {
    const bool rearm = !ec && deadline > clock::now();
    if (rearm) arm();
    on_complete(ec, rearm);
  }

  void touch(clock::duration timeout) { deadline = clock::now() + timeout; }
};

struct watchdog {
  using context = asio::io_context;
  static constexpr const char* name = "watchdog";
  static constexpr std::uint64_t touch_aborts = 0;
  static constexpr bool stale_allowed = false;  // a re-arm is not a completion of the connection's handler
  static void warm_up(asio::io_context& ctx) { warm_up_timers<asio::steady_timer>(ctx); }

  asio::io_context& ctx;
  std::vector<watchdog_conn> conns;
  std::uint64_t rearms = 0;

  explicit watchdog(asio::io_context& c) : ctx(c) {}
  void reserve(std::size_t n) { conns.reserve(n); }

  template <typename D, typename H>
  void start_after(std::size_t, const D& d, H h) {
    conns.emplace_back(ctx, clock::now() + d, [this, h](const error_code& ec, bool rearmed) {
      if (rearmed)
        ++rearms;
      else
        h(ec);
    });
    conns.back().arm();
  }

  template <typename D, typename H>
  void touch(std::size_t i, const D& d, H&&) {
    conns[i].touch(d);
  }

  void cancel_all() {
    for (auto& w : conns) w.timer.cancel();
  }
  void poll() { ctx.poll(); }
  void run() { ctx.run(); }
  clock::time_point expiry(std::size_t i) const { return conns[i].deadline; }
  void verify(std::size_t) const { check(rearms == 0, "a watchdog fired during the measured phase"); }
};

// ---------------------------------------------------------------------------------------------------------
// heap: the floor (bench_heap.hpp), no event loop, no handler: handlers are accepted and dropped. fire =
// push all, then pop all in order; churn = remove + push (with one steady_clock::now() per operation, like
// the others); touch = store the new deadline beside the heap (re-keyed when it surfaces, which never happens
// in the run); memory = the heap's entries and positions, reserved.

struct heap {
  struct context {};  // no io_context: allocating one would move the memory workload's RSS by a page
  static constexpr const char* name = "heap";
  static constexpr std::uint64_t touch_aborts = 0;
  static void warm_up(context&) {}

  bare_heap h;
  std::vector<std::int64_t> deadline;  // touch only (memory does not count it)
  std::size_t n = 0;
  std::uint64_t popped = 0;
  std::int64_t last = 0;
  bool ordered = true;

  explicit heap(context&) {}
  void reserve(std::size_t max) {
    h.reserve(max);
    n = max;
  }

  template <typename H>
  void start_at(std::size_t i, clock::time_point t, H&&) {
    h.push(static_cast<std::uint32_t>(i), to_ns(t.time_since_epoch()));
  }

  template <typename D, typename H>
  void start_after(std::size_t i, const D& d, H&&) {
    if (deadline.empty()) deadline.resize(n);
    deadline[i] = now_ns() + to_ns(d);
    h.push(static_cast<std::uint32_t>(i), deadline[i]);
  }

  template <typename D, typename H>
  void restart(std::size_t i, const D& d, H&&) {
    const auto id = static_cast<std::uint32_t>(i);
    h.remove(id);
    h.push(id, now_ns() + to_ns(d));
  }

  template <typename D, typename H>
  void touch(std::size_t i, const D& d, H&&) {
    deadline[i] = now_ns() + to_ns(d);
  }

  void cancel_all() {}
  void poll() {}
  void run() {  // pop everything in order, without waiting for the clock
    while (!h.empty()) {
      ordered &= h.top().deadline >= last;
      last = h.top().deadline;
      h.pop();
      ++popped;
    }
  }
  void verify(std::size_t pending) const {
    check(ordered, "heap popped out of order");
    check_count("heap entries", h.size(), pending);
  }
};

// The heap runs no handlers: its pops are its successes, and it counts no aborts.
inline void expect(const heap& s, const counts&, std::uint64_t ok, std::uint64_t, const char*) {
  check_count("popped", s.popped, ok);
}

// ---------------------------------------------------------------------------------------------------------
// timeouts: n request slots, each a pending_request (bench_request.hpp) with a time limit, the system's way.
// The adapter keeps a work guard on the context (the requests hold no work of their own), as a server's
// listening socket keeps its context running, so that poll() never finds it out of work and stopped.

// The memory of the posted batch (in_context): one block, reused by every batch, since a batch is posted only
// after the previous one has run. Posted from outside run(), a batch with the default allocator took a malloc
// call each (Asio recycles memory only inside a context's thread), which every system paid alike; with this
// one the workload's malloc count per request is the system's alone (0 for the request with no time limit).
struct batch_block {
  alignas(std::max_align_t) unsigned char buf[256];
  bool used = false;
};

template <typename T>
struct batch_allocator {
  using value_type = T;
  batch_block* block;

  explicit batch_allocator(batch_block& b) noexcept : block(&b) {}
  template <typename U>
  batch_allocator(const batch_allocator<U>& other) noexcept : block(other.block) {}

  T* allocate(std::size_t count) {
    if (block->used || count * sizeof(T) > sizeof block->buf || alignof(T) > alignof(std::max_align_t))
      fail("batch_allocator: a second batch in flight, or one that does not fit in the block");
    block->used = true;
    return reinterpret_cast<T*>(block->buf);
  }
  void deallocate(T*, std::size_t) noexcept { block->used = false; }
  friend bool operator==(const batch_allocator& a, const batch_allocator& b) noexcept { return a.block == b.block; }
};

struct request_slots {
  using context = asio::io_context;

  asio::io_context& ctx;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::unique_ptr<pending_request[]> req;
  std::size_t n = 0;
  counts timer_side;  // the completions of the systems' own timer waits (asio, tock_timer, tock_sleep)
  batch_block batch;  // in_context's posted batch

  explicit request_slots(asio::io_context& c) : ctx(c), work(c.get_executor()) {}
  void reserve(std::size_t max) {
    n = max;
    req = std::make_unique<pending_request[]>(max);
    for (std::size_t i = 0; i < max; ++i) req[i].open(ctx);
  }
  void complete(std::size_t i) { req[i].complete(); }
  void close_all() {
    for (std::size_t i = 0; i < n; ++i) req[i].cancel();
  }
  template <typename F>
  void in_context(F& f) {
    asio::post(ctx, asio::bind_allocator(batch_allocator<void>(batch), [&f] { f(); }));
    ctx.poll();
  }
  void poll() { ctx.poll(); }
  std::size_t pending_requests() const {
    std::size_t p = 0;
    for (std::size_t i = 0; i < n; ++i) p += req[i].pending() ? 1 : 0;
    return p;
  }
  // One timer object per slot (a deadline, a timer), made on the context.
  template <typename T>
  void make_per_slot(std::vector<T>& objects, std::size_t max) {
    objects.reserve(max);
    for (std::size_t i = 0; i < max; ++i) objects.emplace_back(ctx);
  }
};

// no_timeout: the baseline, the same request with no time limit: started with the workload's handler as it
// is, no timer of any kind (no service is created). What another system costs above it is what its time limit
// adds to a request. Its handler has no cancellation slot, so the request installs no cancellation handler
// (as an untimed operation would not); the systems whose handler carries a slot (tock_timeout, tock_deadline,
// asio_cancel_after) pay for that installation as part of their limit.
struct no_timeout_requests : request_slots {
  static constexpr const char* name = "no_timeout";
  static constexpr std::uint64_t timer_waits = 0;
  static void warm_up(asio::io_context&) {}  // nothing to create: timeouts_warm_up runs the requests' path
  using request_slots::request_slots;

  template <typename D, typename H>
  void start(std::size_t i, const D&, H&& h) {
    req[i].async_wait(std::forward<H>(h));
  }
  // No service to ask: the request slots themselves must hold exactly `pending` operations.
  void verify(std::size_t pending) const { check_count("pending requests", pending_requests(), pending); }
};

// The handler of a system's own timer wait: a timeout cancels its request (never in the workload's run).
inline auto timer_side_handler(counts& c, pending_request& r) {
  return [c = &c, r = &r](const error_code& ec) {
    c->add(ec);
    if (!ec) r->cancel();
  };
}

// tock_timeout: each request started with tock::timeout(d, h), which removes its deadline when it completes.
struct tock_timeout_requests : request_slots {
  static constexpr const char* name = "tock_timeout";
  static constexpr std::uint64_t timer_waits = 0;
  static void warm_up(asio::io_context& ctx) { warm_up_sleeps(ctx); }
  using request_slots::request_slots;

  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&& h) {
    req[i].async_wait(tock::timeout(d, std::forward<H>(h)));
  }
  void verify(std::size_t pending) const { check_pending(ctx, pending); }
};

#if TOCK_ASIO_VERSION >= 103100
// asio_cancel_after (Asio >= 1.31): each request started with asio::cancel_after(d, handler), Asio's own per-operation
// limit (a steady_timer made for each operation).
struct asio_cancel_after_requests : request_slots {
  static constexpr const char* name = "asio_cancel_after";
  static constexpr std::uint64_t timer_waits = 0;
  static void warm_up(asio::io_context& ctx) { warm_up_timers<asio::steady_timer>(ctx); }
  using request_slots::request_slots;

  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&& h) {
    req[i].async_wait(asio::cancel_after(d, std::forward<H>(h)));
  }
  void verify(std::size_t) const {}
};
#endif

// tock_deadline: one tock::deadline per slot, moved to now + d (expires_after), the request bound to it.
struct tock_deadline_requests : request_slots {
  static constexpr const char* name = "tock_deadline";
  static constexpr std::uint64_t timer_waits = 0;
  static void warm_up(asio::io_context& ctx) { warm_up_timers<tock::timer>(ctx); }
  using request_slots::request_slots;

  std::vector<tock::deadline> deadlines;

  void reserve(std::size_t max) {
    request_slots::reserve(max);
    make_per_slot(deadlines, max);
  }
  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&& h) {
    tock::deadline& dl = deadlines[i];
    dl.expires_after(d);
    req[i].async_wait(dl.bind(std::forward<H>(h)));
  }
  void verify(std::size_t pending) const { check_pending(ctx, pending); }
};

// asio, tock_timer: the Asio idiom, a timer per slot: expires_after(d) + async_wait beside the request; the
// request's handler cancels the timer when it completes (the timer's wait completes with operation_aborted).
template <typename Timer>
struct timer_requests : request_slots {
  static constexpr bool is_asio = std::is_same_v<Timer, asio::steady_timer>;
  static constexpr const char* name = is_asio ? "asio" : "tock_timer";
  static constexpr std::uint64_t timer_waits = 1;
  static void warm_up(asio::io_context& ctx) { warm_up_timers<Timer>(ctx); }
  using request_slots::request_slots;

  std::vector<Timer> timers;

  void reserve(std::size_t max) {
    request_slots::reserve(max);
    make_per_slot(timers, max);
  }
  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&& h) {
    Timer& t = timers[i];
    t.expires_after(d);
    t.async_wait(timer_side_handler(timer_side, req[i]));
    req[i].async_wait([t = &t, h = std::forward<H>(h)](const error_code& ec) {
      t->cancel();
      h(ec);
    });
  }
  void verify(std::size_t pending) const {
    if constexpr (!is_asio) check_pending(ctx, pending);
  }
};

// tock_sleep: a cancellable sleep per request, tock::async_sleep_for bound to the slot's cancellation_signal,
// emitted when the request completes (the sleep completes with operation_aborted).
struct tock_sleep_requests : request_slots {
  static constexpr const char* name = "tock_sleep";
  static constexpr std::uint64_t timer_waits = 1;
  static void warm_up(asio::io_context& ctx) { warm_up_sleeps(ctx); }
  using request_slots::request_slots;

  std::vector<asio::cancellation_signal> sig;

  void reserve(std::size_t max) {
    request_slots::reserve(max);
    sig = std::vector<asio::cancellation_signal>(max);
  }
  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&& h) {
    asio::cancellation_signal& s = sig[i];
    tock::async_sleep_for(ctx, d, asio::bind_cancellation_slot(s.slot(), timer_side_handler(timer_side, req[i])));
    req[i].async_wait([s = &s, h = std::forward<H>(h)](const error_code& ec) {
      s->emit(asio::cancellation_type::terminal);
      h(ec);
    });
  }
  void verify(std::size_t pending) const { check_pending(ctx, pending); }
};

// heap: the floor, no request object, no event loop: a request's start is a push at now + d (one
// steady_clock::now() each, like the others), its completion a remove; close_all() does nothing.
struct heap_requests {
  using context = heap::context;
  static constexpr const char* name = "heap";
  static constexpr std::uint64_t timer_waits = 0;
  static void warm_up(context&) {}

  bare_heap h;
  std::uint64_t completed = 0;
  counts timer_side;

  explicit heap_requests(context&) {}
  void reserve(std::size_t max) { h.reserve(max); }
  template <typename D, typename H>
  void start(std::size_t i, const D& d, H&&) {
    h.push(static_cast<std::uint32_t>(i), now_ns() + to_ns(d));
  }
  void complete(std::size_t i) {
    h.remove(static_cast<std::uint32_t>(i));
    ++completed;
  }
  void close_all() {  // drops the pending entries (not counted)
    while (!h.empty()) h.pop();
  }
  template <typename F>
  void in_context(F& f) {
    f();
  }
  void poll() {}
  void verify(std::size_t pending) const { check_count("heap entries", h.size(), pending); }
};

// The heap runs no handlers: its removals are its successes, and it aborts nothing.
inline void expect(const heap_requests& s, const counts&, std::uint64_t ok, std::uint64_t, const char*) {
  check_count("completed", s.completed, ok);
}

// ---------------------------------------------------------------------------------------------------------
// periodic: timer i ticks every `period` on a grid from `first`; tick(i, h) waits for its next tick. Asio's
// steady_timer is re-armed by hand at each tick (expires_at(expiry() + period)), as Asio's users do; tock's
// periodic_timer keeps the grid itself (burst: every tick is delivered, none is dropped).

// What both periodic adapters hold: the context and the timers, reserved up front.
template <typename Timer, typename WarmUpTimer>
struct periodic_timers {
  using context = asio::io_context;
  static void warm_up(asio::io_context& ctx) { warm_up_timers<WarmUpTimer>(ctx); }

  explicit periodic_timers(asio::io_context& ctx) : ctx_(ctx) {}
  void reserve(std::size_t n) { timers_.reserve(n); }
  void run() { ctx_.run(); }

 protected:
  asio::io_context& ctx_;
  std::vector<Timer> timers_;
};

struct asio_periodic : periodic_timers<asio::steady_timer, asio::steady_timer> {
  static constexpr const char* name = "asio";
  using periodic_timers::periodic_timers;

  void add(clock::time_point first, clock::duration period) {
    timers_.emplace_back(ctx_, first);
    period_ = period;
  }
  template <typename Handler>
  void tick(std::size_t i, Handler&& h) {
    timers_[i].async_wait([h = std::forward<Handler>(h), t = &timers_[i], p = period_](const error_code& ec) {
      if (!ec) t->expires_at(t->expiry() + p);
      h(ec);
    });
  }

 private:
  clock::duration period_{};
};

struct tock_periodic : periodic_timers<tock::periodic_timer, tock::timer> {
  static constexpr const char* name = "tock_periodic";
  using periodic_timers::periodic_timers;

  void add(clock::time_point first, clock::duration period) {
    timers_.emplace_back(ctx_, first, period, tock::missed_ticks::burst);
  }
  template <typename Handler>
  void tick(std::size_t i, Handler&& h) {
    timers_[i].async_wait([h = std::forward<Handler>(h)](const error_code& ec, std::uint64_t) { h(ec); });
  }
};

}  // namespace bench

#endif
