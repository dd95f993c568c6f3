//! `nvcompStatus_t` codes and their names.

use std::fmt;

/// An `nvcompStatus_t` value. Kept as the raw integer so codes added by a
/// newer nvCOMP still round-trip instead of being lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

/// Every code in `shared_types.h` of nvCOMP 6.0.0 (a superset of 5.1's:
/// 22–24 were added in 5.2/5.3), in header order.
pub const KNOWN: &[(i32, &str)] = &[
    (0, "nvcompSuccess"),
    (10, "nvcompErrorInvalidValue"),
    (11, "nvcompErrorNotSupported"),
    (12, "nvcompErrorCannotDecompress"),
    (13, "nvcompErrorBadChecksum"),
    (14, "nvcompErrorCannotVerifyChecksums"),
    (15, "nvcompErrorOutputBufferTooSmall"),
    (16, "nvcompErrorWrongHeaderLength"),
    (17, "nvcompErrorAlignment"),
    (18, "nvcompErrorChunkSizeTooLarge"),
    (19, "nvcompErrorCannotCompress"),
    (20, "nvcompErrorWrongInputLength"),
    (21, "nvcompErrorBatchSizeTooLarge"),
    (22, "nvcompErrorSubChunkCountTooLarge"),
    (23, "nvcompErrorSubChunkCountTooSmall"),
    (24, "nvcompErrorOutputBufferAlignmentTooSmall"),
    (1000, "nvcompErrorCudaError"),
    (10000, "nvcompErrorInternal"),
];

/// Name used for codes this crate does not know.
pub const UNKNOWN_NAME: &str = "unknown nvcompStatus_t";

impl Status {
    pub const SUCCESS: Status = Status(0);
    pub const ERROR_INVALID_VALUE: Status = Status(10);
    pub const ERROR_CUDA_ERROR: Status = Status(1000);

    /// The enumerator's name from the header, or [`UNKNOWN_NAME`].
    pub fn name(self) -> &'static str {
        KNOWN
            .iter()
            .find(|(code, _)| *code == self.0)
            .map_or(UNKNOWN_NAME, |(_, name)| name)
    }

    /// The code whose enumerator is called `name`, if any.
    pub fn from_name(name: &str) -> Option<Status> {
        KNOWN
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(code, _)| Status(*code))
    }

    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(code, name) in KNOWN {
            assert_eq!(Status(code).name(), name);
            assert_eq!(Status::from_name(name), Some(Status(code)));
        }
    }

    #[test]
    fn codes_and_names_are_unique() {
        for (i, a) in KNOWN.iter().enumerate() {
            for b in &KNOWN[i + 1..] {
                assert_ne!(a.0, b.0);
                assert_ne!(a.1, b.1);
            }
        }
    }

    #[test]
    fn unknown_code_keeps_its_value() {
        let s = Status(4242);
        assert_eq!(s.name(), UNKNOWN_NAME);
        assert_eq!(s.to_string(), "unknown nvcompStatus_t (4242)");
        assert_eq!(Status::from_name("nvcompNope"), None);
    }

    #[test]
    fn display_has_name_and_code() {
        assert_eq!(
            Status::ERROR_CUDA_ERROR.to_string(),
            "nvcompErrorCudaError (1000)"
        );
        assert!(Status::SUCCESS.is_success());
    }
}
