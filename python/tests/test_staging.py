"""Staging memory follows the writer: ``append`` and ``write_all`` wait for
free memory and are given no more than keeps the pipeline busy; ``write``
cannot wait, and staging grows to its budget to absorb what it writes.
``busy_writes`` counts the calls that returned with less than they were
given, ``staging_peak_bytes`` the most staging held."""

from __future__ import annotations

import threading
import time

import pytest

import tiledzarr
from conftest import frames

# Epochs of 32 frames of 256 x 256 uint16 (4 MiB), staging buffers of 64 MiB,
# a budget of four.
CONFIG = {
    "dtype": "uint16",
    "backend": "cpu",
    "staging_bytes": 256 << 20,
    "dimensions": [
        {"name": "t", "size": 0, "tile": 32},
        {"name": "y", "size": 256, "tile": 32, "tiles_per_shard": 8},
        {"name": "x", "size": 256, "tile": 32, "tiles_per_shard": 8},
    ],
}
BUFFER = 64 << 20


@pytest.mark.parametrize("writer", ["append", "write"])
def test_staging_grows_for_a_writer_that_cannot_wait_only(writer):
    epoch = frames(32, (256, 256))
    release = threading.Event()  # the sink holds the pipeline still until set
    s = tiledzarr.Stream(CONFIG, sink=lambda shard: release.wait())
    written = 0
    short = 0  # calls that took less than they were given
    if writer == "append":
        with pytest.raises(tiledzarr.WriteTimeoutError) as e:
            for _ in range(64):
                s.append(epoch, timeout=0.3)
                written += epoch.nbytes
        written += e.value.bytes_written
        short += 1
        # One being filled, one being compressed, and one ahead if the
        # pipeline was found waiting for the writer before the sink held it.
        want = (2 * BUFFER, 3 * BUFFER)
    else:
        data = memoryview(epoch).cast("B")
        deadline = time.monotonic() + 10
        while s.metrics.staging_bytes < 4 * BUFFER and time.monotonic() < deadline:
            rest = data[written % len(data) :]
            n = s.write(rest)
            written += n
            short += n < len(rest)
            time.sleep(0.001)
        want = (4 * BUFFER, 4 * BUFFER)  # the whole budget
    m = s.metrics
    held = m.staging_bytes
    release.set()
    assert want[0] <= held <= want[1]
    assert m.staging_peak_bytes == held
    assert m.busy_writes == short
    # Nothing lost: every byte taken is in the stream (the flush pads the
    # last epoch).
    s.flush()
    assert s.metrics.bytes_in == written
    s.close()


def test_a_waiting_skip_counts_one_busy_write_at_its_timeout():
    epoch = frames(32, (256, 256))
    release = threading.Event()
    s = tiledzarr.Stream(CONFIG, sink=lambda shard: release.wait())
    # Fill staging until an append waits out its timeout: the pipeline is
    # then held still by the sink.
    with pytest.raises(tiledzarr.WriteTimeoutError):
        for _ in range(64):
            s.append(epoch, timeout=0.3)
    before = s.metrics.busy_writes
    assert before == 1
    # One frame needs staging (it ends no epoch): the skip waits, then
    # times out, and that is one busy write, not one per retry.
    with pytest.raises(tiledzarr.WriteTimeoutError):
        s.skip(1, timeout=0.2)
    assert s.metrics.busy_writes == before + 1
    release.set()
    s.flush()
    s.close()
