use super::*;
use crate::config::Config;

/// Every level's compressed epochs, as (level, epoch, offsets, bytes).
type Out = Vec<(u32, u64, Vec<u64>, Vec<u8>)>;

fn config() -> Validated {
    Config::from_json(
        r#"{"dtype": "uint16", "backend": "cpu", "threads": 2,
            "dimensions": [{"name": "t", "size": 0, "tile": 2, "downsample": true},
                           {"name": "c", "size": 2, "tile": 1},
                           {"name": "y", "size": 9, "tile": 4}, {"name": "x", "size": 7, "tile": 4}],
            "multiscale": {"levels": 4, "method": "mean"}}"#,
    )
    .unwrap()
    .validate()
    .unwrap()
}

/// Streams `batches` (whole planes of level 0) through a pyramid; with
/// `backend_level1`, level 1 of every batch of an even number of planes
/// comes reduced from outside, as a GPU backend hands it over.
fn run(v: &Validated, batches: &[Vec<u8>], backend_level1: bool) -> Out {
    run_with(v, batches, backend_level1, None)
}

/// A backend that takes at most one epoch per batch and hands each
/// batch's epochs on at the next call, or at `drain`, as the GPU
/// backend does.
struct OneEpochLate {
    inner: CpuBackend,
    held: Vec<CompressedEpoch>,
}

impl Backend for OneEpochLate {
    fn compress_epoch(
        &mut self,
        job: crate::backend::EpochJob<'_>,
        out: &mut CompressedEpoch,
    ) -> Result<()> {
        self.inner.compress_epoch(job, out)
    }

    fn compress_batch(
        &mut self,
        job: BatchJob<'_>,
        spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        assert_eq!(job.epochs, 1, "a batch within max_batch_epochs");
        let held = std::mem::take(&mut self.held);
        let mut mine = Vec::new();
        self.inner.compress_batch(job, spare, &mut |e| {
            mine.push(e);
            true
        })?;
        self.held = mine;
        for e in held {
            done(e);
        }
        Ok(())
    }

    fn max_batch_epochs(&self) -> usize {
        1
    }

    fn holds_batch(&self) -> bool {
        !self.held.is_empty()
    }

    fn drain(
        &mut self,
        _metrics: &Metrics,
        _spare: &mut dyn FnMut() -> CompressedEpoch,
        done: &mut dyn FnMut(CompressedEpoch) -> bool,
    ) -> Result<()> {
        for e in std::mem::take(&mut self.held) {
            done(e);
        }
        Ok(())
    }
}

fn run_with(
    v: &Validated,
    batches: &[Vec<u8>],
    backend_level1: bool,
    level1: Option<Box<dyn Backend>>,
) -> Out {
    let mut p = Pyramid::new(v, level1, &mut None).unwrap().unwrap();
    let metrics = Metrics::default();
    let cancel = AtomicBool::new(false);
    let mut got: Out = Vec::new();
    let (r, pairs) = p.first_reduction();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut outside = backend_level1;
    let mut collect = |p: &mut Pyramid, f: &mut dyn FnMut(&mut Pyramid, &mut Outlet<'_>)| {
        let mut done = |level: u32, e: CompressedEpoch| {
            got.push((level, e.epoch, e.offsets.clone(), e.packed()));
            true
        };
        f(
            p,
            &mut Outlet {
                cancel: &cancel,
                metrics: &metrics,
                spare: &mut CompressedEpoch::default,
                done: &mut done,
            },
        );
    };
    for b in batches {
        let planes = b.len() / r.src_plane_bytes();
        outside &= !pairs || planes % 2 == 0;
        if outside {
            let mut level1 = Vec::new();
            let step = if pairs { 2 } else { 1 };
            for w in b.chunks(step * r.src_plane_bytes()) {
                let mut plane = vec![0u8; r.out_plane_bytes()];
                r.reduce(w, &mut plane, &pool);
                level1.extend(plane);
            }
            p.take_level1(level1, planes as u64, &metrics).unwrap();
        } else {
            p.reduce(b, &metrics).unwrap();
        }
        collect(&mut p, &mut |p, o| p.compress_whole(o).unwrap());
    }
    collect(&mut p, &mut |p, o| p.finish(o).unwrap());
    got
}

#[test]
fn level_1_from_the_backend_gives_the_same_levels() {
    let v = config();
    let plane = (2 * 9 * 7 * 2) as usize;
    let data: Vec<u8> = (0..plane * 23).map(|i| (i * 7 % 251) as u8).collect();
    // Batches of 4, 6 and 2 planes, then 11 (odd: the host takes over).
    let mut batches = Vec::new();
    let mut at = 0;
    for n in [4, 6, 2, 11] {
        batches.push(data[at * plane..(at + n) * plane].to_vec());
        at += n;
    }
    let host = run(&v, &batches, false);
    let outside = run(&v, &batches, true);
    assert!(host.iter().any(|e| e.0 == 3), "every level has epochs");
    assert_eq!(host, outside);
}

/// Level 1 on a backend of its own that takes one epoch per call and
/// returns it a call late: the same epochs of every level, each level
/// in order.
#[test]
fn level_1_on_its_own_backend_gives_the_same_levels() {
    let v = config();
    let plane = (2 * 9 * 7 * 2) as usize;
    let data: Vec<u8> = (0..plane * 41).map(|i| (i * 13 % 241) as u8).collect();
    let mut batches = Vec::new();
    let mut at = 0;
    for n in [16, 4, 2, 8, 11] {
        batches.push(data[at * plane..(at + n) * plane].to_vec());
        at += n;
    }
    let by_level = |mut out: Out| {
        out.sort_by_key(|e| (e.0, e.1));
        out
    };
    let host = run(&v, &batches, false);
    for outside in [false, true] {
        let pool = worker_pool(1).unwrap();
        let own = OneEpochLate {
            inner: CpuBackend::with_pool(&v, &v.image.levels[1], pool).unwrap(),
            held: Vec::new(),
        };
        let got = run_with(&v, &batches, outside, Some(Box::new(own)));
        let level1: Vec<u64> = got.iter().filter(|e| e.0 == 1).map(|e| e.1).collect();
        assert!(level1.len() > 2, "level 1 has several epochs");
        assert!(
            level1.windows(2).all(|w| w[0] + 1 == w[1]),
            "in order: {level1:?}"
        );
        assert_eq!(by_level(host.clone()), by_level(got));
    }
}
