//! One line of the server's log as a typed event (`powerdiag_rules::LogEvent`), and how many
//! of them the agent keeps: shared by the error-log file reader (`error_log.rs`) and the
//! journal reader (`journal.rs`).

use std::{collections::VecDeque, time::Duration};

use powerdiag_rules::{LogEvent, LogEventKind, MAX_LOG_EVENTS};

/// Bytes of a line that are looked at; the rest of a longer line is skipped.
pub(super) const MAX_LINE: usize = 4096;
/// How long the agent keeps the events it read.
pub(super) const KEEP: Duration = Duration::from_secs(24 * 3600);

/// Drops the events older than [`KEEP`], then the oldest over [`MAX_LOG_EVENTS`] (counted) —
/// except the newest CRC-32 line: it is written once per start, and PD201 judges the running
/// server's.
pub(super) fn keep_recent(events: &mut VecDeque<LogEvent>, dropped: &mut u64, now_unix: i64) {
    let crc32 = events
        .iter()
        .rposition(|e| matches!(e.kind, LogEventKind::Crc32 { .. }));
    let mut pinned = None;
    let mut index = 0;
    let mut pop = |events: &mut VecDeque<LogEvent>, pinned: &mut Option<LogEvent>| {
        let e = events.pop_front();
        if Some(index) == crc32 {
            *pinned = e;
        }
        index += 1;
    };
    while events
        .front()
        .is_some_and(|e| e.at.is_some_and(|at| at < now_unix - KEEP.as_secs() as i64))
    {
        pop(events, &mut pinned);
    }
    while events.len() + usize::from(pinned.is_some()) > MAX_LOG_EVENTS {
        pop(events, &mut pinned);
        *dropped += 1;
    }
    if let Some(e) = pinned {
        events.push_front(e);
    }
}

/// A line's local time as Unix time: `2026-11-27 19:57:41` (the hour may be space-padded) or
/// the crash report's `261127 19:57:41`.
pub(super) fn timestamp(line: &str, utc_offset: Option<i64>) -> Option<i64> {
    let offset = utc_offset?;
    let b = line.as_bytes();
    let num = |s: &[u8]| -> Option<u32> {
        let t = std::str::from_utf8(s).ok()?.trim_start();
        if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d, rest) = if b.len() >= 19 && b[4] == b'-' && b[7] == b'-' && b[10] == b' ' {
        (
            num(&b[0..4])? as i32,
            num(&b[5..7])?,
            num(&b[8..10])?,
            &b[11..],
        )
    } else if b.len() >= 15 && b[6] == b' ' {
        (
            2000 + num(&b[0..2])? as i32,
            num(&b[2..4])?,
            num(&b[4..6])?,
            &b[7..],
        )
    } else {
        return None;
    };
    if rest.len() < 8 || rest[2] != b':' || rest[5] != b':' {
        return None;
    }
    let (h, mi, s) = (num(&rest[0..2])?, num(&rest[3..5])?, num(&rest[6..8])?);
    let date =
        time::Date::from_calendar_date(y, time::Month::try_from(mo as u8).ok()?, d as u8).ok()?;
    let t = time::Time::from_hms(h as u8, mi as u8, s as u8).ok()?;
    Some(
        time::PrimitiveDateTime::new(date, t)
            .assume_utc()
            .unix_timestamp()
            - offset,
    )
}

/// The number right after `prefix` in `s`.
fn number_after(s: &str, prefix: &str) -> Option<u64> {
    let rest = &s[s.find(prefix)? + prefix.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// One line as an event, or `None` for the lines powerdiag does not read.
pub(super) fn parse_line(line: &str, utc_offset: Option<i64>) -> Option<LogEvent> {
    let kind = if line.contains(" got signal ") && line.trim_end().ends_with(';') {
        LogEventKind::Crash {
            signal: number_after(line, " got signal ").and_then(|n| u32::try_from(n).ok()),
        }
    } else if line.contains(" got exception ") {
        LogEventKind::Crash { signal: None }
    } else if line.contains("] Starting MariaDB ") && line.contains(" as process ") {
        LogEventKind::Starting
    } else if line.trim_end().ends_with(": ready for connections.") {
        LogEventKind::Ready
    } else if line.trim_end().ends_with(": Normal shutdown") || line.contains("): Normal shutdown")
    {
        LogEventKind::Shutdown
    } else if line.trim_end().ends_with(": Shutdown complete") {
        LogEventKind::ShutdownComplete
    } else if line.contains("InnoDB: Starting crash recovery") {
        LogEventKind::CrashRecovery
    } else if let Some(i) = line
        .find("InnoDB: Long wait (")
        .or_else(|| line.find("InnoDB: A long wait ("))
    {
        let rest = &line[i..];
        LogEventKind::LongWait {
            seconds: number_after(rest, "wait ("),
            what: rest
                .split_once(") ")
                .map(|(_, w)| {
                    w.trim_start_matches("was observed ")
                        .trim_start_matches("for ")
                        .trim_end_matches('.')
                })
                .unwrap_or("")
                .chars()
                .take(80)
                .collect(),
        }
    } else if line.contains("A long semaphore wait") {
        LogEventKind::LongWait {
            seconds: None,
            what: "a semaphore".into(),
        }
    } else if let Some(i) = line.find("innodb_fatal_semaphore_wait_threshold was exceeded for ") {
        let what = &line[i + "innodb_fatal_semaphore_wait_threshold was exceeded for ".len()..];
        LogEventKind::LongWait {
            seconds: None,
            what: what
                .split(['.', ' '])
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect::<String>()
                + " (the fatal threshold: the server aborts)",
        }
    } else if line.contains("page_cleaner: 1000ms intended loop took ") {
        LogEventKind::PageCleanerLag {
            ms: number_after(line, "intended loop took "),
        }
    } else if line.contains("The age of the last checkpoint is ") {
        LogEventKind::CheckpointAge
    } else if line.contains("Aborted connection ") {
        if line.contains("(Too many connections)") {
            LogEventKind::TooManyConnections
        } else {
            LogEventKind::AbortedConnection
        }
    } else if let Some(i) = line.find("InnoDB: Using ")
        && line.trim_end().ends_with(" instructions")
    {
        let what = line[i + "InnoDB: Using ".len()..]
            .trim_end()
            .trim_end_matches(" instructions");
        LogEventKind::Crc32 {
            implementation: what.chars().take(80).collect(),
        }
    } else if line.contains("InnoDB: Transactions deadlock detected") {
        LogEventKind::Deadlock
    } else {
        return None;
    };
    Some(LogEvent {
        at: timestamp(line, utc_offset),
        kind,
        line: clean(line),
    })
}

/// The line for a report: at most 300 characters, control characters replaced.
fn clean(line: &str) -> String {
    line.trim_end()
        .chars()
        .take(300)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}
