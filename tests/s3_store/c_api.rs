//! The object store through the C ABI.

use super::*;

/// Through the C ABI: `store_path` takes an `s3://` URL (a bad one is a
/// configuration error naming `store.url`), and tz_get_upload_metrics
/// counts what the server accepted.
#[test]
fn c_api_store_path_url_and_upload_metrics() {
    use std::ffi::{c_void, CStr, CString};
    use tiledzarr::ffi::*;
    let last = || {
        unsafe { CStr::from_ptr(tz_last_error()) }
            .to_string_lossy()
            .into_owned()
    };
    let dims = [c_dim(0, 2, 1), c_dim(16, 8, 2)];
    let mut cfg = std::mem::MaybeUninit::<tz_config>::uninit();
    assert_eq!(tz_config_init(cfg.as_mut_ptr()), 0);
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.rank = 2;
    cfg.dimensions = dims.as_ptr();
    cfg.backend = tz_backend::TZ_BACKEND_CPU as u32;
    let mut s = std::ptr::null_mut();
    for (url, says) in [
        ("ftp://bucket/a.zarr", "unknown scheme"),
        ("s3://x/a.zarr", "3 to 63"),
    ] {
        let path = CString::new(url).unwrap();
        cfg.store_path = path.as_ptr();
        assert_eq!(tz_create(&cfg, &mut s), tz_status::TZ_ERR_CONFIG as i32);
        assert!(
            last().contains("store.url") && last().contains(says),
            "{}",
            last()
        );
    }
    // A stream without an object store reports zero uploads.
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().join("f.zarr").to_str().unwrap()).unwrap();
    cfg.store_path = path.as_ptr();
    assert_eq!(tz_create(&cfg, &mut s), 0, "{}", last());
    let mut u = tz_upload_metrics {
        bytes_uploaded: 7,
        objects_uploaded: 7,
        uploads_in_flight: 7,
    };
    assert_eq!(tz_get_upload_metrics(s, &mut u), 0);
    assert_eq!(
        (u.bytes_uploaded, u.objects_uploaded, u.uploads_in_flight),
        (0, 0, 0)
    );
    tz_destroy(s);
    assert_eq!(
        tz_get_upload_metrics(std::ptr::null(), &mut u),
        tz_status::TZ_ERR_NULL_ARGUMENT as i32
    );

    let Some(bin) = server::binary("c_api_store_path_url_and_upload_metrics") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let srv = Server::start(&bin, tmp.path());
    srv.bucket("capi");
    let json = format!(
        r#"{{"dtype": "uint8", "backend": "cpu",
            "dimensions": [{{"size": 0, "tile": 2}}, {{"size": 16, "tile": 8, "tiles_per_shard": 2}}],
            "store": {{"url": "s3://capi/a.zarr", "endpoint": "{}"}}}}"#,
        srv.endpoint()
    );
    let json = CString::new(json).unwrap();
    assert_eq!(
        tz_create_json(json.as_ptr(), None, std::ptr::null_mut(), &mut s),
        0,
        "{}",
        last()
    );
    let data = [3u8; 16 * 10];
    assert_eq!(
        tz_write_all(s, data.as_ptr() as *const c_void, data.len(), -1),
        data.len() as i64
    );
    assert_eq!(tz_flush(s), 0);
    assert_eq!(tz_get_upload_metrics(s, &mut u), 0);
    // 5 shards, zarr.json at create and at each new extent (the final one
    // equals the last): every object complete at flush. Rows that reach
    // the store together move the extent once, so 1 to 5 extents.
    assert_eq!(u.uploads_in_flight, 0);
    let extents = u.objects_uploaded.checked_sub(5 + 1);
    assert!(
        extents.is_some_and(|e| (1..=5).contains(&e)),
        "{} objects uploaded",
        u.objects_uploaded
    );
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), 0);
    let m = unsafe { m.assume_init() };
    assert!(
        u.bytes_uploaded > m.bytes_out,
        "{} <= {}",
        u.bytes_uploaded,
        m.bytes_out
    );
    tz_destroy(s);
}
