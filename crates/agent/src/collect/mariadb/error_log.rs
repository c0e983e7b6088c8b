//! The `mariadb_error_log` collector: the file named by `log_error` (relative to `datadir`),
//! parsed into typed events (`powerdiag_rules::LogEvent`) — start-ups, shutdowns, crashes and
//! crash recovery, long InnoDB waits, page-cleaner lag, checkpoint age, refused and aborted
//! connections, the CRC-32 implementation, deadlocks. Unknown lines are ignored.
//!
//! Doctor reads the last [`TAIL`] bytes. The agent reads the same once, then only the bytes
//! added since its previous sample (at most [`TAIL`] per sample), remembering the file's
//! identity (device, inode) and offset: a rotated file (another inode) is read from its start,
//! a truncated one (shorter than the offset) too. Its events of the last [`KEEP`] stay in the
//! cache, so a rotation loses none the rules judge. Every read goes through
//! `powerdiag-safe-read` (a regular file, opened without blocking); a line is judged on its
//! first [`MAX_LINE`] bytes, so a hostile log (huge lines, binary junk, invalid UTF-8) costs
//! bounded memory and time.
//!
//! Only a server on this host: the log of another host is not here. A server logging to
//! stderr (`log_error` empty: systemd's journal under the packaged units, Debian's default) is
//! read from the journal on Linux (`journal.rs`); elsewhere it is reported unavailable, naming
//! the setting that gives it a file.

use std::{
    collections::{BTreeMap, VecDeque},
    io::{Read, Seek, SeekFrom},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use powerdiag_rules::{ErrorLog, Gathered, LogEvent, MariadbFacts, Var};

use super::{
    log_line::{MAX_LINE, keep_recent, parse_line, timestamp},
    part::{Ctx, Part, PartFuture},
    session::col,
};
use crate::collect::{
    CollectError,
    collector::{Descriptor, Requires},
};

/// The most bytes read per collection: doctor's tail, the agent's first read and each of its
/// later reads.
pub(crate) const TAIL: u64 = 4 << 20;
/// How long the agent trusts the server's time-zone offset before asking again.
const OFFSET_REFRESH: Duration = Duration::from_secs(3600);

pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_error_log",
    help: "the server's error log (log_error, a server on this host): restarts, crashes, long InnoDB waits, page-cleaner lag, refused connections; doctor reads its last 4 MiB, the agent the new bytes of each sample",
    default_enabled: true,
    requires: Requires::Nothing,
};

/// What the agent keeps between samples.
#[derive(Debug, Clone, Default)]
pub struct ErrorLogCache {
    kept: Arc<Mutex<Option<Kept>>>,
    /// The same for a server logging to the journal.
    #[cfg(target_os = "linux")]
    pub(super) journal: Arc<Mutex<Option<super::journal::JournalKept>>>,
}

#[derive(Debug, Clone)]
struct Kept {
    path: PathBuf,
    /// (device, inode) of the file read.
    id: (u64, u64),
    /// Where the next read starts.
    offset: u64,
    events: VecDeque<LogEvent>,
    dropped: u64,
    counts: BTreeMap<String, u64>,
    covers_from: Option<i64>,
    /// Bytes read since the agent started, and rotations or truncations seen.
    bytes: u64,
    reopened: u32,
    /// The server's offset from UTC (seconds) and when it was asked.
    utc_offset: Option<(i64, Instant)>,
}

pub(super) struct ErrorLogPart<'o> {
    /// The agent's cache; `None` reads the tail afresh (doctor).
    pub(super) cache: Option<&'o ErrorLogCache>,
}

impl Part for ErrorLogPart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut MariadbFacts, why: String) {
        facts.error_log = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let path = match log_path(ctx.facts) {
                Ok(Source::File(p)) => p,
                Ok(Source::Journal) => return self.read_the_journal(ctx).await,
                Err(why) => {
                    ctx.facts.error_log = Gathered::Unavailable(why);
                    return Ok(());
                }
            };
            let kept_offset = self.cache.and_then(|c| {
                let k = c.kept.lock().unwrap_or_else(PoisonError::into_inner);
                k.as_ref()
                    .and_then(|k| k.utc_offset)
                    .filter(|(_, at)| at.elapsed() < OFFSET_REFRESH)
                    .map(|(o, _)| o)
            });
            let utc_offset = match kept_offset {
                Some(o) => Some(o),
                None => server_utc_offset(ctx).await,
            };
            let cache = self.cache.cloned();
            let now_unix = unix_now();
            let read = blocking("reading the error log", move || {
                read_log(&path, cache.as_ref(), utc_offset, now_unix)
            })
            .await?;
            publish(ctx, read, "")
        })
    }
}

/// Runs a blocking read off the runtime's threads.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, CollectError> + Send + 'static,
) -> Result<Result<T, CollectError>, CollectError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CollectError::Internal {
            what: what.into(),
            message: e.to_string(),
        })
}

/// Puts a read into the facts: the log, or the reason (after `context`) it is unavailable.
fn publish(
    ctx: &mut Ctx<'_>,
    read: Result<ErrorLog, CollectError>,
    context: &str,
) -> Result<(), CollectError> {
    match read {
        Ok(log) => {
            ctx.facts.error_log = Gathered::Available(log);
            Ok(())
        }
        Err(e) => {
            ctx.facts.error_log = Gathered::Unavailable(format!("{context}{e}"));
            Err(e)
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Where the server's log is.
enum Source {
    /// The file `log_error` names.
    File(PathBuf),
    /// stderr, which systemd's units send to the journal (read on Linux).
    Journal,
}

impl ErrorLogPart<'_> {
    #[cfg(target_os = "linux")]
    async fn read_the_journal(&self, ctx: &mut Ctx<'_>) -> Result<(), CollectError> {
        let pid_file = ctx.facts.variables.get(Var::PidFile.name()).cloned();
        let cache = self.cache.cloned();
        let now_unix = unix_now();
        let read = blocking("reading the systemd journal", move || {
            let selector = super::journal::selector(pid_file.as_deref());
            super::journal::read_journal(selector, cache.as_ref().map(|c| &*c.journal), now_unix)
        })
        .await?;
        publish(
            ctx,
            read,
            "log_error is empty, so the server logs to stderr (under systemd, the journal): ",
        )
    }

    #[cfg(not(target_os = "linux"))]
    async fn read_the_journal(&self, ctx: &mut Ctx<'_>) -> Result<(), CollectError> {
        ctx.facts.error_log = Gathered::Unavailable("log_error is empty: the server writes its log to stderr, which powerdiag does not read on this OS; set log_error in [mariadbd] to give it a file".into());
        Ok(())
    }
}

/// Where `log_error` sends the log, or why it is not read here.
fn log_path(facts: &MariadbFacts) -> Result<Source, String> {
    match facts.same_host {
        Some(true) => {}
        Some(false) => {
            return Err(
                "the server runs on another host: its error log is not here (run powerdiag on the server's host)"
                    .into(),
            );
        }
        None => {
            return Err("not known to run on this host (its host name could not be compared), so its error log is not read".into());
        }
    }
    let value = facts
        .variables
        .get(Var::LogError.name())
        .map(|v| v.trim())
        .unwrap_or_default();
    if value.is_empty() || value == "stderr" {
        return Ok(Source::Journal);
    }
    let p = Path::new(value);
    if p.is_absolute() {
        return Ok(Source::File(p.to_path_buf()));
    }
    let datadir = facts
        .variables
        .get(Var::Datadir.name())
        .ok_or("log_error is relative and datadir is unknown")?;
    Ok(Source::File(Path::new(datadir).join(p)))
}

/// The server's offset from UTC now, in seconds: its log's timestamps are its local time.
async fn server_utc_offset(ctx: &mut Ctx<'_>) -> Option<i64> {
    let rows = ctx
        .s
        .query("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', 'SYSTEM'))")
        .await
        .ok()?;
    col(rows.first()?, 0)?.trim().parse().ok()
}

/// Reads and parses what is due: the tail (doctor, the agent's first read, a rotated or
/// truncated file), else the bytes added since the agent's last read.
fn read_log(
    path: &Path,
    cache: Option<&ErrorLogCache>,
    utc_offset: Option<i64>,
    now_unix: i64,
) -> Result<ErrorLog, CollectError> {
    let (mut file, meta) = powerdiag_safe_read::open_regular(path).map_err(|e| match e {
        powerdiag_safe_read::ReadError::Io(io) => CollectError::io(path, &io),
        e => CollectError::Io {
            path: path.into(),
            message: e.to_string(),
        },
    })?;
    let id = (meta.dev(), meta.ino());
    let size = meta.len();
    let mut guard = cache.map(|c| c.kept.lock().unwrap_or_else(PoisonError::into_inner));
    let previous = guard
        .as_mut()
        .and_then(|g| g.take())
        .filter(|k| k.path == path);
    let (start, mut kept, how) = match previous {
        Some(k) if k.id == id && k.offset <= size => {
            let start = k.offset.max(size.saturating_sub(TAIL));
            let skipped = start - k.offset;
            let how = if skipped > 0 {
                format!(
                    " ({skipped} bytes skipped: more than {} MiB were added since the last read)",
                    TAIL >> 20
                )
            } else {
                String::new()
            };
            (start, k, how)
        }
        Some(mut k) => {
            // Rotated (another file) or truncated: the new file from its start.
            k.reopened += 1;
            k.id = id;
            k.offset = 0;
            (size.saturating_sub(TAIL), k, String::new())
        }
        None => (
            size.saturating_sub(TAIL),
            Kept {
                path: path.to_path_buf(),
                id,
                offset: 0,
                events: VecDeque::new(),
                dropped: 0,
                counts: BTreeMap::new(),
                covers_from: None,
                bytes: 0,
                reopened: 0,
                utc_offset: None,
            },
            String::new(),
        ),
    };
    file.seek(SeekFrom::Start(start))
        .map_err(|e| CollectError::io(path, &e))?;
    let mut bytes = Vec::new();
    file.take(TAIL)
        .read_to_end(&mut bytes)
        .map_err(|e| CollectError::io(path, &e))?;
    // A read from the middle of the file starts mid-line: from the first whole line. The end
    // stops at the last newline: a line still being written is read next time.
    let mut from = 0;
    if start > 0 && start != kept.offset {
        from = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
    }
    let to = match bytes[from..].iter().rposition(|b| *b == b'\n') {
        Some(i) => from + i + 1,
        // A full read without a newline: one line longer than the read, skipped, or the
        // agent would read the same bytes every sample.
        None if bytes.len() as u64 >= TAIL => bytes.len(),
        None => from,
    };
    let body = &bytes[from..to];
    kept.offset = start + to as u64;
    kept.bytes += body.len() as u64;
    if let Some(o) = utc_offset {
        kept.utc_offset = Some((o, Instant::now()));
    }
    let mut first = None;
    for line in body.split(|b| *b == b'\n') {
        let line = &line[..line.len().min(MAX_LINE)];
        let text = String::from_utf8_lossy(line);
        if first.is_none() {
            first = timestamp(&text, utc_offset);
        }
        if let Some(e) = parse_line(&text, utc_offset) {
            *kept.counts.entry(e.kind.name().to_owned()).or_default() += 1;
            kept.events.push_back(e);
        }
    }
    if kept.covers_from.is_none() || kept.reopened == 0 && kept.bytes == body.len() as u64 {
        kept.covers_from = first;
    }
    // The agent keeps the last day; every snapshot at most MAX_LOG_EVENTS.
    keep_recent(&mut kept.events, &mut kept.dropped, now_unix);
    let read = if cache.is_some() && kept.bytes > body.len() as u64 {
        format!(
            "{} KiB read since the agent started{}{how}",
            kept.bytes >> 10,
            if kept.reopened > 0 {
                format!(", the file rotated or truncated {} time(s)", kept.reopened)
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "the last {:.1} MiB of {:.1} MiB{how}",
            body.len() as f64 / 1048576.0,
            size as f64 / 1048576.0
        )
    };
    let log = ErrorLog {
        path: path.display().to_string(),
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
    use powerdiag_rules::{LogEventKind, MAX_LOG_EVENTS};

    const T118: &str = include_str!("testdata/errorlog/11.8-crash-restart.log");
    const T1011: &str = include_str!("testdata/errorlog/10.11-crash-restart.log");
    const K118: &str = include_str!("testdata/errorlog/11.8-kill9-restart.log");
    const K1011: &str = include_str!("testdata/errorlog/10.11-kill9-restart.log");

    fn kinds(text: &str) -> Vec<&'static str> {
        text.lines()
            .filter_map(|l| parse_line(l, Some(0)))
            .map(|e| e.kind.name())
            .collect()
    }

    /// Real logs (captured on this project's 11.8 and 10.11 test servers): a start, a
    /// `kill -SEGV`, the restart; a `kill -9` under a transaction, the restart's recovery.
    #[test]
    fn real_crash_and_restart() {
        for text in [T118, T1011] {
            let k = kinds(text);
            let crash = k.iter().position(|k| *k == "crash").expect("crash header");
            assert!(k[..crash].contains(&"ready"), "{k:?}");
            assert_eq!(
                &k[crash..],
                [
                    "crash",
                    "starting",
                    "crc32",
                    "ready",
                    "shutdown",
                    "shutdown_complete"
                ],
                "{k:?}"
            );
        }
        for text in [K118, K1011] {
            let k = kinds(text);
            assert!(!k.contains(&"crash"), "kill -9 writes nothing: {k:?}");
            let restart = k.iter().rposition(|k| *k == "starting").unwrap();
            assert!(k[restart..].contains(&"crash_recovery"), "{k:?}");
        }
        let e = T118
            .lines()
            .find_map(|l| parse_line(l, Some(0)).filter(|e| e.kind.name() == "crash"))
            .unwrap();
        assert_eq!(e.kind, LogEventKind::Crash { signal: Some(11) });
        // 261127 19:57:41 UTC
        assert_eq!(e.at, Some(1_795_809_461));
        let c = T118
            .lines()
            .find_map(|l| match parse_line(l, Some(3600))?.kind {
                LogEventKind::Crc32 { implementation } => Some(implementation),
                _ => None,
            })
            .unwrap();
        assert_eq!(c, "crc32 + pclmulqdq");
    }

    #[test]
    fn the_lines_from_public_reports() {
        let cases = [
            (
                "2024-03-01 10:00:01 0 [Warning] InnoDB: Long wait (153 seconds) for double-write buffer flush.",
                "long_wait",
            ),
            (
                "2023-11-20  3:17:06 0 [Warning] InnoDB: A long wait (611 seconds) was observed for dict_sys.latch",
                "long_wait",
            ),
            (
                "2023-11-20  3:27:06 0 [ERROR] [FATAL] InnoDB: innodb_fatal_semaphore_wait_threshold was exceeded for dict_sys.latch. Please refer to https://mariadb.com/kb/en/how-to-produce-a-full-stack-trace-for-mysqld/",
                "long_wait",
            ),
            (
                "2019-02-01 12:00:00 0 [Note] InnoDB: page_cleaner: 1000ms intended loop took 4721ms. The settings might not be optimal. (flushed=200 and evicted=0, during the time.)",
                "page_cleaner_lag",
            ),
            (
                "2026-11-27 19:58:03 12 [Warning] Aborted connection 12 to db: 'unconnected' user: 'unauthenticated' host: 'connecting host' (Too many connections)",
                "too_many_connections",
            ),
            (
                "2026-11-27 19:58:03 13 [Warning] Aborted connection 13 to db: 'sbtest' user: 'root' host: 'localhost' (Got an error reading communication packets)",
                "aborted_connection",
            ),
            (
                "2026-11-27 19:58:03 0 [Note] InnoDB: Using ARMv8 crc32 + pmull instructions",
                "crc32",
            ),
            (
                "2026-11-27 19:58:03 0 [Note] InnoDB: Transactions deadlock detected, dumping detailed information.",
                "deadlock",
            ),
            (
                "2026-11-27 19:58:03 0 [Warning] InnoDB: The age of the last checkpoint is 3481532, which exceeds the log capacity 3476275.",
                "checkpoint_age",
            ),
        ];
        for (line, kind) in cases {
            let e = parse_line(line, Some(0)).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(e.kind.name(), kind, "{line}");
            assert!(e.at.is_some(), "{line}");
        }
        let e = parse_line(cases[0].0, None).unwrap();
        assert_eq!(
            e.kind,
            LogEventKind::LongWait {
                seconds: Some(153),
                what: "double-write buffer flush".into()
            }
        );
        assert_eq!(e.at, None, "no offset, no time");
        assert_eq!(
            parse_line(cases[3].0, Some(0)).unwrap().kind,
            LogEventKind::PageCleanerLag { ms: Some(4721) }
        );
        // A space-padded hour.
        assert_eq!(
            parse_line(cases[1].0, Some(0)).unwrap().at,
            Some(1_700_450_226)
        );
        assert!(
            parse_line(
                "2026-11-27 19:58:03 0 [Note] InnoDB: Buffer pool(s) load completed",
                Some(0)
            )
            .is_none()
        );
    }

    /// Junk, invalid UTF-8, a control character and a huge line: no panic, bounded text.
    #[test]
    fn hostile_lines() {
        for line in [
            "",
            "\u{0}\u{1}got signal ;",
            "9999-99-99 99:99:99 0 [Note] x: ready for connections.",
            "261327 25:61:61 [ERROR] x got signal 99999999999999999999 ;",
            "Aborted connection ",
        ] {
            let _ = parse_line(line, Some(0));
        }
        let bad = parse_line(
            "9999-99-99 99:99:99 0 [Note] x: ready for connections.",
            Some(0),
        )
        .unwrap();
        assert_eq!(bad.at, None);
        let huge = format!(
            "2026-11-27 19:58:03 0 [Note] {}: ready for connections.",
            "x\u{7}".repeat(10_000)
        );
        let e = parse_line(&huge, Some(0)).unwrap();
        assert!(e.line.chars().count() <= 300 && !e.line.contains('\u{7}'));
    }

    fn write(p: &Path, s: &str) {
        std::fs::write(p, s).unwrap();
    }

    fn append(p: &Path, s: &str) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(p)
            .unwrap()
            .write_all(s.as_bytes())
            .unwrap();
    }

    const READY: &str = "2026-11-27 19:00:00 0 [Note] mariadbd: ready for connections.\n";
    const CRASH: &str = "261127 19:05:00 [ERROR] mariadbd got signal 11 ;\n";

    /// The agent reads only new bytes, keeps a partial last line for later, follows a rotation
    /// (another inode) and a truncation, and keeps the events it read before them.
    #[test]
    fn incremental_reads_rotation_and_truncation() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("error.log");
        write(&p, READY);
        let cache = ErrorLogCache::default();
        let now = 1_795_809_461;
        let names = |l: &ErrorLog| l.events.iter().map(|e| e.kind.name()).collect::<Vec<_>>();
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready"]);
        // Half a line: not read until its newline comes.
        append(&p, "261127 19:05:00 [ERROR] mariadbd got si");
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready"]);
        append(&p, "gnal 11 ;\n");
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready", "crash"]);
        // Nothing new: nothing added, nothing lost.
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready", "crash"]);
        // Rotation: the old file moved away, a new one in its place.
        std::fs::rename(&p, d.path().join("error.log.1")).unwrap();
        write(&p, READY);
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready", "crash", "ready"]);
        assert!(l.read.contains("rotated or truncated 1 time"), "{}", l.read);
        // Truncation in place (copytruncate), then a new line.
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        append(&p, CRASH);
        let l = read_log(&p, Some(&cache), Some(0), now).unwrap();
        assert_eq!(names(&l), ["ready", "crash", "ready", "crash"]);
        // Doctor (no cache) reads the tail afresh.
        let l = read_log(&p, None, Some(0), now).unwrap();
        assert_eq!(names(&l), ["crash"]);
    }

    /// The agent keeps a day of events and at most MAX_LOG_EVENTS, but the start's CRC-32
    /// line for as long as no newer one comes (PD201 judges the running server's).
    #[test]
    fn the_start_ups_crc32_line_outlives_the_day_and_the_cap() {
        let now = 1_795_809_461;
        let ev = |at: i64, kind: LogEventKind| LogEvent {
            at: Some(at),
            kind,
            line: String::new(),
        };
        let crc = || LogEventKind::Crc32 {
            implementation: "crc32 + pclmulqdq".into(),
        };
        let mut events: VecDeque<LogEvent> = VecDeque::new();
        events.push_back(ev(now - 200_000, LogEventKind::Starting));
        events.push_back(ev(now - 199_999, crc()));
        events.push_back(ev(now - 199_998, LogEventKind::Ready));
        for i in 0..300 {
            events.push_back(ev(now - 300 + i, LogEventKind::AbortedConnection));
        }
        let mut dropped = 0;
        keep_recent(&mut events, &mut dropped, now);
        assert_eq!(events.len(), MAX_LOG_EVENTS);
        assert_eq!(events[0].kind, crc());
        assert_eq!(events[1].at, Some(now - 300 + 45));
        assert_eq!(dropped, 45);
        // Kept again on the next trim, and replaced by a newer start's line.
        keep_recent(&mut events, &mut dropped, now);
        assert_eq!(events[0].kind, crc());
        events.push_back(ev(now, crc()));
        keep_recent(&mut events, &mut dropped, now);
        assert_eq!(events.iter().filter(|e| e.kind == crc()).count(), 1);
        assert_eq!(events.back().unwrap().at, Some(now));
    }

    /// A line longer than a whole read is skipped, not read again every sample.
    #[test]
    fn a_line_longer_than_a_read_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("error.log");
        write(&p, READY);
        let cache = ErrorLogCache::default();
        read_log(&p, Some(&cache), Some(0), 0).unwrap();
        append(&p, &"x".repeat(TAIL as usize + 10));
        append(&p, &format!("\n{CRASH}"));
        let mut names = Vec::new();
        for _ in 0..3 {
            let l = read_log(&p, Some(&cache), Some(0), 0).unwrap();
            names = l.events.iter().map(|e| e.kind.name()).collect::<Vec<_>>();
        }
        assert_eq!(names, ["ready", "crash"]);
    }

    /// A log larger than the tail: only its last 4 MiB, from a whole line; a FIFO or directory
    /// is refused unread.
    #[test]
    fn a_big_log_is_read_from_its_tail_and_odd_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("error.log");
        let filler = "2026-11-27 18:00:00 0 [Note] InnoDB: Buffer pool(s) load completed\n";
        let mut text = String::from(CRASH);
        while text.len() < (TAIL as usize) + 100_000 {
            text.push_str(filler);
        }
        text.push_str(READY);
        write(&p, &text);
        let l = read_log(&p, None, Some(0), 0).unwrap();
        assert_eq!(
            l.events.iter().map(|e| e.kind.name()).collect::<Vec<_>>(),
            ["ready"],
            "the crash lies before the tail"
        );
        assert!(l.read.starts_with("the last 4.0 MiB of 4."), "{}", l.read);
        let e = read_log(d.path(), None, Some(0), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("directory") || e.contains("regular"), "{e}");
    }
}
