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
//! PD222 judges the lag's trend, so each read carries the earlier ones: the agent keeps the
//! connections' lag and applied position from its previous samples (at most
//! [`LAG_HISTORY_READINGS`] over [`LAG_HISTORY_SECONDS`]; a restart of the agent loses them);
//! doctor with a sample window reads the replica once more as the window opens. When a
//! connection is behind and its SQL thread is inside a row event or waits for a lock, one
//! bounded `SHOW RELAYLOG EVENTS` names the tables of the transaction it applies.
//!
//! Privilege: `REPLICA MONITOR` (10.5.9+; `SUPER` or `REPLICATION CLIENT` on older servers),
//! for both statements. Without it the facts are unavailable with the `GRANT` to run, and the
//! run succeeds; the agent asks again only after a `GRANT` or `REVOKE`
//! ([`server::GRANT_CHANGES`](super::server::GRANT_CHANGES): the agent then also connects
//! again, as a session keeps the privileges of its login) or a restart, not every sample.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mysql_async::Row;
use powerdiag_rules::{
    APPLYING_EVENTS, DbErrorKind, Gathered, LAG_HISTORY_READINGS, LAG_HISTORY_SECONDS, LagPoint,
    LagReading, LockKind, MariadbFacts, REPLICA_ERROR_CHARS, ReplicaConnection, ReplicaScan,
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
        relay_position: position("Relay_Log_File", "Relay_Log_Pos"),
        applying_tables: Vec::new(),
    }
}

/// Whether to read the relay log for the tables `c` applies: behind, and inside a row event
/// or waiting for a lock (a transaction held up on the replica).
fn worth_peeking(c: &ReplicaConnection) -> bool {
    c.sql_ok()
        && c.seconds_behind_master.unwrap_or(0) > 0
        && (c.in_row_event() || LockKind::of_state(&c.sql_state).is_some())
        && c.relay_position.contains(':')
}

/// A string in single quotes for a statement.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `SHOW RELAYLOG ['name'] EVENTS IN 'file' FROM pos LIMIT n` at the SQL thread's transaction.
pub(crate) fn relaylog_sql(c: &ReplicaConnection) -> Option<String> {
    let (file, pos) = c.relay_position.rsplit_once(':')?;
    let pos: u64 = pos.parse().ok()?;
    let name = if c.name.is_empty() {
        String::new()
    } else {
        format!(" {}", sql_string(&c.name))
    };
    Some(format!(
        "SHOW RELAYLOG{name} EVENTS IN {} FROM {pos} LIMIT {APPLYING_EVENTS}",
        sql_string(file)
    ))
}

/// The tables of the first transaction in `SHOW RELAYLOG EVENTS` rows: each `Table_map`
/// event's `table_id: 19 (shop.orders)`, until the next transaction's `Gtid` event.
pub(crate) fn applying_tables(rows: &[NamedRow]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut gtids = 0;
    for row in rows {
        let get = |name: &str| {
            row.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.as_deref())
        };
        match get("Event_type") {
            Some("Gtid") => {
                gtids += 1;
                if gtids > 1 {
                    break;
                }
            }
            Some("Table_map") => {
                let table = get("Info")
                    .and_then(|i| i.split_once(" ("))
                    .and_then(|(_, t)| t.strip_suffix(')'));
                if let Some(t) = table
                    && !out.iter().any(|o| o == t)
                {
                    out.push(t.chars().take(200).collect());
                }
            }
            _ => {}
        }
    }
    out
}

/// What the agent keeps: the status mark of a read that found no connection, that of a read
/// refused for a missing privilege (with what it said), and the connections' recent readings
/// for PD222.
#[derive(Debug, Clone, Default)]
pub struct ReplicationCache {
    not_replica_at: Arc<Mutex<Option<ChangeMark>>>,
    denied_at: Arc<Mutex<Option<(ChangeMark, String)>>>,
    readings: Arc<Mutex<VecDeque<Reading>>>,
}

/// One kept read: when, and each connection's lag and position.
type Reading = (Instant, Vec<LagPoint>);

impl ReplicationCache {
    /// The readings kept, as seconds before `now`, oldest first; then `now`'s connections
    /// added (none: the history is dropped).
    fn record(&self, now: Instant, connections: &[ReplicaConnection]) -> Vec<LagReading> {
        let Ok(mut kept) = self.readings.lock() else {
            return Vec::new();
        };
        kept.retain(|(at, _)| now.duration_since(*at).as_secs_f64() <= LAG_HISTORY_SECONDS);
        let earlier = kept
            .iter()
            .map(|(at, connections)| LagReading {
                seconds_before: now.duration_since(*at).as_secs_f64(),
                connections: connections.clone(),
            })
            .collect();
        if connections.is_empty() {
            kept.clear();
        } else {
            if kept.len() >= LAG_HISTORY_READINGS {
                kept.pop_front();
            }
            kept.push_back((now, connections.iter().map(LagPoint::of).collect()));
        }
        earlier
    }
}

/// Doctor with a sample window: the connections as the window opens, kept in `cache` for the
/// read at its end (a server that is no replica answers with no row; errors are left to that
/// read). One statement.
pub(crate) async fn read_at_window_start(
    s: &mut super::session::Session,
    cache: &ReplicationCache,
) {
    if let Ok(rows) = s.query(STATUS_SQL).await {
        let connections = parse_status(&named(&rows));
        if !connections.is_empty() {
            cache.record(Instant::now(), &connections);
        }
    }
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
                    earlier: Vec::new(),
                });
                return Ok(());
            }
            let grants = ChangeMark::of(&ctx.facts.status, &super::server::GRANT_CHANGES);
            let denied = self.cache.and_then(|c| c.denied_at.lock().ok()?.clone());
            if let (Some((then, why)), Some(now)) = (denied, &grants)
                && then.unchanged_at(now)
            {
                ctx.facts.replication = Gathered::Unavailable(why);
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
            let refused = matches!(&rows, Err(e) if e.kind == DbErrorKind::MissingPrivilege);
            let (facts, failed) = match rows {
                Ok(rows) => {
                    let now = Instant::now();
                    let mut connections = parse_status(&named(&rows));
                    for c in connections.iter_mut().filter(|c| worth_peeking(c)) {
                        // Best effort: without it PD222 names no table.
                        if let Some(sql) = relaylog_sql(c)
                            && let Ok(events) = ctx.s.query(&sql).await
                        {
                            c.applying_tables = applying_tables(&named(&events));
                        }
                    }
                    let mut earlier = Vec::new();
                    if let Some(c) = self.cache {
                        if let Ok(mut k) = c.not_replica_at.lock() {
                            *k = if connections.is_empty() { mark } else { None };
                        }
                        earlier = c.record(now, &connections);
                    }
                    (
                        Gathered::Available(Replication {
                            scan: ReplicaScan::Read,
                            connections,
                            earlier,
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
            if let (Some(c), Gathered::Unavailable(why)) = (self.cache, &facts)
                && refused
                && let Ok(mut d) = c.denied_at.lock()
            {
                *d = grants.map(|m| (m, why.clone()));
            } else if let Some(Ok(mut d)) = self.cache.map(|c| c.denied_at.lock()) {
                *d = None;
            }
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

    /// `SHOW RELAYLOG EVENTS` as 11.8.9 answers at a row event without a key: the
    /// transaction's tables, up to the next transaction.
    #[test]
    fn the_tables_of_the_transaction_being_applied() {
        let ev = |t: &str, info: &str| row(&[("Event_type", Some(t)), ("Info", Some(info))]);
        let rows = vec![
            ev("Gtid", "BEGIN GTID 0-1-11"),
            ev("Annotate_rows", "UPDATE nopk SET b = b + 1"),
            ev("Table_map", "table_id: 19 (lagt.nopk)"),
            ev("Update_rows_v1", "table_id: 19"),
            ev("Table_map", "table_id: 20 (lagt.pk)"),
            ev("Table_map", "table_id: 19 (lagt.nopk)"),
            ev("Gtid", "BEGIN GTID 0-1-12"),
            ev("Table_map", "table_id: 21 (other.t)"),
        ];
        assert_eq!(applying_tables(&rows), ["lagt.nopk", "lagt.pk"]);
        let mut c = parse_status(&[row(&[
            ("Connection_name", Some("it's")),
            ("Relay_Log_File", Some("relay-bin-it's.000002")),
            ("Relay_Log_Pos", Some("362861")),
            ("Slave_SQL_Running", Some("Yes")),
            ("Seconds_Behind_Master", Some("12")),
            (
                "Slave_SQL_Running_State",
                Some("Update_rows_log_event::find_row()"),
            ),
        ])])
        .remove(0);
        assert!(worth_peeking(&c));
        assert_eq!(
            relaylog_sql(&c).unwrap(),
            "SHOW RELAYLOG 'it''s' EVENTS IN 'relay-bin-it''s.000002' FROM 362861 LIMIT 8"
        );
        c.seconds_behind_master = Some(0);
        assert!(!worth_peeking(&c), "not behind: nothing to name");
    }

    /// The agent's readings: oldest first, as seconds before the read; none kept once the
    /// server is no replica.
    #[test]
    fn readings_are_kept_for_the_trend_and_dropped_with_the_connections() {
        let cache = ReplicationCache::default();
        let t0 = Instant::now();
        let mut c = parse_status(&[row(&[("Seconds_Behind_Master", Some("40"))])]);
        assert!(cache.record(t0, &c).is_empty());
        c[0].seconds_behind_master = Some(45);
        let earlier = cache.record(t0 + std::time::Duration::from_secs(5), &c);
        assert_eq!(earlier.len(), 1);
        assert_eq!(earlier[0].seconds_before, 5.0);
        assert_eq!(earlier[0].connections[0].seconds_behind_master, Some(40));
        assert_eq!(
            cache
                .record(t0 + std::time::Duration::from_secs(10), &[])
                .len(),
            2
        );
        assert!(
            cache
                .record(t0 + std::time::Duration::from_secs(15), &c)
                .is_empty()
        );
    }
}
