//! The memory plan against what a GPU stream then allocates. Ignored by
//! default: `scripts/gpu-run.sh` runs it on a GPU machine, in its own
//! process so that no other stream's buffers count.

use tiledzarr::backend::{self, cuda};
use tiledzarr::Config;

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn a_stream_allocates_what_the_plan_says() {
    for (codec, tile) in [
        (r#"{"name": "zstd", "level": 1}"#, 32),
        (r#"{"name": "none"}"#, 64),
    ] {
        let config = Config::from_json(&format!(
            r#"{{"dtype": "uint16", "backend": "gpu", "codec": {codec}, "dimensions": [
                {{"size": 0, "tile": {tile}, "tiles_per_shard": 1}},
                {{"size": 1024, "tile": {tile}, "tiles_per_shard": 8}},
                {{"size": 1000, "tile": {tile}, "tiles_per_shard": 8}}]}}"#
        ))
        .unwrap();
        let v = config.validate().unwrap();
        let (kind, plan) = backend::estimate(&v).unwrap();
        assert_eq!(kind, backend::BackendKind::Gpu);
        let (d0, p0) = cuda::allocated();
        let mut stream =
            tiledzarr::Stream::new(&config, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
        // Staging after the first buffer is allocated in the background:
        // the flush waits for it.
        stream.finish().unwrap();
        let (d1, p1) = cuda::allocated();
        let (device, pinned) = (d1 - d0, p1 - p0);
        let within = |got: u64, want: u64| (got as f64 - want as f64).abs() <= 0.1 * want as f64;
        assert!(
            within(device, plan.device_bytes),
            "{codec}: device {device} vs plan {}",
            plan.device_bytes
        );
        assert!(
            within(pinned, plan.pinned_bytes),
            "{codec}: pinned {pinned} vs plan {}",
            plan.pinned_bytes
        );
        drop(stream);
        // Page-locked buffers are kept for the next stream, not in use.
        assert_eq!(cuda::allocated(), (d0, p0), "{codec}: everything freed");
        assert!(
            cuda::cached_pinned_bytes() >= pinned / 2,
            "{codec}: buffers kept"
        );
        let released = tiledzarr::release_cached_memory();
        assert!(released >= pinned / 2, "{codec}: {released} bytes released");
        assert_eq!(cuda::cached_pinned_bytes(), 0);
        println!(
            "{codec}: device {device} (plan {}), pinned {pinned} (plan {})",
            plan.device_bytes, plan.pinned_bytes
        );
    }
}
