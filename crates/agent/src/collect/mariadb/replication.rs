//! This server as a replica (PD221): `SHOW ALL REPLICAS STATUS`, one row per replication
//! connection (multi-source: one per source), parsed by column name — 10.11 and 11.8 differ in
//! their last columns (`Master_last_event_time`, `Slave_last_event_time` and
//! `Master_Slave_time_diff` arrived in 11.6).
//!
//! Zero statements on a standalone server: the agent keeps "no connection" with the status
//! read's [`ChangeMark`] over [`REPLICATION_CHANGES`] and sends the statement again only when
//! one of those counters moved (`CHANGE MASTER`, `START REPLICA`, `START ALL REPLICAS`) or the
//! server restarted (a replica configured in `master.info` starts its threads at start-up). A
//! replica is read every sample. Doctor reads it once.
//!
//! Privilege: `REPLICA MONITOR` (10.5.9+; `SUPER` or `REPLICATION CLIENT` on older servers).
//! Without it the facts are unavailable with the `GRANT` to run, and the run succeeds.

use std::sync::{Arc, Mutex};

use mysql_async::Row;
use powerdiag_rules::{
    DbErrorKind, Gathered, MariadbFacts, REPLICA_ERROR_CHARS, ReplicaConnection, ReplicaScan,
    Replication, StatusVar,
};

use super::part::{Ctx, Part, PartFuture};
use super::server::ChangeMark;
use super::session::col;
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// The statement (MariaDB 10.5.1+), and the older spelling for servers that lack it.
pub(crate) const STATUS_SQL: &str = "SHOW ALL REPLICAS STATUS";
const OLD_STATUS_SQL: &str = "SHOW ALL SLAVES STATUS";

/// What moves when replication may have been configured or started on this server.
pub(crate) const REPLICATION_CHANGES: [StatusVar; 3] = [
    StatusVar::ComChangeMaster,
    StatusVar::ComStartSlave,
    StatusVar::ComStartAllSlaves,
];

/// One result row by column name (the names as the server sends them).
pub(crate) type NamedRow = Vec<(String, Option<String>)>;

fn named(rows: &[Row]) -> Vec<NamedRow> {
    rows.iter()
        .map(|r| {
            r.columns_ref()
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name_str().into_owned(), col(r, i)))
                .collect()
        })
        .collect()
}

/// The connections in `SHOW ALL REPLICAS STATUS` rows.
pub(crate) fn parse_status(rows: &[NamedRow]) -> Vec<ReplicaConnection> {
    rows.iter().map(parse_row).collect()
}

fn parse_row(row: &NamedRow) -> ReplicaConnection {
    let get = |name: &str| -> Option<String> {
        row.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.clone())
    };
    let text = |name: &str| get(name).unwrap_or_default();
    let num = |name: &str| get(name).and_then(|v| v.trim().parse::<u64>().ok());
    let cut = |s: String| -> String {
        match s.char_indices().nth(REPLICA_ERROR_CHARS) {
            Some((i, _)) => s[..i].to_owned(),
            None => s,
        }
    };
    let position = |file: &str, pos: &str| match (get(file), get(pos)) {
        (Some(f), Some(p)) if !f.is_empty() => format!("{f}:{p}"),
        _ => String::new(),
    };
    ReplicaConnection {
        name: text("Connection_name"),
        source: match (get("Master_Host"), get("Master_Port")) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h,
            _ => String::new(),
        },
        io_running: text("Slave_IO_Running"),
        sql_running: text("Slave_SQL_Running"),
        io_state: text("Slave_IO_State"),
        sql_state: text("Slave_SQL_Running_State"),
        seconds_behind_master: num("Seconds_Behind_Master"),
        last_io_errno: num("Last_IO_Errno").unwrap_or(0) as u32,
        last_io_error: cut(text("Last_IO_Error")),
        last_sql_errno: num("Last_SQL_Errno").unwrap_or(0) as u32,
        last_sql_error: cut(text("Last_SQL_Error")),
        using_gtid: text("Using_Gtid"),
        gtid_io_pos: text("Gtid_IO_Pos"),
        gtid_slave_pos: text("Gtid_Slave_Pos"),
        read_position: position("Master_Log_File", "Read_Master_Log_Pos"),
        exec_position: position("Relay_Master_Log_File", "Exec_Master_Log_Pos"),
        relay_log_space: num("Relay_Log_Space"),
        parallel_mode: get("Parallel_Mode"),
        sql_delay: num("SQL_Delay"),
        retried_transactions: num("Retried_transactions"),
        master_last_event_time: get("Master_last_event_time"),
        slave_last_event_time: get("Slave_last_event_time"),
        master_slave_time_diff: get("Master_Slave_time_diff")
            .and_then(|v| v.trim().parse::<i64>().ok()),
    }
}

/// What the agent keeps: the status mark of a read that found no connection.
#[derive(Debug, Clone, Default)]
pub struct ReplicationCache {
    not_replica_at: Arc<Mutex<Option<ChangeMark>>>,
}

/// The `mariadb_replication` collector.
pub(super) struct ReplicationPart<'o> {
    /// The agent's cache; `None` always reads (doctor).
    pub(super) cache: Option<&'o ReplicationCache>,
}

pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_replication",
    help: "this server's replication connections (SHOW ALL REPLICAS STATUS), read on a replica; a standalone server is read once, then again only after CHANGE MASTER, START REPLICA or a restart",
    default_enabled: true,
    requires: Requires::Nothing,
};

impl Part for ReplicationPart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut MariadbFacts, why: String) {
        facts.replication = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let mark = ChangeMark::of(&ctx.facts.status, &REPLICATION_CHANGES);
            let kept = self
                .cache
                .and_then(|c| c.not_replica_at.lock().ok()?.clone());
            if let (Some(then), Some(now)) = (&kept, &mark)
                && then.unchanged_at(now)
            {
                ctx.facts.replication = Gathered::Available(Replication {
                    scan: ReplicaScan::Kept,
                    connections: Vec::new(),
                });
                return Ok(());
            }
            let mut rows = ctx.s.query(STATUS_SQL).await;
            if let Err(e) = &rows
                && e.kind == DbErrorKind::Other
                && e.message.contains("ERROR 1064 ")
            {
                rows = ctx.s.query(OLD_STATUS_SQL).await;
            }
            let account = ctx.s.account().to_owned();
            let (facts, failed) = match rows {
                Ok(rows) => {
                    let connections = parse_status(&named(&rows));
                    if let Some(c) = self.cache
                        && let Ok(mut k) = c.not_replica_at.lock()
                    {
                        *k = if connections.is_empty() { mark } else { None };
                    }
                    (
                        Gathered::Available(Replication {
                            scan: ReplicaScan::Read,
                            connections,
                        }),
                        None,
                    )
                }
                Err(e) if e.kind == DbErrorKind::MissingPrivilege => (
                    Gathered::Unavailable(format!(
                        "{} (GRANT REPLICA MONITOR ON *.* TO {account}; SUPER or REPLICATION CLIENT before 10.5.9)",
                        e.message
                    )),
                    None,
                ),
                Err(e) => (
                    Gathered::Unavailable(format!("{STATUS_SQL}: {}", e.message)),
                    Some(format!("{STATUS_SQL}: {}", e.message)),
                ),
            };
            ctx.facts.replication = facts;
            CollectError::failed_statements(failed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, Option<&str>)]) -> NamedRow {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_owned)))
            .collect()
    }

    /// Columns as MariaDB 10.11.14 sends them for a stopped SQL thread (a duplicate key),
    /// without the 11.6+ event-time columns.
    #[test]
    fn a_1011_row_with_a_duplicate_key_error() {
        let r = row(&[
            ("Connection_name", Some("")),
            ("Slave_SQL_State", Some("")),
            ("Slave_IO_State", Some("Waiting for master to send event")),
            ("Master_Host", Some("127.0.0.1")),
            ("Master_Port", Some("33110")),
            ("Master_Log_File", Some("mariadb-bin.000001")),
            ("Read_Master_Log_Pos", Some("2071")),
            ("Relay_Master_Log_File", Some("mariadb-bin.000001")),
            ("Slave_IO_Running", Some("Yes")),
            ("Slave_SQL_Running", Some("No")),
            ("Last_SQL_Errno", Some("1062")),
            (
                "Last_SQL_Error",
                Some(
                    "Could not execute Write_rows_v1 event on table t.x; Duplicate entry '1' for key 'PRIMARY', Error_code: 1062; handler error HA_ERR_FOUND_DUPP_KEY; the event's master log mariadb-bin.000001, end_log_pos 2040, Gtid 0-1-6, Internal MariaDB error code: 1062",
                ),
            ),
            ("Exec_Master_Log_Pos", Some("1790")),
            ("Seconds_Behind_Master", None),
            ("Using_Gtid", Some("Slave_Pos")),
            ("Gtid_IO_Pos", Some("0-1-6")),
            ("Parallel_Mode", Some("optimistic")),
            ("Gtid_Slave_Pos", Some("0-1-5")),
        ]);
        let c = &parse_status(&[r])[0];
        assert_eq!(c.name, "");
        assert_eq!(c.source, "127.0.0.1:33110");
        assert!(c.io_ok() && !c.sql_ok());
        assert_eq!(c.seconds_behind_master, None);
        assert_eq!(c.last_sql_errno, 1062);
        assert_eq!(c.read_position, "mariadb-bin.000001:2071");
        assert_eq!(c.exec_position, "mariadb-bin.000001:1790");
        assert_eq!(
            (c.gtid_io_pos.as_str(), c.gtid_slave_pos.as_str()),
            ("0-1-6", "0-1-5")
        );
        assert_eq!(c.master_slave_time_diff, None);
    }

    #[test]
    fn an_118_row_names_its_connection_and_event_times_and_long_errors_are_cut() {
        let long = "x".repeat(5000);
        let r = row(&[
            ("Connection_name", Some("eu")),
            ("Master_Host", Some("db1")),
            ("Master_Port", Some("3306")),
            ("Slave_IO_Running", Some("Connecting")),
            ("Slave_SQL_Running", Some("Yes")),
            ("Last_IO_Errno", Some("2003")),
            ("Last_IO_Error", Some(long.as_str())),
            ("Seconds_Behind_Master", Some("12")),
            ("Master_last_event_time", Some("2026-11-28 04:02:10")),
            ("Slave_last_event_time", Some("2026-11-28 04:02:09")),
            ("Master_Slave_time_diff", Some("1")),
        ]);
        let c = &parse_status(&[r])[0];
        assert_eq!(c.name, "eu");
        assert_eq!(c.seconds_behind_master, Some(12));
        assert_eq!(c.last_io_error.chars().count(), REPLICA_ERROR_CHARS);
        assert_eq!(c.master_slave_time_diff, Some(1));
        assert_eq!(c.read_position, "");
    }
}
