"""A stream from Python into an S3 bucket of a real server (moto's
standalone server, started here from the interpreter TZ_MOTO_PYTHON names:
the test environment's, which scripts/test-python.sh passes on), read back
by zarr-python and tensorstore through tests/readback/check_store.py in that
interpreter; the upload counters in ``Stream.metrics`` follow the uploads."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tiledzarr
from conftest import frames

REPO = Path(__file__).resolve().parents[2]
KEY_ID = "tz-test-key"
SECRET = "tz-test-secret-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto(monkeypatch, tmp_path):
    python = os.environ.get("TZ_MOTO_PYTHON")
    if not python:
        pytest.fail("TZ_MOTO_PYTHON is not set: scripts/test-python.sh sets it to a "
                    "python that can import moto.server")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "moto.log", "wb")
    server = subprocess.Popen([python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    admin = subprocess.Popen([python, str(REPO / "tests/s3/moto_admin.py"), endpoint],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(line: str) -> str:
        admin.stdin.write(line + "\n")
        admin.stdin.flush()
        return admin.stdout.readline()

    try:
        deadline = time.monotonic() + 30
        while '"ok"' not in call('{"op": "ping"}'):
            assert time.monotonic() < deadline, "moto's server did not answer in 30 s"
            time.sleep(0.2)
        assert '"ok"' in call('{"op": "create_bucket", "bucket": "acq"}')
        yield python, endpoint
    finally:
        admin.kill()
        server.kill()
        admin.wait()
        server.wait()
        admin.stdin.close()
        admin.stdout.close()
        log.close()


def test_frames_stream_into_a_bucket_and_read_back(moto, tmp_path):
    python, endpoint = moto
    data = frames(64, (128, 96))
    config = {
        "dtype": "uint16",
        "backend": "cpu",
        "dimensions": [
            {"name": "t", "size": 0, "tile": 8},
            {"name": "y", "size": 128, "tile": 32, "tiles_per_shard": 2},
            {"name": "x", "size": 96, "tile": 32, "tiles_per_shard": 3},
        ],
        "store": {"url": "s3://acq/run.zarr", "endpoint": endpoint, "timeout_s": 30},
    }
    with tiledzarr.Stream(config) as s:
        for frame in data:
            s.append(frame)
        s.flush()
        m = s.metrics
    # 8 shard rows of 2 shards, each a whole object, and the zarr.json
    # documents: every byte of the shards was accepted, none is in flight.
    assert m.shards_emitted == 16
    assert m.objects_uploaded >= m.shards_emitted + 1
    assert m.bytes_uploaded > m.bytes_out
    assert m.uploads_in_flight == 0
    raw = tmp_path / "frames.raw"
    data.astype("<u2").tofile(raw)
    check = subprocess.run(
        [python, str(REPO / "tests/readback/check_store.py"), "--store", "s3://acq/run.zarr",
         "--endpoint", endpoint, "--raw", str(raw), "--dtype", "uint16", "--shape", "64,128,96"],
        capture_output=True, text=True, timeout=300)
    sys.stdout.write(check.stdout)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("OK ") == 2, check.stdout


def test_a_folder_stream_uploads_nothing(tmp_path):
    from conftest import config

    with tiledzarr.Stream(config(tmp_path / "a.zarr")) as s:
        s.append(frames(8, (96, 80)))
        s.flush()
        m = s.metrics
    assert (m.bytes_uploaded, m.objects_uploaded, m.uploads_in_flight) == (0, 0, 0)
    assert m.shards_emitted > 0
