use crate::{
    Basis, Counts, Evidence, Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::MIN_UPTIME, declare_rule, format_bytes, format_secs, os::pct, value::my_cnf_size,
};

use super::fix::{restart_with, set_global};

declare_rule! {
    /// ### What it does
    /// Judges the InnoDB redo log (`innodb_log_file_size`) by the checkpoint age
    /// (`Innodb_checkpoint_age`, the larger of the window's reads) against its maximum
    /// (`Innodb_checkpoint_max_age`). InnoDB's page cleaner flushes ahead from 7/8 of it —
    /// a busy server on a small log sits there, which costs write combining but stalls nothing
    /// — and makes writers wait for synchronous flushing from 15/16 (`max_modified_age_sync`
    /// in `log0log.cc`; MariaDB 10.5+ waits at the maximum itself). Fails above
    /// {max_checkpoint_age}: the stall is imminent. Also fails when the log holds less than
    /// {min_log_seconds} s of the write rate measured over the shortest recent window in which
    /// it wrapped (wrote more redo than the log's size): InnoDB then checkpoints, and flushes
    /// pages for it, continuously (a heuristic; the 96 MiB default holds ~2 min under a 4-thread
    /// sysbench `oltp_read_write`). PMM's advisor errors at 80% in more than
    /// one sample (`innodb_redo_logs_not_sized_correctly.yml`), which fires on every busy
    /// server with the default 96 MiB log, sitting at ~88%.
    ///
    /// The usual sizing rule — the log holds an hour of writes (PMM warns when more than 5% of
    /// the last week's hourly increases exceed it) — is shown as evidence and sizes the fix,
    /// but is advice, not a fail: the hour is measured, never extrapolated (a window of at
    /// most an hour that wrote more than the log; doctor falls back to the average hour since
    /// start-up of a server up at least {min_uptime} s, and says so). MySQLTuner's rule (the
    /// log 25% of the buffer pool) is not used: the pool's size says nothing about the write
    /// rate.
    ///
    /// ### Why is this bad?
    /// InnoDB can only reuse redo log space once the pages it describes are flushed. When the
    /// checkpoint age reaches about 7/8 of the log, InnoDB stops and flushes synchronously
    /// ("furious flushing"): writes stall, and throughput falls in saw-teeth exactly at the
    /// busiest moment. A log that holds less than an hour of writes also throws away the
    /// write-combining a larger log gives (a hot page is written once per checkpoint, not once
    /// per change).
    ///
    /// ### Remediation
    /// A larger log: `innodb_log_file_size = N` under `[mariadbd]` and a restart. MariaDB 10.9
    /// and later can also resize it online with `SET GLOBAL innodb_log_file_size = N;`, but
    /// that resize could leave an unrecoverable log after a crash during it (MDEV-34750), so
    /// the finding advises it only on releases with that fix. The finding sizes N
    /// from the measured redo rate (an hour of writes), at least twice the present size. The
    /// log is on disk, not in RAM: only recovery time after a crash grows with it.
    pub struct InnodbRedoLogUndersized {
        code: "PD206",
        name: "innodb-redo-log-undersized",
        severity: Warning,
        scope: Database,
        summary: "the InnoDB redo log is too small for the write rate",
        fails_when: "checkpoint age > 15/16 of its maximum, or the log holds < 60 s of the writes of a recent window in which it wrapped *(heuristic)*; the hour of redo is advice",
        severity_why: "warning: a checkpoint age near its maximum, or a log that wraps within a minute, means writers are about to wait or pages are flushed continuously under the present load",
        thresholds: [MAX_CHECKPOINT_AGE, MIN_LOG_SECONDS, MIN_UPTIME],
    }
}

const MIN_LOG_SECONDS: Threshold = Threshold {
    key: "min_log_seconds",
    default: 60.0,
    min: 1.0,
    max: 86_400.0,
    unit: Unit::Count,
    doc: "seconds of the measured write rate the log must hold, over a recent window in which it wrapped (heuristic)",
};

const MAX_CHECKPOINT_AGE: Threshold = Threshold {
    key: "max_checkpoint_age",
    default: 0.9375,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Innodb_checkpoint_age / Innodb_checkpoint_max_age: InnoDB's synchronous flush point, 15/16 (PMM: 80%, where a busy server on the default log sits normally)",
};
/// The sizing rule's hour.
const HOUR: f64 = 3600.0;

/// The redo written over `c` against an hour of log: a window up to an hour that wrote more
/// than the log decides a fail; a pass needs a whole hour (2% slack for the reads' timing);
/// the counters since start-up give their average hour.
fn redo_hour(c: &Counts<'_>, log: u64) -> Result<(Evidence, f64), Verdict> {
    let written = c.get(StatusVar::InnodbLsnCurrent)?;
    let seconds = c.seconds().max(1e-3);
    Ok(match c.basis() {
        Basis::SinceStartup { .. } | Basis::SinceBoot => {
            let per_hour = written as f64 * HOUR / seconds.max(HOUR);
            (
                Evidence::Decides(format!(
                    "{} of redo in an average hour",
                    format_bytes(per_hour as u64)
                )),
                per_hour,
            )
        }
        Basis::Window { .. } => {
            let text = format!(
                "{} of redo written in {}",
                format_bytes(written),
                format_secs(seconds.round() as u64)
            );
            if written > log || seconds >= HOUR * 0.98 {
                (Evidence::Decides(text), written as f64)
            } else {
                (
                    Evidence::Undecided(format!(
                        "{text}, less than the log holds, and a pass needs a whole hour"
                    )),
                    written as f64,
                )
            }
        }
    })
}

impl Rule for InnodbRedoLogUndersized {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let log = db.var_u64(Var::InnodbLogFileSize)?;
        let max_age = db.status_u64(StatusVar::InnodbCheckpointMaxAge)?;
        let age_end = db.status_u64(StatusVar::InnodbCheckpointAge)?;
        let age_start = db
            .window_counts()
            .ok()
            .and_then(|c| c.start_value(StatusVar::InnodbCheckpointAge));
        let age = age_end.max(age_start.unwrap_or(0));
        let age_share = age as f64 / max_age.max(1) as f64;
        let limit_age = limits.get(&MAX_CHECKPOINT_AGE);
        let mut evidence = vec![format!(
            "checkpoint age {} of its maximum {} ({}{}); innodb_log_file_size {}",
            format_bytes(age),
            format_bytes(max_age),
            pct(age_share),
            if age_start.is_some() {
                ", the larger of the window's two reads"
            } else {
                ""
            },
            format_bytes(log)
        )];
        // The hour of redo: sizing advice, shown and used to size the fix, never a fail on
        // its own (a busy server on the default log writes more than it holds in an hour
        // without any stall).
        let judged = s
            .judge(limits.count(&MIN_UPTIME), |c| Ok(redo_hour(c, log)?.0))
            .and_then(|c| Ok((redo_hour(&c, log)?.1, c)));
        let per_hour = match judged {
            Ok((per_hour, c)) => {
                evidence.push(format!(
                    "redo: {}{}",
                    c.describe(),
                    if per_hour > log as f64 {
                        " — more than the log holds: sizing advice (the usual rule is an hour of writes), not harm on its own"
                    } else {
                        ""
                    }
                ));
                Some(per_hour)
            }
            Err(v) => {
                evidence.push(format!("the last hour's redo not judged: {}", v.summary));
                None
            }
        };
        // The log wrapping within a minute: the shortest recent window that wrote more redo
        // than the log holds, and how many seconds of that rate the log holds.
        let min_secs = limits.get(&MIN_LOG_SECONDS);
        let mut wraps = None;
        for w in db.windows().unwrap_or_default() {
            let written = w.get(StatusVar::InnodbLsnCurrent)?;
            if written > log {
                let holds = log as f64 * w.seconds() / written as f64;
                evidence.push(format!(
                    "the log wrapped {:.1} times {}: it holds {holds:.1} s of writes at that rate",
                    written as f64 / log.max(1) as f64,
                    w.describe()
                ));
                wraps = Some((holds, w.basis()));
                break;
            }
        }
        let mut problems = Vec::new();
        if age_share > limit_age {
            problems.push(format!(
                "the checkpoint age is {} of its maximum (limit {}): InnoDB is about to make writers wait for page flushes to free log space",
                pct(age_share),
                pct(limit_age)
            ));
        }
        let mut basis = None;
        if let Some((holds, b)) = wraps.filter(|(h, _)| *h < min_secs) {
            problems.push(format!(
                "it holds only {holds:.1} s of the present writes (limit {min_secs:.0} s): InnoDB checkpoints and flushes continuously"
            ));
            basis = Some(b);
        }
        let mut v = if !problems.is_empty() {
            Verdict::fail(format!(
                "the redo log ({}) is too small: {}",
                format_bytes(log),
                problems.join("; ")
            ))
            .with_remediation(remedy(db, log, per_hour))
            .with_basis(basis)
        } else {
            Verdict::pass(format!(
                "the checkpoint age is {} of its maximum (limit {}): writes do not wait for the redo log ({})",
                pct(age_share),
                pct(limit_age),
                format_bytes(log)
            ))
        };
        v.evidence = evidence;
        Ok(v)
    }
}

/// The first release of each series with MDEV-34750's fix (commit 984606d747 on 10.11, in
/// 10.11.10 of November 2024, merged up into 11.2.6 and 11.4.4). Series not listed (11.0,
/// 11.1, 11.3, 11.5–11.7) get the restart advice: their fixed releases are not verified.
const MDEV_34750_FIXED: &[(u32, u32, u32)] = &[(10, 11, 10), (11, 2, 6), (11, 4, 4)];
/// Every series from this one on has the fix from its first release.
const MDEV_34750_FIXED_FROM: (u32, u32, u32) = (11, 8, 0);

/// Whether `SET GLOBAL innodb_log_file_size` is safe: online resizing arrived in 10.9, and
/// a crash during it could leave a log that recovery refuses until MDEV-34750's fix.
fn online_resize_is_safe(v: &crate::ServerVersion) -> bool {
    MDEV_34750_FIXED
        .iter()
        .any(|&(major, minor, patch)| v.major == major && v.minor == minor && v.at_least(major, minor, patch))
        || v.at_least(MDEV_34750_FIXED_FROM.0, MDEV_34750_FIXED_FROM.1, MDEV_34750_FIXED_FROM.2)
}

fn remedy(db: &crate::MariadbFacts, log: u64, per_hour: Option<f64>) -> String {
    let want = (per_hour.unwrap_or(0.0) as u64).max(log.saturating_mul(2));
    // Whole 256 MiB steps.
    let step = 256u64 << 20;
    let target = want.div_ceil(step).max(1).saturating_mul(step);
    let items = [(
        "innodb_log_file_size",
        target.to_string(),
        my_cnf_size(target),
    )];
    let basis = if per_hour.is_some_and(|r| r as u64 > log.saturating_mul(2)) {
        "an hour of the measured writes"
    } else {
        "twice the present size"
    };
    if online_resize_is_safe(&db.version) {
        format!(
            "{}\n{} is {basis}; this release resizes the log online, crash-safely (MDEV-34750 is fixed in it).",
            set_global(&items),
            format_bytes(target)
        )
    } else {
        format!(
            "{} ({basis}) {}",
            format_bytes(target),
            restart_with(&items)
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    fn server(age: &str, window: f64, lsn_start: &str) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::InnodbCheckpointMaxAge, "80819529")
            .status(StatusVar::InnodbCheckpointAge, age)
            .status(StatusVar::InnodbLsnCurrent, "1000000000")
            .window(window, &[(StatusVar::InnodbLsnCurrent, lsn_start)])
            .build()
    }

    #[test]
    fn a_checkpoint_age_near_its_maximum_fails_whatever_the_window() {
        // 95% of 77.1 MiB: writers are about to wait.
        let v = verdict(
            &InnodbRedoLogUndersized,
            &server("76800000", 1.0, "999000000"),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("writers wait"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(
            fix.starts_with("SET GLOBAL innodb_log_file_size = 268435456;"),
            "{fix}"
        );
        // 88%, where InnoDB's page cleaner keeps a busy server on a small log: normal.
        let v = verdict(
            &InnodbRedoLogUndersized,
            &server("71000000", 1.0, "999000000"),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn an_hour_of_writes_beyond_the_log_is_advice() {
        // 200 MiB in 10 minutes against a 96 MiB log: more than the log in the window (sizing
        // advice), but the log holds ~5 min of that rate — no fail.
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 600.0, "790284800"));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(
            v.evidence.iter().any(|e| e.contains("sizing advice")),
            "{v:?}"
        );
    }

    #[test]
    fn a_log_that_wraps_within_a_minute_fails_and_sizes_the_fix() {
        // 572 MiB in one minute against a 96 MiB log: it holds 10 s of writes.
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 60.0, "400000000"));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("holds only 10.1 s"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(fix.contains("an hour of the measured writes"), "{fix}");
    }

    #[test]
    fn a_short_window_does_not_extrapolate_the_hour() {
        // 50 MiB in one minute (3 GiB an hour if scaled): the hour is not judged.
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 60.0, "947571200"));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(
            v.evidence
                .iter()
                .any(|e| e.contains("not judged") && e.contains("a pass needs a whole hour")),
            "{v:?}"
        );
    }

    #[test]
    fn online_resizing_is_advised_only_with_mdev_34750_fixed() {
        let safe = |v: &str| {
            online_resize_is_safe(&crate::ServerVersion::parse(v, "mariadb.org binary distribution").unwrap())
        };
        assert!(!safe("10.11.9-MariaDB") && safe("10.11.10-MariaDB"));
        assert!(!safe("11.4.3-MariaDB") && safe("11.4.4-MariaDB"));
        assert!(!safe("11.2.5-MariaDB") && safe("11.2.6-MariaDB"));
        assert!(safe("11.8.1-MariaDB") && safe("12.0.2-MariaDB"));
        assert!(!safe("11.7.2-MariaDB") && !safe("10.6.20-MariaDB"));
    }

    #[test]
    fn before_10_9_the_fix_needs_a_restart() {
        let s = SnapshotBuilder::new()
            .mariadb("10.6.20-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::InnodbCheckpointMaxAge, "80819529")
            .status(StatusVar::InnodbCheckpointAge, "80000000")
            .status(StatusVar::InnodbLsnCurrent, "1")
            .build();
        let v = verdict(&InnodbRedoLogUndersized, &s);
        assert!(v.remediation.unwrap().contains("restart"));
        let s = SnapshotBuilder::new().mariadb("10.6.20-MariaDB").build();
        assert_eq!(
            verdict(&InnodbRedoLogUndersized, &s).status,
            Status::InsufficientData
        );
    }
}
