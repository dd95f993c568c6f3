#!/usr/bin/env python3
"""Read a Zarr v3 store back with independent readers and compare it bit-exactly
with the raw frames it was written from.

    check_store.py --store DIR --raw FILE --dtype NAME --shape a,b,c[,...]
                   [--readers zarr,tensorstore] [--allow-unsharded]
    check_store.py --manifest FILE [--min N] [--endpoint http://host:port]
    check_store.py --store s3://bucket/prefix --endpoint http://host:port ...

A manifest holds one store per line: store, raw, dtype and shape, separated by
tabs; every store is checked in this one process (the readers' imports are paid
once), and fewer than N lines is an error.

A store may be a folder or an object store: `s3://bucket/prefix` with
--endpoint, read by zarr-python through s3fs and by tensorstore's `s3`
kvstore, credentials from the environment (AWS_ACCESS_KEY_ID, ...).

The raw file holds little-endian, row-major elements of the array exactly as
the producer received them. It may be shorter than the array (the stream ended
mid-plane); every element past its end must read back as the fill value 0.

Each reader (zarr-python, tensorstore) opens the store, its shape and dtype are
checked against --shape/--dtype, and the whole array is read (in slabs along
dimension 0 when it is large) and compared as unsigned integers of the element
width, so NaNs and signed zeros compare by their bits.

Exit status: 0 all readers agree with the raw data ("OK <reader> <store>
shape=... dtype=..." per reader); 1 a mismatch (the first differing element is
printed); 2 bad arguments, an unreadable store, or any other error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import numpy as np

DTYPES = (
    "uint8", "uint16", "uint32", "uint64",
    "int8", "int16", "int32", "int64",
    "float16", "float32", "float64",
)
READERS = ("zarr", "tensorstore")
SLAB_BYTES = 512 * 1024 * 1024


class CheckError(Exception):
    """A problem that is not a data mismatch (exit 2)."""


class Mismatch(Exception):
    """The store's content or metadata differs from what was expected (exit 1)."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True,
                   help="directory of the Zarr v3 array, or s3://bucket/prefix")
    p.add_argument("--endpoint", help="the S3 endpoint of an s3:// store (http://host:port)")
    p.add_argument("--raw", required=True, help="raw little-endian row-major elements")
    p.add_argument("--dtype", required=True, choices=DTYPES, help="Zarr v3 data type name")
    p.add_argument("--shape", required=True, help="array shape, comma separated")
    p.add_argument("--readers", default=",".join(READERS),
                   help="comma separated subset of: %s (default: all)" % ",".join(READERS))
    p.add_argument("--allow-unsharded", action="store_true",
                   help="accept arrays whose codecs do not start with sharding_indexed")
    p.add_argument("--slab-bytes", type=int, default=SLAB_BYTES, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        a.shape = tuple(int(s) for s in a.shape.split(","))
    except ValueError:
        p.error("--shape must be comma separated integers, got %r" % a.shape)
    if not a.shape or any(s < 0 for s in a.shape):
        p.error("--shape must have at least one non-negative extent")
    a.readers = [r.strip() for r in a.readers.split(",") if r.strip()]
    bad = [r for r in a.readers if r not in READERS]
    if bad or not a.readers:
        p.error("--readers: unknown reader(s) %s; choose from %s" % (bad, ",".join(READERS)))
    return a


def fmt_shape(shape):
    return ",".join(str(int(s)) for s in shape)


def is_s3(store):
    return store.startswith("s3://")


def s3_split(store):
    bucket, _, prefix = store[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


def read_zarr_json(store, endpoint):
    if is_s3(store):
        import s3fs
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        path = store[len("s3://"):].rstrip("/") + "/zarr.json"
        if not fs.exists(path):
            raise CheckError("%s: no zarr.json (not a Zarr v3 node)" % store)
        with fs.open(path, "rb") as f:
            return json.load(f)
    path = os.path.join(store, "zarr.json")
    if not os.path.isfile(path):
        raise CheckError("%s: no zarr.json (not a Zarr v3 node)" % store)
    with open(path, "rb") as f:
        return json.load(f)


def check_metadata(store, dtype_name, shape, allow_unsharded, endpoint=None):
    """Check zarr.json directly, so a wrong store is reported plainly."""
    meta = read_zarr_json(store, endpoint)
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise CheckError("%s: zarr.json is not a Zarr v3 array (zarr_format=%r node_type=%r)"
                         % (store, meta.get("zarr_format"), meta.get("node_type")))
    problems = []
    if meta.get("data_type") != dtype_name:
        problems.append("data_type %r, expected %r" % (meta.get("data_type"), dtype_name))
    if tuple(meta.get("shape", ())) != tuple(shape):
        problems.append("shape %s, expected %s" % (fmt_shape(meta.get("shape", ())), fmt_shape(shape)))
    codecs = meta.get("codecs") or []
    if not allow_unsharded and (not codecs or codecs[0].get("name") != "sharding_indexed"):
        problems.append("codecs do not start with sharding_indexed: %s"
                        % [c.get("name") for c in codecs])
    if problems:
        raise Mismatch("%s: zarr.json: %s" % (store, "; ".join(problems)))
    return meta


class ZarrReader:
    name = "zarr"

    def __init__(self, store, endpoint=None):
        import zarr
        if is_s3(store):  # through fsspec's s3fs
            self.arr = zarr.open_array(store, mode="r", storage_options={"endpoint_url": endpoint})
        else:
            self.arr = zarr.open_array(store, mode="r")
        self.shape = tuple(int(s) for s in self.arr.shape)
        self.dtype = np.dtype(self.arr.dtype)

    def read(self, lo, hi):
        return np.asarray(self.arr[lo:hi])


class TensorstoreReader:
    name = "tensorstore"

    def __init__(self, store, endpoint=None):
        import tensorstore as ts
        if is_s3(store):
            bucket, prefix = s3_split(store)
            kv = {"driver": "s3", "bucket": bucket, "path": prefix + "/" if prefix else "",
                  "endpoint": endpoint,
                  "aws_region": os.environ.get("AWS_REGION", "us-east-1")}
        else:
            kv = {"driver": "file", "path": os.path.abspath(store)}
        spec = {"driver": "zarr3", "kvstore": kv}
        self.arr = ts.open(spec, read=True, open=True).result()
        origin = tuple(int(x) for x in self.arr.domain.inclusive_min)
        if any(origin):
            raise CheckError("tensorstore: domain origin %s is not zero" % (origin,))
        self.shape = tuple(int(s) for s in self.arr.shape)
        self.dtype = np.dtype(self.arr.dtype.numpy_dtype)

    def read(self, lo, hi):
        return np.asarray(self.arr[lo:hi].read().result())


def open_reader(name, store, endpoint=None):
    try:
        return {"zarr": ZarrReader, "tensorstore": TensorstoreReader}[name](store, endpoint)
    except CheckError:
        raise
    except Exception as e:  # the reader's own error, made readable
        raise CheckError("%s could not open %s: %s: %s" % (name, store, type(e).__name__, e)) from e


def uint_view(a):
    return a.view(np.dtype("<u%d" % a.dtype.itemsize))


def compare_reader(reader, store, raw_path, dtype, shape, n_raw, slab_bytes):
    name = reader.name
    if reader.shape != tuple(shape):
        raise Mismatch("%s: shape %s, expected %s" % (name, fmt_shape(reader.shape), fmt_shape(shape)))
    want_dt = dtype.newbyteorder("=")
    if reader.dtype.newbyteorder("=") != want_dt:
        raise Mismatch("%s: dtype %s, expected %s" % (name, reader.dtype, dtype.name))

    total = int(np.prod(shape, dtype=np.int64))
    if total == 0:
        return
    row_elems = total // shape[0]
    row_bytes = max(1, row_elems * dtype.itemsize)
    rows_per_slab = max(1, slab_bytes // row_bytes)

    with open(raw_path, "rb") as raw:
        for lo in range(0, shape[0], rows_per_slab):
            hi = min(shape[0], lo + rows_per_slab)
            first, count = lo * row_elems, (hi - lo) * row_elems
            got = reader.read(lo, hi)
            if got.shape != (hi - lo,) + tuple(shape[1:]):
                raise CheckError("%s: read of rows [%d, %d) returned shape %s"
                                 % (name, lo, hi, got.shape))
            got_bits = uint_view(np.ascontiguousarray(got).astype(dtype.newbyteorder("="), copy=False)).reshape(-1)

            # expected: raw prefix, then zero bits (fill value 0)
            want_bits = np.zeros(count, dtype=got_bits.dtype)
            n_have = max(0, min(count, n_raw - first))
            if n_have:
                raw.seek(first * dtype.itemsize)
                dest = want_bits[:n_have]
                nread = raw.readinto(memoryview(dest).cast("B"))
                if nread != dest.nbytes:
                    raise CheckError("short read of %s at element %d" % (raw_path, first))
                if sys.byteorder == "big":  # the raw file is little-endian
                    dest.byteswap(inplace=True)

            diff = np.flatnonzero(got_bits != want_bits)
            if diff.size:
                i = int(diff[0])
                flat = first + i
                coord = tuple(int(c) for c in np.unravel_index(flat, shape))
                exp_v = want_bits[i:i + 1].view(dtype.newbyteorder("<"))[0].item()
                got_v = got_bits[i:i + 1].view(dtype.newbyteorder("<"))[0].item()
                w = dtype.itemsize * 2
                src = "raw" if flat < n_raw else "fill"
                raise Mismatch(
                    "%s: MISMATCH at flat index %d coord (%s): expected %r (0x%0*x, %s) got %r (0x%0*x); "
                    "%d differing element(s) in rows [%d, %d)"
                    % (name, flat, ",".join(map(str, coord)), exp_v, w, int(want_bits[i]), src,
                       got_v, w, int(got_bits[i]), diff.size, lo, hi))


def check_manifest(argv):
    p = argparse.ArgumentParser(description="check every store of a manifest")
    p.add_argument("--manifest", required=True)
    p.add_argument("--min", type=int, default=1, help="fewest stores the manifest must list")
    p.add_argument("--endpoint", help="the S3 endpoint of s3:// stores")
    a = p.parse_args(argv)
    with open(a.manifest) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    if len(rows) < a.min:
        print("ERROR %s lists %d stores, expected at least %d" % (a.manifest, len(rows), a.min),
              file=sys.stderr)
        return 2
    status = 0
    for row in rows:
        if len(row) != 4:
            print("ERROR %s: bad line %r" % (a.manifest, row), file=sys.stderr)
            return 2
        store, raw, dtype, shape = row
        args = ["--store", store, "--raw", raw, "--dtype", dtype, "--shape", shape]
        if a.endpoint:
            args += ["--endpoint", a.endpoint]
        status = max(status, main(args))
    print("checked %d stores" % len(rows), flush=True)
    return status


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if any(x == "--manifest" or x.startswith("--manifest=") for x in argv):
        return check_manifest(argv)
    a = parse_args(argv)
    dtype = np.dtype(a.dtype)
    try:
        if is_s3(a.store):
            if not a.endpoint:
                raise CheckError("an s3:// store needs --endpoint")
        elif not os.path.isdir(a.store):
            raise CheckError("store %s is not a directory" % a.store)
        if not os.path.isfile(a.raw):
            raise CheckError("raw file %s not found" % a.raw)
        raw_size = os.path.getsize(a.raw)
        if raw_size % dtype.itemsize:
            raise CheckError("raw file %s: %d bytes is not a whole number of %s elements"
                             % (a.raw, raw_size, a.dtype))
        n_raw = raw_size // dtype.itemsize
        check_metadata(a.store, a.dtype, a.shape, a.allow_unsharded, a.endpoint)
        total = int(np.prod(a.shape, dtype=np.int64))
        if n_raw > total:
            raise CheckError("raw file %s holds %d elements, more than the %d of shape %s"
                             % (a.raw, n_raw, total, fmt_shape(a.shape)))
    except Mismatch as e:
        print("FAIL %s" % e, file=sys.stderr)
        return 1
    except CheckError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 2
    except Exception as e:
        print("ERROR %s: %s: %s" % (a.store, type(e).__name__, e), file=sys.stderr)
        return 2

    status = 0
    for name in a.readers:
        try:
            reader = open_reader(name, a.store, a.endpoint)
            compare_reader(reader, a.store, a.raw, dtype, a.shape, n_raw, a.slab_bytes)
            print("OK %s %s shape=%s dtype=%s" % (name, a.store, fmt_shape(a.shape), a.dtype), flush=True)
        except Mismatch as e:
            print("FAIL %s %s" % (a.store, e), file=sys.stderr, flush=True)
            status = max(status, 1)
        except CheckError as e:
            print("ERROR %s %s" % (a.store, e), file=sys.stderr, flush=True)
            status = 2
        except Exception as e:
            print("ERROR %s %s: %s: %s" % (a.store, name, type(e).__name__, e), file=sys.stderr, flush=True)
            if os.environ.get("CHECK_STORE_TRACEBACK"):
                traceback.print_exc()
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
