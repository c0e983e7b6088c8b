use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Verdict,
    counters::{MIN_UPTIME, at_least},
    declare_rule,
};

declare_rule! {
    /// ### What it does
    /// Counts joins that read a joined table without an index: `Select_full_join` (a full scan
    /// of the joined table for each row before it) plus `Select_range_check` (the index chosen
    /// row by row). Fails above {max_per_day} a day (MySQLTuner's 250) with at least
    /// {min_joins} such joins measured, over the sample window when at least {min_selects}
    /// SELECTs ran in it, else since start-up on a server up at least {min_uptime} s (and the
    /// verdict says so). PD701 and PD703 name the statements.
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
        thresholds: [MAX_PER_DAY, MIN_JOINS, MIN_SELECTS, MIN_UPTIME],
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
const MIN_SELECTS: Threshold = Threshold {
    key: "min_selects",
    default: 100.0,
    min: 1.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest SELECTs a window needs to say anything about joins",
};

impl Rule for JoinsWithoutIndex {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let min = limits.count(&MIN_SELECTS);
        let c = db.judged_counts(limits.count(&MIN_UPTIME), |c| {
            Ok(at_least(c.get(StatusVar::ComSelect)?, min, "SELECTs ran"))
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
            Ok(Verdict::fail(format!(
                "{joins} joins read a joined table without an index ({per_day:.0} a day; limit {max:.0})"
            ))
            .with_evidence(evidence))
        } else {
            Ok(Verdict::pass(format!(
                "joins use indexes ({joins} without, {per_day:.0} a day)"
            ))
            .with_evidence(evidence))
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
        // Fewer than min_joins in the window: not a rate.
        assert_eq!(
            verdict(&JoinsWithoutIndex, &server("98")).status,
            Status::Pass
        );
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
