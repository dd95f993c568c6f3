//! The memory limits of the cgroup this process is in and of every cgroup
//! above it. A container's limit (cgroup v1 or v2), or one a service
//! manager set on a parent, has the OOM killer take the process down long
//! before the machine runs out, so each lowers what the process may still
//! take.
//!
//! The process's cgroup is found, not assumed: `/proc/self/cgroup` names
//! its path in each hierarchy, `/proc/self/mountinfo` where that hierarchy
//! is mounted and which cgroup the mount shows at its top (a container's
//! own, or `/`). Everything is read from text and folders passed in, so
//! that tests can give a made-up process in a made-up tree.

use std::path::{Component, Path, PathBuf};

#[cfg(test)]
mod tests;

/// The two cgroup hierarchies, which name and report memory differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A cgroup's memory files in one hierarchy.
struct MemoryFiles {
    /// The limit, in bytes; v2 writes "max" and v1 a huge number for none.
    limit: &'static str,
    /// Memory charged to the cgroup and the cgroups below it.
    usage: &'static str,
    /// The `memory.stat` key of the page cache in that usage that the
    /// kernel reclaims before it kills anything (files written and not
    /// read again: a stream's shards), over the cgroups below it too.
    reclaimable: &'static str,
}

impl Version {
    fn files(self) -> MemoryFiles {
        match self {
            Version::V1 => MemoryFiles {
                limit: "memory.limit_in_bytes",
                usage: "memory.usage_in_bytes",
                reclaimable: "total_inactive_file",
            },
            Version::V2 => MemoryFiles {
                limit: "memory.max",
                usage: "memory.current",
                reclaimable: "inactive_file",
            },
        }
    }
}

/// Limits at least this large are no limit: cgroup v1 reports none as
/// the largest page multiple below 2^63.
const NO_LIMIT: u64 = 1 << 60;

/// What the memory limits of this process's cgroups leave it: the least
/// headroom over its cgroup and every ancestor with a limit, in either
/// hierarchy. `None` without a limit, or where `/proc` cannot be read.
pub fn headroom() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    headroom_of(&cgroups, &mountinfo)
}

/// [`headroom`] of the process whose `/proc/self/cgroup` and
/// `/proc/self/mountinfo` read `cgroups` and `mountinfo`. Both hierarchies
/// count: a machine may mount the memory controller in v1 and still list
/// the process in a v2 hierarchy (without it, so that one has no limit).
fn headroom_of(cgroups: &str, mountinfo: &str) -> Option<u64> {
    [Version::V1, Version::V2]
        .into_iter()
        .filter_map(|version| {
            let path = cgroup_path(cgroups, version)?;
            let (folder, top) = cgroup_folder(mountinfo, version, &path)?;
            headroom_up_to(&folder, &top, version)
        })
        .min()
}

/// The process's cgroup in `version`'s memory hierarchy, from the text of
/// `/proc/self/cgroup`: v1 lines `4:memory:/path` (the controllers
/// comma-separated), the v2 line `0::/path`.
fn cgroup_path(cgroups: &str, version: Version) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let ours = match version {
            Version::V1 => controllers.split(',').any(|c| c == "memory"),
            Version::V2 => id == "0" && controllers.is_empty(),
        };
        ours.then(|| path.to_string())
    })
}

/// One mount of a cgroup hierarchy.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    /// The cgroup shown at the mount point, as `/proc/self/cgroup` names
    /// cgroups (`/` for the hierarchy's root or a namespace's).
    root: String,
    point: PathBuf,
}

/// The mounts of `version`'s memory hierarchy, from the text of
/// `/proc/self/mountinfo`, whose lines read
/// `36 25 0:32 /root /mount/point rw,relatime [optional fields] - cgroup cgroup rw,memory`:
/// v1 mounts of type `cgroup` with `memory` among their options, and
/// every `cgroup2` mount.
fn mounts(mountinfo: &str, version: Version) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let mut mount = mount.split(' ').skip(3);
            let (root, point) = (mount.next()?, mount.next()?);
            let mut fs = fs.split(' ');
            let (fs_type, options) = (fs.next()?, fs.nth(1).unwrap_or(""));
            let ours = match version {
                Version::V1 => fs_type == "cgroup" && options.split(',').any(|o| o == "memory"),
                Version::V2 => fs_type == "cgroup2",
            };
            ours.then(|| Mount {
                root: unescape(root),
                point: PathBuf::from(unescape(point)),
            })
        })
        .collect()
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = (bytes[i] == b'\\')
            .then(|| field.get(i + 1..i + 4))
            .flatten()
            .filter(|digits| digits.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match code {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folder of cgroup `path` in `version`'s hierarchy and the mount
/// point at which walking up from it stops: the mount whose root is the
/// nearest cgroup above `path`, with the rest of `path` appended.
///
/// Where no mount's root is above `path` (in a cgroup namespace whose root
/// is not the mount's, the process's cgroup reads `/` or starts with
/// `/..`), the mount point is the nearest cgroup of the process that can
/// be seen.
fn cgroup_folder(mountinfo: &str, version: Version, path: &str) -> Option<(PathBuf, PathBuf)> {
    let mounts = mounts(mountinfo, version);
    let nearest = mounts
        .iter()
        .filter_map(|m| Some((m, below(&m.root, path)?)))
        .max_by_key(|(m, _)| m.root.len());
    match nearest {
        Some((m, rest)) => Some((m.point.join(rest), m.point.clone())),
        None => mounts.first().map(|m| (m.point.clone(), m.point.clone())),
    }
}

/// `path` relative to `root` (both cgroups as `/proc/self/cgroup` names
/// them); `None` unless `path` is `root` or below it.
fn below(root: &str, path: &str) -> Option<PathBuf> {
    let rest = Path::new(path).strip_prefix(root).ok()?;
    rest.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| rest.to_path_buf())
}

/// The least headroom over the cgroup at `folder` and every folder above
/// it up to `top` (a limit anywhere above holds the cgroups below it too);
/// `None` where none of them has a limit.
fn headroom_up_to(folder: &Path, top: &Path, version: Version) -> Option<u64> {
    folder
        .ancestors()
        .take_while(|dir| dir.starts_with(top))
        .filter_map(|dir| level_headroom(dir, version))
        .min()
}

/// What the limit of the cgroup at `dir` leaves: the limit less its usage,
/// not counting page cache the kernel reclaims first; `None` without a
/// limit or where the files cannot be read.
fn level_headroom(dir: &Path, version: Version) -> Option<u64> {
    let files = version.files();
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    // "max" (v2's none) does not parse: no limit.
    let limit = read(files.limit).filter(|&l| l < NO_LIMIT)?;
    let usage = read(files.usage)?;
    let reclaimable = std::fs::read_to_string(dir.join("memory.stat"))
        .ok()
        .and_then(|stat| stat_value(&stat, files.reclaimable))
        .unwrap_or(0);
    Some(limit.saturating_sub(usage.saturating_sub(reclaimable)))
}

/// The value of `key` in the text of a `memory.stat` (lines `key value`).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}
