//! What both stores keep of a stream's arrays: each array's validated
//! configuration, the dimension-0 extent last written to each level's
//! `zarr.json`, and the documents and keys that follow from them (see
//! [`crate::metadata`]).

use crate::config::{Plan, Validated};
use crate::metadata::{self, Document};
use serde_json::{Map, Value};

pub struct Images {
    arrays: Vec<Validated>,
    /// `planes[a][k]`: array `a`'s level `k` extent last written.
    planes: Vec<Vec<u64>>,
    /// The documents written at create: the groups, then each array's.
    initial: Vec<Document>,
}

impl Images {
    pub fn new(plan: &Plan) -> Images {
        let mut initial = metadata::group_documents(plan);
        let mut planes = Vec::with_capacity(plan.arrays.len());
        for v in &plan.arrays {
            let p = metadata::level_planes(v, 0);
            initial.extend(metadata::all_documents(v, &p, &v.image.attributes));
            planes.push(p);
        }
        Images {
            arrays: plan.arrays.clone(),
            planes,
            initial,
        }
    }

    /// Every document of the new store, parents first.
    pub fn take_initial(&mut self) -> Vec<Document> {
        std::mem::take(&mut self.initial)
    }

    /// The extent last written for array `array`'s level `level`.
    pub fn planes(&self, array: u32, level: u32) -> u64 {
        self.planes[array as usize][level as usize]
    }

    pub fn set_planes(&mut self, array: u32, level: u32, planes: u64) {
        self.planes[array as usize][level as usize] = planes;
    }

    pub fn is_unbounded(&self, array: u32, level: u32) -> bool {
        self.arrays[array as usize].image.levels[level as usize].is_unbounded()
    }

    /// The extent to write at the end: what the stream reached on an
    /// unbounded level, the configured size on a bounded one.
    pub fn final_planes(&self, array: u32, level: u32, reached: u64) -> u64 {
        if self.is_unbounded(array, level) {
            reached
        } else {
            self.planes(array, level)
        }
    }

    /// Level `level`'s array document with `planes` planes.
    pub fn level_document(
        &self,
        array: u32,
        level: u32,
        planes: u64,
        attributes: &Map<String, Value>,
    ) -> Document {
        metadata::level_document(&self.arrays[array as usize], level, planes, attributes)
    }

    /// The document holding the first array's attributes (the only ones a
    /// stream replaces while it runs).
    pub fn attributes_document(&self, attributes: &Map<String, Value>) -> Document {
        metadata::attributes_document(&self.arrays[0], self.planes[0][0], attributes)
    }

    /// The key of a shard's folder, `/`-separated, up to and including
    /// `c` (`Pos1/0/c`, or `c` for a plain array at the root).
    pub fn chunks_key(&self, array: u32, level: u32) -> String {
        let v = &self.arrays[array as usize];
        format!("{}c", metadata::level_prefix(v, level))
    }
}
