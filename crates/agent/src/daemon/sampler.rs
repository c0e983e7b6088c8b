//! The sampling loop: one sample at a time, on its own schedule, published through a `watch`
//! channel. A scrape never collects; it reads the latest published sample.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use powerdiag_rules::{DbError, DbErrorKind, Gathered, Report, Snapshot, evaluate_with};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{
    config::Config,
    metrics,
    self_info::{BuildInfo, ProcessStats},
};
use crate::collect::{
    self, CollectOptions, DEFAULT_DICTIONARY_MAX_TABLES, DictionaryBound, MariadbOptions,
    NoProgress, ProbeOptions, StatementOptions, collector,
    mariadb::{InnodbCache, StatusTracker, StatusWindowMode, target::Candidate},
    os::Roots,
};

/// One complete sample, as served.
#[derive(Debug)]
pub struct Sample {
    pub snapshot: Snapshot,
    pub report: Report,
    pub taken_at: SystemTime,
    pub duration: Duration,
    pub sql_statements: u32,
    /// Sequence number: 1 for the first sample.
    pub seq: u64,
    /// The metrics, encoded once (OpenMetrics text without `# EOF`); the Prometheus text
    /// format and the gzipped bodies are made on the first scrape that asks for them.
    pub encoded: super::body::Encoded,
}

/// What the sampler needs besides the configuration.
#[derive(Debug, Clone)]
pub struct SamplerSetup {
    /// The MariaDB targets, replaced when SIGHUP reloads `--mariadb.defaults-file`.
    pub candidates: watch::Receiver<Arc<Vec<Candidate>>>,
    pub roots: Roots,
    pub build: BuildInfo,
}

/// What the sampler keeps between samples of one set of targets, each on its own schedule:
/// the vector-index list, the connection and its variables, the statement digests' last read,
/// the status reads the rules' window starts from, and the InnoDB facts.
struct Kept {
    vector_cache: crate::collect::VectorCache,
    reuse: crate::collect::Reuse,
    statements: crate::collect::StatementTracker,
    status: StatusTracker,
    innodb: InnodbCache,
    locks: crate::collect::LockCache,
    error_log: crate::collect::ErrorLogCache,
    schema: crate::collect::SchemaCache,
    replication: crate::collect::ReplicationCache,
}

impl Kept {
    fn new(cfg: &Config) -> Kept {
        Kept {
            vector_cache: crate::collect::VectorCache::new(cfg.sample.vector_index_refresh),
            reuse: crate::collect::Reuse::new(cfg.sample.variables_refresh),
            statements: crate::collect::StatementTracker::new(cfg.statements.interval),
            status: StatusTracker::new(cfg.sample.status_window, cfg.sample.max_status_window),
            innodb: InnodbCache::new(cfg.sample.innodb_refresh, cfg.sample.transactions_refresh),
            locks: Default::default(),
            error_log: Default::default(),
            schema: crate::collect::SchemaCache::new(cfg.schema.interval, cfg.schema.max_tables),
            replication: Default::default(),
        }
    }
}

/// Runs until `cancel`: samples every `config.sample.interval`, publishing into `tx`.
pub async fn run(
    mut setup: SamplerSetup,
    mut config: watch::Receiver<Arc<Config>>,
    tx: watch::Sender<Option<Arc<Sample>>>,
    cancel: CancellationToken,
) {
    let mut seq = 0u64;
    let mut spacing_was = 1u32;
    let mut last_probe: Option<Instant> = None;
    let Kept {
        mut vector_cache,
        mut reuse,
        mut statements,
        mut status,
        mut innodb,
        mut locks,
        mut error_log,
        mut schema,
        mut replication,
    } = Kept::new(&config.borrow());
    let mut candidates = setup.candidates.borrow_and_update().clone();
    let (mut config_open, mut targets_open) = (true, true);
    loop {
        let cfg = config.borrow_and_update().clone();
        // New targets (a reloaded defaults file): nothing kept from the old ones — the
        // connection, its variables, the counters the windows start from — carries over.
        let latest = setup.candidates.borrow_and_update().clone();
        if !Arc::ptr_eq(&latest, &candidates) {
            candidates = latest;
            Kept {
                vector_cache,
                reuse,
                statements,
                status,
                innodb,
                locks,
                error_log,
                schema,
                replication,
            } = Kept::new(&cfg);
        }
        if vector_cache.refresh != cfg.sample.vector_index_refresh {
            vector_cache = crate::collect::VectorCache::new(cfg.sample.vector_index_refresh);
        }
        if reuse.variables_refresh != cfg.sample.variables_refresh {
            reuse = reuse.with_variables_refresh(cfg.sample.variables_refresh);
        }
        if statements.interval != cfg.statements.interval {
            statements = statements.with_interval(cfg.statements.interval);
        }
        if (status.window, status.max_window)
            != (cfg.sample.status_window, cfg.sample.max_status_window)
        {
            status = status.with_windows(cfg.sample.status_window, cfg.sample.max_status_window);
        }
        if (innodb.refresh, innodb.transactions_refresh)
            != (cfg.sample.innodb_refresh, cfg.sample.transactions_refresh)
        {
            innodb =
                innodb.with_refresh(cfg.sample.innodb_refresh, cfg.sample.transactions_refresh);
        }
        if (schema.interval, schema.max_tables) != (cfg.schema.interval, cfg.schema.max_tables) {
            schema = schema.with_settings(cfg.schema.interval, cfg.schema.max_tables);
        }
        let started = Instant::now();
        let probe_due = cfg.probe.enabled
            && last_probe
                .is_none_or(|t| !crate::collect::mariadb::still_fresh(t, cfg.probe.interval));
        let opts = CollectOptions {
            candidates: candidates.to_vec(),
            mariadb: MariadbOptions {
                timeout: cfg.sample.timeout,
                probe: probe_due.then(|| ProbeOptions {
                    queries: cfg.probe.queries,
                    ..Default::default()
                }),
                vector_cache: Some(vector_cache.clone()),
                reuse: Some(reuse.clone()),
                statements: cfg.statements.enabled.then(|| StatementOptions {
                    limit: cfg.statements.limit,
                    tracker: Some(statements.clone()),
                    counters_top: cfg.statements.top,
                    samples: cfg.statements.samples,
                    explain: cfg.statements.explain,
                    redact: cfg.statements.redact,
                    settings: cfg.rules.settings.clone(),
                    ..Default::default()
                }),
                status_window: StatusWindowMode::Agent(status.clone()),
                innodb_cache: Some(innodb.clone()),
                lock_cache: Some(locks.clone()),
                error_log_cache: Some(error_log.clone()),
                schema_cache: Some(schema.clone()),
                replication_cache: Some(replication.clone()),
                // Vector indexes above it without dictionary scans; the schema read (daily)
                // under its own bound.
                dictionary_bound: Some(DictionaryBound {
                    max_tables: DEFAULT_DICTIONARY_MAX_TABLES,
                    schema_max_tables: (cfg.schema.max_dictionary_tables > 0)
                        .then_some(cfg.schema.max_dictionary_tables),
                }),
            },
            taken_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
            roots: setup.roots.clone(),
            sample_window: cfg.sample.window,
            collectors: cfg.selection.clone(),
        };
        let taken_at = SystemTime::now();
        // Every statement and the connection have their own deadline; this bounds the whole
        // sample too, so a hung server can never stack samples.
        let budget = cfg
            .sample
            .interval
            .saturating_sub(Duration::from_millis(100))
            .max(cfg.sample.timeout);
        let collected = tokio::select! {
            () = cancel.cancelled() => return,
            r = tokio::time::timeout(budget, collect::collect(&opts, &NoProgress)) => r,
        };
        let (snapshot, sql_statements) = match collected {
            Ok((snapshot, stats)) => {
                if probe_due {
                    last_probe = Some(Instant::now());
                }
                (snapshot, stats.sql_statements)
            }
            Err(_) => {
                tracing::warn!(
                    budget_s = budget.as_secs_f64(),
                    "sample did not finish in time; publishing it as failed"
                );
                (overrun(&opts, budget), 0)
            }
        };
        seq += 1;
        let spaced = spacing(
            &snapshot,
            cfg.sample.spacing_connections,
            cfg.sample.interval,
        );
        if spaced != spacing_was {
            tracing::info!(
                intervals = spaced,
                connected = connected(&snapshot),
                every = ?cfg.sample.interval * spaced,
                "samples spaced by the connected clients ([sample] spacing_connections)"
            );
            spacing_was = spaced;
        }
        let interval = cfg.sample.interval * spaced;
        let report = evaluate_with(&snapshot, &cfg.rules.settings);
        let duration = started.elapsed();
        let encoded = metrics::encode_sample(&metrics::SampleMetrics {
            snapshot: &snapshot,
            report: &report,
            settings: &cfg.rules.settings,
            taken_at,
            duration,
            interval,
            sql_statements,
            build: &setup.build,
            process: &ProcessStats::read(),
        });
        let mariadb = if snapshot.mariadb.reachable {
            "up"
        } else {
            "down"
        };
        tracing::debug!(
            seq,
            duration_ms = duration.as_millis() as u64,
            mariadb,
            "sample"
        );
        if let Some(e) = &snapshot.mariadb.error {
            tracing::warn!(mariadb = snapshot.mariadb.target.as_deref().unwrap_or("?"), error = %e.message, "MariaDB unavailable");
        }
        let sample = Sample {
            snapshot,
            report,
            taken_at,
            duration,
            sql_statements,
            seq,
            encoded: super::body::Encoded::new(encoded),
        };
        tx.send_replace(Some(Arc::new(sample)));
        // The next sample one (spaced) interval after this one started (not after it ended).
        // While spaced, a watch read at every interval in between ends the spacing when a
        // row-lock wait starts (`collect::mariadb::watch`).
        let mut waited = 0u32;
        loop {
            waited += 1;
            let next = (cfg.sample.interval * waited).saturating_sub(started.elapsed());
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(next) => {}
                // A reloaded configuration takes effect at once. A closed channel (no more
                // reloads: the signal task ended) keeps the last configuration and sampling
                // goes on; only `cancel` stops the sampler.
                r = config.changed(), if config_open => { config_open = r.is_ok(); break }
                r = setup.candidates.changed(), if targets_open => { targets_open = r.is_ok(); break }
            }
            if waited >= spaced {
                break;
            }
            let watched = tokio::select! {
                () = cancel.cancelled() => return,
                w = reuse.watch() => w,
            };
            match watched.map(|w| w.sample_now()) {
                Ok(None) => tracing::debug!(waited, "watch: nothing waits"),
                Ok(Some(why)) | Err(why) => {
                    tracing::info!(
                        why = %why,
                        after = ?cfg.sample.interval * waited,
                        "spaced samples: sampling now"
                    );
                    break;
                }
            }
        }
    }
}

/// A gauge of the sample's status read.
fn status_gauge(snapshot: &Snapshot, v: powerdiag_rules::StatusVar) -> Option<u64> {
    snapshot.mariadb.facts.as_ref()?.status_u64(v).ok()
}

/// The clients connected at the sample's status read.
fn connected(snapshot: &Snapshot) -> Option<u64> {
    status_gauge(snapshot, powerdiag_rules::StatusVar::ThreadsConnected)
}

/// The longest that spacing stretches the time between two samples. A status read after a
/// longer pause costs more, not less: with 5,000 idle clients on the 2-core VM a read 15 s or
/// 60 s after the last cost ~7–9 ms of server CPU, 90 s after 18 ms, 5 minutes after ~230 ms
/// (MariaDB's sum touches every connection's memory, which by then has gone cold; see
/// docs/performance.md). So at a 60 s interval, the default, nothing is spaced.
const MAX_SPACED_GAP: Duration = Duration::from_secs(60);

/// How many intervals to wait before the next sample: one, plus one for every
/// `per_interval` clients connected beyond the first `per_interval` (`[sample]
/// spacing_connections`; 0 turns it off), while the clients are idle, and never more than
/// [`MAX_SPACED_GAP`] between samples. MariaDB adds up every connection's counters for each
/// global status read, so a sample's cost on the server grows with the connections; the
/// spacing lowers it per minute, and the watch read at every interval in between
/// (`collect::mariadb::watch`) ends it when a row-lock wait starts. Only while at most 1 in
/// 100 of them runs (`Threads_running`, which counts a session waiting for a lock): a
/// pile-up, or a server busy enough that a status read is noise beside its load, is sampled
/// at every interval. An unknown count spaces nothing.
fn spacing(snapshot: &Snapshot, per_interval: u64, interval: Duration) -> u32 {
    let running = status_gauge(snapshot, powerdiag_rules::StatusVar::ThreadsRunning);
    let most = (MAX_SPACED_GAP.as_secs_f64() / interval.as_secs_f64().max(1e-3)).floor();
    let most = most.clamp(1.0, 60.0) as u64;
    match (connected(snapshot), running) {
        (Some(n), Some(r)) if per_interval > 0 && r <= 1 + n / 100 => {
            n.div_ceil(per_interval).clamp(1, most) as u32
        }
        _ => 1,
    }
}

/// The sample of a collection that overran its budget: nothing it read can be trusted as
/// current, so it is published as failed — `powerdiag_mariadb_up 0` and a failed `sample`
/// run — instead of re-serving the previous sample as if the server still answered.
fn overrun(opts: &CollectOptions, budget: Duration) -> Snapshot {
    let why = format!(
        "the sample did not finish within its budget of {} (the interval less 100 ms): the server or a collector is not answering",
        humantime::format_duration(budget)
    );
    let mut s = Snapshot::new(env!("CARGO_PKG_VERSION"));
    s.taken_at = opts.taken_at.clone();
    s.origin = Some(powerdiag_rules::Origin::Agent);
    s.host = Gathered::Unavailable(why.clone());
    s.os = Gathered::Unavailable(why.clone());
    s.mariadb.target = opts.candidates.first().map(Candidate::display);
    s.mariadb.reachable = false;
    s.mariadb.error = Some(DbError {
        kind: DbErrorKind::Timeout,
        message: why.clone(),
        hint: "check that mariadbd answers (`mariadb-admin ping`); if it is only slow, raise [sample] interval".into(),
    });
    s.collectors
        .push(collector::failed_run(&collector::SAMPLE, budget, &why));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One interval up to `spacing_connections` clients, one more for every such many beyond
    /// while at most 1 in 100 runs; off with 0, and nothing spaced when a count is missing.
    #[test]
    fn samples_are_spaced_by_the_connected_clients() {
        use powerdiag_rules::{StatusVar, testing::SnapshotBuilder};
        let with = |n: &str, running: &str| {
            SnapshotBuilder::new()
                .mariadb("11.8.3-MariaDB")
                .status(StatusVar::ThreadsConnected, n)
                .status(StatusVar::ThreadsRunning, running)
                .build()
        };
        for (clients, running, per, want) in [
            ("0", "0", 1000, 1),
            ("1", "1", 1000, 1),
            ("1000", "1", 1000, 1),
            ("1001", "1", 1000, 2),
            ("5002", "2", 1000, 6),
            ("5002", "51", 1000, 6),
            // A pile-up (waiting sessions run) or a busy server: every interval.
            ("5002", "52", 1000, 1),
            ("5002", "3000", 1000, 1),
            ("5000", "1", 0, 1),
            ("10000000", "1", 1000, 60),
            ("unreadable", "1", 1000, 1),
            ("5000", "unreadable", 1000, 1),
        ] {
            assert_eq!(
                spacing(&with(clients, running), per, Duration::from_secs(1)),
                want,
                "{clients} clients, {running} running, {per}"
            );
        }
        assert_eq!(
            spacing(
                &SnapshotBuilder::new().build(),
                1000,
                Duration::from_secs(1)
            ),
            1
        );
        // Never more than a minute between samples: at 15 s four intervals, at 60 s (the
        // default) none.
        for (interval, want) in [
            (10, 6),
            (15, 4),
            (20, 3),
            (30, 2),
            (45, 1),
            (60, 1),
            (300, 1),
        ] {
            assert_eq!(
                spacing(&with("5002", "2"), 1000, Duration::from_secs(interval)),
                want,
                "at {interval} s"
            );
        }
    }

    /// The channels that carry reloads closing (the signal task ended) must not stop the
    /// sampler: it keeps the last configuration and targets, and samples on until cancelled.
    #[tokio::test]
    async fn closed_reload_channels_do_not_stop_sampling() {
        let mut cfg = Config::default();
        cfg.sample.interval = Duration::from_millis(100);
        cfg.sample.timeout = Duration::from_millis(50);
        cfg.sample.window = Duration::ZERO;
        let (config_tx, config_rx) = watch::channel(Arc::new(cfg));
        let (targets_tx, targets_rx) = watch::channel(Arc::new(Vec::new()));
        let (tx, mut rx) = watch::channel(None);
        let cancel = CancellationToken::new();
        let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/linux/x86-thp-never-large-mariadbd");
        let setup = SamplerSetup {
            candidates: targets_rx,
            roots: Roots::tree(&tree),
            build: BuildInfo::default(),
        };
        let task = tokio::spawn(run(setup, config_rx, tx, cancel.clone()));
        drop((config_tx, targets_tx));
        let seq = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                rx.changed().await.expect("the sampler stopped publishing");
                let seq = rx.borrow().as_ref().map_or(0, |s| s.seq);
                if seq >= 3 {
                    return seq;
                }
            }
        })
        .await
        .expect("no third sample within 30 s after the reload channels closed");
        assert!(seq >= 3);
        assert!(
            !task.is_finished(),
            "the sampler returned before it was cancelled"
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[test]
    fn an_overrun_sample_reads_as_down() {
        let opts = CollectOptions {
            candidates: Vec::new(),
            mariadb: MariadbOptions {
                timeout: Duration::from_secs(1),
                probe: None,
                vector_cache: None,
                reuse: None,
                statements: None,
                status_window: Default::default(),
                innodb_cache: None,
                lock_cache: None,
                error_log_cache: None,
                schema_cache: None,
                replication_cache: None,
                dictionary_bound: None,
            },
            taken_at: None,
            roots: Roots::default(),
            sample_window: Duration::ZERO,
            collectors: Default::default(),
        };
        let s = overrun(&opts, Duration::from_millis(1900));
        assert!(!s.mariadb.reachable);
        let report = evaluate_with(&s, &Default::default());
        let text = metrics::to_prometheus_text(&metrics::encode_sample(&metrics::SampleMetrics {
            snapshot: &s,
            report: &report,
            settings: &Default::default(),
            taken_at: SystemTime::now(),
            duration: Duration::from_secs(2),
            interval: Duration::from_secs(2),
            sql_statements: 0,
            build: &BuildInfo::default(),
            process: &ProcessStats::default(),
        }));
        assert!(text.contains("powerdiag_mariadb_up 0"), "{text}");
        assert!(
            text.contains("powerdiag_collector_success{collector=\"sample\"} 0"),
            "{text}"
        );
    }
}
