"""The reference pyramid's arithmetic, from the OME-Zarr downsampling
methods alone (acquisition order, NumPy): one level down by decimation, the
mean (rounded half to even, exact for 64-bit integers), the minimum, the
maximum or the lower median of each 2 x 2 ... window along the halved
dimensions; floats ordered by IEEE 754 totalOrder."""

from __future__ import annotations

import itertools

import numpy as np


def level_shape(shape, downsample, k):
    out = list(shape)
    for _ in range(k):
        out = [(s + 1) // 2 if ds else s for s, ds in zip(out, downsample)]
    return out


def order_keys(a):
    """Integers ordered like a's elements; floats by IEEE 754 totalOrder."""
    if a.dtype.kind != "f":
        return a
    s = a.view(np.dtype("i%d" % a.dtype.itemsize))
    bits = 8 * a.dtype.itemsize
    mag = np.array((1 << (bits - 1)) - 1, dtype=s.dtype)
    return s ^ ((s >> (bits - 1)) & mag)


def from_keys(k, dtype):
    if dtype.kind != "f":
        return k.astype(dtype, copy=False)
    return order_keys(k.view(dtype)).view(dtype)  # the map is its own inverse


def windows(shape, downsample):
    """(src, dst) slices per window offset, offsets in row-major order.

    src picks the elements at offset o of every window (2i + o); dst the
    output elements that have such an element (all for offset 0)."""
    offs = [(0, 1) if ds else (0,) for ds in downsample]
    out = []
    for o in itertools.product(*offs):
        src, dst = [], []
        for od, s, ds in zip(o, shape, downsample):
            if ds:
                src.append(slice(od, None, 2))
                dst.append(slice(0, len(range(od, s, 2))))
            else:
                src.append(slice(None))
                dst.append(slice(None))
        out.append((tuple(src), tuple(dst)))
    return out


def _round_div(q_num, n):
    """(q, r) with q = floor(S/n), S = q*n + r, for int64 S (no overflow)."""
    q = np.floor_divide(q_num, n)
    return q, q_num - q * n


def downsample_once(a, downsample, method):
    """One level down from a (acquisition order)."""
    if not any(downsample):
        return a.copy()
    oshape = tuple(level_shape(a.shape, downsample, 1))
    wins = windows(a.shape, downsample)
    dtype = a.dtype
    if method == "decimate" or a.size == 0:
        return np.ascontiguousarray(a[wins[0][0]]).reshape(oshape)

    if method in ("min", "max"):
        keys = order_keys(a)
        res = keys[wins[0][0]].copy()
        op = np.minimum if method == "min" else np.maximum
        for src, dst in wins[1:]:
            res[dst] = op(res[dst], keys[src])
        return from_keys(res, dtype)

    if method == "median":
        # Missing elements (edge windows) get the largest key: sorted last,
        # and where they tie with a present element it has the same value.
        keys = order_keys(a)
        stack = np.full(oshape + (len(wins),), np.iinfo(keys.dtype).max, dtype=keys.dtype)
        n = np.zeros(oshape, dtype=np.int64)
        for j, (src, dst) in enumerate(wins):
            stack[dst + (j,)] = keys[src]
            n[dst] += 1
        stack.sort(axis=-1)
        med = np.take_along_axis(stack, ((n - 1) // 2)[..., None], axis=-1)[..., 0]
        return from_keys(med, dtype)

    # mean
    n = np.zeros(oshape, dtype=np.int64)
    for src, dst in wins:
        n[dst] += 1
    if dtype.kind == "f":
        acc = np.zeros(oshape, dtype=np.float64)
        for src, dst in wins:
            acc[dst] += a[src].astype(np.float64)
        return (acc / n).astype(dtype)
    if dtype.itemsize <= 4:
        acc = np.zeros(oshape, dtype=np.int64)
        for src, dst in wins:
            acc[dst] += a[src].astype(np.int64)
        q, r = _round_div(acc, n)
        q += (2 * r > n) | ((2 * r == n) & (q & 1 == 1))
        return q.astype(dtype)
    # 64-bit: S = H * 2^32 + L, H and L sums of the high (signed for int64)
    # and low 32-bit halves; both fit int64 for up to 2^31 window elements.
    hi_sum = np.zeros(oshape, dtype=np.int64)
    lo_sum = np.zeros(oshape, dtype=np.int64)
    for src, dst in wins:
        v = a[src]
        hi_sum[dst] += (v >> np.array(32, dtype=v.dtype)).astype(np.int64)
        lo_sum[dst] += (v & np.array(0xFFFFFFFF, dtype=v.dtype)).astype(np.int64)
    qh, rh = _round_div(hi_sum, n)                      # 0 <= rh < n
    qt, r = _round_div(rh * (1 << 32) + lo_sum, n)      # 0 <= r < n
    q = (qh.view(np.uint64) << np.uint64(32)) + qt.view(np.uint64)  # floor(S/n) mod 2^64
    q += ((2 * r > n) | ((2 * r == n) & (q & np.uint64(1) == 1))).astype(np.uint64)
    return q.view(dtype) if dtype.kind == "i" else q
