//! The latency bound (`max_latency_ms`): a slow stream's shards reach the
//! sink within the bound plus a margin after their last byte was written,
//! long before the staging buffer they sit in would fill, and the array
//! still decodes to the input (partial epochs move between buffers when a
//! buffer is handed on early).

mod common;
mod support;

use common::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::decode::{self, decode_array};
use tiledzarr::shard::Shard;
use tiledzarr::{Config, Stream};

/// Each shard's coordinates: when it reached the sink, and its file.
type Arrivals = HashMap<Vec<u64>, (Instant, Vec<u8>)>;

struct Paced {
    /// (size, tile, tiles_per_shard) per dimension, dimension 0 unbounded.
    dims: Vec<(u64, u64, u64)>,
    /// Shard rows written.
    rows: u64,
    /// Bytes per second the caller writes at, in pieces of `piece` bytes.
    rate: f64,
    piece: usize,
    max_latency_ms: u64,
    /// Allowance for processing time and a loaded machine.
    margin: Duration,
}

impl Paced {
    fn run(&self, backend: &str) {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
            .collect();
        let config = Config::from_json(&format!(
            r#"{{"dtype": "uint16", "dimensions": [{}], "backend": "{backend}",
                "codec": {{"name": "zstd", "level": 1}}, "max_latency_ms": {}}}"#,
            dims.join(", "),
            self.max_latency_ms
        ))
        .unwrap();
        let v = config.validate().unwrap();
        let row_bytes =
            (self.dims[0].1 * self.dims[0].2) as usize * v.layout.plane_bytes() as usize;
        let shards_per_row = v.layout.shards_per_row();
        let data = Rng(17).bytes(self.rows as usize * row_bytes);

        let arrivals: Arc<Mutex<Arrivals>> = Default::default();
        let into = arrivals.clone();
        let sink = move |s: &Shard<'_>| -> tiledzarr::Result<()> {
            let file = [s.data, s.index].concat();
            into.lock()
                .unwrap()
                .insert(s.coord.to_vec(), (Instant::now(), file));
            Ok(())
        };
        let mut s = Stream::new(&config, Some(Box::new(sink))).unwrap();
        assert_eq!(s.backend().0.name(), backend, "{}", s.backend().1);
        let planned = match backend {
            "gpu" => tiledzarr::backend::cuda::gpu_plan(&v).unwrap(),
            _ => v.clone(),
        };
        let buffer = planned.epochs_per_buffer * v.layout.epoch_bytes();
        assert!(
            buffer as usize >= data.len(),
            "the whole stream fits in one staging buffer ({buffer} bytes): only the bound hands it on"
        );
        let start = Instant::now();
        let mut completed = Vec::new();
        for (i, piece) in data.chunks(self.piece).enumerate() {
            let due = start + Duration::from_secs_f64((i * self.piece) as f64 / self.rate);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            assert_eq!(s.write_blocking(piece, None).unwrap(), piece.len());
            let written = (i * self.piece + piece.len()) / row_bytes;
            while completed.len() < written {
                completed.push(Instant::now());
            }
        }
        // Time for the last row; then the flush would deliver anything held.
        std::thread::sleep(Duration::from_millis(self.max_latency_ms) + self.margin);
        let before_flush = Instant::now();
        let summary = s.finish().unwrap();
        let arrived = arrivals.lock().unwrap();
        let bound = Duration::from_millis(self.max_latency_ms) + self.margin;
        let mut waits = Vec::new();
        for (row, done) in completed.iter().enumerate() {
            let rows: Vec<_> = arrived
                .iter()
                .filter(|(c, _)| c[0] == row as u64)
                .map(|(_, (t, _))| *t)
                .collect();
            assert_eq!(
                rows.len() as u64,
                shards_per_row,
                "row {row}: shards missing"
            );
            let last = *rows.iter().max().unwrap();
            assert!(
                last < before_flush,
                "row {row} reached the sink only with the flush"
            );
            let waited = last.saturating_duration_since(*done);
            eprintln!("row {row}: {waited:?} after its last byte");
            waits.push(waited);
        }
        for (row, waited) in waits.iter().enumerate() {
            assert!(
                *waited <= bound,
                "row {row} reached the sink {waited:?} after its last byte, more than {bound:?}"
            );
        }
        let shards: HashMap<Vec<u64>, Vec<u8>> = arrived
            .iter()
            .map(|(c, (_, f))| (c.clone(), f.clone()))
            .collect();
        let decoded = decode_array(
            &support::decode_dims(&v.layout, summary.planes),
            2,
            decode::Codec::Zstd,
            decode::IndexLocation::End,
            &shards,
        )
        .unwrap();
        assert!(decoded == data, "the array differs from the input");
    }
}

/// A time-lapse at 200 KB/s into 1 GiB of staging: without the bound its
/// rows would wait for the flush.
#[test]
fn a_slow_streams_rows_reach_the_sink_within_the_bound() {
    Paced {
        dims: vec![(0, 2, 1), (64, 32, 2), (64, 32, 2)],
        rows: 6,
        rate: 200e3,
        // Rows of 16 KiB arrive in pieces of 6 KiB: partial epochs move.
        piece: 6000,
        max_latency_ms: 250,
        margin: Duration::from_millis(1500),
    }
    .run(&test_backend());
}

/// cam-32's shape (2048 x 2048 u16 frames, 32-plane epochs, shard rows of
/// one epoch) written at 50 MB/s on the GPU backend, 1 s bound: two rows,
/// one GPU staging buffer.
#[test]
#[ignore = "needs a GPU: scripts/gpu-run.sh"]
fn a_50_mb_per_s_stream_meets_the_bound_on_the_gpu() {
    Paced {
        dims: vec![(0, 32, 1), (2048, 256, 8), (2048, 256, 8)],
        rows: 2,
        rate: 50e6,
        piece: 2048 * 2048 * 2,
        max_latency_ms: 1000,
        // A row of 256 MiB of random bytes: compressed, checksummed and
        // copied by the test's sink; a process's first stream also loads
        // its kernels.
        margin: Duration::from_millis(1000),
    }
    .run("gpu");
}
