
use crate::{
    LogEventKind, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, format_secs,
};

declare_rule! {
    /// ### What it does
    /// Looks in the server's error log for InnoDB saying it cannot keep up, logged within the
    /// last {window} seconds: long latch and semaphore waits (10.6+: `Long wait (N seconds)
    /// for …`, `A long wait (N seconds) was observed for …`, the fatal
    /// `innodb_fatal_semaphore_wait_threshold`; 10.5: `A long semaphore wait`), the
    /// checkpoint falling behind the redo log (`The age of the last checkpoint is …, which
    /// exceeds the log capacity …`), and the old page cleaner's lag (`page_cleaner: 1000ms
    /// intended loop took N ms`, 10.4 and older). It passes again once the window holds none
    /// — the log has no "recovered" line to wait for. Needs the error log (a server on this
    /// host, `log_error` set): else `insufficient_data`.
    ///
    /// ### Why is this bad?
    /// Each of these lines is a stall the server noticed itself: threads waited seconds for
    /// a latch (a page flush, the doublewrite buffer, the dictionary), or the redo log filled
    /// up faster than dirty pages were written, which forces synchronous flushing — every
    /// write stalls until the checkpoint moves. Left alone, a long semaphore wait ends with
    /// InnoDB killing the server on purpose after `innodb_fatal_semaphore_wait_threshold`
    /// (600 s).
    ///
    /// ### Remediation
    /// Let InnoDB write faster and need to less often: raise `innodb_io_capacity` and
    /// `innodb_io_capacity_max` to what the storage sustains (SSD: thousands; measure with
    /// `fio`), enlarge the redo log (`innodb_log_file_size`, PD206) so checkpoints come less
    /// often, and check the storage itself (PD802: a saturated device). A long wait on
    /// `dict_sys.latch` points at DDL or statistics work holding the dictionary: find it in
    /// `SHOW ENGINE INNODB STATUS` and the processlist at the time logged.
    pub struct InnodbFlushingLags {
        code: "PD804",
        name: "innodb-flushing-lags",
        severity: Warning,
        scope: Database,
        summary: "InnoDB logged long waits or a checkpoint falling behind: flushing cannot keep up",
        fails_when: "a long-wait, page-cleaner or checkpoint-age line in the error log within the last 10 minutes",
        severity_why: "warning: the server noticed a stall, but the log does not say what it cost the queries",
        thresholds: [WINDOW],
    }
}

const WINDOW: Threshold = Threshold {
    key: "window",
    default: 600.0,
    min: 60.0,
    max: 86400.0,
    unit: Unit::Count,
    doc: "seconds back from the snapshot in which a logged stall fails",
};

impl Rule for InnodbFlushingLags {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let log = match &s.db()?.error_log {
            crate::Gathered::Available(l) => l,
            crate::Gathered::Unavailable(why) => {
                return Err(Verdict::insufficient(format!("the error log is not read: {why}")));
            }
        };
        let window = limits.count(&WINDOW) as i64;
        let now = s.taken()?.unix_timestamp();
        let since = now - window;
        let stalls: Vec<&crate::LogEvent> = log
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    LogEventKind::LongWait { .. }
                        | LogEventKind::PageCleanerLag { .. }
                        | LogEventKind::CheckpointAge
                )
            })
            .collect();
        let untimed = stalls.iter().filter(|e| e.at.is_none()).count();
        let recent: Vec<_> = stalls
            .iter()
            .filter(|e| e.at.is_some_and(|t| t >= since))
            .collect();
        let mut evidence = vec![format!(
            "{} ({}): {} stall line(s) in what was read, {} in the last {}",
            crate::display_text(&log.path, 160),
            log.read,
            stalls.len(),
            recent.len(),
            format_secs(window as u64)
        )];
        if recent.is_empty() {
            if untimed > 0 {
                return Err(Verdict::insufficient(format!(
                    "{untimed} stall line(s) without a time the collector could place (the server's time zone was not read): whether they are recent is unknown"
                )));
            }
            return Ok(Verdict::pass(format!(
                "no long InnoDB wait, page-cleaner lag or checkpoint-age line in the last {}",
                format_secs(window as u64)
            ))
            .with_evidence_lines(evidence));
        }
        evidence.extend(recent.iter().rev().take(5).map(|e| e.line.clone()));
        let kinds: std::collections::BTreeSet<&str> = recent.iter().map(|e| e.kind.name()).collect();
        Ok(Verdict::fail(format!(
            "InnoDB logged {} stall line(s) in the last {} ({})",
            recent.len(),
            format_secs(window as u64),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        ))
        .with_evidence_lines(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Gathered, LogEvent, Status,
        testing::{SnapshotBuilder, verdict},
    };

    const NOW: i64 = 1_795_809_600; // 2026-11-27T20:00:00Z

    fn snap(events: Vec<LogEvent>) -> Snapshot {
        let mut s = SnapshotBuilder::new().mariadb("11.8.5-MariaDB").build();
        s.taken_at = Some("2026-11-27T20:00:00Z".into());
        if let Some(db) = s.mariadb.facts.as_mut()
            && let Gathered::Available(l) = &mut db.error_log
        {
            l.events = events;
        }
        s
    }

    fn wait(at: Option<i64>) -> LogEvent {
        LogEvent {
            at,
            kind: LogEventKind::LongWait {
                seconds: Some(153),
                what: "double-write buffer flush".into(),
            },
            line: "2026-11-27 19:58:00 0 [Warning] InnoDB: Long wait (153 seconds) for double-write buffer flush.".into(),
        }
    }

    pub(crate) fn failing_example() -> Snapshot {
        snap(vec![wait(Some(NOW - 120))])
    }

    #[test]
    fn a_recent_stall_fails_an_old_one_passes() {
        let v = verdict(&InnodbFlushingLags, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("1 stall line(s) in the last 10 min"), "{}", v.summary);
        assert!(v.evidence.iter().any(|e| e.contains("double-write")), "{:?}", v.evidence);
        assert_eq!(verdict(&InnodbFlushingLags, &snap(vec![wait(Some(NOW - 601))])).status, Status::Pass);
        assert_eq!(verdict(&InnodbFlushingLags, &snap(vec![])).status, Status::Pass);
        // A line without a time: unknown, not a pass.
        assert_eq!(
            verdict(&InnodbFlushingLags, &snap(vec![wait(None)])).status,
            Status::InsufficientData
        );
        let mut s = snap(vec![]);
        s.mariadb.facts.as_mut().unwrap().error_log = Gathered::Unavailable("log_error is empty".into());
        let v = verdict(&InnodbFlushingLags, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("log_error is empty"));
    }
}
