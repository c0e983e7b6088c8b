use crate::{
    Digest, Limits, Rule, Snapshot, StatementKind, Threshold, Unit, Verdict, declare_rule, os::pct,
};

declare_rule! {
    /// ### What it does
    /// Names the statements that write internal temporary tables to disk or sort in merge
    /// passes: a digest with at least {min_time_share} of all statement time where at least {min_disk_share} of the
    /// executions created an on-disk temporary table (`SUM_CREATED_TMP_DISK_TABLES`) or the
    /// executions needed at least {min_merge_passes_per_call} sort merge pass(es) each on average
    /// (`SUM_SORT_MERGE_PASSES`). PD208 (tmp-tables-on-disk) and PD213 (sort-merge-passes) see
    /// the server-wide counters; this rule says which statements cause them. The limits are
    /// powerdiag's own heuristics.
    ///
    /// ### Why is this bad?
    /// A `GROUP BY`, `DISTINCT`, `UNION` or `ORDER BY` the server cannot answer from an index
    /// builds a temporary table; when it outgrows `tmp_table_size`/`max_heap_table_size` (or
    /// holds a BLOB/TEXT column on older servers) it is written to disk, and a sort larger than
    /// `sort_buffer_size` is merged in passes through temporary files. Both turn a memory
    /// operation into I/O on every execution.
    ///
    /// ### Remediation
    /// `EXPLAIN` the statement from its digest text (substitute real values for each `?`):
    /// `Using temporary` and `Using filesort` show the work. Best: an index whose columns
    /// match the `GROUP BY` or `ORDER BY` (after the `WHERE` equality columns), so no
    /// temporary table or sort is needed; or select fewer and shorter columns (no TEXT/BLOB in
    /// a grouped result). Otherwise raise `tmp_table_size` and `max_heap_table_size` together
    /// (the smaller wins) within memory, or `sort_buffer_size` for the session that runs the
    /// statement rather than globally.
    pub struct StatementTempDiskTables {
        code: "PD704",
        name: "statement-temp-disk-tables",
        severity: Info,
        scope: Database,
        summary: "statements write temporary tables to disk or sort in merge passes",
        fails_when: "a statement with ≥ 5% of statement time writes temporary tables to disk in ≥ 10% of executions or needs ≥ 1 sort merge pass per call *(heuristic)*",
        severity_why: "info: it names the statements behind PD208 and PD213; their cost is not measured, so it is advice",
        thresholds: [MIN_TIME_SHARE, MIN_DISK_SHARE, MIN_MERGE_PASSES_PER_CALL],
    }
}

const MIN_TIME_SHARE: Threshold = Threshold {
    key: "min_time_share",
    default: 0.05,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of all statement time a digest must take to be reported",
};
const MIN_DISK_SHARE: Threshold = Threshold {
    key: "min_disk_share",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of its executions that created an on-disk temporary table",
};
const MIN_MERGE_PASSES_PER_CALL: Threshold = Threshold {
    key: "min_merge_passes_per_call",
    default: 1.0,
    min: 0.0,
    max: 1e9,
    unit: Unit::Number,
    doc: "... or sort merge passes per execution",
};

impl Rule for StatementTempDiskTables {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        let min_share = limits.get(&MIN_TIME_SHARE);
        let min_disk = limits.get(&MIN_DISK_SHARE);
        let min_merges = limits.get(&MIN_MERGE_PASSES_PER_CALL);
        let candidates: Vec<&Digest> = st.judged().filter(|d| d.can_use_index()).collect();
        if candidates.is_empty() {
            return Err(Verdict::not_applicable(format!(
                "no statement that could need a temporary table or a sort ran in the period judged ({})",
                st.period_text()
            )));
        }
        let disk_share = |d: &Digest| d.tmp_disk_tables.min(d.calls) as f64 / d.calls.max(1) as f64;
        let merges = |d: &Digest| d.sort_merge_passes as f64 / d.calls.max(1) as f64;
        let found: Vec<&Digest> = candidates
            .iter()
            .copied()
            .filter(|d| {
                d.time_share(&st.total) >= min_share
                    && ((d.tmp_disk_tables > 0 && disk_share(d) >= min_disk)
                        || (d.sort_merge_passes > 0 && merges(d) >= min_merges))
            })
            .collect();
        let period = format!("period: {}", st.period_text());
        let Some(worst) = found.first() else {
            return Ok(Verdict::pass(format!(
                "no statement with {} or more of statement time writes temporary tables to disk or merges sorts ({} digests judged)",
                pct(min_share),
                candidates.len()
            ))
            .with_evidence(period));
        };
        let mut v = Verdict::fail(format!(
            "{} {} temporary tables to disk or merge sorts; the first: {}",
            found.len(),
            if found.len() == 1 {
                "statement writes"
            } else {
                "statements write"
            },
            worst.short_text(100)
        ));
        let mut rem = String::new();
        for d in &found {
            v = v.with_evidence(format!(
                "{}; on-disk temporary tables in {} of executions ({} of {} temporary tables), {:.1} sort merge passes per call",
                d.evidence(&st.total),
                pct(disk_share(d)),
                d.tmp_disk_tables,
                d.tmp_tables,
                merges(d)
            ));
            let upper = d.text.to_ascii_uppercase();
            let clause = if upper.contains("GROUP BY") {
                "GROUP BY"
            } else if upper.contains("ORDER BY") {
                "ORDER BY"
            } else {
                "DISTINCT/UNION"
            };
            rem.push_str(&format!(
                "EXPLAIN {} (substitute a real value for each `?`; look for Using temporary / Using filesort); an index matching its {clause} columns avoids the temporary table{}\n",
                d.display_text(400),
                if d.kind() == StatementKind::Select { "; or select fewer, shorter columns" } else { "" }
            ));
        }
        rem.push_str("otherwise raise tmp_table_size and max_heap_table_size together (the smaller wins), or sort_buffer_size for the session running the statement");
        v = v.with_evidence(period);
        Ok(v.with_remediation(rem))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{SnapshotBuilder, digest, verdict};
    use crate::{Status, Var};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::orm_report()
    }

    const GROUP: &str = "SELECT `state` , COUNT ( * ) FROM `patchwork_patch` GROUP BY `content`";

    #[test]
    fn fails_on_disk_temp_tables() {
        let mut d = digest(GROUP, 100, 3_000_000, 50_000, 40);
        d.tmp_tables = 100;
        d.tmp_disk_tables = 100;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![d], 1_000_000)
            .build();
        let v = verdict(&StatementTempDiskTables, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[0].contains("in 100.0% of executions"), "{v:?}");
        assert!(
            v.remediation
                .unwrap_or_default()
                .contains("GROUP BY columns")
        );
    }

    #[test]
    fn passes_in_memory() {
        let mut d = digest(GROUP, 100, 3_000_000, 50_000, 40);
        d.tmp_tables = 100;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![d], 0)
            .build();
        assert_eq!(verdict(&StatementTempDiskTables, &s).status, Status::Pass);
    }

    #[test]
    fn other_states() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![digest("COMMIT", 100, 100, 0, 0)], 0)
            .build();
        assert_eq!(
            verdict(&StatementTempDiskTables, &s).status,
            Status::NotApplicable
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::PerformanceSchema, "ON")
            .statements_unavailable("no SELECT privilege on performance_schema")
            .build();
        assert_eq!(
            verdict(&StatementTempDiskTables, &s).status,
            Status::InsufficientData
        );
    }
}
