"""The frames the peer benchmark writes, and the checks of what it wrote:
synthetic microscopy frames, loading them, a store's size on disk, and a
bit-exact read-back with zarr-python (scripts/bench-peers.py)."""

from __future__ import annotations

import os

import numpy as np


def generate(path, dtype, frames, frame_shape, seed=1234):
    """Frames that compress like microscope data: smooth background, a few
    moving bright spots, and a few bits of noise."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    grids = np.meshgrid(*[np.linspace(0.0, 1.0, n, dtype=np.float32) for n in frame_shape],
                        indexing="ij", sparse=True)
    base = 200.0 + 100.0 * sum(np.sin((3.0 + i) * g * np.pi) for i, g in enumerate(grids))
    centers = rng.random((8, len(frame_shape)), dtype=np.float32)
    vel = (rng.random((8, len(frame_shape)), dtype=np.float32) - 0.5) * 0.02
    if dt.kind in "ui":
        hi = min(np.iinfo(dt).max, 4000)
    else:
        hi = 4000
    with open(path, "wb") as f:
        for t in range(frames):
            img = np.array(np.broadcast_to(base, frame_shape), dtype=np.float32)
            for c, v in zip(centers, vel):
                pos = (c + t * v) % 1.0
                d2 = sum((g - p) ** 2 for g, p in zip(grids, pos))
                img += 1500.0 * np.exp(-d2 / 0.002)
            noise = rng.integers(0, 32, size=frame_shape, dtype=np.int32).astype(np.float32)
            img += noise
            if dt.kind in "ui":
                lo = np.iinfo(dt).min if dt.kind == "i" else 0
                out = np.clip(np.rint(img), max(lo, 0), hi).astype(dt)
            else:
                out = img.astype(dt)
            out.astype(dt.newbyteorder("<"), copy=False).tofile(f)


def load_frames(a):
    dt = np.dtype(a.dtype).newbyteorder("<")
    per_frame = int(np.prod(a.frame_shape))
    need = a.frames * per_frame
    have = os.path.getsize(a.raw) // dt.itemsize
    if have < need:
        raise SystemExit("%s holds %d elements, %d frames of %s need %d"
                         % (a.raw, have, a.frames, a.frame_shape, need))
    data = np.fromfile(a.raw, dtype=dt, count=need)
    data = data.astype(np.dtype(a.dtype), copy=False)  # native order (no copy on little-endian)
    return np.ascontiguousarray(data.reshape((a.frames,) + tuple(a.frame_shape)))


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


# ------------------------------------------------------------------------- verify

def verify(path, frames):
    import zarr
    z = zarr.open_array(path, mode="r")
    if tuple(z.shape) != frames.shape:
        return "shape %s, expected %s" % (tuple(z.shape), frames.shape)
    if np.dtype(z.dtype).newbyteorder("=") != frames.dtype.newbyteorder("="):
        return "dtype %s, expected %s" % (z.dtype, frames.dtype)
    u = np.dtype("u%d" % frames.dtype.itemsize)
    per = max(1, (256 << 20) // max(1, frames[0].nbytes))
    for lo in range(0, frames.shape[0], per):
        hi = min(frames.shape[0], lo + per)
        got = np.ascontiguousarray(z[lo:hi]).view(u)
        want = frames[lo:hi].view(u)
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        if bad.size:
            idx = np.unravel_index(lo * frames[0].size + int(bad[0]), frames.shape)
            return "%d differing elements, first at %s: expected %r got %r" % (
                bad.size, tuple(int(i) for i in idx), want.reshape(-1)[bad[0]].item(),
                got.reshape(-1)[bad[0]].item())
    return None
