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

mod client;
mod credentials;
mod ownership;
mod remote;
mod upload;

use super::{ShardSink, SharedAttributes, StreamHooks};
use crate::config::{ObjectUrl, Validated};
use crate::error::{Error, Result};
use crate::metadata::{self, Document};
use crate::metrics::UploadCounters;
use crate::shard::Shard;
use bytes::Bytes;
use object_store::path::Path;
use parking_lot::Mutex;
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
    config: Validated,
    /// `s3://bucket/prefix`, for messages.
    url: String,
    prefix: Path,
    uploads: Uploads,
    budget: Arc<Semaphore>,
    failure: Failure,
    poison: Option<Arc<dyn Fn(Error) + Send + Sync>>,
    /// Shard uploads started since the last metadata update.
    pending: Vec<JoinHandle<bool>>,
    /// The last metadata update: each waits for the one before it and for
    /// the shards emitted before it.
    metadata: Option<JoinHandle<bool>>,
    /// Each level's extent last asked of its `zarr.json`.
    planes_asked: Vec<u64>,
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
    pub fn create(v: &Validated) -> Result<S3Store> {
        let store = v
            .config
            .store
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the configuration names no store".into()))?;
        let url = store
            .url
            .as_deref()
            .ok_or_else(|| Error::InvalidArgument("the store has no url".into()))?;
        let parsed = ObjectUrl::parse(url)?;
        let display = format!("s3://{}/{}", parsed.bucket, parsed.prefix);
        let prefix = Path::from(parsed.prefix.as_str());
        let runtime = client::runtime()?;
        let probe = client::connect(store, &parsed, client::PROBE_RETRIES)?;
        runtime.block_on(async {
            if let Some(found) = ownership::probe(&probe, &prefix, &display).await? {
                if !store.overwrite {
                    return Err(Error::Exists {
                        path: display.clone().into(),
                        reason: format!(
                            "it holds {found:?}; refusing to write into it (set store.overwrite \
                             to replace an earlier store)"
                        ),
                    });
                }
                ownership::clear_old_store(&probe, &prefix, &display).await?;
            }
            Ok(())
        })?;
        let s3 = Arc::new(client::connect(store, &parsed, client::RETRIES)?);
        let uploads = Uploads {
            s3,
            bucket_url: format!("s3://{}/", parsed.bucket),
            requests: Arc::new(Semaphore::new(REQUESTS)),
            counters: Arc::new(UploadCounters::default()),
            leftovers: Default::default(),
        };
        let planes = metadata::level_planes(v, 0);
        for doc in metadata::all_documents(v, &planes, &v.image.attributes) {
            let key = child(&prefix, &doc.key);
            uploads.counters.started();
            let written = runtime.block_on(uploads.object(&key, Bytes::from(doc.json)));
            uploads.counters.ended(written.is_ok());
            written?;
        }
        Ok(S3Store {
            config: v.clone(),
            url: display,
            prefix,
            uploads,
            budget: Arc::new(Semaphore::new((BUDGET_BYTES / PERMIT_BYTES) as usize)),
            failure: Failure::default(),
            poison: None,
            pending: Vec::new(),
            metadata: None,
            planes_asked: planes,
            attributes: Arc::new(SharedAttributes::new(v.image.attributes.clone())),
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

    /// A task's failure: kept for the next call, and the stream poisoned now.
    fn on_failure(&self) -> impl Fn(Error) + Send + Sync + 'static {
        let (failure, poison) = (self.failure.clone(), self.poison.clone());
        move |e: Error| {
            let mut f = failure.lock();
            if f.is_none() {
                *f = Some(e.clone());
            }
            drop(f);
            if let Some(p) = &poison {
                p(e);
            }
        }
    }

    /// Writes level `level`'s `zarr.json` with `planes` (and the
    /// attributes' document, when they were replaced) once every shard
    /// emitted so far is complete and the previous update is written.
    fn update_metadata(&mut self, level: u32, planes: u64) {
        let k = level as usize;
        let attributes = self.attributes.changed_since(&mut self.attributes_seen);
        let mut docs: Vec<Document> = Vec::new();
        if planes != self.planes_asked[k] {
            self.planes_asked[k] = planes;
            let attrs = attributes.clone().unwrap_or_else(|| self.attributes.get());
            docs.push(metadata::level_document(
                &self.config,
                level,
                planes,
                &attrs,
            ));
        }
        if let Some(attrs) = attributes {
            docs.push(metadata::attributes_document(
                &self.config,
                self.planes_asked[0],
                &attrs,
            ));
        }
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
                uploads.counters.started();
                let r = uploads.object(&key, doc).await;
                uploads.counters.ended(r.is_ok());
                if r.map_err(&fail).is_err() {
                    return false;
                }
            }
            true
        }));
    }

    /// Waits for every upload and metadata update under way.
    fn wait_all(&mut self) {
        let shards = std::mem::take(&mut self.pending);
        let meta = self.metadata.take();
        self.runtime.block_on(async {
            for s in shards {
                let _ = s.await;
            }
            if let Some(m) = meta {
                let _ = m.await;
            }
        });
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
        self.poison = Some(hooks.poison.clone());
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
        if self.config.image.is_ome() {
            key.push_str(&shard.level.to_string());
            key.push('/');
        }
        key.push('c');
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
        let permit = self
            .runtime
            .block_on(self.budget.clone().acquire_many_owned(kib as u32))
            .map_err(|_| Error::Internal("the upload budget was closed".into()))?;
        self.check()?;
        if self.pending.len() >= 1024 {
            // A long bounded stream: finished uploads need no handle (a
            // failure among them is in `failure`).
            self.pending.retain(|h| !h.is_finished());
        }
        let uploads = self.uploads.clone();
        let fail = self.on_failure();
        uploads.counters.started();
        self.pending.push(self.runtime.spawn(async move {
            let r = uploads.object(&path, Bytes::from(body)).await;
            drop(permit);
            uploads.counters.ended(r.is_ok());
            r.map_err(fail).is_ok()
        }));
        Ok(())
    }

    fn progress(&mut self, level: u32, planes: u64) -> Result<()> {
        if self.config.image.levels[level as usize].is_unbounded() {
            self.update_metadata(level, planes);
        }
        self.check()
    }

    /// Returns once every object is complete (or the first failure).
    fn finish(&mut self, planes: &[u64]) -> Result<()> {
        for (k, &p) in planes.iter().enumerate() {
            let p = if self.config.image.levels[k].is_unbounded() {
                p
            } else {
                self.planes_asked[k]
            };
            self.update_metadata(k as u32, p);
        }
        self.wait_all();
        let still = self.runtime.block_on(self.uploads.abort_leftovers());
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
    /// Shards already emitted complete (or fail) and `zarr.json` keeps the
    /// extent of the complete shard rows; failed multipart uploads are
    /// aborted once more.
    fn drop(&mut self) {
        self.wait_all();
        let _ = self.runtime.block_on(self.uploads.abort_leftovers());
    }
}
