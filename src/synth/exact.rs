//! Exact arithmetic for the generator: a counter-based random stream and
//! the few transcendental functions it needs, written with IEEE-exact
//! operations only, so every platform produces the same bits.

use std::sync::OnceLock;

/// The noise stream of one image row of one frame: independent of every other
/// row, so rows and frames can be generated in any order.
pub(super) fn row_rng(seed: u64, index: u64, row: u64) -> SplitMix64 {
    SplitMix64::new(mix(mix(mix(seed) ^ index) ^ row))
}

/// SplitMix64 (Steele, Lea & Flood 2014): tiny, fast, and good enough for noise.
pub(super) struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 output function: a bijective 64-bit mixer.
pub(super) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub(super) fn next(&mut self) -> u64 {
        let out = mix(self.state);
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        out
    }

    /// Uniform in [lo, hi), from the top 53 bits.
    pub(super) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * unit
    }
}

/// Standard normal deviates at the 65536 quantiles (i + 1/2) / 65536, so one
/// 16-bit random number picks a normal deviate (tails end near ±4.3 sigma).
pub(super) fn normal_table() -> &'static [f32] {
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..1u32 << 16)
            .map(|i| inverse_normal_cdf((f64::from(i) + 0.5) / 65536.0) as f32)
            .collect()
    })
}

/// sin(x) for 0 <= x < 2.5π by its Taylor series around π (|x - π| < 1.5π
/// needs ~30 terms for full f64 precision). Plain arithmetic only, so the
/// result is identical everywhere.
pub(super) fn sin_taylor(x: f64) -> f64 {
    // sin(x) = -sin(x - π)
    let d = x - std::f64::consts::PI;
    let mut term = d;
    let mut sum = d;
    for n in 1..30 {
        term *= -d * d / f64::from((2 * n) * (2 * n + 1));
        sum += term;
    }
    -sum
}

/// e^-x for x >= 0, by e^-x = (e^(-x/256))^256 with a Taylor series for the
/// small power. Plain arithmetic only, so the result is identical everywhere.
pub(super) fn exp_neg(x: f64) -> f64 {
    let y = -x / 256.0;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..12 {
        term *= y / f64::from(n);
        sum += term;
    }
    for _ in 0..8 {
        sum *= sum;
    }
    sum
}

/// ln(x) for x > 0: split off the binary exponent, then
/// ln(m) = 2·atanh((m - 1) / (m + 1)) for the mantissa m in [1, 2).
pub(super) fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    for n in 0..40 {
        sum += term / f64::from(2 * n + 1);
        term *= s2;
    }
    2.0 * sum + exponent as f64 * std::f64::consts::LN_2
}

/// The standard normal quantile for 0 < p < 1, by Acklam's rational
/// approximation (relative error below 1.2e-9).
pub(super) fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.38357751867269e+02,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        let num = ((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5];
        let den = (((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0;
        num / den
    };
    if p < P_LOW {
        tail((-2.0 * ln(p)).sqrt())
    } else if p > 1.0 - P_LOW {
        -tail((-2.0 * ln(1.0 - p)).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        let num = (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q;
        let den = ((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0;
        num / den
    }
}

/// The IEEE 754 binary16 bits nearest to `x` (round to nearest, ties to even),
/// as a hardware conversion gives them: overflow goes to infinity, tiny values
/// to (signed) subnormals or zero, NaN stays a quiet NaN.
pub(super) fn f32_to_f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;

    if exponent == 0xff {
        // Infinity, or NaN: keep the top payload bits and force it quiet.
        let nan = if mantissa != 0 {
            0x200 | (mantissa >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    // binary16 exponent bias is 15, binary32's 127.
    let half_exponent = exponent - 127 + 15;
    if half_exponent >= 0x1f {
        return sign | 0x7c00;
    }
    if half_exponent <= 0 {
        // A binary16 subnormal counts units of 2^-24. The f32 value is
        // full · 2^(exponent - 150), so units = full >> (126 - exponent).
        if exponent == 0 {
            return sign; // f32 subnormals are far below 2^-25
        }
        let full = mantissa | 0x80_0000;
        let shift = (126 - exponent) as u32; // 14..
        if shift > 24 {
            return sign; // below half the smallest subnormal
        }
        return sign | round_shift(full, shift) as u16;
    }
    // Normal: drop 13 mantissa bits. A carry out of the mantissa correctly
    // bumps the exponent, up to infinity.
    let combined = ((half_exponent as u32) << 23) | mantissa;
    sign | round_shift(combined, 13) as u16
}

/// `value >> shift`, rounded to nearest with ties to even.
pub(super) fn round_shift(value: u32, shift: u32) -> u32 {
    let kept = value >> shift;
    let rest = value & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rest > half || (rest == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}
