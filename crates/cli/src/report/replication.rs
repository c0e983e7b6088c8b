//! The report's replication and Galera lines: each connection of a replica, one line each, and a
//! Galera node's state, for the text and Markdown headers (the JSON report has the facts in its
//! snapshot).

use powerdiag_rules::{Gathered, MariadbFacts, ReplicaConnection, display_text};

/// Characters of a last error shown on the line (the finding has all of it).
const ERROR_CHARS: usize = 120;

/// One line per replication connection, escaped, and on a server writing a binary log the
/// replicas connected to it; none on a standalone server.
pub(crate) fn lines(f: &MariadbFacts) -> Vec<String> {
    use powerdiag_rules::{StatusVar, Var};
    let mut out: Vec<String> = match &f.replication {
        Gathered::Available(r) => r.connections.iter().map(line).collect(),
        Gathered::Unavailable(why) => vec![format!("unavailable ({})", display_text(why, 300))],
    };
    if f.var_bool(Var::LogBin).unwrap_or(false)
        && let Ok(n) = f.status_u64(StatusVar::SlavesConnected)
    {
        out.push(format!(
            "primary: {n} replica(s) connected (Slaves_connected), binlog_format {}",
            display_text(f.var(Var::BinlogFormat).unwrap_or("unknown"), 16)
        ));
    }
    out
}

/// The Galera line of a node (`wsrep_on = ON`): its state, the cluster's size, flow control
/// and the receive queue; none elsewhere.
pub(crate) fn galera_line(f: &MariadbFacts) -> Option<String> {
    use powerdiag_rules::{StatusVar, Var};
    if !f.var_bool(Var::WsrepOn).unwrap_or(false) {
        return None;
    }
    let st = |v: StatusVar| display_text(f.status_str(v).unwrap_or("?"), 32);
    let mut out = format!(
        "{}, {}, ready {}, cluster of {}; receive queue {}, flow control sent {} received {}",
        st(StatusVar::WsrepClusterStatus),
        st(StatusVar::WsrepLocalStateComment),
        st(StatusVar::WsrepReady),
        st(StatusVar::WsrepClusterSize),
        st(StatusVar::WsrepLocalRecvQueue),
        st(StatusVar::WsrepFlowControlSent),
        st(StatusVar::WsrepFlowControlRecv),
    );
    if let Ok(c) = f.window_counts()
        && let Ok(ns) = c.get(StatusVar::WsrepFlowControlPausedNs)
    {
        out.push_str(&format!(
            ", paused {:.1}% of the window",
            100.0 * (ns as f64 / 1e9 / c.seconds()).min(1.0)
        ));
    }
    Some(out)
}

fn line(c: &ReplicaConnection) -> String {
    let behind = match c.seconds_behind_master {
        Some(s) => format!("{s} s behind"),
        None => "lag unknown".to_owned(),
    };
    let mut out = format!(
        "{} from {}: IO {}, SQL {}, {behind}, GTID received {}, applied {}",
        c.label(),
        display_text(&c.source, 120),
        display_text(&c.io_running, 20),
        display_text(&c.sql_running, 20),
        display_text(&c.gtid_io_pos, 120),
        display_text(&c.gtid_slave_pos, 120),
    );
    if c.last_sql_errno != 0 {
        out.push_str(&format!(
            "; SQL error {}: {}",
            c.last_sql_errno,
            display_text(&c.last_sql_error, ERROR_CHARS)
        ));
    }
    if c.last_io_errno != 0 {
        out.push_str(&format!(
            "; IO error {}: {}",
            c.last_io_errno,
            display_text(&c.last_io_error, ERROR_CHARS)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use powerdiag_rules::testing::{SnapshotBuilder, replica};

    #[test]
    fn each_connection_one_escaped_line() {
        let mut b = replica("e\u{1b}[31mu");
        b.sql_running = "No".into();
        b.last_sql_errno = 1062;
        b.last_sql_error = "Duplicate entry '1'\nfor key 'PRIMARY'".into();
        let s = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .replication(vec![replica(""), b])
            .build();
        let l = super::lines(s.mariadb.facts.as_ref().unwrap());
        assert_eq!(l.len(), 2);
        assert!(l[0].starts_with("the default connection from 127.0.0.1:3306: IO Yes, SQL Yes, 0 s behind, GTID received 0-1-42, applied 0-1-42"), "{}", l[0]);
        assert!(l[1].contains("connection 'e\\u{1b}[31mu'"), "{}", l[1]);
        assert!(
            l[1].ends_with("SQL error 1062: Duplicate entry '1' for key 'PRIMARY'"),
            "{}",
            l[1]
        );
    }
}
