use crate::{
    LockKind, LockScan, Limits, MetadataSource, Rule, Snapshot, Threshold, Unit, Verdict,
    SCAN_THREADS_RUNNING, declare_rule, display_text, format_secs,
};

use super::blocking::{chain_lines, kill_line, locks};

declare_rule! {
    /// ### What it does
    /// Looks for sessions queued on a metadata lock (`PROCESSLIST` state `Waiting for table
    /// metadata lock`, and the schema, global-read, backup and flush variants): fails when at
    /// least {min_waiting} sessions wait and the longest has waited more than
    /// {max_metadata_wait} s. The evidence names the DDL that waits, the session holding the
    /// table (often a transaction left open or a long `SELECT`) with its age, and the queue
    /// behind. The holders come from `performance_schema.metadata_locks` when its instrument
    /// is enabled, else `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info`
    /// plugin), else from the sessions' states alone — then the holder is the oldest session that
    /// could hold it, marked *probable*, and the finding says how to get the better source.
    /// powerdiag reads the sessions only when at least 3 statements run (its own included),
    /// which any pile-up of 2 makes true. No peer alerts on this.
    ///
    /// ### Why is this bad?
    /// An `ALTER TABLE` (or `RENAME`, `DROP`, `TRUNCATE`, `CREATE INDEX`, `OPTIMIZE`) needs an
    /// exclusive metadata lock, so it waits for every transaction that has touched the table
    /// to end. While it waits, every new statement on the table — even a plain `SELECT` —
    /// queues behind it. One idle transaction plus one DDL therefore stops all traffic to the
    /// table: connections pile up to `max_connections` and the site goes down, while the
    /// server's CPU is idle.
    ///
    /// ### Remediation
    /// - Unblock now: `KILL <id>` for the holder the finding names (its transaction is rolled
    ///   back and the DDL proceeds), or kill the waiting DDL to release the queue and run it
    ///   later.
    /// - Run DDL with a short wait, so it gives up instead of stopping the table:
    ///   `SET SESSION lock_wait_timeout = 5;` before it, or `ALTER TABLE t WAIT 5 …` /
    ///   `NOWAIT` (MariaDB 10.3+), and retry.
    /// - Prefer online DDL (`ALGORITHM=INSTANT` or `INPLACE, LOCK=NONE`) and run schema
    ///   changes when no long transaction is open (check PD215).
    /// - Let the server end idle transactions: `SET GLOBAL idle_transaction_timeout = 60;`.
    pub struct MetadataLockPileup {
        code: "PD219",
        name: "metadata-lock-pileup",
        severity: Critical,
        scope: Database,
        summary: "sessions are queued on a metadata lock",
        fails_when: "≥ 2 sessions wait for a metadata lock, the longest > 5 s *(heuristic)*",
        severity_why: "critical: sessions are queued now, and every new statement on the table joins the queue",
        thresholds: [MIN_WAITING, MAX_METADATA_WAIT],
    }
}

const MIN_WAITING: Threshold = Threshold {
    key: "min_waiting",
    default: 2.0,
    min: 2.0,
    max: 1e6,
    unit: Unit::Count,
    doc: "sessions waiting for a metadata lock that make a pile-up (at least 2: the agent reads the sessions when 3 statements run)",
};
const MAX_METADATA_WAIT: Threshold = Threshold {
    key: "max_metadata_wait",
    default: 5.0,
    min: 0.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "seconds the longest metadata-lock wait may last (heuristic)",
};

fn is_metadata(k: LockKind) -> bool {
    matches!(k, LockKind::Metadata | LockKind::OtherMetadata)
}

impl Rule for MetadataLockPileup {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let l = locks(s)?;
        let min_waiting = limits.count(&MIN_WAITING);
        let max_wait = limits.get(&MAX_METADATA_WAIT);
        if let LockScan::Quiet {
            threads_running, ..
        } = l.scan
        {
            return Ok(Verdict::pass(format!(
                "no pile-up: {threads_running} statements running (the agent's own included), fewer than the {SCAN_THREADS_RUNNING} a queue of two needs"
            )));
        }
        let mut waits: Vec<_> = l.waits.iter().filter(|w| is_metadata(w.kind)).collect();
        waits.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        let mut waiting: Vec<u64> = waits.iter().map(|w| w.waiter).collect();
        waiting.sort_unstable();
        waiting.dedup();
        let Some(longest) = waits.first() else {
            return Ok(Verdict::pass("no session waits for a metadata lock"));
        };
        let roots: Vec<_> = l
            .roots()
            .into_iter()
            .filter(|r| waits.iter().any(|w| r.queued.contains(&w.waiter)))
            .collect();
        let mut evidence = vec![format!(
            "{} {} for a metadata lock, the longest for {}",
            waiting.len(),
            if waiting.len() == 1 {
                "session waits"
            } else {
                "sessions wait"
            },
            format_secs(longest.seconds.round() as u64)
        )];
        // The DDL at the head of each queue.
        for w in &waits {
            if let Some(sess) = l.session(w.waiter)
                && let Some(st) = &sess.statement
                && l.waits.iter().any(|x| x.blocker == Some(w.waiter))
                && !evidence.iter().any(|e| e.starts_with(&format!("waiting DDL: connection {}", w.waiter)))
            {
                evidence.push(format!(
                    "waiting DDL: connection {} for {}: {}",
                    w.waiter,
                    format_secs(w.seconds.round() as u64),
                    display_text(st, 200)
                ));
            }
        }
        evidence.extend(chain_lines(l, &roots));
        evidence.push(format!("holders from {}", l.metadata_source.describe()));
        if let Ok(t) = s.db().and_then(|db| db.var_u64(crate::Var::LockWaitTimeout)) {
            evidence.push(format!(
                "lock_wait_timeout {}: how long a DDL (and everything queued behind it) waits before it gives up",
                format_secs(t)
            ));
        }
        if l.truncated {
            evidence.push("the read hit its row limit: more sessions wait than shown".into());
        }
        if (waiting.len() as u64) < min_waiting || longest.seconds <= max_wait {
            return Ok(Verdict::pass(format!(
                "{} waiting for a metadata lock, the longest {} (a pile-up is {min_waiting} waiting over {})",
                waiting.len(),
                format_secs(longest.seconds.round() as u64),
                format_secs(max_wait as u64)
            ))
            .with_evidence_lines(evidence));
        }
        let holder = roots
            .first()
            .map(|r| {
                format!(
                    "; {}held by {}",
                    if r.probable { "probably " } else { "" },
                    l.describe_session(r.id)
                )
            })
            .unwrap_or_else(|| "; the holder is not known".into());
        let mut rem: Vec<String> = roots.iter().take(3).map(|r| kill_line(l, r)).collect();
        if roots.is_empty() {
            rem.push("Find the session holding the table: SELECT * FROM information_schema.METADATA_LOCK_INFO; (INSTALL SONAME 'metadata_lock_info'; first) and KILL it.".into());
        }
        if let MetadataSource::Processlist { better } = &l.metadata_source {
            rem.push(format!("To name the holder for certain next time — {better}"));
        }
        rem.push("Then run DDL with a short wait so it gives up instead of stopping the table: SET SESSION lock_wait_timeout = 5; (or ALTER TABLE … WAIT 5 / NOWAIT) and retry; see `powerdiag explain PD219`.".into());
        Ok(Verdict::fail(format!(
            "{} sessions queued on a metadata lock, the longest for {}{holder}",
            waiting.len(),
            format_secs(longest.seconds.round() as u64)
        ))
        .with_evidence_lines(evidence)
        .with_remediation(rem.join("\n")))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Locks, Status,
        rules::examples,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        examples::metadata_pileup(MetadataSource::PerformanceSchema)
    }

    #[test]
    fn a_pile_up_names_the_ddl_and_the_holder() {
        let v = verdict(
            &MetadataLockPileup,
            &examples::metadata_pileup(MetadataSource::PerformanceSchema),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.starts_with("11 sessions queued"), "{v:?}");
        assert!(v.summary.contains("held by connection 9"), "{v:?}");
        let e = v.evidence.join("\n");
        assert!(e.contains("waiting DDL: connection 10"), "{e}");
        assert!(e.contains("ALTER TABLE `orders`"), "{e}");
        assert!(v.remediation.unwrap().starts_with("KILL 9;"));
    }

    #[test]
    fn processlist_only_says_probable_and_how_to_do_better() {
        let v = verdict(
            &MetadataLockPileup,
            &examples::metadata_pileup(MetadataSource::Processlist {
                better: "INSTALL SONAME 'metadata_lock_info';".into(),
            }),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("probably held by connection 9"), "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .contains("INSTALL SONAME 'metadata_lock_info'")
        );
    }

    #[test]
    fn quiet_passes_and_unread_is_insufficient() {
        let quiet = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .locks(Locks {
                scan: LockScan::Quiet {
                    threads_running: 1,
                    row_lock_current_waits: 0,
                },
                ..Default::default()
            })
            .build();
        assert_eq!(verdict(&MetadataLockPileup, &quiet).status, Status::Pass);
        let none = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(
            verdict(&MetadataLockPileup, &none).status,
            Status::InsufficientData
        );
    }
}
