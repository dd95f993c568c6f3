"""tiledzarr.recover: a collection of positions whose process was killed
(SIGKILL) mid-acquisition, repaired from its root and read back by
zarr-python; a store in use is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr

import tiledzarr
from conftest import frames

FRAME = (2, 48, 40)
TIME_POINTS = 24


def collection(path) -> dict:
    """Two positions of unbounded time points, one time point per shard
    row; position P1 with a second level."""
    dims = [
        {"name": "t", "size": 0, "tile": 1},
        {"name": "c", "size": 2, "tile": 1, "tiles_per_shard": 2},
        {"name": "y", "size": 48, "tile": 16, "tiles_per_shard": 2},
        {"name": "x", "size": 40, "tile": 16, "tiles_per_shard": 1},
    ]
    return {
        "arrays": [
            {"key": "P0", "dtype": "uint16", "dimensions": dims},
            {"key": "P1", "dtype": "uint16", "dimensions": dims, "multiscale": {"levels": 2}},
        ],
        "collection": "bioformats2raw",
        "backend": "cpu",
        "threads": 2,
        "max_latency_ms": 20,
        "store": {"path": str(path), "fsync": False},
    }


# Streams the time points into both positions in turn, waits until the
# first row of each array is on disk (6 shards at level 0, 2 at level 1),
# and kills its own process at once, with the rest in flight and before
# any flush.
CHILD = textwrap.dedent(
    """
    import json, os, pathlib, signal, sys, time
    import tiledzarr
    sys.path.insert(0, sys.argv[3])
    from conftest import frames
    config = json.loads(sys.argv[1])
    root = pathlib.Path(config["store"]["path"])
    data = frames(int(sys.argv[2]) * 2, %r, seed=5)
    stream = tiledzarr.Stream(config)
    for t in range(int(sys.argv[2])):
        stream.append(data[2 * t], key="P0")
        stream.append(data[2 * t + 1], key="P1")
    def first_row_out(array, shards):
        row = root / array / "c" / "0"
        return len([f for f in row.rglob("*") if f.is_file() and f.suffix != ".partial"]) == shards
    arrays = [("P0/0", 6), ("P1/0", 6), ("P1/1", 2)]
    deadline = time.monotonic() + 60
    while not all(first_row_out(*a) for a in arrays) and time.monotonic() < deadline:
        time.sleep(0.001)
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
    % (FRAME,)
)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_killed_collection_is_recovered_from_its_root(tmp_path):
    root = tmp_path / "positions.zarr"
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(collection(root)), str(TIME_POINTS), tests_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == -9 and "written" in run.stdout, run.stderr
    assert (root / ".tiledzarr.lock").exists(), "a killed stream leaves its lock file"

    r = tiledzarr.recover(root)
    assert r.arrays == 3, r
    assert r.planes_after >= r.planes_before, r
    left = [p for p in root.rglob("*") if p.name.endswith(".partial") or p.name == ".tiledzarr.lock"]
    assert not left, left

    data = frames(TIME_POINTS * 2, FRAME, seed=5)
    extents = []
    for position, key in enumerate(["P0", "P1"]):
        a = zarr.open_array(str(root / key / "0"), mode="r")
        extents.append(a.shape[0])
        assert 0 < a.shape[0] <= TIME_POINTS, a.shape
        np.testing.assert_array_equal(a[:], data[position :: 2][: a.shape[0]])
    # The second level covers the time points of its own complete rows.
    level = zarr.open_array(str(root / "P1" / "1"), mode="r")
    assert 0 < level.shape[0] <= extents[1]
    assert r.planes_after == sum(extents) + level.shape[0], r

    # Recovering a sound store changes nothing.
    again = tiledzarr.recover(root)
    assert (again.planes_before, again.planes_after) == (r.planes_after, r.planes_after)


def test_a_store_in_use_is_refused_and_a_folder_that_is_no_store_named(tmp_path):
    root = tmp_path / "live.zarr"
    with tiledzarr.Stream(collection(root)) as stream:
        stream.append(frames(1, FRAME)[0], key="P0")
        for path in (root, root / "P0" / "0"):
            with pytest.raises(tiledzarr.StoreExistsError, match="in use"):
                tiledzarr.recover(path)
    with pytest.raises(tiledzarr.StoreIOError, match="nothing"):
        tiledzarr.recover(tmp_path / "nothing")


def test_the_disks_bound_is_a_keyword_checked_before_the_store_is_touched(tmp_path):
    root = tmp_path / "done.zarr"
    with tiledzarr.Stream(collection(root)) as stream:
        for key in ("P0", "P1"):
            stream.append(frames(4, FRAME), key=key)
        stream.flush()
    partial = root / "P0" / "0" / "c" / "9" / "0.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"half a shard")
    for bad in (0, 3601):
        with pytest.raises(tiledzarr.ConfigError, match="timeout_s"):
            tiledzarr.recover(root, timeout_s=bad)
        assert partial.exists()
    r = tiledzarr.recover(root, timeout_s=5)
    assert r.partial_files_removed == 1 and not partial.exists()
