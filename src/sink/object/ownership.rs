//! The ownership rules of the filesystem store, for a key prefix: a prefix
//! that holds anything is refused unless `overwrite` is set, and even then
//! only a prefix whose every object this library writes (`zarr.json`,
//! `c/` keys named by coordinates, numbered level prefixes holding the same)
//! is cleared; anything else is refused, naming it, and nothing is removed.

use super::remote;
use crate::error::{Error, Result};
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::ObjectStore;

/// What lies under the store's prefix, from one listing request: the check
/// that the bucket exists, the credentials are accepted and the server
/// answers, before the stream starts.
pub async fn probe(s3: &dyn ObjectStore, prefix: &Path, url: &str) -> Result<Option<String>> {
    let listing = s3.list_with_delimiter(Some(prefix)).await.map_err(|e| {
        match remote::error("checking", url, e) {
            Error::ObjectStore { what, url, message } if message.contains("NoSuchBucket") => {
                Error::ObjectStore {
                    what,
                    url,
                    message: format!("the bucket does not exist ({message})"),
                }
            }
            e => e,
        }
    })?;
    let first = listing
        .objects
        .first()
        .map(|o| o.location.to_string())
        .or_else(|| listing.common_prefixes.first().map(|p| format!("{p}/")));
    Ok(first)
}

/// Checks that every object under `prefix` is one this library writes,
/// then deletes them all.
pub async fn clear_old_store(s3: &dyn ObjectStore, prefix: &Path, url: &str) -> Result<()> {
    let keys: Vec<Path> = s3
        .list(Some(prefix))
        .map_ok(|o| o.location)
        .try_collect()
        .await
        .map_err(|e| remote::error("listing", url, e))?;
    let skip = if prefix.as_ref().is_empty() {
        0
    } else {
        prefix.as_ref().len() + 1
    };
    if let Some(foreign) = keys.iter().find(|k| !is_ours(&k.as_ref()[skip..])) {
        return Err(Error::Exists {
            path: url.into(),
            reason: format!(
                "it holds {foreign:?}, which TiledZarr does not write, so overwrite refuses \
                 to delete the store around it (move it away or choose another prefix)"
            ),
        });
    }
    let deleted = s3
        .delete_stream(futures_util::stream::iter(keys.into_iter().map(Ok)).boxed())
        .try_collect::<Vec<_>>()
        .await;
    deleted.map_err(|e| remote::error("deleting the old store under", url, e))?;
    Ok(())
}

fn is_coordinate(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A folder name the library writes (an array's key is made of them).
fn is_node_name(s: &str) -> bool {
    !s.is_empty()
        && s != "c"
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A key (relative to the store) that a store of this library holds.
fn is_ours(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["zarr.json"] => true,
        ["c", coords @ ..] => !coords.is_empty() && coords.iter().all(|c| is_coordinate(c)),
        // A level, or a group or image of a stream of several arrays.
        [node, rest @ ..] if is_node_name(node) && !rest.is_empty() => is_ours(&rest.join("/")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_ours;

    #[test]
    fn our_keys() {
        for k in [
            "zarr.json",
            "c/0/1/2",
            "c/7",
            "0/zarr.json",
            "1/c/0/0",
            "A/1/0/0/c/0/0",
            "OME/zarr.json",
        ] {
            assert!(is_ours(k), "{k}");
        }
        for k in [
            "notes.txt",
            "c/0/x",
            "c",
            "c/",
            "zarr.json.bak",
            "a b/zarr.json",
            "0/notes",
            "Pos1/notes.txt",
        ] {
            assert!(!is_ours(k), "{k}");
        }
    }
}
