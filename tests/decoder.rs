//! The test suite's own reader of sharded Zarr v3 (`tests/support/decode.rs`),
//! which every round trip trusts, checked on its own: arrays are tiled,
//! compressed and assembled into shards here by hand, then decoded and
//! compared. In a binary of their own, so that the other test binaries,
//! which share the reader, do not run them again.

mod support;

use proptest::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use support::decode::*;

/// How the hand-made writer stores a chunk whose tile is all zeros.
#[derive(Clone, Copy)]
enum Zeros {
    Store,
    Skip,
}

/// Shard an array (row-major bytes over the dims' sizes) the simplest
/// possible way: for every shard and chunk, gather the tile element by
/// element, padding with zeros outside the array.
fn encode(
    dims: &[Dim],
    elem: usize,
    codec: Codec,
    loc: IndexLocation,
    zeros: Zeros,
    data: &[u8],
) -> HashMap<Vec<u64>, Vec<u8>> {
    let sizes: Vec<u64> = dims.iter().map(|d| d.size).collect();
    let tiles: Vec<u64> = dims.iter().map(|d| d.tile).collect();
    let per_shard: Vec<u64> = dims.iter().map(|d| d.tiles_per_shard).collect();
    let shard_grid: Vec<u64> = dims
        .iter()
        .map(|d| d.size.div_ceil(d.tile).div_ceil(d.tiles_per_shard))
        .collect();
    let chunks = checked_product(&per_shard).unwrap() as usize;
    let tile_elems = checked_product(&tiles).unwrap();
    let mut shards = HashMap::new();
    for s in 0..checked_product(&shard_grid).unwrap() {
        let shard = unravel(s, &shard_grid);
        let mut body = Vec::new();
        let mut index = Vec::new();
        for k in 0..chunks as u64 {
            let within = unravel(k, &per_shard);
            let mut tile = Vec::new();
            let mut inside = false;
            for e in 0..tile_elems {
                let at = unravel(e, &tiles);
                let global: Vec<u64> = (0..dims.len())
                    .map(|d| (shard[d] * per_shard[d] + within[d]) * tiles[d] + at[d])
                    .collect();
                if global.iter().zip(&sizes).all(|(g, n)| g < n) {
                    inside = true;
                    let mut lin = 0;
                    for d in 0..dims.len() {
                        lin = lin * sizes[d] + global[d];
                    }
                    let lin = lin as usize * elem;
                    tile.extend_from_slice(&data[lin..lin + elem]);
                } else {
                    tile.extend(std::iter::repeat_n(0, elem));
                }
            }
            let all_zero = tile.iter().all(|&b| b == 0);
            if !inside || (all_zero && matches!(zeros, Zeros::Skip)) {
                index.extend_from_slice(&EMPTY.to_le_bytes());
                index.extend_from_slice(&EMPTY.to_le_bytes());
                continue;
            }
            let stored = match codec {
                Codec::None => tile,
                Codec::Zstd => zstd::bulk::compress(&tile, 1).unwrap(),
                Codec::Gzip => {
                    use std::io::Write;
                    let mut z = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                    z.write_all(&tile).unwrap();
                    z.finish().unwrap()
                }
                Codec::Blosc(b) => blosc_frame(&b, &tile),
            };
            let base = match loc {
                IndexLocation::Start => index_len(chunks),
                IndexLocation::End => 0,
            };
            index.extend_from_slice(&((base + body.len()) as u64).to_le_bytes());
            index.extend_from_slice(&(stored.len() as u64).to_le_bytes());
            body.extend_from_slice(&stored);
        }
        let crc = crc32c_le(&index);
        index.extend_from_slice(&crc);
        let bytes = match loc {
            IndexLocation::Start => [index, body].concat(),
            IndexLocation::End => [body, index].concat(),
        };
        shards.insert(shard, bytes);
    }
    shards
}

/// A zstd Blosc1 frame as the metadata `b` describes.
fn blosc_frame(b: &Blosc, tile: &[u8]) -> Vec<u8> {
    let shuffle = match b.shuffle {
        BloscShuffle::None => blosc1::Shuffle::None,
        BloscShuffle::Byte => blosc1::Shuffle::Byte,
        BloscShuffle::Bit => blosc1::Shuffle::Bit,
    };
    let cname = match b.compressor {
        1 => blosc1::Cname::Lz4,
        3 => blosc1::Cname::Zlib,
        _ => blosc1::Cname::Zstd,
    };
    let params = blosc1::Params {
        level: 1,
        cname,
        shuffle,
        typesize: b.typesize,
    };
    let mut out = Vec::new();
    blosc1::compress(&params, tile, &mut out).unwrap();
    out
}

fn blosc(typesize: usize, shuffle: BloscShuffle) -> Codec {
    Codec::Blosc(Blosc {
        typesize,
        shuffle,
        compressor: 4,
    })
}

fn dims(spec: &[(u64, u64, u64)]) -> Vec<Dim> {
    spec.iter()
        .map(|&(size, tile, tiles_per_shard)| Dim {
            size,
            tile,
            tiles_per_shard,
        })
        .collect()
}

/// Distinct, non-zero bytes, so that misplaced elements show.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 + 1).collect()
}

fn round_trip(spec: &[(u64, u64, u64)], elem: usize) {
    let d = dims(spec);
    let n: u64 = spec.iter().map(|s| s.0).product();
    let data = pattern(n as usize * elem);
    let codecs = [
        Codec::None,
        Codec::Zstd,
        blosc(elem, BloscShuffle::Byte),
        blosc(elem, BloscShuffle::Bit),
        blosc(elem, BloscShuffle::None),
    ];
    for codec in codecs {
        for loc in [IndexLocation::Start, IndexLocation::End] {
            let shards = encode(&d, elem, codec, loc, Zeros::Store, &data);
            let decoded = decode_array(&d, elem, codec, loc, &shards).unwrap();
            assert!(decoded == data, "{spec:?} {elem} {codec:?} {loc:?}");
        }
    }
}

#[test]
fn round_trips_with_partial_edges() {
    round_trip(&[(7, 2, 2), (10, 4, 3)], 2);
    round_trip(&[(5, 5, 1), (9, 2, 4), (3, 3, 1)], 1);
    round_trip(&[(4, 1, 3), (6, 4, 1), (1, 2, 2)], 8);
    round_trip(&[(33, 8, 2)], 4);
}

#[test]
fn round_trips_rank_zero() {
    round_trip(&[], 2);
}

#[test]
fn missing_shards_and_empty_chunks_read_as_zero() {
    let d = dims(&[(6, 2, 2), (8, 4, 1)]);
    let mut data = pattern(48);
    data[..24].iter_mut().for_each(|b| *b = 0); // first three rows
    let loc = IndexLocation::End;
    let mut shards = encode(&d, 1, Codec::Zstd, loc, Zeros::Skip, &data);
    assert_eq!(
        decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap(),
        data
    );
    // Shard [0, 0] holds rows 0..4 and columns 0..4; its tile of rows
    // 0..2 is zero, so not stored. Dropping the shards of rows 4..6
    // zeroes those rows.
    assert_eq!(read_index(&shards[&vec![0, 0]], 2, loc).unwrap()[0], None);
    shards.remove(&vec![1, 0]);
    shards.remove(&vec![1, 1]);
    let decoded = decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap();
    assert_eq!(&decoded[..32], &data[..32]);
    assert!(decoded[32..].iter().all(|&b| b == 0));
}

#[test]
fn corrupt_checksum_is_reported_with_the_shard() {
    let d = dims(&[(4, 2, 1), (4, 2, 2)]);
    let data = pattern(16);
    for loc in [IndexLocation::Start, IndexLocation::End] {
        let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
        let shard = shards.get_mut(&vec![1, 0]).unwrap();
        let at = match loc {
            IndexLocation::Start => 3,             // an index entry
            IndexLocation::End => shard.len() - 1, // the checksum
        };
        shard[at] ^= 1;
        let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
        assert!(err.contains("[1, 0]") && err.contains("checksum"), "{err}");
    }
}

/// Rewrite entry `k` of a shard's index (at the end) and fix its checksum.
fn set_entry(shard: &mut [u8], chunks: usize, k: usize, offset: u64, nbytes: u64) {
    let start = shard.len() - index_len(chunks);
    let at = start + 16 * k;
    shard[at..at + 8].copy_from_slice(&offset.to_le_bytes());
    shard[at + 8..at + 16].copy_from_slice(&nbytes.to_le_bytes());
    let crc = crc32c_le(&shard[start..start + 16 * chunks]);
    let len = shard.len();
    shard[len - 4..].copy_from_slice(&crc);
}

#[test]
fn bad_entries_are_errors() {
    let d = dims(&[(4, 2, 2)]);
    let data = pattern(4);
    let loc = IndexLocation::End;
    let good = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
    let check = |offset: u64, nbytes: u64, expect: &str| {
        let mut shards = good.clone();
        set_entry(shards.get_mut(&vec![0]).unwrap(), 2, 1, offset, nbytes);
        let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
        assert!(err.contains("[0]") && err.contains(expect), "{err}");
    };
    check(3, 2, "data region"); // runs into the index
    check(u64::MAX - 1, 4, "data region"); // overflows
    check(EMPTY, 2, "data region"); // half-empty
    check(0, 1, "decodes to 1 bytes, expected 2");
    // With the index at the start, data may not overlap it.
    let shards = encode(
        &d,
        1,
        Codec::None,
        IndexLocation::Start,
        Zeros::Store,
        &data,
    );
    let mut shard = shards[&vec![0]].clone();
    shard[..8].copy_from_slice(&0u64.to_le_bytes());
    let crc = crc32c_le(&shard[..32]);
    shard[32..36].copy_from_slice(&crc);
    let err = read_index(&shard, 2, IndexLocation::Start).unwrap_err();
    assert!(err.contains("data region"), "{err}");
    // Too short to hold an index at all.
    assert!(read_index(&[0; 10], 1, loc).is_err());
}

#[test]
fn stored_chunk_outside_the_array_is_an_error() {
    // 3 tiles along the dimension, 2 per shard: chunk 1 of shard 1 is
    // beyond the array and must be empty.
    let d = dims(&[(5, 2, 2)]);
    let data = pattern(5);
    let loc = IndexLocation::End;
    let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
    set_entry(shards.get_mut(&vec![1]).unwrap(), 2, 1, 0, 2);
    let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
    assert!(err.contains("[1]") && err.contains("outside"), "{err}");
    // A shard beyond the grid is an error too.
    let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &data);
    shards.insert(vec![2], shards[&vec![1]].clone());
    let err = decode_array(&d, 1, Codec::None, loc, &shards).unwrap_err();
    assert!(err.contains("[2]") && err.contains("grid"), "{err}");
}

#[test]
fn zstd_garbage_is_an_error() {
    let d = dims(&[(2, 2, 1)]);
    let loc = IndexLocation::End;
    let mut shards = encode(&d, 1, Codec::None, loc, Zeros::Store, &[1, 2]);
    let err = decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap_err();
    assert!(err.contains("zstd"), "{err}");
    shards.clear();
    assert_eq!(
        decode_array(&d, 1, Codec::Zstd, loc, &shards).unwrap(),
        [0, 0]
    );
}

#[test]
fn blosc_headers_must_agree_with_the_metadata() {
    // Tiles large enough to be compressed (c-blosc stores tiny ones raw).
    let d = dims(&[(4000, 1000, 2)]);
    let data: Vec<u8> = (0..8000).map(|i| (i / 64) as u8).collect();
    let loc = IndexLocation::End;
    let shards = encode(
        &d,
        2,
        blosc(2, BloscShuffle::Byte),
        loc,
        Zeros::Store,
        &data,
    );
    let decoded = decode_array(&d, 2, blosc(2, BloscShuffle::Byte), loc, &shards);
    assert_eq!(decoded.unwrap(), data);
    for (wrong, word) in [
        (blosc(4, BloscShuffle::Byte), "typesize"),
        (blosc(2, BloscShuffle::Bit), "shuffled"),
        (blosc(2, BloscShuffle::None), "shuffled"),
        (
            Codec::Blosc(Blosc {
                typesize: 2,
                shuffle: BloscShuffle::Byte,
                compressor: 1,
            }),
            "compressed with code 4",
        ),
    ] {
        let err = decode_array(&d, 2, wrong, loc, &shards).unwrap_err();
        assert!(err.contains(word), "{wrong:?}: {err}");
    }
    // A frame cut short, its index entry made to match.
    let mut shards = shards;
    let shard = shards.get_mut(&vec![0]).unwrap();
    let n = u64::from_le_bytes(
        shard[shard.len() - 28..shard.len() - 20]
            .try_into()
            .unwrap(),
    );
    set_entry(shard, 2, 0, 0, n - 1);
    let err = decode_array(&d, 2, blosc(2, BloscShuffle::Byte), loc, &shards).unwrap_err();
    assert!(err.contains("blosc header"), "{err}");
}

fn write_store(dir: &Path, meta: &serde_json::Value, shards: &HashMap<Vec<u64>, Vec<u8>>) {
    std::fs::write(dir.join("zarr.json"), meta.to_string()).unwrap();
    for (coord, bytes) in shards {
        let mut path = dir.join("c");
        for c in coord {
            path.push(c.to_string());
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

fn metadata(shape: &[u64], shard: &[u64], tile: &[u64], loc: &str) -> serde_json::Value {
    serde_json::json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shard}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": tile,
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 1, "checksum": false}}
                ],
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"}
                ],
                "index_location": loc
            }
        }],
        "dimension_names": null,
        "attributes": {}
    })
}

#[test]
fn reads_a_store_from_disk() {
    let d = dims(&[(5, 2, 2), (3, 3, 1), (7, 2, 3)]);
    let data = pattern(5 * 3 * 7 * 2);
    for (loc, name) in [(IndexLocation::Start, "start"), (IndexLocation::End, "end")] {
        let dir = tempfile::tempdir().unwrap();
        let shards = encode(&d, 2, Codec::Zstd, loc, Zeros::Store, &data);
        write_store(
            dir.path(),
            &metadata(&[5, 3, 7], &[4, 3, 6], &[2, 3, 2], name),
            &shards,
        );
        let (shape, dtype, decoded) = decode_store(dir.path()).unwrap();
        assert_eq!((shape, dtype.as_str()), (vec![5, 3, 7], "uint16"));
        assert!(decoded == data, "{name}");

        // A stray file in the chunk tree is reported.
        std::fs::write(dir.path().join("c/0/0/0.tmp"), b"x").unwrap();
        let err = decode_store(dir.path()).unwrap_err();
        assert!(err.contains("0.tmp"), "{err}");
    }
}

#[test]
fn reads_an_empty_store_and_rejects_unsupported_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
    write_store(dir.path(), &meta, &HashMap::new());
    assert_eq!(decode_store(dir.path()).unwrap().2, vec![0; 24]);

    meta["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!([2, 3]);
    write_store(dir.path(), &meta, &HashMap::new());
    assert!(decode_store(dir.path()).unwrap_err().contains("multiple"));

    let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
    meta["fill_value"] = serde_json::json!(7);
    write_store(dir.path(), &meta, &HashMap::new());
    assert!(decode_store(dir.path()).unwrap_err().contains("fill_value"));

    let mut meta = metadata(&[3, 4], &[2, 4], &[1, 2], "end");
    meta["codecs"][0]["configuration"]["codecs"][1]["name"] = "lzma".into();
    write_store(dir.path(), &meta, &HashMap::new());
    assert!(decode_store(dir.path())
        .unwrap_err()
        .contains("inner codecs"));
}

#[test]
fn reads_a_blosc_store_and_checks_its_configuration() {
    let d = dims(&[(6, 2, 2), (300, 100, 3)]);
    let data: Vec<u8> = (0..6 * 300 * 2).map(|i| (i / 64) as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    let shards = encode(
        &d,
        2,
        blosc(2, BloscShuffle::Byte),
        IndexLocation::End,
        Zeros::Store,
        &data,
    );
    let with = |configuration: serde_json::Value| {
        let mut meta = metadata(&[6, 300], &[4, 300], &[2, 100], "end");
        meta["codecs"][0]["configuration"]["codecs"][1] =
            serde_json::json!({"name": "blosc", "configuration": configuration});
        write_store(dir.path(), &meta, &shards);
        decode_store(dir.path())
    };
    let good = serde_json::json!({
        "cname": "zstd", "clevel": 1, "shuffle": "shuffle", "typesize": 2, "blocksize": 0
    });
    assert!(with(good.clone()).unwrap().2 == data);
    for (key, value, word) in [
        ("shuffle", serde_json::json!("byteshuffle"), "shuffle"),
        ("cname", serde_json::json!("brotli"), "cname"),
        ("clevel", serde_json::json!(10), "clevel"),
        ("typesize", serde_json::json!(0), "typesize"),
        ("typesize", serde_json::json!(4), "typesize 2"),
        ("cname", serde_json::json!("lz4"), "compressed with code 4"),
    ] {
        let mut bad = good.clone();
        bad[key] = value;
        let err = with(bad).unwrap_err();
        assert!(err.contains(word), "{key}: {err}");
    }
    let mut bad = good.clone();
    bad.as_object_mut().unwrap().remove("typesize");
    assert!(with(bad).unwrap_err().contains("typesize"));
}

fn arb_case() -> impl Strategy<Value = (Vec<(u64, u64, u64)>, usize, bool, bool)> {
    let dim = (1u64..12, 1u64..5, 1u64..4);
    (
        prop::collection::vec(dim, 0..4),
        prop::sample::select(vec![1usize, 2, 4, 8]),
        any::<bool>(),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_layout_round_trips((spec, elem, zstd, start) in arb_case()) {
            let d = dims(&spec);
        let n: u64 = spec.iter().map(|s| s.0).product();
        let data = pattern(n as usize * elem);
        let codec = if zstd { Codec::Zstd } else { Codec::None };
        let loc = if start { IndexLocation::Start } else { IndexLocation::End };
        let shards = encode(&d, elem, codec, loc, Zeros::Skip, &data);
        prop_assert_eq!(decode_array(&d, elem, codec, loc, &shards).unwrap(), data);
    }
}
