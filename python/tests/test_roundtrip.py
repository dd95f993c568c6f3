"""Round trips: numpy frames in, read back by zarr-python."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import zarr

import tiledzarr
from conftest import config, frames


def read(path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def test_imported_from_the_installed_wheel():
    here = Path(__file__).resolve().parents[2]
    assert not Path(tiledzarr.__file__).resolve().is_relative_to(here / "python" / "tiledzarr")
    assert "site-packages" in tiledzarr.__file__
    assert tiledzarr.__version__.count(".") == 2
    # The package's version is the library's (the header's TZ_VERSION_*).
    header = os.environ.get("TZ_HEADER")
    if header:
        text = Path(header).read_text()
        parts = [re.search(rf"#define TZ_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        assert tiledzarr.__version__ == ".".join(parts)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "uint32", "int64", "float32", "float64"])
def test_append_round_trip(store, dtype):
    data = frames(21, (96, 80), dtype)
    with tiledzarr.Stream(config(store, dtype)) as s:
        for f in data:
            s.append(f)
    assert s.closed and s.flushed
    out = read(store)
    assert out.dtype == np.dtype(dtype)
    # 21 frames: the last epoch padded, the extent the frames written.
    assert out.shape == data.shape
    np.testing.assert_array_equal(out, data)
    m = s.metrics
    assert m.backend == "cpu"
    assert m.bytes_in == data.nbytes
    assert m.shards_emitted > 0 and m.bytes_out > 0


@pytest.mark.parametrize("page_cache", [False, True])
def test_shard_files_with_and_without_the_page_cache(tmp_path, page_cache):
    """`store.page_cache` is taken, and the store reads back the same either
    way (false: a folder on a local disk has its shard files written around
    the page cache; tmp_path may be memory, where they go through it)."""
    data = frames(21, (96, 80))
    c = config(tmp_path / "a.zarr")
    c["store"]["page_cache"] = page_cache
    with tiledzarr.Stream(c) as s:
        s.append(data)
    np.testing.assert_array_equal(read(tmp_path / "a.zarr"), data)
    c["store"]["page_cache"] = "yes"
    with pytest.raises(tiledzarr.ConfigError, match="page_cache"):
        tiledzarr.Stream(c)


def test_stack_of_frames_and_the_config_forms(tmp_path):
    data = frames(16, (96, 80))
    c = config(tmp_path / "dict.zarr")
    forms = {
        "dict": lambda: tiledzarr.Stream(c),
        "json": lambda: tiledzarr.Stream(json.dumps(config(tmp_path / "json.zarr"))),
        "kwargs": lambda: tiledzarr.Stream(**config(tmp_path / "kwargs.zarr")),
    }
    for name, make in forms.items():
        with make() as s:
            s.append(data[:5])  # a stack of frames
            s.append(data[5:])
        np.testing.assert_array_equal(read(tmp_path / f"{name}.zarr"), data)


def test_one_dimensional_array_takes_scalars_and_runs(store):
    c = config(store, dtype="int32")
    c["dimensions"] = [{"name": "t", "size": 0, "tile": 16, "tiles_per_shard": 2}]
    data = np.arange(-20, 30, dtype=np.int32)
    with tiledzarr.Stream(c) as s:
        assert s.frame_shape == ()
        s.append(data[0])  # a numpy scalar: one element
        s.append(data[1:])  # a run of elements
        with pytest.raises(tiledzarr.InvalidArgumentError, match="shape"):
            s.append(np.zeros((2, 2), np.int32))
    np.testing.assert_array_equal(read(store), data)


def test_numpy_dtype_and_path_objects_in_the_config(tmp_path):
    c = config(None, dtype=np.uint16)
    c["store"] = {"path": tmp_path / "p.zarr", "overwrite": True}
    c["dimensions"][1]["size"] = np.int64(96)
    with tiledzarr.Stream(c) as s:
        assert s.dtype == "uint16" and s.frame_shape == (96, 80)
        assert s.config["store"]["path"] == str(tmp_path / "p.zarr")
        s.append(frames(8, (96, 80)))
    assert read(tmp_path / "p.zarr").shape == (8, 96, 80)


def test_bounded_array_by_bytes_through_write_and_write_all(store):
    data = frames(24, (96, 80))
    raw = data.tobytes()
    with tiledzarr.Stream(config(store, t=24)) as s:
        view = memoryview(raw)
        taken = 0
        # write() never waits: it takes what fits and says how much.
        while taken < len(raw) // 2:
            taken += s.write(view[taken : len(raw) // 2])
        # Any buffer: bytes, mid-frame boundaries.
        assert s.write_all(view[taken:]) == len(raw) - taken
        with pytest.raises(tiledzarr.ArrayOverflowError):
            s.write(b"\x00\x00")
    np.testing.assert_array_equal(read(store), data)


def test_write_all_at_the_end_of_a_bounded_array_returns_what_fit(store):
    data = frames(9, (96, 80))
    with tiledzarr.Stream(config(store, t=8)) as s:
        assert s.write_all(data) == data[:8].nbytes
        with pytest.raises(tiledzarr.ArrayOverflowError):
            s.write_all(data[8])
    np.testing.assert_array_equal(read(store), data[:8])


def test_python_sink_gets_the_bytes_of_each_shard_file(store):
    seen = {}

    def sink(shard: tiledzarr.Shard) -> None:
        assert isinstance(shard.data, memoryview) and shard.data.readonly
        parts = [shard.index, shard.data] if shard.index_at_start else [shard.data, shard.index]
        seen[shard.coord] = b"".join(bytes(p) for p in parts)

    data = frames(16, (96, 80))
    with tiledzarr.Stream(config(store), sink=sink) as s:
        s.append(data)
    np.testing.assert_array_equal(read(store), data)
    # The sink saw every shard file the store wrote, byte for byte.
    files = {
        tuple(int(c) for c in p.relative_to(store / "c").parts): p.read_bytes()
        for p in (store / "c").rglob("*")
        if p.is_file()
    }
    assert seen == files
    assert len(seen) == s.metrics.shards_emitted == 2 * 2 * 3


def test_sink_only_stream_without_a_store():
    got = []
    with tiledzarr.Stream(config(None, index_location="start"), sink=got.append) as s:
        s.append(frames(8, (96, 80)))
    # The memoryviews were released when each call returned.
    assert got and all(g.index_at_start for g in got)
    with pytest.raises(ValueError, match="released"):
        bytes(got[0].data)


def test_exception_in_the_with_block_discards_without_flush(store):
    data = frames(3, (96, 80))
    with pytest.raises(KeyError):
        with tiledzarr.Stream(config(store)) as s:
            s.append(data)
            raise KeyError("camera unplugged")
    assert s.closed and not s.flushed
    # No shard: three frames never completed an epoch, and nothing padded it.
    assert not (store / "c").exists() or not any((store / "c").rglob("*"))
    assert zarr.open_array(str(store), mode="r").shape[0] == 0


def test_metrics_after_close_and_estimate_memory(store):
    c = config(store)
    plan = tiledzarr.estimate_memory(c)
    assert isinstance(plan, tiledzarr.MemoryPlan)
    assert plan.backend == "cpu" and plan.host_bytes >= c["staging_bytes"]
    assert plan.device_bytes == 0
    s = tiledzarr.Stream(c)
    s.append(frames(8, (96, 80)))
    s.flush()
    s.close()
    s.close()  # idempotent
    m = s.metrics
    assert isinstance(m, tiledzarr.Metrics)
    assert m.bytes_in == 8 * 96 * 80 * 2 and m.compression_ratio > 1.0
    assert "cpu" in m.backend_reason
    assert "closed" in repr(s)


def test_help_explains_the_configuration():
    doc = tiledzarr.Stream.__doc__
    for key in ("dtype", "dimensions", "tiles_per_shard", "codec", "backend", "store", "staging_bytes"):
        assert key in doc


def test_nvcomp_wheel_folder_of_the_environment_is_registered(tmp_path):
    import subprocess
    import sys

    lib = tmp_path / "site" / "nvidia" / "libnvcomp" / "lib64"
    lib.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run(
        [sys.executable, "-c", "import tiledzarr; print(tiledzarr.nvcomp_search_dirs())"],
        env=env, capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout
    assert str(lib) in out
