//! Bad values of every new field: refused at create naming the field,
//! with nothing written.

use super::*;

/// Creates from `c`, expects TZ_ERR_CONFIG with a message holding every
/// one of `words`, and no store at `path`.
fn refused(c: &mut CConfig, path: &Path, words: &[&str]) {
    c.refresh();
    let (rc, message) = match create(c) {
        Ok(s) => {
            tz_destroy(s);
            panic!("created despite {words:?}");
        }
        Err(e) => e,
    };
    assert_eq!(rc, ERR_CONFIG, "{message}");
    for w in words {
        assert!(message.contains(w), "{words:?} not all in: {message}");
    }
    assert!(!path.exists(), "{} was made ({message})", path.display());
    let msg = unsafe { CStr::from_ptr(tz_status_string(rc)) };
    assert!(!msg.to_bytes().is_empty());
}

#[test]
fn bad_new_fields_are_refused_naming_them_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("never.zarr");
    let fresh = || ome_config(Some(&path));

    let mut c = fresh();
    c.axes[1].kind = 9;
    refused(&mut c, &path, &["image.axes[1].kind", "9"]);

    let mut c = fresh();
    c.img.multiscale_method = 7;
    refused(&mut c, &path, &["image.multiscale_method", "7"]);

    let mut c = fresh();
    c.img.attributes_json = c.string(r#"{"instrument": "#);
    refused(&mut c, &path, &["image.attributes_json", "JSON"]);

    let mut c = fresh();
    c.img.attributes_json = c.string("[1, 2]");
    refused(&mut c, &path, &["attributes", "object"]);

    let mut c = fresh();
    c.img.attributes_json = c.string(r#"{"ome": 1}"#);
    refused(&mut c, &path, &["attributes", "\"ome\""]);

    let mut c = fresh();
    c.order[2] = c.string("q");
    refused(&mut c, &path, &["storage_order", "\"q\""]);

    let mut c = fresh();
    c.order[2] = std::ptr::null();
    refused(&mut c, &path, &["image.storage_order[2]", "NULL"]);

    // Time before space is fine, space before channel is not (OME-NGFF).
    let mut c = fresh();
    c.order.swap(1, 2);
    refused(&mut c, &path, &["storage_order", "channel"]);

    let mut c = fresh();
    c.axes[0].downsample = 2;
    refused(&mut c, &path, &["image.axes[0].downsample", "2"]);

    let mut c = fresh();
    c.axes[3].unit = c.string("second");
    refused(&mut c, &path, &["dimensions[3].unit", "second"]);

    let mut c = fresh();
    c.axes[4].scale = -0.5;
    refused(&mut c, &path, &["dimensions[4].scale"]);

    let mut c = fresh();
    c.axes[3].translation = f64::NAN;
    refused(&mut c, &path, &["dimensions[3].translation"]);

    let mut c = fresh();
    c.img.multiscale_levels = 40;
    refused(&mut c, &path, &["multiscale.levels"]);

    // Pyramid settings without a pyramid, a name without an image: each
    // case clears what the one before it was refused for, so that the
    // next field is the one named.
    let mut c = fresh();
    c.img.multiscale = 0;
    refused(&mut c, &path, &["image.multiscale_levels", "multiscale"]);
    c.img.multiscale_levels = 0;
    c.img.multiscale_method = tz_downsample_method::TZ_DOWNSAMPLE_MEDIAN as u32;
    refused(&mut c, &path, &["image.multiscale_method"]);
    c.img.multiscale_method = 0;
    c.img.ome = 0;
    refused(&mut c, &path, &["image.ome_name"]);
    c.img.ome_name = std::ptr::null();
    refused(&mut c, &path, &["image.omero_json", "ome"]);

    // The omero block: not JSON, and a channel too few.
    let mut c = fresh();
    c.img.omero_json = c.string("{\"channels\": [");
    refused(&mut c, &path, &["image.omero_json", "JSON"]);

    let mut c = fresh();
    let mut one = OMERO.clone();
    one["channels"].as_array_mut().unwrap().pop();
    c.img.omero_json = c.string(&one.to_string());
    refused(&mut c, &path, &["ome.omero.channels", "\"c\" has 2"]);

    let mut c = fresh();
    let mut bad = OMERO.clone();
    bad["channels"][1]["color"] = json!("green");
    c.img.omero_json = c.string(&bad.to_string());
    refused(&mut c, &path, &["ome.omero.channels[1].color"]);

    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
