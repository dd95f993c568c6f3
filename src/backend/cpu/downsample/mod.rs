//! The pyramid's reductions on the host: one plane of level `k + 1` from
//! the one or two planes of level `k` below it (see
//! [`crate::layout::pyramid`]). The arithmetic is the specification both
//! backends follow:
//!
//! * the window of an output element is the product, over the input's
//!   dimensions, of its elements `{2i, 2i + 1}` that exist (downsampled
//!   dimensions) or `{i}` (the others), taken in row-major order, the
//!   plane along dimension 0 slowest;
//! * `mean`: integers sum exactly and round to nearest, ties to even;
//!   floats sum in f64 in window order, divide in f64 and round once to
//!   the element type;
//! * `min`, `max`, `median`: floats ordered by IEEE 754 totalOrder
//!   (-0 before +0, NaN after +inf); the median is the lower one, the
//!   ⌈n/2⌉-th smallest, so always one of the inputs;
//! * `decimate`: the window's first element.

use crate::config::{DType, Method};
use crate::layout::pyramid::next_size;
use half::f16;
use rayon::prelude::*;
use std::cmp::Ordering;

/// Windows up to this many elements (rank 6 and below) are gathered on
/// the stack; larger ones on the heap.
const INLINE_WINDOW: usize = 64;

/// The shape of one reduction: a plane of `inner` elements per input
/// dimension 1.. (input order), halved where `downsample`.
#[derive(Debug, Clone)]
pub struct PlaneReduction {
    pub dtype: DType,
    pub method: Method,
    /// Sizes of the source plane's dimensions (all but dimension 0).
    pub inner: Vec<u64>,
    pub downsample: Vec<bool>,
}

impl PlaneReduction {
    /// Sizes of the output plane's dimensions.
    pub fn out_inner(&self) -> Vec<u64> {
        self.inner
            .iter()
            .zip(&self.downsample)
            .map(|(&s, &d)| next_size(s, d))
            .collect()
    }

    pub fn src_plane_bytes(&self) -> usize {
        self.inner.iter().product::<u64>() as usize * self.dtype.size()
    }

    pub fn out_plane_bytes(&self) -> usize {
        self.out_inner().iter().product::<u64>() as usize * self.dtype.size()
    }

    /// Reduces `src` (one or two whole source planes: the window along
    /// dimension 0) into one output plane `out`, on `pool`'s threads.
    pub fn reduce(&self, src: &[u8], out: &mut [u8], pool: &rayon::ThreadPool) {
        macro_rules! go {
            ($t:ty) => {
                pool.install(|| reduce_plane::<$t>(self, src, out))
            };
        }
        match self.dtype {
            DType::Uint8 => go!(u8),
            DType::Uint16 => go!(u16),
            DType::Uint32 => go!(u32),
            DType::Uint64 => go!(u64),
            DType::Int8 => go!(i8),
            DType::Int16 => go!(i16),
            DType::Int32 => go!(i32),
            DType::Int64 => go!(i64),
            DType::Float16 => go!(f16),
            DType::Float32 => go!(f32),
            DType::Float64 => go!(f64),
        }
    }
}

/// An element type the reductions work on.
trait Sample: Copy + Send + Sync + 'static {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
    fn order(a: &Self, b: &Self) -> Ordering;
    fn mean(window: &[Self]) -> Self;
}

macro_rules! integer_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..Self::SIZE].try_into().expect("element width"))
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn order(a: &Self, b: &Self) -> Ordering {
                a.cmp(b)
            }
            fn mean(window: &[Self]) -> Self {
                let sum: i128 = window.iter().map(|&v| v as i128).sum();
                round_half_even(sum, window.len() as i128) as $t
            }
        }
    )*};
}
integer_sample!(u8, u16, u32, u64, i8, i16, i32, i64);

/// `sum / n` rounded to nearest, ties to even (`n > 0`); the result lies
/// between the window's least and greatest element, so it fits the type.
fn round_half_even(sum: i128, n: i128) -> i128 {
    let q = sum.div_euclid(n);
    let r = sum.rem_euclid(n);
    if 2 * r > n || (2 * r == n && q % 2 != 0) {
        q + 1
    } else {
        q
    }
}

macro_rules! float_sample {
    ($($t:ty => $from:expr, $to:expr);*) => {$(
        impl Sample for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..Self::SIZE].try_into().expect("element width"))
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn order(a: &Self, b: &Self) -> Ordering {
                let to: fn($t) -> f64 = $to;
                // totalOrder of the type equals that of its exact f64 value
                // for every value but NaN payloads, which keep their sign.
                to(*a).total_cmp(&to(*b))
            }
            fn mean(window: &[Self]) -> Self {
                let to: fn($t) -> f64 = $to;
                let from: fn(f64) -> $t = $from;
                let sum = window.iter().fold(0.0f64, |acc, &v| acc + to(v));
                from(sum / window.len() as f64)
            }
        }
    )*};
}
float_sample!(
    f16 => f16::from_f64, f16::to_f64;
    f32 => |v| v as f32, |v| v as f64;
    f64 => |v| v, |v| v
);

fn pick<T: Sample>(method: Method, window: &mut [T]) -> T {
    match method {
        Method::Decimate => window[0],
        Method::Mean => T::mean(window),
        Method::Min => *window
            .iter()
            .min_by(|a, b| T::order(a, b))
            .expect("non-empty"),
        Method::Max => *window
            .iter()
            .max_by(|a, b| T::order(a, b))
            .expect("non-empty"),
        Method::Median => {
            window.sort_unstable_by(T::order);
            window[(window.len() - 1) / 2]
        }
    }
}

/// One output plane, in rows along the last dimension shared among the
/// pool's threads.
fn reduce_plane<T: Sample>(r: &PlaneReduction, src: &[u8], out: &mut [u8]) {
    let inner = &r.inner;
    let out_inner = r.out_inner();
    let rank = inner.len();
    let plane_elems: usize = inner.iter().product::<u64>() as usize;
    let planes = src.len() / (plane_elems * T::SIZE).max(1);
    // Element strides of the source plane, row-major.
    let mut stride = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * inner[d + 1] as usize;
    }
    let row = if rank == 0 {
        1
    } else {
        out_inner[rank - 1] as usize
    };
    out.par_chunks_mut(row * T::SIZE)
        .enumerate()
        .for_each(|(row_index, out_row)| {
            let mut coord = vec![0u64; rank];
            if rank > 0 {
                crate::layout::unravel(
                    row_index as u64,
                    &out_inner[..rank - 1],
                    &mut coord[..rank - 1],
                );
            }
            let mut inline = [T::read(&src[..T::SIZE]); INLINE_WINDOW];
            let mut heap = Vec::new();
            for x in 0..row {
                if rank > 0 {
                    coord[rank - 1] = x as u64;
                }
                let n = gather(
                    r,
                    src,
                    planes,
                    plane_elems,
                    &stride,
                    &coord,
                    &mut inline,
                    &mut heap,
                );
                let window = if n <= INLINE_WINDOW {
                    &mut inline[..n]
                } else {
                    &mut heap[..]
                };
                pick(r.method, window).write(&mut out_row[x * T::SIZE..]);
            }
        });
}

/// Collects the window of the output element at `coord` (row-major over
/// the source planes, then the inner dimensions); returns its length.
#[allow(clippy::too_many_arguments)]
fn gather<T: Sample>(
    r: &PlaneReduction,
    src: &[u8],
    planes: usize,
    plane_elems: usize,
    stride: &[usize],
    coord: &[u64],
    inline: &mut [T; INLINE_WINDOW],
    heap: &mut Vec<T>,
) -> usize {
    let rank = coord.len();
    // Per dimension: the first source index and how many the window holds.
    let mut first = [0usize; crate::layout::MAX_RANK];
    let mut count = [1usize; crate::layout::MAX_RANK];
    for d in 0..rank {
        let w = crate::layout::pyramid::window(coord[d], r.inner[d], r.downsample[d]);
        first[d] = w.start as usize;
        count[d] = (w.end - w.start) as usize;
    }
    let n = planes * count[..rank].iter().product::<usize>();
    heap.clear();
    let mut k = 0;
    let mut push = |v: T| {
        if n <= INLINE_WINDOW {
            inline[k] = v;
        } else {
            heap.push(v);
        }
        k += 1;
    };
    let mut idx = [0usize; crate::layout::MAX_RANK];
    for p in 0..planes {
        idx[..rank].fill(0);
        'window: loop {
            let mut at = p * plane_elems;
            for d in 0..rank {
                at += (first[d] + idx[d]) * stride[d];
            }
            push(T::read(&src[at * T::SIZE..]));
            // Odometer over the window, last dimension fastest.
            let mut d = rank;
            loop {
                if d == 0 {
                    break 'window;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < count[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests;
