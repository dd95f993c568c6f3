//! Each array's per-frame metadata on the write side: the rows of its
//! metadata array (a chunk per shard row of level 0) whose frames may still
//! get metadata. A row is handed on, with the first batch of a later row:
//! from then on metadata for its frames comes too late. At most
//! [`FrameMetadataRows::most`] rows wait at a time (their bytes are
//! counted in `tz_estimate_memory`).

use super::Intake;
use crate::error::{Error, Result};
use crate::metadata::frame_metadata::FrameMetadataArray;
use crate::pipeline::workers::Job;
use std::collections::BTreeMap;

/// `json` as compact text, if it is a JSON object (done before the intake's
/// lock is taken: the writer and the latency timer share it).
pub fn compact_object(frame: u64, json: &str) -> Result<String> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        Error::InvalidArgument(format!("frame {frame}'s metadata is not JSON ({e})"))
    })?;
    if !value.is_object() {
        return Err(Error::InvalidArgument(format!(
            "frame {frame}'s metadata must be a JSON object, not {json:.40}"
        )));
    }
    Ok(value.to_string())
}

/// A row of the metadata array: its index and bytes.
pub type MetadataRow = (u64, Vec<u8>);

/// Rows that may wait at once for an array whose staging buffers span
/// `buffer_frames` frames: a buffer's rows and two more.
pub fn rows_held(array: &FrameMetadataArray, buffer_frames: u64) -> usize {
    usize::try_from(buffer_frames.div_ceil(array.rows.max(1)) + 2).unwrap_or(usize::MAX)
}

pub struct FrameMetadataRows {
    pub array: FrameMetadataArray,
    /// Rows below this were handed on.
    sealed: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    most: usize,
}

impl FrameMetadataRows {
    pub fn new(array: FrameMetadataArray, most: usize) -> FrameMetadataRows {
        FrameMetadataRows {
            array,
            sealed: 0,
            pending: BTreeMap::new(),
            most: most.max(2),
        }
    }

    /// Records `text` (compact JSON, checked by the caller) for `frame`,
    /// replacing what it had; `key` names the array in errors.
    pub fn set(&mut self, frame: u64, text: &str, key: &str) -> Result<()> {
        let max = self.array.max_bytes as usize;
        if text.len() > max {
            return Err(Error::InvalidArgument(format!(
                "frame {frame}'s metadata for array {key:?} is {} bytes, more than its frame_metadata.max_bytes ({max})",
                text.len()
            )));
        }
        let row = frame / self.array.rows;
        if row < self.sealed {
            return Err(Error::InvalidArgument(format!(
                "frame {frame}'s metadata for array {key:?} comes too late: its shard row ({} frames from {}) was handed on with the frames after it; give a frame's metadata before the next row's frames",
                self.array.rows,
                row * self.array.rows
            )));
        }
        if !self.pending.contains_key(&row) {
            if self.pending.len() >= self.most {
                return Err(Error::InvalidArgument(format!(
                    "frame {frame}'s metadata for array {key:?}: {} shard rows of metadata wait already, the most there may be",
                    self.most
                )));
            }
            let bytes = crate::memory::try_filled(
                self.array.chunk_bytes(),
                0u8,
                "a row of frame metadata",
            )?;
            self.pending.insert(row, bytes);
        }
        let bytes = self.pending.get_mut(&row).expect("inserted");
        let at = (frame % self.array.rows) as usize * max;
        bytes[at..at + max].fill(0);
        bytes[at..at + text.len()].copy_from_slice(text.as_bytes());
        Ok(())
    }

    /// Hands on every row below `row`.
    pub fn seal_below(&mut self, row: u64) -> Vec<MetadataRow> {
        self.sealed = self.sealed.max(row);
        let rest = self.pending.split_off(&row);
        std::mem::replace(&mut self.pending, rest)
            .into_iter()
            .collect()
    }

    /// Hands on every row (the stream is flushing).
    pub fn take_all(&mut self) -> Vec<MetadataRow> {
        self.sealed = u64::MAX;
        std::mem::take(&mut self.pending).into_iter().collect()
    }
}

impl Intake {
    /// Records `text` (compact JSON: [`compact_object`]) as frame
    /// `frame`'s metadata of array `array`: refused for an array without a
    /// metadata array, a frame not written (or skipped) yet, text past
    /// `max_bytes`, or a frame whose row was handed on.
    pub fn frame_metadata(&mut self, array: usize, frame: u64, text: &str) -> Result<()> {
        self.cursor(array)?;
        let key = &self.shared.keys[array];
        let c = &mut self.cursors[array];
        let frames_in = c.bytes_in.div_ceil(c.plan.plane_bytes.max(1) as u64);
        let Some(rows) = c.metadata.as_mut() else {
            return Err(Error::InvalidArgument(format!(
                "array {key:?} keeps no per-frame metadata: configure \"frame_metadata\": {{\"max_bytes\": ...}}"
            )));
        };
        if frame >= frames_in {
            return Err(Error::InvalidArgument(format!(
                "frame {frame} of array {key:?} was never written ({frames_in} frames so far)"
            )));
        }
        rows.set(frame, text, key)
    }

    /// Hands on array `array`'s metadata rows before the row of epoch
    /// `epoch` (its frames from there on are in batches handed on).
    pub(super) fn hand_on_metadata_before(&mut self, array: usize, epoch: u64) -> Result<()> {
        let c = &mut self.cursors[array];
        let Some(m) = c.metadata.as_mut() else {
            return Ok(());
        };
        let planes = (c.plan.epoch_bytes / c.plan.plane_bytes.max(1)) as u64;
        let rows = m.seal_below(epoch * planes / m.array.rows);
        self.send_metadata(array, rows)
    }

    /// Hands on every metadata row of array `array` (the stream flushes).
    pub(super) fn hand_on_all_metadata(&mut self, array: usize) -> Result<()> {
        let rows = match self.cursors[array].metadata.as_mut() {
            Some(m) => m.take_all(),
            None => return Ok(()),
        };
        self.send_metadata(array, rows)
    }

    fn send_metadata(&mut self, array: usize, rows: Vec<MetadataRow>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let jobs = self.jobs.as_ref().ok_or(Error::Finished)?;
        let job = Job::FrameMetadata {
            array: array as u32,
            rows,
        };
        jobs.send(job).map_err(|_| self.pipeline_gone())
    }
}

#[cfg(test)]
mod tests {
    use super::compact_object;

    #[test]
    fn a_frames_metadata_keeps_its_floats_exactly() {
        // A pixel size of 17 significant digits, whose last bit the fast
        // float parser moves, and the extremes of f64.
        let floats = [0.024527538000256754, 5e-324, f64::MAX, -0.1];
        let json = format!(
            r#"{{"a": {}, "b": {}, "c": {}, "d": {}}}"#,
            floats[0], floats[1], floats[2], floats[3]
        );
        let kept: serde_json::Value =
            serde_json::from_str(&compact_object(0, &json).unwrap()).unwrap();
        for (key, f) in ["a", "b", "c", "d"].into_iter().zip(floats) {
            assert_eq!(kept[key].as_f64().unwrap().to_bits(), f.to_bits(), "{key}");
        }
    }
}
