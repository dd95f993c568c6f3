//! The frames streamed: the protocol's generator, made before the clock
//! starts into a pool of distinct frames that the runs cycle through, so
//! that timing measures the library and not the generator.

use rayon::prelude::*;
use std::io::Write;
use std::path::Path;
use tiledzarr::synth::Generator;

/// The pool is at least this large, so that the copy into staging reads
/// main memory and not a cache, whatever the frame size.
const MIN_POOL_BYTES: u64 = 256 << 20;
/// Beyond two epochs the pool does not grow past this (memory is better
/// left to staging buffers and the ceilings).
const MAX_POOL_BYTES: u64 = 2 << 30;

pub struct Frames {
    gen: Generator,
    /// Generator frames `0..pool_frames`, back to back.
    pool: Vec<u8>,
    pool_frames: u64,
    /// Frames streamed per run: frame `i` is pool frame `i mod pool_frames`.
    frames: u64,
}

/// Frames per run: `bytes` rounded down to whole epochs (a partial last
/// epoch would be padded and compressed without being counted), at least one
/// epoch, and no more than a bounded array holds.
pub fn frames_for(bytes: u64, frame_bytes: u64, epoch_frames: u64, max: Option<u64>) -> u64 {
    let frames = bytes / frame_bytes.max(1);
    let frames = (frames / epoch_frames * epoch_frames).max(epoch_frames);
    max.map_or(frames, |m| frames.min(m))
}

/// Distinct frames: two epochs (so that neither consecutive epochs nor any
/// tile repeat a frame), at least [`MIN_POOL_BYTES`], at most
/// [`MAX_POOL_BYTES`] unless one epoch is larger, never more than streamed.
pub fn pool_frames_for(frames: u64, frame_bytes: u64, epoch_frames: u64) -> u64 {
    let fb = frame_bytes.max(1);
    let want = (2 * epoch_frames).max(MIN_POOL_BYTES.div_ceil(fb));
    let cap = (MAX_POOL_BYTES / fb).max(epoch_frames);
    want.min(cap).min(frames)
}

impl Frames {
    /// Generates the pool on all cores.
    pub fn new(gen: Generator, frames: u64, pool_frames: u64) -> Frames {
        let fb = gen.frame_bytes();
        let mut pool = vec![0u8; pool_frames as usize * fb];
        if fb > 0 {
            pool.par_chunks_mut(fb)
                .enumerate()
                .for_each(|(i, f)| gen.fill_frame(i as u64, f));
        }
        Frames {
            gen,
            pool,
            pool_frames,
            frames,
        }
    }

    pub fn generator(&self) -> &Generator {
        &self.gen
    }
    pub fn frame_bytes(&self) -> usize {
        self.gen.frame_bytes()
    }
    pub fn frames(&self) -> u64 {
        self.frames
    }
    pub fn pool_frames(&self) -> u64 {
        self.pool_frames
    }
    /// Bytes streamed per run.
    pub fn bytes(&self) -> u64 {
        self.frames * self.frame_bytes() as u64
    }

    /// Frame `i` of the stream.
    pub fn frame(&self, i: u64) -> &[u8] {
        let fb = self.frame_bytes();
        let at = (i % self.pool_frames) as usize * fb;
        &self.pool[at..at + fb]
    }

    /// The first `n` frames of the stream, in stream order (`n` whole
    /// frames from frame 0).
    pub fn stream_prefix(&self, n: u64) -> impl Iterator<Item = &[u8]> {
        (0..n).map(move |i| self.frame(i))
    }

    /// Writes the first `frames` frames of the stream to `path`, byte for
    /// byte as streamed, for the peers. When the pool covers them this is
    /// exactly what `Generator::write_raw` writes; when the stream cycles
    /// the pool, so does the file (write_raw would write other frames).
    pub fn write_raw(&self, path: &Path, frames: u64) -> std::io::Result<()> {
        let mut f = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(path)?);
        for frame in self.stream_prefix(frames) {
            f.write_all(frame)?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiledzarr::synth::Pattern;
    use tiledzarr::DType;

    #[test]
    fn frame_counts() {
        let mib = 1 << 20;
        // cam-32: 8 MiB frames, 32-frame epochs.
        assert_eq!(frames_for(2 << 30, 8 * mib, 32, None), 256);
        assert_eq!(frames_for(100 * mib, 8 * mib, 32, None), 32);
        assert_eq!(frames_for(2 << 30, 8 * mib, 32, Some(40)), 40);
        assert_eq!(pool_frames_for(256, 8 * mib, 32), 64);
        assert_eq!(pool_frames_for(32, 8 * mib, 32), 32);
        // frames-u8: 16 MiB frames, one-frame epochs: the minimum pool bytes rule.
        assert_eq!(pool_frames_for(1000, 16 * mib, 1), 16);
        // An epoch above the cap still fits whole.
        assert_eq!(pool_frames_for(10, 3 << 30, 1), 1);
    }

    #[test]
    fn the_raw_file_is_the_stream() {
        let gen = Generator::new(Pattern::Microscopy, DType::Uint16, &[8, 8], 3);
        let f = Frames::new(gen, 5, 2);
        let dir = std::env::temp_dir().join(format!("tz-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("raw");
        f.write_raw(&path, 5).unwrap();
        let raw = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let want: Vec<u8> = f.stream_prefix(5).flatten().copied().collect();
        assert_eq!(raw, want);
        assert_eq!(f.frame(4), f.frame(0));
        assert_ne!(f.frame(1), f.frame(0));
    }
}
