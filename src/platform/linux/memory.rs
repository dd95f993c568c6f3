//! How much memory this process may still take on Linux: the smallest of
//! what the kernel says the machine has available, what the process's
//! cgroups leave, and what its address-space limit leaves.

use super::cgroup;

/// The smallest of `MemAvailable`, the cgroups' headroom and the
/// address-space headroom, over those that can be read.
///
/// An allocation that reserves address space succeeds far beyond this
/// (overcommit) and the process is killed when the pages are touched, so
/// the caller checks large buffers against it first.
pub fn available_host_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| meminfo_available(&text));
    [meminfo, cgroup::headroom(), address_space_headroom()]
        .into_iter()
        .flatten()
        .min()
}

/// What an address-space limit (`ulimit -v`, RLIMIT_AS) leaves this
/// process: the limit less the address space it already maps.
fn address_space_headroom() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let limit = address_space_limit(&limits)?;
    let mapped = status_kib(&status, "VmSize:")?.saturating_mul(1024);
    Some(limit.saturating_sub(mapped))
}

/// The soft RLIMIT_AS from the text of `/proc/self/limits`; `None` when
/// unlimited.
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A `kB` field of `/proc/self/status` or `/proc/meminfo`.
fn status_kib(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
fn meminfo_available(text: &str) -> Option<u64> {
    Some(status_kib(text, "MemAvailable:")?.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_parsed_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(meminfo_available(text), Some(2048 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn address_space_limits_are_read() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max address space         4294967296           unlimited            bytes     \n";
        assert_eq!(address_space_limit(text), Some(4 << 30));
        let text = "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(text), None);
    }

    #[test]
    fn the_estimate_is_at_most_what_the_machine_has() {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total = status_kib(&meminfo, "MemTotal:").unwrap() * 1024;
        let available = available_host_bytes().expect("Linux reports memory");
        assert!(available <= total, "{available} > {total}");
    }
}
