//! Recovery of a store whose stream was killed (tz_recover,
//! tz_recover_with).

use super::types::{tz_options, tz_recovery};
use super::{convert, guard, status_of, tz_status};
use crate::error::Error;
use std::ffi::c_char;

/// Repairs a store whose stream was killed before its flush (kill -9, a
/// power cut): removes the `*.partial` files of writes cut short and, for
/// each array growing along an unbounded dimension 0, moves the extent in
/// its zarr.json up to cover every complete shard row on disk. The path is
/// the store's root (an array, or a group: an OME-Zarr image, a collection,
/// a plate, recovered with every array beneath it) or a node inside it
/// (an image, an array), recovered alone.
/// Refused while a stream holds the store, or the store around the path
/// (TZ_ERR_EXISTS, naming its process). A disk that
/// answers nothing for 60 s (the default `store.timeout_s`) ends the call
/// with TZ_ERR_IO; the repair goes on once the disk answers. `out` may be
/// NULL; otherwise it receives what was done.
#[no_mangle]
pub extern "C" fn tz_recover(store_path: *const c_char, out: *mut tz_recovery) -> i32 {
    guard("tz_recover", None, status_of, || {
        recover_impl(store_path, std::ptr::null(), out)
    })
}

/// tz_recover with `options` (NULL: the defaults): its `store_timeout_s`
/// (1 to 3600; 0 = 60) bounds the wait on a disk that answers nothing, as
/// a stream's does; its other fields do not apply. A bad
/// `options.struct_size` is TZ_ERR_INVALID_ARGUMENT, a bound out of range
/// TZ_ERR_CONFIG naming `options.store_timeout_s`. Since 0.10.
#[no_mangle]
pub extern "C" fn tz_recover_with(
    store_path: *const c_char,
    options: *const tz_options,
    out: *mut tz_recovery,
) -> i32 {
    guard("tz_recover_with", None, status_of, || {
        recover_impl(store_path, options, out)
    })
}

fn recover_impl(
    store_path: *const c_char,
    options: *const tz_options,
    out: *mut tz_recovery,
) -> Result<i32, Error> {
    // SAFETY: NULL or a NUL-terminated string, by the C contract.
    let path = unsafe { convert::read_str(store_path, "store_path") }?
        .ok_or(Error::NullArgument("store_path"))?;
    let path = std::path::Path::new(&path);
    // SAFETY: NULL or the caller's tz_options (see its docs).
    let bound = unsafe { convert::options_from_c(options) }?
        .map(|o| convert::store_bound(&o))
        .transpose()?
        .flatten();
    let r = crate::sink::recover_within(path, bound)?;
    if !out.is_null() {
        let report = tz_recovery {
            partial_files_removed: r.partial_files_removed,
            planes_before: r.planes_before,
            planes_after: r.planes_after,
            shards_beyond: r.shards_beyond,
        };
        // SAFETY: non-NULL; the caller provides a writable tz_recovery.
        unsafe { out.write(report) };
    }
    Ok(tz_status::TZ_OK as i32)
}
