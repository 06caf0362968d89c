// The error category behind tock::error.
#include <tock/error.hpp>

#include <string>
#include <system_error>

namespace tock {
namespace {

class category final : public sys::error_category {
 public:
  const char* name() const noexcept override { return "tock"; }

  std::string message(int value) const override {
    switch (static_cast<error>(value)) {
      case error::timed_out: return "Operation timed out";
      case error::capacity_exceeded: return "Timer service capacity exceeded";
      case error::shut_down: return "Timer service has been shut down";
    }
    return "Unknown tock error";
  }

  // Lets `ec == std::errc::timed_out` (and boost::system::errc::timed_out with Boost.Asio) hold for
// tock::error::timed_out.
  sys::error_condition default_error_condition(int value) const noexcept override {
    if (static_cast<error>(value) == error::timed_out) return sys::error_condition(sys::errc::timed_out);
    return sys::error_condition(value, *this);
  }
};

}  // namespace

const sys::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace tock
