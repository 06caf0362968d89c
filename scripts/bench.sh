#!/usr/bin/env bash
# Runs tock's benchmark suite (bench/timer_bench.cpp): every configuration in its own process, then a
# table with ratios to asio::steady_timer and plots of ns/op against N.
#
# Usage: scripts/bench.sh [--quick] [--no-build] [--standalone]
#   --quick       the one-minute smoke version: N in {10k, 100k}, 100k operations, no repeats
#                 (writes bench/results/quick.*, leaves latest.* alone)
#   --no-build    use the binary already built
#   --standalone  build tock and the bench on standalone Asio ($TOCK_ASIO_INCLUDE_DIR, default the 1.38.2 in
#                 ../shared/third_party) in build/bench-standalone, and also run bench/pingpong there (which
#                 adds asio::cancel_after per read, 3 runs); writes bench/results/latest-standalone.* (or quick-standalone.*)
# Output: bench/results/latest.csv (one row per configuration), latest.md (the tables and the targets),
#         latest_syscalls.csv (strace counts for the sparse workload), fire.png churn.png touch.png timeouts.png
#         memory.png, latest-server.txt and latest-server.csv (bench/server_bench: CPU ns per request of a
#         line server with 10k connections, about 1.5 minutes).
# The full run takes about 3-4 minutes on a 2-core machine, plus about 75 s for the
# timeouts workload (21 configurations with the untimed baseline; about 75 s on an idle machine, 2026-12-03).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" strace # strace: the sparse workload's syscall counts

quick=0 build=1 flags="" standalone=0
for arg in "$@"; do
    case $arg in
        --quick) quick=1 flags=" --quick" ;;
        --no-build) build=0 ;;
        --standalone) standalone=1 ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/bench.sh: unknown argument '$arg' (try --help)" >&2; exit 64 ;;
    esac
done

start=$SECONDS
results=bench/results
name=latest
((quick)) && name=quick
((standalone)) && name=$name-standalone
build_dir=build/release cmake_args=(-DCMAKE_BUILD_TYPE=Release) asio_dir=""
if ((standalone)); then
    build_dir=build/bench-standalone
    asio_dir=${TOCK_ASIO_INCLUDE_DIR:-$PWD/../shared/third_party/asio-1.38.2/include}
    cmake_args+=(-DTOCK_ASIO=standalone "-DTOCK_ASIO_INCLUDE_DIR=$asio_dir")
fi
mkdir -p "$results"
csv=$results/$name.csv
syscalls=$results/${name}_syscalls.csv
log=$results/$name.log
: >"$log"

# --- Build (Release). Falls back to a hand compile if the CMake project does not build right now.
bin=$build_dir/bench/timer_bench server_bin=$build_dir/bench/server_bench
if ((build)); then
    echo "== building timer_bench (Release, in $build_dir)"
    if cmake -S . -B "$build_dir" "${cmake_args[@]}" >>"$log" 2>&1 &&
        cmake --build "$build_dir" -j2 --target timer_bench pingpong server_bench >>"$log" 2>&1; then
        :
    else
        echo "   the CMake build failed (see $log); compiling by hand"
        bin=build/bench-manual/timer_bench
        mkdir -p build/bench-manual
        manual=()
        ((standalone)) && manual=(-DTOCK_STANDALONE_ASIO "-I$asio_dir")
        g++ -O2 -DNDEBUG -std=c++20 -Iinclude -Itest "${manual[@]}" bench/timer_bench.cpp src/error.cpp -lpthread \
            -o "$bin"
        server_bin=build/bench-manual/server_bench
        g++ -O2 -DNDEBUG -std=c++20 -Iinclude -Itest "${manual[@]}" bench/server_bench.cpp src/error.cpp -lpthread \
            -o "$server_bin" >>"$log" 2>&1 || echo "   bench/server_bench did not compile either (see $log)"
    fi
fi
[[ -x $bin ]] || { echo "scripts/bench.sh: no binary at $bin" >&2; exit 1; }

have_strace=0
command -v strace >/dev/null && have_strace=1
((have_strace)) || echo "   strace not found: the sparse workload's wake-up column stays blank"

# --- Run every configuration in its own process.
read -r load1 _ </proc/loadavg
if awk -v l="$load1" 'BEGIN { exit !(l > 1.5) }'; then
    echo "   warning: load average $load1 on $(nproc) cores: other work is running, the numbers will be noisy"
fi
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -sr), $(nproc) cores, load $load1 at start, $(g++ --version | head -1)"
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') (working tree may differ)"
} >"$results/$name.env"
"$bin" --header >"$csv"
echo "system,epoll_wait,timerfd_settime" >"$syscalls"
list_args=()
((quick)) && list_args=(--quick)
mapfile -t configs < <("$bin" --list "${list_args[@]}")
failed=()
i=0
for cfg in "${configs[@]}"; do
    i=$((i + 1))
    read -ra argv <<<"$cfg"
    printf '[%3d/%d %4ds] %-70s ' "$i" "${#configs[@]}" $((SECONDS - start)) "$cfg"
    if ! out=$(timeout 300 "$bin" "${argv[@]}" 2>>"$log"); then
        echo "FAILED"
        failed+=("$cfg")
        tail -3 "$log" | sed 's/^/      /'
        continue
    fi
    if [[ $cfg == *--workload=check* ]]; then
        echo "ok"
        continue
    fi
    # sparse: count the driver's syscalls between the markers of one more (traced) run.
    if [[ $cfg == *--workload=sparse* ]] && ((have_strace)); then
        trace=$(mktemp)
        if timeout 120 strace -f -qq -o "$trace" -e trace=epoll_wait,epoll_pwait,timerfd_settime,getppid \
            "$bin" "${argv[@]}" --repeats=1 >/dev/null 2>>"$log"; then
            read -r epolls settimes < <(awk '
                /getppid\(/ { inside = !inside; next }
                inside && /epoll_p?wait\(/ { e++ }
                inside && /timerfd_settime\(/ { t++ }
                END { print e + 0, t + 0 }' "$trace")
            system=$(sed -n 's/.*--system=\([a-z_]*\).*/\1/p' <<<"$cfg")
            echo "$system,$epolls,$settimes" >>"$syscalls"
            out=$(awk -F, -v OFS=, -v e="$epolls" '{ $9 = e; print }' <<<"$out")
        fi
        rm -f "$trace"
    fi
    echo "$out" >>"$csv"
    echo "$out" | cut -d, -f4-10 | sed 's/,,*/ /g'
done

# --- Report.
report=$results/$name.md
{
    echo "<!-- scripts/bench.sh$flags: $(head -1 "$results/$name.env" | sed 's/^# //') -->"
    "$bin" --report="$csv" --syscalls="$syscalls"
} >"$report"
echo
cat "$report"

# --- Plots (ns/op and bytes/timer against N).
if ! command -v gnuplot >/dev/null; then
    echo "== installing gnuplot-nox for the plots"
    ensure_packages gnuplot-nox >>"$log" 2>&1 || true
fi
if command -v gnuplot >/dev/null; then
    plots=()
    for spec in "fire:4:CPU ns per timer" "churn:4:CPU ns per cancel+reschedule" \
        "touch:4:CPU ns per touch" "timeouts:4:CPU ns per request" "memory:5:bytes per pending timer"; do
        IFS=: read -r w col label <<<"$spec"
        systems=$(awk -F, -v w="$w" '$1 == w && !seen[$2]++ { printf "%s ", $2 }' "$csv")
        [[ -n $systems ]] || continue
        png=$results/$w.png
        [[ $name != latest ]] && png=$results/${name#latest-}-$w.png
        if gnuplot -e "csv='$csv'; w='$w'; col=$col; systems='$systems'; ylabel='$label'; out='$png'" \
            bench/plot.gp >>"$log" 2>&1; then
            plots+=("$png")
        else
            echo "   gnuplot failed for $w (see $log)"
        fi
    done
    echo "== plots: ${plots[*]:-none}"
else
    echo "== gnuplot is not available: skipping the plots"
fi

if ((standalone)); then
    echo "== bench/pingpong on $(grep -o 'Asio [0-9.]*' <("$build_dir/bench/pingpong" 1000) || echo '?'), 3 runs"
    : >"$results/$name-pingpong.txt"
    for run in 1 2 3; do
        "$build_dir/bench/pingpong" >>"$results/$name-pingpong.txt" || failed+=("pingpong run $run")
    done
    cat "$results/$name-pingpong.txt"
fi

# The server bench: every mode in turn, 3 runs each (--quick: 1), at its defaults (a line every 250 ms per
# connection, a rate the generator sustains; about 1.5 minutes).
if [[ -x $server_bin ]]; then
    server_runs=3
    ((quick)) && server_runs=1
    echo "== bench/server_bench, $server_runs run(s) per mode"
    timeout 600 "$server_bin" --runs=$server_runs --csv="$results/$name-server.csv" >"$results/$name-server.txt" \
        2>>"$log" || failed+=("server_bench (see $log)")
    cat "$results/$name-server.txt"
else
    echo "   no $server_bin (the CMake build failed?): skipping the server bench"
    failed+=("server_bench (not built)")
fi

elapsed=$((SECONDS - start))
echo "== done in ${elapsed}s: $csv, $report"
if ((${#failed[@]})); then
    echo "== ${#failed[@]} configuration(s) FAILED (see $log):" >&2
    printf '   %s\n' "${failed[@]}" >&2
    exit 1
fi
