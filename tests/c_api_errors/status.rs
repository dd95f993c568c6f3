//! Status strings, the version and memory estimates without a stream.

use super::*;

#[test]
fn status_strings_and_version() {
    for s in tz_status::ALL {
        let text = unsafe { CStr::from_ptr(tz_status_string(s as i32)) };
        assert!(!text.to_bytes().is_empty());
        assert_eq!(text, unsafe {
            CStr::from_ptr(tz_status_string(-(s as i32)))
        });
    }
    let unknown = unsafe { CStr::from_ptr(tz_status_string(999)) };
    assert_eq!(unknown.to_str().unwrap(), "unknown status");
    let v = unsafe { CStr::from_ptr(tz_version()) }.to_str().unwrap();
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    let _ = std::ptr::null::<c_void>();
}

#[test]
fn memory_estimates_without_creating_a_stream() {
    let json = cstring(&json_with(r#", "backend": "cpu", "staging_bytes": 1024"#));
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_json(json.as_ptr(), plan.as_mut_ptr()),
        OK
    );
    let plan = unsafe { plan.assume_init() };
    assert_eq!(plan.backend, tz_backend::TZ_BACKEND_CPU as u32);
    assert_eq!(plan.device_bytes, 0);
    assert!(
        plan.host_bytes >= 1024,
        "staging alone is 1024 bytes: {}",
        plan.host_bytes
    );
    let nul = code(tz_status::TZ_ERR_NULL_ARGUMENT);
    assert_eq!(
        tz_estimate_memory_json(json.as_ptr(), std::ptr::null_mut()),
        nul
    );
    assert_eq!(
        tz_estimate_memory(std::ptr::null(), std::ptr::null_mut()),
        nul
    );
    let bad = cstring(r#"{"dtype": "uint16", "dimensions": [{"size": 4, "tile": 0}]}"#);
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_json(bad.as_ptr(), plan.as_mut_ptr()),
        code(tz_status::TZ_ERR_CONFIG)
    );
    assert!(last_error().contains("dimensions[0].tile"));
    let trailing = cstring(&format!("{} garbage", json_with("")));
    assert_eq!(
        tz_estimate_memory_json(trailing.as_ptr(), plan.as_mut_ptr()),
        code(tz_status::TZ_ERR_CONFIG)
    );
    assert!(last_error().contains("text after the configuration"));
}
