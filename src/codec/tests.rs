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
