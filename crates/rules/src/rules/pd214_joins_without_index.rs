use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::{Estimate, Side},
    declare_rule,
};

declare_rule! {
    /// ### What it does
    /// Counts joins that read a joined table without an index: `Select_full_join` (a full scan
    /// of the joined table for each row before it) plus `Select_range_check` (the index chosen
    /// row by row). Fails above {max_per_day} a day (MySQLTuner's 250) with at least
    /// {min_joins} such joins measured (fewer are one report, not a pattern), judged over the shortest
    /// recent window whose 95% interval lies on one side of the limit (the agent looks back up
    /// to `[sample] max_status_window`; doctor alone falls back to the counters since start-up
    /// of a server up at least {min_uptime} s, and says so)
    /// — the rate's Poisson interval: with no such join at all it takes about 22 minutes to
    /// show the rate is below 250 a day. PD701 and PD703 name the statements.
    ///
    /// ### Why is this bad?
    /// A join without an index on the joined column reads the whole joined table once per row
    /// of the driving table (or fills the join buffer and scans it again and again): the cost
    /// grows with the product of the two tables' sizes, so a query that was fast on test data
    /// becomes minutes in production.
    ///
    /// ### Remediation
    /// `EXPLAIN` the statements (PD701/PD703 list them, with their digest text): a joined table
    /// with `type: ALL` and `Using join buffer`, or `Range checked for each record`, needs an
    /// index on its join column(s): `ALTER TABLE t ADD INDEX (col)` (online for InnoDB). Raising
    /// `join_buffer_size` (MySQLTuner's advice) only makes the scans fewer, not cheaper, and
    /// every connection may allocate it (PD503).
    pub struct JoinsWithoutIndex {
        code: "PD214",
        name: "joins-without-index",
        severity: Info,
        scope: Database,
        summary: "joins scan the joined table without an index",
        fails_when: "≥ 10 joins without an index and > 250 a day over the window (MySQLTuner)",
        severity_why: "info: joins without an index are counted, but their cost is not measured, so indexes are advice",
        thresholds: [MAX_PER_DAY, MIN_JOINS, MIN_UPTIME],
    }
}

const MAX_PER_DAY: Threshold = Threshold {
    key: "max_per_day",
    default: 250.0,
    min: 0.0,
    max: 1e12,
    unit: Unit::Number,
    doc: "Select_full_join + Select_range_check per day (MySQLTuner: 250)",
};
const MIN_JOINS: Threshold = Threshold {
    key: "min_joins",
    default: 10.0,
    min: 1.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest joins without an index measured before the rate is judged (one join in a short window is no rate)",
};
impl Rule for JoinsWithoutIndex {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let min_joins = limits.count(&MIN_JOINS);
        let per_second = limits.get(&MAX_PER_DAY) / 86_400.0;
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            let joins = c
                .get(StatusVar::SelectFullJoin)?
                .saturating_add(c.get(StatusVar::SelectRangeCheck)?);
            let e = Estimate::rate(joins, c.seconds());
            let ev = Evidence::of(&e, per_second, "joins without an index");
            Ok(match (e.side(per_second), ev) {
                (Side::Above, Evidence::Decides(t)) if joins < min_joins => Evidence::Undecided(
                    format!("{t}, but fewer than {min_joins} joins are not yet a pattern"),
                ),
                (_, ev) => ev,
            })
        })?;
        let full = c.get(StatusVar::SelectFullJoin)?;
        let range = c.get(StatusVar::SelectRangeCheck)?;
        let joins = full.saturating_add(range);
        let per_day = joins as f64 * 86_400.0 / c.seconds().max(1.0);
        let max = limits.get(&MAX_PER_DAY);
        let evidence = format!(
            "{full} full joins and {range} range-checked joins ({per_day:.0} a day), {}",
            c.describe()
        );
        if joins >= limits.count(&MIN_JOINS) && per_day > max {
            Ok(c.stamp(Verdict::fail(format!(
                "{joins} joins read a joined table without an index ({per_day:.0} a day; limit {max:.0})"
            ))
            .with_evidence(evidence)))
        } else {
            Ok(c.stamp(Verdict::pass(format!(
                "joins use indexes ({joins} without, {per_day:.0} a day)"
            ))
            .with_evidence(evidence)))
        }
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

    fn server(full_start: &str) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::ComSelect, "1000")
            .status(StatusVar::SelectFullJoin, "100")
            .status(StatusVar::SelectRangeCheck, "0")
            .window(
                10.0,
                &[
                    (StatusVar::ComSelect, "500"),
                    (StatusVar::SelectFullJoin, full_start),
                ],
            )
            .build()
    }

    #[test]
    fn verdicts() {
        let v = verdict(&JoinsWithoutIndex, &server("50"));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        // Fewer than min_joins in the window: not yet a pattern.
        assert_eq!(
            verdict(&JoinsWithoutIndex, &server("98")).status,
            Status::InsufficientData
        );
        // None in 10 s proves nothing against 250 a day; none in an hour does.
        assert_eq!(
            verdict(&JoinsWithoutIndex, &server("100")).status,
            Status::InsufficientData
        );
        let mut s = server("100");
        if let crate::Gathered::Available(w) =
            &mut s.mariadb.facts.as_mut().unwrap().status_window
        {
            w.seconds = 3600.0;
        }
        assert_eq!(verdict(&JoinsWithoutIndex, &s).status, Status::Pass);
        let quiet = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "60")
            .status(StatusVar::ComSelect, "5")
            .build();
        assert_eq!(
            verdict(&JoinsWithoutIndex, &quiet).status,
            Status::InsufficientData
        );
    }
}
