// The bodies of service_core (tock/detail/service_core.hpp), compiled once here rather than in every user's
// translation unit: nothing in them depends on the clock or on a user's handler.
#include <tock/detail/service_core.hpp>

#include <exception>

namespace tock::detail {

bool runs_on_one_thread(asio::io_context& ctx) {
#if TOCK_ASIO_VERSION >= 103300  // Asio's configuration service holds the hint
  return asio::config(ctx).get("scheduler", "concurrency_hint", 0) == 1;
#elif defined(TOCK_STANDALONE_ASIO) && !defined(ASIO_HAS_IOCP)
  const int hint = asio::use_service<asio::detail::io_context_impl>(ctx).concurrency_hint();
  return hint == 1 || !ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
         !ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint);
#elif !defined(TOCK_STANDALONE_ASIO) && !defined(BOOST_ASIO_HAS_IOCP)
  const int hint = asio::use_service<asio::detail::io_context_impl>(ctx).concurrency_hint();
  return hint == 1 || !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
         !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint);
#else
  (void)ctx;
  return false;  // not known: as if several threads ran it
#endif
}

// Runs (or, when the context shuts down with it queued, destroys) the completions queued before it started.
// Its memory is the core's block, which the core (held by the drain) outlives.
class service_core::drain {
 public:
  using allocator_type = block_pool::allocator<void>;

  explicit drain(std::shared_ptr<service_core> core) noexcept : core_(std::move(core)) {}
  drain(drain&&) noexcept = default;
  drain& operator=(drain&&) = delete;
  ~drain() {
    if (core_) core_->run(core_->take(), false);
  }
  allocator_type get_allocator() const noexcept { return allocator_type(core_->drain_memory_); }
  void operator()() {
    auto core = std::move(core_);
    if (core->one_thread_)
      core->run(core->take(), true);
    else
      core->run_shared();
  }

 private:
  std::shared_ptr<service_core> core_;
};

service_core::service_core(asio::io_context& ctx) : ctx_(ctx), one_thread_(runs_on_one_thread(ctx)) {
  drain_memory_.reserve(1);
}

service_core::~service_core() { run(deferred_.take_all(), false); }

void service_core::set_owner(op_canceller* owner) noexcept {
  std::lock_guard<futex_mutex> lock(mutex_);
  owner_ = owner;
  serving_.store(owner != nullptr, std::memory_order_release);
}

bool service_core::settle_fired(wait_op& op) {
  std::lock_guard<futex_mutex> lock(mutex_);
  return settle_fired_locked(op);
}

void service_core::run_now(deferred_queue::batch b, bool detach) noexcept {
  if (!detach) {
    try {
      run(b, true);
    } catch (...) {  // run() queued what is left under a drain: nothing is lost
    }
    return;
  }
  for (deferred_queue::link l = b.first; l != 0;) {
    const deferred_queue::link next = deferred_queue::next_of(l, b);
    auto* op = static_cast<wait_op*>(deferred_queue::address(l));
    // Its `next` keeps the queue's link: a detach() racing with this finds it taken already.
    op->complete(op, *this, op_action::detach, error_code());
    l = next;
  }
}

void service_core::post_drain() { asio::post(ctx_.get_executor(), drain{shared_from_this()}); }

void service_core::requeue_fired(wait_op& op) noexcept {
  queue_and_post([&] {
    const bool fired = !op.checked_at_run || settle_fired_locked(op);
    deferred_.push_back(op, fired ? deferred::fired : deferred::aborted);
  });
}

void service_core::requeue_fired(sleep_entry& op) noexcept {
  queue_and_post([&] { deferred_.push_back(op, deferred::fired); });
}

bool service_core::settle_fired_locked(wait_op& op) noexcept {
  if (op.next == nullptr) {  // cancelled since it fired: it completes as aborted after all
    --stats_.fired;
    ++stats_.aborted;
    return false;
  }
  wait_op** link = nullptr;
  wait_ring& ring = wait_ring::ring_of(op, link);
  wait_ring::unlink(link, op);
  --ring.due;
  return true;
}

service_core::batch service_core::take() noexcept {
  std::lock_guard<futex_mutex> lock(mutex_);
  drain_posted_ = false;
  return deferred_.take_all();
}

// If a completion throws, the rest (and the one that threw, if it was kept) go back to the front of the queue
// under a new drain, and the exception leaves run().
void service_core::run(batch b, bool deliver) {
  deferred_queue::link l = b.first;
  while (l != 0) {
    const deferred_queue::link next = deferred_queue::next_of(l, b);
    completion_kept = false;
    try {
      complete(l, deliver);
    } catch (...) {
      requeue({completion_kept ? l : next, b.last});
      completion_kept = false;
      throw;
    }
    l = next;
  }
}

// A drain on a context that several threads may run: the completions queued when it starts, or as many, one
// per lock (others may take some: a drain it posted, or one posted for later ones), each after posting a drain
// for the rest unless one is posted. If a completion throws, it goes back to the front if it was kept, a drain
// is posted for what is queued, and the exception leaves run().
void service_core::run_shared() {
  std::unique_lock<futex_mutex> lock(mutex_);
  drain_posted_ = false;
  for (std::size_t budget = deferred_.size(); budget > 0; --budget) {
    const deferred_queue::link l = deferred_.pop_front();
    if (l == 0) break;
    const bool post = !deferred_.empty() && !std::exchange(drain_posted_, true);
    lock.unlock();
    if (post) post_drain();
    completion_kept = false;
    try {
      complete(l, true);
    } catch (...) {
      const deferred_queue::link kept = completion_kept ? l : 0;
      completion_kept = false;
      bool post_rest;
      {
        std::lock_guard<futex_mutex> relock(mutex_);
        deferred_.push_front({kept, kept});
        post_rest = !deferred_.empty() && !std::exchange(drain_posted_, true);
      }
      if (post_rest) post_drain();
      throw;
    }
    lock.lock();
  }
}

void service_core::requeue(const batch& rest) noexcept {
  if (rest.first != 0) queue_and_post([&] { deferred_.push_front(rest); });
}

// Queues completions (`queue` runs under the lock), then posts a drain unless one is pending.
template <typename Queue>
void service_core::queue_and_post(Queue&& queue) noexcept {
  bool post;
  {
    std::lock_guard<futex_mutex> lock(mutex_);
    queue();
    post = !std::exchange(drain_posted_, true);
  }
  if (post) post_drain();
}

void service_core::complete(deferred_queue::link l, bool deliver) {
  const error_code ec = error_of(deferred_queue::how(l));
  const op_action a = deliver ? op_action::deliver : op_action::discard;
  if (deferred_queue::is_sleep(l)) {
    auto* op = static_cast<sleep_entry*>(deferred_queue::address(l));
    op->complete(op, *this, a, ec);
  } else {
    auto* op = static_cast<wait_op*>(deferred_queue::address(l));
    op->complete(op, *this, a, ec);
  }
}

}  // namespace tock::detail
