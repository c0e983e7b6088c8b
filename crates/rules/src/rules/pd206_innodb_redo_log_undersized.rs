use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict, counters::MIN_UPTIME,
    declare_rule, format_bytes, os::pct, value::my_cnf_size,
};

use super::fix::{restart_with, set_global};

declare_rule! {
    /// ### What it does
    /// Judges the InnoDB redo log (`innodb_log_file_size`) two ways, after PMM's redo-log
    /// advisor:
    /// - the checkpoint age (`Innodb_checkpoint_age`, read at both ends of the sample window)
    ///   above {max_checkpoint_age} of its maximum (`Innodb_checkpoint_max_age`): InnoDB is
    ///   about to flush pages synchronously to free log space;
    /// - more redo written per hour (`Innodb_lsn_current`'s growth, scaled to an hour) than the
    ///   log holds: the log does not cover an hour of writes, the usual sizing rule.
    ///
    /// The redo rate is measured over a sample window of at least {min_window} s (Percona's
    /// method samples a minute at peak; a one-second burst says little about an hour), or over
    /// the counters since start-up of a server up at least {min_uptime} s, and the verdict says
    /// so. A checkpoint age near its maximum fails whatever the window; with a checkpoint age
    /// in bounds and no rate to judge, the verdict is `insufficient_data`. MySQLTuner's rule
    /// (the log 25% of the buffer pool) is not used: the pool's size says nothing about the
    /// write rate.
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
    /// A larger log: MariaDB 10.9 and later resize it online, `SET GLOBAL
    /// innodb_log_file_size = N;` (persist it as `innodb_log_file_size = N` under
    /// `[mariadbd]`); earlier servers need the my.cnf line and a restart. The finding sizes N
    /// from the measured redo rate (an hour of writes), at least twice the present size. The
    /// log is on disk, not in RAM: only recovery time after a crash grows with it.
    pub struct InnodbRedoLogUndersized {
        code: "PD206",
        name: "innodb-redo-log-undersized",
        severity: Warning,
        scope: Database,
        summary: "the InnoDB redo log is too small for the write rate",
        fails_when: "checkpoint age > 80% of its maximum, or more redo per hour (window ≥ 60 s) than `innodb_log_file_size` (PMM)",
        thresholds: [MAX_CHECKPOINT_AGE, MIN_WINDOW, MIN_UPTIME],
    }
}

const MAX_CHECKPOINT_AGE: Threshold = Threshold {
    key: "max_checkpoint_age",
    default: 0.80,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Innodb_checkpoint_age / Innodb_checkpoint_max_age (PMM: 80%)",
};
const MIN_WINDOW: Threshold = Threshold {
    key: "min_window",
    default: 60.0,
    min: 1.0,
    max: 86_400.0,
    unit: Unit::Count,
    doc: "seconds of sample window needed to measure the redo written per hour (Percona samples 60 s)",
};

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
        let mut problems = Vec::new();
        if age_share > limit_age {
            problems.push(format!(
                "the checkpoint age is {} of its maximum (limit {}): InnoDB flushes synchronously to free log space",
                pct(age_share),
                pct(limit_age)
            ));
        }
        let min_window = limits.get(&MIN_WINDOW);
        let rate = db
            .judged_counts(limits.count(&MIN_UPTIME), |c| {
                // `--sample-window 60s` measures a hair less between the reads' midpoints.
                Ok((c.is_window() && c.seconds() < min_window * 0.98).then(|| {
                    format!("shorter than the {min_window:.0} s needed to measure a redo rate")
                }))
            })
            .and_then(|c| Ok((c.per_second(StatusVar::InnodbLsnCurrent)? * 3600.0, c)));
        let per_hour = match rate {
            Ok((per_hour, c)) => {
                evidence.push(format!(
                    "redo written: {} per hour, {}",
                    format_bytes(per_hour as u64),
                    c.describe()
                ));
                if per_hour > log as f64 {
                    problems.push(format!(
                        "{} of redo per hour is more than the log holds ({})",
                        format_bytes(per_hour as u64),
                        format_bytes(log)
                    ));
                }
                Some(per_hour)
            }
            Err(v) if problems.is_empty() => {
                let mut v = Verdict::insufficient(format!(
                    "the checkpoint age is in bounds ({} of its maximum), but the redo rate could not be judged: {}",
                    pct(age_share),
                    v.summary
                ));
                v.evidence = evidence;
                return Err(v);
            }
            Err(v) => {
                evidence.push(format!("redo rate not judged: {}", v.summary));
                None
            }
        };
        let mut v = if problems.is_empty() {
            Verdict::pass(format!(
                "the redo log ({}) holds more than an hour of writes and the checkpoint age is {} of its maximum",
                format_bytes(log),
                pct(age_share)
            ))
        } else {
            Verdict::fail(format!(
                "the redo log ({}) is too small: {}",
                format_bytes(log),
                problems.join("; ")
            ))
            .with_remediation(remedy(db, log, per_hour))
        };
        v.evidence = evidence;
        Ok(v)
    }
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
    if db.version.at_least(10, 9, 0) {
        format!(
            "{}\n{} is {basis}; MariaDB resizes the log online.",
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
        let v = verdict(
            &InnodbRedoLogUndersized,
            &server("75000000", 1.0, "999000000"),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("synchronously"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(
            fix.starts_with("SET GLOBAL innodb_log_file_size = 268435456;"),
            "{fix}"
        );
    }

    #[test]
    fn an_hour_of_writes_beyond_the_log_fails_and_sizes_the_fix() {
        // 10 MB/s over a minute: 36 GB per hour.
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 60.0, "400000000"));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(fix.contains("an hour of the measured writes"), "{fix}");
    }

    #[test]
    fn a_quiet_minute_passes_and_a_short_window_is_insufficient() {
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 60.0, "999990000"));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let v = verdict(&InnodbRedoLogUndersized, &server("1000", 5.0, "999990000"));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("60 s needed"), "{v:?}");
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
