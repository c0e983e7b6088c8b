use super::digest_text::index_columns;
use crate::{
    Digest, Limits, Rule, Snapshot, StatementTotals, Threshold, Unit, Verdict, declare_rule,
    os::pct,
};

declare_rule! {
    /// ### What it does
    /// Reads the statement digests of `performance_schema` (the period is in the evidence:
    /// doctor judges the totals of digests seen in the last 15 minutes, the agent the
    /// difference between two reads) and fails when one statement takes at least {min_time_share} of all
    /// statement time and used no index, or no good index, in more than {min_no_index_share} of its executions
    /// (`SUM_NO_INDEX_USED` + `SUM_NO_GOOD_INDEX_USED` over `COUNT_STAR`). k-NN vector
    /// searches (`ORDER BY VEC_DISTANCE…`) are left out: the server counts each as a no-index
    /// scan although the vector index is used (PD101/PD102 judge them). The share is powerdiag's
    /// own heuristic: MySQLTuner 2.9.1 lists the top 5 digests by `sum_no_index_used`
    /// (`mysqltuner.pl` 12886–12898) and sys's `statements_with_full_table_scans` ranks them,
    /// but neither says when it matters.
    ///
    /// ### Why is this bad?
    /// A statement without a usable index reads every row of its table on each execution, so
    /// its cost grows with the table, not with the result. In the ORM field report (a Django
    /// application, Patchwork), one listing query took more than 4 s until covering indexes
    /// made it about 350× faster. When such a statement is a fifth of the server's statement
    /// time, indexing it is the cheapest large win there is.
    ///
    /// ### Remediation
    /// Run `EXPLAIN` on the statement: take the digest text from the evidence and substitute
    /// real values for each `?`. A `type` of `ALL` (or `index`) with `key` NULL confirms the
    /// scan. Add an index on the columns of its `WHERE` equality conditions first, then its
    /// range or `ORDER BY` column; adding the selected columns makes it covering (the read then
    /// never touches the table rows). Where the digest text shows them, powerdiag names those
    /// columns. In Django, declare it in the model's `Meta.indexes` and create it with a
    /// migration; then re-run powerdiag (after `TRUNCATE
    /// performance_schema.events_statements_summary_by_digest`, or let the agent's next
    /// interval show it).
    pub struct StatementNoIndex {
        code: "PD701",
        name: "statement-no-index",
        severity: Warning,
        scope: Database,
        summary: "a statement with a large share of statement time uses no index",
        fails_when: "a statement with ≥ 20% of statement time used no (good) index in most executions; vector searches excluded *(heuristic)*",
        severity_why: "warning: a scan taking ≥ 20% of statement time makes the server slow down as the table grows under the present load",
        thresholds: [MIN_TIME_SHARE, MIN_NO_INDEX_SHARE],
    }
}

const MIN_TIME_SHARE: Threshold = Threshold {
    key: "min_time_share",
    default: 0.20,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of all statement time a digest must take to be reported",
};
const MIN_NO_INDEX_SHARE: Threshold = Threshold {
    key: "min_no_index_share",
    default: 0.5,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of its executions that used no (good) index: 'most executions'",
};

impl Rule for StatementNoIndex {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        let min_share = limits.get(&MIN_TIME_SHARE);
        let min_no_index = limits.get(&MIN_NO_INDEX_SHARE);
        let candidates: Vec<&Digest> = st
            .judged()
            .filter(|d| d.can_use_index() && !d.is_vector_search())
            .collect();
        if candidates.is_empty() {
            return Err(Verdict::not_applicable(format!(
                "no statement that could use an index ran in the period judged (only vector searches, inserts of values or transaction control; {})",
                st.period_text()
            )));
        }
        let found: Vec<&Digest> = candidates
            .iter()
            .copied()
            .filter(|d| d.time_share(&st.total) >= min_share && d.no_index_share() > min_no_index)
            .collect();
        let period = format!("period: {}", st.period_text());
        let Some(worst) = found.first() else {
            return Ok(Verdict::pass(format!(
                "no statement with {} or more of statement time ran without an index in most executions ({} digests judged)",
                pct(min_share),
                candidates.len()
            ))
            .with_evidence(period));
        };
        let mut v = Verdict::fail(format!(
            "{} with {} or more of statement time {} no index in most executions; the busiest ({}): {}",
            if found.len() == 1 {
                "1 statement".to_owned()
            } else {
                format!("{} statements", found.len())
            },
            pct(min_share),
            if found.len() == 1 { "uses" } else { "use" },
            pct(worst.time_share(&st.total)),
            worst.short_text(100),
        ));
        for d in &found {
            v = v.with_evidence(d.evidence(&st.total));
            // The indexes its tables have (where read): why none served it.
            for line in st.index_lines(d) {
                v = v.with_evidence(line);
            }
            for line in d.sample_lines() {
                v = v.with_evidence(line);
            }
        }
        if let Some(note) = &st.samples_note {
            v = v.with_evidence(note.clone());
        }
        v = v.with_evidence(period);
        Ok(v.with_remediation(remediation(&found, &st.total)))
    }
}

fn remediation(found: &[&Digest], total: &StatementTotals) -> String {
    let mut out = String::new();
    for d in found {
        out.push_str(&format!(
            "EXPLAIN the statement in schema {} ({} of statement time), with a real value for each `?`:\n    EXPLAIN {}\n",
            d.schema_name(),
            pct(d.time_share(total)),
            d.display_text(400)
        ));
        let cols = index_columns(&d.text);
        if let Some(create) = d.plan_index() {
            out.push_str(&format!(
                "  the index its plan lacks (from EXPLAIN of a recent execution: the columns of the condition on the table it reads whole, then its sort): {create}
  add the selected columns to make it covering
"
            ));
        } else if let Some((table, cols)) = cols {
            out.push_str(&format!(
                "  an index to try, from the digest text (equality columns first, then range/ORDER BY): CREATE INDEX ... ON {table} ({});\n  add the selected columns to make it covering\n",
                cols.join(", ")
            ));
        } else {
            out.push_str("  the digest text does not show the filtered columns plainly: choose the index from EXPLAIN's `possible_keys` and the WHERE clause\n");
        }
    }
    out.push_str("then re-run powerdiag after TRUNCATE performance_schema.events_statements_summary_by_digest (or wait for the agent's next interval)");
    out
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

    use crate::rules::examples::scan;

    #[test]
    fn fails_on_a_dominant_scan_and_names_it() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(
                vec![
                    scan(),
                    digest("SELECT * FROM `u` WHERE `id` = ?", 1000, 500_000, 1, 1),
                ],
                1_000_000,
            )
            .build();
        let v = verdict(&StatementNoIndex, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.evidence[0].contains("patchwork_patch") && v.evidence[0].contains("84.2%"),
            "{v:?}"
        );
        let r = v.remediation.unwrap_or_default();
        assert!(
            r.contains("EXPLAIN SELECT")
                && r.contains("ON `patchwork_patch` (`project_id`, `state`, `date`)"),
            "{r}"
        );
    }

    /// The indexes its table has, where the collector read them, are named: none serves
    /// the statement's columns.
    #[test]
    fn names_the_indexes_its_table_has() {
        let d = scan();
        let mut s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![d.clone()], 1_000_000)
            .build();
        let (schema, table) = d.tables().remove(0);
        if let crate::Gathered::Available(st) = &mut s.mariadb.facts.as_mut().unwrap().statements {
            st.tables = vec![crate::Table {
                schema,
                name: table,
                indexes: vec![
                    crate::testing::schema_index("PRIMARY", true, &["id"]),
                    crate::testing::schema_index("k_sub", false, &["submitter_id"]),
                ],
                ..Default::default()
            }];
        }
        let v = verdict(&StatementNoIndex, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.evidence
                .iter()
                .any(|e| e.ends_with(".patchwork_patch has PRIMARY KEY (`id`), KEY `k_sub` (`submitter_id`)")),
            "{v:?}"
        );
    }

    #[test]
    fn passes_when_indexed_or_small() {
        let mut indexed = scan();
        indexed.no_index_used = 0;
        let mut small = scan();
        small.time_us = 10_000;
        for d in [indexed, small] {
            let s = SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .statements(vec![d], 1_000_000)
                .build();
            assert_eq!(verdict(&StatementNoIndex, &s).status, Status::Pass);
        }
    }

    #[test]
    fn vector_searches_are_not_findings() {
        let mut knn = digest(
            "SELECT `id` FROM `docs` ORDER BY VEC_DISTANCE_EUCLIDEAN ( `e` , VEC_FromText (?) ) LIMIT ?",
            1000,
            9_000_000,
            10,
            10,
        );
        knn.no_index_used = 1000;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![knn.clone(), digest("COMMIT", 10, 100, 0, 0)], 0)
            .build();
        assert_eq!(verdict(&StatementNoIndex, &s).status, Status::NotApplicable);
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(
                vec![
                    knn,
                    digest("SELECT * FROM `u` WHERE `id` = ?", 10, 100, 1, 1),
                ],
                0,
            )
            .build();
        assert_eq!(verdict(&StatementNoIndex, &s).status, Status::Pass);
    }

    #[test]
    fn insufficient_without_digests_or_statements() {
        let off = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::PerformanceSchema, "OFF")
            .statements_unavailable("performance_schema is OFF")
            .build();
        let v = verdict(&StatementNoIndex, &off);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("performance_schema is OFF"));
        let idle = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![], 0)
            .build();
        assert_eq!(
            verdict(&StatementNoIndex, &idle).status,
            Status::InsufficientData
        );
        assert_eq!(
            verdict(&StatementNoIndex, &SnapshotBuilder::new().build()).status,
            Status::InsufficientData
        );
    }

}
