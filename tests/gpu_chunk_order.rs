//! The GPU backend compresses a batch's chunks in another order than the
//! tiles' once it has ranked them (`src/backend/cuda/chunk_order.rs`): the
//! stores must decode to the input all the same, for every compressing
//! codec, with and without edge tiles. Ignored by default:
//! `scripts/gpu-run.sh` runs it on a GPU machine with `--ignored`, and
//! under compute-sanitizer with fewer batches (`TZ_GPU_ORDER_BATCHES`).
//!
//! One test function on purpose: it reads the process's count of
//! rearranged batches, which no other test may move meanwhile.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use support::decode::{self, decode_array};
use tiledzarr::backend::cuda::chunk_order::rearranged_batches;
use tiledzarr::shard::Shard;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

type Shards = Arc<Mutex<HashMap<Vec<u64>, Vec<u8>>>>;

#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn rearranged_batches_decode_to_the_input() {
    let batches: u64 = std::env::var("TZ_GPU_ORDER_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let codecs = [
        r#"{"name": "zstd", "level": 1}"#,
        r#"{"name": "gzip", "level": 1}"#,
        r#"{"name": "blosc", "level": 1, "cname": "zstd", "shuffle": "byte"}"#,
        r#"{"name": "blosc", "level": 5, "cname": "lz4", "shuffle": "bit"}"#,
        r#"{"name": "blosc", "level": 1, "cname": "zlib", "shuffle": "none"}"#,
    ];
    // (dtype, (size, tile, tiles per shard) per dimension): whole tiles,
    // then edge tiles in both frame dimensions and a partial shard.
    let cases = [
        (DType::Uint16, [(0, 8, 1), (256, 32, 4), (256, 32, 4)]),
        (DType::Uint8, [(0, 4, 2), (100, 16, 2), (90, 16, 3)]),
    ];
    for (dtype, dims) in cases {
        let frame = [dims[1].0, dims[2].0];
        let plane = (frame[0] * frame[1]) as usize * dtype.size();
        let epoch = plane * dims[0].1 as usize;
        // One epoch a batch: staging of two epochs.
        let planes = batches * dims[0].1;
        let mut data = vec![0u8; planes as usize * plane];
        Generator::new(Pattern::Microscopy, dtype, &frame, 5).fill_frames(0, &mut data);
        for codec in codecs {
            let dims_json: Vec<String> = dims
                .iter()
                .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
                .collect();
            let config = Config::from_json(&format!(
                r#"{{"dtype": "{}", "dimensions": [{}], "backend": "gpu", "codec": {codec},
                    "staging_bytes": {}}}"#,
                dtype.name(),
                dims_json.join(", "),
                2 * epoch
            ))
            .unwrap();
            let before = rearranged_batches();
            let shards: Shards = Default::default();
            let sink_shards = shards.clone();
            let sink = move |s: &Shard<'_>| -> tiledzarr::Result<()> {
                let file = [s.data, s.index].concat();
                sink_shards.lock().unwrap().insert(s.coord.to_vec(), file);
                Ok(())
            };
            let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
            for piece in data.chunks(epoch / 3 + 1) {
                assert_eq!(s.write_blocking(piece, None).unwrap(), piece.len());
            }
            let summary = s.finish().unwrap();
            drop(s);
            let what = format!("{dtype} {dims:?} {codec}");
            assert_eq!(
                summary.backend.name(),
                "gpu",
                "{what}: {}",
                summary.backend_reason
            );
            let rearranged = rearranged_batches() - before;
            assert!(
                rearranged >= 2,
                "{what}: {rearranged} of {batches} batches compressed in another order"
            );
            let v = config.validate().unwrap();
            let elem = v.layout.elem_size();
            let array = decode_array(
                &support::decode_dims(&v.layout, summary.planes),
                elem,
                support::decode_codec(config.codec, elem),
                decode::IndexLocation::End,
                &shards.lock().unwrap(),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                array.starts_with(&data),
                "{what}: the array differs from the input"
            );
            eprintln!("{what}: {rearranged} of {batches} batches rearranged");
        }
    }
}
