//! The arrays of a stream as the binding sees them: each array's key,
//! element type, frame shape and room, which `append` checks a frame
//! against before the library sees it, and the lookup of `key=`.

use crate::buffer::{Buffer, Kind};
use crate::errors;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use tiledzarr::config::Plan;
use tiledzarr::DType;

/// One array of the stream.
pub struct ArrayInfo {
    /// The array's key in the store (`""`: the only array, at the root).
    pub key: String,
    pub dtype: DType,
    /// The shape of one plane (a frame): the sizes of dimensions 1 and up,
    /// in acquisition order (the layout is in the storage order).
    pub plane_shape: Vec<u64>,
    /// Bytes the array holds (`None`: unbounded).
    pub capacity: Option<u64>,
    /// Bytes this binding handed to the array: the library took them all,
    /// since every write goes through this binding.
    written: AtomicU64,
}

impl ArrayInfo {
    /// Counts `n` more bytes taken by the array.
    pub fn took(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// One frame's bytes.
    pub fn plane_bytes(&self) -> u64 {
        self.plane_shape.iter().product::<u64>() * self.dtype.size() as u64
    }

    /// Whether a bounded array has taken all it holds.
    pub fn is_full(&self) -> bool {
        self.capacity == Some(self.written())
    }

    /// The array as the messages name it.
    fn name(&self) -> String {
        match self.key.as_str() {
            "" => "the array".into(),
            key => format!("array {key:?}"),
        }
    }

    /// Refuses a frame (or stack of frames) whose element type or shape is
    /// not this array's.
    pub fn check_frame(&self, buf: &Buffer) -> PyResult<()> {
        let (kind, little) = buf.element();
        let want_kind = if self.dtype.is_float() {
            Kind::Float
        } else if self.dtype.is_signed() {
            Kind::Signed
        } else {
            Kind::Unsigned
        };
        if kind != want_kind || buf.itemsize() != self.dtype.size() || !little {
            let name = element_name(kind, buf.itemsize(), &buf.format());
            let order = if little { "" } else { " big-endian" };
            let theirs = match self.key.as_str() {
                "" => "the stream's".to_string(),
                key => format!("the dtype of array {key:?}"),
            };
            return Err(errors::invalid_argument(format!(
                "frame dtype is{order} {name}, {theirs} is {}: convert it with \
                 frame.astype(numpy.{})",
                self.dtype, self.dtype
            )));
        }
        let shape = buf.shape();
        let plane = &self.plane_shape;
        let fits = shape == *plane || (shape.len() == plane.len() + 1 && shape[1..] == plane[..]);
        if !fits {
            let mut stack = vec![0];
            stack.extend(plane);
            let theirs = match self.key.as_str() {
                "" => "the stream's frame shape".to_string(),
                key => format!("the frame shape of array {key:?}"),
            };
            return Err(errors::invalid_argument(format!(
                "frame shape {} does not match {theirs} {} (or {} for n frames)",
                shape_str(&shape),
                shape_str(plane),
                shape_str(&stack).replacen('0', "n", 1)
            )));
        }
        Ok(())
    }

    /// Refuses `len` bytes that would go past the end of a bounded array,
    /// before any of them is written.
    pub fn check_room(&self, len: u64) -> PyResult<()> {
        if let Some(cap) = self.capacity {
            let written = self.written();
            if written + len > cap {
                return Err(errors::new(
                    "ArrayOverflowError",
                    format!(
                        "the frame would go past the end of {} ({cap} bytes, {written} \
                         written, the frame {len}): nothing of it was written",
                        self.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Every array of a stream, in the order of the configuration's `arrays`.
pub struct Arrays(Vec<ArrayInfo>);

impl Arrays {
    pub fn of(plan: &Plan) -> Arrays {
        Arrays(
            plan.arrays
                .iter()
                .map(|v| ArrayInfo {
                    key: v.key.clone(),
                    dtype: v.config.dtype,
                    plane_shape: v.config.dimensions[1..].iter().map(|d| d.size).collect(),
                    capacity: v.layout.array_bytes(),
                    written: AtomicU64::new(0),
                })
                .collect(),
        )
    }

    pub fn keys(&self) -> Vec<String> {
        self.0.iter().map(|a| a.key.clone()).collect()
    }

    /// The index of the array `key` names (`None`: the first array), or
    /// an InvalidArgumentError listing the keys there are.
    pub fn index(&self, key: Option<&str>) -> PyResult<usize> {
        let Some(key) = key else { return Ok(0) };
        if let Some(i) = self.0.iter().position(|a| a.key == key) {
            return Ok(i);
        }
        let there = match self.0.as_slice() {
            [only] if only.key.is_empty() => {
                "the stream has one array, at the store's root: leave key out".to_string()
            }
            arrays => format!(
                "the stream's arrays are {}",
                arrays
                    .iter()
                    .map(|a| format!("{:?}", a.key))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        Err(errors::invalid_argument(format!(
            "no array has the key {key:?}: {there}"
        )))
    }

    /// The array `key` names (`None`: the first array).
    pub fn get(&self, key: Option<&str>) -> PyResult<(usize, &ArrayInfo)> {
        let i = self.index(key)?;
        Ok((i, &self.0[i]))
    }
}

/// The dtype name of a buffer's elements, as numpy spells it.
fn element_name(kind: Kind, size: usize, format: &str) -> String {
    let d = DType::ALL.into_iter().find(|d| {
        d.size() == size
            && match kind {
                Kind::Float => d.is_float(),
                Kind::Signed => d.is_signed(),
                Kind::Unsigned => !d.is_float() && !d.is_signed(),
                Kind::Other => false,
            }
    });
    match d {
        Some(d) => d.name().to_string(),
        None => format!("format {format:?}, {size} bytes per item"),
    }
}

fn shape_str(s: &[u64]) -> String {
    match s {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}
