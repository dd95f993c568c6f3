//! Where a stream's store is and how it writes it: a folder or an
//! S3-compatible object store.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The Zarr v3 store written by the library: a folder (`path`) or an
/// S3-compatible object store (`url`), exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// The store folder (empty when `url` names an object store).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub path: PathBuf,
    /// `s3://bucket/prefix`: the store's objects are `prefix/zarr.json` and
    /// `prefix/c/...` in `bucket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The object store's endpoint (`http://host:port` for an on-premises
    /// server, addressed path-style); default: `AWS_ENDPOINT_URL`, else AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The bucket's region; default: `AWS_REGION`, `AWS_DEFAULT_REGION`, the
    /// profile's region, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// How long the store waits for an answer, in seconds (1 to 3600;
    /// default 60). An object store: the longest one request may take, its
    /// retries included; past it the request fails and the stream is
    /// poisoned, so that no wait on a server that is gone or never answers
    /// lasts longer. A folder: how long the flush and destroy wait while no
    /// write, flush or rename on its disk returns (a hung network mount, a
    /// failing drive); then the stream is poisoned and they return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Replace an existing store: only a store whose every file (or object)
    /// this library wrote (an earlier store, an empty folder) is cleared;
    /// anything else is refused, naming what is in the way.
    #[serde(default)]
    pub overwrite: bool,
    /// Flush each shard file and `zarr.json`, and their folder, to the disk
    /// before the shard counts as written (on the store's flush threads and
    /// the delivery thread: writes never wait for it). Off trades
    /// durability for speed. (An object store has its object complete when
    /// its upload returns.)
    #[serde(default = "yes")]
    pub fsync: bool,
    /// Whether shard files go through the operating system's page cache.
    /// `false`: a folder on a local disk (Linux: ext4, XFS, btrfs, f2fs;
    /// Windows: a fixed drive) has them written around it (`O_DIRECT`,
    /// `FILE_FLAG_NO_BUFFERING`): no copy into the kernel's pages, and no
    /// page cache filled with shards during a long stream; other folders
    /// (network mounts, memory) go through it all the same. `true`:
    /// through it. Unset (the default): around it with `fsync` (the bytes
    /// must reach the disk before a shard counts, and the page cache would
    /// only add a copy), through it without (the page cache takes a burst
    /// faster than a disk). An object store ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<bool>,
}

impl Default for Store {
    fn default() -> Store {
        Store {
            path: PathBuf::new(),
            url: None,
            endpoint: None,
            region: None,
            timeout_s: None,
            overwrite: false,
            fsync: true,
            page_cache: None,
        }
    }
}

impl Store {
    /// Whether a folder store writes its shard files around the page
    /// cache where its disk takes such writes (see `page_cache`).
    pub fn shard_files_around_page_cache(&self) -> bool {
        !self.page_cache.unwrap_or(!self.fsync)
    }

    /// The filesystem store at `path`, with the defaults.
    pub fn folder(path: impl Into<PathBuf>) -> Store {
        Store {
            path: path.into(),
            ..Store::default()
        }
    }

    /// The object store at `url` (`s3://bucket/prefix`), with the defaults.
    pub fn object(url: impl Into<String>) -> Store {
        Store {
            url: Some(url.into()),
            ..Store::default()
        }
    }
}

fn is_empty_path(p: &std::path::Path) -> bool {
    p.as_os_str().is_empty()
}

fn yes() -> bool {
    true
}
