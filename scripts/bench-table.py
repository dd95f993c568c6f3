#!/usr/bin/env python3
"""Prints tz-bench records as one Markdown table: each figure with its
ratio to every ceiling measured in the same run, and to every peer.

    bench-table.py RECORD.json [RECORD.json ...]

Standard library only, so that it runs wherever the records are (a GPU
machine included).
"""

import json
import sys


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        fig = r["figures"]
        conf = r["configuration"]
        codec = conf["json"]["codec"]["name"]
        ceilings = "; ".join(
            f'{c["name"]} {fmt(c["gbps"])} ({fmt(c["tiledzarr_over_ceiling"])})'
            for c in r["ceilings"]
            if c["gbps"] is not None
        )
        best = fig["best_gbps"]
        peers = "; ".join(
            f'{p["name"]} {fmt(p.get("best_gbps"))} ({fmt(best / p["best_gbps"]) if p.get("best_gbps") else p.get("status", "-")})'
            for p in r.get("peers") or []
        )
        gib = r["data"]["bytes"] / 2**30
        rows.append(
            f'| {conf["name"]} | {codec} | {r["backend"]["kind"]} | {r["sink"]["kind"]} | {gib:.0f} '
            f'| {fmt(best)} / {fmt(fig["median_gbps"])} | {fmt(fig["compression_ratio"])} '
            f'| {ceilings or "-"} | {peers or "-"} |'
        )
    print("| config | codec | backend | sink | GiB | TZ best / median GB/s | ratio "
          "| ceilings GB/s (TZ best / ceiling) | peers GB/s (TZ best / peer) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
