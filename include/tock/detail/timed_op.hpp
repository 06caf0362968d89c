// tock/detail/timed_op.hpp: an Asio operation tied to a deadline, which cancels it when it passes.
#ifndef TOCK_DETAIL_TIMED_OP_HPP
#define TOCK_DETAIL_TIMED_OP_HPP

#include <tock/config.hpp>
#include <tock/detail/deadline_link.hpp>
#include <tock/detail/service_core.hpp>
#include <tock/detail/timeout_outcome.hpp>
#include <tock/detail/wait_handlers.hpp>
#include <tock/detail/wait_op.hpp>
#include <tock/error.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tock::detail {

// One operation started with tock::timeout or a deadline's bind(). It is two things at once: the handler
// the operation completes (through timed_handler), and an entry of the timer service (a `Link`:
// a sleep_entry in the heap for tock::timeout, a wait_op in a deadline's ring for bind()). Whichever of
// the two ends first decides: the deadline emits a cancellation on the operation's slot, and the operation's
// operation_aborted is then reported as tock::error::timed_out; or the operation completes and takes the
// entry out of the service.
//
// The cancellation is emitted on the handler's executor, as Asio requires of cancellation signals: in place
// when that is the service's own io_context (the driver runs inside its run()), else dispatched to it.
//
// The entry is placed before the operation is initiated (a refused entry must not start it), so it can fire
// while the initiation still runs on another thread, before the operation has put its handler in our
// signal. Such an early cancellation is not emitted into the empty slot: it is left to the initiator, which
// sends it to the handler's executor once the initiation has returned (see cancel_now and initiated).
//
// The state lives until its references are gone: the entry's (held by the service, or by a deadline's link:
// deadline_link.hpp, rule 1), the operation's (until the user's slot is left) and the initiator's (until the
// initiation returns). Our handler in the user's slot is only taken out on the
// handler's executor: by complete(), or, for an operation dropped without completing, by a slot_leaver sent
// there (see abandon), so that the signal never finds this state gone.
template <typename Service, typename Handler, typename Executor, typename Link>
class timed_op : public Link {
 public:
  using handler_type = Handler;

  template <typename H>
  timed_op(H&& h, Service& service, const Executor& ex, bool on_service_context, asio::cancellation_type type)
      : Link(make_link()), handler_(std::forward<H>(h)), alloc_(handler_allocator(handler_)), service_(&service),
        executor_(ex), runs_in_context_(on_service_context && service.runs_in_context(ex)),
        on_service_context_(on_service_context), type_(type) {
    if (!runs_in_context_) left_core_ = service.core();  // see leave_service
    if constexpr (std::is_same_v<Link, wait_op>) {
      this->linkable = on_service_context && std::is_same_v<decltype(alloc_), op_allocator<void>>;  // link rule 7
      this->checked_at_run = !runs_in_context_;  // fired, it stays in its deadline's ring until settle(): rule 8
    }
    auto user_slot = asio::get_associated_cancellation_slot(handler_);
    if (user_slot.is_connected()) {
      user_slot_used_ = true;
      user_slot.template emplace<forward_cancellation>(this);  // sets user_slot_hooked_
    }
  }

  template <typename H>
  static timed_op* create(H&& h, Service& service, const Executor& ex, bool on_service_context,
                          asio::cancellation_type type) {
    return allocate_op<timed_op>(std::forward<H>(h), service, ex, on_service_context, type);
  }

  asio::cancellation_slot operation_slot() noexcept { return signal_.slot(); }
  const Handler& handler() const noexcept { return handler_; }

  // The operation completed: take the entry out of the service, then run the user's handler with its
  // operation_aborted turned into timed_out if the deadline caused it.
  template <typename... Args>
  void complete(Args&&... args) {
    done_.store(true, std::memory_order_release);
    const bool left = leave_service();  // then the entry's reference is ours too: both go in one step
    leave_user_slot();
    Handler handler(std::move(handler_));
    const bool timed_out = timed_out_.load(std::memory_order_acquire);
    retire_done();
    release(left ? 2 : 1);
    call(handler, timed_out, std::forward<Args>(args)...);
  }

  // The operation was destroyed without completing (its context shut down, or its initiation threw): the
  // handler is destroyed now. This may be any thread, so a handler that runs on another executor leaves the
  // user's slot there (slot_leaver, holding the operation's reference); in place if that cannot allocate.
  void abandon() noexcept {
    done_.store(true, std::memory_order_release);
    if (leave_service()) release();
    const asio::cancellation_slot user_slot = asio::get_associated_cancellation_slot(handler_);
    { [[maybe_unused]] Handler dropped(std::move(handler_)); }
    if (user_slot_used_ && !runs_in_context_) {
      // The leaver holds the operation's reference, and may end the operation there before dispatch returns.
      slot_leaver leaver(this, user_slot);
      const Executor ex(executor_);
      retire_done();
      try {
        asio::dispatch(ex, std::move(leaver));
        return;
      } catch (...) {
        if (!leaver.release()) return;  // Asio took it: it runs, or is destroyed, there
        leave_user_slot(user_slot);
      }
    } else {
      leave_user_slot(user_slot);
      retire_done();
    }
    release();
  }

  // Drops the entry's reference when the service would not take the entry.
  void unscheduled() noexcept { release(); }

  // The initiation returned (or threw): sends a cancellation that came while it ran to the handler's
  // executor (with the entry's reference, kept for it), then drops the initiator's reference, and lets go of
  // what a finished linked entry holds if its completion left that to it (retire_done).
  void initiated() noexcept {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    bool emitted = false;
    for (;;) {
      if ((s & cancelled_early) != 0 && !emitted) {
        emit_late();  // before `initiating` is cleared: the executor must not be retired meanwhile
        emitted = true;
        s = state_.load(std::memory_order_acquire);
        continue;
      }
      const bool retire_here = (s & finished) != 0;  // our reference is kept for it
      const std::uint32_t to = (s & ~(initiating | cancelled_early | finished)) - (retire_here ? 0 : 1);
      if (state_.compare_exchange_weak(s, to, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if ((s & finished) != 0) {
      retire();
      release();
    } else if ((s & refs_mask) == 1) {
      destroy();
    }
  }

  ~timed_op() {
    if (!retired_) retire();
  }

 private:
  // state_: the references, and flags for a cancellation that comes before the initiation returned.
  static constexpr std::uint32_t initiating = 1u << 30;       // the initiation has not returned
  static constexpr std::uint32_t cancelled_early = 1u << 29;  // the entry ended meanwhile: initiated() emits
  static constexpr std::uint32_t finished = 1u << 28;         // a linked entry completed meanwhile (retire_done)
  static constexpr std::uint32_t refs_mask = finished - 1;

  // A withdrawn linked entry stays in its deadline's link until the link's owner lets go of it
  // (deadline_link.hpp, rule 1), so what it holds of the operation goes as soon as the operation is done: the
  // handler (moved from) and the executor, which may hold work on a context (as Beast's composed operations'
  // does) or own part of a connection. Unless the initiation is still running, which may use the executor
  // (emit_late): initiated() retires them then. A claimed entry keeps them: its claimer (the driver, cancel())
  // dispatches the cancellation through the executor after the lock, maybe while the operation completes.
  void retire_done() noexcept {
    if constexpr (!std::is_same_v<Link, wait_op>)
      return;  // a sleep's: its last reference goes soon
    else if (link_state_of(*this).load(std::memory_order_acquire) != std::uint8_t(link_state::withdrawn))
      return;  // a ring's, or a claimed one: likewise
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if ((s & initiating) != 0) s = state_.fetch_or(finished, std::memory_order_acq_rel);
    if ((s & initiating) == 0) retire();
  }
  void retire() noexcept {
    handler_.~Handler();
    executor_.~Executor();
    retired_ = true;
  }

  // Our handler in the user's slot. Its destructor runs when the slot is cleared, when another handler
  // replaces it, or when the user's signal is destroyed, all on the signal's side (the handler's executor):
  // after that the slot (and the memory of a signal that may be gone) is never touched again. Once the
  // operation is done an emit forwards nothing.
  class forward_cancellation {
   public:
    explicit forward_cancellation(timed_op* self) noexcept : self_(self) { self_->user_slot_hooked_ = true; }
    ~forward_cancellation() { self_->user_slot_hooked_ = false; }
    forward_cancellation(const forward_cancellation&) = delete;
    forward_cancellation& operator=(const forward_cancellation&) = delete;
    void operator()(asio::cancellation_type type) {
      if (!self_->done_.load(std::memory_order_acquire) && self_->context_alive()) self_->signal_.emit(type);
    }

   private:
    timed_op* self_;
  };

  void leave_user_slot() noexcept { leave_user_slot(asio::get_associated_cancellation_slot(handler_)); }
  void leave_user_slot(asio::cancellation_slot slot) noexcept {
    if (user_slot_hooked_) slot.clear();
  }

  // Leaves the user's slot on the handler's executor for an operation dropped without completing; holds the
  // operation's reference until then (destroyed unrun, its executor shut down: there too).
  class slot_leaver {
   public:
    slot_leaver(timed_op* self, asio::cancellation_slot slot) noexcept : self_(self), slot_(slot) {}
    slot_leaver(slot_leaver&& other) noexcept : self_(std::exchange(other.self_, nullptr)), slot_(other.slot_) {}
    slot_leaver& operator=(slot_leaver&&) = delete;
    ~slot_leaver() { (*this)(); }
    bool release() noexcept { return std::exchange(self_, nullptr) != nullptr; }
    void operator()() noexcept {
      if (timed_op* self = std::exchange(self_, nullptr)) {
        self->leave_user_slot(slot_);
        self->release();
      }
    }

   private:
    timed_op* self_;
    asio::cancellation_slot slot_;
  };

  // Runs the cancellation on the handler's executor; holds the entry's reference until it has run. Sent by a
  // fire (`fired`), it first settles the entry, which waited in its deadline's ring meanwhile (settle()).
  class cancel_runner {
   public:
    cancel_runner(timed_op* self, bool timed_out, bool late = false, bool fired = false) noexcept
        : self_(self), timed_out_(timed_out), late_(late), fired_(fired) {}
    cancel_runner(cancel_runner&& other) noexcept
        : self_(std::exchange(other.self_, nullptr)), timed_out_(other.timed_out_), late_(other.late_),
          fired_(other.fired_) {}
    cancel_runner& operator=(cancel_runner&&) = delete;
    bool release() noexcept { return std::exchange(self_, nullptr) != nullptr; }
    ~cancel_runner() {
      if (self_ != nullptr && !dispatching::give_back(self_)) {
        if (fired_) self_->settle();
        self_->release();
      }
    }
    void operator()() {
      timed_op* self = std::exchange(self_, nullptr);
      if ((fired_ && !self->settle()) || self->cancel_now(timed_out_, late_)) self->release();
    }

   private:
    timed_op* self_;
    bool timed_out_;
    bool late_;   // sent by initiated() itself: the initiation has returned
    bool fired_;  // sent by a fire of an entry that checked_at_run
  };

  // A fired entry whose cancellation runs on a foreign executor waited in its deadline's ring (deadline_link.hpp,
  // rule 8); it leaves it here, under the lock. False if its deadline went away meanwhile (destroyed or assigned
  // over) and the operation is on the deadline's context: as for a deadline that goes away before it fires, the
  // operation goes on without a limit, and nothing is emitted into a slot whose I/O object may have gone with the
  // deadline (a connection's socket and deadline, destroyed on that executor). An operation on another context
  // still gets it: its I/O object does not go with the deadline's context.
  bool settle() noexcept {
    if constexpr (std::is_same_v<Link, wait_op>) {
      if (left_core_->settle_fired(*this) || !on_service_context_) return true;
      return link_state_of(*this).load(std::memory_order_relaxed) != std::uint8_t(link_state::detached);
    } else {
      return true;  // a sleep's entry leaves the heap when it fires
    }
  }
  bool settles_at_run() const noexcept {
    if constexpr (std::is_same_v<Link, wait_op>)
      return this->checked_at_run;
    else
      return false;
  }

  static Link make_link() noexcept {
    if constexpr (std::is_same_v<Link, sleep_entry>)
      return sleep_entry(&on_sleep_entry);
    else
      return wait_op{&on_wait_entry, nullptr, false, true};
  }

  static bool unlink(Service& s, sleep_entry& entry) { return s.unschedule(entry); }
  [[gnu::always_inline]] static bool unlink(Service& s, wait_op& entry) {
    return linked(entry) ? s.withdraw(entry) : s.detach(entry);
  }

  // Takes the entry out of its service if it is still there; true if the entry's reference is then ours (a
  // linked entry's stays with its link: deadline_link.hpp). A handler that runs on the service's own context
  // completes inside its run(), so the service lives; one that runs elsewhere may complete while that context
  // is destroyed on another thread, and leaves through the core it holds (left_core_, from the start). Inlined,
  // as attach() is, for the same reason (impl/timer_service.hpp).
  [[gnu::always_inline]] bool leave_service() {
    Service* s = service_.load(std::memory_order_acquire);
    if (s == nullptr) return false;
    const bool taken = runs_in_context_ ? unlink(*s, *this) : left_core_->leave(static_cast<Link&>(*this));
    if constexpr (std::is_same_v<Link, wait_op>) {
      if (linked(*this)) return false;
    }
    return taken;
  }

  static void on_sleep_entry(sleep_entry* b, service_core& core, op_action a, const error_code& ec) {
    static_cast<timed_op*>(b)->on_entry(core, a, ec);
  }
  static void on_wait_entry(wait_op* b, service_core& core, op_action a, const error_code& ec) {
    static_cast<timed_op*>(b)->on_entry(core, a, ec);
  }

  // Whether the operation's context (its I/O object's) still lives. Asio's cancellation handlers call into
  // their service: emitted after that context is gone, they read freed memory (Asio's own steady_timer does:
  // shared/repro/r1_asio_control.cpp). So once the entry has left the service (dropped at shutdown, or fired:
  // the core it fired from then says whether its service lives), nothing is emitted into the slot of an
  // operation on the service's context after that context is gone, whether by the deadline or forwarded from
  // the user's slot. An operation on another context (a deadline's bound one) does not go with the service's:
  // its own context's shutdown destroys it, which ends it (abandon), so it is still cancelled.
  bool context_alive() const noexcept {
    if (!on_service_context_) return true;
    if (context_gone_.load(std::memory_order_acquire)) return false;
    return !left_.load(std::memory_order_acquire) || left_core_->serving();
  }

  // The entry fired (invoke: the deadline passed; or deliver without an error: it fired, and was queued
  // again because its cancellation could not be dispatched), was aborted (deliver with operation_aborted: the
  // deadline's cancel(), on the cancelling thread once the service has let go of its lock), was detached (its
  // deadline destroyed or assigned over), or is dropped at shutdown (destroy, discard).
  //
  // Why an abort is not queued and a detach emits nothing: an emit into the operation's slot reaches its I/O
  // object's cancellation handler, which reads the I/O object (a socket's reads its reactor data), so it must
  // come while that object exists. A server that destroys a connection destroys its socket and its deadline in
  // either order, in one go: an emit queued behind the deadline's destruction would find the socket gone, and
  // one made in place would find it gone when the socket went first. So a deadline that goes away lets its
  // operations go on without it (the socket's own destruction aborts them), and cancel(), which the user calls
  // as a socket's cancel(), cancels them before it returns when the caller is on the handler's executor (else
  // it is dispatched there). A fire runs inside the context's run() and emits in place. The service hooks
  // nothing into a slot for an entry: nothing to unhook. A dispatch that throws before taking the cancellation
  // keeps the entry for its caller to queue again.
  void on_entry(service_core& core, op_action a, const error_code& ec) {
    if (a == op_action::hooked || a == op_action::unhooked) return;
    if (a == op_action::unlink) return release();  // a link let go of it: the entry's reference
    service_.store(nullptr, std::memory_order_release);
    if (a == op_action::destroy || a == op_action::discard || a == op_action::shutdown) {
      context_gone_.store(true, std::memory_order_release);
      release();
      return;
    }
    if (runs_in_context_) left_core_ = core.shared_from_this();  // else held from the start
    left_.store(true, std::memory_order_release);
    if (a == op_action::detach) return release();  // its deadline is gone: no limit, nothing emitted
    const bool timed_out = a == op_action::invoke || !ec;
    if (runs_in_context_ && a == op_action::invoke) {
      if (cancel_now(timed_out)) release();
      return;
    }
    cancel_runner runner(this, timed_out, false, a == op_action::invoke && settles_at_run());
    dispatching guard(this);
    try {
      asio::dispatch(executor_, std::move(runner));
    } catch (...) {
      if (runner.release() || guard.given_back()) completion_kept = true;
      throw;
    }
  }

  // On the handler's executor, with the entry's reference: emits the cancellation unless the operation is
  // done. Returns false if the initiation is still running: the reference is then the initiator's, which
  // emits (initiated(), which sends it `late`).
  bool cancel_now(bool timed_out, bool late = false) {
    if (done_.load(std::memory_order_acquire) || !context_alive()) return true;
    if (timed_out) timed_out_.store(true, std::memory_order_release);
    std::uint32_t s = state_.load(std::memory_order_acquire);
    while (!late && (s & initiating) != 0)
      if (state_.compare_exchange_weak(s, s | cancelled_early, std::memory_order_acq_rel)) return false;
    signal_.emit(timed_out ? type_ : asio::cancellation_type::terminal);
    return true;
  }

  // The cancellation that came while the initiation ran, sent to the handler's executor (in place if this
  // thread runs it). Should that not allocate, it is emitted here, the one way left not to lose it.
  void emit_late() noexcept {
    cancel_runner runner(this, timed_out_.load(std::memory_order_acquire), true);
    dispatching guard(this);
    try {
      asio::dispatch(executor_, std::move(runner));
    } catch (...) {
      if (runner.release() || guard.given_back()) {
        if (!done_.load(std::memory_order_acquire))
          signal_.emit(timed_out_.load(std::memory_order_acquire) ? type_ : asio::cancellation_type::terminal);
        release();
      }
    }
  }

  void release(std::uint32_t refs = 1) noexcept {
    if ((state_.fetch_sub(refs, std::memory_order_acq_rel) & refs_mask) == refs) destroy();
  }

  void destroy() noexcept {
    auto alloc = alloc_;
    op_allocator_t<timed_op, Handler> op_alloc(alloc);
    this->~timed_op();
    std::allocator_traits<decltype(op_alloc)>::deallocate(op_alloc, this, 1);
  }

  // The operation's error_code or exception_ptr comes first, or first in a tuple (asio::as_tuple applied
  // outside); timed_async_result (timed_token.hpp) admits no other operation.
  template <typename H, typename First, typename... Rest>
  static void call(H& h, bool timed_out, First&& first, Rest&&... rest) {
    using first_type = std::decay_t<First>;
    if constexpr (is_tuple_v<first_type>) {
      first_type values(std::forward<First>(first));
      if (timed_out) translate_timeout(std::get<0>(values));
      std::move(h)(std::move(values), std::forward<Rest>(rest)...);
    } else {
      first_type outcome(std::forward<First>(first));
      if (timed_out) translate_timeout(outcome);
      std::move(h)(std::move(outcome), std::forward<Rest>(rest)...);
    }
  }

  union {  // until retired, or destroyed with the rest
    Handler handler_;
  };
  decltype(handler_allocator(std::declval<const Handler&>())) alloc_;
  asio::cancellation_signal signal_;
  // Null once the entry left the service (fired, aborted, dropped at shutdown): the operation may complete,
  // or be destroyed, on another context after the service's own context is gone.
  std::atomic<Service*> service_;
  union {
    Executor executor_;
  };
  bool retired_ = false;  // handler_ and executor_ are gone (retire_done)
  // The handler runs on the service's own context, and so does the operation (timed_initiation): the driver
  // then runs on the handler's executor, and the operation is dropped unrun only where nothing can run that
  // executor (its context's shutdown) or on the thread that started it, so abandon() leaves the slot in place.
  bool runs_in_context_;
  bool on_service_context_;        // the operation's I/O object is on the service's context (context_alive)
  bool user_slot_used_ = false;    // the handler had a slot: forward_cancellation went into it
  bool user_slot_hooked_ = false;  // forward_cancellation is in the user's slot (its executor's side only)
  asio::cancellation_type type_;
  std::atomic<bool> done_{false};
  std::atomic<bool> timed_out_{false};
  std::atomic<bool> context_gone_{false};       // the entry was dropped with its context (see context_alive)
  std::atomic<bool> left_{false};               // the entry fired or was aborted: left_core_ is set
  // The core it left, written once before left_; from the start for a handler on a foreign executor.
  std::shared_ptr<service_core> left_core_;
  std::atomic<std::uint32_t> state_{initiating | 3};  // the entry's, the operation's, the initiator's references
};

}  // namespace tock::detail

#endif
