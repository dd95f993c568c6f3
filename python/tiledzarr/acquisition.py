"""Acquisitions described for ome-writers, written by TiledZarr.

``Stream.from_acquisition(settings)`` takes ome-writers' ``AcquisitionSettings``
(or a useq ``MDASequence``, with the frame's shape and dtype) and returns an
:class:`AcquisitionStream` whose ``append(frame)`` takes 2-D frames in the
order the acquisition produces them, as ome-writers' own stream does. It
writes the layout ome-writers writes: one OME-Zarr image at the root, a
``bioformats2raw`` collection of positions, or a plate. Underneath is one
stream of several arrays (see "Several images in one stream" in the guide).

ome-writers and useq-schema stay optional: a description is read through its
attributes, and ome-writers is imported only to convert an ``MDASequence``.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Mapping, Optional, Sequence

from ._acquisition_layout import AcquisitionLayout, layout_of, refuse
from ._errors import ConfigError, FinishedError, InvalidArgumentError

__all__ = ["AcquisitionStream", "from_acquisition"]


class _AcquisitionOrder:
    """Walks the acquisition's dimensions before the frame's two as nested
    loops, the last fastest (ome-writers' FrameRouter): each step is the
    position's index and the array's index (the position's axis left out)."""

    def __init__(self, sizes: Sequence[Optional[int]], position_axis: Optional[int]) -> None:
        self._sizes = list(sizes)
        self._position_axis = position_axis
        self._index = [0] * len(sizes)
        self._done = False
        total: Optional[int] = 1
        for s in self._sizes:
            total = None if s is None or total is None else total * s
        #: Planes in the whole acquisition (None: unbounded).
        self.total: Optional[int] = total
        self.taken = 0

    def remaining(self) -> Optional[int]:
        return None if self.total is None else self.total - self.taken

    def peek(self) -> tuple[int, tuple[int, ...]]:
        """The next step, without taking it."""
        idx = self._index
        p = self._position_axis
        return (0 if p is None else idx[p], tuple(v for i, v in enumerate(idx) if i != p))

    def __next__(self) -> tuple[int, tuple[int, ...]]:
        if self._done:
            raise StopIteration
        step = self.peek()
        idx = self._index
        self.taken += 1
        for i in range(len(idx) - 1, -1, -1):
            idx[i] += 1
            size = self._sizes[i]
            if size is None or idx[i] < size:
                return step
            idx[i] = 0
        self._done = True
        return step


class AcquisitionStream:
    """A stream of 2-D frames in acquisition order into the layout
    ome-writers writes (see :func:`from_acquisition`).

    The calls of ome-writers' stream: ``append(frame, frame_metadata=...)``,
    ``skip(frames=n)``, ``close()`` (which completes the store, as
    ome-writers' does) and use as a context manager; ``frameReady`` and
    ``sequenceFinished`` make it a pymmcore-plus output handler
    (``core.run_mda(sequence, output=stream)``). ``stream`` is the
    :class:`tiledzarr.Stream` underneath (metrics, memory, keys).
    """

    def __init__(self, layout: AcquisitionLayout, stream: Any) -> None:
        self._layout = layout
        self._stream = stream
        self._order = _AcquisitionOrder(layout.index_sizes, layout.position_axis)
        self._keys = [image.key or None for image in layout.images]
        self._planes = [0] * len(layout.images)
        self._pending: list[list[dict[str, Any]]] = [[] for _ in layout.images]
        self._zero_plane: Any = None
        self._closed = False
        self._close_lock = threading.Lock()

    # ---- what ome-writers' stream offers

    def append(
        self,
        frame: Any,
        *,
        frame_metadata: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        """Writes the next 2-D frame of the acquisition (shape ``(height,
        width)``, the acquisition's dtype) to the position it belongs to.
        ``frame_metadata``, a JSON-able mapping, is kept with the frame's
        storage index in the image's per-frame metadata: a frame of the
        array (one index along its first dimension) keeps ``{"planes":
        [...]}``, one entry per 2-D plane given metadata. IndexError past
        the end of a bounded acquisition, as ome-writers raises."""
        self._check_open()
        np = _numpy()
        plane = np.asarray(frame)
        layout = self._layout
        if plane.shape != layout.frame_shape:
            raise InvalidArgumentError(
                f"frame shape {plane.shape} is not the acquisition's frame shape "
                f"{layout.frame_shape}"
            )
        if plane.dtype != np.dtype(layout.dtype):
            raise InvalidArgumentError(
                f"frame dtype is {plane.dtype}, the acquisition's is {layout.dtype}"
            )
        self._next_planes(0)  # IndexError past the end, before anything else
        position, index = self._order.peek()
        entry = None
        if frame_metadata is not None:
            if not layout.frame_metadata_bytes:
                raise InvalidArgumentError(
                    "frame_metadata given, but the stream keeps none (frame_metadata_bytes=0)"
                )
            storage_index = [index[i] for i in layout.storage_permutation]
            entry = {**frame_metadata, "storage_index": storage_index}
            # The frame's metadata only grows with its later planes: what
            # cannot fit now is refused before the frame is written.
            self._metadata_text(position, self._pending[position] + [entry])
        next(self._order)
        self._stream.write_all(np.ascontiguousarray(plane), timeout, key=self._keys[position])
        if entry is not None:
            self._pending[position].append(entry)
        self._planes[position] += 1
        self._frame_done(position)

    def skip(self, *, frames: int = 1) -> None:
        """Advances the acquisition by ``frames`` 2-D frames without data
        (they read as 0), as ome-writers' ``skip``. Whole frames of an array
        are skipped without a copy; the rest are written as zeros."""
        self._check_open()
        if frames <= 0:
            raise ValueError(f"frames must be positive, got {frames}")
        per_position: dict[int, int] = {}
        for position, _ in self._next_planes(frames):
            per_position[position] = per_position.get(position, 0) + 1
        for position, n in per_position.items():
            self._skip_planes(position, n)

    def close(self) -> None:
        """Completes the store (as ome-writers' ``close``): an array's last
        frame, when only some of its planes came, is completed with zeros;
        then the stream is flushed and closed, and the images' channel
        names are written. Idempotent."""
        # pymmcore-plus may end the sequence on its relay thread while the
        # caller closes too: the second close waits for the first.
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            try:
                for position in range(len(self._planes)):
                    missing = -self._planes[position] % self._layout.planes_per_frame
                    self._write_zero_planes(position, missing)
                self._stream.flush()
            finally:
                self._stream.close()

    def flush(self) -> None:
        """The same as :meth:`close`: the store is complete after it."""
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "AcquisitionStream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # As ome-writers' stream: the frames taken so far are kept whether or
        # not the acquisition ended in an exception.
        self.close()

    # ---- pymmcore-plus output handler

    def frameReady(self, img: Any, event: Any, meta: Optional[Mapping[str, Any]] = None) -> None:
        """pymmcore-plus's frame signal: appends ``img`` with the metadata
        pymmcore-plus gives ome-writers (time, exposure, stage position)."""
        self.append(img, frame_metadata=_pymmcore_frame_metadata(meta or {}))

    def sequenceFinished(self, sequence: Any = None) -> None:
        """pymmcore-plus's end of the sequence: completes the store."""
        self.close()

    # ---- TiledZarr's own

    @property
    def stream(self) -> Any:
        """The :class:`tiledzarr.Stream` underneath."""
        return self._stream

    @property
    def array_keys(self) -> list[str]:
        """Each position's array key, in the acquisition's order of
        positions (``[""]`` for one image at the root)."""
        return [image.key for image in self._layout.images]

    @property
    def metrics(self) -> Any:
        return self._stream.metrics

    @property
    def config(self) -> dict[str, Any]:
        """The configuration the stream was created with."""
        return self._stream.config

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<tiledzarr.AcquisitionStream {len(self._layout.images)} image(s) of "
            f"{self._layout.dtype} {self._layout.frame_shape} frames, {state}>"
        )

    # ---- internals

    def _check_open(self) -> None:
        if self._closed:
            raise FinishedError("the acquisition stream is closed")

    def _next_planes(self, n: int) -> list[tuple[int, tuple[int, ...]]]:
        """The next `n` steps (0: only the check that one more is there)."""
        remaining = self._order.remaining()
        if remaining is not None and max(n, 1) > remaining:
            raise IndexError(
                f"the acquisition has {self._order.total} frames and {self._order.taken} "
                f"were written: {n} more would go past its end (a first dimension of "
                f"count None is unbounded)"
            )
        return [next(self._order) for _ in range(n)]

    def _frame_done(self, position: int) -> None:
        """Records the metadata of the array's frame that just completed."""
        layout = self._layout
        pending = self._pending[position]
        if not pending or self._planes[position] % layout.planes_per_frame:
            return
        frame = (self._planes[position] // layout.planes_per_frame - 1) * layout.frames_per_plane
        self._pending[position] = []
        self._metadata_text(position, pending)
        self._stream.frame_metadata(frame, {"planes": pending}, key=self._keys[position])

    def _metadata_text(self, position: int, planes: list[dict[str, Any]]) -> str:
        """The JSON of a frame's metadata, refused when it is not JSON or
        does not fit in frame_metadata_bytes."""
        text = _json_text({"planes": planes})
        size = len(text.encode())
        if size > self._layout.frame_metadata_bytes:
            key = self._layout.images[position].key
            raise InvalidArgumentError(
                f"the metadata of a frame of {'array ' + repr(key) if key else 'the image'} "
                f"would take {size} bytes, more than frame_metadata_bytes="
                f"{self._layout.frame_metadata_bytes} (raise it in from_acquisition)"
            )
        return text

    def _skip_planes(self, position: int, n: int) -> None:
        layout = self._layout
        while n:
            offset = self._planes[position] % layout.planes_per_frame
            if offset == 0 and n >= layout.planes_per_frame:
                whole = n // layout.planes_per_frame
                self._stream.skip(whole * layout.frames_per_plane, key=self._keys[position])
                self._planes[position] += whole * layout.planes_per_frame
                n -= whole * layout.planes_per_frame
            else:
                take = min(n, layout.planes_per_frame - offset)
                self._write_zero_planes(position, take)
                n -= take

    def _write_zero_planes(self, position: int, n: int) -> None:
        if not n:
            return
        if self._zero_plane is None:
            np = _numpy()
            self._zero_plane = np.zeros(self._layout.frame_shape, self._layout.dtype)
        for _ in range(n):
            self._stream.write_all(self._zero_plane, key=self._keys[position])
            self._planes[position] += 1
        self._frame_done(position)


def _json_text(value: Any) -> str:
    """`value` as the compact JSON the library keeps (numpy scalars and
    paths converted as Stream.frame_metadata converts them)."""
    from ._config import _json_value

    try:
        return json.dumps(value, separators=(",", ":"), default=_json_value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"frame_metadata cannot be written as JSON: {e}") from None


def _numpy() -> Any:
    import numpy

    return numpy


def _pymmcore_frame_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What pymmcore-plus hands ome-writers as a frame's metadata."""
    out: dict[str, Any] = {}
    if "runner_time_ms" in meta:
        out["delta_t"] = meta["runner_time_ms"] / 1000
    if "exposure_ms" in meta:
        out["exposure_time"] = meta["exposure_ms"] / 1000
    for axis, value in (meta.get("position") or {}).items():
        if axis in ("x", "y", "z"):
            out[f"position_{axis}"] = value
    return out


def _is_sequence(obj: Any) -> bool:
    return hasattr(obj, "iter_events") and hasattr(obj, "axis_order")


def _is_settings(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("dimensions", "format", "storage_index_dimensions"))


def _settings_of_sequence(
    sequence: Any,
    *,
    frame_shape: Optional[Sequence[int]],
    dtype: Optional[str],
    path: Optional[str],
    storage_order: Any,
    useq_options: Mapping[str, Any],
) -> Any:
    """ome-writers' settings for a useq sequence, made by ome-writers'
    own conversion (as pymmcore-plus makes them), so the layout is the
    one pymmcore-plus would write."""
    if frame_shape is None or dtype is None:
        raise ConfigError(
            "from_acquisition: a useq MDASequence needs frame_shape=(height, width) and dtype="
        )
    try:
        import ome_writers
    except ImportError:
        raise ConfigError(
            "from_acquisition: a useq MDASequence is converted by ome-writers' "
            "useq_to_acquisition_settings: pip install ome-writers"
        ) from None
    height, width = (int(v) for v in frame_shape)
    options = {k: v for k, v in useq_options.items() if v is not None}
    try:
        described = ome_writers.useq_to_acquisition_settings(
            sequence, image_width=width, image_height=height, **options
        )
    except NotImplementedError as e:
        raise refuse("this MDASequence", str(e)) from None
    settings: dict[str, Any] = {
        "root_path": os.fspath(path) if path is not None else "",
        "format": "ome-zarr",
        "dtype": _numpy().dtype(dtype).name,
        **described,
    }
    if storage_order is not None:
        settings["storage_order"] = storage_order
    # Keywords as ome-writers documents them, which its model validates: the
    # format by name and the conversion's list of dimensions, where its
    # annotations name a format object and a tuple.
    return ome_writers.AcquisitionSettings(**settings)


def acquisition_layout(
    acquisition: Any,
    *,
    path: Optional[str] = None,
    frame_shape: Optional[Sequence[int]] = None,
    dtype: Any = None,
    pixel_size_um: Optional[float] = None,
    units: Optional[Mapping[str, Any]] = None,
    chunk_shapes: Optional[Mapping[str, int]] = None,
    shard_shapes: Optional[Mapping[str, int]] = None,
    storage_order: Any = None,
    overwrite: Optional[bool] = None,
    codec: Optional[Mapping[str, Any]] = None,
    multiscale: Optional[Mapping[str, Any]] = None,
    store: Any = None,
    frame_metadata_bytes: Optional[int] = None,
    **options: Any,
) -> AcquisitionLayout:
    """The layout :meth:`tiledzarr.Stream.from_acquisition` writes, its
    configuration among it; nothing is created."""
    if _is_sequence(acquisition):
        if path is None and store is None:
            raise ConfigError("from_acquisition: give path= (the store) with an MDASequence")
        settings = _settings_of_sequence(
            acquisition,
            frame_shape=frame_shape,
            dtype=dtype,
            path=path if store is None else None,
            storage_order=storage_order,
            useq_options={"pixel_size_um": pixel_size_um, "units": units,
                          "chunk_shapes": chunk_shapes, "shard_shapes": shard_shapes},
        )
    elif _is_settings(acquisition):
        given = {"pixel_size_um": pixel_size_um, "units": units, "chunk_shapes": chunk_shapes,
                 "shard_shapes": shard_shapes, "storage_order": storage_order}
        misplaced = sorted(k for k, v in given.items() if v is not None)
        if misplaced:
            raise ConfigError(
                f"from_acquisition: {', '.join(misplaced)} describe(s) a useq MDASequence; "
                f"with AcquisitionSettings set them on its dimensions"
            )
        settings = acquisition
    else:
        raise InvalidArgumentError(
            f"from_acquisition takes ome-writers' AcquisitionSettings or a useq "
            f"MDASequence, not {type(acquisition).__name__}"
        )
    if dtype is not None:
        dtype = _numpy().dtype(dtype).name
    layout = layout_of(
        settings,
        path=os.fspath(path) if path is not None else None,
        dtype=dtype,
        store=store,
        overwrite=overwrite,
        codec=codec,
        multiscale=multiscale,
        frame_metadata_bytes=frame_metadata_bytes,
        options=options,
    )
    if frame_shape is not None and tuple(int(v) for v in frame_shape) != layout.frame_shape:
        raise ConfigError(
            f"from_acquisition: frame_shape={tuple(frame_shape)} differs from the "
            f"acquisition's {layout.frame_shape}"
        )
    return layout


def from_acquisition(acquisition: Any, **kwargs: Any) -> AcquisitionStream:
    """See :meth:`tiledzarr.Stream.from_acquisition`."""
    from . import Stream

    layout = acquisition_layout(acquisition, **kwargs)
    return AcquisitionStream(layout, Stream(layout.config))
