// tock/detail/beast_rate.hpp: the rate limit of tock::beast::basic_stream, on a tock::basic_timer.
#ifndef TOCK_DETAIL_BEAST_RATE_HPP
#define TOCK_DETAIL_BEAST_RATE_HPP

#include <tock/basic_timer.hpp>
#include <tock/config.hpp>

#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/rate_policy.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>

namespace tock::detail {

// Names Beast's rate_policy_access, whose members (the RatePolicy concept: available_*_bytes,
// transfer_*_bytes, on_timer) only boost::beast::basic_stream may call: see the specialization below.
struct beast_rate_tag;

}  // namespace tock::detail

namespace boost::beast {

// rate_policy_access befriends every specialization of basic_stream; this one, for tock's tag only, passes
// the RatePolicy calls through, so that tock's stream drives Beast's policies (and users' own, which befriend
// rate_policy_access) exactly as Beast's stream does. It is never a stream.
template <typename RatePolicy>
class basic_stream<tock::detail::beast_rate_tag, tock::detail::beast_rate_tag, RatePolicy> {
 public:
  static std::size_t available(RatePolicy& p, bool read) {
    return read ? rate_policy_access::available_read_bytes(p) : rate_policy_access::available_write_bytes(p);
  }
  static void transfer(RatePolicy& p, bool read, std::size_t n) {
    if (read)
      rate_policy_access::transfer_read_bytes(p, n);
    else
      rate_policy_access::transfer_write_bytes(p, n);
  }
  static void on_timer(RatePolicy& p) { rate_policy_access::on_timer(p); }
};

}  // namespace boost::beast

namespace tock::detail {

// A stream's rate limit, as Beast applies it: an operation takes at most the bytes its direction has left in
// the current one-second slice, and waits for the next slice when none are left. Beast runs a timer that
// ticks every second once the first operation ran out (and keeps the context busy until the stream closes);
// here the slice is refilled lazily, by the first operation that finds it over, and an operation that has to
// wait sleeps on one tock timer until the slice ends. The first slice starts, refilled at once (as Beast's
// first wait completes at once), when an operation first finds nothing left. Not thread-safe (the stream's).
template <typename RatePolicy, typename Executor>
class beast_rate {
  using access = boost::beast::basic_stream<beast_rate_tag, beast_rate_tag, RatePolicy>;
  using clock = std::chrono::steady_clock;

 public:
  static constexpr bool limited = true;

  explicit beast_rate(const Executor& ex) : timer_(ex) {}
  template <typename Policy>
  beast_rate(Policy&& policy, const Executor& ex) : policy_(std::forward<Policy>(policy)), timer_(ex) {}
  beast_rate(beast_rate&& other)
      : policy_(std::move(other.policy_)), timer_(std::move(other.timer_)), slice_end_(other.slice_end_),
        waiters_(std::exchange(other.waiters_, 0)) {}

  RatePolicy& policy() noexcept { return policy_; }
  const RatePolicy& policy() const noexcept { return policy_; }

  // The bytes an operation may transfer now; 0: it must wait() for the next slice.
  std::size_t available(bool read) {
    const auto now = clock::now();
    if (started() && now >= slice_end_) refill(now);
    std::size_t n = access::available(policy_, read);
    if (n == 0 && !started()) {
      refill(now);
      n = std::max<std::size_t>(access::available(policy_, read), 1);
    }
    return n;
  }

  // After a wait: the bytes the operation transfers (at least one, as Beast).
  std::size_t after_wait(bool read) {
    --waiters_;
    const auto now = clock::now();
    if (now >= slice_end_) refill(now);  // the first waiter of the two directions refills
    return std::max<std::size_t>(access::available(policy_, read), 1);
  }

  // A wait that ended without its slice (cancelled, or the stream closed).
  void wait_aborted() noexcept { --waiters_; }

  // Waits for the end of the slice: void(error_code). The timer's expiry is only moved when nobody waits
  // on it (moving it would abort their waits); with waiters it is already the slice's end.
  template <typename Handler>
  void wait(Handler&& handler) {
    if (waiters_++ == 0) timer_.expires_at(slice_end_);
    timer_.async_wait(std::forward<Handler>(handler));
  }

  void transferred(bool read, std::size_t n) { access::transfer(policy_, read, n); }

  // Aborts the waits (operation_aborted), as Beast cancels its rate timer on cancel() and close().
  void cancel() { timer_.cancel(); }

 private:
  bool started() const noexcept { return slice_end_ != clock::time_point::min(); }
  void refill(clock::time_point now) {
    access::on_timer(policy_);
    slice_end_ = now + std::chrono::seconds(1);
  }

  RatePolicy policy_;
  basic_timer<clock, asio::wait_traits<clock>, Executor> timer_;
  clock::time_point slice_end_ = clock::time_point::min();  // min: no slice yet
  int waiters_ = 0;                                         // waits on timer_ (at most one per direction)
};

// No limit: no timer, no state; the stream's member takes no room.
template <typename Executor>
class beast_rate<boost::beast::unlimited_rate_policy, Executor> {
 public:
  static constexpr bool limited = false;

  explicit beast_rate(const Executor&) noexcept {}
  template <typename Policy>
  beast_rate(Policy&& policy, const Executor&) : policy_(std::forward<Policy>(policy)) {}

  boost::beast::unlimited_rate_policy& policy() noexcept { return policy_; }
  const boost::beast::unlimited_rate_policy& policy() const noexcept { return policy_; }
  void cancel() noexcept {}

 private:
  [[no_unique_address]] boost::beast::unlimited_rate_policy policy_;
};

}  // namespace tock::detail

#endif
