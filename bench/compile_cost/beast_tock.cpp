// The Beast server of scripts/compile_cost.sh on tock::beast::tcp_stream (beast_server.hpp).
#include "beast_server.hpp"

#include <tock/beast.hpp>

int main() { return compile_cost::run<tock::beast::tcp_stream>(); }
