use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    declare_rule, format_bytes,
    os::pct,
    stats::Estimate,
    value::my_cnf_size,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// On a server that writes a binary log, measures the share of transactions whose binary
    /// log cache spilled to a temporary file: `Binlog_cache_disk_use` / `Binlog_cache_use`,
    /// judged over the shortest recent window whose 95% interval lies on one side of the limit
    /// (the agent looks back up to `[sample] max_status_window`; doctor alone falls back to the
    /// counters since start-up of a server up at least {min_uptime} s, and says so). Fails above
    /// {max_disk_share} — MySQLTuner's limit ("Binlog cache memory access" below 90%) and the
    /// Linuxfabrik monitoring plugin's. The statement cache's counters
    /// (`Binlog_stmt_cache_disk_use`, non-transactional writes) are shown beside it.
    ///
    /// ### Why is this bad?
    /// A transaction's row events are gathered in a per-session cache of `binlog_cache_size`
    /// bytes until it commits; a larger transaction continues in a temporary file in `tmpdir`,
    /// which is written and read back at commit, inside the commit's critical section. Every
    /// spill is I/O on the commit path, and a share of them means the cache is smaller than
    /// the common transaction.
    ///
    /// ### Remediation
    /// If most transactions are small and a few bulk jobs are huge, the bulk jobs spill by
    /// design: split them (commit every few thousand rows), which also helps the replicas.
    /// Otherwise raise the cache, which each session that writes allocates once: `SET GLOBAL
    /// binlog_cache_size = N;` (new sessions get it; persist under `[mariadbd]`).
    pub struct BinlogCacheSpills {
        code: "PD223",
        name: "binlog-cache-spills",
        severity: Warning,
        scope: Database,
        summary: "transactions' binary log cache spills to disk",
        fails_when: "> 10% of transactions' binary log cache spills to a temporary file over the window (MySQLTuner)",
        severity_why: "warning: spills on the commit path are measured over the window, but not what they cost the commits",
        thresholds: [MAX_DISK_SHARE, MIN_UPTIME],
    }
}

const MAX_DISK_SHARE: Threshold = Threshold {
    key: "max_disk_share",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Binlog_cache_disk_use / Binlog_cache_use (MySQLTuner 2.x: \"Binlog cache memory access\" < 90%; Linuxfabrik mysql-binlog-cache: WARN above 10% from disk)",
};

/// The cache suggested at most: each writing session allocates it.
const LARGEST: u64 = 16 << 20;

impl Rule for BinlogCacheSpills {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        if !db.var_bool(Var::LogBin)? {
            return Err(Verdict::not_applicable(
                "the server writes no binary log (log_bin = OFF)",
            ));
        }
        let max = limits.get(&MAX_DISK_SHARE);
        let measure = |c: &crate::Counts<'_>| -> Result<Estimate, Verdict> {
            Ok(Estimate::share(
                c.get(StatusVar::BinlogCacheDiskUse)?,
                c.get(StatusVar::BinlogCacheUse)?,
            ))
        };
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            Ok(Evidence::of(
                &measure(c)?,
                max,
                "transactions' binary log cache spilled to disk",
            ))
        })?;
        let all = c.get(StatusVar::BinlogCacheUse)?;
        let disk = c.get(StatusVar::BinlogCacheDiskUse)?.min(all);
        let share = measure(&c)?.value;
        let size = db.var_u64(Var::BinlogCacheSize)?;
        let mut evidence = vec![format!(
            "{}; binlog_cache_size {}",
            c.describe(),
            format_bytes(size)
        )];
        if let (Ok(sd), Ok(su)) = (
            c.get(StatusVar::BinlogStmtCacheDiskUse),
            c.get(StatusVar::BinlogStmtCacheUse),
        ) {
            evidence.push(format!(
                "statement cache (non-transactional writes): {} of {su} spilled",
                sd.min(su)
            ));
        }
        if share <= max {
            return Ok(c.stamp(
                Verdict::pass(format!(
                    "{} of transactions' binary log cache spills to disk (limit {})",
                    pct(share),
                    pct(max)
                ))
                .with_evidence_lines(evidence),
            ));
        }
        let target = size.saturating_mul(4).clamp(1 << 20, LARGEST);
        let raise = if target > size {
            let v = target.to_string();
            format!(
                " Otherwise raise the cache to {} (each session that writes allocates it once):\n{}",
                format_bytes(target),
                set_global(&[("binlog_cache_size", v, my_cnf_size(target))])
            )
        } else {
            format!(
                " The cache is already {}: make the transactions smaller rather than the cache larger.",
                format_bytes(size)
            )
        };
        Ok(c.stamp(
            Verdict::fail(format!(
                "{} of transactions' binary log cache spills to disk ({disk} of {all}; limit {}): binlog_cache_size is {}",
                pct(share),
                pct(max),
                format_bytes(size)
            ))
            .with_evidence_lines(evidence)
            .with_remediation(format!(
                "Bulk jobs that write many rows in one transaction spill by design: commit every few thousand rows (the replicas apply them sooner too).{raise}"
            )),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn server(disk_start: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB-log")
            .var(Var::LogBin, "ON")
            .var(Var::BinlogCacheSize, "32768")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::BinlogCacheUse, "1100")
            .status(StatusVar::BinlogCacheDiskUse, "600")
            .window(
                10.0,
                &[
                    (StatusVar::BinlogCacheUse, "1000"),
                    (StatusVar::BinlogCacheDiskUse, disk_start),
                ],
            )
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        server("550").build()
    }

    #[test]
    fn verdicts() {
        let v = verdict(&BinlogCacheSpills, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.starts_with("50.0% of transactions' binary log cache spills to disk (50 of 100"), "{}", v.summary);
        let fix = v.remediation.unwrap();
        assert!(fix.contains("SET GLOBAL binlog_cache_size = 1048576;"), "{fix}");
        assert_eq!(verdict(&BinlogCacheSpills, &server("599").build()).status, Status::Pass);
        let off = server("550").var(Var::LogBin, "OFF").build();
        assert_eq!(verdict(&BinlogCacheSpills, &off).status, Status::NotApplicable);
        let big = server("550").var(Var::BinlogCacheSize, "16777216").build();
        assert!(verdict(&BinlogCacheSpills, &big).remediation.unwrap().contains("already 16 MiB"));
    }
}
