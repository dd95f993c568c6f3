//! The input and the pyramid the store must hold, computed here from the
//! definitions (max of each 2 x 2 x 2 window along the halved dimensions).

use super::*;

/// The input: PLANES planes of random u16, little endian.
pub fn input() -> Vec<u8> {
    Rng(0x0e0e).bytes((PLANES * plane_elems() * 2) as usize)
}

pub fn as_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

pub fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for d in (0..shape.len() - 1).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

pub fn coords(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// One level down, by the max of each window {2i, 2i+1} along the halved
/// dimensions (acquisition order).
pub fn max_down(a: &[u16], shape: &[u64]) -> (Vec<u16>, Vec<u64>) {
    let out_shape: Vec<u64> = shape
        .iter()
        .zip(HALVED)
        .map(|(&s, h)| if h { s.div_ceil(2) } else { s })
        .collect();
    let st = strides(&out_shape);
    let mut out = vec![0u16; out_shape.iter().product::<u64>() as usize];
    for (i, &v) in a.iter().enumerate() {
        let c = coords(i as u64, shape);
        let o: u64 = (0..shape.len())
            .map(|d| if HALVED[d] { c[d] / 2 } else { c[d] } * st[d])
            .sum();
        out[o as usize] = out[o as usize].max(v);
    }
    (out, out_shape)
}

/// `a` (acquisition order, `shape`) in the storage order, as LE bytes.
pub fn stored(a: &[u16], shape: &[u64]) -> (Vec<u8>, Vec<u64>) {
    let st = strides(shape);
    let out_shape: Vec<u64> = ORDER.iter().map(|&d| shape[d]).collect();
    let mut out = Vec::with_capacity(a.len() * 2);
    for i in 0..a.len() as u64 {
        let c = coords(i, &out_shape);
        let src: u64 = (0..shape.len()).map(|d| c[d] * st[ORDER[d]]).sum();
        out.extend(a[src as usize].to_le_bytes());
    }
    (out, out_shape)
}

/// Every level in the storage order: (bytes, shape), level 0 first.
pub fn reference(data: &[u8]) -> Vec<(Vec<u8>, Vec<u64>)> {
    let mut shape: Vec<u64> = DIMS.iter().map(|d| d.0).collect();
    shape[0] = PLANES;
    let mut a = as_u16(data);
    let mut out = Vec::new();
    for k in 0..LEVELS {
        if k > 0 {
            (a, shape) = max_down(&a, &shape);
        }
        out.push(stored(&a, &shape));
    }
    out
}

/// The decoder's dimensions of a level of `shape` (storage order).
pub fn decodedims(shape: &[u64]) -> Vec<decode::Dim> {
    ORDER
        .iter()
        .zip(shape)
        .map(|(&a, &size)| decode::Dim {
            size,
            tile: DIMS[a].1,
            tiles_per_shard: DIMS[a].2,
        })
        .collect()
}
