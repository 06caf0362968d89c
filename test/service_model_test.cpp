// The timer service as a whole against a reference model: random timer and sleep operations on a real
// io_context with deadlines a few milliseconds away, every completion recorded and checked afterwards.
#include "test_asio.hpp"

#include <tock/tock.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using time_point = clock_type::time_point;
using tock::error_code;

// Small enough for sanitizer builds too: a run takes about as long as its deadlines (some 40 ms).
constexpr int timer_count = 200;
constexpr int pre_run_ops = 1200;
constexpr int spawned_ops = 400;

constexpr std::uint64_t seeds[] = {1, 2, 3};

enum class kind { timer_wait, sleep };
// `either`: a sleep whose handler runs on the strand was cancelled through its slot after its deadline had
// passed: it may have fired already with its handler queued on the strand, and a sleep (unlike a timer wait)
// is not re-checked when its handler runs, so success and operation_aborted are both right.
enum class model_state { pending, fired, aborted, either };

struct wait_record {
  kind what = kind::timer_wait;
  bool exact = false;       // `deadline` is the wait's deadline; otherwise a lower bound of it
  bool in_context = true;   // the handler runs on the context's own executor (called in place when due)
  time_point deadline{};
  std::uint64_t seq = 0;    // start order, as the service numbers starts (timer waits and sleeps alike)
  std::uint64_t start_event = 0;
  std::size_t slot = 0;     // the timer slot whose timer holds the wait (timer waits)
  std::uint64_t timer_id = 0;  // which timer (a moved timer keeps its id), for diagnostics
  model_state model = model_state::pending;
  std::unique_ptr<asio::cancellation_signal> signal;  // bound to the handler's cancellation slot, if any
  std::string origin;       // the operation that started it, for failure messages

  int completions = 0;
  error_code ec;
  time_point completed_at{};
  std::uint64_t complete_event = 0;
};

struct scenario_result {
  std::deque<wait_record> records;
  int double_completions = 0;
  int return_mismatches = 0;       // cancel()/cancel_one()/expires_at() returned a count the model disagrees with
  std::string first_return_mismatch;
  int ring_order_violations = 0;   // a timer's waits did not fire oldest first
  int invariant_failures = 0;
  int invariant_failures_after_earlier_expiry = 0;  // while some timer's expiry had moved earlier since its last wait
  std::string first_invariant_failure;
  std::size_t pending_after_run = 0;
  bool invariants_after_run = false;
};

// One random run. The io_context runs on this thread only, so the model knows exactly which waits are
// pending when an operation is applied: a wait counts as fired once its handler has run successfully.
class scenario {
 public:
  explicit scenario(std::uint64_t seed)
      : rng_(seed), service_(tock::timer_service::of(ctx_.get_executor())), strand_(asio::make_strand(ctx_)) {}

  scenario_result run() {
    base_ = clock_type::now() + 10ms;
    slots_.resize(timer_count);
    for (std::size_t i = 0; i < slots_.size(); ++i) recreate(i);
    for (int i = 0; i < pre_run_ops; ++i) {
      const std::string op = random_op();
      checkpoint("after " + op + " before run()");
    }
    spawn_budget_ = spawned_ops;
    ctx_.run();
    result_.pending_after_run = service_.pending();
    result_.invariants_after_run = service_.invariants_hold();
    for (auto& s : slots_) s.timer.reset();
    result_.records = std::move(records_);
    return std::move(result_);
  }

 private:
  struct timer_slot {
    std::unique_ptr<tock::timer> timer;
    time_point expiry{};
    bool exact = true;
    std::deque<std::size_t> pending;  // wait ids, oldest first
    std::uint64_t id = 0;  // changes when the timer is destroyed and recreated
    bool waited = false;  // has started a wait (so it may hold a heap slot)
    bool earlier_since_wait = false;  // its expiry moved earlier since it last started a wait
  };

  class handler {
   public:
    handler(scenario* s, std::size_t id) : s_(s), id_(id) {}
    void operator()(const error_code& ec) const { s_->on_complete(id_, ec); }

   private:
    scenario* s_;
    std::size_t id_;
  };

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::size_t any_slot() { return static_cast<std::size_t>(uniform(0, static_cast<int>(slots_.size()) - 1)); }
  time_point at_ms(int ms) const { return base_ + std::chrono::milliseconds(ms); }

  void checkpoint(const std::string& where) {
    if (!service_.invariants_hold()) {
      if (result_.invariant_failures++ == 0) result_.first_invariant_failure = where;
      if (std::any_of(slots_.begin(), slots_.end(), [](const timer_slot& s) { return s.earlier_since_wait; }))
        ++result_.invariant_failures_after_earlier_expiry;
    }
  }

  void return_mismatch(const std::string& op, std::size_t got, std::size_t expected) {
    if (result_.return_mismatches++ == 0) {
      std::ostringstream out;
      out << op << " returned " << got << ", the model expected " << expected;
      result_.first_return_mismatch = out.str();
    }
  }

  // The model's side of an abort: every listed wait that is still pending is aborted.
  void abort_all(timer_slot& slot) {
    for (std::size_t id : slot.pending) records_[id].model = model_state::aborted;
    slot.pending.clear();
  }

  std::size_t new_record(kind what, bool exact, bool in_context, time_point deadline, bool cancellable,
                         const std::string& origin) {
    wait_record r;
    r.what = what;
    r.exact = exact;
    r.in_context = in_context;
    r.deadline = deadline;
    r.seq = next_seq_++;
    r.start_event = ++event_;
    r.origin = origin;
    if (cancellable) r.signal = std::make_unique<asio::cancellation_signal>();
    records_.push_back(std::move(r));
    return records_.size() - 1;
  }

  // Starts the operation with the handler of record `id`, bound as the record says.
  template <typename Start>
  void start_with_handler(std::size_t id, Start&& start) {
    wait_record& r = records_[id];
    handler h(this, id);
    if (r.signal && !r.in_context)
      start(asio::bind_cancellation_slot(r.signal->slot(), asio::bind_executor(strand_, h)));
    else if (r.signal)
      start(asio::bind_cancellation_slot(r.signal->slot(), h));
    else if (!r.in_context)
      start(asio::bind_executor(strand_, h));
    else
      start(h);
  }

  // --- Operations. Each returns its name.

  std::string start_wait(std::size_t s) {
    timer_slot& slot = slots_[s];
    const bool in_context = uniform(0, 9) < 8;
    const bool cancellable = uniform(0, 9) < 2;
    const std::size_t id = new_record(kind::timer_wait, slot.exact, in_context, slot.expiry, cancellable, "async_wait");
    records_[id].slot = s;
    records_[id].timer_id = slot.id;
    slot.waited = true;
    slot.earlier_since_wait = false;
    slot.pending.push_back(id);
    start_with_handler(id, [&](auto&& h) { slot.timer->async_wait(std::move(h)); });
    return "async_wait";
  }

  std::string set_expiry_exact(std::size_t s, bool later) {
    timer_slot& slot = slots_[s];
    const long long current = std::clamp<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(slot.expiry - base_).count(), -1000, 1000);
    const int step = uniform(1, 10);
    const int ms = static_cast<int>(std::clamp<long long>(later ? current + step : current - step, -5, 40));
    const std::size_t expected = slot.pending.size();
    const std::size_t n = slot.timer->expires_at(at_ms(ms));
    abort_all(slot);
    if (at_ms(ms) < slot.expiry && slot.waited) slot.earlier_since_wait = true;
    slot.expiry = at_ms(ms);
    slot.exact = true;
    const std::string op = later ? "expires_at(later)" : "expires_at(earlier)";
    if (n != expected) return_mismatch(op, n, expected);
    return op;
  }

  std::string set_expiry_after(std::size_t s) {
    timer_slot& slot = slots_[s];
    const auto d = std::chrono::milliseconds(uniform(-2, 30));
    const std::size_t expected = slot.pending.size();
    const time_point before = clock_type::now();
    const std::size_t n = slot.timer->expires_after(d);
    abort_all(slot);
    if (slot.waited) slot.earlier_since_wait = true;  // perhaps earlier: the old expiry may be inexact
    slot.expiry = before + d;  // a lower bound of the real expiry
    slot.exact = false;
    if (n != expected) return_mismatch("expires_after", n, expected);
    return "expires_after";
  }

  std::string cancel(std::size_t s) {
    timer_slot& slot = slots_[s];
    const std::size_t expected = slot.pending.size();
    const std::size_t n = slot.timer->cancel();
    abort_all(slot);
    if (n != expected) return_mismatch("cancel", n, expected);
    return "cancel";
  }

  std::string cancel_one(std::size_t s) {
    timer_slot& slot = slots_[s];
    const std::size_t expected = slot.pending.empty() ? 0 : 1;
    const std::size_t n = slot.timer->cancel_one();
    if (!slot.pending.empty()) {
      records_[slot.pending.front()].model = model_state::aborted;
      slot.pending.pop_front();
    }
    if (n != expected) return_mismatch("cancel_one", n, expected);
    return "cancel_one";
  }

  // Destroys the slot's timer (aborting its waits) and makes a new one.
  std::string recreate(std::size_t s) {
    timer_slot& slot = slots_[s];
    slot.timer.reset();
    abort_all(slot);
    slot.id = ++timer_ids_;
    slot.waited = false;
    slot.earlier_since_wait = false;
    switch (uniform(0, 3)) {
      case 0: {
        slot.timer = std::make_unique<tock::timer>(ctx_);
        slot.expiry = time_point{};  // a default expiry: long past
        slot.exact = true;
        break;
      }
      case 1: {
        const auto d = std::chrono::milliseconds(uniform(0, 30));
        slot.expiry = clock_type::now() + d;
        slot.timer = std::make_unique<tock::timer>(ctx_, d);
        slot.exact = false;
        break;
      }
      default: {
        slot.expiry = at_ms(uniform(0, 30));
        slot.timer = std::make_unique<tock::timer>(ctx_.get_executor(), slot.expiry);
        slot.exact = true;
        break;
      }
    }
    return "destroy and recreate";
  }

  // Moves the timer to new memory; it keeps its expiry and waits.
  std::string move_construct(std::size_t s) {
    timer_slot& slot = slots_[s];
    slot.timer = std::make_unique<tock::timer>(std::move(*slot.timer));  // the moved-from one is destroyed here
    return "move construct";
  }

  // `to` aborts its waits and takes `from`'s expiry and waits; `from` is then replaced by a new timer.
  std::string move_assign(std::size_t to, std::size_t from) {
    if (to == from) return "none";
    timer_slot& a = slots_[to];
    timer_slot& b = slots_[from];
    *a.timer = std::move(*b.timer);
    abort_all(a);
    a.expiry = b.expiry;
    a.exact = b.exact;
    a.id = b.id;
    a.waited = b.waited;
    a.earlier_since_wait = b.earlier_since_wait;
    a.pending = std::move(b.pending);
    b.pending.clear();
    for (std::size_t id : a.pending) records_[id].slot = to;
    recreate(from);
    return "move assign";
  }

  std::string sleep_until() {
    const time_point t = at_ms(uniform(-2, 30));
    const bool in_context = uniform(0, 9) < 8;
    const bool cancellable = uniform(0, 9) < 3;
    const std::size_t id = new_record(kind::sleep, true, in_context, t, cancellable, "async_sleep_until");
    start_with_handler(id, [&](auto&& h) { tock::async_sleep_until(ctx_, t, std::move(h)); });
    return "async_sleep_until";
  }

  std::string sleep_for() {
    const auto d = std::chrono::milliseconds(uniform(-2, 30));
    const bool cancellable = uniform(0, 9) < 3;
    const time_point before = clock_type::now();
    const std::size_t id = new_record(kind::sleep, false, true, before + d, cancellable, "async_sleep_for");
    start_with_handler(id, [&](auto&& h) { tock::async_sleep_for(ctx_.get_executor(), d, std::move(h)); });
    return "async_sleep_for";
  }

  // Emits the cancellation signal of a random cancellable wait, pending or not.
  std::string emit_signal() {
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < records_.size(); ++i)
      if (records_[i].signal) candidates.push_back(i);
    if (candidates.empty()) return "none";
    const std::size_t id = candidates[static_cast<std::size_t>(uniform(0, static_cast<int>(candidates.size()) - 1))];
    wait_record& r = records_[id];
    static constexpr asio::cancellation_type types[] = {
        asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total};
    const asio::cancellation_type type = types[uniform(0, 2)];
    if (r.model == model_state::pending && r.what == kind::sleep && !r.in_context && clock_type::now() >= r.deadline) {
      r.model = model_state::either;
    } else if (r.model == model_state::pending) {
      r.model = model_state::aborted;
      if (r.what == kind::timer_wait) {
        auto& q = slots_[r.slot].pending;
        q.erase(std::find(q.begin(), q.end(), id));
      }
    }
    r.signal->emit(type);
    return "cancellation signal";
  }

  std::string random_op() {
    const int p = uniform(0, 99);
    if (p < 30) return start_wait(any_slot());
    if (p < 38) return set_expiry_exact(any_slot(), true);
    if (p < 44) return set_expiry_exact(any_slot(), false);
    if (p < 48) return set_expiry_after(any_slot());
    if (p < 53) return cancel(any_slot());
    if (p < 58) return cancel_one(any_slot());
    if (p < 63) return recreate(any_slot());
    if (p < 68) return move_construct(any_slot());
    if (p < 72) return move_assign(any_slot(), any_slot());
    if (p < 84) return sleep_until();
    if (p < 92) return sleep_for();
    return emit_signal();
  }

  void on_complete(std::size_t id, const error_code& ec) {
    const time_point now = clock_type::now();
    checkpoint("in the handler of a wait started by " + records_[id].origin);
    wait_record& r = records_[id];
    if (++r.completions > 1) {
      ++result_.double_completions;
      return;
    }
    r.ec = ec;
    r.completed_at = now;
    r.complete_event = ++event_;
    if (!ec && r.model == model_state::pending) {
      r.model = model_state::fired;
      if (r.what == kind::timer_wait) {
        auto& q = slots_[r.slot].pending;
        const auto it = std::find(q.begin(), q.end(), id);
        // Older waits of the timer whose handlers run in place have fired and run already; older ones on
        // the strand may have fired with their handler still queued behind other strand work.
        if (it == q.end() || std::any_of(q.begin(), it, [&](std::size_t older) { return records_[older].in_context; }))
          ++result_.ring_order_violations;
        if (it != q.end()) q.erase(it);
      }
    }
    if (spawn_budget_ > 0 && uniform(0, 1) == 0) {
      --spawn_budget_;
      const std::string op = random_op();
      checkpoint("after " + op + " from a handler");
    }
  }

  std::deque<wait_record> records_;  // outlives the context: pending handlers may hold signals' slots
  std::mt19937_64 rng_;
  asio::io_context ctx_;
  tock::timer_service& service_;
  asio::strand<asio::io_context::executor_type> strand_;
  std::vector<timer_slot> slots_;  // timers are destroyed before the context
  time_point base_{};
  std::uint64_t next_seq_ = 0;
  std::uint64_t event_ = 0;
  std::uint64_t timer_ids_ = 0;
  int spawn_budget_ = 0;
  scenario_result result_;
};

scenario_result run_scenario(std::uint64_t seed) {
  scenario s(seed);
  return s.run();
}

std::string describe(const wait_record& r, std::size_t id) {
  std::ostringstream out;
  out << "wait #" << id << " (" << r.origin << (r.in_context ? "" : " on a strand") << ", seq " << r.seq << ")";
  return out.str();
}

// Completions of hand-written scenarios, in the order they ran.
class completion_log {
 public:
  struct entry {
    int id;
    error_code ec;
    time_point at;
  };

  auto handler(int id) {
    return [this, id](const error_code& ec) { entries_.push_back(entry{id, ec, clock_type::now()}); };
  }

  int count(int id) const {
    return static_cast<int>(
        std::count_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.id == id; }));
  }

  // The completion of `id`; requires that it completed exactly once.
  const entry& of(int id) const {
    BOOST_REQUIRE_EQUAL(count(id), 1);
    return *std::find_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.id == id; });
  }

  // Where `id` completed in the sequence of completions.
  std::size_t index_of(int id) const {
    BOOST_REQUIRE_EQUAL(count(id), 1);
    return static_cast<std::size_t>(
        std::find_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.id == id; }) - entries_.begin());
  }

  std::vector<int> successes() const {
    std::vector<int> ids;
    for (const entry& e : entries_)
      if (!e.ec) ids.push_back(e.id);
    return ids;
  }

  std::size_t size() const { return entries_.size(); }

 private:
  std::vector<entry> entries_;
};

const error_code aborted_ec(asio::error::operation_aborted);

}  // namespace

BOOST_AUTO_TEST_SUITE(service_model_test)

BOOST_AUTO_TEST_CASE(random_operations_complete_every_wait_exactly_once) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      BOOST_TEST_MESSAGE("seed " << seed << ": " << res.records.size() << " waits and sleeps");
      BOOST_TEST(res.double_completions == 0);
      int not_once = 0;
      for (std::size_t i = 0; i < res.records.size(); ++i) {
        if (res.records[i].completions != 1 && not_once++ < 5)
          BOOST_TEST(res.records[i].completions == 1, describe(res.records[i], i)
                                                          << " completed " << res.records[i].completions << " times");
      }
      BOOST_TEST(not_once == 0);
      BOOST_TEST(res.records.size() > 500u);
    }
  }
}

BOOST_AUTO_TEST_CASE(random_operations_abort_exactly_the_waits_the_model_cancelled) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      int wrong = 0;
      std::size_t aborted = 0;
      std::size_t succeeded = 0;
      for (std::size_t i = 0; i < res.records.size(); ++i) {
        const wait_record& r = res.records[i];
        if (r.completions != 1) continue;  // another test's concern
        if (r.model == model_state::either) continue;
        const error_code expected =
            r.model == model_state::aborted ? error_code(asio::error::operation_aborted) : error_code();
        if (r.ec != expected && wrong++ < 5)
          BOOST_TEST(r.ec == expected, describe(r, i) << " completed with " << r.ec.message() << ", expected "
                                                      << (expected ? expected.message() : "success"));
        (expected ? aborted : succeeded) += 1;
      }
      BOOST_TEST_MESSAGE("seed " << seed << ": " << aborted << " aborted, " << succeeded << " succeeded");
      BOOST_TEST(wrong == 0);
      BOOST_TEST(res.return_mismatches == 0,
                 res.return_mismatches << " counts differ; first: " << res.first_return_mismatch);
      // The mix exercised both outcomes in earnest.
      BOOST_TEST(aborted > 100u);
      BOOST_TEST(succeeded > 100u);
    }
  }
}

BOOST_AUTO_TEST_CASE(random_operations_complete_successful_waits_not_before_their_deadline) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      int early = 0;
      for (std::size_t i = 0; i < res.records.size(); ++i) {
        const wait_record& r = res.records[i];
        if (r.completions != 1 || r.ec) continue;
        if (r.completed_at < r.deadline && early++ < 5)
          BOOST_TEST((r.completed_at >= r.deadline),
                     describe(r, i)
                         << " completed "
                         << std::chrono::duration_cast<std::chrono::microseconds>(r.deadline - r.completed_at).count()
                         << " us before its deadline");
      }
      BOOST_TEST(early == 0);
    }
  }
}

// Among waits whose deadlines are known exactly and whose handlers run in place: if a's (deadline, start
// order) is before b's and a was already waiting when b completed, a completed first. Also: the waits of one
// timer fire oldest first.
BOOST_AUTO_TEST_CASE(random_operations_complete_successful_waits_in_deadline_then_start_order) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      std::vector<std::size_t> ordered;
      for (std::size_t i = 0; i < res.records.size(); ++i) {
        const wait_record& r = res.records[i];
        if (r.completions == 1 && !r.ec && r.exact && r.in_context) ordered.push_back(i);
      }
      BOOST_TEST_MESSAGE("seed " << seed << ": " << ordered.size()
                                 << " waits with exact deadlines and in-place handlers");
      BOOST_TEST(ordered.size() > 100u);
      // Diagnostic: timer waits that shared their timer with another pending wait at some point.
      std::vector<bool> shared(res.records.size(), false);
      for (std::size_t i = 0; i < res.records.size(); ++i) {
        const wait_record& r = res.records[i];
        if (r.what != kind::timer_wait) continue;
        for (std::size_t j = 0; j < res.records.size() && !shared[i]; ++j) {
          const wait_record& o = res.records[j];
          shared[i] = j != i && o.what == kind::timer_wait && o.timer_id == r.timer_id &&
                      o.start_event < r.complete_event && (o.complete_event == 0 || o.complete_event > r.start_event);
        }
      }
      int violations = 0;
      int with_shared_timer = 0;
      std::string first;
      for (std::size_t a : ordered) {
        const wait_record& ra = res.records[a];
        for (std::size_t b : ordered) {
          const wait_record& rb = res.records[b];
          const bool a_first = ra.deadline < rb.deadline || (ra.deadline == rb.deadline && ra.seq < rb.seq);
          if (a_first && ra.start_event < rb.complete_event && ra.complete_event > rb.complete_event) {
            with_shared_timer += shared[a] || shared[b] ? 1 : 0;
            if (violations++ == 0) {
              std::ostringstream out;
              out << describe(ra, a) << " completed after " << describe(rb, b) << "; deadlines "
                  << (ra.deadline == rb.deadline ? "equal" : "differ");
              if (shared[a]) out << "; a's timer held other waits";
              if (shared[b]) out << "; b's timer held other waits";
              first = out.str();
            }
          }
        }
      }
      BOOST_TEST(violations == 0, violations << " pairs out of order (" << with_shared_timer
                                             << " of them involve a timer holding several waits); first: " << first);
      BOOST_TEST(res.ring_order_violations == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(invariants_hold_throughout_random_operations) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      BOOST_TEST(
          res.invariant_failures == 0,
          res.invariant_failures << " checkpoints failed (" << res.invariant_failures_after_earlier_expiry
                                 << " of them while a timer's expiry had moved earlier since its last wait); first: "
                                 << res.first_invariant_failure);
      BOOST_TEST(res.invariants_after_run);
    }
  }
}

BOOST_AUTO_TEST_CASE(random_operations_leave_nothing_pending_after_run) {
  for (std::uint64_t seed : seeds) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      const scenario_result res = run_scenario(seed);
      BOOST_TEST(res.pending_after_run == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(lazily_extended_expiry_fires_once_not_before_the_last_expiry) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point base = clock_type::now();
  {
    tock::timer t(ctx);
    const int steps_ms[] = {5, 10, 15, 25};
    for (int i = 0; i < 4; ++i) {
      BOOST_TEST(t.expires_at(base + std::chrono::milliseconds(steps_ms[i])) == (i == 0 ? 0u : 1u));
      t.async_wait(log.handler(i));
      BOOST_TEST(service.invariants_hold());
    }
    BOOST_TEST(service.pending() == 1u);
    tock::async_sleep_until(ctx, base + 20ms, log.handler(100));  // due before the last expiry only
    ctx.run();
  }
  for (int i = 0; i < 3; ++i) BOOST_TEST(log.of(i).ec == aborted_ec);
  BOOST_TEST(!log.of(3).ec);
  BOOST_TEST((log.of(3).at >= base + 25ms));
  BOOST_TEST(log.index_of(100) < log.index_of(3));
  BOOST_TEST(log.size() == 5u);
  BOOST_TEST(service.pending() == 0u);
  BOOST_TEST(service.invariants_hold());
}

BOOST_AUTO_TEST_CASE(extending_an_expiry_from_a_handler_fires_not_before_the_new_expiry) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point base = clock_type::now() + 5ms;
  {
    tock::timer t(ctx.get_executor(), base + 5ms);
    t.async_wait(log.handler(0));
    // Sleeps due before the timer's current expiry, so they always run before it could fire.
    tock::async_sleep_until(ctx, base + 2ms, [&](const error_code& ec) {
      BOOST_TEST(!ec);
      BOOST_TEST(t.expires_at(base + 20ms) == 1u);
      t.async_wait(log.handler(1));
      BOOST_TEST(service.invariants_hold());
    });
    tock::async_sleep_until(ctx, base + 8ms, [&](const error_code& ec) {
      BOOST_TEST(!ec);
      BOOST_TEST(t.expires_at(base + 30ms) == 1u);
      t.async_wait(log.handler(2));
      BOOST_TEST(service.invariants_hold());
    });
    ctx.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
  BOOST_TEST(log.of(1).ec == aborted_ec);
  BOOST_TEST(!log.of(2).ec);
  BOOST_TEST((log.of(2).at >= base + 30ms));
  BOOST_TEST(service.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(moving_an_expiry_earlier_fires_before_a_later_reference_sleep) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point base = clock_type::now();
  {
    tock::timer t(ctx.get_executor(), base + 40ms);
    t.async_wait(log.handler(0));
    tock::async_sleep_until(ctx, base + 20ms, log.handler(100));
    BOOST_TEST(t.expires_at(base + 5ms) == 1u);
    t.async_wait(log.handler(1));
    BOOST_TEST(service.invariants_hold());
    ctx.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
  BOOST_TEST(!log.of(1).ec);
  BOOST_TEST((log.of(1).at >= base + 5ms));
  BOOST_TEST(log.index_of(1) < log.index_of(100));
  BOOST_TEST(service.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(moving_a_lazily_extended_expiry_earlier_fires_at_the_earlier_time) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point base = clock_type::now();
  {
    tock::timer t(ctx.get_executor(), base + 5ms);
    t.async_wait(log.handler(0));
    t.expires_at(base + 40ms);  // later: the heap keeps the old key
    t.async_wait(log.handler(1));
    t.expires_at(base + 10ms);  // earlier than the expiry, later than the key
    t.async_wait(log.handler(2));
    BOOST_TEST(service.invariants_hold());
    tock::async_sleep_until(ctx, base + 20ms, log.handler(100));
    ctx.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
  BOOST_TEST(log.of(1).ec == aborted_ec);
  BOOST_TEST(!log.of(2).ec);
  BOOST_TEST((log.of(2).at >= base + 10ms));
  BOOST_TEST(log.index_of(2) < log.index_of(100));
  BOOST_TEST(log.size() == 4u);
}

BOOST_AUTO_TEST_CASE(invariants_hold_after_an_expiry_moves_earlier_without_a_new_wait) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  const time_point base = clock_type::now();
  {
    tock::timer t(ctx.get_executor(), base + 30ms);
    t.async_wait([](const error_code&) {});
    BOOST_TEST(service.invariants_hold());
    t.expires_at(base + 5ms);  // aborts the wait; no new wait yet
    BOOST_TEST(service.invariants_hold());
    t.expires_after(-1s);
    BOOST_TEST(service.invariants_hold());
  }
  ctx.run();
  BOOST_TEST(service.invariants_hold());
}

BOOST_AUTO_TEST_CASE(waits_on_one_timer_complete_oldest_first) {
  asio::io_context ctx;
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() + 5ms);
    for (int i = 0; i < 6; ++i) t.async_wait(log.handler(i));
    ctx.run();
  }
  BOOST_TEST(log.successes() == (std::vector<int>{0, 1, 2, 3, 4, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(equal_deadlines_complete_in_start_order) {
  asio::io_context ctx;
  completion_log log;
  const time_point deadline = clock_type::now() + 5ms;
  {
    tock::timer a(ctx.get_executor(), deadline), b(ctx.get_executor(), deadline), c(ctx.get_executor(), deadline);
    b.async_wait(log.handler(0));
    tock::async_sleep_until(ctx, deadline, log.handler(1));
    a.async_wait(log.handler(2));
    tock::async_sleep_until(ctx, deadline, log.handler(3));
    c.async_wait(log.handler(4));
    ctx.run();
  }
  BOOST_TEST(log.successes() == (std::vector<int>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(equal_deadlines_complete_in_start_order_when_timers_hold_several_waits) {
  asio::io_context ctx;
  completion_log log;
  const time_point deadline = clock_type::now() + 5ms;
  {
    tock::timer a(ctx.get_executor(), deadline), b(ctx.get_executor(), deadline);
    a.async_wait(log.handler(0));
    b.async_wait(log.handler(1));
    tock::async_sleep_until(ctx, deadline, log.handler(2));
    a.async_wait(log.handler(3));
    b.async_wait(log.handler(4));
    ctx.run();
  }
  BOOST_TEST(log.successes() == (std::vector<int>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(cancel_one_aborts_only_the_oldest_wait) {
  asio::io_context ctx;
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() + 2ms);
    tock::timer idle(ctx);
    BOOST_TEST(idle.cancel_one() == 0u);
    for (int i = 0; i < 3; ++i) t.async_wait(log.handler(i));
    BOOST_TEST(t.cancel_one() == 1u);
    ctx.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
  BOOST_TEST(!log.of(1).ec);
  BOOST_TEST(!log.of(2).ec);
}

BOOST_AUTO_TEST_CASE(a_moved_timer_keeps_its_expiry_and_waits) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point deadline = clock_type::now() + 10ms;
  {
    tock::timer source(ctx.get_executor(), deadline);
    source.async_wait(log.handler(0));
    source.async_wait(log.handler(1));
    tock::timer moved(std::move(source));
    BOOST_TEST((moved.expiry() == deadline));
    BOOST_TEST(service.pending() == 2u);
    BOOST_TEST(service.invariants_hold());
    auto heap_copy = std::make_unique<tock::timer>(std::move(moved));
    BOOST_TEST(service.invariants_hold());
    ctx.run();
  }
  BOOST_TEST(!log.of(0).ec);
  BOOST_TEST(!log.of(1).ec);
  BOOST_TEST((log.of(0).at >= deadline));
  BOOST_TEST(log.index_of(0) < log.index_of(1));
}

BOOST_AUTO_TEST_CASE(move_assignment_aborts_the_targets_waits_and_takes_the_sources) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  const time_point base = clock_type::now();
  {
    tock::timer target(ctx.get_executor(), base + 5ms);
    tock::timer source(ctx.get_executor(), base + 10ms);
    target.async_wait(log.handler(0));
    source.async_wait(log.handler(1));
    source.async_wait(log.handler(2));
    target = std::move(source);
    BOOST_TEST((target.expiry() == base + 10ms));
    BOOST_TEST(service.pending() == 2u);
    BOOST_TEST(service.invariants_hold());
    ctx.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
  BOOST_TEST(!log.of(1).ec);
  BOOST_TEST(!log.of(2).ec);
  BOOST_TEST((log.of(1).at >= base + 10ms));
}

BOOST_AUTO_TEST_CASE(a_cancellation_slot_aborts_only_its_own_wait) {
  asio::io_context ctx;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  asio::cancellation_signal wait_signal, sleep_signal;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() + 5ms);
    t.async_wait(log.handler(0));
    t.async_wait(asio::bind_cancellation_slot(wait_signal.slot(), log.handler(1)));
    t.async_wait(log.handler(2));
    tock::async_sleep_for(ctx, 5ms, asio::bind_cancellation_slot(sleep_signal.slot(), log.handler(3)));
    tock::async_sleep_for(ctx, 5ms, log.handler(4));
    wait_signal.emit(asio::cancellation_type::terminal);
    sleep_signal.emit(asio::cancellation_type::partial);
    BOOST_TEST(service.pending() == 3u);
    BOOST_TEST(service.invariants_hold());
    ctx.run();
    // Emitting once the waits are over does nothing.
    wait_signal.emit(asio::cancellation_type::terminal);
    sleep_signal.emit(asio::cancellation_type::terminal);
  }
  BOOST_TEST(!log.of(0).ec);
  BOOST_TEST(log.of(1).ec == aborted_ec);
  BOOST_TEST(!log.of(2).ec);
  BOOST_TEST(log.of(3).ec == aborted_ec);
  BOOST_TEST(!log.of(4).ec);
  BOOST_TEST(log.size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_fired_wait_runs_with_success_on_a_foreign_executor) {
  asio::io_context ctx, other;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() - 1ms);
    t.async_wait(asio::bind_executor(other.get_executor(), log.handler(0)));
    ctx.run();  // fires the wait; its handler is queued on `other`
    BOOST_TEST(service.pending() == 0u);
    BOOST_TEST(log.size() == 0u);
    other.run();
  }
  BOOST_TEST(!log.of(0).ec);
}

BOOST_AUTO_TEST_CASE(cancel_aborts_a_wait_that_fired_but_has_not_run_on_its_executor) {
  asio::io_context ctx, other;
  auto& service = tock::timer_service::of(ctx.get_executor());
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() - 1ms);
    t.async_wait(asio::bind_executor(other.get_executor(), log.handler(0)));
    ctx.run();
    BOOST_TEST(service.pending() == 0u);
    BOOST_TEST(t.cancel() == 1u);
    BOOST_TEST(service.invariants_hold());
    other.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
}

BOOST_AUTO_TEST_CASE(expires_at_aborts_a_wait_that_fired_but_has_not_run_on_its_executor) {
  asio::io_context ctx, other;
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() - 1ms);
    t.async_wait(asio::bind_executor(other.get_executor(), log.handler(0)));
    ctx.run();
    BOOST_TEST(t.expires_after(1s) == 1u);
    other.run();
  }
  BOOST_TEST(log.of(0).ec == aborted_ec);
}

BOOST_AUTO_TEST_CASE(destroying_a_timer_aborts_a_wait_that_fired_but_has_not_run_on_its_executor) {
  asio::io_context ctx, other;
  completion_log log;
  {
    tock::timer t(ctx.get_executor(), clock_type::now() - 1ms);
    t.async_wait(asio::bind_executor(other.get_executor(), log.handler(0)));
    ctx.run();
  }
  other.run();
  BOOST_TEST(log.of(0).ec == aborted_ec);
}

BOOST_AUTO_TEST_SUITE_END()
