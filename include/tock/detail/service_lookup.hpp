// tock/detail/service_lookup.hpp: finding a context's service without Asio's registry lock on every call.
#ifndef TOCK_DETAIL_SERVICE_LOOKUP_HPP
#define TOCK_DETAIL_SERVICE_LOOKUP_HPP

#include <tock/config.hpp>

#include <atomic>
#include <cstdint>

namespace tock::detail {

// Bumped by the destructor of every service looked up through use_service_cached (a requirement on that
// Service): thread-local lookups made before are stale, so a new context at a dead one's address is never
// mistaken for it.
inline std::atomic<std::uint64_t> service_epoch{1};

// asio::use_service<Service>(ctx) behind a one-entry thread-local cache per Service: O(1) and lock-free
// while a thread keeps using the same context, O(services on the context) under Asio's lock otherwise.
template <typename Service>
Service& use_service_cached(asio::io_context& ctx) {
  struct cache_entry {
    asio::io_context* context;
    Service* service;
    std::uint64_t epoch;
  };
  static thread_local cache_entry last{nullptr, nullptr, 0};
  const std::uint64_t epoch = service_epoch.load(std::memory_order_acquire);
  if (last.context == &ctx && last.epoch == epoch) return *last.service;
  Service& service = asio::use_service<Service>(ctx);
  last = cache_entry{&ctx, &service, epoch};
  return service;
}

}  // namespace tock::detail

#endif
