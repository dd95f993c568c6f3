"""check_ome.py's self-test: the reference pyramid on small hand-computed
examples and against an element-by-element twin, and the checks against
stores written by hand that must pass or fail.

    check_ome.py --self-test
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import numpy as np

from check_ome import (
    READERS, _write_store, check_manifest, check_store, compare_level, load_level0, read_json,
    reference_pyramid, run_ome_zarr_reader, run_validator, uint_bits,
)
from ome_pyramid import downsample_once, level_shape
from ome_spec import METHODS, Spec, load_config
from check_store import DTYPES, Mismatch


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
