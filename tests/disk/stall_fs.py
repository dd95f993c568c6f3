#!/usr/bin/env python3
"""A FUSE file system that passes every call through to a backing folder and
can be made to stall, as a hung NFS mount or a failing drive does: while the
gate file exists, every call on the mount waits (in the kernel, for the
process that made it) until the gate is removed.

    stall_fs.py BACKING MOUNT GATE

Mounts BACKING at MOUNT (in the foreground, several threads) and prints
"mounted" once the mount answers. SIGTERM or SIGINT unmounts it. Needs
libfuse 2 and fusepy (Debian: python3-fusepy) and the right to mount (root,
or fusermount).
"""

import errno
import os
import sys
import threading
import time

try:
    import fusepy as fuse  # Debian's python3-fusepy
except ImportError:
    import fuse  # fusepy from PyPI


class Stalling(fuse.Operations):
    def __init__(self, backing, gate):
        self.backing = os.path.realpath(backing)
        self.gate = gate

    def __call__(self, op, path, *args):
        # Every call, the mount's own root included, waits at the gate.
        while os.path.exists(self.gate):
            time.sleep(0.02)
        return super().__call__(op, self.backing + path, *args)

    def access(self, path, mode):
        if not os.access(path, mode):
            raise fuse.FuseOSError(errno.EACCES)

    def getattr(self, path, fh=None):
        st = os.lstat(path)
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(path)

    def statfs(self, path):
        sv = os.statvfs(path)
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(sv, k) for k in keys}

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def chown(self, path, uid, gid):
        os.chown(path, uid, gid)

    def mkdir(self, path, mode):
        os.mkdir(path, mode)

    def rmdir(self, path):
        os.rmdir(path)

    def unlink(self, path):
        os.unlink(path)

    def rename(self, old, new):
        # The new name arrives without the backing folder's prefix.
        os.rename(old, self.backing + new)

    def truncate(self, path, length, fh=None):
        with open(path, "r+b") as f:
            f.truncate(length)

    def utimens(self, path, times=None):
        os.utime(path, times)

    def open(self, path, flags):
        return os.open(path, flags)

    def create(self, path, mode, fi=None):
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    backing, mount, gate = sys.argv[1:]

    def say_when_mounted():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.ismount(mount):
                print("mounted", flush=True)
                return
            time.sleep(0.02)
        print("not mounted after 20 s", flush=True)

    threading.Thread(target=say_when_mounted, daemon=True).start()
    fuse.FUSE(Stalling(backing, gate), mount, foreground=True, nothreads=False)


if __name__ == "__main__":
    main()
