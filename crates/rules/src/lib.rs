//! powerdiag's judgement: a versioned [`Snapshot`] of facts goes in, one [`Check`] per rule
//! comes out.
//!
//! This crate does no I/O, spawns nothing, reads no clock and has no `unsafe`: everything it
//! knows arrives in the [`Snapshot`], which the collectors in `powerdiag-agent` fill. Evaluation
//! cannot fail: a fact that could not be collected becomes an `insufficient_data` verdict that
//! names the fact and the collector's reason.
#![forbid(unsafe_code)]

mod basis;
mod counters;
mod diff;
mod errorlog;
mod escape;
mod innodb;
mod locks;
mod os;
pub mod plan;
#[cfg(test)]
mod props;
mod read;
mod releases;
mod replication;
mod report;
mod rule;
pub mod rules;
mod schema;
mod settings;
mod snapshot;
mod statements;
pub mod stats;
pub mod testing;
mod threshold;
mod value;
mod var;
mod version;

pub use basis::{Basis, WindowSource};
pub use counters::{Counts, Evidence, StatusWindow, WindowStart};
pub use diff::{
    Comparability, Diff, Difference, Side, StatementChange, StatementSide, StatementsDiff, diff,
};
pub use errorlog::{ErrorLog, LogEvent, LogEventKind, MAX_EVENTS as MAX_LOG_EVENTS};
pub use escape::{display_text, escape_lines, escape_text, is_unsafe_char};
pub use innodb::{InnodbSize, OpenTransaction, Transactions};
pub use locks::{
    Deadlock, DeadlockTransaction, LockKind, LockScan, LockSession, LockWait, Locks,
    MetadataSource, Root, SCAN_THREADS_RUNNING, STATEMENT_CHARS, SessionTransaction,
    mask_statement,
};
pub use os::*;
pub use plan::{Plan, PlanTable, StatementSample};
pub use read::{MAX_SNAPSHOT_BYTES, SnapshotError, read_snapshot, snapshot_schema};
pub use replication::{
    APPLYING_EVENTS, ERROR_CHARS as REPLICA_ERROR_CHARS, LAG_HISTORY_READINGS, LAG_HISTORY_SECONDS,
    LagPoint, LagReading, ReplicaConnection, ReplicaScan, Replication,
};
pub use report::{Check, Report, evaluate, evaluate_with};
pub use rule::{
    Declared, Impact, PLATFORM_HEADINGS, Platform, Rule, RuleMeta, Scope, Severity, Status, Verdict,
};
pub use rules::{RULES, find_rule};
pub use schema::{
    Index, IndexColumn, SHOWN, SYSTEM_SCHEMAS, Schema, Table, ddl_line, quote_ident, shown,
};
pub use settings::{Settings, SettingsError};
pub use snapshot::*;
pub use statements::{
    Digest, DigestCounters, DigestHistory, HISTORY_DIGESTS_MAX, HISTORY_POINTS_MAX, IntervalPoint,
    StatementKind, StatementPeriod, StatementTotals, Statements, format_us, short_digest,
};
pub use threshold::{Limits, Threshold, Unit};
pub use value::{format_bytes, format_secs, format_unix_utc, parse_bool, parse_u64};
pub use var::{StatusVar, Var};
pub use version::{Flavour, ServerVersion};
