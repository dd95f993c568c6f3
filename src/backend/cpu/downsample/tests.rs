use super::*;

/// One window's value, as the row-by-row paths compute it.
fn pick<T: Sample>(method: Method, window: &mut [T]) -> T {
    let mean = |w: &[T]| {
        T::mean_of(
            w.iter().fold(T::Sum::default(), |s, &v| T::add(s, v)),
            w.len(),
        )
    };
    match method {
        Method::Decimate => window[0],
        Method::Mean => mean(window),
        Method::Min => *window
            .iter()
            .min_by(|a, b| T::order(a, b))
            .expect("non-empty"),
        Method::Max => *window
            .iter()
            .max_by(|a, b| T::order(a, b))
            .expect("non-empty"),
        Method::Median => lower_median(window),
    }
}

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
}

fn run_u16(method: Method, inner: &[u64], ds: &[bool], planes: &[Vec<u16>]) -> Vec<u16> {
    let r = PlaneReduction {
        dtype: DType::Uint16,
        method,
        inner: inner.to_vec(),
        downsample: ds.to_vec(),
    };
    let src: Vec<u8> = planes
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut out = vec![0u8; r.out_plane_bytes()];
    r.reduce(&src, &mut out, &pool());
    out.chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

#[test]
fn hand_computed_windows() {
    // A 2x3 plane, both dimensions halved: windows {0,1,3,4} and {2,5}.
    let p = vec![vec![1, 2, 9, 4, 6, 3]];
    assert_eq!(run_u16(Method::Mean, &[2, 3], &[true, true], &p), [3, 6]);
    assert_eq!(run_u16(Method::Min, &[2, 3], &[true, true], &p), [1, 3]);
    assert_eq!(run_u16(Method::Max, &[2, 3], &[true, true], &p), [6, 9]);
    // Lower median of {1, 2, 4, 6} is 2; of {9, 3} is 3.
    assert_eq!(run_u16(Method::Median, &[2, 3], &[true, true], &p), [2, 3]);
    assert_eq!(
        run_u16(Method::Decimate, &[2, 3], &[true, true], &p),
        [1, 9]
    );
    // Two planes: the window along dimension 0 comes first.
    let two = vec![vec![1, 2], vec![4, 8]];
    assert_eq!(run_u16(Method::Mean, &[2], &[true], &two), [4]); // 15/4 = 3.75
    assert_eq!(run_u16(Method::Decimate, &[2], &[false], &two), [1, 2]);
    assert_eq!(run_u16(Method::Mean, &[2], &[false], &two), [2, 5]); // 2.5 -> 2, 5
}

#[test]
fn integer_mean_ties_to_even() {
    assert_eq!(round_half_even(5, 2), 2);
    assert_eq!(round_half_even(7, 2), 4);
    assert_eq!(round_half_even(-5, 2), -2);
    assert_eq!(round_half_even(-7, 2), -4);
    assert_eq!(round_half_even(-7, 4), -2);
    assert_eq!(round_half_even(10, 4), 2);
    assert_eq!(round_half_even(i64::MAX as i128 * 2, 2), i64::MAX as i128);
}

#[test]
fn float_order_is_total() {
    assert_eq!(f32::order(&-0.0, &0.0), Ordering::Less);
    assert_eq!(f64::order(&f64::NAN, &f64::INFINITY), Ordering::Greater);
    let mut w = [f16::from_f32(3.0), f16::from_f32(-1.0), f16::from_f32(2.0)];
    assert_eq!(pick(Method::Median, &mut w), f16::from_f32(2.0));
    let w = [1.0f32, 2.0, 2.0];
    assert_eq!(pick(Method::Mean, &mut w.clone()), (5.0f64 / 3.0) as f32);
}

/// A naive pyramid step over a whole small array: for each output element,
/// every source element whose halved coordinates match, in row-major order.
fn naive(method: Method, shape: &[u64], ds: &[bool], data: &[i64]) -> Vec<i64> {
    let out_shape: Vec<u64> = shape
        .iter()
        .zip(ds)
        .map(|(&s, &d)| next_size(s, d))
        .collect();
    let n_out: u64 = out_shape.iter().product();
    let n_in: u64 = shape.iter().product();
    let mut out = Vec::new();
    let mut oc = vec![0u64; shape.len()];
    let mut ic = vec![0u64; shape.len()];
    for o in 0..n_out {
        crate::layout::unravel(o, &out_shape, &mut oc);
        let mut window = Vec::new();
        for i in 0..n_in {
            crate::layout::unravel(i, shape, &mut ic);
            let inside = (0..shape.len()).all(|d| {
                if ds[d] {
                    ic[d] / 2 == oc[d]
                } else {
                    ic[d] == oc[d]
                }
            });
            if inside {
                window.push(data[i as usize]);
            }
        }
        let n = window.len() as i128;
        let v = match method {
            Method::Decimate => window[0],
            Method::Min => *window.iter().min().unwrap(),
            Method::Max => *window.iter().max().unwrap(),
            Method::Median => {
                window.sort();
                window[(window.len() - 1) / 2]
            }
            Method::Mean => {
                let s: i128 = window.iter().map(|&v| v as i128).sum();
                let q = s.div_euclid(n);
                let r = s.rem_euclid(n);
                (q + i128::from(2 * r > n || (2 * r == n && q % 2 != 0))) as i64
            }
        };
        out.push(v);
    }
    out
}

#[test]
fn matches_a_naive_reference_on_odd_shapes() {
    let shapes: &[(&[u64], &[bool])] = &[
        (&[2, 5, 7], &[true, true, true]),
        (&[1, 3, 4], &[false, true, true]),
        (&[2, 3, 2, 5], &[true, false, true, true]),
        (&[2, 9], &[false, true]),
        (&[1, 1, 6], &[true, true, true]),
    ];
    let mut seed = 0x9e3779b97f4a7c15u64;
    for &(shape, ds) in shapes {
        let n: u64 = shape.iter().product();
        let data: Vec<i64> = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % 2001) as i64 - 1000
            })
            .collect();
        // Dimension 0 holds the planes of one call: at most two.
        let r = |method| PlaneReduction {
            dtype: DType::Int32,
            method,
            inner: shape[1..].to_vec(),
            downsample: ds[1..].to_vec(),
        };
        for method in [
            Method::Mean,
            Method::Min,
            Method::Max,
            Method::Median,
            Method::Decimate,
        ] {
            let want = naive(method, shape, ds, &data);
            let red = r(method);
            let src: Vec<u8> = data
                .iter()
                .flat_map(|&v| (v as i32).to_le_bytes())
                .collect();
            let mut got = Vec::new();
            let planes_per_out = if ds[0] { 2 } else { 1 };
            let plane = red.src_plane_bytes();
            for chunk in src.chunks(plane * planes_per_out) {
                let mut out = vec![0u8; red.out_plane_bytes()];
                red.reduce(chunk, &mut out, &pool());
                got.extend(
                    out.chunks(4)
                        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64),
                );
            }
            assert_eq!(got, want, "{method:?} on {shape:?} {ds:?}");
        }
    }
}

/// The sorting networks sort every input of 0s and 1s, so every input (the
/// 0-1 principle).
#[test]
fn sorting_networks_sort_every_binary_input() {
    for (n, network) in [(4usize, &NETWORK_4[..]), (8, &NETWORK_8[..])] {
        for bits in 0u32..(1 << n) {
            let mut w: Vec<u8> = (0..n).map(|i| ((bits >> i) & 1) as u8).collect();
            sort_by_network(&mut w, network);
            assert!(
                w.windows(2).all(|p| p[0] <= p[1]),
                "{n}: {bits:b} gave {w:?}"
            );
        }
    }
}
