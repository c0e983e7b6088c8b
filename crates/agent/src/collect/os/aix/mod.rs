//! The AIX collector: libperfstat through `perfstat-sys`, plus, for what libperfstat does not
//! say about mariadbd, a few AIX commands. `README.md` next to this file has the fact mapping,
//! the build and the privileges.
//!
//! - `translate`: raw perfstat values and parsed command output → [`powerdiag_rules::OsFacts`];
//!   pure, compiled and tested on every platform.
//! - `ps`: the external commands (`ps`, `procldd`, `dscrctl`) and their output parsers — the
//!   one documented exception to "collectors run no external commands".
//! - `live` (AIX only): the thin glue that calls libperfstat and the commands around the
//!   sample window and hands everything to `translate`.

mod ps;
mod translate;

#[cfg(target_os = "aix")]
mod live;
#[cfg(target_os = "aix")]
pub(super) use live::Window;
