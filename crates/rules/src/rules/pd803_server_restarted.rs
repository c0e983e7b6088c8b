
use crate::{
    ErrorLog, LogEventKind, Limits, Rule, Severity, Snapshot, StatusVar, Threshold, Unit,
    Verdict, declare_rule, format_secs,
};

declare_rule! {
    /// ### What it does
    /// Checks whether the server started within the last {window} seconds (`Uptime`), and
    /// whether the start followed a crash: the error log's crash report (`got signal N ;`)
    /// since the previous start, or InnoDB's crash recovery at this start (a `kill -9`, an
    /// out-of-memory kill or a power loss leave no report). A crash is critical; a clean
    /// restart is an info finding (caches are cold, nothing is wrong); the verdict passes
    /// again once the server has been up for the window. Restarts in the last hour and day are counted from the log's start-up lines.
    /// Without the log (another host, `log_error` empty) a recent start is a warning saying
    /// the cause is unknown (PMM's restart alert is a warning on `Uptime` alone).
    ///
    /// ### Why is this bad?
    /// A restart empties the buffer pool, the adaptive hash index and the MHNSW cache: the
    /// next minutes run from disk at a fraction of the usual throughput, and every
    /// connection was dropped. A crash also means a bug or a kill worth finding before it
    /// repeats — PMM and MySQLTuner flag restarts for this reason (MySQLTuner: "MySQL
    /// started within last 24 hours").
    ///
    /// ### Remediation
    /// Read the crash report in the error log (the lines after `got signal`: the query, the
    /// stack) and the system log (`journalctl -k | grep -i -e oom -e killed`,
    /// `dmesg`) for an out-of-memory kill: size the server's memory to the host (PD503). A
    /// planned restart needs nothing; warm the buffer pool back with
    /// `innodb_buffer_pool_dump_at_shutdown` / `innodb_buffer_pool_load_at_startup` (ON by
    /// default). Report a crash with its stack to MariaDB's bug tracker.
    pub struct ServerRestarted {
        code: "PD803",
        name: "server-restarted",
        severity: Critical,
        scope: Database,
        summary: "the server restarted recently, or crashed",
        fails_when: "`Uptime` < 1 h: critical when the error log shows a crash report or crash recovery at that start, info for a clean restart, a warning without the log",
        severity_why: "critical: a crash is a bug or a kill that can repeat, and every connection was lost (info for a clean restart, a warning when the log cannot tell)",
        thresholds: [WINDOW],
    }
}

const WINDOW: Threshold = Threshold {
    key: "window",
    default: 3600.0,
    min: 60.0,
    max: 30.0 * 86400.0,
    unit: Unit::Count,
    doc: "seconds since the start within which a restart fails",
};

impl Rule for ServerRestarted {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let uptime = s.db()?.status_u64(StatusVar::Uptime)?;
        let window = limits.count(&WINDOW);
        let now = s.taken().ok().map(|t| t.unix_timestamp());
        let mut evidence = vec![format!("up {} (Uptime {uptime} s)", format_secs(uptime))];
        let log = s.db()?.error_log.as_ref().ok();
        if let (Some(log), Some(now)) = (log, now) {
            evidence.push(format!(
                "starts in the error log: {} in the last hour, {} in the last day ({}, {})",
                starts_since(log, now - 3600),
                starts_since(log, now - 86400),
                crate::display_text(&log.path, 160),
                log.read
            ));
        }
        if uptime >= window {
            return Ok(Verdict::pass(format!(
                "up {}: no restart in the last {}",
                format_secs(uptime),
                format_secs(window)
            ))
            .with_evidence_lines(evidence));
        }
        let started = now.map(|n| n - uptime as i64);
        let summary = format!("the server started {} ago", format_secs(uptime));
        let Some(log) = log else {
            let why = s
                .db()?
                .error_log
                .as_ref()
                .err()
                .unwrap_or_default()
                .to_owned();
            evidence.push(format!("whether it crashed is unknown: the error log {why}"));
            return Ok(Verdict::fail(summary)
                .with_evidence_lines(evidence)
                .at_most(Severity::Warning));
        };
        match crash_before(log, started) {
            Some(lines) => {
                evidence.extend(lines);
                Ok(Verdict::fail(format!("{summary}, after a crash")).with_evidence_lines(evidence))
            }
            None => {
                evidence.push("no crash report or crash recovery at this start in the error log: a clean restart".into());
                Ok(Verdict::fail(format!("{summary}, cleanly: its caches are still warming"))
                    .with_evidence_lines(evidence)
                    .at_most(Severity::Info))
            }
        }
    }
}

/// Start-ups (`ready for connections`) logged since `since`.
fn starts_since(log: &ErrorLog, since: i64) -> usize {
    log.events
        .iter()
        .filter(|e| e.kind == LogEventKind::Ready && e.at.is_some_and(|t| t >= since))
        .count()
}

/// The crash report or crash recovery of the start at `started` (the last start in the log
/// when the time is unknown): the events between the previous `ready` and this start's.
fn crash_before(log: &ErrorLog, started: Option<i64>) -> Option<Vec<String>> {
    let events = &log.events;
    // This start: the last `starting`/`ready` at or after the start time (with a minute's
    // slack for the clock), else the last one.
    let this = events.iter().rposition(|e| {
        matches!(e.kind, LogEventKind::Starting)
            && match (started, e.at) {
                (Some(s), Some(at)) => at >= s - 60,
                _ => true,
            }
    })?;
    let previous_ready = events[..this]
        .iter()
        .rposition(|e| e.kind == LogEventKind::Ready)
        .map_or(0, |i| i + 1);
    let next_ready = events[this..]
        .iter()
        .position(|e| e.kind == LogEventKind::Ready)
        .map_or(events.len(), |i| this + i);
    let found: Vec<String> = events[previous_ready..next_ready]
        .iter()
        .filter(|e| matches!(e.kind, LogEventKind::Crash { .. } | LogEventKind::CrashRecovery))
        .map(|e| match e.kind {
            LogEventKind::CrashRecovery => format!(
                "InnoDB ran crash recovery at this start (the previous run did not shut down: a crash, kill -9 or power loss): {}",
                e.line
            ),
            _ => format!("crash report: {}", e.line),
        })
        .collect();
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Gathered, LogEvent, Status,
        testing::{SnapshotBuilder, verdict},
    };

    const NOW: i64 = 1_795_809_600; // 2026-11-27T20:00:00Z

    fn ev(at: i64, kind: LogEventKind, line: &str) -> LogEvent {
        LogEvent {
            at: Some(at),
            kind,
            line: line.into(),
        }
    }

    fn snap(uptime: u64, events: Vec<LogEvent>) -> Snapshot {
        let mut s = SnapshotBuilder::new()
            .mariadb("11.8.5-MariaDB")
            .status(StatusVar::Uptime, &uptime.to_string())
            .build();
        s.taken_at = Some("2026-11-27T20:00:00Z".into());
        if let Some(db) = s.mariadb.facts.as_mut()
            && let Gathered::Available(l) = &mut db.error_log
        {
            l.events = events;
        }
        s
    }

    fn crashed() -> Vec<LogEvent> {
        vec![
            ev(NOW - 7200, LogEventKind::Starting, "Starting MariaDB"),
            ev(NOW - 7199, LogEventKind::Ready, "mariadbd: ready for connections."),
            ev(NOW - 130, LogEventKind::Crash { signal: Some(11) }, "261127 19:57:50 [ERROR] mariadbd got signal 11 ;"),
            ev(NOW - 120, LogEventKind::Starting, "Starting MariaDB"),
            ev(NOW - 119, LogEventKind::Ready, "mariadbd: ready for connections."),
        ]
    }

    pub(crate) fn failing_example() -> Snapshot {
        snap(120, crashed())
    }

    #[test]
    fn a_crash_is_critical_a_clean_restart_a_warning_an_old_start_passes() {
        let v = verdict(&ServerRestarted, &failing_example());
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.cap, None, "{v:?}");
        assert!(v.summary.contains("after a crash"), "{}", v.summary);
        assert!(v.evidence.iter().any(|e| e.contains("got signal 11")), "{:?}", v.evidence);
        assert!(v.evidence.iter().any(|e| e.contains("2 in the last day")), "{:?}", v.evidence);

        let mut clean = crashed();
        clean[2] = ev(NOW - 130, LogEventKind::ShutdownComplete, "mariadbd: Shutdown complete");
        let v = verdict(&ServerRestarted, &snap(120, clean));
        assert_eq!((v.status, v.cap), (Status::Fail, Some(Severity::Info)), "{v:?}");

        // kill -9: no report, but InnoDB recovered at this start.
        let mut killed = crashed();
        killed[2] = ev(NOW - 119, LogEventKind::CrashRecovery, "InnoDB: Starting crash recovery from checkpoint LSN=51503");
        killed.swap(2, 3);
        let v = verdict(&ServerRestarted, &snap(120, killed));
        assert_eq!(v.cap, None, "{v:?}");
        assert!(v.evidence.iter().any(|e| e.contains("crash recovery")), "{:?}", v.evidence);

        // The fix is time: up for the window, it passes with the history as evidence.
        let v = verdict(&ServerRestarted, &snap(3600, crashed()));
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn without_the_log_the_cause_is_unknown() {
        let mut s = snap(300, Vec::new());
        s.mariadb.facts.as_mut().unwrap().error_log =
            Gathered::Unavailable("log_error is empty: the server writes its log to stderr".into());
        let v = verdict(&ServerRestarted, &s);
        assert_eq!((v.status, v.cap), (Status::Fail, Some(Severity::Warning)), "{v:?}");
        assert!(v.evidence.iter().any(|e| e.contains("unknown") && e.contains("stderr")), "{:?}", v.evidence);
    }
}
