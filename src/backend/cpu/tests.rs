//! The CPU backend's epochs against a naive reference: each tile gathered
//! element by element from the definitions, compressed alone, and placed
//! at its shard-major position.

use super::gather::tests::naive_tile;
use super::*;
use crate::config::Config;
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;

fn validated(dims: &[(u64, u64, u64)], codec: &str, threads: usize) -> Validated {
    let dims: Vec<String> = dims
        .iter()
        .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
        .collect();
    Config::from_json(&format!(
        r#"{{"dtype": "uint16", "backend": "cpu", "threads": {threads},
             "codec": {codec}, "dimensions": [{}]}}"#,
        dims.join(", ")
    ))
    .unwrap()
    .validate()
    .unwrap()
}

/// What the epoch of `input` must hold: (offsets, each shard's bytes).
fn reference(v: &Validated, input: &[u8]) -> (Vec<u64>, Vec<Vec<u8>>) {
    let l = &v.layout;
    let mut c = ChunkCompressor::new(v.config.codec, l.elem_size()).unwrap();
    let per_shard = l.chunks_per_shard_epoch();
    let mut offsets = vec![0u64];
    let mut shards = vec![Vec::new(); l.shards_per_row() as usize];
    for j in 0..l.shard_major_len() {
        let mut chunk = Vec::new();
        if let Some(slot) = l.slot_at_position(j) {
            c.compress(&naive_tile(l, input, slot), &mut chunk).unwrap();
        }
        offsets.push(offsets.last().unwrap() + chunk.len() as u64);
        shards[(j / per_shard) as usize].extend_from_slice(&chunk);
    }
    (offsets, shards)
}

fn check(v: &Validated, epochs: u64, seed: u64) -> Result<(), TestCaseError> {
    let mut backend = CpuBackend::new(v).unwrap();
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(false);
    let mut out = CompressedEpoch::default();
    let bytes = v.layout.epoch_bytes() as usize;
    for e in 0..epochs {
        // Slow ramps with noise: compressible, and not alike from tile to tile.
        let input: Vec<u8> = (0..bytes as u64)
            .map(|i| ((i / 7 + (i * (seed + e)) % 5) ^ (i >> 9)) as u8)
            .collect();
        let job = EpochJob {
            epoch: e,
            input: &input,
            cancel: &cancel,
            metrics: &metrics,
        };
        backend.compress_epoch(job, &mut out).unwrap();
        let (offsets, shards) = reference(v, &input);
        prop_assert_eq!(out.epoch, e);
        prop_assert_eq!(&out.offsets, &offsets);
        let per_shard = v.layout.chunks_per_shard_epoch() as usize;
        for (k, want) in shards.iter().enumerate() {
            prop_assert_eq!(
                out.shard_data(k, per_shard),
                &want[..],
                "shard {} of epoch {}",
                k,
                e
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]
    /// Any shape, shard shape and thread count, stored as it is: every
    /// shard's bytes and every offset as the reference has them, epoch
    /// after epoch with the buffers reused.
    #[test]
    fn epochs_match_the_reference(
        inner in proptest::collection::vec((1u64..40, 1u64..9, 1u64..4), 1..4),
        planes in 1u64..3,
        threads in 1usize..4,
        seed in 0u64..1000,
    ) {
        let mut dims = vec![(0, planes, 1)];
        dims.extend(inner);
        check(&validated(&dims, r#"{"name": "none"}"#, threads), 2, seed)?;
    }
}

/// Every codec, on a shape whose tasks span several shards and whose edge
/// shards have holes.
#[test]
fn every_codec_matches_the_reference() {
    let dims = [(0, 2, 1), (45, 8, 2), (70, 16, 3)];
    for codec in [
        r#"{"name": "zstd", "level": 1}"#,
        r#"{"name": "gzip", "level": 1}"#,
        r#"{"name": "blosc", "cname": "lz4", "shuffle": "byte", "level": 1}"#,
        r#"{"name": "blosc", "cname": "zstd", "shuffle": "bit", "level": 1}"#,
    ] {
        for threads in [1, 3] {
            check(&validated(&dims, codec, threads), 3, 1).unwrap();
        }
    }
}

/// A cancelled epoch stops without a hang, whatever waits.
#[test]
fn a_cancelled_epoch_returns() {
    let v = validated(
        &[(0, 2, 1), (64, 8, 2), (64, 8, 2)],
        r#"{"name": "none"}"#,
        3,
    );
    let mut backend = CpuBackend::new(&v).unwrap();
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(true);
    let input = vec![1u8; v.layout.epoch_bytes() as usize];
    let job = EpochJob {
        epoch: 0,
        input: &input,
        cancel: &cancel,
        metrics: &metrics,
    };
    backend
        .compress_epoch(job, &mut CompressedEpoch::default())
        .unwrap();
}
