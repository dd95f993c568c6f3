#!/usr/bin/env python3
"""Check an OME-Zarr (or plain Zarr v3) store written by the library against a
reference pyramid computed here, independently, from the raw input.

    check_ome.py --store DIR --raw FILE --config CONFIG.json
    check_ome.py --manifest FILE [--min N]
    check_ome.py --self-test

A manifest holds one store per line: store, raw and the path of the JSON
config the store was written with, separated by tabs; every store is checked
in this one process (the readers' and the validator's imports are paid once),
and fewer than N lines is an error.

The config is the library's JSON config; only dtype, dimensions (name, size,
tile, kind, unit, scale, translation, downsample), storage_order, multiscale
(levels, method), ome and attributes are read, other keys are ignored. The
store is OME-Zarr when "ome" is true or an object, or "multiscale" is given;
otherwise it is a plain array (level 0 only, its zarr.json at the store root).
multiscale.levels counts level 0; 0 (or absent) means as many as it takes
until every downsampled bounded dimension fits in one tile.

The raw file holds little-endian, row-major elements in acquisition order (the
order of "dimensions", dimension 0 slowest). An unbounded dimension 0 (size 0)
has ceil(raw bytes / plane bytes) planes, the last one padded with zeros; a
raw file longer than a bounded array is an error, a shorter one is padded with
zeros (the stream ended early).

For every store:
  * the reference pyramid is computed with plain NumPy from the raw data
    (level k from level k-1 in acquisition order, each downsampled dimension
    halved rounding up, windows {2i, 2i+1}; methods decimate, mean (integers:
    exact sum, rounded half to even; floats: float64 sum in window order),
    min, max, lower median (floats in IEEE 754 totalOrder)), then transposed
    to the storage order;
  * zarr.json of the group and of every level is checked: the "ome" block
    (version 0.5, axes in storage order, one dataset per level with its scale
    and translation, the method as type, the name), the user's attributes
    beside it, each level's shape, data_type, dimension_names and sharding;
  * every level is read with zarr-python and with tensorstore and compared
    with the reference as unsigned integers of the element width (NaNs and
    signed zeros compare by their bits);
  * OME stores only: the OME-NGFF 0.5 validator (ome-zarr-models' v05 Image,
    which also checks every level array exists with matching dimension names)
    accepts the group without warnings, and ome-zarr-py's Reader finds one
    multiscale image with every level (shape, dtype), the axes (names, types,
    units) and each level's scale and translation.

Exit status: 0 every store is right ("OK <store> ..." per store); 1 a mismatch
(the first differing element is printed with its level and index, or the
metadata or validator problem); 2 bad arguments, an unreadable store or config,
or any other error. CHECK_OME_TRACEBACK=1 prints tracebacks of unexpected
errors.

--self-test checks the reference on small hand-computed examples and against a
slow element-by-element twin, writes small stores by hand with zarr-python and
checks them, and checks that a corrupted store and one with a bad axis order
fail. It needs nothing but a temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import math
import os
import shutil
import struct
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_store import DTYPES, CheckError, Mismatch, fmt_shape  # noqa: E402

METHODS = ("decimate", "mean", "min", "max", "median")
KIND_OF_NAME = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
SLAB_BYTES = 256 * 1024 * 1024
OME_VERSION = "0.5"


# --------------------------------------------------------------------------
# The config


class Spec:
    """What the checker needs from a config, with the defaults filled in."""

    def __init__(self, cfg, where="config"):
        if not isinstance(cfg, dict):
            raise CheckError("%s: not a JSON object" % where)
        self.where = where
        dt = cfg.get("dtype")
        if dt not in DTYPES:
            raise CheckError("%s: dtype %r is not one of %s" % (where, dt, ", ".join(DTYPES)))
        self.dtype = np.dtype(dt)
        dims = cfg.get("dimensions")
        if not isinstance(dims, list) or not dims:
            raise CheckError("%s: dimensions must be a non-empty list" % where)
        self.names, self.sizes, self.tiles, self.kinds, self.units = [], [], [], [], []
        self.scales, self.translations, self.downsample = [], [], []
        for i, d in enumerate(dims):
            if not isinstance(d, dict):
                raise CheckError("%s: dimensions[%d] is not an object" % (where, i))
            name = d.get("name", "d%d" % i)
            kind = d.get("kind", KIND_OF_NAME.get(name, "other"))
            size = d.get("size")
            if not isinstance(size, int) or size < 0 or (size == 0 and i > 0):
                raise CheckError("%s: dimensions[%d] (%s): size %r (only dimension 0 may be 0, unbounded)"
                                 % (where, i, name, size))
            tile = d.get("tile")
            if tile is not None and (not isinstance(tile, int) or tile < 1):
                raise CheckError("%s: dimensions[%d] (%s): tile %r" % (where, i, name, tile))
            ds = d.get("downsample", kind == "space")
            if not isinstance(ds, bool):
                raise CheckError("%s: dimensions[%d] (%s): downsample %r is not a boolean"
                                 % (where, i, name, ds))
            self.names.append(name)
            self.sizes.append(size)
            self.tiles.append(tile)
            self.kinds.append(kind)
            self.units.append(d.get("unit"))
            self.scales.append(float(d.get("scale", 1.0)))
            self.translations.append(float(d.get("translation", 0.0)))
            self.downsample.append(ds)
        if len(set(self.names)) != len(self.names):
            raise CheckError("%s: dimension names are not unique: %s" % (where, self.names))
        self.rank = len(self.names)

        order = cfg.get("storage_order", self.names)
        if sorted(order) != sorted(self.names):
            raise CheckError("%s: storage_order %s is not a permutation of %s" % (where, order, self.names))
        self.storage_order = list(order)
        self.perm = tuple(self.names.index(n) for n in order)

        ms = cfg.get("multiscale")
        ome = cfg.get("ome")
        self.has_multiscale = ms is not None
        if ms is None:
            ms = {}
        if not isinstance(ms, dict):
            raise CheckError("%s: multiscale must be an object" % where)
        self.method = ms.get("method", "mean")
        if self.method not in METHODS:
            raise CheckError("%s: multiscale.method %r is not one of %s" % (where, self.method, METHODS))
        # levels absent from a multiscale block: 0, as many as it takes
        levels = ms.get("levels", 0) if self.has_multiscale else 1
        if not isinstance(levels, int) or levels < 0:
            raise CheckError("%s: multiscale.levels %r" % (where, levels))
        self.levels = self._auto_levels() if levels == 0 else levels
        self.ome = bool(ome) or self.has_multiscale
        self.ome_name = ome.get("name") if isinstance(ome, dict) else None
        self.omero = ome.get("omero") if isinstance(ome, dict) else None
        attrs = cfg.get("attributes", {})
        if not isinstance(attrs, dict):
            raise CheckError("%s: attributes must be an object" % where)
        self.attributes = attrs
        if not self.ome and self.levels != 1:
            raise CheckError("%s: %d levels without OME output" % (where, self.levels))

    def _auto_levels(self):
        """Smallest L such that at level L-1 every downsampled bounded dimension fits one tile."""
        dims = [i for i in range(self.rank) if self.downsample[i] and self.sizes[i] > 0]
        for i in dims:
            if self.tiles[i] is None:
                raise CheckError("%s: multiscale.levels 0 needs the tile of %s" % (self.where, self.names[i]))
        sizes = list(self.sizes)
        levels = 1
        while any(sizes[i] > self.tiles[i] for i in dims):
            sizes = level_shape(sizes, self.downsample, 1)
            levels += 1
        return levels

    def level_shapes(self, extent0):
        """Level shapes in acquisition order, dimension 0 of level 0 being extent0."""
        s0 = [extent0] + self.sizes[1:]
        return [level_shape(s0, self.downsample, k) for k in range(self.levels)]

    def to_storage(self, seq):
        return [seq[p] for p in self.perm]

    # the expected OME metadata
    def axes(self):
        out = []
        for p in self.perm:
            ax = {"name": self.names[p]}
            if self.kinds[p] != "other":
                ax["type"] = self.kinds[p]
            if self.units[p] is not None:
                ax["unit"] = self.units[p]
            out.append(ax)
        return out

    def transforms(self, k):
        """(scale, translation) of level k in storage order."""
        scale, trans = [], []
        for p in self.perm:
            s, t = self.scales[p], self.translations[p]
            if self.downsample[p] and k:
                f = 2 ** k
                if self.method != "decimate":
                    t = t + s * (f - 1) / 2
                s = s * f
            scale.append(s)
            trans.append(t)
        return scale, trans

    def datasets(self):
        out = []
        for k in range(self.levels):
            scale, trans = self.transforms(k)
            ct = [{"type": "scale", "scale": scale}]
            if any(t != 0 for t in trans):
                ct.append({"type": "translation", "translation": trans})
            out.append({"path": str(k), "coordinateTransformations": ct})
        return out


def level_shape(shape, downsample, k):
    out = list(shape)
    for _ in range(k):
        out = [(s + 1) // 2 if ds else s for s, ds in zip(out, downsample)]
    return out


def load_config(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise CheckError("config %s: %s" % (path, e))
    except ValueError as e:
        raise CheckError("config %s is not JSON: %s" % (path, e))
    return Spec(cfg, "config %s" % path)


def load_level0(raw_path, spec):
    """The acquisition array from the raw file, padded with zeros."""
    if not os.path.isfile(raw_path):
        raise CheckError("raw file %s not found" % raw_path)
    size = os.path.getsize(raw_path)
    isz = spec.dtype.itemsize
    if size % isz:
        raise CheckError("raw file %s: %d bytes is not a whole number of %s elements"
                         % (raw_path, size, spec.dtype.name))
    n_raw = size // isz
    plane = int(np.prod(spec.sizes[1:], dtype=np.int64))
    extent0 = spec.sizes[0] if spec.sizes[0] else -(-n_raw // plane)
    total = extent0 * plane
    if n_raw > total:
        raise CheckError("raw file %s holds %d elements, more than the %d of shape %s"
                         % (raw_path, n_raw, total, fmt_shape([extent0] + spec.sizes[1:])))
    a = np.zeros(total, dtype=spec.dtype)
    a[:n_raw] = np.fromfile(raw_path, dtype=spec.dtype.newbyteorder("<"), count=n_raw)
    return a.reshape([extent0] + spec.sizes[1:])


# --------------------------------------------------------------------------
# The reference pyramid (acquisition order)


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


def reference_pyramid(a0, spec):
    levels = [a0]
    for _ in range(1, spec.levels):
        levels.append(downsample_once(levels[-1], spec.downsample, spec.method))
    return levels


# --------------------------------------------------------------------------
# Metadata


def read_json(path):
    if not os.path.isfile(path):
        raise CheckError("%s: not found" % path)
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except ValueError as e:
        raise CheckError("%s is not JSON: %s" % (path, e))


def floats_close(a, b):
    return (isinstance(a, (int, float)) and not isinstance(a, bool)
            and isinstance(b, (int, float)) and not isinstance(b, bool)
            and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300))


def check_array_meta(path, spec, shape, level=None):
    if level is not None and not os.path.isfile(os.path.join(path, "zarr.json")):
        raise Mismatch("level %d: %s/zarr.json not found" % (level, path))
    meta = read_json(os.path.join(path, "zarr.json"))
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise Mismatch("%s/zarr.json is not a Zarr v3 array (zarr_format=%r node_type=%r)"
                       % (path, meta.get("zarr_format"), meta.get("node_type")))
    problems = []
    if meta.get("data_type") != spec.dtype.name:
        problems.append("data_type %r, expected %r" % (meta.get("data_type"), spec.dtype.name))
    if list(meta.get("shape", ())) != list(shape):
        problems.append("shape %s, expected %s" % (fmt_shape(meta.get("shape", ())), fmt_shape(shape)))
    if meta.get("dimension_names") != spec.storage_order:
        problems.append("dimension_names %r, expected %r" % (meta.get("dimension_names"), spec.storage_order))
    codecs = meta.get("codecs") or []
    if not codecs or not isinstance(codecs[0], dict) or codecs[0].get("name") != "sharding_indexed":
        problems.append("codecs do not start with sharding_indexed: %s"
                        % [c.get("name") if isinstance(c, dict) else c for c in codecs])
    if problems:
        raise Mismatch("%s/zarr.json: %s" % (path, "; ".join(problems)))
    return meta


def compare_transforms(where, got, want):
    """Lists of coordinateTransformations, numbers compared to 1e-12 relative."""
    if not isinstance(got, list) or len(got) != len(want) \
            or any(not isinstance(g, dict) or g.get("type") != w["type"] for g, w in zip(got, want)):
        raise Mismatch("%s: coordinateTransformations %s, expected %s"
                       % (where, json.dumps(got), json.dumps(want)))
    for g, w in zip(got, want):
        key = w["type"]
        if set(g) != {"type", key}:
            raise Mismatch("%s: %s transform has keys %s, expected %s"
                           % (where, key, sorted(g), ["type", key]))
        gv, wv = g[key], w[key]
        if not isinstance(gv, list) or len(gv) != len(wv) or not all(map(floats_close, gv, wv)):
            raise Mismatch("%s: %s %s, expected %s" % (where, key, json.dumps(gv), json.dumps(wv)))


def check_group_meta(store, spec, shapes_st):
    """The group's zarr.json: the ome block and the user's attributes."""
    meta = read_json(os.path.join(store, "zarr.json"))
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "group":
        raise Mismatch("%s/zarr.json is not a Zarr v3 group (zarr_format=%r node_type=%r)"
                       % (store, meta.get("zarr_format"), meta.get("node_type")))
    attrs = meta.get("attributes")
    if not isinstance(attrs, dict) or not isinstance(attrs.get("ome"), dict):
        raise Mismatch("%s/zarr.json: no attributes.ome object" % store)
    where = "%s/zarr.json attributes" % store
    user = {k: v for k, v in spec.attributes.items() if k != "ome"}
    others = {k: v for k, v in attrs.items() if k != "ome"}
    if others != user:
        missing = sorted(k for k in user if k not in others or others[k] != user[k])
        extra = sorted(k for k in others if k not in user)
        raise Mismatch("%s: user attributes differ from the config's: wrong or missing %s, unexpected %s"
                       % (where, missing, extra))
    ome = attrs["ome"]
    keys = {"version", "multiscales"} | ({"omero"} if spec.omero is not None else set())
    if set(ome) != keys:
        raise Mismatch("%s.ome: keys %s, expected %s" % (where, sorted(ome), sorted(keys)))
    if ome.get("omero") != spec.omero:
        raise Mismatch("%s.ome.omero %s, the config gives %s"
                       % (where, json.dumps(ome.get("omero")), json.dumps(spec.omero)))
    if ome["version"] != OME_VERSION:
        raise Mismatch("%s.ome.version %r, expected %r" % (where, ome["version"], OME_VERSION))
    ms = ome["multiscales"]
    if not isinstance(ms, list) or len(ms) != 1 or not isinstance(ms[0], dict):
        raise Mismatch("%s.ome.multiscales must be a list of one object" % where)
    m = ms[0]
    where += ".ome.multiscales[0]"
    allowed = {"name", "axes", "datasets", "type", "metadata"}  # metadata: OME's free-form block
    if set(m) - allowed or not {"axes", "datasets"} <= set(m):
        raise Mismatch("%s: keys %s, expected axes, datasets and optionally name, type, metadata"
                       % (where, sorted(m)))
    if "metadata" in m and not isinstance(m["metadata"], dict):
        raise Mismatch("%s.metadata %s is not an object" % (where, json.dumps(m["metadata"])))
    if spec.ome_name is not None:
        if m.get("name") != spec.ome_name:
            raise Mismatch("%s.name %r, expected %r" % (where, m.get("name"), spec.ome_name))
    elif m.get("name") is not None:
        raise Mismatch("%s.name %r, the config gives none" % (where, m.get("name")))
    if m.get("type") != spec.method and (spec.has_multiscale or m.get("type") is not None):
        raise Mismatch("%s.type %r, expected %r" % (where, m.get("type"), spec.method))
    if m["axes"] != spec.axes():
        raise Mismatch("%s.axes %s, expected %s" % (where, json.dumps(m["axes"]), json.dumps(spec.axes())))
    ds, want = m["datasets"], spec.datasets()
    if not isinstance(ds, list) or len(ds) != len(want):
        raise Mismatch("%s.datasets: %s level(s), expected %d"
                       % (where, len(ds) if isinstance(ds, list) else "not a list", len(want)))
    for k, (g, w) in enumerate(zip(ds, want)):
        if not isinstance(g, dict) or set(g) != {"path", "coordinateTransformations"}:
            raise Mismatch("%s.datasets[%d] %s: expected keys path, coordinateTransformations"
                           % (where, k, json.dumps(g)))
        if g["path"] != w["path"]:
            raise Mismatch("%s.datasets[%d].path %r, expected %r" % (where, k, g["path"], w["path"]))
        compare_transforms("%s.datasets[%d]" % (where, k), g["coordinateTransformations"],
                           w["coordinateTransformations"])
    for k, shape in enumerate(shapes_st):
        check_array_meta(os.path.join(store, str(k)), spec, shape, k)


def check_plain_meta(store, spec, shape_st):
    meta = check_array_meta(store, spec, shape_st)
    if meta.get("attributes", {}) != spec.attributes:
        raise Mismatch("%s/zarr.json: attributes %s, expected the config's %s"
                       % (store, json.dumps(meta.get("attributes")), json.dumps(spec.attributes)))


# --------------------------------------------------------------------------
# Readers and the bit-exact comparison


def uint_bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.dtype("u%d" % a.dtype.itemsize))


def open_zarr(path):
    import zarr
    return zarr.open_array(store=path, mode="r", zarr_format=3)


def open_tensorstore(path):
    import tensorstore as ts
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.abspath(path)}},
                  read=True, open=True).result()
    if any(int(x) for x in arr.domain.inclusive_min):
        raise CheckError("tensorstore: %s: domain origin %s is not zero"
                         % (path, tuple(arr.domain.inclusive_min)))
    return arr


READERS = {
    "zarr": (open_zarr, lambda arr, lo, hi: np.asarray(arr[lo:hi]),
             lambda arr: np.dtype(arr.dtype)),
    "tensorstore": (open_tensorstore, lambda arr, lo, hi: np.asarray(arr[lo:hi].read().result()),
                    lambda arr: np.dtype(arr.dtype.numpy_dtype)),
}


def compare_level(reader, path, level, want, names, slab_bytes=SLAB_BYTES):
    """Read the array at path with reader and compare it bit-exactly with want."""
    opener, read, dtype_of = READERS[reader]
    try:
        arr = opener(path)
    except CheckError:
        raise
    except Exception as e:
        raise CheckError("%s could not open %s: %s: %s" % (reader, path, type(e).__name__, e)) from e
    shape = tuple(int(s) for s in arr.shape)
    if shape != want.shape:
        raise Mismatch("level %d %s: shape %s, expected %s" % (level, reader, fmt_shape(shape), fmt_shape(want.shape)))
    if dtype_of(arr).newbyteorder("=") != want.dtype.newbyteorder("="):
        raise Mismatch("level %d %s: dtype %s, expected %s" % (level, reader, dtype_of(arr), want.dtype.name))
    if want.size == 0:
        return
    row_bytes = max(1, want[0].nbytes)
    rows = max(1, slab_bytes // row_bytes)
    for lo in range(0, shape[0], rows):
        hi = min(shape[0], lo + rows)
        got = read(arr, lo, hi)
        if got.shape != want[lo:hi].shape:
            raise CheckError("%s: read of rows [%d, %d) of level %d returned shape %s"
                             % (reader, lo, hi, level, got.shape))
        gb = uint_bits(got.astype(want.dtype.newbyteorder("="), copy=False))
        wb = uint_bits(want[lo:hi])
        diff = np.flatnonzero(gb != wb)
        if diff.size:
            at = tuple(int(i) for i in np.unravel_index(int(diff[0]), gb.shape))
            idx = (at[0] + lo,) + at[1:]
            w = want.dtype.itemsize * 2
            raise Mismatch(
                "level %d %s: MISMATCH at index (%s) [%s]: expected %r (0x%0*x) got %r (0x%0*x); "
                "%d differing element(s) in rows [%d, %d)"
                % (level, reader, ",".join(map(str, idx)), ",".join(names), want[idx].item(), w,
                   int(wb[at]), got[at].item(), w, int(gb[at]), diff.size, lo, hi))


def run_validator(store):
    """The OME-NGFF 0.5 validator (ome-zarr-models); warnings count as failures."""
    import zarr
    from ome_zarr_models.exceptions import ValidationWarning
    from ome_zarr_models.v05.image import Image
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ValidationWarning)
        try:
            group = zarr.open_group(store, mode="r", zarr_format=3)
            Image.from_zarr(group)
        except Exception as e:
            msg = " ".join(str(e).split())
            raise Mismatch("OME-NGFF 0.5 validator rejects %s: %s: %s" % (store, type(e).__name__, msg)) from e
    bad = [w for w in caught if issubclass(w.category, ValidationWarning)]
    if bad:
        raise Mismatch("OME-NGFF 0.5 validator warns on %s: %s" % (store, "; ".join(str(w.message) for w in bad)))


def run_ome_zarr_reader(store, spec, shapes_st):
    """ome-zarr-py's Reader lists every level, the axes and each level's transforms."""
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Multiscales, Reader
    loc = parse_url(os.path.abspath(store), mode="r")
    if loc is None:
        raise Mismatch("ome-zarr-py: %s is not a Zarr group it can open" % store)
    if loc.version != OME_VERSION:
        raise Mismatch("ome-zarr-py: %s detected as OME-NGFF %s, expected %s" % (store, loc.version, OME_VERSION))
    nodes = list(Reader(loc)())
    if not nodes or not any(isinstance(s, Multiscales) for s in nodes[0].specs):
        raise Mismatch("ome-zarr-py: %s: no multiscale image found (nodes %s)" % (store, nodes))
    node = nodes[0]
    if len(node.data) != spec.levels:
        raise Mismatch("ome-zarr-py: %s: %d level(s), expected %d" % (store, len(node.data), spec.levels))
    for k, (d, shape) in enumerate(zip(node.data, shapes_st)):
        if tuple(d.shape) != tuple(shape) or np.dtype(d.dtype) != spec.dtype:
            raise Mismatch("ome-zarr-py: %s level %d: shape %s dtype %s, expected %s %s"
                           % (store, k, fmt_shape(d.shape), d.dtype, fmt_shape(shape), spec.dtype.name))
    axes = node.metadata.get("axes")
    want_axes = spec.axes()
    got_axes = [{k: a.get(k) for k in ("name", "type", "unit") if a.get(k) is not None}
                if isinstance(a, dict) else a for a in (axes or [])]
    if got_axes != want_axes:
        raise Mismatch("ome-zarr-py: %s: axes %s, expected %s" % (store, json.dumps(axes), json.dumps(want_axes)))
    if spec.omero is not None:
        # The omero block as a viewer reads it: a name per channel.
        want_names = [c.get("label", "channel_%d" % i) for i, c in enumerate(spec.omero["channels"])]
        if node.metadata.get("channel_names") != want_names:
            raise Mismatch("ome-zarr-py: %s: channel names %s, expected %s"
                           % (store, node.metadata.get("channel_names"), want_names))
    cts = node.metadata.get("coordinateTransformations")
    want = [d["coordinateTransformations"] for d in spec.datasets()]
    if not isinstance(cts, list) or len(cts) != len(want):
        raise Mismatch("ome-zarr-py: %s: coordinateTransformations %s, expected %d level(s)"
                       % (store, json.dumps(cts), len(want)))
    for k, (g, w) in enumerate(zip(cts, want)):
        compare_transforms("ome-zarr-py: %s level %d" % (store, k), g, w)


# --------------------------------------------------------------------------
# One store


def check_store(store, raw, config):
    """Check one store; returns (status, message): 0 OK, 1 mismatch, 2 error."""
    try:
        if not os.path.isdir(store):
            raise CheckError("store %s is not a directory" % store)
        spec = config if isinstance(config, Spec) else load_config(config)
        a0 = load_level0(raw, spec)
        pyramid = reference_pyramid(a0, spec)
        st_names = spec.storage_order
        want = [np.ascontiguousarray(np.transpose(a, spec.perm)) for a in pyramid]
        shapes_st = [w.shape for w in want]
        if spec.ome:
            check_group_meta(store, spec, shapes_st)
            paths = [os.path.join(store, str(k)) for k in range(spec.levels)]
        else:
            check_plain_meta(store, spec, shapes_st[0])
            paths = [store]
        for k, (path, w) in enumerate(zip(paths, want)):
            for reader in READERS:
                compare_level(reader, path, k, w, st_names)
        checks = "zarr,tensorstore"
        if spec.ome:
            run_validator(store)
            run_ome_zarr_reader(store, spec, shapes_st)
            checks += ",validator,ome-zarr"
        msg = ("OK %s %s levels=%d shape=%s dtype=%s%s axes=%s [%s]"
               % (store, "ome" if spec.ome else "plain", spec.levels, fmt_shape(shapes_st[0]),
                  spec.dtype.name, " method=%s" % spec.method if spec.levels > 1 else "",
                  ",".join(st_names), checks))
        return 0, msg
    except Mismatch as e:
        return 1, "FAIL %s %s" % (store, e)
    except CheckError as e:
        return 2, "ERROR %s %s" % (store, e)
    except Exception as e:
        if os.environ.get("CHECK_OME_TRACEBACK"):
            traceback.print_exc()
        return 2, "ERROR %s %s: %s" % (store, type(e).__name__, e)


def report(status, msg):
    print(msg, file=sys.stdout if status == 0 else sys.stderr, flush=True)
    return status


# --------------------------------------------------------------------------
# Self test


def _slow_downsample(a, downsample, method):
    """Element by element, with Python numbers: the twin of downsample_once."""
    oshape = level_shape(a.shape, downsample, 1)
    out = np.zeros(oshape, dtype=a.dtype)
    fmt = {2: "<e", 4: "<f", 8: "<d"}.get(a.dtype.itemsize)

    def total_key(x):
        if a.dtype.kind != "f":
            return int(x)
        b = int.from_bytes(struct.pack(fmt, x), "little", signed=True)
        return b ^ ((1 << (8 * a.dtype.itemsize - 1)) - 1) if b < 0 else b

    for oi in itertools.product(*(range(s) for s in oshape)):
        ranges = [[2 * i, 2 * i + 1] if ds else [i] for i, ds in zip(oi, downsample)]
        vals = [a[ix] for ix in itertools.product(*ranges)
                if all(j < s for j, s in zip(ix, a.shape))]
        if method == "decimate":
            v = vals[0]
        elif method in ("min", "max"):
            v = (min if method == "min" else max)(vals, key=total_key)
        elif method == "median":
            v = sorted(vals, key=total_key)[(len(vals) - 1) // 2]
        elif a.dtype.kind == "f":
            acc = 0.0
            for x in vals:
                acc = acc + float(x)
            v = np.float64(acc / len(vals)).astype(a.dtype)
        else:
            s, n = sum(int(x) for x in vals), len(vals)
            q, r = s // n, s % n
            if 2 * r > n or (2 * r == n and q % 2):
                q += 1
            v = q
        out[oi] = v
    return out


def _same_bits(got, want):
    return got.shape == want.shape and got.dtype == want.dtype and np.array_equal(uint_bits(got), uint_bits(want))


def _write_store(root, spec, raw_path, ome_attrs=None):
    """A store written by hand with zarr-python from the reference (sharded)."""
    import zarr
    a0 = load_level0(raw_path, spec)
    levels = [np.transpose(a, spec.perm) for a in reference_pyramid(a0, spec)]

    def create(parent, name, a):
        tile = [max(1, min(2, s)) for s in a.shape]
        shard = [t * 2 for t in tile]
        arr = parent.create_array(name=name, shape=a.shape, dtype=a.dtype, chunks=tile, shards=shard,
                                  dimension_names=spec.storage_order, fill_value=0,
                                  compressors=None) if parent is not None else \
            zarr.create_array(store=root, shape=a.shape, dtype=a.dtype, chunks=tile, shards=shard,
                              dimension_names=spec.storage_order, fill_value=0,
                              attributes=spec.attributes, zarr_format=3)
        arr[...] = a
        return arr

    if not spec.ome:
        create(None, None, levels[0])
        return
    if ome_attrs is None:
        m = {"axes": spec.axes(), "datasets": spec.datasets(), "type": spec.method}
        if spec.ome_name is not None:
            m["name"] = spec.ome_name
        ome_attrs = {"version": OME_VERSION, "multiscales": [m]}
        if spec.omero is not None:
            ome_attrs["omero"] = spec.omero
    g = zarr.create_group(store=root, zarr_format=3, attributes={"ome": ome_attrs, **spec.attributes})
    for k, a in enumerate(levels):
        create(g, str(k), a)


class SelfTest:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append("%s %s" % (name, detail))
            print("SELF-TEST FAIL %s %s" % (name, detail), file=sys.stderr, flush=True)

    def expect(self, name, a, downsample, method, want):
        a = np.asarray(a)
        got = downsample_once(a, downsample, method)
        want = np.asarray(want, dtype=a.dtype)
        self.check(name, _same_bits(got, want), "got %r expected %r" % (got.tolist(), want.tolist()))


def self_test():
    t0 = time.monotonic()
    T = SelfTest()
    D1, D2 = [True], [True, True]

    # 1-D, odd size, signed ints: ties to even, negative means
    a = np.array([3, 4, -1, -2, 7], dtype=np.int16)
    T.expect("int16 1-D decimate", a, D1, "decimate", [3, -1, 7])
    T.expect("int16 1-D mean", a, D1, "mean", [4, -2, 7])        # 3.5 -> 4, -1.5 -> -2
    T.expect("int16 1-D min", a, D1, "min", [3, -2, 7])
    T.expect("int16 1-D max", a, D1, "max", [4, -1, 7])
    T.expect("int16 1-D median", a, D1, "median", [3, -2, 7])    # lower median of two
    T.expect("int8 negative means", np.array([-1, -2, -1, -4, -1, 0, -3, 0], np.int8), D1, "mean",
             [-2, -2, 0, -2])                                     # -1.5, -2.5, -0.5, -1.5
    T.expect("uint8 ties to even", np.array([1, 2, 2, 3, 255, 255, 254], np.uint8), D1, "mean",
             [2, 2, 255, 254])                                    # 1.5, 2.5, 255, 254
    T.expect("uint64 mean exact", np.array([2**64 - 1, 2**64 - 1, 2**64 - 1, 2**64 - 2, 5], np.uint64),
             D1, "mean", [2**64 - 1, 2**64 - 2, 5])
    T.expect("int64 mean exact", np.array([-2**63, -2**63 + 1, 2**63 - 1, 2**63 - 2, -2**63 + 3, -2**63],
                                          np.int64), D1, "mean", [-2**63, 2**63 - 2, -2**63 + 2])
    T.expect("int64 median", np.array([2**63 - 1, -2**63, 5], np.int64), D1, "median", [-2**63, 5])

    # 2-D, odd sizes
    b = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.uint16)
    T.expect("uint16 2-D decimate", b, D2, "decimate", [[1, 3], [7, 9]])
    T.expect("uint16 2-D mean", b, D2, "mean", [[3, 4], [8, 9]])  # 12/4, 4.5 -> 4, 7.5 -> 8
    T.expect("uint16 2-D min", b, D2, "min", [[1, 3], [7, 9]])
    T.expect("uint16 2-D max", b, D2, "max", [[5, 6], [8, 9]])
    T.expect("uint16 2-D median", b, D2, "median", [[2, 3], [7, 9]])
    T.expect("int32 2-D one dim kept", np.array([[1, 2, 3], [-4, -5, -6]], np.int32), [False, True], "mean",
             [[2, 3], [-4, -6]])                                  # 1.5 -> 2, -4.5 -> -4

    # floats: totalOrder with signed zeros, float64 accumulation in window order
    f = np.array([-0.0, 0.0, 0.0, -0.0, 1.5, -2.5, 3.0], dtype=np.float32)
    T.expect("float32 1-D decimate", f, D1, "decimate", [-0.0, 0.0, 1.5, 3.0])
    T.expect("float32 1-D min", f, D1, "min", [-0.0, -0.0, -2.5, 3.0])
    T.expect("float32 1-D max", f, D1, "max", [0.0, 0.0, 1.5, 3.0])
    T.expect("float32 1-D median", f, D1, "median", [-0.0, -0.0, -2.5, 3.0])
    T.expect("float32 1-D mean", f, D1, "mean", [0.0, 0.0, -0.5, 3.0])
    T.expect("float64 2-D mean order", np.array([[1e17, 1.0, 2.0], [-1e17, 1.0, 4.0]]), D2, "mean",
             [[0.25, 3.0]])                                       # ((1e17+1)-1e17)+1 = 1
    T.expect("float64 2-D median", np.array([[-0.0, 0.0, 7.0], [0.0, -0.0, -7.0], [2.0, 1.0, 0.5]]), D2,
             "median", [[-0.0, -7.0], [1.0, 0.5]])
    T.expect("float16 mean rounds to even", np.array([2048, 2050, 1, 2], np.float16), D1, "mean",
             [2048, 1.5])                                         # 2049 -> 2048 in float16
    T.expect("float32 2-D max", np.array([[-1.0, -0.0], [-3.0, -2.0], [0.5, 9.0]], np.float32), D2, "max",
             [[-0.0], [9.0]])

    # the vectorised reference against its slow twin, every dtype and method
    rng = np.random.default_rng(7)
    for dt in DTYPES:
        dtype = np.dtype(dt)
        shape = (3, 5, 7)
        if dtype.kind == "f":
            a = (rng.standard_normal(shape) * 100).astype(dtype)
            a.flat[::11] = -0.0
            a.flat[5::13] = 0.0
        else:
            info = np.iinfo(dtype)
            a = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
            a.flat[::9] = info.max
            a.flat[4::10] = info.min
        for ds in ([True, True, True], [False, True, True], [True, False, True]):
            for method in METHODS:
                got = downsample_once(a, ds, method)
                want = _slow_downsample(a, ds, method)
                T.check("twin %s %s %s" % (dt, method, ds), _same_bits(got, want))

    # levels, shapes and the expected metadata
    cfg = {"dtype": "uint16", "multiscale": {"levels": 0},
           "dimensions": [{"name": "t", "size": 0, "tile": 1},
                          {"name": "y", "size": 100, "tile": 32, "unit": "micrometer", "scale": 0.5,
                           "translation": 1.0},
                          {"name": "x", "size": 50, "tile": 64},
                          {"name": "q", "size": 9, "tile": 2}]}
    s = Spec(cfg)
    T.check("auto levels", s.levels == 3, "got %d" % s.levels)       # y: 100, 50, 25 <= 32
    T.check("levels default to auto", Spec(dict(cfg, multiscale={"method": "max"})).levels == 3)
    T.check("no multiscale, one level", Spec(dict(cfg, multiscale=None, ome=True)).levels == 1)
    T.check("level shapes", s.level_shapes(5) == [[5, 100, 50, 9], [5, 50, 25, 9], [5, 25, 13, 9]],
            str(s.level_shapes(5)))
    T.check("axes", s.axes() == [{"name": "t", "type": "time"}, {"name": "y", "type": "space", "unit": "micrometer"},
                                 {"name": "x", "type": "space"}, {"name": "q"}], json.dumps(s.axes()))
    T.check("datasets", s.datasets()[2] == {"path": "2", "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 2.0, 4.0, 1.0]},
        {"type": "translation", "translation": [0.0, 1.75, 1.5, 0.0]}]}, json.dumps(s.datasets()[2]))
    cfg_dec = dict(cfg, multiscale={"levels": 2, "method": "decimate"})
    T.check("no translation when zero", len(Spec(dict(cfg_dec, dimensions=cfg["dimensions"][2:]))
                                            .datasets()[1]["coordinateTransformations"]) == 1)
    T.check("decimate keeps translation", Spec(cfg_dec).transforms(1) == ([1.0, 1.0, 2.0, 1.0], [0.0, 1.0, 0.0, 0.0]),
            str(Spec(cfg_dec).transforms(1)))

    # whole stores, written by hand, checked end to end
    tmp = tempfile.mkdtemp(prefix="check_ome_selftest_")
    try:
        def make(name, cfg, n_elems, ome_attrs=None, seed=0):
            d = os.path.join(tmp, name)
            os.makedirs(d)
            cfg_path, raw_path, store = (os.path.join(d, "config.json"), os.path.join(d, "raw.bin"),
                                         os.path.join(d, "store"))
            with open(cfg_path, "w") as f:
                json.dump(cfg, f)
            dtype = np.dtype(cfg["dtype"])
            r = np.random.default_rng(seed)
            if dtype.kind == "f":
                data = (r.standard_normal(n_elems) * 1000).astype(dtype)
            else:
                info = np.iinfo(dtype)
                data = r.integers(info.min, info.max, size=n_elems, dtype=dtype, endpoint=True)
            data.astype(dtype.newbyteorder("<")).tofile(raw_path)
            _write_store(store, load_config(cfg_path), raw_path, ome_attrs)
            return store, raw_path, cfg_path

        # uint16 5-D, unbounded t ending mid-plane, storage order differs,
        # levels to one tile; its OME block written out by hand
        cfg_a = {"dtype": "uint16", "storage_order": ["t", "c", "z", "y", "x"],
                 "multiscale": {"levels": 0, "method": "mean"},
                 "attributes": {"instrument": "bench", "n": 3},
                 "codec": {"name": "zstd"},
                 "dimensions": [
                     {"name": "t", "size": 0, "tile": 2, "unit": "second", "scale": 0.5},
                     {"name": "z", "size": 3, "tile": 2, "unit": "micrometer", "scale": 2.0},
                     {"name": "c", "size": 2, "tile": 1},
                     {"name": "y", "size": 7, "tile": 4, "unit": "micrometer", "scale": 0.25, "translation": 1.0},
                     {"name": "x", "size": 5, "tile": 4, "unit": "micrometer", "scale": 0.25}]}
        ome_a = {"version": "0.5", "multiscales": [{
            "axes": [{"name": "t", "type": "time", "unit": "second"}, {"name": "c", "type": "channel"},
                     {"name": "z", "type": "space", "unit": "micrometer"},
                     {"name": "y", "type": "space", "unit": "micrometer"},
                     {"name": "x", "type": "space", "unit": "micrometer"}],
            "datasets": [
                {"path": "0", "coordinateTransformations": [
                    {"type": "scale", "scale": [0.5, 1.0, 2.0, 0.25, 0.25]},
                    {"type": "translation", "translation": [0.0, 0.0, 0.0, 1.0, 0.0]}]},
                {"path": "1", "coordinateTransformations": [
                    {"type": "scale", "scale": [0.5, 1.0, 4.0, 0.5, 0.5]},
                    {"type": "translation", "translation": [0.0, 0.0, 1.0, 1.125, 0.125]}]}],
            "type": "mean", "metadata": {"method": "written by hand"}}]}
        plane = 3 * 2 * 7 * 5
        good_a = make("a", cfg_a, plane * 2 + 17, ome_a, seed=1)
        st, msg = check_store(*good_a)
        T.check("store uint16 mean passes", st == 0 and "levels=2 shape=3,2,3,7,5" in msg, msg)

        # float32, median, three levels, named, 3-D with a kept custom axis
        window = {"start": 0.0, "end": 1.0, "min": -1.0, "max": 2.0}
        omero_b = {"channels": [{"label": "DAPI", "color": "0000FF", "window": window},
                                {"label": "GFP", "color": "00FF00", "window": window}]}
        cfg_b = {"dtype": "float32", "ome": {"name": "cells", "omero": omero_b},
                 "multiscale": {"levels": 3, "method": "median"},
                 "dimensions": [{"name": "c", "size": 2, "tile": 1},
                                {"name": "y", "size": 9, "tile": 4, "unit": "nanometer"},
                                {"name": "x", "size": 6, "tile": 4}]}
        good_b = make("b", cfg_b, 2 * 9 * 6, seed=2)
        st, msg = check_store(*good_b)
        T.check("store float32 median passes", st == 0, msg)

        # int64, min, on the unbounded axis too; a plain (non-OME) store
        cfg_c = {"dtype": "int64", "multiscale": {"levels": 3, "method": "min"},
                 "dimensions": [{"name": "t", "size": 0, "tile": 2, "downsample": True},
                                {"name": "y", "size": 5, "tile": 4}, {"name": "x", "size": 3, "tile": 4}]}
        st, msg = check_store(*make("c", cfg_c, 5 * 15 + 1, seed=3))
        T.check("store int64 min passes", st == 0 and "shape=6,5,3" in msg, msg)
        cfg_d = {"dtype": "uint8", "attributes": {"k": [1, 2]},
                 "dimensions": [{"name": "t", "size": 0, "tile": 2}, {"name": "x", "size": 6, "tile": 4}]}
        st, msg = check_store(*make("d", cfg_d, 20, seed=4))
        T.check("plain store passes", st == 0 and " plain " in msg, msg)

        # the checker must fail: a corrupted element of level 1
        import zarr
        bad_store = os.path.join(tmp, "a_bad")
        shutil.copytree(good_a[0], bad_store)
        arr = zarr.open_array(os.path.join(bad_store, "1"), mode="r+")
        arr[1, 0, 1, 2, 2] = (int(arr[1, 0, 1, 2, 2]) + 1) % 65536
        st, msg = check_store(bad_store, good_a[1], good_a[2])
        T.check("corrupted store fails", st == 1 and "level 1" in msg and "(1,0,1,2,2)" in msg, msg)
        spec_a = load_config(good_a[2])
        want1 = np.transpose(reference_pyramid(load_level0(good_a[1], spec_a), spec_a)[1], spec_a.perm)
        for reader in READERS:  # read one row at a time: the index counts from the slab's start
            try:
                compare_level(reader, os.path.join(bad_store, "1"), 1, want1, spec_a.storage_order, slab_bytes=1)
                T.check("corrupted store, slabs, " + reader, False, "no mismatch reported")
            except Mismatch as e:
                T.check("corrupted store, slabs, " + reader, "(1,0,1,2,2)" in str(e), str(e))

        # wrong metadata: a scale off, the user's attributes overwriting ome
        meta_store = os.path.join(tmp, "a_meta")
        shutil.copytree(good_a[0], meta_store)
        zj = os.path.join(meta_store, "zarr.json")
        doc = read_json(zj)
        doc["attributes"]["ome"]["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"][2] = 2.0
        with open(zj, "w") as f:
            json.dump(doc, f)
        st, msg = check_store(meta_store, good_a[1], good_a[2])
        T.check("wrong scale fails", st == 1 and "datasets[1]" in msg, msg)

        # a bad axis order (time not first): consistent with its config,
        # data right, so only the validator can refuse it
        cfg_e = {"dtype": "uint16", "multiscale": {"levels": 2},
                 "dimensions": [{"name": "y", "size": 5, "tile": 4}, {"name": "t", "size": 2, "tile": 1},
                                {"name": "x", "size": 4, "tile": 4}]}
        st, msg = check_store(*make("e", cfg_e, 40, seed=5))
        T.check("bad axis order fails in the validator", st == 1 and "validator rejects" in msg, msg)

        # omero: a colour no viewer reads, consistent with its config, so
        # only the outside checks can refuse it (ome-zarr-py, which runs
        # first, reads no channel names); an omero block the store lacks
        bad_colour = json.loads(json.dumps(cfg_b))
        bad_colour["ome"]["omero"]["channels"][1]["color"] = "green"
        st, msg = check_store(*make("f", bad_colour, 2 * 9 * 6, seed=6))
        T.check("bad omero colour fails in an outside check",
                st == 1 and ("validator rejects" in msg or "ome-zarr-py" in msg), msg)
        no_omero = os.path.join(tmp, "b_no_omero")
        shutil.copytree(good_b[0], no_omero)
        zj = os.path.join(no_omero, "zarr.json")
        doc = read_json(zj)
        del doc["attributes"]["ome"]["omero"]
        with open(zj, "w") as f:
            json.dump(doc, f)
        st, msg = check_store(no_omero, good_b[1], good_b[2])
        T.check("missing omero block fails", st == 1 and "omero" in msg, msg)

        # each outside check can fail on its own: ome-zarr-py's Reader with
        # other levels or units than it finds, the validator without a level
        spec_b = load_config(good_b[2])
        shapes_b = [tuple(spec_b.to_storage(s)) for s in spec_b.level_shapes(2)]
        for what, change in (("levels", {"levels": 2}), ("units", {"units": ["second", None, None]})):
            other = load_config(good_b[2])
            other.__dict__.update(change)
            try:
                run_ome_zarr_reader(good_b[0], other, shapes_b)
                T.check("ome-zarr-py sees other %s" % what, False, "no mismatch reported")
            except Mismatch as e:
                T.check("ome-zarr-py sees other %s" % what, "ome-zarr-py" in str(e), str(e))
        gone = os.path.join(tmp, "b_gone")
        shutil.copytree(good_b[0], gone)
        shutil.rmtree(os.path.join(gone, "2"))
        try:
            run_validator(gone)
            T.check("validator: missing level", False, "accepted")
        except Mismatch as e:
            T.check("validator: missing level", "validator rejects" in str(e), str(e))
        st, msg = check_store(gone, good_b[1], good_b[2])
        T.check("missing level fails", st == 1 and "level 2" in msg, msg)

        # manifest: all the good stores, and --min
        man = os.path.join(tmp, "manifest.tsv")
        with open(man, "w") as f:
            for s3 in (good_a, good_b):
                f.write("\t".join(s3) + "\n")
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            T.check("manifest passes", check_manifest(["--manifest", man, "--min", "2"]) == 0)
        with contextlib.redirect_stderr(open(os.devnull, "w")):
            T.check("manifest --min", check_manifest(["--manifest", man, "--min", "3"]) == 2)
        st, msg = check_store(good_a[0], good_a[1], good_b[2])
        T.check("wrong config fails", st in (1, 2), msg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    dt = time.monotonic() - t0
    if T.failed:
        print("self-test: %d passed, %d failed (%.1f s)" % (T.passed, len(T.failed), dt), file=sys.stderr)
        return 1
    print("self-test: %d passed, 0 failed (%.1f s)" % (T.passed, dt), flush=True)
    return 0


# --------------------------------------------------------------------------
# Command line


def check_manifest(argv, check=None, columns="store, raw, config"):
    """Checks every store a manifest lists (one per line, three fields
    separated by tabs: `columns`) with `check(*fields)` (default: each
    store as check_store does); fewer than --min lines is an error."""
    check = check or check_store
    p = argparse.ArgumentParser(description="check every store of a manifest")
    p.add_argument("--manifest", required=True)
    p.add_argument("--min", type=int, default=1, help="fewest stores the manifest must list")
    a = p.parse_args(argv)
    try:
        with open(a.manifest) as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    except OSError as e:
        return report(2, "ERROR manifest %s: %s" % (a.manifest, e))
    if len(rows) < a.min:
        return report(2, "ERROR %s lists %d stores, expected at least %d" % (a.manifest, len(rows), a.min))
    for row in rows:
        if len(row) != 3:
            return report(2, "ERROR %s: bad line %r (%s separated by tabs)" % (a.manifest, row, columns))
    status = 0
    for row in rows:
        status = max(status, report(*check(*row)))
    print("checked %d stores" % len(rows), flush=True)
    return status

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    logging.getLogger("ome_zarr").setLevel(logging.ERROR)  # its format-detection chatter
    if "--self-test" in argv:
        return self_test()
    if any(x == "--manifest" or x.startswith("--manifest=") for x in argv):
        return check_manifest(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True, help="directory of the store")
    p.add_argument("--raw", required=True, help="raw little-endian row-major elements, acquisition order")
    p.add_argument("--config", required=True, help="the JSON config the store was written with")
    a = p.parse_args(argv)
    return report(*check_store(a.store, a.raw, a.config))


if __name__ == "__main__":
    sys.exit(main())
