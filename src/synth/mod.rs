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

mod exact;
#[cfg(test)]
mod tests;

use exact::{exp_neg, f32_to_f16_bits, mix, normal_table, row_rng, sin_taylor, SplitMix64};

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
#[derive(Clone)]
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
#[derive(Clone)]
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
