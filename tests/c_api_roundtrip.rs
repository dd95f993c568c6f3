//! End-to-end round trips through the C API: random shapes with ragged
//! edges, all eleven dtypes, unbounded dimension 0 ending in a partial epoch,
//! writes of random size from 1 byte to several MiB, both index locations.
//! Every shard is decoded by `support::decode`, which shares no code with the
//! library (index parsed, crc32c checked, zstd or blosc decoded, tiles
//! un-tiled). Blosc streams get compressible data, so that their frames are
//! really shuffled and compressed rather than stored.

mod common;
mod support;

use common::*;
use std::ffi::c_void;
use support::decode::{self, decode_array, decode_store};
use tiledzarr::ffi::*;
use tiledzarr::DType;

#[derive(Debug, Clone, Copy, PartialEq)]
enum TileCodec {
    None,
    Zstd,
    /// Blosc1 with this cname and shuffle (the JSON names).
    Blosc(&'static str, &'static str),
    Gzip,
}

#[derive(Debug, Clone)]
struct Case {
    dtype: DType,
    /// (size, tile, tiles_per_shard); size 0 on dimension 0 = unbounded.
    dims: Vec<(u64, u64, u64)>,
    /// Bytes streamed in total.
    bytes: usize,
    index_at_start: bool,
    codec: TileCodec,
    /// Largest single write.
    max_write: usize,
    /// Mix tz_write with tz_reserve/tz_commit.
    reserve: bool,
}

impl Case {
    fn elem(&self) -> usize {
        self.dtype.size()
    }
    fn plane_bytes(&self) -> usize {
        self.dims[1..]
            .iter()
            .map(|d| d.0 as usize)
            .product::<usize>()
            * self.elem()
    }
    /// The extent of dimension 0 after flush.
    fn planes(&self) -> u64 {
        match self.dims[0].0 {
            0 => self.bytes.div_ceil(self.plane_bytes()) as u64,
            n => n,
        }
    }

    fn json(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|(s, t, p)| format!(r#"{{"size": {s}, "tile": {t}, "tiles_per_shard": {p}}}"#))
            .collect();
        let codec = match self.codec {
            TileCodec::Zstd => r#"{"name": "zstd", "level": 3}"#.to_string(),
            TileCodec::None => r#"{"name": "none"}"#.to_string(),
            TileCodec::Blosc(cname, shuffle) => format!(
                r#"{{"name": "blosc", "level": 2, "cname": "{cname}", "shuffle": "{shuffle}"}}"#
            ),
            TileCodec::Gzip => r#"{"name": "gzip", "level": 2}"#.to_string(),
        };
        format!(
            r#"{{"dtype": "{}", "dimensions": [{}], "codec": {codec}, "backend": "{}",
                "index_location": "{}", "threads": 2, "staging_bytes": {}}}"#,
            self.dtype.name(),
            dims.join(", "),
            test_backend(),
            if self.index_at_start { "start" } else { "end" },
            self.staging_bytes(),
        )
    }

    /// A few epochs per buffer, so that streams cycle their buffers.
    fn staging_bytes(&self) -> usize {
        let epoch = self.dims[0].1 as usize * self.plane_bytes();
        epoch * 6
    }

    /// The decoder's view of the final array.
    fn decode_dims(&self) -> Vec<decode::Dim> {
        self.dims
            .iter()
            .enumerate()
            .map(|(d, &(size, tile, tps))| {
                let size = if d == 0 { self.planes() } else { size };
                let count = size.div_ceil(tile);
                decode::Dim {
                    size,
                    tile,
                    tiles_per_shard: if tps == 0 { count } else { tps },
                }
            })
            .collect()
    }
}

/// The most epochs an unbounded case streams: enough to cycle the staging
/// buffers thousands of times and fill many shards.
const MAX_EPOCHS: usize = 10_000;

/// A random case: rank 1 to 4, ragged tiles, some unbounded.
fn random_case(rng: &mut Rng, dtype: DType, max_bytes: usize) -> Case {
    let rank = rng.range(1, 4) as usize;
    let elem = dtype.size();
    loop {
        let mut dims = Vec::new();
        for d in 0..rank {
            let size = rng.range(1, if rank == 1 { 5000 } else { 90 });
            let tile = rng.range(1, size.min(40) + 2);
            let count = size.div_ceil(tile);
            let tps = rng.range(if d == 0 { 1 } else { 0 }, count + 1);
            dims.push((size, tile, tps));
        }
        let plane: usize = dims[1..].iter().map(|d| d.0 as usize).product::<usize>() * elem;
        let full = dims[0].0 as usize * plane;
        if full > max_bytes || full == 0 {
            continue;
        }
        let unbounded = rng.range(0, 1) == 1;
        let bytes = if unbounded {
            dims[0].0 = 0;
            // Whole planes plus a partial one, ending inside an epoch.
            let planes = rng.range(1, (max_bytes / plane).max(2) as u64 - 1) as usize;
            // At most MAX_EPOCHS epochs: a stream's cost is mostly per
            // epoch when its epochs hold a few bytes (a one-dimensional
            // array of 2-element tiles took 25 s for 386,000 epochs).
            let planes = planes.min(MAX_EPOCHS * dims[0].1 as usize);
            planes * plane + (rng.range(0, plane as u64 / elem as u64 - 1) as usize) * elem
        } else if rng.range(0, 3) == 0 {
            // A bounded array flushed before its end.
            rng.range(1, full as u64 / elem as u64) as usize * elem
        } else {
            full
        };
        return Case {
            dtype,
            dims,
            bytes,
            index_at_start: rng.range(0, 1) == 1,
            codec: if rng.range(0, 4) != 0 {
                TileCodec::Zstd
            } else {
                TileCodec::None
            },
            max_write: 4 << 20,
            reserve: false,
        };
    }
}

/// What the decoder expects of each chunk.
fn decode_codec(case: &Case) -> decode::Codec {
    match case.codec {
        TileCodec::None => decode::Codec::None,
        TileCodec::Zstd => decode::Codec::Zstd,
        TileCodec::Gzip => decode::Codec::Gzip,
        TileCodec::Blosc(cname, shuffle) => decode::Codec::Blosc(decode::Blosc {
            typesize: case.elem(),
            shuffle: match shuffle {
                "byte" => decode::BloscShuffle::Byte,
                "bit" => decode::BloscShuffle::Bit,
                _ => decode::BloscShuffle::None,
            },
            // The frame header's compressor codes (c-blosc's chunk format).
            compressor: match cname {
                "lz4" => 1,
                "zlib" => 3,
                _ => 4,
            },
        }),
    }
}

/// Elements that compress, as camera pixels do: a slow ramp with a few
/// noisy low bits, little endian, `bytes` long (may end mid-element).
fn compressible(rng: &mut Rng, bytes: usize, elem: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + elem);
    let mut i = 0u64;
    while out.len() < bytes {
        let v = (i / 7) * 3 + rng.next() % 8;
        out.extend_from_slice(&v.to_le_bytes()[..elem]);
        i += 1;
    }
    out.truncate(bytes);
    out
}

/// Streams `data` per `case` through the C API and returns the shards.
fn stream(case: &Case, data: &[u8], rng: &mut Rng) -> Collected {
    let sink = Collected {
        index_at_start: case.index_at_start,
        ..Default::default()
    };
    let s = create_json(&case.json(), Some(&sink)).unwrap_or_else(|e| panic!("{case:?}: {e:?}"));
    // Log-uniform write sizes: mostly small, some up to `max_write`.
    let max_bits = (case.max_write as f64).log2();
    let log_uniform =
        |rng: &mut Rng| 2f64.powf((rng.next() % 10_000) as f64 / 10_000.0 * max_bits) as usize;
    if case.reserve {
        let through = write_mixed(s, data, rng, &mut |r| log_uniform(r))
            .unwrap_or_else(|e| panic!("{case:?}: write {e}: {}", stream_error(s)));
        assert!(through > 0, "{case:?}: no reservation was committed");
    } else {
        let mut sizes = || log_uniform(rng);
        write_in_pieces(s, data, &mut sizes).unwrap_or_else(|e| panic!("{case:?}: write {e}"));
    }
    assert_eq!(tz_flush(s), 0, "{case:?}: {}", stream_error(s));
    let mut m = std::mem::MaybeUninit::<tz_metrics>::uninit();
    assert_eq!(tz_get_metrics(s, m.as_mut_ptr()), 0);
    let m = unsafe { m.assume_init() };
    assert_eq!(m.bytes_in, data.len() as u64);
    let emitted: u64 = sink
        .shards
        .lock()
        .unwrap()
        .values()
        .map(|v| v.len() as u64)
        .sum();
    assert_eq!(m.bytes_out, emitted);
    assert_eq!(m.shards_emitted, sink.shards.lock().unwrap().len() as u64);
    tz_destroy(s);
    sink
}

fn check(case: &Case, rng: &mut Rng) {
    // The stream's draws depend on timing (a reservation takes what the
    // staging buffer has left): they come from a generator of their own,
    // so that the caller's next cases are the same in every run.
    let rng = &mut Rng(rng.next());
    let data = match case.codec {
        TileCodec::Blosc(..) | TileCodec::Gzip => compressible(rng, case.bytes, case.elem()),
        _ => rng.bytes(case.bytes),
    };
    let sink = stream(case, &data, rng);
    let shards = sink.shards.into_inner().unwrap();
    let codec = decode_codec(case);
    let loc = if case.index_at_start {
        decode::IndexLocation::Start
    } else {
        decode::IndexLocation::End
    };
    let decoded = decode_array(&case.decode_dims(), case.elem(), codec, loc, &shards)
        .unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let mut expected = data;
    expected.resize(case.planes() as usize * case.plane_bytes(), 0);
    if decoded != expected {
        let at = decoded.iter().zip(&expected).position(|(a, b)| a != b);
        panic!("{case:?}: decoded array differs from the input at byte {at:?}");
    }
}

#[test]
fn every_dtype_round_trips_over_random_shapes() {
    let mut rng = Rng(0x7e57);
    for round in 0..6 {
        for dtype in DType::ALL {
            let case = random_case(&mut rng, dtype, 1 << 20);
            check(&case, &mut rng);
            let _ = round;
        }
    }
}

/// Zero-copy ingest: reservations of whatever the staging buffer has left,
/// committed in full, in part or not at all, between writes of random size;
/// every dtype, bounded and unbounded arrays, both codecs.
#[test]
fn reserve_and_commit_mixed_with_writes_round_trip() {
    let mut rng = Rng(0x2e5e);
    for round in 0..2 {
        for dtype in DType::ALL {
            let mut case = random_case(&mut rng, dtype, 1 << 20);
            case.reserve = true;
            // Many turns per stream, most of them reservations.
            case.max_write = (case.bytes / 8).clamp(1, 64 << 10);
            check(&case, &mut rng);
            let _ = round;
        }
    }
}

#[test]
fn large_arrays_with_multi_mib_writes() {
    let mut rng = Rng(0xb16);
    for dtype in [DType::Uint16, DType::Float32, DType::Uint8] {
        let case = random_case(&mut rng, dtype, 24 << 20);
        check(&case, &mut rng);
    }
}

#[test]
fn unbounded_stream_ending_mid_element_is_padded() {
    let case = Case {
        dtype: DType::Uint32,
        dims: vec![(0, 3, 2), (7, 2, 2), (5, 5, 1)],
        bytes: 7 * 5 * 4 * 4 + 6, // four planes and a half element
        index_at_start: false,
        codec: TileCodec::Zstd,
        max_write: 64,
        reserve: false,
    };
    check(&case, &mut Rng(9));
}

#[test]
fn blosc_and_gzip_round_trip_every_dtype_cname_and_shuffle() {
    let mut rng = Rng(0xb105c);
    let shuffles = ["byte", "bit", "none"];
    let cnames = ["zstd", "lz4", "zlib"];
    let mut k = 0;
    for dtype in DType::ALL {
        for cname in cnames {
            let mut case = random_case(&mut rng, dtype, 1 << 19);
            case.codec = TileCodec::Blosc(cname, shuffles[k % 3]);
            check(&case, &mut rng);
            k += 1;
        }
        let mut case = random_case(&mut rng, dtype, 1 << 19);
        case.codec = TileCodec::Gzip;
        check(&case, &mut rng);
    }
    // Every element size with byte shuffle, the default, on a larger stream.
    for dtype in [DType::Uint8, DType::Uint16, DType::Float32, DType::Int64] {
        let mut case = random_case(&mut rng, dtype, 8 << 20);
        case.codec = TileCodec::Blosc(cnames[k % 3], "byte");
        check(&case, &mut rng);
        k += 1;
    }
}

#[test]
fn filesystem_store_round_trips_and_records_the_extent() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(77);
    for (i, dtype) in DType::ALL.into_iter().enumerate() {
        let mut case = random_case(&mut rng, dtype, 1 << 19);
        case.index_at_start = i % 2 == 0;
        let path = dir.path().join(format!("{i}.zarr"));
        let json = case.json().replacen(
            "{",
            &format!(r#"{{"store": {{"path": {:?}}}, "#, path.to_str().unwrap()),
            1,
        );
        let s = create_json(&json, None).unwrap();
        let data = rng.bytes(case.bytes);
        write_in_pieces(s, &data, &mut || 4096).unwrap();
        assert_eq!(tz_flush(s), 0, "{}", stream_error(s));
        tz_destroy(s);
        let (shape, dt, decoded) = decode_store(&path).unwrap_or_else(|e| panic!("{case:?}: {e}"));
        assert_eq!(dt, dtype.name());
        assert_eq!(shape[0], case.planes());
        let mut expected = data;
        expected.resize(case.planes() as usize * case.plane_bytes(), 0);
        assert!(decoded == expected, "{case:?}");
    }
    let _ = std::ptr::null::<c_void>();
}
