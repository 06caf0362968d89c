// tock's asynchronous operations work with Asio's completion tokens and handler binders. Every case runs
// twice: once with tock::timer::async_wait and once with tock::async_sleep_for.
#include "test_asio.hpp"
#include "test_support.hpp"

#include <tock/tock.hpp>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace {

using namespace std::chrono_literals;
using tock_test::allocation_counts;
using tock_test::completion;
using tock_test::counting_allocator;
using tock_test::error_code;
using tock_test::record;
using tock_test::run_until_idle;
using steady_clock = std::chrono::steady_clock;

// Long enough never to pass during a test: such an operation completes only if it is aborted.
constexpr steady_clock::duration never = 1h;
constexpr steady_clock::duration short_wait = 5ms;

// A wait on a tock::timer that expires `d` after construction.
struct timer_wait {
  timer_wait(asio::io_context& ctx, steady_clock::duration d) : timer(ctx, d) {}

  template <typename Token>
  auto start(Token&& token) {
    return timer.async_wait(std::forward<Token>(token));
  }

  // The same, such that abort() aborts it.
  template <typename Token>
  auto start_abortable(Token&& token) {
    return start(std::forward<Token>(token));
  }

  void abort() { timer.cancel(); }

  tock::timer timer;
};

// A tock::async_sleep_for of `d`, counted from start().
struct sleep_wait {
  sleep_wait(asio::io_context& ctx, steady_clock::duration d) : ctx(ctx), d(d) {}

  template <typename Token>
  auto start(Token&& token) {
    return tock::async_sleep_for(ctx, d, std::forward<Token>(token));
  }

  // The same, such that abort() aborts it: a sleep has no object to cancel, so through a cancellation slot.
  template <typename Token>
  auto start_abortable(Token&& token) {
    return start(asio::bind_cancellation_slot(signal.slot(), std::forward<Token>(token)));
  }

  void abort() { signal.emit(asio::cancellation_type::terminal); }

  asio::io_context& ctx;
  steady_clock::duration d;
  asio::cancellation_signal signal;
};

using operations = boost::mpl::list<timer_wait, sleep_wait>;

tock::timer_service& service_of(asio::io_context& ctx) { return tock::timer_service::of(ctx.get_executor()); }

// A co_spawn completion that fails the test if the coroutine threw.
auto expect_no_exception() {
  return [](std::exception_ptr e) {
    std::string what = "none";
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
        what = "unknown";
      }
    }
    BOOST_TEST(what == "none");
  };
}

bool is_operation_aborted(const sys::system_error& e) { return e.code() == asio::error::operation_aborted; }

}  // namespace

BOOST_AUTO_TEST_SUITE(tokens_test)

// --- Callbacks --------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(a_callback_is_called_once_with_success_not_before_the_deadline, Op, operations) {
  asio::io_context ctx;
  completion c;
  const auto deadline = steady_clock::now() + short_wait;
  Op op(ctx, short_wait);

  op.start(record(c));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST((c.at >= deadline));
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_aborted_callback_is_called_once_with_operation_aborted, Op, operations) {
  asio::io_context ctx;
  completion c;
  Op op(ctx, never);

  op.start_abortable(record(c));
  op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(c.ec == asio::error::operation_aborted);
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

// --- use_future -------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(use_future_get_returns_once_the_deadline_has_passed, Op, operations) {
  asio::io_context ctx;
  const auto deadline = steady_clock::now() + short_wait;
  Op op(ctx, short_wait);

  std::future<void> f = op.start(asio::use_future);

  BOOST_TEST(run_until_idle(ctx));
  BOOST_REQUIRE(f.wait_for(0s) == std::future_status::ready);
  BOOST_CHECK_NO_THROW(f.get());
  BOOST_TEST((steady_clock::now() >= deadline));
}

// As with Asio's own operations, the aborted completion is delivered by the context's run(): with no other
// thread involved, the future is ready once run() has returned.
BOOST_AUTO_TEST_CASE_TEMPLATE(use_future_get_throws_operation_aborted_when_aborted, Op, operations) {
  asio::io_context ctx;
  Op op(ctx, never);

  std::future<void> f = op.start_abortable(asio::use_future);
  op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_REQUIRE(f.wait_for(0s) == std::future_status::ready);
  BOOST_CHECK_EXCEPTION(f.get(), sys::system_error, is_operation_aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(use_future_get_blocks_while_another_thread_runs_the_context, Op, operations) {
  asio::io_context ctx;
  auto work = asio::make_work_guard(ctx);
  std::thread runner([&] { ctx.run(); });
  const auto deadline = steady_clock::now() + short_wait;
  Op op(ctx, short_wait);

  std::future<void> f = op.start(asio::use_future);
  const auto status = f.wait_for(5s);
  work.reset();
  runner.join();

  BOOST_REQUIRE(status == std::future_status::ready);
  BOOST_CHECK_NO_THROW(f.get());
  BOOST_TEST((steady_clock::now() >= deadline));
}

// --- deferred ---------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(deferred_starts_the_wait_only_when_invoked, Op, operations) {
  asio::io_context ctx;
  completion c;
  Op op(ctx, short_wait);

  auto deferred_wait = op.start(asio::deferred);
  BOOST_TEST(service_of(ctx).pending() == 0u);
  BOOST_TEST(run_until_idle(ctx));  // nothing to do yet
  BOOST_TEST(c.calls == 0);

  std::move(deferred_wait)(record(c));
  BOOST_TEST(service_of(ctx).pending() == 1u);
  ctx.restart();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

// --- as_tuple ---------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(as_tuple_delivers_success_in_a_tuple, Op, operations) {
  asio::io_context ctx;
  int calls = 0;
  error_code ec = asio::error::would_block;
  Op op(ctx, short_wait);

  op.start(asio::as_tuple([&](std::tuple<error_code> result) {
    ++calls;
    ec = std::get<0>(result);
  }));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(calls == 1);
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(as_tuple_delivers_operation_aborted_in_a_tuple, Op, operations) {
  asio::io_context ctx;
  int calls = 0;
  error_code ec;
  Op op(ctx, never);

  op.start_abortable(asio::as_tuple([&](std::tuple<error_code> result) {
    ++calls;
    ec = std::get<0>(result);
  }));
  op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(calls == 1);
  BOOST_TEST(ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(as_tuple_with_use_awaitable_returns_the_error_code_without_throwing, Op, operations) {
  asio::io_context ctx;
  error_code success = asio::error::would_block;
  error_code aborted;
  Op op(ctx, short_wait);
  Op abortable(ctx, never);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        std::tie(success) = co_await op.start(asio::as_tuple(asio::use_awaitable));
        asio::post(ctx, [&] { abortable.abort(); });
        std::tie(aborted) = co_await abortable.start_abortable(asio::as_tuple(asio::use_awaitable));
      },
      expect_no_exception());

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(!success);
  BOOST_TEST(aborted == asio::error::operation_aborted);
}

// --- detached ---------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(detached_keeps_the_context_running_until_the_deadline, Op, operations) {
  asio::io_context ctx;
  const auto deadline = steady_clock::now() + short_wait;
  Op op(ctx, short_wait);

  op.start(asio::detached);

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST((steady_clock::now() >= deadline));
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_aborted_detached_wait_leaves_nothing_pending, Op, operations) {
  asio::io_context ctx;
  Op op(ctx, never);

  op.start_abortable(asio::detached);
  op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(service_of(ctx).pending() == 0u);
}

// --- redirect_error with use_awaitable --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(redirect_error_with_use_awaitable_stores_success, Op, operations) {
  asio::io_context ctx;
  error_code ec = asio::error::would_block;
  bool resumed = false;
  const auto deadline = steady_clock::now() + short_wait;
  Op op(ctx, short_wait);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        co_await op.start(asio::redirect_error(asio::use_awaitable, ec));
        resumed = true;
        BOOST_TEST((steady_clock::now() >= deadline));
      },
      expect_no_exception());

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(resumed);
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(redirect_error_with_use_awaitable_stores_operation_aborted_instead_of_throwing, Op,
                              operations) {
  asio::io_context ctx;
  error_code ec;
  bool resumed = false;
  Op op(ctx, never);

  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        asio::post(ctx, [&] { op.abort(); });  // runs once the coroutine is suspended in the wait
        co_await op.start_abortable(asio::redirect_error(asio::use_awaitable, ec));
        resumed = true;
      },
      expect_no_exception());

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(resumed);
  BOOST_TEST(ec == asio::error::operation_aborted);
}

// --- bind_executor ----------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(bind_executor_with_a_strand_runs_the_handler_in_the_strand, Op, operations) {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  completion c;
  bool in_strand = false;
  Op op(ctx, short_wait);

  op.start(asio::bind_executor(strand, [&](const error_code& ec) {
    record(c)(ec);
    in_strand = strand.running_in_this_thread();
  }));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(bind_executor_with_a_strand_runs_an_aborted_handler_in_the_strand, Op, operations) {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  completion c;
  bool in_strand = false;
  Op op(ctx, never);

  op.start_abortable(asio::bind_executor(strand, [&](const error_code& ec) {
    record(c)(ec);
    in_strand = strand.running_in_this_thread();
  }));
  op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(c.ec == asio::error::operation_aborted);
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_handler_bound_to_another_context_runs_there_and_keeps_it_running, Op, operations) {
  asio::io_context ctx;
  asio::io_context other;
  completion c;
  bool on_other = false;
  bool other_ran_out_of_work = false;
  bool handler_had_run_when_other_returned = false;
  Op op(ctx, short_wait);

  op.start(asio::bind_executor(other.get_executor(), [&](const error_code& ec) {
    record(c)(ec);
    on_other = other.get_executor().running_in_this_thread();
  }));
  std::thread other_thread([&] {
    other_ran_out_of_work = run_until_idle(other);  // must not return before the handler has run
    handler_had_run_when_other_returned = c.calls == 1;
  });
  const bool ctx_ran_out_of_work = run_until_idle(ctx);
  other_thread.join();

  BOOST_TEST(ctx_ran_out_of_work);
  BOOST_TEST(other_ran_out_of_work);
  BOOST_TEST(handler_had_run_when_other_returned);
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(on_other);
}

namespace {

// The thread on which a handler bound to asio::system_executor runs, and the code it saw. Asio submits a
// completion to the handler's executor as if by dispatch() from the thread that runs the context, and the
// system executor runs a dispatched function in place: on the thread that runs the context.
template <typename Op>
std::pair<std::thread::id, error_code> where_a_system_executor_handler_runs(bool abort) {
  asio::io_context ctx;
  auto ran = std::make_shared<std::promise<std::pair<std::thread::id, error_code>>>();
  auto result = ran->get_future();
  Op op(ctx, abort ? never : short_wait);

  op.start_abortable(asio::bind_executor(asio::system_executor(), [ran](const error_code& ec) {
    ran->set_value({std::this_thread::get_id(), ec});
  }));
  if (abort) op.abort();

  BOOST_TEST(run_until_idle(ctx));
  BOOST_REQUIRE(result.wait_for(5s) == std::future_status::ready);
  return result.get();
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_system_executor_handler_runs_on_the_thread_running_the_context, Op, operations) {
  const auto [thread, ec] = where_a_system_executor_handler_runs<Op>(false);
  BOOST_TEST(!ec);
  BOOST_TEST((thread == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_aborted_system_executor_handler_runs_on_the_thread_running_the_context, Op,
                              operations) {
  const auto [thread, ec] = where_a_system_executor_handler_runs<Op>(true);
  BOOST_TEST(ec == asio::error::operation_aborted);
  BOOST_TEST((thread == std::this_thread::get_id()));
}

// --- bind_cancellation_slot -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(bind_cancellation_slot_aborts_the_wait_for_each_cancellation_type, Op, operations) {
  for (auto type :
       {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
    BOOST_TEST_CONTEXT("cancellation type " << static_cast<unsigned>(type)) {
      asio::io_context ctx;
      asio::cancellation_signal signal;
      completion c;
      Op op(ctx, never);

      op.start(asio::bind_cancellation_slot(signal.slot(), record(c)));
      signal.emit(type);

      BOOST_TEST(run_until_idle(ctx));
      BOOST_TEST(c.calls == 1);
      BOOST_TEST(c.ec == asio::error::operation_aborted);
      BOOST_TEST(service_of(ctx).pending() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_bound_cancellation_slot_left_unemitted_changes_nothing, Op, operations) {
  asio::io_context ctx;
  asio::cancellation_signal signal;
  completion c;
  Op op(ctx, short_wait);

  op.start(asio::bind_cancellation_slot(signal.slot(), record(c)));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(!signal.slot().has_handler());  // the operation let go of the slot when it completed
}

// --- bind_allocator ---------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(bind_allocator_allocates_through_the_allocator_and_frees_it_all, Op, operations) {
  asio::io_context ctx;
  allocation_counts counts;
  completion c;
  {
    Op op(ctx, short_wait);
    op.start(asio::bind_allocator(counting_allocator<char>(counts), record(c)));
    BOOST_TEST(counts.allocations.load() >= 1u);

    BOOST_TEST(run_until_idle(ctx));
  }
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(counts.deallocations.load() == counts.allocations.load());
  BOOST_TEST(counts.live_bytes.load() == 0);
}

// --- consign and append -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE_TEMPLATE(consign_keeps_its_values_alive_until_the_handler_has_run, Op, operations) {
  asio::io_context ctx;
  completion c;
  bool alive_in_handler = false;
  auto value = std::make_shared<int>(42);
  std::weak_ptr<int> watch = value;
  Op op(ctx, short_wait);

  op.start(asio::consign(
      [&](const error_code& ec) {
        record(c)(ec);
        alive_in_handler = !watch.expired();
      },
      std::move(value)));
  BOOST_TEST(!watch.expired());

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(c.calls == 1);
  BOOST_TEST(!c.ec);
  BOOST_TEST(alive_in_handler);
  BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(append_passes_its_values_after_the_error_code, Op, operations) {
  asio::io_context ctx;
  int calls = 0;
  error_code ec = asio::error::would_block;
  int number = 0;
  std::string text;
  Op op(ctx, short_wait);

  op.start(asio::append(
      [&](const error_code& e, int n, std::string s) {
        ++calls;
        ec = e;
        number = n;
        text = std::move(s);
      },
      42, std::string("tock")));

  BOOST_TEST(run_until_idle(ctx));
  BOOST_TEST(calls == 1);
  BOOST_TEST(!ec);
  BOOST_TEST(number == 42);
  BOOST_TEST(text == "tock");
}

BOOST_AUTO_TEST_SUITE_END()
