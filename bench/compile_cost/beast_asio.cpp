// The Beast server of scripts/compile_cost.sh on boost::beast::tcp_stream (beast_server.hpp).
#include "beast_server.hpp"

int main() { return compile_cost::run<compile_cost::beast::tcp_stream>(); }
