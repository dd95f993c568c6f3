use super::*;
use crate::config::{Cname, Shuffle};

/// Little-endian elements of `elem` bytes: a slow ramp with a little noise
/// in the low byte, as a camera's pixels (compressible, and more so once
/// shuffled).
fn elements(elem: usize, count: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .flat_map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = i as u64 / 16 + (state & 1);
            v.to_le_bytes().into_iter().take(elem)
        })
        .collect()
}

/// The frame header's flags byte (c-blosc's README_CHUNK_FORMAT): bit 0
/// byte shuffle, bit 2 bit shuffle, bits 5-7 the inner compressor (4: zstd).
fn header(frame: &[u8]) -> (u8, usize, u32) {
    let nbytes = u32::from_le_bytes(frame[4..8].try_into().unwrap());
    (frame[2], frame[3] as usize, nbytes)
}

#[test]
fn zstd_round_trips_and_none_copies() {
    let tile: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    let mut out = Vec::new();
    ChunkCompressor::new(Codec::Zstd { level: 3 }, 1)
        .unwrap()
        .compress(&tile, &mut out)
        .unwrap();
    assert!(out.len() < tile.len());
    assert_eq!(::zstd::bulk::decompress(&out, tile.len()).unwrap(), tile);
    ChunkCompressor::new(Codec::None, 1)
        .unwrap()
        .compress(&tile, &mut out)
        .unwrap();
    assert_eq!(out, tile);
}

#[test]
fn blosc_frames_round_trip_for_every_typesize_and_shuffle() {
    for elem in [1, 2, 4, 8] {
        let tile = elements(elem, 32 * 1024);
        for shuffle in [Shuffle::Byte, Shuffle::Bit, Shuffle::None] {
            let codec = Codec::Blosc {
                level: 1,
                shuffle,
                cname: Cname::Zstd,
            };
            let mut z = ChunkCompressor::new(codec, elem).unwrap();
            let mut frame = vec![0xab; 7]; // replaced, not appended to
            z.compress(&tile, &mut frame).unwrap();
            let what = format!("typesize {elem}, {shuffle:?}");
            assert!(frame.len() < tile.len(), "{what}: not compressed");
            assert!(frame.len() <= max_chunk_bytes(codec, tile.len()), "{what}");
            assert_eq!(blosc1::decompress(&frame).unwrap(), tile, "{what}");
            let (flags, typesize, nbytes) = header(&frame);
            assert_eq!(typesize, elem, "{what}");
            assert_eq!(nbytes as usize, tile.len(), "{what}");
            assert_eq!(flags >> 5, 4, "{what}: inner compressor is not zstd");
            let expect = match shuffle {
                Shuffle::Byte => 0b001,
                Shuffle::Bit => 0b100,
                Shuffle::None => 0,
            };
            assert_eq!(flags & 0b101, expect, "{what}: shuffle flags {flags:#010b}");
            // The compressor is reused tile after tile.
            z.compress(&tile[..tile.len() / 2], &mut frame).unwrap();
            assert_eq!(blosc1::decompress(&frame).unwrap(), tile[..tile.len() / 2]);
        }
    }
}

#[test]
fn byte_shuffle_pays_on_microscopy_uint16() {
    use crate::synth::{Generator, Pattern};
    let gen = Generator::new(Pattern::Microscopy, crate::DType::Uint16, &[128, 128], 7);
    let mut tile = vec![0u8; gen.frame_bytes() * 2];
    gen.fill_frames(0, &mut tile);
    let size = |codec| {
        let mut out = Vec::new();
        ChunkCompressor::new(codec, 2)
            .unwrap()
            .compress(&tile, &mut out)
            .unwrap();
        out.len()
    };
    let shuffled = size(Codec::Blosc {
        level: 1,
        shuffle: Shuffle::Byte,
        cname: Cname::Zstd,
    });
    let plain = size(Codec::Blosc {
        level: 1,
        shuffle: Shuffle::None,
        cname: Cname::Zstd,
    });
    assert!(shuffled < plain, "shuffled {shuffled}, plain {plain}");
}

#[test]
fn incompressible_tiles_stay_within_the_bound() {
    let mut state = 1u32;
    let tile: Vec<u8> = (0..10_000)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    for elem in [1, 2, 4, 8] {
        let codec = Codec::Blosc {
            level: 9,
            shuffle: Shuffle::Bit,
            cname: Cname::Zstd,
        };
        let mut out = Vec::new();
        ChunkCompressor::new(codec, elem)
            .unwrap()
            .compress(&tile, &mut out)
            .unwrap();
        assert!(out.len() <= max_chunk_bytes(codec, tile.len()));
        assert_eq!(blosc1::decompress(&out).unwrap(), tile);
    }
}

#[test]
fn blosc_levels_out_of_range_are_refused() {
    for level in [-1, 10] {
        let codec = Codec::Blosc {
            level,
            shuffle: Shuffle::Byte,
            cname: Cname::Zstd,
        };
        let r =
            ChunkCompressor::new(codec, 2).and_then(|mut z| z.compress(&[0; 64], &mut Vec::new()));
        assert!(r.is_err(), "level {level}");
    }
}

#[test]
fn zarr_metadata_per_codec() {
    let blosc = |shuffle| {
        zarr_chunk_codecs(
            Codec::Blosc {
                level: 1,
                shuffle,
                cname: Cname::Zstd,
            },
            2,
        )
    };
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    for (shuffle, name) in [
        (Shuffle::Byte, "shuffle"),
        (Shuffle::Bit, "bitshuffle"),
        (Shuffle::None, "noshuffle"),
    ] {
        assert_eq!(
            blosc(shuffle),
            json!([bytes, {"name": "blosc", "configuration": {
                "cname": "zstd", "clevel": 1, "shuffle": name, "typesize": 2, "blocksize": 0
            }}])
        );
    }
    assert_eq!(
        zarr_chunk_codecs(Codec::Zstd { level: 3 }, 8),
        json!([bytes, {"name": "zstd", "configuration": {"level": 3, "checksum": false}}])
    );
    assert_eq!(zarr_chunk_codecs(Codec::None, 4), json!([bytes]));
}

#[test]
fn blosc_names_its_inner_compressor_in_metadata_and_frames() {
    let tile = elements(2, 8192);
    for (cname, name, code) in [
        (Cname::Zstd, "zstd", 4),
        (Cname::Lz4, "lz4", 1),
        (Cname::Zlib, "zlib", 3),
    ] {
        let codec = Codec::Blosc {
            level: 5,
            shuffle: Shuffle::Byte,
            cname,
        };
        let meta = zarr_chunk_codecs(codec, 2);
        assert_eq!(meta[1]["configuration"]["cname"], name);
        let mut out = Vec::new();
        ChunkCompressor::new(codec, 2)
            .unwrap()
            .compress(&tile, &mut out)
            .unwrap();
        assert_eq!(header(&out).0 >> 5, code, "{name}");
        assert_eq!(blosc1::decompress(&out).unwrap(), tile, "{name}");
        assert!(out.len() <= max_chunk_bytes(codec, tile.len()));
    }
}

#[test]
fn gzip_members_round_trip_at_every_level_within_the_bound() {
    use std::io::Read;
    let ramp = elements(2, 40_000);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..100_003)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for level in crate::config::GZIP_LEVELS {
        let codec = Codec::Gzip { level };
        let mut z = ChunkCompressor::new(codec, 2).unwrap();
        for tile in [&ramp[..], &noise[..], &[][..], &noise[..1]] {
            let mut member = vec![0xcd; 3]; // replaced, not appended to
            z.compress(tile, &mut member).unwrap();
            let what = format!("level {level}, {} bytes", tile.len());
            assert!(member.len() <= max_chunk_bytes(codec, tile.len()), "{what}");
            assert_eq!(&member[..3], &[0x1f, 0x8b, 8], "{what}: not a gzip member");
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&member[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, tile, "{what}");
        }
        let mut member = Vec::new();
        z.compress(&ramp, &mut member).unwrap();
        if level > 0 {
            assert!(
                member.len() < ramp.len() / 2,
                "level {level}: {}",
                member.len()
            );
        }
    }
    let meta = zarr_chunk_codecs(Codec::Gzip { level: 4 }, 2);
    assert_eq!(
        meta[1],
        serde_json::json!({"name": "gzip", "configuration": {"level": 4}})
    );
}

/// The GPU's one-block frames, built on the CPU with the kernels'
/// arithmetic around streams from the reference libraries, decode with
/// c-blosc: the format the kernels write is the one readers take.
#[test]
fn one_block_frames_as_the_gpu_writes_them_decode_with_c_blosc() {
    use super::blosc_block::{adler32, filtered, frame};
    for elem in [1, 2, 4, 8] {
        for count in [4096, 4099] {
            let tile = elements(elem, count);
            for shuffle in [Shuffle::Byte, Shuffle::Bit, Shuffle::None] {
                let packed = filtered(&tile, shuffle, elem);
                for cname in [Cname::Zstd, Cname::Lz4, Cname::Zlib] {
                    let what = format!("typesize {elem}, {count} elements, {shuffle:?}, {cname:?}");
                    let (stream, adler) = match cname {
                        Cname::Zstd => (::zstd::bulk::compress(&packed, 1).unwrap(), None),
                        Cname::Lz4 => (lz4_block(&packed), None),
                        Cname::Zlib => (raw_deflate(&packed), Some(adler32(&packed))),
                    };
                    let f = frame(&tile, &stream, shuffle, cname, elem, adler);
                    assert!(f[2] & 0x2 == 0, "{what}: unexpectedly memcpyed");
                    assert_eq!(blosc1::decompress(&f).unwrap(), tile, "{what}");
                    // A stream that does not shrink: memcpyed, the raw tile.
                    let f = frame(&tile, &vec![0; tile.len()], shuffle, cname, elem, adler);
                    assert!(f[2] & 0x2 != 0, "{what}");
                    assert_eq!(blosc1::decompress(&f).unwrap(), tile, "{what}: memcpyed");
                }
            }
        }
    }
    // The kernel's Adler-32 is zlib's.
    let data = elements(2, 100_000);
    let mut z = flate2::Compress::new(flate2::Compression::fast(), true);
    let mut out = Vec::with_capacity(300_000);
    z.compress_vec(&data, &mut out, flate2::FlushCompress::Finish)
        .unwrap();
    let n = out.len();
    assert_eq!(
        u32::from_be_bytes(out[n - 4..].try_into().unwrap()),
        adler32(&data)
    );
}

fn raw_deflate(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::Compress::new(flate2::Compression::fast(), false);
    let mut out = Vec::with_capacity(data.len() * 2 + 64);
    z.compress_vec(data, &mut out, flate2::FlushCompress::Finish)
        .unwrap();
    out
}

/// An LZ4 block, taken out of a c-blosc frame that holds one (lz4, no
/// shuffle, one stream: its stream is the block).
fn lz4_block(data: &[u8]) -> Vec<u8> {
    let params = blosc1::Params {
        level: 5,
        cname: blosc1::Cname::Lz4,
        shuffle: blosc1::Shuffle::None,
        typesize: 1,
    };
    let mut f = Vec::new();
    blosc1::compress(&params, data, &mut f).unwrap();
    let blocksize = u32::from_le_bytes(f[8..12].try_into().unwrap()) as usize;
    assert_eq!(blocksize, data.len(), "c-blosc split the input into blocks");
    // typesize 1: one stream per block, split or not.
    let start = u32::from_le_bytes(f[16..20].try_into().unwrap()) as usize;
    let n = u32::from_le_bytes(f[start..start + 4].try_into().unwrap()) as usize;
    f[start + 4..start + 4 + n].to_vec()
}

/// Every codec: chunks appended one after another to a buffer that
/// already holds bytes are, byte for byte, the chunks `compress` writes
/// alone (compressible tiles and noise that is stored as it is).
#[test]
fn appended_chunks_are_the_chunks_alone() {
    let mut codecs = vec![
        Codec::None,
        Codec::Zstd { level: 1 },
        Codec::Gzip { level: 1 },
    ];
    for cname in [Cname::Zstd, Cname::Lz4, Cname::Zlib] {
        for shuffle in [Shuffle::Byte, Shuffle::Bit, Shuffle::None] {
            codecs.push(Codec::Blosc {
                level: 1,
                shuffle,
                cname,
            });
        }
    }
    let noise: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let tiles = [elements(2, 32 * 1024), noise, elements(2, 100)];
    for codec in codecs {
        let mut c = ChunkCompressor::new(codec, 2).unwrap();
        let mut packed = b"before".to_vec();
        let mut expected = packed.clone();
        let mut alone = Vec::new();
        for (k, tile) in tiles.iter().enumerate() {
            let len = c.compress_append(tile, &mut packed).unwrap();
            c.compress(tile, &mut alone).unwrap();
            assert_eq!(len, alone.len(), "{codec:?} tile {k}");
            expected.extend_from_slice(&alone);
            assert_eq!(packed, expected, "{codec:?} tile {k}");
        }
    }
}
