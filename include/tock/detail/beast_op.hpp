// tock/detail/beast_op.hpp: the handler every asynchronous operation of tock::beast::basic_stream completes,
// and the continuation of an operation that waited for its rate limit.
#ifndef TOCK_DETAIL_BEAST_OP_HPP
#define TOCK_DETAIL_BEAST_OP_HPP

#include <tock/config.hpp>
#include <tock/error.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tock::detail {

// Which directions of the stream an operation occupies: a connect counts as both (as in Beast).
enum class beast_dirs : unsigned char { read = 1, write = 2, connect = 3 };

// Whether a buffer sequence is empty, stopping at its first non-empty buffer: Beast's serializer hands a
// response over as one view of many pieces, whose full walk (buffer_bytes) costs more than the rest of a
// transfer's own work.
template <typename Buffers>
bool holds_no_bytes(const Buffers& buffers) {
  for (auto it = asio::buffer_sequence_begin(buffers), end = asio::buffer_sequence_end(buffers); it != end; ++it)
    if (asio::const_buffer(*it).size() != 0) return false;
  return true;
}

// The stream's view of an operation it started: the stream it belongs to, null once that stream is gone, and
// the slot the socket's operation hooked its canceller into (the bound operation's, where the deadline's and
// the user's cancellations arrive). The stream keeps a pointer to its pending operation of each direction
// (Stream::ops_); its destructor clears `owner`, and clears `io_slot` before the socket goes: the socket's
// canceller reads the socket, and a cancellation may still come after the stream (a cancel() dispatched from
// another thread, an expiry queued on a strand). A move of the stream re-points `owner`.
template <typename Stream>
struct beast_op_link {
  Stream* owner = nullptr;
  mutable asio::cancellation_slot io_slot;  // set once in the bound operation (see beast_op::hook_io)
};

// The user's handler, wrapped so that the stream can find it, and find out at completion whether the
// stream still exists (it is destroyed with operations pending: they complete with operation_aborted, from
// the socket's destruction, and touch nothing of it). Where it lives: inside the deadline's bound operation
// (deadline.bind(beast_op)), a heap object that stays put while the operation is pending; the only moves
// are during the initiation (on the starting thread) and the one out of that object when it completes (on
// the handler's executor, where the stream is used): every move re-links the stream to the new address.
// Completes once: operator() unlinks, lets the stream apply its timeout and rate rules, then calls the user.
template <typename Stream, typename Handler, beast_dirs Dirs>
class beast_op : public beast_op_link<Stream> {
 public:
  using handler_type = Handler;

  template <typename H>
  beast_op(Stream& s, H&& h, bool empty_buffers) : handler_(std::forward<H>(h)), empty_(empty_buffers) {
    this->owner = &s;
    link();
  }
  beast_op(beast_op&& other) : handler_(std::move(other.handler_)), empty_(other.empty_) {
    this->owner = std::exchange(other.owner, nullptr);
    this->io_slot = other.io_slot;
    link();
  }
  beast_op& operator=(beast_op&&) = delete;
  ~beast_op() { unlink(); }

  // The stream, or null if it is gone. (The rate continuation asks, through the bound operation.)
  Stream* stream() const noexcept { return this->owner; }
  const Handler& handler() const noexcept { return handler_; }

  // Records where the socket's operation, started with `bound` (the deadline's bound handler, whose
  // user_handler() is *this), hooks its canceller, for the stream's destructor. Called once *this is in the
  // bound operation, just before the socket's operation starts.
  template <typename Bound>
  static Bound&& hook_io(Bound&& bound) noexcept {
    bound.user_handler().io_slot = asio::get_associated_cancellation_slot(bound);
    return std::forward<Bound>(bound);
  }

  template <typename... Args>
  void operator()(error_code ec, Args&&... args) {
    if (Stream* s = this->owner) {
      unlink();
      this->owner = nullptr;
      if constexpr (Dirs == beast_dirs::connect)
        s->on_connect_done(ec);
      else
        s->template on_transfer_done<Dirs == beast_dirs::read>(empty_, ec, args...);
    } else if (ec == tock::error::timed_out) {  // the stream went after its expiry passed: Beast's code all the same
      ec = boost::beast::error::timeout;
    }
    std::move(handler_)(ec, std::forward<Args>(args)...);
  }

 private:
  static constexpr bool reads = (static_cast<unsigned>(Dirs) & 1u) != 0;
  static constexpr bool writes = (static_cast<unsigned>(Dirs) & 2u) != 0;

  void link() noexcept {
    if (this->owner == nullptr) return;
    if constexpr (reads) this->owner->ops_[0] = this;
    if constexpr (writes) this->owner->ops_[1] = this;
  }
  void unlink() noexcept {
    if (this->owner == nullptr) return;
    if (reads && this->owner->ops_[0] == this) this->owner->ops_[0] = nullptr;
    if (writes && this->owner->ops_[1] == this) this->owner->ops_[1] = nullptr;
  }

  Handler handler_;
  bool empty_;  // a transfer of no bytes: Beast applies its timeout after the fact
};

// An operation that waited for its rate limit: holds the deadline's bound handler (`Bound`, whose
// user_handler() is the beast_op) and the buffers, then starts the transfer with what the slice allows. A
// wait that fails (cancel(), close(), the deadline's or the user's cancellation, the stream destroyed)
// completes the operation with that error.
template <typename Stream, bool Read, typename Buffers, typename Bound>
class beast_rate_wait {
 public:
  beast_rate_wait(Bound&& bound, const Buffers& buffers) : bound_(std::move(bound)), buffers_(buffers) {}

  const Bound& bound() const noexcept { return bound_; }

  void operator()(error_code ec) {
    Stream* s = bound_.user_handler().stream();
    if (ec || s == nullptr) {
      if (s != nullptr) s->rate_.wait_aborted();
      std::move(bound_)(ec ? ec : error_code(asio::error::operation_aborted), std::size_t(0));
      return;
    }
    s->template start_io<Read>(s->rate_.after_wait(Read), buffers_, std::move(bound_));
  }

 private:
  Bound bound_;
  Buffers buffers_;
};

}  // namespace tock::detail

// Both forward the user's associations (executor, allocator, cancellation slot...): beast_op to the user's
// handler, beast_rate_wait to the bound handler (whose slot is the deadline's, chained to the user's).
namespace TOCK_ASIO_NAMESPACE {

template <template <typename, typename> class Associator, typename Stream, typename Handler,
          tock::detail::beast_dirs Dirs, typename DefaultCandidate>
struct associator<Associator, tock::detail::beast_op<Stream, Handler, Dirs>, DefaultCandidate> {
  using type = typename Associator<Handler, DefaultCandidate>::type;
  static type get(const tock::detail::beast_op<Stream, Handler, Dirs>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler());
  }
  static auto get(const tock::detail::beast_op<Stream, Handler, Dirs>& h, const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler(), c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler(), c);
  }
};

template <template <typename, typename> class Associator, typename Stream, bool Read, typename Buffers, typename Bound,
          typename DefaultCandidate>
struct associator<Associator, tock::detail::beast_rate_wait<Stream, Read, Buffers, Bound>, DefaultCandidate> {
  using type = typename Associator<Bound, DefaultCandidate>::type;
  static type get(const tock::detail::beast_rate_wait<Stream, Read, Buffers, Bound>& h) noexcept {
    return Associator<Bound, DefaultCandidate>::get(h.bound());
  }
  static auto get(const tock::detail::beast_rate_wait<Stream, Read, Buffers, Bound>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Bound, DefaultCandidate>::get(h.bound(), c)) {
    return Associator<Bound, DefaultCandidate>::get(h.bound(), c);
  }
};

}  // namespace TOCK_ASIO_NAMESPACE

#endif
