#!/usr/bin/env bash
# Configure, build and test tock with warnings as errors, in up to three configurations:
#   release (with examples and bench), asan (ASan + UBSan), tsan (ThreadSanitizer).
# Usage: scripts/test.sh [release|asan|tsan]...    (no argument: all three)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" libbenchmark-dev

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

declare -A cmake_args=(
    [release]="-DCMAKE_BUILD_TYPE=Release"
    [asan]="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOCK_SANITIZE=address,undefined -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF"
    [tsan]="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOCK_SANITIZE=thread -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF"
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

# run_config NAME: configure, build and test build/NAME; ctest's output goes to build/NAME/ctest.log.
run_config() {
    local name=$1 dir=build/$1 launcher=()
    [[ $name == tsan ]] && read -ra launcher <<<"$(tsan_launcher)"
    # shellcheck disable=SC2086 # cmake_args holds several words
    cmake -S . -B "$dir" -DTOCK_WERROR=ON ${cmake_args[$name]} &&
        cmake --build "$dir" -j"$(nproc)" &&
        (cd "$dir" && "${launcher[@]}" ctest --output-on-failure -j2 2>&1 | tee ctest.log)
}

configs=("$@")
[[ ${#configs[@]} -eq 0 ]] && configs=(release asan tsan)
passed=0 failed=0 status=0 report=()
for name in "${configs[@]}"; do
    [[ -v cmake_args[$name] ]] || { echo "unknown configuration: $name" >&2; exit 2; }
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
