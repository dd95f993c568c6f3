//! Stores left on the test server for the readers of scripts/test.sh.

use super::*;

/// Stores for zarr-python (through s3fs) and tensorstore's `s3` kvstore:
/// with TZ_S3_READBACK_ENDPOINT (a server scripts/test.sh keeps running,
/// bucket `readback`) and TZ_READBACK_DIR, each store is written there, its
/// raw input left in the folder with a line in `s3-manifest.tsv` (url, raw,
/// dtype, shape) for tests/readback/check_store.py.
#[test]
fn readback_stores_on_the_test_server() {
    let (Some(endpoint), Some(dir)) = (
        std::env::var("TZ_S3_READBACK_ENDPOINT").ok(),
        std::env::var_os("TZ_READBACK_DIR"),
    ) else {
        server::skipped(
            "readback_stores_on_the_test_server",
            "TZ_S3_READBACK_ENDPOINT and TZ_READBACK_DIR unset (scripts/test.sh sets them)",
        );
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut manifest = String::new();
    // (name, dtype, dimensions, codec, frame shape, planes, extra elements)
    type Fixture = (
        &'static str,
        DType,
        &'static str,
        &'static str,
        Vec<u64>,
        u64,
        usize,
    );
    let fixtures: [Fixture; 4] = [
        (
            "unbounded-zstd",
            DType::Uint16,
            r#"[{"size": 0, "tile": 4, "tiles_per_shard": 2}, {"size": 45, "tile": 16, "tiles_per_shard": 2}, {"size": 70, "tile": 32, "tiles_per_shard": 2}]"#,
            r#"{"name": "zstd", "level": 1}"#,
            vec![45, 70],
            13,
            40,
        ),
        (
            "bounded-blosc",
            DType::Uint16,
            r#"[{"size": 9, "tile": 2, "tiles_per_shard": 0}, {"size": 64, "tile": 16, "tiles_per_shard": 2}, {"size": 50, "tile": 16, "tiles_per_shard": 0}]"#,
            r#"{"name": "blosc", "level": 5, "shuffle": "bit"}"#,
            vec![64, 50],
            9,
            0,
        ),
        (
            "float32-index-start",
            DType::Float32,
            r#"[{"size": 0, "tile": 3, "tiles_per_shard": 1}, {"size": 33, "tile": 8, "tiles_per_shard": 3}]"#,
            r#"{"name": "zstd", "level": 3}"#,
            vec![33],
            10,
            0,
        ),
        (
            "multipart-none",
            DType::Uint32,
            r#"[{"size": 2, "tile": 1, "tiles_per_shard": 1}, {"size": 4096, "tile": 1024, "tiles_per_shard": 4}, {"size": 2048, "tile": 1024, "tiles_per_shard": 2}]"#,
            r#"{"name": "none"}"#,
            vec![4096, 2048],
            2,
            0,
        ),
    ];
    for (name, dtype, dims, codec, frame, planes, extra) in fixtures {
        let url = format!("s3://readback/{name}.zarr");
        let index = if name.contains("index-start") {
            r#", "index_location": "start""#
        } else {
            ""
        };
        let json = format!(
            r#"{{"dtype": "{}", "dimensions": {dims}, "codec": {codec}, "backend": "cpu"{index},
                "store": {{"url": "{url}", "endpoint": "{endpoint}", "overwrite": true}}}}"#,
            dtype.name()
        );
        let c = Config::from_json(&json).unwrap();
        let data = support::frames(dtype, &frame, planes, extra, Pattern::Microscopy);
        let mut s = Stream::new(&c, None).unwrap();
        stream_all(&mut s, &data);
        let summary = s.finish().unwrap();
        let raw = dir.join(format!("{name}.raw"));
        std::fs::write(&raw, &data).unwrap();
        let mut shape = vec![summary.planes];
        shape.extend(&frame);
        let shape: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        manifest += &format!(
            "{url}\t{}\t{}\t{}\n",
            raw.display(),
            dtype.name(),
            shape.join(",")
        );
    }
    std::fs::write(dir.join("s3-manifest.tsv"), manifest).unwrap();
    // An OME-Zarr image with a pyramid, a storage order and channel names
    // (the omero block): the group, each level's array under its own
    // prefix, attributes replaced while streaming. Listed with its configuration for check_ome.py, which
    // reads it from the server's folder (scripts/test.sh maps the URL).
    let url = "s3://readback/ome-pyramid.zarr";
    let json = format!(
        r#"{{"dtype": "uint16", "backend": "cpu",
            "dimensions": [{{"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 2, "unit": "second"}},
                           {{"name": "z", "size": 3, "tile": 2, "downsample": false}},
                           {{"name": "c", "size": 2, "tile": 1}},
                           {{"name": "y", "size": 37, "tile": 16, "tiles_per_shard": 2, "unit": "micrometer"}},
                           {{"name": "x", "size": 41, "tile": 16, "tiles_per_shard": 2, "unit": "micrometer"}}],
            "storage_order": ["t", "c", "z", "y", "x"],
            "multiscale": {{"levels": 3, "method": "median"}},
            "ome": {{"omero": {{"channels": [
                {{"label": "DAPI", "color": "0000FF", "window": {{"start": 0, "end": 900, "min": 0, "max": 65535}}}},
                {{"label": "GFP", "color": "00FF00", "window": {{"start": 0, "end": 900, "min": 0, "max": 65535}}}}]}}}},
            "attributes": {{"stage": 1}},
            "store": {{"url": "{url}", "endpoint": "{endpoint}", "overwrite": true}}}}"#
    );
    let c = Config::from_json(&json).unwrap();
    let data = support::frames(DType::Uint16, &[3, 2, 37, 41], 7, 11, Pattern::Microscopy);
    let mut s = Stream::new(&c, None).unwrap();
    stream_all(&mut s, &data);
    s.set_attributes(&serde_json::json!({"stage": 2})).unwrap();
    s.finish().unwrap();
    let raw = dir.join("ome-pyramid.raw");
    std::fs::write(&raw, &data).unwrap();
    // The checker expects the attributes the group ends with.
    let checked = json.replace(r#"{"stage": 1}"#, r#"{"stage": 2}"#);
    std::fs::write(dir.join("ome-pyramid.json"), checked).unwrap();
    std::fs::write(
        dir.join("s3-ome-manifest.tsv"),
        format!(
            "{url}\t{}\t{}\n",
            raw.display(),
            dir.join("ome-pyramid.json").display()
        ),
    )
    .unwrap();
}
