// tock/detail/time_arith.hpp: deadline arithmetic that saturates instead of overflowing.
#ifndef TOCK_DETAIL_TIME_ARITH_HPP
#define TOCK_DETAIL_TIME_ARITH_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

namespace tock::detail {

// Converts any duration to Duration, clamping at Duration's range instead of overflowing.
template <typename Duration, typename Rep, typename Period>
Duration saturating_cast(const std::chrono::duration<Rep, Period>& d) noexcept {
  using to_rep = typename Duration::rep;
  using ratio = std::ratio_divide<Period, typename Duration::period>;
  if constexpr (std::is_same_v<std::chrono::duration<Rep, Period>, Duration>) {
    return d;
  } else if constexpr (std::is_integral_v<Rep> && std::is_signed_v<Rep> && std::is_integral_v<to_rep> &&
                       sizeof(Rep) <= sizeof(to_rep) && ratio::den == 1) {
    // The common case (milliseconds to nanoseconds...): one multiplication, checked in integers.
    constexpr to_rep limit = std::numeric_limits<to_rep>::max() / ratio::num;
    if (d.count() > limit) return Duration::max();
    if (d.count() < -limit) return Duration::min();
    return Duration(static_cast<to_rep>(d.count()) * ratio::num);
  } else {
    using wide = std::common_type_t<std::chrono::duration<long double, Period>,
                                    std::chrono::duration<long double, typename Duration::period>>;
    const wide value(d);
    if (value >= wide(Duration::max())) return Duration::max();
    if (value <= wide(Duration::min())) return Duration::min();
    return std::chrono::duration_cast<Duration>(d);
  }
}

// t + d, clamped to [TimePoint::min(), TimePoint::max()]. A negative d gives a deadline in the past,
// which is due at once.
template <typename TimePoint, typename Rep, typename Period>
TimePoint saturating_add(const TimePoint& t, const std::chrono::duration<Rep, Period>& d) noexcept {
  using duration = typename TimePoint::duration;
  const duration step = saturating_cast<duration>(d);
  const auto since = t.time_since_epoch();
  if (step > duration::zero() && since > duration::max() - step) return TimePoint::max();
  if (step < duration::zero() && since < duration::min() - step) return TimePoint::min();
  return t + step;
}

// a - b, clamped to the duration's range instead of overflowing (a deadline near time_point::min(), from a
// saturated negative timeout, is far from any `now`).
template <typename TimePoint>
typename TimePoint::duration saturating_sub(const TimePoint& a, const TimePoint& b) noexcept {
  using duration = typename TimePoint::duration;
  if constexpr (std::is_integral_v<typename duration::rep>) {
    typename duration::rep d;
    if (__builtin_sub_overflow(a.time_since_epoch().count(), b.time_since_epoch().count(), &d))
      return a > b ? duration::max() : duration::min();
    return duration(d);
  } else {
    return a - b;
  }
}

// Point n of the grid origin + k * period (k = 0, 1, ...), by multiplication, so that it does not drift;
// TimePoint::max() once it leaves the clock's range. Requires an integral representation.
template <typename TimePoint>
TimePoint grid_point(const TimePoint& origin, const typename TimePoint::duration& period, std::uint64_t n) noexcept {
  using duration = typename TimePoint::duration;
  typename duration::rep offset;
  if (n > std::uint64_t(std::numeric_limits<typename duration::rep>::max()) ||
      __builtin_mul_overflow(period.count(), static_cast<typename duration::rep>(n), &offset))
    return TimePoint::max();
  return saturating_add(origin, duration(offset));
}

}  // namespace tock::detail

#endif
