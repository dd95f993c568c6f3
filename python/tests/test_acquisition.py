"""Stream.from_acquisition against ome-writers itself: each kind of
acquisition ome-writers documents (a single 5-D image, several positions, a
plate, an unbounded first dimension, a transposed storage order), described
by its AcquisitionSettings or by a useq MDASequence, is written twice from
the same random frames, once through from_acquisition and once through
ome-writers' tensorstore backend; the two stores must hold the same data
in every array and equivalent OME metadata, and both must pass yaozarrs and
ome-zarr-models. A pymmcore-plus MDA on a Python camera (UniMMCore) runs
into both as well."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tiledzarr
from conftest import frames

omew = pytest.importorskip("ome_writers")
useq = pytest.importorskip("useq")
ts = pytest.importorskip("tensorstore")

from ome_writers import AcquisitionSettings, Channel, Dimension, Plate, Position  # noqa: E402
from ome_stores import assert_same_stores, frame_metadata_of, read  # noqa: E402

UM = "micrometer"
#: The CPU backend, two threads, a small staging: the suite's usual stream.
OPTIONS = {"backend": "cpu", "threads": 2, "staging_bytes": 8 << 20, "max_latency_ms": 20}


def write_both(settings: AcquisitionSettings, tmp_path: Path, planes: np.ndarray,
               metadata=None, *, skips=(), **keywords) -> tuple[Path, Path]:
    """The same frames through from_acquisition and through ome-writers'
    tensorstore backend. `skips` lists the plane indices before which a
    plane is skipped instead."""
    ours = settings.model_copy(update={"root_path": str(tmp_path / "tiledzarr.ome.zarr")})
    theirs = AcquisitionSettings.model_validate(
        {**settings.model_dump(), "root_path": str(tmp_path / "ome-writers.ome.zarr"),
         "format": {"name": "ome-zarr", "backend": "tensorstore"}}
    )
    with tiledzarr.Stream.from_acquisition(ours, **OPTIONS, **keywords) as s, \
            omew.create_stream(theirs) as o:
        for i, plane in enumerate(planes):
            if i in skips:
                s.skip(frames=1)
                o.skip(frames=1)
                continue
            meta = None if metadata is None else metadata(i)
            s.append(plane, frame_metadata=meta)
            o.append(plane, frame_metadata=meta)
    assert s.closed
    return Path(ours.output_path), Path(theirs.output_path)


# ----------------------------------------------------- AcquisitionSettings


def test_single_5d_image(tmp_path):
    settings = AcquisitionSettings(
        root_path="x.ome.zarr",
        dimensions=[
            Dimension(name="t", count=2, chunk_size=1, type="time", scale=2.5, unit="second"),
            Dimension(name="c", count=2, chunk_size=1, type="channel",
                      coords=["DAPI", Channel(name="GFP", color="green")]),
            Dimension(name="z", count=3, chunk_size=1, type="space", scale=5, unit=UM),
            Dimension(name="y", count=48, chunk_size=16, type="space", scale=0.1, unit=UM,
                      shard_size_chunks=3),
            Dimension(name="x", count=40, chunk_size=20, type="space", scale=0.1, unit=UM,
                      translation=12.5),
        ],
        dtype="uint16",
        compression="blosc-zstd",
        overwrite=True,
    )
    data = frames(12, (48, 40), seed=1)
    ours, theirs = write_both(settings, tmp_path, data, lambda i: {"delta_t": 0.25 * i, "n": i})
    s = assert_same_stores(ours, theirs)
    assert list(s["images"]) == [""]
    assert [c["label"] for c in s["images"][""]["omero"]["channels"]] == ["DAPI", "GFP"]
    assert s["images"][""]["transforms"][0]["scale"] == [2.5, 1.0, 5.0, 0.1, 0.1]
    # ome-writers keeps per-frame metadata in the image's attributes,
    # TiledZarr in its frame_metadata array: the same entries.
    ow = json.loads((theirs / "zarr.json").read_text())["attributes"]["ome_writers"]["frame_metadata"]
    assert frame_metadata_of(ours, "") == ow
    assert len(ow) == 12


def test_multiple_positions(tmp_path):
    settings = AcquisitionSettings(
        root_path="x.ome.zarr",
        dimensions=[
            Dimension(name="t", count=3, chunk_size=1, type="time"),
            Dimension(name="p", type="position",
                      coords=["Pos0", Position(name="tile", grid_row=0, grid_column=1), "Pos2"]),
            Dimension(name="c", count=2, chunk_size=1, type="channel"),
            Dimension(name="y", count=32, chunk_size=16, type="space"),
            Dimension(name="x", count=24, chunk_size=24, type="space"),
        ],
        dtype="uint8",
        compression="blosc-lz4",
        overwrite=True,
    )
    data = frames(18, (32, 24), "uint8", seed=2)
    # Two dropped frames: a channel of one position, and a position's
    # whole time point (both channels).
    ours, theirs = write_both(settings, tmp_path, data, skips={3, 10, 11})
    s = assert_same_stores(ours, theirs)
    assert s["series"] == ["Pos0", "tile_0_1", "Pos2"]
    assert not read(ours / "Pos2" / "0")[1].any()


def test_plate(tmp_path):
    fields = [Position(name="fov0", plate_row="A", plate_column="1"),
              Position(name="fov0", plate_row="C", plate_column="4"),
              Position(name="fov1", plate_row="C", plate_column="4"),
              Position(name="fov0", plate_row="B", plate_column="2")]
    settings = AcquisitionSettings(
        root_path="x.ome.zarr",
        dimensions=[
            Dimension(name="t", count=2, chunk_size=1, type="time"),
            Dimension(name="p", type="position", coords=fields),
            Dimension(name="c", count=2, chunk_size=1, type="channel", coords=["BF", "GFP"]),
            Dimension(name="z", count=2, chunk_size=2, type="space"),
            Dimension(name="y", count=32, chunk_size=16, type="space", scale=0.65, unit=UM),
            Dimension(name="x", count=32, chunk_size=16, type="space", scale=0.65, unit=UM),
        ],
        dtype="uint16",
        plate=Plate(name="screen", row_names=list("ABCD"), column_names=[str(i) for i in range(1, 7)]),
        compression="zstd",
        overwrite=True,
    )
    data = frames(2 * 4 * 2 * 2, (32, 32), seed=3)
    ours, theirs = write_both(settings, tmp_path, data, lambda i: {"i": i})
    s = assert_same_stores(ours, theirs)
    assert [w["path"] for w in s["plate"]["wells"]] == ["A/1", "C/4", "B/2"]
    assert s["wells"]["C/4"] == [{"path": "fov0"}, {"path": "fov1"}]
    ow = json.loads((theirs / "C/4/fov1" / "zarr.json").read_text())["attributes"]["ome_writers"]
    assert frame_metadata_of(ours, "C/4/fov1") == ow["frame_metadata"]


def test_unbounded_first_dimension(tmp_path):
    settings = AcquisitionSettings(
        root_path="x.ome.zarr",
        dimensions=[
            Dimension(name="t", count=None, chunk_size=1, type="time"),
            Dimension(name="p", type="position", coords=["Pos0", "Pos1"]),
            Dimension(name="z", count=2, chunk_size=1, type="space", scale=2, unit=UM),
            Dimension(name="y", count=24, chunk_size=8, type="space"),
            Dimension(name="x", count=32, chunk_size=16, type="space"),
        ],
        dtype="uint16",
        overwrite=True,
    )
    # Three time points, then one plane of a fourth at Pos0: the stores end
    # with Pos0 at 4 time points (the missing plane zeros), Pos1 at 3.
    data = frames(3 * 2 * 2 + 1, (24, 32), seed=4)
    ours, theirs = write_both(settings, tmp_path, data)
    s = assert_same_stores(ours, theirs)
    assert s["images"]["Pos0"]["shape"] == [4, 2, 24, 32]
    assert s["images"]["Pos1"]["shape"] == [3, 2, 24, 32]


@pytest.mark.parametrize("storage_order", [["t", "c", "z", "y", "x"], "ome"])
def test_transposed_storage_order(tmp_path, storage_order):
    settings = AcquisitionSettings(
        root_path="x.ome.zarr",
        # declared in acquisition order: z outside c
        dimensions=[
            Dimension(name="t", count=2, chunk_size=1, type="time"),
            Dimension(name="z", count=4, chunk_size=1, type="space", scale=5, unit=UM),
            Dimension(name="c", count=3, chunk_size=1, type="channel"),
            Dimension(name="y", count=32, chunk_size=16, type="space", scale=0.1, unit=UM),
            Dimension(name="x", count=32, chunk_size=32, type="space", scale=0.1, unit=UM),
        ],
        storage_order=storage_order,
        dtype="uint16",
        overwrite=True,
    )
    data = frames(24, (32, 32), seed=5)
    ours, theirs = write_both(settings, tmp_path, data, lambda i: {"i": i})
    s = assert_same_stores(ours, theirs)
    assert [a["name"] for a in s["images"][""]["axes"]] == ["t", "c", "z", "y", "x"]
    # frame i of the acquisition is (t, z, c) = divmod-ed, stored at [t, c, z]
    np.testing.assert_array_equal(read(ours / "0")[1, 2, 3], data[12 + 3 * 3 + 2])
    ow = json.loads((theirs / "zarr.json").read_text())["attributes"]["ome_writers"]
    assert frame_metadata_of(ours, "") == ow["frame_metadata"]


# ------------------------------------------------------ useq MDASequence


def write_sequence_both(seq, tmp_path: Path, shape=(32, 24), dtype="uint16", events=None,
                        played=None, **useq_options) -> tuple[Path, Path, dict]:
    """The frames of `seq`, in the order seq.iter_events() yields them (the
    first `events`; of `played` instead when given), through
    from_acquisition and through ome-writers' settings for the sequence (as
    pymmcore-plus makes them)."""
    ours, theirs = tmp_path / "tiledzarr.ome.zarr", tmp_path / "ome-writers.ome.zarr"
    settings = AcquisitionSettings(
        root_path=str(theirs), format={"name": "ome-zarr", "backend": "tensorstore"},
        dtype=dtype, overwrite=True,
        **omew.useq_to_acquisition_settings(seq, image_width=shape[1], image_height=shape[0],
                                            **useq_options),
    )
    planes = {}
    with tiledzarr.Stream.from_acquisition(seq, path=ours, frame_shape=shape, dtype=dtype,
                                           **useq_options, **OPTIONS) as s, \
            omew.create_stream(settings) as o:
        for i, event in enumerate((played or seq).iter_events()):
            if events is not None and i == events:
                break
            frame = frames(1, shape, dtype, seed=100 + i)[0]
            planes[tuple(sorted(event.index.items()))] = frame
            s.append(frame, frame_metadata={"event": i})
            o.append(frame, frame_metadata={"event": i})
        keys = s.array_keys
    return ours, theirs, {"planes": planes, "keys": keys}


def test_sequence_positions_channels_z(tmp_path):
    seq = useq.MDASequence(
        axis_order="tpgcz",
        time_plan={"interval": 1.5, "loops": 2},
        stage_positions=[useq.Position(x=0, y=0, name="left"), useq.Position(x=500, y=0, name="right")],
        channels=["DAPI", "FITC"],
        z_plan={"range": 2, "step": 1},
    )
    ours, theirs, written = write_sequence_both(seq, tmp_path, pixel_size_um=0.325)
    s = assert_same_stores(ours, theirs)
    assert s["series"] == ["left", "right"]
    assert s["images"]["left"]["transforms"][0]["scale"] == [1.5, 1.0, 1.0, 0.325, 0.325]
    # Each event's frame is where its index says, in the store's t, c, z.
    for index, frame in written["planes"].items():
        i = dict(index)
        stored = read(ours / written["keys"][i["p"]] / "0")
        np.testing.assert_array_equal(stored[i["t"], i["c"], i["z"]], frame)
    assert len(written["planes"]) == 2 * 2 * 2 * 3


def test_sequence_transposed_storage_order(tmp_path):
    # z outside c: stored as OME-NGFF orders it, t c z y x.
    seq = useq.MDASequence(axis_order="tzc", time_plan={"interval": 0, "loops": 2},
                           channels=["BF", "GFP", "RFP"], z_plan={"range": 3, "step": 1.5})
    ours, theirs, _ = write_sequence_both(seq, tmp_path, dtype="uint8")
    s = assert_same_stores(ours, theirs)
    assert [a["name"] for a in s["images"][""]["axes"]] == ["t", "c", "z", "y", "x"]
    # an interval of 0: ome-writers writes the time axis's scale as 0
    assert s["images"][""]["transforms"][0]["scale"][:3] == [0.0, 1.0, 1.5]


def test_sequence_well_plate(tmp_path):
    plan = useq.WellPlatePlan(
        plate=useq.WellPlate.from_str("96-well"), a1_center_xy=(0, 0),
        selected_wells=([0, 1, 1], [0, 2, 3]),
        well_points_plan=useq.GridRowsColumns(rows=1, columns=2, fov_width=10, fov_height=10),
    )
    seq = useq.MDASequence(stage_positions=plan, channels=["DAPI"], time_plan={"interval": 1, "loops": 2})
    ours, theirs, written = write_sequence_both(seq, tmp_path)
    s = assert_same_stores(ours, theirs)
    assert [w["path"] for w in s["plate"]["wells"]] == ["A/1", "B/3", "B/4"]
    assert written["keys"][:2] == ["A/1/fov0", "A/1/fov1"]


def test_sequence_unbounded_time(tmp_path):
    # A time plan of duration with interval 0 has no count: the first
    # dimension is unbounded. Seven events: three time points of two
    # positions, and one more.
    seq = useq.MDASequence(time_plan={"interval": 0, "duration": 60},
                           stage_positions=[(0, 0, 0), (100, 100, 0)])
    # useq cannot iterate that plan (its loop count divides by the
    # interval): the events, in the same order, come from a counted one.
    played = seq.model_copy(update={"time_plan": useq.TIntervalLoops(interval=0, loops=4)})
    ours, theirs, _ = write_sequence_both(seq, tmp_path, events=7, played=played)
    s = assert_same_stores(ours, theirs)
    assert s["images"]["0"]["shape"] == [4, 32, 24] and s["images"]["1"]["shape"] == [3, 32, 24]


def test_sequence_of_positions_alone(tmp_path):
    # Positions and nothing else: each image is one 2-D plane.
    seq = useq.MDASequence(stage_positions=[useq.Position(x=0, y=0, name="a"),
                                            useq.Position(x=9, y=0, name="b")])
    ours, theirs, _ = write_sequence_both(seq, tmp_path, shape=(24, 16))
    s = assert_same_stores(ours, theirs)
    assert s["images"]["b"]["shape"] == [24, 16]
    ow = json.loads((theirs / "b" / "zarr.json").read_text())["attributes"]["ome_writers"]
    assert frame_metadata_of(ours, "b") == ow["frame_metadata"] == [{"event": 1, "storage_index": []}]


# ------------------------------------------------------------ pymmcore-plus


def test_pymmcore_plus_mda_on_a_python_camera(tmp_path):
    """A real MDA through pymmcore-plus's runner, offline: UniMMCore with a
    camera device written in Python. The same run feeds from_acquisition's
    stream (an output handler) and pymmcore-plus's own ome-writers sink."""
    unicore = pytest.importorskip("pymmcore_plus.experimental.unicore")

    class Camera(unicore.SimpleCameraDevice):
        snaps = 0

        def get_exposure(self) -> float:
            return 5.0

        def set_exposure(self, exposure: float) -> None:
            pass

        def sensor_shape(self) -> tuple[int, int]:
            return (40, 32)

        def dtype(self):
            return np.uint16

        def snap(self, buffer: np.ndarray):
            buffer[:] = frames(1, buffer.shape, seed=200 + Camera.snaps)[0]
            Camera.snaps += 1
            return {}

    core = unicore.UniMMCore()
    core.loadPyDevice("Camera", Camera())
    core.initializeDevice("Camera")
    core.setCameraDevice("Camera")
    core.setAutoShutter(False)  # no shutter device to open
    seq = useq.MDASequence(axis_order="tpcz", time_plan={"interval": 0, "loops": 2},
                           stage_positions=[(0, 0, 0), (10, 10, 0)], z_plan={"range": 1, "step": 1})
    ours, theirs = tmp_path / "tiledzarr.ome.zarr", tmp_path / "pymmcore.ome.zarr"
    stream = tiledzarr.Stream.from_acquisition(
        seq, path=ours, frame_shape=(core.getImageHeight(), core.getImageWidth()),
        dtype="uint16", pixel_size_um=core.getPixelSizeUm(), **OPTIONS)
    core.mda.run(seq, output=[stream, str(theirs)], overwrite=True)
    stream.close()
    assert Camera.snaps == 2 * 2 * 2
    s = assert_same_stores(ours, theirs)
    assert s["series"] == ["0", "1"]
    theirs_meta = json.loads((theirs / "1" / "zarr.json").read_text())["attributes"]["ome_writers"]
    assert frame_metadata_of(ours, "1") == theirs_meta["frame_metadata"]


# ------------------------------------------------------------ what is refused


def settings_of(**changes) -> AcquisitionSettings:
    base = dict(
        root_path="x.ome.zarr",
        dimensions=[Dimension(name="t", count=2, type="time"),
                    Dimension(name="y", count=16, type="space"),
                    Dimension(name="x", count=16, type="space")],
        dtype="uint16",
    )
    return AcquisitionSettings(**(base | changes))


@pytest.mark.parametrize("settings, message", [
    (lambda: settings_of(root_path="x.ome.tiff"), "format 'ome-tiff'"),
    (lambda: settings_of(dimensions=[Dimension(name="z", count=2, type="space"),
                                     Dimension(name="c", count=2, type="channel"),
                                     Dimension(name="y", count=16, type="space"),
                                     Dimension(name="x", count=16, type="space")]),
     r"storage_order \['c', 'z', 'y', 'x'\].*dimension 'z'"),
    (lambda: settings_of(dimensions=[Dimension(name="p", type="position", coords=["Pos 0", "Pos 1"]),
                                     Dimension(name="y", count=16, type="space"),
                                     Dimension(name="x", count=16, type="space")]),
     "position 'Pos 0'"),
])
def test_what_cannot_be_written_as_ome_writers_would_is_named(tmp_path, settings, message):
    with pytest.raises(tiledzarr.ConfigError, match=message):
        tiledzarr.Stream.from_acquisition(settings(), path=tmp_path / "x.zarr", **OPTIONS)
    assert not (tmp_path / "x.zarr").exists()


def test_bad_input_is_refused_clearly(tmp_path):
    with pytest.raises(tiledzarr.InvalidArgumentError, match="AcquisitionSettings or a useq MDASequence"):
        tiledzarr.Stream.from_acquisition({"dimensions": []})
    seq = useq.MDASequence(time_plan={"interval": 1, "loops": 2})
    with pytest.raises(tiledzarr.ConfigError, match=r"frame_shape=\(height, width\) and dtype="):
        tiledzarr.Stream.from_acquisition(seq, path=tmp_path / "s.zarr")
    with pytest.raises(tiledzarr.ConfigError, match="unknown keyword.*colour"):
        tiledzarr.Stream.from_acquisition(settings_of(), path=tmp_path / "s.zarr", colour="red")
    with pytest.raises(tiledzarr.ConfigError, match="pixel_size_um describe"):
        tiledzarr.Stream.from_acquisition(settings_of(), path=tmp_path / "s.zarr", pixel_size_um=1)
    with tiledzarr.Stream.from_acquisition(settings_of(), path=tmp_path / "s.zarr", **OPTIONS) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError, match=r"frame shape \(16, 8\)"):
            s.append(np.zeros((16, 8), np.uint16))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="frame dtype is uint8"):
            s.append(np.zeros((16, 16), np.uint8))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="cannot be written as JSON"):
            s.append(np.zeros((16, 16), np.uint16), frame_metadata={"when": object()})
        s.append(np.ones((16, 16), np.uint16), frame_metadata={"exposure": np.float32(5)})
        s.skip(frames=1)
        with pytest.raises(IndexError, match="2 frames and 2 were written"):
            s.append(np.ones((16, 16), np.uint16))
    with pytest.raises(tiledzarr.FinishedError):
        s.append(np.ones((16, 16), np.uint16))
    np.testing.assert_array_equal(read(tmp_path / "s.zarr" / "0")[:, 0, 0], [1, 0])
    assert frame_metadata_of(tmp_path / "s.zarr", "") == [{"exposure": 5.0, "storage_index": [0]}]


def test_acquisition_config_is_what_from_acquisition_creates_and_creates_nothing(tmp_path):
    settings = settings_of(dimensions=[Dimension(name="c", count=2, type="channel", coords=["a", "b"]),
                                       Dimension(name="y", count=16, type="space"),
                                       Dimension(name="x", count=16, type="space")])
    config = tiledzarr.Stream.acquisition_config(settings, path=tmp_path / "a.zarr", **OPTIONS)
    assert list(tmp_path.iterdir()) == []
    assert tiledzarr.estimate_memory(config).host_bytes > 0
    with tiledzarr.Stream(config) as plain:
        from_config = plain.config
    with tiledzarr.Stream.from_acquisition(settings, path=tmp_path / "b.zarr", **OPTIONS) as s:
        created = s.config
    assert from_config.pop("store")["path"] == str(tmp_path / "a.zarr")
    assert created.pop("store")["path"] == str(tmp_path / "b.zarr")
    assert from_config == created
    # The same refusals as from_acquisition, before anything is created.
    with pytest.raises(tiledzarr.ConfigError, match="format 'ome-tiff'"):
        tiledzarr.Stream.acquisition_config(settings_of(root_path="x.ome.tiff"),
                                            path=tmp_path / "c.zarr", **OPTIONS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "b.zarr"]


def test_channel_names_travel_in_the_configuration_to_any_store():
    # The library writes the omero block itself, so an object store gets it
    # too; one it refuses is named.
    named = settings_of(dimensions=[Dimension(name="c", count=2, type="channel", coords=["a", "b"]),
                                    Dimension(name="y", count=16, type="space"),
                                    Dimension(name="x", count=16, type="space")])
    config = tiledzarr.Stream.acquisition_config(named, store={"url": "s3://bucket/run.zarr"},
                                                 **OPTIONS)
    channels = config["ome"]["omero"]["channels"]
    assert [(c["label"], c["color"]) for c in channels] == [("a", "FFFFFF"), ("b", "FFFFFF")]
    assert channels[0]["window"] == {"start": 0.0, "min": 0.0, "end": 65535.0, "max": 65535.0}
    local = {**config, "store": {"path": "unused.zarr"}}
    assert tiledzarr.estimate_memory(local).host_bytes > 0
    local["ome"]["omero"]["channels"].pop()
    with pytest.raises(tiledzarr.ConfigError, match=r"ome\.omero\.channels.*\"c\" has 2"):
        tiledzarr.estimate_memory(local)
    # Scales of 0 (an interval of 0, a pixel size never calibrated) travel
    # the same way.
    flat = settings_of(dimensions=[Dimension(name="t", count=2, type="time", scale=0),
                                   Dimension(name="y", count=16, type="space", scale=0),
                                   Dimension(name="x", count=16, type="space")])
    config = tiledzarr.Stream.acquisition_config(flat, store={"url": "s3://bucket/run.zarr"},
                                                 **OPTIONS)
    assert [d.get("scale") for d in config["dimensions"]] == [0.0, 0.0, None]
    tiledzarr.estimate_memory({**config, "store": {"path": "unused.zarr"}})


def test_what_the_library_keeps_elsewhere_is_refused_or_bounded(tmp_path):
    with tiledzarr.Stream.from_acquisition(settings_of(), path=tmp_path / "m.zarr",
                                           frame_metadata_bytes=64, **OPTIONS) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError, match="frame_metadata_bytes=64"):
            s.append(np.ones((16, 16), np.uint16), frame_metadata={"note": "x" * 60})
        s.append(np.ones((16, 16), np.uint16), frame_metadata={"note": "short"})
    # Refused before the frame was written: the next one is frame 0.
    assert frame_metadata_of(tmp_path / "m.zarr", "") == [{"note": "short", "storage_index": [0]}]
    np.testing.assert_array_equal(read(tmp_path / "m.zarr" / "0")[:, 0, 0], [1, 0])
