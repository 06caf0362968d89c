// tock/manual_clock.hpp: a clock that moves only when told, to test timeout logic in virtual time.
#ifndef TOCK_MANUAL_CLOCK_HPP
#define TOCK_MANUAL_CLOCK_HPP

#include <tock/detail/driver.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/wait_traits.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace tock {

namespace detail {
class manual_driver;
}

// A steady clock whose time starts at zero and moves only through advance(): timers, deadlines and sleeps
// on it (tock::basic_timer<tock::manual_clock>, tock::basic_deadline<tock::manual_clock>, async_sleep_until
// with its time points) fire when a test moves time past them, and not before, however long the test takes.
// Waits on it are outstanding work like any timer's, so drive the context with poll() (or run_one()) after
// advancing, or advance from another thread. There is one manual time per process: tests that share it
// should measure from now(), not from zero.
struct manual_clock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;

  // The virtual time. O(1), thread-safe.
  static time_point now() noexcept { return time_point(duration(state().now.load(std::memory_order_acquire))); }

  // Moves time forward by `d` (nothing for d <= 0) and queues, on their contexts, the services whose next
  // deadline has come. O(services using the clock); thread-safe.
  static void advance(duration d) {
    if (d > duration::zero()) advance_to(now() + d);
  }

  // Moves time forward to `t` (nothing if `t` is not later than now()). Same as advance().
  static void advance_to(time_point t);

 private:
  friend class detail::manual_driver;

  struct registry {
    std::atomic<rep> now{0};
    std::mutex mutex;
    std::vector<detail::manual_driver*> armed;  // drivers with a pending wait
  };

  static registry& state() noexcept {
    static registry r;
    return r;
  }
};

namespace detail {

// The driver of a service on manual_clock: instead of an Asio timer it registers with the clock, which
// posts its handler to the context when advance() reaches the armed time. While armed it holds outstanding
// work on the context, as a pending Asio timer wait does, and a superseded or cancelled wait completes with
// operation_aborted, as with Asio.
class manual_driver {
  using work_guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

 public:
  explicit manual_driver(const boost::asio::io_context::executor_type& ex) : ex_(ex) {}
  ~manual_driver() {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (handler_) r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
  }
  manual_driver(const manual_driver&) = delete;
  manual_driver& operator=(const manual_driver&) = delete;

  std::size_t expires_at(const manual_clock::time_point& t) {
    const std::size_t n = cancel();
    at_ = t;
    return n;
  }

  template <typename Handler>
  void async_wait(Handler handler) {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    // What may throw comes first, so that a failure leaves the driver as it was.
    r.armed.reserve(r.armed.size() + 1);
    auto work = std::make_unique<work_guard>(ex_);
    std::function<void(const boost::system::error_code&)> h(std::move(handler));
    drop_locked(r);
    handler_ = std::move(h);
    work_ = std::move(work);
    r.armed.push_back(this);
    if (!(manual_clock::now() < at_)) fire_locked(r);
  }

  std::size_t cancel() {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    return drop_locked(r);
  }

 private:
  friend struct tock::manual_clock;

  // Takes this driver out of the armed list and completes its pending wait with operation_aborted, as an
  // Asio timer does: the posted completion keeps the context's work count up, so that the service can
  // re-arm (or post its own completions) before run() could see no work. Under the registry's lock.
  std::size_t drop_locked(manual_clock::registry& r) {
    if (!handler_) return 0;
    complete_locked(r, boost::asio::error::operation_aborted);
    return 1;
  }

  // Posts the handler: the wait is over. Under the registry's lock.
  void fire_locked(manual_clock::registry& r) { complete_locked(r, boost::system::error_code()); }

  // The handler is copied into the post, so that a post that throws leaves the wait pending.
  void complete_locked(manual_clock::registry& r, const boost::system::error_code& ec) {
    boost::asio::post(ex_, [h = handler_, ec] { h(ec); });
    handler_ = nullptr;
    r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
    work_.reset();  // after the post, which holds work of its own
  }

  boost::asio::io_context::executor_type ex_;
  manual_clock::time_point at_{};
  std::function<void(const boost::system::error_code&)> handler_;
  std::unique_ptr<work_guard> work_;
};

template <typename WaitTraits>
struct driver_for<manual_clock, WaitTraits> {
  using type = manual_driver;
};

}  // namespace detail

inline void manual_clock::advance_to(time_point t) {
  registry& r = state();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!(now() < t)) return;
  // fire_locked() erases from `armed`: walk a copy, taken before the time moves (it may throw).
  const std::vector<detail::manual_driver*> armed = r.armed;
  r.now.store(t.time_since_epoch().count(), std::memory_order_release);
  for (detail::manual_driver* d : armed)
    if (!(t < d->at_)) d->fire_locked(r);
}

}  // namespace tock

#endif
