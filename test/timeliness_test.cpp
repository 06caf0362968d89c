// timeliness_test: regression tests of issue 38, the bound operations of tock::deadline that timed out late or
// never, whose memory outlived their upcall, or that the service's statistics lost (shared/repro r6, r7, r11;
// r8 and the race of a refused first count are in timeliness_test.part2.cpp, with r6 through Beast's stream).
// Each case is one behaviour, in virtual time (tock::manual_clock): it checks that the bound operation is still
// pending one tick before its limit and times out at the very advance that reaches it. Asio is the control
// where tock replaces it.
#include "test_asio.hpp"
#include "test_support.hpp"
#include "timed_ops_support.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace tock_test;  // test_support.hpp (never, settle, advance_to, record, ...), timed_ops_support.hpp
using tock::manual_clock;
using manual_deadline = tock::basic_deadline<manual_clock>;
using manual_service = tock::basic_timer_service<manual_clock>;

// --- r6: a deadline moved earlier while nothing is bound, then bound without the lock.

// The keep-alive pattern of a server, in the shape of shared/repro/r6_late_after_earlier_move.cpp: deadline `a`
// holds a bound operation throughout (its entry attached: the service counts one), and deadline `b`'s first
// operation completes at once, so b's node stays in the heap with its old key and nothing attached. A case then
// moves b's latest time earlier (the next request's shorter limit), binds the next operation to b (lock-free:
// b's node is placed) and checks it times out at the new limit.
struct idle_deadline_moved_earlier {
  asio::io_context ctx;
  const manual_clock::time_point start = manual_clock::now();
  asio::steady_timer op_a{ctx, never}, op_x{ctx, never}, op_y{ctx, never};
  completion ca, cx, cy;
  manual_deadline a{ctx}, b{ctx};

  // `a` at `a_at` with its operation bound; `b` at `b_at` (and `b_slack`) with its first operation bound, which
  // then completes first (it is cancelled: the deadline does not fire for it).
  void prepare(manual_clock::time_point a_at, manual_clock::time_point b_at, manual_clock::duration b_slack = 0ns) {
    a.expires_at(a_at);
    op_a.async_wait(a.bind(record(ca)));
    b.set_slack(b_slack);
    b.expires_at(b_at);
    op_x.async_wait(b.bind(record(cx)));
    op_x.cancel();
    settle(ctx);
    BOOST_REQUIRE_EQUAL(cx.calls, 1);
    BOOST_REQUIRE_EQUAL(cx.ec, aborted);  // its own completion, not the deadline's
    BOOST_REQUIRE_EQUAL(ca.calls, 0);
  }

  // Binds op_y to `b` and checks that it times out at `limit`, not a tick before, and not later.
  void bind_next_and_check_it_times_out_at(manual_clock::time_point limit) {
    op_y.async_wait(b.bind(record(cy)));
    advance_to(ctx, limit - tick);
    BOOST_CHECK_EQUAL(cy.calls, 0);
    advance_to(ctx, limit);
    BOOST_CHECK_MESSAGE(cy.calls == 1,
                        "the operation bound to the deadline moved earlier is still pending at its limit, "
                            << (limit - start) / 1ms << " ms");
    BOOST_CHECK_EQUAL(cy.ec, timed_out);
    BOOST_CHECK(cy.virtual_at == limit);
    BOOST_CHECK_EQUAL(ca.calls, 0);  // a's limit is later
    // Whatever happened, end both operations, bounded: nothing is left pending.
    op_y.cancel();
    op_a.cancel();
    settle(ctx);
    BOOST_CHECK_EQUAL(cy.calls, 1);
    BOOST_CHECK_EQUAL(ca.calls, 1);
    BOOST_CHECK_EQUAL(ca.ec, aborted);
    check_idle<manual_clock>(ctx);
  }
};

// --- r7: a bound operation's memory, from the handler's associated allocator.

// An arena that a connection owns for its handlers' memory: it counts the blocks it has out, and once closed
// (the connection is done with it, as when it destroys the arena) it counts the blocks given back after.
struct arena {
  std::size_t live = 0;
  bool closed = false;
  std::size_t freed_after_close = 0;
};

template <typename T>
class arena_allocator {
 public:
  using value_type = T;
  explicit arena_allocator(arena& a) noexcept : arena_(&a) {}
  template <typename U>
  arena_allocator(const arena_allocator<U>& other) noexcept : arena_(other.owner()) {}

  T* allocate(std::size_t n) {
    ++arena_->live;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    --arena_->live;
    if (arena_->closed) ++arena_->freed_after_close;
    std::allocator<T>().deallocate(p, n);
  }

  arena* owner() const noexcept { return arena_; }
  template <typename U>
  bool operator==(const arena_allocator<U>& other) const noexcept {
    return arena_ == other.owner();
  }

 private:
  arena* arena_;
};

// A void(error_code) handler whose memory comes from `mem`: it records, at its upcall, how many blocks `mem` still
// had out, and (if `close`) closes the arena there, as a connection that is done would.
struct upcall_record {
  int calls = 0;
  error_code ec;
  std::size_t live_at_upcall = 0;
};
inline auto arena_handler(arena& mem, upcall_record& r, bool close) {
  return asio::bind_allocator(arena_allocator<int>(mem), [&mem, &r, close](const error_code& ec) {
    ++r.calls;
    r.ec = ec;
    r.live_at_upcall = mem.live;
    if (close) mem.closed = true;
  });
}

// --- r11: timer_stats::peak_pending.

// 100 connections, each with a deadline 10 s away and one operation bound to it (which takes the deadline's
// link), pending together, then all completed first.
struct hundred_bound_operations {
  static constexpr std::size_t n = 100;
  asio::io_context ctx;
  std::vector<std::unique_ptr<manual_deadline>> deadlines;
  std::vector<std::unique_ptr<asio::steady_timer>> ops;
  std::vector<int> calls = std::vector<int>(n, 0);
  tally outcomes;

  void bind_all() {
    for (std::size_t k = 0; k < n; ++k) {
      deadlines.push_back(std::make_unique<manual_deadline>(ctx, 10s));
      ops.push_back(std::make_unique<asio::steady_timer>(ctx, never));
      ops.back()->async_wait(deadlines.back()->bind(outcomes.count(calls, k)));
    }
  }
  void complete_all() {
    for (auto& op : ops) op->cancel();
    settle(ctx);
    BOOST_REQUIRE_EQUAL(outcomes.other, int(n));  // each completed first (operation_aborted), none timed out
  }
  tock::timer_stats stats() { return manual_service::of(ctx.get_executor()).stats(); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(timeliness_test)

// r6, default mode: `a` at 3 s, `b` placed at 5 s, then moved to 200 ms while idle. Today the move re-keys b's
// node but arms nothing (nothing is attached), and the lock-free bind arms nothing either: the driver stays
// armed for a's 3 s, and the operation times out then.
BOOST_FIXTURE_TEST_CASE(deadline_moved_earlier_while_idle_fires_on_time_after_lockfree_bind,
                        idle_deadline_moved_earlier) {
  prepare(start + 3s, start + 5s);
  b.expires_at(start + 200ms);
  bind_next_and_check_it_times_out_at(start + 200ms);
}

// r6, slack mode: b's latest time is made earlier by cutting its slack, not by a move: 200 ms with 5 s of slack
// (keyed at 5.2 s), then no slack: its latest time is 200 ms.
BOOST_FIXTURE_TEST_CASE(slack_cut_while_idle_fires_on_time_after_lockfree_bind, idle_deadline_moved_earlier) {
  prepare(start + 3s, start + 200ms, 5s);
  b.set_slack(0ns);
  bind_next_and_check_it_times_out_at(start + 200ms);
}

// r6, long mode: `a` never expires (its operation's entry is attached to a parked node) and b's old key is an
// hour away, which is what the driver stays armed for: the operation would not time out for an hour.
BOOST_FIXTURE_TEST_CASE(deadline_moved_earlier_from_an_hour_fires_on_time_beside_one_that_never_expires,
                        idle_deadline_moved_earlier) {
  prepare(manual_clock::time_point::max(), start + 1h);
  b.expires_at(start + 200ms);
  bind_next_and_check_it_times_out_at(start + 200ms);
}

// r7: Asio frees an operation's memory before the upcall (so that the handler may start the next operation in it,
// or free the arena it came from); a bound operation that completes first must too. Today the deadline's link
// keeps the withdrawn entry, one block of the handler's allocator, until the next bind or the deadline goes.
BOOST_AUTO_TEST_CASE(bound_operation_memory_is_freed_before_its_handler_runs) {
  asio::io_context ctx;
  // Control: Asio's own operation, with the same handler.
  {
    arena mem;
    upcall_record r;
    asio::steady_timer op(ctx, never);
    op.async_wait(arena_handler(mem, r, false));
    BOOST_CHECK_GE(mem.live, 1u);
    op.cancel();
    settle(ctx);
    BOOST_REQUIRE_EQUAL(r.calls, 1);
    BOOST_CHECK_EQUAL(r.live_at_upcall, 0u);
  }
  arena mem;
  upcall_record r;
  asio::steady_timer op(ctx, never);
  manual_deadline dl(ctx, 10s);
  op.async_wait(dl.bind(arena_handler(mem, r, false)));
  BOOST_CHECK_GE(mem.live, 1u);  // tock's operation, which holds the handler
  op.cancel();                   // the operation completes first
  settle(ctx);
  BOOST_REQUIRE_EQUAL(r.calls, 1);
  BOOST_CHECK_EQUAL(r.ec, aborted);
  BOOST_CHECK_MESSAGE(r.live_at_upcall == 0,
                      "blocks of the handler's allocator still out at its upcall: " << r.live_at_upcall);
  BOOST_CHECK_EQUAL(mem.live, 0u);  // and nothing given back later either: the deadline still exists
  check_idle<manual_clock>(ctx);
}

// r7's consequence: a connection that owns its handlers' arena may close it (destroy it) in the last handler, and
// then destroy its deadline. Nothing may be given back to the arena after that (under ASan, shared/repro's
// r7_memory_after_upcall.cpp shows the heap-use-after-free that this is).
BOOST_AUTO_TEST_CASE(handler_may_close_the_arena_its_bound_operation_came_from) {
  asio::io_context ctx;
  // Control: Asio's own operation.
  {
    arena mem;
    upcall_record r;
    asio::steady_timer op(ctx, never);
    op.async_wait(arena_handler(mem, r, true));
    op.cancel();
    settle(ctx);
    BOOST_REQUIRE_EQUAL(r.calls, 1);
    BOOST_CHECK_EQUAL(mem.freed_after_close, 0u);
  }
  arena mem;
  upcall_record r;
  {
    asio::steady_timer op(ctx, never);
    manual_deadline dl(ctx, 10s);
    op.async_wait(dl.bind(arena_handler(mem, r, true)));
    op.cancel();
    settle(ctx);
    BOOST_REQUIRE_EQUAL(r.calls, 1);
  }  // the connection goes: its deadline after the handler closed the arena
  BOOST_CHECK_MESSAGE(mem.freed_after_close == 0,
                      "blocks given back to the arena after its handler closed it: " << mem.freed_after_close);
  BOOST_CHECK_EQUAL(mem.live, 0u);
  check_idle<manual_clock>(ctx);
}

// r11: a peak does not go down. 100 bound operations pending at once (observed by stats() meanwhile), then all
// completed: peak_pending stays >= 100. Today the lock-free link is counted only in the snapshot stats()
// returns, never in the service's peak, which falls back to 0.
BOOST_FIXTURE_TEST_CASE(peak_pending_stays_after_bound_operations_complete, hundred_bound_operations) {
  bind_all();
  const tock::timer_stats during = stats();
  BOOST_CHECK_EQUAL(during.pending, n);
  BOOST_CHECK_GE(during.peak_pending, n);
  complete_all();
  const tock::timer_stats after = stats();
  BOOST_CHECK_EQUAL(after.pending, 0u);
  BOOST_CHECK_GE(after.peak_pending, n);
  BOOST_CHECK(after.balanced());
}

// r11, unobserved: the same, without a call of stats() while they were pending (a server that reads its stats
// only at the end of a soak).
BOOST_FIXTURE_TEST_CASE(peak_pending_counts_bound_operations_never_observed_pending, hundred_bound_operations) {
  bind_all();
  complete_all();
  const tock::timer_stats after = stats();
  BOOST_CHECK_EQUAL(after.pending, 0u);
  BOOST_CHECK_GE(after.peak_pending, n);
  BOOST_CHECK(after.balanced());
}

BOOST_AUTO_TEST_SUITE_END()
