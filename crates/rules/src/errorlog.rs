//! The server's own error log, as typed events (PD803 server-restarted, PD804
//! innodb-flushing-lags). The agent's collector reads the file named by `log_error` and parses
//! it into these; unknown lines are not kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Gathered;

/// What was read of the error log and the events found in it, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorLog {
    /// The file (as the server names it, resolved against `datadir`).
    pub path: String,
    /// What the events cover: `the last 4.0 MiB of 12.5 MiB`, or the agent's reads since it
    /// started.
    pub read: String,
    /// Unix time of the first timestamped line of what was read: events before it are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers_from: Option<i64>,
    /// The events, oldest first; at most [`MAX_EVENTS`] (the newest).
    pub events: Vec<LogEvent>,
    /// Events found but not kept (over the cap).
    #[serde(default)]
    pub dropped: u64,
    /// Events read per kind ([`LogEventKind::name`]): since the agent started (its metric
    /// `powerdiag_mariadb_error_log_events_total`), or in what doctor read. Not capped.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
}

/// The most events a snapshot keeps.
pub const MAX_EVENTS: usize = 256;

/// One event of the error log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogEvent {
    /// Unix time (UTC) of its line; `None` when its line had no timestamp the collector could
    /// place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    pub kind: LogEventKind,
    /// The line, clipped (≤ 300 characters) and with control characters replaced.
    pub line: String,
}

/// The kinds of events powerdiag reads in the error log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogEventKind {
    /// `Starting MariaDB … as process N` (10.4+): a start began.
    Starting,
    /// `…: ready for connections.`
    Ready,
    /// `…: Normal shutdown` (a requested shutdown began).
    Shutdown,
    /// `…: Shutdown complete`.
    ShutdownComplete,
    /// `… got signal N ;` (the crash report's header) or `got exception`.
    Crash { signal: Option<u32> },
    /// InnoDB recovery at start-up (`Starting crash recovery from checkpoint`): the previous
    /// run did not shut down cleanly (a crash or `kill -9`).
    CrashRecovery,
    /// A long latch or semaphore wait: `Long wait (N seconds) for …`, `A long wait (N seconds)
    /// was observed for …`, 10.5's `A long semaphore wait`, or the fatal threshold.
    LongWait { seconds: Option<u64>, what: String },
    /// `page_cleaner: 1000ms intended loop took N ms` (10.4 and older).
    PageCleanerLag { ms: Option<u64> },
    /// `The age of the last checkpoint is N, which exceeds the log capacity M`: redo log too
    /// small for the write rate, or flushing behind.
    CheckpointAge,
    /// `Aborted connection … (Too many connections)`.
    TooManyConnections,
    /// Any other `Aborted connection` (the reason in the line).
    AbortedConnection,
    /// InnoDB's CRC-32 implementation at start-up (`Using crc32 + pclmulqdq instructions`).
    Crc32 { implementation: String },
    /// `Transactions deadlock detected` (with `innodb_print_all_deadlocks`).
    Deadlock,
}

impl LogEventKind {
    /// A short name (metric label, summaries).
    pub fn name(&self) -> &'static str {
        match self {
            LogEventKind::Starting => "starting",
            LogEventKind::Ready => "ready",
            LogEventKind::Shutdown => "shutdown",
            LogEventKind::ShutdownComplete => "shutdown_complete",
            LogEventKind::Crash { .. } => "crash",
            LogEventKind::CrashRecovery => "crash_recovery",
            LogEventKind::LongWait { .. } => "long_wait",
            LogEventKind::PageCleanerLag { .. } => "page_cleaner_lag",
            LogEventKind::CheckpointAge => "checkpoint_age",
            LogEventKind::TooManyConnections => "too_many_connections",
            LogEventKind::AbortedConnection => "aborted_connection",
            LogEventKind::Crc32 { .. } => "crc32",
            LogEventKind::Deadlock => "deadlock",
        }
    }
}

pub(crate) fn error_log_not_recorded() -> Gathered<ErrorLog> {
    Gathered::Unavailable("not recorded (a snapshot from an older powerdiag)".into())
}
