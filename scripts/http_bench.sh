#!/usr/bin/env bash
# The HTTP bench: examples/http_server (Beast, HTTP/1.1 keep-alive, one thread) on each stream: none (a plain
# socket, no time limits: the baseline), beast (boost::beast::tcp_stream) and tock (tock::beast::tcp_stream),
# loaded by wrk (Debian's) on 127.0.0.1 with 100 and 1000 connections, ROUNDS rounds (default 3) in which the
# streams take turns in a rotating order, so that a drift of the machine hits each alike. Then the memory of an
# idle connection: the server's RSS with 100 idle connections (examples/loadgen) and with 1,100.
# Per run: requests/s and p99 (wrk), the server's CPU per request (its own user + system time). Paired ratios
# per round: what a stream's limits add to a request's CPU over none, tock's against beast's.
# Writes bench/results/latest-http.{csv,txt} (and latest-http.png if gnuplot is installed).
# Usage: scripts/http_bench.sh [ROUNDS] [SECONDS per run, default 5]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" wrk
ensure_packages gnuplot-nox >/dev/null 2>&1 || echo "no gnuplot: no plot" >&2
rounds=${1:-3} seconds=${2:-5}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target http_server loadgen >/dev/null
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

server=build/release/examples/http_server
out=bench/results
csv=$out/latest-http.csv txt=$out/latest-http.txt
mkdir -p "$out"
tmp=$(mktemp -d)
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# start STREAM: the server in the background, with limits that no client of the bench reaches.
start() {
    "$server" --stream "$1" --idle-ms 60000 --header-ms 60000 --body-ms 60000 --write-ms 60000 --stats-ms 100 \
        >"$tmp/server.out" &
    pid=$!
    port=$(wait_for_port "$pid" "$tmp/server.out")
    [[ -n $port ]] || { echo "http_server did not start" >&2; exit 1; }
}
# stop: SIGINT, and the server's counters once it has exited.
stop() {
    kill -INT "$pid"
    wait "$pid"
    pid=
}
counter() { sed -n "s/^$1: //p" "$tmp/server.out"; }
last_rss() { sed -n 's/^stats: .* rss_kib=\([0-9]*\)$/\1/p' "$tmp/server.out" | tail -n 1; }

echo "round,connections,stream,requests_per_s,p99_ms,server_cpu_us_per_request,requests" >"$csv"
streams=(none beast tock)
for ((r = 1; r <= rounds; ++r)); do
    for conns in 100 1000; do
        for ((k = 0; k < 3; ++k)); do
            stream=${streams[(k + r) % 3]}
            start "$stream"
            wrk -t2 -c"$conns" -d"${seconds}s" --latency "http://127.0.0.1:$port/" >"$tmp/wrk.out"
            stop
            rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.out")
            p99=$(awk '$1 == "99%" {v = $2; if (v ~ /us$/) {sub(/us/, "", v); v /= 1000} else if (v ~ /ms$/) {sub(/ms/, "", v)} else if (v ~ /s$/) {sub(/s/, "", v); v *= 1000}; print v}' "$tmp/wrk.out")
            echo "$r,$conns,$stream,$rps,$p99,$(counter cpu_us_per_request),$(counter requests)" | tee -a "$csv"
        done
    done
done

# Idle connections: RSS at 100 and at 1,100 idle connections (loadgen's idle kind connects and sends nothing).
loadgen=build/release/examples/loadgen
idle_lines=()
for stream in "${streams[@]}"; do
    start "$stream"
    "$loadgen" "127.0.0.1:$port" --active 0 --idle 100 --slowloris 0 --nonreading 0 --duration-ms 6000 --quiet \
        >/dev/null 2>&1 &
    a=$!
    sleep 2
    before=$(last_rss)
    "$loadgen" "127.0.0.1:$port" --active 0 --idle 1000 --slowloris 0 --nonreading 0 --duration-ms 3000 --quiet \
        >/dev/null 2>&1 &
    b=$!
    sleep 2
    after=$(last_rss)
    open=$(sed -n 's/^stats: connections=\([0-9]*\) .*/\1/p' "$tmp/server.out" | tail -n 1)
    wait "$a" "$b" || true
    stop
    idle_lines+=("$stream $before $after $open")
done

{
    echo "HTTP bench ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)): scripts/http_bench.sh $rounds $seconds"
    echo "examples/http_server, one thread, keep-alive; wrk -t2 -d${seconds}s; medians of $rounds rounds [min-max]"
    echo
    awk -F, 'NR > 1 { key = $2 "," $3; rps[key, $1] = $4; p99[key, $1] = $5; cpu[key, $1] = $6; rounds = ($1 > rounds ? $1 : rounds) }
    function median(a, n,    i, j, t) { for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    function stat(name, vals, n,    i, c, lo, hi) { lo = hi = vals[1]; for (i = 1; i <= n; ++i) { c[i] = vals[i]; if (vals[i] < lo) lo = vals[i]; if (vals[i] > hi) hi = vals[i] }
                                                   return sprintf("%.3g [%.3g-%.3g]", median(c, n), lo, hi) }
    END {
        printf "| connections | stream | requests/s | p99 ms | server CPU us/request | CPU over none, us | over none: tock/beast |\n|---|---|---|---|---|---|---|\n"
        split("100 1000", conns, " "); split("none beast tock", streams, " ")
        for (ci = 1; ci <= 2; ++ci) for (si = 1; si <= 3; ++si) {
            c = conns[ci]; s = streams[si]; k = c "," s
            delete a; delete b; delete d; delete q
            for (r = 1; r <= rounds; ++r) { a[r] = rps[k, r]; b[r] = p99[k, r]; d[r] = cpu[k, r]
                                             q[r] = cpu[k, r] - cpu[c ",none", r] }
            ratio = "-"
            if (s == "tock") { delete t; for (r = 1; r <= rounds; ++r) t[r] = (cpu[c ",beast", r] - cpu[c ",none", r]) > 0 ? q[r] / (cpu[c ",beast", r] - cpu[c ",none", r]) : 0; ratio = stat("", t, rounds) }
            printf "| %s | %s | %s | %s | %s | %s | %s |\n", c, s, stat("", a, rounds), stat("", b, rounds), stat("", d, rounds), s == "none" ? "-" : stat("", q, rounds), ratio
        }
    }' "$csv"
    echo
    echo "| stream | RSS KiB, 100 idle | RSS KiB, 1,100 idle (open seen) | bytes per idle connection |"
    echo "|---|---|---|---|"
    for line in "${idle_lines[@]}"; do
        read -r s before after open <<<"$line"
        echo "| $s | $before | $after ($open) | $(((after - before) * 1024 / 1000)) |"
    done
} | tee "$txt"

if command -v gnuplot >/dev/null; then
    gnuplot -e "set terminal pngcairo size 800,450 noenhanced; set output '$out/latest-http.png'; set datafile separator ',';
        set title 'HTTP server CPU per request (scripts/http_bench.sh)'; set ylabel 'us per request'; set key bottom right;
        set style data points; set xrange [0.5:6.5]; set xtics ('none 100' 1, 'beast 100' 2, 'tock 100' 3, 'none 1000' 4, 'beast 1000' 5, 'tock 1000' 6);
        plot '$csv' using ((strcol(3) eq 'none' ? 1 : strcol(3) eq 'beast' ? 2 : 3) + (\$2 == 1000 ? 3 : 0)):6 every ::1 pt 7 title 'one run'" 2>/dev/null ||
        echo "gnuplot failed: no plot" >&2
fi
