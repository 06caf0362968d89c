#!/usr/bin/env bash
# The timer bench in instructions: bench/timer_bench's timeouts workload (N=10k requests in flight, 100k
# requests) and its periodic and tasks workloads (N=1000, 100k ticks) on every system, each under callgrind
# with --dump-instr=yes, counting the measured phase only (--toggle-collect='*measured_phase*'). Per run:
# instructions per operation and locked instructions per operation (every executed `lock`-prefixed
# instruction and `xchg` with a memory operand: atomic read-modify-writes, each a full barrier of tens of
# cycles that an instruction count does not show; counted by scripts/locked_instructions.py). Prints, per
# workload and system, the median of RUNS runs and their spread, and for timeouts what each system adds over
# the request with no time limit (no_timeout). Unlike CPU time, the counts do not move with the machine's load.
# Writes bench/results/latest-instructions.csv. Takes about 1.5 minutes with 3 runs (86 s on 2 cores, 2026-12-07).
# Usage: scripts/instructions.sh [--runs=R, default 3] [--no-build]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages "${TOCK_PACKAGES[@]}" valgrind binutils

runs=3 build=1
for arg in "$@"; do
    case $arg in
        --runs=*) runs=${arg#--runs=} ;;
        --no-build) build=0 ;;
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/instructions.sh: unknown argument '$arg' (try --help)" >&2; exit 64 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "scripts/instructions.sh: --runs wants a positive number" >&2; exit 64; }

start=$SECONDS
bin=build/release/bench/timer_bench
if ((build)); then
    echo "== building timer_bench (Release, in build/release)"
    cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build/release -j"$(nproc)" --target timer_bench >/dev/null
fi
[[ -x $bin ]] || { echo "scripts/instructions.sh: no binary at $bin" >&2; exit 1; }

csv=bench/results/latest-instructions.csv
mkdir -p bench/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# workload:N:operations for each workload measured; the systems are those timer_bench --list runs for it.
workloads=(timeouts:10000:100000 periodic:1000:100000 tasks:1000:100000)
: >"$tmp/runs" # workload system run instructions_per_op locked_per_op
for ((r = 1; r <= runs; ++r)); do
    for spec in "${workloads[@]}"; do
        IFS=: read -r w n ops <<<"$spec"
        mapfile -t systems < <("$bin" --list --quick |
            sed -n "s/^--workload=$w --system=\([a-z_]*\) .*/\1/p" | awk '!seen[$0]++')
        for s in "${systems[@]}"; do
            printf '[run %d/%d %4ds] %-8s %-14s ' "$r" "$runs" $((SECONDS - start)) "$w" "$s"
            if ! valgrind --tool=callgrind --dump-instr=yes --toggle-collect='*measured_phase*' \
                --callgrind-out-file="$tmp/cg.out" "$bin" --workload="$w" --system="$s" --n="$n" --ops="$ops" \
                --repeats=1 >/dev/null 2>"$tmp/valgrind.err"; then
                echo "FAILED"
                tail -5 "$tmp/valgrind.err" >&2
                exit 1
            fi
            counts=$(python3 scripts/locked_instructions.py --per="$ops" --values "$tmp/cg.out")
            read -r instr locked <<<"$counts"
            echo "$instr instructions, $locked locked per op"
            echo "$w $s $r $instr $locked" >>"$tmp/runs"
        done
    done
done

# Medians and spreads (min-max) per workload and system, in the order measured; timeouts over no_timeout.
echo "workload,system,n,ops,runs,instructions_per_op,instructions_min,instructions_max,locked_per_op,locked_min,\
locked_max,instructions_over_baseline,locked_over_baseline" >"$csv"
awk -v runs="$runs" -v specs="${workloads[*]}" -v csv="$csv" '
    function median(list, k, v, i, j, t) {
        k = split(list, v, " ")
        for (i = 2; i <= k; ++i)  # insertion sort (mawk has no asort)
            for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        lo[0] = v[1]; hi[0] = v[k]
        return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    BEGIN {
        split(specs, sp, " ")
        for (i in sp) { split(sp[i], f, ":"); size[f[1]] = f[2]; ops[f[1]] = f[3] }
    }
    {
        key = $1 " " $2
        if (!(key in instr)) order[++count] = key
        instr[key] = instr[key] " " $4; locked[key] = locked[key] " " $5
    }
    END {
        for (i = 1; i <= count; ++i) {
            key = order[i]
            mi[key] = median(instr[key]); imin[key] = lo[0]; imax[key] = hi[0]
            ml[key] = median(locked[key]); lmin[key] = lo[0]; lmax[key] = hi[0]
        }
        last = ""
        for (i = 1; i <= count; ++i) {
            key = order[i]; split(key, k, " "); w = k[1]; s = k[2]
            base = w " no_timeout"
            if (w != last) {
                printf "\n%s (N=%d, %d operations; median of %d run(s), min-max):\n", w, size[w], ops[w], runs
                printf "  %-16s %10s %17s %10s %13s", "system", "instr/op", "spread", "locked/op", "spread"
                if (base in mi) printf " %15s %16s", "instr over base", "locked over base"
                printf "\n"
                last = w
            }
            printf "  %-16s %10.1f %17s %10.2f %13s", s, mi[key], sprintf("%.1f-%.1f", imin[key], imax[key]),
                ml[key], sprintf("%.2f-%.2f", lmin[key], lmax[key])
            over_i = over_l = ""
            if (base in mi) {
                over_i = sprintf("%.1f", mi[key] - mi[base]); over_l = sprintf("%.2f", ml[key] - ml[base])
                printf " %15s %16s", (key == base ? "(baseline)" : sprintf("%+.1f", over_i)),
                    (key == base ? "" : sprintf("%+.2f", over_l))
            }
            printf "\n"
            printf "%s,%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%s,%s\n", w, s, size[w], ops[w], runs, mi[key],
                imin[key], imax[key], ml[key], lmin[key], lmax[key], over_i, over_l >>csv
        }
    }' "$tmp/runs"
echo
echo "== done in $((SECONDS - start))s: $csv"
