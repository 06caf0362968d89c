#!/usr/bin/env bash
# Soak test: examples/server under examples/loadgen for a while, connections churning, watching for leaks.
#
#   scripts/soak.sh [MINUTES | SECONDSs] [--save] [--no-build]
#
# MINUTES defaults to 1 (fractions allowed: 0.5); `90s` means 90 seconds; at least 30 s. CI runs
# `scripts/soak.sh 1` (about 1.5 min once built, plus about 40 s to build the two examples on 2 cores).
#
# What it does:
#   - builds the server and loadgen examples in Release into build/soak (tests and benchmarks off), unless
#     --no-build;
#   - starts the server on 127.0.0.1 (an ephemeral port) with short limits (idle 1 s, request 1.5 s, write
#     1 s) and --stats-ms 1000, and loadgen with --churn for the whole run: 400 active, 300 idle,
#     200 slowloris and 50 non-reading connections open at a time (950), every one that the server closes
#     (or an active one whose 1.5-4.5 s lifetime is up) replaced by a new one of its kind: about 600 new
#     connections a second;
#   - every SAMPLE s (2 s, up to 5 s for long runs: a run of about 30 samples or more) samples the server's
#     RSS (VmRSS in /proc/PID/status), its open fds (entries of /proc/PID/fd), and its pending tock timers
#     and open connections (its latest `stats:` line), into build/soak/soak.csv
#     (t_s,rss_kib,fds,pending_timers,connections,accepted);
#   - when loadgen is done, waits for the server to have no connection left, samples it once more, stops it
#     with SIGINT and reads its final counters;
#   - plots the curves into build/soak/soak.png when gnuplot is there (no plot, no failure, otherwise) and
#     writes a summary to build/soak/soak.txt; with --save, copies the three to bench/results/soak.*.
#
# Growth rule (fails with a message naming the metric): warm-up is the first max(10 s, 20% of the run); the
# samples after it (at least 6) are cut in thirds, and a metric keeps growing when the max of the last third
# exceeds the max of the first third by more than its tolerance:
#     RSS             10% + 2 MiB
#     open fds         5% + 8
#     pending timers   5% + 16
# (maxima, not means, because connections come and go in waves: in healthy runs the thirds' maxima of fds
# and pending timers differ by up to about 25, RSS not at all). In 60 s this catches a leak of 256 bytes per
# connection (RSS), or of a timer or an fd every 100 connections (about 6 a second). It also fails, exactly,
# when once loadgen is done and the server has closed every connection the server holds more fds than
# before the load or has pending timers; when the server's final pending_timers is not 0, or it does not exit
# within 20 s of SIGINT, or exits non-zero; when loadgen exits non-zero (a connection did not behave as
# expected); or when the server dies.
#
# Non-interactive (no stdin needed), 127.0.0.1 only, at most 950 client connections, stops by itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    echo "usage: scripts/soak.sh [MINUTES | SECONDSs] [--save] [--no-build]" >&2
    exit 2
}

duration_s=60
save=0
build=1
for arg in "$@"; do
    case $arg in
        --save) save=1 ;;
        --no-build) build=0 ;;
        -h | --help) usage ;;
        *s)
            [[ ${arg%s} =~ ^[0-9]+$ ]] || usage
            duration_s=${arg%s}
            ;;
        *)
            [[ $arg =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage
            duration_s=$(awk -v m="$arg" 'BEGIN { printf "%d", m * 60 + 0.5 }')
            ;;
    esac
done
if ((duration_s < 30)); then
    echo "soak: the run must last at least 30 s" >&2
    exit 2
fi

out=build/soak
bin=$out/examples
source scripts/deps.sh
if ((build)); then
    ensure_packages "${TOCK_PACKAGES[@]}"
    if [[ ! -f $out/CMakeCache.txt ]]; then
        cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DTOCK_BUILD_TESTS=OFF -DTOCK_BUILD_BENCH=OFF
    fi
    cmake --build "$out" -j"$(nproc)" --target server loadgen
fi
for b in server loadgen; do
    [[ -x $bin/$b ]] || { echo "soak: $bin/$b is missing (run without --no-build)" >&2; exit 2; }
done
mkdir -p "$out"

sample_s=$((duration_s / 30))
((sample_s < 2)) && sample_s=2
((sample_s > 5)) && sample_s=5
warmup_s=$((duration_s / 5))
((warmup_s < 10)) && warmup_s=10

server_args=(--idle-ms 1000 --request-ms 1500 --write-ms 1000 --stats-ms 1000)
loadgen_args=(--active 400 --idle 300 --slowloris 200 --nonreading 50 --interval-ms 200 --churn
    --lifetime-ms 3000 --duration-ms $((duration_s * 1000)))

csv=$out/soak.csv
png=$out/soak.png
summary=$out/soak.txt
server_out=$out/server.out
loadgen_out=$out/loadgen.out
loadgen_log=$out/loadgen.log
rm -f "$csv" "$png" "$summary"

server_pid=
loadgen_pid=
cleanup() {
    local pid
    [[ -n $loadgen_pid$server_pid ]] || return 0
    for pid in $loadgen_pid $server_pid; do
        kill -INT "$pid" 2>/dev/null || true
    done
    sleep 1
    for pid in $loadgen_pid $server_pid; do
        kill -KILL "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

# The server's latest stats line, as "connections pending_timers accepted" (empty if none yet).
latest_stats() {
    grep '^stats:' "$server_out" | tail -n 1 |
        sed -n 's/.* connections=\([0-9]*\) pending_timers=\([0-9]*\) accepted=\([0-9]*\).*/\1 \2 \3/p'
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status"; }
fd_count() {
    local fds=("/proc/$server_pid/fd/"*)
    echo "${#fds[@]}"
}
now_s() { date +%s.%N; }

echo "soak: ${duration_s} s, a sample every ${sample_s} s, warm-up ${warmup_s} s; output in $out/"
echo "\$ server ${server_args[*]} &"
"$bin/server" "${server_args[@]}" >"$server_out" 2>"$out/server.err" </dev/null &
server_pid=$!
port=$(wait_for_port "$server_pid" "$server_out")
if [[ -z $port ]]; then
    echo "soak: FAIL: the server did not start" >&2
    cat "$server_out" "$out/server.err" >&2
    exit 1
fi
sleep 1.2 # its first stats line
idle_fds=$(fd_count)
idle_rss=$(rss_kib)
echo "server pid $server_pid on 127.0.0.1:$port: before the load, $idle_fds fds, RSS $idle_rss KiB"

echo "\$ loadgen 127.0.0.1:$port ${loadgen_args[*]} &"
timeout $((duration_s + 60)) "$bin/loadgen" "127.0.0.1:$port" "${loadgen_args[@]}" \
    >"$loadgen_out" 2>"$loadgen_log" </dev/null &
loadgen_pid=$!
start=$(now_s)

echo "t_s,rss_kib,fds,pending_timers,connections,accepted" >"$csv"
failures=()
tick=1
while kill -0 "$loadgen_pid" 2>/dev/null; do
    # Sleep until the next tick (start + tick * sample_s), or until loadgen is done.
    while kill -0 "$loadgen_pid" 2>/dev/null &&
        awk -v s="$start" -v n="$(now_s)" -v t="$((tick * sample_s))" 'BEGIN { exit !(n - s < t) }'; do
        sleep 0.2
    done
    kill -0 "$loadgen_pid" 2>/dev/null || break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        failures+=("the server died during the run")
        break
    fi
    read -r conns pending accepted <<<"$(latest_stats)" || true
    line="$((tick * sample_s)),$(rss_kib),$(fd_count),${pending:-},${conns:-},${accepted:-}"
    echo "$line" >>"$csv"
    echo "  sample $line" | sed 's/,/ /g'
    tick=$((tick + 1))
done
loadgen_status=0
wait "$loadgen_pid" || loadgen_status=$?
loadgen_pid=
elapsed=$(awk -v s="$start" -v n="$(now_s)" 'BEGIN { printf "%.1f", n - s }')
echo "loadgen exited with status $loadgen_status after $elapsed s"

# After the load: every connection closed (the server notices within its limits), then one more sample.
after_fds=- after_pending=- after_conns=-
if kill -0 "$server_pid" 2>/dev/null; then
    for _ in $(seq 50); do # up to 10 s
        sleep 0.2
        read -r after_conns after_pending _ <<<"$(latest_stats)" || true
        [[ ${after_conns:-} == 0 ]] && break
    done
    sleep 1.1 # a stats line that comes after the last close
    read -r after_conns after_pending _ <<<"$(latest_stats)" || true
    after_fds=$(fd_count)
    after_rss=$(rss_kib)
    echo "server after the load: $after_conns connections, $after_pending pending timers, $after_fds fds" \
        "(before: $idle_fds), RSS $after_rss KiB"
    [[ $after_conns == 0 ]] || failures+=("after the load the server still has $after_conns connections")
    [[ $after_pending == 0 ]] || failures+=("after the load the server still has $after_pending pending timers")
    ((after_fds <= idle_fds)) ||
        failures+=("after the load the server holds $after_fds fds, $((after_fds - idle_fds)) more than before it")

    kill -INT "$server_pid"
    server_status=0
    for _ in $(seq 200); do # up to 20 s to drain
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        failures+=("the server did not exit within 20 s of SIGINT")
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" || server_status=$?
    server_pid=
    final_pending=$(sed -n 's/^pending_timers: \([0-9]*\)$/\1/p' "$server_out")
    [[ $final_pending == 0 ]] || failures+=("the server's final pending_timers is '${final_pending}', not 0")
    ((server_status == 0)) || failures+=("the server exited with status $server_status")
else
    wait "$server_pid" || true
    server_pid=
    failures+=("the server died during the run")
fi
((loadgen_status == 0)) || failures+=("loadgen exited with status $loadgen_status (see $loadgen_out)")

# The growth rule (see the top of this file), and the summary: per metric, min/max over the whole run and
# after warm-up, the first and last post-warm-up samples, and the maxima of the first and last thirds.
analysis=$(awk -F, -v warmup="$warmup_s" '
    NR == 1 { next }
    {
        n_all++
        for (m = 2; m <= 5; m++) {
            if (n_all == 1 || $m < lo_all[m]) lo_all[m] = $m
            if (n_all == 1 || $m > hi_all[m]) hi_all[m] = $m
        }
        if ($1 >= warmup) { n++; for (m = 2; m <= 5; m++) v[m, n] = $m }
    }
    END {
        name[2] = "rss_kib"; name[3] = "fds"; name[4] = "pending_timers"; name[5] = "connections"
        pct[2] = 0.10; add[2] = 2048; pct[3] = 0.05; add[3] = 8; pct[4] = 0.05; add[4] = 16
        printf "%-15s %9s %9s | %9s %9s %9s %9s | %11s %11s %9s\n", "metric", "min", "max", "post-wu", "min",
               "max", "end", "1st3 max", "last3 max", "limit"
        if (n < 6) { print "FAIL: only " n " samples after the warm-up, 6 needed"; exit }
        third = int(n / 3)
        for (m = 2; m <= 5; m++) {
            lo = hi = v[m, 1]; f = l = -1
            for (i = 1; i <= n; i++) {
                if (v[m, i] < lo) lo = v[m, i]
                if (v[m, i] > hi) hi = v[m, i]
                if (i <= third && v[m, i] > f) f = v[m, i]
                if (i > n - third && v[m, i] > l) l = v[m, i]
            }
            limit = (m in pct) ? sprintf("%d", f * (1 + pct[m]) + add[m]) : "-"
            printf "%-15s %9d %9d | %9d %9d %9d %9d | %11d %11d %9s\n", name[m], lo_all[m], hi_all[m], v[m, 1],
                   lo, hi, v[m, n], f, l, limit
            if ((m in pct) && l > limit + 0)
                grow[m] = sprintf("GROWTH: %s keeps growing: max of the last third %d > %d (max of the first third %d + %d%% + %d)",
                                  name[m], l, limit, f, pct[m] * 100, add[m])
        }
        for (m = 2; m <= 4; m++) if (m in grow) print grow[m]
        printf "(%d samples, %d after the warm-up of %d s, thirds of %d)\n", n_all, n, warmup, third
    }' "$csv")
while IFS= read -r line; do
    case $line in
        GROWTH:*) failures+=("${line#GROWTH: }") ;;
        FAIL:*) failures+=("${line#FAIL: }") ;;
    esac
done <<<"$analysis"

verdict="PASS"
((${#failures[@]} == 0)) || verdict="FAIL"
{
    echo "soak $(date -u '+%Y-%m-%d %H:%M UTC'): ${duration_s} s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
        "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "server ${server_args[*]}"
    echo "loadgen ${loadgen_args[*]}"
    echo "before the load: $idle_fds fds, RSS $idle_rss KiB; after it: ${after_fds} fds," \
        "${after_pending} pending timers, ${after_conns} connections"
    echo
    echo "$analysis" | grep -v '^GROWTH:\|^FAIL:' || true
    echo
    grep -v '^stats:\|^listening' "$server_out" | sed 's/^/server final /' || true
    cat "$loadgen_out"
    echo
    for f in "${failures[@]}"; do echo "FAIL: $f"; done
    echo "soak: $verdict"
} >"$summary"

if command -v gnuplot >/dev/null 2>&1 && [[ $(wc -l <"$csv") -gt 2 ]]; then
    gnuplot <<EOF || echo "soak: gnuplot failed, no plot" >&2
set terminal pngcairo size 1200,800 font ",10" noenhanced
set output "$png"
set datafile separator ","
set key off
set grid
set yrange [0:*]
set xlabel "s"
set multiplot layout 2,2 title "scripts/soak.sh: examples/server under loadgen --churn, ${duration_s} s ($verdict); warm-up shaded"
set object 1 rect from 0, graph 0 to $warmup_s, graph 1 behind fillcolor rgb "#eeeeee" fillstyle solid noborder
set title "RSS (MiB)"
plot "$csv" using 1:(\$2/1024) skip 1 with linespoints pt 7 ps 0.4 lc rgb "#1f77b4"
set title "open fds"
plot "$csv" using 1:3 skip 1 with linespoints pt 7 ps 0.4 lc rgb "#d62728"
set title "pending tock timers"
plot "$csv" using 1:4 skip 1 with linespoints pt 7 ps 0.4 lc rgb "#2ca02c"
set title "open connections (server)"
plot "$csv" using 1:5 skip 1 with linespoints pt 7 ps 0.4 lc rgb "#7f7f7f"
unset multiplot
EOF
fi

cat "$summary"
[[ -f $png ]] && echo "plot: $png"
if ((save)); then
    cp "$csv" bench/results/soak.csv
    cp "$summary" bench/results/soak.txt
    [[ -f $png ]] && cp "$png" bench/results/soak.png
    echo "saved to bench/results/soak.{csv,txt$([[ -f $png ]] && echo ,png)}"
fi
[[ $verdict == PASS ]]
