use super::mhnsw::{HEADROOM, suggested_limit};
use crate::{
    Impact, Limits, Rule, Snapshot, Var, Verdict, declare_rule,
    value::{format_bytes, my_cnf_size, plural},
};

declare_rule! {
    /// ### What it does
    /// Compares each vector index's estimated in-memory graph with `mhnsw_max_cache_size`,
    /// which limits the MHNSW cache of *each* index (one cache per table share). The graph
    /// size is estimated from the index's rows, dimensions and `M` (about `2×dim + 160` bytes
    /// per vector at M=6), or from the size of its hidden `<table>#i#NN` table, or read from
    /// `INFORMATION_SCHEMA.VECTOR_INDEXES` where the server has it.
    ///
    /// ### Why is this bad?
    /// MariaDB does not evict part of an MHNSW cache: at the end of every statement whose
    /// cache grew past `mhnsw_max_cache_size`, it frees the *whole* graph, and the next query
    /// rebuilds it from the hidden table node by node. The default limit is 16 MiB; a
    /// 100,000 × 768-d index needs about 170–300 MB. In the field report (MariaDB 11.8.5,
    /// POWER9 S924, 100k × 768-d, 10-NN) the default cache gave 42 QPS; a 4 GB cache gave
    /// 112 QPS (2.7×) on its own. Measured on x86-64 with MariaDB 11.8.6: 20k rows 382 → 1508
    /// QPS (3.9×), 100k rows 217 → 1142 QPS (5.3×), with a cache rebuild every 2–4 queries.
    /// Inserts suffer too: a bulk load ran 2.9–5.0× slower.
    ///
    /// This rule judges the *risk* from sizes; PD102 (mhnsw-cache-thrashing) confirms the
    /// thrashing itself with probe queries.
    ///
    /// ### Remediation
    /// Raise the limit above the largest graph, with headroom for growth. The limit applies
    /// per index, so budget memory for the sum of all graphs:
    ///
    /// ```sql
    /// SET GLOBAL mhnsw_max_cache_size = 512 * 1024 * 1024;
    /// ```
    ///
    /// and persist it in the server's option file:
    ///
    /// ```ini
    /// [mariadbd]
    /// mhnsw_max_cache_size = 512M
    /// ```
    ///
    /// The variable is dynamic: no restart is needed. The first queries after the change warm
    /// the cache up.
    pub struct MhnswCacheUndersized {
        code: "PD101",
        name: "mhnsw-cache-undersized",
        severity: Critical,
        scope: Database,
        summary: "a vector index's graph is larger than mhnsw_max_cache_size, so MariaDB discards and rebuilds the whole cache",
        fails_when: "a vector index's estimated graph is larger than `mhnsw_max_cache_size` (the limit is per index)",
        severity_why: "critical: a graph larger than its cache is freed and rebuilt by the queries on the index (2.7–5.3× fewer QPS measured), though the rule infers it from sizes",
        impact: [CACHE_THRASHES, CACHE_SIZE_ONLY],
    }
}

const MHNSW_EVIDENCE: &str =
    "a thrashing MHNSW cache: 42 → 112 QPS (2.7×) on AIX when raised to 4 GB; 3.9–5.3× on x86";
/// Differences where one side's graph outgrows its cache and the other's fits.
const CACHE_THRASHES: Impact = Impact {
    factor: 2.7,
    evidence: MHNSW_EVIDENCE,
};
/// Differences in cache size where both sides fit (or both thrash).
const CACHE_SIZE_ONLY: Impact = Impact {
    factor: 1.05,
    evidence: MHNSW_EVIDENCE,
};

impl Rule for MhnswCacheUndersized {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let indexes = db.vector_indexes()?;
        let limit = db.var_u64(Var::MhnswMaxCacheSize)?;

        let mut evidence = vec![format!(
            "mhnsw_max_cache_size = {limit} ({})",
            format_bytes(limit)
        )];
        let mut too_big = Vec::new();
        let mut unknown = Vec::new();
        let mut total: u64 = 0;
        for idx in indexes {
            match db.graph_estimate(idx) {
                Some(est) => {
                    total = total.saturating_add(est.bytes);
                    let verdict = if est.bytes > limit {
                        "does NOT fit"
                    } else {
                        "fits"
                    };
                    evidence.push(format!(
                        "{}: graph ≈ {} ({}), {verdict}",
                        idx.qualified_name(),
                        format_bytes(est.bytes),
                        est.method
                    ));
                    if let Some(src) = &idx.size_source {
                        evidence.push(format!("{}: {src}", idx.qualified_name()));
                    }
                    if let Some(src) = idx.rows_source.as_deref().filter(|s| s.contains("stale")) {
                        evidence.push(format!("{}: rows from {src}", idx.qualified_name()));
                    }
                    if est.bytes > limit {
                        too_big.push((idx, est.bytes));
                    }
                }
                None => {
                    evidence.push(format!(
                        "{}: size unknown{}",
                        idx.qualified_name(),
                        idx.size_source
                            .as_deref()
                            .map(|s| format!(" ({s})"))
                            .unwrap_or_default()
                    ));
                    unknown.push(idx.qualified_name());
                }
            }
        }

        if too_big.is_empty() {
            // A size that could not be read is never a pass, even beside indexes that fit.
            if !unknown.is_empty() {
                let mut v = Verdict::insufficient(format!(
                    "the graph size of {} could not be estimated (needs PROCESS for INFORMATION_SCHEMA.INNODB_SYS_TABLESTATS and SELECT on mysql.innodb_table_stats, or table rows and the column's dimensions)",
                    unknown.join(", ")
                ));
                v.evidence = evidence;
                return Err(v);
            }
            let mut v = Verdict::pass(format!(
                "every vector index's estimated graph fits mhnsw_max_cache_size ({})",
                format_bytes(limit)
            ));
            v.evidence = evidence;
            return Ok(v);
        }

        let largest = too_big.iter().map(|(_, b)| *b).max().unwrap_or(limit);
        let suggested = suggested_limit(largest);
        let size = my_cnf_size(suggested);
        let (worst, worst_bytes) = too_big
            .iter()
            .max_by_key(|(_, b)| *b)
            .map(|(i, b)| (i.qualified_name(), *b))
            .unwrap_or_default();
        let mut v = Verdict::fail(format!(
            "{} mhnsw_max_cache_size ({}); the largest, {worst}, needs ≈ {} — every query that overflows discards and rebuilds the whole graph",
            plural(too_big.len(), "vector index exceeds", "vector indexes exceed"),
            format_bytes(limit),
            format_bytes(worst_bytes),
        ))
        .with_remediation(format!(
            "SET GLOBAL mhnsw_max_cache_size = {bytes};  -- {size}: the largest graph × {HEADROOM} headroom\n\
             and persist it under [mariadbd] in the server's option file:\n    mhnsw_max_cache_size = {size}\n\
             The limit is per index: all vector graphs together may take ≈ {} of memory when warm.",
            format_bytes(total.max(largest)),
            bytes = suggested,
        ));
        v.evidence = evidence;
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::testing::SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(crate::testing::big_vector_index())
            .build()
    }

    fn check(s: &Snapshot) -> Verdict {
        verdict(&MhnswCacheUndersized, s)
    }

    #[test]
    fn fails_when_the_graph_exceeds_the_default_cache() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index());
        let v = check(&s.build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("app.docs (e)"), "{}", v.summary);
        let remediation = v.remediation.unwrap();
        assert!(
            remediation.contains("SET GLOBAL mhnsw_max_cache_size = 51380224"),
            "{remediation}"
        );
        assert!(
            remediation.contains("mhnsw_max_cache_size = 49M"),
            "{remediation}"
        );
    }

    #[test]
    fn passes_when_the_cache_is_large_enough() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::MhnswMaxCacheSize, "1073741824")
            .vector_index(big_vector_index())
            .build();
        let v = check(&s);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.evidence.iter().any(|e| e.contains("fits")));
    }

    #[test]
    fn not_applicable_without_vector_support_or_indexes() {
        let s = SnapshotBuilder::new().mariadb("10.11.14-MariaDB").build();
        assert_eq!(check(&s).status, Status::NotApplicable);
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(check(&s).status, Status::NotApplicable);
    }

    #[test]
    fn insufficient_when_sizes_or_indexes_are_unknown() {
        let mut idx = big_vector_index();
        idx.rows = None;
        idx.hidden_table_bytes = None;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(idx)
            .build();
        let v = check(&s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("PROCESS"), "{}", v.summary);

        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_indexes_unavailable("access denied to information_schema.INNODB_SYS_TABLES")
            .build();
        assert_eq!(check(&s).status, Status::InsufficientData);

        let s = SnapshotBuilder::new().build();
        let v = check(&s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("not reachable"), "{}", v.summary);
    }

    /// An index that fits beside one whose statistics were not loaded is not a pass.
    #[test]
    fn one_unknown_size_is_never_a_pass() {
        let mut small = big_vector_index();
        small.table = "small".into();
        small.rows = Some(100);
        small.hidden_table_bytes = Some(16384);
        let mut evicted = big_vector_index();
        evicted.rows = None;
        evicted.hidden_table_bytes = None;
        evicted.size_source = Some("statistics not loaded; no other source of its size".into());
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::MhnswMaxCacheSize, "1073741824")
            .vector_index(small)
            .vector_index(evicted)
            .build();
        let v = check(&s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("app.docs (e)"), "{}", v.summary);
        assert!(
            v.evidence
                .iter()
                .any(|e| e.contains("statistics not loaded")),
            "{v:?}"
        );
    }

    #[test]
    fn odd_values_do_not_panic() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::MhnswMaxCacheSize, "garbage")
            .vector_index(big_vector_index())
            .build();
        assert_eq!(check(&s).status, Status::InsufficientData);
        let mut idx = big_vector_index();
        idx.rows = Some(u64::MAX);
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(idx)
            .build();
        assert_eq!(check(&s).status, Status::Fail);
    }
}
