//! The names Windows cannot hold: a store path that contains one would
//! fail later with a bare "the filename is incorrect", or worse open a
//! device (`NUL`, `COM1`) or a different folder (a trailing dot is
//! stripped). Refused up front with the part that is wrong.

use std::path::{Component, Path};

/// Device names, reserved in every folder and with any extension.
const DEVICES: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];
/// Devices numbered 1 to 9 (and with the superscript digits ¹²³).
const NUMBERED_DEVICES: [&str; 2] = ["COM", "LPT"];
const FORBIDDEN: &[char] = &['<', '>', ':', '"', '|', '?', '*'];

pub fn unusable_path(path: &Path) -> Option<String> {
    path.components().find_map(|c| match c {
        Component::Normal(name) => unusable_name(&name.to_string_lossy()),
        _ => None,
    })
}

fn unusable_name(name: &str) -> Option<String> {
    if let Some(bad) = name
        .chars()
        .find(|c| FORBIDDEN.contains(c) || c.is_control())
    {
        return Some(format!(
            "the name `{name}` holds {bad:?}, which Windows does not allow in a name"
        ));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Some(format!(
            "the name `{name}` ends in a dot or a space, which Windows strips (it would name another file)"
        ));
    }
    // `CON.txt` and `con ` are the device too.
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    let upper = stem.to_ascii_uppercase();
    let numbered = NUMBERED_DEVICES.iter().any(|d| {
        upper.strip_prefix(d).is_some_and(|n| {
            matches!(
                n,
                "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"
            )
        })
    });
    if DEVICES.contains(&upper.as_str()) || numbered {
        return Some(format!(
            "the name `{name}` is a device Windows reserves ({stem})"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_forbidden_characters_and_trailing_dots_are_named() {
        for bad in [
            r"C:\data\CON\run.zarr",
            r"C:\data\nul.zarr",
            r"C:\data\Com3",
            r"C:\data\LPT1.txt\x",
            r"C:\data\a:b",
            r"C:\data\what?",
            r"C:\data\run.",
            r"C:\data\run ",
        ] {
            let why = unusable_path(Path::new(bad)).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(why.contains("the name `"), "{bad}: {why}");
        }
    }

    #[test]
    fn ordinary_drive_unc_and_verbatim_paths_pass() {
        for good in [
            r"C:\data\run.zarr",
            r"\\server\share\run.zarr",
            r"\\?\C:\very\long\run.zarr",
            r"relative\CONSOLE\COM10\nullable",
            r"..\up\.\here",
        ] {
            assert_eq!(unusable_path(Path::new(good)), None, "{good}");
        }
    }
}
