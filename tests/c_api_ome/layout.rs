//! The C structs' layout: `tz_config` as in 0.3, `tz_image` on its own,
//! its defaults, and its `struct_size` checked before anything past it.

use super::*;

#[test]
#[cfg(target_pointer_width = "64")]
fn config_keeps_its_layout_and_the_image_has_its_own_struct() {
    use std::mem::{offset_of, size_of};
    // tz_config is 0.3's, byte for byte: store_skip_fsync at 84, 88 bytes.
    assert_eq!(offset_of!(tz_config, store_skip_fsync), 84);
    assert_eq!(size_of::<tz_config>(), 88);
    // tz_image: its size first, then the image's fields.
    assert_eq!(offset_of!(tz_image, struct_size), 0);
    assert_eq!(offset_of!(tz_image, axes), 8);
    assert_eq!(offset_of!(tz_image, storage_order), 16);
    assert_eq!(offset_of!(tz_image, multiscale_levels), 24);
    assert_eq!(offset_of!(tz_image, multiscale_method), 28);
    assert_eq!(offset_of!(tz_image, multiscale), 32);
    assert_eq!(offset_of!(tz_image, ome), 36);
    assert_eq!(offset_of!(tz_image, ome_name), 40);
    assert_eq!(offset_of!(tz_image, attributes_json), 48);
    assert_eq!(IMAGE_0_4_SIZE, 56);
    // 0.8 added omero_json at the end.
    assert_eq!(offset_of!(tz_image, omero_json), 56);
    assert_eq!(size_of::<tz_image>(), IMAGE_SIZE);
    // tz_shard (written by the library, read by the callback) keeps its
    // first 44 bytes; the level follows them.
    assert_eq!(offset_of!(tz_shard, index_bytes), 40);
    assert_eq!(offset_of!(tz_shard, level), 48);
    // tz_dimension, an array element, did not grow.
    assert_eq!(size_of::<tz_dimension>(), 32);
    assert_eq!(size_of::<tz_axis>(), 40);
}

/// Whether `p` holds the default tz_image in its first `size` bytes.
fn assert_defaults(p: *const tz_image, size: usize) {
    // SAFETY: the caller's buffer holds a whole tz_image.
    let img = unsafe { p.read() };
    assert_eq!(img.struct_size, size);
    assert!(img.axes.is_null());
    assert!(img.storage_order.is_null());
    assert_eq!(img.multiscale_levels, 0);
    assert_eq!(
        img.multiscale_method,
        tz_downsample_method::TZ_DOWNSAMPLE_MEAN as u32
    );
    assert_eq!(img.multiscale, 0);
    assert_eq!(img.ome, 0);
    assert!(img.ome_name.is_null());
    assert!(img.attributes_json.is_null());
    if size > std::mem::offset_of!(tz_image, omero_json) {
        assert!(img.omero_json.is_null());
    }
}

#[test]
fn image_init_fills_the_defaults_and_writes_nothing_past_the_struct() {
    const GARBAGE: u64 = 0xA5A5_A5A5_A5A5_A5A5;
    let untouched_after = |buf: &[u64], size: usize| {
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert!(
            bytes[size..].iter().all(|&b| b == 0xA5),
            "wrote past {size}"
        );
    };
    // tz_image_init, which programs built against 0.4 to 0.7 call: 0.4's
    // 56 bytes, whatever this library's struct is. Garbage in every byte,
    // which it must overwrite, and after them, which it must not touch.
    let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
    let p = buf.as_mut_ptr() as *mut tz_image;
    assert_eq!(tz_image_init(p), OK);
    untouched_after(&buf, IMAGE_0_4_SIZE);
    assert_defaults(p, IMAGE_0_4_SIZE);
    assert_eq!(tz_image_init(std::ptr::null_mut()), ERR_NULL);
    // tz_image_init_sized (the header's tz_image_init): exactly the size
    // given, 0.4's to this library's.
    for size in [IMAGE_0_4_SIZE, IMAGE_SIZE] {
        let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
        let p = buf.as_mut_ptr() as *mut tz_image;
        assert_eq!(tz_image_init_sized(p, size), OK, "{}", last_error());
        untouched_after(&buf, size);
        assert_defaults(p, size);
    }
    for size in [0, 8, IMAGE_0_4_SIZE - 1, IMAGE_SIZE + 1, 4096] {
        let mut buf = [GARBAGE; 2 * IMAGE_SIZE / 8];
        let p = buf.as_mut_ptr() as *mut tz_image;
        assert_eq!(tz_image_init_sized(p, size), ERR_INVALID, "{size}");
        assert!(last_error().contains(&format!("struct_size is {size}")));
        untouched_after(&buf, 0);
    }
    assert_eq!(
        tz_image_init_sized(std::ptr::null_mut(), IMAGE_SIZE),
        ERR_NULL
    );

    // tz_config_init writes a tz_config of 0.3's size, and nothing after.
    let size = std::mem::size_of::<tz_config>();
    let mut buf = vec![0xA5A5_A5A5_A5A5_A5A5u64; 2 * size / 8];
    assert_eq!(tz_config_init(buf.as_mut_ptr() as *mut tz_config), OK);
    assert!(buf[size / 8..].iter().all(|&w| w == 0xA5A5_A5A5_A5A5_A5A5));
}

/// Two pages, the second one inaccessible: bytes placed at the end of the
/// first are followed by a fault.
struct GuardedPage {
    base: *mut u8,
    page: usize,
}

impl GuardedPage {
    fn new() -> Self {
        // SAFETY: plain anonymous mappings, unmapped in drop.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let base = base as *mut u8;
            assert_eq!(
                libc::mprotect(base.add(page) as *mut c_void, page, libc::PROT_NONE),
                0
            );
            GuardedPage { base, page }
        }
    }

    /// The first `n` bytes of `img` at the very end of the readable page.
    fn place(&mut self, img: &tz_image, n: usize) -> *const tz_image {
        // SAFETY: n <= the page; the destination lies in the readable page.
        unsafe {
            let dst = self.base.add(self.page - n);
            std::ptr::copy_nonoverlapping(img as *const tz_image as *const u8, dst, n);
            dst as *const tz_image
        }
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new.
        unsafe { libc::munmap(self.base as *mut c_void, 2 * self.page) };
    }
}

#[test]
fn image_struct_size_is_checked_before_anything_past_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sized.zarr");
    let mut guard = GuardedPage::new();
    let invalid = |image: *const tz_image, what: &str| {
        let c = ome_config(Some(&path));
        let mut s = std::ptr::null_mut();
        assert_eq!(
            tz_create_image(&c.cfg, image, &mut s),
            ERR_INVALID,
            "{what}"
        );
        assert!(s.is_null());
        let e = last_error();
        assert!(e.contains("image.struct_size"), "{what}: {e}");
        let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
        assert_eq!(
            tz_estimate_memory_image(&c.cfg, image, plan.as_mut_ptr()),
            ERR_INVALID,
            "{what}"
        );
        assert!(last_error().contains("image.struct_size"), "{what}");
        assert!(!path.exists(), "{what}");
    };

    // Smaller than any tz_image: refused from the struct_size alone, the
    // struct ending where the caller says (any further read would fault).
    for small in [0usize, 8, 16, IMAGE_0_4_SIZE - 8, IMAGE_0_4_SIZE - 1] {
        let mut c = ome_config(None);
        c.img.struct_size = small;
        let p = guard.place(&c.img, small.max(8));
        invalid(p, &format!("struct_size {small}"));
        let e = last_error();
        assert!(
            e.contains(&small.to_string()) && e.contains("tz_image_init"),
            "{e}"
        );
    }

    // Larger than this library's (a program built against a newer header,
    // its fields past ours set or not): refused.
    for large in [IMAGE_SIZE + 8, 4096] {
        let c = ome_config(None);
        let mut newer = vec![0u64; large.div_ceil(8)];
        // SAFETY: `newer` holds at least `large` >= IMAGE_SIZE bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &c.img as *const tz_image as *const u8,
                newer.as_mut_ptr() as *mut u8,
                IMAGE_SIZE,
            )
        };
        newer[0] = large as u64;
        invalid(
            newer.as_ptr() as *const tz_image,
            &format!("struct_size {large}"),
        );
        let e = last_error();
        assert!(e.contains(&large.to_string()) && e.contains("newer"), "{e}");
    }

    // Exactly 0.4's, ending at the guard page: accepted, nothing past the
    // struct read (its omero_json, set here, lies past the 56 bytes placed).
    let mut c = ome_config(Some(&path));
    c.img.struct_size = IMAGE_0_4_SIZE;
    let p = guard.place(&c.img, IMAGE_0_4_SIZE);
    let mut plan = std::mem::MaybeUninit::<tz_memory_plan>::uninit();
    assert_eq!(
        tz_estimate_memory_image(&c.cfg, p, plan.as_mut_ptr()),
        OK,
        "{}",
        last_error()
    );
    let mut s = std::ptr::null_mut();
    assert_eq!(tz_create_image(&c.cfg, p, &mut s), OK, "{}", last_error());
    assert_eq!(tz_flush(s), OK, "{}", stream_error(s));
    tz_destroy(s);
    let group = read_json(&path.join("zarr.json"));
    assert_eq!(
        group["attributes"]["ome"]["multiscales"][0]["name"],
        "c-abi"
    );
    assert!(group["attributes"]["ome"].get("omero").is_none());
}
