"""TiledZarr: stream raw frames (numpy arrays or any C-contiguous buffer)
into compressed, sharded Zarr v3 stores, on the GPU (nvCOMP) or on all CPU
cores.

>>> import numpy as np, tiledzarr
>>> config = {"dtype": "uint16",
...           "dimensions": [{"size": 0, "tile": 32},
...                          {"size": 512, "tile": 128, "tiles_per_shard": 4},
...                          {"size": 512, "tile": 128, "tiles_per_shard": 4}],
...           "store": {"path": "acquisition.zarr", "overwrite": True}}
>>> with tiledzarr.Stream(config) as stream:
...     for i in range(64):
...         stream.append(np.full((512, 512), i, np.uint16))

See ``help(tiledzarr.Stream)`` for the configuration.
"""

from __future__ import annotations

import atexit
import json
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from . import _native
from ._errors import (
    ArrayOverflowError,
    BackendUnavailableError,
    ConfigError,
    FinishedError,
    GpuError,
    AccessDeniedError,
    InternalError,
    InvalidArgumentError,
    ObjectStoreError,
    NullArgumentError,
    OutOfMemoryError,
    SinkError,
    StoreExistsError,
    StoreIOError,
    TiledZarrError,
    WriteTimeoutError,
)
from ._config import ConfigLike, _config_json, _json_value
from ._native import Shard
from ._recover import Recovery, recover
from ._nvcomp import nvcomp_search_dirs

__version__: str = _native.__version__

__all__ = [
    "Stream",
    "AcquisitionStream",
    "Shard",
    "Metrics",
    "MemoryPlan",
    "estimate_memory",
    "release_cached_memory",
    "recover",
    "Recovery",
    "nvcomp_search_dirs",
    "__version__",
    # The exceptions again, as _errors lists them: mypy and pyright read
    # only a literal list as the names a package exports.
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

for _dir in nvcomp_search_dirs():
    _native.add_nvcomp_search_dir(_dir)


@dataclass(frozen=True)
class Metrics:
    """A stream's counters at one moment (the C API's ``tz_metrics``)."""

    #: Bytes taken by ``write``/``write_all``/``append``.
    bytes_in: int
    #: Bytes emitted in shards, indexes included.
    bytes_out: int
    shards_emitted: int
    epochs_completed: int
    #: Cumulative seconds per stage, summed over the threads that ran it.
    seconds_copy: float
    #: Host-to-device copy (GPU backend; 0 on the CPU).
    seconds_h2d: float
    seconds_scatter: float
    seconds_compress: float
    seconds_aggregate: float
    #: Device-to-host copy (GPU backend; 0 on the CPU).
    seconds_d2h: float
    seconds_sink: float
    #: The backend running the stream: ``"cpu"`` or ``"gpu"``.
    backend: str
    #: Why that backend was chosen.
    backend_reason: str
    #: Staging memory the stream holds: it grows while a writer that cannot
    #: wait (``write``) outruns the pipeline, and for one that waits
    #: (``append``, ``write_all``) to two buffers, or three once the writer
    #: and the pipeline have each waited for the other.
    staging_bytes: int = 0
    #: The most staging memory the stream held at once.
    staging_peak_bytes: int = 0
    #: Calls that found staging memory full and returned with less than
    #: they were given: ``write`` taking fewer bytes than asked (0
    #: included), ``append``, ``write_all`` and ``skip`` raising
    #: WriteTimeoutError (their waits within the timeout do not count).
    #: Each is a moment the writer outran the pipeline.
    busy_writes: int = 0
    #: An object store's uploads (all 0 for a folder or a sink): bytes the
    #: server accepted (shards, their parts, ``zarr.json``), objects
    #: complete (a multipart object counts once), uploads under way.
    bytes_uploaded: int = 0
    objects_uploaded: int = 0
    uploads_in_flight: int = 0

    @property
    def compression_ratio(self) -> float:
        """Input bytes per output byte (0 before the first shard)."""
        return self.bytes_in / self.bytes_out if self.bytes_out else 0.0


@dataclass(frozen=True)
class MemoryPlan:
    """The memory a stream would take (the C API's ``tz_memory_plan``)."""

    #: GPU memory (0 on the CPU backend).
    device_bytes: int
    #: Page-locked host memory, staging included (GPU backend).
    pinned_bytes: int
    #: Ordinary host memory, staging included (CPU backend).
    host_bytes: int
    #: The backend the configuration would run on: ``"cpu"`` or ``"gpu"``.
    backend: str


def estimate_memory(config: Optional[ConfigLike] = None, /, **kwargs: Any) -> MemoryPlan:
    """The memory a stream of this configuration would take and the backend
    it would run on, computed without creating it (nothing is allocated).
    Raises ConfigError for a bad configuration."""
    return MemoryPlan(**_native.estimate_memory(_config_json(config, kwargs)))


def release_cached_memory() -> int:
    """Frees the memory the process keeps for its next stream (a finished
    GPU stream's page-locked staging and output buffers, a CPU stream's
    buffers of compressed epochs, kept 30 s so that a stream created
    meanwhile does not allocate and fault them in again); returns the
    bytes freed."""
    return int(_native.release_cached_memory())


#: Streams still open, closed at interpreter exit while their threads can
#: still call into Python.
_open_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()


@atexit.register
def _close_open_streams() -> None:
    for stream in list(_open_streams):
        try:
            stream.close()
        except Exception:
            pass


class Stream:
    """A stream of raw row-major frames into a sharded Zarr v3 array, or
    into several arrays (positions, a plate's fields, cameras) at once.

    ``Stream(config, *, sink=None)`` or ``Stream(sink=None, **config)``:
    the configuration is a dict, a JSON string, or keyword arguments, in
    the library's JSON schema:

    ``dtype`` (required)
        ``"uint8"`` ``"uint16"`` ``"uint32"`` ``"uint64"`` ``"int8"``
        ``"int16"`` ``"int32"`` ``"int64"`` ``"float16"`` ``"float32"``
        ``"float64"`` (a numpy dtype works too).
    ``dimensions`` (required)
        1 to 32 dicts, slowest first: ``size`` (0 on dimension 0: unbounded,
        the append axis), ``tile`` (the chunk extent), ``tiles_per_shard``
        (default 1; 0 = all), ``name`` (default ``d<i>``). A frame is one
        plane along dimension 0: the sizes of the other dimensions.
    ``codec``
        ``{"name": "zstd", "level": 1}`` (default; levels -7..22),
        ``{"name": "blosc", "level": 1, "shuffle": "byte", "cname": "zstd"}``
        (shuffle byte, bit or none; cname zstd, lz4 or zlib),
        ``{"name": "gzip", "level": 1}`` or ``{"name": "none"}``.
    ``backend``
        ``"auto"`` (default: the GPU when usable, else the CPU), ``"cpu"``,
        ``"gpu"`` (or an error naming the missing piece).
    ``store``
        ``{"path": ..., "overwrite": False, "fsync": True}``: the library
        writes the Zarr store; ``"page_cache": True`` or ``False`` sends
        shard files through the page cache or around it (by default around
        it with fsync on a local disk, through it without). Without it a
        ``sink`` is required.
    ``index_location``
        ``"end"`` (default) or ``"start"``.
    ``threads``
        CPU worker threads (0 = one per core).
    ``staging_bytes``
        Host staging memory (default 1 GiB on the CPU, 1 GiB of page-locked
        memory on the GPU in batches of 512 MiB); it holds at least two
        epochs (``tile[0]`` planes).
    ``device``
        The GPU ordinal.
    ``device_bytes``
        A cap on the GPU's device memory: batches are made small enough.
    ``max_latency_ms``
        The latency bound (default 1000): a staging buffer goes to the
        compressor when full or when its oldest whole epoch has waited this
        long, so a slow stream's shards reach the sink in bounded time.
    ``ome``, ``multiscale``, ``storage_order``, ``attributes``
        An OME-Zarr image (OME-NGFF 0.5): ``"ome": True`` (or ``{"name":
        ...}``) makes the store a group whose ``zarr.json`` holds the OME
        metadata, level k's array at ``<store>/<k>``; ``"multiscale":
        {"levels": 3, "method": "mean"}`` adds pyramid levels (method mean,
        min, max, median or decimate; levels 0 = until one tile);
        ``"storage_order"`` lists the dimension names in the order the array
        is stored; ``"attributes"`` is a dict written beside ``ome`` (see
        ``set_attributes``). Each dimension may give ``kind`` (time,
        channel, space, other), ``unit`` (``"micrometer"``, ``"second"``,
        ...), ``scale``, ``translation`` and ``downsample``.

    ``arrays``, ``collection``, ``plate``
        Several arrays in one stream: ``arrays`` lists each array's
        ``key`` (where it lies in the store, such as ``"A/1/0"``) with its
        own ``dtype``, ``dimensions``, ``codec``, ``storage_order``,
        ``multiscale``, ``ome`` and ``attributes``; the other keys above
        are shared. ``"collection": "bioformats2raw"`` makes the arrays the
        images of an OME collection, ``"plate": {"rows": [...], "columns":
        [...], "wells": [{"row", "column", "fields": [keys]}]}`` the fields
        of a plate's wells. Frames go to an array by its key:
        ``append(frame, key="A/1/0")``; frames of different arrays may
        interleave in any order. See the guide's chapter "Several images
        in one stream".

    Unknown keys and wrong types raise ConfigError naming the field.

    ``sink``, optional, is a callable that receives every complete shard as
    a :class:`Shard` (``coord``, ``data``, ``index``, ``index_at_start``,
    ``level``, the pyramid level: 0 without a pyramid, and ``array`` and
    ``key``, the array's index and key in ``arrays``), one call at a
    time, on a library thread (it takes the GIL for the call). ``data`` and ``index`` are read-only memoryviews of the library's
    memory, valid during the call only: they are released when it returns
    (copy with ``bytes(shard.data)`` to keep them). An exception raised by
    the sink poisons the stream: the next call raises SinkError with that
    exception as its ``__cause__``. The sink may read ``metrics`` but may not
    write, append, set attributes, flush or close its own stream
    (InvalidArgumentError).

    As a context manager the stream flushes when the ``with`` block ends
    normally and is closed without a flush when it ends with an exception:
    shards already emitted stay, the rest is discarded (a store keeps the
    extent of its complete shard rows).

    Calls that can wait or copy a lot (``write_all``, ``append``, ``flush``,
    ``close``, writes of 1 MiB or more) release the GIL, so other Python
    threads (a camera, a display) run meanwhile. Call the writing methods
    from one thread at a time; ``metrics`` may be read from any thread.
    """

    def __init__(
        self,
        config: Optional[ConfigLike] = None,
        /,
        *,
        sink: Optional[Callable[[Shard], Any]] = None,
        **kwargs: Any,
    ) -> None:
        if sink is not None and not callable(sink):
            raise InvalidArgumentError(
                f"sink must be a callable taking a Shard, not {type(sink).__name__}"
            )
        self._native = _native.Stream(_config_json(config, kwargs), sink)
        _open_streams.add(self)

    @classmethod
    def from_acquisition(cls, acquisition: Any, /, **kwargs: Any) -> "AcquisitionStream":
        """A stream for an acquisition described for ome-writers: its
        ``AcquisitionSettings``, or a useq ``MDASequence`` with
        ``frame_shape=(height, width)``, ``dtype=`` and ``path=`` (and
        optionally ``pixel_size_um``, ``units``, ``chunk_shapes``,
        ``shard_shapes``, ``storage_order``, as ome-writers'
        ``useq_to_acquisition_settings`` takes them). Returns an
        :class:`AcquisitionStream`: ``append(frame, frame_metadata=...)``
        takes 2-D frames in acquisition order, ``close()`` completes the
        store, which has the layout ome-writers writes (one image, a
        collection of positions, or a plate) with its axes, units, scales,
        channel names, wells and chunking.

        TiledZarr's own options are keywords: ``codec`` (default: the
        settings' compression), ``multiscale``, ``store`` (a path or a
        store dict, such as an S3 URL; default: the settings' output
        path), ``overwrite``, ``frame_metadata_bytes`` (per frame of an
        array; 0 keeps no per-frame metadata), ``backend``, ``threads``,
        ``staging_bytes``, ``device``, ``device_bytes``, ``max_latency_ms``,
        ``index_location``. What cannot be written as ome-writers would
        raises ConfigError naming it. ome-writers and useq-schema are not
        needed by the package; ome-writers converts an ``MDASequence``."""
        from .acquisition import from_acquisition

        return from_acquisition(acquisition, **kwargs)

    @staticmethod
    def acquisition_config(acquisition: Any, /, **kwargs: Any) -> dict[str, Any]:
        """The configuration :meth:`from_acquisition` would create its
        stream with, for the same arguments, without creating anything or
        touching the store: to look at, to keep, or to size with
        :func:`estimate_memory` before an acquisition starts. Raises what
        ``from_acquisition`` raises for the same arguments before it
        creates the stream."""
        from .acquisition import acquisition_layout

        return acquisition_layout(acquisition, **kwargs).config

    def write(self, data: Any, *, key: Optional[str] = None) -> int:
        """Copies as much of ``data`` (any C-contiguous buffer: a numpy
        array, bytes, a memoryview) as free staging memory takes, without
        waiting, and returns the bytes taken: 0 means busy, call again. The
        stream is a byte stream: a write may end mid-frame and the next one
        continues it. No dtype or shape check (see ``append``). ``key``
        names the array written to (None: the first; an unknown key raises
        InvalidArgumentError listing the keys)."""
        return self._native.write(data, key)

    def write_all(
        self, data: Any, timeout: Optional[float] = None, *, key: Optional[str] = None
    ) -> int:
        """Writes all of ``data``, waiting for staging memory as needed, and
        returns the bytes taken: ``len`` of the data, or fewer when the end
        of a bounded array came first (the next write then raises
        ArrayOverflowError). ``timeout`` in seconds (None: no limit); when
        it passes, WriteTimeoutError says how many bytes were taken. The GIL
        is released meanwhile. ``key`` names the array, as for ``write``."""
        return self._native.write_all(data, timeout, key)

    def append(
        self, frame: Any, timeout: Optional[float] = None, *, key: Optional[str] = None
    ) -> None:
        """Writes one frame, or a stack of frames (shape ``(n, *frame
        shape)``), to the array ``key`` names (None: the first) after
        checking its dtype and shape against that array's; waits until it
        is taken (at most ``timeout`` seconds: WriteTimeoutError). A frame
        that would go past the end of a bounded array is refused whole
        (ArrayOverflowError). An unknown key raises InvalidArgumentError
        listing the keys. The GIL is released while it waits and copies."""
        self._native.append(frame, timeout, key)

    def skip(
        self, frames: int = 1, timeout: Optional[float] = None, *, key: Optional[str] = None
    ) -> None:
        """Advances the array ``key`` names (None: the first) by ``frames``
        frames without data, for frames the camera dropped: they read as
        the fill value (0). Frames that fill whole chunks cost no copy and
        no compression. Waits until taken (at most ``timeout`` seconds:
        WriteTimeoutError); past the end of a bounded array it raises
        ArrayOverflowError and skips nothing."""
        self._native.skip(frames, timeout, key)

    def frame_metadata(
        self, frame: int, metadata: Mapping[str, Any], *, key: Optional[str] = None
    ) -> None:
        """Records ``metadata`` (a JSON-able mapping: a time stamp, a stage
        position, an exposure...) as frame ``frame``'s of the array ``key``
        names (None: the first): the index along the first dimension, from
        0, of a frame already appended or skipped. The array's configuration
        asks for it (``"frame_metadata": {"max_bytes": N}``); it lands in
        the image's ``frame_metadata`` array, read back with
        ``json.loads(bytes(a[i]).rstrip(b"\\0"))``. InvalidArgumentError for
        a frame not written yet, metadata past ``max_bytes``, or a frame
        whose shard row was handed on with the next row's frames."""
        self._native.frame_metadata(frame, json.dumps(metadata, default=_json_value), key)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Replaces the user's attributes (the configuration's
        ``"attributes"``) with ``attributes``, a dict serialised with
        ``json`` (numpy scalars and paths are converted): the store writes
        them into the image group's ``zarr.json`` beside ``ome`` (the
        array's ``zarr.json`` without OME) at its next metadata update and
        at the flush. Callable until the flush; FinishedError after it.
        ConfigError when they are not a JSON object or hold the key
        ``"ome"``; InvalidArgumentError when they cannot be serialised, and
        on a stream of several arrays (each array's attributes come with its
        configuration). The attributes are unchanged on error."""
        try:
            text = json.dumps(attributes, default=_json_value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"attributes cannot be written as JSON: {e}") from None
        self._native.set_attributes(text)

    def flush(self) -> None:
        """Completes the stream: pads the last partial epoch with zeros,
        emits every remaining shard and writes the final metadata; blocks
        until done (the GIL released). Terminal: later writes raise
        FinishedError; a second flush repeats the first one's outcome."""
        self._native.flush()

    def close(self) -> None:
        """Frees the stream's memory and threads. Without a flush, delivery
        stops at once: shards already emitted stay, the rest is discarded.
        Idempotent; ``metrics`` stays readable."""
        self._native.close()
        _open_streams.discard(self)

    @property
    def metrics(self) -> Metrics:
        """The counters now; never waits (readable while another thread
        flushes, and after close)."""
        return Metrics(**self._native.metrics())

    @property
    def config(self) -> dict[str, Any]:
        """The configuration, defaults filled in."""
        return json.loads(self._native.config_json)

    @property
    def array_keys(self) -> list[str]:
        """The arrays' keys, in the order of the configuration's ``arrays``
        (``[""]`` for a configuration without ``arrays``: one array at the
        store's root)."""
        return self._native.array_keys

    @property
    def dtype(self) -> str:
        """The element type, as numpy names it (of the first array; see
        ``dtype_of``)."""
        return self._native.dtype(None)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """The shape of one frame: the sizes of dimensions 1 and up (of the
        first array; see ``frame_shape_of``)."""
        return tuple(self._native.frame_shape(None))

    def dtype_of(self, key: Optional[str] = None) -> str:
        """The element type of the array ``key`` names (None: the first)."""
        return self._native.dtype(key)

    def frame_shape_of(self, key: Optional[str] = None) -> tuple[int, ...]:
        """The frame shape of the array ``key`` names (None: the first)."""
        return tuple(self._native.frame_shape(key))

    @property
    def closed(self) -> bool:
        return self._native.closed

    @property
    def flushed(self) -> bool:
        return self._native.flushed

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None and not self.closed:
                self.flush()
        finally:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "flushed" if self.flushed else "open"
        keys = self.array_keys
        what = (
            f"{self.dtype} frame {self.frame_shape}"
            if keys == [""]
            else f"{len(keys)} arrays"
        )
        return f"<tiledzarr.Stream {what} backend {self._native.metrics()['backend']} {state}>"


# After Stream: the module builds Streams.
from .acquisition import AcquisitionStream  # noqa: E402
