#!/usr/bin/env python3
"""Peer benchmark: how fast do acquire-zarr and tensorstore write the same frames
into a sharded Zarr v3 store.

    bench-peers.py --raw FILE --dtype uint16 --frame-shape 2048,2048 --frames N \\
        --chunk 32,32,32 --shard 32,512,512 --level 1 --out-dir DIR --reps 3 \\
        [--codec zstd|blosc|gzip] [--cname zstd|lz4|zlib] [--shuffle byte|bit|none] \\
        [--json OUT.json] [--peers acquire-zarr-blosc,acquire-zarr-zstd,tensorstore] \\
        [--no-verify] [--generate] [--interleave]

The raw file holds N little-endian row-major frames of --frame-shape; the array
written is (N, *frame_shape), dimension 0 being the append (time) dimension.
--chunk is the inner chunk (tile) shape and --shard the shard shape, both in
elements and of full rank. All frames are loaded into memory first; only the
writing is timed: from just before the first write to just after the store is
closed (acquire-zarr) or every write has been committed (tensorstore). Opening
the writer (creating the stream / the array metadata) happens before the clock
starts and is reported separately. Nothing is fsync'ed inside the timed region,
for any peer; os.sync() runs before each rep so that no rep pays for the
write-back of the one before. Each rep runs every peer once, in turn; with
--interleave a rep waits for a line on stdin, so that a caller (tz-bench
--peers) runs its own stream between the peers' reps, all in the same
minutes of a machine whose speed drifts.

The codec (--codec, level L) is the one the stream under comparison writes:
zstd (default), blosc (--cname and --shuffle; typesize the element size,
c-blosc's block size) or gzip. A peer that cannot write it is skipped with a
note.

Peers:
  acquire-zarr-blosc  acquire-zarr, Blosc1 level L, frame by frame: with --codec zstd,
                      zstd inside and a byte shuffle (acquire-zarr's usual setting);
                      with --codec blosc, the given cname (zstd or lz4; acquire-zarr
                      has no zlib) and shuffle
  acquire-zarr-zstd   acquire-zarr, plain zstd level L (no shuffle), frame by frame;
                      --codec zstd only; skipped with a note when the installed
                      acquire-zarr lacks it
  tensorstore         tensorstore zarr3 driver, sharding_indexed with bytes(little) and
                      the codec inside and bytes+crc32c index, one write per shard-row
                      slab (dimension 0 extent of a shard), all writes in flight at once
  tensorstore-frames  same codecs, one write per frame inside one transaction per
                      shard-row, committed when the row is complete (streaming use)

GB/s counts 1e9 bytes of input per second. The ratio is input bytes / bytes of
all files of the written store. With --verify (default) one output of each peer
is read back with zarr-python and compared bit-exactly with the input.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import time
import traceback

import numpy as np

# Beside this script: Python puts the script's folder first on the path.
from bench_peers_data import dir_bytes, generate, load_frames, verify

ALL_PEERS = ("acquire-zarr-blosc", "acquire-zarr-zstd", "tensorstore", "tensorstore-frames")
DEFAULT_PEERS = ("acquire-zarr-blosc", "acquire-zarr-zstd", "tensorstore")
CODECS = ("zstd", "blosc", "gzip")
CNAMES = ("zstd", "lz4", "zlib")
# The shuffle: acquire-zarr's number for it and the Zarr v3 blosc codec's name.
SHUFFLES = {"none": (0, "noshuffle"), "byte": (1, "shuffle"), "bit": (2, "bitshuffle")}
DTYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float32", "float64")


class Skip(Exception):
    """The peer cannot do what was asked with the installed version (not a failure)."""


def ints(text, what):
    try:
        vals = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit("%s: expected comma separated integers, got %r" % (what, text))
    if not vals or any(v <= 0 for v in vals):
        raise SystemExit("%s: extents must be positive, got %r" % (what, text))
    return vals


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    p.add_argument("--raw", required=True, help="raw frames file")
    p.add_argument("--dtype", default="uint16", choices=DTYPES)
    p.add_argument("--frame-shape", required=True, help="e.g. 2048,2048")
    p.add_argument("--frames", required=True, type=int, help="number of frames N")
    p.add_argument("--chunk", required=True, help="chunk (tile) shape, full rank, e.g. 32,32,32")
    p.add_argument("--shard", required=True, help="shard shape in elements, full rank, e.g. 32,512,512")
    p.add_argument("--level", type=int, default=1, help="the codec's level (default 1)")
    p.add_argument("--codec", default="zstd", choices=CODECS,
                   help="what the peers write (default zstd)")
    p.add_argument("--cname", default="zstd", choices=CNAMES,
                   help="blosc's compressor (--codec blosc; default zstd)")
    p.add_argument("--shuffle", default="byte", choices=tuple(SHUFFLES),
                   help="blosc's shuffle (--codec blosc; default byte)")
    p.add_argument("--out-dir", required=True, help="where the stores are written")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--peers", default=",".join(DEFAULT_PEERS),
                   help="comma separated, from: %s (default: %s)" % (",".join(ALL_PEERS), ",".join(DEFAULT_PEERS)))
    p.add_argument("--verify", dest="verify", action="store_true", default=True,
                   help="read one output of each peer back and compare (default)")
    p.add_argument("--no-verify", dest="verify", action="store_false")
    p.add_argument("--threads", type=int, default=0,
                   help="acquire-zarr max_threads (0: its default, all cores)")
    p.add_argument("--keep", action="store_true", help="keep the last store of each peer")
    p.add_argument("--interleave", action="store_true",
                   help="say 'ready' on stdout once set up, then run rep N when the Nth line "
                        "comes on stdin and answer 'rep N done' (the rest of the output goes to "
                        "stderr), so that the caller's runs alternate with the peers' in one "
                        "warm process")
    p.add_argument("--generate", action="store_true",
                   help="first write synthetic frames (structured + noise) to --raw, replacing it")
    a = p.parse_args(argv)
    a.frame_shape = ints(a.frame_shape, "--frame-shape")
    a.chunk = ints(a.chunk, "--chunk")
    a.shard = ints(a.shard, "--shard")
    a.peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    bad = [x for x in a.peers if x not in ALL_PEERS]
    if bad or not a.peers:
        p.error("--peers: unknown %s; choose from %s" % (bad, ",".join(ALL_PEERS)))
    rank = 1 + len(a.frame_shape)
    if len(a.chunk) != rank or len(a.shard) != rank:
        p.error("--chunk and --shard must have rank %d (1 + frame rank)" % rank)
    if any(s % c for s, c in zip(a.shard, a.chunk)):
        p.error("--shard %s must be a whole multiple of --chunk %s" % (a.shard, a.chunk))
    if a.frames <= 0 or a.reps <= 0:
        p.error("--frames and --reps must be positive")
    if a.codec != "blosc" and (a.cname, a.shuffle) != ("zstd", "byte"):
        p.error("--cname and --shuffle are blosc's: give --codec blosc")
    return a


def codec_words(a):
    """The codec in words, for notes and the heading."""
    if a.codec == "blosc":
        return "blosc %s level %d, %s shuffle" % (a.cname, a.level, a.shuffle)
    return "%s level %d" % (a.codec, a.level)


# -------------------------------------------------------------------------- peers

def dim_names(rank):
    spatial = ["z", "y", "x"] if rank - 1 <= 3 else ["d%d" % i for i in range(1, rank)]
    return ["t"] + spatial[-(rank - 1):]


class AcquireZarrPeer:
    """acquire-zarr, frames appended one at a time, stream closed in the timed region."""

    def __init__(self, name, a):
        import acquire_zarr as az
        self.az = az
        self.name = name
        self.a = a
        self.version = importlib.metadata.version("acquire-zarr")
        if a.codec == "gzip" or (name == "acquire-zarr-zstd" and a.codec != "zstd"):
            raise Skip("acquire-zarr %s: %s writes no %s" % (self.version, name, codec_words(a)))
        if name == "acquire-zarr-zstd":
            if not (hasattr(az.Compressor, "ZSTD") and hasattr(az.CompressionCodec, "ZSTD")):
                raise Skip("acquire-zarr %s has no plain zstd compressor (only Blosc); skipped"
                           % self.version)
            self.compression = az.CompressionSettings(
                compressor=az.Compressor.ZSTD, codec=az.CompressionCodec.ZSTD,
                level=a.level, shuffle=0)
            self.notes = "acquire-zarr %s, plain zstd level %d, no shuffle" % (self.version, a.level)
        else:
            cname, shuffle = (a.cname, a.shuffle) if a.codec == "blosc" else ("zstd", "byte")
            inner = getattr(az.CompressionCodec, "BLOSC_" + cname.upper(), None)
            if inner is None:
                raise Skip("acquire-zarr %s has no blosc %s" % (self.version, cname))
            self.compression = az.CompressionSettings(
                compressor=az.Compressor.BLOSC1, codec=inner,
                level=a.level, shuffle=SHUFFLES[shuffle][0])
            self.notes = "acquire-zarr %s, blosc1 %s level %d, %s shuffle" % (
                self.version, cname, a.level, shuffle)
        self.notes += ", one append per frame, max_threads=%s" % (a.threads or "auto")
        try:
            az.set_log_level(az.LogLevel.ERROR)
        except Exception:
            pass

    def settings(self, path):
        az, a = self.az, self.a
        rank = 1 + len(a.frame_shape)
        names = dim_names(rank)
        dims = []
        for i in range(rank):
            dims.append(az.Dimension(
                name=names[i],
                kind=az.DimensionType.TIME if i == 0 else az.DimensionType.SPACE,
                array_size_px=0 if i == 0 else a.frame_shape[i - 1],  # 0: append dimension
                chunk_size_px=a.chunk[i],
                shard_size_chunks=a.shard[i] // a.chunk[i]))
        arr = az.ArraySettings(dimensions=dims, data_type=np.dtype(a.dtype),
                               compression=self.compression)
        kw = dict(store_path=path, arrays=[arr], overwrite=True)
        if a.threads:
            kw["max_threads"] = a.threads
        return az.StreamSettings(**kw)

    def run(self, frames, path):
        settings = self.settings(path)
        t0 = time.perf_counter()
        stream = self.az.ZarrStream(settings)
        t1 = time.perf_counter()
        for i in range(frames.shape[0]):
            stream.append(frames[i])
        stream.close()
        t2 = time.perf_counter()
        return t2 - t1, t1 - t0


class TensorstorePeer:
    """tensorstore zarr3 + sharding_indexed. Either one write per shard-row slab
    (all issued, then all awaited) or one write per frame within a transaction
    per shard-row."""

    def __init__(self, name, a):
        import tensorstore as ts
        self.ts = ts
        self.name = name
        self.a = a
        self.version = importlib.metadata.version("tensorstore")
        self.per_frame = name == "tensorstore-frames"
        how = ("one write per frame, a transaction per shard-row committed when full"
               if self.per_frame else
               "one write per shard-row slab of %d frames, all in flight, then awaited" % a.shard[0])
        self.notes = ("tensorstore %s zarr3, sharding_indexed(bytes little + %s; index bytes + crc32c), %s; "
                      "array created with its final shape" % (self.version, codec_words(a), how))

    def inner_codec(self):
        a = self.a
        if a.codec == "gzip":
            return {"name": "gzip", "configuration": {"level": a.level}}
        if a.codec == "blosc":
            return {"name": "blosc", "configuration": {
                "cname": a.cname, "clevel": a.level, "shuffle": SHUFFLES[a.shuffle][1],
                "typesize": np.dtype(a.dtype).itemsize, "blocksize": 0}}
        return {"name": "zstd", "configuration": {"level": a.level, "checksum": False}}

    def spec(self, path):
        a = self.a
        rank = 1 + len(a.frame_shape)
        shape = [a.frames] + list(a.frame_shape)
        return {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": os.path.abspath(path)},
            "metadata": {
                "shape": shape,
                "data_type": a.dtype,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(a.shard)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0,
                "codecs": [{
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": list(a.chunk),
                        "codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            self.inner_codec(),
                        ],
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                        "index_location": "end",
                    },
                }],
                "dimension_names": dim_names(rank),
            },
            "create": True,
            "delete_existing": True,
        }

    def run(self, frames, path):
        ts = self.ts
        t0 = time.perf_counter()
        arr = ts.open(self.spec(path)).result()
        t1 = time.perf_counter()
        n, step = frames.shape[0], self.a.shard[0]
        if self.per_frame:
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                txn = ts.Transaction()
                tarr = arr.with_transaction(txn)
                for i in range(lo, hi):
                    tarr[i].write(frames[i]).result()  # staged in the transaction
                txn.commit_async().result()
        else:
            futures = [arr[lo:min(n, lo + step)].write(frames[lo:min(n, lo + step)])
                       for lo in range(0, n, step)]
            for f in futures:
                f.result()  # resolves once the write is committed to the kvstore
        t2 = time.perf_counter()
        return t2 - t1, t1 - t0


def make_peer(name, a):
    if name.startswith("acquire-zarr"):
        return AcquireZarrPeer(name, a)
    return TensorstorePeer(name, a)


# --------------------------------------------------------------------------- main

def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    # With --interleave, stdout is the caller's channel: a line per rep run;
    # everything else goes to stderr.
    control = None
    if a.interleave:
        control, sys.stdout = sys.stdout, sys.stderr
    if a.generate:
        t = time.perf_counter()
        generate(a.raw, a.dtype, a.frames, a.frame_shape)
        print("generated %s in %.1f s" % (a.raw, time.perf_counter() - t), file=sys.stderr)
    frames = load_frames(a)
    in_bytes = frames.nbytes
    os.makedirs(a.out_dir, exist_ok=True)

    cfg = {
        "raw": os.path.abspath(a.raw), "dtype": a.dtype, "frame_shape": list(a.frame_shape),
        "frames": a.frames, "array_shape": list(frames.shape), "chunk": list(a.chunk),
        "shard": list(a.shard), "level": a.level, "codec": codec_words(a),
        "reps": a.reps, "input_bytes": in_bytes,
        "out_dir": os.path.abspath(a.out_dir), "verify": a.verify,
        "acquire_zarr_threads": a.threads or "auto", "cpus": os.cpu_count(),
        "python": platform.python_version(), "machine": platform.machine(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "versions": {},
    }
    for pkg in ("numpy", "zarr", "tensorstore", "acquire-zarr"):
        try:
            cfg["versions"][pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            cfg["versions"][pkg] = None
    print("input: %d frames of %s %s = %.3f GB; chunk %s shard %s; %s; %d reps"
          % (a.frames, "x".join(map(str, a.frame_shape)), a.dtype, in_bytes / 1e9,
             ",".join(map(str, a.chunk)), ",".join(map(str, a.shard)), codec_words(a), a.reps),
          flush=True)
    if cfg["loadavg_start"][0] > 0.5 * (os.cpu_count() or 1):
        print("note: load average %.2f on %d cpus before starting; timings will be noisy"
              % (cfg["loadavg_start"][0], os.cpu_count() or 1), flush=True)

    results, failed = [], False
    running = []  # (result, peer, store path) of the peers set up
    for name in a.peers:
        res = {"name": name, "best_gbps": None, "median_gbps": None, "ratio": None,
               "seconds": [], "open_seconds": [], "stored_bytes": None, "status": "ok",
               "verified": None, "notes": ""}
        results.append(res)
        try:
            peer = make_peer(name, a)
        except Skip as e:
            res.update(status="skipped", notes=str(e))
            print("%s: SKIPPED: %s" % (name, e), flush=True)
            continue
        except Exception as e:
            res.update(status="failed", notes="setup: %s: %s" % (type(e).__name__, e))
            print("%s: FAILED to set up: %s" % (name, res["notes"]), flush=True)
            failed = True
            continue
        res["notes"] = peer.notes
        running.append((res, peer, os.path.join(a.out_dir, name + ".zarr")))

    def fail(res, e):
        res["status"] = "failed"
        res["notes"] += "; error: %s: %s" % (type(e).__name__, e)
        print("%s: FAILED: %s: %s" % (res["name"], type(e).__name__, e), flush=True)
        traceback.print_exc()

    # Rep by rep, each peer once per rep; with --interleave, a rep starts
    # when a line comes on stdin (the caller's own run came between), and
    # the caller hears first that the frames are loaded and the peers set
    # up, so that none of that overlaps its runs.
    if control is not None:
        control.write("ready\n")
        control.flush()
    for rep in range(a.reps):
        if control is not None and not sys.stdin.readline():
            break
        for res, peer, path in running:
            if res["status"] != "ok":
                continue
            try:
                shutil.rmtree(path, ignore_errors=True)
                os.sync()  # start every rep without dirty pages from the previous one
                secs, open_s = peer.run(frames, path)
                res["seconds"].append(round(secs, 6))
                res["open_seconds"].append(round(open_s, 6))
                print("%s rep %d: %.3f s (%.3f GB/s), open %.3f s"
                      % (res["name"], rep + 1, secs, in_bytes / secs / 1e9, open_s), flush=True)
            except Exception as e:
                fail(res, e)
                failed = True
        if control is not None:
            control.write("rep %d done\n" % (rep + 1))
            control.flush()
    for res, peer, path in running:
        try:
            if res["status"] != "ok" or not res["seconds"]:
                continue
            res["stored_bytes"] = dir_bytes(path)
            res["ratio"] = round(in_bytes / res["stored_bytes"], 4) if res["stored_bytes"] else None
            res["best_gbps"] = round(in_bytes / min(res["seconds"]) / 1e9, 4)
            res["median_gbps"] = round(in_bytes / statistics.median(res["seconds"]) / 1e9, 4)
            if a.verify:
                err = verify(path, frames)
                res["verified"] = err is None
                if err:
                    res["status"] = "failed"
                    res["notes"] += "; VERIFY FAILED: " + err
                    failed = True
                print("%s: verify %s" % (res["name"], "ok" if err is None else "FAILED: " + err),
                      flush=True)
        except Exception as e:
            fail(res, e)
            failed = True
        finally:
            if not a.keep:
                shutil.rmtree(path, ignore_errors=True)

    # table
    print()
    hdr = "%-20s %12s %12s %8s  %s" % ("peer", "best GB/s", "median GB/s", "ratio", "reps (s)")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        if r["status"] == "skipped" or not r["seconds"]:
            print("%-20s %12s %12s %8s  %s" % (r["name"], "-", "-", "-", r["status"]))
            continue
        print("%-20s %12.3f %12.3f %8.2f  %s%s" % (
            r["name"], r["best_gbps"], r["median_gbps"], r["ratio"] or float("nan"),
            " ".join("%.3f" % s for s in r["seconds"]),
            "" if r["status"] == "ok" else "  [%s]" % r["status"].upper()))
    print()
    for r in results:
        print("%s: %s" % (r["name"], r["notes"]))
    print("load average at end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"peers": results, "data": cfg}, f, indent=2)
            f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
