#!/usr/bin/env python3
"""Prints sweep.txt (round, tables marked, batch, ns per page) as a Markdown table: the
range over the rounds of each row's median."""
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "sweep.txt"):
    _, marked, batch, ns = line.split()
    runs[(int(batch), marked)].append(float(ns))
print("| batch | one table marked | every table marked |")
print("| ---: | ---: | ---: |")
for b in sorted({b for b, _ in runs}):
    cells = []
    for m in ("one", "all"):
        v = runs.get((b, m), [])
        cells.append(f"{min(v):.1f}-{max(v):.1f}" if v else "")
    print(f"| {b:,} | {cells[0]} | {cells[1]} |")
