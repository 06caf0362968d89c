#!/usr/bin/env bash
# What tock costs a user at build time: compiles the programs of bench/compile_cost/ as a user would (one
# `g++ -std=c++20 -O2` per program, compiling and linking, tock's ones against libtock), each with tock and with
# Asio (Beast) alone, and prints compile CPU time (user + sys: the median of RUNS compiles, interleaved; robust
# against other jobs on the machine; wall time beside it), stripped size and text size, with the ratios against
# the targets (PASS or MISS). It also runs every program and checks that each pair printed the same lines. A
# measurement run by hand: it fails only if a build or a run fails.
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

# compile_once NAME ARGS...: compiles and links $src/NAME.cpp once; appends its times to cpus[NAME], walls[NAME].
declare -A cpu wall stripped text cpus walls
compile_once() {
    local name=$1 t user sys elapsed
    shift
    if ! t=$(/usr/bin/time -f '%U %S %e' "$cxx" -std=c++20 -O2 -Iinclude "$src/$name.cpp" -o "$out/bin/$name" \
        "$@" -pthread 2>&1 >/dev/null); then
        echo "$name: the build failed:" >&2
        echo "$t" >&2
        exit 1
    fi
    read -r user sys elapsed <<<"$(tail -n 1 <<<"$t")"
    cpus[$name]+="$(echo "$user + $sys" | bc) " walls[$name]+="$elapsed "
}

# summarize NAME: the medians of its runs in cpu[NAME] and wall[NAME], and its sizes.
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | sed -n "$(((runs + 1) / 2))p"; }
summarize() {
    local name=$1
    cpu[$name]=$(median "${cpus[$name]}")
    wall[$name]=$(median "${walls[$name]}")
    strip -o "$out/bin/$name.stripped" "$out/bin/$name"
    stripped[$name]=$(stat -c %s "$out/bin/$name.stripped")
    text[$name]=$(size "$out/bin/$name" | awk 'NR == 2 { print $1 }')
    echo "  $name: cpu ${cpus[$name]}s, wall ${walls[$name]}s" >&2
}

# same_output TOCK ASIO: runs both; they must succeed and print the same lines.
same_output() {
    local a b
    a=$("$out/bin/$1") || { echo "$1 failed: $a" >&2; exit 1; }
    b=$("$out/bin/$2") || { echo "$2 failed: $b" >&2; exit 1; }
    [[ $a == "$b" ]] || { printf '%s and %s differ:\n%s\n--\n%s\n' "$1" "$2" "$a" "$b" >&2; exit 1; }
}

# The runs are interleaved (tock, Asio, tock, Asio...) so that a machine slowing down or speeding up during the
# measurement moves both sides alike.
echo "compiling each program $runs times, interleaved, with $($cxx --version | head -n 1)" >&2
for ((i = 0; i < runs; i++)); do
    compile_once minimal_tock "$libtock"
    compile_once minimal_asio
    compile_once beast_tock "$libtock"
    compile_once beast_asio
done
for name in minimal_tock minimal_asio beast_tock beast_asio; do summarize "$name"; done
same_output minimal_tock minimal_asio
same_output beast_tock beast_asio

# paired TOCK ASIO: the ratio of each run's compile CPU time (run i of one over run i of the other, compiled one
# after the other), as "median min max": what the verdict reads, the machine's drift cancelled pair by pair.
paired() {
    local -a a b r=()
    read -ra a <<<"${cpus[$1]}"
    read -ra b <<<"${cpus[$2]}"
    for ((i = 0; i < runs; i++)); do r+=("$(echo "scale=4; ${a[i]} / ${b[i]}" | bc)"); done
    printf '%s\n' "${r[@]}" | sort -n | awk -v m=$(((runs + 1) / 2)) '{ v[NR] = $1 } END { print v[m], v[1], v[NR] }'
}

# row WHAT TOCK ASIO TARGET_PERCENT [RATIOS]: one line of the table; TARGET_PERCENT empty: no target. RATIOS
# ("median min max", from paired) replaces TOCK / ASIO as the ratio, and its range is printed.
row() {
    local ratio verdict="" range=""
    ratio=$(echo "scale=4; $2 / $3" | bc)
    if [[ -n ${5:-} ]]; then
        read -r ratio lo hi <<<"$5"
        range=$(printf ' (%+.1f%% to %+.1f%%)' "$(echo "($lo - 1) * 100" | bc -l)" "$(echo "($hi - 1) * 100" | bc -l)")
    fi
    if [[ -n $4 ]]; then
        verdict=$(echo "scale=4; $ratio <= 1 + $4 / 100" | bc)
        verdict=$([[ $verdict == 1 ]] && echo "PASS (<= +$4%)" || echo "MISS (> +$4%)")
    fi
    printf '%-28s %12s %12s %+8.1f%%  %s%s\n' "$1" "$2" "$3" "$(echo "($ratio - 1) * 100" | bc -l)" "$verdict" "$range"
}

echo "compile cpu: medians of the runs; tock +: the median of the paired runs' ratios (their range in brackets)"
printf '%-28s %12s %12s %9s  %s\n' "" "tock" "asio alone" "tock +" "target"
row "minimal: compile cpu s" "${cpu[minimal_tock]}" "${cpu[minimal_asio]}" 15 "$(paired minimal_tock minimal_asio)"
row "minimal: compile wall s" "${wall[minimal_tock]}" "${wall[minimal_asio]}" ""
row "minimal: stripped bytes" "${stripped[minimal_tock]}" "${stripped[minimal_asio]}" 20
row "minimal: text bytes" "${text[minimal_tock]}" "${text[minimal_asio]}" ""
row "beast: compile cpu s" "${cpu[beast_tock]}" "${cpu[beast_asio]}" 5 "$(paired beast_tock beast_asio)"
row "beast: compile wall s" "${wall[beast_tock]}" "${wall[beast_asio]}" ""
row "beast: stripped bytes" "${stripped[beast_tock]}" "${stripped[beast_asio]}" ""
row "beast: text bytes" "${text[beast_tock]}" "${text[beast_asio]}" ""
