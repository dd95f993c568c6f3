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
    /// What a mean sums in: exact for integers, f64 for floats.
    type Sum: Copy + Default + Send;
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
    fn order(a: &Self, b: &Self) -> Ordering;
    fn add(sum: Self::Sum, v: Self) -> Self::Sum;
    /// The mean of `n` elements that sum to `sum`, as the type rounds it.
    fn mean_of(sum: Self::Sum, n: usize) -> Self;
}

/// `SIZE`, `read` and `write` of a type with `from_le_bytes`/`to_le_bytes`.
macro_rules! le_bytes {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();
        fn read(b: &[u8]) -> Self {
            <$t>::from_le_bytes(b[..Self::SIZE].try_into().expect("element width"))
        }
        fn write(self, b: &mut [u8]) {
            b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
        }
    };
}

macro_rules! integer_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            le_bytes!($t);
            type Sum = i128;
            fn order(a: &Self, b: &Self) -> Ordering {
                a.cmp(b)
            }
            fn add(sum: i128, v: Self) -> i128 {
                sum + v as i128
            }
            fn mean_of(sum: i128, n: usize) -> Self {
                round_half_even(sum, n as i128) as $t
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
            le_bytes!($t);
            fn order(a: &Self, b: &Self) -> Ordering {
                let to: fn($t) -> f64 = $to;
                // totalOrder of the type equals that of its exact f64 value
                // for every value but NaN payloads, which keep their sign.
                to(*a).total_cmp(&to(*b))
            }
            type Sum = f64;
            fn add(sum: f64, v: Self) -> f64 {
                let to: fn($t) -> f64 = $to;
                sum + to(v)
            }
            fn mean_of(sum: f64, n: usize) -> Self {
                let from: fn(f64) -> $t = $from;
                from(sum / n as f64)
            }
        }
    )*};
}
float_sample!(
    f16 => f16::from_f64, f16::to_f64;
    f32 => |v| v as f32, |v| v as f64;
    f64 => |v| v, |v| v
);

/// Sorting networks for the windows of two and three halved dimensions
/// (Knuth's 5 and 19 comparators): no data-dependent branches, where an
/// insertion sort mispredicts about every other comparison.
const NETWORK_4: [(usize, usize); 5] = [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)];
const NETWORK_8: [(usize, usize); 19] = [
    (0, 2),
    (1, 3),
    (4, 6),
    (5, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
    (0, 1),
    (2, 3),
    (4, 5),
    (6, 7),
    (2, 4),
    (3, 5),
    (1, 4),
    (3, 6),
    (1, 2),
    (3, 4),
    (5, 6),
];

/// Sorts `w` by `network` (whose indices are all below `w.len()`).
fn sort_by_network<T: Sample>(w: &mut [T], network: &[(usize, usize)]) {
    for &(i, j) in network {
        let (a, b) = (w[i], w[j]);
        let swap = T::order(&b, &a) == Ordering::Less;
        w[i] = if swap { b } else { a };
        w[j] = if swap { a } else { b };
    }
}

/// The lower median of a window: a sorting network for 4 and 8 elements,
/// else an insertion sort, which beats a general sort on the few elements
/// (2 to 32) a window holds.
fn lower_median<T: Sample>(w: &mut [T]) -> T {
    match w.len() {
        4 => sort_by_network(w, &NETWORK_4),
        8 => sort_by_network(w, &NETWORK_8),
        _ => insertion_sort(w),
    }
    w[(w.len() - 1) / 2]
}

fn insertion_sort<T: Sample>(w: &mut [T]) {
    for i in 1..w.len() {
        let v = w[i];
        let mut j = i;
        while j > 0 && T::order(&v, &w[j - 1]) == Ordering::Less {
            w[j] = w[j - 1];
            j -= 1;
        }
        w[j] = v;
    }
}

/// One output plane, in rows along the last dimension shared among the
/// pool's threads. Each output row's window spans a few source rows (one
/// or two per plane and per halved dimension): their offsets are worked
/// out once per row, then each element's window is read across them.
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
    let (row, last_size, last_ds) = match rank {
        0 => (1, 1, false),
        _ => (
            out_inner[rank - 1] as usize,
            inner[rank - 1],
            r.downsample[rank - 1],
        ),
    };
    out.par_chunks_mut(row * T::SIZE).enumerate().for_each_init(
        || (vec![0u64; rank], Vec::new(), Vec::<T>::new(), Vec::new()),
        |(coord, rows, window, sums), (row_index, out_row)| {
            if rank > 0 {
                crate::layout::unravel(
                    row_index as u64,
                    &out_inner[..rank - 1],
                    &mut coord[..rank - 1],
                );
            }
            source_rows(r, &stride, plane_elems, planes, coord, rows);
            let last = |x: usize| {
                if rank == 0 {
                    0..1
                } else {
                    crate::layout::pyramid::window(x as u64, last_size, last_ds)
                }
            };
            let at = |i: usize| T::read(&src[i * T::SIZE..]);
            match r.method {
                Method::Median => {
                    for x in 0..row {
                        window.clear();
                        // Row-major window order: source rows in order,
                        // and along each the last dimension fastest.
                        for &start in rows.iter() {
                            for e in last(x) {
                                window.push(at(start + e as usize));
                            }
                        }
                        lower_median(window).write(&mut out_row[x * T::SIZE..]);
                    }
                }
                Method::Decimate => {
                    for x in 0..row {
                        at(rows[0] + last(x).start as usize).write(&mut out_row[x * T::SIZE..]);
                    }
                }
                // Row by row into per-element accumulators: the same
                // window order, without gathering each window.
                Method::Mean => {
                    // Reused from row to row of this worker.
                    sums.clear();
                    sums.resize(row, T::Sum::default());
                    for &start in rows.iter() {
                        for (x, sum) in sums.iter_mut().enumerate() {
                            for e in last(x) {
                                *sum = T::add(*sum, at(start + e as usize));
                            }
                        }
                    }
                    for (x, &sum) in sums.iter().enumerate() {
                        let n = rows.len() * last(x).count();
                        T::mean_of(sum, n).write(&mut out_row[x * T::SIZE..]);
                    }
                }
                Method::Min | Method::Max => {
                    let keep = if r.method == Method::Min {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                    for x in 0..row {
                        let mut best = at(rows[0] + last(x).start as usize);
                        for &start in rows.iter() {
                            for e in last(x) {
                                let v = at(start + e as usize);
                                if T::order(&v, &best) == keep {
                                    best = v;
                                }
                            }
                        }
                        best.write(&mut out_row[x * T::SIZE..]);
                    }
                }
            }
        },
    );
}

/// The element offsets where the source rows of the output row at
/// `coord` (all but the last coordinate) begin, in row-major window order:
/// planes first, then each dimension but the last.
fn source_rows(
    r: &PlaneReduction,
    stride: &[usize],
    plane_elems: usize,
    planes: usize,
    coord: &[u64],
    rows: &mut Vec<usize>,
) {
    rows.clear();
    for p in 0..planes {
        rows.push(p * plane_elems);
    }
    let rank = coord.len();
    for d in 0..rank.saturating_sub(1) {
        let w = crate::layout::pyramid::window(coord[d], r.inner[d], r.downsample[d]);
        let before = rows.len();
        // Each row so far, once per index of the window along d.
        let mut next = Vec::with_capacity(before * 2);
        for &at in rows.iter() {
            for i in w.clone() {
                next.push(at + i as usize * stride[d]);
            }
        }
        *rows = next;
    }
}

#[cfg(test)]
mod tests;
