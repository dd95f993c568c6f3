//! Shard files written around the page cache.
//!
//! A write through the page cache copies every byte into pages the kernel
//! allocates, and that costs more than the disk's own transfer: on the
//! 2-core development machine, five runs of cam-1k (16 shard files, 143
//! MB, per run) took 0.76-1.08 s of kernel time through the page cache
//! and 0.34-0.42 s around it. Where the bytes must reach the disk before a
//! shard counts (`fsync`), going around it is all gain: cam-32 on the GPU
//! backend of an H200 machine ran 4.54 GB/s around it against 3.56
//! through it. Without `fsync` the page cache takes a burst faster than a
//! disk (8.8 against 3.9 GB/s there), so it stays the default then; a
//! stream of hours, which would fill the page cache and then be throttled
//! by it, can still ask to go around it.
//!
//! Such writes take whole blocks of [`UNBUFFERED_ALIGN`] bytes from
//! memory aligned as much. A shard's parts lie anywhere, so each thread
//! copies them through a buffer of its own (a copy at memory speed, far
//! cheaper than the page cache's), pads the last block with zeros and
//! cuts the file to its length. A file system that refuses such writes
//! turns them off for the store, and the file is written through the
//! page cache instead.

use crate::platform::{self, UNBUFFERED_ALIGN};
use std::cell::RefCell;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Bytes of each writing thread's buffer: one write to the disk each.
pub const BUFFER_BYTES: usize = 1 << 20;

/// Files written around the page cache by every store of this process:
/// how a test sees which way a store wrote.
static FILES: AtomicU64 = AtomicU64::new(0);

#[doc(hidden)]
pub fn files_written() -> u64 {
    FILES.load(Relaxed)
}

thread_local! {
    /// This thread's buffer, `BUFFER_BYTES` and room to align it; made at
    /// its first file.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A store's writes around the page cache, shared by its writing threads:
/// on until its file system refuses one.
pub struct Unbuffered {
    on: AtomicBool,
}

impl Unbuffered {
    /// For a store in `folder` that `wants` its shard files around the page
    /// cache: `None` where it does not, or where the folder's file system
    /// is not a local disk's that takes such writes
    /// ([`platform::unbuffered_writes_suit`]).
    pub fn for_folder(folder: &Path, wants: bool) -> Option<Unbuffered> {
        (wants && platform::unbuffered_writes_suit(folder)).then(|| Unbuffered {
            on: AtomicBool::new(true),
        })
    }

    /// Writes `parts` into a file created (or truncated) at `path`, around
    /// the page cache, and returns it open. `Ok(None)`: not written that
    /// way (turned off, refused by the file system, or no memory for the
    /// buffer); the caller writes it through the page cache, replacing
    /// what this left at `path`.
    pub fn write(&self, path: &Path, parts: &[&[u8]]) -> std::io::Result<Option<File>> {
        if !self.on.load(Relaxed) {
            return Ok(None);
        }
        let written = BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            if buffer.is_empty() {
                let len = BUFFER_BYTES + UNBUFFERED_ALIGN;
                if buffer.try_reserve_exact(len).is_err() {
                    return Ok(None);
                }
                buffer.resize(len, 0);
            }
            let start = buffer.as_ptr().align_offset(UNBUFFERED_ALIGN);
            write_blocks(path, parts, &mut buffer[start..start + BUFFER_BYTES]).map(Some)
        });
        self.judge(written)
    }

    /// What a file's write around the page cache comes to: a refusal of
    /// the kind a file system without such writes (or with larger sectors)
    /// gives turns them off for the store, and the file goes through the
    /// page cache; any other error is the file's own.
    fn judge(&self, written: std::io::Result<Option<File>>) -> std::io::Result<Option<File>> {
        match written {
            Ok(Some(file)) => {
                FILES.fetch_add(1, Relaxed);
                Ok(Some(file))
            }
            Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported) => {
                self.on.store(false, Relaxed);
                Ok(None)
            }
            other => other,
        }
    }
}

/// Copies `parts` through `block` (aligned) into a new file at `path`,
/// one whole block per write, the last padded with zeros; then cuts the
/// file to the parts' length.
fn write_blocks(path: &Path, parts: &[&[u8]], block: &mut [u8]) -> std::io::Result<File> {
    let mut file = platform::create_unbuffered(path)?;
    let mut filled = 0;
    let mut len = 0u64;
    for part in parts {
        let mut rest: &[u8] = part;
        while !rest.is_empty() {
            let n = (block.len() - filled).min(rest.len());
            block[filled..filled + n].copy_from_slice(&rest[..n]);
            (filled, rest, len) = (filled + n, &rest[n..], len + n as u64);
            if filled == block.len() {
                file.write_all(block)?;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        let padded = filled.next_multiple_of(UNBUFFERED_ALIGN);
        block[filled..padded].fill(0);
        file.write_all(&block[..padded])?;
    }
    file.set_len(len)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder on the disk that holds the build (`/tmp` may be memory).
    fn on_disk() -> tempfile::TempDir {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&target).unwrap();
        tempfile::tempdir_in(target).unwrap()
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + seed as usize) as u8).collect()
    }

    #[test]
    fn every_length_reads_back_exactly() {
        let dir = on_disk();
        let Some(unbuffered) = Unbuffered::for_folder(dir.path(), true) else {
            eprintln!("the build's disk takes no writes around the page cache: nothing to test");
            return;
        };
        let before = files_written();
        let a = UNBUFFERED_ALIGN;
        let lengths = [
            (0, 0),
            (1, 0),
            (a - 1, 1),
            (a, 0),
            (a, a),
            (a + 1, 16),
            (BUFFER_BYTES - 5, 5),
            (BUFFER_BYTES, 8),
            (3 * BUFFER_BYTES + 7, 4099),
        ];
        for (k, &(data, index)) in lengths.iter().enumerate() {
            let (data, index) = (bytes(data, k as u8), bytes(index, 100 + k as u8));
            let path = dir.path().join(k.to_string());
            let file = unbuffered.write(&path, &[&data, &index]).unwrap();
            assert!(file.is_some(), "length {} not written", data.len());
            drop(file);
            let read = std::fs::read(&path).unwrap();
            assert_eq!(read.len(), data.len() + index.len());
            assert!(read == [data, index].concat(), "file {k} differs");
        }
        // Other tests may write such files meanwhile.
        assert!(files_written() - before >= lengths.len() as u64);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Any parts (a shard's data and index, or more), of any lengths
        /// up to past two buffers, read back as their concatenation.
        #[test]
        fn any_parts_read_back_as_their_concatenation(
            lengths in proptest::collection::vec(0usize..(2 * BUFFER_BYTES + 9000), 1..4),
            seed in 0u8..255,
        ) {
            let dir = on_disk();
            if let Some(unbuffered) = Unbuffered::for_folder(dir.path(), true) {
                let parts: Vec<Vec<u8>> = lengths
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| bytes(n, seed.wrapping_add(k as u8)))
                    .collect();
                let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
                let path = dir.path().join("shard");
                let file = unbuffered.write(&path, &slices).unwrap();
                proptest::prop_assert!(file.is_some());
                drop(file);
                proptest::prop_assert!(std::fs::read(&path).unwrap() == parts.concat());
            }
        }
    }

    #[test]
    fn a_file_that_existed_is_replaced_whole() {
        let dir = on_disk();
        let Some(unbuffered) = Unbuffered::for_folder(dir.path(), true) else {
            return;
        };
        let path = dir.path().join("shard");
        std::fs::write(&path, bytes(3 * BUFFER_BYTES, 9)).unwrap();
        unbuffered.write(&path, &[b"short"]).unwrap().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
    }

    #[test]
    fn the_page_cache_asked_for_takes_none() {
        let dir = on_disk();
        assert!(Unbuffered::for_folder(dir.path(), false).is_none());
    }

    #[test]
    fn a_refusal_turns_the_store_to_the_page_cache() {
        let dir = on_disk();
        if let Some(unbuffered) = Unbuffered::for_folder(dir.path(), true) {
            // A path that names a folder: an error of its own, returned as
            // it is, and the store keeps writing around the page cache.
            let e = unbuffered.write(dir.path(), &[b"x"]).unwrap_err();
            assert_ne!(e.kind(), ErrorKind::InvalidInput);
            assert!(unbuffered.on.load(Relaxed));
        }
        let store = Unbuffered {
            on: AtomicBool::new(true),
        };
        // A full disk is the file's error, not a refusal.
        let full = store.judge(Err(ErrorKind::StorageFull.into()));
        assert_eq!(full.unwrap_err().kind(), ErrorKind::StorageFull);
        assert!(store.on.load(Relaxed));
        // What Linux (EINVAL) and Windows (ERROR_INVALID_PARAMETER) answer
        // a write they do not take: the file goes through the page cache,
        // and so do the next ones.
        for refusal in [ErrorKind::InvalidInput, ErrorKind::Unsupported] {
            let store = Unbuffered {
                on: AtomicBool::new(true),
            };
            assert!(store.judge(Err(refusal.into())).unwrap().is_none());
            assert!(!store.on.load(Relaxed), "still on after {refusal:?}");
            let path = dir.path().join("after");
            assert!(store.write(&path, &[b"x"]).unwrap().is_none());
            assert!(!path.exists());
        }
    }
}
