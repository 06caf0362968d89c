// The test module's entry point; every other test file only adds suites to it.
#define BOOST_TEST_MODULE tock
#include <boost/test/unit_test.hpp>
