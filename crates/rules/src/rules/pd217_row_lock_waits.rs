use crate::{
    Evidence, LockKind, LockScan, Limits, Rule, Severity, Snapshot, StatusVar, Threshold, Unit,
    Verdict, counters::MIN_FAILING_EVENTS, counters::MIN_UPTIME, declare_rule, format_secs,
    statements::format_us,
};

use super::blocking::{chain_lines, kill_line, locks};

declare_rule! {
    /// ### What it does
    /// Measures how long sessions wait for InnoDB row locks, two ways:
    ///
    /// - **now**: the sessions waiting at the read (`INNODB_TRX` in `LOCK WAIT`, with the
    ///   chain from `INNODB_LOCK_WAITS`: who blocks whom). A wait longer than
    ///   {max_row_lock_wait} s fails, naming the session at the root of the queue — critical:
    ///   sessions are queued now.
    /// - **over the window**: `Innodb_row_lock_time` (the time the waits that ended took) and
    ///   `Innodb_row_lock_waits` over the shortest recent window that decides. Fails, as a
    ///   warning, when the time waited per second of wall time is more than {max_wait_share}
    ///   (that many sessions waiting on average: by default one connection's worth of time
    ///   lost to row locks, continuously, whatever the number of connections) or the average
    ///   wait is longer than {max_average_wait} s (waits of milliseconds are ordinary contention;
    ///   half a second means a lock held across something slow). The wait time is counted, not sampled, so a window decides when
    ///   it is under both limits or when at least 10 waits ended; fewer waits over the limits
    ///   are too few to be a pattern. The statements with the most lock time (the digests'
    ///   `SUM_LOCK_TIME`) are shown when digests are read. The agent looks back at most
    ///   `[sample] max_status_window`; doctor alone falls back to the counters since start-up
    ///   of a server up at least {min_uptime} s, and says so.
    ///
    /// Peers: MySQLTuner reports nothing on row locks; PMM graphs `Innodb_row_lock_time`; the
    /// mysqld mixin has no alert. None names the blocker.
    ///
    /// ### Why is this bad?
    /// A row lock is held until its transaction ends. One transaction left open after an
    /// `UPDATE` or a `SELECT … FOR UPDATE` — a client waiting on a user or a remote call
    /// inside its transaction — makes every writer of those rows wait up to
    /// `innodb_lock_wait_timeout` (50 s by default) and then fail with error 1205, while the
    /// connection pool fills with waiting sessions. Hot rows (a counter, a queue head) make
    /// ordinary writers wait for each other, which shows as the share of time waited.
    ///
    /// ### Remediation
    /// End the blocker: `KILL <id>` for the session the finding names (its transaction is
    /// rolled back) — the finding prints the line. Then fix the application:
    ///
    /// - commit promptly: no user think time or remote call inside a transaction;
    /// - keep transactions short and touch rows in a consistent order;
    /// - index the `WHERE` of `UPDATE`/`DELETE`/`SELECT … FOR UPDATE`: without an index
    ///   InnoDB locks every row it scans;
    /// - spread hot rows (one counter row per shard, summed on read);
    /// - let the server end idle transactions: `SET GLOBAL idle_transaction_timeout = 60;`.
    pub struct RowLockWaits {
        code: "PD217",
        name: "row-lock-waits",
        severity: Critical,
        scope: Database,
        summary: "sessions wait for InnoDB row locks",
        fails_when: "a row-lock wait longer than 10 s now (critical), or over the window row-lock waits took > 1 s per second of wall time or > 0.5 s each (warning) *(heuristic)*",
        severity_why: "critical: sessions are queued on a row lock now (a warning when only the window's wait time is high and nothing waits now)",
        thresholds: [MAX_ROW_LOCK_WAIT, MAX_WAIT_SHARE, MAX_AVERAGE_WAIT, MIN_UPTIME],
    }
}

const MAX_ROW_LOCK_WAIT: Threshold = Threshold {
    key: "max_row_lock_wait",
    default: 10.0,
    min: 0.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "seconds a session may wait for a row lock now (heuristic; innodb_lock_wait_timeout is 50 s by default)",
};
const MAX_WAIT_SHARE: Threshold = Threshold {
    key: "max_wait_share",
    default: 1.0,
    min: 0.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "row-lock wait time over the window per second of wall time: sessions waiting on average (heuristic)",
};
const MAX_AVERAGE_WAIT: Threshold = Threshold {
    key: "max_average_wait",
    default: 0.5,
    min: 0.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "seconds per row-lock wait over the window (heuristic)",
};

/// The row-lock waits that ended over a window: how many, their time (ms), that time per
/// second of wall time (sessions waiting on average) and per wait (seconds).
struct Waited {
    waits: u64,
    ms: u64,
    share: f64,
    avg: f64,
}

impl Waited {
    fn over(c: &crate::Counts<'_>) -> Result<Waited, Verdict> {
        let waits = c.get(StatusVar::InnodbRowLockWaits)?;
        let ms = c.get(StatusVar::InnodbRowLockTime)?;
        Ok(Waited {
            waits,
            ms,
            share: ms as f64 / 1000.0 / c.seconds().max(1e-3),
            avg: if waits == 0 {
                0.0
            } else {
                ms as f64 / 1000.0 / waits as f64
            },
        })
    }
}

impl Rule for RowLockWaits {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max_now = limits.get(&MAX_ROW_LOCK_WAIT);
        let max_share = limits.get(&MAX_WAIT_SHARE);
        let max_avg = limits.get(&MAX_AVERAGE_WAIT);
        let mut evidence = Vec::new();

        // Now: the sessions waiting at the read.
        let now = locks(s);
        let mut now_fail = None;
        match &now {
            Ok(l) => match &l.scan {
                LockScan::Quiet {
                    threads_running,
                    row_lock_current_waits,
                } => evidence.push(format!(
                    "no session waits for a row lock now (Innodb_row_lock_current_waits {row_lock_current_waits}, Threads_running {threads_running}: the chain was not read)"
                )),
                LockScan::Read => {
                    let waits = l.waits_of(LockKind::Row);
                    let waiting = l.waiting(LockKind::Row);
                    match waits.first() {
                        None => evidence.push("no session waits for a row lock now".into()),
                        Some(longest) => {
                            evidence.push(format!(
                                "{waiting} {} for a row lock now, the longest for {}",
                                if waiting == 1 { "session waits" } else { "sessions wait" },
                                format_secs(longest.seconds.round() as u64)
                            ));
                            let roots: Vec<_> = l
                                .roots()
                                .into_iter()
                                .filter(|r| {
                                    l.waits.iter().any(|w| {
                                        w.kind == LockKind::Row
                                            && r.queued.contains(&w.waiter)
                                    })
                                })
                                .collect();
                            evidence.extend(chain_lines(l, &roots));
                            if let Ok(t) = db.var_u64(crate::Var::InnodbLockWaitTimeout) {
                                evidence.push(format!(
                                    "innodb_lock_wait_timeout {t} s: a waiter gives up with error 1205 after that long"
                                ));
                            }
                            if longest.seconds > max_now {
                                now_fail = Some((waiting, longest.seconds, roots));
                            }
                        }
                    }
                }
            },
            Err(v) => {
                // Without the chain, the status read still says whether anyone waits now;
                // how long, and for whom, it cannot.
                match db.status_u64(StatusVar::InnodbRowLockCurrentWaits) {
                    Ok(0) => evidence.push(format!(
                        "no session waits for a row lock now (Innodb_row_lock_current_waits 0); {}",
                        v.summary
                    )),
                    Ok(n) => {
                        return Err(Verdict::insufficient(format!(
                            "{n} sessions wait for a row lock now, but how long and for whom is unknown: {}",
                            v.summary
                        )));
                    }
                    Err(_) => return Err(v.clone()),
                }
            }
        }

        // The window: the waits that ended in it.
        let window = s.judge(limits.count(&MIN_UPTIME), |c| {
            let Waited {
                waits,
                ms,
                share,
                avg,
            } = Waited::over(c)?;
            let text = format!(
                "{waits} row-lock waits took {} ({share:.3} sessions waiting on average{})",
                format_us(ms as f64 * 1000.0),
                if waits > 0 {
                    format!(", {} each", format_us(avg * 1e6))
                } else {
                    String::new()
                }
            );
            let over = share > max_share || avg > max_avg;
            Ok(if !over || waits >= MIN_FAILING_EVENTS {
                Evidence::Decides(text)
            } else {
                Evidence::Undecided(format!(
                    "{text}: only {waits} waits, too few to be a pattern ({MIN_FAILING_EVENTS} needed to fail)"
                ))
            })
        });
        let mut window_fail = None;
        let mut basis = None;
        match &window {
            Ok(c) => {
                let Waited {
                    waits,
                    ms,
                    share,
                    avg,
                } = Waited::over(c)?;
                evidence.push(format!(
                    "{waits} row-lock waits ended, {} waited, {}",
                    format_us(ms as f64 * 1000.0),
                    c.describe()
                ));
                if share > max_share || avg > max_avg {
                    window_fail = Some(format!(
                        "row-lock waits took {share:.2} s per second ({share:.2} sessions waiting on average), {} per wait",
                        format_us(avg * 1e6)
                    ));
                }
                basis = Some(c.basis());
            }
            Err(v) => evidence.push(v.summary.clone()),
        }
        if let Ok(st) = db.statements() {
            let mut top: Vec<_> = st.digests.iter().filter(|d| d.lock_time_us > 0).collect();
            top.sort_by_key(|d| std::cmp::Reverse(d.lock_time_us));
            for d in top.iter().take(3) {
                evidence.push(format!(
                    "lock time {} over {} calls ({}): {}",
                    format_us(d.lock_time_us as f64),
                    d.calls,
                    st.period_text(),
                    d.short_text(160)
                ));
            }
        }

        if let Some((waiting, longest, roots)) = now_fail {
            let l = now.as_ref().map_err(Clone::clone)?;
            let who = roots
                .first()
                .map(|r| format!(", blocked by {}", l.describe_session(r.id)))
                .unwrap_or_default();
            let mut rem: Vec<String> = roots.iter().take(3).map(|r| kill_line(l, r)).collect();
            rem.push("Then find why the blocker held its transaction open (commit promptly; no user or remote call inside a transaction) — see `powerdiag explain PD217`.".into());
            return Ok(Verdict::fail(format!(
                "{waiting} {} for a row lock now, the longest for {} (limit {}){who}",
                if waiting == 1 { "session waits" } else { "sessions wait" },
                format_secs(longest.round() as u64),
                format_secs(max_now as u64)
            ))
            .with_evidence_lines(evidence)
            .with_remediation(rem.join("\n")));
        }
        if let Some(summary) = window_fail {
            return Ok(Verdict::fail(summary)
                .with_evidence_lines(evidence)
                .with_basis(basis)
                .at_most(Severity::Warning));
        }
        match (&now, &window) {
            (_, Ok(_)) => Ok(Verdict::pass(format!(
                "no session waits for a row lock longer than {}, and row-lock waits took little time over the window",
                format_secs(max_now as u64)
            ))
            .with_evidence_lines(evidence)
            .with_basis(basis)),
            (_, Err(v)) => {
                let mut v = v.clone();
                v.evidence = evidence;
                Err(v)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        rules::examples,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        examples::row_lock_queue()
    }

    #[test]
    fn a_queue_now_fails_naming_the_idle_blocker() {
        let v = verdict(&RowLockWaits, &examples::row_lock_queue());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("3 sessions wait for a row lock now"), "{v:?}");
        assert!(v.summary.contains("connection 9"), "{v:?}");
        assert!(v.summary.contains("idle in transaction"), "{v:?}");
        let rem = v.remediation.unwrap();
        assert!(rem.starts_with("KILL 9;"), "{rem}");
        let check = crate::evaluate(&examples::row_lock_queue());
        let c = check.checks.iter().find(|c| c.code == "PD217").unwrap();
        assert_eq!(c.severity, Severity::Critical);
    }

    fn window(waits: (&str, &str), ms: (&str, &str), seconds: f64) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "6000")
            .status(StatusVar::InnodbRowLockWaits, waits.1)
            .status(StatusVar::InnodbRowLockTime, ms.1)
            .window(
                seconds,
                &[
                    (StatusVar::InnodbRowLockWaits, waits.0),
                    (StatusVar::InnodbRowLockTime, ms.0),
                ],
            )
            .locks(crate::Locks {
                scan: LockScan::Quiet {
                    threads_running: 1,
                    row_lock_current_waits: 0,
                },
                ..Default::default()
            })
            .build()
    }

    #[test]
    fn the_window_judges_the_time_waited() {
        // 40 waits of 0.8 s in 60 s: 0.8 s per wait, 0.53 sessions waiting on average.
        let s = window(("100", "140"), ("5000", "37000"), 60.0);
        let v = verdict(&RowLockWaits, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let c = crate::evaluate(&s);
        let c = c.checks.iter().find(|c| c.code == "PD217").unwrap();
        assert_eq!(c.severity, Severity::Warning, "nothing waits now");
        // 2,000 waits of 60 ms in 60 s: two sessions waiting on average.
        let v = verdict(&RowLockWaits, &window(("100", "2100"), ("5000", "125000"), 60.0));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("2.00 sessions waiting on average"), "{v:?}");
        // Many short waits: a pass.
        let v = verdict(&RowLockWaits, &window(("100", "400"), ("5000", "5600"), 60.0));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // No wait at all: a pass.
        let v = verdict(&RowLockWaits, &window(("100", "100"), ("5000", "5000"), 60.0));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // Three long waits: too few to call it a pattern.
        let v = verdict(&RowLockWaits, &window(("100", "103"), ("5000", "155000"), 60.0));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("too few"), "{v:?}");
    }

    #[test]
    fn unknown_locks_and_no_window_are_insufficient() {
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(
            verdict(&RowLockWaits, &s).status,
            Status::InsufficientData
        );
    }
}
