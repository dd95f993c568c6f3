#!/usr/bin/env python3
"""Ingest throughput of the Python package: cam-32 frames from numpy, one
``Stream.append`` per frame, shards discarded (a sink that drops them), as
``tz-bench --config cam-32 --sink discard`` measures the library itself.

    python bench_numpy.py OUT_DIR [--raw POOL.raw] [--bytes 8GiB] [--reps 2]
                          [--backend gpu] [--compare TZ_BENCH_RECORD.json --min-ratio 0.9]
                          [--nvcomp-from-environment] [--pool FRAMES]
                          [--positions TZ_BENCH_POSITIONS_RECORD.json]

The figure is the protocol's (bench/README.md): bytes appended / seconds
from the first append to the return of flush; GB = 10^9 bytes; best and
median of the reps. Frames cycle through a pool of distinct frames made
before the clock starts: with ``--raw``, the file ``synth_raw`` writes
(``synth_raw POOL.raw 64`` is tz-bench's own cam-32 pool, the same bytes);
otherwise numpy makes microscopy-like frames.

With ``--positions``, a record of ``tz-bench --positions N`` (which holds
its stream's configuration): the same time-lapse of N positions from
Python, one ``append(frame, key=...)`` per position at each time point
(its frame is both channels), as many time points as the record's, the
pool's frames in turn; the figure is compared with the record's positions figure
(``--compare`` is then not needed). ``append`` waits for free staging, as
``tz-bench``'s ``write_blocking_to`` does: this is the path where a lane
of many arrays must keep its backend's batches full.

Prints one JSON line and writes it to OUT_DIR/bench-numpy-cam-32.json
(``--positions``: OUT_DIR/bench-numpy-positions-N.json). Exits 1 when
``--backend gpu`` ran on anything but the GPU, when a stream did not take
every byte appended, or when the figure is below ``--min-ratio`` times
the tz-bench record's best.
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
from typing import Any

import numpy as np

import tiledzarr

FRAME = (2048, 2048)
EPOCH_FRAMES = 32


def cam32(backend: str) -> dict[str, Any]:
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


def run(config: dict[str, Any], pool: np.ndarray, keys: list[str | None]) -> tuple[float, int, tiledzarr.Metrics]:
    """One stream: one append per entry of ``keys`` (None: the stream's
    only array), each of as many 2048 x 2048 frames of the pool, in turn,
    as the array's frame holds (a position's frame is both its channels).
    Returns the seconds, the bytes appended and the stream's metrics."""
    # Stream creation (staging allocated and faulted in) is outside the
    # clock, as in tz-bench.
    stream = tiledzarr.Stream(config, sink=lambda shard: None)
    try:
        # Views of whole frames of the pool, made before the clock starts.
        shapes = {k: stream.frame_shape_of(k) for k in set(keys)}
        views = {}
        for k, shape in shapes.items():
            per = int(np.prod(shape)) // (FRAME[0] * FRAME[1])
            if per < 1 or len(pool) % per or per * FRAME[0] * FRAME[1] != int(np.prod(shape)):
                raise SystemExit(f"bench_numpy: frames of {shape} do not tile a pool of {len(pool)} frames")
            views[k] = [pool[j : j + per].reshape(shape) for j in range(0, len(pool), per)]
        bytes_in = 0
        start = time.perf_counter()
        for i, key in enumerate(keys):
            frame = views[key][i % len(views[key])]
            stream.append(frame, key=key)
            bytes_in += frame.nbytes
        stream.flush()
        seconds = time.perf_counter() - start
        return seconds, bytes_in, stream.metrics
    finally:
        stream.close()


def positions_case(record_path: Path, backend: str) -> tuple[str, dict[str, Any], list[str | None], float, int]:
    """The stream of a ``tz-bench --positions`` record: its name, its
    configuration on ``backend``, the key of each append in the order the
    bench writes them, the record's figure in GB/s and its bytes."""
    record = json.loads(record_path.read_text())
    positions = record["positions"]
    config = dict(positions["configuration"])
    config["backend"] = backend
    keys = [a["key"] for a in config["arrays"]]
    if len(keys) != positions["count"]:
        raise SystemExit(f"bench_numpy: {record_path} holds {len(keys)} arrays for {positions['count']} positions")
    # Each append is a position's frame: both its channels.
    order: list[str | None] = [k for _ in range(positions["time_points"]) for k in keys]
    return f"positions-{len(keys)}", config, order, positions["gbps"], positions["bytes"]


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
    p.add_argument("--pool", type=int, default=2 * EPOCH_FRAMES,
                   help="distinct frames numpy makes when no --raw is given")
    p.add_argument("--positions", type=Path,
                   help="a tz-bench --positions record: its stream from Python, compared with it")
    a = p.parse_args()
    if a.positions and a.compare:
        p.error("--positions compares with its own record: leave out --compare")

    frame_bytes = FRAME[0] * FRAME[1] * 2
    if a.raw:
        pool = np.fromfile(a.raw, np.uint16)
        if pool.size % (FRAME[0] * FRAME[1]):
            print(f"bench_numpy: {a.raw} is not whole 2048x2048 uint16 frames", file=sys.stderr)
            return 2
        pool = pool.reshape(-1, *FRAME)
    else:
        pool = numpy_pool(max(a.pool, 1))

    expected_bytes = None
    if a.positions:
        name, config, keys, reference, expected_bytes = positions_case(a.positions, a.backend)
    else:
        frames = max(a.bytes // frame_bytes // EPOCH_FRAMES, 1) * EPOCH_FRAMES
        name, config, keys = "cam-32", cam32(a.backend), [None] * frames
        reference = None
        if a.compare:
            bench = json.loads(a.compare.read_text())
            if "figures" not in bench:
                p.error(f"{a.compare} is not a record of one stream (a --positions record goes to --positions)")
            reference = bench["figures"]["best_gbps"]
    runs = [run(config, pool, keys) for _ in range(a.reps)]
    seconds = [s for s, _, _ in runs]
    best = min(seconds)
    appended = runs[0][1]
    metrics = runs[seconds.index(best)][2]
    record: dict[str, Any] = {
        "tool": f"bench_numpy (tiledzarr {tiledzarr.__version__}, numpy {np.__version__}, "
        f"Python {sys.version.split()[0]})",
        "configuration": name,
        "data": f"{a.raw} ({len(pool)} frames)" if a.raw else f"numpy microscopy ({len(pool)} frames)",
        "frames": appended // frame_bytes,
        "appends": len(keys),
        "bytes": appended,
        "seconds": seconds,
        "best_gbps": appended / best / 1e9,
        "median_gbps": appended / statistics.median(seconds) / 1e9,
        "compression_ratio": metrics.compression_ratio,
        "backend": metrics.backend,
        "backend_reason": metrics.backend_reason,
        "nvcomp_library": nvcomp_loaded(),
        "TZ_NVCOMP_LIBRARY": os.environ.get("TZ_NVCOMP_LIBRARY"),
    }
    failures = []
    if a.backend == "gpu" and metrics.backend != "gpu":
        failures.append(f"metrics.backend is {metrics.backend!r}, not 'gpu'")
    if expected_bytes is not None and appended != expected_bytes:
        failures.append(f"appended {appended} bytes, the record's stream {expected_bytes}")
    for _, sent, m in runs:
        if m.bytes_in != sent:
            failures.append(f"a stream took {m.bytes_in} bytes of the {sent} appended")
    if a.nvcomp_from_environment:
        loaded = record["nvcomp_library"] or ""
        dirs = tiledzarr.nvcomp_search_dirs()
        record["nvcomp_search_dirs"] = dirs
        if not any(loaded.startswith(os.path.realpath(d) + os.sep) for d in dirs):
            failures.append(f"nvCOMP was loaded from {loaded or 'nowhere'}, not from {dirs}")
    if reference is not None:
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
    (a.out_dir / f"bench-numpy-{name}.json").write_text(line + "\n")
    for f in failures:
        print(f"bench_numpy: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
