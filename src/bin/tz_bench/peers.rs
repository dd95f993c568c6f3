//! Peers: `scripts/bench-peers.py` (acquire-zarr, tensorstore) on the same
//! frames, shapes, codec and level, writing to the same disk (a peer that
//! cannot write the codec is listed as skipped), a rep of each after each
//! of the stream's runs. Its JSON `peers` list is merged into the record
//! unchanged.

use super::data::Frames;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use tiledzarr::config::{Codec, Validated};

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

/// The peer script's arguments for the stream's codec (a blosc level is
/// the peers' blosc clevel as well); None for codec none, which no peer
/// writes.
fn codec_args(codec: Codec) -> Option<Vec<String>> {
    let (words, level) = match codec {
        Codec::None => return None,
        Codec::Zstd { level } => (vec!["--codec", "zstd"], level),
        Codec::Gzip { level } => (vec!["--codec", "gzip"], level),
        Codec::Blosc {
            level,
            shuffle,
            cname,
        } => {
            let words = [
                "--codec",
                "blosc",
                "--cname",
                cname.name(),
                "--shuffle",
                shuffle.name(),
            ];
            (words.to_vec(), level)
        }
    };
    let mut args: Vec<String> = words.into_iter().map(String::from).collect();
    args.extend(["--level".to_string(), level.to_string()]);
    Some(args)
}

/// Why the peers cannot write this configuration, if they cannot.
pub fn unsupported(v: &Validated) -> Option<String> {
    if codec_args(v.config.codec).is_none() {
        return Some("the peers write compressed stores only".into());
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

/// The peer script running beside the stream's runs (its `--interleave`
/// mode): one warm process, a rep of every peer after each of the
/// stream's runs, so that both meet the machine in the same minutes.
pub struct Interleaved {
    child: Child,
    turns: ChildStdin,
    answers: BufReader<ChildStdout>,
    json: PathBuf,
    raw: PathBuf,
    /// The script stopped answering: no more reps are asked of it.
    ended: bool,
}

/// Writes the frames for the peers, starts the script and waits until it
/// has loaded them and set its peers up.
pub fn start(req: &Request, v: &Validated, frames: &Frames) -> Result<Interleaved, String> {
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
    let codec = codec_args(v.config.codec).ok_or("codec none: no peer to run")?;
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
        .args(&codec)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(["--reps", &req.reps.to_string()])
        .arg("--interleave")
        .arg("--json")
        .arg(&json);
    if let Some(t) = req.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    // The script's own table goes to stderr; stdout answers each rep.
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    eprintln!("tz-bench: starting {}", script.display());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    let turns = child.stdin.take().expect("piped");
    let mut answers = BufReader::new(child.stdout.take().expect("piped"));
    // Loading the frames and setting the peers up must not overlap the
    // stream's first run.
    let mut ready = String::new();
    answers
        .read_line(&mut ready)
        .map_err(|e| format!("the peer script: {e}"))?;
    if ready.trim() != "ready" {
        let _ = child.wait();
        return Err(format!("the peer script did not start ({ready:?})"));
    }
    Ok(Interleaved {
        child,
        turns,
        answers,
        json,
        raw,
        ended: false,
    })
}

impl Interleaved {
    /// Runs one rep of every peer and waits for it (an error once, when the
    /// script stops answering; nothing after).
    pub fn rep(&mut self) -> Result<(), String> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        let mut answer = String::new();
        writeln!(self.turns, "go")
            .and_then(|()| self.turns.flush())
            .and_then(|()| self.answers.read_line(&mut answer).map(|_| ()))
            .map_err(|e| format!("the peer script: {e}"))?;
        if !answer.starts_with("rep ") {
            return Err(format!("the peer script ended early ({answer:?})"));
        }
        self.ended = false;
        Ok(())
    }

    /// Lets the script verify and report; its `peers` list and setup.
    pub fn finish(self) -> Result<Outcome, String> {
        let Interleaved {
            mut child,
            turns,
            answers,
            json,
            raw,
            ..
        } = self;
        drop((turns, answers));
        let status = child
            .wait()
            .map_err(|e| format!("waiting for the peer script: {e}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use tiledzarr::config::{Cname, Shuffle};

    fn args(codec: Codec) -> Option<String> {
        codec_args(codec).map(|a| a.join(" "))
    }

    #[test]
    fn the_script_is_told_the_streams_codec() {
        assert_eq!(
            args(Codec::Zstd { level: 3 }).as_deref(),
            Some("--codec zstd --level 3")
        );
        assert_eq!(
            args(Codec::Gzip { level: 1 }).as_deref(),
            Some("--codec gzip --level 1")
        );
        let blosc = Codec::Blosc {
            level: 5,
            shuffle: Shuffle::Bit,
            cname: Cname::Lz4,
        };
        assert_eq!(
            args(blosc).as_deref(),
            Some("--codec blosc --cname lz4 --shuffle bit --level 5")
        );
        assert_eq!(args(Codec::None), None);
    }
}
