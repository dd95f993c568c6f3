#!/usr/bin/env python3
"""Check a store that holds several images written by one stream: the groups
that tie them together, every image against its raw input, and the whole store
with independent OME-NGFF 0.5 validators.

    check_arrays.py --store DIR --config CONFIG.json --raw-dir RAWDIR
    check_arrays.py --manifest FILE [--min N]
    check_arrays.py --self-test

A manifest holds one store per line: store, config and raw folder separated by
tabs, all checked in this one process; fewer than N lines is an error.

The config is the library's multi-array JSON config: "arrays" (each entry is
check_ome.py's per-array config plus "key", its path in the store), optionally
"collection": "bioformats2raw" or "plate" (rows, columns, wells [{row, column,
fields: [keys]}], name, acquisitions); other keys are ignored. The raw input of
array i (its index in "arrays") is RAWDIR/<i>.raw, read as check_ome.py does.

Every group is a zarr.json {"zarr_format": 3, "node_type": "group",
"attributes": {...}}. An OME array ("ome" true or an object, or "multiscale"
given) is an image group at <key>/, levels at <key>/0, <key>/1...; a plain
array is a Zarr array at <key>/. Every folder between the root and an image is
a group, with no "ome" block unless listed here:
  * collection: only OME images, each key one path segment (not "OME"). Root
    attributes exactly {"ome": {"version": "0.5", "bioformats2raw.layout": 3}},
    OME/zarr.json's {"ome": {"version": "0.5", "series": [keys in config order]}}.
  * plate: only OME images, each the field of one well, keyed <row>/<column>/
    <field>. Root attributes exactly {"ome": {"version": "0.5", "plate": {"name"
    (if given), "rows": [{"name"}...], "columns": [{"name"}...], "wells":
    [{"path": "<row>/<column>", "rowIndex", "columnIndex"}...] in config order,
    "field_count": the most fields of a well, "acquisitions" (if given, as
    given)}}}; a group per row that holds a well; each well's attributes
    exactly {"ome": {"version": "0.5", "well": {"images": [{"path": <field>}...]}}}
    (an image may carry an "acquisition" among the plate's acquisition ids).
  * otherwise: a root group (any attributes but "ome") and the arrays.

Each store is checked in this order, up to its first problem: the groups above,
exactly; every array with check_ome.check_store on <store>/<key> (metadata,
every level bit-exact with zarr-python and tensorstore against the NumPy
reference, images with ome-zarr-models' v05 Image and ome-zarr-py's Reader);
ome-zarr-models 1.7's v05 HCS on a plate and Well on each well, BioFormats2Raw
on a collection (it visits only images named 0, 1, ...); yaozarrs'
validate_zarr_store (metadata and structure) on the root of a plate or
collection, on each image otherwise; ome-zarr-py's Reader on a plate (rows,
columns, wells, the stitched level-0 shape) and on each well (its images and
shape) where the fields it stitches share a shape (dask refuses others), or a
collection's root and OME group read as OME-NGFF 0.5. A validator's error or
warning fails, but for one warning of ome-zarr-models' v05 Plate, "'version'
field not specified in plate metadata" (its issue #218: the 0.5 spec's text
asks for plate.version, its schema and examples lack it, as does this layout).

Exit status: 0 every store is right ("OK <store> ..." per store); 1 a mismatch
("FAIL <store> ..." naming the group or array key and what differs); 2 bad
arguments, an unreadable store or config, or any other error.

--self-test writes a collection, a plate and a nested plain layout by hand with
zarr-python, checks they pass, breaks copies in ways that must fail (a wrong
element, a well listing a missing field, a wrong rowIndex, series out of order,
missing intermediate groups, a missing level) and checks that each whole-store
validator can refuse a store on its own.
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
import check_ome  # noqa: E402
import ome_spec  # noqa: E402
from check_store import CheckError, Mismatch, fmt_shape  # noqa: E402

OME_VERSION = check_ome.OME_VERSION
TOLERATED_MODEL_WARNING = "'version' field not specified in plate metadata"


def need(ok, msg):
    if not ok:
        raise CheckError(msg)


def dig(doc, *keys):
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc


# --------------------------------------------------------------------------
# The config


class Layout:
    """The arrays of a multi-array config and the groups the store must have."""

    def __init__(self, cfg, where="config"):
        need(isinstance(cfg, dict), "%s: not a JSON object" % where)
        arrays = cfg.get("arrays")
        need(isinstance(arrays, list) and arrays, "%s: arrays must be a non-empty list" % where)
        self.keys, self.specs = [], []
        in_ome_layout = cfg.get("collection") is not None or cfg.get("plate") is not None
        for i, entry in enumerate(arrays):
            if in_ome_layout and isinstance(entry, dict) and "ome" not in entry:
                # The library makes every image of a collection or a plate
                # an OME image unless told otherwise (which it refuses).
                entry = dict(entry, ome=True)
            key = dig(entry, "key")
            need(isinstance(key, str) and all(s not in ("", ".", "..") for s in key.split("/")),
                 "%s: arrays[%d]: key %r is not a relative path" % (where, i, key))
            need(key not in self.keys, "%s: arrays[%d]: key %r given twice" % (where, i, key))
            self.keys.append(key)
            self.specs.append(ome_spec.Spec(entry, "%s arrays[%d] (%s)" % (where, i, key)))
        prefixes = {k.rsplit("/", n)[0] for k in self.keys for n in range(1, k.count("/") + 1)}
        need(not prefixes & set(self.keys), "%s: arrays inside other arrays: %s"
             % (where, sorted(prefixes & set(self.keys))))
        coll, plate = cfg.get("collection"), cfg.get("plate")
        need(coll is None or plate is None, "%s: collection and plate together" % where)
        self.kind = "plate" if plate is not None else "collection" if coll is not None else "plain"
        self.rows, self.columns, self.wells, self.used_rows, self.acq_ids, self.plate_doc = [], [], [], [], [], None
        if self.kind == "collection":
            need(coll == "bioformats2raw", "%s: collection %r (only \"bioformats2raw\")" % (where, coll))
            bad = [k for k in self.keys if "/" in k or k == "OME"]
            need(not bad, "%s: collection keys must be single path segments but OME: %s" % (where, bad))
        elif self.kind == "plate":
            self._plate(plate, where + " plate")
        flat = [k for k, s in zip(self.keys, self.specs) if not s.ome]
        need(self.kind == "plain" or not flat, "%s: a %s holds OME images only: %s" % (where, self.kind, flat))
        covered = set(self.used_rows) | {w["path"] for w in self.wells}
        self.intermediates = sorted(prefixes - covered, key=lambda p: (p.count("/"), p))

    def _plate(self, plate, where):
        need(isinstance(plate, dict), "%s: not an object" % where)
        for name in ("rows", "columns"):
            v = plate.get(name)
            need(isinstance(v, list) and v and all(isinstance(x, str) and x and "/" not in x for x in v)
                 and len(set(v)) == len(v), "%s.%s: %r is not a non-empty list of unique names" % (where, name, v))
        self.rows, self.columns = plate["rows"], plate["columns"]
        wells = plate.get("wells")
        need(isinstance(wells, list) and wells, "%s.wells must be a non-empty list" % where)
        owner = {}
        for j, w in enumerate(wells):
            need(dig(w, "row") in self.rows and dig(w, "column") in self.columns,
                 "%s.wells[%d] %s: row and column must be among rows and columns" % (where, j, json.dumps(w)))
            path, fields = "%s/%s" % (w["row"], w["column"]), w.get("fields")
            at = "%s.wells[%d] (%s)" % (where, j, path)
            need(all(x["path"] != path for x in self.wells), "%s: the well is given twice" % at)
            need(isinstance(fields, list) and fields, "%s: fields must be a non-empty list of keys" % at)
            for f in fields:
                need(isinstance(f, str) and "/" in f and f.rsplit("/", 1)[0] == path and f not in owner,
                     "%s: field %r is not <row>/<column>/<field> of this well alone" % (at, f))
                need(f in self.keys, "%s: field %r is not an array key" % (at, f))
                owner[f] = path
            self.wells.append({"path": path, "row": w["row"], "column": w["column"], "fields": fields,
                               "names": [f.rsplit("/", 1)[1] for f in fields]})
        lost = [k for k in self.keys if k not in owner]
        need(not lost, "%s: arrays that are no well's field: %s" % (where, lost))
        self.used_rows = [r for r in self.rows if any(w["row"] == r for w in self.wells)]
        doc = {"name": plate["name"]} if plate.get("name") is not None else {}
        doc["rows"] = [{"name": r} for r in self.rows]
        doc["columns"] = [{"name": c} for c in self.columns]
        doc["wells"] = [{"path": w["path"], "rowIndex": self.rows.index(w["row"]),
                         "columnIndex": self.columns.index(w["column"])} for w in self.wells]
        doc["field_count"] = max(len(w["fields"]) for w in self.wells)
        acq = plate.get("acquisitions")
        if acq is not None:
            need(isinstance(acq, list) and all(type(dig(a, "id")) is int for a in acq),
                 "%s.acquisitions: %r is not a list of objects with an integer id" % (where, acq))
            doc["acquisitions"] = acq
            self.acq_ids = [a["id"] for a in acq]
        self.plate_doc = doc

    def groups(self):
        """(path, what, attributes) of every group, root first; attributes None: any but "ome"."""
        ome = lambda **kw: {"ome": dict({"version": OME_VERSION}, **kw)}  # noqa: E731
        if self.kind == "collection":
            out = [("", "the collection", ome(**{"bioformats2raw.layout": 3})),
                   ("OME", "the collection's series", ome(series=self.keys))]
        elif self.kind == "plate":
            out = [("", "the plate", ome(plate=self.plate_doc))] + [(r, "row " + r, None) for r in self.used_rows]
            out += [(w["path"], "well " + w["path"], ome(well={"images": [{"path": n} for n in w["names"]]}))
                    for w in self.wells]
        else:
            out = [("", "the root", None)]
        return out + [(p, "the group above %s" % ", ".join(k for k in self.keys if k.startswith(p + "/")), None)
                      for p in self.intermediates]


def load_layout(path):
    return Layout(check_ome.read_json(path), "config %s" % path)  # CheckError if missing or not JSON


# --------------------------------------------------------------------------
# The group documents


def first_diff(got, want, where):
    """Where the JSON value got first differs from want, or None."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return "%s: %s, expected an object %s" % (where, json.dumps(got), json.dumps(want))
        for k in sorted(set(want) ^ set(got)):
            return ("%s: no %r (expected %s)" % (where, k, json.dumps(want[k])) if k in want
                    else "%s: unexpected %r = %s" % (where, k, json.dumps(got[k])))
        return next(filter(None, (first_diff(got[k], want[k], "%s.%s" % (where, k)) for k in want)), None)
    if isinstance(want, list):
        if not isinstance(got, list):
            return "%s: %s, expected a list %s" % (where, json.dumps(got), json.dumps(want))
        whole = " (got %s, expected %s)" % (json.dumps(got), json.dumps(want))
        whole = whole if len(whole) < 400 else ""
        for i, (g, w) in enumerate(zip(got, want)):
            d = first_diff(g, w, "%s[%d]" % (where, i))
            if d:
                return d + whole
        if len(got) != len(want):
            return "%s: %d entries, expected %d%s" % (where, len(got), len(want), whole)
        return None
    if type(got) is not type(want) or got != want:
        return "%s: %s, expected %s" % (where, json.dumps(got), json.dumps(want))
    return None


def check_structure(store, L):
    """Every group of L.groups(): a Zarr v3 group with the attributes expected."""
    for rel, what, want in L.groups():
        name = rel + "/zarr.json" if rel else "zarr.json"
        path = os.path.join(store, *name.split("/"))
        if not os.path.isfile(path):
            raise Mismatch("%s not found (%s)" % (name, what))
        meta = check_ome.read_json(path)
        if dig(meta, "zarr_format") != 3 or dig(meta, "node_type") != "group":
            raise Mismatch("%s (%s) is not a Zarr v3 group: zarr_format=%r node_type=%r"
                           % (name, what, dig(meta, "zarr_format"), dig(meta, "node_type")))
        got = meta.get("attributes", {})
        if want is None:
            if not isinstance(got, dict) or "ome" in got:
                raise Mismatch("%s (%s): attributes with an \"ome\" block or not an object" % (name, what))
            continue
        found = dig(got, "ome", "well", "images")  # a well's images may name an acquisition
        for g, w in zip(found if isinstance(found, list) and dig(want, "ome", "well") else [],
                        dig(want, "ome", "well", "images") or []):
            if type(dig(g, "acquisition")) is int and g["acquisition"] in L.acq_ids:
                w["acquisition"] = g["acquisition"]
        d = first_diff(got, want, name + " attributes")
        if d:
            raise Mismatch("%s (%s)" % (d, what))


# --------------------------------------------------------------------------
# The validators on the whole store


def level0_shape(spec, raw):
    n = os.path.getsize(raw) // spec.dtype.itemsize
    extent0 = spec.sizes[0] or -(-n // int(np.prod(spec.sizes[1:], dtype=np.int64)))
    return tuple(spec.to_storage([extent0] + spec.sizes[1:]))


def _validate(name, where, fn, is_bad):
    """Run a validator: an exception or a warning that is_bad is a mismatch."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as e:
            raise Mismatch("%s rejects %s: %s: %s" % (name, where, type(e).__name__, " ".join(str(e).split()))) from e
    bad = [" ".join(str(w.message).split()) for w in caught if is_bad(w)]
    if bad:
        raise Mismatch("%s warns on %s: %s" % (name, where, "; ".join(bad)))


def run_models(store, L):
    """ome-zarr-models: v05 HCS and Well, or BioFormats2Raw."""
    if L.kind == "plain":
        return
    import zarr
    from ome_zarr_models.exceptions import ValidationWarning
    from ome_zarr_models.v05 import HCS, BioFormats2Raw, Well
    jobs = [("HCS", "", HCS)] + [("Well", w["path"], Well) for w in L.wells] if L.kind == "plate" \
        else [("BioFormats2Raw", "", BioFormats2Raw)]
    for name, rel, model in jobs:
        _validate("ome-zarr-models " + name, rel or "the root",
                  lambda: model.from_zarr(zarr.open_group(os.path.join(store, rel), mode="r", zarr_format=3)),
                  lambda w: issubclass(w.category, ValidationWarning)
                  and not (L.kind == "plate" and str(w.message).startswith(TOLERATED_MODEL_WARNING)))


def run_yaozarrs(store, L):
    """yaozarrs.validate_zarr_store on the root (plate, collection) or each image."""
    import yaozarrs
    for rel in [""] if L.kind != "plain" else [k for k, s in zip(L.keys, L.specs) if s.ome]:
        _validate("yaozarrs", rel or "the root",
                  lambda: yaozarrs.validate_zarr_store(os.path.abspath(os.path.join(store, rel))),
                  lambda w: w.category.__module__.split(".")[0] == "yaozarrs" or "yaozarrs" in (w.filename or ""))


def _stitched(shapes, rows, cols):
    """ome-zarr-py's grid of equal tiles along the last two axes, or None."""
    s = shapes[0]
    return s[:-2] + (s[-2] * rows, s[-1] * cols) if len(set(shapes)) == 1 and len(s) >= 2 else None


def run_reader(store, L, shapes):
    """ome-zarr-py 0.18: its Reader on the plate and each well."""
    if L.kind == "plain":
        return
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Plate, Reader, Well

    def locate(rel):
        loc = parse_url(os.path.abspath(os.path.join(store, rel)), mode="r")
        if loc is None or loc.version != OME_VERSION:
            raise Mismatch("ome-zarr-py: %s is not an OME-NGFF %s group to it (%s)"
                           % (rel or "the root", OME_VERSION, loc and loc.version))
        return loc

    def read(rel, spec_type):
        loc = locate(rel)
        try:
            nodes = list(Reader(loc)())
        except Exception as e:
            raise Mismatch("ome-zarr-py's Reader fails on %s: %s: %s"
                           % (rel or "the plate", type(e).__name__, e)) from e
        found = [(n, s) for n in nodes for s in n.specs if isinstance(s, spec_type)]
        if not found:
            raise Mismatch("ome-zarr-py: no %s at %s (nodes %s)" % (spec_type.__name__, rel or "the root", nodes))
        return found[0]

    def shape_is(what, node, want):
        if want is not None and tuple(node.data[0].shape) != want:
            raise Mismatch("ome-zarr-py: %s level 0 is %s, expected %s"
                           % (what, fmt_shape(node.data[0].shape), fmt_shape(want)))

    if L.kind == "collection":
        locate(""), locate("OME")
        return
    # It stitches the first fields of the wells into one grid, the fields of
    # a well into another: only where they share a shape (dask refuses others).
    shape_of = dict(zip(L.keys, shapes))
    want = _stitched([shape_of[w["fields"][0]] for w in L.wells], len(L.rows), len(L.columns))
    if want is not None:
        node, plate = read("", Plate)
        wells = sorted(w["path"] for w in L.wells)
        if plate.row_names != L.rows or plate.col_names != L.columns or sorted(plate.well_paths) != wells:
            raise Mismatch("ome-zarr-py: plate rows %s columns %s wells %s, expected %s %s %s"
                           % (plate.row_names, plate.col_names, sorted(plate.well_paths), L.rows, L.columns, wells))
        shape_is("the stitched plate's", node, want)
    for w in (w for w in L.wells if _stitched([shape_of[f] for f in w["fields"]], 1, 1)):
        node, well = read(w["path"], Well)
        got = [dig(im, "path") for im in well.well_data.get("images", [])]
        if got != w["names"]:
            raise Mismatch("ome-zarr-py: well %s images %s, expected %s" % (w["path"], got, w["names"]))
        cols = math.ceil(math.sqrt(len(got)))
        shape_is("well %s" % w["path"], node, _stitched([shape_of[f] for f in w["fields"]],
                                                         math.ceil(len(got) / cols), cols))


# --------------------------------------------------------------------------
# One store


def check_frame_metadata(store, L, raw_dir):
    """Each image whose RAWDIR/<i>.frame_metadata.json lists its frames'
    metadata (a JSON list, null: none given) has a <key>/frame_metadata
    array (uint8 [frames, max_bytes], a frame's JSON object padded with
    zero bytes) that zarr-python and tensorstore read back as that list.
    Returns whether any image had one."""
    import zarr
    import tensorstore as ts
    found = False
    for i, key in enumerate(L.keys):
        path = os.path.join(raw_dir, "%d.frame_metadata.json" % i)
        if not os.path.isfile(path):
            continue
        found = True
        with open(path) as f:
            want = json.load(f)
        sub = os.path.join(store, *key.split("/"), "frame_metadata")
        by_zarr = zarr.open_array(sub, mode="r")[...]
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": sub}}
        by_ts = ts.open(spec, open=True, read=True).result().read().result()
        for name, rows in (("zarr-python", by_zarr), ("tensorstore", by_ts)):
            need(rows.dtype == "uint8" and rows.ndim == 2,
                 "array %d %r: frame_metadata is %s %s, not uint8 [frames, max_bytes]" % (i, key, rows.dtype, rows.shape))
            if rows.shape[0] != len(want):
                raise Mismatch("array %d %r: frame_metadata holds %d frames (%s), the image %d"
                               % (i, key, rows.shape[0], name, len(want)))
            for frame, (row, expect) in enumerate(zip(rows, want)):
                text = bytes(row).rstrip(b"\0")
                got = json.loads(text) if text else None
                if got != expect:
                    raise Mismatch("array %d %r: frame %d's metadata read by %s is %r, not %r"
                                   % (i, key, frame, name, got, expect))
    return found


def check(store, config, raw_dir):
    """Check one store; returns (status, message): 0 OK, 1 mismatch, 2 error."""
    try:
        need(os.path.isdir(store), "store %s is not a directory" % store)
        L = config if isinstance(config, Layout) else load_layout(config)
        need(os.path.isdir(raw_dir), "raw folder %s is not a directory" % raw_dir)
        check_structure(store, L)
        raws = [os.path.join(raw_dir, "%d.raw" % i) for i in range(len(L.keys))]
        for i, (key, spec, raw) in enumerate(zip(L.keys, L.specs, raws)):
            sub = os.path.join(store, *key.split("/"))
            if not os.path.isfile(os.path.join(sub, "zarr.json")):
                raise Mismatch("array %d %r: %s/zarr.json not found" % (i, key, key))
            st, msg = check_ome.check_store(sub, raw, spec)
            if st:
                for p in ("FAIL ", "ERROR "):
                    msg = msg[len(p + sub) + 1:] if msg.startswith(p + sub + " ") else msg
                raise (Mismatch if st == 1 else CheckError)("array %d %r: %s" % (i, key, msg))
        checks = "structure,zarr,tensorstore"
        if check_frame_metadata(store, L, raw_dir):
            checks += ",frame-metadata"
        if any(s.ome for s in L.specs):
            run_models(store, L)
            run_yaozarrs(store, L)
            run_reader(store, L, [level0_shape(s, r) for s, r in zip(L.specs, raws)])
            checks += ",ome-zarr-models,yaozarrs,ome-zarr"
        extra = " wells=%d" % len(L.wells) if L.kind == "plate" else ""
        levels = ",".join(str(s.levels) if s.ome else "plain" for s in L.specs)
        return 0, "OK %s %s arrays=%d%s levels=%s [%s]" % (store, L.kind, len(L.keys), extra, levels, checks)
    except Mismatch as e:
        return 1, "FAIL %s %s" % (store, e)
    except CheckError as e:
        return 2, "ERROR %s %s" % (store, e)
    except Exception as e:
        if os.environ.get("CHECK_OME_TRACEBACK"):
            traceback.print_exc()
        return 2, "ERROR %s %s: %s" % (store, type(e).__name__, e)


# --------------------------------------------------------------------------
# Command line


def check_manifest(argv):
    return check_ome.check_manifest(argv, check, "store, config, raw folder")

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    logging.getLogger("ome_zarr").setLevel(logging.CRITICAL)  # its format-detection chatter
    if "--self-test" in argv:
        import arrays_self_test
        return arrays_self_test.self_test()
    if any(x == "--manifest" or x.startswith("--manifest=") for x in argv):
        return check_manifest(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True, help="directory of the store")
    p.add_argument("--config", required=True, help="the multi-array JSON config the store was written with")
    p.add_argument("--raw-dir", required=True, help="folder of <i>.raw, the raw input of array i")
    a = p.parse_args(argv)
    return check_ome.report(*check(a.store, a.config, a.raw_dir))


if __name__ == "__main__":
    sys.exit(main())
