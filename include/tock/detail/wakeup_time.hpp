// tock/detail/wakeup_time.hpp: the clock reading of the wake-up whose batch runs on this thread.
#ifndef TOCK_DETAIL_WAKEUP_TIME_HPP
#define TOCK_DETAIL_WAKEUP_TIME_HPP

namespace tock::detail {

class service_core;

// A handler that needs the time it completed at, only to report it (a burst or delay periodic tick counts the
// periods it missed), takes the driver's reading of the wake-up that completed it, when that wake-up's batch is
// what runs the handler on this thread: one clock read per wake-up, as Asio's reactor reads it, not one per
// handler (each read is ~30 ns on a VM's clock, a quarter of a tick: bench/README.md, periodic). The reading
// is tagged with its service, so that a handler completed by another service (or none) reads the clock: either
// way the time is no earlier than the batch that fired its wait and, on a steady clock, no later than now. It
// lags the clock by the batch's earlier handlers, so a handler that places something after now (a skip tick)
// reads the clock itself. A batch restores the reading it found when it ends: a handler may run another
// context's batch inside its own.
template <typename Clock>
class wakeup_time {
  struct batch {
    const service_core* core;
    typename Clock::time_point now;
  };

 public:
  using time_point = typename Clock::time_point;

  // The reading of `core`'s batch if it runs on this thread, else Clock::now(). O(1).
  static time_point of(const service_core* core) {
    const batch* b = current_;
    return b != nullptr && b->core == core ? b->now : Clock::now();
  }

  // Publishes `now` as `core`'s reading for the batch this object's lifetime spans, on this thread.
  class scope {
   public:
    scope(const service_core& core, const time_point& now) noexcept : batch_{&core, now}, outer_(current_) {
      current_ = &batch_;
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    ~scope() { current_ = outer_; }

   private:
    batch batch_;
    const batch* outer_;
  };

 private:
  static inline thread_local const batch* current_ = nullptr;
};

}  // namespace tock::detail

#endif
