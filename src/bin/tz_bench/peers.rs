//! Peers: `scripts/bench-peers.py` (acquire-zarr, tensorstore) on the same
//! frames, shapes and level, writing to the same disk. Its JSON `peers`
//! list is merged into the record unchanged.

use super::data::Frames;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tiledzarr::config::{Cname, Codec, Shuffle, Validated};

pub struct Outcome {
    /// The script's `peers` list: name, best_gbps, median_gbps, ratio, ...
    pub peers: Vec<Value>,
    /// The script's `data` block: versions, load average, input.
    pub setup: Value,
}

/// Everything the script needs to reproduce the stream.
pub struct Request<'a> {
    pub root: &'a Path,
    pub python: Option<&'a Path>,
    pub work: &'a Path,
    pub reps: usize,
    pub threads: Option<u32>,
}

/// Why the peers cannot write this configuration, if they cannot.
pub fn unsupported(v: &Validated) -> Option<String> {
    let zstd_inside = match v.config.codec {
        Codec::Zstd { .. } => true,
        Codec::Blosc { cname, shuffle, .. } => cname == Cname::Zstd && shuffle == Shuffle::Byte,
        Codec::None | Codec::Gzip { .. } => false,
    };
    if !zstd_inside {
        return Some("the peer script only writes zstd and blosc-zstd with byte shuffle".into());
    }
    let dtypes = [
        "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32",
        "float64",
    ];
    if !dtypes.contains(&v.config.dtype.name()) {
        return Some(format!("the peer script has no {}", v.config.dtype));
    }
    if !v.layout.is_unbounded() {
        return Some("the peer script writes an append (unbounded) dimension 0 only".into());
    }
    None
}

pub fn run(req: &Request, v: &Validated, frames: &Frames) -> Result<Outcome, String> {
    let script = req.root.join("scripts/bench-peers.py");
    let python = req
        .python
        .map_or_else(|| req.root.join(".venv/bin/python"), Path::to_path_buf);
    if !python.exists() {
        return Err(format!(
            "no python at {} (run scripts/setup-python.sh, or give --python)",
            python.display()
        ));
    }
    let raw = req.work.join("frames.raw");
    let n = frames.frames();
    eprintln!(
        "tz-bench: writing {n} frames ({:.2} GB) to {} for the peers",
        frames.bytes() as f64 / 1e9,
        raw.display()
    );
    frames
        .write_raw(&raw, n)
        .map_err(|e| format!("writing {}: {e}", raw.display()))?;
    let json = req.work.join("peers.json");
    let out_dir = req.work.join("peers");
    let level = match v.config.codec {
        // A blosc stream's level is acquire-zarr's blosc clevel as well.
        Codec::Zstd { level } | Codec::Blosc { level, .. } => level,
        Codec::None | Codec::Gzip { .. } => unreachable!("checked by unsupported()"),
    };
    let shape = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut cmd = Command::new(&python);
    cmd.arg(&script)
        .arg("--raw")
        .arg(&raw)
        .args(["--dtype", v.config.dtype.name()])
        .args(["--frame-shape", &shape(frames.generator().frame_shape())])
        .args(["--frames", &n.to_string()])
        .args(["--chunk", &shape(&v.layout.tile_shape())])
        .args(["--shard", &shape(&v.layout.shard_shape())])
        .args(["--level", &level.to_string()])
        .arg("--out-dir")
        .arg(&out_dir)
        .args(["--reps", &req.reps.to_string()])
        .arg("--json")
        .arg(&json);
    if let Some(t) = req.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    // The script's own table goes to stderr: stdout carries only ours.
    cmd.stdout(Stdio::from(std::io::stderr()));
    eprintln!("tz-bench: running {}", script.display());
    let status = cmd
        .status()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    // A failed peer still leaves its JSON (with status "failed"): keep it.
    let text = std::fs::read_to_string(&json).map_err(|e| {
        format!(
            "the peer script ({status}) wrote no {}: {e}",
            json.display()
        )
    })?;
    let _ = std::fs::remove_file(&raw);
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("reading {}: {e}", json.display()))?;
    let peers = doc["peers"].as_array().cloned().unwrap_or_default();
    Ok(Outcome {
        peers,
        setup: doc["data"].clone(),
    })
}

/// The repository root: the working directory when it holds the peer
/// script, else the source tree this binary was built from where it is
/// on this machine, else (a binary carried to another machine) the
/// working directory.
pub fn repo_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let script = "scripts/bench-peers.py";
    if !cwd.join(script).is_file() && built.join(script).is_file() {
        built
    } else {
        cwd
    }
}
