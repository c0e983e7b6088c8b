//! mariadbd's log in the systemd journal: the error log of a server whose `log_error` is empty
//! (it writes to stderr, which the packaged systemd units send to the journal — Debian's
//! default). Read with `sdjournal` (pure Rust: no libsystemd, no `journalctl`), from the
//! standard roots `/run/log/journal` and `/var/log/journal`.
//!
//! Which entries are the server's: those of its systemd unit (`_SYSTEMD_UNIT`, from
//! `/proc/PID/cgroup` of the pid in `pid_file`), so the lines of earlier runs of the same unit
//! count; a server outside a unit (started by hand or by a script) is matched by its name
//! (`SYSLOG_IDENTIFIER` or `_COMM` mariadbd or mysqld), which also matches any other server on
//! the host.
//!
//! Doctor reads the newest [`MAX_ENTRIES`] entries of the last day; the agent the same once,
//! then the entries after the newest it has seen (at most [`MAX_ENTRIES`] per sample, the newest
//! when more were written). Each entry's time is the journal's (`__REALTIME_TIMESTAMP`, UTC),
//! not the line's. Every read stops at [`DEADLINE`].

use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use powerdiag_rules::{ErrorLog, LogEvent};

use super::log_line::{KEEP, MAX_LINE, keep_recent, parse_line};
use crate::collect::CollectError;

/// The most entries read per collection: ~0.65 s of powerdiag's CPU where every entry is the
/// server's (docs/performance.md), a day of an ordinary server's log.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// The longest one read may take.
const DEADLINE: Duration = Duration::from_secs(1);
/// The journal's standard roots (what `journalctl` reads).
const ROOTS: [&str; 2] = ["/run/log/journal", "/var/log/journal"];

/// What the agent keeps of the journal between samples.
#[derive(Debug, Clone)]
pub(super) struct JournalKept {
    pub(super) selector: Selector,
    /// (realtime µs, seqnum) of the newest entry read.
    pub(super) last: Option<(u64, u64)>,
    pub(super) events: VecDeque<LogEvent>,
    pub(super) dropped: u64,
    pub(super) counts: BTreeMap<String, u64>,
    pub(super) covers_from: Option<i64>,
    /// Entries read since the agent started.
    pub(super) entries: u64,
}

/// How the server's entries are selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selector {
    /// `_SYSTEMD_UNIT=<unit>`.
    Unit(String),
    /// `SYSLOG_IDENTIFIER` or `_COMM` `mariadbd` or `mysqld`.
    Command,
}

impl Selector {
    fn describe(&self) -> String {
        match self {
            Selector::Unit(u) => format!("_SYSTEMD_UNIT={u}"),
            Selector::Command => "SYSLOG_IDENTIFIER or _COMM mariadbd or mysqld".into(),
        }
    }
}

/// The server's selector: its systemd unit when its pid file names a process in one.
pub(crate) fn selector(pid_file: Option<&str>) -> Selector {
    let unit = pid_file
        .and_then(|p| {
            powerdiag_safe_read::read_regular_file(std::path::Path::new(p.trim()), 64).ok()
        })
        .and_then(|b| String::from_utf8_lossy(&b).trim().parse::<u32>().ok())
        .and_then(|pid| {
            powerdiag_safe_read::read_pseudo_file(
                &PathBuf::from(format!("/proc/{pid}/cgroup")),
                64 << 10,
            )
            .ok()
        })
        .and_then(|b| unit_of(&String::from_utf8_lossy(&b)));
    unit.map_or(Selector::Command, Selector::Unit)
}

/// The `.service` a process runs in, from its `/proc/PID/cgroup`: the unified hierarchy's
/// line (`0::/system.slice/mariadb.service`), else cgroup v1's `name=systemd` line.
pub(crate) fn unit_of(cgroup: &str) -> Option<String> {
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| {
            cgroup
                .lines()
                .find_map(|l| l.split_once(":name=systemd:").map(|(_, p)| p))
        })?;
    path.split('/')
        .rev()
        .find(|c| c.ends_with(".service"))
        .filter(|c| {
            c.len() <= 256
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"@:._-\\".contains(&b))
        })
        .map(str::to_owned)
}

fn journal_error(e: sdjournal::SdJournalError) -> CollectError {
    let fix = match &e {
        sdjournal::SdJournalError::NotFound => {
            " (no journal files: journald is not running or keeps no files here)"
        }
        sdjournal::SdJournalError::PermissionDenied { .. } => {
            " (add powerdiag's user to the systemd-journal group, or set log_error=/var/log/mysql/error.log in [mariadbd])"
        }
        _ => "",
    };
    CollectError::Io {
        path: PathBuf::from(ROOTS.join(" and ")),
        message: format!("reading the systemd journal: {e}{fix}"),
    }
}

/// Reads the server's journal entries that are due and parses them into events.
pub(crate) fn read_journal(
    selector: Selector,
    cache: Option<&Mutex<Option<JournalKept>>>,
    now_unix: i64,
) -> Result<ErrorLog, CollectError> {
    let roots: Vec<PathBuf> = ROOTS.iter().map(PathBuf::from).collect();
    let journal = sdjournal::Journal::open_dirs(&roots).map_err(journal_error)?;
    let mut guard = cache.map(|c| c.lock().unwrap_or_else(PoisonError::into_inner));
    let mut kept = guard
        .as_mut()
        .and_then(|g| g.take())
        .filter(|k| k.selector == selector)
        .unwrap_or_else(|| JournalKept {
            selector: selector.clone(),
            last: None,
            events: VecDeque::new(),
            dropped: 0,
            counts: BTreeMap::new(),
            covers_from: None,
            entries: 0,
        });
    let since_usec = match kept.last {
        Some((rt, _)) => rt,
        None => (now_unix - KEEP.as_secs() as i64).max(0) as u64 * 1_000_000,
    };
    let mut q = journal.query();
    match &selector {
        Selector::Unit(u) => {
            q.match_exact("_SYSTEMD_UNIT", u.as_bytes());
        }
        Selector::Command => {
            // One branch per term: sdjournal 0.1.15 ANDs the terms inside one `or_group` (its
            // branches are alternatives), unlike what its documentation says.
            for field in ["SYSLOG_IDENTIFIER", "_COMM"] {
                for name in [&b"mariadbd"[..], b"mysqld"] {
                    q.or_group(|g| {
                        g.match_exact(field, name);
                    });
                }
            }
        }
    }
    // Newest first, so that a burst larger than one read keeps its newest entries.
    q.since_realtime(since_usec)
        .reverse(true)
        .limit(MAX_ENTRIES + 1);
    let started = Instant::now();
    let mut read: Vec<(u64, u64, Option<LogEvent>)> = Vec::new();
    let mut stopped = None;
    for item in q.iter().map_err(journal_error)? {
        if started.elapsed() > DEADLINE {
            stopped = Some(format!("stopped after {:.0} s", DEADLINE.as_secs_f64()));
            break;
        }
        let entry = match item {
            Ok(e) => e,
            Err(e) => {
                stopped = Some(format!("stopped at an unreadable entry: {e}"));
                break;
            }
        };
        let key = (entry.realtime_usec(), entry.seqnum());
        if Some(key) == kept.last {
            break;
        }
        if read.len() == MAX_ENTRIES {
            stopped = Some(format!("more than {MAX_ENTRIES} entries: the newest read"));
            break;
        }
        let event = entry.get("MESSAGE").and_then(|m| {
            let text = String::from_utf8_lossy(&m[..m.len().min(MAX_LINE)]);
            // The journal's own time is UTC and exact; the line's is the server's local time.
            parse_line(&text, Some(0)).map(|mut e| {
                e.at = Some((key.0 / 1_000_000) as i64);
                e
            })
        });
        read.push((key.0, key.1, event));
    }
    let first_read = kept.last.is_none();
    if let Some(&(rt, seq, _)) = read.first() {
        kept.last = Some((rt, seq));
    }
    if let Some(&(rt, _, _)) = read.last()
        && (first_read || kept.covers_from.is_none())
    {
        kept.covers_from = Some((rt / 1_000_000) as i64);
    }
    kept.entries += read.len() as u64;
    let n = read.len();
    for e in read.into_iter().rev().filter_map(|(_, _, e)| e) {
        *kept.counts.entry(e.kind.name().to_owned()).or_default() += 1;
        kept.events.push_back(e);
    }
    keep_recent(&mut kept.events, &mut kept.dropped, now_unix);
    let how = stopped.map(|s| format!(" ({s})")).unwrap_or_default();
    let read = if cache.is_some() && !first_read {
        format!(
            "{} journal entries read since the agent started{how}",
            kept.entries
        )
    } else {
        format!("{n} journal entries of the last day{how}")
    };
    let log = ErrorLog {
        path: format!("the systemd journal ({})", selector.describe()),
        read,
        covers_from: kept.covers_from,
        events: kept.events.iter().cloned().collect(),
        dropped: kept.dropped,
        counts: kept.counts.clone(),
    };
    if let Some(g) = guard.as_mut() {
        **g = Some(kept);
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_from_proc_cgroup() {
        assert_eq!(
            unit_of("0::/system.slice/mariadb.service\n").as_deref(),
            Some("mariadb.service")
        );
        assert_eq!(
            unit_of("0::/system.slice/system-mariadb.slice/mariadb@replica.service\n").as_deref(),
            Some("mariadb@replica.service")
        );
        // cgroup v1: the name=systemd hierarchy.
        let v1 = "12:cpu,cpuacct:/system.slice/mariadb.service\n1:name=systemd:/system.slice/mariadb.service\n";
        assert_eq!(unit_of(v1).as_deref(), Some("mariadb.service"));
        // Not in a service: a user's session, the root, a container's scope.
        assert_eq!(
            unit_of("0::/user.slice/user-0.slice/session-3.scope\n"),
            None
        );
        assert_eq!(unit_of("0::/\n"), None);
        assert_eq!(unit_of(""), None);
        // Hostile names are not used as a match.
        assert_eq!(unit_of("0::/system.slice/a b\n.service\n"), None);
        assert_eq!(unit_of("0::/x/evil=1.service"), None);
    }

    #[test]
    fn selectors_describe_themselves() {
        assert_eq!(
            Selector::Unit("mariadb.service".into()).describe(),
            "_SYSTEMD_UNIT=mariadb.service"
        );
        assert_eq!(
            Selector::Command.describe(),
            "SYSLOG_IDENTIFIER or _COMM mariadbd or mysqld"
        );
    }
}
