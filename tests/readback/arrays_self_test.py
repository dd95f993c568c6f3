"""check_arrays.py's self-test: stores written by hand with zarr-python that
must pass, and changed copies of them that must fail, each naming what is
wrong.

    check_arrays.py --self-test
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import check_ome
import ome_spec
import ome_self_test
from check_arrays import (
    Layout, check, check_manifest, dig, level0_shape, load_layout, run_models, run_reader,
    run_yaozarrs,
)
from check_store import Mismatch


def _write_layout(d, cfg, n_elems, seed=0):
    """A store written by hand (zarr-python, sharded), its raw files and config."""
    import zarr
    store, raw_dir, cfg_path = os.path.join(d, "store"), os.path.join(d, "raw"), os.path.join(d, "config.json")
    os.makedirs(raw_dir)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    r = np.random.default_rng(seed)
    for i, (entry, n) in enumerate(zip(cfg["arrays"], n_elems)):
        dtype = np.dtype(entry["dtype"])
        data = (r.standard_normal(n) * 1000).astype(dtype) if dtype.kind == "f" \
            else r.integers(0, np.iinfo(dtype).max, size=n, dtype=dtype, endpoint=True)
        raw = os.path.join(raw_dir, "%d.raw" % i)
        data.astype(dtype.newbyteorder("<")).tofile(raw)
        check_ome._write_store(os.path.join(store, *entry["key"].split("/")), ome_spec.Spec(entry), raw)
    for rel, _, attrs in Layout(cfg).groups():
        zarr.create_group(store=os.path.join(store, rel), zarr_format=3, attributes=attrs or {})
    return store, cfg_path, raw_dir


def _edit_json(rel, fn):
    """A change to a store: fn(doc) on its zarr.json at rel."""
    def change(store):
        path = os.path.join(store, *rel.split("/"), "zarr.json")
        doc = check_ome.read_json(path)
        fn(doc)
        with open(path, "w") as f:
            json.dump(doc, f)
    return change


def _poke(rel, idx):
    """A change to a store: flip the lowest bit of one element of the array at rel."""
    def change(store):
        import zarr
        arr = zarr.open_array(os.path.join(store, rel), mode="r+")
        v = np.array(arr[idx])
        arr[idx] = (v.view(np.dtype("u%d" % v.dtype.itemsize)) ^ 1).view(v.dtype)
    return change


def self_test():
    t0 = time.monotonic()
    T = ome_self_test.SelfTest()
    tmp = tempfile.mkdtemp(prefix="check_arrays_selftest_")
    dim = lambda name, size, tile, **kw: dict(name=name, size=size, tile=tile, **kw)  # noqa: E731
    tyx = [dim("t", 0, 2), dim("y", 9, 4, unit="micrometer", scale=0.5), dim("x", 6, 4)]
    cyx = [dim("c", 2, 1), dim("y", 5, 4), dim("x", 7, 4)]
    u16_2 = {"dtype": "uint16", "dimensions": tyx, "multiscale": {"levels": 2}, "attributes": {"run": 1}}
    f32 = {"dtype": "float32", "dimensions": cyx, "ome": {"name": "beads"}, "codec": {"name": "zstd"}}
    u16 = {"dtype": "uint16", "dimensions": cyx, "ome": True}
    n_t = 2 * 9 * 6 + 31  # t ends mid-plane
    rm = lambda rel: lambda s: (shutil.rmtree if os.path.isdir(os.path.join(s, rel)) else os.remove)(  # noqa: E731
        os.path.join(s, rel))
    ome_of = lambda *keys: lambda fn: lambda d: fn(dig(d, "attributes", "ome", *keys))  # noqa: E731
    try:
        def make(name, cfg, n_elems):
            os.makedirs(os.path.join(tmp, name))
            good = _write_layout(os.path.join(tmp, name), cfg, n_elems, seed=len(name))
            st, msg = check(*good)
            T.check("%s passes" % name, st == 0 and msg.startswith("OK "), msg)
            return good

        def broken(name, good, change, *want):
            """A copy of good with change(store) applied must fail naming want."""
            bad = os.path.join(tmp, name)
            shutil.copytree(good[0], bad)
            change(bad)
            st, msg = check(bad, good[1], good[2])
            T.check("%s fails" % name, st == 1 and all(w in msg for w in want), "status %d: %s" % (st, msg))
            return bad

        def refused(name, fn, *want):
            try:
                fn()
                T.check(name, False, "accepted")
            except Mismatch as e:
                T.check(name, all(w in str(e) for w in want), str(e))

        coll = make("collection", {"collection": "bioformats2raw", "arrays": [
            dict(u16_2, key="0"), dict(f32, key="1"), dict(u16, key="2")]}, [n_t, 70, 70])
        plate_cfg = {"plate": {
            "name": "screen 1", "rows": ["A", "B"], "columns": ["1", "2", "3"],
            "wells": [{"row": "A", "column": "1", "fields": ["A/1/0", "A/1/1"]},
                      {"row": "B", "column": "3", "fields": ["B/3/0"]},
                      {"row": "A", "column": "2", "fields": ["A/2/0"]}],
            "acquisitions": [{"id": 0, "name": "first"}]},
            "arrays": [dict(u16, key="A/1/0"), dict(u16, key="A/1/1"), dict(f32, key="B/3/0"),
                       dict(u16, key="A/2/0")]}
        plate = make("plate", plate_cfg, [70, 60, 70, 70])
        plain = make("plain", {"arrays": [dict(u16_2, key="a/b/img"), dict(dtype="uint16", dimensions=tyx,
                                                                             key="a/flat"),
                                          dict(f32, key="c")]}, [n_t, n_t, 70])
        L, LC = load_layout(plate[1]), load_layout(coll[1])
        T.check("plate document", L.plate_doc["field_count"] == 2 and L.plate_doc["wells"][1] ==
                {"path": "B/3", "rowIndex": 1, "columnIndex": 2} and load_layout(plain[1]).intermediates
                == ["a", "a/b"], json.dumps(L.plate_doc))

        # a wrong element of one image: level 0 of a float field, level 1
        broken("plate_element", plate, _poke("B/3/0/0", (1, 2, 3)), "'B/3/0'", "level 0", "(1,2,3)")
        broken("collection_element", coll, _poke("0/1", (2, 4, 2)), "'0'", "level 1", "(2,4,2)")
        # a well listing a field that is not there, and a field's folder gone
        bad = broken("well_extra_field", plate, _edit_json("A/1", ome_of("well", "images")(
            lambda v: v.append({"path": "2"}))), "A/1/zarr.json attributes.ome.well.images: 3 entries")
        refused("yaozarrs: well lists a missing field", lambda: run_yaozarrs(bad, L), "yaozarrs rejects", "'2'")
        broken("field_gone", plate, rm("A/1/1"), "'A/1/1'", "not found")
        # a plate wells entry with a wrong rowIndex, and one out of range
        wells = ome_of("plate", "wells")
        broken("plate_row_index", plate, _edit_json("", wells(lambda v: v[1].update(rowIndex=0))),
               "wells[1].rowIndex: 0, expected 1")
        bad = broken("plate_row_range", plate, _edit_json("", wells(lambda v: v[1].update(rowIndex=5))),
                     "rowIndex: 5")
        refused("yaozarrs: rowIndex out of range", lambda: run_yaozarrs(bad, L), "yaozarrs rejects", "rowIndex 5")
        # series out of order; the acquisitions dropped
        broken("series_order", coll, _edit_json("OME", ome_of("series")(lambda v: v.reverse())),
               "OME/zarr.json attributes.ome.series[0]")
        broken("plate_no_acquisitions", plate, _edit_json("", ome_of("plate")(lambda v: v.pop("acquisitions"))),
               "no 'acquisitions'")
        # missing intermediate groups
        broken("plain_no_group", plain, rm("a/zarr.json"), "a/zarr.json not found")
        broken("plate_no_row", plate, rm("B/zarr.json"), "B/zarr.json not found")
        broken("collection_no_series", coll, rm("OME"), "OME/zarr.json not found")
        # an image whose level array is missing
        bad = broken("level_gone", coll, rm("0/1"), "'0'", "level 1")
        refused("yaozarrs: missing level", lambda: run_yaozarrs(bad, LC), "yaozarrs rejects", "'1' not found")
        bad = broken("plain_level_gone", plain, rm("a/b/img/1"), "'a/b/img'", "level 1")
        refused("yaozarrs: missing level of a nested image", lambda: run_yaozarrs(bad, load_layout(plain[1])),
                "yaozarrs rejects a/b/img")

        # each whole-store validator refuses on its own: ome-zarr-models a
        # well outside the rows, ome-zarr-py a plate of another size
        bad = broken("plate_well_path", plate, _edit_json("", wells(lambda v: v[1].update(path="C/3"))),
                     "wells[1].path")
        refused("ome-zarr-models: well outside the rows", lambda: run_models(bad, L), "ome-zarr-models HCS rejects")
        shapes = [level0_shape(s, os.path.join(plate[2], "%d.raw" % i)) for i, s in enumerate(L.specs)]
        wide = [s[:-1] + (s[-1] + 1,) for s in shapes]
        refused("ome-zarr-py: other shapes", lambda: run_reader(plate[0], L, wide), "ome-zarr-py", "stitched")

        # configs the checker refuses; the manifest and --min
        for what, cfg in (("a field outside its well", dict(plate_cfg, arrays=plate_cfg["arrays"][:3] + [
                              dict(u16, key="B/2/0")])),
                          ("collection and plate", dict(plate_cfg, collection="bioformats2raw")),
                          ("nested keys", {"arrays": [dict(u16, key="a"), dict(u16, key="a/b")]})):
            with open(os.path.join(tmp, "bad.json"), "w") as f:
                json.dump(cfg, f)
            st, msg = check(plate[0], os.path.join(tmp, "bad.json"), plate[2])
            T.check("config refused: " + what, st == 2, msg)
        man = os.path.join(tmp, "manifest.tsv")
        with open(man, "w") as f:
            f.writelines("\t".join(good) + "\n" for good in (coll, plate, plain))
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            T.check("manifest passes", check_manifest(["--manifest", man, "--min", "3"]) == 0)
        with contextlib.redirect_stderr(open(os.devnull, "w")):
            T.check("manifest --min", check_manifest(["--manifest", man, "--min", "4"]) == 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print("self-test: %d passed, %d failed (%.1f s)" % (T.passed, len(T.failed), time.monotonic() - t0),
          file=sys.stderr if T.failed else sys.stdout, flush=True)
    return 1 if T.failed else 0
