# TOCK_ASIO_IO_URING: liburing (Debian: liburing-dev), for Asio's io_uring backend. Sets TOCK_URING_LIBRARY,
# TOCK_URING_INCLUDE_DIR and TOCK_URING_ERROR: empty, or what is missing and what to install.
find_path(TOCK_URING_INCLUDE_DIR liburing.h DOC "liburing: the directory holding liburing.h")
find_library(TOCK_URING_LIBRARY uring DOC "liburing: the library (liburing.so or liburing.a)")
set(TOCK_URING_ERROR "")
if(NOT TOCK_URING_INCLUDE_DIR OR NOT TOCK_URING_LIBRARY)
  string(CONCAT TOCK_URING_ERROR "TOCK_ASIO_IO_URING needs liburing (liburing.h: '${TOCK_URING_INCLUDE_DIR}', "
    "library: '${TOCK_URING_LIBRARY}'): install it (Debian: apt-get install liburing-dev) or use "
    "-DTOCK_ASIO_IO_URING=OFF.")
endif()
