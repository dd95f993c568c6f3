#!/usr/bin/env python3
"""Fails when a GPU benchmark falls below its goal against a plain stream.

    gpu-ratio.py positions RECORD.json MIN
        a tz-bench --positions record: its ingest_ratio (the positions'
        best against one stream's best of the same bytes) must be >= MIN
    gpu-ratio.py streams RECORD.json BASELINE.json MIN
        two tz-bench records: RECORD's best GB/s over BASELINE's must be
        >= MIN

Prints the ratio either way; exit status 1 below MIN, 2 on bad input.
Python 3 standard library only (the GPU machine has no venv).
"""
import json
import sys


def best(path):
    with open(path) as f:
        return json.load(f)["figures"]["best_gbps"]


def main(argv):
    try:
        if argv[:1] == ["positions"] and len(argv) == 3:
            with open(argv[1]) as f:
                ratio = json.load(f)["ingest_ratio"]
            what, floor = "positions / one stream", float(argv[2])
        elif argv[:1] == ["streams"] and len(argv) == 4:
            ratio = best(argv[1]) / best(argv[2])
            what, floor = "%s / %s" % (argv[1], argv[2]), float(argv[3])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, KeyError, ValueError, TypeError, ZeroDivisionError) as e:
        print("gpu-ratio: %s" % e, file=sys.stderr)
        return 2
    ok = ratio is not None and ratio >= floor
    print("%s: %.3f (goal >= %.2f) %s" % (what, ratio or 0.0, floor, "met" if ok else "BELOW"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
