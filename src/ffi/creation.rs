//! What the C ABI's stream creation and memory estimates do behind their
//! entry points: a configuration from the C structs or JSON, checked and
//! turned into a stream (with the caller's sink) or a memory plan.

use super::*;
use callback_sink::CallbackSink;

pub(super) fn create(
    config: Result<StreamConfig, Error>,
    sink: tz_shard_sink_fn,
    sink_user_data: *mut c_void,
    out: *mut *mut tz_stream,
) -> Result<i32, Error> {
    let id = guard::next_stream_id();
    let sink =
        CallbackSink::new(sink, sink_user_data, id).map(|s| Box::new(s) as Box<dyn ShardSink>);
    let stream = Stream::create(&config?, sink)?;
    let handle = Box::new(tz_stream {
        id,
        stats: stream.stats(),
        stream: Mutex::new(Open {
            lease: None,
            stream,
        }),
        errors: ErrorSlot::default(),
    });
    // SAFETY: `out` was checked non-NULL by the caller of this function.
    unsafe { *out = Box::into_raw(handle) };
    Ok(tz_status::TZ_OK as i32)
}

/// The configuration of `config` and `image` (NULL: none), converted.
///
/// # Safety
/// `config` is non-NULL and valid; `image` is NULL or a valid tz_image.
pub(super) unsafe fn config_of(
    config: &tz_config,
    image: *const tz_image,
) -> Result<Config, Error> {
    // SAFETY: the caller's tz_image is NULL or valid (see tz_image docs).
    let image = unsafe { convert::image_from_c(image) }?;
    // SAFETY: the caller's tz_config and tz_image are valid.
    unsafe { convert::config_from_c(config, image.as_ref()) }
}

pub(super) fn create_image_impl(
    what: &str,
    config: *const tz_config,
    image: *const tz_image,
    out: *mut *mut tz_stream,
) -> i32 {
    guard(what, None, status_of, || {
        if out.is_null() {
            return Err(Error::NullArgument("out"));
        }
        // SAFETY: non-NULL, points to the caller's `tz_stream*`.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: NULL is checked; otherwise the caller passes a valid tz_config.
        let c = unsafe { config.as_ref() }.ok_or(Error::NullArgument("config"))?;
        // SAFETY: the caller's tz_config and tz_image are valid (see their docs).
        let cfg = unsafe { config_of(c, image) };
        create(cfg.map(StreamConfig::from), c.sink, c.sink_user_data, out)
    })
}

pub(super) fn backend_code(kind: crate::backend::BackendKind) -> u32 {
    match kind {
        crate::backend::BackendKind::Cpu => tz_backend::TZ_BACKEND_CPU as u32,
        crate::backend::BackendKind::Gpu => tz_backend::TZ_BACKEND_GPU as u32,
    }
}

pub(super) fn estimate(
    config: Result<StreamConfig, Error>,
    out: *mut tz_memory_plan,
) -> Result<i32, Error> {
    if out.is_null() {
        return Err(Error::NullArgument("out"));
    }
    let (kind, plan) = crate::pipeline::estimate(&config?.validate()?)?;
    let p = tz_memory_plan {
        device_bytes: plan.device_bytes,
        pinned_bytes: plan.pinned_bytes,
        host_bytes: plan.host_bytes,
        backend: backend_code(kind),
    };
    // SAFETY: non-NULL (checked); the caller provides a writable tz_memory_plan.
    unsafe { out.write(p) };
    Ok(tz_status::TZ_OK as i32)
}

pub(super) fn estimate_image_impl(
    what: &str,
    config: *const tz_config,
    image: *const tz_image,
    out: *mut tz_memory_plan,
) -> i32 {
    guard(what, None, status_of, || {
        // SAFETY: NULL is checked; otherwise the caller passes a valid tz_config.
        let c = unsafe { config.as_ref() }.ok_or(Error::NullArgument("config"))?;
        // SAFETY: the caller's tz_config and tz_image are valid (see their docs).
        estimate(unsafe { config_of(c, image) }.map(StreamConfig::from), out)
    })
}
