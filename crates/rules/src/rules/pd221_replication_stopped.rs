use crate::replication::or_none;
use crate::{Limits, ReplicaConnection, Rule, Snapshot, Verdict, declare_rule, display_text};

declare_rule! {
    /// ### What it does
    /// On a replica, checks that every replication connection `SHOW ALL REPLICAS STATUS` lists
    /// (each source of a multi-source replica) has both threads running: the IO thread that
    /// receives the primary's binary log (`Slave_IO_Running = Yes`) and the SQL thread that
    /// applies it (`Slave_SQL_Running = Yes`). An IO thread still `Connecting` fails only with
    /// an error (`Last_IO_Errno`): without one it is (re)connecting after a start. The evidence
    /// is the server's own last error, the GTID positions received and applied, and the
    /// position in the primary's binary log each thread reached. The mysqld mixin's
    /// `MySQLReplicationNotRunning` alert fires on the same condition; this verdict adds the
    /// error and the next step. Not applicable on a server that is not a replica.
    ///
    /// ### Why is this bad?
    /// A stopped replica does not copy anything: every read it serves grows staler, a failover
    /// to it loses every transaction since it stopped, and the primary keeps the binary logs
    /// it still needs until they are purged — after which the replica must be rebuilt. A
    /// duplicate-key (1062) or row-not-found (1032) error means the replica's data already
    /// differs from the primary's; skipping the event blindly (`sql_slave_skip_counter`) makes
    /// the difference permanent and silent.
    ///
    /// ### Remediation
    /// - Stopped without an error (`STOP REPLICA` for maintenance): `START REPLICA` (with the
    ///   connection's name on a multi-source replica: `START REPLICA 'name'`).
    /// - SQL error 1062 or 1032: the error names the table and key. Compare the row on both
    ///   servers; make the replica's row what the primary's was before the event (with
    ///   `SET SESSION sql_log_bin = 0` if the replica has replicas of its own), then `START
    ///   REPLICA`. Skip the event only after that check, and only that event: with GTID,
    ///   `STOP REPLICA; SET GLOBAL gtid_slave_pos = '<the failed GTID>'; START REPLICA;` (the
    ///   error text names the GTID); never `sql_slave_skip_counter` without knowing what it
    ///   skips. Then find how the replica was written to (`read_only = ON` on replicas).
    /// - IO error 1236 (the binary log the replica needs was purged): the replica cannot catch
    ///   up; rebuild it from a backup of the primary (`mariadb-backup`).
    /// - IO error 1045 or 2003 (authentication, network): fix the replication account or the
    ///   route, `CHANGE MASTER TO master_password = …` if the password changed; the IO thread
    ///   retries by itself every `Connect_Retry` seconds.
    pub struct ReplicationStopped {
        code: "PD221",
        name: "replication-stopped",
        severity: Critical,
        scope: Database,
        summary: "a replication thread is not running",
        fails_when: "a replication connection's IO or SQL thread is not running (`Slave_IO_Running`/`Slave_SQL_Running` not `Yes`; `Connecting` only with an error) — the mysqld mixin's MySQLReplicationNotRunning",
        severity_why: "critical: the replica stops copying now, and a failover to it loses every transaction since",
    }
}

/// Characters of a server error shown in the summary (the evidence has all of it).
const SUMMARY_ERROR_CHARS: usize = 160;

/// Why a connection counts as stopped, or `None` when it runs.
fn stopped(c: &ReplicaConnection) -> Option<String> {
    match (!c.io_runs(), c.sql_ok()) {
        (false, true) => None,
        (true, true) => Some(format!("the IO thread is {}", display_text(&c.io_running, 20))),
        (false, false) => Some("the SQL thread is stopped".to_owned()),
        (true, false) => Some("both threads are stopped".to_owned()),
    }
}

fn evidence(c: &ReplicaConnection) -> Vec<String> {
    let mut out = vec![format!(
        "{} from {}: Slave_IO_Running {}, Slave_SQL_Running {}",
        c.label(),
        display_text(&c.source, 120),
        display_text(&c.io_running, 20),
        display_text(&c.sql_running, 20)
    )];
    if c.last_sql_errno != 0 {
        out.push(format!(
            "  Last_SQL_Errno {}: {}",
            c.last_sql_errno,
            display_text(&c.last_sql_error, crate::REPLICA_ERROR_CHARS)
        ));
    }
    if c.last_io_errno != 0 {
        out.push(format!(
            "  Last_IO_Errno {}: {}",
            c.last_io_errno,
            display_text(&c.last_io_error, crate::REPLICA_ERROR_CHARS)
        ));
    }
    out.push(format!(
        "  Using_Gtid {}, received (Gtid_IO_Pos) {}, applied (Gtid_Slave_Pos) {}",
        display_text(&c.using_gtid, 20),
        or_none(&c.gtid_io_pos),
        or_none(&c.gtid_slave_pos)
    ));
    out.push(format!(
        "  primary's binary log read to {}, applied to {}",
        or_none(&c.read_position),
        or_none(&c.exec_position)
    ));
    if !c.sql_state.is_empty() {
        out.push(format!(
            "  Slave_SQL_Running_State: {}",
            display_text(&c.sql_state, 160)
        ));
    }
    out
}


/// The GTID an SQL error names ("…, Gtid 0-1-6, Internal MariaDB error code: 1062").
fn failed_gtid(error: &str) -> Option<&str> {
    let at = error.find("Gtid ")? + "Gtid ".len();
    let gtid = error[at..].split([',', ' ', ';']).next()?;
    let mut parts = gtid.split('-');
    let ok = parts.clone().count() == 3 && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some(gtid)
}

/// The applier's position in the primary's binary log (`Relay_Master_Log_File:Exec_Master_Log_Pos`)
/// as a file name safe in a SQL string and a number.
fn exec_at(position: &str) -> Option<(String, u64)> {
    let (file, pos) = position.rsplit_once(':')?;
    let pos = pos.parse().ok()?;
    let safe = !file.is_empty()
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    safe.then(|| (file.to_owned(), pos))
}

/// The next step for one stopped connection, from its errors.
fn remedy(c: &ReplicaConnection) -> String {
    let name = c.sql_name();
    let who = c.label();
    if c.last_sql_errno == 1062 || c.last_sql_errno == 1032 {
        let what = if c.last_sql_errno == 1062 {
            "the row the event inserts already exists on the replica"
        } else {
            "the row the event changes does not exist on the replica"
        };
        let gtid = !c.using_gtid.eq_ignore_ascii_case("no") && !c.using_gtid.is_empty();
        let keep = "(on a server with several replication domains, keep the other domains' positions from `SELECT @@gtid_slave_pos` in that list)";
        let skip = match (failed_gtid(&c.last_sql_error), exec_at(&c.exec_position)) {
            (Some(g), _) if gtid => format!(
                "Only if the replica's row must stay as it is, skip exactly this transaction: `STOP REPLICA{name}; SET GLOBAL gtid_slave_pos = '{g}'; START REPLICA{name};` {keep}."
            ),
            // The error does not name the GTID: the applier stopped where the failed
            // transaction starts in the primary's binary log, whose first event is its GTID.
            (None, Some((file, pos))) if gtid => format!(
                "Only if the replica's row must stay as it is, skip exactly this transaction: on the primary, `SHOW BINLOG EVENTS IN '{file}' FROM {pos} LIMIT 1` names its GTID (`BEGIN GTID d-s-n`); then `STOP REPLICA{name}; SET GLOBAL gtid_slave_pos = 'd-s-n'; START REPLICA{name};` with that GTID {keep}."
            ),
            _ => format!(
                "Only if the replica's row must stay as it is, skip exactly this one event: `STOP REPLICA{name}; SET GLOBAL sql_slave_skip_counter = 1; START REPLICA{name};` — one event, never more, and only after that check."
            ),
        };
        return format!(
            "{who}: error {} means {what}: the replica's data already differs from the primary's. Compare the row the error names on both servers and make the replica's row what the primary's was before this event (`SET SESSION sql_log_bin = 0` first if this replica has replicas of its own), then `START REPLICA{name};`. {skip} Then find out how the replica was written to: `SET GLOBAL read_only = ON` (and `read_only = ON` under `[mariadbd]`) on replicas.",
            c.last_sql_errno
        );
    }
    if c.last_sql_errno != 0 {
        return format!(
            "{who}: the SQL thread stopped on error {}: fix its cause (the error names the statement and table), then `START REPLICA{name};`. Do not skip events without knowing what they change.",
            c.last_sql_errno
        );
    }
    match c.last_io_errno {
        1236 => format!(
            "{who}: the primary no longer has the binary log this replica needs (error 1236): it cannot catch up. Rebuild it from a fresh backup of the primary (`mariadb-backup --backup` there, `--prepare` and restore here), then `CHANGE MASTER TO master_use_gtid = slave_pos` and `START REPLICA{name};`. Keep binary logs longer on the primary (`binlog_expire_logs_seconds`) than a replica may be down."
        ),
        1045 => format!(
            "{who}: the primary refuses the replication account (error 1045): check the account and its `REPLICATION SLAVE` grant there; if its password changed, `STOP REPLICA{name}; CHANGE MASTER{name} TO master_password = '…'; START REPLICA{name};`."
        ),
        2003 | 2005 | 2013 => format!(
            "{who}: the replica cannot reach the primary at {} (error {}): check that the primary runs and that the network and firewall let this host reach it; the IO thread retries by itself every `Connect_Retry` seconds.",
            display_text(&c.source, 120),
            c.last_io_errno
        ),
        0 => format!(
            "{who} was stopped (no error): start it again with `START REPLICA{name};` if the stop was not meant to last."
        ),
        n => format!(
            "{who}: the IO thread stopped on error {n}: fix its cause (see the error), then `START REPLICA{name};`."
        ),
    }
}

impl Rule for ReplicationStopped {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let r = s.db()?.replication()?;
        if r.connections.is_empty() {
            return Err(Verdict::not_applicable(
                "not a replica (SHOW ALL REPLICAS STATUS lists no connection)",
            ));
        }
        let down: Vec<(&ReplicaConnection, String)> = r
            .connections
            .iter()
            .filter_map(|c| stopped(c).map(|why| (c, why)))
            .collect();
        if down.is_empty() {
            let n = r.connections.len();
            return Ok(Verdict::pass(format!(
                "{n} replication connection{} running (IO and SQL threads)",
                if n == 1 { "" } else { "s" }
            ))
            .with_evidence_lines(r.connections.iter().flat_map(evidence)));
        }
        let (first, why) = &down[0];
        let error = match (first.last_sql_errno, first.last_io_errno) {
            (0, 0) => String::new(),
            (0, n) => format!(
                ": IO error {n}: {}",
                display_text(&first.last_io_error, SUMMARY_ERROR_CHARS)
            ),
            (n, _) => format!(
                ": SQL error {n}: {}",
                display_text(&first.last_sql_error, SUMMARY_ERROR_CHARS)
            ),
        };
        // On a multi-source replica, how many of its connections stopped.
        let more = match (down.len(), r.connections.len()) {
            (_, 1) => String::new(),
            (n, all) => format!(" ({n} of {all} connections stopped)"),
        };
        Ok(Verdict::fail(format!(
            "replication stopped on {}: {why}{error}{more}",
            first.label()
        ))
        .with_evidence_lines(down.iter().flat_map(|(c, _)| evidence(c)))
        .with_remediation(
            down.iter()
                .map(|(c, _)| remedy(c))
                .collect::<Vec<_>>()
                .join("\n\n"),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, replica, verdict},
    };

    pub(crate) fn failing_example() -> crate::Snapshot {
        let mut c = replica("");
        c.sql_running = "No".into();
        c.last_sql_errno = 1062;
        c.last_sql_error = "Could not execute Write_rows_v1 event on table shop.orders; Duplicate entry '7' for key 'PRIMARY', Error_code: 1062; handler error HA_ERR_FOUND_DUPP_KEY; the event's master log mariadb-bin.000001, end_log_pos 2071, Gtid 0-1-9, Internal MariaDB error code: 1062".into();
        SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c]).build()
    }

    #[test]
    fn a_duplicate_key_names_the_gtid_to_skip_only_after_checking() {
        let v = verdict(&ReplicationStopped, &failing_example());
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("the default connection: the SQL thread is stopped: SQL error 1062: Could not execute Write_rows_v1"), "{}", v.summary);
        let fix = v.remediation.as_deref().unwrap();
        assert!(fix.contains("SET GLOBAL gtid_slave_pos = '0-1-9'"), "{fix}");
        assert!(fix.contains("Compare the row"), "{fix}");
        assert!(!fix.contains("sql_slave_skip_counter"), "{fix}");
        assert!(v.evidence.iter().any(|e| e.contains("Last_SQL_Errno 1062")));
    }

    #[test]
    fn a_stopped_named_connection_is_started_by_name_and_the_others_pass() {
        let mut b = replica("eu");
        b.io_running = "No".into();
        b.sql_running = "No".into();
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .replication(vec![replica("us"), b])
            .build();
        let v = verdict(&ReplicationStopped, &s);
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.ends_with("connection 'eu': both threads are stopped (1 of 2 connections stopped)"), "{}", v.summary);
        assert!(!v.summary.contains("'us'"));
        assert!(v.remediation.unwrap().contains("START REPLICA 'eu';"));
    }

    #[test]
    fn running_connecting_without_error_and_not_a_replica() {
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![replica("")]).build();
        assert_eq!(verdict(&ReplicationStopped, &s).status, Status::Pass);
        let mut c = replica("");
        c.io_running = "Connecting".into();
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c.clone()]).build();
        assert_eq!(verdict(&ReplicationStopped, &s).status, Status::Pass);
        c.last_io_errno = 2003;
        c.last_io_error = "error connecting to master 'repl@10.0.0.1:3306' - retry-time: 60  maximum-retries: 100000  message: Can't connect to server on '10.0.0.1' (111)".into();
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c]).build();
        let v = verdict(&ReplicationStopped, &s);
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("the IO thread is Connecting: IO error 2003"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("cannot reach the primary"));
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![]).build();
        assert_eq!(verdict(&ReplicationStopped, &s).status, Status::NotApplicable);
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").build();
        assert_eq!(verdict(&ReplicationStopped, &s).status, Status::InsufficientData);
    }

    #[test]
    fn a_name_with_a_quote_is_quoted_in_the_statement() {
        let mut c = replica("it's");
        c.sql_running = "No".into();
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c]).build();
        let fix = verdict(&ReplicationStopped, &s).remediation.unwrap();
        assert!(fix.contains("START REPLICA 'it''s';"), "{fix}");
    }

    /// MariaDB 10.11 and 11.8 write `end_log_pos 0` and no GTID in a row event's error: the
    /// applier's position names the transaction.
    #[test]
    fn without_a_gtid_in_the_error_the_primarys_binary_log_names_it() {
        let mut c = replica("");
        c.sql_running = "No".into();
        c.last_sql_errno = 1032;
        c.last_sql_error = "Could not execute Update_rows_v1 event on table pd_repl.t; Can't find record in 't', Error_code: 1032; handler error HA_ERR_KEY_NOT_FOUND; the event's master log mariadb-bin.000001, end_log_pos 0".into();
        c.exec_position = "mariadb-bin.000001:2845".into();
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c.clone()]).build();
        let fix = verdict(&ReplicationStopped, &s).remediation.unwrap();
        assert!(fix.contains("does not exist on the replica"), "{fix}");
        assert!(fix.contains("`SHOW BINLOG EVENTS IN 'mariadb-bin.000001' FROM 2845 LIMIT 1`"), "{fix}");
        assert!(!fix.contains("sql_slave_skip_counter"), "{fix}");
        // Without GTID replication: one event with the skip counter, never more.
        c.using_gtid = "No".into();
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![c]).build();
        let fix = verdict(&ReplicationStopped, &s).remediation.unwrap();
        assert!(fix.contains("SET GLOBAL sql_slave_skip_counter = 1"), "{fix}");
        assert_eq!(exec_at("x'.000001:5"), None);
    }

    #[test]
    fn the_gtid_is_read_only_when_well_formed() {
        assert_eq!(failed_gtid("end_log_pos 2071, Gtid 0-1-9, Internal"), Some("0-1-9"));
        assert_eq!(failed_gtid("Gtid 0-1-, x"), None);
        assert_eq!(failed_gtid("no gtid here"), None);
    }
}
