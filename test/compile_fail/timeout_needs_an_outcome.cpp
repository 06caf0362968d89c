// Must not compile: a timeout (tock::timeout, its partial form, a deadline's bind()) on an operation whose
// completion has no error_code or exception_ptr first has nowhere to report tock::error::timed_out, so tock
// rejects it with a static_assert instead of doing nothing. TOCK_COMPILE_FAIL_CONTROL builds the same
// timeouts on operations that do report (the control: anything else failing would fail it too).
#include <tock/tock.hpp>

#include <chrono>
#include <cstddef>

namespace {

using namespace std::chrono_literals;
namespace asio = tock::asio;

// An operation completing with void(std::size_t) (CASE 3), or void(error_code, std::size_t) for the control.
#if defined(TOCK_COMPILE_FAIL_CONTROL)
using signature = void(tock::error_code, std::size_t);
#else
using signature = void(std::size_t);
#endif

struct initiate_count {
  using executor_type = asio::io_context::executor_type;
  executor_type ex;
  executor_type get_executor() const noexcept { return ex; }
  template <typename Handler>
  void operator()(Handler&&) const {}
};

template <typename Token>
auto async_count(asio::io_context& ctx, Token&& token) {
  return asio::async_initiate<Token, signature>(initiate_count{ctx.get_executor()}, token);
}

}  // namespace

int main() {
  asio::io_context ctx;
  tock::deadline dl(ctx, 1s);
#if defined(TOCK_COMPILE_FAIL_CONTROL)
  tock::async_sleep_for(ctx, 1s, tock::timeout(1s, [](tock::error_code) {}));
  async_count(ctx, dl.bind([](tock::error_code, std::size_t) {}));
  async_count(ctx, tock::timeout(1s))([](tock::error_code, std::size_t) {});
#elif CASE == 1
  asio::post(ctx, tock::timeout(1s, [] {}));
#elif CASE == 2
  async_count(ctx, dl.bind([](std::size_t) {}));
#elif CASE == 3
  async_count(ctx, tock::timeout(1s))([](std::size_t) {});
#endif
  ctx.run();
}
