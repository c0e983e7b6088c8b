use crate::{Digest, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, os::pct};

declare_rule! {
    /// ### What it does
    /// Fails when a statement with at least {min_time_share} of all statement time reads far more rows
    /// than it returns: at least {min_examined_per_call} rows examined per call **and** more than {min_examined_per_returned} rows
    /// examined per row returned (sent, or changed by an UPDATE/DELETE). Requiring both keeps
    /// apart a report that legitimately reads and returns many rows, a cheap `COUNT(*)` of a
    /// small table (one row sent, few examined), and the statements this is about: a scan
    /// behind a poor index, or a `COUNT()` over a JOIN that reads every row to return one.
    /// k-NN vector searches are left out (PD101/PD102). The limits are powerdiag's own
    /// heuristics; peers rank by rows examined but set no limit.
    ///
    /// ### Why is this bad?
    /// The server's work is the rows it examines, the application's benefit the rows it gets:
    /// a ratio of thousands means nearly all of the work is thrown away, and it grows with the
    /// table. In the ORM field report (Patchwork) `COUNT()` queries over a JOIN for the
    /// pagination of every listing took more than a second each.
    ///
    /// ### Remediation
    /// `EXPLAIN` the statement from its digest text (substitute real values for each `?`) and
    /// compare `rows` with what it returns. A better or covering index lets it read only the
    /// rows it needs. For counts: count from one table with an index on the filter column
    /// rather than over a JOIN, or precompute the count (a counter column kept by the
    /// application, or a summary table) when an exact live count is not needed; many listings
    /// can show "more than N" instead (Django's paginator counts on every page unless given a
    /// cheaper `count`).
    pub struct StatementRowsExaminedHigh {
        code: "PD703",
        name: "statement-rows-examined-high",
        severity: Warning,
        scope: Database,
        summary: "a statement with a large share of time examines far more rows than it returns",
        fails_when: "a statement with ≥ 10% of statement time examines ≥ 10,000 rows per call and > 1,000 per row returned *(heuristic)*",
        severity_why: "warning: a statement taking ≥ 10% of statement time throws away most of its work, likely to grow with the table",
        thresholds: [MIN_TIME_SHARE, MIN_EXAMINED_PER_CALL, MIN_EXAMINED_PER_RETURNED],
    }
}

const MIN_TIME_SHARE: Threshold = Threshold {
    key: "min_time_share",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of all statement time a digest must take to be reported",
};
const MIN_EXAMINED_PER_CALL: Threshold = Threshold {
    key: "min_examined_per_call",
    default: 10_000.0,
    min: 1.0,
    max: 1e15,
    unit: Unit::Count,
    doc: "rows examined per execution",
};
const MIN_EXAMINED_PER_RETURNED: Threshold = Threshold {
    key: "min_examined_per_returned",
    default: 1000.0,
    min: 1.0,
    max: 1e15,
    unit: Unit::Number,
    doc: "rows examined per row sent or changed",
};

fn examined_per_returned(d: &Digest) -> f64 {
    let returned = d.rows_sent.saturating_add(d.rows_affected).max(1);
    d.rows_examined as f64 / returned as f64
}

impl Rule for StatementRowsExaminedHigh {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        let min_share = limits.get(&MIN_TIME_SHARE);
        let min_per_call = limits.get(&MIN_EXAMINED_PER_CALL);
        let min_ratio = limits.get(&MIN_EXAMINED_PER_RETURNED);
        let candidates: Vec<&Digest> = st
            .judged()
            .filter(|d| d.can_use_index() && !d.is_vector_search())
            .collect();
        if candidates.is_empty() {
            return Err(Verdict::not_applicable(format!(
                "no statement that reads rows to answer ran in the period judged ({})",
                st.period_text()
            )));
        }
        let found: Vec<&Digest> = candidates
            .iter()
            .copied()
            .filter(|d| {
                d.time_share(&st.total) >= min_share
                    && d.examined_per_call() >= min_per_call
                    && examined_per_returned(d) > min_ratio
            })
            .collect();
        let period = format!("period: {}", st.period_text());
        let Some(worst) = found.first() else {
            return Ok(Verdict::pass(format!(
                "no statement with {} or more of statement time examines {}+ rows per call and over {} per row returned ({} digests judged)",
                pct(min_share),
                min_per_call,
                min_ratio,
                candidates.len()
            ))
            .with_evidence(period));
        };
        let mut v = Verdict::fail(format!(
            "{} examines {:.0} rows per call for {:.1} returned ({} of statement time)",
            worst.short_text(100),
            worst.examined_per_call(),
            worst.sent_per_call(),
            pct(worst.time_share(&st.total))
        ));
        let mut rem = String::new();
        for d in &found {
            v = v.with_evidence(format!(
                "{}; {:.0} rows examined per row returned",
                d.evidence(&st.total),
                examined_per_returned(d)
            ));
            for line in st.index_lines(d) {
                v = v.with_evidence(line);
            }
            for line in d.sample_lines() {
                v = v.with_evidence(line);
            }
            rem.push_str(&format!(
                "EXPLAIN {}\n  (substitute a real value for each `?`; compare EXPLAIN's rows with the {:.1} rows it returns)\n",
                d.display_text(400),
                d.sent_per_call()
            ));
            let upper = d.text.to_ascii_uppercase();
            if upper.contains("COUNT (") || upper.contains("COUNT(") {
                rem.push_str("  a count that reads every row: count from one indexed table instead of over a JOIN, or precompute it (a counter column or summary table) where an exact live count is not needed\n");
            } else if let Some(create) = d.plan_index() {
                rem.push_str(&format!(
                    "  the index its plan lacks (from EXPLAIN of a recent execution): {create}\n"
                ));
            } else if let Some((table, cols)) =
                super::digest_text::index_columns(&d.text)
            {
                rem.push_str(&format!(
                    "  an index to try, from the digest text: CREATE INDEX ... ON {table} ({});\n",
                    cols.join(", ")
                ));
            }
        }
        if let Some(note) = &st.samples_note {
            v = v.with_evidence(note.clone());
        }
        v = v.with_evidence(period);
        Ok(v.with_remediation(rem.trim_end().to_owned()))
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

    const COUNT: &str = "SELECT COUNT ( * ) AS `__count` FROM `patchwork_patch` INNER JOIN `patchwork_project` ON ( `patchwork_patch` . `project_id` = `patchwork_project` . `id` ) WHERE `patchwork_project` . `linkname` = ?";

    #[test]
    fn fails_on_a_count_over_a_join() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![digest(COUNT, 50, 60_000_000, 200_000, 1)], 10_000_000)
            .build();
        let v = verdict(&StatementRowsExaminedHigh, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("200000 rows per call"), "{v:?}");
        assert!(v.remediation.unwrap_or_default().contains("precompute"));
    }

    #[test]
    fn passes_for_reports_and_small_counts() {
        for d in [
            digest(
                "SELECT * FROM `t` WHERE `a` > ?",
                10,
                5_000_000,
                50_000,
                50_000,
            ),
            digest("SELECT COUNT ( * ) FROM `t`", 10, 5_000_000, 900, 1),
        ] {
            let s = SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .statements(vec![d], 0)
                .build();
            assert_eq!(verdict(&StatementRowsExaminedHigh, &s).status, Status::Pass);
        }
    }

    #[test]
    fn other_states() {
        let knn = digest(
            "SELECT `id` FROM `d` ORDER BY VEC_DISTANCE_COSINE ( `e` , ? ) LIMIT ?",
            10,
            5_000_000,
            10,
            10,
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![knn], 0)
            .build();
        assert_eq!(
            verdict(&StatementRowsExaminedHigh, &s).status,
            Status::NotApplicable
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::PerformanceSchema, "ON")
            .statements_unavailable("the statements_digest consumer is disabled")
            .build();
        assert_eq!(
            verdict(&StatementRowsExaminedHigh, &s).status,
            Status::InsufficientData
        );
    }
}
