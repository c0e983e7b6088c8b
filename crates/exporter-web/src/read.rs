//! Reading a small configuration file safely: size-capped, regular files only, never blocking.
//! The implementation is the `powerdiag-safe-read` crate's (shared with the agent); the names
//! stay here for this crate's callers.

pub use powerdiag_safe_read::{
    Kind, ReadError, read_regular_file, read_regular_file_with_metadata,
};

/// Largest web configuration, certificate, key or CA file read: real ones are a few KiB.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;
