//! Operating-system collectors. `cfg` picks the backend; every backend returns [`OsFacts`] whose
//! sections are gathered independently.

// The AIX collector's translation and command parsers are tested on every platform; only its
// live glue (`aix::Window`) needs AIX.
#[cfg(any(target_os = "aix", test))]
mod aix;
#[cfg(target_os = "linux")]
mod linux;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use powerdiag_rules::OsFacts;

/// Where the files are: node_exporter's `--path.procfs`, `--path.sysfs`, `--path.rootfs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub procfs: PathBuf,
    pub sysfs: PathBuf,
    pub rootfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            procfs: "/proc".into(),
            sysfs: "/sys".into(),
            rootfs: "/".into(),
        }
    }
}

impl Roots {
    /// A recorded tree with `proc/`, `sys/` and `root/` inside `dir`.
    pub fn tree(dir: &Path) -> Roots {
        Roots {
            procfs: dir.join("proc"),
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
/// `pid_file` is the server's `@@pid_file` when powerdiag is connected to a server on this
/// host: it names the mariadbd to look at.
pub fn begin(roots: &Roots, pid_file: Option<&str>, window: Duration) -> Window {
    #[cfg(target_os = "linux")]
    {
        Window {
            inner: linux::Window::begin(roots, pid_file, window),
        }
    }
    #[cfg(target_os = "aix")]
    {
        Window {
            inner: aix::Window::begin(roots, pid_file, window),
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "aix")))]
    {
        let _ = (pid_file, window);
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

/// Ends the window (waiting until at least `min_window` has passed) and returns the facts.
pub fn finish(w: Window, min_window: Duration) -> OsFacts {
    #[cfg(target_os = "linux")]
    {
        w.inner.finish(min_window)
    }
    #[cfg(target_os = "aix")]
    {
        w.inner.finish(min_window)
    }
    #[cfg(not(any(target_os = "linux", target_os = "aix")))]
    {
        let _ = min_window;
        OsFacts::unavailable(
            &w.roots.describe(),
            &format!("no OS collector for {} yet", std::env::consts::OS),
        )
    }
}
