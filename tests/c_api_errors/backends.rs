//! The backend asked for: the GPU used or refused with the reason, and a
//! tile past its compressors' limit run on the CPU under `auto`.

use super::*;

#[test]
fn the_gpu_backend_is_used_or_refused_with_the_reason() {
    let json = json_with(r#", "backend": "gpu""#);
    if test_backend() == "gpu" {
        // On a GPU machine the GPU backend must come up.
        let sink = Collected::default();
        let s = create_json(&json, Some(&sink)).unwrap_or_else(|e| panic!("{e:?}"));
        let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
        assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), OK);
        assert_eq!(
            unsafe { m.assume_init() }.backend,
            tz_backend::TZ_BACKEND_GPU as u32
        );
        tz_destroy(s);
    } else {
        // Without one, an error that names what is missing; no fallback.
        assert_create_fails(
            &json,
            tz_status::TZ_ERR_BACKEND_UNAVAILABLE,
            &["gpu", "requested, but"],
        );
    }
}

#[test]
fn a_tile_past_the_gpu_compressors_limit_is_refused_by_the_gpu_and_runs_on_the_cpu_under_auto() {
    // One tile of 4096 x 2049 uint16 (16 MiB and 8 KiB): past nvCOMP's
    // LZ4 chunk limit of 16 MiB. Refused on any machine, GPU or not: the
    // reason names the limit.
    let big = |backend: &str| {
        format!(
            r#"{{"dtype": "uint16", "backend": "{backend}",
                "codec": {{"name": "blosc", "level": 1, "cname": "lz4"}},
                "dimensions": [{{"size": 0, "tile": 1}}, {{"size": 4096, "tile": 4096}},
                               {{"size": 2049, "tile": 2049}}]}}"#
        )
    };
    let (gpu, auto) = (big("gpu"), big("auto"));
    assert_create_fails(
        &gpu,
        tz_status::TZ_ERR_BACKEND_UNAVAILABLE,
        &["gpu", "requested, but", "16785408 bytes", "LZ4 chunk limit"],
    );
    // The memory estimate makes the same choice.
    let (gpu_c, auto_c) = (cstring(&gpu), cstring(&auto));
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_json(gpu_c.as_ptr(), plan.as_mut_ptr()),
        code(tz_status::TZ_ERR_BACKEND_UNAVAILABLE)
    );
    assert!(last_error().contains("LZ4 chunk limit"), "{}", last_error());
    // "auto" falls back to the CPU and says why.
    assert_eq!(
        tz_estimate_memory_json(auto_c.as_ptr(), plan.as_mut_ptr()),
        OK
    );
    assert_eq!(
        unsafe { plan.assume_init() }.backend,
        tz_backend::TZ_BACKEND_CPU as u32
    );
    let sink = Collected::default();
    let s = create_json(&auto, Some(&sink)).unwrap_or_else(|e| panic!("{e:?}"));
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), OK);
    let m = unsafe { m.assume_init() };
    assert_eq!(m.backend, tz_backend::TZ_BACKEND_CPU as u32);
    let reason = unsafe { CStr::from_ptr(m.backend_reason.as_ptr()) };
    let reason = reason.to_str().unwrap();
    assert!(reason.contains("LZ4 chunk limit"), "{reason}");
    tz_destroy(s);
}
