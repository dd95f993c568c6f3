"""OME-Zarr images from numpy: pyramid levels read back by zarr-python, the
group's metadata, Stream.set_attributes, and the shard's pyramid level."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import tiledzarr
from conftest import config, frames


def ome_config(path, t: int = 0, **extra):
    """t-y-x uint16 (96 x 80 frames), an OME image with a 3-level mean
    pyramid: y and x halved, t kept."""
    c = config(path, t=t, **extra)
    c["dimensions"][0].update(unit="second", scale=0.5)
    c["dimensions"][1].update(unit="micrometer", scale=0.25, translation=10.0)
    c["dimensions"][2].update(unit="micrometer", scale=0.25)
    c["multiscale"] = {"levels": 3, "method": "mean"}
    c["ome"] = {"name": "from numpy"}
    return c


def mean_down(a: np.ndarray) -> np.ndarray:
    """One level of the mean pyramid over y and x (even sizes): the mean of
    each 2 x 2 window, rounded half to even as the library does."""
    n, h, w = a.shape
    s = a.reshape(n, h // 2, 2, w // 2, 2).astype(np.int64).sum(axis=(2, 4))
    return np.round(s / 4).astype(a.dtype)


def read_json(path) -> dict:
    return json.loads((path / "zarr.json").read_text())


def test_pyramid_levels_open_in_zarr_python(store):
    data = frames(13, (96, 80))
    with tiledzarr.Stream(ome_config(store)) as s:
        for f in data:
            s.append(f)
    want = data
    for k, shape in enumerate([(13, 96, 80), (13, 48, 40), (13, 24, 20)]):
        a = zarr.open_array(str(store / str(k)), mode="r")
        assert a.shape == shape, k
        assert a.dtype == np.uint16
        if k:
            want = mean_down(want)
        np.testing.assert_array_equal(a[...], want, err_msg=f"level {k}")
    assert not (store / "3").exists()

    group = zarr.open_group(str(store), mode="r")
    ms = group.attrs["ome"]["multiscales"][0]
    assert group.attrs["ome"]["version"] == "0.5"
    assert ms["name"] == "from numpy"
    assert [d["path"] for d in ms["datasets"]] == ["0", "1", "2"]
    assert [a["name"] for a in ms["axes"]] == ["t", "y", "x"]
    assert ms["axes"][1] == {"name": "y", "type": "space", "unit": "micrometer"}
    assert ms["datasets"][2]["coordinateTransformations"][0]["scale"] == [0.5, 1.0, 1.0]


def test_storage_order_and_channels(tmp_path):
    # Acquired t, z, c, y, x; stored t, c, z, y, x (OME-NGFF's order).
    store = tmp_path / "tczyx.zarr"
    c = config(store)
    c["dimensions"][1:1] = [
        {"name": "z", "size": 3, "tile": 1, "unit": "micrometer", "downsample": False},
        {"name": "c", "size": 2, "tile": 1},
    ]
    c["storage_order"] = ["t", "c", "z", "y", "x"]
    c["multiscale"] = {"levels": 2, "method": "max"}
    data = frames(8, (3, 2, 96, 80), seed=4)
    with tiledzarr.Stream(c) as s:
        # Frames arrive in the acquisition order, whatever the storage order.
        assert s.frame_shape == (3, 2, 96, 80)
        s.append(data)
    level0 = zarr.open_array(str(store / "0"), mode="r")
    assert level0.shape == (8, 2, 3, 96, 80)
    np.testing.assert_array_equal(level0[...], data.transpose(0, 2, 1, 3, 4))
    level1 = zarr.open_array(str(store / "1"), mode="r")
    assert level1.shape == (8, 2, 3, 48, 40)
    n = data.shape[0]
    want = data.reshape(n, 3, 2, 48, 2, 40, 2).max(axis=(4, 6)).transpose(0, 2, 1, 3, 4)
    np.testing.assert_array_equal(level1[...], want)


def test_set_attributes_shows_in_the_group(store):
    c = ome_config(store, attributes={"instrument": "scope-1", "status": "acquiring"})
    data = frames(10, (96, 80))
    s = tiledzarr.Stream(c)
    s.append(data[:5])
    s.set_attributes({"instrument": "scope-1", "status": "complete", "frames": np.int64(10)})
    # Refused, leaving the attributes as they were.
    with pytest.raises(tiledzarr.ConfigError, match="attributes"):
        s.set_attributes([1, 2])
    with pytest.raises(tiledzarr.ConfigError, match='"ome"'):
        s.set_attributes({"ome": {}})
    with pytest.raises(tiledzarr.InvalidArgumentError, match="JSON"):
        s.set_attributes({"x": object()})
    s.append(data[5:])
    s.flush()
    with pytest.raises(tiledzarr.FinishedError):
        s.set_attributes({"late": True})
    s.close()
    with pytest.raises(tiledzarr.FinishedError):
        s.set_attributes({"closed": True})

    attrs = read_json(store)["attributes"]
    assert attrs.pop("ome")["version"] == "0.5"
    assert attrs == {"instrument": "scope-1", "status": "complete", "frames": 10}
    assert dict(zarr.open_group(str(store), mode="r").attrs)["status"] == "complete"


def test_set_attributes_on_a_plain_array(store):
    with tiledzarr.Stream(config(store, attributes={"a": 1})) as s:
        s.append(frames(3, (96, 80)))
        s.set_attributes({"b": [1, 2]})
    doc = read_json(store)
    assert doc["node_type"] == "array"
    assert doc["attributes"] == {"b": [1, 2]}
    assert dict(zarr.open_array(str(store), mode="r").attrs) == {"b": [1, 2]}


def test_the_sink_sees_every_level():
    seen: dict[int, set] = {}
    refused = []
    box: dict[str, tiledzarr.Stream] = {}

    def sink(shard: tiledzarr.Shard) -> None:
        assert isinstance(shard.level, int)
        seen.setdefault(shard.level, set()).add(shard.coord)
        assert f"level={shard.level}" in repr(shard)
        try:
            box["s"].set_attributes({"from": "sink"})
        except tiledzarr.InvalidArgumentError as e:
            refused.append(str(e))

    stream = tiledzarr.Stream(ome_config(None), sink=sink)
    box["s"] = stream
    with stream:
        stream.append(frames(16, (96, 80)))
    # Shards of 64 x 32 pixels, 8 timepoints per shard row: level 0 has
    # 2 x 2 x 3, level 1 (48 x 40) 2 x 1 x 2, level 2 (24 x 20) 2 x 1 x 1.
    assert {k: len(v) for k, v in seen.items()} == {0: 12, 1: 4, 2: 2}
    assert seen[2] == {(0, 0, 0), (1, 0, 0)}
    assert refused and all("own sink" in m for m in refused)
