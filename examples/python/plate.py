#!/usr/bin/env python3
"""Streams a screen of a well plate into one OME-Zarr plate with tiledzarr,
each field of each well an image of its own, then reads every field back
with zarr-python.

    python examples/python/plate.py [--passes N] [--size PX] [--out PATH] [--backend auto|cpu|gpu]

Each pass visits the wells in turn and images two fields in each: the
frames of different images arrive interleaved, as a screen delivers them,
and each goes to its field's array by key. The frames are synthetic.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tiledzarr

WELLS = [("A", "1"), ("A", "2"), ("B", "3")]
FIELDS = [f"{row}/{column}/{field}" for row, column in WELLS for field in range(2)]


def microscope(key: str, t: int, size: int) -> np.ndarray:
    """The uint16 frame of field `key` in pass `t`: noise of its own level."""
    rng = np.random.default_rng([FIELDS.index(key), t])
    return rng.poisson(100 + 50 * FIELDS.index(key), (size, size)).astype(np.uint16)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--passes", type=int, default=4)
    p.add_argument("--size", type=int, default=512, help="frame edge in pixels")
    p.add_argument("--out", default="plate.zarr")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    a = p.parse_args()

    dimensions = [
        {"name": "t", "size": 0, "tile": 1, "tiles_per_shard": 4},
        {"name": "y", "size": a.size, "tile": 128, "tiles_per_shard": 4},
        {"name": "x", "size": a.size, "tile": 128, "tiles_per_shard": 4},
    ]
    config = {
        "arrays": [{"key": key, "dtype": "uint16", "dimensions": dimensions} for key in FIELDS],
        "plate": {"rows": ["A", "B"], "columns": ["1", "2", "3"],
                  "wells": [{"row": r, "column": c, "fields": [f"{r}/{c}/0", f"{r}/{c}/1"]} for r, c in WELLS]},
        "backend": a.backend, "store": {"path": a.out, "overwrite": True},
    }
    with tiledzarr.Stream(config) as stream:
        for t in range(a.passes):  # each pass visits every field of every well
            for key in FIELDS:
                stream.append(microscope(key, t, a.size), key=key)
    m = stream.metrics
    print(
        f"{len(FIELDS)} fields x {a.passes} passes ({m.bytes_in / 1e6:.1f} MB) on the "
        f"{m.backend} backend, {m.shards_emitted} shards, compression {m.compression_ratio:.2f}x"
    )

    import zarr  # the reader: each field's level 0 is a Zarr array at <key>/0

    plate = zarr.open_group(a.out, mode="r").attrs["ome"]["plate"]
    print(f"{a.out}: plate of {len(plate['wells'])} wells, {plate['field_count']} fields each")
    for key in FIELDS:
        field = zarr.open_array(f"{a.out}/{key}/0", mode="r")
        expected = np.stack([microscope(key, t, a.size) for t in range(a.passes)])
        if field.shape != expected.shape or not np.array_equal(field[...], expected):
            print(f"plate.py: field {key} read back differs", file=sys.stderr)
            return 1
    print("read back with zarr-python: every field matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
