// tock/detail/io_context_of.hpp: the io_context an executor runs on.
#ifndef TOCK_DETAIL_IO_CONTEXT_OF_HPP
#define TOCK_DETAIL_IO_CONTEXT_OF_HPP

#include <tock/config.hpp>

#include <stdexcept>
#include <type_traits>

namespace tock::detail {

// Typed executors say which context they run on; a type-erased one only says "some execution_context",
// which cannot be down-cast (it is not polymorphic), so the executor kinds an any_io_executor usually holds
// are unwrapped one by one.
template <typename Executor>
asio::io_context& io_context_of(const Executor& ex) {
  if constexpr (std::is_base_of_v<asio::any_io_executor, Executor> &&
                !std::is_same_v<Executor, asio::any_io_executor>) {
    // A default-token wrapper (use_awaitable_t<>::executor_with_default<any_io_executor>...): its base.
    return io_context_of(static_cast<const asio::any_io_executor&>(ex));
  } else if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
    if (const auto* io = ex.template target<asio::io_context::executor_type>()) return io->context();
    if (const auto* s = ex.template target<asio::strand<asio::io_context::executor_type>>())
      return s->get_inner_executor().context();
    if (const auto* s = ex.template target<asio::strand<asio::any_io_executor>>())
      return io_context_of(s->get_inner_executor());
    throw std::invalid_argument("tock: the executor does not run on an io_context");
  } else {
    using context_type = std::decay_t<decltype(asio::query(ex, asio::execution::context))>;
    static_assert(std::is_base_of_v<asio::io_context, context_type>,
                  "tock timers need an executor of an io_context (or a strand of one)");
    return asio::query(ex, asio::execution::context);
  }
}

// Whether `ex` is `ctx`'s own executor (not a strand or another wrapper of it). O(1), never throws.
template <typename Executor>
bool is_own_executor_of(const Executor& ex, const asio::io_context& ctx) noexcept {
  if constexpr (std::is_same_v<Executor, asio::io_context::executor_type>) {
    return &ex.context() == &ctx;
  } else if constexpr (std::is_base_of_v<asio::any_io_executor, Executor>) {
    const auto* io = static_cast<const asio::any_io_executor&>(ex).template target<asio::io_context::executor_type>();
    return io != nullptr && &io->context() == &ctx;
  } else {
    return false;
  }
}

}  // namespace tock::detail

#endif
