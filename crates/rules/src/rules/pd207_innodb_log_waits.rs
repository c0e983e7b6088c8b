use crate::{
    Evidence, Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::MIN_UPTIME, declare_rule, format_bytes, value::my_cnf_size,
};

use super::fix::restart_with;

declare_rule! {
    /// ### What it does
    /// Counts `Innodb_log_waits`: the times a transaction had to wait because the redo log
    /// buffer (`innodb_log_buffer_size`) was full and had to be written out first. Fails when
    /// more than {max_waits} waits happened over the shortest recent window that decides: one
    /// that saw more waits than that, or wrote at least one log buffer's worth of redo
    /// (`Innodb_lsn_current`'s growth) without them — before that no wait could happen, and
    /// "none" would mean nothing. The agent looks back at most `[sample] max_status_window`;
    /// doctor alone falls back to the counters since start-up of a server up at least
    /// {min_uptime} s, and says so. A wait months ago is history, not a fail now. MySQLTuner flags any wait since start-up; the mysqld mixin alerts above
    /// 10 waits per second.
    ///
    /// ### Why is this bad?
    /// Every wait stalls a committing transaction on a log write it did not ask for. Large
    /// transactions (bulk `INSERT … SELECT`, big `UPDATE`s, BLOB rows) fill the buffer in one
    /// go; each wait then serialises writers behind the log flush.
    ///
    /// ### Remediation
    /// A larger log buffer, which needs a restart (`innodb_log_buffer_size` is read-only at
    /// run time): `innodb_log_buffer_size = N` under `[mariadbd]`, N at least twice the present
    /// size (the finding gives it). It is global memory counted by PD503. Splitting huge
    /// transactions into batches of a few thousand rows helps as well.
    pub struct InnodbLogWaits {
        code: "PD207",
        name: "innodb-log-waits",
        severity: Warning,
        scope: Database,
        summary: "transactions wait for the InnoDB log buffer to be written",
        fails_when: "`Innodb_log_waits` grew over a window that wrote at least one log buffer of redo",
        severity_why: "warning: waits for the log buffer are counted now, but not how long each stalled a commit",
        thresholds: [MAX_WAITS, MIN_UPTIME],
    }
}

const MAX_WAITS: Threshold = Threshold {
    key: "max_waits",
    default: 0.0,
    min: 0.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "Innodb_log_waits over the window (MySQLTuner 2.9.1: > 1 per million log writes since start-up, mysqltuner.pl 12053–12068)",
};

impl Rule for InnodbLogWaits {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let buffer = db.var_u64(Var::InnodbLogBufferSize)?;
        let max_waits = limits.count(&MAX_WAITS);
        // A window decides once it saw more waits than the limit, or a log buffer's worth of
        // redo without them (less redo cannot have filled the buffer).
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            let written = c.get(StatusVar::InnodbLsnCurrent)?;
            let waits = c.get(StatusVar::InnodbLogWaits)?;
            let text = format!(
                "{waits} log waits while {} of redo was written",
                format_bytes(written)
            );
            Ok(if waits > max_waits || written >= buffer {
                Evidence::Decides(text)
            } else {
                Evidence::Undecided(format!(
                    "{text}, less than one log buffer ({})",
                    format_bytes(buffer)
                ))
            })
        })?;
        let waits = c.get(StatusVar::InnodbLogWaits)?;
        let written = c.get(StatusVar::InnodbLsnCurrent)?;
        let evidence = format!(
            "{waits} log waits while {} of redo was written, {}; innodb_log_buffer_size {}",
            format_bytes(written),
            c.describe(),
            format_bytes(buffer)
        );
        Ok(c.stamp(if waits > max_waits {
            let target = buffer.saturating_mul(2).max(64 << 20);
            Verdict::fail(format!(
                "{waits} waits for the log buffer ({}, {:.2} per second)",
                format_bytes(buffer),
                waits as f64 / c.seconds().max(1.0)
            ))
            .with_remediation(restart_with(&[(
                "innodb_log_buffer_size",
                String::new(),
                my_cnf_size(target),
            )]))
        } else {
            Verdict::pass(format!(
                "no transaction waited for the log buffer ({})",
                format_bytes(buffer)
            ))
        }
        .with_evidence(evidence)))
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

    fn server(waits_start: &str, lsn_start: &str) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::InnodbLogWaits, "40")
            .status(StatusVar::InnodbLsnCurrent, "1000000000")
            .window(
                5.0,
                &[
                    (StatusVar::InnodbLogWaits, waits_start),
                    (StatusVar::InnodbLsnCurrent, lsn_start),
                ],
            )
            .build()
    }

    #[test]
    fn verdicts() {
        let v = verdict(&InnodbLogWaits, &server("10", "900000000"));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .contains("innodb_log_buffer_size = 64M")
        );
        assert_eq!(
            verdict(&InnodbLogWaits, &server("40", "900000000")).status,
            Status::Pass
        );
        let v = verdict(&InnodbLogWaits, &server("40", "999999000"));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("less than one log buffer"), "{v:?}");
    }
}
