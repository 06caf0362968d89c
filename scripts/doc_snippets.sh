#!/usr/bin/env bash
# Compiles every ```cpp block of README.md and docs/*.md as written (-fsyntax-only, C++20, Boost.Asio), so that
# the documentation cannot drift from the headers. ctest runs it as `doc_snippets` (test/CMakeLists.txt).
#
# A block is a whole program by default: it is compiled alone, as a file of its own, and must include what it
# uses. A block that is a fragment is marked by this line right before its fence:
#     <!-- snippet: fragment -->
# It is then compiled as the body of a coroutine (asio::awaitable<void>) in a file that includes <tock/tock.hpp>
# and <boost/asio.hpp>, with `using namespace std::chrono_literals`, `namespace asio = boost::asio` and the
# names of the prelude below declared (ex, sock, buf, handler...). A fragment for a newer Asio says so:
#     <!-- snippet: fragment if TOCK_ASIO_VERSION >= 103100 -->
# and is compiled only where that preprocessor condition holds. Any other `<!-- snippet:` line is an error.
# Errors point at the Markdown file and line (#line). All fragments make one file; one compiler call in all.
#
# Usage: scripts/doc_snippets.sh [COMPILER [FLAGS...]]   (default: ${CXX:-g++}; FLAGS e.g. -I<Boost's include>)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
compiler=${1:-${CXX:-g++}}
shift || true

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/prelude.hpp" <<'EOF'
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <iostream>
#include <string>
#include <tock/tock.hpp>
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace tock_doc_snippets {
// What a fragment may name without declaring it. Declared only: the snippets are compiled, never run.
struct any_handler {
  template <typename... Args>
  void operator()(Args&&...) const {}
};
extern any_handler handler, token;                  // a completion handler of any signature
extern asio::io_context::executor_type ex;                 // an io_context's executor
extern asio::strand<asio::io_context::executor_type> strand;  // a strand of it
extern asio::io_context host_ctx;
extern asio::thread_pool pool;
extern asio::ip::tcp::socket sock;
extern asio::mutable_buffer buf;
extern std::string line, reply;
extern tock::timer idle_timer;
extern std::chrono::steady_clock::time_point t;
int compute();
void poll();
void flush();
template <typename... Args>
void log(const Args&...);
}  // namespace tock_doc_snippets
EOF

# Writes fragments.cpp (every fragment, each the body of a function) and program<N>.cpp (one a whole program);
# prints "<blocks> <files>".
files=(README.md docs/*.md)
awk -v work="$work" '
function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; failed = 1; exit 1 }
BEGIN { fragments = work "/fragments.cpp"; print "#include \"prelude.hpp\"\nnamespace tock_doc_snippets {" > fragments }
FNR == 1 { if (marker != "") fail("a snippet marker at the end of the previous file"); fence = ""; nfiles++ }
fence == "cpp" && /^```[[:space:]]*$/ {
  fence = ""
  if (target == fragments) print "  co_return;\n}" (open_if ? "\n#endif" : "") > fragments
  else close(target)
  next
}
fence == "cpp" { print > target; next }
fence != "" { if (/^```[[:space:]]*$/) fence = ""; next }
/^```(cpp|c\+\+)[[:space:]]*$/ {
  fence = "cpp"; blocks++
  if (marker == "fragment") {
    target = fragments
    open_if = condition != ""
    if (open_if) print "#if " condition > fragments
    print "asio::awaitable<void> snippet_" blocks "() {" > fragments
  } else {
    target = work "/program" blocks ".cpp"
  }
  printf "#line %d \"%s\"\n", FNR + 1, FILENAME > target
  marker = ""; condition = ""
  next
}
/^```/ { if (marker != "") fail("a snippet marker before a block that is not ```cpp"); fence = "other"; next }
marker != "" { fail("a snippet marker not right before a ```cpp fence") }
/^<!-- snippet:/ {
  if (match($0, /^<!-- snippet: fragment( if .+)? -->[[:space:]]*$/) == 0)
    fail("unknown snippet marker (see scripts/doc_snippets.sh): " $0)
  marker = "fragment"; condition = $0
  sub(/^<!-- snippet: fragment( if )?/, "", condition); sub(/ -->[[:space:]]*$/, "", condition)
  next
}
END {
  if (failed) exit 1
  if (fence != "") { print FILENAME ": a code block is not closed" > "/dev/stderr"; exit 1 }
  print "}  // namespace tock_doc_snippets" > fragments
  print blocks + 0, nfiles + 0
}' "${files[@]}" >"$work/count"
read -r blocks nfiles <"$work/count"
if ((blocks == 0)); then
    echo "doc_snippets: no \`\`\`cpp block found in ${files[*]}: the extractor is broken" >&2
    exit 1
fi

sources=("$work/fragments.cpp")
for program in "$work"/program*.cpp; do [[ -e $program ]] && sources+=("$program"); done
if "$compiler" -std=c++20 -fsyntax-only -Iinclude -I"$work" "$@" "${sources[@]}"; then
    echo "doc_snippets: the $blocks C++ blocks of $nfiles Markdown files compile (${#sources[@]} files, $compiler)"
else
    echo "doc_snippets: FAILED: a C++ block of ${files[*]} does not compile as written (errors above)" >&2
    exit 1
fi
