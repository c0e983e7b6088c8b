use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::{Estimate, Side},
    declare_rule, format_bytes,
    os::pct,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Checks whether the query cache is on (`query_cache_type` ON or DEMAND with a
    /// `query_cache_size` above 0) and, if so, whether it earns its cost. Fails when
    /// - it is larger than {max_size} (pt-variable-advisor: above 128 MiB it slows the server
    ///   down), or
    /// - it answers less than {min_efficiency} of SELECTs: `Qcache_hits` / `Com_select` on
    ///   MariaDB, whose `Com_select` counts the SELECTs answered from the cache too (since 5.5;
    ///   MySQLTuner 2.9.1 likewise, `mysqltuner.pl` 7318–7327, 7875–7882), `Qcache_hits` /
    ///   (`Qcache_hits` + `Com_select`) on MySQL, whose `Com_select` does not; judged over
    ///   the shortest recent window whose 95% interval lies on one side of the limit (the
    ///   agent looks back up to `[sample] max_status_window`; doctor alone falls back to the
    ///   counters since start-up of a server up at least {min_uptime} s, and says so), or
    /// - it prunes entries for lack of memory more than {max_prunes_per_day} times a day
    ///   (`Qcache_lowmem_prunes`, MySQLTuner's 98).
    ///
    /// MariaDB's default (`query_cache_type = OFF`) passes.
    ///
    /// ### Why is this bad?
    /// The query cache is one structure behind one mutex: every SELECT looks it up and every
    /// write to a table invalidates all of that table's cached results, so on a multi-core
    /// server with writes the threads queue on the mutex (the `Waiting for query cache lock`
    /// state). MySQL removed it in 8.0 for this reason. A cache that rarely hits costs every
    /// query the lookup and every write the invalidation for nothing; a large one makes each
    /// invalidation walk more entries.
    ///
    /// ### Remediation
    /// Turn it off: `SET GLOBAL query_cache_type = OFF; SET GLOBAL query_cache_size = 0;`
    /// and persist both under `[mariadbd]` (`query_cache_type = OFF`, `query_cache_size =
    /// 0`). A server started with it off cannot turn it on at run time, so off also removes
    /// its mutex for good after the next restart. Cache in the application (or a proxy) where
    /// repeated reads need it.
    pub struct QueryCacheContention {
        code: "PD212",
        name: "query-cache-contention",
        severity: Warning,
        scope: Database,
        summary: "the query cache is on and costs more than it saves",
        fails_when: "the query cache is on and answers < 20% of SELECTs, prunes > 98 a day, or is > 128 MiB (MySQLTuner, pt-variable-advisor)",
        severity_why: "warning: a query cache that rarely hits makes mutex contention likely under a concurrent load",
        thresholds: [MAX_SIZE, MIN_EFFICIENCY, MAX_PRUNES_PER_DAY, MIN_UPTIME],
    }
}

const MAX_SIZE: Threshold = Threshold {
    key: "max_size",
    default: 134_217_728.0,
    min: 0.0,
    max: 1e15,
    unit: Unit::Bytes,
    doc: "query_cache_size above which it slows the server (pt-variable-advisor: 128 MiB)",
};
const MIN_EFFICIENCY: Threshold = Threshold {
    key: "min_efficiency",
    default: 0.20,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "SELECTs answered from the cache: Qcache_hits / Com_select on MariaDB, / (Qcache_hits + Com_select) on MySQL (MySQLTuner 2.9.1: 20%, mysqltuner.pl 7875–7885)",
};
const MAX_PRUNES_PER_DAY: Threshold = Threshold {
    key: "max_prunes_per_day",
    default: 98.0,
    min: 0.0,
    max: 1e12,
    unit: Unit::Number,
    doc: "Qcache_lowmem_prunes per day (MySQLTuner: 98)",
};
impl Rule for QueryCacheContention {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let kind = match db.var(Var::QueryCacheType) {
            Ok(k) => k.trim().to_ascii_uppercase(),
            Err(_) => {
                return Err(Verdict::not_applicable(
                    "the server has no query cache (query_cache_type is not a variable: MySQL 8 or a build without it)",
                ));
            }
        };
        let size = db.var_u64(Var::QueryCacheSize)?;
        let on = !matches!(kind.as_str(), "OFF" | "0") && size > 0;
        let setting = format!(
            "query_cache_type {kind}, query_cache_size {}",
            format_bytes(size)
        );
        if !on {
            return Ok(Verdict::pass("the query cache is off").with_evidence(setting));
        }
        let mut problems = Vec::new();
        let mut evidence = vec![setting];
        let max_size = limits.count(&MAX_SIZE);
        if size > max_size {
            problems.push(format!(
                "query_cache_size {} is above {}",
                format_bytes(size),
                format_bytes(max_size)
            ));
        }
        let min_eff = limits.get(&MIN_EFFICIENCY);
        let max_prunes = limits.get(&MAX_PRUNES_PER_DAY) / 86_400.0;
        // (answered from the cache, executed). MariaDB's Com_select counts both; MySQL's only
        // the executed ones.
        let mariadb = db.version.flavour == crate::Flavour::Mariadb;
        let selects = |c: &crate::Counts<'_>| -> Result<(u64, u64), Verdict> {
            let hits = c.get(StatusVar::QcacheHits)?;
            let com = c.get(StatusVar::ComSelect)?;
            Ok(if mariadb {
                (hits.min(com), com.saturating_sub(hits))
            } else {
                (hits, com)
            })
        };
        // Efficiency fails below its limit: judged as the share of SELECTs *not* answered from
        // the cache, against 1 − the limit. Prunes are a rate.
        let measure = |c: &crate::Counts<'_>| -> Result<(Estimate, Estimate), Verdict> {
            let (hits, executed) = selects(c)?;
            Ok((
                Estimate::share(executed, hits.saturating_add(executed)),
                Estimate::rate(c.get(StatusVar::QcacheLowmemPrunes)?, c.seconds()),
            ))
        };
        let mut basis = None;
        match s.judge(limits.count(&MIN_UPTIME), |c| {
            let (missed, prunes) = measure(c)?;
            Ok(match Evidence::of(&missed, 1.0 - min_eff, "SELECTs not answered from the cache") {
                Evidence::Undecided(t) if prunes.side(max_prunes) == Side::Above => {
                    Evidence::Decides(format!("{t}; low-memory prunes {prunes}"))
                }
                ev => ev,
            })
        }) {
            Ok(c) => {
                basis = Some(c.basis());
                let (missed, pruned) = measure(&c)?;
                let (hits, not_cached) = selects(&c)?;
                let eff = hits as f64 / hits.saturating_add(not_cached).max(1) as f64;
                let prunes = c.get(StatusVar::QcacheLowmemPrunes)?;
                let per_day = prunes as f64 * 86_400.0 / c.seconds().max(1.0);
                evidence.push(format!(
                    "{hits} SELECTs answered from the cache, {not_cached} executed ({} efficiency); {prunes} low-memory prunes ({per_day:.0} a day), {}",
                    pct(eff),
                    c.describe()
                ));
                if missed.side(1.0 - min_eff) == Side::Above {
                    problems.push(format!("it answers only {} of SELECTs", pct(eff)));
                }
                if pruned.side(max_prunes) == Side::Above {
                    problems.push(format!(
                        "it prunes {per_day:.0} entries a day for lack of memory"
                    ));
                }
            }
            Err(v) if problems.is_empty() => {
                let mut v = v;
                v.summary = format!("the query cache is on; {}", v.summary);
                v.evidence = evidence;
                return Err(v);
            }
            Err(v) => evidence.push(format!("efficiency not judged: {}", v.summary)),
        }
        let mut v = if problems.is_empty() {
            Verdict::pass(
                "the query cache is on and answers its share of SELECTs (it still serialises writes: watch for 'Waiting for query cache lock')",
            )
        } else {
            Verdict::fail(format!("the query cache is on and {}", problems.join("; ")))
                .with_remediation(set_global(&[
                    ("query_cache_type", "OFF".into(), "OFF".into()),
                    ("query_cache_size", "0".into(), "0".into()),
                ]))
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

    fn on(hits: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .var(Var::QueryCacheType, "ON")
            .var(Var::QueryCacheSize, "16777216")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::QcacheHits, hits)
            .status(StatusVar::ComSelect, "1000")
            .status(StatusVar::QcacheLowmemPrunes, "0")
            .window(
                10.0,
                &[(StatusVar::QcacheHits, "0"), (StatusVar::ComSelect, "0")],
            )
    }

    #[test]
    fn verdicts() {
        let v = verdict(&QueryCacheContention, &on("10").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .starts_with("SET GLOBAL query_cache_type = OFF; SET GLOBAL query_cache_size = 0;")
        );
        assert_eq!(
            verdict(&QueryCacheContention, &on("5000").build()).status,
            Status::Pass
        );
        // MariaDB's Com_select counts the cache hits too: 240 of 1,000 SELECTs answered from
        // the cache is 24%, above the 20% limit (not 240 / 1,240 = 19%).
        let v = verdict(&QueryCacheContention, &on("240").build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let big = on("5000").var(Var::QueryCacheSize, "536870912").build();
        assert_eq!(verdict(&QueryCacheContention, &big).status, Status::Fail);
        let default = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(
            verdict(&QueryCacheContention, &default).status,
            Status::Pass
        );
        let mysql8 = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .without_var(Var::QueryCacheType)
            .build();
        assert_eq!(
            verdict(&QueryCacheContention, &mysql8).status,
            Status::NotApplicable
        );
    }
}
