// beast_stream_test, continued (see beast_stream_test.cpp): the compile-time corners Beast's own tests rely on,
// each checked of Beast's stream (the control) and tock's side by side. An asynchronous member named in an
// unevaluated operand has a declared result, so naming it builds no operation (an operation that would not
// compile, such as a connect whose condition Asio cannot call, goes unnoticed there, as with Beast); and the
// stream can be instantiated explicitly with any rate policy Beast accepts, including one whose members no
// stream can reach (what touches the policy is instantiated by the operations that use it).
#include "beast_stream_support.hpp"
#include "test_asio.hpp"

#include <tock/beast.hpp>

#include <boost/beast/core.hpp>
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <future>
#include <limits>
#include <type_traits>
#include <utility>

namespace beast_decl_test {

// The RatePolicy concept with its members private, reached through rate_policy_access: counts the bytes each
// direction transferred, and lets every transfer through.
class counting_policy {
 public:
  std::size_t read() const noexcept { return read_; }
  std::size_t written() const noexcept { return written_; }

 private:
  friend class boost::beast::rate_policy_access;
  std::size_t available_read_bytes() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  std::size_t available_write_bytes() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  void transfer_read_bytes(std::size_t n) noexcept { read_ += n; }
  void transfer_write_bytes(std::size_t n) noexcept { written_ += n; }
  void on_timer() noexcept {}

  std::size_t read_ = 0;
  std::size_t written_ = 0;
};

// Written as Beast's timeouts documentation writes its rate_gauge (doc/core_3_timeouts): the friend is named
// unqualified. Outside namespace boost::beast that declares a new class of this namespace (the lookup of an
// unqualified friend stops at the innermost enclosing namespace), so Beast's rate_policy_access cannot call
// these members; a stream with this policy compiles as long as no operation runs it, which is what Beast's
// test relies on.
class documented_policy {
 public:
  std::size_t samples() const noexcept { return samples_; }

 private:
  friend class rate_policy_access;
  std::size_t available_read_bytes() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  std::size_t available_write_bytes() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  void transfer_read_bytes(std::size_t n) noexcept { samples_ += n; }
  void transfer_write_bytes(std::size_t n) noexcept { samples_ += n; }
  void on_timer() noexcept {}

  std::size_t samples_ = 0;
};

using tcp = asio::ip::tcp;
using any_ex = asio::any_io_executor;
using ctx_ex = asio::io_context::executor_type;
using boost::beast::simple_rate_policy;
using boost::beast::unlimited_rate_policy;

}  // namespace beast_decl_test

// Explicit instantiations, at namespace scope: each line of Beast's stream (the control) is followed by the
// same of tock's. The first pair is each library's tcp_stream.
template class boost::beast::basic_stream<beast_decl_test::tcp>;
template class tock::beast::basic_stream<beast_decl_test::tcp>;
static_assert(std::is_same_v<boost::beast::tcp_stream, boost::beast::basic_stream<beast_decl_test::tcp>>);
static_assert(std::is_same_v<tock::beast::tcp_stream, tock::beast::basic_stream<beast_decl_test::tcp>>);

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                          beast_decl_test::simple_rate_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                         beast_decl_test::simple_rate_policy>;

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                          beast_decl_test::counting_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                         beast_decl_test::counting_policy>;

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                          beast_decl_test::documented_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::any_ex,
                                         beast_decl_test::documented_policy>;

// The same on the io_context's own executor.
template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                          beast_decl_test::unlimited_rate_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                         beast_decl_test::unlimited_rate_policy>;

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                          beast_decl_test::simple_rate_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                         beast_decl_test::simple_rate_policy>;

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                          beast_decl_test::counting_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                         beast_decl_test::counting_policy>;

template class boost::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                          beast_decl_test::documented_policy>;
template class tock::beast::basic_stream<beast_decl_test::tcp, beast_decl_test::ctx_ex,
                                         beast_decl_test::documented_policy>;

using namespace beast_test;

namespace beast_decl_test {

using results_type = tcp::resolver::results_type;
using iterator = results_type::const_iterator;

// What an unevaluated call of each asynchronous member says it returns, for the token `Token` (a value of it is
// made by `make`): Result<T> for the completion's value T.
template <typename Stream, template <typename> class Result, typename Make>
void check_results(Make make) {
  using stream_ref = Stream&;
  // A connect condition Asio cannot call (it passes the error as a const error_code): Beast's own test (Boost
  // 1.81) names one, and only an unevaluated call compiles with it.
  auto by_reference = [](error_code&, const tcp::endpoint&) { return true; };
  static_assert(std::is_same_v<Result<std::size_t>,
                               decltype(std::declval<stream_ref>().async_read_some(asio::mutable_buffer(), make()))>);
  static_assert(std::is_same_v<Result<std::size_t>,
                               decltype(std::declval<stream_ref>().async_write_some(asio::const_buffer(), make()))>);
  static_assert(
      std::is_same_v<Result<void>, decltype(std::declval<stream_ref>().async_connect(tcp::endpoint(), make()))>);
  static_assert(std::is_same_v<Result<tcp::endpoint>,
                               decltype(std::declval<stream_ref>().async_connect(results_type(), make()))>);
  static_assert(std::is_same_v<Result<tcp::endpoint>, decltype(std::declval<stream_ref>().async_connect(
                                                          results_type(), by_reference, make()))>);
  static_assert(std::is_same_v<Result<iterator>,
                               decltype(std::declval<stream_ref>().async_connect(iterator(), iterator(), make()))>);
  static_assert(std::is_same_v<Result<iterator>, decltype(std::declval<stream_ref>().async_connect(
                                                     iterator(), iterator(), by_reference, make()))>);
}

template <typename T>
using awaitable = asio::awaitable<T>;
template <typename T>
using future = std::future<T>;
template <typename>
using nothing = void;

// A condition and handlers whose call operators are declared and never defined, as in Beast's test of the
// connect condition's arguments: an unevaluated call must not instantiate anything that calls them.
struct declared_condition {
  bool operator()(const error_code&, const tcp::endpoint&) const;
};
struct declared_endpoint_handler {
  void operator()(const error_code&, const tcp::endpoint&);
};
struct declared_iterator_handler {
  void operator()(const error_code&, iterator) const;
};

}  // namespace beast_decl_test

BOOST_AUTO_TEST_SUITE(beast_stream_test)

BOOST_AUTO_TEST_CASE_TEMPLATE(an_unevaluated_call_declares_what_it_returns_and_builds_nothing, Kind, kinds) {
  using namespace beast_decl_test;
  using stream_type = tcp_stream_of<Kind>;
  check_results<stream_type, awaitable>([] { return asio::use_awaitable; });
  check_results<stream_type, future>([] { return asio::use_future; });
  check_results<stream_type, nothing>([] { return [](const error_code&, auto&&...) {}; });
  static_assert(std::is_void_v<decltype(std::declval<stream_type&>().async_connect(results_type(), declared_condition(),
                                                                                   declared_endpoint_handler()))>);
  static_assert(std::is_void_v<decltype(std::declval<stream_type&>().async_connect(
                    iterator(), iterator(), declared_condition(), declared_iterator_handler()))>);
  // Nothing ran: the stream is as constructed.
  asio::io_context ctx;
  stream_type s(ctx);
  BOOST_CHECK(!s.socket().is_open());
  BOOST_CHECK_EQUAL(ctx.poll(), 0u);
}

// asio::deferred's result names the initiation, so a declared result that is not exactly what the member
// returns fails to compile here. Unlaunched, the operations start nothing.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_deferred_call_returns_what_its_declaration_says, Kind, kinds) {
  using namespace beast_decl_test;
  asio::io_context ctx;
  tcp_stream_of<Kind> s(ctx);
  char buf[4];
  auto read = s.async_read_some(asio::buffer(buf), asio::deferred);
  auto write = s.async_write_some(asio::buffer(buf), asio::deferred);
  auto connect = s.async_connect(tcp::endpoint(), asio::deferred);
  static_assert(asio::is_deferred<decltype(read)>::value && asio::is_deferred<decltype(write)>::value &&
                asio::is_deferred<decltype(connect)>::value);
  if constexpr (Kind::is_tock) {
    // Beast 1.81 declares its connects over a sequence or iterators with async_result's return_type, which
    // asio::deferred has not: with Beast's stream, these do not compile.
    auto by_condition = [](const error_code&, const tcp::endpoint&) { return true; };
    auto range = s.async_connect(results_type(), asio::deferred);
    auto range_if = s.async_connect(results_type(), by_condition, asio::deferred);
    auto iterators = s.async_connect(iterator(), iterator(), asio::deferred);
    auto iterators_if = s.async_connect(iterator(), iterator(), by_condition, asio::deferred);
    static_assert(asio::is_deferred<decltype(range)>::value && asio::is_deferred<decltype(range_if)>::value &&
                  asio::is_deferred<decltype(iterators)>::value && asio::is_deferred<decltype(iterators_if)>::value);
  }
  BOOST_CHECK(!s.socket().is_open());
  BOOST_CHECK_EQUAL(ctx.poll(), 0u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_policy_with_private_members_sees_every_transfer, Kind, kinds) {
  using stream_type = typename Kind::template stream<beast_decl_test::counting_policy>;
  connected_stream<stream_type> c;
  auto& [ctx, s, peer] = c;
  char buf[16];
  result r, w;
  asio::write(peer, asio::buffer("hello", 5));
  s.expires_after(5s);
  s.async_read_some(asio::buffer(buf), record(r));
  s.async_write_some(asio::buffer("abc", 3), record(w));
  BOOST_REQUIRE(run(ctx));
  BOOST_CHECK_EQUAL(r.n, 5u);
  BOOST_CHECK_EQUAL(w.n, 3u);
  BOOST_CHECK_EQUAL(s.rate_policy().read(), 5u);
  BOOST_CHECK_EQUAL(s.rate_policy().written(), 3u);
  s.close();  // Beast's rate timer, if it ticks, stops with the stream
  BOOST_REQUIRE(run(ctx));
  check_service_idle<Kind>(ctx);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_policy_out_of_reach_still_makes_a_stream, Kind, kinds) {
  // As Beast's documentation uses its rate_gauge: the stream is constructed and its policy read, no operation.
  using stream_type = typename Kind::template stream<beast_decl_test::documented_policy>;
  asio::io_context ctx;
  stream_type s(ctx);
  s.expires_after(1s);
  s.cancel();
  BOOST_CHECK_EQUAL(s.rate_policy().samples(), 0u);
  BOOST_CHECK(!s.socket().is_open());
}

BOOST_AUTO_TEST_SUITE_END()
