use super::*;
use crate::{compress_blocks, decompress};

/// Smooth 16-bit counts with a little noise, as `n` bytes.
fn counts(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = 300 + (i / 64) as u32 % 50 + (x & 7);
            if i % 2 == 0 {
                v as u8
            } else {
                (v >> 8) as u8
            }
        })
        .collect()
}

fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 11) as u8
        })
        .collect()
}

const CNAMES: [Cname; 3] = [Cname::Lz4, Cname::Zstd, Cname::Zlib];
const SHUFFLES: [Shuffle; 3] = [Shuffle::None, Shuffle::Byte, Shuffle::Bit];

fn params(cname: Cname, shuffle: Shuffle, level: u8, typesize: usize) -> Params {
    Params {
        level,
        cname,
        shuffle,
        typesize,
    }
}

/// Frames appended one after another, stored ones (noise, level 0)
/// among them, are each the frame `compress` writes alone.
#[test]
fn appended_frames_are_the_frames_alone() {
    for cname in CNAMES {
        for shuffle in SHUFFLES {
            for level in [0, 1] {
                let mut w = Writer::new(params(cname, shuffle, level, 2)).unwrap();
                let mut packed = b"earlier bytes".to_vec();
                let mut alone = Vec::new();
                let mut expected = packed.clone();
                for (k, data) in [counts(65_536, 3), noise(4096), counts(1000, 4)]
                    .iter()
                    .enumerate()
                {
                    let len = w.compress_append(data, &mut packed).unwrap();
                    w.compress(data, &mut alone).unwrap();
                    assert_eq!(len, alone.len(), "{cname:?} {shuffle:?} l{level} #{k}");
                    expected.extend_from_slice(&alone);
                    assert_eq!(packed, expected, "{cname:?} {shuffle:?} l{level} #{k}");
                }
            }
        }
    }
}

#[test]
fn c_blosc_decodes_every_combination() {
    let sizes = [
        0,
        1,
        127,
        128,
        1000,
        65_536,
        65_542,
        3 * MAX_BLOCK_BYTES + 1234,
    ];
    for cname in CNAMES {
        for shuffle in SHUFFLES {
            for typesize in [1, 2, 3, 4, 8, 16] {
                for level in [0, 1, 5, 9] {
                    let mut w = Writer::new(params(cname, shuffle, level, typesize)).unwrap();
                    let mut frame = Vec::new();
                    for (k, &n) in sizes.iter().enumerate() {
                        let data = counts(n, k as u32 + 1);
                        w.compress(&data, &mut frame).unwrap();
                        let what = format!("{cname:?} {shuffle:?} t{typesize} l{level} n{n}");
                        assert!(frame.len() <= n + MAX_OVERHEAD, "{what}");
                        assert_eq!(decompress(&frame).unwrap(), data, "{what}");
                        assert_eq!(frame[2] >> 5, cname.header_code(), "{what}");
                        let memcpyed = frame[2] & FLAG_MEMCPYED != 0;
                        let split = frame[2] & FLAG_DONT_SPLIT == 0;
                        let expect_split =
                            !memcpyed && splits(cname, typesize, block_bytes(n, typesize));
                        assert_eq!(split, expect_split, "{what}");
                        let shuffled = frame[2] & (FLAG_SHUFFLE | FLAG_BITSHUFFLE);
                        let expected = match shuffle {
                            Shuffle::None => 0,
                            Shuffle::Byte => FLAG_SHUFFLE,
                            Shuffle::Bit => FLAG_BITSHUFFLE,
                        };
                        assert_eq!(shuffled, expected, "{what}");
                        if level > 0 && n >= 65_536 {
                            assert!(!memcpyed && frame.len() < n, "{what}: {}", frame.len());
                        }
                        if level == 0 || n < MIN_BUFFER_BYTES {
                            assert!(memcpyed, "{what}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn incompressible_blocks_are_kept_as_they_are() {
    let n = 4 * MAX_BLOCK_BYTES;
    // All noise: the frame stores the input as it is.
    let all = noise(n);
    // Noise, then smooth counts: the first blocks are kept filtered and
    // raw, the last ones compressed.
    let mut half = noise(n / 2);
    half.extend_from_slice(&counts(n / 2, 3));
    for cname in CNAMES {
        for shuffle in SHUFFLES {
            let mut w = Writer::new(params(cname, shuffle, 5, 4)).unwrap();
            let mut frame = Vec::new();
            w.compress(&all, &mut frame).unwrap();
            assert_ne!(frame[2] & FLAG_MEMCPYED, 0, "{cname:?} {shuffle:?}");
            assert_eq!(frame.len(), n + MAX_OVERHEAD);
            assert_eq!(decompress(&frame).unwrap(), all);
            w.compress(&half, &mut frame).unwrap();
            assert_eq!(frame[2] & FLAG_MEMCPYED, 0, "{cname:?} {shuffle:?}");
            let first = u32::from_le_bytes(frame[16..20].try_into().unwrap()) as usize;
            let raw = u32::from_le_bytes(frame[first..first + 4].try_into().unwrap());
            // The first block's first stream: a quarter of the block
            // where the block is split by the 4-byte elements.
            let streams = if cname == Cname::Zstd { 1 } else { 4 };
            assert_eq!(
                raw as usize,
                MAX_BLOCK_BYTES / 32 * 32 / streams,
                "{cname:?} {shuffle:?}"
            );
            assert!(frame.len() < n, "{cname:?} {shuffle:?}");
            assert_eq!(decompress(&frame).unwrap(), half, "{cname:?} {shuffle:?}");
        }
    }
}

/// Told the writer's block size, c-blosc writes the same frame, byte
/// for byte: the same filters, splits, level mapping and libraries.
#[test]
fn frames_equal_c_blosc_frames_of_the_same_blocks() {
    for n in [65_536, 65_542, 3 * MAX_BLOCK_BYTES + 1234] {
        let data = counts(n, 9);
        for cname in CNAMES {
            for shuffle in SHUFFLES {
                for typesize in [1, 2, 4, 8, 16] {
                    for level in [1, 2, 5, 9] {
                        let p = params(cname, shuffle, level, typesize);
                        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                        Writer::new(p).unwrap().compress(&data, &mut ours).unwrap();
                        // c-blosc multiplies the block size it is told
                        // by the element size when it splits blocks.
                        let block = block_bytes(n, typesize);
                        let told = if splits(cname, typesize, block) {
                            block / typesize
                        } else {
                            block
                        };
                        compress_blocks(&p, &data, &mut theirs, told).unwrap();
                        let differ = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                        assert!(
                            ours == theirs,
                            "{cname:?} {shuffle:?} t{typesize} l{level} n{n}: {} and {} bytes, first difference at {differ:?}",
                            ours.len(),
                            theirs.len()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn bad_parameters_are_refused() {
    assert_eq!(
        Writer::new(params(Cname::Lz4, Shuffle::Byte, 10, 2)).err(),
        Some(Error::Level(10))
    );
    assert_eq!(
        Writer::new(params(Cname::Lz4, Shuffle::Byte, 1, 0)).err(),
        Some(Error::Typesize(0))
    );
    assert_eq!(
        Writer::new(params(Cname::Lz4, Shuffle::Byte, 1, MAX_TYPESIZE + 1)).err(),
        Some(Error::Typesize(MAX_TYPESIZE + 1))
    );
}
