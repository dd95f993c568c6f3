//! The C-visible types: configuration, shard, metrics and their enums.
//! Enum-typed fields are `uint32_t` in the structs so that any value a C
//! caller stores is defined behaviour; the conversion rejects unknown ones.

use std::ffi::{c_char, c_void};

/// Element types (Zarr v3 names in comments).
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_dtype {
    TZ_DTYPE_UINT8 = 0,
    TZ_DTYPE_UINT16 = 1,
    TZ_DTYPE_UINT32 = 2,
    TZ_DTYPE_UINT64 = 3,
    TZ_DTYPE_INT8 = 4,
    TZ_DTYPE_INT16 = 5,
    TZ_DTYPE_INT32 = 6,
    TZ_DTYPE_INT64 = 7,
    TZ_DTYPE_FLOAT16 = 8,
    TZ_DTYPE_FLOAT32 = 9,
    TZ_DTYPE_FLOAT64 = 10,
}

/// Per-tile codecs.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_codec {
    /// zstd at `level` (-7 to 22).
    TZ_CODEC_ZSTD = 0,
    /// Tiles stored raw.
    TZ_CODEC_NONE = 1,
    /// Blosc1 frames with zstd inside at blosc `level` (0 to 9), byte
    /// shuffle by the element size (the Zarr v3 `blosc` codec). The JSON
    /// form also offers lz4 and zlib inside, and other shuffles.
    TZ_CODEC_BLOSC = 2,
    /// One gzip member per chunk at `level` (0 to 9; the Zarr v3 `gzip`
    /// codec). Since 0.3.
    TZ_CODEC_GZIP = 3,
}

/// Backends. In `tz_metrics.backend`, only CPU or GPU appear.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_backend {
    TZ_BACKEND_AUTO = 0,
    TZ_BACKEND_CPU = 1,
    TZ_BACKEND_GPU = 2,
}

/// Where each shard's index goes.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_index_location {
    TZ_INDEX_END = 0,
    TZ_INDEX_START = 1,
}

/// Whether a store's shard files go through the operating system's page
/// cache (`tz_options.store_page_cache`). Since 0.12.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_page_cache {
    /// Around it with fsync, through it without (`store_skip_fsync`).
    TZ_PAGE_CACHE_DEFAULT = 0,
    /// Through it.
    TZ_PAGE_CACHE_THROUGH = 1,
    /// Around it, where the store folder is on a local disk.
    TZ_PAGE_CACHE_AROUND = 2,
}

/// One complete shard, borrowed for the duration of the sink call.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_shard {
    pub rank: u32,
    /// Shard grid coordinate, `rank` entries, dimension 0 first.
    pub coord: *const u64,
    /// The shard's compressed chunks, concatenated.
    pub data: *const u8,
    pub data_bytes: usize,
    /// sharding_indexed index: (offset, nbytes) u64 LE pairs + crc32c (u32 LE).
    /// Offsets are relative to the start of the shard file: with
    /// TZ_INDEX_START the file is index then data, otherwise data then index.
    pub index: *const u8,
    pub index_bytes: usize,
    /// The pyramid level the shard belongs to: 0 for full resolution (and
    /// for every shard without a pyramid), k for level k, whose array is at
    /// `<store>/<k>/` in an OME-Zarr store. Since 0.4.
    pub level: u32,
    /// The array the shard belongs to: its index in the configuration's
    /// `arrays` (0 in a stream of one array). Since 0.6.
    pub array: u32,
}

/// Receives each complete shard on a library thread, never twice at once for
/// one stream, in completion order. Return 0 on success; any other value
/// poisons the stream. Must not unwind (no C++ exception may escape it).
///
/// What a sink may call: tz_get_metrics, tz_stream_last_error, tz_last_error,
/// tz_status_string and tz_version on any stream, and any function on other
/// streams. It may not call tz_write, tz_write_all, tz_flush, tz_destroy or
/// tz_set_attributes on its own stream (tz_flush waits for the very thread
/// the sink runs on): such a call returns TZ_ERR_INVALID_ARGUMENT
/// (tz_destroy does nothing) instead of deadlocking.
#[allow(non_camel_case_types)]
pub type tz_shard_sink_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, shard: *const tz_shard) -> i32>;

/// One dimension; dimension 0 is the slowest.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_dimension {
    /// Zarr dimension name; NULL for the default `"d<i>"`.
    pub name: *const c_char,
    /// Extent in elements; 0 on dimension 0 = unbounded (append axis).
    pub size: u64,
    /// Tile (inner chunk) extent in elements, >= 1.
    pub tile: u64,
    /// Tiles per shard along this dimension; 0 = all.
    pub tiles_per_shard: u64,
}

/// What an axis is, in OME-NGFF's terms (`tz_axis.kind`). Since 0.4.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_axis_kind {
    /// From the dimension's name: "t" time, "c" channel, "z", "y" and "x"
    /// space, any other name other.
    TZ_AXIS_DEFAULT = 0,
    TZ_AXIS_TIME = 1,
    TZ_AXIS_CHANNEL = 2,
    TZ_AXIS_SPACE = 3,
    /// Neither time, channel nor space (OME-NGFF writes no type for it).
    TZ_AXIS_OTHER = 4,
}

/// How each pyramid level summarises the 2 x 2 (x 2) windows of the level
/// below (`tz_image.multiscale_method`). Since 0.4.
#[repr(u32)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub enum tz_downsample_method {
    /// The mean, rounded to nearest (integers: ties to even).
    TZ_DOWNSAMPLE_MEAN = 0,
    TZ_DOWNSAMPLE_MIN = 1,
    TZ_DOWNSAMPLE_MAX = 2,
    /// The lower median: the ceil(n/2)-th smallest of the window's n elements.
    TZ_DOWNSAMPLE_MEDIAN = 3,
    /// The window's first element.
    TZ_DOWNSAMPLE_DECIMATE = 4,
}

/// What one dimension means physically: its OME-NGFF axis (kind, unit,
/// physical size and position) and whether pyramid levels halve it.
/// `tz_image.axes` holds one per dimension, in the order of
/// `tz_config.dimensions`. Zero-filled except `downsample = -1`, every field
/// is its default. Since 0.4.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_axis {
    /// A `tz_axis_kind`; TZ_AXIS_DEFAULT takes the kind from the name.
    pub kind: u32,
    /// An OME-NGFF unit: a unit of length ("micrometer", "nanometer", ...)
    /// for a space axis, of time ("second", "millisecond", ...) for a time
    /// axis; channel and other axes have none. NULL: no unit.
    pub unit: *const c_char,
    /// Physical size of one element at full resolution, > 0; 0 means the
    /// default, 1.0 (a scale of 0 is given in the JSON configuration).
    pub scale: f64,
    /// Physical position of element 0 (default 0.0).
    pub translation: f64,
    /// Whether pyramid levels halve this dimension: -1 the default (space
    /// axes of more than one element are halved, others kept), 0 no, 1 yes
    /// (needs `multiscale`).
    pub downsample: i32,
}

/// The configuration, mirroring the JSON form. Start from `tz_config_init`.
///
/// Its layout does not change within soname libtiledzarr.so.0 (88 bytes on
/// 64-bit platforms, as in 0.2 and 0.3): tz_config_init writes, and
/// tz_create and tz_estimate_memory read, exactly these fields, so a
/// program built against an older header works with this library.
/// Settings added later come in structs of their own (`tz_image`).
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_config {
    /// A `tz_dtype`.
    pub dtype: u32,
    pub rank: u32,
    /// `rank` dimensions, slowest first.
    pub dimensions: *const tz_dimension,
    /// A `tz_codec`.
    pub codec: u32,
    /// Compression level: zstd -7 to 22, blosc and gzip 0 to 9.
    pub level: i32,
    /// A `tz_backend`.
    pub backend: u32,
    /// A `tz_index_location`.
    pub index_location: u32,
    /// Folder of the Zarr v3 store the library writes; NULL for none. An
    /// `s3://bucket/prefix` URL names an object store (S3 or compatible):
    /// its endpoint comes from AWS_ENDPOINT_URL (path-style; an http://
    /// endpoint is accepted), its region from AWS_REGION, its credentials
    /// from the standard AWS sources (environment, AWS_PROFILE in the shared
    /// credentials file, web identity, instance metadata). Since 0.3.
    pub store_path: *const c_char,
    /// Non-zero: replace an existing store at `store_path`.
    pub overwrite: i32,
    /// Optional shard callback (required when `store_path` is NULL).
    pub sink: tz_shard_sink_fn,
    pub sink_user_data: *mut c_void,
    /// CPU worker threads; 0 = one per core.
    pub threads: u32,
    /// The most staging memory the stream takes, in bytes (whole epochs, at
    /// least two): it starts with two buffers and grows while the writer
    /// outruns the pipeline; 0 = default (1 GiB, or two epochs where more).
    pub staging_bytes: u64,
    /// GPU ordinal for the GPU backend.
    pub device: u32,
    /// Non-zero: do not fsync the store's files and folders (faster; a
    /// power cut may then lose shards already reported written). Since 0.2.
    pub store_skip_fsync: u32,
}

/// What makes the stream an OME-Zarr image: axes, storage order, pyramid,
/// image name, user attributes (tz_create_image, tz_estimate_memory_image).
/// Start from `tz_image_init`. Since 0.4.
///
/// Versioned by its size: `struct_size` is `sizeof(tz_image)` as the caller
/// compiled it (tz_image_init sets it), and the library reads only that
/// many bytes, so that the struct can grow at its end in later versions
/// (fields a caller's struct does not have count as their defaults). A
/// `struct_size` smaller than 0.4's struct (56 bytes on 64-bit platforms)
/// or larger than this library's is refused with TZ_ERR_INVALID_ARGUMENT
/// naming `image.struct_size`: a larger struct comes from a program built
/// against a newer header, whose extra fields this library cannot honour.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_image {
    /// `sizeof(tz_image)` as the caller compiled it; set by tz_image_init.
    pub struct_size: usize,
    /// NULL: every axis takes its defaults (see `tz_axis`); else `rank`
    /// entries (the `rank` of the tz_config), one per dimension, in the
    /// order of `tz_config.dimensions`. JSON: the dimensions' `kind`,
    /// `unit`, `scale`, `translation`, `downsample`.
    pub axes: *const tz_axis,
    /// NULL: the array is stored in acquisition order (the order of
    /// `tz_config.dimensions`); else `rank` dimension names, slowest first,
    /// the order the array is stored in. Dimension 0 and the last dimension
    /// stay in place; an OME-Zarr image stores time, then channel, then
    /// space axes.
    pub storage_order: *const *const c_char,
    /// Pyramid levels, level 0 (full resolution) included; 0 = as many as it
    /// takes until every downsampled dimension fits in one tile. Used only
    /// with `multiscale` (0 otherwise).
    pub multiscale_levels: u32,
    /// A `tz_downsample_method` (default TZ_DOWNSAMPLE_MEAN). Used only with
    /// `multiscale` (TZ_DOWNSAMPLE_MEAN otherwise).
    pub multiscale_method: u32,
    /// Non-zero: write a multiscale pyramid, level k at `<store>/<k>/`, each
    /// level halving the downsampled dimensions of the one before (rounding
    /// up). Implies `ome`.
    pub multiscale: i32,
    /// Non-zero: write an OME-Zarr image (OME-NGFF 0.5): the store is a group
    /// whose zarr.json holds the `ome` metadata (axes, one dataset per level
    /// with its scale and translation) and the user's attributes; level k is
    /// the array at `<store>/<k>/`. 0: one plain Zarr array.
    pub ome: i32,
    /// The image's name in the OME metadata; NULL: none. Needs `ome` or
    /// `multiscale`.
    pub ome_name: *const c_char,
    /// The user's attributes: NULL for none, else a JSON object (a text,
    /// parsed at create; malformed JSON is TZ_ERR_CONFIG naming
    /// `image.attributes_json`), written into the group's zarr.json beside
    /// `ome` (the array's without OME). It may not hold the key "ome".
    /// tz_set_attributes replaces them until tz_flush.
    pub attributes_json: *const c_char,
    /// OME-NGFF's `omero` block (each channel's name, colour and display
    /// window, which viewers read): NULL for none, else a JSON object
    /// written into the group's zarr.json as `ome.omero`, such as
    /// `{"channels": [{"label": "GFP", "color": "00FF00", "window":
    /// {"start": 0, "end": 4095, "min": 0, "max": 65535}}]}`, one channel
    /// per element of the channel axis (one without such an axis). Needs
    /// `ome` or `multiscale`. Checked at create: a malformed block is
    /// TZ_ERR_CONFIG naming the field (`ome.omero.channels[1].color`).
    /// JSON: `"ome": {"omero": {...}}`. Since 0.8.
    pub omero_json: *const c_char,
}

/// What tz_recover did to a store; for a store of several arrays (an
/// OME-Zarr image's levels, a collection's or a plate's images), the sums
/// over its arrays. The library writes exactly these four fields, so the
/// struct keeps its size.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_recovery {
    /// `*.partial` files (writes cut short by the crash) removed.
    pub partial_files_removed: u64,
    /// The extent along dimension 0 before and after (summed over the
    /// store's arrays).
    pub planes_before: u64,
    pub planes_after: u64,
    /// Shard files in rows past the complete ones (left on disk, outside
    /// the extent: their row was not complete).
    pub shards_beyond: u64,
}

/// One array of a stream created from C structures (tz_create_arrays):
/// its key in the store, its `tz_config` (dtype, dimensions, codec) and
/// its image settings (`image` NULL: a plain array). The stream's shared
/// settings (backend, store, sink, threads, staging, device, index
/// location, fsync) come from `arrays[0].config`; in the others each is 0
/// (NULL) or the same. Since 0.7.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_array {
    /// `/`-separated names (letters, digits, `-`, `_`, `.`), as `key` in
    /// the JSON form.
    pub key: *const c_char,
    pub config: *const tz_config,
    pub image: *const tz_image,
}

/// How a stream runs, beyond what `tz_config` says: the latency bound, a
/// cap on the GPU's device memory, how long the store waits on a disk or
/// server that does not answer, and whether its shard files go through
/// the page cache (tz_create_with,
/// tz_estimate_memory_with, tz_create_arrays). Start from
/// `tz_options_init`; a field left 0 takes its default. JSON:
/// `max_latency_ms`, `device_bytes`, `store.timeout_s`,
/// `store.page_cache`. Since 0.5.
///
/// Versioned by its size as `tz_image` is: `struct_size` is
/// `sizeof(tz_options)` as the caller compiled it; smaller than 0.5's
/// struct (24 bytes) or larger than this library's is refused with
/// TZ_ERR_INVALID_ARGUMENT naming `options.struct_size`. A program built
/// against 0.5 to 0.8 passes 24 bytes, and `store_timeout_s` keeps its
/// default; one built against 0.9 to 0.11 passes 32 bytes, and
/// `store_page_cache` keeps its default.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_options {
    /// `sizeof(tz_options)` as the caller compiled it; set by
    /// tz_options_init.
    pub struct_size: usize,
    /// The latency bound in milliseconds (1 to 86400000; 0 = 1000): a
    /// staging buffer goes to the compressor when it is full or when its
    /// oldest whole epoch has waited this long, whichever comes first. A
    /// complete shard row reaches the sink at most this long plus its
    /// processing time after its last byte was written (a reservation
    /// held across the deadline defers it to the commit).
    pub max_latency_ms: u64,
    /// A cap on the GPU backend's device memory in bytes (0: the backend's
    /// own plan): its batches are made small enough to fit, and a
    /// configuration whose smallest batch does not fit is refused with the
    /// numbers (TZ_ERR_OUT_OF_MEMORY). The CPU backend ignores it.
    pub device_bytes: u64,
    /// How long the store's create, flush and destroy wait on a disk (or
    /// an object store's server) that answers nothing, in seconds (1 to
    /// 3600; 0 = 60): after it they return TZ_ERR_IO naming the store and
    /// `store.timeout_s`, as the JSON form's `store.timeout_s` does. Needs
    /// a store (`store_path`): with a callback only, TZ_ERR_CONFIG. Since
    /// 0.9.
    pub store_timeout_s: u64,
    /// A `tz_page_cache`: whether the store's shard files go through the
    /// operating system's page cache. Around it (TZ_PAGE_CACHE_AROUND), a
    /// store folder on a local disk (Linux: ext4, XFS, btrfs, f2fs;
    /// Windows: a fixed drive) has them written with O_DIRECT or
    /// FILE_FLAG_NO_BUFFERING, which spares the cores a copy into the
    /// kernel's pages and keeps a long stream from filling the page cache;
    /// other folders (network mounts, memory) go through it all the same.
    /// TZ_PAGE_CACHE_DEFAULT: around it with fsync (the bytes must reach
    /// the disk anyway), through it with `store_skip_fsync` (the page cache
    /// takes a burst faster than a disk). Not the default needs a store
    /// folder: with a callback only, TZ_ERR_CONFIG; an object store ignores
    /// it. JSON: `store.page_cache` (unset, true, false). Since 0.12.
    pub store_page_cache: u32,
}

/// Counters of a stream, at the moment of the call.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_metrics {
    /// Bytes taken by tz_write.
    pub bytes_in: u64,
    /// Bytes emitted in shards, indexes included.
    pub bytes_out: u64,
    pub shards_emitted: u64,
    pub epochs_completed: u64,
    /// Cumulative seconds per stage, summed over the threads that ran it.
    pub seconds_copy: f64,
    /// Host-to-device copy (GPU backend; 0 on the CPU).
    pub seconds_h2d: f64,
    pub seconds_scatter: f64,
    pub seconds_compress: f64,
    pub seconds_aggregate: f64,
    /// Device-to-host copy (GPU backend; 0 on the CPU).
    pub seconds_d2h: f64,
    pub seconds_sink: f64,
    /// The backend running the stream: a `tz_backend`, CPU or GPU.
    pub backend: u32,
    /// Why that backend was chosen, NUL-terminated (truncated to fit).
    pub backend_reason: [c_char; 256],
}

/// What an object store stream has uploaded, at the moment of the call
/// (tz_get_upload_metrics; zero for other streams). A struct of its own, so
/// that tz_metrics keeps its size for callers built against older headers.
/// Since 0.3.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_upload_metrics {
    /// Bytes the server accepted (shards, their parts, zarr.json).
    pub bytes_uploaded: u64,
    /// Objects complete (a multipart object counts once).
    pub objects_uploaded: u64,
    /// Object uploads started and not yet complete or failed.
    pub uploads_in_flight: u64,
}

/// The stream's staging memory, at the moment of the call
/// (tz_get_staging_metrics). Since 0.11.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_staging_metrics {
    /// Staging memory the stream holds (page-locked on the GPU backend): it
    /// grows while a writer that cannot wait (tz_write, tz_reserve)
    /// outruns the pipeline, up to the configuration's `staging_bytes`,
    /// and shrinks after a pause; after the flush, what it held at the end.
    pub staging_bytes: u64,
    /// The most staging memory the stream held at once.
    pub staging_peak_bytes: u64,
    /// Calls that found staging memory full and returned having taken less
    /// than they were given: tz_write, tz_write_to and tz_skip
    /// returning fewer bytes than asked (0 included), tz_reserve and
    /// tz_reserve_to returning an empty reservation, tz_write_all and
    /// tz_write_all_to returning at their timeout. Each is a moment the
    /// writer outran the pipeline; a writer that drops the frames it cannot
    /// hand on counts its drops here.
    pub busy_writes: u64,
}

/// The memory a configuration needs (tz_estimate_memory).
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct tz_memory_plan {
    /// GPU memory (0 on the CPU backend).
    pub device_bytes: u64,
    /// Page-locked host memory, staging included (GPU backend).
    pub pinned_bytes: u64,
    /// Ordinary host memory, staging included (CPU backend).
    pub host_bytes: u64,
    /// The backend the configuration would run on: a `tz_backend`, CPU or GPU.
    pub backend: u32,
}
