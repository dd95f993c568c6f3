"""The GIL is released while the library waits or copies: other Python
threads (a camera, a display) run meanwhile."""

from __future__ import annotations

import threading
import time

import numpy as np
import zarr

import tiledzarr
from conftest import config, frames


class Counter(threading.Thread):
    """Counts in pure Python, which needs the GIL for every step."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.count = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            self.count += 1


def test_a_second_thread_runs_while_flush_blocks(tmp_path):
    # A backlog that takes a while to compress whatever the disk does:
    # 18 MiB of noisy frames at zstd level 15 on one worker thread (0.7 s
    # on the development machine; 0.08 s at level 1, too little for the
    # check below once the store flushed its files on several threads).
    data = frames(64, (384, 384))
    c = config(tmp_path / "a.zarr", y=384, x=384, threads=1, staging_bytes=64 << 20)
    c["codec"] = {"name": "zstd", "level": 15}
    c["store"]["fsync"] = True
    with tiledzarr.Stream(c) as s:
        s.append(data)
        counter = Counter()
        counter.start()
        time.sleep(0.05)
        before = counter.count
        t = time.perf_counter()
        s.flush()
        blocked = time.perf_counter() - t
        during = counter.count - before
        counter.stop = True
        counter.join()
    # The flush blocked for real, and the counter kept counting meanwhile
    # (with the GIL held for the whole flush it would have counted nothing).
    assert blocked > 0.1, f"flush took {blocked:.3f} s: too little backlog to test"
    assert during > 10_000, f"{during} counts during a {blocked:.2f} s flush"
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[...], data)


def test_write_all_waits_without_the_gil_and_metrics_read_from_another_thread(tmp_path):
    # The sink holds each shard until another Python thread lets it go:
    # write_all must wait for staging with the GIL released, or nothing moves.
    release = threading.Semaphore(0)
    seen_bytes = []

    def sink(shard):
        release.acquire()

    data = frames(64, (96, 80))
    c = config(None, staging_bytes=2 * 8 * 96 * 80 * 2)
    s = tiledzarr.Stream(c, sink=sink)

    def feeder():
        for _ in range(200):
            seen_bytes.append(s.metrics.bytes_in)
            release.release()
            time.sleep(0.002)

    t = threading.Thread(target=feeder)
    t.start()
    assert s.write_all(data, timeout=30) == data.nbytes
    t.join()
    s.flush()
    s.close()
    assert max(seen_bytes) > 0  # read while write_all was waiting
    assert s.metrics.shards_emitted == 8 * 2 * 3
