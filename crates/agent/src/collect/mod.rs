//! Collectors. Each one is timed and reported as a [`CollectorRun`]; one failing collector
//! never fails the others: its part of the snapshot is `Unavailable` with the reason.

pub mod host;
pub mod mariadb;

use std::time::Instant;

use powerdiag_rules::{CollectorRun, Gathered, Snapshot};

pub use mariadb::{MariadbOptions, NoProgress, ProbeObserver, ProbeOptions};

/// What a one-shot collection should do.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Endpoints to try, in order; empty skips MariaDB.
    pub candidates: Vec<mariadb::target::Candidate>,
    pub mariadb: MariadbOptions,
    /// RFC 3339 time of collection, supplied by the caller.
    pub taken_at: Option<String>,
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
    let host = host::collect();
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
    if !opts.candidates.is_empty() {
        let out = mariadb::collect(
            &opts.candidates,
            &opts.mariadb,
            hostname.as_deref(),
            observer,
        )
        .await;
        snap.mariadb = out.section;
        snap.collectors.extend(out.runs);
        stats.sql_statements = out.statements;
    }
    (snap, stats)
}
