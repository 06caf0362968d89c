// Must not link: a program built in another mode than libtock (tock/detail/libtock_abi.hpp). The steady_clock
// service is compiled once, in libtock, in libtock's mode; a translation unit that would take it from there in
// another mode (with or without ThreadSanitizer's annotations, with or without the invariant checks) names that
// mode's tag, which libtock does not define, and the link fails naming it. test/compile_fail/CMakeLists.txt
// builds this file in the mode that mismatches the build's own; the control, in the build's own mode, links.
#include <tock/tock.hpp>

#include <chrono>

int main() {
  tock::asio::io_context ctx;
  bool slept = false;
  tock::async_sleep_for(ctx.get_executor(), std::chrono::milliseconds(1), [&](tock::error_code ec) { slept = !ec; });
  ctx.run();
  return slept ? 0 : 1;
}
