//! Deterministic synthetic acquisition data for tests and benchmarks.
//!
//! Benchmarks must never stream zeros or constants: compressors make those
//! look far faster than real data. [`Generator`] produces frames that behave
//! like fluorescence microscopy (smooth blobs under shot and read noise), or
//! incompressible random bits, or a mostly flat, highly compressible image.
//!
//! Every frame is a pure function of (pattern, dtype, frame shape, seed, frame
//! index), so frames can be made in any order and on any thread, and peers
//! (other writers, other languages via [`Generator::write_raw`]) see identical
//! bytes. Only IEEE-exact operations (`+ - * /`, `sqrt`, conversions) are used
//! on the per-pixel path and in the precomputation; the few transcendental
//! functions needed are written out here, because the platform's `exp`/`sin`
//! may differ in the last bit between systems.

use crate::config::DType;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::sync::OnceLock;

/// What the synthetic frames look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Gaussian blobs on a background, with Poisson shot noise and read noise:
    /// `uint16` compresses about 1.9x with zstd level 1.
    Microscopy,
    /// Uniformly random bits in every element: incompressible.
    Random,
    /// A flat background with a few blobs and little noise: highly compressible.
    Sparse,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::Microscopy, Pattern::Random, Pattern::Sparse];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Microscopy => "microscopy",
            Pattern::Random => "random",
            Pattern::Sparse => "sparse",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Pattern, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown pattern {s:?} (expected microscopy, random or sparse)"))
    }
}

/// Camera background (offset plus autofluorescence), in counts.
const BACKGROUND: f32 = 100.0;
/// Blob count of a 2048x2048 plane; smaller planes get proportionally fewer so
/// that the image statistics (and compression ratio) do not depend on size.
const BLOBS_PER_REFERENCE_PLANE: f64 = 200.0;
const SPARSE_BLOBS_PER_REFERENCE_PLANE: f64 = 10.0;
const REFERENCE_PLANE_PIXELS: f64 = 2048.0 * 2048.0;
const SIGMA_RANGE: (f64, f64) = (4.0, 20.0);
const PEAK_RANGE: (f64, f64) = (300.0, 3000.0);
/// Blobs are cut off this many sigmas from their centre.
const BLOB_RADIUS_SIGMAS: f64 = 4.0;
/// Relative amplitude of the slow per-frame modulation of every blob.
const MODULATION_DEPTH: f32 = 0.2;
/// The modulation period, in frames. Phases are multiples of 2π/PERIOD, so one
/// small table of sines covers every frame, plane and blob.
const MODULATION_PERIOD: u64 = 64;
/// Extra planes (leading frame dimensions) shift the modulation phase by this
/// many table steps each, so the planes differ a little.
const PLANE_PHASE_STEPS: u64 = 4;
/// Counts per photoelectron. Shot-noise variance in counts is GAIN * mean.
const MICROSCOPY_GAIN: f32 = 1.5;
/// Read noise of the camera, in counts (standard deviation).
const MICROSCOPY_READ_NOISE: f32 = 2.0;
/// The sparse pattern has no shot noise and a read noise small enough that
/// most background pixels round to exactly the background.
const SPARSE_READ_NOISE: f32 = 0.3;

/// Makes the synthetic frames of one array.
///
/// A frame is one index along dimension 0 of the array; its shape (the
/// `frame_shape` given to [`Generator::new`]) is the remaining dimensions. The
/// last two frame dimensions form an image plane; any leading frame dimensions
/// count extra planes, which show the same blobs with a slightly different
/// modulation. A rank-1 frame is one image row and a rank-0 frame one element.
///
/// For `Microscopy` and `Sparse` the intensity is first made as a `uint16`
/// camera count `q`, then mapped into the element type:
/// `uint8` q/16, `int8` q/16 - 64, `uint16` q, `int16` q - 1024,
/// `uint32` q·0x10001, `int32` (q - 1024)·0x10001, `uint64` q·0x1_0001_0001_0001,
/// `int64` (q - 1024)·0x1_0001_0001_0001, floats q itself; each rounded to the
/// nearest value and clipped to the type's range.
pub struct Generator {
    pattern: Pattern,
    dtype: DType,
    frame_shape: Vec<u64>,
    frame_bytes: usize,
    height: usize,
    width: usize,
    seed: u64,
    /// Per pixel of a plane, the blob intensity split so that any modulation
    /// phase θ gives `t[0] + m·sin θ·t[1] + m·cos θ·t[2]` (see `blob_template`).
    template: Vec<[f32; 3]>,
    gain: f32,
    read_variance: f32,
    /// The bytes of every count 0..=65535 in the element type.
    lut: Lut,
}

/// Count-to-element lookup tables, one variant per element size, so that the
/// per-pixel loop is one table read and one small copy for every type.
enum Lut {
    B1(Vec<[u8; 1]>),
    B2(Vec<[u8; 2]>),
    B4(Vec<[u8; 4]>),
    B8(Vec<[u8; 8]>),
}

impl Generator {
    /// A generator for frames of `frame_shape` (the array shape without its
    /// first dimension) of `dtype`. The blob layout is drawn from `seed`.
    ///
    /// Panics if one frame does not fit in memory addresses (`usize`).
    pub fn new(pattern: Pattern, dtype: DType, frame_shape: &[u64], seed: u64) -> Generator {
        let frame_bytes = frame_shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or_else(|| panic!("frame shape {frame_shape:?} is too large"));
        let to_usize = |d: u64| usize::try_from(d).expect("frame dimension fits usize");
        // Leading frame dimensions just repeat the plane; fill_frame counts
        // planes from the frame size.
        let (height, width) = match frame_shape {
            [] => (1, 1),
            [w] => (1, to_usize(*w)),
            [.., h, w] => (to_usize(*h), to_usize(*w)),
        };
        let (blob_density, gain, read_noise) = match pattern {
            Pattern::Microscopy => (
                BLOBS_PER_REFERENCE_PLANE,
                MICROSCOPY_GAIN,
                MICROSCOPY_READ_NOISE,
            ),
            Pattern::Sparse => (SPARSE_BLOBS_PER_REFERENCE_PLANE, 0.0, SPARSE_READ_NOISE),
            Pattern::Random => (0.0, 0.0, 0.0),
        };
        let template = if pattern == Pattern::Random {
            Vec::new()
        } else {
            blob_template(height, width, blob_density, seed)
        };
        Generator {
            pattern,
            dtype,
            frame_shape: frame_shape.to_vec(),
            frame_bytes,
            height,
            width,
            seed,
            template,
            gain,
            read_variance: read_noise * read_noise,
            lut: Lut::new(dtype),
        }
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn frame_shape(&self) -> &[u64] {
        &self.frame_shape
    }

    /// Bytes in one frame: the product of the frame shape times the element size.
    pub fn frame_bytes(&self) -> usize {
        self.frame_bytes
    }

    /// Fill `out` with frame number `index`, as little-endian elements in
    /// row-major order.
    ///
    /// Panics if `out.len() != self.frame_bytes()`.
    pub fn fill_frame(&self, index: u64, out: &mut [u8]) {
        assert_eq!(out.len(), self.frame_bytes, "output is not one frame long");
        if self.frame_bytes == 0 {
            return;
        }
        let row_bytes = self.width * self.dtype.size();
        for (plane, plane_out) in out.chunks_exact_mut(self.height * row_bytes).enumerate() {
            // Rows are numbered across planes so that each gets its own noise.
            let first_row = (plane * self.height) as u64;
            if self.pattern == Pattern::Random {
                for (y, row) in plane_out.chunks_exact_mut(row_bytes).enumerate() {
                    let mut rng = row_rng(self.seed, index, first_row + y as u64);
                    for bytes in row.chunks_mut(8) {
                        bytes.copy_from_slice(&rng.next().to_le_bytes()[..bytes.len()]);
                    }
                }
                continue;
            }
            let step = (index + plane as u64 * PLANE_PHASE_STEPS) % MODULATION_PERIOD;
            let (sin, cos) = sin_cos_table()[step as usize];
            let field = Field {
                template: &self.template,
                width: self.width,
                sin_weight: MODULATION_DEPTH * sin as f32,
                cos_weight: MODULATION_DEPTH * cos as f32,
                gain: self.gain,
                read_variance: self.read_variance,
                seed: self.seed,
                index,
                first_row,
            };
            match &self.lut {
                Lut::B1(lut) => field.render(lut, plane_out),
                Lut::B2(lut) => field.render(lut, plane_out),
                Lut::B4(lut) => field.render(lut, plane_out),
                Lut::B8(lut) => field.render(lut, plane_out),
            }
        }
    }

    /// Fill `out` with consecutive frames starting at frame `first`.
    ///
    /// Panics if `out.len()` is not a multiple of `self.frame_bytes()`.
    pub fn fill_frames(&self, first: u64, out: &mut [u8]) {
        if self.frame_bytes == 0 {
            return;
        }
        assert_eq!(
            out.len() % self.frame_bytes,
            0,
            "output is not whole frames"
        );
        for (i, frame) in out.chunks_exact_mut(self.frame_bytes).enumerate() {
            self.fill_frame(first + i as u64, frame);
        }
    }

    /// Write frames `0..frames` to a new file at `path`, as little-endian
    /// row-major elements with nothing else, so that other tools can stream the
    /// identical bytes. Frames are generated on all cores.
    pub fn write_raw(&self, path: &Path, frames: u64) -> std::io::Result<()> {
        let mut file = std::fs::File::create(path)?;
        if self.frame_bytes == 0 {
            return Ok(());
        }
        // Batches of about 64 MiB, and at least one frame per thread; each
        // thread makes a contiguous run of the batch's frames.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_batch = (64 << 20) / self.frame_bytes;
        let per_batch = per_batch
            .max(threads)
            .min(frames.try_into().unwrap_or(usize::MAX));
        let mut buffer = vec![0u8; per_batch * self.frame_bytes];
        let mut next = 0u64;
        while next < frames {
            let count = (frames - next).min(per_batch as u64) as usize;
            let batch = &mut buffer[..count * self.frame_bytes];
            let per_thread = count.div_ceil(threads);
            std::thread::scope(|s| {
                for (i, run) in batch.chunks_mut(per_thread * self.frame_bytes).enumerate() {
                    s.spawn(move || self.fill_frames(next + (i * per_thread) as u64, run));
                }
            });
            file.write_all(batch)?;
            next += count as u64;
        }
        Ok(())
    }
}

/// Everything needed to render one plane of one frame.
struct Field<'a> {
    template: &'a [[f32; 3]],
    width: usize,
    sin_weight: f32,
    cos_weight: f32,
    gain: f32,
    read_variance: f32,
    seed: u64,
    index: u64,
    first_row: u64,
}

impl Field<'_> {
    /// Render mean + noise for every pixel, round to a camera count and store
    /// that count's bytes from `lut`.
    fn render<const N: usize>(&self, lut: &[[u8; N]], out: &mut [u8]) {
        let normal = normal_table();
        let rows = self.template.chunks_exact(self.width);
        for (y, (row_out, row_t)) in out.chunks_exact_mut(self.width * N).zip(rows).enumerate() {
            let mut rng = row_rng(self.seed, self.index, self.first_row + y as u64);
            // Four 16-bit normal deviates per random word.
            for (out4, t4) in row_out.chunks_mut(4 * N).zip(row_t.chunks(4)) {
                let mut bits = rng.next();
                for (px, t) in out4.chunks_exact_mut(N).zip(t4) {
                    let z = normal[(bits & 0xffff) as usize];
                    bits >>= 16;
                    let mean = BACKGROUND + t[0] + self.sin_weight * t[1] + self.cos_weight * t[2];
                    // Shot noise (Poisson, in its normal approximation: variance =
                    // gain * mean) plus read noise: one normal deviate for both.
                    let sd = (self.gain * mean + self.read_variance).sqrt();
                    let value = mean + sd * z;
                    // Round half up; the float-to-int cast saturates at 0 for
                    // anything negative.
                    let count = (value + 0.5).min(65535.0) as u16;
                    px.copy_from_slice(&lut[count as usize]);
                }
            }
        }
    }
}

impl Lut {
    fn new(dtype: DType) -> Lut {
        // Spreads a 16-bit count over a wider integer the usual way, by
        // repeating it, so that all its bytes carry the signal.
        const WIDEN32: i64 = 0x1_0001;
        const WIDEN64: i128 = 0x1_0001_0001_0001;
        const SIGNED_SHIFT: i64 = 1024;
        let counts = 0..=u16::MAX;
        // q / 16, rounded half up.
        let div16 = |q: u16| (i64::from(q) + 8) / 16;
        match dtype {
            DType::Uint8 => Lut::B1(counts.map(|q| [div16(q).min(255) as u8]).collect()),
            DType::Int8 => Lut::B1(
                counts
                    .map(|q| ((div16(q) - 64).clamp(-128, 127) as i8).to_le_bytes())
                    .collect(),
            ),
            DType::Uint16 => Lut::B2(counts.map(u16::to_le_bytes).collect()),
            DType::Int16 => Lut::B2(
                counts
                    .map(|q| ((i64::from(q) - SIGNED_SHIFT) as i16).to_le_bytes())
                    .collect(),
            ),
            DType::Float16 => Lut::B2(
                counts
                    .map(|q| f32_to_f16_bits(f32::from(q)).to_le_bytes())
                    .collect(),
            ),
            DType::Uint32 => Lut::B4(
                counts
                    .map(|q| (u32::from(q) * WIDEN32 as u32).to_le_bytes())
                    .collect(),
            ),
            DType::Int32 => Lut::B4(
                counts
                    .map(|q| {
                        let v = (i64::from(q) - SIGNED_SHIFT) * WIDEN32;
                        (v.clamp(i32::MIN.into(), i32::MAX.into()) as i32).to_le_bytes()
                    })
                    .collect(),
            ),
            DType::Float32 => Lut::B4(counts.map(|q| f32::from(q).to_le_bytes()).collect()),
            DType::Uint64 => Lut::B8(
                counts
                    .map(|q| (u64::from(q) * WIDEN64 as u64).to_le_bytes())
                    .collect(),
            ),
            DType::Int64 => Lut::B8(
                counts
                    .map(|q| {
                        let v = i128::from(i64::from(q) - SIGNED_SHIFT) * WIDEN64;
                        (v.clamp(i64::MIN.into(), i64::MAX.into()) as i64).to_le_bytes()
                    })
                    .collect(),
            ),
            DType::Float64 => Lut::B8(counts.map(|q| f64::from(q).to_le_bytes()).collect()),
        }
    }
}

/// The blob image of one plane. Each Gaussian blob has the amplitude
/// `peak·(1 + m·sin(θ + φ))`, with θ the frame's modulation phase and φ the
/// blob's own. Because
/// `sin(θ + φ) = sin θ·cos φ + cos θ·sin φ`, the sum over all blobs is
/// `T0 + m·sin θ·Tc + m·cos θ·Ts` with three fixed images
/// `T0 = Σ peak·g`, `Tc = Σ peak·cos φ·g`, `Ts = Σ peak·sin φ·g`:
/// precomputed once, a frame costs two multiply-adds per pixel.
fn blob_template(height: usize, width: usize, density: f64, seed: u64) -> Vec<[f32; 3]> {
    let mut template = vec![[0f32; 3]; height * width];
    if template.is_empty() {
        return template;
    }
    let pixels = (height * width) as f64;
    let count = ((density * pixels / REFERENCE_PLANE_PIXELS + 0.5) as usize).max(1);
    let mut rng = SplitMix64::new(mix(seed ^ 0x626c_6f62_7320_7631)); // "blobs v1"
    let mut gx = Vec::new();
    let mut gy = Vec::new();
    for _ in 0..count {
        let cy = rng.uniform(0.0, height as f64);
        let cx = rng.uniform(0.0, width as f64);
        let sigma = rng.uniform(SIGMA_RANGE.0, SIGMA_RANGE.1);
        let peak = rng.uniform(PEAK_RANGE.0, PEAK_RANGE.1);
        let (sin_phi, cos_phi) = sin_cos_table()[(rng.next() % MODULATION_PERIOD) as usize];
        let weights = [peak, peak * cos_phi, peak * sin_phi];

        // The Gaussian is separable: tabulate it along each axis over the
        // pixels within the cut-off radius, then add the outer product.
        let radius = BLOB_RADIUS_SIGMAS * sigma;
        let span = |centre: f64, len: usize| {
            let lo = (centre - radius).max(0.0) as usize;
            let hi = ((centre + radius).max(0.0) as usize + 1).min(len);
            lo..hi
        };
        let gauss = |d: f64| exp_neg(d * d / (2.0 * sigma * sigma));
        let (xs, ys) = (span(cx, width), span(cy, height));
        gx.clear();
        gx.extend(xs.clone().map(|x| gauss(x as f64 + 0.5 - cx)));
        gy.clear();
        gy.extend(ys.clone().map(|y| gauss(y as f64 + 0.5 - cy)));
        for (y, gy) in ys.zip(&gy) {
            let row = &mut template[y * width..][xs.clone()];
            for (px, gx) in row.iter_mut().zip(&gx) {
                let g = gx * gy;
                for (t, w) in px.iter_mut().zip(weights) {
                    *t += (w * g) as f32;
                }
            }
        }
    }
    template
}

/// The noise stream of one image row of one frame: independent of every other
/// row, so rows and frames can be generated in any order.
fn row_rng(seed: u64, index: u64, row: u64) -> SplitMix64 {
    SplitMix64::new(mix(mix(mix(seed) ^ index) ^ row))
}

/// SplitMix64 (Steele, Lea & Flood 2014): tiny, fast, and good enough for noise.
struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 output function: a bijective 64-bit mixer.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    fn next(&mut self) -> u64 {
        let out = mix(self.state);
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        out
    }

    /// Uniform in [lo, hi), from the top 53 bits.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        lo + (hi - lo) * unit
    }
}

/// Standard normal deviates at the 65536 quantiles (i + 1/2) / 65536, so one
/// 16-bit random number picks a normal deviate (tails end near ±4.3 sigma).
fn normal_table() -> &'static [f32] {
    static TABLE: OnceLock<Vec<f32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..1u32 << 16)
            .map(|i| inverse_normal_cdf((f64::from(i) + 0.5) / 65536.0) as f32)
            .collect()
    })
}

/// `(sin, cos)` of `2π k / MODULATION_PERIOD` for every k.
fn sin_cos_table() -> &'static [(f64, f64)] {
    static TABLE: OnceLock<Vec<(f64, f64)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..MODULATION_PERIOD)
            .map(|k| {
                let angle = 2.0 * std::f64::consts::PI * k as f64 / MODULATION_PERIOD as f64;
                (
                    sin_taylor(angle),
                    sin_taylor(angle + std::f64::consts::FRAC_PI_2),
                )
            })
            .collect()
    })
}

/// sin(x) for 0 <= x < 2.5π by its Taylor series around π (|x - π| < 1.5π
/// needs ~30 terms for full f64 precision). Plain arithmetic only, so the
/// result is identical everywhere.
fn sin_taylor(x: f64) -> f64 {
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
fn exp_neg(x: f64) -> f64 {
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
fn ln(x: f64) -> f64 {
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
fn inverse_normal_cdf(p: f64) -> f64 {
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
pub fn f32_to_f16_bits(x: f32) -> u16 {
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
fn round_shift(value: u32, shift: u32) -> u32 {
    let kept = value >> shift;
    let rest = value & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rest > half || (rest == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

#[cfg(test)]
mod tests {
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
        let var =
            background.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / background.len() as f64;
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
}
