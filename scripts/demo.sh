#!/usr/bin/env bash
# Build tock in Release (build/release) and run the examples: sleep and attach, then the line-echo server
# under load: the server in the background on 127.0.0.1 (an ephemeral port), the load generator against it
# (2,600 connections of four kinds for 3 s, with short server limits), then SIGINT to the server, which
# prints its counters as it exits; then the Beast HTTP server on tock::beast::tcp_stream: curl, 2 s of wrk
# (100 keep-alive connections), idle and slowloris clients that its limits must close, and its counters.
# Running takes about 10 s once built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" curl wrk

cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release
cmake --build build/release -j"$(nproc)" --target sleep attach server loadgen http_server
for example in sleep attach; do
    echo "== examples/$example"
    "build/release/examples/$example"
done

echo "== examples/server + examples/loadgen"
server_args=(--idle-ms 1000 --request-ms 1500 --write-ms 1000)
loadgen_args=(--active 1000 --idle 1000 --slowloris 500 --nonreading 100 --duration-ms 3000 --interval-ms 200)
server_out=$(mktemp)
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -f "$server_out"
}
trap cleanup EXIT

# start_server NAME ARGS...: examples/NAME in the background; sets server_pid and port, shows its first line.
start_server() {
    local name=$1
    shift
    echo "\$ $name $* &"
    "build/release/examples/$name" "$@" >"$server_out" &
    server_pid=$!
    port=$(wait_for_port "$server_pid" "$server_out")
    [[ -n $port ]] || { echo "$name did not start" >&2; cat "$server_out" >&2; exit 1; }
    head -n 1 "$server_out"
}
# stop_server NAME: SIGINT, then its counters; fails unless it and the load generator before it exited 0.
stop_server() {
    echo "\$ kill -INT $server_pid"
    kill -INT "$server_pid"
    local status=0
    wait "$server_pid" || status=$?
    server_pid=
    tail -n +2 "$server_out"
    echo "loadgen exit status $loadgen_status, $1 exit status $status"
    [[ $loadgen_status -eq 0 && $status -eq 0 ]]
}

start_server server "${server_args[@]}"

echo "\$ loadgen 127.0.0.1:$port ${loadgen_args[*]}"
loadgen_status=0
timeout 30 build/release/examples/loadgen "127.0.0.1:$port" "${loadgen_args[@]}" || loadgen_status=$?

stop_server server

echo "== examples/http_server (tock::beast::tcp_stream) + curl + wrk + examples/loadgen"
http_args=(--stream tock --idle-ms 1000 --header-ms 1000 --body-ms 1000 --write-ms 1000)
start_server http_server "${http_args[@]}"
echo "\$ curl -si http://127.0.0.1:$port/"
curl -si --max-time 5 "http://127.0.0.1:$port/"
echo "\$ wrk -t2 -c100 -d2s http://127.0.0.1:$port/"
timeout 30 wrk -t2 -c100 -d2s "http://127.0.0.1:$port/"
echo "\$ loadgen 127.0.0.1:$port --active 0 --idle 200 --slowloris 100 --nonreading 0 --duration-ms 3000"
loadgen_status=0
timeout 30 build/release/examples/loadgen "127.0.0.1:$port" --active 0 --idle 200 --slowloris 100 --nonreading 0 \
    --duration-ms 3000 --interval-ms 200 || loadgen_status=$?
stop_server http_server
