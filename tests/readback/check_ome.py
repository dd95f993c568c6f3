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
import json
import logging
import math
import os
import sys
import traceback
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_store import CheckError, Mismatch, fmt_shape  # noqa: E402
from ome_pyramid import downsample_once  # noqa: E402
from ome_spec import Spec, load_config  # noqa: E402

SLAB_BYTES = 256 * 1024 * 1024
OME_VERSION = "0.5"


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


# A store written by hand, for the self-tests (here and check_arrays.py)

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
        import ome_self_test
        return ome_self_test.self_test()
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
