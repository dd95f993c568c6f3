"""The OME-Zarr stores of two writers side by side: their images, data and
OME metadata read back, and both validated, for test_acquisition.py."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import tensorstore as ts


def image_groups(root: Path) -> dict[str, dict]:
    """Every OME image group below `root` (its path, "" for the root) and
    its `ome` attributes."""
    found = {}
    for doc in sorted(root.rglob("zarr.json")):
        meta = json.loads(doc.read_text())
        ome = meta.get("attributes", {}).get("ome", {})
        if meta["node_type"] == "group" and "multiscales" in ome:
            rel = doc.parent.relative_to(root).as_posix()
            found["" if rel == "." else rel] = ome
    return found


def read(path: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return ts.open(spec, open=True, read=True).result().read().result()


def array_doc(path: Path) -> dict:
    return json.loads((path / "zarr.json").read_text())


def inner_chunks(doc: dict) -> tuple[list[int], list[dict]]:
    """The chunk shape of an array and the codecs after "bytes" that
    compress each chunk, inside its shards when it has them."""
    codec = doc["codecs"][0]
    if codec["name"] == "sharding_indexed":
        inner = codec["configuration"]
        return inner["chunk_shape"], inner["codecs"][1:]
    return doc["chunk_grid"]["configuration"]["chunk_shape"], doc["codecs"][1:]


def summary(root: Path) -> dict:
    """The OME metadata two writers must agree on: the root's kind, the
    series, the plate with its wells and fields, and each image's axes,
    scales, translations, channels, shape, dtype and chunks."""
    attrs = json.loads((root / "zarr.json").read_text())["attributes"]["ome"]
    out: dict = {"version": attrs["version"]}
    if "bioformats2raw.layout" in attrs:
        out["layout"] = attrs["bioformats2raw.layout"]
        out["series"] = json.loads((root / "OME" / "zarr.json").read_text())["attributes"]["ome"]["series"]
    if "plate" in attrs:
        p = attrs["plate"]
        out["plate"] = {k: p.get(k) for k in ("name", "rows", "columns", "wells")}
        out["wells"] = {
            w["path"]: json.loads((root / w["path"] / "zarr.json").read_text())["attributes"]["ome"]["well"]["images"]
            for w in p["wells"]
        }
    images = {}
    for rel, ome in image_groups(root).items():
        (ms,) = ome["multiscales"]
        level0 = ms["datasets"][0]
        doc = array_doc(root / rel / level0["path"])
        images[rel] = {
            "axes": ms["axes"],
            "path": level0["path"],
            "transforms": level0["coordinateTransformations"],
            "omero": ome.get("omero"),
            "shape": doc["shape"],
            "dtype": doc["data_type"],
            "chunks": inner_chunks(doc)[0],
            "compressors": inner_chunks(doc)[1],
        }
    out["images"] = images
    return out


def validate(root: Path) -> None:
    """yaozarrs and ome-zarr-models on the whole store; a warning of
    either is a failure."""
    import yaozarrs
    import zarr
    from ome_zarr_models.v05 import HCS, BioFormats2Raw, Image, Well

    attrs = json.loads((root / "zarr.json").read_text())["attributes"]["ome"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yaozarrs.validate_zarr_store(str(root))
        group = zarr.open_group(str(root), mode="r", zarr_format=3)
        if "plate" in attrs:
            # Neither writer puts a version into the plate block itself
            # (OME-NGFF 0.5 keeps it in "ome"); ome-zarr-models warns of it.
            warnings.filterwarnings("ignore", "'version' field not specified in plate metadata")
            HCS.from_zarr(group)
            for w in attrs["plate"]["wells"]:
                Well.from_zarr(zarr.open_group(str(root / w["path"]), mode="r", zarr_format=3))
        elif "bioformats2raw.layout" in attrs:
            BioFormats2Raw.from_zarr(group)
        else:
            Image.from_zarr(group)


def frame_metadata_of(root: Path, rel: str) -> list[dict]:
    """TiledZarr's per-frame metadata of an image, its planes in order."""
    rows = read(root / rel / "frame_metadata")
    planes = []
    for row in rows:
        if row.any():
            planes += json.loads(bytes(row).rstrip(b"\0"))["planes"]
    return planes


def assert_same_stores(ours: Path, theirs: Path) -> dict:
    """Same images, same data in each, equivalent OME metadata, both valid."""
    mine, other = summary(ours), summary(theirs)
    assert mine == other
    for rel, image in mine["images"].items():
        a, b = read(ours / rel / image["path"]), read(theirs / rel / image["path"])
        assert a.dtype == b.dtype and a.shape == b.shape, rel
        np.testing.assert_array_equal(a, b, err_msg=rel)
        assert a.any(), rel  # random frames, never a store of zeros
    validate(ours)
    validate(theirs)
    return mine
