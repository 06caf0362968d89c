// tock/detail/time_arith.hpp: deadline arithmetic that saturates instead of overflowing.
#ifndef TOCK_DETAIL_TIME_ARITH_HPP
#define TOCK_DETAIL_TIME_ARITH_HPP

#include <chrono>
#include <limits>
#include <type_traits>

namespace tock::detail {

// Converts any duration to Duration, clamping at Duration's range instead of overflowing.
template <typename Duration, typename Rep, typename Period>
Duration saturating_cast(const std::chrono::duration<Rep, Period>& d) noexcept {
  if constexpr (std::is_same_v<std::chrono::duration<Rep, Period>, Duration>) {
    return d;
  } else {
  using common = std::common_type_t<std::chrono::duration<long double, Period>,
                                    std::chrono::duration<long double, typename Duration::period>>;
  const common value(d);
  if (value >= common(Duration::max())) return Duration::max();
  if (value <= common(Duration::min())) return Duration::min();
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

}  // namespace tock::detail

#endif
