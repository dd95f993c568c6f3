//! The CPU stages one by one on one cam-32 epoch of microscopy data (4096
//! tiles of 32x32x32 uint16): scatter (the CPU backend's row gather), zstd
//! level 1 and blosc (zstd level 1, byte shuffle) on one thread and on
//! every core (the CPU compressor ceilings), shard assembly and emission.
//! (The backend packs each shard's chunks as its workers compress them:
//! that packing is timed with the whole pipeline, `--bench cpu_pipeline`.)
//!
//! `cargo bench -p tiledzarr-benches --bench cpu_stages`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rayon::prelude::*;
use std::time::Duration;
use tiledzarr::backend::cpu::gather::{gather_row, row_tasks, scratch_stride, task_tiles};
use tiledzarr::codec::ChunkCompressor;
use tiledzarr::config::{Cname, Codec, IndexLocation, Shuffle};
use tiledzarr::layout::{Dim, Layout};
use tiledzarr::shard::{CompressedEpoch, ShardAssembler};
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::DType;

fn layout() -> Layout {
    Layout::new(
        &[
            Dim::new(0, 32, 1),
            Dim::new(2048, 32, 16),
            Dim::new(2048, 32, 16),
        ],
        2,
    )
    .unwrap()
}

fn epoch_input(l: &Layout) -> Vec<u8> {
    let gen = Generator::new(Pattern::Microscopy, DType::Uint16, &[2048, 2048], 1);
    let mut buf = vec![0u8; l.epoch_bytes() as usize];
    gen.fill_frames(0, &mut buf);
    buf
}

fn gather_all(l: &Layout, input: &[u8]) -> Vec<Vec<u8>> {
    (0..l.tiles_per_epoch())
        .map(|i| {
            let plan = l.tile_gather(i);
            let mut tile = vec![0u8; l.tile_bytes()];
            let run = plan.run_len() as usize * 2;
            plan.for_each_run(|src, dst| {
                let (s, d) = (src as usize * 2, dst as usize * 2);
                tile[d..d + run].copy_from_slice(&input[s..s + run]);
            });
            tile
        })
        .collect()
}

fn stages(c: &mut Criterion) {
    let l = layout();
    let input = epoch_input(&l);
    let tiles = gather_all(&l, &input);
    let mut g = c.benchmark_group("cam-32-epoch");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Bytes(l.epoch_bytes()));

    // The CPU backend's scatter: its row tasks, into one scratch, on one
    // thread.
    g.bench_function("scatter", |b| {
        let per_task = task_tiles(&l, 1);
        let tasks = row_tasks(&l, per_task).unwrap();
        let stride = scratch_stride(l.tile_bytes());
        let mut scratch = vec![0u8; per_task as usize * stride];
        b.iter(|| {
            for t in &tasks {
                gather_row(&l, t, &input, &mut scratch[..t.count as usize * stride]);
            }
        })
    });

    let codec = Codec::Zstd { level: 1 };
    let blosc = Codec::Blosc {
        level: 1,
        shuffle: Shuffle::Byte,
        cname: Cname::Zstd,
    };
    let blosc_lz4 = Codec::Blosc {
        level: 1,
        shuffle: Shuffle::Byte,
        cname: Cname::Lz4,
    };
    for (name, codec) in [
        ("zstd1", codec),
        ("blosc-zstd1-shuffle", blosc),
        ("blosc-lz4-1-shuffle", blosc_lz4),
    ] {
        g.bench_function(format!("{name}/one-thread"), |b| {
            let mut z = ChunkCompressor::new(codec, 2).unwrap();
            let mut out = Vec::new();
            b.iter(|| {
                for t in &tiles {
                    z.compress(t, &mut out).unwrap();
                }
            })
        });
        g.bench_function(format!("{name}/all-cores"), |b| {
            b.iter(|| {
                tiles.par_iter().for_each_init(
                    || (ChunkCompressor::new(codec, 2).unwrap(), Vec::new()),
                    |(z, out), t| z.compress(t, out).unwrap(),
                )
            })
        });
    }

    let chunks: Vec<Vec<u8>> = tiles
        .par_iter()
        .map(|t| {
            let mut out = Vec::new();
            ChunkCompressor::new(codec, 2)
                .unwrap()
                .compress(t, &mut out)
                .unwrap();
            out
        })
        .collect();
    // The epoch in shard-major order, as a backend hands it on.
    let mut epoch = CompressedEpoch::default();
    let len = l.shard_major_len() as usize;
    epoch.offsets.resize(len + 1, 0);
    for (i, c) in chunks.iter().enumerate() {
        epoch.offsets[l.shard_position(i as u64) as usize + 1] = c.len() as u64;
    }
    for j in 0..len {
        epoch.offsets[j + 1] += epoch.offsets[j];
    }
    let data = epoch.data.owned_mut();
    data.resize(epoch.offsets[len] as usize, 0);
    for (i, c) in chunks.iter().enumerate() {
        let at = epoch.offsets[l.shard_position(i as u64) as usize] as usize;
        data[at..at + c.len()].copy_from_slice(c);
    }

    g.bench_function("shard-emission", |b| {
        let mut asm = ShardAssembler::new(&l, IndexLocation::End, l.tile_bytes() as u64).unwrap();
        let mut e = 0;
        b.iter(|| {
            epoch.epoch = e;
            e += 1;
            let mut bytes = 0usize;
            asm.push(&epoch, &mut |row| {
                bytes += row
                    .iter()
                    .map(|s| s.data.len() + s.index.len())
                    .sum::<usize>();
                Ok::<(), tiledzarr::Error>(())
            })
            .unwrap();
            bytes
        })
    });
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
