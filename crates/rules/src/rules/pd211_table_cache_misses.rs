use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::{Estimate, Side},
    declare_rule,
    os::pct,
};

use super::fix::{restart_with, set_global};

declare_rule! {
    /// ### What it does
    /// Judges the table caches over the shortest recent window whose 95% interval of the miss
    /// share lies on one side of the limit (the agent looks back up to `[sample]
    /// max_status_window`; doctor alone falls back to the counters since start-up of a server
    /// up at least {min_uptime} s, and says so):
    /// - `table_open_cache`: misses (`Table_open_cache_misses` / hits + misses) above
    ///   {max_miss_share};
    /// - `table_definition_cache`: full (`Open_table_definitions` at its size) while table
    ///   definitions are re-read from disk (`Opened_table_definitions`) for more than
    ///   {max_miss_share} of the table opens;
    /// - `open_files_limit`: `Open_files` above {max_open_files_share} of it (MySQLTuner's 85%).
    ///
    /// MySQLTuner fails the open-table cache only below a 20% *hit* rate, which a cache
    /// missing one open in three passes; and it compares `table_definition_cache` with the
    /// number of tables, which flags a server with many tables that are never used together.
    /// powerdiag judges the misses that happen instead. The 20% miss limit is a heuristic.
    ///
    /// ### Why is this bad?
    /// A miss closes another table (flushing its handler state) and opens this one again:
    /// file descriptors, the `.frm` definition, InnoDB's dictionary lookup, under a lock on
    /// the cache instance. A workload touching more tables than the cache holds — many
    /// schemas, partitions, one table per tenant — pays it on many statements; past
    /// `open_files_limit` tables cannot be opened at all.
    ///
    /// ### Remediation
    /// Larger caches, within the file-descriptor limit: `SET GLOBAL table_open_cache = N;`
    /// and `SET GLOBAL table_definition_cache = N;` (both dynamic; persist them under
    /// `[mariadbd]`). `open_files_limit` needs a restart (and a matching `LimitNOFILE=` in
    /// the systemd unit). The finding gives N for what was missed.
    pub struct TableCacheMisses {
        code: "PD211",
        name: "table-cache-misses",
        severity: Info,
        scope: Database,
        summary: "tables are reopened because the table caches are too small",
        fails_when: "> 20% of table opens miss `table_open_cache`, or a full `table_definition_cache` re-reads definitions, or `Open_files` > 85% of `open_files_limit` *(heuristic)*",
        severity_why: "info: table reopens are measured, but their cost is small and not measured, so cache sizes are advice",
        thresholds: [MAX_MISS_SHARE, MAX_OPEN_FILES_SHARE, MIN_UPTIME],
    }
}

const MAX_MISS_SHARE: Threshold = Threshold {
    key: "max_miss_share",
    default: 0.20,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "table cache misses (and definitions re-read) as a share of table opens (heuristic)",
};
const MAX_OPEN_FILES_SHARE: Threshold = Threshold {
    key: "max_open_files_share",
    default: 0.85,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Open_files / open_files_limit (MySQLTuner: 85%)",
};
impl Rule for TableCacheMisses {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max_miss = limits.get(&MAX_MISS_SHARE);
        let mut problems = Vec::new();
        let mut evidence = Vec::new();
        let mut fixes = Vec::new();
        // Open files: a gauge, judged whatever the window.
        let open_files = db.status_u64(StatusVar::OpenFiles)?;
        let files_limit = db.var_u64(Var::OpenFilesLimit)?.max(1);
        let files_share = open_files as f64 / files_limit as f64;
        evidence.push(format!(
            "Open_files {open_files} of open_files_limit {files_limit} ({})",
            pct(files_share)
        ));
        let files_full = files_share > limits.get(&MAX_OPEN_FILES_SHARE);
        if files_full {
            problems.push(format!(
                "{} of open_files_limit is in use",
                pct(files_share)
            ));
        }
        let lookups = |c: &crate::Counts<'_>| -> Result<u64, Verdict> {
            Ok(c.get(StatusVar::TableOpenCacheHits)?
                .saturating_add(c.get(StatusVar::TableOpenCacheMisses)?))
        };
        let measure = |c: &crate::Counts<'_>| -> Result<Estimate, Verdict> {
            Ok(Estimate::share(
                c.get(StatusVar::TableOpenCacheMisses)?,
                lookups(c)?,
            ))
        };
        let counts = s.judge(limits.count(&MIN_UPTIME), |c| {
            Ok(Evidence::of(
                &measure(c)?,
                max_miss,
                "table opens missed table_open_cache",
            ))
        });
        let mut basis = None;
        match counts {
            Ok(c) => {
                basis = Some(c.basis());
                let opens = lookups(&c)?;
                let share = measure(&c)?.value;
                let toc = db.var_u64(Var::TableOpenCache)?;
                evidence.push(format!("table_open_cache {toc}: {}", c.describe()));
                if share > max_miss {
                    problems.push(format!(
                        "{} of table opens missed table_open_cache ({toc})",
                        pct(share)
                    ));
                    let want = toc.saturating_mul(2).max(2000);
                    fixes.push(("table_open_cache", want.to_string(), want.to_string()));
                }
                let defs = c.get(StatusVar::OpenedTableDefinitions)?;
                let tdc = db.var_u64(Var::TableDefinitionCache)?;
                let open_defs = db.status_u64(StatusVar::OpenTableDefinitions)?;
                let def = Estimate::share(defs, opens);
                let def_share = def.value;
                evidence.push(format!(
                    "{defs} table definitions read ({} of table opens); {open_defs} cached of table_definition_cache {tdc}",
                    pct(def_share)
                ));
                if open_defs >= tdc && def.side(max_miss) == Side::Above {
                    problems.push(format!(
                        "table_definition_cache ({tdc}) is full and {} of table opens re-read a definition",
                        pct(def_share)
                    ));
                    let want = tdc.saturating_mul(2).max(2000);
                    fixes.push(("table_definition_cache", want.to_string(), want.to_string()));
                }
            }
            // Without enough table opens only the open-files share can decide: a fail.
            Err(v) if !files_full => {
                let mut v = v;
                v.evidence = evidence;
                return Err(v);
            }
            Err(v) => evidence.push(format!("table caches not judged: {}", v.summary)),
        }
        let mut v = if problems.is_empty() {
            Verdict::pass(format!(
                "the table caches hold the tables in use (misses at most {})",
                pct(max_miss)
            ))
        } else {
            let mut rem = String::new();
            if !fixes.is_empty() {
                rem.push_str(&set_global(&fixes));
            }
            if files_full {
                let want = files_limit.saturating_mul(2);
                if !rem.is_empty() {
                    rem.push('\n');
                }
                rem.push_str(&format!(
                    "open_files_limit {}, and LimitNOFILE={want} in mariadb.service",
                    restart_with(&[("open_files_limit", String::new(), want.to_string())])
                ));
            }
            Verdict::fail(format!("tables are reopened: {}", problems.join("; ")))
                .with_remediation(rem)
        };
        v.evidence = evidence;
        v.basis = basis;
        Ok(v)
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

    fn server(misses_start: &str, defs_start: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::TableOpenCache, "10")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::OpenFiles, "30")
            .status(StatusVar::TableOpenCacheHits, "1000")
            .status(StatusVar::TableOpenCacheMisses, "1000")
            .status(StatusVar::OpenedTableDefinitions, "700")
            .status(StatusVar::OpenTableDefinitions, "400")
            .window(
                5.0,
                &[
                    (StatusVar::TableOpenCacheHits, "800"),
                    (StatusVar::TableOpenCacheMisses, misses_start),
                    (StatusVar::OpenedTableDefinitions, defs_start),
                ],
            )
    }

    #[test]
    fn verdicts() {
        let v = verdict(&TableCacheMisses, &server("800", "700").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .starts_with("SET GLOBAL table_open_cache = 2000;")
        );
        let v = verdict(&TableCacheMisses, &server("1000", "500").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("table_definition_cache (400) is full"));
        assert_eq!(
            verdict(&TableCacheMisses, &server("990", "700").build()).status,
            Status::Pass
        );
    }

    #[test]
    fn open_files_near_the_limit_fail_without_a_window() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::OpenFilesLimit, "1000")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::OpenFiles, "950")
            .status(StatusVar::TableOpenCacheHits, "10")
            .status(StatusVar::TableOpenCacheMisses, "10")
            .build();
        let v = verdict(&TableCacheMisses, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.remediation.unwrap().contains("LimitNOFILE=2000"));
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::OpenFiles, "20")
            .status(StatusVar::TableOpenCacheHits, "10")
            .status(StatusVar::TableOpenCacheMisses, "10")
            .build();
        assert_eq!(
            verdict(&TableCacheMisses, &s).status,
            Status::InsufficientData
        );
    }
}
