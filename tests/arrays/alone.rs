//! Every array of a stream of several, its frames interleaved at random,
//! is what a stream of that array alone writes, shard for shard.

use super::*;

#[derive(Debug, Clone)]
struct ArrayCase {
    uint16: bool,
    zstd: bool,
    /// (size, tile, tiles_per_shard) of t, y, x; t size 0 = unbounded.
    dims: [(u64, u64, u64); 3],
    /// Planes written.
    planes: u64,
    pyramid: bool,
}

fn array_case() -> impl Strategy<Value = ArrayCase> {
    (
        any::<bool>(),
        any::<bool>(),
        (0u64..5, 1u64..4, 1u64..3),
        (1u64..20, 1u64..9, 1u64..4),
        (1u64..20, 1u64..9, 1u64..4),
        0u64..9,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(uint16, zstd, t, mut y, x, planes, pyramid)| {
            let planes = if t.0 == 0 { planes } else { t.0 };
            if pyramid && y.0 == 1 && x.0 == 1 {
                // A pyramid halves a dimension of more than one element.
                y.0 = 2;
            }
            ArrayCase {
                uint16,
                zstd,
                dims: [t, y, x],
                planes,
                pyramid,
            }
        })
}

fn array_json(key: &str, c: &ArrayCase) -> serde_json::Value {
    let names = ["t", "y", "x"];
    let dims: Vec<_> = c
        .dims
        .iter()
        .zip(names)
        .map(|(&(size, tile, tps), name)| {
            serde_json::json!({"name": name, "size": size, "tile": tile.min(size.max(1)).max(1),
                               "tiles_per_shard": tps})
        })
        .collect();
    let mut a = serde_json::json!({
        "key": key,
        "dtype": if c.uint16 { "uint16" } else { "uint8" },
        "dimensions": dims,
        "codec": if c.zstd { serde_json::json!({"name": "zstd", "level": 1}) }
                 else { serde_json::json!({"name": "none"}) },
    });
    if c.pyramid {
        a["multiscale"] = serde_json::json!({"levels": 2});
    }
    a
}

fn plane_bytes(c: &ArrayCase) -> usize {
    (c.dims[1].0 * c.dims[2].0) as usize * if c.uint16 { 2 } else { 1 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn every_array_is_what_a_stream_of_it_alone_writes(
        cases in prop::collection::vec(array_case(), 1..5),
        same_shape in any::<bool>(),
        order_seed in any::<u64>(),
        latency_ms in 1u64..30,
    ) {
        let mut cases = cases;
        if same_shape {
            // Arrays of one shape share a backend and its staging.
            let first = cases[0].clone();
            for c in cases.iter_mut().skip(1) {
                *c = ArrayCase { planes: c.planes.min(first.dims[0].0.max(8)), ..first.clone() };
                if first.dims[0].0 > 0 { c.planes = first.dims[0].0; }
            }
        }
        let keys: Vec<String> = (0..cases.len()).map(|i| format!("a{i}")).collect();
        let cfg = serde_json::json!({
            "arrays": cases.iter().zip(&keys).map(|(c, k)| array_json(k, c)).collect::<Vec<_>>(),
            "backend": "cpu", "threads": 2, "max_latency_ms": latency_ms,
        });
        let multi = ArraysConfig::from_json(&cfg.to_string()).unwrap();
        let data: Vec<Vec<u8>> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| bytes_of(i, plane_bytes(c) * c.planes as usize))
            .collect();
        // Frames interleaved at random, each array's in order.
        let (got, sink) = collector();
        let mut s = Stream::with_arrays(&multi, Some(sink)).unwrap();
        let mut next = vec![0usize; cases.len()];
        let mut seed = order_seed | 1;
        loop {
            let open: Vec<usize> = (0..cases.len())
                .filter(|&i| next[i] < cases[i].planes as usize)
                .collect();
            if open.is_empty() { break; }
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
            let i = open[(seed % open.len() as u64) as usize];
            let p = plane_bytes(&cases[i]);
            let frame = &data[i][next[i] * p..(next[i] + 1) * p];
            prop_assert_eq!(s.write_blocking_to(i, frame, None).unwrap(), p);
            next[i] += 1;
        }
        let summary = s.finish().unwrap();
        let got = got.lock().unwrap().clone();
        for (i, _) in cases.iter().enumerate() {
            let alone = multi.array_config(&multi.arrays[i]);
            let (want, sink) = collector();
            let mut one = Stream::new(&alone, Some(sink)).unwrap();
            one.write_blocking(&data[i], None).unwrap();
            let one_summary = one.finish().unwrap();
            prop_assert_eq!(summary.array_planes[i], one_summary.planes);
            let want = want.lock().unwrap().clone();
            let mine: Shards = got
                .iter()
                .filter(|((a, _, _), _)| *a == i as u32)
                .map(|((_, l, c), b)| ((0, *l, c.clone()), b.clone()))
                .collect();
            prop_assert_eq!(mine.len(), want.len(), "array {}: shard count", i);
            for (k, v) in &want {
                prop_assert!(mine.get(k) == Some(v), "array {}: shard {:?} differs", i, k);
            }
        }
    }
}
