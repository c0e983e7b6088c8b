use super::digest_text::{key_column, selected_columns};
use crate::{
    Digest, Limits, Rule, Snapshot, StatementKind, Statements, Threshold, Unit, Verdict,
    declare_rule, os::pct,
};

declare_rule! {
    /// ### What it does
    /// Looks for the signature of N+1 queries in the statement digests: a *per-row statement*
    /// whose calls match the rows another statement sent. The per-row statement is a
    /// `SELECT` keyed by one value (`col = ?`, `? = col` or `col IN ( ? )`) that ran at
    /// least {min_calls} times; its *parent* is a `SELECT` of the same schema whose rows sent over
    /// the same period equal the per-row statement's calls within {match_tolerance} (one call per row the
    /// parent listed), that sends at least {min_fanout} rows per call (the fan-out: a 1+1 is not N+1),
    /// whose first and last executions overlap the per-row statement's, and whose rows can
    /// carry the key (it selects `*`, the key column, an `…_id` column for a lookup by `id`,
    /// or `id` for a lookup by an `…_id` column). Several parents match: the closest wins.
    /// It fails when the pair costs at least {min_time_share} of all statement time. The three ORM
    /// shapes all leave this signature: a forward foreign key (one lookup by `id` per row),
    /// a reverse relation (one `WHERE parent_id = ?` listing per row, several rows each) and
    /// a many-to-many (one join through the link table per row). A hot lookup called once
    /// by many different pages (a cache, a session, a setting) matches no single parent's
    /// rows and passes, however often it runs. No peer flags this pattern; pt-query-digest
    /// ranks statements by total time (`--order-by` default `Query_time:sum`,
    /// `bin/pt-query-digest` 16100–16102). All limits are powerdiag's own heuristics and
    /// declared below.
    ///
    /// ### Why is this bad?
    /// An ORM that loads related objects lazily sends one query per row of a listing: each is
    /// fast, but together they cost a round trip, a parse and an execution per row, and the
    /// page gets slower with every row. In the ORM field report (Patchwork) a page that
    /// listed comments fetched each commenter apart: the person lookup ran 6,874 times beside
    /// 768 comment listings returning 8.95 rows each (768 × 8.95 = 6,874) — a fan-out of 9,
    /// which a test of "runs 10× as often as the statements around it" misses — until one
    /// JOIN (`select_related`) replaced them.
    ///
    /// ### Remediation
    /// Fetch the related rows with the listing, in one statement or one batched statement:
    /// in Django `select_related('fk')` (a JOIN, for foreign keys) or `prefetch_related('m2m')`
    /// (one `IN (...)` query, for reverse relations and many-to-many); in SQLAlchemy
    /// `joinedload()` or `selectinload()`; in Rails `includes`; in Hibernate/JPA `JOIN FETCH`
    /// or an entity graph. Find the code path from the two statements in the evidence: the
    /// loop runs over the parent's rows. Django's `assertNumQueries` in a test keeps it from
    /// coming back.
    pub struct StatementNPlusOne {
        code: "PD702",
        name: "statement-n-plus-one",
        severity: Info,
        scope: Database,
        summary: "a per-row statement runs once for every row another statement sent (N+1 queries)",
        fails_when: "a `SELECT` keyed by one value ran ≥ 100 times, as often as a parent `SELECT` of its schema sent rows (±25%, ≥ 2 rows per parent call), and the pair takes ≥ 5% of statement time *(heuristic)*",
        severity_why: "info: the pair's server time is measured, but the round trips that make N+1 slow are the client's and not seen here",
        thresholds: [MIN_CALLS, MATCH_TOLERANCE, MIN_FANOUT, MIN_TIME_SHARE],
    }
}

const MIN_CALLS: Threshold = Threshold {
    key: "min_calls",
    default: 100.0,
    min: 2.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest calls of the per-row statement in the period to judge it",
};
const MATCH_TOLERANCE: Threshold = Threshold {
    key: "match_tolerance",
    default: 0.25,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "how far the per-row statement's calls may be from its parent's rows sent (an ORM's identity map skips rows it holds; other callers add calls)",
};
const MIN_FANOUT: Threshold = Threshold {
    key: "min_fanout",
    default: 2.0,
    min: 1.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "fewest per-row calls per parent call",
};
const MIN_TIME_SHARE: Threshold = Threshold {
    key: "min_time_share",
    default: 0.05,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of all statement time the per-row statement and its parent take together",
};

/// A `SELECT` keyed by one value: its key column.
fn per_row_key(d: &Digest) -> Option<String> {
    if d.kind() != StatementKind::Select || d.is_vector_search() {
        return None;
    }
    key_column(&d.text)
}

/// Can the parent's rows carry the child's key? Unknown (a text cut before its `FROM`) counts
/// as yes.
fn carries_key(parent: &Digest, key: &str) -> bool {
    let Some(cols) = selected_columns(&parent.text) else {
        return true;
    };
    cols.iter().any(|c| {
        c == "*"
            || c == key
            || (key == "id" && c.ends_with("_id"))
            || (key.ends_with("_id") && c == "id")
    })
}

/// Did the two run over overlapping spans (from their first and last executions' ages)?
/// Unknown ages do not exclude a pair.
fn overlap(a: &Digest, b: &Digest) -> bool {
    match (
        a.first_seen_age_seconds,
        a.last_seen_age_seconds,
        b.first_seen_age_seconds,
        b.last_seen_age_seconds,
    ) {
        (Some(a_first), Some(a_last), Some(b_first), Some(b_last)) => {
            a_last <= b_first && b_last <= a_first
        }
        _ => true,
    }
}

/// One N+1 pair.
struct Pair<'a> {
    child: &'a Digest,
    parent: &'a Digest,
    key: String,
    /// Child calls per parent row sent.
    matched: f64,
    fanout: f64,
    share: f64,
}

/// The closest parent of `child` keyed on `key`.
fn parent_of<'a>(
    st: &'a Statements,
    child: &'a Digest,
    key: String,
    tolerance: f64,
    min_fanout: f64,
) -> Option<Pair<'a>> {
    st.judged()
        .filter(|p| p.digest != child.digest && p.schema == child.schema)
        .filter(|p| p.kind() == StatementKind::Select && p.rows_sent > 0)
        .filter_map(|p| {
            let matched = child.calls as f64 / p.rows_sent as f64;
            let fanout = child.calls as f64 / p.calls.max(1) as f64;
            ((1.0 - tolerance..=1.0 + tolerance).contains(&matched)
                && fanout >= min_fanout
                && overlap(child, p)
                && carries_key(p, &key))
            .then_some((p, matched, fanout))
        })
        .min_by(|a, b| a.1.ln().abs().total_cmp(&b.1.ln().abs()))
        .map(|(parent, matched, fanout)| Pair {
            child,
            parent,
            key,
            matched,
            fanout,
            share: (child.time_share(&st.total) + parent.time_share(&st.total)).min(1.0),
        })
}

impl Rule for StatementNPlusOne {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        let min_calls = limits.count(&MIN_CALLS);
        let tolerance = limits.get(&MATCH_TOLERANCE);
        let min_fanout = limits.get(&MIN_FANOUT);
        let min_share = limits.get(&MIN_TIME_SHARE);
        if !st.judged().any(|d| d.kind() == StatementKind::Select) {
            return Err(Verdict::not_applicable(format!(
                "no SELECT ran in the period judged, so no per-row statements ({})",
                st.period_text()
            )));
        }
        let keyed: Vec<(&Digest, String)> = st
            .judged()
            .filter_map(|d| Some((d, per_row_key(d)?)))
            .collect();
        let judged = keyed.iter().filter(|(d, _)| d.calls >= min_calls).count();
        let mut pairs: Vec<Pair> = Vec::new();
        let mut unmatched: Option<(&Digest, String)> = None;
        for (d, key) in keyed.into_iter().filter(|(d, _)| d.calls >= min_calls) {
            match parent_of(st, d, key.clone(), tolerance, min_fanout) {
                Some(p) => pairs.push(p),
                None if unmatched.as_ref().is_none_or(|(u, _)| u.calls < d.calls) => {
                    unmatched = Some((d, key));
                }
                None => {}
            }
        }
        let period = format!("period: {}", st.period_text());
        let (mut found, small): (Vec<Pair>, Vec<Pair>) =
            pairs.into_iter().partition(|p| p.share >= min_share);
        found.sort_by(|a, b| b.share.total_cmp(&a.share));
        let Some(top) = found.first() else {
            let mut v = Verdict::pass(format!(
                "no statement runs once per row of another ({judged} keyed SELECT(s) with ≥ {min_calls} calls judged)"
            ));
            if let Some((d, key)) = unmatched {
                v = v.with_evidence(format!(
                    "the busiest keyed SELECT ran {} times, but no statement of its schema sent as many rows (±{}, ≥ {min_fanout} per call) that carry `{key}`: {}",
                    d.calls,
                    pct(tolerance),
                    d.short_text(160)
                ));
            }
            if let Some(p) = small.iter().max_by(|a, b| a.share.total_cmp(&b.share)) {
                v = v.with_evidence(format!(
                    "an N+1 pair takes only {} of statement time (below {}): {} runs {:.1} times per call of {}",
                    pct(p.share),
                    pct(min_share),
                    p.child.short_text(120),
                    p.fanout,
                    p.parent.short_text(120)
                ));
            }
            return Ok(v.with_evidence(period));
        };
        let mut v = Verdict::fail(format!(
            "a statement runs once per row of another, {:.1} times per call ({} calls, the pair {} of statement time): {}",
            top.fanout,
            top.child.calls,
            pct(top.share),
            top.child.short_text(100)
        ));
        let mut rem = String::new();
        for p in &found {
            v = v
                .with_evidence(format!("per-row statement: {}", p.child.evidence(&st.total)))
                .with_evidence(format!(
                    "its parent: {} — {} rows sent in {} calls; the per-row statement ran {} times, {:.2} per parent row, keyed on `{}`",
                    p.parent.evidence(&st.total),
                    p.parent.rows_sent,
                    p.parent.calls,
                    p.child.calls,
                    p.matched,
                    p.key
                ));
            rem.push_str(&format!(
                "load the rows of\n    {}\ntogether with its parent's rows\n    {}\nin one statement or one batched statement: Django select_related() (a JOIN, for a foreign key) or prefetch_related() (one IN query, for a reverse relation or a many-to-many), SQLAlchemy joinedload()/selectinload(), Rails includes, JPA JOIN FETCH\n",
                p.child.display_text(200),
                p.parent.short_text(200),
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
    const LISTING: &str = "SELECT `id` , `name` , `submitter_id` FROM `patchwork_comment` WHERE `patch_id` = ? ORDER BY `date` LIMIT ?";

    /// `pages` listings of `fanout` rows, one per-row lookup each, and a COUNT per page.
    fn page(pages: u64, fanout: u64) -> Vec<crate::Digest> {
        vec![
            digest(LISTING, pages, pages * 2000, fanout * 10, fanout),
            digest(LOOKUP, pages * fanout, pages * fanout * 100, 1, 1),
            digest(
                "SELECT COUNT ( * ) FROM `patchwork_patch` WHERE `project_id` = ?",
                pages,
                pages * 500,
                1000,
                1,
            ),
        ]
    }

    fn run(ds: Vec<crate::Digest>) -> Verdict {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(ds, 0)
            .build();
        verdict(&StatementNPlusOne, &s)
    }

    #[test]
    fn fails_at_every_fanout_and_names_the_parent() {
        for fanout in [3, 9, 50] {
            let v = run(page(100, fanout));
            assert_eq!(v.status, Status::Fail, "fan-out {fanout}: {v:?}");
            assert!(
                v.summary
                    .starts_with(&format!("a statement runs once per row of another, {fanout}.0 times per call ({} calls", 100 * fanout)),
                "{v:?}"
            );
            assert!(
                v.evidence[1].starts_with("its parent: ")
                    && v.evidence[1].contains("patchwork_comment")
                    && v.evidence[1].contains("1.00 per parent row, keyed on `id`"),
                "{v:?}"
            );
            assert!(v.remediation.clone().unwrap_or_default().contains("select_related"));
        }
    }

    /// The field report: 768 comment listings of 8.95 rows, 6,874 person lookups — a fan-out
    /// of 9 that the former "10× as often" test passed.
    #[test]
    fn the_field_reports_numbers_fail() {
        let mut listing = digest(LISTING, 768, 768 * 900, 9, 9);
        listing.rows_sent = 6_874;
        let lookup = digest(LOOKUP, 6_874, 6_874 * 80, 1, 1);
        let v = run(vec![listing, lookup]);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains(", 9.0 times per call (6874 calls"), "{v:?}");
    }

    /// A reverse relation (several rows per call) and a many-to-many, as SQLAlchemy and Django
    /// write them.
    #[test]
    fn reverse_relations_and_many_to_many_fail() {
        let authors = digest(
            "SELECT `author` . `id` , `author` . `name` FROM `author` ORDER BY `author` . `id` LIMIT ?",
            200,
            200 * 300,
            9,
            9,
        );
        let books = digest(
            "SELECT `book` . `id` , `book` . `title` , `book` . `author_id` FROM `book` WHERE ? = `book` . `author_id`",
            1_800,
            1_800 * 90,
            4,
            4,
        );
        let v = run(vec![authors, books]);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[1].contains("keyed on `author_id`"), "{v:?}");

        let listing = digest(
            "SELECT `n1_book` . `id` , `n1_book` . `title` FROM `n1_book` ORDER BY `n1_book` . `id` ASC LIMIT ?",
            40,
            40 * 400,
            50,
            50,
        );
        let tags = digest(
            "SELECT `n1_tag` . `id` , `n1_tag` . `name` FROM `n1_tag` INNER JOIN `n1_book_tags` ON ( `n1_tag` . `id` = `n1_book_tags` . `tag_id` ) WHERE `n1_book_tags` . `book_id` = ?",
            2_000,
            2_000 * 120,
            3,
            3,
        );
        let v = run(vec![listing, tags]);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[1].contains("keyed on `book_id`"), "{v:?}");
    }

    #[test]
    fn passes_for_eager_loading_hot_lookups_and_cheap_pairs() {
        // After select_related: one JOIN per page.
        let joined = vec![digest(
            "SELECT `p` . `id` , `u` . `name` FROM `patchwork_patch` `p` JOIN `patchwork_person` `u` ON `p` . `submitter_id` = `u` . `id` WHERE `p` . `project_id` = ? LIMIT ?",
            20,
            40_000,
            500,
            50,
        )];
        assert_eq!(run(joined).status, Status::Pass);
        // A cache lookup once per page, by many pages with listings of their own: however
        // hot, no listing that sends its calls in rows (`news`: 1,500 × 2) carries its key.
        let hot = vec![
            digest("SELECT `value` FROM `cache` WHERE `cache_key` = ?", 3_000, 60_000, 1, 1),
            digest("SELECT `id` , `title` FROM `item` WHERE `owner` = ? LIMIT ?", 1_000, 900_000, 20, 20),
            digest("SELECT `id` , `body` FROM `news` ORDER BY `date` DESC LIMIT ?", 1_500, 300_000, 2, 2),
            digest("SELECT `id` FROM `tag` WHERE `kind` = ?", 500, 50_000, 6, 6),
        ];
        let v = run(hot);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("(3 keyed SELECT(s) with ≥ 100 calls judged)"), "{v:?}");
        assert!(
            v.evidence[0].starts_with("the busiest keyed SELECT ran 3000 times, but no statement of its schema sent as many rows (±25.0%, ≥ 2 per call) that carry `cache_key`"),
            "{v:?}"
        );
        // A session lookup per request beside a listing of one row per request: a 1+1.
        let session = vec![
            digest("SELECT * FROM `django_session` WHERE `session_key` = ?", 1000, 50_000, 1, 1),
            digest("SELECT * FROM `item` WHERE `id` = ? LIMIT ?", 1000, 900_000, 1, 1),
        ];
        assert_eq!(run(session).status, Status::Pass);
        // An N+1 pair beside a statement that takes 99% of the time: named, not failed.
        let mut ds = page(100, 9);
        ds.push(digest("SELECT SLEEP ( ? )", 10, 1_000_000_000, 0, 1));
        let v = run(ds);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.evidence[1].starts_with("an N+1 pair takes only "), "{v:?}");
        // The two never ran at the same time.
        let mut ds = page(100, 9);
        ds[0].first_seen_age_seconds = Some(7200);
        ds[0].last_seen_age_seconds = Some(3600);
        ds[1].first_seen_age_seconds = Some(600);
        assert_eq!(run(ds).status, Status::Pass);
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
