#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (clang 16): builds and runs the targets of test/fuzz.
#   fuzz_ops      build/fuzz-asan  -fsanitize=fuzzer,address,undefined (one context, manual_clock, a model)
#   fuzz_threads  build/fuzz-tsan  -fsanitize=fuzzer,thread (two issuing threads, two runners; 'X' inputs:
#                 a context run by one thread, used from another, handlers on a second context's strand)
#   fuzz_threads_asan  the same target in build/fuzz-asan (ASan + UBSan, Asio's handler-memory recycling off),
#                 from the same seeds
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   run each target SECONDS (default 60) from a fresh copy of
#                                                its seed corpus (test/fuzz/corpus/TARGET) in build/fuzz-corpus/
#        scripts/fuzz.sh --coverage [TARGET...]  line coverage of include/tock reached by the corpus
#                                                (build/fuzz-corpus/TARGET if a run left one, else the seeds)
# Fails (exit 1) on any crash, leak, failed check or sanitizer report; the input that did it is saved in
# build/fuzz-artifacts/. Non-interactive: no stdin needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" clang-16 libclang-rt-16-dev llvm-16

coverage=0
if [[ ${1:-} == --coverage ]]; then
    coverage=1
    shift
fi
seconds=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
    seconds=$1
    shift
fi
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(fuzz_ops fuzz_threads fuzz_threads_asan)
for t in "${targets[@]}"; do
    [[ $t == fuzz_ops || $t == fuzz_threads || $t == fuzz_threads_asan ]] ||
        { echo "unknown target: $t (fuzz_ops, fuzz_threads, fuzz_threads_asan)" >&2; exit 2; }
done

export CC=clang-16 CXX=clang++-16
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/test/fuzz/tsan.supp"
jobs=$(($(nproc) < 2 ? $(nproc) : 2))

# configure DIR SANITIZER: only the fuzz targets (and their repros), with their own sanitizer flags.
configure() {
    cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOCK_BUILD_FUZZ=ON -DTOCK_SANITIZE= \
        -DTOCK_FUZZ_SANITIZER="$2" -DTOCK_BUILD_TESTS=OFF -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF \
        -DCMAKE_CXX_COMPILER=clang++-16 >/dev/null
}

build_dir() { [[ $1 == fuzz_threads ]] && echo build/fuzz-tsan || echo build/fuzz-asan; }
sanitizer() { [[ $1 == fuzz_threads ]] && echo thread || echo address,undefined; }
# The executable (and seed corpus) of a target: fuzz_threads_asan is fuzz_threads built in build/fuzz-asan.
binary() { [[ $1 == fuzz_threads_asan ]] && echo fuzz_threads || echo "$1"; }

# TSan's runtime fails with "unexpected memory mapping" under high mmap entropy (as in scripts/test.sh).
launcher() {
    [[ $1 == fuzz_threads ]] || return 0
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        echo "setarch $(uname -m) -R"
    elif [[ -w /proc/sys/vm/mmap_rnd_bits ]] && (($(</proc/sys/vm/mmap_rnd_bits) > 28)); then
        echo 28 >/proc/sys/vm/mmap_rnd_bits
    fi
}

if ((coverage)); then
    dir=build/fuzz-cov
    start=$SECONDS
    configure "$dir" coverage
    cov_targets=()
    for t in "${targets[@]}"; do [[ $t == fuzz_threads_asan ]] || cov_targets+=("$t"); done
    targets=("${cov_targets[@]}")
    cmake --build "$dir" -j"$jobs" --target "${targets[@]}"
    echo "build: $((SECONDS - start)) s"
    rm -f "$dir"/*.profraw
    objects=()
    for t in "${targets[@]}"; do
        corpus=build/fuzz-corpus/$t
        [[ -d $corpus ]] && [[ -n $(ls -A "$corpus") ]] || corpus=test/fuzz/corpus/$t
        echo "=== $t: $(find "$corpus" -type f | wc -l) inputs from $corpus"
        LLVM_PROFILE_FILE="$PWD/$dir/$t-%p.profraw" "$dir/test/fuzz/$t" -runs=0 "$corpus" </dev/null \
            >"$dir/$t.log" 2>&1 || { tail -30 "$dir/$t.log"; exit 1; }
        objects+=(-object "$dir/test/fuzz/$t")
    done
    llvm-profdata-16 merge -sparse "$dir"/*.profraw -o "$dir/fuzz.profdata"
    llvm-cov-16 report "${objects[@]:1}" -instr-profile="$dir/fuzz.profdata" "$PWD/include/tock"
    llvm-cov-16 show "${objects[@]:1}" -instr-profile="$dir/fuzz.profdata" -format=html \
        -output-dir="$dir/html" "$PWD/include/tock" >/dev/null
    echo "line by line: $dir/html/index.html"
    exit 0
fi

mkdir -p build/fuzz-artifacts
status=0 report=()
for t in "${targets[@]}"; do
    dir=$(build_dir "$t")
    echo "=== $t: build ($dir)"
    start=$SECONDS
    configure "$dir" "$(sanitizer "$t")"
    bin=$(binary "$t")
    cmake --build "$dir" -j"$jobs" --target "$bin"
    built=$((SECONDS - start))
    corpus=build/fuzz-corpus/$t
    rm -rf "$corpus"
    mkdir -p "$corpus"
    cp test/fuzz/corpus/"$bin"/* "$corpus"/ 2>/dev/null || true
    read -ra run <<<"$(launcher "$t")"
    log=build/fuzz-artifacts/$t.log
    echo "=== $t: fuzzing for $seconds s (log: $log)"
    start=$SECONDS
    rc=0
    # The outer timeout: libFuzzer's own -timeout handler is not async-signal-safe under TSan and can hang.
    TOCK_FUZZ_FAILED_INPUT="build/fuzz-artifacts/$t-failed-input" \
        timeout -k 10 $((seconds + 120)) "${run[@]}" "$dir/test/fuzz/$bin" "$corpus" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 \
        -rss_limit_mb=2560 -max_len=2048 -artifact_prefix="build/fuzz-artifacts/$t-" </dev/null >"$log" 2>&1 || rc=$?
    ran=$((SECONDS - start))
    # A sanitizer report that did not end the process still fails the run.
    if ((rc == 0)) && grep -qE '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: )|runtime error:' "$log"; then rc=1; fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
    if ((rc == 0)); then
        result=PASS
    else
        result="FAIL (exit $rc)"
        status=1
        grep -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: )|check failed|runtime error:|Test unit written' "$log" | head -10
    fi
    report+=("$t: $result, ${execs:-?} executions in $ran s (${rate:-?} exec/s), ${cov:-cov: ? ft: ?}, corpus $(find "$corpus" -type f | wc -l) inputs, build $built s")
done

echo "=== summary"
printf '%s\n' "${report[@]}"
exit $status
