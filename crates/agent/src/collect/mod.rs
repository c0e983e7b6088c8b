//! Collectors. Each one is timed and reported as a [`CollectorRun`]; one failing collector
//! never fails the others: its part of the snapshot is `Unavailable` with the reason, the
//! sentence of its [`CollectError`].
//!
//! - `host`: one collector, run first (the MariaDB collectors compare host names);
//! - `mariadb`: connect, server facts, vector indexes, statements, probe — each its own run;
//! - `os`: the sample window around them, one registered collector per section
//!   (`os::registry`).

pub(crate) mod error;
pub mod host;
pub mod mariadb;
pub mod os;

pub use error::CollectError;

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
    let budget = opts.mariadb.timeout.max(OS_MIN_BUDGET);
    // Files are read on blocking threads, under a deadline: the runtime thread also serves
    // scrapes, and a /proc read can wait on another process's memory-map lock.
    let host = {
        let roots = opts.roots.clone();
        let task = tokio::task::spawn_blocking(move || host::collect(&roots));
        match tokio::time::timeout(budget, task).await {
            Ok(Ok(h)) => h.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("the host collector failed: {e}")),
            Err(_) => Err(CollectError::Timeout {
                what: "reading the host facts".into(),
                after: budget,
            }
            .to_string()),
        }
    };
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
    let mut begun: Option<tokio::task::JoinHandle<os::Window>> = None;
    if !opts.candidates.is_empty() {
        let mut hook = |facts: Option<&powerdiag_rules::MariadbFacts>| {
            // The server's pid file names its process, but only if it runs on this host.
            let server = match facts.map(|f| (f.same_host, f)) {
                Some((Some(true), f)) => Server::Local {
                    pid_file: f
                        .variables
                        .get(Var::PidFile.name())
                        .cloned()
                        .unwrap_or_default(),
                    dirs: server_dirs(f),
                },
                Some((Some(false), _)) => Server::Remote,
                _ => Server::Unknown,
            };
            begun = Some(begin(opts, server));
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
    let begun = begun.unwrap_or_else(|| begin(opts, Server::Unknown));
    let window = match tokio::time::timeout(budget, begun).await {
        Ok(Ok(w)) => Ok(w),
        Ok(Err(e)) => Err((
            CollectError::Other(format!("the OS collectors failed: {e}")),
            started.elapsed(),
        )),
        Err(_) => Err((
            CollectError::Timeout {
                what: "starting the OS sample window".into(),
                after: budget,
            },
            budget,
        )),
    };
    let window = match window {
        Ok(w) => w,
        Err((why, took)) => {
            let (facts, run) = os_failed(opts, why, took);
            snap.collectors.push(run);
            snap.os = Gathered::Available(facts);
            return (snap, stats);
        }
    };
    // Wait out the window without blocking the runtime; finish then has nothing left to wait.
    tokio::time::sleep(window.remaining(opts.sample_window)).await;
    let (facts, runs) = os_finish(window, opts).await;
    snap.collectors.extend(runs);
    snap.os = Gathered::Available(facts);
    (snap, stats)
}

/// Where the MariaDB collector found the server, owned so that the OS window can begin on a
/// blocking thread.
enum Server {
    Local {
        pid_file: String,
        dirs: Vec<(String, String)>,
    },
    Remote,
    Unknown,
}

/// Begins the OS sample window on a blocking thread (it reads /proc and opens counters).
fn begin(opts: &CollectOptions, server: Server) -> tokio::task::JoinHandle<os::Window> {
    let roots = opts.roots.clone();
    let window = opts.sample_window;
    tokio::task::spawn_blocking(move || {
        let process = match &server {
            Server::Local { pid_file, dirs } => os::ServerProcess::Local { pid_file, dirs },
            Server::Remote => os::ServerProcess::Remote,
            Server::Unknown => os::ServerProcess::Unknown,
        };
        os::begin(&roots, process, window)
    })
}

/// The least time the OS sections get after the window, whatever `--timeout` says.
const OS_MIN_BUDGET: Duration = Duration::from_secs(10);

/// The server's directories as `(variable, absolute path)`: `datadir`, `tmpdir` (the first of
/// its `:`-separated list) and `innodb_log_group_home_dir`, which MariaDB resolves against the
/// datadir when relative (its default is `./`).
fn server_dirs(f: &powerdiag_rules::MariadbFacts) -> Vec<(String, String)> {
    let get = |v: Var| {
        f.variables
            .get(v.name())
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
    };
    let Some(datadir) = get(Var::Datadir) else {
        return Vec::new();
    };
    let absolute = |p: &str| {
        if p.starts_with('/') {
            p.to_owned()
        } else {
            let rel = p.trim_start_matches("./");
            format!("{}/{rel}", datadir.trim_end_matches('/'))
        }
    };
    let mut out = vec![("datadir".to_owned(), datadir.to_owned())];
    if let Some(t) = get(Var::Tmpdir).and_then(|t| t.split(':').next()) {
        out.push(("tmpdir".into(), absolute(t)));
    }
    if let Some(l) = get(Var::InnodbLogGroupHomeDir) {
        out.push(("innodb_log_group_home_dir".into(), absolute(l)));
    }
    out
}

/// The OS sections, read on a blocking thread under a deadline (`mariadb.timeout`, at least
/// [`OS_MIN_BUDGET`]): a file that blocks cannot hold the sample. The registry does
/// not start a section after the deadline; a read that hangs anyway is abandoned here.
async fn os_finish(window: os::Window, opts: &CollectOptions) -> (OsFacts, Vec<CollectorRun>) {
    // Local files normally take milliseconds; the bound is a safety net against a file that
    // blocks, not a performance limit: a slow host or emulator (a debug build under qemu needs
    // over a second for a 64-CPU tree) must not lose its facts to a short --timeout.
    let budget = opts.mariadb.timeout.max(OS_MIN_BUDGET);
    let min_window = opts.sample_window;
    let task = tokio::task::spawn_blocking(move || os::finish(window, min_window, budget));
    // The registry stops starting sections at the budget; a section still running then is
    // abandoned at the same bound, so the sample's worst case stays timeout + window + OS.
    let grace = budget;
    let why = match tokio::time::timeout(grace, task).await {
        Ok(Ok(done)) => return done,
        Ok(Err(e)) => CollectError::Other(format!("the OS collectors failed: {e}")),
        Err(_) => CollectError::Timeout {
            what: "reading the OS sections".into(),
            after: grace,
        },
    };
    let (facts, run) = os_failed(opts, why, grace);
    (facts, vec![run])
}

/// No OS facts: every section unavailable for `why`, in one failed `os` run.
fn os_failed(opts: &CollectOptions, why: CollectError, took: Duration) -> (OsFacts, CollectorRun) {
    let facts = OsFacts::unavailable(&opts.roots.describe(), &why.to_string());
    let run = CollectorRun {
        name: "os".into(),
        duration_seconds: took.as_secs_f64(),
        success: false,
        error: Some(why.to_string()),
    };
    (facts, run)
}

#[cfg(test)]
mod tests {
    use powerdiag_rules::{Var, testing::SnapshotBuilder};

    #[test]
    fn server_dirs_are_absolute() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::Datadir, "/var/lib/mysql/")
            .var(Var::Tmpdir, "/tmp:/var/tmp")
            .var(Var::InnodbLogGroupHomeDir, "./")
            .build();
        let f = s.mariadb.facts.as_ref().unwrap();
        assert_eq!(
            super::server_dirs(f),
            [
                ("datadir".to_owned(), "/var/lib/mysql/".to_owned()),
                ("tmpdir".into(), "/tmp".into()),
                ("innodb_log_group_home_dir".into(), "/var/lib/mysql/".into()),
            ]
        );
    }
}
