//! Collectors. Each one is timed and reported as a [`CollectorRun`]; one failing collector
//! never fails the others: its part of the snapshot is `Unavailable` with the reason.

pub mod host;
pub mod mariadb;
pub mod os;

use std::time::{Duration, Instant};

use powerdiag_rules::{CollectorRun, Gathered, OsFacts, Snapshot, Var};

pub use mariadb::{
    MariadbOptions, NoProgress, ProbeObserver, ProbeOptions, Reuse, StatementOptions,
    StatementTracker, VectorCache,
};

/// What a one-shot collection should do.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Endpoints to try, in order; empty skips MariaDB.
    pub candidates: Vec<mariadb::target::Candidate>,
    pub mariadb: MariadbOptions,
    /// RFC 3339 time of collection, supplied by the caller.
    pub taken_at: Option<String>,
    /// Where /proc, /sys and / are (a recorded tree replays the OS collector).
    pub roots: os::Roots,
    /// Shortest OS sample window for rates (steal, counters); zero reads since-boot totals.
    pub sample_window: Duration,
}

/// Statistics about a collection that are not facts about the host.
#[derive(Debug, Default, Clone, Copy)]
pub struct CollectStats {
    pub sql_statements: u32,
}

/// Collects one snapshot: host facts and MariaDB, each timed.
pub async fn collect(
    opts: &CollectOptions,
    observer: &dyn ProbeObserver,
) -> (Snapshot, CollectStats) {
    let mut snap = Snapshot::new(env!("CARGO_PKG_VERSION"));
    snap.taken_at = opts.taken_at.clone();
    let started = Instant::now();
    let host = host::collect(&opts.roots);
    snap.collectors.push(CollectorRun {
        name: "host".into(),
        duration_seconds: started.elapsed().as_secs_f64(),
        success: host.is_ok(),
        error: host.as_ref().err().cloned(),
    });
    let hostname = host.as_ref().ok().map(|h| h.hostname.clone());
    snap.host = match host {
        Ok(h) => Gathered::Available(h),
        Err(e) => Gathered::Unavailable(e),
    };
    let mut stats = CollectStats::default();
    let mut window: Option<os::Window> = None;
    let roots = &opts.roots;
    if !opts.candidates.is_empty() {
        let mut hook = |facts: Option<&powerdiag_rules::MariadbFacts>| {
            // The server's pid file names its process, but only if it runs on this host.
            let pid_file = facts
                .filter(|f| f.same_host == Some(true))
                .and_then(|f| f.variables.get(Var::PidFile.name()))
                .map(String::as_str);
            window = Some(os::begin(roots, pid_file, opts.sample_window));
        };
        let out = mariadb::collect(
            &opts.candidates,
            &opts.mariadb,
            hostname.as_deref(),
            observer,
            &mut hook,
        )
        .await;
        snap.mariadb = out.section;
        snap.collectors.extend(out.runs);
        stats.sql_statements = out.statements;
    }
    let window = window.unwrap_or_else(|| os::begin(roots, None, opts.sample_window));
    // Wait out the window without blocking the runtime; finish then has nothing left to wait.
    tokio::time::sleep(window.remaining(opts.sample_window)).await;
    let started = Instant::now();
    let facts: OsFacts = os::finish(window, opts.sample_window);
    let failed: Vec<String> = os_failures(&facts);
    snap.collectors.push(CollectorRun {
        name: "os".into(),
        duration_seconds: started.elapsed().as_secs_f64(),
        success: failed.is_empty(),
        error: (!failed.is_empty()).then(|| failed.join("; ")),
    });
    snap.os = Gathered::Available(facts);
    (snap, stats)
}

/// Sections that could not be read for a reason other than "does not apply here".
fn os_failures(f: &OsFacts) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |name: &str, why: Option<&str>| {
        if let Some(w) = why {
            out.push(format!("{name}: {w}"));
        }
    };
    check("cpu", f.cpu.as_ref().err());
    check("topology", f.topology.as_ref().err());
    check("memory", f.memory.as_ref().err());
    check("cpu_time", f.cpu_time.as_ref().err());
    check("partition", f.partition.as_ref().err());
    out
}
