//! The versioned, serialisable record of everything the collectors found.
//!
//! A missing part is never an error: it is [`Gathered::Unavailable`] with the collector's
//! reason, and the rules that need it answer `insufficient_data` quoting that reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    OsFacts, ServerVersion, StatusVar, Var, Verdict,
    value::{parse_bool, parse_u64},
};

/// Version of the [`Snapshot`] layout. Bumped on any incompatible change; readers refuse newer
/// versions and migrate older ones.
pub const SCHEMA_VERSION: u32 = 3;

/// Which powerdiag command took a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `powerdiag doctor` or `powerdiag collect`.
    Doctor,
    /// `powerdiag agent`.
    Agent,
}

/// One sample of the facts about a host and its MariaDB server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Snapshot {
    pub schema_version: u32,
    /// Version of powerdiag that collected it.
    pub powerdiag_version: String,
    /// When collection started, RFC 3339 UTC (filled by the collector: rules read no clock).
    pub taken_at: Option<String>,
    /// Who took it: the agent judges only recent windows, doctor may fall back to counters
    /// since start-up (`counters`). Absent in snapshots from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    pub host: Gathered<HostFacts>,
    /// CPU, topology, pages, the mariadbd process, partition, counters.
    #[serde(default = "os_not_collected")]
    pub os: Gathered<OsFacts>,
    pub mariadb: MariadbSection,
    /// Every collector that ran, how long it took and whether it succeeded.
    #[serde(default)]
    pub collectors: Vec<CollectorRun>,
}

impl Snapshot {
    /// An empty snapshot: nothing collected yet.
    pub fn new(powerdiag_version: impl Into<String>) -> Snapshot {
        Snapshot {
            schema_version: SCHEMA_VERSION,
            powerdiag_version: powerdiag_version.into(),
            taken_at: None,
            origin: None,
            host: Gathered::Unavailable("host collector did not run".into()),
            os: os_not_collected(),
            mariadb: MariadbSection::default(),
            collectors: Vec::new(),
        }
    }

    /// When the snapshot was taken (`taken_at`), or the `insufficient_data` verdict saying it
    /// is missing or not an RFC 3339 time. Rules read no clock: this is their "now".
    pub fn taken(&self) -> Result<time::OffsetDateTime, Verdict> {
        let taken = self.taken_at.as_deref().ok_or_else(|| {
            Verdict::insufficient("the snapshot has no time it was taken (taken_at)")
        })?;
        time::OffsetDateTime::parse(taken, &time::format_description::well_known::Rfc3339).map_err(
            |_| {
                Verdict::insufficient(format!(
                    "the snapshot's taken_at {:?} is not an RFC 3339 time",
                    crate::display_text(taken, 40)
                ))
            },
        )
    }

    /// The host facts, or the `insufficient_data` verdict explaining their absence.
    pub fn host(&self) -> Result<&HostFacts, Verdict> {
        match &self.host {
            Gathered::Available(h) => Ok(h),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "host facts unavailable: {why}"
            ))),
        }
    }

    /// The MariaDB facts, or the `insufficient_data` verdict explaining their absence.
    pub fn db(&self) -> Result<&MariadbFacts, Verdict> {
        match &self.mariadb.facts {
            Some(f) => Ok(f),
            None => {
                let why = match &self.mariadb.error {
                    Some(e) => format!("MariaDB not reachable: {}", e.message),
                    None => "MariaDB was not queried".to_owned(),
                };
                Err(Verdict::insufficient(why))
            }
        }
    }

    /// The OS facts, or the verdict explaining their absence.
    pub fn os(&self) -> Result<&OsFacts, Verdict> {
        match &self.os {
            Gathered::Available(o) => Ok(o),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "OS facts unavailable: {why}"
            ))),
        }
    }

    /// True when the host is Linux (from the host facts).
    pub fn is_os(&self, os: &str) -> Option<bool> {
        self.host.as_ref().ok().map(|h| h.os == os)
    }

    /// Host facts that describe the database's host too. A rule that combines server and host
    /// facts must not judge a remote server by the local machine.
    pub fn db_host(&self) -> Result<&HostFacts, Verdict> {
        let host = self.host()?;
        match self.db().ok().and_then(|db| db.same_host) {
            Some(false) => Err(Verdict::insufficient(
                "the server runs on another host than powerdiag; host facts would describe the wrong machine (run powerdiag on the database host)",
            )),
            _ => Ok(host),
        }
    }
}

fn os_not_collected() -> Gathered<OsFacts> {
    Gathered::Unavailable("OS collector did not run".into())
}

/// A part of the snapshot that was either collected or could not be, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Gathered_{T}")]
pub enum Gathered<T> {
    Available(T),
    /// Why the collector could not provide it, in words a user can act on.
    Unavailable(String),
}

impl<T> Gathered<T> {
    pub fn as_ref(&self) -> Result<&T, &str> {
        match self {
            Gathered::Available(v) => Ok(v),
            Gathered::Unavailable(why) => Err(why),
        }
    }
}

/// Basic facts about the machine powerdiag runs on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    pub hostname: String,
    /// `linux`, `aix`, `macos`, ... (Rust's `target_os` spelling).
    pub os: String,
    /// Distribution name, e.g. `Debian GNU/Linux 12 (bookworm)`.
    pub os_release: Option<String>,
    pub kernel: Option<String>,
    /// `x86_64`, `aarch64`, `powerpc64le`, `powerpc64`.
    pub arch: String,
    /// Online hardware threads (logical CPUs).
    pub hardware_threads: Option<u32>,
    /// Hardware threads this process may run on (CPU affinity, cgroup limits aside).
    pub usable_threads: Option<u32>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    pub page_size_bytes: Option<u64>,
}

/// What happened when powerdiag tried to reach MariaDB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MariadbSection {
    /// The target that answered, or the last one tried: `user@host:port` or `user@/path.sock`.
    /// Never contains a password.
    pub target: Option<String>,
    pub reachable: bool,
    /// Why the server could not be used, when it could not.
    pub error: Option<DbError>,
    /// Every target tried, in order, with the reason it failed.
    #[serde(default)]
    pub attempts: Vec<ConnectAttempt>,
    pub facts: Option<MariadbFacts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnectAttempt {
    pub target: String,
    /// `None` when this attempt succeeded.
    pub error: Option<String>,
}

/// A classified database error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DbError {
    pub kind: DbErrorKind,
    pub message: String,
    /// What the user can do about it.
    pub hint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DbErrorKind {
    ConnectionRefused,
    UnknownHost,
    SocketMissing,
    AccessDenied,
    MissingPrivilege,
    Timeout,
    Tls,
    Protocol,
    Other,
}

/// Facts read from a reachable server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MariadbFacts {
    pub version: ServerVersion,
    /// True when the server runs on the machine powerdiag runs on (socket, loopback, or
    /// `@@hostname` equal to the local host name). Host rules need this.
    pub same_host: Option<bool>,
    /// Global variables, lower-case names, only the names in [`Var`].
    pub variables: BTreeMap<String, String>,
    /// Global status, lower-case names, only the names in [`StatusVar`]. With a
    /// [`status_window`](Self::status_window), the read at its end.
    pub status: BTreeMap<String, String>,
    /// The status read at the start of a window whose end is `status` (doctor's
    /// `--sample-window`, the agent's `[sample] status_window`), so rules judge differences
    /// over it; unavailable with the reason when there was none.
    #[serde(default = "crate::counters::status_window_not_recorded")]
    pub status_window: Gathered<crate::StatusWindow>,
    /// InnoDB data and index size (`mysql.innodb_table_stats`, one statement).
    #[serde(default = "crate::innodb::innodb_size_not_recorded")]
    pub innodb_size: Gathered<crate::InnodbSize>,
    /// The open InnoDB transactions and the oldest (`information_schema.INNODB_TRX`, and the
    /// oldest's session from `PROCESSLIST` when one is open).
    #[serde(default = "crate::innodb::transactions_not_recorded")]
    pub transactions: Gathered<crate::Transactions>,
    /// Who waits for whom (`PROCESSLIST`, `INNODB_TRX`, `INNODB_LOCK_WAITS`, the metadata-lock
    /// source), read when the status read says something can be waiting.
    #[serde(default = "crate::locks::locks_not_recorded")]
    pub locks: Gathered<crate::Locks>,
    /// The last deadlock InnoDB detected (`SHOW ENGINE INNODB STATUS`), read when
    /// `Innodb_deadlocks` moved; `None` when the server has detected none.
    #[serde(default = "crate::locks::deadlock_not_recorded")]
    pub last_deadlock: Gathered<Option<crate::Deadlock>>,
    /// This server's replication connections (`SHOW ALL REPLICAS STATUS`): none on a server
    /// that is not a replica.
    #[serde(default = "crate::replication::replication_not_recorded")]
    pub replication: Gathered<crate::Replication>,
    /// The server's error log (`log_error`) as typed events: a server on this host only.
    #[serde(default = "crate::errorlog::error_log_not_recorded")]
    pub error_log: Gathered<crate::ErrorLog>,
    /// The user tables and their indexes (PD705–PD708).
    #[serde(default = "crate::schema::schema_not_recorded")]
    pub schema: Gathered<crate::Schema>,
    pub vector_indexes: Gathered<Vec<VectorIndex>>,
    pub probe: Gathered<Probe>,
    /// Statement digests from performance_schema (PD701–PD704, "Top statements").
    #[serde(default = "crate::statements::statements_not_collected")]
    pub statements: Gathered<crate::Statements>,
    /// Partial failures worth telling the user (e.g. a privilege that limited a check).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl MariadbFacts {
    /// The raw value of a variable, or the verdict explaining its absence.
    pub fn var(&self, var: Var) -> Result<&str, Verdict> {
        self.variables
            .get(var.name())
            .map(String::as_str)
            .ok_or_else(|| {
                Verdict::insufficient(format!(
                    "variable {} was not reported by MariaDB {}",
                    var.name(),
                    self.version.short()
                ))
            })
    }

    pub fn var_u64(&self, var: Var) -> Result<u64, Verdict> {
        let raw = self.var(var)?;
        parse_u64(raw).ok_or_else(|| {
            Verdict::insufficient(format!(
                "variable {} has an unexpected value {raw:?}",
                var.name()
            ))
        })
    }

    pub fn var_bool(&self, var: Var) -> Result<bool, Verdict> {
        let raw = self.var(var)?;
        parse_bool(raw).ok_or_else(|| {
            Verdict::insufficient(format!(
                "variable {} has an unexpected value {raw:?}",
                var.name()
            ))
        })
    }

    /// A status value as the server wrote it (`ON`, `Primary`, `Synced`), or the verdict
    /// naming what is missing.
    pub fn status_str(&self, s: StatusVar) -> Result<&str, Verdict> {
        self.status
            .get(s.name())
            .map(String::as_str)
            .ok_or_else(|| Verdict::insufficient(format!("status {} was not reported", s.name())))
    }

    /// A status gauge with a fraction (`wsrep_local_recv_queue_avg` = `0.0740741`).
    pub fn status_f64(&self, s: StatusVar) -> Result<f64, Verdict> {
        let raw = self.status_str(s)?;
        raw.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                Verdict::insufficient(format!(
                    "status {} has an unexpected value {raw:?}",
                    s.name()
                ))
            })
    }

    pub fn status_u64(&self, s: StatusVar) -> Result<u64, Verdict> {
        let raw = self.status.get(s.name()).ok_or_else(|| {
            Verdict::insufficient(format!("status {} was not reported", s.name()))
        })?;
        parse_u64(raw).ok_or_else(|| {
            Verdict::insufficient(format!(
                "status {} has an unexpected value {raw:?}",
                s.name()
            ))
        })
    }

    /// The MHNSW rules' common gate: no vector index support, no verdict to give.
    pub fn require_vector_support(&self) -> Result<(), Verdict> {
        if self.version.has_vector_indexes() {
            Ok(())
        } else {
            Err(Verdict::not_applicable(format!(
                "server {} has no vector indexes (MariaDB 11.7 or later)",
                self.version.raw
            )))
        }
    }

    /// The vector indexes, or the verdict for their absence.
    pub fn vector_indexes(&self) -> Result<&[VectorIndex], Verdict> {
        self.require_vector_support()?;
        match &self.vector_indexes {
            Gathered::Available(v) if v.is_empty() => {
                Err(Verdict::not_applicable("the server has no vector indexes"))
            }
            Gathered::Available(v) => Ok(v),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "vector indexes could not be listed: {why}"
            ))),
        }
    }
}

/// One MHNSW vector index and the raw facts about its size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VectorIndex {
    pub schema: String,
    pub table: String,
    pub index: String,
    pub column: Option<String>,
    pub dimensions: Option<u32>,
    /// `euclidean` or `cosine`.
    pub distance: Option<String>,
    /// The index's `M` (neighbours per node per layer; layer 0 keeps 2*M).
    pub m: Option<u32>,
    /// Vectors in the index (rows of the hidden table, or the base table's estimate).
    pub rows: Option<u64>,
    /// Where `rows` came from, e.g. `innodb_sys_tablestats`.
    pub rows_source: Option<String>,
    /// The hidden graph table, e.g. `db/t#i#01`.
    pub hidden_table: Option<String>,
    /// On-disk size of the hidden table's clustered index, bytes.
    pub hidden_table_bytes: Option<u64>,
    /// Where `rows` and `hidden_table_bytes` came from when not from InnoDB's in-memory
    /// statistics: the persistent statistics and their age (read first: they cost the server
    /// the same at any number of tables), the file allocation when the in-memory statistics
    /// were not loaded either (a table evicted from the dictionary cache reads `NUM_ROWS = 0`
    /// and `CLUST_INDEX_SIZE = 0`), or why the size is unknown. `None` when the in-memory
    /// statistics were used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_source: Option<String>,
    /// `INFORMATION_SCHEMA.VECTOR_INDEXES.CACHE_OVERFLOWS`, where the server has it.
    pub cache_overflows: Option<u64>,
    /// `INFORMATION_SCHEMA.VECTOR_INDEXES.MEMORY_SIZE`: the cache's current size.
    pub cache_memory_bytes: Option<u64>,
}

impl VectorIndex {
    pub fn qualified_name(&self) -> String {
        format!("{}.{} ({})", self.schema, self.table, self.index)
    }
}

/// Results of the bounded, read-only probe queries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Probe {
    pub indexes: Vec<IndexProbe>,
    /// `SHOW PROFILE ALL` of the first profiled probe query.
    pub profile: Option<Gathered<QueryProfile>>,
    /// The further profiled probe queries (other query vectors, same index), so a stall share
    /// is judged over several queries and not on one noisy sample. Empty in snapshots of
    /// powerdiag 0.1 before this field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_profiles: Vec<QueryProfile>,
}

/// The k-NN queries run against one vector index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexProbe {
    pub schema: String,
    pub table: String,
    pub index: String,
    /// `LIMIT` of each k-NN query.
    pub limit: u32,
    /// Queries in the order they ran: first the distinct query vectors, then repeats of the
    /// first few (`repeat = true`), which a warm cache answers from memory.
    pub queries: Vec<ProbeQuery>,
    /// True when the time budget ended the burst early.
    pub budget_exhausted: bool,
    /// Why the probe of this index stopped or could not run.
    pub error: Option<String>,
}

/// One k-NN probe query and the counters it moved (session deltas; the buffer-pool counter is
/// global).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeQuery {
    pub latency_us: u64,
    pub repeat: bool,
    /// Cache rebuilds: each rebuild reads the graph's entry point with `ha_index_last`.
    pub handler_read_last: u64,
    /// Graph nodes and result rows fetched by position.
    pub handler_read_rnd: u64,
    pub buffer_pool_read_requests: u64,
}

/// `SHOW PROFILE ALL` of one probe query.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueryProfile {
    /// Which index the profiled query used.
    pub index: String,
    pub stages: Vec<ProfileStage>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProfileStage {
    pub status: String,
    pub duration_us: u64,
    pub cpu_user_us: u64,
    pub cpu_system_us: u64,
    pub context_voluntary: u64,
    pub context_involuntary: u64,
    pub block_ops_in: u64,
    pub block_ops_out: u64,
    pub page_faults_major: u64,
    pub page_faults_minor: u64,
}

/// One collector's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CollectorRun {
    pub name: String,
    pub duration_seconds: f64,
    pub success: bool,
    pub error: Option<String>,
}
