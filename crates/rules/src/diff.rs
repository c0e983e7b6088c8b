//! Apples-to-apples comparison of two snapshots: the differences that matter for database
//! performance, ranked by the impact the field reports measured, and a plain statement of
//! whether the two hosts are comparable at all.

use serde::{Deserialize, Serialize};

use crate::rules::{
    AixGccBuild, AllocatorDefault, CpuFrequencyThrottled, InnodbChecksumSoftware,
    InnodbNativeAioOff, LparDedicatedCappedLatency, LparDonatingMode, MariadbOldWriteScalability,
    MhnswCacheUndersized, PerformanceSchemaOff, SmallPagesAix, SmallPagesLinux, SmtDisabled,
    WorkingSetExceedsL3,
};
use crate::{
    Allocator, Compiler, Gathered, Impact, PartitionFacts, RuleMeta, Snapshot, Var, format_bytes,
};

/// The comparison of snapshot A with snapshot B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub a: Side,
    pub b: Side,
    pub comparable: Comparability,
    /// Measured outcome, when both probed the same vector index: B's median query latency over
    /// A's.
    pub probe_latency_ratio: Option<f64>,
    /// Differences, highest known impact first.
    pub differences: Vec<Difference>,
    /// What could not be compared, and why.
    pub notes: Vec<String>,
    /// The statement digests of both sides, when both have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements: Option<StatementsDiff>,
}

/// Statements present on both sides (matched by schema and digest) and those on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementsDiff {
    /// A's and B's period, in words.
    pub period_a: String,
    pub period_b: String,
    /// On both sides, B's time per call over A's largest change first.
    pub both: Vec<StatementChange>,
    /// Only in A's listed digests (B no longer runs them, or not among its busiest).
    pub only_a: Vec<StatementSide>,
    pub only_b: Vec<StatementSide>,
}

/// One statement on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementChange {
    pub schema: Option<String>,
    pub digest: String,
    /// The digest text, shortened.
    pub text: String,
    pub calls_per_second_a: Option<f64>,
    pub calls_per_second_b: Option<f64>,
    pub mean_seconds_a: f64,
    pub mean_seconds_b: f64,
    #[serde(default)]
    pub calls_a: u64,
    #[serde(default)]
    pub calls_b: u64,
    #[serde(default)]
    pub rows_examined_per_call_a: f64,
    #[serde(default)]
    pub rows_examined_per_call_b: f64,
    /// B's time per call is at least PD709's default factor (3×) A's, over at least its
    /// default calls (20) on each side: a per-statement regression from A to B.
    #[serde(default)]
    pub regressed: bool,
}

/// A statement listed on one side only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementSide {
    pub schema: Option<String>,
    pub digest: String,
    pub text: String,
    pub calls: u64,
    pub time_share: f64,
    pub mean_seconds: f64,
}

/// Who is being compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub host: String,
    pub os: String,
    pub cpu: String,
    pub mariadb: String,
    pub taken_at: Option<String>,
}

/// Whether the hardware is the same, and by how much it is not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparability {
    pub comparable: bool,
    /// Each hardware difference with its size, e.g. `B has 2.0× the cores (24 vs 12)`.
    pub reasons: Vec<String>,
}

/// One difference between the hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub topic: String,
    pub a: String,
    pub b: String,
    /// The known effect of this difference, as a speed factor from the field reports (3.0 = up
    /// to 3× faster on the better side). Differences are ranked by it.
    pub impact: f64,
    /// The rule that covers it, if any.
    pub rule: Option<String>,
    /// Where the impact comes from.
    pub evidence: String,
}

/// Compares two snapshots.
pub fn diff(a: &Snapshot, b: &Snapshot) -> Diff {
    let mut d = Vec::new();
    vector_cache(a, b, &mut d);
    compiler(a, b, &mut d);
    pages(a, b, &mut d);
    partition(a, b, &mut d);
    smt(a, b, &mut d);
    frequency(a, b, &mut d);
    cores_and_l3(a, b, &mut d);
    version(a, b, &mut d);
    let mut notes = Vec::new();
    if a.db().is_ok() && b.db().is_ok() {
        variables(a, b, &mut d);
        replication(a, b, &mut d);
    } else {
        notes.push(format!(
            "server variables not compared: {} has no MariaDB facts",
            if a.db().is_err() { "A" } else { "B" }
        ));
    }
    allocator(a, b, &mut d);
    // A side that is (partly) unknown is not a known difference: it goes to the notes,
    // unranked, with both sides as they were read.
    let (known, unknown_side): (Vec<Difference>, Vec<Difference>) = d
        .into_iter()
        .partition(|x| !x.a.contains(UNKNOWN) && !x.b.contains(UNKNOWN));
    let mut d = known;
    for x in unknown_side {
        notes.push(format!("{} not compared: A {}, B {}", x.topic, x.a, x.b));
    }
    d.sort_by(|x, y| {
        y.impact
            .total_cmp(&x.impact)
            .then_with(|| x.topic.cmp(&y.topic))
    });
    Diff {
        a: side(a),
        b: side(b),
        comparable: comparability(a, b),
        probe_latency_ratio: probe_ratio(a, b),
        differences: d,
        notes,
        statements: statements(a, b),
    }
}

/// Most statements listed per part of the statements comparison.
const STATEMENTS_LISTED: usize = 20;

fn statements(a: &Snapshot, b: &Snapshot) -> Option<StatementsDiff> {
    let sa = a.db().ok()?.statements().ok()?;
    let sb = b.db().ok()?.statements().ok()?;
    let key = |d: &crate::Digest| (d.schema.clone(), d.digest.clone());
    let in_b: std::collections::HashMap<_, _> = sb.judged().map(|d| (key(d), d)).collect();
    let in_a: std::collections::HashSet<_> = sa.judged().map(key).collect();
    let mut both: Vec<StatementChange> = sa
        .judged()
        .filter_map(|da| {
            let db = in_b.get(&key(da))?;
            let enough = |d: &crate::Digest| {
                d.calls as f64 >= crate::rules::StatementRegressed::DEFAULT_MIN_CALLS
            };
            Some(StatementChange {
                schema: da.schema.clone(),
                digest: da.digest.clone(),
                text: da.short_text(120),
                calls_per_second_a: sa.calls_per_second(da),
                calls_per_second_b: sb.calls_per_second(db),
                mean_seconds_a: da.mean_us() / 1e6,
                mean_seconds_b: db.mean_us() / 1e6,
                calls_a: da.calls,
                calls_b: db.calls,
                rows_examined_per_call_a: da.examined_per_call(),
                rows_examined_per_call_b: db.examined_per_call(),
                regressed: enough(da)
                    && enough(db)
                    && db.mean_us()
                        >= crate::rules::StatementRegressed::DEFAULT_SLOWDOWN
                            * da.mean_us().max(1e-3),
            })
        })
        .collect();
    let change = |c: &StatementChange| {
        let (x, y) = (c.mean_seconds_a.max(1e-9), c.mean_seconds_b.max(1e-9));
        (y / x).ln().abs()
    };
    both.sort_by(|x, y| change(y).total_cmp(&change(x)));
    both.truncate(STATEMENTS_LISTED);
    let one = |st: &crate::Statements, other: &dyn Fn(&crate::Digest) -> bool| {
        st.judged()
            .filter(|d| !other(d))
            .take(STATEMENTS_LISTED)
            .map(|d| StatementSide {
                schema: d.schema.clone(),
                digest: d.digest.clone(),
                text: d.short_text(120),
                calls: d.calls,
                time_share: d.time_share(&st.total),
                mean_seconds: d.mean_us() / 1e6,
            })
            .collect::<Vec<_>>()
    };
    Some(StatementsDiff {
        period_a: sa.period_text(),
        period_b: sb.period_text(),
        both,
        only_a: one(sa, &|d| in_b.contains_key(&key(d))),
        only_b: one(sb, &|d| in_a.contains(&key(d))),
    })
}

fn side(s: &Snapshot) -> Side {
    let host = s.host.as_ref().ok();
    let cpu = s.cpu().ok();
    Side {
        host: host
            .map(|h| h.hostname.clone())
            .unwrap_or_else(|| "?".into()),
        os: host
            .map(|h| format!("{} {}", h.os, h.arch))
            .unwrap_or_else(|| "?".into()),
        cpu: cpu
            .map(|c| {
                format!(
                    "{}, {} threads{}",
                    c.model.as_deref().unwrap_or(&c.architecture),
                    c.threads,
                    c.cores
                        .map(|n| format!(" on {n} cores"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "?".into()),
        mariadb: s
            .db()
            .map(|f| f.version.raw.clone())
            .unwrap_or_else(|_| "not reached".into()),
        taken_at: s.taken_at.clone(),
    }
}

fn comparability(a: &Snapshot, b: &Snapshot) -> Comparability {
    let mut reasons = Vec::new();
    let (ca, cb) = (a.cpu().ok(), b.cpu().ok());
    let (Some(ca), Some(cb)) = (ca, cb) else {
        return Comparability {
            comparable: false,
            reasons: vec!["the CPU facts of one snapshot are missing: cannot tell".into()],
        };
    };
    if ca.power && cb.power {
        // AIX says ppc64 and Linux ppc64le (or ppc64) on the same POWER9: the hardware is the
        // generation, not the operating system's architecture string or model wording.
        let (ga, gb) = (power_generation(ca), power_generation(cb));
        if ga.is_some() && gb.is_some() && ga != gb {
            reasons.push(format!(
                "different POWER generations: {} vs {}",
                ga.unwrap_or_default(),
                gb.unwrap_or_default()
            ));
        }
    } else if ca.architecture != cb.architecture {
        reasons.push(format!(
            "different architectures: {} vs {}",
            ca.architecture, cb.architecture
        ));
    } else if ca.model != cb.model {
        reasons.push(format!(
            "different CPU models: {} vs {}",
            ca.model.as_deref().unwrap_or("?"),
            cb.model.as_deref().unwrap_or("?")
        ));
    }
    let mut ratio = |what: &str, x: Option<f64>, y: Option<f64>, show: &dyn Fn(f64) -> String| {
        if let (Some(x), Some(y)) = (x, y)
            && x > 0.0
            && y > 0.0
            && ((y / x) - 1.0).abs() > 0.10
        {
            let (more, r, big, small) = if y > x {
                ("B", y / x, y, x)
            } else {
                ("A", x / y, x, y)
            };
            reasons.push(format!(
                "{more} has {r:.2}× the {what} ({} vs {})",
                show(big),
                show(small)
            ));
        }
    };
    let cores = |c: &crate::CpuFacts, s: &Snapshot| -> Option<f64> {
        // A partition's virtual processors are its cores.
        s.partition()
            .ok()
            .and_then(|p| p.online_vcpus)
            .or(c.cores)
            .map(f64::from)
    };
    ratio("cores", cores(ca, a), cores(cb, b), &|v| format!("{v:.0}"));
    let l3 = |s: &Snapshot| {
        s.topology()
            .ok()
            .and_then(|t| t.l3_total_bytes)
            .map(|v| v as f64)
    };
    ratio("L3 cache", l3(a), l3(b), &|v| format_bytes(v as u64));
    Comparability {
        comparable: reasons.is_empty(),
        reasons,
    }
}

/// `POWER9` from a model such as `POWER9 (architected), altivec supported` or AIX's
/// `PowerPC_POWER9`.
fn power_generation(c: &crate::CpuFacts) -> Option<String> {
    let m = c.model.as_deref()?.to_ascii_uppercase();
    let at = m.find("POWER")?;
    let digits: String = m[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("POWER{digits}"))
}

/// Records a difference when the two descriptions differ. The factor and its evidence are
/// the covering rules' declared [`Impact`]s (`RuleMeta::impact`), never numbers kept here.
fn push(
    d: &mut Vec<Difference>,
    topic: &str,
    (a, b): (String, String),
    impact: f64,
    rules: &[&RuleMeta],
    evidence: &str,
) {
    if a != b {
        d.push(Difference {
            topic: topic.into(),
            a,
            b,
            impact,
            rule: (!rules.is_empty())
                .then(|| rules.iter().map(|r| r.code).collect::<Vec<_>>().join("/")),
            evidence: evidence.into(),
        });
    }
}

/// [`push`] with one measured [`Impact`].
fn push_impact(
    d: &mut Vec<Difference>,
    topic: &str,
    sides: (String, String),
    impact: &Impact,
    rules: &[&RuleMeta],
) {
    push(d, topic, sides, impact.factor, rules, impact.evidence);
}

/// The larger of the two values' ratios, when both are known and positive.
fn ratio(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 => Some((x / y).max(y / x)),
        _ => None,
    }
}

const UNKNOWN: &str = "unknown";

fn unknown() -> String {
    UNKNOWN.into()
}

fn vector_cache(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let describe = |s: &Snapshot| -> Option<(bool, String)> {
        let db = s.db().ok()?;
        let limit = db.var_u64(Var::MhnswMaxCacheSize).ok()?;
        let graph = match &db.vector_indexes {
            Gathered::Available(v) => v
                .iter()
                .filter_map(|i| db.graph_estimate(i))
                .map(|e| e.bytes)
                .max(),
            Gathered::Unavailable(_) => None,
        };
        let text = match graph {
            Some(g) => format!(
                "cache {} for a {} graph: {}",
                format_bytes(limit),
                format_bytes(g),
                if g > limit { "thrashes" } else { "fits" }
            ),
            None => format!("cache {}, graph unknown", format_bytes(limit)),
        };
        Some((graph.is_some_and(|g| g > limit), text))
    };
    let (x, y) = (describe(a), describe(b));
    let thrash_differs = matches!((&x, &y), (Some((p, _)), Some((q, _))) if p != q);
    push_impact(
        d,
        "vector cache vs graph size",
        (
            x.map(|v| v.1).unwrap_or_else(unknown),
            y.map(|v| v.1).unwrap_or_else(unknown),
        ),
        if thrash_differs {
            &MhnswCacheUndersized::CACHE_THRASHES
        } else {
            &MhnswCacheUndersized::CACHE_SIZE_ONLY
        },
        &[&MhnswCacheUndersized::META],
    );
}

fn compiler(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let c = |s: &Snapshot| -> String {
        match s.process().ok().and_then(|p| p.compiler) {
            Some(Compiler::Gcc) => "GCC".into(),
            Some(Compiler::OpenXl) => "IBM Open XL".into(),
            Some(Compiler::Other) => "other".into(),
            None => unknown(),
        }
    };
    push_impact(
        d,
        "compiler of mariadbd",
        (c(a), c(b)),
        &AixGccBuild::COMPILER,
        &[&AixGccBuild::META],
    );
}

/// The page sizes mariadbd's memory uses, as values: `(data, text, stack, mostly huge)`. On
/// Linux the base page backs all three; AIX sets each. 64 KiB AIX data/text/stack pages and
/// 64 KiB Linux base pages are the same thing.
fn page_profile(s: &Snapshot) -> Option<(u64, u64, u64, bool)> {
    let proc = s.process().ok();
    if let Some(p) = proc
        && let Some(data) = p.data_page_bytes
    {
        return Some((
            data,
            p.text_page_bytes.unwrap_or(data),
            p.stack_page_bytes.unwrap_or(data),
            false,
        ));
    }
    let base = s.memory().ok().and_then(|m| m.base_page_bytes)?;
    let huge = proc
        .and_then(|p| Some((p.anon_huge_bytes?, p.rss_bytes?)))
        .is_some_and(|(huge, rss)| rss > 0 && huge.saturating_mul(10) > rss);
    Some((base, base, base, huge))
}

fn pages(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let p = |s: &Snapshot| -> String {
        let base = s.memory().ok().and_then(|m| m.base_page_bytes);
        let proc = s.process().ok();
        if let Some(p) = proc
            && let Some(data) = p.data_page_bytes
        {
            return format!(
                "data {} / text {} / stack {}",
                format_bytes(data),
                p.text_page_bytes.map(format_bytes).unwrap_or_else(unknown),
                p.stack_page_bytes.map(format_bytes).unwrap_or_else(unknown)
            );
        }
        match (
            base,
            proc.and_then(|p| Some((p.anon_huge_bytes?, p.rss_bytes?))),
        ) {
            (Some(b), Some((huge, rss))) if rss > 0 && huge * 10 > rss => {
                format!(
                    "{} base, {:.0}% in huge pages",
                    format_bytes(b),
                    huge as f64 * 100.0 / rss as f64
                )
            }
            (Some(b), _) => format!("{} pages", format_bytes(b)),
            (None, _) => unknown(),
        }
    };
    // Compared by value: the descriptions differ between AIX and Linux for the same pages.
    if let (Some(x), Some(y)) = (page_profile(a), page_profile(b))
        && x == y
    {
        return;
    }
    push_impact(
        d,
        "memory page size",
        (p(a), p(b)),
        &SmallPagesAix::PAGE_SIZE,
        &[&SmallPagesAix::META, &SmallPagesLinux::META],
    );
}

/// The partition's mode: shared or dedicated, capped, uncapped or donating. Entitlement and
/// virtual processors are capacity, compared under "cores and L3", not a mode.
fn mode(p: &PartitionFacts) -> String {
    format!(
        "{} {}",
        if p.shared { "shared" } else { "dedicated" },
        if p.donating {
            "donating"
        } else if p.capped {
            "capped"
        } else {
            "uncapped"
        }
    )
}

fn partition(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let p = |s: &Snapshot| -> (String, bool) {
        match s.os().ok().map(|o| &o.partition) {
            Some(Gathered::Available(Some(p))) => (mode(p), p.donating),
            Some(Gathered::Available(None)) => ("not a partition".into(), false),
            _ => (unknown(), false),
        }
    };
    let ((x, dx), (y, dy)) = (p(a), p(b));
    // One measurement per row: the one that matches the difference found.
    let impact = if dx != dy {
        &LparDonatingMode::DONATING
    } else {
        &LparDedicatedCappedLatency::PARTITION_MODE
    };
    push_impact(
        d,
        "partition mode",
        (x, y),
        impact,
        &[&LparDonatingMode::META, &LparDedicatedCappedLatency::META],
    );
}

fn smt(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let t = |s: &Snapshot| {
        s.cpu()
            .ok()
            .and_then(|c| c.threads_per_core)
            .map(|t| format!("SMT{t}"))
            .unwrap_or_else(unknown)
    };
    let (x, y) = (t(a), t(b));
    let off = x == "SMT1" || y == "SMT1";
    push_impact(
        d,
        "threads per core",
        (x, y),
        if off {
            &SmtDisabled::SMT_OFF
        } else {
            &SmtDisabled::SMT_LEVEL
        },
        &[&SmtDisabled::META],
    );
}

fn frequency(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let f = |s: &Snapshot| s.cpu().ok().and_then(|c| c.measured_mhz()).map(|(m, _)| m);
    let text = |s: &Snapshot| {
        let c = s.cpu().ok();
        match (f(s), c.and_then(|c| c.nominal_mhz)) {
            (Some(e), Some(n)) => format!("{e:.0} MHz ({:.0}% of nominal {n:.0})", e * 100.0 / n),
            (Some(e), None) => format!("{e:.0} MHz"),
            (None, Some(n)) => format!("nominal {n:.0} MHz, effective unknown"),
            (None, None) => unknown(),
        }
    };
    let known = &CpuFrequencyThrottled::FREQUENCY;
    push(
        d,
        "effective CPU frequency",
        (text(a), text(b)),
        ratio(f(a), f(b)).unwrap_or(known.factor),
        &[
            &LparDedicatedCappedLatency::META,
            &CpuFrequencyThrottled::META,
        ],
        known.evidence,
    );
}

fn cores_and_l3(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let c = |s: &Snapshot| -> (Option<f64>, String) {
        let cpu = s.cpu().ok();
        let cores = s
            .partition()
            .ok()
            .and_then(|p| p.online_vcpus)
            .or(cpu.and_then(|c| c.cores));
        let l3 = s.topology().ok().and_then(|t| t.l3_total_bytes);
        (
            cores.map(f64::from),
            format!(
                "{} cores, {} threads, L3 {}",
                cores.map(|c| c.to_string()).unwrap_or_else(unknown),
                cpu.map(|c| c.threads.to_string()).unwrap_or_else(unknown),
                l3.map(format_bytes).unwrap_or_else(unknown)
            ),
        )
    };
    let ((x, tx), (y, ty)) = (c(a), c(b));
    let (known, max) = (&WorkingSetExceedsL3::CORES, &WorkingSetExceedsL3::CORES_MAX);
    push(
        d,
        "cores and L3",
        (tx, ty),
        ratio(x, y).map_or(known.factor, |r| r.min(max.factor)),
        &[&WorkingSetExceedsL3::META],
        known.evidence,
    );
}

fn version(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    // The same release with another packaging suffix (`-ubu2404`) is not a difference.
    let key = |s: &Snapshot| s.db().ok().map(|f| (f.version.short(), f.version.flavour));
    if key(a).is_some() && key(a) == key(b) {
        return;
    }
    let v = |s: &Snapshot| {
        s.db()
            .map(|f| f.version.raw.clone())
            .unwrap_or_else(|_| unknown())
    };
    push_impact(
        d,
        "MariaDB version",
        (v(a), v(b)),
        &MariadbOldWriteScalability::VERSION_DIFFERS,
        &[&MariadbOldWriteScalability::META],
    );
}

/// Server variables worth comparing, with the rule that covers each.
const VARIABLES: &[(Var, &[&RuleMeta])] = &[
    (Var::InnodbBufferPoolSize, &[]),
    (
        Var::InnodbChecksumAlgorithm,
        &[&InnodbChecksumSoftware::META],
    ),
    (Var::InnodbUseNativeAio, &[&InnodbNativeAioOff::META]),
    (Var::PerformanceSchema, &[&PerformanceSchemaOff::META]),
    (Var::InnodbFlushLogAtTrxCommit, &[]),
    (Var::InnodbFlushMethod, &[]),
    (Var::LargePages, &[&SmallPagesLinux::META]),
    (Var::ThreadHandling, &[]),
    (Var::MhnswDefaultM, &[]),
    (Var::MhnswEfSearch, &[]),
    // The replication role's settings: a primary writing ROW events does more per write.
    (Var::LogBin, &[]),
    (Var::BinlogFormat, &[]),
    (Var::BinlogCacheSize, &[]),
    (Var::SlaveParallelThreads, &[]),
    (Var::RplSemiSyncMasterEnabled, &[]),
    // A Galera node certifies every write with the cluster and applies the others'.
    (Var::WsrepOn, &[]),
    (Var::WsrepSlaveThreads, &[]),
];

/// Any differing server setting: no measurement of its own, ranked just above equal.
const SERVER_SETTING: Impact = Impact {
    factor: 1.02,
    evidence: "server setting",
};

fn variables(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    for (var, rule) in VARIABLES {
        let v = |s: &Snapshot| {
            s.db()
                .ok()
                .and_then(|f| f.var(*var).ok())
                .map(str::to_owned)
                .unwrap_or_else(unknown)
        };
        push_impact(d, var.name(), (v(a), v(b)), &SERVER_SETTING, rule);
    }
}

/// The replication role: a replica applies every write of its primary besides its own reads.
fn replication(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let role = |s: &Snapshot| match s.db().ok().map(|f| &f.replication) {
        Some(Gathered::Available(r)) if r.connections.is_empty() => {
            // A primary says how many replicas it feeds (Slaves_connected).
            match s
                .db()
                .ok()
                .and_then(|f| f.status_u64(crate::StatusVar::SlavesConnected).ok())
            {
                Some(n) if n > 0 => format!("not a replica; primary of {n} replica(s)"),
                _ => "not a replica".to_owned(),
            }
        }
        Some(Gathered::Available(r)) => {
            let each: Vec<String> = r
                .connections
                .iter()
                .map(|c| {
                    format!(
                        "{} (IO {}, SQL {}, parallel {})",
                        crate::display_text(&c.source, 80),
                        crate::display_text(&c.io_running, 12),
                        crate::display_text(&c.sql_running, 12),
                        c.parallel_mode
                            .as_deref()
                            .map(|m| crate::display_text(m, 24))
                            .unwrap_or_else(unknown)
                    )
                })
                .collect();
            format!("replica of {}", each.join(", "))
        }
        _ => unknown(),
    };
    push_impact(
        d,
        "replication role",
        (role(a), role(b)),
        &SERVER_SETTING,
        &[],
    );
    // The Galera role: a node of a cluster of N in its state, or none.
    let galera = |s: &Snapshot| match s.db().ok() {
        Some(f) if f.var_bool(Var::WsrepOn) == Ok(true) => format!(
            "node of a cluster of {} ({}, {})",
            f.status_str(crate::StatusVar::WsrepClusterSize)
                .map(|v| crate::display_text(v, 8))
                .unwrap_or_else(|_| unknown()),
            f.status_str(crate::StatusVar::WsrepClusterStatus)
                .map(|v| crate::display_text(v, 24))
                .unwrap_or_else(|_| unknown()),
            f.status_str(crate::StatusVar::WsrepLocalStateComment)
                .map(|v| crate::display_text(v, 24))
                .unwrap_or_else(|_| unknown()),
        ),
        Some(f) if f.var_bool(Var::WsrepOn) == Ok(false) => "not a Galera node".to_owned(),
        _ => unknown(),
    };
    push_impact(
        d,
        "Galera role",
        (galera(a), galera(b)),
        &SERVER_SETTING,
        &[],
    );
}

fn allocator(a: &Snapshot, b: &Snapshot, d: &mut Vec<Difference>) {
    let m = |s: &Snapshot| match s.process().ok().and_then(|p| p.allocator) {
        Some(Allocator::Jemalloc) => "jemalloc".to_owned(),
        Some(Allocator::Tcmalloc) => "tcmalloc".into(),
        Some(Allocator::Mimalloc) => "mimalloc".into(),
        Some(Allocator::Libc) => "libc malloc".into(),
        None => unknown(),
    };
    push_impact(
        d,
        "memory allocator",
        (m(a), m(b)),
        &AllocatorDefault::ALLOCATOR,
        &[&AllocatorDefault::META],
    );
}

/// Median later-query latency of the first vector index both probed, B over A.
fn probe_ratio(a: &Snapshot, b: &Snapshot) -> Option<f64> {
    let medians = |s: &Snapshot| -> Vec<(String, f64)> {
        let Ok(db) = s.db() else { return Vec::new() };
        let Gathered::Available(p) = &db.probe else {
            return Vec::new();
        };
        p.indexes
            .iter()
            .filter_map(|i| {
                let mut l: Vec<u64> = i.queries.iter().skip(1).map(|q| q.latency_us).collect();
                l.sort_unstable();
                let m = *l.get(l.len() / 2)?;
                (m > 0).then(|| (format!("{}.{}.{}", i.schema, i.table, i.index), m as f64))
            })
            .collect()
    };
    let (ma, mb) = (medians(a), medians(b));
    ma.iter()
        .find_map(|(k, x)| mb.iter().find(|(j, _)| j == k).map(|(_, y)| y / x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn statements_on_both_sides_and_on_one() {
        let mut listing = digest("SELECT * FROM `t` WHERE `a` = ?", 100, 1_000_000, 1000, 10);
        listing.first_seen_age_seconds = Some(100);
        let lookup = digest("SELECT * FROM `u` WHERE `id` = ?", 1000, 100_000, 1, 1);
        let joined = digest(
            "SELECT * FROM `t` JOIN `u` ON `a` = `b`",
            10,
            50_000,
            10,
            10,
        );
        let a = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![listing.clone(), lookup], 0)
            .build();
        let mut faster = listing;
        faster.time_us = 100_000;
        faster.first_seen_age_seconds = Some(50);
        let b = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![faster, joined], 0)
            .build();
        let st = diff(&a, &b).statements.expect("both have statements");
        assert_eq!(st.both.len(), 1);
        let c = &st.both[0];
        assert_eq!(
            (c.calls_per_second_a, c.calls_per_second_b),
            (Some(1.0), Some(2.0))
        );
        assert!((c.mean_seconds_a - 0.01).abs() < 1e-9 && (c.mean_seconds_b - 0.001).abs() < 1e-9);
        assert!(st.only_a[0].text.contains("`u`") && st.only_b[0].text.contains("JOIN"));
        // 10× faster is no regression; the way back (B → A) is.
        assert!(!c.regressed);
        let back = diff(&b, &a).statements.unwrap();
        assert!(back.both[0].regressed, "{back:?}");
        assert_eq!(
            (back.both[0].rows_examined_per_call_a, back.both[0].calls_b),
            (1000.0, 100)
        );
        // Without digests on one side there is nothing to compare.
        let none = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert!(diff(&a, &none).statements.is_none());
    }

    #[test]
    fn identical_snapshots_have_no_differences_and_are_comparable() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .build();
        let d = diff(&s, &s);
        assert!(d.differences.is_empty(), "{:#?}", d.differences);
        assert!(d.comparable.comparable);
    }

    #[test]
    fn ranked_by_known_impact_and_not_comparable_across_core_counts() {
        let a = SnapshotBuilder::new()
            .mariadb("11.8.5-MariaDB")
            .vector_index(big_vector_index())
            .os(|o| on_power_lpar(o, lpar(true, false, false, 7.2, 12), 48, 4))
            .build();
        let b = SnapshotBuilder::new()
            .mariadb("11.8.5-MariaDB")
            .var(Var::MhnswMaxCacheSize, "4294967296")
            .vector_index(big_vector_index())
            .os(|o| on_power_lpar(o, lpar(false, true, false, 24.0, 24), 96, 4))
            .build();
        let d = diff(&a, &b);
        assert_eq!(
            d.differences[0].topic, "vector cache vs graph size",
            "{:#?}",
            d.differences
        );
        assert!(d.differences[0].a.contains("thrashes") && d.differences[0].b.contains("fits"));
        assert!(!d.comparable.comparable);
        assert!(
            d.comparable.reasons[0].contains("B has 2.00× the cores (24 vs 12)"),
            "{:?}",
            d.comparable.reasons
        );
        let impacts: Vec<f64> = d.differences.iter().map(|x| x.impact).collect();
        assert!(impacts.windows(2).all(|w| w[0] >= w[1]), "{impacts:?}");
    }

    /// Issue 34: a replica beside a primary is a difference of role; a side whose
    /// replication was not read is a note.
    #[test]
    fn the_replication_role_is_compared() {
        use crate::testing::replica;
        let primary = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB-log")
            .var(Var::LogBin, "ON")
            .replication(vec![])
            .build();
        let rep = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB-log")
            .var(Var::LogBin, "OFF")
            .replication(vec![replica("")])
            .build();
        let d = diff(&primary, &rep);
        let role = d
            .differences
            .iter()
            .find(|x| x.topic == "replication role")
            .unwrap_or_else(|| panic!("{d:#?}"));
        assert_eq!(role.a, "not a replica");
        assert_eq!(
            role.b,
            "replica of 127.0.0.1:3306 (IO Yes, SQL Yes, parallel optimistic)"
        );
        assert!(d.differences.iter().any(|x| x.topic == "log_bin"), "{d:#?}");
        let unread = SnapshotBuilder::new().mariadb("11.8.3-MariaDB-log").build();
        let d = diff(&primary, &unread);
        assert!(
            d.notes
                .iter()
                .any(|n| n == "replication role not compared: A not a replica, B unknown"),
            "{d:#?}"
        );
    }

    /// Issue 34: a Galera node beside a standalone server.
    #[test]
    fn the_galera_role_is_compared() {
        use crate::StatusVar;
        let alone = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "OFF")
            .build();
        let node = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "ON")
            .status(StatusVar::WsrepClusterSize, "3")
            .status(StatusVar::WsrepClusterStatus, "Primary")
            .status(StatusVar::WsrepLocalStateComment, "Synced")
            .build();
        let d = diff(&alone, &node);
        let role = d
            .differences
            .iter()
            .find(|x| x.topic == "Galera role")
            .unwrap_or_else(|| panic!("{d:#?}"));
        assert_eq!(
            (role.a.as_str(), role.b.as_str()),
            (
                "not a Galera node",
                "node of a cluster of 3 (Primary, Synced)"
            )
        );
    }

    #[test]
    fn missing_facts_do_not_panic() {
        let mut a = SnapshotBuilder::new().build();
        a.os = Gathered::Unavailable("no".into());
        let b = SnapshotBuilder::new().mariadb("10.11.9-MariaDB").build();
        let d = diff(&a, &b);
        assert!(!d.comparable.comparable);
        assert!(
            d.notes
                .iter()
                .any(|n| n.starts_with("MariaDB version not compared: A unknown")),
            "{d:#?}"
        );
    }

    /// Issue 15: the same POWER9 under AIX (ppc64, 64 KiB data/text/stack pages) and under
    /// Linux (ppc64le, 64 KiB base pages) differs in neither architecture nor page size; a
    /// core-count difference is capacity, not a partition mode.
    #[test]
    fn like_is_compared_with_like() {
        use crate::testing::*;
        let aix = SnapshotBuilder::new()
            .aix()
            .process(|p| {
                p.data_page_bytes = Some(65536);
                p.text_page_bytes = Some(65536);
                p.stack_page_bytes = Some(65536);
            })
            .build();
        let mut linux = SnapshotBuilder::new()
            .os(|o| {
                on_power_lpar(o, lpar(true, false, false, 3.0, 12), 48, 4);
                if let Gathered::Available(m) = &mut o.memory {
                    m.base_page_bytes = Some(65536);
                }
                if let Gathered::Available(c) = &mut o.cpu {
                    c.architecture = "ppc64le".into();
                }
                if let Gathered::Available(p) = &mut o.process {
                    p.anon_huge_bytes = Some(0);
                }
            })
            .build();
        let d = diff(&aix, &linux);
        assert!(
            !d.differences.iter().any(|x| x.topic == "memory page size"),
            "{d:#?}"
        );
        assert!(
            !d.comparable
                .reasons
                .iter()
                .any(|r| r.contains("architecture")),
            "{d:#?}"
        );
        // Entitlement and virtual processors are not a mode.
        let mut other = linux.clone();
        if let Gathered::Available(o) = &mut other.os
            && let Gathered::Available(Some(p)) = &mut o.partition
        {
            p.entitled_capacity = Some(6.0);
            p.online_vcpus = Some(24);
        }
        let d = diff(&linux, &other);
        assert!(
            !d.differences.iter().any(|x| x.topic == "partition mode"),
            "{d:#?}"
        );
        // A side that is unknown is a note, not a difference.
        if let Gathered::Available(o) = &mut linux.os {
            o.process = Gathered::Unavailable("no mariadbd".into());
        }
        let d = diff(&aix, &linux);
        assert!(
            !d.differences
                .iter()
                .any(|x| x.a == "unknown" || x.b == "unknown"),
            "{d:#?}"
        );
        assert!(d.notes.iter().any(|n| n.contains("not compared")), "{d:#?}");
    }
}
