//! Operating-system collectors. `cfg` picks the backend; every backend returns [`OsFacts`] whose
//! sections are gathered independently.

// The AIX collector's translation and command parsers are tested on every platform; only its
// live glue (`aix::Window`) needs AIX.
#[cfg(any(target_os = "aix", test))]
mod aix;
mod find;
#[cfg(target_os = "linux")]
pub(crate) mod linux;
pub mod recorded;
pub(crate) mod registry;
mod sections;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use powerdiag_rules::{CollectorRun, OsFacts};

pub use find::{Found, ServerProcess};
pub(crate) use sections::SECTIONS;

use crate::collect::collector::Selection;

/// The running machine's architecture as `uname -m` names it (`x86_64`, `aarch64`,
/// `ppc64le`, `ppc64`), from the build target: the binary runs only on its own.
pub fn live_architecture() -> String {
    match std::env::consts::ARCH {
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le".to_owned(),
        "powerpc64" => "ppc64".to_owned(),
        other => other.to_owned(),
    }
}

/// Where the files are: node_exporter's `--path.procfs`, `--path.sysfs`, `--path.rootfs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub procfs: PathBuf,
    pub sysfs: PathBuf,
    pub rootfs: PathBuf,
    /// A recorded tree's `recorded/` directory, beside its `proc/`: what a tree cannot hold
    /// as kernel files — the window's first reading (`window-start/proc/`, `window-seconds`)
    /// and the server directories' `statvfs` (see [`recorded`]). `None` when live.
    pub recorded: Option<PathBuf>,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            procfs: "/proc".into(),
            sysfs: "/sys".into(),
            rootfs: "/".into(),
            recorded: None,
        }
    }
}

impl Roots {
    /// A recorded tree with `proc/`, `sys/` and `root/` inside `dir` (and `recorded/` when
    /// it has one).
    pub fn tree(dir: &Path) -> Roots {
        let procfs = dir.join("proc");
        Roots {
            recorded: recorded::beside(&procfs),
            procfs,
            sysfs: dir.join("sys"),
            rootfs: dir.join("root"),
        }
    }

    /// True when these are the running system's own files: live-only sources (perf counters,
    /// a second sample over a window) work only then.
    pub fn is_live(&self) -> bool {
        *self == Roots::default()
    }

    pub fn describe(&self) -> String {
        if self.is_live() {
            "live".into()
        } else {
            format!(
                "recorded tree (procfs {}, sysfs {}, rootfs {})",
                self.procfs.display(),
                self.sysfs.display(),
                self.rootfs.display()
            )
        }
    }

    pub(crate) fn proc(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.procfs.join(rel)
    }
    pub(crate) fn sys(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.sysfs.join(rel)
    }
    /// An absolute path on the host (e.g. a pid file) under `--path.rootfs`.
    pub(crate) fn root(&self, abs: &str) -> PathBuf {
        self.rootfs.join(abs.trim_start_matches('/'))
    }
}

/// An OS sample in progress: the first half of every windowed measurement.
#[derive(Debug)]
pub struct Window {
    #[cfg(target_os = "linux")]
    inner: linux::Window,
    #[cfg(target_os = "aix")]
    inner: aix::Window,
    #[cfg(not(any(target_os = "linux", target_os = "aix")))]
    roots: Roots,
}

/// Starts a sample window that will last at least `window` (zero: no window, no counters).
/// `server` says which mariadbd to look at: the one named by the connected server's
/// `@@pid_file` when it runs on this host, none when it runs elsewhere.
pub fn begin(
    roots: &Roots,
    server: ServerProcess<'_>,
    window: Duration,
    selection: &Selection,
) -> Window {
    #[cfg(target_os = "linux")]
    {
        Window {
            inner: linux::Window::begin(roots, server, window, selection),
        }
    }
    #[cfg(target_os = "aix")]
    {
        Window {
            inner: aix::Window::begin(roots, server, window, selection),
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "aix")))]
    {
        let _ = (server, window, selection);
        Window {
            roots: roots.clone(),
        }
    }
}

impl Window {
    /// Time left until `min_window` has passed since the window began (for an async wait).
    pub fn remaining(&self, min_window: Duration) -> Duration {
        #[cfg(target_os = "linux")]
        {
            self.inner.remaining(min_window)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = min_window;
            Duration::ZERO
        }
    }
}

/// Ends the window (waiting until at least `min_window` has passed) and returns the facts
/// with one run per collector. A collector that would start more than `budget` after the
/// window closed is not started: it fails with a timeout.
pub fn finish(w: Window, min_window: Duration, budget: Duration) -> (OsFacts, Vec<CollectorRun>) {
    #[cfg(any(target_os = "linux", target_os = "aix"))]
    {
        w.inner.finish(min_window, budget)
    }
    #[cfg(not(any(target_os = "linux", target_os = "aix")))]
    {
        let _ = (min_window, budget);
        let why = format!(
            "unavailable: no OS collector for {} yet",
            std::env::consts::OS
        );
        (OsFacts::unavailable(&w.roots.describe(), &why), Vec::new())
    }
}
