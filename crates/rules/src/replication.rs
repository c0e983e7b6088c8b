//! This server as a replica: every replication connection `SHOW ALL REPLICAS STATUS` lists
//! (PD221–PD222, the report's "Replication" section).
//!
//! The collector sends that statement only on a server that is a replica: doctor once, the
//! agent at its first sample and again after a restart or after a statement that configures
//! or starts replication moved its status counter (`Com_change_master`, `Com_start_slave`,
//! `Com_start_all_slaves`); a standalone server pays no statement per sample
//! ([`ReplicaScan::Kept`] says the list is an earlier read's). Error texts are the server's,
//! cut to [`ERROR_CHARS`]; a report escapes them.

use serde::{Deserialize, Serialize};

use crate::{Gathered, MariadbFacts, Verdict};

/// Characters kept of a connection's last IO or SQL error.
pub const ERROR_CHARS: usize = 1024;

/// The replication connections of this server (none: not a replica).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replication {
    /// Whether the list was read at this collection.
    pub scan: ReplicaScan,
    /// One per connection (multi-source: each `CONNECTION_NAME`; the default one is `""`).
    pub connections: Vec<ReplicaConnection>,
    /// Earlier readings of the same connections, oldest first: the agent's previous samples
    /// (up to [`LAG_HISTORY_SECONDS`] back, at most [`LAG_HISTORY_READINGS`]) or doctor's read
    /// at the start of its window. PD222 judges whether the lag shrinks from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<LagReading>,
}

/// How far back the agent keeps replication readings (the verdict policy's longest window).
pub const LAG_HISTORY_SECONDS: f64 = 3600.0;
/// The most readings the agent keeps (an hour of 15-second samples).
pub const LAG_HISTORY_READINGS: usize = 240;

/// One earlier read of the replication connections: what PD222 needs of each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LagReading {
    /// Seconds before this collection's read.
    pub seconds_before: f64,
    pub connections: Vec<LagPoint>,
}

/// One connection at an earlier read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LagPoint {
    /// `Connection_name`.
    pub name: String,
    /// `Seconds_Behind_Master`.
    pub seconds_behind_master: Option<u64>,
    /// `Relay_Master_Log_File:Exec_Master_Log_Pos`: whether the SQL thread moved since.
    pub exec_position: String,
}

impl LagPoint {
    pub fn of(c: &ReplicaConnection) -> LagPoint {
        LagPoint {
            name: c.name.clone(),
            seconds_behind_master: c.seconds_behind_master,
            exec_position: c.exec_position.clone(),
        }
    }
}

/// Whether the connections were read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ReplicaScan {
    /// Read at this collection.
    #[default]
    Read,
    /// Not read: an earlier read of this server run found no connection, and no statement
    /// that configures or starts replication has run since.
    Kept,
}

/// One replication connection, as `SHOW ALL REPLICAS STATUS` reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaConnection {
    /// `Connection_name` (`""` for the default connection).
    pub name: String,
    /// `Master_Host:Master_Port`.
    pub source: String,
    /// `Slave_IO_Running`: `Yes`, `No`, `Connecting` or `Preparing`.
    pub io_running: String,
    /// `Slave_SQL_Running`: `Yes` or `No`.
    pub sql_running: String,
    /// `Slave_IO_State`.
    pub io_state: String,
    /// `Slave_SQL_Running_State`.
    pub sql_state: String,
    /// `Seconds_Behind_Master` (NULL when the SQL thread does not run).
    pub seconds_behind_master: Option<u64>,
    pub last_io_errno: u32,
    pub last_io_error: String,
    pub last_sql_errno: u32,
    pub last_sql_error: String,
    /// `Using_Gtid`: `No`, `Slave_Pos` or `Current_Pos`.
    pub using_gtid: String,
    /// `Gtid_IO_Pos`: the last GTID received.
    pub gtid_io_pos: String,
    /// `Gtid_Slave_Pos`: the last GTID applied (all connections).
    pub gtid_slave_pos: String,
    /// `Master_Log_File` and `Read_Master_Log_Pos`: how far the IO thread has read.
    pub read_position: String,
    /// `Relay_Master_Log_File` and `Exec_Master_Log_Pos`: how far the SQL thread has applied.
    pub exec_position: String,
    /// `Relay_Log_Space`, bytes.
    pub relay_log_space: Option<u64>,
    /// `Parallel_Mode`.
    pub parallel_mode: Option<String>,
    /// `SQL_Delay`, seconds (a delayed replica lags by design).
    pub sql_delay: Option<u64>,
    /// `Retried_transactions`.
    pub retried_transactions: Option<u64>,
    /// `Master_last_event_time`, `Slave_last_event_time` and `Master_Slave_time_diff` (11.6+).
    pub master_last_event_time: Option<String>,
    pub slave_last_event_time: Option<String>,
    pub master_slave_time_diff: Option<i64>,
    /// `Relay_Log_File:Relay_Log_Pos`: where in the relay log the SQL thread's transaction
    /// starts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub relay_position: String,
    /// The tables (`schema.table` as the `Table_map` events spell them) of the transaction the
    /// SQL thread is applying, read from the relay log (`SHOW RELAYLOG EVENTS … LIMIT`
    /// [`APPLYING_EVENTS`]) when the replica is behind and its SQL thread is inside a row
    /// event or waits for a lock; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applying_tables: Vec<String>,
}

/// Relay-log events read to name the tables of the transaction being applied.
pub const APPLYING_EVENTS: u32 = 8;

impl ReplicaConnection {
    /// How a report and a statement name it: `'name'`, or "the default connection".
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            "the default connection".to_owned()
        } else {
            format!("connection '{}'", crate::display_text(&self.name, 64))
        }
    }

    /// The `START REPLICA` (or other) statement's connection-name part: ` 'name'` or nothing.
    pub fn sql_name(&self) -> String {
        if self.name.is_empty() {
            String::new()
        } else {
            format!(" '{}'", self.name.replace('\\', "\\\\").replace('\'', "''"))
        }
    }

    pub fn io_ok(&self) -> bool {
        self.io_running.eq_ignore_ascii_case("yes")
    }

    pub fn sql_ok(&self) -> bool {
        self.sql_running.eq_ignore_ascii_case("yes")
    }

    /// The lag the replica is not meant to have: `Seconds_Behind_Master` less `SQL_Delay`
    /// (a delayed replica lags by design); `None` when the server reports none.
    pub fn lag(&self) -> Option<u64> {
        self.seconds_behind_master
            .map(|s| s.saturating_sub(self.sql_delay.unwrap_or(0)))
    }

    /// The SQL thread is inside a row event (`Update_rows_log_event::find_row()`, …): each
    /// row of it is looked up on the replica.
    pub fn in_row_event(&self) -> bool {
        self.sql_state.contains("_rows_log_event::")
    }

    /// The IO thread runs: `Yes`, or (re)connecting without an error (PD221's reading).
    pub fn io_runs(&self) -> bool {
        self.io_ok()
            || (self.io_running.eq_ignore_ascii_case("connecting") && self.last_io_errno == 0)
    }
}

/// A position or GTID for a finding: `(none)` when the server left it empty.
pub(crate) fn or_none(s: &str) -> String {
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        crate::display_text(s, 200)
    }
}

pub(crate) fn replication_not_recorded() -> Gathered<Replication> {
    Gathered::Unavailable("not recorded: the snapshot predates replication reads".into())
}

impl MariadbFacts {
    /// The replication connections, or the `insufficient_data` verdict naming why they are
    /// missing.
    pub fn replication(&self) -> Result<&Replication, Verdict> {
        match &self.replication {
            Gathered::Available(r) => Ok(r),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "the replication connections unavailable: {why}"
            ))),
        }
    }
}
