// test/test_support.hpp: small helpers shared by the test files, and the prelude most of them share (never,
// service_of, timed_out, aborted). Header-only; check_idle() is the one helper that asserts.
#ifndef TOCK_TEST_SUPPORT_HPP
#define TOCK_TEST_SUPPORT_HPP

#include "test_asio.hpp"

#include <tock/error.hpp>
#include <tock/manual_clock.hpp>
#include <tock/timer_service.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <source_location>
#include <type_traits>
#include <utility>

namespace tock_test {

using error_code = sys::error_code;
using steady_clock = std::chrono::steady_clock;

// Long enough never to pass during a test: an operation limited by it completes only if something else ends it.
inline constexpr steady_clock::duration never = std::chrono::hours(1);

// The codes a timed operation completes with when its deadline passes, and when it is cancelled otherwise.
inline const error_code timed_out = make_error_code(tock::error::timed_out);
inline const error_code aborted = asio::error::operation_aborted;

// The timer service of `ctx` for `Clock` (steady_clock unless a test runs on another clock).
template <typename Clock = steady_clock>
tock::basic_timer_service<Clock>& service_of(asio::io_context& ctx) {
  return tock::basic_timer_service<Clock>::of(ctx.get_executor());
}

// Runs what is ready on `ctx` without waiting, including completions that become ready while doing so (a
// socket's cancellation). True if `ctx` then has no work left. (It restarts `ctx` first: a context that ran
// out of work stays stopped, and would run nothing.)
inline bool settle(asio::io_context& ctx) {
  ctx.restart();
  for (int i = 0; i < 100 && ctx.poll() > 0; ++i) {
  }
  return ctx.stopped();
}

// Moves the manual clock to `t` (or by `d`: not named advance, which std::advance would win by ADL), then
// settles `ctx`. True if `ctx` then has no work left.
inline bool advance_to(asio::io_context& ctx, tock::manual_clock::time_point t) {
  tock::manual_clock::advance_to(t);
  return settle(ctx);
}
inline bool advance_by(asio::io_context& ctx, tock::manual_clock::duration d) {
  return advance_to(ctx, tock::manual_clock::now() + d);
}

// Checks that `ctx`'s timer service has nothing pending and a consistent heap: what every case expects once
// its operations are done. A failure names the line that called it.
template <typename Clock = steady_clock>
void check_idle(asio::io_context& ctx, const std::source_location& where = std::source_location::current()) {
  BOOST_TEST_CONTEXT("check_idle called at " << where.file_name() << ":" << where.line()) {
    BOOST_CHECK_EQUAL(service_of<Clock>(ctx).pending(), 0u);
    BOOST_CHECK(service_of<Clock>(ctx).invariants_hold());
  }
}

// Runs `ctx` until it runs out of work, but for no longer than `limit`. True if it ran out of work, false
// if it still had work when the limit passed (a wait that should have completed, or been aborted, did not).
// A test asserts on the result instead of hanging.
inline bool run_until_idle(asio::io_context& ctx, steady_clock::duration limit = std::chrono::seconds(5)) {
  ctx.run_for(limit);
  return ctx.stopped();
}

// What a completion handler made by record() saw: how often it ran, with which code, and when, in real time
// and in virtual time (tock::manual_clock, for the cases that run on it).
struct completion {
  int calls = 0;
  error_code ec;
  steady_clock::time_point at{};
  tock::manual_clock::time_point virtual_at{};
};

// A void(error_code) handler that writes into `c`, which must outlive it.
inline auto record(completion& c) {
  return [&c](const error_code& ec) {
    ++c.calls;
    c.ec = ec;
    c.at = steady_clock::now();
    c.virtual_at = tock::manual_clock::now();
  };
}

// The tallies of a counting_allocator (shared by all its copies and rebinds). Thread-safe.
struct allocation_counts {
  std::atomic<std::size_t> allocations{0};
  std::atomic<std::size_t> deallocations{0};
  std::atomic<std::ptrdiff_t> live_bytes{0};
  // The last sleep operation allocated, once it is built: a white-box view of how the service placed it.
  std::atomic<void*> last_sleep_memory{nullptr};
  std::atomic<tock::detail::sleep_entry* (*)(void*)> last_sleep_as_entry{nullptr};
  tock::detail::sleep_entry& last_sleep() const { return *last_sleep_as_entry.load()(last_sleep_memory.load()); }
};

// A std::allocator that counts what goes through it into an allocation_counts, which must outlive it.
// Copies and rebinds share the counts and compare equal.
template <typename T>
class counting_allocator {
 public:
  using value_type = T;

  explicit counting_allocator(allocation_counts& counts) noexcept : counts_(&counts) {}

  template <typename U>
  counting_allocator(const counting_allocator<U>& other) noexcept : counts_(other.counts()) {}

  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    counts_->allocations.fetch_add(1);
    counts_->live_bytes.fetch_add(static_cast<std::ptrdiff_t>(n * sizeof(T)));
    if constexpr (std::is_base_of_v<tock::detail::sleep_entry, T>) {
      counts_->last_sleep_as_entry.store([](void* m) -> tock::detail::sleep_entry* { return static_cast<T*>(m); });
      counts_->last_sleep_memory.store(p);
    }
    return p;
  }

  void deallocate(T* p, std::size_t n) noexcept {
    counts_->deallocations.fetch_add(1);
    counts_->live_bytes.fetch_sub(static_cast<std::ptrdiff_t>(n * sizeof(T)));
    std::allocator<T>().deallocate(p, n);
  }

  allocation_counts* counts() const noexcept { return counts_; }

  template <typename U>
  bool operator==(const counting_allocator<U>& other) const noexcept {
    return counts_ == other.counts();
  }

 private:
  allocation_counts* counts_;
};

// An operation of `ex`'s context that completes with success once the context runs it: asio::post with
// void(error_code), the kind of completion a timeout can be put on (asio::post's void() cannot report timed_out:
// tock rejects it at compile time). Dropped unrun, as a post is, when its context is destroyed first.
template <typename Executor>
struct initiate_post_success {
  using executor_type = Executor;

  executor_type get_executor() const noexcept { return ex; }

  template <typename Handler>
  void operator()(Handler&& handler) const {
    asio::post(ex, asio::append(std::forward<Handler>(handler), error_code()));
  }

  Executor ex;
};

template <typename Token>
auto async_post_success(asio::io_context& ctx, Token&& token) {
  using executor = asio::io_context::executor_type;
  return asio::async_initiate<Token, void(error_code)>(initiate_post_success<executor>{ctx.get_executor()}, token);
}

}  // namespace tock_test

#endif
