"""Shared fixtures. The suite runs against the installed wheel, from outside
the source tree (scripts/test.sh), so `import tiledzarr` is the package a
user gets."""

from __future__ import annotations

import numpy as np
import pytest


def frames(n: int, shape: tuple[int, ...], dtype: str = "uint16", seed: int = 1) -> np.ndarray:
    """Noisy frames that compress like a camera's, never a constant."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.normal(100.0, 10.0, (n, *shape)).astype(dt)
    hi = min(np.iinfo(dt).max, 4000)
    lo = max(np.iinfo(dt).min, -100) if dt.kind == "i" else 0
    return rng.integers(lo, hi, (n, *shape), endpoint=True).astype(dt)


def config(path, dtype: str = "uint16", t: int = 0, y: int = 96, x: int = 80, **extra):
    """A small 3-d configuration on the CPU backend with a store at `path`."""
    c = {
        "dtype": dtype,
        "dimensions": [
            {"name": "t", "size": t, "tile": 8},
            {"name": "y", "size": y, "tile": 32, "tiles_per_shard": 2},
            {"name": "x", "size": x, "tile": 16, "tiles_per_shard": 2},
        ],
        "backend": "cpu",
        "threads": 2,
        "staging_bytes": 8 << 20,
    }
    if path is not None:
        c["store"] = {"path": str(path), "overwrite": True, "fsync": False}
    c.update(extra)
    return c


@pytest.fixture
def store(tmp_path):
    return tmp_path / "a.zarr"
