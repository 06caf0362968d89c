#!/usr/bin/env bash
# The HTTP bench in instructions: examples/http_server on each stream (none, beast, tock) run under callgrind
# while wrk loads it (100 connections, one thread, 127.0.0.1), ROUNDS rounds in a rotating order. Per run: the
# server's instructions per request, all of them (start-up included, a few thousand per request less as the
# run grows), and its locked instructions per request (atomic read-modify-writes: `lock`-prefixed instructions
# and xchg with memory, counted by scripts/locked_instructions.py from callgrind's --dump-instr=yes profile);
# per round: what beast's and tock's limits add over none, and tock's share of beast's. Counts do not move with
# the machine's load as CPU time does, so this ranks changes that CPU time cannot see; the figures in the
# README come from scripts/http_bench.sh. Writes bench/results/latest-http-instructions.csv.
# Usage: scripts/http_instructions.sh [ROUNDS, default 3] [SECONDS per run, default 5]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" wrk valgrind binutils
rounds=${1:-3} seconds=${2:-5}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target http_server >/dev/null

server=build/release/examples/http_server
csv=bench/results/latest-http-instructions.csv
mkdir -p bench/results
tmp=$(mktemp -d)
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "round,stream,requests,instructions,instructions_per_request,locked,locked_per_request" >"$csv"
streams=(none beast tock)
for ((r = 1; r <= rounds; ++r)); do
    declare -A per=() locked_per=()
    for ((k = 0; k < 3; ++k)); do
        stream=${streams[(k + r) % 3]}
        valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$tmp/cg.out" "$server" --stream "$stream" \
            >"$tmp/server.out" 2>"$tmp/valgrind.err" &
        pid=$!
        port=$(wait_for_port "$pid" "$tmp/server.out")
        [[ -n $port ]] || { echo "http_server did not start under valgrind" >&2; exit 1; }
        wrk -t1 -c100 -d"${seconds}s" "http://127.0.0.1:$port/" >/dev/null
        kill -INT "$pid"
        wait "$pid"
        pid=
        requests=$(sed -n 's/^requests: //p' "$tmp/server.out")
        counts=$(python3 scripts/locked_instructions.py --values "$tmp/cg.out")
        read -r total locked <<<"$counts"
        per[$stream]=$((total / requests))
        locked_per[$stream]=$(awk -v l="$locked" -v n="$requests" 'BEGIN { printf "%.2f", l / n }')
        echo "$r,$stream,$requests,$total,${per[$stream]},$locked,${locked_per[$stream]}" | tee -a "$csv"
    done
    awk -v n="${per[none]}" -v b="${per[beast]}" -v t="${per[tock]}" -v r="$r" -v ln="${locked_per[none]}" \
        -v lb="${locked_per[beast]}" -v lt="${locked_per[tock]}" 'BEGIN {
        printf "round %d: over none, beast +%d, tock +%d instructions per request: tock/beast %.2f;", r, b - n, t - n,
            (t - n) / (b - n)
        printf " locked per request: none %.2f, beast %+.2f, tock %+.2f\n", ln, lb - ln, lt - ln }'
done
