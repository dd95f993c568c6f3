//! The object store: a Zarr v3 store under a key prefix of an S3 (or
//! S3-compatible) bucket, `zarr.json` then one object per shard under `c/`
//! (an OME-Zarr image: the group's `zarr.json`, then each level's array
//! under `k/`, as [`crate::metadata`] lays them out).
//!
//! Shards are copied out of the delivery thread's hands and uploaded on the
//! store's own runtime, several at a time, within a budget of bytes in
//! flight: when the budget is spent `emit` waits, the delivery thread with
//! it, and `tz_write` reports busy once staging is full; it never waits for
//! the network itself. `zarr.json` is written at the moments the filesystem
//! store writes it, with the same content, and only once every shard below
//! its extent is complete. An upload that fails after its retries poisons
//! the stream at once, naming the object and the server's answer.
//!
//! No wait is unbounded: each request ends within `store.timeout_s`, and
//! the first failure stops every other upload (the budget's wait
//! included), so that `tz_flush` and `tz_destroy` return within the bound
//! and a short wind-down; the shards that were still being uploaded then
//! are named in the stream's error.

mod client;
mod credentials;
mod ledger;
mod ownership;
mod remote;
mod upload;

use super::images::Images;
use super::{ShardSink, SharedAttributes, StreamHooks};
use crate::config::{ObjectUrl, Plan};
use crate::error::{Error, Result};
use crate::metadata::Document;
use crate::metrics::UploadCounters;
use crate::shard::Shard;
use bytes::Bytes;
use client::Purpose;
use futures_util::future::{join_all, select, Either};
use ledger::Ledger;
use object_store::path::Path;
use parking_lot::Mutex;
use std::pin::pin;
use std::sync::Arc;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use upload::Uploads;

/// Bytes of shards copied for upload and not yet uploaded, at most (a
/// larger shard goes alone); `tz_estimate_memory` counts it.
const BUDGET_BYTES: u64 = crate::memory::UPLOAD_BUDGET_BYTES;
/// Budget permits are KiB: a semaphore counts in u32.
const PERMIT_BYTES: u64 = 1024;
/// HTTP requests in flight at most.
const REQUESTS: usize = 16;

/// The first failure of the store's uploads.
type Failure = Arc<Mutex<Option<Error>>>;

pub struct S3Store {
    /// The arrays, and each level's extent last asked of its `zarr.json`.
    images: Images,
    /// `s3://bucket/prefix`, for messages.
    url: String,
    prefix: Path,
    uploads: Uploads,
    budget: Arc<Semaphore>,
    failure: Failure,
    /// The stream's hooks: poison it, add to its failure's message.
    hooks: Option<StreamHooks>,
    /// Shards handed to uploads and not complete yet.
    ledger: Ledger,
    /// The shards lost to a failure were named (once).
    noted: bool,
    /// The uploads were waited for (at the flush, or when abandoned).
    settled: bool,
    /// Shard uploads started since the last metadata update.
    pending: Vec<JoinHandle<bool>>,
    /// The last metadata update: each waits for the one before it and for
    /// the shards emitted before it.
    metadata: Option<JoinHandle<bool>>,
    attributes: Arc<SharedAttributes>,
    attributes_seen: u64,
    key: String,
    // Last: dropped once every task above is done.
    runtime: Runtime,
}

impl S3Store {
    /// Checks the store's prefix with one request (the bucket exists, the
    /// credentials are accepted, nothing is in the way unless `overwrite`),
    /// clears an old store when asked to, and writes `zarr.json`. Nothing
    /// is written when the check fails.
    pub fn create(plan: &Plan) -> Result<S3Store> {
        let store = plan.store()?;
        let url = store
            .url
            .as_deref()
            .ok_or_else(|| Error::InvalidArgument("the store has no url".into()))?;
        let parsed = ObjectUrl::parse(url)?;
        let display = format!("s3://{}/{}", parsed.bucket, parsed.prefix);
        let prefix = Path::from(parsed.prefix.as_str());
        let runtime = client::runtime()?;
        let bounds = client::Bounds::new(store.timeout_s);
        let quick = client::connect(store, &parsed, Purpose::Quick, &bounds)?;
        let no_answer = |what: &'static str, within: std::time::Duration| Error::ObjectStore {
            what,
            url: display.clone(),
            message: format!("the server gave no answer within {} s", within.as_secs()),
        };
        runtime.block_on(async {
            let probed = ownership::probe(&quick, &prefix, &display);
            let probed = tokio::time::timeout(bounds.probe, probed)
                .await
                .map_err(|_| no_answer("checking", bounds.probe))?;
            if let Some(found) = probed? {
                if !store.overwrite {
                    return Err(Error::Exists {
                        path: display.clone().into(),
                        reason: format!(
                            "it holds {found:?}; refusing to write into it (set store.overwrite \
                             to replace an earlier store)"
                        ),
                    });
                }
                // A listing and deletes in batches: bounded like requests,
                // on a server that answers each of them.
                let cleared = ownership::clear_old_store(&quick, &prefix, &display);
                tokio::time::timeout(bounds.request, cleared)
                    .await
                    .map_err(|_| no_answer("deleting the old store under", bounds.request))??;
            }
            Ok(())
        })?;
        let connect = |purpose| client::connect(store, &parsed, purpose, &bounds).map(Arc::new);
        let uploads = Uploads {
            s3: connect(Purpose::Data)?,
            quick: Arc::new(quick),
            completions: connect(Purpose::Completion)?,
            bucket_url: format!("s3://{}/", parsed.bucket),
            requests: Arc::new(Semaphore::new(REQUESTS)),
            counters: Arc::new(UploadCounters::default()),
            leftovers: Default::default(),
            bounds,
            stop: Default::default(),
        };
        let mut images = Images::new(plan);
        for doc in images.take_initial() {
            let key = child(&prefix, &doc.key);
            runtime.block_on(uploads.object(&key, Bytes::from(doc.json)))?;
        }
        Ok(S3Store {
            images,
            url: display,
            prefix,
            uploads,
            budget: Arc::new(Semaphore::new((BUDGET_BYTES / PERMIT_BYTES) as usize)),
            failure: Failure::default(),
            hooks: None,
            ledger: Ledger::default(),
            noted: false,
            settled: false,
            pending: Vec::new(),
            metadata: None,
            attributes: Arc::new(SharedAttributes::new(
                plan.shared().image.attributes.clone(),
            )),
            attributes_seen: 0,
            key: String::new(),
            runtime,
        })
    }

    /// `s3://bucket/prefix`.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn check(&self) -> Result<()> {
        match &*self.failure.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// A task's failure: kept for the next call, the stream poisoned now,
    /// and every other upload stopped.
    fn on_failure(&self) -> impl Fn(Error) + Send + Sync + 'static {
        let failure = self.failure.clone();
        let poison = self.hooks.as_ref().map(|h| h.poison.clone());
        let stop = self.uploads.stop.clone();
        move |e: Error| {
            let mut f = failure.lock();
            if f.is_none() {
                *f = Some(e.clone());
            }
            drop(f);
            if let Some(p) = &poison {
                p(e);
            }
            stop.cancel();
        }
    }

    /// Writes level `level`'s `zarr.json` with `planes` (and the
    /// attributes' document, when they were replaced) once every shard
    /// emitted so far is complete and the previous update is written.
    fn update_metadata(&mut self, array: u32, level: u32, planes: u64) {
        let attributes = self.attributes.changed_since(&mut self.attributes_seen);
        let mut docs: Vec<Document> = Vec::new();
        if planes != self.images.planes(array, level) {
            self.images.set_planes(array, level, planes);
            let attrs = attributes.clone().unwrap_or_else(|| self.attributes.get());
            docs.push(self.images.level_document(array, level, planes, &attrs));
        }
        if let Some(attrs) = attributes {
            docs.push(self.images.attributes_document(&attrs));
        }
        self.upload_after_shards(docs);
    }

    /// Uploads `docs` once every shard emitted so far is complete and the
    /// previous documents are written.
    fn upload_after_shards(&mut self, docs: Vec<Document>) {
        if docs.is_empty() {
            return;
        }
        let shards = std::mem::take(&mut self.pending);
        let before = self.metadata.take();
        let uploads = self.uploads.clone();
        let docs: Vec<(Path, Bytes)> = docs
            .into_iter()
            .map(|d| (child(&self.prefix, &d.key), Bytes::from(d.json)))
            .collect();
        let fail = self.on_failure();
        let failure = self.failure.clone();
        self.metadata = Some(self.runtime.spawn(async move {
            let mut ok = match before {
                Some(b) => b.await.unwrap_or(false),
                None => true,
            };
            for s in shards {
                ok &= s.await.unwrap_or(false);
            }
            // Shards whose handles were let go finished earlier; a failure
            // among them is recorded here.
            if !ok || failure.lock().is_some() {
                return false;
            }
            for (key, doc) in docs {
                if uploads.object(&key, doc).await.map_err(&fail).is_err() {
                    return false;
                }
            }
            true
        }));
    }

    /// Waits for every upload and metadata update under way. Each of their
    /// requests is bounded, and after a failure they give up at once: what
    /// has not ended within the wind-down then is cut off.
    fn wait_all(&mut self) {
        let mut tasks = std::mem::take(&mut self.pending);
        tasks.extend(self.metadata.take());
        let stop = self.uploads.stop.clone();
        let wind_down = self.uploads.bounds.wind_down + std::time::Duration::from_secs(1);
        self.runtime.block_on(async {
            let all = join_all(tasks.iter_mut());
            if let Either::Right((_, all)) = select(pin!(all), pin!(stop.cancelled())).await {
                let _ = tokio::time::timeout(wind_down, all).await;
            }
        });
        for t in tasks {
            t.abort();
        }
    }

    /// Ends the store's work: waits for the uploads (see `wait_all`), aborts
    /// again the multipart uploads whose abort failed, and after a failure
    /// names the shards that were lost in the stream's error. Returns the
    /// uploads that still could not be aborted.
    fn settle(&mut self) -> Vec<String> {
        self.settled = true;
        self.wait_all();
        let uploads = self.uploads.clone();
        let still = self.runtime.block_on(uploads.abort_leftovers());
        let failure = self.failure.lock().clone();
        if let (Some(first), false) = (failure, self.noted) {
            self.noted = true;
            let named = match &first {
                Error::ObjectStore { url, .. } | Error::AccessDenied { url, .. } => {
                    Some(url.as_str())
                }
                _ => None,
            };
            if let Some(note) = ledger::lost_note(&self.ledger.lost(named)) {
                *self.failure.lock() = Some(first.with_note(&note));
                if let Some(h) = &self.hooks {
                    (h.note)(&note);
                }
            }
        }
        still
    }
}

/// `prefix/name` as an object path.
fn child(prefix: &Path, name: &str) -> Path {
    if prefix.as_ref().is_empty() {
        Path::from(name)
    } else {
        Path::from(format!("{prefix}/{name}"))
    }
}

impl ShardSink for S3Store {
    fn attach(&mut self, hooks: &StreamHooks) {
        self.hooks = Some(hooks.clone());
        // The stream's counters from now on, `zarr.json` of create included.
        let before = std::mem::replace(&mut self.uploads.counters, hooks.uploads.clone());
        hooks.uploads.absorb(&before);
        self.attributes = hooks.attributes.clone();
    }

    fn emit(&mut self, shard: &Shard<'_>) -> Result<()> {
        self.check()?;
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push_str(self.prefix.as_ref());
        if !key.is_empty() {
            key.push('/');
        }
        key.push_str(&self.images.chunks_key(shard.array, shard.level));
        for c in shard.coord.iter() {
            key.push('/');
            key.push_str(&c.to_string());
        }
        let path = Path::from(key.as_str());
        self.key = key;
        let parts = shard.parts();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut body = Vec::new();
        body.try_reserve_exact(len).map_err(|_| {
            Error::OutOfMemory(format!(
                "{len} bytes to upload shard {}",
                self.uploads.url(&path)
            ))
        })?;
        for p in parts {
            body.extend_from_slice(p);
        }
        let kib = (len as u64)
            .div_ceil(PERMIT_BYTES)
            .clamp(1, BUDGET_BYTES / PERMIT_BYTES);
        // The budget frees as uploads end, each within its bound; a failure
        // ends the wait at once.
        let budget = self.budget.clone().acquire_many_owned(kib as u32);
        let stop = self.uploads.stop.clone();
        let permit = match self
            .runtime
            .block_on(select(pin!(budget), pin!(stop.cancelled())))
        {
            Either::Left((permit, _)) => {
                permit.map_err(|_| Error::Internal("the upload budget was closed".into()))?
            }
            Either::Right(_) => return self.check(),
        };
        self.check()?;
        if self.pending.len() >= 1024 {
            // A long bounded stream: finished uploads need no handle (a
            // failure among them is in `failure`).
            self.pending.retain(|h| !h.is_finished());
        }
        let uploads = self.uploads.clone();
        let fail = self.on_failure();
        let entry = self.ledger.open(uploads.url(&path));
        self.pending.push(self.runtime.spawn(async move {
            let r = uploads.object(&path, Bytes::from(body)).await;
            drop(permit);
            match r {
                Ok(()) => {
                    entry.complete();
                    true
                }
                Err(e) => {
                    fail(e);
                    false
                }
            }
        }));
        Ok(())
    }

    fn documents(&mut self, docs: Vec<Document>) -> Result<()> {
        self.upload_after_shards(docs);
        self.check()
    }

    fn progress(&mut self, array: u32, level: u32, planes: u64) -> Result<()> {
        if self.images.is_unbounded(array, level) {
            self.update_metadata(array, level, planes);
        }
        self.check()
    }

    fn abandon(&mut self) {
        if !self.settled {
            self.settle();
        }
    }

    fn has_work_left(&self) -> bool {
        !self.uploads.leftovers.lock().is_empty()
    }

    /// Returns once every object is complete (or the first failure).
    fn finish(&mut self, planes: &[Vec<u64>]) -> Result<()> {
        for (a, levels) in planes.iter().enumerate() {
            for (k, &p) in levels.iter().enumerate() {
                let (a, k) = (a as u32, k as u32);
                let p = self.images.final_planes(a, k, p);
                self.update_metadata(a, k, p);
            }
        }
        let still = self.settle();
        self.check()?;
        if !still.is_empty() {
            return Err(Error::ObjectStore {
                what: "aborting multipart uploads of",
                url: self.url.clone(),
                message: format!("these uploads could not be aborted: {}", still.join(", ")),
            });
        }
        Ok(())
    }
}

impl Drop for S3Store {
    /// Shards already emitted complete (or fail, within the bounds) and
    /// `zarr.json` keeps the extent of the complete shard rows; failed
    /// multipart uploads are aborted once more.
    fn drop(&mut self) {
        self.settle();
    }
}
