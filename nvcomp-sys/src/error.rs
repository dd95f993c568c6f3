//! Errors from loading nvCOMP and from its calls.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::status::Status;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No candidate library could be opened and used. `tried` holds each
    /// place looked at (a path, a loader name or a directory) and why it
    /// was rejected, in search order.
    #[error("{}", not_found_message(tried))]
    NotFound { tried: Vec<(String, String)> },

    /// The library opened but lacks an entry point this crate needs.
    /// `version` is `None` when even `nvcompGetProperties` is missing, which
    /// usually means the file is not nvCOMP at all.
    #[error("{}{} does not export `{symbol}`{}", path.display(), version_suffix(*version),
            if version.is_none() { " (is it nvCOMP?)" } else { "" })]
    MissingSymbol {
        path: PathBuf,
        symbol: &'static str,
        version: Option<(u32, u32, u32)>,
    },

    /// The library is nvCOMP, but of a major version whose ABI this crate
    /// does not bind.
    #[error("nvCOMP {}.{}.{} ({}) is not supported (need 5.x or 6.x)", version.0, version.1, version.2, path.display())]
    UnsupportedVersion {
        path: PathBuf,
        version: (u32, u32, u32),
    },

    /// An nvCOMP function returned a status other than `nvcompSuccess`.
    #[error("{function} failed: {name} ({status}){}", status_hint(*status))]
    Status {
        function: &'static str,
        status: i32,
        name: &'static str,
    },
}

impl Error {
    pub(crate) fn status(function: &'static str, status: Status) -> Self {
        Error::Status {
            function,
            status: status.0,
            name: status.name(),
        }
    }
}

fn version_suffix(version: Option<(u32, u32, u32)>) -> String {
    version.map_or(String::new(), |(a, b, c)| format!(" (nvCOMP {a}.{b}.{c})"))
}

fn not_found_message(tried: &[(String, String)]) -> String {
    let mut msg = String::from(
        "nvCOMP not found (need 5.x or 6.x: CUDA toolkit, conda `nvcomp`, or pip \
         `nvidia-libnvcomp-cu12`/`nvidia-libnvcomp-cu13`; set TZ_NVCOMP_LIBRARY to its \
         ",
    );
    msg.push_str(crate::system::LIBRARY_LABEL);
    msg.push_str("); tried:");
    if tried.is_empty() {
        msg.push_str(" nothing");
    }
    for (place, why) in tried {
        // Writing to a String cannot fail.
        let _ = write!(msg, "\n  - {place}: {why}");
    }
    msg
}

// nvcompErrorCudaError is what every query that touches the device returns
// when there is no driver or no usable device, so say what to check.
fn status_hint(status: i32) -> &'static str {
    if status == Status::ERROR_CUDA_ERROR.0 {
        " (a CUDA runtime call inside nvCOMP failed: is the NVIDIA driver's \
         libcuda.so.1 installed and a GPU visible?)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_lists_every_place() {
        let e = Error::NotFound {
            tried: vec![
                ("/a/libnvcomp.so".into(), "no such file".into()),
                ("libnvcomp.so.6".into(), "not on the loader path".into()),
            ],
        };
        let s = e.to_string();
        assert!(s.starts_with("nvCOMP not found"), "{s}");
        assert!(s.contains("\n  - /a/libnvcomp.so: no such file"), "{s}");
        assert!(
            s.contains("\n  - libnvcomp.so.6: not on the loader path"),
            "{s}"
        );
    }

    #[test]
    fn missing_symbol_message() {
        let e = Error::MissingSymbol {
            path: "/x/libnvcomp.so.6".into(),
            symbol: "nvcompBatchedZstdCompressAsync",
            version: Some((6, 0, 0)),
        };
        assert_eq!(
            e.to_string(),
            "/x/libnvcomp.so.6 (nvCOMP 6.0.0) does not export `nvcompBatchedZstdCompressAsync`"
        );
        let e = Error::MissingSymbol {
            path: "/x/libz.so".into(),
            symbol: "nvcompGetProperties",
            version: None,
        };
        assert_eq!(
            e.to_string(),
            "/x/libz.so does not export `nvcompGetProperties` (is it nvCOMP?)"
        );
    }

    #[test]
    fn unsupported_version_message() {
        let e = Error::UnsupportedVersion {
            path: "/x/libnvcomp.so.4".into(),
            version: (4, 2, 0),
        };
        assert_eq!(
            e.to_string(),
            "nvCOMP 4.2.0 (/x/libnvcomp.so.4) is not supported (need 5.x or 6.x)"
        );
    }

    #[test]
    fn status_message_names_the_code() {
        let e = Error::status("nvcompBatchedZstdCompressAsync", Status(10));
        assert_eq!(
            e.to_string(),
            "nvcompBatchedZstdCompressAsync failed: nvcompErrorInvalidValue (10)"
        );
        let e = Error::status("f", Status::ERROR_CUDA_ERROR);
        assert!(e.to_string().contains("libcuda.so.1"));
    }
}
