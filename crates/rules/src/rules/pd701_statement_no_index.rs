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
    /// own heuristic: MySQLTuner lists every digest that used no index and sys's
    /// `statements_with_full_table_scans` ranks them, but neither says when it matters.
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
        if let Some((table, cols)) = cols {
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

/// The table and the columns an index would need, when a single-table statement's text shows
/// them: `WHERE` columns compared with `= ?` (or `IN`), then ones compared by range, then the
/// `ORDER BY` columns. `None` for joins, subqueries or no usable `WHERE`/`ORDER BY`.
pub(crate) fn index_columns(text: &str) -> Option<(String, Vec<String>)> {
    let tokens = tokenize(text);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let count = |w: &str| upper.iter().filter(|t| *t == w).count();
    if count("SELECT") > 1 || count("JOIN") > 0 || count("FROM") != 1 {
        return None;
    }
    let from = upper.iter().position(|t| t == "FROM")?;
    let mut table = tokens.get(from + 1)?.clone();
    if tokens.get(from + 2).map(String::as_str) == Some(".") {
        table = format!("{table}.{}", tokens.get(from + 3)?);
    }
    if !table.starts_with('`') || upper.get(from + 2).is_some_and(|t| t == ",") {
        return None;
    }
    let mut eq = Vec::new();
    let mut range = Vec::new();
    let mut order = Vec::new();
    if let Some(w) = upper.iter().position(|t| t == "WHERE") {
        let end = upper[w..]
            .iter()
            .position(|t| matches!(t.as_str(), "GROUP" | "ORDER" | "LIMIT" | "HAVING"))
            .map_or(upper.len(), |e| w + e);
        for i in w + 1..end {
            let t = &tokens[i];
            if !is_ident(t) {
                continue;
            }
            // Skip a qualifier: `t` . `col` keeps `col`.
            if tokens.get(i + 1).map(String::as_str) == Some(".") {
                continue;
            }
            let op = upper.get(i + 1).map(String::as_str).unwrap_or("");
            match op {
                "=" | "IN" | "<=>" => push_unique(&mut eq, t),
                "<" | ">" | "<=" | ">=" | "BETWEEN" | "LIKE" => push_unique(&mut range, t),
                _ => {}
            }
        }
    }
    if let Some(o) = upper.iter().position(|t| t == "ORDER") {
        let end = upper[o..]
            .iter()
            .position(|t| t == "LIMIT")
            .map_or(upper.len(), |e| o + e);
        for i in o + 1..end {
            let t = &tokens[i];
            // A qualifier (`t` . `col`) is not a column.
            if is_ident(t) && tokens.get(i + 1).map(String::as_str) != Some(".") {
                push_unique(&mut order, t);
            }
        }
    }
    let mut cols = eq;
    for c in range.into_iter().chain(order) {
        push_unique(&mut cols, &c);
    }
    (!cols.is_empty()).then_some((table, cols))
}

fn is_ident(t: &str) -> bool {
    t.len() > 2 && t.starts_with('`') && t.ends_with('`')
}

fn push_unique(v: &mut Vec<String>, t: &str) {
    if !v.iter().any(|x| x == t) {
        v.push(t.to_owned());
    }
}

/// Digest text tokens: the server already separates them with spaces; backquoted names stay
/// whole.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in text.chars() {
        if quoted {
            cur.push(c);
            if c == '`' {
                quoted = false;
            }
        } else if c == '`' {
            cur.push(c);
            quoted = true;
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{SnapshotBuilder, digest, verdict};
    use crate::{Status, Var};

    pub(crate) const LISTING: &str = "SELECT `id` , `name` , `state` , `date` FROM `patchwork_patch` WHERE `project_id` = ? AND `state` = ? ORDER BY `date` DESC LIMIT ?";

    pub(crate) fn scan() -> crate::Digest {
        let mut d = digest(LISTING, 200, 8_000_000, 100_000, 50);
        d.no_index_used = 200;
        d
    }

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

    #[test]
    fn index_columns_from_digest_text() {
        assert_eq!(
            index_columns("SELECT COUNT ( * ) FROM `a` . `t` WHERE `t` . `x` IN (...) AND `y` > ?"),
            Some(("`a`.`t`".into(), vec!["`x`".into(), "`y`".into()]))
        );
        assert_eq!(
            index_columns("SELECT * FROM `a` JOIN `b` ON `a` . `id` = `b` . `a`"),
            None
        );
        assert_eq!(index_columns("SELECT * FROM `a`"), None);
        // Django's listing, as MariaDB 11.8 wrote its digest.
        assert_eq!(
            index_columns(
                "SELECT `shop_patch` . `id` , `shop_patch` . `name` FROM `shop_patch` WHERE `shop_patch` . `state` = ? ORDER BY `shop_patch` . `date` DESC , `shop_patch` . `id` DESC LIMIT ?"
            ),
            Some((
                "`shop_patch`".into(),
                vec!["`state`".into(), "`date`".into(), "`id`".into()]
            ))
        );
    }
}
