#!/usr/bin/env python3
"""Drive libtiledzarr through ctypes, as a foreign runtime does (MATLAB's
loadlibrary/calllib, LabVIEW's Call Library Function Node): no C compiler,
only the exported symbols and the types declared here by hand from
include/tiledzarr.h.

    client.py LIBPATH STORE_DIR

1. tz_version, tz_status_string.
2. tz_create_json with bad JSON and with a broken rule: TZ_ERR_CONFIG, the
   handle stays NULL, tz_last_error names the problem.
3. A stream with a store in the config and a NULL sink: 50 frames of
   256 x 300 uint16 (not constant), written with tz_write, busy (0) retried;
   some frames whole, the rest cut into odd-sized pieces, one of which ends
   in the middle of an element. tz_get_metrics counts every byte.
4. tz_flush; then tz_write returns -TZ_ERR_FINISHED and a second tz_flush
   repeats the first one's status. tz_destroy.
5. The store read back with zarr-python equals the frames exactly.
6. A sink callback (CFUNCTYPE) that fails: the stream is poisoned with
   TZ_ERR_SINK and tz_stream_last_error names the shard.
7. Two stage positions in one stream (STORE_DIR-positions.zarr, a
   bioformats2raw collection): tz_array_count, tz_array_index (a missing key
   refused, naming the keys), tz_write_all_to and tz_write_to, a dropped
   frame through tz_skip, tz_frame_metadata, an array index that does not
   exist refused; read back with zarr-python: each position's frames (the
   dropped one as zeros) and its frame metadata.

Prints an OK line per check; exits 1 with a FAIL line at the first failure.
"""

from __future__ import annotations

import ctypes as C
import json
import os
import re
import sys
import time

import numpy as np

# Status codes, as in include/tiledzarr.h (enum tz_status).
TZ_OK = 0
TZ_ERR_NULL_ARGUMENT = 1
TZ_ERR_INVALID_ARGUMENT = 2
TZ_ERR_CONFIG = 3
TZ_ERR_OVERFLOW = 4
TZ_ERR_FINISHED = 5
TZ_ERR_SINK = 6

FRAMES, HEIGHT, WIDTH = 50, 256, 300


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("OK", what.split("\n")[0], flush=True)


# --- the C types --------------------------------------------------------------

class TzStream(C.Structure):
    """Opaque: only pointers to it are used."""


TzStreamPtr = C.POINTER(TzStream)


class TzShard(C.Structure):
    _fields_ = [
        ("rank", C.c_uint32),
        ("coord", C.POINTER(C.c_uint64)),
        ("data", C.POINTER(C.c_uint8)),
        ("data_bytes", C.c_size_t),
        ("index", C.POINTER(C.c_uint8)),
        ("index_bytes", C.c_size_t),
    ]


class TzMetrics(C.Structure):
    _fields_ = [
        ("bytes_in", C.c_uint64),
        ("bytes_out", C.c_uint64),
        ("shards_emitted", C.c_uint64),
        ("epochs_completed", C.c_uint64),
        ("seconds_copy", C.c_double), ("seconds_h2d", C.c_double),
        ("seconds_scatter", C.c_double),
        ("seconds_compress", C.c_double),
        ("seconds_aggregate", C.c_double), ("seconds_d2h", C.c_double),
        ("seconds_sink", C.c_double),
        ("backend", C.c_uint32),
        ("backend_reason", C.c_char * 256),
    ]


class TzStagingMetrics(C.Structure):
    _fields_ = [
        ("staging_bytes", C.c_uint64),
        ("staging_peak_bytes", C.c_uint64),
        ("busy_writes", C.c_uint64),
    ]


# int32_t (*tz_shard_sink_fn)(void *user_data, const struct tz_shard *shard)
TzShardSinkFn = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.POINTER(TzShard))
# A NULL tz_shard_sink_fn (ctypes does not take None for a CFUNCTYPE argument).
NO_SINK = TzShardSinkFn()


def load(path):
    lib = C.CDLL(path)
    sig = {
        "tz_version": (C.c_char_p, []),
        "tz_status_string": (C.c_char_p, [C.c_int32]),
        "tz_last_error": (C.c_char_p, []),
        "tz_stream_last_error": (C.c_char_p, [TzStreamPtr]),
        "tz_create_json": (C.c_int32, [C.c_char_p, TzShardSinkFn, C.c_void_p, C.POINTER(TzStreamPtr)]),
        "tz_write": (C.c_int64, [TzStreamPtr, C.c_void_p, C.c_size_t]),
        "tz_write_all": (C.c_int64, [TzStreamPtr, C.c_void_p, C.c_size_t, C.c_int64]),
        "tz_flush": (C.c_int32, [TzStreamPtr]),
        "tz_destroy": (None, [TzStreamPtr]),
        "tz_get_metrics": (C.c_int32, [TzStreamPtr, C.POINTER(TzMetrics)]),
        "tz_get_staging_metrics": (C.c_int32, [TzStreamPtr, C.POINTER(TzStagingMetrics)]),
        "tz_array_count": (C.c_int32, [TzStreamPtr, C.POINTER(C.c_uint32)]),
        "tz_array_index": (C.c_int32, [TzStreamPtr, C.c_char_p, C.POINTER(C.c_uint32)]),
        "tz_write_to": (C.c_int64, [TzStreamPtr, C.c_uint32, C.c_void_p, C.c_size_t]),
        "tz_write_all_to": (C.c_int64, [TzStreamPtr, C.c_uint32, C.c_void_p, C.c_size_t, C.c_int64]),
        "tz_skip": (C.c_int64, [TzStreamPtr, C.c_uint32, C.c_uint64]),
        "tz_frame_metadata": (C.c_int32, [TzStreamPtr, C.c_uint32, C.c_uint64, C.c_char_p]),
    }
    for name, (restype, argtypes) in sig.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes
    return lib


def text(b):
    return b.decode("utf-8", "replace") if b is not None else "<NULL>"


def header_constants():
    """The status values and the version from include/tiledzarr.h, when this
    script sits in the source tree (to catch a drift of the constants above)."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "tiledzarr.h")
    if not os.path.isfile(header):
        return None, None
    src = open(header, encoding="utf-8").read()
    codes = {m[0]: int(m[1]) for m in re.findall(r"\b(TZ_(?:OK|ERR_\w+)) = (\d+)", src)}
    ver = ".".join(re.search(r"#define TZ_VERSION_%s (\d+)" % p, src).group(1) for p in ("MAJOR", "MINOR", "PATCH"))
    return codes, ver


# --- the checks ---------------------------------------------------------------

def config(store):
    return json.dumps({
        "dtype": "uint16",
        "dimensions": [
            {"name": "t", "size": 0, "tile": 8, "tiles_per_shard": 1},
            {"name": "y", "size": HEIGHT, "tile": 64, "tiles_per_shard": 2},
            {"name": "x", "size": WIDTH, "tile": 64, "tiles_per_shard": 2},
        ],
        "codec": {"name": "zstd", "level": 3},
        # Small staging (two 8-frame epochs per buffer) so that the writes
        # below meet a busy stream now and then.
        "staging_bytes": 4 * 8 * HEIGHT * WIDTH * 2,
        "store": {"path": store, "overwrite": True},
    }).encode()


def make_frames():
    rng = np.random.default_rng(7)
    t, y, x = np.meshgrid(np.arange(FRAMES), np.arange(HEIGHT), np.arange(WIDTH), indexing="ij")
    frames = 1000 + 3 * t + y + 2 * x + rng.integers(0, 64, size=(FRAMES, HEIGHT, WIDTH))
    return np.ascontiguousarray(frames.astype("<u2"))


def pieces(total, frame_bytes):
    """(offset, length) of every write: frames 0-9 whole, then odd sizes; the
    first odd piece (1001 bytes) ends in the middle of an element."""
    out, off = [], 0
    for _ in range(10):
        out.append((off, frame_bytes))
        off += frame_bytes
    sizes = [1001, 7, 65537, 3, 150001, 12345, 1]
    i = 0
    while off < total:
        n = min(sizes[i % len(sizes)], total - off)
        out.append((off, n))
        off += n
        i += 1
    return out


def write_all_retrying(lib, s, base, off, n, stats):
    """tz_write until all n bytes are taken; 0 means busy: retry."""
    done = 0
    while done < n:
        r = lib.tz_write(s, base + off + done, n - done)
        if r < 0:
            raise Failure("tz_write returned %d (%s): %s"
                          % (r, text(lib.tz_status_string(int(r))), text(lib.tz_stream_last_error(s))))
        if r == 0:
            stats["busy"] += 1
            time.sleep(0.0002)
        else:
            stats["partial"] += int(r < n - done)
        done += r


def run(libpath, store):
    lib = load(libpath)
    codes, header_version = header_constants()
    if codes is not None:
        mine = {"TZ_OK": TZ_OK, "TZ_ERR_NULL_ARGUMENT": TZ_ERR_NULL_ARGUMENT,
                "TZ_ERR_INVALID_ARGUMENT": TZ_ERR_INVALID_ARGUMENT, "TZ_ERR_CONFIG": TZ_ERR_CONFIG,
                "TZ_ERR_OVERFLOW": TZ_ERR_OVERFLOW, "TZ_ERR_FINISHED": TZ_ERR_FINISHED, "TZ_ERR_SINK": TZ_ERR_SINK}
        check(all(codes.get(k) == v for k, v in mine.items()), "status values match include/tiledzarr.h")

    version = text(lib.tz_version())
    check(re.fullmatch(r"\d+\.\d+\.\d+", version) is not None, "tz_version() = %s" % version)
    if header_version is not None:
        check(version == header_version, "library version matches the header's TZ_VERSION_* (%s)" % header_version)
    check(text(lib.tz_status_string(TZ_ERR_FINISHED)) == text(lib.tz_status_string(-TZ_ERR_FINISHED)) != "",
          "tz_status_string(5) = tz_status_string(-5) = %r" % text(lib.tz_status_string(TZ_ERR_FINISHED)))

    # Bad configurations: TZ_ERR_CONFIG, NULL handle, a message naming the problem.
    for bad, expect in [
        (b'{"dtype": "uint16", "dimensions": [', "line 1"),  # not JSON: says where
        (b'{"dtype": "uint16", "dimensions": [{"size": 64, "tile": 0}], "store": {"path": "x"}}', "tile"),
        (b'{"dtype": "uint17", "dimensions": [{"size": 64, "tile": 8}], "store": {"path": "x"}}', "uint17"),
        (b'{"dtype": "uint16", "dimensions": [{"size": 64, "tile": 8}], "colour": 1}', "colour"),
    ]:
        s = TzStreamPtr()
        rc = lib.tz_create_json(bad, NO_SINK, None, C.byref(s))
        msg = text(lib.tz_last_error())
        check(rc == TZ_ERR_CONFIG and not s and expect in msg,
              "tz_create_json(%s) = %d (TZ_ERR_CONFIG), handle NULL, tz_last_error names %r: %s"
              % (bad.decode()[:40] + "...", rc, expect, msg))
    rc = lib.tz_create_json(None, NO_SINK, None, C.byref(TzStreamPtr()))
    check(rc == TZ_ERR_NULL_ARGUMENT, "tz_create_json(NULL, ...) = %d (TZ_ERR_NULL_ARGUMENT): %s"
          % (rc, text(lib.tz_last_error())))

    # The stream: store in the config, no sink.
    # "overwrite": true replaces an earlier store there (the library only
    # ever deletes an empty folder or one holding a zarr.json).
    frames = make_frames()
    s = TzStreamPtr()
    rc = lib.tz_create_json(config(store), NO_SINK, None, C.byref(s))
    if rc != TZ_OK:
        raise Failure("tz_create_json with a store and a NULL sink = %d: %s" % (rc, text(lib.tz_last_error())))
    check(bool(s), "tz_create_json with a store and a NULL sink")
    try:
        total = frames.nbytes
        base = frames.ctypes.data
        stats = {"busy": 0, "partial": 0}
        plan = pieces(total, frames[0].nbytes)
        check(any(n % 2 for _, n in plan[10:]) and plan[10][1] % 2 == 1,
              "%d writes planned, %d of them of an odd size (one ends mid-element)"
              % (len(plan), sum(n % 2 for _, n in plan)))
        for off, n in plan:
            write_all_retrying(lib, s, base, off, n, stats)
        check(True, "wrote %d bytes in %d pieces: %d busy (0) returns retried, %d partial takes"
              % (total, len(plan), stats["busy"], stats["partial"]))

        m = TzMetrics()
        check(lib.tz_get_metrics(s, C.byref(m)) == TZ_OK and m.bytes_in == total,
              "tz_get_metrics: bytes_in = %d (backend: %s)" % (m.bytes_in, text(m.backend_reason)))
        g = TzStagingMetrics()
        check(lib.tz_get_staging_metrics(s, C.byref(g)) == TZ_OK
              and g.busy_writes == stats["busy"] + stats["partial"]
              and g.staging_peak_bytes >= g.staging_bytes > 0,
              "tz_get_staging_metrics: %d busy writes (%d busy and %d partial returns), "
              "staging %d bytes, at most %d"
              % (g.busy_writes, stats["busy"], stats["partial"], g.staging_bytes, g.staging_peak_bytes))

        rc = lib.tz_flush(s)
        if rc != TZ_OK:
            raise Failure("tz_flush = %d: %s" % (rc, text(lib.tz_stream_last_error(s))))
        check(True, "tz_flush = TZ_OK")
        r = lib.tz_write(s, base, 2)
        check(r == -TZ_ERR_FINISHED, "tz_write after tz_flush = %d (-TZ_ERR_FINISHED): %s"
              % (r, text(lib.tz_stream_last_error(s))))
        check(lib.tz_flush(s) == TZ_OK, "a second tz_flush returns the first one's status (TZ_OK)")
        lib.tz_get_metrics(s, C.byref(m))
        check(m.bytes_out > 0 and m.shards_emitted > 0,
              "after flush: %d shards, %d bytes out (ratio %.2f)"
              % (m.shards_emitted, m.bytes_out, m.bytes_in / m.bytes_out))
    finally:
        lib.tz_destroy(s)
    lib.tz_destroy(None)  # NULL is fine

    # Read back.
    import zarr
    a = zarr.open_array(store, mode="r")
    check(tuple(a.shape) == frames.shape and a.dtype == np.uint16,
          "zarr-python opens %s: shape %s dtype %s" % (store, tuple(a.shape), a.dtype))
    got = a[:]
    if not np.array_equal(got, frames):
        bad = np.argwhere(got != frames)
        raise Failure("store differs from the frames at %d elements, first %s: %d != %d"
                      % (len(bad), tuple(bad[0]), got[tuple(bad[0])], frames[tuple(bad[0])]))
    check(True, "store content equals the %d frames exactly" % FRAMES)

    # A failing sink callback poisons the stream.
    calls = []

    @TzShardSinkFn
    def failing_sink(user_data, shard):
        sh = shard.contents
        calls.append(tuple(sh.coord[i] for i in range(sh.rank)))
        return 0 if len(calls) < 2 else 42

    cfg = json.loads(config(store))
    del cfg["store"]
    s = TzStreamPtr()
    rc = lib.tz_create_json(json.dumps(cfg).encode(), failing_sink, None, C.byref(s))
    if rc != TZ_OK:
        raise Failure("tz_create_json with a sink callback = %d: %s" % (rc, text(lib.tz_last_error())))
    check(True, "tz_create_json with a sink callback and no store")
    try:
        status = TZ_OK
        for t in range(FRAMES):
            r = lib.tz_write_all(s, base + t * frames[0].nbytes, frames[0].nbytes, -1)
            if r < 0:
                status = -r
                break
        if status == TZ_OK:
            status = lib.tz_flush(s)
        msg = text(lib.tz_stream_last_error(s))
        check(status == TZ_ERR_SINK and "42" in msg and re.search(r"shard \[\d+, \d+, \d+\]", msg),
              "a callback returning 42 poisons the stream: TZ_ERR_SINK (%d): %s" % (status, msg))
        r = lib.tz_write(s, base, 2)
        check(r == -TZ_ERR_SINK, "later tz_write = %d (-TZ_ERR_SINK)" % r)
    finally:
        lib.tz_destroy(s)
    check(len(calls) == 2, "the callback ran twice (shards %s)" % calls)

    several_positions(lib, store.rstrip("/\\") + "-positions.zarr")


POSITION_FRAMES, POSITION_SHAPE = 6, (64, 48)


def several_positions(lib, store):
    """Two positions of a time-lapse in one stream, as a MATLAB or LabVIEW
    program writes them: frames handed to each position's array by index,
    position 1's frame 2 dropped, position 1's frames with metadata."""
    dims = [{"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 2},
            {"name": "y", "size": POSITION_SHAPE[0], "tile": 32, "tiles_per_shard": 2},
            {"name": "x", "size": POSITION_SHAPE[1], "tile": 16, "tiles_per_shard": 3}]
    cfg = json.dumps({
        "arrays": [{"key": "Pos0", "dtype": "uint16", "dimensions": dims},
                   {"key": "Pos1", "dtype": "uint16", "dimensions": dims,
                    "frame_metadata": {"max_bytes": 64}}],
        "collection": "bioformats2raw",
        "store": {"path": store, "overwrite": True},
    }).encode()
    rng = np.random.default_rng(11)
    frames = [np.ascontiguousarray(rng.integers(100, 4000, size=(POSITION_FRAMES,) + POSITION_SHAPE)
                                   .astype("<u2")) for _ in range(2)]
    frame_bytes = frames[0][0].nbytes
    s = TzStreamPtr()
    rc = lib.tz_create_json(cfg, NO_SINK, None, C.byref(s))
    if rc != TZ_OK:
        raise Failure("tz_create_json of two positions = %d: %s" % (rc, text(lib.tz_last_error())))
    metadata = []
    try:
        count, index = C.c_uint32(), C.c_uint32()
        check(lib.tz_array_count(s, C.byref(count)) == TZ_OK and count.value == 2,
              "tz_array_count = %d" % count.value)
        check(lib.tz_array_index(s, b"Pos1", C.byref(index)) == TZ_OK and index.value == 1,
              "tz_array_index(\"Pos1\") = %d" % index.value)
        rc = lib.tz_array_index(s, b"Pos9", C.byref(index))
        msg = text(lib.tz_stream_last_error(s))
        check(rc == TZ_ERR_INVALID_ARGUMENT and "Pos1" in msg,
              "tz_array_index(\"Pos9\") = %d (TZ_ERR_INVALID_ARGUMENT), naming the keys: %s" % (rc, msg))
        for t in range(POSITION_FRAMES):
            r = lib.tz_write_all_to(s, 0, frames[0][t].ctypes.data, frame_bytes, -1)
            if r != frame_bytes:
                raise Failure("tz_write_all_to(0) = %d: %s" % (r, text(lib.tz_stream_last_error(s))))
            if t == 2:
                write = lambda: lib.tz_skip(s, 1, frame_bytes)  # noqa: E731
                frames[1][t] = 0  # the fill value, as the store reads it
            else:
                write = lambda: lib.tz_write_to(s, 1, frames[1][t].ctypes.data, frame_bytes)  # noqa: E731
            while (r := write()) == 0:  # busy: retry
                time.sleep(0.0002)
            if r != frame_bytes:
                raise Failure("writing position 1's frame %d = %d: %s" % (t, r, text(lib.tz_stream_last_error(s))))
            meta = {"t": t, "dropped": t == 2}
            rc = lib.tz_frame_metadata(s, 1, t, json.dumps(meta).encode())
            if rc != TZ_OK:
                raise Failure("tz_frame_metadata(1, %d) = %d: %s" % (t, rc, text(lib.tz_stream_last_error(s))))
            metadata.append(meta)
        check(True, "%d frames to each position by index, position 1's frame 2 through tz_skip, "
              "its frames' metadata through tz_frame_metadata" % POSITION_FRAMES)
        r = lib.tz_write_to(s, 2, frames[0][0].ctypes.data, frame_bytes)
        check(r == -TZ_ERR_INVALID_ARGUMENT, "tz_write_to(2, ...) = %d (-TZ_ERR_INVALID_ARGUMENT): %s"
              % (r, text(lib.tz_stream_last_error(s))))
        rc = lib.tz_flush(s)
        if rc != TZ_OK:
            raise Failure("tz_flush of two positions = %d: %s" % (rc, text(lib.tz_stream_last_error(s))))
    finally:
        lib.tz_destroy(s)

    import zarr
    for i in range(2):
        got = zarr.open_array(os.path.join(store, "Pos%d" % i, "0"), mode="r")[:]
        check(got.shape == frames[i].shape and np.array_equal(got, frames[i]),
              "zarr-python reads position %d's %d frames back exactly%s"
              % (i, POSITION_FRAMES, " (frame 2 dropped: zeros)" if i else ""))
    rows = zarr.open_array(os.path.join(store, "Pos1", "frame_metadata"), mode="r")[:]
    got = [json.loads(bytes(r).rstrip(b"\0")) for r in rows]
    check(got == metadata, "position 1's frame metadata reads back: %s" % got[:2])


def main(argv):
    if len(argv) != 3:
        print("usage: client.py LIBPATH STORE_DIR", file=sys.stderr)
        return 2
    try:
        run(argv[1], argv[2])
    except Failure as e:
        print("FAIL", e, file=sys.stderr, flush=True)
        return 1
    except OSError as e:  # the library could not be loaded, a file error
        print("FAIL", e, file=sys.stderr, flush=True)
        return 1
    print("OK all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
