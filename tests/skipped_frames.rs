//! Skipped frames (a camera that drops some): a property test against a
//! model that writes zero frames in their place.
//!
//! Random shapes, tile depths, codecs, pyramids and sequences of writes and
//! skips. The store must decode to the model's (skipped frames read as the
//! fill value, on every pyramid level), and a chunk must be empty in its
//! shard's index exactly where the library promises: every chunk of an
//! epoch that one skip covers whole, on an array without a pyramid; no
//! other.

mod support;

use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;
use support::decode::{decode_store, read_index, IndexLocation};
use tiledzarr::config::StreamConfig;
use tiledzarr::Stream;

#[derive(Debug, Clone)]
struct Case {
    t: u64,
    t_tile: u64,
    t_per_shard: u64,
    y: u64,
    y_tile: u64,
    codec: &'static str,
    pyramid: bool,
    /// Frames written (false) or skipped (true), in order.
    ops: Vec<(u64, bool)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u64..4,
        1u64..3,
        prop_oneof![Just(8u64), Just(13)],
        prop_oneof![Just(4u64), Just(8)],
        prop_oneof![Just("zstd"), Just("none")],
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec((1u64..9, any::<bool>()), 1..10),
    )
        .prop_map(
            |(t_tile, t_per_shard, y, y_tile, codec, pyramid, bounded, ops)| {
                let frames: u64 = ops.iter().map(|o| o.0).sum();
                Case {
                    t: if bounded { frames } else { 0 },
                    t_tile,
                    t_per_shard,
                    y,
                    y_tile,
                    codec,
                    pyramid,
                    ops,
                }
            },
        )
}

const X: u64 = 12;

fn config(c: &Case, store: &Path) -> String {
    let mut v = serde_json::json!({
        "dtype": "uint16",
        "ome": true,
        "backend": std::env::var("TZ_TEST_BACKEND").unwrap_or_else(|_| "cpu".into()),
        "codec": {"name": c.codec},
        "dimensions": [
            {"name": "t", "size": c.t, "tile": c.t_tile, "tiles_per_shard": c.t_per_shard},
            {"name": "y", "size": c.y, "tile": c.y_tile, "tiles_per_shard": 2},
            {"name": "x", "size": X, "tile": 6, "tiles_per_shard": 1}],
        "store": {"path": store, "overwrite": true},
    });
    if c.pyramid {
        v["multiscale"] = serde_json::json!({"levels": 2});
    }
    v.to_string()
}

/// Frame `f`'s bytes: no element is zero, so a chunk of data is never one
/// of the fill value.
fn frame(f: u64, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|i| (((f as usize * 31 + i * 7) % 251) + 1) as u8)
        .collect()
}

/// Writes `c` with skips (`skip`) or with zero frames in their place.
fn write(c: &Case, store: &Path, skip: bool) {
    let config = StreamConfig::from_json(&config(c, store)).unwrap();
    let mut s = Stream::create(&config, None).unwrap();
    let frame_bytes = (c.y * X * 2) as usize;
    let mut f = 0;
    for &(n, skipped) in &c.ops {
        let bytes = n as usize * frame_bytes;
        if skipped && skip {
            let mut done = 0;
            while done < bytes {
                let took = s.skip_to(0, bytes - done).unwrap();
                if took == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                done += took;
            }
        } else {
            let data: Vec<u8> = (f..f + n)
                .flat_map(|g| {
                    if skipped {
                        vec![0; frame_bytes]
                    } else {
                        frame(g, frame_bytes)
                    }
                })
                .collect();
            assert_eq!(s.write_blocking_to(0, &data, None).unwrap(), bytes);
        }
        f += n;
    }
    s.finish().unwrap();
}

/// The epochs (tiles along t) that one skip covers whole.
fn empty_epochs(c: &Case) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    let mut f = 0u64;
    for &(n, skipped) in &c.ops {
        if skipped {
            let first = f.div_ceil(c.t_tile);
            let end = (f + n) / c.t_tile;
            out.extend(first..end);
        }
        f += n;
    }
    out
}

/// Every shard file under `dir/c`, with its coordinate.
fn shards(dir: &Path, at: &mut Vec<u64>, out: &mut Vec<(Vec<u64>, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        at.push(e.file_name().to_str().unwrap().parse().unwrap());
        if e.file_type().unwrap().is_dir() {
            shards(&e.path(), at, out);
        } else {
            out.push((at.clone(), std::fs::read(e.path()).unwrap()));
        }
        at.pop();
    }
}

/// Checks level 0's shard indexes: a chunk inside the array is empty
/// exactly when its epoch is in `empty`.
fn check_index(c: &Case, level0: &Path, frames: u64, empty: &BTreeSet<u64>) {
    let tps = [c.t_per_shard, 2, 1];
    let tiles = [
        frames.div_ceil(c.t_tile),
        c.y.div_ceil(c.y_tile),
        X.div_ceil(6),
    ];
    let per_shard = (tps[0] * tps[1] * tps[2]) as usize;
    let mut files = Vec::new();
    shards(&level0.join("c"), &mut Vec::new(), &mut files);
    let mut seen = BTreeSet::new();
    for (coord, bytes) in files {
        let index = read_index(&bytes, per_shard, IndexLocation::End).unwrap();
        for (k, entry) in index.iter().enumerate() {
            let local = [
                k as u64 / (tps[1] * tps[2]),
                k as u64 / tps[2] % tps[1],
                k as u64 % tps[2],
            ];
            let chunk: Vec<u64> = (0..3).map(|d| coord[d] * tps[d] + local[d]).collect();
            if (0..3).any(|d| chunk[d] >= tiles[d]) {
                assert!(
                    entry.is_none(),
                    "chunk {chunk:?} outside the array is stored"
                );
                continue;
            }
            seen.insert(chunk.clone());
            let want_empty = empty.contains(&chunk[0]);
            assert_eq!(
                entry.is_none(),
                want_empty,
                "chunk {chunk:?}: empty {} (epochs skipped whole: {empty:?})",
                entry.is_none()
            );
        }
    }
    let all = tiles.iter().product::<u64>() as usize;
    assert_eq!(seen.len(), all, "some shards of level 0 are missing");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn skipped_frames_read_as_the_fill_value_and_whole_epochs_stay_empty(c in case()) {
        let tmp = tempfile::tempdir().unwrap();
        let (skipped, model) = (tmp.path().join("skipped.zarr"), tmp.path().join("model.zarr"));
        write(&c, &skipped, true);
        write(&c, &model, false);
        let levels: &[&str] = if c.pyramid { &["0", "1"] } else { &["0"] };
        for level in levels {
            let got = decode_store(&skipped.join(level)).unwrap();
            let want = decode_store(&model.join(level)).unwrap();
            prop_assert_eq!(&got.0, &want.0, "level {} shape", level);
            prop_assert!(got.2 == want.2, "level {}: the data differ from the model's", level);
        }
        let frames: u64 = c.ops.iter().map(|o| o.0).sum();
        let empty = if c.pyramid { BTreeSet::new() } else { empty_epochs(&c) };
        check_index(&c, &skipped.join("0"), frames, &empty);
    }
}

#[test]
fn a_skip_of_part_of_a_frame_or_past_the_end_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Case {
        t: 4,
        t_tile: 2,
        t_per_shard: 1,
        y: 8,
        y_tile: 4,
        codec: "zstd",
        pyramid: false,
        ops: vec![],
    };
    let config = StreamConfig::from_json(&config(&c, &tmp.path().join("s.zarr"))).unwrap();
    let mut s = Stream::create(&config, None).unwrap();
    let frame_bytes = (c.y * X * 2) as usize;
    let e = s.skip_to(0, frame_bytes + 1).unwrap_err();
    assert!(e.to_string().contains("whole frames"), "{e}");
    let e = s.skip_to(1, frame_bytes).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert_eq!(s.skip_to(0, 3 * frame_bytes).unwrap(), 3 * frame_bytes);
    // What the bounded array still takes, then an overflow.
    assert_eq!(s.skip_to(0, 2 * frame_bytes).unwrap(), frame_bytes);
    let e = s.skip_to(0, frame_bytes).unwrap_err();
    assert!(matches!(e, tiledzarr::Error::Overflow { .. }), "{e}");
    s.finish().unwrap();
    let (shape, _, data) = decode_store(&tmp.path().join("s.zarr/0")).unwrap();
    assert_eq!(shape, [4, 8, 12]);
    assert!(data.iter().all(|&b| b == 0));
}
