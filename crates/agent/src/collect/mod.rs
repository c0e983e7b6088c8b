//! Collectors. Each one is timed and reported as a [`CollectorRun`]; one failing collector
//! never fails the others: its part of the snapshot is `Unavailable` with the reason, the
//! sentence of its [`CollectError`].
//!
//! - `collector`: the [`collector::Descriptor`] every collector has, the selection made by
//!   `--collector.NAME` flags, and `execute`, the one place that runs and times a collector;
//! - `host`: one collector, run first (the MariaDB collectors compare host names);
//! - `mariadb`: connect and server facts, then statements, InnoDB, vector indexes, probe —
//!   each its own run;
//! - `os`: the sample window around them, one registered collector per section
//!   (`os::registry`, named in `os/sections.rs`).

pub mod collector;
pub(crate) mod error;
pub mod host;
pub mod mariadb;
pub mod os;

pub use error::CollectError;

use std::time::Duration;

use powerdiag_rules::{CollectorRun, Gathered, OsFacts, Snapshot, Var};

pub use mariadb::{
    DEFAULT_DICTIONARY_MAX_TABLES, DEFAULT_MAX_TABLES, DictionaryBound, ErrorLogCache, LockCache,
    MariadbOptions, NoProgress, ProbeObserver, ProbeOptions, ReplicationCache, Reuse, SchemaCache,
    StatementOptions, StatementTracker, VectorCache,
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
    /// The collectors turned on or off (`--collector.NAME`, `[collectors]`).
    pub collectors: collector::Selection,
}

/// Every collector, in the order a collection runs them: the host, MariaDB's, the OS sections.
pub fn collectors() -> Vec<&'static collector::Descriptor> {
    let mut out = vec![&host::COLLECTOR];
    out.extend(mariadb::collectors());
    out.extend(os::SECTIONS.iter().copied());
    out
}

/// The collector named `name`.
pub fn find_collector(name: &str) -> Option<&'static collector::Descriptor> {
    collectors().into_iter().find(|d| d.name == name)
}

/// Statistics about a collection that are not facts about the host.
#[derive(Debug, Default, Clone, Copy)]
pub struct CollectStats {
    pub sql_statements: u32,
}

/// Collects one snapshot, phase by phase: the host; MariaDB's connection and server facts;
/// the parts read before the windows; the OS and status windows opened together; the parts
/// read inside them; the connection kept or closed; the OS sections at the window's end.
/// Every collector runs through [`collector::execute`] (or its async form), timed, as its own
/// run.
pub async fn collect(
    opts: &CollectOptions,
    observer: &dyn ProbeObserver,
) -> (Snapshot, CollectStats) {
    let mut snap = Snapshot::new(env!("CARGO_PKG_VERSION"));
    snap.taken_at = opts.taken_at.clone();
    snap.origin = Some(match opts.mariadb.status_window {
        mariadb::StatusWindowMode::Agent(_) => powerdiag_rules::Origin::Agent,
        _ => powerdiag_rules::Origin::Doctor,
    });
    let budget = opts.mariadb.timeout.max(OS_MIN_BUDGET);
    let selection = &opts.collectors;

    // 1. The host. Files are read on blocking threads, under a deadline: the runtime thread
    //    also serves scrapes, and a /proc read can wait on another process's memory-map lock.
    let (host, run) = collector::execute_async(&host::COLLECTOR, selection, None, || async {
        let roots = opts.roots.clone();
        let task = tokio::task::spawn_blocking(move || host::collect(&roots));
        match tokio::time::timeout(budget, task).await {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => Err(CollectError::Internal {
                what: "the host collector".into(),
                message: e.to_string(),
            }),
            Err(_) => Err(CollectError::Timeout {
                what: "reading the host facts".into(),
                after: budget,
            }),
        }
    })
    .await;
    snap.collectors.extend(run);
    let hostname = host.as_ref().ok().map(|h| h.hostname.clone());
    snap.host = collector::gathered(host);

    // 2. MariaDB: connect and read the server's own facts; then the parts that must not
    //    count in doctor's status window.
    let mut db = if opts.candidates.is_empty() {
        None
    } else {
        Some(
            mariadb::connect(
                &opts.candidates,
                &opts.mariadb,
                selection,
                hostname.as_deref(),
            )
            .await,
        )
    };
    if let Some(db) = &mut db {
        db.before_window().await;
    }

    // 3. Open the OS window (on a blocking thread) and the status window together, so both
    //    cover the same time; the server's pid file names its process when it runs here.
    let begun = begin(opts, server_of(db.as_ref().and_then(|d| d.facts())));
    // 4. The parts read inside the windows; 5. the connection kept or closed.
    let mut stats = CollectStats::default();
    if let Some(mut db) = db {
        db.status_window().await;
        db.after_window(observer).await;
        let out = db.close().await;
        snap.mariadb = out.section;
        snap.collectors.extend(out.runs);
        stats.sql_statements = out.statements;
    }

    // 6. The OS sections, once the window has lasted long enough.
    let window = match tokio::time::timeout(budget, begun).await {
        Ok(Ok(w)) => w,
        Ok(Err(e)) => {
            let why = CollectError::Internal {
                what: "the OS collectors".into(),
                message: e.to_string(),
            };
            let (facts, runs) = os_failed(opts, &why);
            snap.collectors.extend(runs);
            snap.os = Gathered::Available(facts);
            return (snap, stats);
        }
        Err(_) => {
            let why = CollectError::Timeout {
                what: "starting the OS sample window".into(),
                after: budget,
            };
            let (facts, runs) = os_failed(opts, &why);
            snap.collectors.extend(runs);
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

/// Where the server runs, from its facts: its pid file and directories when on this host.
fn server_of(facts: Option<&powerdiag_rules::MariadbFacts>) -> Server {
    match facts.map(|f| (f.same_host, f)) {
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
    }
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
    let selection = opts.collectors.clone();
    tokio::task::spawn_blocking(move || {
        let process = match &server {
            Server::Local { pid_file, dirs } => os::ServerProcess::Local { pid_file, dirs },
            Server::Remote => os::ServerProcess::Remote,
            Server::Unknown => os::ServerProcess::Unknown,
        };
        os::begin(&roots, process, window, &selection)
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
        Ok(Err(e)) => CollectError::Internal {
            what: "the OS collectors".into(),
            message: e.to_string(),
        },
        Err(_) => CollectError::Timeout {
            what: "reading the OS sections".into(),
            after: grace,
        },
    };
    os_failed(opts, &why)
}

/// No OS facts: every section unavailable for `why`, each enabled one a failed run.
fn os_failed(opts: &CollectOptions, why: &CollectError) -> (OsFacts, Vec<CollectorRun>) {
    let facts = OsFacts::unavailable(&opts.roots.describe(), &why.to_string());
    let runs = os::SECTIONS
        .iter()
        .filter_map(|d| {
            collector::execute(d, &opts.collectors, None, || Err::<(), _>(why.clone())).1
        })
        .collect();
    (facts, runs)
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

#[cfg(test)]
mod collector_tests {
    use std::collections::BTreeSet;

    use super::{
        CollectError,
        collector::{Selection, Source, execute},
        collectors, find_collector as find,
    };
    use powerdiag_rules::ServerVersion;

    #[test]
    fn names_are_unique_snake_case_and_helped() {
        let mut seen = BTreeSet::new();
        for d in collectors() {
            assert!(seen.insert(d.name), "{} listed twice", d.name);
            assert!(
                d.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()),
                "{}",
                d.name
            );
            assert!(d.help.len() > 20 && !d.help.ends_with('.'), "{}", d.name);
        }
        for name in [
            "host",
            "mariadb",
            "mariadb_statements",
            "mariadb_innodb",
            "mariadb_vector_indexes",
            "mariadb_probe",
            "process",
            "cpu_time",
            "cpu",
            "topology",
            "memory",
            "partition",
            "counters",
            "swap",
            "storage",
        ] {
            assert!(find(name).is_some(), "{name} is not registered");
        }
    }

    #[test]
    fn selections_skip_with_the_way_back() {
        let s = Selection::from_choices(
            &collectors(),
            [("cpu", false), ("swap", false), ("swap", true)],
            Source::Flags,
        )
        .unwrap();
        let cpu = find("cpu").unwrap();
        let (out, run) = execute(cpu, &s, None, || Ok(1));
        assert!(run.is_none(), "a disabled collector reports no run");
        assert_eq!(
            out.unwrap_err().to_string(),
            "the cpu collector is disabled by --no-collector.cpu"
        );
        assert!(s.is_enabled(find("swap").unwrap()), "the later choice wins");
        let all = collectors();
        assert_eq!(s.disabled(&all).collect::<Vec<_>>(), ["cpu"]);
        let e =
            Selection::from_choices(&collectors(), [("cpus", false)], Source::Config).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown collector \"cpus\": the collectors are host, mariadb,"),
            "{e}"
        );
    }

    #[test]
    fn too_old_a_server_skips_and_failures_are_runs() {
        let v = find("mariadb_vector_indexes").unwrap();
        let old = ServerVersion::parse("10.11.14-MariaDB", "").unwrap();
        let (out, run) = execute(v, &Selection::defaults(), Some(&old), || Ok(()));
        assert!(run.is_none());
        assert_eq!(
            out.unwrap_err().to_string(),
            "the mariadb_vector_indexes collector needs MariaDB 11.7 or later (this server: 10.11.14)"
        );
        let (out, run) = execute(find("cpu").unwrap(), &Selection::defaults(), None, || {
            Err::<(), _>(CollectError::unsupported("no cpufreq"))
        });
        let run = run.unwrap();
        assert!(out.is_err() && !run.success);
        assert_eq!(run.error.as_deref(), Some("unavailable: no cpufreq"));
    }
}
