use crate::{
    Gathered, IndexProbe, Limits, Rule, Snapshot, Threshold, Unit, Var, Verdict, declare_rule,
    rules::mhnsw::suggested_limit,
    value::{format_bytes, my_cnf_size, plural},
};

declare_rule! {
    /// ### What it does
    /// Watches the probe's k-NN queries against each vector index and counts MHNSW cache
    /// rebuilds. Every rebuild starts by reading the graph's entry point with `ha_index_last`
    /// on the hidden table, so the probe session's `Handler_read_last` delta counts rebuilds
    /// exactly; `Handler_read_rnd` per query counts graph nodes loaded from the hidden table
    /// (about `LIMIT` when the graph is cached). The first query is ignored (a cold cache is
    /// built once); the rule fails when at least {min_rebuilds} of the later queries, and at
    /// least {min_rebuild_share} of them, rebuilt the cache; an index probed fewer than
    /// {min_probe_queries} times is not judged. Repeated queries at the end show whether a
    /// warm-up helps at all.
    ///
    /// ### Why is this bad?
    /// Thrashing is PD101's risk made real: the cache is freed at the end of a statement and
    /// rebuilt by the next one, so every query pays for loading hundreds of graph nodes
    /// (356–509 `Handler_read_rnd` and 1,114–1,592 buffer-pool page reads per 10-NN query,
    /// against 10–11 and 35 when warm). Measured on MariaDB 11.8.6: a rebuild every 2–4
    /// queries, 3.9–5.3× lower QPS, and no benefit from repeating the same queries (2.59 →
    /// 2.59 ms). It is CPU and buffer-pool work, not disk: `Innodb_buffer_pool_reads` stays 0,
    /// which is why I/O-based monitoring misses it. The field report's AIX host ran at 42 QPS
    /// until the cache was raised (2.7×).
    ///
    /// ### Remediation
    /// Raise `mhnsw_max_cache_size` above the graph (see PD101 for the size), e.g.
    ///
    /// ```sql
    /// SET GLOBAL mhnsw_max_cache_size = 512 * 1024 * 1024;
    /// ```
    ///
    /// and persist `mhnsw_max_cache_size = 512M` under `[mariadbd]`. Then re-run
    /// `powerdiag doctor`: after a warm-up the probe should show no rebuilds.
    pub struct MhnswCacheThrashing {
        code: "PD102",
        name: "mhnsw-cache-thrashing",
        severity: Critical,
        scope: Database,
        summary: "probe queries rebuild the MHNSW vector cache again and again",
        fails_when: "probe queries rebuild the vector cache (≥ 2 rebuilds and ≥ 1 in 10 queries after the first)",
        severity_why: "critical: it measures vector searches waiting on a cache that evicts now",
        thresholds: [MIN_REBUILDS, MIN_REBUILD_SHARE, MIN_PROBE_QUERIES],
    }
}

const MIN_REBUILDS: Threshold = Threshold {
    key: "min_rebuilds",
    default: 2.0,
    min: 1.0,
    max: 1000.0,
    unit: Unit::Count,
    doc: "cache rebuilds among the queries after the first needed to call it thrashing",
};
const MIN_REBUILD_SHARE: Threshold = Threshold {
    key: "min_rebuild_share",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "... and the share of those queries that rebuilt the cache",
};
const MIN_PROBE_QUERIES: Threshold = Threshold {
    key: "min_probe_queries",
    default: 5.0,
    min: 2.0,
    max: 1000.0,
    unit: Unit::Count,
    doc: "fewest probe queries on an index worth judging",
};

/// What one index's probe showed.
struct Observed<'a> {
    probe: &'a IndexProbe,
    later: u64,
    rebuilds: u64,
    rnd_per_query: f64,
    bp_per_query: f64,
    first_us: u64,
    later_median_us: u64,
    repeat_median_us: Option<u64>,
}

fn observe(p: &IndexProbe, min_queries: u64) -> Option<Observed<'_>> {
    if (p.queries.len() as u64) < min_queries.max(2) {
        return None;
    }
    let first = &p.queries[0];
    let later = &p.queries[1..];
    let n = later.len() as u64;
    let rebuilds = later
        .iter()
        .map(|q| q.handler_read_last)
        .fold(0u64, u64::saturating_add);
    let rnd = later
        .iter()
        .map(|q| q.handler_read_rnd)
        .fold(0u64, u64::saturating_add);
    let bp = later
        .iter()
        .map(|q| q.buffer_pool_read_requests)
        .fold(0u64, u64::saturating_add);
    let mut later_lat: Vec<u64> = later
        .iter()
        .filter(|q| !q.repeat)
        .map(|q| q.latency_us)
        .collect();
    let mut repeat_lat: Vec<u64> = later
        .iter()
        .filter(|q| q.repeat)
        .map(|q| q.latency_us)
        .collect();
    Some(Observed {
        probe: p,
        later: n,
        rebuilds,
        rnd_per_query: rnd as f64 / n as f64,
        bp_per_query: bp as f64 / n as f64,
        first_us: first.latency_us,
        later_median_us: median(&mut later_lat).unwrap_or(0),
        repeat_median_us: median(&mut repeat_lat),
    })
}

fn median(v: &mut [u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

impl Rule for MhnswCacheThrashing {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let min_rebuilds = limits.count(&MIN_REBUILDS);
        let min_share = limits.get(&MIN_REBUILD_SHARE);
        let db = s.db()?;
        db.require_vector_support()?;
        if let Gathered::Available(v) = &db.vector_indexes
            && v.is_empty()
        {
            return Err(Verdict::not_applicable("the server has no vector indexes"));
        }
        let probe = match &db.probe {
            Gathered::Available(p) => p,
            Gathered::Unavailable(why) => {
                return Err(Verdict::insufficient(format!(
                    "thrashing is judged from probe queries, which did not run: {why}"
                )));
            }
        };
        if probe.indexes.is_empty() {
            return Err(Verdict::insufficient(
                "the probe found no vector index it could query",
            ));
        }

        let mut evidence = Vec::new();
        let mut thrashing = Vec::new();
        let mut judged = 0;
        for p in &probe.indexes {
            let name = format!("{}.{} ({})", p.schema, p.table, p.index);
            let Some(o) = observe(p, limits.count(&MIN_PROBE_QUERIES)) else {
                let why = p.error.as_deref().unwrap_or("too few queries completed");
                evidence.push(format!(
                    "{name}: {} probe queries, not judged: {why}",
                    p.queries.len()
                ));
                continue;
            };
            judged += 1;
            let limit = f64::from(o.probe.limit.max(1));
            evidence.push(format!(
                "{name}: {} cache rebuilds in {} queries after the first; {:.0} graph rows read per query (LIMIT {}, {:.1}×); {:.0} buffer-pool page reads per query",
                o.rebuilds, o.later, o.rnd_per_query, o.probe.limit, o.rnd_per_query / limit, o.bp_per_query
            ));
            evidence.push(format!(
                "{name}: latency first {}, later median {}{}",
                ms(o.first_us),
                ms(o.later_median_us),
                o.repeat_median_us
                    .map(|r| format!(", repeated queries median {}", ms(r)))
                    .unwrap_or_default()
            ));
            if o.rebuilds >= min_rebuilds && o.rebuilds as f64 >= min_share * o.later as f64 {
                thrashing.push(o);
            }
        }
        if judged == 0 {
            let mut v = Verdict::insufficient("no vector index got enough probe queries to judge");
            v.evidence = evidence;
            return Err(v);
        }
        if let Ok(limit) = db.var_u64(Var::MhnswMaxCacheSize) {
            evidence.push(format!(
                "mhnsw_max_cache_size = {limit} ({})",
                format_bytes(limit)
            ));
        }
        let Some(worst) = thrashing.iter().max_by(|a, b| {
            (u128::from(a.rebuilds) * u128::from(b.later))
                .cmp(&(u128::from(b.rebuilds) * u128::from(a.later)))
        }) else {
            let mut v = Verdict::pass(format!(
                "no MHNSW cache thrashing: {} kept the graph cached",
                plural(judged, "probed index", "probed indexes")
            ));
            v.evidence = evidence;
            return Ok(v);
        };

        let limit = db.var_u64(Var::MhnswMaxCacheSize).unwrap_or(16 << 20);
        // The size PD101 would compute for this index, else a generous step up.
        let estimate = db.vector_indexes.as_ref().ok().and_then(|all| {
            all.iter()
                .find(|i| {
                    i.schema == worst.probe.schema
                        && i.table == worst.probe.table
                        && i.index == worst.probe.index
                })
                .and_then(|i| db.graph_estimate(i))
        });
        let (target, why) = match estimate {
            Some(e) if e.bytes >= limit => (
                suggested_limit(e.bytes),
                format!(
                    "the graph is ≈ {}; this adds 50% headroom",
                    format_bytes(e.bytes)
                ),
            ),
            _ => (
                limit.saturating_mul(4).max(256 << 20),
                "the graph size is unknown; PD101 computes it when PROCESS is granted".to_owned(),
            ),
        };
        let mut v = Verdict::fail(format!(
            "the MHNSW cache of {}.{} ({}) was rebuilt {} times in {} queries (one every {:.1}); {:.0} graph rows read per query instead of ≈{}",
            worst.probe.schema,
            worst.probe.table,
            worst.probe.index,
            worst.rebuilds,
            worst.later,
            worst.later as f64 / worst.rebuilds as f64,
            worst.rnd_per_query,
            worst.probe.limit,
        ))
        .with_remediation(format!(
            "SET GLOBAL mhnsw_max_cache_size = {target};  -- {}: {why}\n\
             and persist it under [mariadbd] in the server's option file:\n    mhnsw_max_cache_size = {}\n\
             then re-run powerdiag doctor after a warm-up: the probe should show no rebuilds.",
            my_cnf_size(target),
            my_cnf_size(target)
        ));
        v.evidence = evidence;
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Probe, ProbeQuery, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::testing::SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(crate::testing::big_vector_index())
            .probe(thrashing_probe())
            .build()
    }

    fn q(latency_us: u64, rebuild: bool, rnd: u64, repeat: bool) -> ProbeQuery {
        ProbeQuery {
            latency_us,
            repeat,
            handler_read_last: u64::from(rebuild),
            handler_read_rnd: rnd,
            buffer_pool_read_requests: rnd * 3,
        }
    }

    fn probe(queries: Vec<ProbeQuery>) -> Probe {
        Probe {
            indexes: vec![IndexProbe {
                schema: "app".into(),
                table: "docs".into(),
                index: "e".into(),
                limit: 10,
                queries,
                budget_exhausted: false,
                error: None,
            }],
            ..Default::default()
        }
    }

    /// Modelled on the 20k-row measurement: a rebuild every ~4 queries, ~400 rows per query.
    pub(crate) fn thrashing_probe() -> Probe {
        probe((0..25).map(|i| q(2600, i % 4 == 0, 420, i >= 20)).collect())
    }

    fn warm_probe() -> Probe {
        probe(
            (0..25)
                .map(|i| q(if i == 0 { 2300 } else { 630 }, i == 0, 11, i >= 20))
                .collect(),
        )
    }

    fn snapshot(p: Probe) -> Snapshot {
        crate::testing::SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .probe(p)
            .build()
    }

    fn check(s: &Snapshot) -> Verdict {
        verdict(&MhnswCacheThrashing, s)
    }

    #[test]
    fn fails_on_repeated_rebuilds() {
        let v = check(&snapshot(thrashing_probe()));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary.contains("rebuilt 6 times in 24 queries"),
            "{}",
            v.summary
        );
        // Sized from the index's estimate, as PD101 would, not a guess.
        let fix = v.remediation.clone().unwrap();
        assert!(
            fix.contains("SET GLOBAL mhnsw_max_cache_size = 51380224;  -- 49M"),
            "{fix}"
        );
        assert!(
            v.evidence
                .iter()
                .any(|e| e.contains("repeated queries median 2.60 ms"))
        );
    }

    #[test]
    fn without_a_size_estimate_the_fix_is_a_generous_step() {
        let mut idx = big_vector_index();
        idx.rows = None;
        idx.hidden_table_bytes = None;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(idx)
            .probe(thrashing_probe())
            .build();
        let fix = check(&s).remediation.unwrap();
        assert!(
            fix.contains("= 268435456;  -- 256M: the graph size is unknown"),
            "{fix}"
        );
    }

    #[test]
    fn passes_when_only_the_first_query_builds_the_cache() {
        let v = check(&snapshot(warm_probe()));
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn a_single_late_rebuild_is_not_thrashing() {
        let mut p = warm_probe();
        p.indexes[0].queries[7].handler_read_last = 1;
        assert_eq!(check(&snapshot(p)).status, Status::Pass);
    }

    #[test]
    fn insufficient_without_a_probe_or_with_too_few_queries() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .build();
        let v = check(&s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("--no-probe"), "{}", v.summary);

        let mut p = thrashing_probe();
        p.indexes[0].queries.truncate(2);
        p.indexes[0].error = Some("SELECT command denied".into());
        let v = check(&snapshot(p));
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.evidence[0].contains("SELECT command denied"));
    }

    #[test]
    fn not_applicable_on_old_servers_or_without_indexes() {
        let s = SnapshotBuilder::new().mariadb("10.11.14-MariaDB").build();
        assert_eq!(check(&s).status, Status::NotApplicable);
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .probe(Probe::default())
            .build();
        assert_eq!(check(&s).status, Status::NotApplicable);
    }
}
