//! Replication (issue 34, PD221 replication-stopped) on real servers: a GTID primary and its
//! replica for 11.8 (`rp118` → `rr118`) and for 10.11 (`rp1011` → `rr1011`), owned by this
//! file (tests/run.sh starts them with binary logs and server ids). The replica is pointed at
//! its primary's current GTID position here. Healthy → pass (and not applicable on the
//! primary); `STOP REPLICA SQL_THREAD` → fail, and the printed `START REPLICA` clears it — for
//! doctor, and for an agent within two samples; a row written on the replica and then on the
//! primary → fail with the duplicate-key error and the GTID to skip only after checking, and
//! the replica's row made what the primary's was plus `START REPLICA` → pass. An agent on the
//! primary (no replication connection) sends `SHOW ALL REPLICAS STATUS` once, not per sample;
//! there, with a 4 KiB binary log cache, transactions of 8 KiB rows fail PD223
//! binlog-cache-spills, and the cache it prints clears it within two samples. PD222 (lag and
//! its cause), PD224 (semi-sync) and multi-source (a second named connection) follow, each
//! described at its function.

use std::time::{Duration, Instant};

use mysql_async::{Conn, prelude::Queryable};
use serde_json::Value;

use crate::support::*;
use crate::watcher::{Watcher, conn, exec, explain, global_status};

fn doctor(server: &Server) -> Value {
    doctor_json(
        &server.root_url(),
        &["--sample-window", "0", "--no-probe", "--statements", "0"],
    )
    .json()
}

fn doctor_text(server: &Server) -> String {
    let out = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", server.root_url())
        .args([
            "doctor",
            "--sample-window",
            "0",
            "--no-probe",
            "--statements",
            "0",
            "--color",
            "never",
        ]));
    out.stdout
}

/// doctor's JSON report as text (a snapshot `diff` reads).
fn doctor_text_json(server: &Server) -> String {
    doctor_json(
        &server.root_url(),
        &["--sample-window", "0", "--no-probe", "--statements", "0"],
    )
    .stdout
}

/// One column of the replica's default connection (`SHOW REPLICA STATUS`).
async fn replica_field(c: &mut Conn, name: &str) -> String {
    let row: Option<mysql_async::Row> = c.query_first("SHOW REPLICA STATUS").await.unwrap();
    let Some(row) = row else {
        return String::new();
    };
    let i = row
        .columns_ref()
        .iter()
        .position(|col| col.name_str() == name)
        .unwrap_or_else(|| panic!("no column {name} in SHOW REPLICA STATUS"));
    row.get_opt::<String, usize>(i)
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Polls `f` every 100 ms for up to 30 s.
async fn wait_for(what: &str, f: impl AsyncFnMut() -> bool) {
    wait_up_to(Duration::from_secs(30), what, f).await
}

/// Polls `f` every 100 ms for up to `limit`.
async fn wait_up_to(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let t0 = Instant::now();
    while !f().await {
        assert!(t0.elapsed() < limit, "waited {limit:?} for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn com_show_slave_status(c: &mut Conn) -> u64 {
    let v: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_show_slave_status'")
        .await
        .unwrap();
    v.expect("Com_show_slave_status").1
}

fn scenario(primary: &str, replica: &str, second: Option<&str>) {
    let p = Server::get(primary);
    let r = Server::get(replica);
    block_on(async {
        let mut pc = conn(&p).await;
        let mut rc = conn(&r).await;
        exec(
            &mut rc,
            &[
                "STOP ALL REPLICAS",
                "RESET REPLICA ALL",
                "DROP DATABASE IF EXISTS pd_repl",
            ],
        )
        .await;
        exec(&mut pc, &["DROP DATABASE IF EXISTS pd_repl"]).await;
        let pos: String = pc
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .unwrap()
            .unwrap();
        exec(
            &mut rc,
            &[
                &format!("SET GLOBAL gtid_slave_pos = '{pos}'"),
                &format!(
                    "CHANGE MASTER TO master_host = '127.0.0.1', master_port = {}, master_user = 'root', master_password = '{}', master_use_gtid = slave_pos",
                    p.port,
                    Server::root_password()
                ),
                "START REPLICA",
            ],
        )
        .await;
        exec(
            &mut pc,
            &[
                "CREATE DATABASE pd_repl",
                "CREATE TABLE pd_repl.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                "INSERT INTO pd_repl.t VALUES (1, 1)",
            ],
        )
        .await;
        wait_for("the first row on the replica", async || {
            let n: Option<u64> = rc
                .query_first(
                    "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'pd_repl'",
                )
                .await
                .unwrap();
            n == Some(1)
        })
        .await;
    });

    // Healthy.
    let report = doctor(&r);
    let pd221 = check(&report, "PD221");
    assert_eq!(pd221["status"], "pass", "{pd221:#}");
    assert_eq!(
        pd221["summary"], "1 replication connection running (IO and SQL threads)",
        "{pd221:#}"
    );
    let text = doctor_text(&r);
    let line = format!(
        "  replication: the default connection from 127.0.0.1:{}: IO Yes, SQL Yes",
        p.port
    );
    assert!(text.contains(&line), "{text}");
    assert_eq!(status(&doctor(&p), "PD221"), "not_applicable");
    let text = doctor_text(&p);
    assert!(
        text.contains(
            "  replication: primary: 1 replica(s) connected (Slaves_connected), binlog_format ROW"
        ),
        "{text}"
    );
    // diff names the role: the primary is no replica, the replica copies from it.
    let dir = tempfile::tempdir().unwrap();
    let (pa, ra) = (
        dir.path().join("primary.json"),
        dir.path().join("replica.json"),
    );
    std::fs::write(&pa, doctor_text_json(&p)).unwrap();
    std::fs::write(&ra, doctor_text_json(&r)).unwrap();
    let d = run(powerdiag()
        .args(["diff", "--format", "json"])
        .arg(&pa)
        .arg(&ra));
    let d: Value = serde_json::from_str(&d.stdout).unwrap_or_else(|e| panic!("{e}: {}", d.stdout));
    let role = d["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["topic"] == "replication role")
        .unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(
        role["a"], "not a replica; primary of 1 replica(s)",
        "{role:#}"
    );
    assert_eq!(
        role["b"],
        format!(
            "replica of 127.0.0.1:{} (IO Yes, SQL Yes, parallel optimistic)",
            p.port
        ),
        "{role:#}"
    );

    // The SQL thread stopped: doctor, then an agent, fail; the printed statement clears both.
    let watcher = Watcher::start(&r);
    watcher.until(&["PD221"], "pass", Duration::from_secs(30));
    block_on(async { exec(&mut conn(&r).await, &["STOP REPLICA SQL_THREAD"]).await });
    let report = doctor(&r);
    let pd221 = check(&report, "PD221");
    assert_eq!(pd221["status"], "fail", "{pd221:#}");
    assert_eq!(pd221["severity"], "critical", "{pd221:#}");
    assert_eq!(
        pd221["summary"],
        "replication stopped on the default connection: the SQL thread is stopped",
        "{pd221:#}"
    );
    let fix = pd221["remediation"].as_str().unwrap();
    assert!(fix.contains("`START REPLICA;`"), "{fix}");
    let (_, body) = watcher.until(&["PD221"], "fail", Duration::from_secs(30));
    let sql_thread = "powerdiag_mariadb_replication_thread_running{connection=\"\",thread=\"sql\"}";
    assert!(body.contains(&format!("{sql_thread} 0")), "{body}");
    assert!(
        body.contains(
            "powerdiag_mariadb_replication_thread_running{connection=\"\",thread=\"io\"} 1"
        ),
        "{body}"
    );
    assert!(
        !body.contains("powerdiag_mariadb_replication_lag_seconds{"),
        "no lag while the SQL thread is stopped: {body}"
    );
    block_on(async { exec(&mut conn(&r).await, &["START REPLICA"]).await });
    watcher
        .after_fix(&["PD221"], Duration::from_secs(4))
        .assert_cleared();
    let (_, body) = watcher.until(&["PD221"], "pass", Duration::from_secs(10));
    assert!(body.contains(&format!("{sql_thread} 1")), "{body}");
    assert!(
        body.contains("powerdiag_mariadb_replication_lag_seconds{connection=\"\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("powerdiag_mariadb_replication_sql_delay_seconds{connection=\"\"} 0"),
        "{body}"
    );
    assert_eq!(status(&doctor(&r), "PD221"), "pass");
    drop(watcher);

    // A row written on the replica, then the same key on the primary: error 1062.
    block_on(async {
        let mut rc = conn(&r).await;
        exec(&mut rc, &["INSERT INTO pd_repl.t VALUES (100, 0)"]).await;
        exec(
            &mut conn(&p).await,
            &["INSERT INTO pd_repl.t VALUES (100, 1)"],
        )
        .await;
        wait_for("the duplicate-key error on the replica", async || {
            replica_field(&mut rc, "Last_SQL_Errno").await == "1062"
        })
        .await;
    });
    let report = doctor(&r);
    let pd221 = check(&report, "PD221");
    let text = explain(&report, &["PD221"]);
    assert_eq!(pd221["status"], "fail", "{text}");
    assert!(
        pd221["summary"]
            .as_str()
            .unwrap()
            .starts_with("replication stopped on the default connection: the SQL thread is stopped: SQL error 1062: "),
        "{text}"
    );
    let fix = pd221["remediation"].as_str().unwrap();
    assert!(
        fix.contains("Compare the row the error names on both servers"),
        "{text}"
    );
    assert!(!fix.contains("sql_slave_skip_counter"), "{text}");
    // The server's error names no GTID: the statement printed to find it, run on the
    // primary, names the failed transaction's.
    let find = fix
        .split('`')
        .find(|p| p.starts_with("SHOW BINLOG EVENTS IN "))
        .unwrap_or_else(|| panic!("no SHOW BINLOG EVENTS in the fix: {text}"));
    assert!(
        fix.contains("SET GLOBAL gtid_slave_pos = 'd-s-n'"),
        "{text}"
    );
    let info: String = block_on(async {
        let row: mysql_async::Row = conn(&p).await.query_first(find).await.unwrap().expect(find);
        row.get("Info").unwrap()
    });
    assert!(
        info.starts_with("BEGIN GTID 0-1-"),
        "{find} on the primary: {info}"
    );
    // The fix it prints first: the replica's row as the primary's was before the event
    // (absent), then START REPLICA; the event applies.
    block_on(async {
        let mut rc = conn(&r).await;
        exec(
            &mut rc,
            &["DELETE FROM pd_repl.t WHERE id = 100", "START REPLICA"],
        )
        .await;
        wait_for("the primary's row on the replica", async || {
            let v: Option<i64> = rc
                .query_first("SELECT v FROM pd_repl.t WHERE id = 100")
                .await
                .unwrap();
            v == Some(1)
        })
        .await;
    });
    assert_eq!(status(&doctor(&r), "PD221"), "pass");

    lag(&p, &r);
    semisync(&p, &r);
    if let Some(second) = second {
        multi_source(&Server::get(second), &r);
    }

    // No replication connection: an agent sends SHOW ALL REPLICAS STATUS at its first sample
    // only (the status read's Com_change_master/Com_start_slave say nothing changed).
    let watcher = Watcher::start(&p);
    let (_, mut body) = watcher.until(&["PD221"], "not_applicable", Duration::from_secs(30));
    // The replica's IO thread may still be reconnecting after the semi-sync step's restart.
    let t0 = std::time::Instant::now();
    while !body.contains("powerdiag_mariadb_replicas_connected 1")
        && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(crate::watcher::INTERVAL);
        body = watcher.read(&[]).map(|(_, b)| b).unwrap_or_default();
    }
    assert!(
        body.contains("powerdiag_mariadb_replicas_connected 1"),
        "{body}"
    );
    let before = block_on(async { com_show_slave_status(&mut conn(&p).await).await });
    std::thread::sleep(crate::watcher::INTERVAL * 3);
    let after = block_on(async { com_show_slave_status(&mut conn(&p).await).await });
    assert_eq!(
        after, before,
        "SHOW ALL REPLICAS STATUS was sent again on a server that is no replica"
    );

    // PD223: with the smallest binary log cache (4 KiB), transactions of 8 KiB rows spill to
    // a temporary file; the cache the finding prints stops it within two samples.
    block_on(async {
        exec(
            &mut conn(&p).await,
            &[
                "SET GLOBAL binlog_cache_size = 4096",
                "CREATE TABLE pd_repl.big (id INT AUTO_INCREMENT PRIMARY KEY, b TEXT) ENGINE=InnoDB",
            ],
        )
        .await
    });
    let load = Load::start(&p);
    watcher.until(&["PD223"], "fail", Duration::from_secs(60));
    let report = watcher.report();
    let pd223 = check(&report, "PD223");
    let fix = pd223["remediation"].as_str().unwrap();
    let set = fix
        .lines()
        .find(|l| l.starts_with("SET GLOBAL binlog_cache_size = "))
        .unwrap_or_else(|| panic!("no SET GLOBAL in {pd223:#}"));
    assert_eq!(set, "SET GLOBAL binlog_cache_size = 1048576;", "{pd223:#}");
    block_on(async { exec(&mut conn(&p).await, &[set]).await });
    watcher
        .after_fix(&["PD223"], Duration::from_secs(4))
        .assert_cleared();
    drop(load);
    drop(watcher);
}

/// `[rules.thresholds.PD222]` at 3 s of lag: the scenarios below lag a few seconds, not 30.
const LAG_LIMIT: &str = "[rules.thresholds.PD222]\nmax_lag_seconds = 3\n";

/// doctor with a 2 s window (PD222 compares the replica's lag at both ends), judged with
/// [`LAG_LIMIT`].
fn doctor_lag(server: &Server, cfg: &std::path::Path) -> Value {
    let path = cfg.to_str().unwrap();
    doctor_json(
        &server.root_url(),
        &[
            "--sample-window",
            "2s",
            "--no-probe",
            "--statements",
            "0",
            "--config.file",
            path,
        ],
    )
    .json()
}

async fn lag_seconds(c: &mut Conn) -> u64 {
    replica_field(c, "Seconds_Behind_Master")
        .await
        .parse()
        .unwrap_or(0)
}

/// PD222: healthy → pass; a row lock held on the replica while the primary writes → fail
/// naming the session and its `KILL`, which clears it (doctor, and an agent within two
/// samples); a bulk update of a table without a primary key under ROW format → fail naming
/// the table; the primary key the finding asks for → the same update no longer lags.
fn lag(p: &Server, r: &Server) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("powerdiag.toml");
    std::fs::write(&cfg, LAG_LIMIT).unwrap();
    let pd222 = check(&doctor_lag(r, &cfg), "PD222").clone();
    assert_eq!(pd222["status"], "pass", "{pd222:#}");
    assert_eq!(
        pd222["summary"], "1 replication connection within 3 s of lag",
        "{pd222:#}"
    );
    assert_eq!(status(&doctor(p), "PD222"), "not_applicable");

    // A row lock held on the replica: the applier waits for it while the primary writes.
    let watcher = Watcher::start_with(r, LAG_LIMIT);
    watcher.until(&["PD222"], "pass", Duration::from_secs(30));
    let (mut holder, holder_id) = block_on(async {
        let mut h = conn(r).await;
        exec(
            &mut h,
            &["BEGIN", "UPDATE pd_repl.t SET v = 10 WHERE id = 1"],
        )
        .await;
        let id: u64 = h
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        exec(
            &mut conn(p).await,
            &["UPDATE pd_repl.t SET v = 20 WHERE id = 1"],
        )
        .await;
        let mut rc = conn(r).await;
        wait_for("5 s of lag behind the held row", async || {
            lag_seconds(&mut rc).await >= 5
        })
        .await;
        (h, id)
    });
    let report = doctor_lag(r, &cfg);
    let pd222 = check(&report, "PD222");
    let text = explain(&report, &["PD222"]);
    assert_eq!(pd222["status"], "fail", "{text}");
    assert_eq!(pd222["severity"], "warning", "{text}");
    let summary = pd222["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("the default connection is ")
            && summary.contains(&format!(
                "waits for a row lock held on the replica by connection {holder_id} ("
            )),
        "{text}"
    );
    let fix = pd222["remediation"].as_str().unwrap();
    assert!(fix.contains(&format!("`KILL {holder_id};")), "{text}");
    watcher.until(&["PD222"], "fail", Duration::from_secs(30));
    // The fix it prints: end the holder's session.
    block_on(async {
        exec(&mut conn(r).await, &[&format!("KILL {holder_id}")]).await;
        let _ = holder.query_drop("SELECT 1").await;
    });
    watcher
        .after_fix(&["PD222"], Duration::from_secs(4))
        .assert_cleared();
    drop(watcher);
    block_on(async {
        let mut rc = conn(r).await;
        wait_for("the replica to catch up", async || {
            lag_seconds(&mut rc).await == 0
        })
        .await;
    });
    assert_eq!(status(&doctor_lag(r, &cfg), "PD222"), "pass");

    // A table without a primary key, updated in bulk under ROW format: each row event is a
    // full scan on the replica (the rows at the table's end: each scan reads ~19,000 rows).
    let bulk = "UPDATE pd_repl.nokey SET b = b + 1 WHERE a > 18000";
    block_on(async {
        let mut pc = conn(p).await;
        exec(
            &mut pc,
            &[
                "CREATE TABLE pd_repl.nokey (a INT, b INT) ENGINE=InnoDB",
                "INSERT INTO pd_repl.nokey SELECT seq, seq FROM pd_repl.seq_1_to_20000",
            ],
        )
        .await;
        let mut rc = conn(r).await;
        wait_for("the table on the replica", async || {
            lag_seconds(&mut rc).await == 0
        })
        .await;
        exec(&mut pc, &[bulk]).await;
        wait_for("4 s of lag behind the bulk update", async || {
            lag_seconds(&mut rc).await >= 4
        })
        .await;
    });
    let report = doctor_lag(r, &cfg);
    let pd222 = check(&report, "PD222");
    let text = explain(&report, &["PD222"]);
    assert_eq!(pd222["status"], "fail", "{text}");
    assert!(
        pd222["summary"]
            .as_str()
            .unwrap()
            .contains("one row event on pd_repl.nokey for the ")
            && pd222["summary"]
                .as_str()
                .unwrap()
                .contains("pd_repl.nokey has no primary key, so each row of the event is searched by a full scan"),
        "{text}"
    );
    assert!(
        pd222["remediation"]
            .as_str()
            .unwrap()
            .contains("Give pd_repl.nokey a primary key, on the primary"),
        "{text}"
    );
    // The fix: a primary key (on the primary; it replicates). The same update then applies
    // by key: no lag.
    block_on(async {
        let mut rc = conn(r).await;
        // 2,000 row events, each a full scan of 20,000 rows on the replica: ~10 s on an idle
        // machine, several times that beside a busy suite.
        wait_up_to(
            Duration::from_secs(180),
            "the bulk update on the replica",
            async || {
                lag_seconds(&mut rc).await == 0
                    && replica_field(&mut rc, "Slave_SQL_Running_State")
                        .await
                        .contains("waiting for more updates")
            },
        )
        .await;
        exec(
            &mut conn(p).await,
            &[
                "ALTER TABLE pd_repl.nokey ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY",
                bulk,
            ],
        )
        .await;
    });
    let pd222 = check(&doctor_lag(r, &cfg), "PD222").clone();
    assert_eq!(pd222["status"], "pass", "{pd222:#}");
}

/// Multi-source (the 11.8 replica): a second named connection, `second`, from `ms118`, a
/// primary of its own (GTID domain 3, tests/run.sh), beside the default one. Both are reported
/// apart; `second` stopped → PD221 names it alone, with its own `START REPLICA 'second'`,
/// which clears it (doctor and an agent); the metrics carry `connection="second"`.
fn multi_source(p: &Server, r: &Server) {
    block_on(async {
        // The second primary's domain (3) starts where it is now on the replica, whatever an
        // earlier run left there.
        let mut pc = conn(p).await;
        exec(&mut pc, &["DROP DATABASE IF EXISTS pd_ms"]).await;
        let p3: String = pc
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .unwrap()
            .unwrap();
        let mut rc = conn(r).await;
        exec(
            &mut rc,
            &["STOP ALL REPLICAS", "DROP DATABASE IF EXISTS pd_ms"],
        )
        .await;
        let here: String = rc
            .query_first("SELECT @@gtid_slave_pos")
            .await
            .unwrap()
            .unwrap();
        let pos: Vec<&str> = here
            .split(',')
            .filter(|g| !g.is_empty() && !g.starts_with("3-"))
            .chain(p3.split(',').filter(|g| !g.is_empty()))
            .collect();
        exec(
            &mut rc,
            &[
                &format!("SET GLOBAL gtid_slave_pos = '{}'", pos.join(",")),
                &format!(
                    "CHANGE MASTER 'second' TO master_host = '127.0.0.1', master_port = {}, master_user = 'root', master_password = '{}', master_use_gtid = slave_pos",
                    p.port,
                    Server::root_password()
                ),
                "START ALL REPLICAS",
            ],
        )
        .await;
        exec(
            &mut pc,
            &[
                "CREATE DATABASE pd_ms",
                "CREATE TABLE pd_ms.t (id INT PRIMARY KEY) ENGINE=InnoDB",
                "INSERT INTO pd_ms.t VALUES (1)",
            ],
        )
        .await;
        let mut rc = conn(r).await;
        wait_for("both connections running", async || {
            let rows: Vec<mysql_async::Row> = rc.query("SHOW ALL REPLICAS STATUS").await.unwrap();
            rows.len() == 2
                && rows.iter().all(|row| {
                    row.get::<String, &str>("Slave_SQL_Running").as_deref() == Some("Yes")
                        && row.get::<String, &str>("Slave_IO_Running").as_deref() == Some("Yes")
                })
        })
        .await;
    });
    let report = doctor(r);
    let pd221 = check(&report, "PD221");
    assert_eq!(
        pd221["summary"], "2 replication connections running (IO and SQL threads)",
        "{pd221:#}"
    );
    let text = doctor_text(r);
    let line = format!(
        "  replication: connection 'second' from 127.0.0.1:{}: IO Yes, SQL Yes",
        p.port
    );
    assert!(text.contains(&line), "{text}");
    assert!(
        text.contains("  replication: the default connection from 127.0.0.1:"),
        "{text}"
    );
    let watcher = Watcher::start(r);
    watcher.until(&["PD221"], "pass", Duration::from_secs(30));
    block_on(async { exec(&mut conn(r).await, &["STOP REPLICA 'second'"]).await });
    let report = doctor(r);
    let pd221 = check(&report, "PD221");
    assert_eq!(
        pd221["summary"],
        "replication stopped on connection 'second': both threads are stopped (1 of 2 connections stopped)",
        "{pd221:#}"
    );
    let fix = pd221["remediation"].as_str().unwrap();
    assert!(fix.contains("`START REPLICA 'second';`"), "{fix}");
    let (_, body) = watcher.until(&["PD221"], "fail", Duration::from_secs(30));
    for (conn_name, thread, v) in [("second", "sql", 0), ("second", "io", 0), ("", "sql", 1)] {
        let series = format!(
            "powerdiag_mariadb_replication_thread_running{{connection=\"{conn_name}\",thread=\"{thread}\"}} {v}"
        );
        assert!(body.contains(&series), "{series} in {body}");
    }
    block_on(async { exec(&mut conn(r).await, &["START REPLICA 'second'"]).await });
    watcher
        .after_fix(&["PD221"], Duration::from_secs(4))
        .assert_cleared();
    drop(watcher);
    block_on(async {
        exec(
            &mut conn(r).await,
            &["STOP REPLICA 'second'", "RESET REPLICA 'second' ALL"],
        )
        .await
    });
}

/// PD224: semi-sync enabled on the primary with no replica acknowledging → after one commit
/// the primary runs asynchronously: fail (doctor and an agent); the replica-side statements
/// it prints → semi-synchronous again, cleared within two samples.
fn semisync(p: &Server, r: &Server) {
    assert_eq!(status(&doctor(p), "PD224"), "not_applicable");
    let watcher = Watcher::start(p);
    watcher.until(&["PD224"], "not_applicable", Duration::from_secs(30));
    block_on(async {
        let mut pc = conn(p).await;
        exec(
            &mut pc,
            &[
                "SET GLOBAL rpl_semi_sync_master_timeout = 200",
                "SET GLOBAL rpl_semi_sync_master_enabled = ON",
                "INSERT INTO pd_repl.t VALUES (200, 1)",
            ],
        )
        .await;
        assert_eq!(
            global_status(&mut pc, "Rpl_semi_sync_master_status").await,
            "OFF"
        );
    });
    let report = doctor(p);
    let pd224 = check(&report, "PD224");
    let text = explain(&report, &["PD224"]);
    assert_eq!(pd224["status"], "fail", "{text}");
    assert_eq!(pd224["severity"], "critical", "{text}");
    assert_eq!(
        pd224["summary"],
        "semi-sync is enabled but the primary replicates asynchronously now: 0 semi-sync replica(s) connected, commits return without a replica's copy",
        "{text}"
    );
    let fix = pd224["remediation"].as_str().unwrap();
    let statements = fix
        .split('`')
        .find(|s| s.starts_with("SET GLOBAL rpl_semi_sync_slave_enabled = ON;"))
        .unwrap_or_else(|| panic!("no replica-side statements in {text}"))
        .to_owned();
    watcher.until(&["PD224"], "fail", Duration::from_secs(30));
    // The fix it prints, on the replica; the next commit is acknowledged.
    block_on(async {
        let mut rc = conn(r).await;
        for st in statements
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            exec(&mut rc, &[st]).await;
        }
        let mut pc = conn(p).await;
        wait_for("the replica to connect as semi-sync", async || {
            global_status(&mut pc, "Rpl_semi_sync_master_clients").await == "1"
        })
        .await;
        exec(&mut pc, &["INSERT INTO pd_repl.t VALUES (201, 1)"]).await;
        wait_for("semi-sync on the primary", async || {
            exec(&mut pc, &["UPDATE pd_repl.t SET v = v + 1 WHERE id = 201"]).await;
            global_status(&mut pc, "Rpl_semi_sync_master_status").await == "ON"
        })
        .await;
    });
    watcher
        .after_fix(&["PD224"], Duration::from_secs(4))
        .assert_cleared();
    drop(watcher);
    assert_eq!(status(&doctor(p), "PD224"), "pass");
    // Back to asynchronous replication for what follows.
    block_on(async {
        exec(
            &mut conn(p).await,
            &["SET GLOBAL rpl_semi_sync_master_enabled = OFF"],
        )
        .await;
        exec(
            &mut conn(r).await,
            &[
                "SET GLOBAL rpl_semi_sync_slave_enabled = OFF",
                "STOP REPLICA IO_THREAD",
                "START REPLICA IO_THREAD",
            ],
        )
        .await;
    });
}

/// Transactions of one 8 KiB row each, every one on a new connection (a session's binary
/// log cache is sized when it is first used), until dropped.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(server: &Server) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let opts = crate::watcher::opts(server);
        let thread = std::thread::spawn(move || {
            block_on(async {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut c = Conn::new(opts.clone()).await.unwrap();
                    c.query_drop("INSERT INTO pd_repl.big (b) VALUES (REPEAT('x', 8192))")
                        .await
                        .unwrap();
                    c.disconnect().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_118_replica_stops_and_restarts() {
    scenario("rp118", "rr118", Some("ms118"));
}

#[test]
fn a_1011_replica_stops_and_restarts() {
    scenario("rp1011", "rr1011", None);
}

/// An agent whose user lacks REPLICA MONITOR (docs/connecting.md grants it): PD221 names the
/// grant, and the refused `SHOW ALL REPLICAS STATUS` is not sent again every sample — only
/// after a sample whose status read shows a `GRANT` or `REVOKE` (from any session: other tests
/// share the server, so the count of those bounds the re-reads); after the `GRANT` the agent
/// asks once more and PD221 judges.
#[test]
fn without_replica_monitor_the_agent_asks_once_and_again_after_the_grant() {
    let server = Server::m118();
    let admin = |sql: &'static [&'static str]| {
        block_on(async { exec(&mut conn(&server).await, sql).await })
    };
    admin(&[
        "DROP USER IF EXISTS 'pd_norepl'@'127.0.0.1'",
        "CREATE USER 'pd_norepl'@'127.0.0.1' IDENTIFIED BY 'pd-norepl-pw'",
        "GRANT PROCESS ON *.* TO 'pd_norepl'@'127.0.0.1'",
    ]);
    // This user's replica reads (other tests share the server), and every session's grants.
    let counts = || -> (u64, u64) {
        block_on(async {
            let mut c = conn(&server).await;
            let n: Option<(u64, u64)> = c
                .query_first(
                    "SELECT (SELECT CAST(COALESCE(SUM(COUNT_STAR), 0) AS UNSIGNED) \
                       FROM performance_schema.events_statements_summary_by_user_by_event_name \
                       WHERE USER = 'pd_norepl' AND EVENT_NAME = 'statement/sql/show_slave_status'), \
                     (SELECT CAST(SUM(VARIABLE_VALUE) AS UNSIGNED) FROM information_schema.GLOBAL_STATUS \
                       WHERE VARIABLE_NAME IN ('COM_GRANT', 'COM_GRANT_ROLE', 'COM_REVOKE', 'COM_REVOKE_ALL', 'COM_REVOKE_ROLE'))",
                )
                .await
                .unwrap();
            n.unwrap_or_default()
        })
    };
    let agent = crate::agent::start_agent(
        &server.url("pd_norepl", "pd-norepl-pw"),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\n[probe]\nenabled = false\n[statements]\nenabled = false\n",
    );
    let mut report = Value::Null;
    assert!(
        crate::agent::eventually(Duration::from_secs(20), || {
            report = crate::watcher::agent_report(agent.port);
            !report.is_null() && status(&report, "PD221") == "insufficient_data"
        }),
        "{report:#}"
    );
    let why = check(&report, "PD221").to_string();
    assert!(why.contains("GRANT REPLICA MONITOR ON *.*"), "{why}");
    let (asked, grants) = counts();
    assert!(asked >= 1, "the agent never asked");
    std::thread::sleep(Duration::from_secs(5)); // five samples
    let (asked_later, grants_later) = counts();
    assert!(
        asked_later - asked <= grants_later - grants,
        "the refused SHOW ALL REPLICAS STATUS was sent {} more times over five samples with {} grants in between",
        asked_later - asked,
        grants_later - grants
    );
    let kept = crate::watcher::agent_report(agent.port);
    assert_eq!(status(&kept, "PD221"), "insufficient_data", "{kept:#}");
    assert!(
        check(&kept, "PD221")
            .to_string()
            .contains("GRANT REPLICA MONITOR ON *.*"),
        "{kept:#}"
    );

    admin(&["GRANT REPLICA MONITOR ON *.* TO 'pd_norepl'@'127.0.0.1'"]);
    assert!(
        crate::agent::eventually(Duration::from_secs(20), || {
            report = crate::watcher::agent_report(agent.port);
            !report.is_null() && status(&report, "PD221") == "not_applicable"
        }),
        "{report:#}"
    );
    drop(agent);
    admin(&["DROP USER IF EXISTS 'pd_norepl'@'127.0.0.1'"]);
}
