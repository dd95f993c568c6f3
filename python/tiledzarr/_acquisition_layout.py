"""What an acquisition description (ome-writers' ``AcquisitionSettings``, or a
useq ``MDASequence`` converted by ome-writers) makes in TiledZarr's terms:
the configuration of a stream of several arrays laid out as ome-writers lays
them out (one image at the root, a ``bioformats2raw`` collection of
positions, or a plate), and what the stream needs to route 2-D frames in
acquisition order to their arrays.

Neither package is imported here: the description is read through the
attributes ome-writers' models have (duck typing), so any object that has
them works and an installation without ome-writers never loads it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ._errors import ConfigError

#: ome-writers' compression names and the codec each stands for, with the
#: levels yaozarrs writes them with. Blosc's shuffle is tensorstore's
#: default (see codec_of).
COMPRESSION_CODECS: dict[Optional[str], dict[str, Any]] = {
    None: {"name": "none"},
    "none": {"name": "none"},
    "blosc-zstd": {"name": "blosc", "cname": "zstd", "level": 3},
    "blosc-lz4": {"name": "blosc", "cname": "lz4", "level": 5},
    "zstd": {"name": "zstd", "level": 3},
}

#: ome-writers' dimension types and TiledZarr's axis kinds.
AXIS_KINDS = {"time": "time", "channel": "channel", "space": "space"}

#: The keys of a configuration that every array of a stream shares, which
#: from_acquisition takes as keywords.
SHARED_OPTIONS = (
    "backend",
    "index_location",
    "threads",
    "staging_bytes",
    "device",
    "device_bytes",
    "max_latency_ms",
)

#: Per-frame metadata bytes reserved per 2-D plane when the caller gives no
#: ``frame_metadata_bytes``: pymmcore-plus's entries (time, exposure, stage
#: position, storage index) take about 150.
METADATA_BYTES_PER_PLANE = 512
#: The library's limit on one frame's metadata.
METADATA_BYTES_LIMIT = 65536

_KEY_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")


def refuse(feature: str, why: str) -> ConfigError:
    """The error for an ome-writers feature this stream cannot write as
    ome-writers would: it names the feature, so nothing is lost silently."""
    return ConfigError(f"from_acquisition: {feature}: {why}")


@dataclass
class Image:
    """One array of the stream: a position's image."""

    #: The array's key in the stream ("" for the single image at the root).
    key: str
    #: The image group's path below the store's root ("" for the root).
    group: str


@dataclass
class AcquisitionLayout:
    """The stream's configuration and how frames are routed to its arrays."""

    config: dict[str, Any]
    images: list[Image]
    #: The sizes of the dimensions before the frame's two, in acquisition
    #: order, the position dimension included (None: unbounded).
    index_sizes: list[Optional[int]]
    #: Where the position dimension is among them (None: no positions).
    position_axis: Optional[int]
    #: For each array index (acquisition order, position dropped), where
    #: each storage-order index comes from: ome-writers' storage index.
    storage_permutation: list[int]
    frame_shape: tuple[int, int]
    dtype: str
    #: 2-D planes per frame of the array (one index along its dimension 0).
    planes_per_frame: int
    #: Frames of the array per 2-D plane: its height when the image is a
    #: single plane (dimension 0 is then y), else 1.
    frames_per_plane: int
    #: Bytes of per-frame metadata per frame (0: none kept).
    frame_metadata_bytes: int


def _store(store: Any, path: Optional[str], overwrite: bool) -> dict[str, Any]:
    if store is None:
        if not path:
            raise ConfigError("from_acquisition: no store: give path= (or store={...})")
        return {"path": os.fspath(path), "overwrite": overwrite}
    if isinstance(store, (str, os.PathLike)):
        return {"path": os.fspath(store), "overwrite": overwrite}
    if not isinstance(store, Mapping):
        raise ConfigError(
            f"from_acquisition: store must be a path or a dict, not {type(store).__name__}"
        )
    s = dict(store)
    s.setdefault("overwrite", overwrite)
    return s


def codec_of(compression: Optional[str], dtype: str) -> dict[str, Any]:
    """The codec of ome-writers' ``compression``. Blosc shuffles bits of
    1-byte elements and bytes of wider ones, as ome-writers' default
    backend (tensorstore) leaves it to do."""
    if compression not in COMPRESSION_CODECS:
        raise refuse(f"compression {compression!r}", "not an OME-Zarr compression")
    codec = dict(COMPRESSION_CODECS[compression])
    if codec["name"] == "blosc":
        import numpy as np

        codec["shuffle"] = "bit" if np.dtype(dtype).itemsize == 1 else "byte"
    return codec


def _chunking(dim: Any, is_frame_dim: bool) -> tuple[int, int]:
    """ome-writers' chunk (default: the whole frame dimension, 1 elsewhere)
    and chunks per shard (default 1: ome-writers then writes no shards, a
    shard of one chunk here)."""
    tile = dim.chunk_size or (dim.count if is_frame_dim else 1)
    return int(tile), int(dim.shard_size_chunks or 1)


def _dimension(dim: Any, is_frame_dim: bool) -> dict[str, Any]:
    kind = AXIS_KINDS.get(dim.type or "", "other")
    tile, tiles_per_shard = _chunking(dim, is_frame_dim)
    d: dict[str, Any] = {
        "name": dim.name,
        "size": 0 if dim.count is None else int(dim.count),
        "tile": tile,
        "tiles_per_shard": tiles_per_shard,
        "kind": kind,
    }
    if dim.unit is not None:
        if kind not in ("space", "time"):
            raise refuse(
                f"unit {dim.unit!r} of dimension {dim.name!r}",
                f"OME-NGFF gives units to space and time axes only; this one is of type "
                f"{dim.type!r}",
            )
        d["unit"] = dim.unit
    # ome-writers writes a scale of 0 for a time plan's interval of 0 and
    # for a pixel size never calibrated; the library takes it as it is.
    if dim.scale is not None:
        if not (math.isfinite(dim.scale) and dim.scale >= 0):
            raise refuse(
                f"scale {dim.scale} of dimension {dim.name!r}",
                "a scale must be a finite number, 0 or more",
            )
        d["scale"] = float(dim.scale)
    if getattr(dim, "translation", None):
        d["translation"] = float(dim.translation)
    return d


def _position_name(pos: Any) -> str:
    """ome-writers' series name of a position (its name, with its grid
    row and column when it has them)."""
    if pos.grid_row is not None and pos.grid_column is not None:
        return f"{pos.name}_{pos.grid_row}_{pos.grid_column}"
    return pos.name


def _key_part(name: str, what: str) -> str:
    if not _KEY_PART.match(name) or name.startswith("__") or name in (".", "..", "c", "OME", "zarr.json"):
        raise refuse(
            f"{what} {name!r}",
            "an array's path here is made of letters, digits, '-', '_' and '.', "
            "and may not be 'c', 'OME', '.', '..', 'zarr.json' or start with '__'",
        )
    return name


def _omero(dims: Sequence[Any], dtype: str) -> Optional[dict[str, Any]]:
    """ome-writers' ``omero`` block: one entry per channel it names, the
    window the dtype's range, the colour its own or white."""
    channel = next((d for d in dims if d.type == "channel"), None)
    if channel is None or not channel.coords:
        return None
    import numpy as np

    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    lo, hi = float(info.min), float(info.max)
    channels = []
    for c in channel.coords:
        color = c.color.as_hex(format="long").lstrip("#").upper() if c.color else "FFFFFF"
        window = {"start": lo, "min": lo, "end": hi, "max": hi}
        channels.append({"window": window, "label": c.name, "color": color})
    return {"channels": channels}


def layout_of(
    settings: Any,
    *,
    path: Optional[str],
    dtype: Optional[str],
    store: Any,
    overwrite: Optional[bool],
    codec: Optional[Mapping[str, Any]],
    multiscale: Optional[Mapping[str, Any]],
    frame_metadata_bytes: Optional[int],
    options: Mapping[str, Any],
) -> AcquisitionLayout:
    """The layout of ome-writers' ``AcquisitionSettings`` ``settings``."""
    unknown = sorted(set(options) - set(SHARED_OPTIONS))
    if unknown:
        raise ConfigError(
            f"from_acquisition: unknown keyword(s) {', '.join(unknown)}; the stream's own "
            f"options are codec, multiscale, store, frame_metadata_bytes, "
            f"{', '.join(SHARED_OPTIONS)}"
        )
    dims = list(settings.dimensions or ())
    if not dims:
        raise ConfigError("from_acquisition: the acquisition has no dimensions")
    fmt = settings.format
    if fmt.name != "ome-zarr":
        raise refuse(
            f"format {fmt.name!r}",
            "this stream writes OME-Zarr only (give a root_path ending in .zarr, or "
            "format='ome-zarr')",
        )
    dtype = dtype or settings.dtype
    if not dtype:
        raise ConfigError("from_acquisition: no dtype: set settings.dtype or pass dtype=")
    if settings.dtype and dtype != settings.dtype:
        raise ConfigError(
            f"from_acquisition: dtype={dtype!r} differs from the acquisition's {settings.dtype!r}"
        )
    if codec is None:
        codec = codec_of(settings.compression, dtype)
    if overwrite is None:
        overwrite = bool(settings.overwrite)
    if path is None and store is None and settings.root_path:
        path = settings.output_path
    store_config = _store(store, path, overwrite)

    frame_dims = dims[-2:]
    index_dims = [d for d in dims[:-2] if d.type != "position"]
    position_axis = next((i for i, d in enumerate(dims[:-2]) if d.type == "position"), None)
    stored = [d.name for d in settings.storage_index_dimensions] + [d.name for d in frame_dims]
    acquired = [d.name for d in index_dims] + [d.name for d in frame_dims]
    if stored[0] != acquired[0]:
        raise refuse(
            f"storage_order {stored}",
            f"frames arrive along dimension {acquired[0]!r}, which must stay first in "
            f"storage (acquisition order {acquired}); acquire {stored[0]!r} outermost, "
            f"or pass storage_order='acquisition'",
        )
    dimensions = [_dimension(d, False) for d in index_dims] + [
        _dimension(d, True) for d in frame_dims
    ]
    frame_shape = (int(frame_dims[0].count), int(frame_dims[1].count))
    planes_per_frame = math.prod(int(d.count) for d in index_dims[1:])
    frames_per_plane = 1 if index_dims else frame_shape[0]
    if frame_metadata_bytes is None:
        frame_metadata_bytes = min(METADATA_BYTES_LIMIT, METADATA_BYTES_PER_PLANE * planes_per_frame)
    omero = _omero(index_dims, dtype)

    # Channel names, colours and windows: the library writes them into each
    # image's zarr.json (`ome.omero`), in any store.
    ome: Any = {"omero": omero} if omero is not None else True
    image: dict[str, Any] = {"dtype": dtype, "dimensions": dimensions, "codec": dict(codec), "ome": ome}
    if stored != acquired:
        image["storage_order"] = stored
    if multiscale is not None:
        image["multiscale"] = dict(multiscale)
    if frame_metadata_bytes:
        image["frame_metadata"] = {"max_bytes": int(frame_metadata_bytes)}

    positions = list(settings.positions)
    shared: dict[str, Any] = {"store": store_config, **options}
    if settings.plate is not None:
        images, extra = _plate(settings.plate, positions)
    elif len(positions) == 1:
        images, extra = [Image("", "")], {}
    else:
        keys = [_key_part(_position_name(p), "position") for p in positions]
        images, extra = [Image(k, k) for k in keys], {"collection": "bioformats2raw"}
    if images == [Image("", "")]:
        config = {**image, **shared}
    else:
        config = {"arrays": [{"key": i.key, **image} for i in images], **extra, **shared}

    index_names = [d.name for d in index_dims]
    return AcquisitionLayout(
        config=config,
        images=images,
        index_sizes=[d.count for d in dims[:-2]],
        position_axis=position_axis,
        storage_permutation=[index_names.index(d.name) for d in settings.storage_index_dimensions],
        frame_shape=frame_shape,
        dtype=dtype,
        planes_per_frame=planes_per_frame,
        frames_per_plane=frames_per_plane,
        frame_metadata_bytes=int(frame_metadata_bytes),
    )


def _plate(plate: Any, positions: Sequence[Any]) -> tuple[list[Image], dict[str, Any]]:
    """A plate's fields (row/column/position name, as ome-writers names
    them) and its wells in the order they are first visited."""
    wells: dict[tuple[str, str], list[str]] = {}
    images = []
    for pos in positions:
        row, column = pos.plate_row, pos.plate_column
        if row not in plate.row_names or column not in plate.column_names:
            raise refuse(
                f"position {pos.name!r} in well {row}/{column}",
                f"the well is not on the plate (rows {plate.row_names}, columns "
                f"{plate.column_names})",
            )
        key = "/".join(
            (_key_part(row, "plate row"), _key_part(column, "plate column"),
             _key_part(pos.name, "position"))
        )
        wells.setdefault((row, column), []).append(key)
        images.append(Image(key, key))
    config: dict[str, Any] = {
        "rows": list(plate.row_names),
        "columns": list(plate.column_names),
        "wells": [{"row": r, "column": c, "fields": f} for (r, c), f in wells.items()],
    }
    if plate.name:
        config["name"] = plate.name
    return images, {"plate": config}
