#!/usr/bin/env python3
"""Merge the `--deliveries-out` files of several docstore-loadgen processes into one fan-out
figure (scripts/bench_live.sh, scenario fanout-cluster): the writes are the `W` lines (the
writing loadgen's), the deliveries every file's `D` lines; per write, the latency to the last
listener of all the processes.

Usage: fanout_merge.py LABEL LISTENERS FILE...
Prints a summary and one `FANOUT | ...` row (the columns of bench_live.sh's fan-out table up to
"all listening after").
"""

import math
import sys
from collections import defaultdict


def quantile(values, q):
    """Nearest rank, as the loadgen's report."""
    if not values:
        return None
    rank = min(max(math.ceil(q * len(values)), 1), len(values))
    return values[rank - 1]


def summary(values):
    values = sorted(values)

    def ms(v):
        return "-" if v is None else f"{v / 1000:.1f}"

    return f"{ms(quantile(values, 0.5))} / {ms(quantile(values, 0.99))} / {ms(values[-1] if values else None)}"


def main():
    label, listeners, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    writes = []
    by_path = defaultdict(list)
    for name in files:
        with open(name, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if parts[0] == "W":
                    writes.append(parts[1])
                elif parts[0] == "D":
                    by_path[parts[1]].append(int(parts[2]))
    every, last, complete = [], [], 0
    for path in writes:
        got = by_path.get(path, [])
        every.extend(got)
        complete += len(got) >= listeners
        if got:
            last.append(max(got))
    expected = len(writes) * listeners
    print(f"== fan-out over {len(files) - 1} processes {label}")
    print(
        f"fan-out              {len(every)} of {expected} deliveries ({listeners} listeners x "
        f"{len(writes)} writes); {complete} writes reached every listener"
    )
    print(f"commitTime -> each listener   p50 / p99 / max  {summary(every)} ms")
    print(f"commitTime -> last listener   p50 / p99 / max  {summary(last)} ms (per write)")
    print(
        f"FANOUT | {label} | {listeners} | {complete}/{len(writes)} | {len(every)}/{expected} | "
        f"{summary(every)} | {summary(last)} |"
    )


if __name__ == "__main__":
    main()
