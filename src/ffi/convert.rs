//! `tz_config` and `tz_image` (C) to [`Config`] (Rust). Every pointer is
//! checked here.

use super::types::{
    tz_axis, tz_config, tz_dimension, tz_downsample_method, tz_image, tz_options, tz_page_cache,
};
use crate::config::{
    AxisKind, BackendChoice, Cname, Codec, Config, DType, Dimension, IndexLocation, Method,
    Multiscale, Ome, OmeSettings, Shuffle, Store,
};
use crate::error::{Error, Result};
use crate::layout::MAX_RANK;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;

fn bad(field: &str, rule: String) -> Error {
    Error::Config(crate::config::ConfigError::new(field, rule))
}

/// Reads a NUL-terminated UTF-8 string; `field` names it in errors.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub unsafe fn read_str(p: *const c_char, field: &str) -> Result<Option<String>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| bad(field, "must be valid UTF-8".into()))
}

/// A JSON text field: NULL for none; malformed JSON is a configuration
/// error naming `field`, with `example` of what it takes.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn read_json(
    p: *const c_char,
    field: &str,
    example: &str,
) -> Result<Option<serde_json::Value>> {
    // SAFETY: the caller's contract, passed on.
    let Some(text) = (unsafe { read_str(p, field) })? else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        bad(
            field,
            format!("is not valid JSON ({e}): give a JSON object such as {example}"),
        )
    })
}

/// The struct_size of 0.4's `tz_image`, the first one: the end of its last
/// field (`attributes_json`). The smallest struct a caller may pass.
pub const TZ_IMAGE_0_4_SIZE: usize =
    std::mem::offset_of!(tz_image, attributes_json) + std::mem::size_of::<*const c_char>();

/// A `tz_image` with every field at its default, `struct_size` this
/// library's.
pub fn image_defaults() -> tz_image {
    tz_image {
        struct_size: std::mem::size_of::<tz_image>(),
        axes: std::ptr::null(),
        storage_order: std::ptr::null(),
        multiscale_levels: 0,
        multiscale_method: tz_downsample_method::TZ_DOWNSAMPLE_MEAN as u32,
        multiscale: 0,
        ome: 0,
        ome_name: std::ptr::null(),
        attributes_json: std::ptr::null(),
        omero_json: std::ptr::null(),
    }
}

/// Refuses a `tz_image` size other than 0.4's to this library's.
pub fn check_image_size(size: usize) -> Result<()> {
    let ours = std::mem::size_of::<tz_image>();
    if (TZ_IMAGE_0_4_SIZE..=ours).contains(&size) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "struct_size is {size}: a tz_image is {TZ_IMAGE_0_4_SIZE} (0.4) to {ours} bytes \
         (version {}); pass sizeof(tz_image)",
        env!("CARGO_PKG_VERSION")
    )))
}

/// Writes the first `size` bytes of the default `tz_image`, its
/// `struct_size` set to `size`.
///
/// # Safety
/// `p` points to at least `size` writable bytes, and `size` is at most
/// `size_of::<tz_image>()`.
pub unsafe fn write_image_defaults(p: *mut tz_image, size: usize) {
    let mut defaults = image_defaults();
    defaults.struct_size = size;
    // SAFETY: the caller's contract; `defaults` holds a whole tz_image.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&defaults as *const tz_image).cast::<u8>(),
            p.cast::<u8>(),
            size,
        )
    };
}

/// The caller's `tz_image`, read up to its `struct_size` (fields past it
/// keep their defaults). NULL: none.
///
/// # Safety
/// `p` is NULL or points to at least `(*p).struct_size` readable bytes
/// that start with a `size_t`.
pub unsafe fn image_from_c(p: *const tz_image) -> Result<Option<tz_image>> {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        read_sized(
            p,
            TZ_IMAGE_0_4_SIZE,
            image_defaults(),
            "image",
            "tz_image",
            "0.4",
        )
    }
}

/// The struct_size of 0.5's `tz_options`, the first one.
const TZ_OPTIONS_0_5_SIZE: usize =
    std::mem::offset_of!(tz_options, device_bytes) + std::mem::size_of::<u64>();

/// A `tz_options` with every field at its default, `struct_size` this
/// library's.
pub fn options_defaults() -> tz_options {
    tz_options {
        struct_size: std::mem::size_of::<tz_options>(),
        max_latency_ms: 0,
        device_bytes: 0,
        store_timeout_s: 0,
        store_page_cache: 0,
    }
}

/// The caller's `tz_options`, read up to its `struct_size`. NULL: none.
///
/// # Safety
/// As [`image_from_c`].
pub unsafe fn options_from_c(p: *const tz_options) -> Result<Option<tz_options>> {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        read_sized(
            p,
            TZ_OPTIONS_0_5_SIZE,
            options_defaults(),
            "options",
            "tz_options",
            "0.5",
        )
    }
}

/// Applies the options to a configuration (0: the default); the
/// configuration's own checks then judge their values.
pub fn apply_options(config: &mut Config, o: &tz_options) -> Result<()> {
    config.max_latency_ms = (o.max_latency_ms != 0).then_some(o.max_latency_ms);
    config.device_bytes = (o.device_bytes != 0).then_some(o.device_bytes);
    if o.store_timeout_s != 0 {
        let Some(store) = config.store.as_mut() else {
            return Err(bad(
                "options.store_timeout_s",
                "bounds the waits of a store, and the stream has none (store_path is NULL)".into(),
            ));
        };
        store.timeout_s = Some(o.store_timeout_s);
    }
    let page_cache = match o.store_page_cache {
        n if n == tz_page_cache::TZ_PAGE_CACHE_DEFAULT as u32 => None,
        n if n == tz_page_cache::TZ_PAGE_CACHE_THROUGH as u32 => Some(true),
        n if n == tz_page_cache::TZ_PAGE_CACHE_AROUND as u32 => Some(false),
        n => {
            return Err(bad(
                "options.store_page_cache",
                format!("unknown tz_page_cache value {n} (0 default, 1 through, 2 around)"),
            ))
        }
    };
    if page_cache.is_some() {
        let Some(store) = config.store.as_mut() else {
            return Err(bad(
                "options.store_page_cache",
                "chooses how a store writes its files, and the stream has none \
                 (store_path is NULL)"
                    .into(),
            ));
        };
        store.page_cache = page_cache;
    }
    Ok(())
}

/// The bound `options.store_timeout_s` puts on a store's waits (`None`: 0,
/// the default).
pub fn store_bound(o: &tz_options) -> Result<Option<std::time::Duration>> {
    match o.store_timeout_s {
        0 => Ok(None),
        t => Ok(Some(crate::config::store_timeout(
            "options.store_timeout_s",
            t,
        )?)),
    }
}

/// A struct versioned by its leading `size_t struct_size`, read up to that
/// size over `defaults` (fields past it keep their defaults). `T`'s first
/// field is that size; `first` is the size of the first version.
///
/// # Safety
/// `p` is NULL or points to at least `(*p).struct_size` readable bytes
/// that start with a `size_t`.
unsafe fn read_sized<T>(
    p: *const T,
    first: usize,
    defaults: T,
    field: &str,
    name: &str,
    since: &str,
) -> Result<Option<T>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: every version of the struct starts with its size_t struct_size.
    let size = unsafe { p.cast::<usize>().read() };
    let ours = std::mem::size_of::<T>();
    if size < first {
        return Err(Error::InvalidArgument(format!(
            "{field}.struct_size is {size}, smaller than any {name} ({first} bytes \
             in {since}): set it with {name}_init"
        )));
    }
    if size > ours {
        return Err(Error::InvalidArgument(format!(
            "{field}.struct_size is {size}, larger than this library's {name} ({ours} bytes, \
             version {}): the program was built against a newer tiledzarr.h, whose fields \
             this library cannot honour",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let mut out = defaults;
    // SAFETY: the caller's struct holds `size` readable bytes, and `size`
    // is at most our struct's; both are prefixes of one layout.
    unsafe {
        std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&mut out as *mut T).cast::<u8>(), size)
    };
    Ok(Some(out))
}

/// # Safety
/// `c` is a valid `tz_config`: `dimensions` points to `rank` entries and its
/// strings are NULL or NUL-terminated; so is `image` (`axes` and
/// `storage_order` NULL or `rank` entries).
pub unsafe fn config_from_c(c: &tz_config, image: Option<&tz_image>) -> Result<Config> {
    let defaults = image_defaults();
    let img = image.unwrap_or(&defaults);
    let dtype = DType::ALL
        .get(c.dtype as usize)
        .copied()
        .ok_or_else(|| bad("dtype", format!("unknown tz_dtype value {}", c.dtype)))?;
    if c.rank == 0 || c.rank as usize > MAX_RANK {
        return Err(bad(
            "rank",
            format!("must be 1 to {MAX_RANK}, got {}", c.rank),
        ));
    }
    if c.dimensions.is_null() {
        return Err(Error::NullArgument("config.dimensions"));
    }
    // SAFETY: non-NULL, and the caller guarantees `rank` entries.
    let dims: &[tz_dimension] =
        unsafe { std::slice::from_raw_parts(c.dimensions, c.rank as usize) };
    let mut dimensions = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        // SAFETY: the caller guarantees NULL or a NUL-terminated string.
        let name = unsafe { read_str(d.name, &format!("dimensions[{i}].name")) }?;
        dimensions.push(Dimension {
            name,
            ..Dimension::new(d.size, d.tile, d.tiles_per_shard)
        });
    }
    if !img.axes.is_null() {
        // SAFETY: non-NULL, and the caller guarantees `rank` entries.
        let axes: &[tz_axis] = unsafe { std::slice::from_raw_parts(img.axes, c.rank as usize) };
        for (i, (a, d)) in axes.iter().zip(&mut dimensions).enumerate() {
            // SAFETY: the caller guarantees NULL or a NUL-terminated string.
            unsafe { axis_into(a, i, d) }?;
        }
    }
    // SAFETY: the caller guarantees NULL or `rank` NUL-terminated strings.
    let storage_order = unsafe { storage_order(img.storage_order, c.rank as usize) }?;
    let method = match img.multiscale_method {
        0 => Method::Mean,
        1 => Method::Min,
        2 => Method::Max,
        3 => Method::Median,
        4 => Method::Decimate,
        n => {
            return Err(bad(
                "image.multiscale_method",
                format!("unknown tz_downsample_method value {n}"),
            ))
        }
    };
    let multiscale = if img.multiscale != 0 {
        Some(Multiscale {
            levels: img.multiscale_levels,
            method,
        })
    } else if img.multiscale_levels != 0 || method != Method::Mean {
        let field = if img.multiscale_levels != 0 {
            "image.multiscale_levels"
        } else {
            "image.multiscale_method"
        };
        return Err(bad(
            field,
            "applies to a pyramid: set multiscale to 1 too (or leave this field 0)".into(),
        ));
    } else {
        None
    };
    // SAFETY: the caller guarantees NULL or a NUL-terminated string.
    let name = unsafe { read_str(img.ome_name, "image.ome_name") }?;
    // SAFETY: as above.
    let omero = unsafe { read_json(img.omero_json, "image.omero_json", r#"{"channels": [...]}"#) }?;
    let is_ome = img.ome != 0 || multiscale.is_some();
    let ome = match (name.is_some() || omero.is_some(), is_ome) {
        (true, true) => Some(Ome::Settings(OmeSettings { name, omero })),
        (true, false) => {
            let field = if name.is_some() {
                "image.ome_name"
            } else {
                "image.omero_json"
            };
            return Err(bad(
                field,
                "belongs to an OME-Zarr image: set ome (or multiscale) to 1 too".into(),
            ));
        }
        (false, _) if img.ome != 0 => Some(Ome::Enabled(true)),
        (false, _) => None,
    };
    // SAFETY: the caller guarantees NULL or a NUL-terminated string.
    let attributes = unsafe {
        read_json(
            img.attributes_json,
            "image.attributes_json",
            r#"{"key": 1}"#,
        )
    }?;
    let codec = match c.codec {
        0 => Codec::Zstd { level: c.level },
        1 => Codec::None,
        // The JSON form also offers bit shuffle and no shuffle.
        2 => Codec::Blosc {
            level: c.level,
            shuffle: Shuffle::Byte,
            cname: Cname::Zstd,
        },
        3 => Codec::Gzip { level: c.level },
        n => return Err(bad("codec", format!("unknown tz_codec value {n}"))),
    };
    let backend = match c.backend {
        0 => BackendChoice::Auto,
        1 => BackendChoice::Cpu,
        2 => BackendChoice::Gpu,
        n => return Err(bad("backend", format!("unknown tz_backend value {n}"))),
    };
    let index_location = match c.index_location {
        0 => IndexLocation::End,
        1 => IndexLocation::Start,
        n => {
            return Err(bad(
                "index_location",
                format!("unknown tz_index_location value {n}"),
            ))
        }
    };
    // An `s3://` path names an object store; its endpoint and region come
    // from the environment (AWS_ENDPOINT_URL, AWS_REGION).
    // SAFETY: the caller guarantees NULL or a NUL-terminated string.
    let store = unsafe { read_str(c.store_path, "store_path") }?.map(|p| {
        let (path, url) = if p.contains("://") {
            (PathBuf::new(), Some(p))
        } else {
            (PathBuf::from(p), None)
        };
        Store {
            path,
            url,
            overwrite: c.overwrite != 0,
            fsync: c.store_skip_fsync == 0,
            ..Store::default()
        }
    });
    Ok(Config {
        dtype,
        dimensions,
        codec,
        backend,
        store,
        index_location,
        threads: c.threads,
        staging_bytes: (c.staging_bytes != 0).then_some(c.staging_bytes),
        device: c.device,
        device_bytes: None,
        max_latency_ms: None,
        storage_order,
        multiscale,
        ome,
        attributes,
        // The JSON form's only.
        frame_metadata: None,
    })
}

/// Copies axis `i` of `tz_image.axes` into its dimension.
///
/// # Safety
/// `a.unit` is NULL or a NUL-terminated string.
unsafe fn axis_into(a: &tz_axis, i: usize, d: &mut Dimension) -> Result<()> {
    let field = |f: &str| format!("image.axes[{i}].{f}");
    d.kind = match a.kind {
        0 => None,
        1 => Some(AxisKind::Time),
        2 => Some(AxisKind::Channel),
        3 => Some(AxisKind::Space),
        4 => Some(AxisKind::Other),
        n => {
            return Err(bad(
                &field("kind"),
                format!("unknown tz_axis_kind value {n}"),
            ))
        }
    };
    // SAFETY: the caller guarantees NULL or a NUL-terminated string.
    d.unit = unsafe { read_str(a.unit, &field("unit")) }?;
    // 0 is the default (1.0); the config's rules judge the rest, naming
    // dimensions[i].
    d.scale = (a.scale != 0.0).then_some(a.scale);
    d.translation = (a.translation != 0.0).then_some(a.translation);
    d.downsample = match a.downsample {
        -1 => None,
        0 => Some(false),
        1 => Some(true),
        n => {
            return Err(bad(
                &field("downsample"),
                format!("must be -1 (the default), 0 (no) or 1 (yes), got {n}"),
            ))
        }
    };
    Ok(())
}

/// `tz_image.storage_order` as names.
///
/// # Safety
/// `p` is NULL or points to `rank` pointers, each NULL or a NUL-terminated
/// string.
unsafe fn storage_order(p: *const *const c_char, rank: usize) -> Result<Option<Vec<String>>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the caller guarantees `rank` entries.
    let names = unsafe { std::slice::from_raw_parts(p, rank) };
    let mut out = Vec::with_capacity(rank);
    for (i, &n) in names.iter().enumerate() {
        let field = format!("image.storage_order[{i}]");
        // SAFETY: the caller guarantees NULL or a NUL-terminated string.
        let name = unsafe { read_str(n, &field) }?.ok_or_else(|| {
            bad(
                &field,
                format!("is NULL: give {rank} dimension names (or NULL for the acquisition order)"),
            )
        })?;
        out.push(name);
    }
    Ok(Some(out))
}
