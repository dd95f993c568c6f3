//! The S3 client of an object store: endpoint, region and credentials from
//! the configuration and the standard AWS sources, retries with backoff, and
//! the runtime its requests run on.

use super::credentials::Env;
use crate::config::{ObjectUrl, Store};
use crate::error::{Error, Result};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use std::time::Duration;

/// How long the store waits on the server. Every wait on the network is
/// one of these, so that a server that is gone, or that takes connections
/// and never answers, ends the stream instead of hanging it.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// One request with all its retries (`store.timeout_s`).
    pub request: Duration,
    /// One attempt: an answer that has not come by then is given up and
    /// the request retried (a stalled connection is no answer).
    pub attempt: Duration,
    /// The check at create: a server that does not answer is reported
    /// within this, before the stream starts.
    pub probe: Duration,
    /// Aborting a multipart upload, and the uploads cancelled after a
    /// failure winding down.
    pub wind_down: Duration,
}

impl Bounds {
    pub fn new(timeout_s: Option<u64>) -> Bounds {
        let request =
            Duration::from_secs(timeout_s.unwrap_or(crate::sink::DEFAULT_TIMEOUT_S).max(1));
        let short = request.min(Duration::from_secs(10));
        Bounds {
            request,
            attempt: (request / 3).max(Duration::from_secs(1)),
            probe: short,
            wind_down: short,
        }
    }
}

/// Retries of one request on throttling (429, 503 SlowDown), 5xx answers,
/// timeouts and broken connections, with backoff (0.2 s doubling up to
/// 8 s, with jitter) for at most `bounds.request`.
fn retry_config(max_retries: usize, bounds: &Bounds) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(8),
            base: 2.0,
        },
        max_retries,
        retry_timeout: bounds.request,
    }
}

/// Retries of the data requests.
const RETRIES: usize = 6;
/// Retries of the requests that must not wait long.
const QUICK_RETRIES: usize = 3;

/// What a client's requests are: how often they are retried and how long
/// one attempt may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// PUTs and parts: [`RETRIES`], an attempt of `bounds.attempt`.
    Data,
    /// The check at create (a server that does not answer is reported at
    /// once), the check whether a completion landed and the aborts of
    /// failed multipart uploads (cleaning up after a failure, most likely
    /// on a server that is gone; tried again at the flush and at destroy):
    /// [`QUICK_RETRIES`].
    Quick,
    /// Completions of multipart uploads: one attempt may take the whole
    /// `bounds.request`. The server assembles the object before it
    /// answers, in a time that grows with the object (S3 documents minutes
    /// for large ones); an attempt given up early is retried on a server
    /// that may have dropped the upload already, and s3s-fs, for one,
    /// stops assembling it when the client hangs up, which loses it.
    Completion,
}

impl Purpose {
    fn retries(self) -> usize {
        match self {
            Purpose::Data | Purpose::Completion => RETRIES,
            Purpose::Quick => QUICK_RETRIES,
        }
    }

    fn attempt(self, bounds: &Bounds) -> Duration {
        match self {
            Purpose::Completion => bounds.request,
            Purpose::Data | Purpose::Quick => bounds.attempt,
        }
    }
}

/// The process's TLS provider for the client (ring), unless the host
/// program installed one already.
fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only when another thread installed one meanwhile: also fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A client for the store at `url`, for requests of `purpose`.
pub fn connect(
    store: &Store,
    url: &ObjectUrl,
    purpose: Purpose,
    bounds: &Bounds,
) -> Result<AmazonS3> {
    install_tls_provider();
    let var = |k: &str| std::env::var(k).ok();
    let env = Env(&var);
    // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    // AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, web identity and
    // container credentials.
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(&url.bucket)
        .with_retry(retry_config(purpose.retries(), bounds))
        .with_client_options(
            ClientOptions::new()
                .with_connect_timeout(bounds.attempt.min(Duration::from_secs(5)))
                .with_timeout(purpose.attempt(bounds)),
        );
    if var("AWS_ACCESS_KEY_ID").is_none_or(|k| k.is_empty()) {
        if let Some(k) = env.profile_keys() {
            b = b
                .with_access_key_id(k.key_id)
                .with_secret_access_key(k.secret);
            if let Some(t) = k.token {
                b = b.with_token(t);
            }
        }
    }
    let region = store
        .region
        .clone()
        .or_else(|| var("AWS_REGION"))
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .or_else(|| env.profile_region());
    if let Some(r) = region {
        b = b.with_region(r);
    }
    let endpoint = store
        .endpoint
        .clone()
        .or_else(|| var("AWS_ENDPOINT_URL_S3"))
        .or_else(|| var("AWS_ENDPOINT_URL"));
    if let Some(e) = endpoint {
        // Path-style addressing: on-premises servers rarely resolve
        // bucket names as host names. An http:// endpoint is taken as
        // meant (a local server, a test).
        b = b
            .with_allow_http(e.starts_with("http://"))
            .with_endpoint(e.trim_end_matches('/'))
            .with_virtual_hosted_style_request(false);
    }
    b.build().map_err(|e| Error::ObjectStore {
        what: "configuring the client for",
        url: format!("s3://{}/{}", url.bucket, url.prefix),
        message: e.to_string(),
    })
}

/// The runtime the store's requests run on: two threads of its own, so
/// that uploads never run on (or wait for) the caller's threads.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tz-upload")
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("starting the upload threads: {e}")))
}
