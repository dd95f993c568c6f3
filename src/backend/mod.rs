//! Compute backends: each turns one epoch of row-major input into compressed
//! tiles grouped by shard. The pipeline drives them through [`Backend`] and
//! never needs to know which one runs.

pub mod cpu;

use crate::config::{BackendChoice, Validated};
use crate::error::{Error, Result};
use crate::pipeline::Metrics;
use crate::shard::CompressedEpoch;
use std::sync::atomic::AtomicBool;

/// One epoch's work, as the pipeline hands it to a backend.
pub struct EpochJob<'a> {
    pub epoch: u64,
    /// `layout.epoch_bytes()` of row-major input, padded with the fill value.
    pub input: &'a [u8],
    /// Set when the stream is abandoned: stop early, the result is dropped.
    pub cancel: &'a AtomicBool,
    pub metrics: &'a Metrics,
}

pub trait Backend: Send {
    /// Scatters, compresses and aggregates one epoch into `out`
    /// (shard-major: see [`CompressedEpoch`]).
    fn compress_epoch(&mut self, job: EpochJob<'_>, out: &mut CompressedEpoch) -> Result<()>;
}

/// Which backend runs a stream, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Gpu,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Selection {
    pub kind: BackendKind,
    pub reason: String,
}

/// Why no GPU can run this stream (this build has no GPU backend yet).
fn gpu_unavailable() -> String {
    "this build of TiledZarr has no GPU backend".to_string()
}

/// Picks and builds the backend the configuration asks for.
pub fn select(v: &Validated) -> Result<(Box<dyn Backend>, Selection)> {
    let reason = match v.config.backend {
        BackendChoice::Cpu => "backend \"cpu\" requested".to_string(),
        BackendChoice::Gpu => {
            return Err(Error::BackendUnavailable(format!(
                "backend \"gpu\" requested, but {}",
                gpu_unavailable()
            )))
        }
        BackendChoice::Auto => format!("auto: {}; using the CPU", gpu_unavailable()),
    };
    let cpu = cpu::CpuBackend::new(v)?;
    Ok((
        Box::new(cpu),
        Selection {
            kind: BackendKind::Cpu,
            reason,
        },
    ))
}
