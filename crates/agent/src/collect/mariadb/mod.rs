//! The MariaDB collectors: server (variables, status, version), vector indexes, probe.
//!
//! Each part is timed as its own [`CollectorRun`]; a part that fails leaves its piece of the
//! snapshot `Unavailable` with the reason and never stops the others.

mod datadir;
mod deadlock;
mod due;
pub(crate) mod error_log;
mod innodb;
#[cfg(target_os = "linux")]
mod journal;
mod locks;
mod log_line;
mod option_file;
mod part;
mod probe;
mod replication;
mod schema;
mod schema_dictionary;
mod server;
mod session;
mod settings;
mod statements;
mod status_window;
pub mod target;
mod tls;
mod vector;
mod verify_ca;
mod watch;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use powerdiag_rules::{
    CollectorRun, ConnectAttempt, DbError, DbErrorKind, Gathered, MariadbFacts, MariadbSection,
    ServerVersion, Var,
};

use crate::collect::{
    CollectError,
    collector::{self, Descriptor, Requires, Selection},
};
use part::Part;

pub(crate) use due::still_fresh;
pub use error_log::ErrorLogCache;
pub use innodb::InnodbCache;
pub use locks::LockCache;
pub use probe::{NoProgress, ProbeObserver, ProbeOptions};
pub use replication::ReplicationCache;
pub use schema::{DEFAULT_MAX_TABLES, SchemaCache};
use session::Session;
pub use statements::{StatementOptions, StatementTracker};
pub use status_window::{StatusTracker, StatusWindowMode};
use target::Candidate;
pub use vector::VectorCache;
pub use watch::Watched;

/// What to collect from MariaDB (the default reads nothing optional).
#[derive(Debug, Clone, Default)]
pub struct MariadbOptions {
    /// Deadline for connecting and for each statement.
    pub timeout: Duration,
    /// `None` disables the probe.
    pub probe: Option<ProbeOptions>,
    /// Reuse the vector-index list and sizes for a while (the agent: they change slowly and
    /// cost a few statements); `None` always lists them (doctor).
    pub vector_cache: Option<VectorCache>,
    /// Keep the connection and the variable list between samples (the agent); `None` connects
    /// and reads everything afresh (doctor).
    pub reuse: Option<Reuse>,
    /// Statement digests; `None` leaves them unread.
    pub statements: Option<StatementOptions>,
    /// Where the status window's first read comes from: none, doctor's second read after a
    /// wait, or the agent's earlier samples.
    pub status_window: StatusWindowMode,
    /// Reuse the InnoDB size and transactions for a while (the agent); `None` reads them every
    /// time (doctor).
    pub innodb_cache: Option<InnodbCache>,
    /// The last deadlock read, and the lock read only when the status says something can
    /// wait (the agent); `None` always reads the locks (doctor).
    pub lock_cache: Option<LockCache>,
    /// Where the agent's error-log reads stopped, and the events they found; `None` reads
    /// the log's tail every time (doctor).
    pub error_log_cache: Option<error_log::ErrorLogCache>,
    /// The agent's schema, refreshed every `[schema] interval` and after DDL; `None` reads it
    /// every time (doctor).
    pub schema_cache: Option<SchemaCache>,
    /// The status mark at which the agent found no replication connection (it reads again
    /// only after replication was configured or started, or a restart), and the recent
    /// readings PD222 judges the lag's trend from (doctor: a fresh one, filled at the start of
    /// its window); `None` always reads, and keeps no history.
    pub replication_cache: Option<ReplicationCache>,
    /// The bound on InnoDB dictionary scans: doctor's `--dictionary-max-tables`; the agent's
    /// default for vector indexes (above it they are listed and sized without the dictionary:
    /// measured at 100,000 tables, a graph table without persistent statistics made every
    /// sample scan `INNODB_SYS_TABLESTATS` for 5 s) and its `[schema] max_dictionary_tables`
    /// for the schema read. `None` has none.
    pub dictionary_bound: Option<DictionaryBound>,
}

/// Doctor's bound on the reads whose cost grows with the tables on the server (InnoDB fills
/// its `INFORMATION_SCHEMA` views whole, whatever the `WHERE`): above `max_tables` tables (the
/// InnoDB size read counts them, before the others), doctor leaves the schema read out
/// (PD705–PD708 say so; ~0.9 s of server CPU at 100,000 tables) above `schema_max_tables`, and
/// lists vector indexes without the dictionary (~0.23 s). With the server's data directory on
/// this host (`datadir.rs`) the size and the graph tables come from its files, which costs the
/// server nothing; elsewhere from `mysql.innodb_table_stats` (the sum ~57 ms, the list ~35 ms
/// at 100,000 tables; the list misses a graph table without persistent statistics, and the
/// report's notes say which way it went).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DictionaryBound {
    pub max_tables: u64,
    /// The schema read's own bound: doctor's `max_tables` (`None` with
    /// `--collector.mariadb_schema`: read whatever the tables); the agent's `[schema]
    /// max_dictionary_tables` (`None` with 0). Its fold holds every table's dictionary rows at
    /// once, ~110 bytes a table (heaptrack: 15.5 MB of heap at 100,000 tables for seconds).
    pub schema_max_tables: Option<u64>,
}

/// `--dictionary-max-tables`' default.
pub const DEFAULT_DICTIONARY_MAX_TABLES: u64 = 20_000;

impl DictionaryBound {
    /// The tables with persistent statistics, when the InnoDB size read found more than the
    /// bound.
    pub(crate) fn exceeded(&self, facts: &powerdiag_rules::MariadbFacts) -> Option<u64> {
        tables_above(facts, self.max_tables)
    }
}

/// The tables with persistent statistics, when the InnoDB size read found more than `bound`.
pub(crate) fn tables_above(facts: &powerdiag_rules::MariadbFacts, bound: u64) -> Option<u64> {
    match &facts.innodb_size {
        Gathered::Available(s) if s.tables > bound => Some(s.tables),
        _ => None,
    }
}

/// What the agent keeps between samples. Connecting costs the server more CPU (~0.6 ms:
/// handshake, authentication, a thread) than a whole sample's statements, and the `SHOW` form
/// of the variables ~10× what `SELECT @@...` of the same names does (see `server.rs`).
///
/// The variables themselves are kept on the same connection while the status read, the
/// sample's first statement there, shows no setting change (`server::SETTING_CHANGES`:
/// any `SET`, a plugin installed or removed, the buffer pool resized), and for
/// `variables_refresh` at the longest (a restart drops the connection, and a new connection
/// reads them again). That leaves one statement per steady sample.
#[derive(Debug, Clone, Default)]
pub struct Reuse {
    kept: std::sync::Arc<std::sync::Mutex<Kept>>,
    /// The longest that variables read on a kept connection are used before being read again;
    /// zero reads them every sample.
    pub variables_refresh: Duration,
}

#[derive(Debug, Default)]
struct Kept {
    /// The open connection and the target it reached (`Candidate::display`). Taken out for a
    /// sample and put back only after a sample that succeeded, so a sample cancelled half-way
    /// (the agent's deadline) drops it.
    session: Option<(Session, String)>,
    plan: Option<server::VarPlan>,
    /// The last variables read; only used on the connection that read them.
    variables: Option<KeptVariables>,
    /// The grant mark ([`server::GRANT_CHANGES`]) of the kept connection's last status read.
    grants: Option<server::ChangeMark>,
}

#[derive(Debug, Clone)]
struct KeptVariables {
    at: Instant,
    values: BTreeMap<String, String>,
    /// The setting-change mark of the status read just before them; `None` when they were
    /// read first (a new connection): a `SET` between the two reads would go unseen, so they
    /// hold only until the next sample. (The server counts a `SET` as it starts it, so one
    /// counted by the status read and applied after the variables read, microseconds later,
    /// shows at `variables_refresh` at the latest.)
    mark: Option<server::ChangeMark>,
}

impl KeptVariables {
    /// Still the server's variables, judged by the status read `now`.
    fn hold_at(&self, now: &BTreeMap<String, String>) -> bool {
        match (
            &self.mark,
            server::ChangeMark::of(now, &server::SETTING_CHANGES),
        ) {
            (Some(then), Some(now)) => then.unchanged_at(&now),
            _ => false,
        }
    }
}

impl Reuse {
    /// Nothing kept yet; variables are reused for `variables_refresh` at the longest.
    pub fn new(variables_refresh: Duration) -> Reuse {
        Reuse {
            kept: Default::default(),
            variables_refresh,
        }
    }

    /// The same kept state with another refresh (a reloaded configuration).
    pub fn with_variables_refresh(&self, variables_refresh: Duration) -> Reuse {
        Reuse {
            kept: self.kept.clone(),
            variables_refresh,
        }
    }

    fn take_session(&self) -> Option<(Session, String)> {
        self.kept.lock().ok()?.session.take()
    }

    fn put_session(&self, s: Session, target: String) {
        if let Ok(mut k) = self.kept.lock() {
            k.session = Some((s, target));
        }
    }

    fn plan(&self) -> Option<server::VarPlan> {
        self.kept.lock().ok()?.plan.clone()
    }

    fn set_plan(&self, plan: Option<server::VarPlan>) {
        if let Ok(mut k) = self.kept.lock() {
            k.plan = plan;
        }
    }

    /// True when the status read `now` shows a `GRANT` or `REVOKE` since the last sample's:
    /// the kept connection has the privileges of its login, so it is replaced.
    fn grants_moved(&self, now: &BTreeMap<String, String>) -> bool {
        let Ok(k) = self.kept.lock() else {
            return false;
        };
        match (
            &k.grants,
            server::ChangeMark::of(now, &server::GRANT_CHANGES),
        ) {
            (Some(then), Some(now)) => !then.unchanged_at(&now),
            _ => false,
        }
    }

    fn store_grants(&self, now: &BTreeMap<String, String>) {
        if let Ok(mut k) = self.kept.lock() {
            k.grants = server::ChangeMark::of(now, &server::GRANT_CHANGES);
        }
    }

    /// Variables read less than `variables_refresh` ago.
    fn fresh_variables(&self) -> Option<KeptVariables> {
        let k = self.kept.lock().ok()?;
        let v = k.variables.as_ref()?;
        still_fresh(v.at, self.variables_refresh).then(|| v.clone())
    }

    fn store_variables(&self, values: &BTreeMap<String, String>, mark: Option<server::ChangeMark>) {
        if let Ok(mut k) = self.kept.lock() {
            k.variables = Some(KeptVariables {
                at: Instant::now(),
                values: values.clone(),
                mark,
            });
        }
    }
}

/// The MariaDB part of a snapshot and how its collection went.
#[derive(Debug)]
pub struct MariadbOutcome {
    pub section: MariadbSection,
    pub runs: Vec<CollectorRun>,
    /// SQL statements sent.
    pub statements: u32,
}

/// The server's own collector: connecting and its variables and status.
pub(crate) const SERVER: Descriptor = Descriptor {
    name: "mariadb",
    help: "connect, then the server's variables and status (one statement each; the agent reads the variables again only after a setting change)",
    default_enabled: true,
    requires: Requires::Nothing,
};

/// The parts read before the window opens, so their statements are not counted in doctor's
/// status window and the probe's k-NN queries are not in the digest read; each with its
/// options.
fn before_window(opts: &MariadbOptions) -> [Box<dyn Part + '_>; 4] {
    [
        Box::new(statements::StatementsPart {
            opts: opts.statements.as_ref(),
        }),
        Box::new(innodb::Innodb {
            cache: opts.innodb_cache.as_ref(),
            // Doctor's only: the agent sums the statistics every 30 minutes (exact data and
            // index sizes for its metrics; 20-60 ms at 100,000 tables).
            bound: opts
                .dictionary_bound
                .filter(|_| opts.innodb_cache.is_none()),
        }),
        Box::new(error_log::ErrorLogPart {
            cache: opts.error_log_cache.as_ref(),
        }),
        Box::new(schema::SchemaPart {
            cache: opts.schema_cache.as_ref(),
            bound: opts.dictionary_bound,
        }),
    ]
}

/// The parts read once the window is open (the probe's latency is measured while the OS
/// counters run).
fn after_window<'a>(
    opts: &'a MariadbOptions,
    observer: &'a dyn ProbeObserver,
) -> [Box<dyn Part + 'a>; 4] {
    [
        // First: the waits as they are when the status window ends.
        Box::new(locks::LocksPart {
            cache: opts.lock_cache.as_ref(),
        }),
        Box::new(replication::ReplicationPart {
            cache: opts.replication_cache.as_ref(),
        }),
        Box::new(vector::VectorIndexes {
            cache: opts.vector_cache.as_ref(),
            bound: opts.dictionary_bound,
        }),
        Box::new(probe::ProbePart {
            opts: opts.probe.as_ref(),
            observer,
        }),
    ]
}

/// Every MariaDB collector, in the order a collection runs them.
pub(crate) fn collectors() -> Vec<&'static Descriptor> {
    let none = MariadbOptions::default();
    let parts = before_window(&none)
        .into_iter()
        .chain(after_window(&none, &NoProgress));
    std::iter::once(&SERVER)
        .chain(parts.map(|p| p.descriptor()))
        .collect()
}

/// One collection from MariaDB, phase by phase: [`connect`], [`Collection::before_window`],
/// [`Collection::status_window`], [`Collection::after_window`], [`Collection::close`]
/// (`collect::collect` runs them, with the OS window between).
#[derive(Debug)]
pub struct Collection<'a> {
    out: MariadbOutcome,
    opts: &'a MariadbOptions,
    selection: &'a Selection,
    /// The connection and the server's facts, once connected.
    live: Option<Live>,
}

#[derive(Debug)]
struct Live {
    s: Session,
    /// `Candidate::display` of the target reached.
    target: String,
    facts: MariadbFacts,
}

/// Connects to the first candidate that answers (a kept connection first) and reads the
/// server's own facts: the `mariadb` collector's run.
pub async fn connect<'a>(
    candidates: &[Candidate],
    opts: &'a MariadbOptions,
    selection: &'a Selection,
    local_hostname: Option<&str>,
) -> Collection<'a> {
    let mut out = MariadbOutcome {
        section: MariadbSection::default(),
        runs: Vec::new(),
        statements: 0,
    };
    let (live, run) = collector::execute_async(&SERVER, selection, None, || {
        server_session(candidates, opts, local_hostname, &mut out)
    })
    .await;
    out.runs.extend(run);
    if let Err(e) = &live
        && !e.is_failure()
    {
        // Turned off: say so where the report says why there are no database facts.
        out.section.error = Some(DbError {
            kind: DbErrorKind::Other,
            message: e.to_string(),
            hint: "turn the mariadb collector back on to connect (powerdiag collectors lists them)"
                .into(),
        });
    }
    Collection {
        out,
        opts,
        selection,
        live: live.ok(),
    }
}

impl Collection<'_> {
    /// The server's facts, once connected.
    pub fn facts(&self) -> Option<&MariadbFacts> {
        self.live.as_ref().map(|l| &l.facts)
    }

    /// The parts read before the status and OS windows open.
    pub async fn before_window(&mut self) {
        let parts = before_window(self.opts);
        self.parts(&parts).await;
    }

    /// The parts read while the windows are open.
    pub async fn after_window(&mut self, observer: &dyn ProbeObserver) {
        let parts = after_window(self.opts, observer);
        self.parts(&parts).await;
    }

    async fn parts(&mut self, parts: &[Box<dyn Part + '_>]) {
        let Some(live) = &mut self.live else {
            return;
        };
        let mut ctx = part::Ctx {
            s: &mut live.s,
            facts: &mut live.facts,
        };
        let parts: Vec<&dyn Part> = parts.iter().map(|p| p.as_ref()).collect();
        part::run(&parts, &mut ctx, self.selection, &mut self.out.runs).await;
    }

    /// Opens the status window: doctor reads the status, waits out its window and reads it
    /// again; the agent pairs this sample's read with an earlier one.
    pub async fn status_window(&mut self) {
        if let Some(live) = &mut self.live {
            // Doctor: the replica as the window opens too, so PD222 sees the lag move.
            if let (StatusWindowMode::Doctor(d), Some(cache)) =
                (&self.opts.status_window, &self.opts.replication_cache)
                && !d.is_zero()
                && self.selection.is_enabled(&replication::DESCRIPTOR)
            {
                replication::read_at_window_start(&mut live.s, cache).await;
            }
            status_window(&mut live.s, &mut live.facts, &self.opts.status_window).await;
        }
    }

    /// Ends the collection: the connection is kept (the agent) or closed.
    pub async fn close(mut self) -> MariadbOutcome {
        if let Some(Live { s, target, facts }) = self.live.take() {
            self.out.section.facts = Some(facts);
            self.out.statements = s.statements;
            match &self.opts.reuse {
                Some(reuse) if s.alive() => reuse.put_session(s, target),
                _ => s.close().await,
            }
        }
        self.out
    }
}

/// The `mariadb` collector: a session on the server with its facts read. A failure is
/// recorded in `out` (attempts, target, the error) and is the collector's error.
async fn server_session(
    candidates: &[Candidate],
    opts: &MariadbOptions,
    local_hostname: Option<&str>,
    out: &mut MariadbOutcome,
) -> Result<Live, CollectError> {
    let failed = |out: &mut MariadbOutcome, error: DbError, statements: u32| {
        out.section.error = Some(error.clone());
        out.statements = statements;
        Err(CollectError::database(error))
    };
    let reuse = opts.reuse.as_ref();
    // A kept connection first: if it no longer works (the server restarted, or closed it after
    // wait_timeout), connect afresh below. Not after a timeout: a hung server would cost two
    // deadlines.
    let mut sent = 0;
    if let Some((mut s, target)) = reuse.and_then(Reuse::take_session) {
        let candidate = candidates.iter().find(|c| c.display() == target);
        if let (Some(candidate), true) = (candidate, s.alive()) {
            s.statements = 0;
            let facts = server_facts(
                &mut s,
                candidate,
                local_hostname,
                reuse,
                true,
                read_status_first(opts),
            )
            .await;
            sent = s.statements;
            match facts {
                Ok(facts) if reuse.is_some_and(|r| r.grants_moved(&facts.status)) => {
                    tracing::info!(
                        target = %target,
                        "a GRANT or REVOKE since the last sample: connecting again, so that the agent's session has its user's current privileges"
                    );
                    s.close().await;
                }
                Ok(facts) => {
                    out.section.attempts.push(ConnectAttempt {
                        target: target.clone(),
                        error: None,
                    });
                    out.section.target = Some(target.clone());
                    out.section.reachable = true;
                    return Ok(Live { s, target, facts });
                }
                Err(e) if e.kind == DbErrorKind::Timeout => {
                    out.section.attempts.push(ConnectAttempt {
                        target: target.clone(),
                        error: Some(e.message.clone()),
                    });
                    out.section.target = Some(target);
                    return failed(out, e, sent);
                }
                Err(e) => {
                    tracing::debug!(error = %e.message, "kept MariaDB connection failed; reconnecting");
                }
            }
        }
    }
    let (mut s, candidate) =
        match connect_first(candidates, opts.timeout, &mut out.section.attempts).await {
            Ok(connected) => connected,
            Err(error) => {
                out.section.target = candidates.last().map(Candidate::display);
                return failed(out, error, sent);
            }
        };
    out.section.target = Some(candidate.display());
    out.section.reachable = true;
    match server_facts(
        &mut s,
        candidate,
        local_hostname,
        reuse,
        false,
        read_status_first(opts),
    )
    .await
    {
        Ok(facts) => {
            s.statements += sent;
            if let Some(r) = reuse {
                r.store_grants(&facts.status);
            }
            Ok(Live {
                s,
                target: candidate.display(),
                facts,
            })
        }
        Err(e) => {
            let statements = s.statements + sent;
            s.close().await;
            failed(out, e, statements)
        }
    }
}

async fn connect_first<'a>(
    candidates: &'a [Candidate],
    timeout: Duration,
    attempts: &mut Vec<ConnectAttempt>,
) -> Result<(Session, &'a Candidate), DbError> {
    let mut errors: Vec<DbError> = Vec::new();
    for c in candidates {
        match Session::connect(c, timeout).await {
            Ok(s) => {
                attempts.push(ConnectAttempt {
                    target: c.display(),
                    error: None,
                });
                return Ok((s, c));
            }
            Err(e) => {
                attempts.push(ConnectAttempt {
                    target: c.display(),
                    error: Some(e.message.clone()),
                });
                errors.push(e);
            }
        }
    }
    Err(most_useful(errors).unwrap_or_else(|| DbError {
        kind: DbErrorKind::Other,
        message: "no MariaDB target to try".into(),
        hint: "pass --mariadb.url or --mariadb.defaults-file".into(),
    }))
}

/// When every target failed, the error that tells the user most: reaching a server and being
/// refused beats finding nothing.
fn most_useful(errors: Vec<DbError>) -> Option<DbError> {
    let rank = |k: DbErrorKind| match k {
        DbErrorKind::AccessDenied => 0,
        DbErrorKind::MissingPrivilege => 1,
        DbErrorKind::Timeout => 2,
        DbErrorKind::Tls | DbErrorKind::Protocol => 3,
        DbErrorKind::UnknownHost => 4,
        DbErrorKind::Other => 5,
        DbErrorKind::ConnectionRefused => 6,
        DbErrorKind::SocketMissing => 7,
    };
    errors.into_iter().min_by_key(|e| rank(e.kind))
}

async fn server_facts(
    s: &mut Session,
    candidate: &Candidate,
    local_hostname: Option<&str>,
    reuse: Option<&Reuse>,
    kept_connection: bool,
    read_status: bool,
) -> Result<MariadbFacts, DbError> {
    // On a kept connection the status read comes first: it tells whether the kept variables
    // still hold, and if it fails, the kept connection is what failed (a restarted server), and
    // the caller reconnects.
    let status_first = match reuse {
        Some(_) if kept_connection && read_status => Some(server::read_status(s).await?),
        _ => None,
    };
    let kept = match (reuse, &status_first) {
        (Some(r), Some(status)) => r.fresh_variables().filter(|k| k.hold_at(status)),
        _ => None,
    };
    let variables = match kept {
        Some(k) => k.values,
        None => {
            let planned = match reuse.and_then(Reuse::plan) {
                Some(plan) => server::read_variables_planned(s, &plan).await?,
                None => None,
            };
            let v = match planned {
                Some(v) => v,
                None => {
                    let v = server::read_variables(s).await?;
                    if let Some(reuse) = reuse {
                        reuse.set_plan(server::VarPlan::learn(&v));
                    }
                    v
                }
            };
            if let Some(reuse) = reuse {
                let mark = status_first
                    .as_ref()
                    .and_then(|st| server::ChangeMark::of(st, &server::SETTING_CHANGES));
                reuse.store_variables(&v, mark);
            }
            v
        }
    };
    let get = |v: Var| {
        variables
            .get(v.name())
            .map(String::as_str)
            .unwrap_or_default()
    };
    let version =
        ServerVersion::parse(get(Var::Version), get(Var::VersionComment)).ok_or_else(|| {
            DbError {
                kind: DbErrorKind::Protocol,
                message: format!(
                    "{}: unrecognised server version {:?}",
                    s.target,
                    get(Var::Version)
                ),
                hint: "powerdiag supports MariaDB 10.6 and later".into(),
            }
        })?;
    let mut notes = Vec::new();
    // Session-scoped guards, in one statement: the server itself stops a statement that runs
    // too long, and nothing this session runs can write.
    let secs = s_timeout_secs(s);
    if s.guarded == Some(s.timeout()) {
        // A kept connection: its session already has the guards.
    } else if version.flavour == powerdiag_rules::Flavour::Mariadb {
        let ro = if version.at_least(11, 1, 0) {
            "transaction_read_only"
        } else {
            "tx_read_only"
        };
        if s.exec(&format!(
            "SET SESSION max_statement_time = {secs}, {ro} = 1"
        ))
        .await
        .is_ok()
        {
            s.guarded = Some(s.timeout());
        }
    } else if s.exec("SET SESSION TRANSACTION READ ONLY").await.is_ok() {
        s.guarded = Some(s.timeout());
    }
    let status = if let Some(st) = status_first {
        st
    } else if !read_status {
        // Doctor's window: read later, after its other statements (`finish`).
        Default::default()
    } else {
        match server::read_status(s).await {
            Ok(st) => st,
            Err(e) => {
                notes.push(format!("global status unavailable: {}", e.message));
                Default::default()
            }
        }
    };
    let same_host = if candidate.is_local() {
        Some(true)
    } else {
        match (local_hostname, variables.get(Var::Hostname.name())) {
            (Some(l), Some(r)) => Some(l.eq_ignore_ascii_case(r)),
            _ => None,
        }
    };
    Ok(MariadbFacts {
        version,
        same_host,
        variables,
        status,
        vector_indexes: Gathered::Available(Vec::new()),
        probe: Gathered::Unavailable(probe::DISABLED.into()),
        statements: Gathered::Unavailable("statement digests were not read".into()),
        status_window: Gathered::Unavailable("no sample window".into()),
        innodb_size: Gathered::Unavailable("not read".into()),
        transactions: Gathered::Unavailable("not read".into()),
        locks: Gathered::Unavailable("not read".into()),
        last_deadlock: Gathered::Unavailable("not read".into()),
        replication: Gathered::Unavailable("not read".into()),
        error_log: Gathered::Unavailable("not read".into()),
        schema: Gathered::Unavailable("not read".into()),
        notes,
    })
}

/// Doctor with a window reads the status only after its other statements (`status_window`),
/// so they do not count in the window.
fn read_status_first(opts: &MariadbOptions) -> bool {
    !matches!(opts.status_window, StatusWindowMode::Doctor(d) if !d.is_zero())
}

/// The status window: doctor reads the status, waits, reads it again; the agent pairs this
/// sample's read with an earlier one.
async fn status_window(s: &mut Session, facts: &mut MariadbFacts, mode: &StatusWindowMode) {
    facts.status_window = match mode {
        StatusWindowMode::Doctor(d) if !d.is_zero() => {
            // The OS window started just before: end the status window so that its last read
            // finishes when the OS window is due, not a read's time later.
            let t0 = Instant::now();
            let start = match server::read_status(s).await {
                Ok(st) => st,
                Err(e) => {
                    facts
                        .notes
                        .push(format!("global status unavailable: {}", e.message));
                    facts.status_window =
                        Gathered::Unavailable(format!("status unavailable: {}", e.message));
                    return;
                }
            };
            let read = t0.elapsed();
            // Each read's moment is taken as its middle; the end read is assumed to take as
            // long as the start read did.
            tokio::time::sleep_until((t0 + d.saturating_sub(read)).into()).await;
            let end_started = Instant::now();
            match server::read_status(s).await {
                Ok(end) => {
                    let seconds = (end_started + end_started.elapsed() / 2)
                        .duration_since(t0 + read / 2)
                        .as_secs_f64();
                    facts.status = end;
                    Gathered::Available(powerdiag_rules::StatusWindow {
                        seconds,
                        source: powerdiag_rules::WindowSource::Doctor,
                        start,
                        longer: Vec::new(),
                        history: None,
                    })
                }
                Err(e) => {
                    facts.status = start;
                    Gathered::Unavailable(format!(
                        "the status read at the end of the window failed: {}",
                        e.message
                    ))
                }
            }
        }
        StatusWindowMode::Doctor(_) | StatusWindowMode::None => Gathered::Unavailable(
            "no sample window (doctor --sample-window 0): one status read".into(),
        ),
        StatusWindowMode::Agent(tracker) if !facts.status.is_empty() => {
            tracker.record(Instant::now(), &facts.status, &facts.variables)
        }
        StatusWindowMode::Agent(_) => Gathered::Unavailable("status unavailable".into()),
    };
}

fn s_timeout_secs(s: &Session) -> f64 {
    s.timeout().as_secs_f64().max(1.0)
}

#[cfg(test)]
mod reuse_tests {
    use super::*;

    /// A read a sample interval old is due at a reuse equal to that interval, even when the
    /// next sample looks a little early; a clearly recent one is reused; zero never is.
    #[test]
    fn due_within_the_last_twentieth() {
        let ago = |s: u64| {
            Instant::now()
                .checked_sub(Duration::from_millis(s))
                .unwrap()
        };
        let minute = Duration::from_secs(60);
        assert!(!still_fresh(ago(59_990), minute), "a few ms short of due");
        assert!(!still_fresh(ago(57_500), minute));
        assert!(still_fresh(ago(50_000), minute));
        assert!(!still_fresh(ago(0), Duration::ZERO));
    }

    fn status(set: &str, pages: &str) -> BTreeMap<String, String> {
        let mut m: BTreeMap<String, String> = server::SETTING_CHANGES
            .iter()
            .map(|v| (v.name().to_owned(), "3".to_owned()))
            .collect();
        m.insert("uptime".into(), "100".into());
        m.insert("com_set_option".into(), set.into());
        m.insert("innodb_buffer_pool_pages_total".into(), pages.into());
        m
    }

    fn kept(mark: Option<&BTreeMap<String, String>>) -> KeptVariables {
        KeptVariables {
            at: Instant::now(),
            values: BTreeMap::new(),
            mark: mark.and_then(|st| server::ChangeMark::of(st, &server::SETTING_CHANGES)),
        }
    }

    /// Kept variables hold while no `SET`, plugin change or buffer pool resize shows in the
    /// status read; variables read before the status (a new connection) hold for no sample.
    #[test]
    fn kept_variables_hold_until_a_setting_may_have_changed() {
        let then = status("40", "8192");
        assert!(kept(Some(&then)).hold_at(&status("40", "8192")));
        assert!(!kept(Some(&then)).hold_at(&status("41", "8192")), "a SET");
        assert!(
            !kept(Some(&then)).hold_at(&status("40", "4096")),
            "the buffer pool resized"
        );
        let mut plugin = status("40", "8192");
        plugin.insert("com_install_plugin".into(), "4".into());
        assert!(!kept(Some(&then)).hold_at(&plugin), "a plugin installed");
        let mut unreadable = status("40", "8192");
        unreadable.remove("com_uninstall_plugin");
        assert!(!kept(Some(&then)).hold_at(&unreadable), "a counter missing");
        assert!(
            !kept(None).hold_at(&then),
            "read before the status: no mark"
        );
    }

    /// `variables_refresh` bounds the reuse whatever the counters say.
    #[test]
    fn kept_variables_expire_after_the_refresh() {
        let reuse = Reuse::new(Duration::from_secs(600));
        reuse.store_variables(&BTreeMap::new(), None);
        assert!(reuse.fresh_variables().is_some());
        let zero = reuse.with_variables_refresh(Duration::ZERO);
        assert!(
            zero.fresh_variables().is_none(),
            "0 reads them every sample"
        );
    }
}
