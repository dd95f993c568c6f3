#!/usr/bin/env python3
"""Ingest throughput of the Python package: cam-32 frames from numpy, one
``Stream.append`` per frame, shards discarded (a sink that drops them), as
``tz-bench --config cam-32 --sink discard`` measures the library itself.

    python bench_numpy.py OUT_DIR [--raw POOL.raw] [--bytes 8GiB] [--reps 2]
                          [--backend gpu] [--compare TZ_BENCH_RECORD.json --min-ratio 0.9]
                          [--nvcomp-from-environment]

The figure is the protocol's (bench/README.md): bytes appended / seconds
from the first append to the return of flush; GB = 10^9 bytes; best and
median of the reps. Frames cycle through a pool of distinct frames made
before the clock starts: with ``--raw``, the file ``synth_raw`` writes
(``synth_raw POOL.raw 64`` is tz-bench's own cam-32 pool, the same bytes);
otherwise numpy makes microscopy-like frames.

Prints one JSON line and writes it to OUT_DIR/bench-numpy-cam-32.json.
Exits 1 when ``--backend gpu`` ran on anything but the GPU, or when the
figure is below ``--min-ratio`` times the tz-bench record's best.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tiledzarr

FRAME = (2048, 2048)
EPOCH_FRAMES = 32


def cam32(backend: str) -> dict:
    return {
        "dtype": "uint16",
        "dimensions": [
            {"name": "z", "size": 0, "tile": 32, "tiles_per_shard": 1},
            {"name": "y", "size": FRAME[0], "tile": 32, "tiles_per_shard": 16},
            {"name": "x", "size": FRAME[1], "tile": 32, "tiles_per_shard": 16},
        ],
        "codec": {"name": "zstd", "level": 1},
        "backend": backend,
    }


def size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(GiB|MiB|GB|MB|)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8GiB, 512MiB)")
    scale = {"GiB": 1 << 30, "MiB": 1 << 20, "GB": 10**9, "MB": 10**6, "": 1}[m.group(2)]
    return int(float(m.group(1)) * scale)


def numpy_pool(frames: int, seed: int = 1) -> np.ndarray:
    """Microscopy-like uint16 frames: background, Gaussian blobs, shot and
    read noise (the protocol's recipe, not its generator's exact bytes)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0 : FRAME[0], 0 : FRAME[1]].astype(np.float32)
    field = np.full(FRAME, 100.0, np.float32)
    for _ in range(200):
        cy, cx = rng.uniform(0, FRAME[0]), rng.uniform(0, FRAME[1])
        sigma, peak = rng.uniform(4, 20), rng.uniform(300, 3000)
        y0, y1 = int(max(cy - 4 * sigma, 0)), int(min(cy + 4 * sigma, FRAME[0]))
        x0, x1 = int(max(cx - 4 * sigma, 0)), int(min(cx + 4 * sigma, FRAME[1]))
        d2 = (yy[y0:y1, x0:x1] - cy) ** 2 + (xx[y0:y1, x0:x1] - cx) ** 2
        field[y0:y1, x0:x1] += peak * np.exp(-d2 / (2 * sigma * sigma))
    pool = np.empty((frames, *FRAME), np.uint16)
    for i in range(frames):
        mod = 1.0 + 0.2 * np.sin(i / 7.0)
        noisy = rng.poisson(field * mod) + rng.normal(0, 2, FRAME)
        pool[i] = np.clip(noisy, 0, 65535).astype(np.uint16)
    return pool


def nvcomp_loaded() -> str | None:
    """The libnvcomp this process mapped, if any."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if "libnvcomp" in line:
                return line.split()[-1]
    except OSError:
        pass
    return None


def run(config: dict, pool: np.ndarray, frames: int) -> tuple[float, tiledzarr.Metrics]:
    # Stream creation (staging allocated and faulted in) is outside the
    # clock, as in tz-bench.
    stream = tiledzarr.Stream(config, sink=lambda shard: None)
    try:
        start = time.perf_counter()
        for i in range(frames):
            stream.append(pool[i % len(pool)])
        stream.flush()
        seconds = time.perf_counter() - start
        return seconds, stream.metrics
    finally:
        stream.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--raw", type=Path, help="pool of uint16 2048x2048 frames (synth_raw's file)")
    p.add_argument("--bytes", type=size, default=size("8GiB"))
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--backend", default="gpu", choices=["auto", "cpu", "gpu"])
    p.add_argument("--compare", type=Path, help="a tz-bench record of the same run")
    p.add_argument("--min-ratio", type=float, default=0.9)
    p.add_argument(
        "--nvcomp-from-environment",
        action="store_true",
        help="fail unless nvCOMP was loaded from this Python environment's wheel",
    )
    a = p.parse_args()

    frame_bytes = FRAME[0] * FRAME[1] * 2
    frames = max(a.bytes // frame_bytes // EPOCH_FRAMES, 1) * EPOCH_FRAMES
    if a.raw:
        pool = np.fromfile(a.raw, np.uint16)
        if pool.size % (FRAME[0] * FRAME[1]):
            print(f"bench_numpy: {a.raw} is not whole 2048x2048 uint16 frames", file=sys.stderr)
            return 2
        pool = pool.reshape(-1, *FRAME)
    else:
        pool = numpy_pool(2 * EPOCH_FRAMES)

    config = cam32(a.backend)
    runs = [run(config, pool, frames) for _ in range(a.reps)]
    seconds = [s for s, _ in runs]
    best = min(seconds)
    metrics = runs[seconds.index(best)][1]
    record = {
        "tool": f"bench_numpy (tiledzarr {tiledzarr.__version__}, numpy {np.__version__}, "
        f"Python {sys.version.split()[0]})",
        "configuration": "cam-32",
        "data": f"{a.raw} ({len(pool)} frames)" if a.raw else f"numpy microscopy ({len(pool)} frames)",
        "frames": frames,
        "bytes": frames * frame_bytes,
        "seconds": seconds,
        "best_gbps": frames * frame_bytes / best / 1e9,
        "median_gbps": frames * frame_bytes / statistics.median(seconds) / 1e9,
        "compression_ratio": metrics.compression_ratio,
        "backend": metrics.backend,
        "backend_reason": metrics.backend_reason,
        "nvcomp_library": nvcomp_loaded(),
        "TZ_NVCOMP_LIBRARY": os.environ.get("TZ_NVCOMP_LIBRARY"),
    }
    failures = []
    if a.backend == "gpu" and metrics.backend != "gpu":
        failures.append(f"metrics.backend is {metrics.backend!r}, not 'gpu'")
    if a.nvcomp_from_environment:
        loaded = record["nvcomp_library"] or ""
        dirs = tiledzarr.nvcomp_search_dirs()
        record["nvcomp_search_dirs"] = dirs
        if not any(loaded.startswith(os.path.realpath(d) + os.sep) for d in dirs):
            failures.append(f"nvCOMP was loaded from {loaded or 'nowhere'}, not from {dirs}")
    if a.compare:
        bench = json.loads(a.compare.read_text())
        reference = bench["figures"]["best_gbps"]
        record["tz_bench_best_gbps"] = reference
        record["over_tz_bench"] = record["best_gbps"] / reference
        if record["over_tz_bench"] < a.min_ratio:
            failures.append(
                f"{record['best_gbps']:.2f} GB/s is {record['over_tz_bench']:.2f} of tz-bench's "
                f"{reference:.2f}, below {a.min_ratio}"
            )
    record["failures"] = failures
    line = json.dumps(record)
    print(line)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    (a.out_dir / "bench-numpy-cam-32.json").write_text(line + "\n")
    for f in failures:
        print(f"bench_numpy: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
