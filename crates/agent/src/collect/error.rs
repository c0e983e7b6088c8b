//! Why a collector could not deliver its part of the snapshot.
//!
//! Collectors return a typed [`CollectError`]; the registry turns it into the section's
//! `Gathered::Unavailable(reason)` (the one sentence the rules' `insufficient_data` verdicts
//! quote) and into the collector's run (`powerdiag_collector_success`). A
//! [`CollectError::Skipped`] part was not collected by design (a recorded tree has no live
//! counters, a remote server has no local process): its section says why, and no run is
//! reported, so an alert on failing collectors never fires for it.

use std::{io, path::Path, path::PathBuf, time::Duration};

/// A collector's failure, one variant per kind of fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectError {
    /// Nothing at `path` (an older kernel's layout, a partial recorded tree).
    #[error("{} does not exist", .path.display())]
    NotFound { path: PathBuf },
    /// The source exists but this user may not read it; `grant` says what would allow it.
    #[error("{what}: permission denied ({grant})")]
    PermissionDenied { what: String, grant: String },
    /// The file was read but does not say what it should; `line` is 1-based when known.
    #[error("{}{}: {what}", .file.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        file: PathBuf,
        line: Option<u32>,
        what: String,
    },
    /// The file is not a regular file (a FIFO, a device, a directory): never read, since it
    /// could block forever or never end.
    #[error("{} is {kind}, not a regular file; refusing to read it", .path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    /// The file is larger than any real instance of it.
    #[error("{} is larger than {limit} bytes, more than any real one; refusing to read it", .path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// This platform, kernel or configuration does not offer the fact.
    #[error("unavailable: {reason}")]
    Unsupported { reason: String },
    /// Not collected by design (see the module docs); not a failure. The reason is the whole
    /// sentence.
    #[error("{reason}")]
    Skipped { reason: String },
    /// The collection deadline passed first.
    #[error("{what} did not finish within {:.1} s (the collection deadline)", .after.as_secs_f64())]
    Timeout { what: String, after: Duration },
    /// Any other I/O error, with the path it happened on.
    #[error("{}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    /// The server's process is not on this host, or not one process: `why` says which and
    /// what to do.
    #[error("{why}")]
    ServerProcess { why: String },
    /// The server did not report `what` the collector needs.
    #[error("the server did not report {what}")]
    NotReported { what: String },
    /// The host did not tell `what` (a system call answered nothing usable).
    #[error("{what} could not be read")]
    Unreadable { what: String },
    /// A SQL statement failed: the driver's classified sentence, and the fix (`hint`) the
    /// report shows beside it.
    #[error("{message}")]
    Database { message: String, hint: String },
    /// An external command (AIX `ps`, `procldd`, `dscrctl`, `df`) failed or printed what it
    /// should not.
    #[error("{message}")]
    Command { program: String, message: String },
    /// A system library call (libperfstat) failed.
    #[error("{message}")]
    Library { call: &'static str, message: String },
    /// A collector's worker thread panicked or was cancelled: a bug to report.
    #[error("{what} failed unexpectedly ({message}); please report this")]
    Internal { what: String, message: String },
    /// Several reads of one collector failed, each with its own reason.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<CollectError>),
}

impl CollectError {
    /// The statements of one collector that failed, each with its server's message: `Ok`
    /// when none did.
    pub fn failed_statements<S: Into<String>>(
        messages: impl IntoIterator<Item = S>,
    ) -> Result<(), CollectError> {
        let failed: Vec<CollectError> = messages
            .into_iter()
            .map(|m| CollectError::Database {
                message: m.into(),
                hint: String::new(),
            })
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(CollectError::Several(failed))
        }
    }

    /// The error of an I/O operation on `path`, classified.
    pub fn io(path: &Path, e: &io::Error) -> CollectError {
        match e.kind() {
            io::ErrorKind::NotFound => CollectError::NotFound { path: path.into() },
            io::ErrorKind::PermissionDenied => CollectError::PermissionDenied {
                what: path.display().to_string(),
                grant: "run as root or as the user that owns it".into(),
            },
            io::ErrorKind::IsADirectory => CollectError::NotRegular {
                path: path.into(),
                kind: "a directory",
            },
            _ => CollectError::Io {
                path: path.into(),
                message: e.to_string(),
            },
        }
    }

    /// A malformed file (no line number).
    pub fn parse(file: &Path, what: impl Into<String>) -> CollectError {
        CollectError::Parse {
            file: file.into(),
            line: None,
            what: what.into(),
        }
    }

    pub fn unsupported(reason: impl Into<String>) -> CollectError {
        CollectError::Unsupported {
            reason: reason.into(),
        }
    }

    pub fn skipped(reason: impl Into<String>) -> CollectError {
        CollectError::Skipped {
            reason: reason.into(),
        }
    }

    /// A failed statement, as the driver classified it.
    pub fn database(e: powerdiag_rules::DbError) -> CollectError {
        CollectError::Database {
            message: e.message,
            hint: e.hint,
        }
    }

    /// False for parts not collected by design: they report no failed run.
    pub fn is_failure(&self) -> bool {
        !matches!(self, CollectError::Skipped { .. })
    }

    /// A procfs crate error on `file`. Its "internal error" (a required field missing from a
    /// truncated or empty file) is a parse error of that file, not a bug report.
    #[cfg(target_os = "linux")]
    pub fn procfs(file: &Path, e: procfs::ProcError) -> CollectError {
        use procfs::ProcError as E;
        match e {
            E::NotFound(_) => CollectError::NotFound { path: file.into() },
            E::PermissionDenied(_) => CollectError::io(
                file,
                &io::Error::new(io::ErrorKind::PermissionDenied, "permission denied"),
            ),
            E::Io(err, _) => CollectError::io(file, &err),
            E::Incomplete(_) | E::InternalError(_) => {
                CollectError::parse(file, "truncated or malformed: a required field is missing")
            }
            E::Other(msg) => CollectError::parse(file, clip(&msg, 120)),
        }
    }
}

/// At most `max` characters of text that came from outside, for an error message: a hostile
/// file must not turn one error into megabytes of report.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sentence_each() {
        let p = Path::new("/proc/meminfo");
        assert_eq!(
            CollectError::io(p, &io::Error::from(io::ErrorKind::NotFound)).to_string(),
            "/proc/meminfo does not exist"
        );
        assert_eq!(
            CollectError::Parse {
                file: p.into(),
                line: Some(3),
                what: "`MemTotal` is not a number".into()
            }
            .to_string(),
            "/proc/meminfo:3: `MemTotal` is not a number"
        );
        assert_eq!(
            CollectError::unsupported("no cpufreq driver").to_string(),
            "unavailable: no cpufreq driver"
        );
        assert!(!CollectError::skipped("x").is_failure());
        assert!(CollectError::unsupported("x").is_failure());
        let t = CollectError::Timeout {
            what: "cpu".into(),
            after: Duration::from_millis(1500),
        };
        assert_eq!(
            t.to_string(),
            "cpu did not finish within 1.5 s (the collection deadline)"
        );
    }

    #[test]
    fn clipped() {
        assert_eq!(clip(" 0-3 ", 10), "0-3");
        let long = "9".repeat(1000);
        let c = clip(&long, 8);
        assert!(
            c.starts_with("99999999…") && c.ends_with("(1000 bytes)"),
            "{c}"
        );
    }
}
