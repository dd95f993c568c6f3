//! Helpers shared by the integration tests (`mod support;` in a test file).

// Each test file uses a different part of these helpers.
#![allow(dead_code)]

pub mod decode;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tiledzarr::config::{Cname, Codec, IndexLocation, Shuffle};
use tiledzarr::layout::Layout;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::DType;

/// `planes` frames of `frame` (the shape without dimension 0) drawn with
/// seed 7, and `extra` elements more (a trailing partial plane).
pub fn frames(dtype: DType, frame: &[u64], planes: u64, extra: usize, pattern: Pattern) -> Vec<u8> {
    let g = Generator::new(pattern, dtype, frame, 7);
    let mut v = vec![0u8; g.frame_bytes() * planes as usize];
    g.fill_frames(0, &mut v);
    v.extend(std::iter::repeat_n(0x5a, extra * dtype.size()));
    v
}

/// Decodes the store in the folder `dir` (a server's folder, or objects
/// copied into one) and compares it with `data` padded to whole planes.
pub fn check_store(dir: &Path, shape: &[u64], dtype: DType, data: &[u8]) {
    let (got_shape, got_type, got) = decode::decode_store(dir).unwrap();
    assert_eq!(got_shape, shape, "{}", dir.display());
    assert_eq!(got_type, dtype.name());
    let mut want = data.to_vec();
    want.resize(got.len(), 0);
    assert!(got == want, "{}: the data differ", dir.display());
}

/// The decoder's view of a layout written by the library, with `planes`
/// planes along dimension 0 (its size when the array is unbounded).
pub fn decode_dims(layout: &Layout, planes: u64) -> Vec<decode::Dim> {
    layout
        .dims()
        .iter()
        .zip(layout.tiles_per_shard())
        .enumerate()
        .map(|(d, (dim, &tps))| decode::Dim {
            size: if d == 0 { planes } else { dim.size },
            tile: dim.tile,
            tiles_per_shard: tps,
        })
        .collect()
}

/// The decoder's codec for the library's `codec` over elements of `elem`
/// bytes.
pub fn decode_codec(codec: Codec, elem: usize) -> decode::Codec {
    match codec {
        Codec::None => decode::Codec::None,
        Codec::Zstd { .. } => decode::Codec::Zstd,
        Codec::Gzip { .. } => decode::Codec::Gzip,
        Codec::Blosc { shuffle, cname, .. } => decode::Codec::Blosc(decode::Blosc {
            typesize: elem,
            shuffle: match shuffle {
                Shuffle::Byte => decode::BloscShuffle::Byte,
                Shuffle::Bit => decode::BloscShuffle::Bit,
                Shuffle::None => decode::BloscShuffle::None,
            },
            // The frame header's compressor codes (c-blosc's chunk format).
            compressor: match cname {
                Cname::Lz4 => 1,
                Cname::Zlib => 3,
                Cname::Zstd => 4,
            },
        }),
    }
}

/// The decoder's index location.
pub fn decode_location(location: IndexLocation) -> decode::IndexLocation {
    match location {
        IndexLocation::Start => decode::IndexLocation::Start,
        IndexLocation::End => decode::IndexLocation::End,
    }
}

/// Every file of the store at `root` but its lock, by path below it.
pub fn store_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.file_name().unwrap() != tiledzarr::sink::LOCK_FILE {
                let bytes = std::fs::read(&path).unwrap();
                found.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    found
}

/// A sink that holds the pipeline still: each shard waits until the
/// returned sender is dropped (or 20 s pass, so that a failed assertion,
/// which drops the stream while the sink holds, ends the test instead of
/// hanging it).
pub fn held_sink() -> (
    std::sync::mpsc::Sender<()>,
    Box<dyn tiledzarr::sink::ShardSink>,
) {
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let sink = move |_: &tiledzarr::shard::Shard<'_>| -> tiledzarr::Result<()> {
        let _ = release_rx
            .lock()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(20));
        Ok(())
    };
    (release_tx, Box::new(sink))
}
