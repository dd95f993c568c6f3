//! A scratch folder for the store, the raw frames and the peers' stores,
//! removed when the benchmark ends (also on an error).

use std::path::{Path, PathBuf};

pub struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    /// `base/tz-bench-<pid>`, under the system temp dir by default. Only this
    /// folder is ever removed, never `base`, which may be the caller's.
    pub fn create(base: Option<&Path>) -> Result<WorkDir, String> {
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let path = base.join(format!("tz-bench-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(WorkDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("tz-bench: could not remove {}: {e}", self.path.display());
        }
    }
}
