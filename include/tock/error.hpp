// tock/error.hpp: the error codes tock reports, as an error category of Asio's error system (tock/config.hpp).
#ifndef TOCK_ERROR_HPP
#define TOCK_ERROR_HPP

#include <tock/config.hpp>

#include <type_traits>

namespace tock {

/// Errors tock itself reports. Cancellation is reported as asio::error::operation_aborted, as Asio does.
enum class error {
  timed_out = 1,          ///< a deadline passed before the operation completed; matches std::errc::timed_out
  capacity_exceeded = 2,  ///< the service already holds as many pending waits as its capacity allows
  shut_down = 3,          ///< the service's execution context has been shut down
};

/// The category of tock::error. Thread-safe; the object lives for the whole program.
const sys::error_category& error_category() noexcept;

/// `e` as an error_code of error_category() (the error system finds it by ADL). O(1), thread-safe.
inline error_code make_error_code(error e) noexcept { return error_code(static_cast<int>(e), error_category()); }

}  // namespace tock

// Makes tock::error an error code enum. Kept out of the reference: Doxygen has no scope for Asio's error namespace.
/// \cond
template <>
struct TOCK_SYSTEM_NAMESPACE::is_error_code_enum<tock::error> : std::true_type {};
/// \endcond

#endif
