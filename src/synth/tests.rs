use super::exact::{inverse_normal_cdf, ln};
use super::*;

fn frame(g: &Generator, index: u64) -> Vec<u8> {
    let mut out = vec![0u8; g.frame_bytes()];
    g.fill_frame(index, &mut out);
    out
}

fn u16s(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// zstd level 1 over tiles of 32 frames x 32 rows x 32 columns of u16
/// (64 KiB each), as the writer would compress them.
fn zstd1_ratio(g: &Generator, frames: u64) -> f64 {
    let (h, w) = (g.frame_shape()[0] as usize, g.frame_shape()[1] as usize);
    let data: Vec<u8> = (0..frames).flat_map(|i| frame(g, i)).collect();
    let (mut raw, mut packed) = (0usize, 0usize);
    let mut tile = Vec::with_capacity(32 * 32 * 32 * 2);
    for t0 in (0..frames as usize).step_by(32) {
        for y0 in (0..h).step_by(32) {
            for x0 in (0..w).step_by(32) {
                tile.clear();
                for t in t0..t0 + 32 {
                    for y in y0..y0 + 32 {
                        let start = ((t * h + y) * w + x0) * 2;
                        tile.extend_from_slice(&data[start..start + 64]);
                    }
                }
                raw += tile.len();
                packed += zstd::bulk::compress(&tile, 1).unwrap().len();
            }
        }
    }
    raw as f64 / packed as f64
}

#[test]
fn pattern_names_round_trip() {
    for p in Pattern::ALL {
        assert_eq!(p.to_string().parse::<Pattern>(), Ok(p));
    }
    assert!("noise".parse::<Pattern>().is_err());
}

#[test]
fn frames_are_deterministic_and_order_independent() {
    for pattern in Pattern::ALL {
        for dtype in DType::ALL {
            let a = Generator::new(pattern, dtype, &[3, 40, 70], 7);
            let b = Generator::new(pattern, dtype, &[3, 40, 70], 7);
            let later = frame(&b, 5);
            assert_eq!(frame(&a, 5), later, "{pattern} {dtype}");
            assert_eq!(frame(&a, 0), frame(&b, 0), "{pattern} {dtype}");
            assert_ne!(frame(&a, 0), frame(&a, 1), "{pattern} {dtype}");
        }
    }
}

/// Pins the exact bytes, so that any change to the stream (which peers
/// rely on to see identical data) is deliberate.
#[test]
fn output_is_pinned() {
    let cases = [
        (Pattern::Microscopy, DType::Uint16, &[64, 64][..]),
        (Pattern::Microscopy, DType::Float16, &[2, 16, 24]),
        (Pattern::Microscopy, DType::Int64, &[33]),
        (Pattern::Sparse, DType::Uint8, &[40, 40]),
        (Pattern::Random, DType::Float32, &[3, 5]),
    ];
    let hashes: Vec<u64> = cases
        .iter()
        .map(|&(pattern, dtype, shape)| {
            let g = Generator::new(pattern, dtype, shape, 1);
            // FNV-1a over frames 0 and 1000.
            [frame(&g, 0), frame(&g, 1000)]
                .concat()
                .iter()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                })
        })
        .collect();
    assert_eq!(
        hashes,
        [
            5_208_106_747_728_239_711,
            7_239_139_295_873_460_304,
            10_740_646_332_422_033_798,
            16_640_811_427_638_185_382,
            17_256_169_334_438_915_309,
        ]
    );
}

#[test]
fn generator_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Generator>();
}

#[test]
fn different_seeds_differ() {
    for pattern in Pattern::ALL {
        let a = Generator::new(pattern, DType::Uint16, &[64, 64], 1);
        let b = Generator::new(pattern, DType::Uint16, &[64, 64], 2);
        assert_ne!(frame(&a, 0), frame(&b, 0), "{pattern}");
    }
}

#[test]
fn frames_are_not_constant_in_any_type() {
    for pattern in Pattern::ALL {
        for dtype in DType::ALL {
            let g = Generator::new(pattern, dtype, &[2, 50, 60], 3);
            let f = frame(&g, 0);
            let first = &f[..dtype.size()];
            let distinct = f.chunks_exact(dtype.size()).filter(|e| *e != first).count();
            assert!(distinct > f.len() / dtype.size() / 100, "{pattern} {dtype}");
        }
    }
}

#[test]
fn microscopy_statistics_are_plausible() {
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[512, 512], 11);
    let v = u16s(&frame(&g, 0));
    let mut sorted = v.clone();
    sorted.sort_unstable();
    // Most pixels are background: median near 100, spread near
    // sqrt(gain * 100 + read noise^2) = 12.4.
    let median = sorted[v.len() / 2];
    assert!((98..=103).contains(&median), "median {median}");
    let max = *sorted.last().unwrap();
    assert!((1000..=5000).contains(&max), "max {max}");
    let background: Vec<f64> = v
        .iter()
        .filter(|&&x| x < 150)
        .map(|&x| f64::from(x))
        .collect();
    let mean = background.iter().sum::<f64>() / background.len() as f64;
    let var = background.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / background.len() as f64;
    assert!(
        (11.0..14.0).contains(&var.sqrt()),
        "background sd {}",
        var.sqrt()
    );
}

#[test]
fn microscopy_u16_compresses_like_camera_data() {
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[256, 256], 5);
    let ratio = zstd1_ratio(&g, 32);
    assert!((1.6..2.2).contains(&ratio), "zstd-1 ratio {ratio}");
}

#[test]
fn random_is_incompressible_and_sparse_is_not() {
    let random = Generator::new(Pattern::Random, DType::Uint16, &[256, 256], 5);
    assert!(zstd1_ratio(&random, 32) < 1.01);
    let sparse = Generator::new(Pattern::Sparse, DType::Uint16, &[256, 256], 5);
    assert!(zstd1_ratio(&sparse, 32) > 4.0);
}

#[test]
fn any_rank_works() {
    for shape in [&[][..], &[5], &[1, 1], &[2, 3, 4, 5], &[0, 4], &[4, 0]] {
        let g = Generator::new(Pattern::Microscopy, DType::Float32, shape, 1);
        let n: u64 = shape.iter().product();
        assert_eq!(g.frame_bytes() as u64, n * 4);
        let f = frame(&g, 9);
        assert_eq!(f, frame(&g, 9));
    }
    // Rank 0: one element per frame, still varying between frames.
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[], 1);
    let values: std::collections::HashSet<Vec<u8>> = (0..20).map(|i| frame(&g, i)).collect();
    assert!(values.len() > 5);
}

#[test]
fn extra_planes_are_similar_but_not_equal() {
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[2, 128, 128], 3);
    let f = u16s(&frame(&g, 0));
    let (p0, p1) = f.split_at(128 * 128);
    assert_ne!(p0, p1);
    let mean = |p: &[u16]| p.iter().map(|&v| f64::from(v)).sum::<f64>() / p.len() as f64;
    assert!((mean(p0) / mean(p1) - 1.0).abs() < 0.2);
}

#[test]
fn types_follow_the_u16_reference() {
    let shape = [40, 50];
    let reference = u16s(&frame(
        &Generator::new(Pattern::Microscopy, DType::Uint16, &shape, 4),
        2,
    ));
    let of = |dtype| frame(&Generator::new(Pattern::Microscopy, dtype, &shape, 4), 2);
    for (q, b) in reference.iter().zip(of(DType::Float32).chunks_exact(4)) {
        assert_eq!(f32::from(*q), f32::from_le_bytes(b.try_into().unwrap()));
    }
    for (q, b) in reference.iter().zip(of(DType::Int16).chunks_exact(2)) {
        assert_eq!(
            i32::from(*q) - 1024,
            i32::from(i16::from_le_bytes([b[0], b[1]]))
        );
    }
    for (q, b) in reference.iter().zip(of(DType::Uint32).chunks_exact(4)) {
        assert_eq!(
            u32::from(*q) * 0x10001,
            u32::from_le_bytes(b.try_into().unwrap())
        );
    }
    for (q, b) in reference.iter().zip(of(DType::Int8)) {
        assert_eq!(
            ((i32::from(*q) + 8) / 16 - 64).clamp(-128, 127),
            i32::from(b as i8)
        );
    }
    // Signed types use negative values too.
    assert!(of(DType::Int16)
        .chunks_exact(2)
        .any(|b| i16::from_le_bytes([b[0], b[1]]) < 0));
}

#[test]
fn write_raw_writes_the_frames() {
    let g = Generator::new(Pattern::Microscopy, DType::Uint16, &[3, 17, 9], 8);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("frames.raw");
    g.write_raw(&path, 21).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 21 * g.frame_bytes());
    let mut expected = vec![0u8; 21 * g.frame_bytes()];
    g.fill_frames(0, &mut expected);
    assert_eq!(bytes, expected);
    g.write_raw(&path, 0).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn math_helpers_are_accurate() {
    for k in 0..MODULATION_PERIOD {
        let a = 2.0 * std::f64::consts::PI * k as f64 / MODULATION_PERIOD as f64;
        let (s, c) = sin_cos_table()[k as usize];
        assert!(
            (s - a.sin()).abs() < 1e-12 && (c - a.cos()).abs() < 1e-12,
            "{k}"
        );
    }
    for x in [0.0, 0.1, 1.0, 4.5, 8.0, 20.0] {
        assert!((exp_neg(x) / (-x).exp() - 1.0).abs() < 1e-11, "exp {x}");
    }
    for x in [1e-9, 0.02, 0.5, 1.0, 1.999, 3.0, 1e6] {
        assert!(
            (ln(x) - x.ln()).abs() < 1e-12 * x.ln().abs().max(1.0),
            "ln {x}"
        );
    }
    assert_eq!(inverse_normal_cdf(0.5), 0.0);
    assert!((inverse_normal_cdf(0.975) - 1.959963984540054).abs() < 1e-8);
    assert!((inverse_normal_cdf(1e-5) + 4.264890793922825).abs() < 1e-8);
    let table = normal_table();
    let mean = table.iter().map(|&z| f64::from(z)).sum::<f64>() / table.len() as f64;
    let var = table.iter().map(|&z| f64::from(z).powi(2)).sum::<f64>() / table.len() as f64;
    assert!(
        mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-3,
        "{mean} {var}"
    );
}

#[test]
fn f16_known_values() {
    // 2^e, exactly.
    let p2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    let cases = [
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (1.0, 0x3c00),
        (-2.0, 0xc000),
        (0.5, 0x3800),
        (0.1, 0x2e66),
        (1.0 / 3.0, 0x3555),
        (100.0, 0x5640),
        (4097.0, 0x6c00),   // spacing is 4 here: nearest is 4096
        (4098.0, 0x6c00),   // tie between 4096 and 4100: even mantissa
        (4099.0, 0x6c01),   // nearest is 4100
        (4102.0, 0x6c02),   // tie between 4100 and 4104: even mantissa
        (65504.0, 0x7bff),  // largest finite
        (65519.99, 0x7bff), // just below the rounding boundary
        (65520.0, 0x7c00),  // the tie rounds to even: infinity
        (1e10, 0x7c00),
        (f32::INFINITY, 0x7c00),
        (f32::NEG_INFINITY, 0xfc00),
        (p2(-14), 0x0400),          // smallest normal
        (p2(-14) * 0.9999, 0x0400), // rounds up into the normals
        (p2(-24), 0x0001),          // smallest subnormal
        (p2(-25), 0x0000),          // tie between 0 and 2^-24: even, zero
        (1.5 * p2(-25), 0x0001),    // past the tie: rounds up
        (-1.5 * p2(-24), 0x8002),   // tie between 1 and 2 units: even
        (p2(-20) * 1.5, 0x0018),    // exact subnormal, 24 units
        (1e-30, 0x0000),
    ];
    for (x, bits) in cases {
        assert_eq!(f32_to_f16_bits(x), bits, "{x:e}");
    }
    let nan = f32_to_f16_bits(f32::NAN);
    assert!(nan & 0x7c00 == 0x7c00 && nan & 0x3ff != 0);
    // A signalling NaN whose payload lives only in the dropped bits stays NaN.
    let snan = f32_to_f16_bits(f32::from_bits(0x7f80_0001));
    assert!(snan & 0x7c00 == 0x7c00 && snan & 0x3ff != 0);
}

/// Exact binary16 → f32, for checking the converter exhaustively.
fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((h >> 10) & 0x1f);
    let mantissa = f32::from(h & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        0x1f if mantissa == 0.0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        e => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

#[test]
fn f16_exhaustive_round_trip_and_ties() {
    for h in 0..=u16::MAX {
        let x = f16_to_f32(h);
        if x.is_nan() {
            continue;
        }
        assert_eq!(f32_to_f16_bits(x), h, "{h:#06x}");
        // Between this value and the next one up in magnitude: the exact
        // midpoint goes to the even one, anything off it to the nearer.
        if h & 0x7fff >= 0x7bff {
            continue;
        }
        let next = f16_to_f32(h + 1);
        let mid = (x + next) / 2.0; // exact in f32
        let even = if h & 1 == 0 { h } else { h + 1 };
        assert_eq!(f32_to_f16_bits(mid), even, "tie above {h:#06x}");
        let toward_zero = f32::from_bits(mid.to_bits() - 1);
        assert_eq!(f32_to_f16_bits(toward_zero), h, "below tie above {h:#06x}");
        let away = f32::from_bits(mid.to_bits() + 1);
        assert_eq!(f32_to_f16_bits(away), h + 1, "above tie above {h:#06x}");
    }
}
