#!/usr/bin/env python3
"""The disk's durable write rate, as a store with fsync meets it.

    python3 scripts/durable-write-probe.py DIR [FILES [MIB]]

Writes FILES files (default 256) of MIB MiB (default 8, a cam-32 shard) of
random bytes into DIR under temporary names, renamed into place as the
store does, from 1, 2, 4, 8 and 16 threads, first without and then with an
fsync of each file (and of DIR at the end); prints GB/s for each. DIR is
emptied of these files at the end.
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def main():
    folder = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    size = (int(sys.argv[3]) if len(sys.argv) > 3 else 8) << 20
    os.makedirs(folder, exist_ok=True)
    data = os.urandom(size)

    def write(i, sync):
        tmp = os.path.join(folder, f"probe-{i}.partial")
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                os.fsync(f.fileno())
        os.rename(tmp, os.path.join(folder, f"probe-{i}"))

    def clear():
        for i in range(files):
            path = os.path.join(folder, f"probe-{i}")
            if os.path.exists(path):
                os.unlink(path)

    for sync in (False, True):
        for threads in (1, 2, 4, 8, 16):
            clear()
            t = time.time()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda i: write(i, sync), range(files)))
            if sync:
                fd = os.open(folder, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            seconds = time.time() - t
            print(f"fsync={'on' if sync else 'off'} threads={threads}: "
                  f"{files * size / seconds / 1e9:.2f} GB/s ({files} files of {size >> 20} MiB)")
    clear()


if __name__ == "__main__":
    main()
