"""Repairing a store whose stream was killed before its flush."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _native


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` did (the C API's ``tz_recovery``); for a store
    of several arrays, the sums over them."""

    #: ``*.partial`` files (writes cut short) removed.
    partial_files_removed: int
    #: The extent along dimension 0 before and after.
    planes_before: int
    planes_after: int
    #: Shard files in rows past the complete ones, left outside the extent.
    shards_beyond: int
    #: The arrays found and recovered.
    arrays: int


def recover(store_path: "str | os.PathLike[str]", *, timeout_s: "int | None" = None) -> Recovery:
    """Repairs a folder store whose stream was killed before its flush
    (kill -9, a power cut): removes the ``*.partial`` files of writes cut
    short and moves each unbounded array's extent up to every complete
    shard row on disk. ``store_path`` is the store's root (an array, or an
    OME-Zarr image, collection or plate, recovered with every array beneath
    it) or a node inside it (an image, an array), recovered alone. Raises StoreExistsError while a stream
    holds the store, and StoreIOError when the disk answers nothing for
    ``timeout_s`` seconds (1 to 3600; default 60, a store's
    ``store.timeout_s``; the repair then goes on once it answers);
    ConfigError for a ``timeout_s`` out of that range."""
    return Recovery(**_native.recover(os.fspath(store_path), timeout_s))
