//! Arrays given as C structures (`tz_array` through `tz_create_arrays`)
//! write what their JSON form does.

use super::*;

#[test]
fn arrays_from_c_structures_write_what_the_json_form_does() {
    let tmp = tempfile::tempdir().unwrap();
    let store = CString::new(tmp.path().join("c.zarr").to_str().unwrap()).unwrap();
    let names: Vec<CString> = ["t", "y", "x"]
        .iter()
        .map(|n| CString::new(*n).unwrap())
        .collect();
    let dims = |y: u64| -> Vec<tz_dimension> {
        [(0, 2, 1), (y, 16, 2), (24, 24, 1)]
            .iter()
            .zip(&names)
            .map(|(&(size, tile, tiles_per_shard), n)| tz_dimension {
                name: n.as_ptr(),
                size,
                tile,
                tiles_per_shard,
            })
            .collect()
    };
    let (dims_a, dims_b) = (dims(32), dims(20));
    let config = |dtype: tz_dtype, dims: &[tz_dimension]| {
        // SAFETY: all-zero is a valid tz_config (NULL pointers, no sink);
        // tz_config_init fills it.
        let mut c: tz_config = unsafe { std::mem::zeroed() };
        assert_eq!(tz_config_init(&mut c), 0);
        c.dtype = dtype as u32;
        c.rank = 3;
        c.dimensions = dims.as_ptr();
        c
    };
    let mut a = config(tz_dtype::TZ_DTYPE_UINT16, &dims_a);
    a.backend = tz_backend::TZ_BACKEND_CPU as u32;
    a.store_path = store.as_ptr();
    a.overwrite = 1;
    let mut b = config(tz_dtype::TZ_DTYPE_UINT8, &dims_b);
    b.codec = tz_codec::TZ_CODEC_NONE as u32;
    // SAFETY: all-zero is a valid tz_image; tz_image_init fills it.
    let mut image: tz_image = unsafe { std::mem::zeroed() };
    assert_eq!(tz_image_init(&mut image), 0);
    image.ome = 1;
    let keys = [
        CString::new("cam/left").unwrap(),
        CString::new("cam/right").unwrap(),
    ];
    // The left camera (an OME image, `a`) and the right one (plain, `right`).
    let two = |right: &tz_config| {
        [
            tz_array {
                key: keys[0].as_ptr(),
                config: &a,
                image: &image,
            },
            tz_array {
                key: keys[1].as_ptr(),
                config: right,
                image: std::ptr::null(),
            },
        ]
    };
    let list = two(&b);
    // SAFETY: all-zero is a valid tz_memory_plan (plain numbers).
    let mut plan: tz_memory_plan = unsafe { std::mem::zeroed() };
    assert_eq!(
        tz_estimate_memory_arrays(list.as_ptr(), 2, std::ptr::null(), &mut plan),
        0
    );
    assert!(plan.host_bytes > 0);
    let mut s: *mut tz_stream = std::ptr::null_mut();
    assert_eq!(
        tz_create_arrays(list.as_ptr(), 2, std::ptr::null(), &mut s),
        0,
        "{}",
        last_error()
    );
    let mut count = 0;
    assert_eq!(tz_array_count(s, &mut count), 0);
    assert_eq!(count, 2);
    let left = bytes_of(0, 5 * 32 * 24 * 2);
    let right = bytes_of(1, 5 * 20 * 24);
    for f in 0..5 {
        let (l, r) = (&left[f * 1536..][..1536], &right[f * 480..][..480]);
        assert_eq!(
            tz_write_all_to(s, 0, l.as_ptr() as *const c_void, l.len(), -1),
            1536
        );
        assert_eq!(
            tz_write_all_to(s, 1, r.as_ptr() as *const c_void, r.len(), -1),
            480
        );
    }
    assert_eq!(tz_flush(s), 0, "{}", last_error());
    tz_destroy(s);
    let root = tmp.path().join("c.zarr");
    let (shape, _, got) = support::decode::decode_store(&root.join("cam/left/0")).unwrap();
    assert_eq!(shape, [5, 32, 24]);
    assert!(got == left, "the left camera's frames differ");
    let (shape, _, got) = support::decode::decode_store(&root.join("cam/right")).unwrap();
    assert_eq!(shape, [5, 20, 24]);
    assert!(got == right, "the right camera's frames differ");
    assert!(
        root.join("cam/zarr.json").is_file(),
        "no intermediate group"
    );

    // A setting of the whole stream in another array's config is refused,
    // naming it; so is a NULL key.
    let mut threads = config(tz_dtype::TZ_DTYPE_UINT8, &dims_b);
    threads.threads = 3;
    let list = two(&threads);
    assert_eq!(
        tz_create_arrays(list.as_ptr(), 2, std::ptr::null(), &mut s),
        tz_status::TZ_ERR_CONFIG as i32
    );
    assert!(
        last_error().contains("arrays[1].config.threads"),
        "{}",
        last_error()
    );
    assert!(s.is_null());
    let bad = [tz_array {
        key: std::ptr::null(),
        config: &a,
        image: std::ptr::null(),
    }];
    assert_eq!(
        tz_create_arrays(bad.as_ptr(), 1, std::ptr::null(), &mut s),
        tz_status::TZ_ERR_INVALID_ARGUMENT as i32
    );
    assert!(last_error().contains("arrays[0].key"), "{}", last_error());
    assert_eq!(
        tz_create_arrays(list.as_ptr(), 0, std::ptr::null(), &mut s),
        tz_status::TZ_ERR_INVALID_ARGUMENT as i32
    );
}
