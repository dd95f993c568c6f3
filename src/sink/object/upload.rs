//! One object's upload: a PUT for a small object, a multipart upload with
//! its parts in parallel for a large one. A multipart upload that fails is
//! aborted, so that no part stays behind; one whose abort fails too (the
//! server is gone) is kept in [`Leftovers`] and aborted again later.
//!
//! Every request is bounded ([`Bounds`]): past `bounds.request` it fails
//! like a refused one. And every upload gives up at once when the store's
//! `stop` token is cancelled (at its first failure), wherever it waits: for
//! a request slot, for an answer, or between retries. So after a failure
//! the uploads still queued end in moments instead of each retrying against
//! a server that is gone.

use super::client::Bounds;
use super::remote;
use crate::error::{Error, Result};
use crate::metrics::UploadCounters;
use bytes::Bytes;
use futures_util::future::{select, Either};
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use parking_lot::Mutex;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Objects up to this size go in one PUT.
pub const SINGLE_PUT_MAX: usize = 16 << 20;
/// The part size of a multipart upload (S3: at least 5 MiB but the last,
/// at most 10,000 parts).
pub const PART_BYTES: usize = 8 << 20;
const MAX_PARTS: usize = 10_000;

/// The message of an upload that gave up because the store failed first.
pub const GIVEN_UP: &str = "given up after the store's first failure";

/// Multipart uploads whose abort failed: (key, upload id).
pub type Leftovers = Arc<Mutex<Vec<(Path, MultipartId)>>>;

/// What every upload of a store shares.
#[derive(Clone)]
pub struct Uploads {
    pub s3: Arc<AmazonS3>,
    /// The same client with a few quick retries per request, for aborts.
    pub quick: Arc<AmazonS3>,
    /// The same client for completions, whose attempts are not cut short.
    pub completions: Arc<AmazonS3>,
    /// The store's URL up to the bucket: `s3://bucket/`.
    pub bucket_url: String,
    /// Requests in flight at most (PUTs and parts).
    pub requests: Arc<Semaphore>,
    pub counters: Arc<UploadCounters>,
    pub leftovers: Leftovers,
    pub bounds: Bounds,
    /// Cancelled at the store's first failure: every upload still queued
    /// or under way gives up.
    pub stop: CancellationToken,
}

/// Counts an upload in flight until it is dropped, however it ends (an
/// upload cut off by its task's abort included).
struct InFlight<'a> {
    counters: &'a UploadCounters,
    complete: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.counters.ended(self.complete);
    }
}

impl Uploads {
    pub fn url(&self, key: &Path) -> String {
        format!("{}{key}", self.bucket_url)
    }

    /// Uploads `body` as the object `key`, counted in the store's metrics.
    pub async fn object(&self, key: &Path, body: Bytes) -> Result<()> {
        self.counters.started();
        let mut in_flight = InFlight {
            counters: &self.counters,
            complete: false,
        };
        let r = self.upload(key, body).await;
        in_flight.complete = r.is_ok();
        r
    }

    async fn upload(&self, key: &Path, body: Bytes) -> Result<()> {
        if body.len() <= SINGLE_PUT_MAX {
            let n = body.len() as u64;
            let put = self.s3.put(key, PutPayload::from_bytes(body));
            self.request("uploading", key, true, put).await?;
            self.counters.add_bytes(n);
            return Ok(());
        }
        let create = self.s3.create_multipart(key);
        let id = self
            .request("starting the multipart upload of", key, false, create)
            .await?;
        let size = body.len() as u64;
        let parts = match self.parts(key, &id, body).await {
            Ok(parts) => parts,
            Err(e) => {
                self.abort(key, id).await;
                return Err(e);
            }
        };
        let complete = self.completions.complete_multipart(key, &id, parts);
        let what = "completing the multipart upload of";
        let Err(e) = self.request(what, key, false, complete).await else {
            return Ok(());
        };
        // The check and the abort after it share an abort's bound, so that
        // a failed stream's flush still returns within the bound it states.
        let deadline = Instant::now() + self.bounds.wind_down;
        // When the store failed first, nothing is checked, only cleaned.
        let landed = if self.stop.is_cancelled() {
            Some(false)
        } else {
            self.landed(key, size, deadline).await
        };
        match landed {
            Some(true) => return Ok(()),
            Some(false) => self.abort_by(key, id, deadline).await,
            // No answer: neither would an abort have one now.
            None => self.leftovers.lock().push((key.clone(), id)),
        }
        Err(e)
    }

    /// Whether the object `key` holds `size` bytes, after a completion that
    /// seemed to fail: its answer may have been lost (a timeout, a cut
    /// connection) and a server that forgets an upload as it completes it
    /// (s3s-fs, MinIO) refuses the client's retry as unknown. The store's
    /// prefix held no object of another writer when the stream began (see
    /// [`super::ownership`]) and each shard is written once, so an object
    /// of this key and size is this upload's. `None` when the server gave
    /// no answer by `deadline`.
    async fn landed(&self, key: &Path, size: u64, deadline: Instant) -> Option<bool> {
        let head = self.quick.head(key);
        match tokio::time::timeout_at(deadline, head).await {
            Ok(Ok(meta)) => Some(meta.size == size),
            Ok(Err(
                object_store::Error::NotFound { .. }
                | object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. },
            )) => Some(false),
            Ok(Err(_)) | Err(_) => None,
        }
    }

    /// Runs one request (and its retries) for `key` within `bounds.request`,
    /// holding a request slot when `slot`; gives up when the store stops.
    async fn request<T>(
        &self,
        what: &'static str,
        key: &Path,
        slot: bool,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T> {
        let work = async {
            let _slot = match slot {
                true => Some(self.requests.acquire().await),
                false => None,
            };
            match tokio::time::timeout(self.bounds.request, request).await {
                Ok(r) => r.map_err(|e| remote::error(what, &self.url(key), e)),
                Err(_) => Err(Error::ObjectStore {
                    what,
                    url: self.url(key),
                    message: format!(
                        "no answer within {} s (store.timeout_s), retries included",
                        self.bounds.request.as_secs()
                    ),
                }),
            }
        };
        match select(pin!(work), pin!(self.stop.cancelled())).await {
            Either::Left((r, _)) => r,
            Either::Right(_) => Err(Error::ObjectStore {
                what,
                url: self.url(key),
                message: GIVEN_UP.into(),
            }),
        }
    }

    /// Uploads the parts of `body` in parallel; the first failure cancels
    /// the others.
    async fn parts(&self, key: &Path, id: &MultipartId, body: Bytes) -> Result<Vec<PartId>> {
        let part = PART_BYTES.max(body.len().div_ceil(MAX_PARTS));
        let mut tasks = Vec::with_capacity(body.len().div_ceil(part));
        for (i, start) in (0..body.len()).step_by(part).enumerate() {
            let chunk = body.slice(start..(start + part).min(body.len()));
            let (me, key, id) = (self.clone(), key.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let n = chunk.len() as u64;
                let put = me.s3.put_part(&key, &id, i, PutPayload::from_bytes(chunk));
                let r = me.request("uploading a part of", &key, true, put).await;
                if r.is_ok() {
                    me.counters.add_bytes(n);
                }
                r
            }));
        }
        let mut parts = Vec::with_capacity(tasks.len());
        let mut failure = None;
        for t in &mut tasks {
            if failure.is_some() {
                t.abort();
                continue;
            }
            match t.await {
                Ok(Ok(p)) => parts.push(p),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => {
                    failure = Some(Error::Internal(format!(
                        "a part upload of {} stopped: {e}",
                        self.url(key)
                    )))
                }
            }
        }
        match failure {
            None => Ok(parts),
            Some(e) => Err(e),
        }
    }

    /// Aborts a multipart upload; when that fails too, keeps it for later.
    pub async fn abort(&self, key: &Path, id: MultipartId) {
        self.abort_by(key, id, Instant::now() + self.bounds.wind_down)
            .await
    }

    /// The same, given up at `deadline`.
    async fn abort_by(&self, key: &Path, id: MultipartId, deadline: Instant) {
        if !self.try_abort(key, &id, deadline).await {
            self.leftovers.lock().push((key.clone(), id));
        }
    }

    /// True when the upload is gone: aborted now, or unknown to the server
    /// (NoSuchUpload: aborted or completed before). Not stopped by the
    /// store's failure (it cleans up after one), but given up at
    /// `deadline` (`bounds.wind_down` from the start of the clean-up).
    async fn try_abort(&self, key: &Path, id: &MultipartId, deadline: Instant) -> bool {
        let abort = self.quick.abort_multipart(key, id);
        match tokio::time::timeout_at(deadline, abort).await {
            Ok(Ok(())) | Ok(Err(object_store::Error::NotFound { .. })) => true,
            Ok(Err(_)) | Err(_) => false,
        }
    }

    /// Tries again, all at once, to abort the uploads whose abort failed;
    /// returns those that still could not be aborted.
    pub async fn abort_leftovers(&self) -> Vec<String> {
        let left = std::mem::take(&mut *self.leftovers.lock());
        let deadline = Instant::now() + self.bounds.wind_down;
        let tries = left
            .iter()
            .map(|(key, id)| self.try_abort(key, id, deadline));
        let gone = futures_util::future::join_all(tries).await;
        let mut still = Vec::new();
        for ((key, id), gone) in left.into_iter().zip(gone) {
            if !gone {
                still.push(format!("{} (upload id {id})", self.url(&key)));
                self.leftovers.lock().push((key, id));
            }
        }
        still
    }
}
