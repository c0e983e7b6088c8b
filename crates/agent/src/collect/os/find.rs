//! Finding mariadbd, once for every platform: the server's pid file when powerdiag is
//! connected to a server on this host, else the one process named mariadbd or mysqld. How the
//! processes are listed is the platform's (`/proc` on Linux, `ps` on AIX); what to make of
//! the list is here.

use super::Roots;
use crate::collect::CollectError;

/// Process names of a MariaDB (or MySQL) server.
pub(crate) const NAMES: [&str; 2] = ["mariadbd", "mysqld"];

/// The server process and how it was found (`pid_file` or `process name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    pub by: &'static str,
}

/// Which server to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerProcess<'a> {
    /// Connected to a server on this host: its `@@pid_file` (may be empty) and its
    /// directories as `(variable, path)` (`datadir`, `tmpdir`, ...).
    Local {
        pid_file: &'a str,
        dirs: &'a [(String, String)],
    },
    /// Connected to a server on another host: there is no process here to look at.
    Remote,
    /// Not connected: the one mariadbd on this host, if there is exactly one.
    Unknown,
}

/// The server's directories, when it runs on this host.
pub(crate) fn server_dirs(
    target: ServerProcess<'_>,
) -> Result<Vec<(String, String)>, CollectError> {
    match target {
        ServerProcess::Local { dirs, .. } if !dirs.is_empty() => Ok(dirs.to_vec()),
        ServerProcess::Local { .. } => Err(CollectError::NotReported {
            what: "its datadir".into(),
        }),
        ServerProcess::Remote => Err(CollectError::skipped(
            "unavailable: the server runs on another host (its filesystems are not here)",
        )),
        ServerProcess::Unknown => Err(CollectError::skipped(
            "unavailable: no server connected, so its directories are unknown",
        )),
    }
}

/// Finds the server: by its pid file (read under rootfs), else among `by_name()` — the pids
/// of the processes named like a server.
pub(crate) fn find(
    r: &Roots,
    target: ServerProcess<'_>,
    by_name: impl FnOnce() -> Result<Vec<u32>, CollectError>,
) -> Result<Found, CollectError> {
    let pid_file = match target {
        ServerProcess::Remote => {
            return Err(CollectError::skipped(
                "unavailable: the server runs on another host",
            ));
        }
        ServerProcess::Local { pid_file, .. } => Some(pid_file).filter(|p| !p.is_empty()),
        ServerProcess::Unknown => None,
    };
    if let Some(pf) = pid_file {
        let path = r.root(pf);
        match read_pid(&path) {
            Ok(Some(pid)) if r.proc(pid.to_string()).is_dir() => {
                return Ok(Found {
                    pid,
                    by: "pid_file",
                });
            }
            Ok(Some(pid)) => {
                return Err(CollectError::ServerProcess {
                    why: format!(
                        "the server's pid file {} names pid {pid}, which is not running",
                        path.display()
                    ),
                });
            }
            Ok(None) => return Err(CollectError::parse(&path, "not a pid")),
            Err(_) => {} // not readable (permissions, another mount namespace): fall back to names
        }
    }
    let mut found = by_name()?;
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [] => Err(CollectError::ServerProcess {
            why: "no mariadbd or mysqld process on this host".into(),
        }),
        [pid] => Ok(Found {
            pid: *pid,
            by: "process name",
        }),
        many => Err(CollectError::ServerProcess {
            why: format!(
                "{} mariadbd processes ({}); connect powerdiag to the server to pick one by its pid_file",
                many.len(),
                many.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// A pid file's pid: a small regular file holding one number.
fn read_pid(path: &std::path::Path) -> Result<Option<u32>, CollectError> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| CollectError::io(path, &e))?;
    if !meta.is_file() {
        return Err(CollectError::NotRegular {
            path: path.into(),
            kind: "not a regular file",
        });
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64).read_to_string(&mut text))
        .map_err(|e| CollectError::io(path, &e))?;
    Ok(text.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/42")).unwrap();
        std::fs::create_dir_all(d.path().join("root/run")).unwrap();
        let r = Roots::tree(d.path());
        (d, r)
    }

    #[test]
    fn pid_file_first_then_names() {
        let (d, r) = tree();
        std::fs::write(d.path().join("root/run/m.pid"), "42\n").unwrap();
        let local = ServerProcess::Local {
            pid_file: "/run/m.pid",
            dirs: &[],
        };
        let f = find(&r, local, || panic!("names are not needed")).unwrap();
        assert_eq!(
            f,
            Found {
                pid: 42,
                by: "pid_file"
            }
        );
        std::fs::write(d.path().join("root/run/m.pid"), "43\n").unwrap();
        let e = find(&r, local, || Ok(vec![])).unwrap_err();
        assert!(
            e.to_string().contains("names pid 43, which is not running"),
            "{e}"
        );
        // No pid file: exactly one process by name.
        let none = ServerProcess::Local {
            pid_file: "/run/none.pid",
            dirs: &[],
        };
        assert_eq!(find(&r, none, || Ok(vec![42])).unwrap().by, "process name");
        let e = find(&r, ServerProcess::Unknown, || Ok(vec![7, 42])).unwrap_err();
        assert!(
            e.to_string().starts_with("2 mariadbd processes (7, 42)"),
            "{e}"
        );
        let e = find(&r, ServerProcess::Unknown, || Ok(vec![])).unwrap_err();
        assert!(e.is_failure());
    }

    #[test]
    fn a_remote_server_has_no_process_here() {
        let (_d, r) = tree();
        let e = find(&r, ServerProcess::Remote, || panic!("not searched")).unwrap_err();
        assert!(!e.is_failure());
    }
}
