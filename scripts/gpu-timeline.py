#!/usr/bin/env python3
"""Summarises a GPU stream's timeline (the CSV that TZ_GPU_TIMELINE=FILE
makes the GPU backend write): per batch, how long its compression waited
once its tiles were scattered and the batch before was aggregated, how long
the compress call took, and its copies in and out.

    TZ_GPU_TIMELINE=/tmp/t.csv tz-bench --backend gpu --reps 1 ...
    scripts/gpu-timeline.py /tmp/t.csv
"""
import csv
import math
import sys
from collections import defaultdict


def main(path):
    at = defaultdict(dict)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            at[int(row["batch"])][row["step"]] = float(row["ms"])
    if not at:
        sys.exit(f"{path}: no marks")
    print("batch  waited ms  compress ms  h2d ms  d2h ms")
    total_wait = 0.0
    for b in sorted(at):
        s = at[b]
        ready = max(s.get("Scattered", 0.0), at.get(b - 1, {}).get("AggregateEnd", 0.0))
        wait = s["CompressGo"] - ready if "CompressGo" in s else float("nan")
        if not math.isnan(wait):
            total_wait += max(wait, 0.0)
        span = lambda a, z: s[z] - s[a] if a in s and z in s else float("nan")
        print(f"{b:5d}  {wait:9.2f}  {span('CompressGo', 'NvcompDone'):11.2f}  "
              f"{span('LandingReady', 'H2dDone'):6.2f}  {span('D2hStart', 'D2hEnd'):6.2f}")
    first, last = min(at), max(at)
    marks = [t for s in at.values() for t in s.values()]
    print(f"batches {first}..{last}: {max(marks) - min(marks):.1f} ms in all, "
          f"compression waited {total_wait:.1f} ms after its input was ready")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
