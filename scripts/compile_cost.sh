#!/usr/bin/env bash
# What tock costs a user at build time: compiles the programs of bench/compile_cost/ as a user would (one
# `g++ -std=c++20 -O2` per program, compiling and linking, tock's ones against libtock), each with tock and with
# Asio (Beast) alone, and prints compile CPU time (user + sys: the median of RUNS compiles; robust against other
# jobs on the machine; wall time beside it), stripped size and text size, with the ratios against the targets
# (PASS or MISS). It also runs every program and checks that each pair printed the same lines. A measurement run
# by hand: it fails only if a build or a run fails.
# Usage: scripts/compile_cost.sh [RUNS]   (default 3; CXX=clang++-16 to measure another compiler)
# libtock is built first, in build/compile-cost (Release, the library alone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" time bc binutils # /usr/bin/time, bc, strip and size
runs=${1:-3}
cxx=${CXX:-g++}
src=bench/compile_cost
out=build/compile-cost
mkdir -p "$out/bin"

cmake -S . -B "$out/lib" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DTOCK_BUILD_TESTS=OFF \
    -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF >"$out/lib.log" 2>&1 &&
    cmake --build "$out/lib" --target tock -j2 >>"$out/lib.log" 2>&1 || {
    cat "$out/lib.log" >&2
    exit 1
}
libtock=$out/lib/libtock.a

# measure NAME ARGS...: compiles $src/NAME.cpp RUNS times; sets cpu[NAME], wall[NAME], stripped[NAME], text[NAME].
declare -A cpu wall stripped text
measure() {
    local name=$1 t cpus=() walls=()
    shift
    for ((i = 0; i < runs; i++)); do
        if ! t=$(/usr/bin/time -f '%U %S %e' "$cxx" -std=c++20 -O2 -Iinclude "$src/$name.cpp" -o "$out/bin/$name" \
            "$@" -pthread 2>&1 >/dev/null); then
            echo "$name: the build failed:" >&2
            echo "$t" >&2
            exit 1
        fi
        t=$(tail -n 1 <<<"$t")
        read -r user sys elapsed <<<"$t"
        cpus+=("$(echo "$user + $sys" | bc)") walls+=("$elapsed")
    done
    cpu[$name]=$(printf '%s\n' "${cpus[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
    wall[$name]=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
    strip -o "$out/bin/$name.stripped" "$out/bin/$name"
    stripped[$name]=$(stat -c %s "$out/bin/$name.stripped")
    text[$name]=$(size "$out/bin/$name" | awk 'NR == 2 { print $1 }')
    echo "  $name: cpu ${cpus[*]} s, wall ${walls[*]} s" >&2
}

# same_output TOCK ASIO: runs both; they must succeed and print the same lines.
same_output() {
    local a b
    a=$("$out/bin/$1") || { echo "$1 failed: $a" >&2; exit 1; }
    b=$("$out/bin/$2") || { echo "$2 failed: $b" >&2; exit 1; }
    [[ $a == "$b" ]] || { printf '%s and %s differ:\n%s\n--\n%s\n' "$1" "$2" "$a" "$b" >&2; exit 1; }
}

echo "compiling each program $runs times with $($cxx --version | head -n 1)" >&2
measure minimal_tock "$libtock"
measure minimal_asio
measure beast_tock "$libtock"
measure beast_asio
same_output minimal_tock minimal_asio
same_output beast_tock beast_asio

# row WHAT TOCK ASIO TARGET_PERCENT: one line of the table; TARGET_PERCENT empty: no target.
row() {
    local ratio verdict=""
    ratio=$(echo "scale=4; $2 / $3" | bc)
    if [[ -n $4 ]]; then
        verdict=$(echo "scale=4; $ratio <= 1 + $4 / 100" | bc)
        verdict=$([[ $verdict == 1 ]] && echo "PASS (<= +$4%)" || echo "MISS (> +$4%)")
    fi
    printf '%-28s %12s %12s %+8.1f%%  %s\n' "$1" "$2" "$3" "$(echo "($ratio - 1) * 100" | bc -l)" "$verdict"
}

printf '%-28s %12s %12s %9s  %s\n' "" "tock" "asio alone" "tock +" "target"
row "minimal: compile cpu s" "${cpu[minimal_tock]}" "${cpu[minimal_asio]}" 15
row "minimal: compile wall s" "${wall[minimal_tock]}" "${wall[minimal_asio]}" ""
row "minimal: stripped bytes" "${stripped[minimal_tock]}" "${stripped[minimal_asio]}" 20
row "minimal: text bytes" "${text[minimal_tock]}" "${text[minimal_asio]}" ""
row "beast: compile cpu s" "${cpu[beast_tock]}" "${cpu[beast_asio]}" 5
row "beast: compile wall s" "${wall[beast_tock]}" "${wall[beast_asio]}" ""
row "beast: stripped bytes" "${stripped[beast_tock]}" "${stripped[beast_asio]}" ""
row "beast: text bytes" "${text[beast_tock]}" "${text[beast_asio]}" ""
