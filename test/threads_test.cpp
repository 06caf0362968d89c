// The timer service under concurrency: four threads run one io_context while jobs on those threads and on two
// plain threads create, reset, cancel, move and destroy timers and start sleeps. Meant to pass under TSan.
#include "test_asio.hpp"

#include <tock/detail/sanitizers.hpp>  // TOCK_ASAN, TOCK_TSAN: smaller runs under a sanitizer
#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using tock::error_code;

#if TOCK_ASAN || TOCK_TSAN
constexpr int total_timers = 20000;
#else
constexpr int total_timers = 100000;
#endif
constexpr int runner_count = 4;
constexpr int plain_thread_count = 2;
constexpr int timers_per_job = 50;
constexpr int job_count = total_timers / timers_per_job;
// Jobs the plain threads do themselves; the rest are posted to the runners.
constexpr int plain_jobs_per_thread = job_count / 6;

using strand_type = asio::strand<asio::io_context::executor_type>;

// What every handler reports to. Boost.Test is not thread-safe, so workers only count; the test thread checks.
class completion_stats {
 public:
  explicit completion_stats(std::size_t capacity) : outcome_(capacity), deadline_(capacity) {}

  // Reserves an operation id; ids past the capacity are counted as overflow (a test bug, checked at the end).
  std::size_t start(time_point not_before = time_point::min()) {
    const std::size_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (id >= outcome_.size()) {
      overflow_.fetch_add(1, std::memory_order_relaxed);
      return outcome_.size();
    }
    deadline_[id] = not_before;  // published to the handler by the service's mutex
    started_.fetch_add(1, std::memory_order_relaxed);
    return id;
  }

  void complete(std::size_t id, const error_code& ec) {
    const time_point now = clock_type::now();
    if (run_returned_.load(std::memory_order_acquire)) after_run_.fetch_add(1, std::memory_order_relaxed);
    if (id >= outcome_.size()) return;
    const std::uint8_t value = !ec ? success : ec == asio::error::operation_aborted ? aborted : other;
    std::uint8_t expected = none;
    if (!outcome_[id].compare_exchange_strong(expected, value, std::memory_order_acq_rel)) {
      double_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (value == success && now < deadline_[id]) early_.fetch_add(1, std::memory_order_relaxed);
  }

  void set_run_returned() { run_returned_.store(true, std::memory_order_release); }

  // --- For the test thread, once every worker has been joined.
  std::size_t started() const { return started_.load(); }
  std::size_t count(std::uint8_t value) const {
    const std::size_t n = std::min(next_id_.load(), outcome_.size());
    return static_cast<std::size_t>(
        std::count_if(outcome_.begin(), outcome_.begin() + static_cast<std::ptrdiff_t>(n),
                      [&](const std::atomic<std::uint8_t>& o) { return o.load() == value; }));
  }
  std::uint8_t outcome(std::size_t id) const { return outcome_[id].load(); }
  std::size_t double_completions() const { return double_.load(); }
  std::size_t after_run() const { return after_run_.load(); }
  std::size_t early() const { return early_.load(); }
  std::size_t overflow() const { return overflow_.load(); }

  static constexpr std::uint8_t none = 0, success = 1, aborted = 2, other = 3;

 private:
  std::vector<std::atomic<std::uint8_t>> outcome_;
  std::vector<time_point> deadline_;
  std::atomic<std::size_t> next_id_{0};
  std::atomic<std::size_t> started_{0};
  std::atomic<std::size_t> double_{0};
  std::atomic<std::size_t> after_run_{0};
  std::atomic<std::size_t> early_{0};
  std::atomic<std::size_t> overflow_{0};
  std::atomic<bool> run_returned_{false};
};

class counting_handler {
 public:
  counting_handler(completion_stats* s, std::size_t id) : stats_(s), id_(id) {}
  void operator()(const error_code& ec) const { stats_->complete(id_, ec); }

 private:
  completion_stats* stats_;
  std::size_t id_;
};

// Runs `plain_work(thread_index)` on two plain threads and posts `posted` jobs to the context, while four threads
// run it; returns once run() has returned on all of them.
template <typename PlainWork, typename PostedJob>
void run_on_six_threads(asio::io_context& ctx, completion_stats& stats, int posted, PlainWork plain_work,
                        PostedJob posted_job) {
  auto guard = asio::make_work_guard(ctx);  // held until the plain threads are done starting work
  for (int j = 0; j < posted; ++j) asio::post(ctx, [&posted_job, j] { posted_job(j); });
  std::vector<std::thread> runners;
  for (int i = 0; i < runner_count; ++i) runners.emplace_back([&ctx] { ctx.run(); });
  std::vector<std::thread> plain;
  for (int i = 0; i < plain_thread_count; ++i) plain.emplace_back([&plain_work, i] { plain_work(i); });
  for (auto& t : plain) t.join();
  guard.reset();
  for (auto& t : runners) t.join();
  stats.set_run_returned();
}

// One job: `timers_per_job` timers, each waited on and then reset, cancelled, given a second wait, or left;
// some sleeps; then a quarter of the timers are destroyed at once and the rest handed to a sleep whose
// handler destroys them (on whatever thread runs it) a little later, after some of their waits fired.
void timer_job(asio::io_context& ctx, completion_stats& stats, const std::vector<strand_type>& strands,
               std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto start_wait = [&](tock::timer& t) {
    counting_handler h(&stats, stats.start(t.expiry()));
    if (uniform(0, 4) == 0)
      t.async_wait(asio::bind_executor(strands[static_cast<std::size_t>(uniform(0, 3))], h));
    else
      t.async_wait(std::move(h));
  };

  std::vector<tock::timer> keep;
  for (int i = 0; i < timers_per_job; ++i) {
    tock::timer t(ctx.get_executor());
    t.expires_after(std::chrono::microseconds(uniform(0, 3000)));
    start_wait(t);
    switch (uniform(0, 9)) {
      case 0:
      case 1:  // reset
        t.expires_after(std::chrono::microseconds(uniform(-200, 3000)));
        start_wait(t);
        break;
      case 2: t.cancel(); break;
      case 3: t.cancel_one(); break;
      case 4: start_wait(t); break;
      case 5: {
        const auto d = std::chrono::microseconds(uniform(-500, 3000));
        const time_point before = clock_type::now();
        tock::async_sleep_for(ctx.get_executor(), d, counting_handler(&stats, stats.start(before + d)));
        break;
      }
      default: break;
    }
    if (uniform(0, 3) != 0) keep.push_back(std::move(t));  // moved: the waits follow it
  }
  const std::size_t id = stats.start();
  tock::async_sleep_for(ctx.get_executor(), 2ms,
                        [keep = std::move(keep), h = counting_handler(&stats, id)](const error_code& ec) mutable {
                          keep.clear();
                          h(ec);
                        });
}

std::vector<strand_type> make_strands(asio::io_context& ctx) {
  std::vector<strand_type> strands;
  for (int i = 0; i < 4; ++i) strands.push_back(asio::make_strand(ctx));
  return strands;
}

// Every timer operation of the mixed workload, with the context and its stats.
struct mixed_workload {
  asio::io_context ctx;
  completion_stats stats{static_cast<std::size_t>(total_timers) * 3 + static_cast<std::size_t>(job_count)};
  std::vector<strand_type> strands = make_strands(ctx);

  mixed_workload() {
    const int posted = job_count - plain_jobs_per_thread * plain_thread_count;
    run_on_six_threads(
        ctx, stats, posted,
        [this](int thread) {
          for (int j = 0; j < plain_jobs_per_thread; ++j)
            timer_job(ctx, stats, strands, 1'000'000u * static_cast<unsigned>(thread + 1) + static_cast<unsigned>(j));
        },
        [this](int j) { timer_job(ctx, stats, strands, static_cast<unsigned>(j)); });
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(threads_test)

BOOST_AUTO_TEST_CASE(timers_used_from_six_threads_complete_every_wait_exactly_once) {
  mixed_workload w;
  const auto& s = w.stats;
  BOOST_TEST_MESSAGE(s.started() << " waits and sleeps: " << s.count(completion_stats::success) << " succeeded, "
                                 << s.count(completion_stats::aborted) << " aborted");
  BOOST_TEST(s.overflow() == 0u);
  BOOST_TEST(s.double_completions() == 0u);
  BOOST_TEST(s.count(completion_stats::none) == 0u);
  BOOST_TEST(s.count(completion_stats::other) == 0u);
  BOOST_TEST(s.count(completion_stats::success) + s.count(completion_stats::aborted) == s.started());
  BOOST_TEST(s.started() >= static_cast<std::size_t>(total_timers));
  // Both outcomes happened in earnest.
  BOOST_TEST(s.count(completion_stats::success) > s.started() / 10);
  BOOST_TEST(s.count(completion_stats::aborted) > s.started() / 10);
}

BOOST_AUTO_TEST_CASE(timers_used_from_six_threads_complete_no_wait_before_its_deadline) {
  mixed_workload w;
  BOOST_TEST(w.stats.early() == 0u);
}

BOOST_AUTO_TEST_CASE(nothing_is_pending_or_queued_once_run_returns_on_every_thread) {
  mixed_workload w;
  auto& service = tock::timer_service::of(w.ctx.get_executor());
  BOOST_TEST(w.stats.after_run() == 0u);
  BOOST_TEST(service.pending() == 0u);
  BOOST_TEST(service.invariants_hold());
  w.ctx.restart();
  BOOST_TEST(w.ctx.poll() == 0u);  // no handler was left behind to run later
  BOOST_TEST(w.stats.after_run() == 0u);
}

BOOST_AUTO_TEST_CASE(sleeps_from_six_threads_complete_once_and_not_before_their_deadline) {
  constexpr int sleeps_per_job = 100;
  constexpr int jobs = total_timers / sleeps_per_job;
  asio::io_context ctx;
  completion_stats stats(static_cast<std::size_t>(jobs) * sleeps_per_job);
  const auto strands = make_strands(ctx);
  auto job = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < sleeps_per_job; ++i) {
      const auto d = std::chrono::microseconds(std::uniform_int_distribution<int>(-300, 3000)(rng));
      const time_point before = clock_type::now();
      counting_handler h(&stats, stats.start(before + d));
      if (i % 4 == 0)
        tock::async_sleep_until(ctx, before + d, asio::bind_executor(strands[static_cast<std::size_t>(i / 4 % 4)], h));
      else
        tock::async_sleep_for(ctx.get_executor(), d, std::move(h));
    }
  };
  const int per_plain = jobs / 6;
  run_on_six_threads(
      ctx, stats, jobs - 2 * per_plain,
      [&](int thread) {
        for (int j = 0; j < per_plain; ++j)
          job(1'000'000u * static_cast<unsigned>(thread + 1) + static_cast<unsigned>(j));
      },
      [&](int j) { job(static_cast<unsigned>(j)); });
  BOOST_TEST(stats.overflow() == 0u);
  BOOST_TEST(stats.double_completions() == 0u);
  BOOST_TEST(stats.count(completion_stats::success) == stats.started());
  BOOST_TEST(stats.started() == static_cast<std::size_t>(jobs) * sleeps_per_job);
  BOOST_TEST(stats.early() == 0u);
  BOOST_TEST(tock::timer_service::of(ctx.get_executor()).pending() == 0u);
}

// A wait is aborted exactly when cancel() reports it: a wait that fired but whose handler has not run on
// its strand yet counts as cancelled (and then completes aborted); one that fired and ran, or fired with a
// handler called in place, does not.
BOOST_AUTO_TEST_CASE(cancel_racing_with_firing_aborts_exactly_the_waits_it_reports) {
  constexpr int batch = 20;
  constexpr int batches = total_timers / batch;
  const std::size_t capacity = static_cast<std::size_t>(batches) * batch;
  asio::io_context ctx;
  completion_stats stats(capacity);
  std::vector<std::atomic<int>> cancelled(capacity);  // 1 + what cancel() returned for the wait's timer
  const auto strands = make_strands(ctx);

  struct entry {
    std::optional<tock::timer> timer;
    std::size_t id = 0;
  };
  using batch_type = std::vector<entry>;

  // A batch of timers, one wait each, half of them with handlers on strands; returns the latest expiry.
  auto start_batch = [&](batch_type& entries, std::mt19937_64& rng, bool one_far) {
    time_point latest = clock_type::now();
    for (int i = 0; i < batch; ++i) {
      entry& e = entries[static_cast<std::size_t>(i)];
      auto& t = e.timer.emplace(ctx.get_executor());
      // With `one_far`, one wait is far in the future, so that it is surely cancelled before it fires.
      if (one_far && i == 1)
        t.expires_after(10s);
      else
        t.expires_after(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
      if (t.expiry() < clock_type::now() + 1s) latest = std::max(latest, t.expiry());
      e.id = stats.start();
      counting_handler h(&stats, e.id);
      if (i % 2 == 0)
        t.async_wait(asio::bind_executor(strands[static_cast<std::size_t>(i / 2 % 4)], std::move(h)));
      else
        t.async_wait(std::move(h));
    }
    return latest;
  };
  auto cancel_batch = [&](batch_type& entries, std::mt19937_64& rng) {
    std::shuffle(entries.begin(), entries.end(), rng);
    for (entry& e : entries) {
      const std::size_t n = e.timer->cancel();
      if (e.id < capacity) cancelled[e.id].store(static_cast<int>(n) + 1, std::memory_order_relaxed);
      e.timer.reset();
    }
  };

  // On a plain thread: cancel around the deadlines, while the runners fire them. Some waits have not fired,
  // some fired and wait for their strand, some ran.
  auto plain_job = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    batch_type entries(batch);
    const time_point latest = start_batch(entries, rng, true);
    const time_point cancel_at = latest + std::chrono::microseconds(std::uniform_int_distribution<int>(-150, 300)(rng));
    while (clock_type::now() < cancel_at) std::this_thread::yield();
    cancel_batch(entries, rng);
  };
  // On a runner: a runner must not spin, so a sleep due just after the batch's deadlines cancels it. Every wait
  // is due before that sleep, so the ones with handlers called in place have surely fired.
  auto posted_job = [&](std::uint64_t seed) {
    auto rng = std::make_shared<std::mt19937_64>(seed);
    auto entries = std::make_shared<batch_type>(batch);
    const time_point latest = start_batch(*entries, *rng, false);
    const auto after = std::chrono::microseconds(std::uniform_int_distribution<int>(1, 300)(*rng));
    tock::async_sleep_until(ctx, latest + after,
                            [entries, rng, &cancel_batch](const error_code&) { cancel_batch(*entries, *rng); });
  };

  const int per_plain = batches / 6;
  run_on_six_threads(
      ctx, stats, batches - 2 * per_plain,
      [&](int thread) {
        for (int j = 0; j < per_plain; ++j)
          plain_job(1'000'000u * static_cast<unsigned>(thread + 1) + static_cast<unsigned>(j));
      },
      [&](int j) { posted_job(static_cast<unsigned>(j)); });

  BOOST_TEST(stats.overflow() == 0u);
  BOOST_TEST(stats.double_completions() == 0u);
  std::size_t mismatched = 0, reported_cancelled = 0, unrecorded = 0;
  for (std::size_t id = 0; id < stats.started(); ++id) {
    const int c = cancelled[id].load();
    if (c == 0) {
      ++unrecorded;
      continue;
    }
    const bool was_cancelled = c == 2;
    reported_cancelled += was_cancelled ? 1 : 0;
    const std::uint8_t expected = was_cancelled ? completion_stats::aborted : completion_stats::success;
    if (stats.outcome(id) != expected) ++mismatched;
  }
  BOOST_TEST_MESSAGE(stats.started() << " waits, " << reported_cancelled << " reported cancelled");
  BOOST_TEST(unrecorded == 0u);
  BOOST_TEST(mismatched == 0u,
             mismatched << " of " << stats.started() << " waits completed otherwise than cancel() reported");
  // Both outcomes occurred (each is certain: far waits are cancelled, due in-place waits fire first).
  BOOST_TEST(reported_cancelled > 0u);
  BOOST_TEST(reported_cancelled < stats.started());
  BOOST_TEST(tock::timer_service::of(ctx.get_executor()).pending() == 0u);
}

// The service's lock (detail/futex_mutex.hpp) on its own: mutual exclusion under contention, including the
// sleeping path (each thread at times yields while holding it, so that others find it held and sleep), and
// try_lock.
BOOST_AUTO_TEST_SUITE(futex_mutex_test)

BOOST_AUTO_TEST_CASE(lock_excludes_every_other_holder_under_contention) {
  tock::detail::futex_mutex mutex;
  constexpr int threads = 4;
#if TOCK_ASAN || TOCK_TSAN
  constexpr int rounds = 5000;
#else
  constexpr int rounds = 50000;
#endif
  long counter = 0;  // plain: a broken lock loses increments, and TSan reports the race
  int inside = 0;
  int overlaps = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard<tock::detail::futex_mutex> lock(mutex);
        overlaps += inside++ != 0;
        ++counter;
        if ((i + t) % 64 == 0) std::this_thread::yield();  // so that others find it held and sleep
        --inside;
      }
    });
  for (auto& th : pool) th.join();
  BOOST_TEST(counter == long(threads) * rounds);
  BOOST_TEST(overlaps == 0);
}

BOOST_AUTO_TEST_CASE(try_lock_fails_while_held_and_succeeds_once_released) {
  tock::detail::futex_mutex mutex;
  std::unique_lock<tock::detail::futex_mutex> lock(mutex);
  bool got = true;
  std::thread([&] { got = mutex.try_lock(); }).join();
  BOOST_TEST(!got);
  lock.unlock();
  std::thread([&] {
    got = mutex.try_lock();
    if (got) mutex.unlock();
  }).join();
  BOOST_TEST(got);
  BOOST_TEST(lock.try_lock());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE_END()  // threads_test
