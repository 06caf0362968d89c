// tock/beast.hpp: tock::beast::basic_stream and tcp_stream, drop-ins for Beast's, with tock's deadlines.
// Not part of <tock/tock.hpp>: only this header needs Boost.Beast.
#ifndef TOCK_BEAST_HPP
#define TOCK_BEAST_HPP

#include <tock/config.hpp>

#if defined(TOCK_STANDALONE_ASIO)
#error "tock/beast.hpp needs Boost.Beast, which is built on Boost.Asio: configure tock with TOCK_ASIO=boost"
#endif

#include <tock/deadline.hpp>
#include <tock/detail/beast_initiate.hpp>
#include <tock/detail/beast_op.hpp>
#include <tock/detail/beast_rate.hpp>
#include <tock/error.hpp>

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/rate_policy.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace boost::asio::ssl {
template <typename>
class stream;
}  // namespace boost::asio::ssl

/// Beast's timed stream on tock (<tock/beast.hpp>).
namespace tock::beast {

/// A drop-in for boost::beast::basic_stream (Boost 1.81): a stream socket with a timeout per direction and a
/// rate limit, whose timeouts are tock deadlines (one per direction, in the stream: no Asio timer, no shared
/// heap object) instead of three Asio timers in a shared_ptr. Same API and behaviour: expires_after() applies
/// to the next operations of each direction that has none pending; when it passes, the pending operation of
/// that direction completes with boost::beast::error::timeout, the socket is closed (the other direction's
/// operation completes with operation_aborted), and an operation started after it passed times out at once.
/// Synchronous calls have no timeout. One pending operation per direction (a connect counts as both), as
/// Beast. Destroying the stream closes the socket: pending operations complete with operation_aborted.
/// Do not move a stream with operations pending: Asio's per-operation cancellation, which times them out,
/// does not follow a moved socket (Beast's timeouts are lost in that case).
/// As Beast's, the asynchronous members declare their results (the token's, as async_initiate gives it), so
/// that naming a call in decltype builds no operation; and an explicit instantiation compiles with any
/// RatePolicy Beast takes: only the operations that call the policy need its members.
/// See docs/design.md ("Beast's stream") for the flow.
///
/// Thread safety: distinct objects: safe. Shared objects: unsafe; as Beast's, all its operations must run
/// in one implicit or explicit strand, the stream's or the handlers' (docs/design.md, "Threads").
template <typename Protocol, typename Executor = asio::any_io_executor,
          typename RatePolicy = boost::beast::unlimited_rate_policy>
class basic_stream {
  using deadline_type =
      basic_deadline<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Executor>;
  using rate_type = detail::beast_rate<RatePolicy, Executor>;
  // The asynchronous members declare their results as Asio's own do (with async_initiate's), so that naming
  // one in an unevaluated operand builds no operation (Beast's tests do, with operations that would not build).
  using initiate = detail::beast_initiate<basic_stream>;
  using initiate_connect = typename initiate::connect;
  template <bool Read>
  using initiate_transfer = typename initiate::template transfer<Read>;

 public:
  ///@{
  /// The socket, its executor (the default one of handlers without their own), protocol and endpoint.
  using socket_type = asio::basic_stream_socket<Protocol, Executor>;
  using executor_type = boost::beast::executor_type<socket_type>;
  using protocol_type = Protocol;
  using endpoint_type = typename Protocol::endpoint;
  ///@}

  /// The stream type on another executor.
  template <typename Executor1>
  struct rebind_executor {
    /// The stream on `Executor1`.
    using other = basic_stream<Protocol, Executor1, RatePolicy>;
  };

  /// A stream whose socket is constructed from `args` (an executor or context, and what the socket takes;
  /// or a socket_type to move from), with no timeout and a default RatePolicy. O(1) after the context's first
  /// timer service use.
  template <typename Arg0, typename... Args, std::enable_if_t<!std::is_constructible_v<RatePolicy, Arg0>, int> = 0>
  explicit basic_stream(Arg0&& arg0, Args&&... args)
      : socket_(std::forward<Arg0>(arg0), std::forward<Args>(args)...), read_deadline_(socket_.get_executor()),
        write_deadline_(socket_.get_executor()), rate_(socket_.get_executor()) {}

  /// The same with the rate policy `policy` (decay-copied).
  template <typename RatePolicy_, typename Arg0, typename... Args,
            std::enable_if_t<std::is_constructible_v<RatePolicy, RatePolicy_>, int> = 0>
  basic_stream(RatePolicy_&& policy, Arg0&& arg0, Args&&... args)
      : socket_(std::forward<Arg0>(arg0), std::forward<Args>(args)...), read_deadline_(socket_.get_executor()),
        write_deadline_(socket_.get_executor()), rate_(std::forward<RatePolicy_>(policy), socket_.get_executor()) {}

  /// Takes over `other`'s socket, expiries and rate state; `other` must have no operation pending (see the
  /// class). `other` is left as if newly constructed on its executor: no socket open, no timeout. O(1).
  basic_stream(basic_stream&& other)
      : socket_(std::move(other.socket_)), read_deadline_(std::move(other.read_deadline_)),
        write_deadline_(std::move(other.write_deadline_)), rate_(std::move(other.rate_)),
        ops_{std::exchange(other.ops_[0], nullptr), std::exchange(other.ops_[1], nullptr)} {
    assert(ops_[0] == nullptr && ops_[1] == nullptr && "tock::beast: a stream moved with operations pending");
  }

  /// Takes over the socket of a stream on another executor type, as Beast: expiries and rate state start
  /// anew, and `other`'s pending operations stay with `other`'s timeouts.
  template <typename Executor1, std::enable_if_t<!std::is_same_v<Executor1, Executor>, int> = 0>
  explicit basic_stream(basic_stream<Protocol, Executor1, RatePolicy>&& other)
      : basic_stream(std::move(other.socket_)) {}

  basic_stream& operator=(basic_stream&&) = delete;

  /// Closes the socket: pending operations complete with operation_aborted, and none of them touches the
  /// stream again. O(pending).
  ~basic_stream() {
    for (auto* op : ops_)
      if (op != nullptr) {
        op->owner = nullptr;
        op->io_slot.clear();
      }
    close();
  }

  ///@{
  /// The socket, for anything the stream does not wrap. O(1).
  socket_type& socket() noexcept { return socket_; }
  const socket_type& socket() const noexcept { return socket_; }
  ///@}

  /// Cancels the pending operations as cancel() does, then gives the socket away (the stream keeps a closed
  /// one on the same executor). O(pending).
  socket_type release_socket() {
    cancel();
    return std::move(socket_);
  }

  ///@{
  /// The rate policy (Beast's unlimited_rate_policy, simple_rate_policy, or one of yours). O(1).
  RatePolicy& rate_policy() noexcept { return rate_.policy(); }
  const RatePolicy& rate_policy() const noexcept { return rate_.policy(); }
  ///@}

  /// Sets the timeout of the next operations, in each direction that has none pending (both must not be
  /// pending): they time out `d` from now. O(1), O(log N) if earlier than before.
  void expires_after(std::chrono::steady_clock::duration d) {
    expires_at(detail::saturating_add(std::chrono::steady_clock::now(), d));
  }

  /// The same at the time `t`; a time already past makes the next operation time out at once.
  void expires_at(std::chrono::steady_clock::time_point t) {
    assert((ops_[0] == nullptr || ops_[1] == nullptr) && "tock::beast: both directions are pending");
    if (ops_[0] == nullptr) read_deadline_.expires_at(t);
    if (ops_[1] == nullptr) write_deadline_.expires_at(t);
  }

  /// No timeout for the next operations, in each direction that has none pending. O(1).
  void expires_never() { expires_at(std::chrono::steady_clock::time_point::max()); }

  /// Cancels the socket's pending operations and rate waits: they complete with operation_aborted (an
  /// operation already done completes with its result). Expiries stay. O(pending).
  void cancel() {
    error_code ignored;
    socket_.cancel(ignored);
    rate_.cancel();
  }

  /// Closes the socket, which cancels everything as cancel() does. Never throws.
  void close() noexcept {
    error_code ignored;
    socket_.close(ignored);
    try {
      rate_.cancel();
    } catch (...) {  // the rate timer's cancel cannot fail: it allocates nothing (docs/design.md)
    }
  }

  /// The socket's executor. O(1).
  executor_type get_executor() noexcept { return socket_.get_executor(); }

  ///@{
  /// Blocking connect, as the socket's connect() (to `ep`) or asio::connect() (a sequence of endpoints, or
  /// iterators, with an optional condition): no timeout. Throws system_error, or sets `ec`.
  void connect(const endpoint_type& ep) { socket_.connect(ep); }
  void connect(const endpoint_type& ep, error_code& ec) { socket_.connect(ep, ec); }
  // Every other form is asio::connect's own (sequence or iterators, condition, error_code): forwarded.
  template <typename First, typename... Rest>
    requires(!std::is_convertible_v<const First&, const endpoint_type&>)
  auto connect(const First& first, Rest&&... rest)
      -> decltype(asio::connect(std::declval<socket_type&>(), first, std::forward<Rest>(rest)...)) {
    return asio::connect(socket_, first, std::forward<Rest>(rest)...);
  }
  ///@}

  /// Connects to `ep`: void(error_code); boost::beast::error::timeout (the socket closed) if the write
  /// direction's expiry passes first. Counts as a read and a write. Cancellation: terminal, partial, total.
  template <typename Token = asio::default_completion_token_t<executor_type>>
  auto async_connect(const endpoint_type& ep, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code)>(std::declval<initiate_connect>(), token, ep)) {
    return asio::async_initiate<Token, void(error_code)>(initiate_connect(this), token, ep);
  }

  ///@{
  /// Connects to the first endpoint of a sequence that accepts (and that `condition` allows), as
  /// asio::async_connect: void(error_code, endpoint_type); times out as async_connect(ep) does.
  template <typename Endpoints, typename Token = asio::default_completion_token_t<executor_type>,
            std::enable_if_t<asio::is_endpoint_sequence<Endpoints>::value, int> = 0>
  auto async_connect(const Endpoints& endpoints, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, endpoint_type)>(std::declval<initiate_connect>(), token,
                                                                               endpoints,
                                                                               boost::beast::detail::any_endpoint())) {
    return asio::async_initiate<Token, void(error_code, endpoint_type)>(initiate_connect(this), token, endpoints,
                                                                        boost::beast::detail::any_endpoint());
  }
  template <typename Endpoints, typename Condition, typename Token = asio::default_completion_token_t<executor_type>,
            std::enable_if_t<asio::is_endpoint_sequence<Endpoints>::value, int> = 0>
  auto async_connect(const Endpoints& endpoints, Condition condition, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, endpoint_type)>(std::declval<initiate_connect>(), token,
                                                                               endpoints, condition)) {
    return asio::async_initiate<Token, void(error_code, endpoint_type)>(initiate_connect(this), token, endpoints,
                                                                        condition);
  }
  ///@}

  ///@{
  /// The same over iterators: void(error_code, Iterator) (`end` if none connected).
  template <typename Iterator, typename Token = asio::default_completion_token_t<executor_type>,
            std::enable_if_t<!asio::is_endpoint_sequence<Iterator>::value, int> = 0>
  auto async_connect(Iterator begin, Iterator end, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, Iterator)>(std::declval<initiate_connect>(), token,
                                                                          begin, end,
                                                                          boost::beast::detail::any_endpoint())) {
    return asio::async_initiate<Token, void(error_code, Iterator)>(initiate_connect(this), token, begin, end,
                                                                   boost::beast::detail::any_endpoint());
  }
  template <typename Iterator, typename Condition, typename Token = asio::default_completion_token_t<executor_type>,
            std::enable_if_t<!asio::is_endpoint_sequence<Iterator>::value, int> = 0>
  auto async_connect(Iterator begin, Iterator end, Condition condition, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, Iterator)>(std::declval<initiate_connect>(), token,
                                                                          begin, end, condition)) {
    return asio::async_initiate<Token, void(error_code, Iterator)>(initiate_connect(this), token, begin, end,
                                                                   condition);
  }
  ///@}

  ///@{
  /// Blocking read_some / write_some on the socket: no timeout, no rate limit (as Beast). Throws
  /// system_error, or sets `ec`.
  template <typename MutableBuffers, typename... Ec>  // Ec: none, or error_code
  std::size_t read_some(const MutableBuffers& buffers, Ec&... ec) {
    return socket_.read_some(buffers, ec...);
  }
  template <typename ConstBuffers, typename... Ec>
  std::size_t write_some(const ConstBuffers& buffers, Ec&... ec) {
    return socket_.write_some(buffers, ec...);
  }
  ///@}

  /// Reads some bytes (at most what the rate policy allows; it waits for the next second if none):
  /// void(error_code, std::size_t); boost::beast::error::timeout if the read expiry passes first. One
  /// allocation (the deadline's bound operation) besides the socket's. Cancellation: terminal, partial, total.
  template <typename MutableBuffers, typename Token = asio::default_completion_token_t<executor_type>>
  auto async_read_some(const MutableBuffers& buffers, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, std::size_t)>(std::declval<initiate_transfer<true>>(),
                                                                             token, buffers)) {
    static_assert(asio::is_mutable_buffer_sequence<MutableBuffers>::value, "a MutableBufferSequence is needed");
    return asio::async_initiate<Token, void(error_code, std::size_t)>(initiate_transfer<true>(this), token, buffers);
  }

  /// Writes some bytes, as async_read_some reads: the write expiry and write rate apply.
  template <typename ConstBuffers, typename Token = asio::default_completion_token_t<executor_type>>
  auto async_write_some(const ConstBuffers& buffers, Token&& token = Token())
      -> decltype(asio::async_initiate<Token, void(error_code, std::size_t)>(std::declval<initiate_transfer<false>>(),
                                                                             token, buffers)) {
    static_assert(asio::is_const_buffer_sequence<ConstBuffers>::value, "a ConstBufferSequence is needed");
    return asio::async_initiate<Token, void(error_code, std::size_t)>(initiate_transfer<false>(this), token, buffers);
  }

 private:
  template <typename, typename, typename>
  friend class basic_stream;
  template <typename, typename, detail::beast_dirs>
  friend class detail::beast_op;
  template <typename, bool, typename, typename>
  friend class detail::beast_rate_wait;
  template <typename>
  friend struct detail::beast_initiate;
  template <typename>
  friend class asio::ssl::stream;

  // What asio::ssl::stream asks of its next layer, as Beast's stream offers it (to ssl::stream only).
  using lowest_layer_type = socket_type;
  lowest_layer_type& lowest_layer() noexcept { return socket_; }
  const lowest_layer_type& lowest_layer() const noexcept { return socket_; }

  using link_type = detail::beast_op_link<basic_stream>;

  deadline_type& deadline_of(bool read) noexcept { return read ? read_deadline_ : write_deadline_; }

  // Every operation is bound to its direction's deadline, timed or not (a deadline at max() takes no heap
  // slot): the bound operation is where the beast_op lives, so that the stream can find it.
  template <bool Read, typename Handler, typename Buffers>
  void start_transfer(Handler&& handler, const Buffers& buffers) {
    constexpr auto dirs = Read ? detail::beast_dirs::read : detail::beast_dirs::write;
    const bool empty = detail::holds_no_bytes(buffers);
    if (empty && ops_[Read ? 0 : 1] != nullptr) {
      // As Beast (its issue 2065): an SSL stream's zero-length transfer beside a pending one succeeds.
      asio::post(get_executor(), asio::append(std::forward<Handler>(handler), error_code(), std::size_t(0)));
      return;
    }
    detail::beast_op<basic_stream, std::decay_t<Handler>, dirs> op(*this, std::forward<Handler>(handler), empty);
    auto bound = deadline_of(Read).bind(std::move(op));
    std::size_t allowed = static_cast<std::size_t>(-1);
    if constexpr (rate_type::limited) {
      if (!empty) allowed = rate_.available(Read);
      if (allowed == 0) {
        asio::async_initiate<decltype(bound), void(error_code, std::size_t)>(
            typename initiate::template rate_wait<Read, Buffers>(this, buffers), bound);
        return;
      }
    }
    asio::async_initiate<decltype(bound), void(error_code, std::size_t)>(
        typename initiate::template io<Read, Buffers>(this, allowed, buffers), bound);
  }

  // `bound`: the deadline's bound handler (its user_handler() is the beast_op).
  template <bool Read, typename Buffers, typename Bound>
  void start_io(std::size_t allowed, const Buffers& buffers, Bound&& bound) {
    using op_type = std::decay_t<decltype(bound.user_handler())>;
    if constexpr (rate_type::limited) {
      if constexpr (Read)
        socket_.async_read_some(boost::beast::buffers_prefix(allowed, buffers),
                                op_type::hook_io(std::forward<Bound>(bound)));
      else
        socket_.async_write_some(boost::beast::buffers_prefix(allowed, buffers),
                                 op_type::hook_io(std::forward<Bound>(bound)));
    } else if constexpr (Read) {
      socket_.async_read_some(buffers, op_type::hook_io(std::forward<Bound>(bound)));
    } else {
      socket_.async_write_some(buffers, op_type::hook_io(std::forward<Bound>(bound)));
    }
  }

  template <typename Handler, typename... Args>
  void start_connect(Handler&& handler, const Args&... args) {
    detail::beast_op<basic_stream, std::decay_t<Handler>, detail::beast_dirs::connect> op(
        *this, std::forward<Handler>(handler), false);
    auto bound = write_deadline_.bind(std::move(op));
    using signature = std::conditional_t<sizeof...(Args) == 1, void(error_code),
                                         void(error_code, typename connect_result<Args...>::type)>;
    asio::async_initiate<decltype(bound), signature>(typename initiate::connect_io(this), bound, args...);
  }

  // What a connect over a sequence or iterators reports besides its error.
  template <typename First, typename... Rest>
  struct connect_result {
    using type = std::conditional_t<asio::is_endpoint_sequence<First>::value, endpoint_type, First>;
  };

  // From beast_op, on the handler's executor, before the user's handler runs: the deadline's
  // tock::error::timed_out becomes Beast's timeout and closes the socket (as Beast's timer does); a transfer
  // of no bytes times out if its expiry has passed (Beast checks it after the fact); bytes count for the rate.
  // A template, as every member that calls the rate policy: instantiated by the operations only, so that an
  // explicit instantiation of the stream never needs the policy's members (Beast's test has one out of reach).
  template <bool Read>
  void on_transfer_done(bool empty, error_code& ec, std::size_t n) {
    if (ec == tock::error::timed_out || (empty && deadline_of(Read).expiry() <= std::chrono::steady_clock::now())) {
      close();
      ec = boost::beast::error::timeout;
    }
    if constexpr (rate_type::limited) rate_.transferred(Read, n);
  }
  void on_connect_done(error_code& ec) {
    if (ec == tock::error::timed_out) {
      close();
      ec = boost::beast::error::timeout;
    }
  }

  socket_type socket_;
  deadline_type read_deadline_;
  deadline_type write_deadline_;
  [[no_unique_address]] rate_type rate_;
  link_type* ops_[2] = {nullptr, nullptr};  // the pending operation of each direction (a connect: both)
};

/// The drop-in for boost::beast::tcp_stream.
using tcp_stream = basic_stream<asio::ip::tcp>;

///@{
/// Beast's customization points, found by argument-dependent lookup: websocket::stream's teardown (on the
/// socket, with no timeout, as Beast) and beast::close_socket.
template <typename Protocol, typename Executor, typename RatePolicy>
void teardown(boost::beast::role_type role, basic_stream<Protocol, Executor, RatePolicy>& stream, error_code& ec) {
  using boost::beast::websocket::teardown;
  teardown(role, stream.socket(), ec);
}
template <typename Protocol, typename Executor, typename RatePolicy, typename TeardownHandler>
void async_teardown(boost::beast::role_type role, basic_stream<Protocol, Executor, RatePolicy>& stream,
                    TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  async_teardown(role, stream.socket(), std::forward<TeardownHandler>(handler));
}
template <typename Protocol, typename Executor, typename RatePolicy>
void beast_close_socket(basic_stream<Protocol, Executor, RatePolicy>& stream) {
  error_code ignored;
  stream.socket().close(ignored);
}
///@}

}  // namespace tock::beast

#endif
