/*
 * tiledzarr.h: the C API of TiledZarr, generated from the Rust sources by
 * cbindgen (build.rs). Do not edit; change src/ffi and rebuild.
 *
 * Stream raw row-major frames into compressed, sharded Zarr v3 stores.
 * Typical use: tz_create_json -> tz_write (repeat; 0 = busy, retry) ->
 * tz_flush -> tz_destroy. Errors: negative returns / non-zero statuses,
 * described by tz_stream_last_error(s) or, for tz_create*, tz_last_error().
 */

#ifndef TILEDZARR_H
#define TILEDZARR_H

#include <stddef.h>
#include <stdint.h>

#define TZ_VERSION_MAJOR 0
#define TZ_VERSION_MINOR 12
#define TZ_VERSION_PATCH 0

/** An open stream (opaque). */
typedef struct tz_stream tz_stream;


/**
 * Status codes. Functions returning `int32_t` return one of these;
 * `tz_write` and `tz_write_all` return the negated code on error.
 */
enum tz_status
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : int32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  TZ_OK = 0,
  /**
   * A required pointer argument was NULL.
   */
  TZ_ERR_NULL_ARGUMENT = 1,
  /**
   * An argument is out of range or malformed (other than the config).
   */
  TZ_ERR_INVALID_ARGUMENT = 2,
  /**
   * The configuration breaks a rule; the message names the field.
   */
  TZ_ERR_CONFIG = 3,
  /**
   * A write past the end of a bounded array.
   */
  TZ_ERR_OVERFLOW = 4,
  /**
   * The stream was flushed: it takes no more data.
   */
  TZ_ERR_FINISHED = 5,
  /**
   * The shard sink callback returned non-zero; the stream is poisoned.
   */
  TZ_ERR_SINK = 6,
  /**
   * A file system operation failed; the message names the path.
   */
  TZ_ERR_IO = 7,
  /**
   * The store path exists and `overwrite` is off (or it is not a store).
   */
  TZ_ERR_EXISTS = 8,
  /**
   * The requested backend cannot run here; the message says why.
   */
  TZ_ERR_BACKEND_UNAVAILABLE = 9,
  /**
   * A CUDA or nvCOMP call failed; the message names the stage.
   */
  TZ_ERR_GPU = 10,
  /**
   * `tz_write_all` did not finish in time.
   */
  TZ_ERR_TIMEOUT = 11,
  /**
   * Memory could not be allocated.
   */
  TZ_ERR_OUT_OF_MEMORY = 12,
  /**
   * A bug in the library (a caught panic); the stream is poisoned.
   */
  TZ_ERR_INTERNAL = 13,
  /**
   * An object store request failed after its retries (server unreachable,
   * no such bucket, an error answer); the message names the object's
   * URL and the server's answer. Since 0.3.
   */
  TZ_ERR_OBJECT_STORE = 14,
  /**
   * The object store refused the credentials, or none were found. Since 0.3.
   */
  TZ_ERR_ACCESS_DENIED = 15,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_status tz_status;
#else
typedef int32_t tz_status;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Element types (Zarr v3 names in comments).
 */
enum tz_dtype
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
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
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_dtype tz_dtype;
#else
typedef uint32_t tz_dtype;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Per-tile codecs.
 */
enum tz_codec
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * zstd at `level` (-7 to 22).
   */
  TZ_CODEC_ZSTD = 0,
  /**
   * Tiles stored raw.
   */
  TZ_CODEC_NONE = 1,
  /**
   * Blosc1 frames with zstd inside at blosc `level` (0 to 9), byte
   * shuffle by the element size (the Zarr v3 `blosc` codec). The JSON
   * form also offers lz4 and zlib inside, and other shuffles.
   */
  TZ_CODEC_BLOSC = 2,
  /**
   * One gzip member per chunk at `level` (0 to 9; the Zarr v3 `gzip`
   * codec). Since 0.3.
   */
  TZ_CODEC_GZIP = 3,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_codec tz_codec;
#else
typedef uint32_t tz_codec;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Backends. In `tz_metrics.backend`, only CPU or GPU appear.
 */
enum tz_backend
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  TZ_BACKEND_AUTO = 0,
  TZ_BACKEND_CPU = 1,
  TZ_BACKEND_GPU = 2,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_backend tz_backend;
#else
typedef uint32_t tz_backend;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Where each shard's index goes.
 */
enum tz_index_location
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  TZ_INDEX_END = 0,
  TZ_INDEX_START = 1,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_index_location tz_index_location;
#else
typedef uint32_t tz_index_location;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * What an axis is, in OME-NGFF's terms (`tz_axis.kind`). Since 0.4.
 */
enum tz_axis_kind
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * From the dimension's name: "t" time, "c" channel, "z", "y" and "x"
   * space, any other name other.
   */
  TZ_AXIS_DEFAULT = 0,
  TZ_AXIS_TIME = 1,
  TZ_AXIS_CHANNEL = 2,
  TZ_AXIS_SPACE = 3,
  /**
   * Neither time, channel nor space (OME-NGFF writes no type for it).
   */
  TZ_AXIS_OTHER = 4,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_axis_kind tz_axis_kind;
#else
typedef uint32_t tz_axis_kind;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * How each pyramid level summarises the 2 x 2 (x 2) windows of the level
 * below (`tz_image.multiscale_method`). Since 0.4.
 */
enum tz_downsample_method
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * The mean, rounded to nearest (integers: ties to even).
   */
  TZ_DOWNSAMPLE_MEAN = 0,
  TZ_DOWNSAMPLE_MIN = 1,
  TZ_DOWNSAMPLE_MAX = 2,
  /**
   * The lower median: the ceil(n/2)-th smallest of the window's n elements.
   */
  TZ_DOWNSAMPLE_MEDIAN = 3,
  /**
   * The window's first element.
   */
  TZ_DOWNSAMPLE_DECIMATE = 4,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_downsample_method tz_downsample_method;
#else
typedef uint32_t tz_downsample_method;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Whether a store's shard files go through the operating system's page
 * cache (`tz_options.store_page_cache`). Since 0.12.
 */
enum tz_page_cache
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * Around it with fsync, through it without (`store_skip_fsync`).
   */
  TZ_PAGE_CACHE_DEFAULT = 0,
  /**
   * Through it.
   */
  TZ_PAGE_CACHE_THROUGH = 1,
  /**
   * Around it, where the store folder is on a local disk.
   */
  TZ_PAGE_CACHE_AROUND = 2,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum tz_page_cache tz_page_cache;
#else
typedef uint32_t tz_page_cache;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * One dimension; dimension 0 is the slowest.
 */
typedef struct tz_dimension {
  /**
   * Zarr dimension name; NULL for the default `"d<i>"`.
   */
  const char *name;
  /**
   * Extent in elements; 0 on dimension 0 = unbounded (append axis).
   */
  uint64_t size;
  /**
   * Tile (inner chunk) extent in elements, >= 1.
   */
  uint64_t tile;
  /**
   * Tiles per shard along this dimension; 0 = all.
   */
  uint64_t tiles_per_shard;
} tz_dimension;

/**
 * One complete shard, borrowed for the duration of the sink call.
 */
typedef struct tz_shard {
  uint32_t rank;
  /**
   * Shard grid coordinate, `rank` entries, dimension 0 first.
   */
  const uint64_t *coord;
  /**
   * The shard's compressed chunks, concatenated.
   */
  const uint8_t *data;
  size_t data_bytes;
  /**
   * sharding_indexed index: (offset, nbytes) u64 LE pairs + crc32c (u32 LE).
   * Offsets are relative to the start of the shard file: with
   * TZ_INDEX_START the file is index then data, otherwise data then index.
   */
  const uint8_t *index;
  size_t index_bytes;
  /**
   * The pyramid level the shard belongs to: 0 for full resolution (and
   * for every shard without a pyramid), k for level k, whose array is at
   * `<store>/<k>/` in an OME-Zarr store. Since 0.4.
   */
  uint32_t level;
  /**
   * The array the shard belongs to: its index in the configuration's
   * `arrays` (0 in a stream of one array). Since 0.6.
   */
  uint32_t array;
} tz_shard;

/**
 * Receives each complete shard on a library thread, never twice at once for
 * one stream, in completion order. Return 0 on success; any other value
 * poisons the stream. Must not unwind (no C++ exception may escape it).
 *
 * What a sink may call: tz_get_metrics, tz_stream_last_error, tz_last_error,
 * tz_status_string and tz_version on any stream, and any function on other
 * streams. It may not call tz_write, tz_write_all, tz_flush, tz_destroy or
 * tz_set_attributes on its own stream (tz_flush waits for the very thread
 * the sink runs on): such a call returns TZ_ERR_INVALID_ARGUMENT
 * (tz_destroy does nothing) instead of deadlocking.
 */
typedef int32_t (*tz_shard_sink_fn)(void *user_data, const struct tz_shard *shard);

/**
 * The configuration, mirroring the JSON form. Start from `tz_config_init`.
 *
 * Its layout does not change within soname libtiledzarr.so.0 (88 bytes on
 * 64-bit platforms, as in 0.2 and 0.3): tz_config_init writes, and
 * tz_create and tz_estimate_memory read, exactly these fields, so a
 * program built against an older header works with this library.
 * Settings added later come in structs of their own (`tz_image`).
 */
typedef struct tz_config {
  /**
   * A `tz_dtype`.
   */
  uint32_t dtype;
  uint32_t rank;
  /**
   * `rank` dimensions, slowest first.
   */
  const struct tz_dimension *dimensions;
  /**
   * A `tz_codec`.
   */
  uint32_t codec;
  /**
   * Compression level: zstd -7 to 22, blosc and gzip 0 to 9.
   */
  int32_t level;
  /**
   * A `tz_backend`.
   */
  uint32_t backend;
  /**
   * A `tz_index_location`.
   */
  uint32_t index_location;
  /**
   * Folder of the Zarr v3 store the library writes; NULL for none. An
   * `s3://bucket/prefix` URL names an object store (S3 or compatible):
   * its endpoint comes from AWS_ENDPOINT_URL (path-style; an http://
   * endpoint is accepted), its region from AWS_REGION, its credentials
   * from the standard AWS sources (environment, AWS_PROFILE in the shared
   * credentials file, web identity, instance metadata). Since 0.3.
   */
  const char *store_path;
  /**
   * Non-zero: replace an existing store at `store_path`.
   */
  int32_t overwrite;
  /**
   * Optional shard callback (required when `store_path` is NULL).
   */
  tz_shard_sink_fn sink;
  void *sink_user_data;
  /**
   * CPU worker threads; 0 = one per core.
   */
  uint32_t threads;
  /**
   * The most staging memory the stream takes, in bytes (whole epochs, at
   * least two): it starts with two buffers and grows while the writer
   * outruns the pipeline; 0 = default (1 GiB, or two epochs where more).
   */
  uint64_t staging_bytes;
  /**
   * GPU ordinal for the GPU backend.
   */
  uint32_t device;
  /**
   * Non-zero: do not fsync the store's files and folders (faster; a
   * power cut may then lose shards already reported written). Since 0.2.
   */
  uint32_t store_skip_fsync;
} tz_config;

/**
 * What one dimension means physically: its OME-NGFF axis (kind, unit,
 * physical size and position) and whether pyramid levels halve it.
 * `tz_image.axes` holds one per dimension, in the order of
 * `tz_config.dimensions`. Zero-filled except `downsample = -1`, every field
 * is its default. Since 0.4.
 */
typedef struct tz_axis {
  /**
   * A `tz_axis_kind`; TZ_AXIS_DEFAULT takes the kind from the name.
   */
  uint32_t kind;
  /**
   * An OME-NGFF unit: a unit of length ("micrometer", "nanometer", ...)
   * for a space axis, of time ("second", "millisecond", ...) for a time
   * axis; channel and other axes have none. NULL: no unit.
   */
  const char *unit;
  /**
   * Physical size of one element at full resolution, > 0; 0 means the
   * default, 1.0 (a scale of 0 is given in the JSON configuration).
   */
  double scale;
  /**
   * Physical position of element 0 (default 0.0).
   */
  double translation;
  /**
   * Whether pyramid levels halve this dimension: -1 the default (space
   * axes of more than one element are halved, others kept), 0 no, 1 yes
   * (needs `multiscale`).
   */
  int32_t downsample;
} tz_axis;

/**
 * What makes the stream an OME-Zarr image: axes, storage order, pyramid,
 * image name, user attributes (tz_create_image, tz_estimate_memory_image).
 * Start from `tz_image_init`. Since 0.4.
 *
 * Versioned by its size: `struct_size` is `sizeof(tz_image)` as the caller
 * compiled it (tz_image_init sets it), and the library reads only that
 * many bytes, so that the struct can grow at its end in later versions
 * (fields a caller's struct does not have count as their defaults). A
 * `struct_size` smaller than 0.4's struct (56 bytes on 64-bit platforms)
 * or larger than this library's is refused with TZ_ERR_INVALID_ARGUMENT
 * naming `image.struct_size`: a larger struct comes from a program built
 * against a newer header, whose extra fields this library cannot honour.
 */
typedef struct tz_image {
  /**
   * `sizeof(tz_image)` as the caller compiled it; set by tz_image_init.
   */
  size_t struct_size;
  /**
   * NULL: every axis takes its defaults (see `tz_axis`); else `rank`
   * entries (the `rank` of the tz_config), one per dimension, in the
   * order of `tz_config.dimensions`. JSON: the dimensions' `kind`,
   * `unit`, `scale`, `translation`, `downsample`.
   */
  const struct tz_axis *axes;
  /**
   * NULL: the array is stored in acquisition order (the order of
   * `tz_config.dimensions`); else `rank` dimension names, slowest first,
   * the order the array is stored in. Dimension 0 and the last dimension
   * stay in place; an OME-Zarr image stores time, then channel, then
   * space axes.
   */
  const char *const *storage_order;
  /**
   * Pyramid levels, level 0 (full resolution) included; 0 = as many as it
   * takes until every downsampled dimension fits in one tile. Used only
   * with `multiscale` (0 otherwise).
   */
  uint32_t multiscale_levels;
  /**
   * A `tz_downsample_method` (default TZ_DOWNSAMPLE_MEAN). Used only with
   * `multiscale` (TZ_DOWNSAMPLE_MEAN otherwise).
   */
  uint32_t multiscale_method;
  /**
   * Non-zero: write a multiscale pyramid, level k at `<store>/<k>/`, each
   * level halving the downsampled dimensions of the one before (rounding
   * up). Implies `ome`.
   */
  int32_t multiscale;
  /**
   * Non-zero: write an OME-Zarr image (OME-NGFF 0.5): the store is a group
   * whose zarr.json holds the `ome` metadata (axes, one dataset per level
   * with its scale and translation) and the user's attributes; level k is
   * the array at `<store>/<k>/`. 0: one plain Zarr array.
   */
  int32_t ome;
  /**
   * The image's name in the OME metadata; NULL: none. Needs `ome` or
   * `multiscale`.
   */
  const char *ome_name;
  /**
   * The user's attributes: NULL for none, else a JSON object (a text,
   * parsed at create; malformed JSON is TZ_ERR_CONFIG naming
   * `image.attributes_json`), written into the group's zarr.json beside
   * `ome` (the array's without OME). It may not hold the key "ome".
   * tz_set_attributes replaces them until tz_flush.
   */
  const char *attributes_json;
  /**
   * OME-NGFF's `omero` block (each channel's name, colour and display
   * window, which viewers read): NULL for none, else a JSON object
   * written into the group's zarr.json as `ome.omero`, such as
   * `{"channels": [{"label": "GFP", "color": "00FF00", "window":
   * {"start": 0, "end": 4095, "min": 0, "max": 65535}}]}`, one channel
   * per element of the channel axis (one without such an axis). Needs
   * `ome` or `multiscale`. Checked at create: a malformed block is
   * TZ_ERR_CONFIG naming the field (`ome.omero.channels[1].color`).
   * JSON: `"ome": {"omero": {...}}`. Since 0.8.
   */
  const char *omero_json;
} tz_image;

/**
 * The memory a configuration needs (tz_estimate_memory).
 */
typedef struct tz_memory_plan {
  /**
   * GPU memory (0 on the CPU backend).
   */
  uint64_t device_bytes;
  /**
   * Page-locked host memory, staging included (GPU backend).
   */
  uint64_t pinned_bytes;
  /**
   * Ordinary host memory, staging included (CPU backend).
   */
  uint64_t host_bytes;
  /**
   * The backend the configuration would run on: a `tz_backend`, CPU or GPU.
   */
  uint32_t backend;
} tz_memory_plan;

/**
 * One array of a stream created from C structures (tz_create_arrays):
 * its key in the store, its `tz_config` (dtype, dimensions, codec) and
 * its image settings (`image` NULL: a plain array). The stream's shared
 * settings (backend, store, sink, threads, staging, device, index
 * location, fsync) come from `arrays[0].config`; in the others each is 0
 * (NULL) or the same. Since 0.7.
 */
typedef struct tz_array {
  /**
   * `/`-separated names (letters, digits, `-`, `_`, `.`), as `key` in
   * the JSON form.
   */
  const char *key;
  const struct tz_config *config;
  const struct tz_image *image;
} tz_array;

/**
 * How a stream runs, beyond what `tz_config` says: the latency bound, a
 * cap on the GPU's device memory, how long the store waits on a disk or
 * server that does not answer, and whether its shard files go through
 * the page cache (tz_create_with,
 * tz_estimate_memory_with, tz_create_arrays). Start from
 * `tz_options_init`; a field left 0 takes its default. JSON:
 * `max_latency_ms`, `device_bytes`, `store.timeout_s`,
 * `store.page_cache`. Since 0.5.
 *
 * Versioned by its size as `tz_image` is: `struct_size` is
 * `sizeof(tz_options)` as the caller compiled it; smaller than 0.5's
 * struct (24 bytes) or larger than this library's is refused with
 * TZ_ERR_INVALID_ARGUMENT naming `options.struct_size`. A program built
 * against 0.5 to 0.8 passes 24 bytes, and `store_timeout_s` keeps its
 * default; one built against 0.9 to 0.11 passes 32 bytes, and
 * `store_page_cache` keeps its default.
 */
typedef struct tz_options {
  /**
   * `sizeof(tz_options)` as the caller compiled it; set by
   * tz_options_init.
   */
  size_t struct_size;
  /**
   * The latency bound in milliseconds (1 to 86400000; 0 = 1000): a
   * staging buffer goes to the compressor when it is full or when its
   * oldest whole epoch has waited this long, whichever comes first. A
   * complete shard row reaches the sink at most this long plus its
   * processing time after its last byte was written (a reservation
   * held across the deadline defers it to the commit).
   */
  uint64_t max_latency_ms;
  /**
   * A cap on the GPU backend's device memory in bytes (0: the backend's
   * own plan): its batches are made small enough to fit, and a
   * configuration whose smallest batch does not fit is refused with the
   * numbers (TZ_ERR_OUT_OF_MEMORY). The CPU backend ignores it.
   */
  uint64_t device_bytes;
  /**
   * How long the store's create, flush and destroy wait on a disk (or
   * an object store's server) that answers nothing, in seconds (1 to
   * 3600; 0 = 60): after it they return TZ_ERR_IO naming the store and
   * `store.timeout_s`, as the JSON form's `store.timeout_s` does. Needs
   * a store (`store_path`): with a callback only, TZ_ERR_CONFIG. Since
   * 0.9.
   */
  uint64_t store_timeout_s;
  /**
   * A `tz_page_cache`: whether the store's shard files go through the
   * operating system's page cache. Around it (TZ_PAGE_CACHE_AROUND), a
   * store folder on a local disk (Linux: ext4, XFS, btrfs, f2fs;
   * Windows: a fixed drive) has them written with O_DIRECT or
   * FILE_FLAG_NO_BUFFERING, which spares the cores a copy into the
   * kernel's pages and keeps a long stream from filling the page cache;
   * other folders (network mounts, memory) go through it all the same.
   * TZ_PAGE_CACHE_DEFAULT: around it with fsync (the bytes must reach
   * the disk anyway), through it with `store_skip_fsync` (the page cache
   * takes a burst faster than a disk). Not the default needs a store
   * folder: with a callback only, TZ_ERR_CONFIG; an object store ignores
   * it. JSON: `store.page_cache` (unset, true, false). Since 0.12.
   */
  uint32_t store_page_cache;
} tz_options;

/**
 * Counters of a stream, at the moment of the call.
 */
typedef struct tz_metrics {
  /**
   * Bytes taken by tz_write.
   */
  uint64_t bytes_in;
  /**
   * Bytes emitted in shards, indexes included.
   */
  uint64_t bytes_out;
  uint64_t shards_emitted;
  uint64_t epochs_completed;
  /**
   * Cumulative seconds per stage, summed over the threads that ran it.
   */
  double seconds_copy;
  /**
   * Host-to-device copy (GPU backend; 0 on the CPU).
   */
  double seconds_h2d;
  double seconds_scatter;
  double seconds_compress;
  double seconds_aggregate;
  /**
   * Device-to-host copy (GPU backend; 0 on the CPU).
   */
  double seconds_d2h;
  double seconds_sink;
  /**
   * The backend running the stream: a `tz_backend`, CPU or GPU.
   */
  uint32_t backend;
  /**
   * Why that backend was chosen, NUL-terminated (truncated to fit).
   */
  char backend_reason[256];
} tz_metrics;

/**
 * What an object store stream has uploaded, at the moment of the call
 * (tz_get_upload_metrics; zero for other streams). A struct of its own, so
 * that tz_metrics keeps its size for callers built against older headers.
 * Since 0.3.
 */
typedef struct tz_upload_metrics {
  /**
   * Bytes the server accepted (shards, their parts, zarr.json).
   */
  uint64_t bytes_uploaded;
  /**
   * Objects complete (a multipart object counts once).
   */
  uint64_t objects_uploaded;
  /**
   * Object uploads started and not yet complete or failed.
   */
  uint64_t uploads_in_flight;
} tz_upload_metrics;

/**
 * The stream's staging memory, at the moment of the call
 * (tz_get_staging_metrics). Since 0.11.
 */
typedef struct tz_staging_metrics {
  /**
   * Staging memory the stream holds (page-locked on the GPU backend): it
   * grows while a writer that cannot wait (tz_write, tz_reserve)
   * outruns the pipeline, up to the configuration's `staging_bytes`,
   * and shrinks after a pause; after the flush, what it held at the end.
   */
  uint64_t staging_bytes;
  /**
   * The most staging memory the stream held at once.
   */
  uint64_t staging_peak_bytes;
  /**
   * Calls that found staging memory full and returned having taken less
   * than they were given: tz_write, tz_write_to and tz_skip
   * returning fewer bytes than asked (0 included), tz_reserve and
   * tz_reserve_to returning an empty reservation, tz_write_all and
   * tz_write_all_to returning at their timeout. Each is a moment the
   * writer outran the pipeline; a writer that drops the frames it cannot
   * hand on counts its drops here.
   */
  uint64_t busy_writes;
} tz_staging_metrics;

/**
 * What tz_recover did to a store; for a store of several arrays (an
 * OME-Zarr image's levels, a collection's or a plate's images), the sums
 * over its arrays. The library writes exactly these four fields, so the
 * struct keeps its size.
 */
typedef struct tz_recovery {
  /**
   * `*.partial` files (writes cut short by the crash) removed.
   */
  uint64_t partial_files_removed;
  /**
   * The extent along dimension 0 before and after (summed over the
   * store's arrays).
   */
  uint64_t planes_before;
  uint64_t planes_after;
  /**
   * Shard files in rows past the complete ones (left on disk, outside
   * the extent: their row was not complete).
   */
  uint64_t shards_beyond;
} tz_recovery;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * Fills `config` with the defaults: uint16, zstd level 1, backend auto,
 * index at the end, no store, no sink, default threads and staging. The
 * caller then sets `rank`, `dimensions` and a store path or sink.
 */
int32_t tz_config_init(struct tz_config *config);

/**
 * Fills `image` with the defaults, a plain Zarr array in acquisition
 * order (no axes, no storage order, no pyramid, no OME, no attributes),
 * as 0.4 defined it: it writes 0.4's 56 bytes (on 64-bit platforms) with
 * `struct_size` 56, and never more, so that a program built against an
 * older header keeps its memory. Programs built against this header
 * reach tz_image_init_sized instead (the macro `tz_image_init` at the end
 * of the header). Since 0.4.
 */
int32_t tz_image_init(struct tz_image *image);

/**
 * Fills the first `struct_size` bytes of `image` with the defaults (as
 * tz_image_init) and sets its `struct_size`: `sizeof(tz_image)` as the
 * caller compiled it, from 0.4's 56 bytes to this library's. Any other
 * size is TZ_ERR_INVALID_ARGUMENT and nothing is written. The header's
 * macro `tz_image_init(&image)` calls it with `sizeof image`. Since 0.8.
 */
int32_t tz_image_init_sized(struct tz_image *image, size_t struct_size);

/**
 * Creates a stream from a `tz_config`. On success `*out` holds the stream;
 * on failure it is NULL and `tz_last_error()` says why. A folder store
 * whose disk answers nothing for `store.timeout_s` (default 60 s; C:
 * `tz_options.store_timeout_s` through tz_create_with) while it is made
 * fails with `TZ_ERR_IO`; what was made is removed once the disk answers.
 */
int32_t tz_create(const struct tz_config *config, struct tz_stream **out);

/**
 * tz_create with the image settings of `image` (see `tz_image`; NULL: as
 * tz_create, a plain array). A bad `image.struct_size` is
 * TZ_ERR_INVALID_ARGUMENT; a bad field TZ_ERR_CONFIG naming it
 * (`image.attributes_json`, `image.axes[1].kind`, ...). Since 0.4.
 */
int32_t tz_create_image(const struct tz_config *config,
                        const struct tz_image *image,
                        struct tz_stream **out);

/**
 * Creates a stream from the JSON configuration (see README), with an
 * optional shard callback (`sink` may be NULL when the JSON names a store).
 */
int32_t tz_create_json(const char *config_json,
                       tz_shard_sink_fn sink,
                       void *sink_user_data,
                       struct tz_stream **out);

/**
 * The memory a stream of this configuration would take and the backend it
 * would run on, computed without creating it (nothing is allocated; the
 * GPU is asked for nothing but nvCOMP's sizes). A stream created from the
 * same configuration allocates this within 10%.
 */
int32_t tz_estimate_memory(const struct tz_config *config, struct tz_memory_plan *out);

/**
 * tz_estimate_memory with the image settings of `image` (NULL: none), the
 * pyramid's levels included; refused as tz_create_image refuses. Since 0.4.
 */
int32_t tz_estimate_memory_image(const struct tz_config *config,
                                 const struct tz_image *image,
                                 struct tz_memory_plan *out);

/**
 * tz_estimate_memory for the JSON form of the configuration.
 */
int32_t tz_estimate_memory_json(const char *config_json, struct tz_memory_plan *out);

/**
 * Copies what fits of `data` into free staging memory, never waiting.
 * Returns the bytes taken (0: busy, call again), or a negated status.
 * While such writes outrun the pipeline, staging grows up to
 * `staging_bytes` to absorb them. A
 * write may end mid-element; the next continues the byte stream. After the
 * end of a bounded array: `-TZ_ERR_OVERFLOW`; after tz_flush:
 * `-TZ_ERR_FINISHED`; after a failure: the failure's status, every time.
 */
int64_t tz_write(struct tz_stream *s, const void *data, size_t nbytes);

/**
 * Like tz_write, but waits for staging memory until all `nbytes` are taken
 * or `timeout_ms` passes (negative: no limit). A writer that waits is
 * given no more staging than keeps the pipeline busy (two buffers, a third
 * once the writer and the pipeline have each waited for the other, and one
 * more per other array holding a partial epoch), not the whole
 * `staging_bytes`: more would hold only a backlog. Returns the bytes taken:
 * `nbytes`, or fewer when the time ran out or the end of a bounded array
 * was reached (the next call then returns `-TZ_ERR_OVERFLOW`, as tz_write
 * does); a negated status on error.
 */
int64_t tz_write_all(struct tz_stream *s, const void *data, size_t nbytes, int64_t timeout_ms);

/**
 * Blocks until every byte written is emitted in complete shards (the last
 * partial epoch padded with the fill value) and the store's metadata is
 * final. Terminal: later tz_write calls return `-TZ_ERR_FINISHED`; a second
 * tz_flush returns the first one's status again. A reservation still
 * outstanding (tz_reserve without tz_commit) is given up first: its bytes
 * are not part of the stream. A folder store's disk that answers nothing
 * for `store.timeout_s` (default 60 s; C: `tz_options.store_timeout_s`)
 * ends the wait with `TZ_ERR_IO` (an object store's server: see its
 * `timeout_s`).
 */
int32_t tz_flush(struct tz_stream *s);

/**
 * Replaces the user's attributes (`tz_image.attributes_json`, JSON
 * `"attributes"`) with `json`, a JSON object. The store writes them into
 * the group's zarr.json beside `ome` (the array's zarr.json without OME) at
 * its next metadata update and at tz_flush; a stream without a store
 * writes no metadata. Callable until tz_flush.
 *
 * Returns TZ_OK; TZ_ERR_NULL_ARGUMENT for a NULL stream or `json`;
 * TZ_ERR_INVALID_ARGUMENT for text that is not JSON (the message says where
 * it breaks) or a call from the stream's own sink callback (as tz_write);
 * TZ_ERR_CONFIG for JSON that is not an object or holds the key "ome" (the
 * message names `attributes`); TZ_ERR_FINISHED after tz_flush; a poisoned
 * stream's status. The attributes are unchanged on failure. Since 0.4.
 */
int32_t tz_set_attributes(struct tz_stream *s, const char *json);

/**
 * Frees the stream. Without a prior tz_flush, delivery stops at once: the
 * sink call under way (if any) completes, no further shard is emitted, no
 * partial shard is written; shards already emitted stay, and a store's
 * zarr.json keeps the extent of the emitted shard rows; a sink call held
 * by a folder store's disk that answers nothing for `store.timeout_s` is
 * left to end on its own. NULL is fine.
 * Called from the stream's own sink callback it does nothing (the stream
 * stays open; tz_last_error says why).
 */
void tz_destroy(struct tz_stream *s);

/**
 * The last failure of this stream, NUL-terminated ("" if none). Valid until
 * the next failing call on the stream or tz_destroy. NULL stream: "".
 */
const char *tz_stream_last_error(const struct tz_stream *s);

/**
 * The last failure of any tz_ call on this thread (tz_create* failures
 * included), NUL-terminated ("" if none). Valid until the next failing call
 * on this thread.
 */
const char *tz_last_error(void);

/**
 * A static description of a status code (negated codes accepted).
 */
const char *tz_status_string(int32_t status);

/**
 * The library version, "MAJOR.MINOR.PATCH" (also TZ_VERSION_* in the header).
 */
const char *tz_version(void);

/**
 * Creates a stream of `count` arrays, `arrays[i]` the array of index `i`
 * (tz_write_to), in a root group; `options` (NULL: the defaults) applies
 * to the stream. The stream's shared settings come from
 * `arrays[0].config` (its sink and store included); in the other arrays'
 * configs each of them is 0 (NULL) or the same, else TZ_ERR_CONFIG names
 * it (`arrays[2].config.threads`). A collection, a plate and per-frame
 * metadata need the JSON form (tz_create_json). Since 0.7.
 */
int32_t tz_create_arrays(const struct tz_array *arrays,
                         uint32_t count,
                         const struct tz_options *options,
                         struct tz_stream **out);

/**
 * tz_estimate_memory for the stream tz_create_arrays would create. Since
 * 0.7.
 */
int32_t tz_estimate_memory_arrays(const struct tz_array *arrays,
                                  uint32_t count,
                                  const struct tz_options *options,
                                  struct tz_memory_plan *out);

/**
 * tz_write to array `array` of a stream of several arrays: the index of
 * its entry in the configuration's `arrays` (tz_write writes to array 0).
 * Frames of different arrays may interleave at any frame boundary; a
 * bounded array that is full returns `-TZ_ERR_OVERFLOW` and the others
 * take more. `-TZ_ERR_INVALID_ARGUMENT` for an array that does not exist
 * (the stream stays usable). Since 0.6.
 */
int64_t tz_write_to(struct tz_stream *s, uint32_t array, const void *data, size_t nbytes);

/**
 * tz_write_all to array `array` (see tz_write_to). Since 0.6.
 */
int64_t tz_write_all_to(struct tz_stream *s,
                        uint32_t array,
                        const void *data,
                        size_t nbytes,
                        int64_t timeout_ms);

/**
 * Advances array `array` by `nbytes` bytes of whole frames without data
 * (frames the camera dropped): they read as the fill value. Chunks that
 * hold only skipped frames stay empty in their shard's index, costing no
 * copy and no compression (on an array without a pyramid; with one,
 * skipped frames are compressed as fill-value frames). Non-blocking, as
 * tz_write: returns the bytes skipped, fewer than `nbytes` when staging
 * memory is busy; `-TZ_ERR_INVALID_ARGUMENT` when `nbytes` is not whole
 * frames or the array does not exist; `-TZ_ERR_OVERFLOW` past a bounded
 * array's end. Since 0.7.
 */
int64_t tz_skip(struct tz_stream *s, uint32_t array, uint64_t nbytes);

/**
 * Records `json`, a NUL-terminated JSON object (a time stamp, a stage
 * position, an exposure...), as frame `frame`'s metadata of array
 * `array`: the index along the first dimension, from 0, of a frame
 * already written or skipped. The array's configuration asks for it
 * (`"frame_metadata": {"max_bytes": N}`, an OME image, a store); it lands
 * in the image's `frame_metadata` array with its frames' shard rows.
 * `TZ_ERR_INVALID_ARGUMENT` (the stream goes on) for an array without it,
 * a frame not written yet, text that is not a JSON object or is longer
 * than `max_bytes`, or a frame whose shard row was handed on with the
 * next row's frames. Since 0.7.
 */
int32_t tz_frame_metadata(struct tz_stream *s, uint32_t array, uint64_t frame, const char *json);

/**
 * The index of the array whose key is `key` (as in the configuration's
 * `arrays`), in `*index`. TZ_ERR_INVALID_ARGUMENT, naming the stream's
 * keys, when no array has it; a stream of one array has the key "".
 * Since 0.6.
 */
int32_t tz_array_index(const struct tz_stream *s, const char *key, uint32_t *index);

/**
 * How many arrays the stream writes, in `*count`. Since 0.6.
 */
int32_t tz_array_count(const struct tz_stream *s, uint32_t *count);

/**
 * Fills `out` with the stream's counters. Never waits: safe to call from
 * any thread, also while another is in tz_flush or tz_write_all.
 */
int32_t tz_get_metrics(const struct tz_stream *s, struct tz_metrics *out);

/**
 * Fills `out` with the object store's upload counters (all zero for a
 * stream writing to a folder or a callback). Never waits, like
 * tz_get_metrics. Since 0.3.
 */
int32_t tz_get_upload_metrics(const struct tz_stream *s, struct tz_upload_metrics *out);

/**
 * Fills `out` with the stream's staging memory: what it holds, the most it
 * held, and the writes that found it full. Never waits, like
 * tz_get_metrics. Since 0.11.
 */
int32_t tz_get_staging_metrics(const struct tz_stream *s, struct tz_staging_metrics *out);

/**
 * Fills `options` with the defaults (every field 0: the latency bound of
 * 1000 ms, no device memory cap, a store's waits bounded at 60 s) and
 * `struct_size` with `sizeof(tz_options)` of this version (32 bytes),
 * never writing more. Since 0.5.
 */
int32_t tz_options_init(struct tz_options *options);

/**
 * tz_create_image with `options` (NULL: the defaults); `image` may be
 * NULL too (a plain array). A bad `options.struct_size` is
 * TZ_ERR_INVALID_ARGUMENT; a bad field TZ_ERR_CONFIG naming it
 * (`max_latency_ms`, `device_bytes`, `store.timeout_s`, or
 * `options.store_timeout_s` without a store). Since 0.5.
 */
int32_t tz_create_with(const struct tz_config *config,
                       const struct tz_image *image,
                       const struct tz_options *options,
                       struct tz_stream **out);

/**
 * tz_estimate_memory_image with `options` (NULL: the defaults): under a
 * `device_bytes` cap, the memory of the batches that fit it. Since 0.5.
 */
int32_t tz_estimate_memory_with(const struct tz_config *config,
                                const struct tz_image *image,
                                const struct tz_options *options,
                                struct tz_memory_plan *out);

/**
 * Frees the memory the process keeps for its next stream: when a GPU
 * stream is destroyed its page-locked staging and output buffers are kept
 * for 30 s, so that a stream created meanwhile with buffers of the same
 * sizes starts without allocating them (about a second per GiB); a CPU
 * stream's staging and buffers of compressed epochs are kept the same way (a fresh one's pages are faulted in as it is first
 * written). Call it when no
 * stream follows soon and the memory is needed elsewhere. Returns the
 * bytes freed. Since 0.5.
 */
uint64_t tz_release_cached_memory(void);

/**
 * Repairs a store whose stream was killed before its flush (kill -9, a
 * power cut): removes the `*.partial` files of writes cut short and, for
 * each array growing along an unbounded dimension 0, moves the extent in
 * its zarr.json up to cover every complete shard row on disk. The path is
 * the store's root (an array, or a group: an OME-Zarr image, a collection,
 * a plate, recovered with every array beneath it) or a node inside it
 * (an image, an array), recovered alone.
 * Refused while a stream holds the store, or the store around the path
 * (TZ_ERR_EXISTS, naming its process). A disk that
 * answers nothing for 60 s (the default `store.timeout_s`) ends the call
 * with TZ_ERR_IO; the repair goes on once the disk answers. `out` may be
 * NULL; otherwise it receives what was done.
 */
int32_t tz_recover(const char *store_path, struct tz_recovery *out);

/**
 * tz_recover with `options` (NULL: the defaults): its `store_timeout_s`
 * (1 to 3600; 0 = 60) bounds the wait on a disk that answers nothing, as
 * a stream's does; its other fields do not apply. A bad
 * `options.struct_size` is TZ_ERR_INVALID_ARGUMENT, a bound out of range
 * TZ_ERR_CONFIG naming `options.store_timeout_s`. Since 0.10.
 */
int32_t tz_recover_with(const char *store_path,
                        const struct tz_options *options,
                        struct tz_recovery *out);

/**
 * Hands the caller free staging memory to write the next bytes of the
 * stream into itself (a camera SDK's or frame grabber's DMA target, a
 * decoder's output), saving tz_write's copy: `*ptr` and `*nbytes` get
 * its address and length. Never waits: when no staging memory is free,
 * `*ptr` is NULL, `*nbytes` 0 and no reservation is held (call again, as
 * after a tz_write that returns 0).
 *
 * A reservation spans the rest of one staging buffer up to where the
 * buffer is handed on (whole epochs, `tile[0]` planes of dimension 0: a
 * stream's first buffers after one epoch, one, two, four..., later ones
 * when full), at most what a bounded array still takes. Staging buffers
 * start on a page boundary, so after writes and commits of whole frames a
 * reservation starts and ends on frame boundaries; otherwise it starts
 * where the last byte ended and a frame may straddle two reservations. On the GPU backend the memory is
 * page-locked (the device's DMA reads it directly).
 *
 * One reservation at a time: tz_reserve again, tz_write or tz_write_all
 * before tz_commit are refused (TZ_ERR_INVALID_ARGUMENT); the reservation
 * holds back the latency bound's hand-off of its buffer until the commit.
 * tz_flush gives up a reservation still outstanding (its bytes do not
 * count) and tz_destroy frees it. Returns TZ_OK, TZ_ERR_NULL_ARGUMENT,
 * TZ_ERR_OVERFLOW past the end of a bounded array, TZ_ERR_FINISHED after
 * tz_flush, or a poisoned stream's status. Since 0.5.
 */
int32_t tz_reserve(struct tz_stream *s,
                   void **ptr,
                   size_t *nbytes);

/**
 * tz_reserve for array `array` of a stream of several arrays (the index
 * of its entry in the configuration's `arrays`; see tz_array_index); a
 * reservation holds back writes to every array until its tz_commit.
 * TZ_ERR_INVALID_ARGUMENT for an array that does not exist. Since 0.6.
 */
int32_t tz_reserve_to(struct tz_stream *s, uint32_t array, void **ptr, size_t *nbytes);

/**
 * Passes on the first `nbytes` bytes written into the reservation of the
 * last tz_reserve, and ends it (0 gives it up). Returns TZ_OK;
 * TZ_ERR_INVALID_ARGUMENT for more bytes than the reservation holds (the
 * reservation stays, nothing in it is lost: commit again) or without a
 * reservation; TZ_ERR_FINISHED after tz_flush; a poisoned stream's
 * status. Since 0.5.
 */
int32_t tz_commit(struct tz_stream *s, size_t nbytes);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

/**
 * Programs built against this header fill the tz_image they were compiled
 * with, whatever its size: tz_image_init(&image) is
 * tz_image_init_sized(&image, sizeof image). The function tz_image_init
 * itself, which programs built against 0.4 to 0.7 call, keeps writing
 * 0.4's struct. (Through an FFI, call tz_image_init_sized with the size of
 * the struct you declare.)
 */
#define tz_image_init(image) tz_image_init_sized((image), sizeof *(image))

#endif  /* TILEDZARR_H */
