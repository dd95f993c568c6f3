//! Shard files flushed to the disk on several threads at once.
//!
//! A disk takes one file's fsync at a time at well below its rate: each
//! waits for its own journal commit. Several at once share commits (an
//! 8 MiB file, fsync'ed: 0.62 GB/s from one thread, 0.77–0.83 from 4 to
//! 16 on the development machine's virtual disk; 1.10 and 1.26–1.44 on a
//! GPU machine's, `scripts/durable-write-probe.py`). So the store writes a
//! shard's bytes into a temporary file on the delivery thread (the bytes
//! are borrowed for that call only) and hands the open file here: a
//! thread flushes it and renames it into place, and [`Flusher::wait`], at
//! the end of each shard row, waits for them all and flushes each folder
//! they were renamed into once. A file renamed into a store folder that
//! was replaced meanwhile is taken back out of it, as the store does with
//! the files it renames itself.

use super::files::{put_in_place, sync_folder};
use super::folders::StoreFolder;
use super::PATIENCE;
use crate::error::{Error, Result};
use crate::sink::StallWatch;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Threads that flush files; a cam-32 shard row is 16 files.
const THREADS: usize = 8;

/// Files handed on and not yet flushed, at most: [`Flusher::submit`] waits
/// beyond this, so the page cache holds a bounded amount of unflushed data.
const IN_FLIGHT: usize = 2 * THREADS;

/// A written file to flush and rename into place.
struct Job {
    file: fs::File,
    tmp: PathBuf,
    path: PathBuf,
}

#[derive(Default)]
struct State {
    /// Files handed on whose flush and rename have not ended.
    in_flight: usize,
    /// The first failure; later ones add nothing.
    error: Option<Error>,
    /// Folders a file was renamed into since the last wait.
    folders: BTreeSet<PathBuf>,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct Flusher {
    jobs: Option<SyncSender<Job>>,
    state: Shared,
    threads: Vec<JoinHandle<()>>,
}

impl Flusher {
    /// `watch` hears of each file flushed; `store` is the store folder
    /// that every file must land in.
    pub fn new(watch: Arc<StallWatch>, store: Arc<StoreFolder>) -> Result<Flusher> {
        let (jobs, queue) = sync_channel::<Job>(IN_FLIGHT - THREADS);
        let queue = Arc::new(Mutex::new(queue));
        let state: Shared = Arc::default();
        let mut flusher = Flusher {
            jobs: Some(jobs),
            state: state.clone(),
            threads: Vec::with_capacity(THREADS),
        };
        for i in 0..THREADS {
            let (queue, state, watch) = (queue.clone(), state.clone(), watch.clone());
            let store = store.clone();
            let thread = std::thread::Builder::new()
                .name(format!("tz-fsync-{i}"))
                .spawn(move || run(&queue, &state, &watch, &store))
                .map_err(|e| Error::Internal(format!("starting the store's flush threads: {e}")))?;
            flusher.threads.push(thread);
        }
        Ok(flusher)
    }

    /// Hands on `file` (written in full at `tmp`): it is flushed, then
    /// renamed to `path`. Waits while [`IN_FLIGHT`] files are. An earlier
    /// file's failure is returned here first, and this one is not taken.
    pub fn submit(&self, file: fs::File, tmp: PathBuf, path: PathBuf) -> Result<()> {
        {
            let mut s = self.state.0.lock();
            if let Some(e) = s.error.take() {
                // Kept for `wait` as well: the stream must not count on it.
                s.error = Some(Error::Internal(format!("an earlier shard failed: {e}")));
                drop(s);
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
            s.in_flight += 1;
        }
        let job = Job { file, tmp, path };
        let sent = self.jobs.as_ref().map(|j| j.send(job));
        if let Some(Ok(())) = sent {
            return Ok(());
        }
        // No thread takes jobs any more (they all ended): a fault of ours.
        let mut s = self.state.0.lock();
        s.in_flight -= 1;
        if let Some(Err(e)) = sent {
            let _ = fs::remove_file(&e.0.tmp);
        }
        Err(Error::Internal("the store's flush threads ended".into()))
    }

    /// Waits until every file handed on is flushed and in place, then
    /// flushes the folders they were renamed into. Returns the first
    /// failure since the last wait.
    pub fn wait(&self) -> Result<()> {
        let (error, folders) = {
            let (mutex, ended) = &*self.state;
            let mut s = mutex.lock();
            while s.in_flight > 0 {
                ended.wait(&mut s);
            }
            (s.error.take(), std::mem::take(&mut s.folders))
        };
        if let Some(e) = error {
            return Err(e);
        }
        // The first flush commits every entry in the journal; the others
        // find little left to do.
        folders.iter().try_for_each(|f| sync_folder(f))
    }
}

impl Drop for Flusher {
    /// The threads end once the files handed on are done.
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A flush thread: takes jobs until the store lets go of the queue.
fn run(queue: &Mutex<Receiver<Job>>, state: &Shared, watch: &StallWatch, store: &StoreFolder) {
    loop {
        let job = match queue.lock().recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        // A panic here would leave the row's wait waiting for ever.
        let flushed = || flush(job, watch, store);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(flushed))
            .unwrap_or_else(|_| Err(Error::Internal("a store flush thread panicked".into())));
        watch.answered();
        let (mutex, ended) = &**state;
        let mut s = mutex.lock();
        match result {
            Ok(folder) => {
                if let Some(f) = folder {
                    s.folders.insert(f);
                }
            }
            Err(e) => {
                s.error.get_or_insert(e);
            }
        }
        s.in_flight -= 1;
        ended.notify_all();
    }
}

/// Flushes a job's file and renames it into place; the folder it went to.
/// Where the store folder was replaced meanwhile, the file went into the
/// new one: it is taken back out.
fn flush(job: Job, watch: &StallWatch, store: &StoreFolder) -> Result<Option<PathBuf>> {
    put_in_place(job.file, &job.tmp, &job.path, true, PATIENCE, watch)?;
    store.check_or_take_back(std::iter::once(job.path.as_path()))?;
    Ok(job.path.parent().map(Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    fn watch() -> Arc<StallWatch> {
        Arc::new(StallWatch::new(Duration::from_secs(60), PathBuf::new()))
    }

    fn store(root: &Path) -> Arc<StoreFolder> {
        Arc::new(StoreFolder::at(root).unwrap())
    }

    fn written(dir: &Path, name: &str, bytes: &[u8]) -> (fs::File, PathBuf, PathBuf) {
        let path = dir.join(name);
        let tmp = dir.join(format!("{name}.partial"));
        let mut f = fs::File::create(&tmp).unwrap();
        f.write_all(bytes).unwrap();
        (f, tmp, path)
    }

    #[test]
    fn every_file_handed_on_is_in_place_after_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(watch(), store(dir.path())).unwrap();
        // More than are ever in flight: submit waits for room.
        for i in 0..3 * IN_FLIGHT {
            let (f, tmp, path) = written(dir.path(), &i.to_string(), &[i as u8; 1000]);
            flusher.submit(f, tmp, path).unwrap();
        }
        flusher.wait().unwrap();
        for i in 0..3 * IN_FLIGHT {
            assert_eq!(
                fs::read(dir.path().join(i.to_string())).unwrap(),
                [i as u8; 1000]
            );
            assert!(!dir.path().join(format!("{i}.partial")).exists());
        }
        // Nothing pending: a second wait returns at once.
        flusher.wait().unwrap();
    }

    #[test]
    fn a_failed_rename_is_reported_and_its_temporary_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(watch(), store(dir.path())).unwrap();
        let (f, tmp, _) = written(dir.path(), "a", b"shard");
        let nowhere = dir.path().join("gone").join("a");
        flusher.submit(f, tmp.clone(), nowhere).unwrap();
        let e = flusher.wait().unwrap_err().to_string();
        assert!(e.contains("renaming into place"), "{e}");
        assert!(e.contains("gone"), "{e}");
        assert!(!tmp.exists());
        // Reported once; the flusher goes on with the next files.
        let (f, tmp, path) = written(dir.path(), "b", b"next");
        flusher.submit(f, tmp, path.clone()).unwrap();
        flusher.wait().unwrap();
        assert_eq!(fs::read(path).unwrap(), b"next");
    }

    #[test]
    fn a_failure_refuses_the_next_file_and_stays_for_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(watch(), store(dir.path())).unwrap();
        let (f, tmp, _) = written(dir.path(), "a", b"shard");
        flusher
            .submit(f, tmp, dir.path().join("gone").join("a"))
            .unwrap();
        // Let the first job end before the next is handed on.
        while flusher.state.0.lock().in_flight > 0 {
            std::thread::yield_now();
        }
        let (f, tmp, path) = written(dir.path(), "b", b"next");
        let e = flusher.submit(f, tmp.clone(), path.clone()).unwrap_err();
        assert!(e.to_string().contains("renaming into place"), "{e}");
        assert!(!tmp.exists() && !path.exists());
        let e = flusher.wait().unwrap_err().to_string();
        assert!(e.contains("an earlier shard failed"), "{e}");
    }

    #[test]
    fn dropping_it_finishes_the_files_handed_on() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(watch(), store(dir.path())).unwrap();
        let (f, tmp, path) = written(dir.path(), "a", b"shard");
        flusher.submit(f, tmp, path.clone()).unwrap();
        drop(flusher);
        assert_eq!(fs::read(path).unwrap(), b"shard");
    }

    #[test]
    fn a_file_renamed_into_a_replaced_store_folder_is_taken_back_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        fs::create_dir(&root).unwrap();
        let flusher = Flusher::new(watch(), store(&root)).unwrap();
        // The folder is replaced after the shard's file was written into
        // the new one, before its flush and rename.
        fs::rename(&root, dir.path().join("moved")).unwrap();
        fs::create_dir(&root).unwrap();
        let (f, tmp, path) = written(&root, "a", b"shard");
        flusher.submit(f, tmp.clone(), path.clone()).unwrap();
        let e = flusher.wait().unwrap_err().to_string();
        assert!(e.contains("vanished or was replaced"), "{e}");
        assert!(!path.exists() && !tmp.exists(), "left in the new folder");
    }
}
