use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{MIN_UPTIME, at_least},
    declare_rule, format_bytes,
    os::pct,
    value::my_cnf_size,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Measures the sorts that did not fit `sort_buffer_size` and were merged through
    /// temporary files: `Sort_merge_passes` / (`Sort_scan` + `Sort_range`), over the sample
    /// window when at least {min_sorts} sorts ran in it, else since start-up on a server up at
    /// least {min_uptime} s (and the verdict says so). Fails above {max_merge_share}
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
        thresholds: [MAX_MERGE_SHARE, MIN_SORTS, MIN_UPTIME],
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
const MIN_SORTS: Threshold = Threshold {
    key: "min_sorts",
    default: 50.0,
    min: 1.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest sorts (Sort_scan + Sort_range) to judge the share",
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
        let min = limits.count(&MIN_SORTS);
        let c = db.judged_counts(limits.count(&MIN_UPTIME), |c| {
            Ok(at_least(sorts(c)?, min, "sorts ran"))
        })?;
        let n = sorts(&c)?;
        let passes = c.get(StatusVar::SortMergePasses)?;
        let share = passes as f64 / n.max(1) as f64;
        let buffer = db.var_u64(Var::SortBufferSize)?;
        let max = limits.get(&MAX_MERGE_SHARE);
        let evidence = format!(
            "{passes} merge passes for {n} sorts ({:.2} per sort), {}; sort_buffer_size {}",
            share,
            c.describe(),
            format_bytes(buffer)
        );
        if share <= max {
            return Ok(Verdict::pass(format!(
                "{} merge passes per sort (limit {})",
                pct(share),
                pct(max)
            ))
            .with_evidence(evidence));
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
        Ok(Verdict::fail(format!(
            "sorts need {share:.2} merge passes each on average ({passes} for {n} sorts; limit {max:.2}): they spill to temporary files"
        ))
        .with_evidence(evidence)
        .with_remediation(rem))
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
        assert_eq!(
            verdict(&SortMergePasses, &server("2097152", "495")).status,
            Status::Pass
        );
    }
}
