//! The probe: a short, read-only burst of k-NN queries against up to three vector indexes.
//!
//! For each index (largest first), within a time budget:
//! 1. fetch up to `queries` stored vectors, spread over the primary key when it is an integer
//!    (index seeks, no scan), else the first rows;
//! 2. run one k-NN query per vector, each vector plus small Gaussian noise (5% of its RMS), with
//!    the index's own distance function, recording latency and the session's `Handler_read_last`
//!    and `Handler_read_rnd` deltas and the global `Innodb_buffer_pool_read_requests` delta;
//! 3. repeat the first quarter of those queries: a cache that keeps the graph answers them from
//!    memory;
//! 4. for the first index, profile `PROFILED` more queries (other vectors) with the session
//!    profiler: PD103 judges the median of their stall shares, not one noisy query.
//!
//! Random vectors would not do: they funnel through a few hub nodes and never reproduce a real
//! working set (shared/notes/mariadb.md §5).

use std::time::{Duration, Instant};

use powerdiag_rules::{
    DbError, Gathered, IndexProbe, Probe, ProbeQuery, ProfileStage, QueryProfile, VectorIndex,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rand_distr::{Distribution, Normal};

use super::part::{Ctx, Part, PartFuture};
use super::session::{Session, col, col_secs_us, col_u64, ident, sql_str};
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// Probe limits.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Distinct k-NN queries per index (`--probe-queries`).
    pub queries: u32,
    /// Indexes probed at most.
    pub max_indexes: usize,
    /// Wall-time budget per index.
    pub budget_per_index: Duration,
    /// `LIMIT` of each k-NN query.
    pub limit: u32,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            queries: 20,
            max_indexes: 3,
            budget_per_index: Duration::from_secs(2),
            limit: 10,
        }
    }
}

/// Progress reporting (doctor draws a bar on a TTY).
pub trait ProbeObserver: Send + Sync {
    fn begin(&self, _index: &str, _total: u64) {}
    fn step(&self) {}
    fn end(&self) {}
}

/// Does nothing.
#[derive(Debug, Default)]
pub struct NoProgress;
impl ProbeObserver for NoProgress {}

/// Noise relative to the vector's RMS component.
const NOISE: f64 = 0.05;
/// Queries profiled for PD103: enough for a median that one preempted query cannot move.
const PROFILED: usize = 5;
/// Fixed seed: the same server gets the same queries run after run.
const SEED: u64 = 0x706f_7765_7264_6961;

pub(crate) async fn run(
    s: &mut Session,
    indexes: &[VectorIndex],
    opts: &ProbeOptions,
    observer: &dyn ProbeObserver,
) -> Result<Probe, DbError> {
    let mut order: Vec<&VectorIndex> = indexes.iter().filter(|i| i.column.is_some()).collect();
    order.sort_by_key(|i| {
        std::cmp::Reverse(
            i.rows
                .unwrap_or(0)
                .saturating_mul(u64::from(i.dimensions.unwrap_or(1))),
        )
    });
    order.truncate(opts.max_indexes);
    let mut probe = Probe::default();
    let mut rng = StdRng::seed_from_u64(SEED);
    for (n, idx) in order.iter().enumerate() {
        if !s.alive() {
            break;
        }
        let (result, vectors) = probe_index(s, idx, opts, observer, &mut rng).await;
        if n == 0 && !vectors.is_empty() && s.alive() {
            // The second vector onwards: the first query of the burst warmed the cache.
            let chosen: Vec<&[f32]> = (0..PROFILED)
                .map(|k| vectors[(1 + k) % vectors.len()].as_slice())
                .collect();
            let (first, more) = profile(s, idx, &chosen, opts.limit).await;
            probe.profile = Some(first);
            probe.more_profiles = more;
        }
        probe.indexes.push(result);
    }
    Ok(probe)
}

fn knn_sql(idx: &VectorIndex, vector: &[f32], limit: u32) -> String {
    let column = ident(idx.column.as_deref().unwrap_or_default());
    let func = match idx.distance.as_deref() {
        Some("cosine") => "VEC_DISTANCE_COSINE",
        Some("euclidean") => "VEC_DISTANCE_EUCLIDEAN",
        _ => "VEC_DISTANCE",
    };
    let mut text = String::with_capacity(vector.len() * 10 + 2);
    text.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!("{x}"));
    }
    text.push(']');
    format!(
        "SELECT 1 FROM {}.{} ORDER BY {func}({column}, VEC_FromText('{text}')) LIMIT {limit}",
        ident(&idx.schema),
        ident(&idx.table)
    )
}

/// Session counters the probe reads between queries. `SHOW SESSION STATUS` does not move them.
const COUNTERS_SQL: &str = "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_last','Handler_read_rnd','Innodb_buffer_pool_read_requests')";

#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    read_last: u64,
    read_rnd: u64,
    bp_requests: u64,
}

async fn counters(s: &mut Session) -> Result<Counters, DbError> {
    let rows = s.query(COUNTERS_SQL).await?;
    let mut c = Counters::default();
    for r in &rows {
        let v = col_u64(r, 1).unwrap_or(0);
        match col(r, 0).unwrap_or_default().to_ascii_lowercase().as_str() {
            "handler_read_last" => c.read_last = v,
            "handler_read_rnd" => c.read_rnd = v,
            "innodb_buffer_pool_read_requests" => c.bp_requests = v,
            _ => {}
        }
    }
    Ok(c)
}

async fn probe_index(
    s: &mut Session,
    idx: &VectorIndex,
    opts: &ProbeOptions,
    observer: &dyn ProbeObserver,
    rng: &mut StdRng,
) -> (IndexProbe, Vec<Vec<f32>>) {
    let started = Instant::now();
    let mut out = IndexProbe {
        schema: idx.schema.clone(),
        table: idx.table.clone(),
        index: idx.index.clone(),
        limit: opts.limit,
        ..Default::default()
    };
    let stored = match sample_vectors(s, idx, opts.queries as usize).await {
        Ok(v) if v.is_empty() => {
            out.error = Some("the table has no rows".into());
            return (out, Vec::new());
        }
        Ok(v) => v,
        Err(e) => {
            out.error = Some(e.message);
            return (out, Vec::new());
        }
    };
    let vectors: Vec<Vec<f32>> = (0..opts.queries as usize)
        .map(|i| perturb(&stored[i % stored.len()], rng))
        .collect();
    let repeats = (vectors.len() / 4).max(1);
    let plan: Vec<(usize, bool)> = (0..vectors.len())
        .map(|i| (i, false))
        .chain((0..repeats).map(|i| (i, true)))
        .collect();

    observer.begin(&idx.qualified_name(), plan.len() as u64);
    let mut before = match counters(s).await {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(e.message);
            observer.end();
            return (out, vectors);
        }
    };
    for (i, repeat) in plan {
        if started.elapsed() >= opts.budget_per_index {
            out.budget_exhausted = true;
            break;
        }
        let sql = knn_sql(idx, &vectors[i], opts.limit);
        let t = Instant::now();
        if let Err(e) = s.query(&sql).await {
            out.error = Some(e.message);
            break;
        }
        let latency = t.elapsed();
        let after = match counters(s).await {
            Ok(c) => c,
            Err(e) => {
                out.error = Some(e.message);
                break;
            }
        };
        out.queries.push(ProbeQuery {
            latency_us: latency.as_micros().try_into().unwrap_or(u64::MAX),
            repeat,
            handler_read_last: after.read_last.saturating_sub(before.read_last),
            handler_read_rnd: after.read_rnd.saturating_sub(before.read_rnd),
            buffer_pool_read_requests: after.bp_requests.saturating_sub(before.bp_requests),
        });
        before = after;
        observer.step();
    }
    observer.end();
    (out, vectors)
}

/// Up to `n` stored vectors, spread over an integer primary key when there is one.
async fn sample_vectors(
    s: &mut Session,
    idx: &VectorIndex,
    n: usize,
) -> Result<Vec<Vec<f32>>, DbError> {
    let table = format!("{}.{}", ident(&idx.schema), ident(&idx.table));
    let column = ident(idx.column.as_deref().unwrap_or_default());
    let pk = s
        .query(&format!(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA={} AND TABLE_NAME={} AND COLUMN_KEY='PRI'",
            sql_str(&idx.schema),
            sql_str(&idx.table)
        ))
        .await?;
    let int_pk = match pk.as_slice() {
        [row] if col(row, 1).is_some_and(|t| t.to_ascii_lowercase().contains("int")) => col(row, 0),
        _ => None,
    };
    let sql = match int_pk {
        Some(pk) => {
            let pk = ident(&pk);
            let range = s
                .query(&format!("SELECT MIN({pk}), MAX({pk}) FROM {table}"))
                .await?;
            let (lo, hi) = match range.first() {
                Some(r) => (
                    col(r, 0).and_then(|v| v.parse::<i64>().ok()),
                    col(r, 1).and_then(|v| v.parse::<i64>().ok()),
                ),
                None => (None, None),
            };
            let (Some(lo), Some(hi)) = (lo, hi) else {
                return Ok(Vec::new());
            };
            let span = (i128::from(hi) - i128::from(lo)).max(0);
            let parts: Vec<String> = (0..n)
                .map(|i| {
                    // Evenly spread seeks, from the low end to the high end.
                    let at = i128::from(lo) + span * i as i128 / n.max(1) as i128;
                    format!("(SELECT VEC_ToText({column}) FROM {table} WHERE {pk} >= {at} ORDER BY {pk} LIMIT 1)")
                })
                .collect();
            parts.join(" UNION ALL ")
        }
        None => format!("SELECT VEC_ToText({column}) FROM {table} LIMIT {n}"),
    };
    let rows = s.query(&sql).await?;
    Ok(rows
        .iter()
        .filter_map(|r| col(r, 0))
        .filter_map(|t| parse_vector_text(&t))
        .collect())
}

/// `[1,2.5,-3e-2]` → floats; `None` for anything else.
pub(crate) fn parse_vector_text(t: &str) -> Option<Vec<f32>> {
    let inner = t.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return None;
    }
    inner
        .split(',')
        .map(|x| x.trim().parse::<f32>().ok().filter(|v| v.is_finite()))
        .collect()
}

fn perturb(v: &[f32], rng: &mut impl Rng) -> Vec<f32> {
    let rms = (v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / v.len().max(1) as f64).sqrt();
    let sigma = (rms * NOISE).max(1e-6);
    let Ok(noise) = Normal::new(0.0, sigma) else {
        return v.to_vec();
    };
    v.iter()
        .map(|x| (f64::from(*x) + noise.sample(rng)) as f32)
        .collect()
}

/// The session profiler's stages of `vectors.len()` k-NN queries: the first as `profile`, the
/// rest as `more_profiles`. Four statements besides the queries: profiling on and off,
/// `SHOW PROFILES` (which ids are ours) and one read of `information_schema.PROFILING` for all
/// of them (the columns of `SHOW PROFILE ALL`).
async fn profile(
    s: &mut Session,
    idx: &VectorIndex,
    vectors: &[&[f32]],
    limit: u32,
) -> (Gathered<QueryProfile>, Vec<QueryProfile>) {
    let result: Result<Vec<QueryProfile>, DbError> = async {
        s.exec("SET SESSION profiling = 1").await?;
        let mut ran = Ok(());
        for v in vectors {
            if let Err(e) = s.query(&knn_sql(idx, v, limit)).await {
                ran = Err(e);
                break;
            }
        }
        s.exec("SET SESSION profiling = 0").await?;
        ran?;
        let profiles = s.query("SHOW PROFILES").await?;
        let mut ids: Vec<u64> = profiles
            .iter()
            .filter(|r| col(r, 2).is_some_and(|q| q.starts_with("SELECT 1 FROM")))
            .filter_map(|r| col_u64(r, 0))
            .collect();
        // The history may hold older queries of this session: ours are the last ones.
        ids = ids.split_off(ids.len().saturating_sub(vectors.len()));
        if ids.is_empty() {
            return Err(DbError {
                kind: powerdiag_rules::DbErrorKind::Other,
                message: "the profiled queries are missing from SHOW PROFILES".into(),
                hint: String::new(),
            });
        }
        let rows = s
            .query(
                "SELECT QUERY_ID, STATE, DURATION, CPU_USER, CPU_SYSTEM, CONTEXT_VOLUNTARY, \
                 CONTEXT_INVOLUNTARY, BLOCK_OPS_IN, BLOCK_OPS_OUT, PAGE_FAULTS_MAJOR, \
                 PAGE_FAULTS_MINOR FROM information_schema.PROFILING ORDER BY QUERY_ID, SEQ",
            )
            .await?;
        Ok(ids
            .iter()
            .map(|id| QueryProfile {
                index: idx.qualified_name(),
                stages: rows
                    .iter()
                    .filter(|r| col_u64(r, 0) == Some(*id))
                    .map(|r| ProfileStage {
                        status: col(r, 1).unwrap_or_default(),
                        duration_us: col_secs_us(r, 2),
                        cpu_user_us: col_secs_us(r, 3),
                        cpu_system_us: col_secs_us(r, 4),
                        context_voluntary: col_u64(r, 5).unwrap_or(0),
                        context_involuntary: col_u64(r, 6).unwrap_or(0),
                        block_ops_in: col_u64(r, 7).unwrap_or(0),
                        block_ops_out: col_u64(r, 8).unwrap_or(0),
                        page_faults_major: col_u64(r, 9).unwrap_or(0),
                        page_faults_minor: col_u64(r, 10).unwrap_or(0),
                    })
                    .collect(),
            })
            .collect())
    }
    .await;
    match result {
        Ok(all) => {
            let mut all = all.into_iter();
            match all.next() {
                Some(first) => (Gathered::Available(first), all.collect()),
                None => (
                    Gathered::Unavailable("no profiled query".into()),
                    Vec::new(),
                ),
            }
        }
        Err(e) => (Gathered::Unavailable(e.message), Vec::new()),
    }
}

/// The `mariadb_probe` collector: k-NN queries on the vector indexes found. Reports no run
/// when disabled or when there is nothing to probe; fails when every index's probe failed.
pub(super) struct ProbePart<'o> {
    /// `None` disables the probe.
    pub(super) opts: Option<&'o ProbeOptions>,
    pub(super) observer: &'o dyn ProbeObserver,
}

/// The `mariadb_probe` collector.
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_probe",
    help: "a bounded k-NN probe of each vector index with SHOW PROFILE ALL (doctor; the agent at [probe] interval)",
    default_enabled: true,
    requires: Requires::Nothing,
};

impl Part for ProbePart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut powerdiag_rules::MariadbFacts, why: String) {
        facts.probe = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let indexes = match &ctx.facts.vector_indexes {
                Gathered::Unavailable(_) => {
                    ctx.facts.probe =
                        Gathered::Unavailable("vector indexes could not be listed".into());
                    return Err(CollectError::skipped("no vector index list"));
                }
                Gathered::Available(i) => i.clone(),
            };
            let Some(popts) = self.opts else {
                ctx.facts.probe = Gathered::Unavailable(DISABLED.into());
                return Err(CollectError::skipped("probing disabled"));
            };
            if indexes.is_empty() {
                ctx.facts.probe = Gathered::Available(powerdiag_rules::Probe::default());
                return Err(CollectError::skipped("no vector index to probe"));
            }
            match run(ctx.s, &indexes, popts, self.observer).await {
                Ok(p) => {
                    let failed: Vec<&str> = p
                        .indexes
                        .iter()
                        .filter_map(|i| i.error.as_deref())
                        .collect();
                    let result = if failed.len() == p.indexes.len() {
                        CollectError::failed_statements(failed)
                    } else {
                        Ok(())
                    };
                    ctx.facts.probe = Gathered::Available(p);
                    result
                }
                Err(e) => {
                    ctx.facts.probe = Gathered::Unavailable(e.message.clone());
                    Err(CollectError::database(e))
                }
            }
        })
    }
}

/// The probe's piece when it is off.
pub(super) const DISABLED: &str =
    "probing disabled (doctor --no-probe, or the agent's [probe] enabled = false)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_text() {
        assert_eq!(
            parse_vector_text("[1,2.5,-0.03]"),
            Some(vec![1.0, 2.5, -0.03])
        );
        assert_eq!(parse_vector_text("[]"), None);
        assert_eq!(parse_vector_text("[1,x]"), None);
        assert_eq!(parse_vector_text("[1,inf]"), None);
        assert_eq!(parse_vector_text("1,2"), None);
    }

    #[test]
    fn knn_sql_uses_the_index_distance_and_quotes_names() {
        let idx = VectorIndex {
            schema: "a`b".into(),
            table: "t".into(),
            column: Some("e".into()),
            distance: Some("cosine".into()),
            ..Default::default()
        };
        let sql = knn_sql(&idx, &[1.0, -2.5], 10);
        assert_eq!(
            sql,
            "SELECT 1 FROM `a``b`.`t` ORDER BY VEC_DISTANCE_COSINE(`e`, VEC_FromText('[1,-2.5]')) LIMIT 10"
        );
    }

    #[test]
    fn noise_is_small_and_deterministic() {
        let v = vec![3.0f32; 64];
        let a = perturb(&v, &mut StdRng::seed_from_u64(SEED));
        let b = perturb(&v, &mut StdRng::seed_from_u64(SEED));
        assert_eq!(a, b);
        let mean_abs = a.iter().zip(&v).map(|(x, y)| (x - y).abs()).sum::<f32>() / 64.0;
        assert!(mean_abs > 0.0 && mean_abs < 0.5, "{mean_abs}");
    }
}
