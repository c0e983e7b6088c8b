//! Who blocks whom (issue 33: PD217–PD220) with real sessions on real servers: `lock118`
//! (MariaDB 11.8, performance_schema on, its metadata-lock instrument off as by default) and
//! `lock1011` (10.11, performance_schema off), started by tests/run.sh for this file alone.
//!
//! - (a) one transaction `SELECT … FOR UPDATE` then idle, three sessions waiting for its row:
//!   PD217 and PD220 fail naming the idle session, the agent exports it as the blocker, and
//!   after the `ROLLBACK` both pass within two sample intervals;
//! - (b) a long `SELECT SLEEP(…)` inside a transaction on a table, an `ALTER TABLE` behind it,
//!   ten `SELECT`s behind the `ALTER`: PD219 fails naming the `ALTER` and the holder — from
//!   PROCESSLIST alone (probable), then from the better source the finding names
//!   (performance_schema's instrument on 11.8, the `metadata_lock_info` plugin on 10.11) — and
//!   the `KILL` it prints clears it;
//! - (c) two sessions updating two rows in opposite orders, in a loop: PD218 fails with both
//!   statements of the last deadlock, literals masked;
//! - without the PROCESS privilege the lock rules say `insufficient_data` naming it.
//!
//! (d), a healthy sysbench run on which every lock rule passes, is `no_false_alarms.rs`.
//! Each server's scenarios run one at a time (`server_lock`): a queue of one would show in
//! another's verdicts.

use std::{
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use mysql_async::{Conn, prelude::Queryable};
use serde_json::Value;

use crate::support::*;
use crate::watcher::*;

fn server_lock(name: &str) -> MutexGuard<'static, ()> {
    static L118: Mutex<()> = Mutex::new(());
    static L1011: Mutex<()> = Mutex::new(());
    let m = if name == "lock118" { &L118 } else { &L1011 };
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn id(c: &mut Conn) -> u64 {
    c.query_first::<u64, _>("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap()
}

/// A statement left running on its own connection (it blocks): the connection and the task.
fn spawn_blocked(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    setup: &'static [&'static str],
    sql: String,
) -> tokio::task::JoinHandle<Result<(), String>> {
    let server = server.clone();
    rt.spawn(async move {
        let mut c = conn(&server).await;
        for s in setup {
            c.query_drop(*s).await.map_err(|e| format!("{s}: {e}"))?;
        }
        let r = c.query_drop(&sql).await.map_err(|e| format!("{sql}: {e}"));
        let _ = c.disconnect().await;
        r
    })
}

fn summary(report: &Value, code: &str) -> String {
    check(report, code)["summary"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn doctor(server: &Server) -> Value {
    doctor_json(
        &server.root_url(),
        &["--sample-window", "0", "--no-probe", "--statements", "0"],
    )
    .json()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn schema(rt: &tokio::runtime::Runtime, server: &Server) {
    rt.block_on(async {
        let mut c = conn(server).await;
        exec(
            &mut c,
            &[
                "CREATE DATABASE IF NOT EXISTS lk",
                "CREATE TABLE IF NOT EXISTS lk.r (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
                "INSERT IGNORE INTO lk.r VALUES (1, 0), (2, 0)",
                "CREATE TABLE IF NOT EXISTS lk.m (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
                "INSERT IGNORE INTO lk.m VALUES (1, 0), (2, 0)",
            ],
        )
        .await;
        let _ = c.disconnect().await;
    });
}

fn row_lock_queue(name: &str) {
    let server = Server::get(name);
    let _one = server_lock(name);
    let rt = rt();
    schema(&rt, &server);
    let watcher = Watcher::start(&server);
    // (a) The blocker: a row locked, then nothing.
    let (mut blocker, blocker_id) = rt.block_on(async {
        let mut c = conn(&server).await;
        let id = id(&mut c).await;
        exec(
            &mut c,
            &["BEGIN", "SELECT * FROM lk.r WHERE id = 1 FOR UPDATE"],
        )
        .await;
        (c, id)
    });
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            spawn_blocked(
                &rt,
                &server,
                &["SET SESSION innodb_lock_wait_timeout = 300"],
                format!("UPDATE lk.r SET v = v + {} WHERE id = 1", i + 1),
            )
        })
        .collect();
    let (_, body) = watcher.until(&["PD217", "PD220"], "fail", Duration::from_secs(90));
    let report = watcher.report();
    let pd220 = summary(&report, "PD220");
    assert!(
        pd220.starts_with(&format!("connection {blocker_id} ("))
            && pd220.contains("idle in its transaction"),
        "PD220 must name the idle session {blocker_id}: {pd220}"
    );
    let pd217 = summary(&report, "PD217");
    assert!(
        pd217.contains("3 sessions wait for a row lock now")
            && pd217.contains(&format!("blocked by connection {blocker_id} (")),
        "PD217: {pd217}"
    );
    let rem = check(&report, "PD220")["remediation"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(rem.starts_with(&format!("KILL {blocker_id};")), "{rem}");
    // The agent names the blocker while the queue exists.
    assert!(
        body.lines()
            .any(|l| l.starts_with("powerdiag_mariadb_lock_blocker_info{")
                && l.contains(&format!("thread_id=\"{blocker_id}\""))
                && l.contains("command=\"idle in transaction\"")
                && l.ends_with(" 3.0")),
        "no blocker series for {blocker_id}:\n{}",
        body.lines()
            .filter(|l| l.contains("lock"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        body.lines()
            .any(|l| l == "powerdiag_mariadb_lock_waiting_sessions{kind=\"row\"} 3.0"),
        "{}",
        body.lines()
            .filter(|l| l.contains("lock"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // doctor shows the same queue as a tree with the KILL line.
    let d = doctor(&server);
    let q = &d["blocking"]["queues"][0];
    assert_eq!(q["blocker"]["id"], blocker_id, "{:#}", d["blocking"]);
    assert_eq!(q["queued"], 3, "{:#}", d["blocking"]);
    assert!(
        d["blocking"]["commands"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("KILL {blocker_id};")),
        "{:#}",
        d["blocking"]
    );
    // The fix: the blocker's transaction ends; the waiters run.
    rt.block_on(async {
        blocker.query_drop("ROLLBACK").await.unwrap();
    });
    for w in waiters {
        rt.block_on(w).unwrap().unwrap();
    }
    let after = watcher.after_fix(&["PD217", "PD220"], Duration::from_secs(6));
    after.assert_cleared();
    let (got, body) = watcher.until(&["PD220"], "pass", Duration::from_secs(10));
    assert!(
        !body.contains("powerdiag_mariadb_lock_blocker_info{"),
        "the blocker series must go with the queue: {got:?}"
    );
    rt.block_on(async {
        let _ = blocker.disconnect().await;
    });
}

#[test]
fn an_idle_transaction_holding_rows_fails_pd217_and_pd220_until_it_ends_on_11_8() {
    row_lock_queue("lock118");
}

#[test]
fn an_idle_transaction_holding_rows_fails_pd217_and_pd220_until_it_ends_on_10_11() {
    row_lock_queue("lock1011");
}

/// A pile-up on `lk.m`: the holder's transaction (a read, then a long `SELECT SLEEP`), an
/// `ALTER TABLE` behind it, ten `SELECT`s behind the `ALTER`.
struct Pileup {
    holder_id: u64,
    column: String,
    tasks: Vec<tokio::task::JoinHandle<Result<(), String>>>,
}

fn pile_up(rt: &tokio::runtime::Runtime, server: &Server, n: u32) -> Pileup {
    let (holder_id, holder) = rt.block_on(async {
        let mut c = conn(server).await;
        let id = id(&mut c).await;
        exec(&mut c, &["BEGIN", "SELECT COUNT(*) FROM lk.m"]).await;
        let task = tokio::spawn(async move {
            // Ended by the KILL.
            let _ = c.query_drop("SELECT SLEEP(600)").await;
            Ok(())
        });
        (id, task)
    });
    let column = format!("c{}_{n}", std::process::id());
    let mut tasks = vec![holder];
    tasks.push(spawn_blocked(
        rt,
        server,
        &["SET SESSION lock_wait_timeout = 600"],
        format!("ALTER TABLE lk.m ADD COLUMN {column} INT"),
    ));
    std::thread::sleep(Duration::from_millis(500));
    tasks.extend((0..10).map(|_| spawn_blocked(rt, server, &[], "SELECT * FROM lk.m".into())));
    Pileup {
        holder_id,
        column,
        tasks,
    }
}

/// The fix the finding prints: `KILL` the holder; the `ALTER` and the `SELECT`s then run.
fn kill_holder(rt: &tokio::runtime::Runtime, server: &Server, p: Pileup) {
    rt.block_on(async {
        let mut c = conn(server).await;
        exec(&mut c, &[&format!("KILL {}", p.holder_id)]).await;
        let _ = c.disconnect().await;
    });
    for t in p.tasks {
        rt.block_on(t).unwrap().unwrap();
    }
    rt.block_on(async {
        let mut c = conn(server).await;
        exec(
            &mut c,
            &[&format!("ALTER TABLE lk.m DROP COLUMN {}", p.column)],
        )
        .await;
        let _ = c.disconnect().await;
    });
}

/// (b) on `name`: first from PROCESSLIST alone, then with the better source `better` makes
/// available (`source`: how the report names it), which `undo` takes away again.
fn metadata_pileup(name: &str, better: &[&str], source: &str, undo: &[&str]) {
    let server = Server::get(name);
    let _one = server_lock(name);
    let rt = rt();
    schema(&rt, &server);
    // As the server starts (a failed run may have left the better source on).
    rt.block_on(async {
        let mut c = conn(&server).await;
        exec(&mut c, undo).await;
        let _ = c.disconnect().await;
    });
    let watcher = Watcher::start(&server);
    let p = pile_up(&rt, &server, 1);
    watcher.until(&["PD219"], "fail", Duration::from_secs(60));
    let report = watcher.report();
    let pd219 = summary(&report, "PD219");
    assert!(
        pd219.starts_with("11 sessions queued on a metadata lock")
            && pd219.contains(&format!("probably held by connection {} (", p.holder_id)),
        "PD219 from PROCESSLIST alone: {pd219}"
    );
    let evidence = check(&report, "PD219")["evidence"].to_string();
    assert!(
        evidence.contains(&format!("ALTER TABLE lk.m ADD COLUMN {} INT", p.column)),
        "{evidence}"
    );
    let rem = check(&report, "PD219")["remediation"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(rem.starts_with(&format!("KILL {};", p.holder_id)), "{rem}");
    assert!(
        rem.contains("To name the holder for certain next time"),
        "{rem}"
    );
    kill_holder(&rt, &server, p);
    watcher
        .after_fix(&["PD219"], Duration::from_secs(6))
        .assert_cleared();
    // The better source, as the finding says: the holder is then read, not inferred.
    rt.block_on(async {
        let mut c = conn(&server).await;
        exec(&mut c, better).await;
        let _ = c.disconnect().await;
    });
    let p = pile_up(&rt, &server, 2);
    let reached = crate::agent::eventually(Duration::from_secs(30), || {
        summary(&doctor(&server), "PD219").starts_with("11 sessions queued")
    });
    let d = doctor(&server);
    let s = summary(&d, "PD219");
    assert!(
        reached && s.contains(&format!("; held by connection {} (", p.holder_id)),
        "PD219 with {source}: {s}\n{:#}",
        d["blocking"]
    );
    assert_eq!(
        d["blocking"]["metadata_source"]
            .as_str()
            .unwrap_or_default(),
        source,
        "{:#}",
        d["blocking"]
    );
    kill_holder(&rt, &server, p);
    rt.block_on(async {
        let mut c = conn(&server).await;
        exec(&mut c, undo).await;
        let _ = c.disconnect().await;
    });
}

#[test]
fn an_alter_behind_a_long_select_piles_up_pd219_on_11_8() {
    metadata_pileup(
        "lock118",
        &[
            "UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'",
        ],
        "performance_schema.metadata_locks",
        &[
            "UPDATE performance_schema.setup_instruments SET ENABLED = 'NO', TIMED = 'NO' WHERE NAME = 'wait/lock/metadata/sql/mdl'",
        ],
    );
}

#[test]
fn an_alter_behind_a_long_select_piles_up_pd219_on_10_11() {
    metadata_pileup(
        "lock1011",
        &["INSTALL SONAME 'metadata_lock_info'"],
        "information_schema.METADATA_LOCK_INFO",
        &["UNINSTALL SONAME IF EXISTS 'metadata_lock_info'"],
    );
}

/// (c) Two sessions update rows 1 and 2 in opposite orders until stopped; returns how many
/// deadlocks each saw.
fn deadlock_storm(name: &str) {
    let server = Server::get(name);
    let _one = server_lock(name);
    let rt = rt();
    schema(&rt, &server);
    let watcher = Watcher::start(&server);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loops: Vec<_> = [(1, 2, "aaa-secret"), (2, 1, "bbb-secret")]
        .into_iter()
        .map(|(first, second, tag)| {
            let server = server.clone();
            let stop = stop.clone();
            rt.spawn(async move {
                let mut c = conn(&server).await;
                let mut deadlocks = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r: Result<(), mysql_async::Error> = async {
                        c.query_drop("BEGIN").await?;
                        c.query_drop(format!(
                            "UPDATE lk.r SET v = v + 1 WHERE id = {first} AND '{tag}' <> ''"
                        ))
                        .await?;
                        c.query_drop("DO SLEEP(0.05)").await?;
                        c.query_drop(format!(
                            "UPDATE lk.r SET v = v + 1 WHERE id = {second} AND '{tag}' <> ''"
                        ))
                        .await?;
                        c.query_drop("COMMIT").await
                    }
                    .await;
                    if let Err(e) = r {
                        assert!(e.to_string().contains("1213"), "not a deadlock: {e}");
                        deadlocks += 1;
                        let _ = c.query_drop("ROLLBACK").await;
                    }
                }
                let _ = c.disconnect().await;
                deadlocks
            })
        })
        .collect();
    watcher.until(&["PD218"], "fail", Duration::from_secs(90));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen: u64 = loops.into_iter().map(|l| rt.block_on(l).unwrap()).sum();
    assert!(seen >= 10, "only {seen} deadlocks");
    let report = watcher.report();
    let e = check(&report, "PD218")["evidence"].to_string();
    assert!(
        e.contains("UPDATE lk.r SET v = v + ? WHERE id = ? AND ? <> ?"),
        "both statements, literals masked: {e}"
    );
    assert!(
        e.contains("(1) connection") && e.contains("(2) connection"),
        "{e}"
    );
    assert!(e.contains("InnoDB rolled back transaction"), "{e}");
    assert!(!e.contains("secret"), "a literal leaked: {e}");
    let snapshot = crate::agent::get(watcher.agent.port, "/api/v1/snapshot")
        .map(|(_, _, b)| b)
        .unwrap_or_default();
    assert!(
        !snapshot.contains("secret"),
        "a literal leaked into the snapshot"
    );
}

#[test]
fn opposite_lock_orders_in_a_loop_fail_pd218_with_both_statements_on_11_8() {
    deadlock_storm("lock118");
}

#[test]
fn opposite_lock_orders_in_a_loop_fail_pd218_with_both_statements_on_10_11() {
    deadlock_storm("lock1011");
}

/// Row 2 of `lk.r` locked by a transaction left idle, and one `UPDATE` waiting for it.
fn one_waiter(
    rt: &tokio::runtime::Runtime,
    server: &Server,
) -> (Conn, tokio::task::JoinHandle<Result<(), String>>) {
    let blocker = rt.block_on(async {
        let mut c = conn(server).await;
        exec(
            &mut c,
            &["BEGIN", "SELECT * FROM lk.r WHERE id = 2 FOR UPDATE"],
        )
        .await;
        c
    });
    let waiter = spawn_blocked(
        rt,
        server,
        &["SET SESSION innodb_lock_wait_timeout = 300"],
        "UPDATE lk.r SET v = v + 1 WHERE id = 2".into(),
    );
    (blocker, waiter)
}

/// The fix: the blocker rolls back; the waiter runs; the blocker disconnects.
fn release(
    rt: &tokio::runtime::Runtime,
    mut blocker: Conn,
    waiter: tokio::task::JoinHandle<Result<(), String>>,
) {
    rt.block_on(async { blocker.query_drop("ROLLBACK").await.unwrap() });
    rt.block_on(waiter).unwrap().unwrap();
    rt.block_on(async {
        let _ = blocker.disconnect().await;
    });
}

#[test]
fn without_process_the_lock_rules_name_the_grant() {
    let server = Server::get("lock118");
    let _one = server_lock("lock118");
    let rt = rt();
    schema(&rt, &server);
    rt.block_on(async {
        let mut c = conn(&server).await;
        exec(
            &mut c,
            &[
                "CREATE USER IF NOT EXISTS 'nolock'@'%' IDENTIFIED BY 'nolock-pw'",
                "GRANT SELECT ON lk.* TO 'nolock'@'%'",
            ],
        )
        .await;
        let _ = c.disconnect().await;
    });
    let args = ["--sample-window", "0", "--no-probe", "--statements", "0"];
    // Nothing can wait (the status read, which needs no grant, says so): nothing to read.
    let quiet = doctor_json(&server.url("nolock", "nolock-pw"), &args).json();
    assert_eq!(
        status(&quiet, "PD219"),
        "pass",
        "{:#}",
        check(&quiet, "PD219")
    );
    // A session waits: who holds it needs PROCESS.
    let (blocker, waiter) = one_waiter(&rt, &server);
    let mut d = Value::Null;
    let waited = crate::agent::eventually(Duration::from_secs(15), || {
        d = doctor_json(&server.url("nolock", "nolock-pw"), &args).json();
        status(&d, "PD219") == "insufficient_data"
    });
    release(&rt, blocker, waiter);
    assert!(waited, "{:#}", check(&d, "PD219"));
    for code in ["PD217", "PD219", "PD220"] {
        assert_eq!(
            status(&d, code),
            "insufficient_data",
            "{code}: {:#}",
            check(&d, code)
        );
        let s = summary(&d, code);
        assert!(s.contains("GRANT PROCESS ON *.*"), "{code}: {s}");
    }
    assert!(
        d["blocking"]["unavailable"]
            .as_str()
            .unwrap_or_default()
            .contains("PROCESS"),
        "{:#}",
        d["blocking"]
    );
}

/// The budget: with nothing waiting the lock collection adds no statement to the agent's
/// steady sample (the status read alone); with a row-lock queue it reads the chain and the
/// sessions of both sides — two statements — and stops again after the fix.
#[test]
fn the_lock_read_costs_nothing_while_nothing_waits() {
    let server = Server::get("lock1011");
    let _one = server_lock("lock1011");
    let rt = rt();
    schema(&rt, &server);
    let agent = crate::agent::start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nvariables_refresh = \"1h\"\n[probe]\nenabled = false\n[statements]\nenabled = false\n",
    );
    let statements = || {
        crate::agent::get(agent.port, "/metrics")
            .and_then(|(_, _, body)| crate::agent::metric(&body, "powerdiag_sample_sql_statements"))
    };
    assert!(
        crate::agent::eventually(Duration::from_secs(15), || statements() == Some(1.0)),
        "nothing waits, yet the steady sample is not the status read alone: {:?}",
        statements()
    );
    let (blocker, waiter) = one_waiter(&rt, &server);
    assert!(
        crate::agent::eventually(Duration::from_secs(15), || statements() == Some(3.0)),
        "with a queue the sample is not the status read and two lock reads: {:?}",
        statements()
    );
    release(&rt, blocker, waiter);
    assert!(
        crate::agent::eventually(Duration::from_secs(15), || statements() == Some(1.0)),
        "after the fix the sample is not the status read alone again: {:?}",
        statements()
    );
}
