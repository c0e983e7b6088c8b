use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::Estimate,
    declare_rule, format_bytes,
    os::pct,
    value::my_cnf_size,
};

use super::{fix::set_global, memory::memory_model, memory::MAX_WORST_CASE};

declare_rule! {
    /// ### What it does
    /// Measures the share of internal temporary tables written to disk:
    /// `Created_tmp_disk_tables` / `Created_tmp_tables`, judged over the shortest
    /// recent window whose 95% interval lies on one side of the limit (the agent looks back up
    /// to `[sample] max_status_window`; doctor alone falls back to the counters since start-up
    /// of a server up at least {min_uptime} s, and says so). Fails above {max_disk_share} — MySQLTuner's
    /// limit; PMM's advisor (`mysql_performance_temp_ondisk_table_high.yml`, since start-up,
    /// floored percentage) warns above 1% and errors above 5%, which flags servers where a few
    /// reports with TEXT columns spill by design. PD704 names the statements.
    ///
    /// ### Why is this bad?
    /// A `GROUP BY`, `DISTINCT`, `UNION` or derived table the server cannot answer from an
    /// index is built in a temporary table. Past `tmp_table_size`/`max_heap_table_size` (the
    /// smaller wins) the in-memory table is converted to an on-disk Aria table mid-query: the
    /// rows are copied, and every further row is a page write and read in `tmpdir`. A query that
    /// took milliseconds in memory takes seconds on disk, and many at once saturate the disk
    /// (PD802).
    ///
    /// ### Remediation
    /// First the statements (PD704 lists them): an index matching the `GROUP BY`/`ORDER BY`, or
    /// fewer and shorter columns, removes the temporary table. Otherwise raise both limits
    /// together, since the smaller one wins: `SET GLOBAL tmp_table_size = N; SET GLOBAL
    /// max_heap_table_size = N;` (new connections get them; persist both under
    /// `[mariadbd]`). Each connection may build one such table at once, so the finding sizes N
    /// against RAM with PD503's model.
    pub struct TmpTablesOnDisk {
        code: "PD208",
        name: "tmp-tables-on-disk",
        severity: Warning,
        scope: Database,
        summary: "internal temporary tables spill to disk",
        fails_when: "> 25% of internal temporary tables go to disk over the window (MySQLTuner)",
        severity_why: "warning: spills to disk are measured over the window, but not what they cost the queries",
        thresholds: [MAX_DISK_SHARE, MIN_UPTIME],
    }
}

const MAX_DISK_SHARE: Threshold = Threshold {
    key: "max_disk_share",
    default: 0.25,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Created_tmp_disk_tables / Created_tmp_tables (MySQLTuner 2.9.1: > 25%, mysqltuner.pl 7988; PMM: > 1% warning, > 5% error)",
};

/// Above this MySQLTuner stops recommending larger limits ("already large").
const LARGE: u64 = 256 << 20;

impl Rule for TmpTablesOnDisk {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max = limits.get(&MAX_DISK_SHARE);
        let measure = |c: &crate::Counts<'_>| -> Result<Estimate, Verdict> {
            Ok(Estimate::share(
                c.get(StatusVar::CreatedTmpDiskTables)?,
                c.get(StatusVar::CreatedTmpTables)?,
            ))
        };
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            Ok(Evidence::of(
                &measure(c)?,
                max,
                "temporary tables went to disk",
            ))
        })?;
        let all = c.get(StatusVar::CreatedTmpTables)?;
        let disk = c.get(StatusVar::CreatedTmpDiskTables)?.min(all);
        let share = measure(&c)?.value;
        let tmp = db.var_u64(Var::TmpTableSize)?;
        let heap = db.var_u64(Var::MaxHeapTableSize)?;
        let evidence = format!(
            "{}; tmp_table_size {}, max_heap_table_size {}",
            c.describe(),
            format_bytes(tmp),
            format_bytes(heap)
        );
        if share <= max {
            return Ok(c.stamp(Verdict::pass(format!(
                "{} of temporary tables go to disk (limit {})",
                pct(share),
                pct(max)
            ))
            .with_evidence(evidence)));
        }
        let limit = tmp.min(heap);
        Ok(c.stamp(Verdict::fail(format!(
            "{} of temporary tables go to disk ({disk} of {all}; limit {}): the in-memory limit is {}",
            pct(share),
            pct(max),
            format_bytes(limit)
        ))
        .with_evidence(evidence)
        .with_remediation(remedy(s, limit))))
    }
}

fn remedy(s: &Snapshot, limit: u64) -> String {
    let statements = "PD704 names the statements: an index matching their GROUP BY/ORDER BY, or fewer and shorter columns (no TEXT/BLOB in a grouped result), removes the temporary table.";
    if limit >= LARGE {
        return format!(
            "The in-memory limit is already {}: make the results smaller rather than the limit larger. {statements}",
            format_bytes(limit)
        );
    }
    let mut target = limit.saturating_mul(4).clamp(64 << 20, LARGE);
    let mut note = String::new();
    if let Ok(m) = memory_model(s) {
        // Each connection may hold one: the growth over max_connections must fit.
        let per = m.max_connections.max(1);
        let room_each = m.room(MAX_WORST_CASE.default) / per;
        let fit = limit.saturating_add(room_each) >> 20 << 20;
        if fit < target {
            target = fit;
            note = format!(" (limited by RAM: {})", m.summary());
        }
    }
    if target <= limit {
        return format!("No RAM to raise the limit per connection. {statements}");
    }
    let v = target.to_string();
    let cnf = my_cnf_size(target);
    format!(
        "{statements} Otherwise raise both limits together (the smaller wins), to {}{note}:\n{}",
        format_bytes(target),
        set_global(&[
            ("tmp_table_size", v.clone(), cnf.clone()),
            ("max_heap_table_size", v, cnf),
        ])
    )
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

    fn server(disk_start: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::CreatedTmpTables, "1100")
            .status(StatusVar::CreatedTmpDiskTables, "600")
            .window(
                10.0,
                &[
                    (StatusVar::CreatedTmpTables, "1000"),
                    (StatusVar::CreatedTmpDiskTables, disk_start),
                ],
            )
    }

    #[test]
    fn verdicts() {
        let v = verdict(&TmpTablesOnDisk, &server("550").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(
            fix.contains(
                "SET GLOBAL tmp_table_size = 67108864; SET GLOBAL max_heap_table_size = 67108864;"
            ),
            "{fix}"
        );
        assert_eq!(
            verdict(&TmpTablesOnDisk, &server("590").build()).status,
            Status::Pass
        );
        let large = server("550")
            .var(Var::TmpTableSize, "536870912")
            .var(Var::MaxHeapTableSize, "536870912")
            .build();
        assert!(
            verdict(&TmpTablesOnDisk, &large)
                .remediation
                .unwrap()
                .contains("already 512 MiB")
        );
    }

    #[test]
    fn a_default_idle_server_is_not_judged() {
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::CreatedTmpTables, "3")
            .status(StatusVar::CreatedTmpDiskTables, "2")
            .build();
        assert_eq!(
            verdict(&TmpTablesOnDisk, &s).status,
            Status::InsufficientData
        );
    }
}
