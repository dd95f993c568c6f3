//! The shards handed to uploads and not yet complete, by URL: after a
//! failure, what is left in it is what the store lost, reported by key.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Entries>>);

#[derive(Default)]
struct Entries {
    next: u64,
    open: BTreeMap<u64, String>,
}

/// One shard's line in the ledger, closed once its upload completes.
pub struct Entry {
    ledger: Ledger,
    id: u64,
}

impl Ledger {
    /// Opens a line for the shard at `url`, in the order shards were handed
    /// over.
    pub fn open(&self, url: String) -> Entry {
        let mut e = self.0.lock();
        let id = e.next;
        e.next += 1;
        e.open.insert(id, url);
        Entry {
            ledger: self.clone(),
            id,
        }
    }

    /// The shards whose upload never completed, in the order they were
    /// handed over, less `except` (the one the first failure names).
    pub fn lost(&self, except: Option<&str>) -> Vec<String> {
        let e = self.0.lock();
        e.open
            .values()
            .filter(|u| Some(u.as_str()) != except)
            .cloned()
            .collect()
    }
}

impl Entry {
    /// The shard is complete on the server.
    pub fn complete(self) {
        self.ledger.0.lock().open.remove(&self.id);
    }
}

/// The note on a failure that lost `lost` shards: a count and the first
/// few keys (the message stays readable; a store of thousands of shards
/// in flight would not).
pub fn lost_note(lost: &[String]) -> Option<String> {
    const LISTED: usize = 8;
    let (first, rest) = lost.split_at(lost.len().min(LISTED));
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    (!lost.is_empty()).then(|| {
        format!(
            "; {} more shard(s) were being uploaded and are not in the store: {}{more}",
            lost.len(),
            first.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_open_is_lost_in_order() {
        let l = Ledger::default();
        let a = l.open("s3://b/c/0".into());
        let b = l.open("s3://b/c/1".into());
        let c = l.open("s3://b/c/2".into());
        b.complete();
        assert_eq!(l.lost(None), ["s3://b/c/0", "s3://b/c/2"]);
        assert_eq!(l.lost(Some("s3://b/c/0")), ["s3://b/c/2"]);
        a.complete();
        c.complete();
        assert!(l.lost(None).is_empty());
        assert_eq!(lost_note(&[]), None);
        let many: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        let note = lost_note(&many).unwrap();
        assert!(
            note.contains("10 more shard(s)") && note.contains("k7 and 2 more"),
            "{note}"
        );
    }
}
