//! powerdiag's collectors: they turn a host and its MariaDB server into a
//! [`powerdiag_rules::Snapshot`]. All network, file and OS access of powerdiag lives here; the
//! rules crate only judges.

pub mod collect;
pub mod daemon;
pub mod remote;

pub use collect::{CollectOptions, CollectStats, collect};
