//! The user's attributes as the stores see them: set at creation,
//! replaceable until the stream's flush, written by each store at its next
//! metadata update and at flush.

use parking_lot::Mutex;
use serde_json::{Map, Value};

/// The attributes and a count of their replacements, so that a store
/// rewrites its document only when they changed.
#[derive(Debug, Default)]
pub struct SharedAttributes(Mutex<(u64, Map<String, Value>)>);

impl SharedAttributes {
    pub fn new(attributes: Map<String, Value>) -> SharedAttributes {
        SharedAttributes(Mutex::new((0, attributes)))
    }

    /// Replaces the attributes.
    pub fn set(&self, attributes: Map<String, Value>) {
        let mut a = self.0.lock();
        a.0 += 1;
        a.1 = attributes;
    }

    /// The attributes, when they changed since `seen` (which is updated).
    pub fn changed_since(&self, seen: &mut u64) -> Option<Map<String, Value>> {
        let a = self.0.lock();
        (a.0 != *seen).then(|| {
            *seen = a.0;
            a.1.clone()
        })
    }

    pub fn get(&self) -> Map<String, Value> {
        self.0.lock().1.clone()
    }
}
