#!/usr/bin/env python3
"""Streams frames from numpy into a Zarr v3 store with tiledzarr, as a
camera loop would, then reads the store back with zarr-python.

    python examples/python/acquire.py [--frames N] [--size PX] [--out PATH] [--backend auto|cpu|gpu]

The frames are synthetic (noise on a slowly moving spot), made one at a
time as a camera would deliver them.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tiledzarr


def camera(frames: int, size: int, seed: int = 0):
    """Yields uint16 frames: background, a moving bright spot, shot noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(frames):
        cy, cx = size / 2 + size / 4 * np.sin(i / 10), size / 2 + size / 4 * np.cos(i / 10)
        spot = 2000 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * (size / 16) ** 2))
        yield rng.poisson(100 + spot).astype(np.uint16)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=256)
    p.add_argument("--size", type=int, default=512, help="frame edge in pixels")
    p.add_argument("--out", default="acquisition.zarr")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    a = p.parse_args()

    config = {
        "dtype": "uint16",
        "dimensions": [
            {"name": "t", "size": 0, "tile": 32},
            {"name": "y", "size": a.size, "tile": 128, "tiles_per_shard": 4},
            {"name": "x", "size": a.size, "tile": 128, "tiles_per_shard": 4},
        ],
        "backend": a.backend,
        "store": {"path": a.out, "overwrite": True},
    }
    start = time.perf_counter()
    try:
        with tiledzarr.Stream(config) as stream:
            for frame in camera(a.frames, a.size):
                stream.append(frame)
    except tiledzarr.TiledZarrError as e:
        print(f"acquire.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - start
    m = stream.metrics
    print(
        f"{a.frames} frames ({m.bytes_in / 1e6:.1f} MB) in {seconds:.2f} s on the "
        f"{m.backend} backend, {m.shards_emitted} shards, compression {m.compression_ratio:.2f}x"
    )

    import zarr  # the reader: any Zarr v3 reader opens the store

    array = zarr.open_array(a.out, mode="r")
    print(f"{a.out}: shape {array.shape}, dtype {array.dtype}, chunks {array.chunks}")
    expected = list(camera(a.frames, a.size))
    for i in (0, a.frames // 2, a.frames - 1):
        if not np.array_equal(array[i], expected[i]):
            print(f"acquire.py: frame {i} read back differs", file=sys.stderr)
            return 1
    print("read back with zarr-python: first, middle and last frames match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
