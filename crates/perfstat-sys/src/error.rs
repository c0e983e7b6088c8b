//! Typed errors of the safe wrappers.

use core::fmt;

/// Why a `perfstat_*` call did not deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PerfstatError {
    /// The call returned -1. `errno` is the C `errno` read right after the call; when several
    /// struct sizes were tried, the `errno` of the last (oldest) one.
    Failed {
        /// The C function, e.g. `"perfstat_partition_total"`.
        function: &'static str,
        /// `errno`; the perfstat pages document `EINVAL` and `EFAULT`.
        errno: i32,
    },
    /// The call returned a value the calling contract does not allow: not 1 for a single
    /// struct, more structures than requested, or a negative count other than -1.
    UnexpectedReturn {
        /// The C function.
        function: &'static str,
        /// What it returned.
        returned: i32,
    },
    /// A struct size or count the wrapper was asked to pass is larger than the Rust buffer or
    /// does not fit a C `int`, or no size was given. A bug in the caller, caught before the call.
    InvalidSize {
        /// The C function.
        function: &'static str,
        /// The offending size (bytes) or count.
        size: usize,
    },
}

impl PerfstatError {
    /// The C function the error is about.
    pub fn function(&self) -> &'static str {
        match *self {
            Self::Failed { function, .. }
            | Self::UnexpectedReturn { function, .. }
            | Self::InvalidSize { function, .. } => function,
        }
    }
}

/// Symbolic names of the `errno` values the perfstat pages mention (same numbers on AIX and
/// Linux).
fn errno_name(errno: i32) -> Option<&'static str> {
    match errno {
        1 => Some("EPERM"),
        3 => Some("ESRCH"),
        12 => Some("ENOMEM"),
        13 => Some("EACCES"),
        14 => Some("EFAULT"),
        22 => Some("EINVAL"),
        _ => None,
    }
}

impl fmt::Display for PerfstatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Failed { function, errno } => match errno_name(errno) {
                Some(name) => write!(f, "{function} failed: {name} (errno {errno})"),
                None => write!(f, "{function} failed: errno {errno}"),
            },
            Self::UnexpectedReturn { function, returned } => {
                write!(
                    f,
                    "{function} returned {returned}, which the calling contract does not allow"
                )
            }
            Self::InvalidSize { function, size } => {
                write!(f, "{function}: invalid struct size or count {size}")
            }
        }
    }
}

impl core::error::Error for PerfstatError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_names_known_errnos() {
        let e = PerfstatError::Failed {
            function: "perfstat_partition_total",
            errno: 22,
        };
        assert_eq!(
            e.to_string(),
            "perfstat_partition_total failed: EINVAL (errno 22)"
        );
        let e = PerfstatError::Failed {
            function: "perfstat_cpu",
            errno: 999,
        };
        assert_eq!(e.to_string(), "perfstat_cpu failed: errno 999");
    }

    #[test]
    fn display_other_variants_and_function() {
        let e = PerfstatError::UnexpectedReturn {
            function: "perfstat_cpu_total",
            returned: 2,
        };
        assert_eq!(
            e.to_string(),
            "perfstat_cpu_total returned 2, which the calling contract does not allow"
        );
        assert_eq!(e.function(), "perfstat_cpu_total");
        let e = PerfstatError::InvalidSize {
            function: "perfstat_cpu",
            size: 4096,
        };
        assert_eq!(
            e.to_string(),
            "perfstat_cpu: invalid struct size or count 4096"
        );
        assert!(!e.to_string().ends_with('.'));
    }
}
