#!/usr/bin/env python3
"""Locked instructions in a callgrind profile: how many atomic read-modify-write instructions ran, and where.

Usage: scripts/locked_instructions.py [--per=N] [--functions[=K]] [--values] [--check] CALLGRIND_OUT

  --per=N          also print both counts divided by N (the operations of the run: 100k, 1M and 5000 are accepted)
  --functions[=K]  the K functions (default 15) executing the most locked instructions, with their counts (per N;
                   names cut at 150 characters)
  --values         print only "INSTRUCTIONS LOCKED" (per N if --per is given) on one line, for scripts
  --check          also report executed addresses that are not the start of a disassembled instruction (should
                   be none: a sign that the profile and the binaries on disk do not match), and every object
                   objdump cannot read (such as ??? for code without a file; otherwise only above 1% of the total)

The profile must come from `valgrind --tool=callgrind --dump-instr=yes` (per-instruction costs); add
`--toggle-collect='*measured_phase*'` to count the bench's measured phase only. Locked instructions are every
executed instruction carrying a `lock` prefix and every `xchg` with a memory operand (locked by the CPU
whether prefixed or not): each is an atomic read-modify-write and a full barrier on x86, costing tens of
cycles that an instruction count does not show. Each object file of the profile is disassembled with objdump
(binutils); callgrind writes addresses relative to the object, which are the addresses objdump prints.
"""
import collections
import os
import re
import subprocess
import sys

# Instruction prefixes objdump prints before the mnemonic (AT&T syntax).
PREFIXES = {"lock", "xacquire", "xrelease", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd",
            "data16", "data32", "addr16", "addr32", "cs", "ds", "es", "fs", "gs", "ss", "rex", "rex.w"}


class Profile:
    """Self cost of the first event (Ir) per (object, address), and the function of each address."""

    def __init__(self):
        self.cost = collections.Counter()   # (object, address) -> executed count
        self.function = {}                  # (object, address) -> function name
        self.totals = None                  # the file's own total of the first event ("totals:"), if it gives one


def parse_number(token, previous):
    """One position column: absolute (hex or decimal), relative (+N, -N) or unchanged (*)."""
    if token == "*":
        return previous
    if token[0] in "+-":
        return previous + int(token)
    return int(token, 0)


def read_profile(path):
    prof = Profile()
    names = {"ob": {}, "fl": {}, "fn": {}}  # compressed names: (id) -> name, one table per kind
    kind_table = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl", "fe": "fl",
                  "cfi": "fl", "cfl": "fl"}
    positions = None
    obj = fn = None
    last = None           # previous value of each position column
    inclusive = False     # the next cost line is a call's inclusive cost, not the instruction's own
    position_only = False  # the next line is a jump's source position, with no cost
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                toks = line.split()
                if positions is None:
                    sys.exit(f"{path}: a cost line before the positions: line")
                pos = [parse_number(t, p) for t, p in zip(toks[:len(positions)], last)]
                last = pos + last[len(pos):]
                if position_only:
                    position_only = False
                    continue
                if inclusive:
                    inclusive = False
                    continue
                ir = int(toks[len(positions)]) if len(toks) > len(positions) else 0
                key = (obj, last[0])
                prof.cost[key] += ir
                prof.function[key] = fn
                continue
            head, sep, rest = line.partition("=")
            if sep and head in kind_table:
                m = name_re.match(rest)
                if m:  # "(id) name" defines a compressed name, "(id)" refers to it
                    ident, name = m.groups()
                    table = names[kind_table[head]]
                    if name is not None:
                        table[ident] = name
                    name = table.get(ident, f"({ident})")
                else:
                    name = rest
                if head == "ob":
                    obj = name
                elif head == "fn":
                    fn = name
                continue
            if sep and head == "calls":
                inclusive = True
                continue
            if sep and head in ("jump", "jcnd"):
                position_only = True
                continue
            key, colon, value = line.partition(":")
            if not colon:
                continue
            if key == "positions":
                positions = value.split()
                if "instr" not in positions:
                    sys.exit(f"{path}: no instruction addresses (positions: {value.strip()}); "
                             "run callgrind with --dump-instr=yes")
                if positions[0] != "instr":
                    sys.exit(f"{path}: unexpected positions: {value.strip()}")
                last = [0] * len(positions)
            elif key == "totals":  # at the end; "summary:" (in the header, callgrind_annotate's figure) may be a
                prof.totals = int(value.split()[0])  # few lower when the process ends on a signal
            elif key == "part":
                last = [0] * len(positions) if positions else None
    return prof


def disassemble(obj):
    """Instruction start addresses of obj, and those of its locked instructions; None if objdump cannot read it."""
    if not obj or not os.path.isfile(obj):
        return None
    try:
        out = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", obj], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    starts, locked = set(), set()
    insn_re = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")
    for line in out.splitlines():
        m = insn_re.match(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        text = m.group(2).split("#")[0].split("<")[0]
        toks = text.split()
        prefixes = []
        while toks and toks[0] in PREFIXES:
            prefixes.append(toks.pop(0))
        mnemonic = toks[0] if toks else ""
        operands = " ".join(toks[1:])
        starts.add(addr)
        if "lock" in prefixes or (mnemonic.startswith("xchg") and "(" in operands):
            locked.add(addr)
    return starts, locked


def scaled(x, per):
    return f"{x / per:.2f}" if per != 1 else str(x)


def main(argv):
    per, top, values, check, path = 1, 0, False, False, None
    for arg in argv:
        if arg.startswith("--per="):
            text = arg.split("=", 1)[1].lower()
            mult = {"k": 1000, "m": 1000000}.get(text[-1:], 1)
            per = int(float(text.rstrip("km")) * mult)
        elif arg == "--functions":
            top = 15
        elif arg.startswith("--functions="):
            top = int(arg.split("=", 1)[1])
        elif arg == "--values":
            values = True
        elif arg == "--check":
            check = True
        elif arg in ("-h", "--help"):
            print(__doc__)
            return 0
        elif arg.startswith("-") or path:
            sys.exit(f"locked_instructions.py: unexpected argument '{arg}' (try --help)")
        else:
            path = arg
    if not path or per <= 0:
        sys.exit(__doc__)

    prof = read_profile(path)
    total = sum(prof.cost.values())
    if prof.totals is not None and prof.totals != total:
        print(f"warning: the costs add up to {total}, the file's totals: line says {prof.totals}", file=sys.stderr)

    by_object = collections.defaultdict(list)
    for (obj, addr), n in prof.cost.items():
        by_object[obj].append((addr, n))
    locked_total = 0
    by_function = collections.Counter()
    unread = collections.Counter()     # object -> cost in objects objdump could not read
    misaligned = collections.Counter()  # object -> cost at addresses that start no instruction
    for obj, rows in by_object.items():
        dis = disassemble(obj)
        if dis is None:
            unread[obj] += sum(n for _, n in rows)
            continue
        starts, locked = dis
        for addr, n in rows:
            if addr in locked:
                locked_total += n
                by_function[prof.function[(obj, addr)]] += n
            elif check and addr not in starts and n:
                misaligned[obj] += n

    if values:
        print(scaled(total, per), scaled(locked_total, per))
    else:
        print(f"instructions: {total}")
        print(f"locked instructions: {locked_total}")
        if per != 1:
            print(f"per {per}: {total / per:.1f} instructions, {locked_total / per:.2f} locked")
        if top:
            print("locked instructions by function" + (f" (per {per})" if per != 1 else "") + ":")
            for name, n in by_function.most_common(top):
                name = name or "(no function)"
                if len(name) > 150:
                    name = name[:147] + "..."
                print(f"  {scaled(n, per):>12}  {name}")
    if check or sum(unread.values()) > total // 100:  # unless --check, only when they are more than 1%
        for obj, n in unread.most_common():
            print(f"note: {n} instructions in {obj or '(no object)'}, which objdump cannot read, are not examined",
                  file=sys.stderr)
    if check:
        if misaligned:
            for obj, n in misaligned.most_common():
                print(f"check: {n} instructions at addresses that start no instruction of {obj}", file=sys.stderr)
        else:
            print("check: every executed address starts an instruction of its object", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
