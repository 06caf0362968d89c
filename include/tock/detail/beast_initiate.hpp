// tock/detail/beast_initiate.hpp: the initiations of tock::beast::basic_stream's asynchronous operations. They
// live apart from the stream so that its asynchronous members can declare their results with them (a trailing
// return type sees only what the class declared before it, and the members come first).
#ifndef TOCK_DETAIL_BEAST_INITIATE_HPP
#define TOCK_DETAIL_BEAST_INITIATE_HPP

#include <tock/config.hpp>
#include <tock/detail/beast_op.hpp>

#include <boost/asio/connect.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tock::detail {

// Each initiation starts its operation on the stream, exposing the stream's executor as Asio's initiations do.
// The stream befriends this class, and so each of them (a nested class has its enclosing class's access).
// Naming one needs no complete Stream: only constructing it does, in the stream's members.
template <typename Stream>
struct beast_initiate {
  class base {
   public:
    using executor_type = typename Stream::executor_type;
    explicit base(Stream* self) noexcept : self_(self) {}
    executor_type get_executor() const noexcept { return self_->get_executor(); }

   protected:
    Stream* self_;
  };

  // async_read_some (Read) or async_write_some.
  template <bool Read>
  struct transfer : base {
    using base::base;
    template <typename Handler, typename Buffers>
    void operator()(Handler&& handler, const Buffers& buffers) const {
      this->self_->template start_transfer<Read>(std::forward<Handler>(handler), buffers);
    }
  };

  // Every async_connect: to an endpoint, or asio::async_connect's arguments.
  struct connect : base {
    using base::base;
    template <typename Handler, typename... Args>
    void operator()(Handler&& handler, const Args&... args) const {
      this->self_->start_connect(std::forward<Handler>(handler), args...);
    }
  };

  // The socket's operation, once bound to the deadline: a transfer of at most `allowed` bytes, or a connect.
  template <bool Read, typename Buffers>
  struct io : base {
    io(Stream* self, std::size_t allowed, const Buffers& buffers) : base(self), allowed_(allowed), buffers_(buffers) {}
    template <typename Bound>
    void operator()(Bound&& bound) const {
      this->self_->template start_io<Read>(allowed_, buffers_, std::forward<Bound>(bound));
    }
    std::size_t allowed_;
    Buffers buffers_;
  };
  struct connect_io : base {
    using base::base;
    template <typename Bound, typename... Args>
    void operator()(Bound&& bound, const Args&... args) const {
      using op_type = std::decay_t<decltype(bound.user_handler())>;
      if constexpr (sizeof...(Args) == 1)
        this->self_->socket_.async_connect(args..., op_type::hook_io(std::forward<Bound>(bound)));
      else
        asio::async_connect(this->self_->socket_, args..., op_type::hook_io(std::forward<Bound>(bound)));
    }
  };

  // After a rate wait: the operation continues in beast_rate_wait, bound to the deadline like the transfer.
  template <bool Read, typename Buffers>
  struct rate_wait : base {
    rate_wait(Stream* self, const Buffers& buffers) : base(self), buffers_(buffers) {}
    template <typename Bound>
    void operator()(Bound&& bound) const {
      using wait_type = beast_rate_wait<Stream, Read, Buffers, std::decay_t<Bound>>;
      this->self_->rate_.wait(wait_type(std::forward<Bound>(bound), buffers_));
    }
    Buffers buffers_;
  };
};

}  // namespace tock::detail

#endif
