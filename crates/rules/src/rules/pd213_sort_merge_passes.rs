use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::{Estimate, Side},
    declare_rule, format_bytes,
    os::pct,
    value::my_cnf_size,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Measures the sorts that did not fit `sort_buffer_size` and were merged through
    /// temporary files: `Sort_merge_passes` / (`Sort_scan` + `Sort_range`), judged over the shortest
    /// recent window whose 95% interval lies on one side of the limit (the agent looks back up
    /// to `[sample] max_status_window`; doctor alone falls back to the counters since start-up
    /// of a server up at least {min_uptime} s, and says so) (the passes per sort are counted
    /// like a rate: a Poisson interval per sort). Fails above {max_merge_share}
    /// (MySQLTuner's "sorts requiring temporary tables"). PD704 names the statements.
    ///
    /// ### Why is this bad?
    /// A sort larger than the sort buffer writes sorted runs to a file in `tmpdir` and merges
    /// them, pass after pass: an in-memory `ORDER BY` becomes disk I/O on each execution, and
    /// the query's time grows with the number of passes.
    ///
    /// ### Remediation
    /// First avoid the sort: an index whose columns match the `ORDER BY` (after the `WHERE`
    /// equality columns) returns rows in order, and a `LIMIT` lets the server stop early. A
    /// statement that must sort much can raise the buffer for itself: `SET SESSION
    /// sort_buffer_size = …` before it. Keep the global value at MariaDB's default (2 MiB):
    /// every connection may allocate it (PD503); when the global value is below the default
    /// the finding gives the `SET GLOBAL` that restores it.
    pub struct SortMergePasses {
        code: "PD213",
        name: "sort-merge-passes",
        severity: Info,
        scope: Database,
        summary: "sorts spill to temporary files and merge in passes",
        fails_when: "> 0.10 sort merge passes per sort over the window (MySQLTuner)",
        severity_why: "info: merge passes are measured, but their cost is not, so sort_buffer_size and indexes are advice",
        thresholds: [MAX_MERGE_SHARE, MIN_UPTIME],
    }
}

const MAX_MERGE_SHARE: Threshold = Threshold {
    key: "max_merge_share",
    default: 0.10,
    min: 0.0,
    max: 10.0,
    unit: Unit::Number,
    doc: "Sort_merge_passes / (Sort_scan + Sort_range) (MySQLTuner: 10%); a sort may need several passes, so this can exceed 1",
};
/// MariaDB's default `sort_buffer_size`.
const DEFAULT_SORT_BUFFER: u64 = 2 << 20;

impl Rule for SortMergePasses {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let sorts = |c: &crate::Counts<'_>| -> Result<u64, Verdict> {
            Ok(c.get(StatusVar::SortScan)?
                .saturating_add(c.get(StatusVar::SortRange)?))
        };
        let max = limits.get(&MAX_MERGE_SHARE);
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            let n = sorts(c)?;
            let passes = c.get(StatusVar::SortMergePasses)?;
            // Passes per sort: a Poisson count with the sorts as its exposure.
            if n == 0 {
                return Ok(Evidence::Undecided("no sort ran".into()));
            }
            let e = Estimate::rate(passes, n as f64);
            let text = format!(
                "{passes} merge passes for {n} sorts: {:.3} per sort (95% interval {:.3}–{:.3})",
                e.value, e.low, e.high
            );
            Ok(if e.side(max) == Side::Straddles {
                Evidence::Undecided(format!("{text}, which includes the limit {max}"))
            } else {
                Evidence::Decides(text)
            })
        })?;
        let n = sorts(&c)?;
        let passes = c.get(StatusVar::SortMergePasses)?;
        let share = passes as f64 / n.max(1) as f64;
        let buffer = db.var_u64(Var::SortBufferSize)?;
        let evidence = format!(
            "{passes} merge passes for {n} sorts ({:.2} per sort), {}; sort_buffer_size {}",
            share,
            c.describe(),
            format_bytes(buffer)
        );
        if share <= max {
            return Ok(c.stamp(Verdict::pass(format!(
                "{} merge passes per sort (limit {})",
                pct(share),
                pct(max)
            ))
            .with_evidence(evidence)));
        }
        let mut rem = String::from(
            "PD704 names the statements: an index matching their ORDER BY avoids the sort, a LIMIT shortens it; a statement that must sort much can SET SESSION sort_buffer_size before it runs.",
        );
        if buffer < DEFAULT_SORT_BUFFER {
            rem.push_str(&format!(
                " The global sort_buffer_size ({}) is below MariaDB's default; restore it:\n{}",
                format_bytes(buffer),
                set_global(&[(
                    "sort_buffer_size",
                    DEFAULT_SORT_BUFFER.to_string(),
                    my_cnf_size(DEFAULT_SORT_BUFFER)
                )])
            ));
        } else {
            rem.push_str(
                " Do not raise the global value: every connection may allocate it (PD503).",
            );
        }
        Ok(c.stamp(Verdict::fail(format!(
            "sorts need {share:.2} merge passes each on average ({passes} for {n} sorts; limit {max:.2}): they spill to temporary files"
        ))
        .with_evidence(evidence)
        .with_remediation(rem)))
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

    fn server(buffer: &str, passes_start: &str) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::SortBufferSize, buffer)
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::SortScan, "200")
            .status(StatusVar::SortRange, "0")
            .status(StatusVar::SortMergePasses, "500")
            .window(
                5.0,
                &[
                    (StatusVar::SortScan, "100"),
                    (StatusVar::SortMergePasses, passes_start),
                ],
            )
            .build()
    }

    #[test]
    fn verdicts() {
        let v = verdict(&SortMergePasses, &server("32768", "300"));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .contains("SET GLOBAL sort_buffer_size = 2097152;")
        );
        let v = verdict(&SortMergePasses, &server("2097152", "300"));
        assert!(v.remediation.unwrap().contains("Do not raise"));
        // No pass in 100 sorts: below 0.1 per sort (95% high 0.038).
        assert_eq!(
            verdict(&SortMergePasses, &server("2097152", "500")).status,
            Status::Pass
        );
        // 5 passes in 100 sorts: 0.05 per sort, but the interval reaches 0.12.
        assert_eq!(
            verdict(&SortMergePasses, &server("2097152", "495")).status,
            Status::InsufficientData
        );
    }
}
