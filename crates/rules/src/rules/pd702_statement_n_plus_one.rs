use crate::{
    Digest, Limits, Rule, Snapshot, StatementKind, Statements, Threshold, Unit, Verdict,
    declare_rule, os::pct,
};

declare_rule! {
    /// ### What it does
    /// Looks for the N+1 pattern in the statement digests: a *lookup* — a `SELECT` whose
    /// `WHERE` compares something with `= ?` and that sends at most {max_rows_per_call} rows per call —
    /// that runs far more often than the statements around it. It fails when such a digest
    /// ran at least {min_calls} times in the period, at least {min_call_ratio}× as often as its reference statement,
    /// and makes at least {min_call_share} of all statement calls. The reference is the *probable parent*:
    /// the listing (a `SELECT` in the same schema sending several rows per call) whose rows
    /// sent are closest to the lookup's calls — one lookup per listed row — if one is within a
    /// factor of 2; otherwise the busiest other statement of the schema. A lookup that runs
    /// about as often as everything else (a session read per request) does not fail. No peer
    /// flags this pattern; pt-query-digest ranks statements by total time (`--order-by` default
    /// `Query_time:sum`, `bin/pt-query-digest` 16100–16102). All limits are
    /// powerdiag's own heuristics and declared below.
    ///
    /// ### Why is this bad?
    /// An ORM that loads related objects lazily sends one query per row of a listing: each is
    /// fast, but together they cost a round trip, a parse and an execution per row, and the
    /// page gets slower with every row. In the ORM field report (Patchwork) one page ran 177
    /// queries, 99 of them the same per-row lookup, until one JOIN (`select_related`)
    /// replaced them.
    ///
    /// ### Remediation
    /// Fetch the related rows with the listing, in one statement or one batched statement:
    /// in Django `select_related('fk')` (a JOIN, for foreign keys) or `prefetch_related('m2m')`
    /// (one `IN (...)` query); in SQLAlchemy `joinedload()`/`selectinload()`; in Rails
    /// `includes`; in Hibernate/JPA `JOIN FETCH` or an entity graph. Find the code path from
    /// the lookup's digest text and the probable parent statement in the evidence. Django's
    /// `assertNumQueries` in a test keeps it from coming back.
    pub struct StatementNPlusOne {
        code: "PD702",
        name: "statement-n-plus-one",
        severity: Info,
        scope: Database,
        summary: "one per-row lookup runs far more often than the statements around it (N+1 queries)",
        fails_when: "a per-row lookup (`WHERE … = ?`, ≤ 1.5 rows sent) runs ≥ 100 times, ≥ 10× its probable parent listing (or the schema's busiest other statement) and ≥ 20% of all calls *(heuristic)*",
        severity_why: "info: N+1 lookups are counted, but their cost is not measured, so the batched query is advice",
        thresholds: [MIN_CALLS, MIN_CALL_RATIO, MIN_CALL_SHARE, MAX_ROWS_PER_CALL],
    }
}

const MIN_CALLS: Threshold = Threshold {
    key: "min_calls",
    default: 100.0,
    min: 2.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest calls of a lookup in the period to call it N+1",
};
const MIN_CALL_RATIO: Threshold = Threshold {
    key: "min_call_ratio",
    default: 10.0,
    min: 1.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "the lookup's calls over its parent's (or the schema's busiest other statement's)",
};
const MIN_CALL_SHARE: Threshold = Threshold {
    key: "min_call_share",
    default: 0.20,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of all statement calls the lookup makes",
};
const MAX_ROWS_PER_CALL: Threshold = Threshold {
    key: "max_rows_per_call",
    default: 1.5,
    min: 0.0,
    max: 100.0,
    unit: Unit::Number,
    doc: "most rows sent per call for a statement to count as a lookup",
};

/// A SELECT filtering on `= ?` that sends about one row.
fn is_lookup(d: &Digest, max_rows: f64) -> bool {
    let upper = d.text.to_ascii_uppercase();
    d.kind() == StatementKind::Select
        && !d.is_vector_search()
        && upper.contains(" WHERE ")
        && upper.contains("= ?")
        && d.sent_per_call() <= max_rows
}

/// The lookup's probable parent and the calls to compare with: a listing in the same schema
/// whose rows sent are within 2× of the lookup's calls (closest first), else the schema's
/// busiest other statement.
fn reference<'a>(st: &'a Statements, lookup: &Digest, max_rows: f64) -> Option<(&'a Digest, bool)> {
    let same_schema = || {
        st.judged()
            .filter(move |d| d.digest != lookup.digest && d.schema == lookup.schema)
    };
    let parent = same_schema()
        .filter(|d| d.kind() == StatementKind::Select && d.sent_per_call() > max_rows)
        .filter_map(|d| {
            let ratio = d.rows_sent as f64 / lookup.calls as f64;
            (0.5..=2.0)
                .contains(&ratio)
                .then_some((d, (ratio.ln()).abs()))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(d, _)| (d, true));
    parent.or_else(|| {
        same_schema()
            .filter(|d| !is_lookup(d, max_rows))
            .max_by_key(|d| d.calls)
            .map(|d| (d, false))
    })
}

impl Rule for StatementNPlusOne {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        let min_calls = limits.count(&MIN_CALLS);
        let min_ratio = limits.get(&MIN_CALL_RATIO);
        let min_share = limits.get(&MIN_CALL_SHARE);
        let max_rows = limits.get(&MAX_ROWS_PER_CALL);
        let lookups: Vec<&Digest> = st.judged().filter(|d| is_lookup(d, max_rows)).collect();
        if !st.judged().any(|d| d.kind() == StatementKind::Select) {
            return Err(Verdict::not_applicable(format!(
                "no SELECT ran in the period judged, so no per-row lookups ({})",
                st.period_text()
            )));
        }
        let period = format!("period: {}", st.period_text());
        let mut found = Vec::new();
        for l in &lookups {
            let share = l.calls as f64 / st.total.calls.max(1) as f64;
            if l.calls < min_calls || share < min_share {
                continue;
            }
            // A lookup with nothing else in its schema has no "statements around it".
            let Some((r, is_parent)) = reference(st, l, max_rows) else {
                continue;
            };
            let ratio = l.calls as f64 / r.calls.max(1) as f64;
            if ratio >= min_ratio {
                found.push((*l, r, is_parent, ratio, share));
            }
        }
        let Some((l, _, _, _, _)) = found.first() else {
            return Ok(Verdict::pass(format!(
                "no per-row lookup runs {min_ratio}× as often as the statements around it ({} lookup-shaped digest(s) judged)",
                lookups.len()
            ))
            .with_evidence(period));
        };
        let mut v = Verdict::fail(format!(
            "per-row lookup runs {} times ({} of all statement calls): {}",
            l.calls,
            pct(found[0].4),
            l.short_text(100)
        ));
        let mut rem = String::new();
        for (l, r, is_parent, ratio, share) in &found {
            v = v.with_evidence(l.evidence(&st.total));
            let what = if *is_parent {
                format!(
                    "probable parent statement (sent {} rows in {} calls, one lookup per row)",
                    r.rows_sent, r.calls
                )
            } else {
                format!(
                    "busiest other statement of schema {} ({} calls; no listing whose rows match the lookups was found)",
                    r.schema_name(),
                    r.calls
                )
            };
            v = v.with_evidence(format!(
                "{what}: {} — the lookup ran {ratio:.0}× as often, {} of all calls",
                r.short_text(200),
                pct(*share)
            ));
            let with = if *is_parent {
                format!("with its probable parent\n    {}\n", r.short_text(200))
            } else {
                format!(
                    "with the statement that lists those rows (no listing's rows matched the lookup's calls; the schema's busiest other statement is\n    {}\n)\n",
                    r.short_text(200)
                )
            };
            rem.push_str(&format!(
                "load the rows of the lookup\n    {}\n{with}in one statement or one batched statement: Django select_related() (a JOIN) or prefetch_related() (one IN query), SQLAlchemy joinedload()/selectinload(), Rails includes, JPA JOIN FETCH\n",
                l.display_text(200),
            ));
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

    const LOOKUP: &str =
        "SELECT `id` , `name` , `email` FROM `patchwork_person` WHERE `id` = ? LIMIT ?";
    const LISTING: &str = "SELECT `id` , `name` , `submitter_id` FROM `patchwork_patch` WHERE `project_id` = ? ORDER BY `date` DESC LIMIT ?";

    fn page(pages: u64, rows: u64) -> Vec<crate::Digest> {
        vec![
            digest(LISTING, pages, pages * 2000, rows * 10, rows),
            digest(LOOKUP, pages * rows, pages * rows * 100, 1, 1),
            digest(
                "SELECT COUNT ( * ) FROM `patchwork_patch` WHERE `project_id` = ?",
                pages,
                pages * 500,
                1000,
                1,
            ),
        ]
    }

    #[test]
    fn fails_and_names_the_parent() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(page(20, 50), 0)
            .build();
        let v = verdict(&StatementNPlusOne, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("1000 times"), "{v:?}");
        assert!(
            v.evidence[1].contains("probable parent") && v.evidence[1].contains("patchwork_patch"),
            "{v:?}"
        );
        assert!(v.remediation.unwrap_or_default().contains("select_related"));
    }

    #[test]
    fn passes_for_eager_loading_and_per_request_lookups() {
        // After select_related: one JOIN per page.
        let joined = vec![digest(
            "SELECT `p` . `id` , `u` . `name` FROM `patchwork_patch` `p` JOIN `patchwork_person` `u` ON `p` . `submitter_id` = `u` . `id` WHERE `p` . `project_id` = ? LIMIT ?",
            20,
            40_000,
            500,
            50,
        )];
        // A session lookup per request: as often as the request's other statements.
        let session = vec![
            digest(
                "SELECT * FROM `django_session` WHERE `session_key` = ?",
                1000,
                50_000,
                1,
                1,
            ),
            digest(
                "SELECT * FROM `item` WHERE `owner` = ? LIMIT ?",
                1000,
                900_000,
                20,
                20,
            ),
        ];
        for ds in [joined, session] {
            let s = SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .statements(ds, 0)
                .build();
            let v = verdict(&StatementNPlusOne, &s);
            assert_eq!(v.status, Status::Pass, "{v:?}");
        }
    }

    #[test]
    fn other_states() {
        let inserts = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(
                vec![digest("INSERT INTO `t` VALUES (...)", 1000, 1000, 0, 0)],
                0,
            )
            .build();
        assert_eq!(
            verdict(&StatementNPlusOne, &inserts).status,
            Status::NotApplicable
        );
        let off = SnapshotBuilder::new()
            .mariadb("10.11.9-MariaDB")
            .var(Var::PerformanceSchema, "OFF")
            .statements_unavailable("performance_schema is OFF")
            .build();
        assert_eq!(
            verdict(&StatementNPlusOne, &off).status,
            Status::InsufficientData
        );
    }
}
