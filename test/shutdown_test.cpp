// Destroying an io_context with waits pending: every handler is destroyed exactly once and none is invoked,
// including handlers whose destructors destroy timers or start new waits on the dying context.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using tock::error_code;

// Counts what happens to the handlers made from it. Every live handler holds a copy of `token`, so
// token.use_count() - 1 is the number of handlers alive; a moved-from handler holds none and counts nothing.
struct probe {
  std::shared_ptr<int> token = std::make_shared<int>(0);
  int made = 0;
  int invoked = 0;
  int destroyed = 0;  // live handlers destroyed (after an invocation too)

  long alive() const { return token.use_count() - 1; }
};

// A move-only handler: exactly one live instance per started wait.
class tracked_handler {
 public:
  explicit tracked_handler(probe& p) : probe_(&p), token_(p.token) { ++p.made; }
  tracked_handler(tracked_handler&& other) noexcept : probe_(other.probe_), token_(std::move(other.token_)) {}
  tracked_handler& operator=(tracked_handler&&) = delete;
  ~tracked_handler() {
    if (token_) ++probe_->destroyed;
  }

  void operator()(const error_code&) { ++probe_->invoked; }

 private:
  probe* probe_;
  std::shared_ptr<int> token_;
};

// An io_context whose shutdown (what its destructor does first) can be run while timers still exist, so that
// they can then be destroyed before the context object, as they must be.
class shutdown_context : public asio::io_context {
 public:
  void shut_down() { shutdown(); }
};

void check_destroyed_not_invoked(const probe& p, int expected) {
  BOOST_TEST(p.made == expected);
  BOOST_TEST(p.invoked == 0);
  BOOST_TEST(p.destroyed == expected);
  BOOST_TEST(p.alive() == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shutdown_test)

BOOST_AUTO_TEST_CASE(destroying_the_context_destroys_pending_sleeps_without_invoking_them) {
  probe future, due, parked;
  {
    asio::io_context ctx;
    for (int i = 0; i < 10; ++i) tock::async_sleep_for(ctx, 1h, tracked_handler(future));
    for (int i = 0; i < 10; ++i) tock::async_sleep_for(ctx, -1ms, tracked_handler(due));  // due, never run
    for (int i = 0; i < 10; ++i) tock::async_sleep_until(ctx, time_point::max(), tracked_handler(parked));
    BOOST_TEST(tock::timer_service::of(ctx.get_executor()).pending() == 30u);
    BOOST_TEST(future.alive() == 10);
  }
  check_destroyed_not_invoked(future, 10);
  check_destroyed_not_invoked(due, 10);
  check_destroyed_not_invoked(parked, 10);
}

BOOST_AUTO_TEST_CASE(destroying_the_context_after_a_partial_run_destroys_only_the_waits_left) {
  probe quick, slow;
  {
    asio::io_context ctx;
    tock::async_sleep_for(ctx, 1ms, tracked_handler(quick));
    for (int i = 0; i < 5; ++i) tock::async_sleep_for(ctx, 1h, tracked_handler(slow));
    while (quick.invoked == 0) ctx.run_one();
  }
  BOOST_TEST(quick.invoked == 1);
  BOOST_TEST(quick.destroyed == 1);
  BOOST_TEST(quick.alive() == 0);
  check_destroyed_not_invoked(slow, 5);
}

BOOST_AUTO_TEST_CASE(shutdown_destroys_pending_timer_waits_without_invoking_them) {
  probe heap_waits, parked_waits;
  {
    shutdown_context ctx;
    tock::timer soon(ctx, 1h), never(ctx, time_point::max());
    for (int i = 0; i < 4; ++i) soon.async_wait(tracked_handler(heap_waits));
    for (int i = 0; i < 4; ++i) never.async_wait(tracked_handler(parked_waits));
    ctx.shut_down();
    BOOST_TEST(heap_waits.alive() == 0);
    BOOST_TEST(parked_waits.alive() == 0);
    BOOST_TEST(tock::timer_service::of(ctx.get_executor()).pending() == 0u);
  }  // the timers, then the context
  check_destroyed_not_invoked(heap_waits, 4);
  check_destroyed_not_invoked(parked_waits, 4);
}

BOOST_AUTO_TEST_CASE(waits_started_after_shutdown_are_destroyed_at_once) {
  probe late;
  {
    shutdown_context ctx;
    tock::timer t(ctx, 1ms);
    ctx.shut_down();
    t.async_wait(tracked_handler(late));
    tock::async_sleep_for(ctx, 1ms, tracked_handler(late));
    tock::async_sleep_until(ctx, time_point::max(), tracked_handler(late));
    BOOST_TEST(late.alive() == 0);
    BOOST_TEST(late.destroyed == 3);
    BOOST_TEST(tock::timer_service::of(ctx.get_executor()).pending() == 0u);
  }
  check_destroyed_not_invoked(late, 3);
}

BOOST_AUTO_TEST_CASE(aborted_waits_of_a_timer_destroyed_before_an_unrun_context_are_destroyed_not_invoked) {
  probe p;
  {
    asio::io_context ctx;
    {
      tock::timer t(ctx, 1h);
      for (int i = 0; i < 3; ++i) t.async_wait(tracked_handler(p));
      tock::timer parked(ctx, time_point::max());
      parked.async_wait(tracked_handler(p));
    }  // both abort their waits: the handlers are queued on the context, which never runs them
    BOOST_TEST(p.alive() == 4);
  }
  check_destroyed_not_invoked(p, 4);
}

BOOST_AUTO_TEST_CASE(waits_bound_to_a_strand_are_destroyed_with_the_context) {
  probe sleeps, waits;
  {
    shutdown_context ctx;
    auto strand = asio::make_strand(ctx);
    tock::timer t(ctx, 1h), parked(ctx, time_point::max());
    tock::async_sleep_for(ctx, 1h, asio::bind_executor(strand, tracked_handler(sleeps)));
    tock::async_sleep_for(ctx, -1s, asio::bind_executor(strand, tracked_handler(sleeps)));
    tock::async_sleep_until(ctx, time_point::max(), asio::bind_executor(strand, tracked_handler(sleeps)));
    t.async_wait(asio::bind_executor(strand, tracked_handler(waits)));
    parked.async_wait(asio::bind_executor(strand, tracked_handler(waits)));
    ctx.shut_down();
  }
  check_destroyed_not_invoked(sleeps, 3);
  check_destroyed_not_invoked(waits, 2);
}

BOOST_AUTO_TEST_CASE(aborted_waits_queued_on_a_strand_are_destroyed_with_the_context) {
  probe p;
  {
    asio::io_context ctx;
    auto strand = asio::make_strand(ctx);
    {
      tock::timer t(ctx, 1h);
      t.async_wait(asio::bind_executor(strand, tracked_handler(p)));
      t.async_wait(asio::bind_executor(strand, tracked_handler(p)));
    }
    asio::cancellation_signal signal;
    tock::async_sleep_for(ctx, 1h,
                          asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(strand, tracked_handler(p))));
    signal.emit(asio::cancellation_type::terminal);
    BOOST_TEST(p.alive() == 3);
  }
  check_destroyed_not_invoked(p, 3);
}

// A wait whose handler runs on another context fires, and its handler is queued there; that context is then
// destroyed without running it.
BOOST_AUTO_TEST_CASE(a_fired_wait_queued_on_a_context_destroyed_unrun_is_destroyed_not_invoked) {
  probe p;
  asio::io_context ctx;
  {
    tock::timer t(ctx, -1ms);
    {
      asio::io_context other;
      t.async_wait(asio::bind_executor(other.get_executor(), tracked_handler(p)));
      ctx.run();  // fires: the handler now waits on `other`
      BOOST_TEST(p.alive() == 1);
      BOOST_TEST(p.invoked == 0);
    }
    check_destroyed_not_invoked(p, 1);
    BOOST_TEST(t.cancel() == 0u);
  }
  BOOST_TEST(tock::timer_service::of(ctx.get_executor()).invariants_hold());
}

BOOST_AUTO_TEST_CASE(a_handler_whose_destructor_destroys_a_timer_is_destroyed_without_deadlock) {
  probe owner_probe, inner_probe;

  // Owns a timer (with waits of its own) and destroys it when the live instance goes.
  class timer_owning_handler {
   public:
    timer_owning_handler(probe& p, std::unique_ptr<tock::timer> t) : handler_(p), timer_(std::move(t)) {}
    timer_owning_handler(timer_owning_handler&&) = default;
    void operator()(const error_code& ec) { handler_(ec); }

   private:
    tracked_handler handler_;
    std::unique_ptr<tock::timer> timer_;
  };

  {
    asio::io_context ctx;
    auto inner = std::make_unique<tock::timer>(ctx, 1h);
    inner->async_wait(tracked_handler(inner_probe));
    inner->async_wait(tracked_handler(inner_probe));
    auto parked_inner = std::make_unique<tock::timer>(ctx, time_point::max());
    parked_inner->async_wait(tracked_handler(inner_probe));

    tock::timer outer(ctx, 1h);
    outer.async_wait(timer_owning_handler(owner_probe, std::move(inner)));
    tock::async_sleep_for(ctx, 1h, timer_owning_handler(owner_probe, std::move(parked_inner)));
    // Nothing but handlers holds timers once the context goes: the outer timer moves into one as well.
    tock::async_sleep_until(ctx, time_point::max(),
                            timer_owning_handler(owner_probe, std::make_unique<tock::timer>(std::move(outer))));
  }
  check_destroyed_not_invoked(owner_probe, 3);
  check_destroyed_not_invoked(inner_probe, 3);
}

BOOST_AUTO_TEST_CASE(a_handler_that_owns_the_timer_it_waits_on_is_destroyed_with_it) {
  probe p;
  std::weak_ptr<tock::timer> watch;
  {
    asio::io_context ctx;
    auto t = std::make_shared<tock::timer>(ctx, 1h);
    watch = t;
    class self_owning_handler {
     public:
      self_owning_handler(probe& pr, std::shared_ptr<tock::timer> t) : handler_(pr), timer_(std::move(t)) {}
      self_owning_handler(self_owning_handler&&) = default;
      void operator()(const error_code& ec) { handler_(ec); }

     private:
      tracked_handler handler_;
      std::shared_ptr<tock::timer> timer_;
    };
    t->async_wait(self_owning_handler(p, t));
    t->async_wait(self_owning_handler(p, t));
    t.reset();  // only the handlers keep the timer now
    BOOST_TEST(!watch.expired());
  }
  BOOST_TEST(watch.expired());
  check_destroyed_not_invoked(p, 2);
}

BOOST_AUTO_TEST_CASE(a_handler_whose_destructor_starts_a_sleep_on_the_dying_context_has_that_sleep_destroyed) {
  probe first, second;

  // When the live instance is destroyed, starts a sleep on the same context with a tracked handler.
  class restarting_handler {
   public:
    restarting_handler(probe& p, probe& next, asio::io_context& ctx) : handler_(p), next_(&next), ctx_(&ctx) {}
    restarting_handler(restarting_handler&& other) noexcept
        : handler_(std::move(other.handler_)), next_(std::exchange(other.next_, nullptr)), ctx_(other.ctx_) {}
    ~restarting_handler() {
      if (next_ != nullptr) {
        tock::async_sleep_for(*ctx_, 1ms, tracked_handler(*next_));
        tock::async_sleep_until(*ctx_, time_point::max(), tracked_handler(*next_));
      }
    }
    void operator()(const error_code& ec) {
      next_ = nullptr;
      handler_(ec);
    }

   private:
    tracked_handler handler_;
    probe* next_;
    asio::io_context* ctx_;
  };

  {
    asio::io_context ctx;
    tock::async_sleep_for(ctx, 1h, restarting_handler(first, second, ctx));          // destroyed by the service
    tock::async_sleep_until(ctx, time_point::max(), restarting_handler(first, second, ctx));
    {
      tock::timer t(ctx, 1h);
      t.async_wait(restarting_handler(first, second, ctx));  // aborted: destroyed with the context's queue
    }
  }
  check_destroyed_not_invoked(first, 3);
  check_destroyed_not_invoked(second, 6);
}

BOOST_AUTO_TEST_CASE(a_handler_whose_destructor_starts_a_timer_wait_on_the_dying_context_has_that_wait_destroyed) {
  probe first, second;
  std::optional<tock::timer> t;

  class rewaiting_handler {
   public:
    rewaiting_handler(probe& p, probe& next, std::optional<tock::timer>& t) : handler_(p), next_(&next), timer_(&t) {}
    rewaiting_handler(rewaiting_handler&& other) noexcept
        : handler_(std::move(other.handler_)), next_(std::exchange(other.next_, nullptr)), timer_(other.timer_) {}
    ~rewaiting_handler() {
      if (next_ != nullptr && timer_->has_value()) (*timer_)->async_wait(tracked_handler(*next_));
    }
    void operator()(const error_code& ec) {
      next_ = nullptr;
      handler_(ec);
    }

   private:
    tracked_handler handler_;
    probe* next_;
    std::optional<tock::timer>* timer_;
  };

  {
    shutdown_context ctx;
    t.emplace(ctx, 1h);
    tock::async_sleep_for(ctx, 1h, rewaiting_handler(first, second, t));
    ctx.shut_down();  // destroys the sleep's handler, which starts a wait on the timer: destroyed at once
    BOOST_TEST(second.alive() == 0);
    t.reset();
  }
  check_destroyed_not_invoked(first, 1);
  check_destroyed_not_invoked(second, 1);
}

// As a_fired_wait_queued_on_a_context_destroyed_unrun_is_destroyed_not_invoked, but the timer and its whole
// context go first: the queued handler must not need them. (Last in the file: a use-after-free here stops
// the process under TSan's halt_on_error.)
BOOST_AUTO_TEST_CASE(a_fired_wait_queued_on_another_context_outlives_the_timers_context) {
  probe p;
  asio::io_context other;
  {
    asio::io_context ctx;
    tock::timer t(ctx, -1ms);
    t.async_wait(asio::bind_executor(other.get_executor(), tracked_handler(p)));
    ctx.run();
  }  // the timer, then its context
  BOOST_TEST(p.alive() == 1);
  other.run();
  // The timer was destroyed before the handler ran, so the wait counts as aborted; either way it runs once.
  BOOST_TEST(p.invoked == 1);
  BOOST_TEST(p.alive() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
