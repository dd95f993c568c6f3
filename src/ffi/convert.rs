//! `tz_config` (C) to [`Config`] (Rust). Every pointer is checked here.

use super::types::{tz_config, tz_dimension};
use crate::config::{
    BackendChoice, Cname, Codec, Config, DType, Dimension, IndexLocation, Shuffle, Store,
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

/// # Safety
/// `c` is a valid `tz_config`: `dimensions` points to `rank` entries and its
/// strings are NULL or NUL-terminated.
pub unsafe fn config_from_c(c: &tz_config) -> Result<Config> {
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
        storage_order: None,
        multiscale: None,
        ome: None,
        attributes: None,
    })
}
