//! Writes synthetic frames to a raw file (little-endian, row-major) so that
//! other writers can be benchmarked on identical bytes.
//!
//! ```text
//! cargo run --release --example synth_raw -- PATH FRAMES [PATTERN] [DTYPE] [FRAME_SHAPE] [SEED]
//! ```
//! Defaults: microscopy, uint16, 2048,2048, seed 1 (the frames of the
//! `cpu_pipeline` bench).

use std::path::PathBuf;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::DType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    if args.len() < 2 {
        return Err("usage: synth_raw PATH FRAMES [PATTERN] [DTYPE] [FRAME_SHAPE] [SEED]".into());
    }
    let path = PathBuf::from(&args[0]);
    let frames: u64 = args[1].parse()?;
    let pattern: Pattern = arg(2, "microscopy").parse()?;
    let dtype_name = arg(3, "uint16");
    let dtype = DType::from_name(&dtype_name).ok_or(format!("unknown dtype {dtype_name}"))?;
    let shape: Vec<u64> = arg(4, "2048,2048")
        .split(',')
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let seed: u64 = arg(5, "1").parse()?;
    Generator::new(pattern, dtype, &shape, seed).write_raw(&path, frames)?;
    eprintln!(
        "wrote {frames} {pattern} {dtype} frames of {shape:?} to {}",
        path.display()
    );
    Ok(())
}
