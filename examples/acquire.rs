//! The main job: stream a synthetic microscope acquisition into a Zarr v3
//! store with the default backend, one frame per write, and report the
//! throughput.
//!
//! ```text
//! cargo run --release --example acquire -- [--frames N] [--out PATH] [--backend auto|cpu|gpu] [--size PX]
//! ```
//!
//! The frames are the benchmark protocol's microscopy data (u16 2048x2048,
//! tiles 32x32x32, 16x16 tiles per shard: the cam-32 configuration). 64
//! distinct frames are generated up front and cycled, so that generating
//! data does not limit the rate; 64 frames span two tiles along z, so no
//! tile sees a repeated frame.

use std::io::Write;
use std::time::Instant;
use tiledzarr::synth::{Generator, Pattern};
use tiledzarr::{Config, DType, Stream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut frames: u64 = 256;
    let mut out = "out.zarr".to_string();
    let mut backend = "auto".to_string();
    let mut size: u64 = 2048;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--frames" => frames = value()?.parse()?,
            "--out" => out = value()?,
            "--backend" => backend = value()?,
            "--size" => size = value()?.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let config = Config::from_json(&format!(
        r#"{{
            "dtype": "uint16",
            "dimensions": [
                {{"name": "z", "size": 0,    "tile": 32, "tiles_per_shard": 1}},
                {{"name": "y", "size": {size}, "tile": 32, "tiles_per_shard": 16}},
                {{"name": "x", "size": {size}, "tile": 32, "tiles_per_shard": 16}}
            ],
            "codec": {{"name": "zstd", "level": 1}},
            "backend": "{backend}",
            "store": {{"path": {out:?}, "overwrite": true}}
        }}"#
    ))?;
    let generator = Generator::new(Pattern::Microscopy, DType::Uint16, &[size, size], 1);
    let distinct: Vec<Vec<u8>> = (0..64)
        .map(|i| {
            let mut f = vec![0u8; generator.frame_bytes()];
            generator.fill_frame(i, &mut f);
            f
        })
        .collect();

    let mut stream = Stream::new(&config, None)?;
    let (kind, reason) = stream.backend();
    eprintln!("backend: {} ({reason})", kind.name());
    let start = Instant::now();
    let mut busy_spins = 0u64;
    for i in 0..frames {
        let frame = &distinct[(i % 64) as usize];
        // A camera would retry a busy write; here the rest of the frame
        // waits for staging memory instead of spinning on the CPU.
        let n = stream.write(frame)?;
        if n < frame.len() {
            busy_spins += 1;
            stream.write_blocking(&frame[n..], None)?;
        }
    }
    let summary = stream.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let m = summary.metrics;
    println!(
        "wrote {} frames ({:.2} GB) to {out} in {seconds:.2} s: {:.2} GB/s, compression ratio {:.2}, {} shards, {busy_spins} frames met a busy stream",
        frames,
        m.bytes_in as f64 / 1e9,
        m.bytes_in as f64 / 1e9 / seconds,
        m.compression_ratio(),
        m.shards,
    );
    let stages: Vec<String> = tiledzarr::pipeline::Stage::ALL
        .iter()
        .map(|&st| format!("{} {:.2} s", st.name(), m.seconds(st)))
        .collect();
    println!(
        "cumulative stage seconds (all threads): {}",
        stages.join(", ")
    );
    Ok(())
}
