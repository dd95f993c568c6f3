"""Bad input and every error class: clear exceptions naming the problem,
and nothing written is lost."""

from __future__ import annotations

import os
import re
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

import tiledzarr
from conftest import config, frames

CLASSES = {
    "NULL_ARGUMENT": tiledzarr.NullArgumentError,
    "INVALID_ARGUMENT": tiledzarr.InvalidArgumentError,
    "CONFIG": tiledzarr.ConfigError,
    "OVERFLOW": tiledzarr.ArrayOverflowError,
    "FINISHED": tiledzarr.FinishedError,
    "SINK": tiledzarr.SinkError,
    "IO": tiledzarr.StoreIOError,
    "EXISTS": tiledzarr.StoreExistsError,
    "BACKEND_UNAVAILABLE": tiledzarr.BackendUnavailableError,
    "GPU": tiledzarr.GpuError,
    "TIMEOUT": tiledzarr.WriteTimeoutError,
    "OUT_OF_MEMORY": tiledzarr.OutOfMemoryError,
    "INTERNAL": tiledzarr.InternalError,
    "OBJECT_STORE": tiledzarr.ObjectStoreError,
    "ACCESS_DENIED": tiledzarr.AccessDeniedError,
}


def test_one_class_per_status_of_the_c_api():
    for cls in CLASSES.values():
        assert issubclass(cls, tiledzarr.TiledZarrError)
        assert getattr(tiledzarr, cls.__name__) is cls
    assert sorted(c.status for c in CLASSES.values()) == list(range(1, 16))
    # The same codes as the C header, when the suite is given its path.
    header = os.environ.get("TZ_HEADER")
    if header:
        text = Path(header).read_text()
        for name, cls in CLASSES.items():
            m = re.search(rf"TZ_ERR_{name} = (\d+)", text)
            assert m and int(m.group(1)) == cls.status, name


# ConfigError: the message names the field.
@pytest.mark.parametrize(
    "change, field",
    [
        (lambda c: c["dimensions"][1].update(tile=0), "dimensions[1].tile"),
        (lambda c: c["dimensions"][0].update(size="many"), "dimensions[0].size"),
        (lambda c: c.update(dtype="uint12"), "dtype"),
        (lambda c: c.update(colour="red"), "colour"),
        (lambda c: c["codec"].update(level=99), "codec"),
        (lambda c: c.update(threads=-1), "threads"),
        (lambda c: c["store"].update(overwrite="yes"), "store.overwrite"),
        (lambda c: c.update(max_latency_ms=0), "max_latency_ms"),
        (lambda c: c.update(device_bytes=0), "device_bytes"),
    ],
)
def test_config_errors_name_the_field(store, change, field):
    c = config(store, codec={"name": "zstd", "level": 1})
    change(c)
    with pytest.raises(tiledzarr.ConfigError) as e:
        tiledzarr.Stream(c)
    assert field in str(e.value)
    assert isinstance(e.value, ValueError)
    assert not store.exists()


@pytest.mark.parametrize(
    "bad, words",
    [
        ([("dtype", "uint16")], "not list"),
        (42, "not int"),
        ("{not json", "malformed JSON"),
        ('{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 2}]} garbage', "text after the configuration"),
        ('{"dtype": "uint8", "dimensions": [{"size": 4, "tile": 2}]} {}', "text after the configuration"),
        ("[1, 2]", "config"),
        (None, "no configuration"),
        ({"dtype": "uint16", "dimensions": [{"size": 4, "tile": object()}]}, "object"),
    ],
)
def test_a_config_that_is_not_a_dict_or_json(bad, words):
    with pytest.raises(tiledzarr.ConfigError, match=re.escape(words)):
        tiledzarr.Stream(bad)
    with pytest.raises(tiledzarr.ConfigError):
        tiledzarr.estimate_memory(bad)


def test_config_and_keywords_together_are_refused(store):
    with pytest.raises(tiledzarr.ConfigError, match="not both"):
        tiledzarr.Stream(config(store), dtype="uint8")


def test_nothing_to_keep_the_data():
    with pytest.raises(tiledzarr.InvalidArgumentError, match="sink or a store"):
        tiledzarr.Stream(config(None))
    with pytest.raises(tiledzarr.InvalidArgumentError, match="callable"):
        tiledzarr.Stream(config(None), sink="not callable")


def test_frame_of_the_wrong_dtype_or_shape_is_refused(store):
    good = frames(8, (96, 80))
    with tiledzarr.Stream(config(store)) as s:
        with pytest.raises(tiledzarr.InvalidArgumentError, match=r"dtype is int16, the stream's is uint16"):
            s.append(good[0].astype(np.int16))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="dtype is float32"):
            s.append(good[0].astype(np.float32))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="big-endian"):
            s.append(good[0].astype(">u2"))
        with pytest.raises(tiledzarr.InvalidArgumentError, match=r"shape \(80, 96\) does not match .* \(96, 80\)"):
            s.append(np.ascontiguousarray(good[0].T))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="shape"):
            s.append(good[0].reshape(-1))
        with pytest.raises(tiledzarr.InvalidArgumentError, match="buffer protocol"):
            s.append([1, 2, 3])
        # Nothing of the refused frames went in: the good ones read back.
        assert s.metrics.bytes_in == 0
        s.append(good)
    np.testing.assert_array_equal(zarr.open_array(str(store), mode="r")[...], good)


def test_non_contiguous_array_is_refused(store):
    data = frames(8, (96, 160))
    with tiledzarr.Stream(config(store)) as s:
        for call in (s.write, s.write_all, s.append):
            with pytest.raises(tiledzarr.InvalidArgumentError, match="not C-contiguous"):
                call(data[:, :, ::2])
        with pytest.raises(tiledzarr.InvalidArgumentError, match="not C-contiguous"):
            s.append(np.asfortranarray(data[0, :, :80]))
        s.append(np.ascontiguousarray(data[:, :, ::2]))
    np.testing.assert_array_equal(zarr.open_array(str(store), mode="r")[...], data[:, :, ::2])


def test_frame_past_the_end_is_refused_whole(store):
    data = frames(10, (96, 80))
    with tiledzarr.Stream(config(store, t=9)) as s:
        s.append(data[:8])
        with pytest.raises(tiledzarr.ArrayOverflowError, match="nothing of it was written"):
            s.append(data[8:])
        s.append(data[8])
        with pytest.raises(tiledzarr.ArrayOverflowError):
            s.append(data[9])
    np.testing.assert_array_equal(zarr.open_array(str(store), mode="r")[...], data[:9])


def test_flushed_and_closed_streams(store):
    s = tiledzarr.Stream(config(store))
    s.append(frames(8, (96, 80)))
    s.flush()
    s.flush()  # terminal, repeats the outcome
    with pytest.raises(tiledzarr.FinishedError):
        s.append(frames(1, (96, 80))[0])
    s.close()
    for call in (lambda: s.write(b"ab"), lambda: s.write_all(b"ab"), s.flush):
        with pytest.raises(tiledzarr.FinishedError, match="closed"):
            call()


def test_sink_exception_poisons_the_stream_and_is_the_cause(store):
    def sink(shard):
        if shard.coord[0] == 1:
            raise RuntimeError(f"disk full at {shard.coord}")

    s = tiledzarr.Stream(config(None), sink=sink)
    s.append(frames(16, (96, 80)))
    with pytest.raises(tiledzarr.SinkError) as e:
        s.flush()
    assert "RuntimeError: disk full at (1, 0, 0)" in str(e.value)
    assert isinstance(e.value.__cause__, RuntimeError)
    # Poisoned: every later call says the same.
    with pytest.raises(tiledzarr.SinkError, match="disk full"):
        s.write(b"x")
    s.close()


def test_sink_that_keeps_a_view_past_its_call(store):
    kept = []

    def sink(shard):
        # An iterator that holds the memoryview's buffer until it is used up.
        kept.append(struct.iter_unpack("<B", shard.data))

    s = tiledzarr.Stream(config(None), sink=sink)
    s.append(frames(8, (96, 80)))
    with pytest.raises(tiledzarr.SinkError, match=r"bytes\(shard.data\)") as e:
        s.flush()
    assert isinstance(e.value.__cause__, BufferError)
    s.close()


def test_sink_may_not_write_to_its_own_stream(store):
    streams = []

    def sink(shard):
        assert streams[0].metrics.bytes_in > 0  # reading metrics is fine
        streams[0].write(b"\x00\x00")

    s = tiledzarr.Stream(config(None), sink=sink)
    streams.append(s)
    s.append(frames(8, (96, 80)))
    with pytest.raises(tiledzarr.SinkError) as e:
        s.flush()
    assert isinstance(e.value.__cause__, tiledzarr.InvalidArgumentError)
    assert "own sink" in str(e.value.__cause__)
    s.close()


def test_store_exists_and_a_second_writer(tmp_path):
    taken = tmp_path / "taken.zarr"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    c = config(taken)
    c["store"]["overwrite"] = False
    with pytest.raises(tiledzarr.StoreExistsError, match="exists"):
        tiledzarr.Stream(c)
    c["store"]["overwrite"] = True
    with pytest.raises(tiledzarr.StoreExistsError, match="notes.txt"):
        tiledzarr.Stream(c)
    assert (taken / "notes.txt").read_text() == "mine"
    with tiledzarr.Stream(config(tmp_path / "one.zarr")) as first:
        with pytest.raises(tiledzarr.StoreExistsError, match=str(os.getpid())):
            tiledzarr.Stream(config(tmp_path / "one.zarr"))
        first.append(frames(8, (96, 80)))


def test_store_io_error_names_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(tiledzarr.StoreIOError, match=re.escape(str(blocker))) as e:
        tiledzarr.Stream(config(blocker / "a.zarr"))
    assert isinstance(e.value, OSError)


def test_gpu_backend_unavailable_says_why(store):
    try:
        plan = tiledzarr.estimate_memory(config(store, backend="gpu"))
    except tiledzarr.BackendUnavailableError as e:
        assert "gpu" in str(e).lower() or "cuda" in str(e).lower()
        with pytest.raises(tiledzarr.BackendUnavailableError):
            tiledzarr.Stream(config(store, backend="gpu"))
        assert not store.exists()
    else:
        pytest.skip(f"a GPU is usable here ({plan})")


def test_out_of_memory_says_how_much(store):
    with pytest.raises(tiledzarr.OutOfMemoryError) as e:
        tiledzarr.Stream(config(store, staging_bytes=1 << 50))
    assert isinstance(e.value, MemoryError)
    assert not store.exists()


def test_timeout_keeps_what_was_taken(store):
    gate = threading.Event()

    def sink(shard):
        gate.wait()

    data = frames(64, (96, 80))
    c = config(store, staging_bytes=2 * 8 * 96 * 80 * 2)  # two epochs
    s = tiledzarr.Stream(c, sink=sink)
    try:
        with pytest.raises(tiledzarr.WriteTimeoutError) as e:
            s.write_all(data, timeout=0.5)
        assert isinstance(e.value, TimeoutError)
        taken = e.value.bytes_written
        assert 0 < taken < data.nbytes and f"{taken} of {data.nbytes}" in str(e.value)
        assert s.metrics.bytes_in == taken
        with pytest.raises(tiledzarr.WriteTimeoutError):
            s.append(data[0], timeout=0.0)
    finally:
        gate.set()
    # Nothing taken was lost: the rest goes on from where the stream is.
    rest = memoryview(data).cast("B")[s.metrics.bytes_in :]
    assert s.write_all(rest) == len(rest)
    s.flush()
    s.close()
    np.testing.assert_array_equal(zarr.open_array(str(store), mode="r")[...], data)


def test_bad_timeout(store):
    with tiledzarr.Stream(config(store)) as s:
        for bad in (-1, float("nan"), float("inf")):
            with pytest.raises(tiledzarr.InvalidArgumentError, match="timeout"):
                s.write_all(b"ab", timeout=bad)


def test_a_timeout_too_long_for_the_clock_waits_without_a_limit(store):
    # 1e300 s (or 1e19) lies past what the clock holds: no deadline, as None.
    with tiledzarr.Stream(config(store)) as s:
        assert s.write_all(b"ab", timeout=1e300) == 2
        assert s.write_all(b"cd", timeout=1e19) == 2
        assert s.metrics.bytes_in == 4


def test_release_cached_memory_frees_everything_at_once():
    first = tiledzarr.release_cached_memory()
    assert isinstance(first, int) and first >= 0
    # Whatever GPU streams left, the first call freed it all.
    assert tiledzarr.release_cached_memory() == 0
