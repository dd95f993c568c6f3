//! The memory plan against what a GPU stream then allocates. Ignored by
//! default: `scripts/gpu-run.sh` runs it on a GPU machine, in its own
//! process so that no other stream's buffers count.

use tiledzarr::backend::{self, cuda};
use tiledzarr::Config;

/// The tests measure the process's GPU allocations: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn a_stream_allocates_what_the_plan_says() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The last: a pyramid, whose level 1 has a GPU backend of its own.
    for (codec, tile, pyramid) in [
        (r#"{"name": "zstd", "level": 1}"#, 32, ""),
        (r#"{"name": "none"}"#, 64, ""),
        (
            r#"{"name": "zstd", "level": 1}"#,
            32,
            r#""multiscale": {"levels": 3, "method": "median"},"#,
        ),
    ] {
        let config = Config::from_json(&format!(
            r#"{{"dtype": "uint16", "backend": "gpu", "codec": {codec}, {pyramid} "dimensions": [
                {{"name": "z", "size": 0, "tile": {tile}, "tiles_per_shard": 1}},
                {{"name": "y", "size": 1024, "tile": {tile}, "tiles_per_shard": 8}},
                {{"name": "x", "size": 1000, "tile": {tile}, "tiles_per_shard": 8}}]}}"#
        ))
        .unwrap();
        let codec = format!("{codec}{pyramid}");
        let v = config.validate().unwrap();
        let (kind, plan) = backend::estimate(&v).unwrap();
        assert_eq!(kind, backend::BackendKind::Gpu);
        let (d0, p0) = cuda::allocated();
        let mut stream =
            tiledzarr::Stream::new(&config, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
        // The second staging buffer is allocated in the background: the
        // flush waits for it.
        stream.finish().unwrap();
        let (d1, p1) = cuda::allocated();
        let (device, pinned) = (d1 - d0, p1 - p0);
        let within = |got: u64, want: u64| (got as f64 - want as f64).abs() <= 0.1 * want as f64;
        assert!(
            within(device, plan.device_bytes),
            "{codec}: device {device} vs plan {}",
            plan.device_bytes
        );
        // Staging grows only while a writer outruns the pipeline: a stream
        // given nothing holds two of its staging buffers, the plan counts
        // all of them (the cap).
        let staging = cuda::gpu_plan(&v).unwrap();
        let buffer = staging.epochs_per_buffer * v.layout.epoch_bytes();
        let unused = staging.staging_buffers.saturating_sub(2) as u64 * buffer;
        assert!(
            within(pinned, plan.pinned_bytes - unused),
            "{codec}: pinned {pinned} vs plan {} less {unused} of staging never needed",
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

/// A 3-level GPU pyramid of 1024 x 1024 frames; `cap` is empty or a
/// `"device_bytes": N,` field.
fn pyramid_json(cap: &str) -> String {
    format!(
        r#"{{"dtype": "uint16", "backend": "gpu", {cap}
            "multiscale": {{"levels": 3, "method": "mean"}}, "dimensions": [
            {{"name": "z", "size": 0, "tile": 32, "tiles_per_shard": 1}},
            {{"name": "y", "size": 1024, "tile": 32, "tiles_per_shard": 8}},
            {{"name": "x", "size": 1024, "tile": 32, "tiles_per_shard": 8}}]}}"#
    )
}

/// A pyramid's level 1 has a GPU backend of its own; under a cap that
/// leaves no room for it beside level 0's batches, level 1 goes to the
/// host's threads, and the stream stays within the cap.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn a_capped_pyramid_stays_within_the_cap() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = pyramid_json;
    let free = Config::from_json(&json("")).unwrap().validate().unwrap();
    let (_, uncapped) = backend::estimate(&free).unwrap();
    let cap = uncapped.device_bytes - 1;
    let capped = Config::from_json(&json(&format!(r#""device_bytes": {cap},"#))).unwrap();
    let (_, plan) = backend::estimate(&capped.validate().unwrap()).unwrap();
    assert!(
        plan.device_bytes <= cap,
        "plan {} over {cap}",
        plan.device_bytes
    );
    let (d0, _) = cuda::allocated();
    let mut stream =
        tiledzarr::Stream::new(&capped, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
    let frames = vec![7u8; 40 * 1024 * 1024 * 2];
    stream.write_blocking(&frames, None).unwrap();
    stream.finish().unwrap();
    let used = cuda::allocated().0 - d0;
    assert!(used <= cap, "allocated {used} over the cap {cap}");
    println!(
        "pyramid: uncapped plan {}, cap {cap}: plan {} allocated {used}",
        uncapped.device_bytes, plan.device_bytes
    );
}

/// A pyramid on a device whose free memory holds level 0's batches but not
/// level 1's GPU backend beside them (another process holds the rest):
/// level 1 is compressed on the host's threads, the stream is not refused,
/// and its reason says so.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn a_pyramid_without_room_for_level_1_falls_back_to_the_host() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = pyramid_json;
    let config = Config::from_json(&json("")).unwrap();
    let (_, with_lane) = backend::estimate(&config.validate().unwrap()).unwrap();
    // Just under it, the plan keeps level 0's batches and drops the lane.
    let cap = format!(r#""device_bytes": {},"#, with_lane.device_bytes - 1);
    let level0 = Config::from_json(&json(&cap)).unwrap().validate().unwrap();
    let (_, without_lane) = backend::estimate(&level0).unwrap();
    let lane = with_lane.device_bytes - without_lane.device_bytes;
    assert!(lane > 0, "the plan has a lane of {lane} bytes");
    let leave = without_lane.device_bytes + lane / 2;
    let held = cuda::faults::occupy_device_memory(0, leave).unwrap();
    let (d0, _) = cuda::allocated();
    let mut stream =
        tiledzarr::Stream::new(&config, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
    let (kind, reason) = stream.backend();
    let reason = reason.to_string();
    assert_eq!(kind, backend::BackendKind::Gpu, "{reason}");
    assert!(
        reason.contains("level 1 compressed on the host"),
        "{reason}"
    );
    let frames: Vec<u8> = (0..40u32 * 1024 * 1024 * 2)
        .map(|i| (i % 251) as u8)
        .collect();
    stream.write_blocking(&frames, None).unwrap();
    let summary = stream.finish().unwrap();
    let used = cuda::allocated().0 - d0;
    assert!(used <= leave, "allocated {used}, {leave} were free");
    println!(
        "pyramid, {leave} bytes free (level 0 plans {}, level 1 {lane}): allocated {used}; {reason}; {summary:?}",
        without_lane.device_bytes
    );
    drop(stream);
    drop(held);
}

/// `device_bytes` caps the plan: the batches shrink until the plan fits,
/// the stream allocates no more than the cap, and a cap below one epoch's
/// batch is refused naming the numbers.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn device_bytes_caps_the_plan() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = |cap: &str| {
        format!(
            r#"{{"dtype": "uint16", "backend": "gpu", {cap} "dimensions": [
                {{"size": 0, "tile": 8, "tiles_per_shard": 1}},
                {{"size": 1024, "tile": 64, "tiles_per_shard": 8}},
                {{"size": 1024, "tile": 64, "tiles_per_shard": 8}}]}}"#
        )
    };
    let free = Config::from_json(&json("")).unwrap().validate().unwrap();
    let (_, uncapped) = backend::estimate(&free).unwrap();
    let cap = uncapped.device_bytes / 2;
    let capped = Config::from_json(&json(&format!(r#""device_bytes": {cap},"#))).unwrap();
    let (_, plan) = backend::estimate(&capped.validate().unwrap()).unwrap();
    assert!(
        plan.device_bytes <= cap,
        "plan {} over the cap {cap}",
        plan.device_bytes
    );
    let (d0, _) = cuda::allocated();
    let mut stream =
        tiledzarr::Stream::new(&capped, Some(Box::new(tiledzarr::sink::Discard))).unwrap();
    stream.finish().unwrap();
    let used = cuda::allocated().0 - d0;
    assert!(used <= cap, "allocated {used} over the cap {cap}");
    println!(
        "cap {cap}: plan {} allocated {used} (uncapped {})",
        plan.device_bytes, uncapped.device_bytes
    );
    drop(stream);

    let tiny = Config::from_json(&json(r#""device_bytes": 1000000,"#)).unwrap();
    let e = backend::estimate(&tiny.validate().unwrap()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, tiledzarr::Error::OutOfMemory(_)), "{msg}");
    assert!(
        msg.contains("device_bytes is 1000000") && msg.contains("smallest batch"),
        "{msg}"
    );
    let e = tiledzarr::Stream::new(&tiny, Some(Box::new(tiledzarr::sink::Discard)))
        .err()
        .unwrap();
    assert!(e.to_string().contains("device_bytes"), "{e}");
}
