// The parts of tock::manual_clock that are not templates, compiled once here: its one registry per process, and
// the driver of the services on it (tock/manual_clock.hpp).
#include <tock/manual_clock.hpp>

#include <algorithm>

namespace tock {

manual_clock::registry& manual_clock::state() noexcept {
  static registry r;
  return r;
}

void manual_clock::advance_to(time_point t) {
  registry& r = state();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!(now() < t)) return;
  r.now.store(t.time_since_epoch().count(), std::memory_order_release);
  // Backwards, as fire_locked() takes the driver out of `armed`; nothing here allocates (see manual_driver).
  for (std::size_t i = r.armed.size(); i-- > 0;)
    if (!(t < r.armed[i]->at_)) r.armed[i]->fire_locked(r);
}

namespace detail {

manual_driver::manual_driver(const asio::io_context::executor_type& ex) : ex_(ex) {
  auto& r = manual_clock::state();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.armed.reserve(++r.drivers);
}

manual_driver::~manual_driver() {
  auto& r = manual_clock::state();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (handler_) r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
  --r.drivers;
}

void manual_driver::arm(const manual_clock::time_point& t, handler_type handler) {
  auto& r = manual_clock::state();
  std::lock_guard<std::mutex> lock(r.mutex);
  memory_.reserve(handler_ ? 2 : 1);  // the superseded wait's post, and this one's
  drop_locked(r);
  at_ = t;
  handler_ = std::move(handler);
  work_.emplace(ex_);
  r.armed.push_back(this);
  if (!(manual_clock::now() < at_)) fire_locked(r);
}

void manual_driver::cancel() noexcept {
  auto& r = manual_clock::state();
  std::lock_guard<std::mutex> lock(r.mutex);
  drop_locked(r);
}

void manual_driver::complete_locked(manual_clock::registry& r, const sys::error_code& ec) noexcept {
  asio::post(ex_, completion{std::exchange(handler_, nullptr), ec, &memory_});  // reserved: no throw
  r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
  work_.reset();  // after the post, which holds work of its own
}

}  // namespace detail
}  // namespace tock
