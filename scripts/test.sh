#!/usr/bin/env bash
# Configure, build and test tock with warnings as errors, in these configurations:
#   release (GCC, with examples and bench), asan (ASan + UBSan), tsan (ThreadSanitizer),
#   clang (clang 16, Release, Ninja, with examples and bench),
#   standalone (GCC, Release, on standalone Asio 1.38.2 from ../shared/third_party, or $TOCK_ASIO_INCLUDE_DIR),
#   uring (as standalone, on Asio's io_uring backend instead of epoll: TOCK_ASIO_IO_URING, liburing-dev; skipped,
#   saying so, on a machine whose kernel or container refuses io_uring_setup),
# then the bounded checks: format (clang-format 16, scripts/format.sh --check), docs (scripts/docs.sh: the
# reference, failing on an undocumented public name), fuzz (each libFuzzer target
# for 60 s, scripts/fuzz.sh) and soak (the example server under churning load for 60 s, scripts/soak.sh).
# Usage: scripts/test.sh [all|format|docs|release|asan|tsan|clang|standalone|uring|fuzz|soak]...
#   no argument: the quick tier (format, docs, release: what a change must pass first; ~10 min on 2 cores);
#   all: every configuration above, in that order (what CI runs: .ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh

quick=(format docs release)
all=(format docs release asan tsan clang standalone uring fuzz soak)
configs=()
for arg in "$@"; do
    if [[ $arg == all ]]; then configs+=("${all[@]}"); else configs+=("$arg"); fi
done
[[ ${#configs[@]} -eq 0 ]] && configs=("${quick[@]}")

# What the chosen configurations need, and only that: the quick tier needs no clang or libFuzzer.
packages=("${TOCK_PACKAGES[@]}" libbenchmark-dev libssl-dev) # libssl-dev: beast_stream_test's SSL cases
for name in "${configs[@]}"; do
    case $name in
    format) packages+=(clang-format-16) ;;
    clang | fuzz) packages+=(ninja-build clang-16 libclang-rt-16-dev llvm-16) ;;
    uring) packages+=(liburing-dev) ;;
    esac
done
ensure_packages "${packages[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# The standalone Asio of the standalone and uring configurations: CI provides ../shared beside the checkout.
standalone_asio=${TOCK_ASIO_INCLUDE_DIR:-$PWD/../shared/third_party/asio-1.38.2/include}

declare -A cmake_args=(
    [release]="-DCMAKE_BUILD_TYPE=Release"
    [asan]="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOCK_SANITIZE=address,undefined -DTOCK_SANITIZE_O1=ON -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF"
    [tsan]="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOCK_SANITIZE=thread -DTOCK_SANITIZE_O1=ON -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF"
    [clang]="-G Ninja -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=Release"
    [standalone]="-DCMAKE_BUILD_TYPE=Release -DTOCK_ASIO=standalone -DTOCK_ASIO_INCLUDE_DIR=$standalone_asio"
    [uring]="-DCMAKE_BUILD_TYPE=Release -DTOCK_ASIO=standalone -DTOCK_ASIO_INCLUDE_DIR=$standalone_asio -DTOCK_ASIO_IO_URING=ON"
)
# Checks that are scripts of their own; each counts as one test.
declare -A script_checks=(
    [format]="bash scripts/format.sh --check"
    [docs]="bash scripts/docs.sh"
    [fuzz]="bash scripts/fuzz.sh 60"
    [soak]="bash scripts/soak.sh 1"
)

# TSan's runtime fails with "unexpected memory mapping" when the kernel randomizes mmap with
# more bits than it supports: run the tsan tests with address randomization off when possible.
tsan_launcher() {
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        echo "setarch $(uname -m) -R"
    elif [[ -w /proc/sys/vm/mmap_rnd_bits ]] && (($(</proc/sys/vm/mmap_rnd_bits) > 28)); then
        echo 28 >/proc/sys/vm/mmap_rnd_bits
    fi
}

# Whether this machine lets a process set up an io_uring (a one-line liburing program, built and run).
uring_usable() {
    local probe
    probe=$(mktemp -d)
    printf '#include <liburing.h>\nint main() { io_uring r; return io_uring_queue_init(8, &r, 0) < 0; }\n' >"$probe/p.cpp"
    g++ "$probe/p.cpp" -o "$probe/p" -luring && "$probe/p"
    local ok=$?
    rm -rf "$probe"
    return $ok
}

# run_config NAME: configure, build and test build/NAME; ctest's output goes to build/NAME/ctest.log.
run_config() {
    local name=$1 dir=build/$1 launcher=()
    if [[ -v script_checks[$name] ]]; then
        mkdir -p build
        # shellcheck disable=SC2086 # the command is several words
        if ${script_checks[$name]} 2>&1 | tee "$dir.log"; then result="100% tests passed, 0 tests failed out of 1"
        else result="0% tests passed, 1 tests failed out of 1"; fi
        mkdir -p "$dir" && echo "$result" >"$dir/ctest.log"
        [[ $result == 100%* ]]
        return
    fi
    if [[ $name =~ ^(standalone|uring)$ && ! -f $standalone_asio/asio.hpp ]]; then
        # A clone without ../shared (say in /tmp) skips it, loudly; CI, which must test it, fails.
        echo "$name: no standalone Asio at $standalone_asio (set TOCK_ASIO_INCLUDE_DIR)" >&2
        [[ ${CI:-} == true ]] && return 1
        mkdir -p "$dir" && echo "SKIPPED: 100% tests passed, 0 tests failed out of 0" >"$dir/ctest.log"
        return 0
    fi
    if [[ $name == uring ]] && ! uring_usable; then
        # A kernel or container (a seccomp profile) that refuses io_uring_setup cannot run this backend at all:
        # that is the machine's limit, not tock's, so the configuration is skipped, loudly, even in CI.
        echo "uring: SKIPPED: this machine refuses io_uring_setup (kernel or container policy)" >&2
        mkdir -p "$dir" && echo "SKIPPED: 100% tests passed, 0 tests failed out of 0" >"$dir/ctest.log"
        return 0
    fi
    [[ $name == tsan ]] && read -ra launcher <<<"$(tsan_launcher)"
    # shellcheck disable=SC2086 # cmake_args holds several words
    cmake -S . -B "$dir" -DTOCK_WERROR=ON ${cmake_args[$name]} &&
        cmake --build "$dir" -j"$(nproc)" &&
        (cd "$dir" && "${launcher[@]}" ctest --output-on-failure -j2 2>&1 | tee ctest.log)
}

passed=0 failed=0 status=0 report=()
for name in "${configs[@]}"; do
    [[ -v cmake_args[$name] || -v script_checks[$name] ]] || { echo "unknown configuration: $name" >&2; exit 2; }
    echo "=== $name"
    start=$SECONDS
    rm -f "build/$name/ctest.log"
    if run_config "$name"; then result=PASS; else result=FAIL status=1; fi
    # ctest's closing line: "NN% tests passed, F tests failed out of T".
    counts=$(sed -n 's/.* \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' "build/$name/ctest.log" 2>/dev/null || true)
    read -r f t <<<"${counts:-0 0}"
    [[ $result == FAIL && $t -eq 0 ]] && f=1 t=1 # configure or build failed: one failure
    passed=$((passed + t - f)) failed=$((failed + f))
    report+=("$name: $result in $((SECONDS - start)) s ($((t - f)) of $t tests passed)")
done

echo "=== summary"
printf '%s\n' "${report[@]}"
echo "tests: $passed passed, $failed failed"
exit $status
