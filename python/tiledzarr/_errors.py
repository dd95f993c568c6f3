"""The exceptions of tiledzarr: one base class and one subclass per status
of the C API (``tz_status``), each carrying the library's message."""

from __future__ import annotations

__all__ = [
    "TiledZarrError",
    "NullArgumentError",
    "InvalidArgumentError",
    "ConfigError",
    "ArrayOverflowError",
    "FinishedError",
    "SinkError",
    "StoreIOError",
    "StoreExistsError",
    "BackendUnavailableError",
    "GpuError",
    "WriteTimeoutError",
    "OutOfMemoryError",
    "InternalError",
    "ObjectStoreError",
    "AccessDeniedError",
]


class TiledZarrError(Exception):
    """Base class of every error the library reports. ``status`` is the C
    API's ``tz_status`` code of the class."""

    status: int = 0


class NullArgumentError(TiledZarrError, ValueError):
    """TZ_ERR_NULL_ARGUMENT: a required argument was missing (C API only;
    the Python API does not raise it)."""

    status = 1


class InvalidArgumentError(TiledZarrError, ValueError):
    """TZ_ERR_INVALID_ARGUMENT: an argument out of range or of the wrong
    kind: a buffer that is not C-contiguous, a frame of the wrong dtype or
    shape, a call from the stream's own sink."""

    status = 2


class ConfigError(TiledZarrError, ValueError):
    """TZ_ERR_CONFIG: the configuration breaks a rule; the message names the
    field (``dimensions[1].tile: ...``)."""

    status = 3


class ArrayOverflowError(TiledZarrError):
    """TZ_ERR_OVERFLOW: a write past the end of a bounded array. Everything
    before the end was kept."""

    status = 4


class FinishedError(TiledZarrError):
    """TZ_ERR_FINISHED: the stream takes no more data: it was flushed or
    closed."""

    status = 5


class SinkError(TiledZarrError):
    """TZ_ERR_SINK: the shard sink failed; the stream is poisoned. When a
    Python sink raised, that exception is the ``__cause__``."""

    status = 6


class StoreIOError(TiledZarrError, OSError):
    """TZ_ERR_IO: a file system operation failed; the message names the
    path."""

    status = 7


class StoreExistsError(TiledZarrError):
    """TZ_ERR_EXISTS: the store path exists and ``overwrite`` is off, holds
    files the library did not write, or another stream holds it."""

    status = 8


class BackendUnavailableError(TiledZarrError):
    """TZ_ERR_BACKEND_UNAVAILABLE: the requested backend cannot run here
    (no driver, device, kernels or nvCOMP); the message says which."""

    status = 9


class GpuError(TiledZarrError):
    """TZ_ERR_GPU: a CUDA or nvCOMP call failed; the message names the
    stage. The stream is poisoned."""

    status = 10


class WriteTimeoutError(TiledZarrError, TimeoutError):
    """TZ_ERR_TIMEOUT: ``write_all`` or ``append`` did not finish within its
    timeout. ``bytes_written`` says how many bytes were taken: they stay in
    the stream."""

    status = 11
    bytes_written: int = 0


class OutOfMemoryError(TiledZarrError, MemoryError):
    """TZ_ERR_OUT_OF_MEMORY: the stream's memory could not be allocated;
    the message says how much was needed and how much is free."""

    status = 12


class InternalError(TiledZarrError):
    """TZ_ERR_INTERNAL: a bug in the library (a caught panic)."""

    status = 13


class ObjectStoreError(TiledZarrError, OSError):
    """TZ_ERR_OBJECT_STORE: an object store request failed after its
    retries (server unreachable, no such bucket, an error answer); the
    message names the object's URL and the server's answer."""

    status = 14


class AccessDeniedError(TiledZarrError, PermissionError):
    """TZ_ERR_ACCESS_DENIED: the object store refused the credentials, or
    none were found."""

    status = 15
