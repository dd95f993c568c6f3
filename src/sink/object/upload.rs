//! One object's upload: a PUT for a small object, a multipart upload with
//! its parts in parallel for a large one. A multipart upload that fails is
//! aborted, so that no part stays behind; one whose abort fails too (the
//! server is gone) is kept in [`Leftovers`] and aborted again later.

use super::remote;
use crate::error::Result;
use crate::metrics::UploadCounters;
use bytes::Bytes;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Objects up to this size go in one PUT.
pub const SINGLE_PUT_MAX: usize = 16 << 20;
/// The part size of a multipart upload (S3: at least 5 MiB but the last,
/// at most 10,000 parts).
pub const PART_BYTES: usize = 8 << 20;
const MAX_PARTS: usize = 10_000;

/// Multipart uploads whose abort failed: (key, upload id).
pub type Leftovers = Arc<Mutex<Vec<(Path, MultipartId)>>>;

/// What every upload of a store shares.
#[derive(Clone)]
pub struct Uploads {
    pub s3: Arc<AmazonS3>,
    /// The store's URL up to the bucket: `s3://bucket/`.
    pub bucket_url: String,
    /// Requests in flight at most (PUTs and parts).
    pub requests: Arc<Semaphore>,
    pub counters: Arc<UploadCounters>,
    pub leftovers: Leftovers,
}

impl Uploads {
    pub fn url(&self, key: &Path) -> String {
        format!("{}{key}", self.bucket_url)
    }

    /// Uploads `body` as the object `key`.
    pub async fn object(&self, key: &Path, body: Bytes) -> Result<()> {
        if body.len() <= SINGLE_PUT_MAX {
            let _slot = self.requests.acquire().await;
            let n = body.len() as u64;
            self.s3
                .put(key, PutPayload::from_bytes(body))
                .await
                .map_err(|e| remote::error("uploading", &self.url(key), e))?;
            self.counters.add_bytes(n);
            return Ok(());
        }
        let id =
            self.s3.create_multipart(key).await.map_err(|e| {
                remote::error("starting the multipart upload of", &self.url(key), e)
            })?;
        match self.parts(key, &id, body).await {
            Ok(parts) => {
                let done = self.s3.complete_multipart(key, &id, parts).await;
                match done {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        let e =
                            remote::error("completing the multipart upload of", &self.url(key), e);
                        self.abort(key, id).await;
                        Err(e)
                    }
                }
            }
            Err(e) => {
                self.abort(key, id).await;
                Err(e)
            }
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
                let _slot = me.requests.acquire().await;
                let n = chunk.len() as u64;
                let r = me
                    .s3
                    .put_part(&key, &id, i, PutPayload::from_bytes(chunk))
                    .await
                    .map_err(|e| remote::error("uploading a part of", &me.url(&key), e));
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
                    failure = Some(crate::error::Error::Internal(format!(
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
        if !self.try_abort(key, &id).await {
            self.leftovers.lock().push((key.clone(), id));
        }
    }

    /// True when the upload is gone: aborted now, or unknown to the server
    /// (NoSuchUpload: aborted or completed before).
    async fn try_abort(&self, key: &Path, id: &MultipartId) -> bool {
        match self.s3.abort_multipart(key, id).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => true,
            Err(_) => false,
        }
    }

    /// Tries again to abort the uploads whose abort failed; returns those
    /// that still could not be aborted.
    pub async fn abort_leftovers(&self) -> Vec<String> {
        let left = std::mem::take(&mut *self.leftovers.lock());
        let mut still = Vec::new();
        for (key, id) in left {
            if !self.try_abort(&key, &id).await {
                still.push(format!("{} (upload id {id})", self.url(&key)));
                self.leftovers.lock().push((key, id));
            }
        }
        still
    }
}
