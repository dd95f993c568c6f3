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

/// Slow ramps with noise: compressible, and not alike from tile to tile
/// or from epoch to epoch.
fn epoch_input(bytes: usize, seed: u64, e: u64) -> Vec<u8> {
    (0..bytes as u64)
        .map(|i| ((i / 7 + (i * (seed + e)) % 5) ^ (i >> 9)) as u8)
        .collect()
}

/// Checks `out` against the reference for `input`, epoch `e`.
fn check_epoch(
    v: &Validated,
    out: &CompressedEpoch,
    input: &[u8],
    e: u64,
) -> Result<(), TestCaseError> {
    let (offsets, shards) = reference(v, input);
    prop_assert_eq!(out.epoch, e);
    prop_assert_eq!(&out.offsets, &offsets, "offsets of epoch {}", e);
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
    Ok(())
}

/// A batch of `epochs` epochs from `first`, its input in two runs (as a
/// lane of two arrays hands it on): every epoch handed on in order, each
/// as the reference has it, the spares reused from batch to batch.
fn check_batches(v: &Validated, epochs: usize, seed: u64) -> Result<(), TestCaseError> {
    let mut backend = CpuBackend::new(v).unwrap();
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(false);
    let bytes = v.layout.epoch_bytes() as usize;
    let mut spares: Vec<CompressedEpoch> = Vec::new();
    for (batch, first) in [0u64, epochs as u64].into_iter().enumerate() {
        let inputs: Vec<Vec<u8>> = (0..epochs as u64)
            .map(|e| epoch_input(bytes, seed + batch as u64, first + e))
            .collect();
        let split = epochs / 2;
        let runs = [inputs[..split].concat(), inputs[split..].concat()];
        let runs: Vec<&[u8]> = runs
            .iter()
            .map(|r| &r[..])
            .filter(|r| !r.is_empty())
            .collect();
        let job = BatchJob {
            first_epoch: first,
            input: &runs,
            epochs,
            cancel: &cancel,
            metrics: &metrics,
            level1: None,
        };
        let mut handed = Vec::new();
        backend
            .compress_batch(job, &mut || spares.pop().unwrap_or_default(), &mut |out| {
                handed.push(out);
                true
            })
            .unwrap();
        prop_assert_eq!(handed.len(), epochs);
        for (k, out) in handed.iter().enumerate() {
            check_epoch(v, out, &inputs[k], first + k as u64)?;
        }
        spares.extend(handed);
    }
    Ok(())
}

fn check(v: &Validated, epochs: u64, seed: u64) -> Result<(), TestCaseError> {
    let mut backend = CpuBackend::new(v).unwrap();
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(false);
    let mut out = CompressedEpoch::default();
    let bytes = v.layout.epoch_bytes() as usize;
    for e in 0..epochs {
        let input = epoch_input(bytes, seed, e);
        let job = EpochJob {
            epoch: e,
            input: &input,
            cancel: &cancel,
            metrics: &metrics,
        };
        backend.compress_epoch(job, &mut out).unwrap();
        check_epoch(v, &out, &input, e)?;
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    /// Batches of any number of epochs, which the workers take in groups:
    /// each epoch as the reference has it, in order, whatever the group
    /// size, the batch's length and the thread count.
    #[test]
    fn batches_match_the_reference(
        inner in proptest::collection::vec((1u64..40, 1u64..9, 1u64..4), 1..3),
        planes in 1u64..3,
        threads in 1usize..5,
        epochs in 1usize..12,
        seed in 0u64..1000,
    ) {
        let mut dims = vec![(0, planes, 1)];
        dims.extend(inner);
        check_batches(&validated(&dims, r#"{"name": "none"}"#, threads), epochs, seed)?;
    }
}

/// Small epochs are grouped: a frame of 8 tasks (a row of tiles each) on
/// 4 workers takes 8 epochs at once, 16 tasks per worker, and a batch of
/// them (with a partial last group) matches the reference under a real
/// codec.
#[test]
fn small_epochs_are_grouped() {
    let v = validated(
        &[(0, 1, 1), (256, 32, 4), (256, 32, 4)],
        r#"{"name": "zstd", "level": 1}"#,
        4,
    );
    let backend = CpuBackend::new(&v).unwrap();
    assert_eq!(backend.tasks.len(), 8, "the shape's tasks per epoch");
    assert_eq!(backend.group, 8, "16 tasks per worker");
    check_batches(&v, 21, 3).unwrap();
}

/// A batch stops handing on epochs once `done` refuses one.
#[test]
fn a_refused_epoch_stops_the_batch() {
    let v = validated(&[(0, 1, 1), (64, 8, 2)], r#"{"name": "none"}"#, 2);
    let mut backend = CpuBackend::new(&v).unwrap();
    assert!(backend.group > 1);
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(false);
    let input = vec![3u8; 10 * v.layout.epoch_bytes() as usize];
    let job = BatchJob {
        first_epoch: 0,
        input: &[&input],
        epochs: 10,
        cancel: &cancel,
        metrics: &metrics,
        level1: None,
    };
    let mut handed = 0;
    backend
        .compress_batch(job, &mut CompressedEpoch::default, &mut |_| {
            handed += 1;
            handed < 3
        })
        .unwrap();
    assert_eq!(handed, 3);
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
