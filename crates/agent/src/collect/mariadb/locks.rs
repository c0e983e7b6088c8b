//! Who waits for whom (PD217–PD220): the sessions waiting for a lock, the sessions holding
//! it, and the last deadlock.
//!
//! Cheap when nothing waits: nothing is read unless the status read shows a row-lock wait
//! (`Innodb_row_lock_current_waits`) or at least [`SCAN_THREADS_RUNNING`] statements running
//! ([`LockScan::Quiet`] otherwise: zero statements), for the agent and doctor alike. A read is:
//!
//! 1. only when the status read shows a row-lock wait, the row chain: `INNODB_LOCK_WAITS` with
//!    both sides' transactions and the blocking lock from `INNODB_LOCKS` ([`CHAIN_SQL`]);
//! 2. the sessions in a lock-wait state and the chain's sessions ([`WAITERS_SQL`]), the
//!    waiters counted by kind from that one read;
//! 3. only with a metadata-lock waiter, the holders: `performance_schema.metadata_locks` when
//!    its instrument is on, else `information_schema.METADATA_LOCK_INFO` when the plugin is
//!    installed ([`SOURCE_SQL`] says which), and for a DDL whose holder neither names, the
//!    session that probably holds it ([`CANDIDATES_SQL`], marked probable);
//! 4. the sessions of the blockers not read yet ([`SESSIONS_SQL`]).
//!
//! The sessions come from `performance_schema.threads` when performance_schema is on, else
//! from `information_schema.PROCESSLIST` ([`SessionSource`]: the first costs the server a
//! twelfth of the second with 1,000 connections). The last deadlock (`SHOW ENGINE INNODB
//! STATUS`) is read only when `Innodb_deadlocks` moved since the agent's last read (doctor: when
//! it is above 0). Every statement text is masked ([`mask_statement`]) before it is stored.

use std::sync::{Arc, Mutex};

use powerdiag_rules::{
    Deadlock, Gathered, LockKind, LockScan, LockSession, LockWait, Locks, MariadbFacts,
    MetadataSource, SCAN_THREADS_RUNNING, STATEMENT_CHARS, SessionTransaction, StatusVar,
    mask_statement,
};

use super::part::{Ctx, Part, PartFuture};
use super::session::{Session, TextRow, tcol, tcol_u64, text_rows};
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// Rows a read returns at most (sessions, waits, metadata locks).
const LIMIT: usize = 500;

/// Where the sessions are read from. `performance_schema.threads` when performance_schema is
/// on: a filtered read of it cost the server 0.5 ms with 1,000 connections, where
/// `information_schema.PROCESSLIST` cost 6 ms whatever the `WHERE` (it builds a row per
/// connection first; docs/performance.md, "The lock read"). `PROCESSLIST` otherwise, or when
/// performance_schema cannot be read (a missing grant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionSource {
    Threads,
    Processlist,
}

/// The sessions waiting in a lock-wait state, and those of `{ids}` (the row chain's waiters
/// and blockers, or `0`). No transaction columns: `INNODB_TRX` costs the server ~4 ms per
/// read with 1,000 connections (InnoDB walks every connection's transaction object), so the
/// transactions come from [`CHAIN_SQL`], read only when a row lock is waited for.
pub(crate) const WAITERS_SQL: &str = "SELECT p.PROCESSLIST_ID, p.PROCESSLIST_USER, \
     p.PROCESSLIST_HOST, p.PROCESSLIST_DB, p.PROCESSLIST_COMMAND, p.PROCESSLIST_TIME * 1000, \
     p.PROCESSLIST_STATE, LEFT(p.PROCESSLIST_INFO, 2048), NULL, NULL, NULL, NULL, NULL \
     FROM performance_schema.threads p \
     WHERE p.PROCESSLIST_ID IS NOT NULL AND p.PROCESSLIST_ID <> CONNECTION_ID() \
     AND (p.PROCESSLIST_STATE LIKE 'Waiting for%' OR p.PROCESSLIST_ID IN ({ids})) \
     ORDER BY p.PROCESSLIST_TIME DESC LIMIT 500";

/// [`WAITERS_SQL`] from `information_schema.PROCESSLIST`, with the transactions: joining
/// `INNODB_TRX` also makes a monitoring user without `PROCESS` fail here rather than see only
/// its own sessions.
pub(crate) const WAITERS_SQL_PROCESSLIST: &str = "SELECT p.ID, p.USER, p.HOST, p.DB, \
     p.COMMAND, p.TIME_MS, p.STATE, LEFT(p.INFO, 2048), \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_locked, \
     t.trx_rows_modified, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1000000 \
     FROM information_schema.PROCESSLIST p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.ID <> CONNECTION_ID() \
     AND (p.STATE LIKE 'Waiting for%' OR t.trx_state = 'LOCK WAIT' OR p.ID IN ({ids})) \
     ORDER BY p.TIME_MS DESC LIMIT 500";

/// The sessions of the ids that replace `{ids}`.
pub(crate) const SESSIONS_SQL: &str = "SELECT p.PROCESSLIST_ID, p.PROCESSLIST_USER, \
     p.PROCESSLIST_HOST, p.PROCESSLIST_DB, p.PROCESSLIST_COMMAND, p.PROCESSLIST_TIME * 1000, \
     p.PROCESSLIST_STATE, LEFT(p.PROCESSLIST_INFO, 2048), \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_locked, \
     t.trx_rows_modified, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1000000 \
     FROM performance_schema.threads p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.PROCESSLIST_ID \
     WHERE p.PROCESSLIST_ID IN ({ids}) LIMIT 500";

/// [`SESSIONS_SQL`] from `information_schema.PROCESSLIST`.
pub(crate) const SESSIONS_SQL_PROCESSLIST: &str = "SELECT p.ID, p.USER, p.HOST, p.DB, \
     p.COMMAND, p.TIME_MS, p.STATE, LEFT(p.INFO, 2048), \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_locked, \
     t.trx_rows_modified, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1000000 \
     FROM information_schema.PROCESSLIST p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.ID IN ({ids}) LIMIT 500";

/// The sessions that may hold a metadata lock a session has waited for `{seconds}`: not
/// waiting themselves, with a transaction or a statement older than the wait.
pub(crate) const CANDIDATES_SQL: &str = "SELECT p.PROCESSLIST_ID, p.PROCESSLIST_USER, \
     p.PROCESSLIST_HOST, p.PROCESSLIST_DB, p.PROCESSLIST_COMMAND, p.PROCESSLIST_TIME * 1000, \
     p.PROCESSLIST_STATE, LEFT(p.PROCESSLIST_INFO, 2048), \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_locked, \
     t.trx_rows_modified, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1000000 \
     FROM performance_schema.threads p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.PROCESSLIST_ID \
     WHERE p.PROCESSLIST_ID IS NOT NULL AND p.PROCESSLIST_ID <> CONNECTION_ID() \
     AND COALESCE(p.PROCESSLIST_STATE, '') NOT LIKE 'Waiting for%' \
     AND (t.trx_started <= NOW() - INTERVAL {seconds} SECOND \
     OR (p.PROCESSLIST_COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', 'Slave_IO', 'Slave_SQL', 'Slave_worker') \
     AND p.PROCESSLIST_TIME >= {seconds})) \
     ORDER BY t.trx_started IS NULL, t.trx_started, p.PROCESSLIST_TIME DESC LIMIT 20";

/// [`CANDIDATES_SQL`] from `information_schema.PROCESSLIST`.
pub(crate) const CANDIDATES_SQL_PROCESSLIST: &str = "SELECT p.ID, p.USER, p.HOST, p.DB, \
     p.COMMAND, p.TIME_MS, p.STATE, LEFT(p.INFO, 2048), \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_locked, \
     t.trx_rows_modified, TIMESTAMPDIFF(MICROSECOND, t.trx_wait_started, NOW(6)) / 1000000 \
     FROM information_schema.PROCESSLIST p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.ID <> CONNECTION_ID() AND COALESCE(p.STATE, '') NOT LIKE 'Waiting for%' \
     AND (t.trx_started <= NOW() - INTERVAL {seconds} SECOND \
     OR (p.COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', 'Slave_IO', 'Slave_SQL', 'Slave_worker') \
     AND p.TIME >= {seconds})) \
     ORDER BY t.trx_started IS NULL, t.trx_started, p.TIME DESC LIMIT 20";

impl SessionSource {
    /// The sessions in a lock-wait state and those of `ids`.
    pub(crate) fn waiters(self, ids: &[u64]) -> String {
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        let list = if list.is_empty() {
            "0".to_owned()
        } else {
            list.join(", ")
        };
        match self {
            SessionSource::Threads => WAITERS_SQL,
            SessionSource::Processlist => WAITERS_SQL_PROCESSLIST,
        }
        .replace("{ids}", &list)
    }

    /// The sessions of `ids`, with their transactions.
    pub(crate) fn sessions(self, ids: &[u64]) -> String {
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        match self {
            SessionSource::Threads => SESSIONS_SQL,
            SessionSource::Processlist => SESSIONS_SQL_PROCESSLIST,
        }
        .replace("{ids}", &list.join(", "))
    }

    /// The possible holders of a lock waited for `seconds`.
    pub(crate) fn candidates(self, seconds: u64) -> String {
        match self {
            SessionSource::Threads => CANDIDATES_SQL,
            SessionSource::Processlist => CANDIDATES_SQL_PROCESSLIST,
        }
        .replace("{seconds}", &seconds.to_string())
    }
}

/// Who waits for whom among row locks: waiter and blocker thread, the blocking lock, the
/// waiter's wait and both transactions (age, rows locked and modified; the blocker's state).
pub(crate) const CHAIN_SQL: &str = "SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, \
     l.lock_mode, l.lock_type, l.lock_table, l.lock_index, \
     TIMESTAMPDIFF(MICROSECOND, r.trx_wait_started, NOW(6)) / 1000000, \
     TIMESTAMPDIFF(SECOND, r.trx_started, NOW()), r.trx_rows_locked, r.trx_rows_modified, \
     TIMESTAMPDIFF(SECOND, b.trx_started, NOW()), b.trx_state, b.trx_rows_locked, \
     b.trx_rows_modified \
     FROM information_schema.INNODB_LOCK_WAITS w \
     JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
     JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
     LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.blocking_lock_id \
     LIMIT 500";

/// Which metadata-lock source the server offers: `@@performance_schema`, the mdl
/// instrument's `ENABLED`, the `METADATA_LOCK_INFO` plugin's status.
pub(crate) const SOURCE_SQL: &str = "SELECT @@performance_schema, \
     (SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = 'wait/lock/metadata/sql/mdl'), \
     (SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO')";

/// Table metadata locks from performance_schema: session, schema, table, type, status.
pub(crate) const PFS_MDL_SQL: &str = "SELECT t.PROCESSLIST_ID, m.OBJECT_SCHEMA, m.OBJECT_NAME, \
     m.LOCK_TYPE, m.LOCK_STATUS \
     FROM performance_schema.metadata_locks m \
     JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID \
     WHERE m.OBJECT_TYPE = 'TABLE' AND t.PROCESSLIST_ID IS NOT NULL \
     AND t.PROCESSLIST_ID <> CONNECTION_ID() LIMIT 500";

/// Granted table metadata locks from the plugin: session, schema, table, mode.
pub(crate) const MLI_SQL: &str = "SELECT THREAD_ID, TABLE_SCHEMA, TABLE_NAME, LOCK_MODE, 'GRANTED' \
     FROM information_schema.METADATA_LOCK_INFO \
     WHERE LOCK_TYPE = 'Table metadata lock' AND THREAD_ID <> CONNECTION_ID() LIMIT 500";

/// A session row, with its row-lock wait in seconds when its transaction waits.
pub(crate) fn parse_session(row: &TextRow) -> Option<(LockSession, Option<f64>)> {
    let id = tcol_u64(row, 0)?;
    let f = |i| tcol(row, i).and_then(|s| s.trim().parse::<f64>().ok());
    let transaction = tcol(row, 9).map(|state| SessionTransaction {
        age_seconds: f(8).map(|s| s.max(0.0) as u64).unwrap_or(0),
        state,
        rows_locked: tcol_u64(row, 10).unwrap_or(0),
        rows_modified: tcol_u64(row, 11).unwrap_or(0),
    });
    let session = LockSession {
        id,
        user: tcol(row, 1).unwrap_or_default(),
        host: tcol(row, 2).unwrap_or_default(),
        db: tcol(row, 3),
        command: tcol(row, 4).unwrap_or_default(),
        seconds: f(5).map(|ms| (ms / 1000.0).max(0.0)).unwrap_or(0.0),
        state: tcol(row, 6).filter(|s| !s.is_empty()),
        statement: tcol(row, 7)
            .map(|s| mask_statement(&s, STATEMENT_CHARS))
            .filter(|s| !s.is_empty()),
        transaction,
    };
    let row_wait = f(12)
        .filter(|_| {
            session
                .transaction
                .as_ref()
                .is_some_and(|t| t.state == "LOCK WAIT")
        })
        .map(|s| s.max(0.0));
    Some((session, row_wait))
}

/// `lk`.`t` from a schema and a table name, quoted as MariaDB prints them.
fn object(schema: &str, table: &str) -> String {
    format!("`{schema}`.`{table}`")
}

/// The row chain: who waits for whom, and the transactions of both sides by thread.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Chain {
    pub waits: Vec<LockWait>,
    pub transactions: Vec<(u64, SessionTransaction)>,
}

/// [`CHAIN_SQL`]'s rows.
pub(crate) fn parse_chain(rows: &[TextRow]) -> Chain {
    let f = |r: &TextRow, i| tcol(r, i).and_then(|s| s.trim().parse::<f64>().ok());
    let mut chain = Chain::default();
    for r in rows {
        let Some(waiter) = tcol_u64(r, 0) else {
            continue;
        };
        let blocker = tcol_u64(r, 1).filter(|b| *b > 0);
        let object = tcol(r, 4).map(|t| match tcol(r, 5) {
            Some(i) => format!("{t} index {i}"),
            None => t,
        });
        chain.waits.push(LockWait {
            waiter,
            blocker,
            kind: LockKind::Row,
            seconds: f(r, 6).unwrap_or(0.0).max(0.0),
            object,
            mode: tcol(r, 2),
            probable: false,
        });
        let mut add = |id: u64, t: SessionTransaction| {
            if !chain.transactions.iter().any(|(x, _)| *x == id) {
                chain.transactions.push((id, t));
            }
        };
        add(
            waiter,
            SessionTransaction {
                age_seconds: f(r, 7).unwrap_or(0.0).max(0.0) as u64,
                state: "LOCK WAIT".into(),
                rows_locked: tcol_u64(r, 8).unwrap_or(0),
                rows_modified: tcol_u64(r, 9).unwrap_or(0),
            },
        );
        if let Some(b) = blocker {
            add(
                b,
                SessionTransaction {
                    age_seconds: f(r, 10).unwrap_or(0.0).max(0.0) as u64,
                    state: tcol(r, 11).unwrap_or_default(),
                    rows_locked: tcol_u64(r, 12).unwrap_or(0),
                    rows_modified: tcol_u64(r, 13).unwrap_or(0),
                },
            );
        }
    }
    chain
}

/// One table metadata lock: session, object, type, granted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mdl {
    pub thread: u64,
    pub object: String,
    pub mode: String,
    pub granted: bool,
}

pub(crate) fn parse_mdl(rows: &[TextRow]) -> Vec<Mdl> {
    rows.iter()
        .filter_map(|r| {
            Some(Mdl {
                thread: tcol_u64(r, 0)?,
                object: object(&tcol(r, 1)?, &tcol(r, 2)?),
                mode: tcol(r, 3).unwrap_or_default(),
                granted: tcol(r, 4).is_some_and(|s| s.eq_ignore_ascii_case("GRANTED")),
            })
        })
        .collect()
}

/// A statement that takes an exclusive metadata lock: the DDL a pile-up queues behind.
pub(crate) fn is_ddl(statement: &str) -> bool {
    let upper = statement.trim_start().to_ascii_uppercase();
    [
        "ALTER ",
        "CREATE INDEX",
        "CREATE UNIQUE INDEX",
        "CREATE FULLTEXT INDEX",
        "CREATE SPATIAL INDEX",
        "CREATE VECTOR INDEX",
        "DROP ",
        "RENAME ",
        "TRUNCATE ",
        "OPTIMIZE ",
        "REPAIR ",
        "LOCK TABLE",
        "FLUSH TABLE",
        "CREATE TRIGGER",
    ]
    .iter()
    .any(|p| upper.starts_with(p))
}

/// The metadata-lock waits, from the waiting sessions and the locks of `source`: a DDL waits
/// for the sessions holding a lock on its table; other waiters queue behind the DDL that
/// waits on their table (or, with no table known, behind the longest-waiting DDL).
pub(crate) fn metadata_waits(waiters: &[(LockSession, LockKind)], mdl: &[Mdl]) -> Vec<LockWait> {
    let waiting: Vec<u64> = waiters.iter().map(|(s, _)| s.id).collect();
    let pending_object = |id: u64| {
        mdl.iter()
            .find(|m| m.thread == id && !m.granted)
            .map(|m| m.object.clone())
    };
    // A DDL's table: its pending lock, else the table it already holds a lock on.
    let ddl_object = |id: u64| {
        pending_object(id).or_else(|| {
            mdl.iter()
                .find(|m| m.thread == id && m.granted)
                .map(|m| m.object.clone())
        })
    };
    let mut ddls: Vec<(&LockSession, Option<String>)> = waiters
        .iter()
        .filter(|(s, k)| *k == LockKind::Metadata && s.statement.as_deref().is_some_and(is_ddl))
        .map(|(s, _)| (s, ddl_object(s.id)))
        .collect();
    ddls.sort_by(|a, b| b.0.seconds.total_cmp(&a.0.seconds));
    let mut out = Vec::new();
    for (s, kind) in waiters {
        let base = LockWait {
            waiter: s.id,
            blocker: None,
            kind: *kind,
            seconds: s.seconds,
            object: None,
            mode: None,
            probable: false,
        };
        if *kind != LockKind::Metadata {
            out.push(base);
            continue;
        }
        if let Some((_, obj)) = ddls.iter().find(|(d, _)| d.id == s.id) {
            // The DDL: blocked by the sessions holding its table, not waiting themselves.
            let holders: Vec<&Mdl> = match obj {
                Some(o) => mdl
                    .iter()
                    .filter(|m| m.granted && &m.object == o && m.thread != s.id)
                    .filter(|m| !waiting.contains(&m.thread))
                    .collect(),
                None => Vec::new(),
            };
            let mut seen = Vec::new();
            for h in holders {
                if seen.contains(&h.thread) {
                    continue;
                }
                seen.push(h.thread);
                out.push(LockWait {
                    blocker: Some(h.thread),
                    object: obj.clone(),
                    mode: Some(h.mode.clone()),
                    ..base.clone()
                });
            }
            if seen.is_empty() {
                out.push(LockWait {
                    object: obj.clone(),
                    ..base
                });
            }
            continue;
        }
        // Another waiter: behind the DDL on its table, else the longest-waiting DDL.
        let mine = pending_object(s.id);
        let ddl = match &mine {
            Some(o) => ddls
                .iter()
                .find(|(d, obj)| obj.as_ref() == Some(o) && d.id != s.id),
            None => ddls.first().filter(|(d, _)| d.id != s.id),
        };
        match ddl {
            Some((d, obj)) => out.push(LockWait {
                blocker: Some(d.id),
                object: mine.or_else(|| obj.clone()),
                ..base
            }),
            None => {
                // No DDL ahead: whoever holds the table.
                let holders: Vec<u64> = match &mine {
                    Some(o) => mdl
                        .iter()
                        .filter(|m| m.granted && &m.object == o && m.thread != s.id)
                        .filter(|m| !waiting.contains(&m.thread))
                        .map(|m| m.thread)
                        .collect(),
                    None => Vec::new(),
                };
                if holders.is_empty() {
                    out.push(LockWait {
                        object: mine.clone(),
                        ..base.clone()
                    });
                }
                for h in holders {
                    out.push(LockWait {
                        blocker: Some(h),
                        object: mine.clone(),
                        ..base.clone()
                    });
                }
            }
        }
    }
    out
}

/// The metadata-lock source the server offers, from [`SOURCE_SQL`]'s row.
pub(crate) fn pick_source(row: Option<&TextRow>) -> MetadataSource {
    let on = |i| {
        row.and_then(|r| tcol(r, i)).is_some_and(|v| {
            matches!(
                v.to_ascii_uppercase().as_str(),
                "1" | "ON" | "YES" | "ACTIVE"
            )
        })
    };
    if on(0) && on(1) {
        return MetadataSource::PerformanceSchema;
    }
    if on(2) {
        return MetadataSource::MetadataLockInfo;
    }
    let better = if on(0) {
        "for the holders: INSTALL SONAME 'metadata_lock_info'; (no restart; it sees the locks already held), or UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'; (no restart, but it sees only the locks taken after it is on; keep it with performance-schema-instrument = 'wait/lock/metadata/sql/mdl=ON' under [mariadbd])"
    } else {
        "for the holders: INSTALL SONAME 'metadata_lock_info'; (no restart; keep it with plugin_load_add = metadata_lock_info under [mariadbd]), or performance_schema = ON with the instrument wait/lock/metadata/sql/mdl (a restart)"
    };
    MetadataSource::Processlist {
        better: better.into(),
    }
}

fn denied(e: &powerdiag_rules::DbError, what: &str, account: &str) -> String {
    let mut w = format!("reading {what}: {}", e.message);
    if e.message.contains("denied") || e.message.contains("PROCESS") {
        w.push_str(&format!(" (GRANT PROCESS ON *.* TO {account})"));
    } else if !e.hint.is_empty() {
        w.push_str(&format!("; fix: {}", e.hint));
    }
    w
}

/// Reads the lock waits (see the module documentation): the row chain first when
/// `row_waits` (the status read's `Innodb_row_lock_current_waits`, or unknown), then the
/// waiting sessions from `performance_schema.threads` when `threads`, else `PROCESSLIST`.
pub(crate) async fn read_locks(
    s: &mut Session,
    threads: bool,
    row_waits: bool,
) -> Result<Locks, String> {
    let account = s.account().to_owned();
    let mut locks = Locks::default();
    let chain = if row_waits {
        let rows = s
            .query(CHAIN_SQL)
            .await
            .map_err(|e| denied(&e, "the row-lock chain (INNODB_LOCK_WAITS)", &account))?;
        let rows = text_rows(&rows);
        locks.truncated |= rows.len() >= LIMIT;
        parse_chain(&rows)
    } else {
        Chain::default()
    };
    let mut ids: Vec<u64> = chain
        .waits
        .iter()
        .flat_map(|w| std::iter::once(w.waiter).chain(w.blocker))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(200);
    let mut src = if threads {
        SessionSource::Threads
    } else {
        SessionSource::Processlist
    };
    let first = match s.query(&src.waiters(&ids)).await {
        // performance_schema unreadable (a missing grant): PROCESSLIST, which costs more.
        Err(_) if src == SessionSource::Threads => {
            src = SessionSource::Processlist;
            s.query(&src.waiters(&ids)).await
        }
        other => other,
    };
    let rows = first.map_err(|e| {
        denied(
            &e,
            "the waiting sessions (PROCESSLIST, INNODB_TRX)",
            &account,
        )
    })?;
    let rows = text_rows(&rows);
    locks.truncated |= rows.len() >= LIMIT;
    let mut row_waiters: Vec<(u64, f64)> = Vec::new();
    let mut state_waiters: Vec<(LockSession, LockKind)> = Vec::new();
    for r in &rows {
        let Some((mut session, row_wait)) = parse_session(r) else {
            continue;
        };
        if session.transaction.is_none() {
            session.transaction = chain
                .transactions
                .iter()
                .find(|(id, _)| *id == session.id)
                .map(|(_, t)| t.clone());
        }
        if let Some(w) = row_wait {
            // PROCESSLIST's transaction in LOCK WAIT (no chain read: a server whose status
            // showed no row-lock wait a moment before).
            row_waiters.push((session.id, w));
        } else if let Some(kind) = session.state.as_deref().and_then(LockKind::of_state) {
            state_waiters.push((session.clone(), kind));
        }
        locks.sessions.push(session);
    }
    locks.waits.extend(chain.waits);
    for (id, secs) in &row_waiters {
        if !locks.waits.iter().any(|w| w.waiter == *id) {
            locks.waits.push(LockWait {
                waiter: *id,
                seconds: *secs,
                ..Default::default()
            });
        }
    }
    if !state_waiters.is_empty() {
        let metadata = state_waiters.iter().any(|(_, k)| *k == LockKind::Metadata);
        let source = if metadata {
            let row = s
                .query(SOURCE_SQL)
                .await
                .map(|r| text_rows(&r))
                .unwrap_or_default();
            pick_source(row.first())
        } else {
            MetadataSource::NotNeeded
        };
        let mdl = match &source {
            MetadataSource::PerformanceSchema => s.query(PFS_MDL_SQL).await,
            MetadataSource::MetadataLockInfo => s.query(MLI_SQL).await,
            _ => Ok(Vec::new()),
        };
        let (mdl, source) = match mdl {
            Ok(rows) => (parse_mdl(&text_rows(&rows)), source),
            // A source that fails (a grant on performance_schema missing) falls back to
            // PROCESSLIST, saying why.
            Err(e) => (
                Vec::new(),
                MetadataSource::Processlist {
                    better: format!(
                        "{} failed: {}; GRANT SELECT ON performance_schema.* TO {account}",
                        source.describe(),
                        e.message
                    ),
                },
            ),
        };
        let mut waits = metadata_waits(&state_waiters, &mdl);
        // A DDL whose holder no source names — PROCESSLIST only, or performance_schema's
        // instrument switched on after the holder took its lock (it sees only later ones):
        // the holder is inferred, and marked probable.
        if waits
            .iter()
            .any(|w| w.kind == LockKind::Metadata && w.blocker.is_none())
        {
            infer_holders(s, src, &mut waits, &state_waiters, &mut locks.sessions).await;
        }
        locks.waits.extend(waits);
        locks.metadata_source = if metadata {
            source
        } else {
            MetadataSource::NotNeeded
        };
    }
    // The blockers' sessions not read yet (metadata-lock holders), with their transactions.
    let mut missing: Vec<u64> = locks
        .waits
        .iter()
        .filter_map(|w| w.blocker)
        .filter(|b| {
            locks
                .session(*b)
                .is_none_or(|x| x.transaction.is_none() && x.command == "Sleep")
        })
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing.truncate(100);
    if !missing.is_empty()
        && let Ok(rows) = s.query(&src.sessions(&missing)).await
    {
        for r in text_rows(&rows) {
            if let Some((session, _)) = parse_session(&r) {
                locks.sessions.retain(|x| x.id != session.id);
                locks.sessions.push(session);
            }
        }
    }
    locks.sessions.sort_by_key(|s| s.id);
    Ok(locks)
}

/// PROCESSLIST only: the DDL waiting longest is probably blocked by the oldest session that
/// is not waiting and has a transaction or statement older than that wait.
async fn infer_holders(
    s: &mut Session,
    src: SessionSource,
    waits: &mut [LockWait],
    waiters: &[(LockSession, LockKind)],
    sessions: &mut Vec<LockSession>,
) {
    let Some(ddl) = waiters
        .iter()
        .filter(|(w, k)| *k == LockKind::Metadata && w.statement.as_deref().is_some_and(is_ddl))
        .map(|(w, _)| w)
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
    else {
        return;
    };
    let Ok(rows) = s.query(&src.candidates(ddl.seconds.floor() as u64)).await else {
        return;
    };
    let Some((holder, _)) = text_rows(&rows).iter().find_map(parse_session) else {
        return;
    };
    for w in waits
        .iter_mut()
        .filter(|w| w.waiter == ddl.id && w.blocker.is_none())
    {
        w.blocker = Some(holder.id);
        w.probable = true;
    }
    if !sessions.iter().any(|x| x.id == holder.id) {
        sessions.push(holder);
    }
}

/// What the agent keeps between samples: the last deadlock read and the `Innodb_deadlocks`
/// count it was read at.
#[derive(Debug, Clone, Default)]
pub struct LockCache {
    last: Arc<Mutex<Option<KeptDeadlock>>>,
}

/// `Innodb_deadlocks` at the read, and what it found.
type KeptDeadlock = (u64, Gathered<Option<Deadlock>>);

/// The `mariadb_locks` collector.
pub(super) struct LocksPart<'o> {
    /// The agent's cache; `None` always reads (doctor).
    pub(super) cache: Option<&'o LockCache>,
}

/// The `mariadb_locks` collector.
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_locks",
    help: "who waits for whom: lock-waiting sessions and their blockers (performance_schema.threads or PROCESSLIST, INNODB_LOCK_WAITS, metadata locks), read only when the status shows something can wait; the last deadlock when Innodb_deadlocks moved",
    default_enabled: true,
    requires: Requires::Nothing,
};

fn status(facts: &MariadbFacts, v: StatusVar) -> Option<u64> {
    facts.status_u64(v).ok()
}

impl Part for LocksPart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut MariadbFacts, why: String) {
        facts.locks = Gathered::Unavailable(why.clone());
        facts.last_deadlock = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let running = status(ctx.facts, StatusVar::ThreadsRunning);
            let row_waits = status(ctx.facts, StatusVar::InnodbRowLockCurrentWaits);
            let deadlocks = status(ctx.facts, StatusVar::InnodbDeadlocks);
            let threads = ctx
                .facts
                .var(powerdiag_rules::Var::PerformanceSchema)
                .ok()
                .and_then(powerdiag_rules::parse_bool)
                == Some(true);
            let mut failed = Vec::new();
            // Read only when the status read says something can wait (unknown: read).
            let quiet = match (running, row_waits) {
                (Some(r), Some(w)) if r < SCAN_THREADS_RUNNING && w == 0 => Some(LockScan::Quiet {
                    threads_running: r,
                    row_lock_current_waits: w,
                }),
                _ => None,
            };
            ctx.facts.locks = match quiet {
                Some(scan) => Gathered::Available(Locks {
                    scan,
                    ..Default::default()
                }),
                None => match read_locks(ctx.s, threads, row_waits != Some(0)).await {
                    Ok(l) => Gathered::Available(l),
                    Err(why) => {
                        if !why.contains("GRANT PROCESS") {
                            failed.push(why.clone());
                        }
                        Gathered::Unavailable(why)
                    }
                },
            };
            ctx.facts.last_deadlock = match deadlocks {
                None => Gathered::Unavailable("Innodb_deadlocks was not reported".into()),
                Some(0) => Gathered::Available(None),
                Some(n) => {
                    let kept = self.cache.and_then(|c| {
                        c.last
                            .lock()
                            .ok()
                            .and_then(|k| k.clone())
                            .filter(|(at, _)| *at == n)
                            .map(|(_, d)| d)
                    });
                    match kept {
                        Some(d) => d,
                        None => {
                            let d = read_deadlock(ctx.s, n).await;
                            if let Some(c) = self.cache
                                && let Ok(mut k) = c.last.lock()
                            {
                                *k = Some((n, d.clone()));
                            }
                            d
                        }
                    }
                }
            };
            CollectError::failed_statements(failed)
        })
    }
}

/// The last deadlock from `SHOW ENGINE INNODB STATUS` (`PROCESS` privilege).
async fn read_deadlock(s: &mut Session, deadlocks: u64) -> Gathered<Option<Deadlock>> {
    let account = s.account().to_owned();
    match s.query(super::deadlock::STATUS_SQL).await {
        Ok(rows) => {
            let rows = text_rows(&rows);
            let text = rows.first().and_then(|r| tcol(r, 2)).unwrap_or_default();
            match super::deadlock::parse_latest_deadlock(&text) {
                Some(mut d) => {
                    d.deadlocks = deadlocks;
                    Gathered::Available(Some(d))
                }
                None => Gathered::Unavailable(format!(
                    "Innodb_deadlocks is {deadlocks}, but SHOW ENGINE INNODB STATUS has no LATEST DETECTED DEADLOCK section (a restart or the monitor output cut it); SET GLOBAL innodb_print_all_deadlocks = ON keeps every deadlock in the error log"
                )),
            }
        }
        Err(e) => Gathered::Unavailable(denied(&e, "SHOW ENGINE INNODB STATUS", &account)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &[Option<&str>]) -> TextRow {
        v.iter().map(|c| c.map(str::to_owned)).collect()
    }

    fn session(id: u64, seconds: f64, statement: &str) -> LockSession {
        LockSession {
            id,
            user: "app".into(),
            host: "localhost".into(),
            command: "Query".into(),
            seconds,
            state: Some("Waiting for table metadata lock".into()),
            statement: Some(statement.into()),
            ..Default::default()
        }
    }

    fn mdl(thread: u64, mode: &str, granted: bool) -> Mdl {
        Mdl {
            thread,
            object: "`lk`.`t`".into(),
            mode: mode.into(),
            granted,
        }
    }

    #[test]
    fn a_session_row_masks_its_statement_and_reads_its_wait() {
        let (s, wait) = parse_session(&row(&[
            Some("12"),
            Some("app"),
            Some("10.0.0.5:5512"),
            Some("shop"),
            Some("Query"),
            Some("4012.5"),
            Some("Updating"),
            Some("UPDATE t SET secret = 'hunter2' WHERE id = 7"),
            Some("30"),
            Some("LOCK WAIT"),
            Some("2"),
            Some("0"),
            Some("3.9"),
        ]))
        .unwrap();
        assert_eq!(s.id, 12);
        assert_eq!(s.seconds, 4.0125);
        assert_eq!(
            s.statement.as_deref(),
            Some("UPDATE t SET secret = ? WHERE id = ?")
        );
        assert_eq!(wait, Some(3.9));
        assert_eq!(s.transaction.unwrap().age_seconds, 30);
        // Idle, no transaction: no wait.
        let (s, wait) = parse_session(&row(&[
            Some("9"),
            Some("app"),
            Some("h"),
            None,
            Some("Sleep"),
            Some("100"),
            Some(""),
            None,
            None,
            None,
            None,
            None,
            None,
        ]))
        .unwrap();
        assert!(s.state.is_none() && s.statement.is_none() && s.transaction.is_none());
        assert_eq!(wait, None);
    }

    #[test]
    fn a_pile_up_queues_behind_the_ddl_which_waits_for_the_holder() {
        // The 11.8 capture of the scenario (b): 9 holds SHARED_READ in a transaction,
        // 10 (ALTER) holds SHARED_UPGRADABLE and waits for EXCLUSIVE, 11–13 wait for
        // SHARED_READ.
        let waiters = vec![
            (
                session(10, 3.0, "ALTER TABLE lk.t ADD COLUMN w INT"),
                LockKind::Metadata,
            ),
            (session(11, 2.0, "SELECT * FROM lk.t"), LockKind::Metadata),
            (session(12, 1.9, "SELECT * FROM lk.t"), LockKind::Metadata),
        ];
        let pfs = vec![
            mdl(9, "SHARED_READ", true),
            mdl(10, "SHARED_UPGRADABLE", true),
            mdl(10, "EXCLUSIVE", false),
            mdl(11, "SHARED_READ", false),
            mdl(12, "SHARED_READ", false),
        ];
        let w = metadata_waits(&waiters, &pfs);
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!((w[0].waiter, w[0].blocker), (10, Some(9)));
        assert_eq!(w[0].mode.as_deref(), Some("SHARED_READ"));
        assert_eq!((w[1].waiter, w[1].blocker), (11, Some(10)));
        assert_eq!((w[2].waiter, w[2].blocker), (12, Some(10)));
        // The plugin lists granted locks only: the same answer.
        let mli: Vec<Mdl> = pfs.into_iter().filter(|m| m.granted).collect();
        let w2 = metadata_waits(&waiters, &mli);
        assert_eq!(
            w2.iter().map(|w| (w.waiter, w.blocker)).collect::<Vec<_>>(),
            vec![(10, Some(9)), (11, Some(10)), (12, Some(10))]
        );
        // Nothing known: the DDL's holder is unknown, the others still queue behind it.
        let w3 = metadata_waits(&waiters, &[]);
        assert_eq!(
            w3.iter().map(|w| (w.waiter, w.blocker)).collect::<Vec<_>>(),
            vec![(10, None), (11, Some(10)), (12, Some(10))]
        );
        let l = Locks {
            waits: w,
            ..Default::default()
        };
        let roots = l.roots();
        assert_eq!(roots[0].id, 9);
        assert_eq!(roots[0].queued, vec![10, 11, 12]);
    }

    #[test]
    fn the_chain_names_the_blocking_lock_and_both_transactions() {
        let c = parse_chain(&[row(&[
            Some("11"),
            Some("9"),
            Some("X"),
            Some("RECORD"),
            Some("`lk`.`t`"),
            Some("PRIMARY"),
            Some("4.5"),
            Some("5"),
            Some("1"),
            Some("0"),
            Some("40"),
            Some("RUNNING"),
            Some("3"),
            Some("2"),
        ])]);
        let w = &c.waits;
        assert_eq!(w[0].blocker, Some(9));
        assert_eq!(w[0].seconds, 4.5);
        assert_eq!(w[0].object.as_deref(), Some("`lk`.`t` index PRIMARY"));
        let blocker = &c.transactions.iter().find(|(id, _)| *id == 9).unwrap().1;
        assert_eq!((blocker.age_seconds, blocker.rows_locked), (40, 3));
        assert_eq!(blocker.state, "RUNNING");
        let waiter = &c.transactions.iter().find(|(id, _)| *id == 11).unwrap().1;
        assert_eq!(waiter.state, "LOCK WAIT");
        // The statements put the ids where they belong.
        assert!(SessionSource::Threads.waiters(&[]).contains("IN (0)"));
        assert!(
            SessionSource::Threads
                .waiters(&[9, 11])
                .contains("IN (9, 11)")
        );
        assert!(!SessionSource::Threads.waiters(&[]).contains("INNODB_TRX"));
        assert!(
            SessionSource::Processlist
                .waiters(&[])
                .contains("INNODB_TRX")
        );
        assert!(
            SessionSource::Processlist
                .candidates(7)
                .contains("INTERVAL 7 SECOND")
        );
    }

    #[test]
    fn sources_best_first_and_how_to_get_a_better_one() {
        let r = |a: &str, b: Option<&str>, c: Option<&str>| row(&[Some(a), b, c]);
        assert_eq!(
            pick_source(Some(&r("1", Some("YES"), None))),
            MetadataSource::PerformanceSchema
        );
        assert_eq!(
            pick_source(Some(&r("1", Some("NO"), Some("ACTIVE")))),
            MetadataSource::MetadataLockInfo
        );
        let MetadataSource::Processlist { better } = pick_source(Some(&r("0", None, None))) else {
            panic!()
        };
        assert!(
            better.contains("INSTALL SONAME 'metadata_lock_info'"),
            "{better}"
        );
        let MetadataSource::Processlist { better } = pick_source(Some(&r("1", Some("NO"), None)))
        else {
            panic!()
        };
        assert!(better.contains("setup_instruments"), "{better}");
        assert!(is_ddl("alter table t add x int"));
        assert!(!is_ddl("SELECT * FROM t"));
    }
}
