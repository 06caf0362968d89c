// test/fuzz/repro/sleep_emit_race.cpp: found by fuzz_threads (input: sleep_emit_race.fuzz_threads-input).
//
// A sleep whose handler is bound to a strand and to a cancellation slot, on a context run by two threads.
// The slot is emitted on the strand, as Asio requires, before the handler has run. Meanwhile the driver
// fires the sleep on the other thread: finish_op() (detail/wait_handlers.hpp) frees the operation and calls
// slot.clear() there, off the strand, then dispatches the handler to the strand. So
//   - the emit (strand thread) runs sleep_cancellation, which reads op->node in cancel_sleep() /
//     unschedule_locked() while the firing thread frees that memory (a data race, and a heap-use-after-free
//     when the free comes first), and
//   - slot.clear() (firing thread) races with signal.emit() (strand thread) on the signal's handler.
// Timer waits do not have the problem: a fired wait on a foreign executor stays in its ring until
// fired_wait_runner runs on that executor.
//
// Build and run (ThreadSanitizer reports a data race within a few hundred iterations):
//   clang++-16 -std=c++20 -fsanitize=thread -g -O1 -Iinclude test/fuzz/repro/sleep_emit_race.cpp src/error.cpp \
//     -o /tmp/sleep_emit_race && setarch $(uname -m) -R /tmp/sleep_emit_race
// (also built as repro_sleep_emit_race by test/fuzz/CMakeLists.txt with TOCK_FUZZ_SANITIZER=thread)
#include <tock/tock.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  asio::io_context ctx(2);
  auto work = asio::make_work_guard(ctx);
  std::vector<std::thread> runners;
  for (int i = 0; i < 2; ++i) runners.emplace_back([&] { ctx.run(); });
  auto strand = asio::make_strand(ctx);
  asio::cancellation_signal signal;
  std::atomic<int> completions{0};

  for (int i = 0; i < rounds; ++i) {
    std::promise<void> started;
    asio::post(strand, [&] {  // start the sleep on the strand, bound to it and to the signal
      tock::async_sleep_until(
          ctx, tock::manual_clock::now() + 1ms,
          asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(strand, [&](auto) { ++completions; })));
      started.set_value();
    });
    started.get_future().wait();
    tock::manual_clock::advance(1ms);                              // the driver fires on a runner...
    asio::post(strand, [&] { signal.emit(asio::cancellation_type::terminal); });  // ...while the strand emits
    std::promise<void> done;
    asio::post(strand, [&] { done.set_value(); });
    done.get_future().wait();
    while (completions.load() != i + 1) std::this_thread::yield();  // the handler ran (on the strand)
  }
  work.reset();
  for (auto& r : runners) r.join();
  std::printf("%d sleeps, %d completions\n", rounds, completions.load());
  return completions.load() == rounds ? 0 : 1;
}
