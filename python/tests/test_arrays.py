"""Several images in one stream from numpy: a plate's fields and a
collection of positions written with ``append(frame, key=...)`` in the order
an acquisition delivers them, read back bit-exact by zarr-python and
tensorstore, their groups' OME metadata, a Python sink told each shard's
array, and the bad input ``key=`` brings."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import tiledzarr
from conftest import config, frames

ROWS, COLUMNS = ["A", "B"], ["1", "2"]
#: Three wells of a 2 x 2 plate, two fields each; B/2 is empty.
WELLS = [("A", "1"), ("A", "2"), ("B", "1")]
FIELDS = [f"{r}/{c}/{f}" for r, c in WELLS for f in range(2)]
PASSES = 3
POSITIONS = ["Pos0", "Pos1", "Pos2"]
TIME_POINTS = 5


def dims(t: int, t_tile: int, *planes: tuple[str, int, int, int]) -> list[dict]:
    d = [{"name": "t", "size": t, "tile": t_tile, "tiles_per_shard": 2}]
    for name, size, tile, tiles_per_shard in planes:
        d.append({"name": name, "size": size, "tile": tile, "tiles_per_shard": tiles_per_shard})
    return d


def shared(path) -> dict:
    """The keys every array shares: the CPU backend, a store at `path`
    (None: none)."""
    c = {"backend": "cpu", "threads": 2, "max_latency_ms": 20}
    if path is not None:
        c["store"] = {"path": str(path), "overwrite": True, "fsync": False}
    return c


def plate_config(path) -> dict:
    yx = [("y", 48, 16, 2), ("x", 40, 20, 1)]
    return {
        "arrays": [
            {"key": k, "dtype": "uint16", "dimensions": dims(PASSES, 1, *yx),
             "codec": {"name": "blosc", "cname": "lz4", "level": 5}}
            for k in FIELDS
        ],
        "plate": {
            "name": "screen", "rows": ROWS, "columns": COLUMNS,
            "wells": [{"row": r, "column": c, "fields": [f"{r}/{c}/{f}" for f in range(2)]}
                      for r, c in WELLS],
            "acquisitions": [{"id": 0, "name": "first pass"}],
        },
        **shared(path),
    }


def positions_config(path) -> dict:
    czyx = [("c", 2, 1, 2), ("y", 64, 32, 2), ("x", 48, 16, 3)]
    arrays = [{"key": k, "dtype": "uint16", "dimensions": dims(0, 2, *czyx)} for k in POSITIONS]
    arrays[1]["multiscale"] = {"levels": 2}
    return {"arrays": arrays, "collection": "bioformats2raw", **shared(path)}


def read_zarr(path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def read_tensorstore(path) -> np.ndarray:
    ts = pytest.importorskip("tensorstore")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return ts.open(spec, open=True, read=True).result().read().result()


def group_attributes(path) -> dict:
    doc = json.loads((path / "zarr.json").read_text())
    assert doc["zarr_format"] == 3 and doc["node_type"] == "group", path
    return doc["attributes"]


@pytest.fixture(scope="module")
def plate(tmp_path_factory):
    """A screen: each pass visits the wells in turn and images each field,
    one frame per field and pass."""
    path = tmp_path_factory.mktemp("plate") / "screen.zarr"
    data = {k: frames(PASSES, (48, 40), seed=i + 1) for i, k in enumerate(FIELDS)}
    with tiledzarr.Stream(plate_config(path)) as s:
        assert s.array_keys == FIELDS
        for t in range(PASSES):
            for key in FIELDS:
                s.append(data[key][t], key=key)
    return path, data, s


@pytest.fixture(scope="module")
def positions(tmp_path_factory):
    """A time-lapse: each time point visits every position and takes both
    channels there. Pos2's frames go in as bytes through write_all."""
    path = tmp_path_factory.mktemp("positions") / "positions.zarr"
    data = {k: frames(TIME_POINTS, (2, 64, 48), seed=10 + i) for i, k in enumerate(POSITIONS)}
    with tiledzarr.Stream(positions_config(path)) as s:
        for t in range(TIME_POINTS):
            for key in POSITIONS[:2]:
                s.append(data[key][t], key=key)
            frame = data["Pos2"][t]
            assert s.write_all(frame.tobytes(), key="Pos2") == frame.nbytes
    return path, data, s


@pytest.mark.parametrize("read", [read_zarr, read_tensorstore], ids=["zarr", "tensorstore"])
def test_plate_fields_read_back(plate, read):
    path, data, _ = plate
    for key in FIELDS:
        out = read(path / key / "0")
        assert out.dtype == np.uint16 and out.shape == (PASSES, 48, 40), key
        np.testing.assert_array_equal(out, data[key], err_msg=key)


def test_plate_groups(plate):
    path, _, s = plate
    assert s.flushed and s.closed
    root = group_attributes(path)["ome"]
    assert root["version"] == "0.5"
    p = root["plate"]
    assert p["name"] == "screen"
    assert [r["name"] for r in p["rows"]] == ROWS
    assert [c["name"] for c in p["columns"]] == COLUMNS
    assert p["wells"] == [
        {"path": f"{r}/{c}", "rowIndex": ROWS.index(r), "columnIndex": COLUMNS.index(c)}
        for r, c in WELLS
    ]
    assert p["field_count"] == 2
    assert p["acquisitions"] == [{"id": 0, "name": "first pass"}]
    for r, c in WELLS:
        well = group_attributes(path / r / c)["ome"]["well"]
        assert well["images"] == [{"path": "0"}, {"path": "1"}], f"{r}/{c}"
    assert "ome" not in group_attributes(path / "A")
    assert not (path / "B" / "2").exists()
    for key in FIELDS:
        assert group_attributes(path / key)["ome"]["multiscales"][0]["datasets"][0]["path"] == "0"


@pytest.mark.parametrize("read", [read_zarr, read_tensorstore], ids=["zarr", "tensorstore"])
def test_positions_read_back(positions, read):
    path, data, _ = positions
    for key in POSITIONS:
        out = read(path / key / "0")
        assert out.shape == (TIME_POINTS, 2, 64, 48), key
        np.testing.assert_array_equal(out, data[key], err_msg=key)
    # Pos1 has a pyramid: level 1 halves y and x.
    assert read(path / "Pos1" / "1").shape == (TIME_POINTS, 2, 32, 24)


def test_collection_groups(positions):
    path, _, s = positions
    assert group_attributes(path) == {"ome": {"version": "0.5", "bioformats2raw.layout": 3}}
    assert group_attributes(path / "OME") == {"ome": {"version": "0.5", "series": POSITIONS}}
    for key in POSITIONS:
        assert "multiscales" in group_attributes(path / key)["ome"], key
    assert s.metrics.bytes_in == sum(d.nbytes for d in positions[1].values())


def test_the_stream_describes_each_array(tmp_path):
    c = {
        "arrays": [
            {"key": "left", "dtype": "uint16", "dimensions": dims(0, 4, ("y", 96, 32, 2), ("x", 80, 40, 1))},
            {"key": "views/right", "dtype": "uint8", "dimensions": dims(4, 2, ("y", 40, 16, 2), ("x", 64, 64, 1))},
        ],
        **shared(tmp_path / "cameras.zarr"),
    }
    with tiledzarr.Stream(c) as s:
        assert s.array_keys == ["left", "views/right"]
        # Without a key: the first array, as a stream of one array.
        assert (s.dtype, s.frame_shape) == ("uint16", (96, 80))
        assert (s.dtype_of("left"), s.frame_shape_of("left")) == ("uint16", (96, 80))
        assert (s.dtype_of("views/right"), s.frame_shape_of("views/right")) == ("uint8", (40, 64))
        assert "2 arrays" in repr(s)
        assert [a["key"] for a in s.config["arrays"]] == ["left", "views/right"]
        with pytest.raises(tiledzarr.InvalidArgumentError, match="several arrays"):
            s.set_attributes({"note": 1})
    one_array = {"dtype": "uint8", "dimensions": dims(0, 2, ("y", 8, 8, 1))}
    with tiledzarr.Stream(shared(tmp_path / "one.zarr") | one_array) as one:
        assert one.array_keys == [""]
        assert (one.dtype_of(), one.frame_shape_of()) == ("uint8", (8,))


def test_python_sink_is_told_each_shards_array(tmp_path):
    got = {}

    def sink(shard: tiledzarr.Shard) -> None:
        got.setdefault((shard.array, shard.key), []).append(shard.coord)

    data = frames(6, (2, 64, 48))
    with tiledzarr.Stream(positions_config(None), sink=sink) as s:
        for f in data:
            for key in POSITIONS:
                s.append(f, key=key)
    assert sorted(got) == [(i, k) for i, k in enumerate(POSITIONS)]
    # 6 time points: two shard rows along t (4 each) of one shard.
    assert got[(0, "Pos0")] == [(0, 0, 0, 0), (1, 0, 0, 0)]
    # Pos1's pyramid adds its level 1.
    assert len(got[(1, "Pos1")]) == 4
    assert sum(map(len, got.values())) == s.metrics.shards_emitted


def test_unknown_key_names_the_keys_there_are(tmp_path):
    with tiledzarr.Stream(positions_config(tmp_path / "p.zarr")) as s:
        frame = frames(1, (2, 64, 48))[0]
        for call in (
            lambda: s.append(frame, key="Pos9"),
            lambda: s.write(frame, key="Pos9"),
            lambda: s.write_all(frame, key="Pos9"),
            lambda: s.dtype_of("Pos9"),
            lambda: s.frame_shape_of("Pos9"),
        ):
            with pytest.raises(tiledzarr.InvalidArgumentError, match=r'"Pos9".*"Pos0", "Pos1", "Pos2"'):
                call()
        assert s.metrics.bytes_in == 0
        s.append(frame, key="Pos2")
    np.testing.assert_array_equal(read_zarr(tmp_path / "p.zarr" / "Pos2" / "0"), frame[None])


def test_dropped_frames_read_as_the_fill_value(tmp_path):
    path = tmp_path / "dropped.zarr"
    data = {k: frames(TIME_POINTS, (2, 64, 48), seed=20 + i) for i, k in enumerate(POSITIONS)}
    with tiledzarr.Stream(positions_config(path)) as s:
        for t in range(TIME_POINTS):
            for key in POSITIONS:
                if key == "Pos0" and t == 2:
                    s.skip(2, key=key)  # time points 2 and 3: a whole epoch
                    data[key][2:4] = 0
                elif key == "Pos0" and t == 3:
                    pass
                elif key == "Pos1" and t == 0:
                    s.skip(key=key)  # Pos1 has a pyramid: filled, compressed
                    data[key][t] = 0
                else:
                    s.append(data[key][t], key=key)
    for key in POSITIONS:
        np.testing.assert_array_equal(read_zarr(path / key / "0"), data[key])
    with tiledzarr.Stream(positions_config(tmp_path / "unknown.zarr")) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError, match="no array has the key"):
            s.skip(1, key="Pos9")
        s.flush()


def test_frame_metadata_reads_back(tmp_path):
    path = tmp_path / "metadata.zarr"
    cfg = positions_config(path)
    cfg["arrays"][2]["frame_metadata"] = {"max_bytes": 80}
    data = frames(TIME_POINTS, (2, 64, 48), seed=30)
    with tiledzarr.Stream(cfg) as s:
        for t in range(TIME_POINTS):
            s.append(data[t], key="Pos2")
            s.frame_metadata(t, {"time_s": 1.5 * t, "stage": [10, 20], "exposure_ms": np.float32(5)},
                             key="Pos2")
        with pytest.raises(tiledzarr.InvalidArgumentError, match="never written"):
            s.frame_metadata(TIME_POINTS, {"time_s": 0}, key="Pos2")
        with pytest.raises(tiledzarr.InvalidArgumentError, match="keeps no per-frame metadata"):
            s.frame_metadata(0, {"time_s": 0}, key="Pos0")
    a = zarr.open_array(str(path / "Pos2" / "frame_metadata"), mode="r")
    assert a.shape == (TIME_POINTS, 80)
    got = [json.loads(bytes(row).rstrip(b"\0")) for row in a[...]]
    assert got == [{"time_s": 1.5 * t, "stage": [10, 20], "exposure_ms": 5.0} for t in range(TIME_POINTS)]


def test_key_on_a_stream_of_one_array(tmp_path):
    with tiledzarr.Stream(config(tmp_path / "one.zarr")) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError, match="one array.*leave key out"):
            s.append(frames(1, (96, 80))[0], key="Pos0")


def test_frame_is_checked_against_its_own_array(tmp_path):
    c = {
        "arrays": [
            {"key": "left", "dtype": "uint16", "dimensions": dims(0, 4, ("y", 96, 32, 2), ("x", 80, 40, 1))},
            {"key": "right", "dtype": "uint8", "dimensions": dims(0, 2, ("y", 40, 16, 2), ("x", 64, 64, 1))},
        ],
        **shared(tmp_path / "cameras.zarr"),
    }
    left, right = frames(4, (96, 80)), frames(4, (40, 64), "uint8")
    with tiledzarr.Stream(c) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError,
                           match=r'dtype is uint16, the dtype of array "right" is uint8'):
            s.append(left[0], key="right")
        with pytest.raises(tiledzarr.InvalidArgumentError,
                           match=r'dtype is uint8, the dtype of array "left" is uint16'):
            s.append(right[0], key="left")
        with pytest.raises(tiledzarr.InvalidArgumentError,
                           match=r'shape \(96, 64\) does not match the frame shape of array "right" \(40, 64\)'):
            s.append(np.zeros((96, 64), np.uint8), key="right")
        with pytest.raises(tiledzarr.InvalidArgumentError, match=r'the frame shape of array "left"'):
            s.append(left[0, :40], key="left")
        assert s.metrics.bytes_in == 0
        s.append(left, key="left")
        s.append(right, key="right")
    np.testing.assert_array_equal(read_zarr(tmp_path / "cameras.zarr" / "left"), left)
    np.testing.assert_array_equal(read_zarr(tmp_path / "cameras.zarr" / "right"), right)


def test_full_bounded_array_overflows_while_the_others_take_more(tmp_path):
    path = tmp_path / "plate.zarr"
    data = frames(PASSES + 1, (48, 40))
    with tiledzarr.Stream(plate_config(path)) as s:
        s.append(data[:PASSES], key="A/1/0")
        with pytest.raises(tiledzarr.ArrayOverflowError, match=r'array "A/1/0".*nothing of it was written'):
            s.append(data[PASSES], key="A/1/0")
        # The library's own refusal, past the binding's check.
        with pytest.raises(tiledzarr.ArrayOverflowError):
            s.write(data[PASSES], key="A/1/0")
        for key in FIELDS[1:]:
            s.append(data[:PASSES], key=key)
    for key in FIELDS:
        np.testing.assert_array_equal(read_zarr(path / key / "0"), data[:PASSES], err_msg=key)


def test_estimate_memory_of_several_arrays(tmp_path):
    c = positions_config(tmp_path / "p.zarr")
    three = tiledzarr.estimate_memory(c)
    one = tiledzarr.estimate_memory(c | {"arrays": c["arrays"][:1]})
    assert three.backend == "cpu"
    assert three.host_bytes > one.host_bytes > 0
    assert not (tmp_path / "p.zarr").exists()
