//! The everyday server pitfalls (issue 14: PD205–PD216, PD503) provoked on real servers, then
//! fixed as each finding says, judged over doctor's sample window while a workload runs.
//!
//! Two servers of their own, started by tests/run.sh and used by nothing else (the tests change
//! globals and load them):
//! - `pitsql` (MariaDB 10.11, started with the query cache on, which cannot be switched on at
//!   run time): temporary tables of a few KB under a large GROUP BY (PD208), `thread_cache_size
//!   = 0` under a connect loop (PD210), a 10-table `table_open_cache` over 40 tables (PD211),
//!   the query cache (PD212), a 32 KiB `sort_buffer_size` (PD213), joins on an unindexed column
//!   (PD214);
//! - `pitmem` (MariaDB 11.8): a 16 MiB buffer pool under random reads of an ~80 MB table
//!   (PD205), a 16 MiB redo log under bulk updates (PD206), `max_connections` at the clients
//!   held open (PD209), a transaction held open while others write (PD215), buffered data files
//!   (PD216) and a global `join_buffer_size` that overcommits RAM (PD503).
//!
//! Each provoked state must fail its rule; after the fix (the `SET GLOBAL`s the findings print,
//! an index, `KILL` of the connection PD215 names) the same rules must pass. On `pitsql` one
//! agent, sampling every 2 s, follows the whole sequence with its status history, as in
//! production: fail while provoked; no fail from two sample intervals after the fix on, while
//! the load goes on; and none on the quiet server afterwards (issue 32's "a fail clears after
//! the fix"). The fixed `pitmem` run keeps the bulk updates at a sustainable pace (one batch
//! every 10 s instead of back to back); PD206 passes only over a whole hour, so there it may
//! say `insufficient_data`. PD215's hour is lowered to 3 s through `--config.file`: a test
//! cannot wait an hour.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use mysql_async::{Conn, prelude::Queryable};
use serde_json::Value;

use crate::support::*;
use crate::watcher::*;

/// Background loops until [`Load::stop`]; each returns how many iterations it ran.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<(&'static str, tokio::task::JoinHandle<u64>)>,
}

impl Load {
    fn new() -> Load {
        Load {
            stop: Arc::new(AtomicBool::new(false)),
            tasks: Vec::new(),
        }
    }

    fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    fn spawn(
        &mut self,
        name: &'static str,
        f: impl std::future::Future<Output = u64> + Send + 'static,
    ) {
        self.tasks.push((name, tokio::spawn(f)));
    }

    async fn stop(self) -> Vec<(&'static str, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut out = Vec::new();
        for (name, t) in self.tasks {
            let n = t
                .await
                .unwrap_or_else(|e| panic!("load {name} failed: {e}"));
            out.push((name, n));
        }
        out
    }
}

fn running(stop: &AtomicBool) -> bool {
    !stop.load(Ordering::Relaxed)
}

/// doctor (JSON) run on a blocking thread while the runtime keeps the load going.
async fn doctor_while_loaded(url: String, args: Vec<String>) -> Value {
    let r = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        doctor_json(&url, &a)
    })
    .await
    .unwrap();
    r.json()
}

fn statuses(j: &Value, codes: &[&str]) -> Vec<(String, String)> {
    codes
        .iter()
        .map(|c| ((*c).to_owned(), status(j, c)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// pitsql: temporary tables, threads, table cache, query cache, sorts, joins (MariaDB 10.11)

const SQL_CODES: [&str; 6] = ["PD208", "PD210", "PD211", "PD212", "PD213", "PD214"];

/// Tables of the `pit` schema: `t1` (20,000 rows: 5,000 groups of `b`, 100-byte `pad`), `t2`
/// (2,000 rows, `a` without an index), `m0`..`m39` (10 rows each).
async fn sql_schema(c: &mut Conn) {
    exec(
        c,
        &[
            "DROP DATABASE IF EXISTS pit",
            "CREATE DATABASE pit",
            "USE pit",
            "CREATE TABLE pit.t1 (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, pad CHAR(100) NOT NULL) ENGINE=InnoDB",
            "INSERT INTO pit.t1 SELECT seq, seq % 500, seq % 5000, MD5(seq) FROM seq_1_to_20000",
            "CREATE TABLE pit.t2 (id INT PRIMARY KEY, a INT NOT NULL) ENGINE=InnoDB",
            "INSERT INTO pit.t2 SELECT seq, seq % 500 FROM seq_1_to_2000",
        ],
    )
    .await;
    for j in 0..40 {
        exec(
            c,
            &[
                &format!(
                    "CREATE TABLE pit.m{j} (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"
                ),
                &format!("INSERT INTO pit.m{j} SELECT seq, seq FROM seq_0_to_9"),
            ],
        )
        .await;
    }
}

/// A number no statement text has used before (in this process or, by the clock, an earlier
/// one): it keeps the query cache from answering the application's statements.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() % 1_000_000)
        * 1_000_000;
    base + NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One application connection: a GROUP BY over 3,000 rows, an ORDER BY of 3,000 100-byte rows
/// without an index, a join on `t2.a` and a lookup in each of the 40 small tables. Every
/// statement's text is new (`-u`), so the query cache cannot answer it and each really runs.
async fn sql_app(mut c: Conn, stop: Arc<AtomicBool>) -> u64 {
    let mut i = 0u64;
    while running(&stop) {
        let k = i % 97;
        let u = unique();
        let (lo, hi) = (k * 100, k * 100 + 3000);
        let qs = [
            format!(
                "SELECT b, COUNT(*) FROM pit.t1 WHERE id BETWEEN {lo} AND {hi} AND a > -{u} GROUP BY b"
            ),
            format!(
                "SELECT id FROM pit.t1 WHERE id BETWEEN {lo} AND {hi} AND a > -{u} ORDER BY pad"
            ),
            format!(
                "SELECT COUNT(*) FROM pit.t1 JOIN pit.t2 ON t1.a = t2.a WHERE t1.id < {} AND t1.b > -{u}",
                200 + k
            ),
        ];
        for q in &qs {
            c.query_drop(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        }
        for j in 0..40 {
            let q = format!("SELECT v FROM pit.m{j} WHERE id = {} AND v > -{u}", k % 10);
            c.query_drop(&q)
                .await
                .unwrap_or_else(|e| panic!("{q}: {e}"));
        }
        i += 1;
    }
    let _ = c.disconnect().await;
    i
}

/// A client that connects per request: connect, one statement, disconnect.
async fn connect_loop(server: Server, stop: Arc<AtomicBool>) -> u64 {
    let mut i = 0u64;
    while running(&stop) {
        let mut c = conn(&server).await;
        c.query_drop("DO 1").await.unwrap();
        c.disconnect().await.unwrap();
        i += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    i
}

/// Starts the application (two connections) and the connect loop on new connections, so
/// they get the globals as they are now.
async fn sql_load(server: &Server) -> Load {
    let mut load = Load::new();
    for _ in 0..2 {
        load.spawn("application", sql_app(conn(server).await, load.flag()));
    }
    load.spawn("connect loop", connect_loop(server.clone(), load.flag()));
    load
}

/// The `SET GLOBAL …;` statements a remediation prints, in order.
fn set_globals(remediation: &str) -> Vec<String> {
    remediation
        .lines()
        .flat_map(|l| l.split(';'))
        .map(str::trim)
        .filter(|s| s.starts_with("SET GLOBAL "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn temporary_tables_threads_caches_sorts_and_joins_fail_then_clear_after_the_fix() {
    let server = Server::get("pitsql");
    let _machine = machine_load_lock();
    block_on(async {
        let mut c = conn(&server).await;
        sql_schema(&mut c).await;
        // The pitfalls (globals reach the connections opened after them); the query cache is
        // on from start-up (tests/run.sh).
        exec(
            &mut c,
            &[
                "SET GLOBAL tmp_table_size = 1024",
                "SET GLOBAL max_heap_table_size = 16384",
                "SET GLOBAL thread_cache_size = 0",
                "SET GLOBAL table_open_cache = 10",
                "SET GLOBAL sort_buffer_size = 32768",
                // On again after an earlier run's fix (possible because it started on).
                "SET GLOBAL query_cache_size = 16777216",
                "SET GLOBAL query_cache_type = ON",
                "FLUSH TABLES",
            ],
        )
        .await;
        // One agent watches the whole sequence, keeping its status history throughout.
        let watcher = tokio::task::spawn_blocking({
            let server = server.clone();
            move || Watcher::start(&server)
        })
        .await
        .unwrap();
        let watcher = Arc::new(watcher);
        // A real Prometheus scrapes that agent with the shipped alert rules (every `for:`
        // shortened to 2 s in a copy): the warning alert must fire and then resolve.
        let prom_dir = tempfile::tempdir().unwrap();
        let prom = Arc::new({
            let (dir, port) = (prom_dir.path().to_owned(), watcher.agent.port);
            tokio::task::spawn_blocking(move || {
                crate::prometheus::prometheus_with_alerts(&dir, port, "2s")
            })
            .await
            .unwrap()
        });
        let pd208_alert = |p: &crate::prometheus::Prometheus| {
            crate::prometheus::alerts(p)
                .into_iter()
                .filter(|(name, code, _)| name == "PowerdiagWarningCheckFailing" && code == "PD208")
                .map(|(_, _, state)| state)
                .collect::<Vec<_>>()
        };
        let load = sql_load(&server).await;
        // Past the first iterations (threads created, tables first opened).
        tokio::time::sleep(Duration::from_secs(2)).await;
        let w = Arc::clone(&watcher);
        let agent = tokio::task::spawn_blocking(move || {
            w.until(&SQL_CODES, "fail", Duration::from_secs(90))
        });
        let j = doctor_while_loaded(
            server.root_url(),
            vec!["--no-probe".into(), "--sample-window".into(), "10s".into()],
        )
        .await;
        let (_, metrics) = agent.await.unwrap();
        let got = statuses(&j, &SQL_CODES);
        assert!(
            got.iter().all(|(_, s)| s == "fail"),
            "provoked: {got:?}\n{}",
            explain(&j, &SQL_CODES)
        );
        for m in [
            "powerdiag_mariadb_created_tmp_disk_tables_total",
            "powerdiag_mariadb_threads_created_total",
            "powerdiag_mariadb_table_open_cache_misses_total",
            "powerdiag_mariadb_sort_merge_passes_total",
            "powerdiag_mariadb_select_full_join_total",
            "powerdiag_mariadb_qcache_hits_total",
        ] {
            assert!(
                crate::agent::metric(&metrics, m).is_some(),
                "{m} missing from the agent's metrics"
            );
        }
        // Each finding gives its numbers, its window and its fix.
        let fix = |code: &str| check(&j, code)["remediation"].as_str().unwrap().to_owned();
        for (code, want) in [
            ("PD208", "SET GLOBAL tmp_table_size = "),
            ("PD210", "SET GLOBAL thread_cache_size = "),
            ("PD211", "SET GLOBAL table_open_cache = "),
            ("PD212", "SET GLOBAL query_cache_type = OFF;"),
            ("PD213", "SET GLOBAL sort_buffer_size = 2097152;"),
        ] {
            assert!(fix(code).contains(want), "{code}: {}", fix(code));
        }
        for code in SQL_CODES {
            let c = check(&j, code);
            let ev = c["evidence"].to_string();
            assert!(
                ev.contains("over doctor's ") && ev.contains(" s sample window"),
                "{code} is not judged over the window: {ev}"
            );
            assert!(
                c["summary"].as_str().unwrap().contains("(over the last "),
                "{code}'s summary does not name its window: {c}"
            );
        }

        // Prometheus fires the warning alert for PD208.
        let p = Arc::clone(&prom);
        let fired = tokio::task::spawn_blocking(move || {
            crate::agent::eventually(Duration::from_secs(60), || {
                pd208_alert(&p).iter().any(|s| s == "firing")
            })
        })
        .await
        .unwrap();
        assert!(
            fired,
            "PowerdiagWarningCheckFailing{{code=\"PD208\"}} never fired: {:?}",
            crate::prometheus::alerts(&prom)
        );

        // The fixes, exactly as the findings print them, and the index PD214 asks for; the
        // application reconnects (the globals reach new connections).
        load.stop().await;
        let mut fixes: Vec<String> = ["PD208", "PD210", "PD211", "PD212", "PD213"]
            .iter()
            .flat_map(|code| set_globals(&fix(code)))
            .collect();
        fixes.push("ALTER TABLE pit.t2 ADD INDEX (a)".into());
        let fixes: Vec<&str> = fixes.iter().map(String::as_str).collect();
        exec(&mut c, &fixes).await;
        let load = sql_load(&server).await;
        // Within two sample intervals (and one sample's own time) no verdict fails any more,
        // and none fails again while the load goes on.
        let w = Arc::clone(&watcher);
        let after_fix = tokio::task::spawn_blocking(move || {
            (
                w.after_fix(&SQL_CODES, Duration::from_secs(20)),
                w.read(&SQL_CODES),
            )
        })
        .await
        .unwrap();
        let j = doctor_while_loaded(
            server.root_url(),
            vec!["--no-probe".into(), "--sample-window".into(), "10s".into()],
        )
        .await;
        let ran = load.stop().await;
        assert!(
            ran.iter().all(|(_, n)| *n > 5),
            "the load barely ran: {ran:?}"
        );
        let (after_fix, now) = after_fix;
        after_fix.assert_cleared();
        let (now, _) = now.unwrap();
        // Busy and fixed: each rule decides (PD214: no join without an index for 20 s is too
        // little to show fewer than 250 a day, so it may still say so).
        for (code, st) in &now {
            let ok = st == "pass" || (code == "PD214" && st == "insufficient_data");
            assert!(ok, "agent, fixed and busy: {now:?}");
        }
        for (code, st) in statuses(&j, &SQL_CODES) {
            let ok = st == "pass" || (code == "PD214" && st == "insufficient_data");
            assert!(
                ok,
                "doctor, fixed: {code} {st}\n{}",
                explain(&j, &SQL_CODES)
            );
        }
        // The alert has resolved (the agent stopped failing PD208 well over 20 s ago).
        let p = Arc::clone(&prom);
        let resolved = tokio::task::spawn_blocking(move || {
            crate::agent::eventually(Duration::from_secs(30), || pd208_alert(&p).is_empty())
        })
        .await
        .unwrap();
        assert!(
            resolved,
            "the PD208 alert did not resolve after the fix: {:?}",
            crate::prometheus::alerts(&prom)
        );
        // Quiet: the server idles; the agent must not fall back on the counters since
        // start-up, which hold the provoked minutes.
        let w = Arc::clone(&watcher);
        let now = tokio::task::spawn_blocking(move || w.assert_quiet(&SQL_CODES))
            .await
            .unwrap();
        assert!(
            now.iter()
                .all(|(_, s)| s == "pass" || s == "insufficient_data"),
            "quiet: {now:?}"
        );
        assert!(
            pd208_alert(&prom).is_empty(),
            "the PD208 alert came back on the quiet server: {:?}",
            crate::prometheus::alerts(&prom)
        );
        drop(prom_dir);
        c.disconnect().await.unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// pitmem: buffer pool, redo log, connections, a long transaction, buffered files, memory (11.8)

const MEM_CODES: [&str; 6] = ["PD205", "PD206", "PD209", "PD215", "PD216", "PD503"];

/// Rows of `pit.big`: about 80 MB of data, five times the provoked 16 MiB buffer pool.
const BIG_ROWS: u64 = 250_000;

/// `pit.big` (250,000 rows of 255 bytes) and `pit.small` (1,000 counters), with fresh
/// persistent statistics (PD205 reads the size from them).
async fn mem_schema(c: &mut Conn) {
    exec(
        c,
        &[
            "DROP DATABASE IF EXISTS pit",
            "CREATE DATABASE pit",
            "USE pit",
            "CREATE TABLE pit.big (id INT PRIMARY KEY, pad CHAR(255) NOT NULL) ENGINE=InnoDB",
            &format!("INSERT INTO pit.big SELECT seq, MD5(seq) FROM seq_1_to_{BIG_ROWS}"),
            "CREATE TABLE pit.small (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
            "INSERT INTO pit.small SELECT seq, 0 FROM seq_1_to_1000",
            "ANALYZE TABLE pit.big, pit.small",
        ],
    )
    .await;
}

/// Random point reads over the whole of `pit.big`.
async fn random_reads(mut c: Conn, stop: Arc<AtomicBool>) -> u64 {
    let mut i = 0u64;
    let mut x = unique() | 1;
    while running(&stop) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let id = x % BIG_ROWS + 1;
        c.query_drop(format!("SELECT pad FROM pit.big WHERE id = {id}"))
            .await
            .unwrap();
        i += 1;
    }
    let _ = c.disconnect().await;
    i
}

/// Bulk updates of 2,000 rows at a time, every `pause` (back to back when zero).
async fn bulk_updates(mut c: Conn, stop: Arc<AtomicBool>, pause: Duration) -> u64 {
    let mut i = 0u64;
    while running(&stop) {
        let lo = (i * 2000) % (BIG_ROWS - 2000);
        c.query_drop(format!(
            "UPDATE pit.big SET pad = REPEAT(CHAR(65 + {} % 26), 255) WHERE id BETWEEN {lo} AND {}",
            i,
            lo + 2000
        ))
        .await
        .unwrap();
        i += 1;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    let _ = c.disconnect().await;
    i
}

/// Small committed writes: each adds to the history purge must clean.
async fn small_commits(mut c: Conn, stop: Arc<AtomicBool>) -> u64 {
    let mut i = 0u64;
    while running(&stop) {
        c.query_drop(format!(
            "UPDATE pit.small SET v = v + 1 WHERE id = {}",
            i % 1000 + 1
        ))
        .await
        .unwrap();
        i += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = c.disconnect().await;
    i
}

/// The host's RAM, as the agent reads it (`MemTotal`).
fn mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with("MemTotal:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Waits until the buffer pool has the size asked for (the resize runs in the background).
async fn buffer_pool_is(c: &mut Conn, bytes: u64) {
    for _ in 0..300 {
        let now: Option<u64> = c
            .query_first("SELECT @@global.innodb_buffer_pool_size")
            .await
            .unwrap();
        let status: Option<(String, String)> = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
            .await
            .unwrap();
        let busy = status.is_some_and(|(_, s)| !s.is_empty() && !s.contains("Completed"));
        if now == Some(bytes) && !busy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the buffer pool did not reach {bytes} bytes in 30 s");
}

#[test]
fn buffer_pool_redo_connections_transaction_and_memory_fail_then_pass_when_fixed() {
    let server = Server::get("pitmem");
    let _machine = machine_load_lock();
    let dir = tempfile::tempdir().unwrap();
    // A transaction open for 3 s stands for PD215's hour.
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, "[rules.thresholds.PD215]\nmax_transaction_age = 3\n").unwrap();
    let cfg = cfg.to_str().unwrap().to_owned();
    block_on(async {
        let mut c = conn(&server).await;
        exec(
            &mut c,
            &[
                "SET GLOBAL innodb_buffer_pool_size = 268435456",
                "SET GLOBAL innodb_log_file_size = 100663296",
                "SET GLOBAL max_connections = 200",
            ],
        )
        .await;
        buffer_pool_is(&mut c, 256 << 20).await;
        mem_schema(&mut c).await;
        // One agent follows the whole sequence (PD205 and PD209 through the fix and after),
        // started once the data exists: it reuses the InnoDB size for `innodb_refresh`.
        let watcher = Arc::new(
            tokio::task::spawn_blocking({
                let server = server.clone();
                move || Watcher::start(&server)
            })
            .await
            .unwrap(),
        );
        // The pitfalls: a pool a fifth of the data, the smallest redo log (it must hold the
        // 16 MiB log buffer), a join buffer that 20 connections would make twice the RAM, the
        // connection limit at what the clients hold open, buffered data files.
        let join = mem_total() / 10;
        exec(
            &mut c,
            &[
                "SET GLOBAL innodb_buffer_pool_size = 16777216",
                "SET GLOBAL innodb_log_file_size = 16777216",
                &format!("SET GLOBAL join_buffer_size = {join}"),
                "SET GLOBAL innodb_data_file_buffering = ON",
            ],
        )
        .await;
        buffer_pool_is(&mut c, 16 << 20).await;
        let mut load = Load::new();
        load.spawn(
            "random reads",
            random_reads(conn(&server).await, load.flag()),
        );
        load.spawn(
            "small commits",
            small_commits(conn(&server).await, load.flag()),
        );
        // A transaction left open after reading: it pins the history the commits add.
        let mut holder = conn(&server).await;
        exec(
            &mut holder,
            &[
                "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                "SELECT COUNT(*) FROM pit.small",
            ],
        )
        .await;
        // Idle clients and the agent up to 18 of 20 connections (doctor is the 19th).
        let mut idle = Vec::new();
        for _ in 0..12 {
            idle.push(conn(&server).await);
        }
        exec(&mut c, &["SET GLOBAL max_connections = 20"]).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let args = |window: &str| {
            [
                "--no-probe",
                "--sample-window",
                window,
                "--config.file",
                &cfg,
            ]
            .map(str::to_owned)
            .to_vec()
        };
        let w = Arc::clone(&watcher);
        let agent = tokio::task::spawn_blocking(move || {
            w.until(&["PD205", "PD209"], "fail", Duration::from_secs(90))
        });
        let j = doctor_while_loaded(server.root_url(), args("10s")).await;
        agent.await.unwrap();
        load.stop().await;
        let codes = ["PD205", "PD209", "PD215", "PD216", "PD503"];
        let got = statuses(&j, &codes);
        assert!(
            got.iter().all(|(_, s)| s == "fail"),
            "provoked: {got:?}\n{}",
            explain(&j, &codes)
        );
        let fix = |code: &str| check(&j, code)["remediation"].as_str().unwrap().to_owned();
        // The pool is not grown into memory PD503 says is already overcommitted.
        assert!(
            fix("PD205").starts_with("No RAM to grow the pool into")
                && fix("PD205").contains("PD503"),
            "{}",
            fix("PD205")
        );
        assert!(
            fix("PD503").contains("SET GLOBAL join_buffer_size = 262144;"),
            "{}",
            fix("PD503")
        );
        assert!(
            fix("PD216").contains("SET GLOBAL innodb_data_file_buffering = OFF;"),
            "{}",
            fix("PD216")
        );
        // PD215 names the connection: end it the way the finding says.
        let kill = fix("PD215");
        let kill = kill
            .lines()
            .next()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let holder_id: Option<u64> = holder.query_first("SELECT CONNECTION_ID()").await.unwrap();
        assert_eq!(
            kill,
            format!("KILL {}", holder_id.unwrap()),
            "{}",
            fix("PD215")
        );

        // The redo log on its own: a 16 MiB log under back-to-back bulk updates, with the
        // buffer pool large again (a 16 MiB pool flushes pages as it evicts them, which keeps
        // the checkpoint age low and hides the pitfall).
        exec(&mut c, &["SET GLOBAL innodb_buffer_pool_size = 268435456"]).await;
        buffer_pool_is(&mut c, 256 << 20).await;
        let mut load = Load::new();
        load.spawn(
            "bulk updates",
            bulk_updates(conn(&server).await, load.flag(), Duration::ZERO),
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let j = doctor_while_loaded(server.root_url(), args("5s")).await;
        load.stop().await;
        assert_eq!(status(&j, "PD206"), "fail", "{}", explain(&j, &["PD206"]));
        assert!(
            check(&j, "PD206")["remediation"]
                .as_str()
                .unwrap()
                .contains("SET GLOBAL innodb_log_file_size = "),
            "{}",
            explain(&j, &["PD206"])
        );

        // The fixes: the sizes the findings give, the limit raised, the transaction ended.
        exec(
            &mut c,
            &[
                "SET GLOBAL innodb_buffer_pool_size = 268435456",
                "SET GLOBAL innodb_log_file_size = 1073741824",
                "SET GLOBAL join_buffer_size = 262144",
                "SET GLOBAL max_connections = 200",
                "SET GLOBAL innodb_data_file_buffering = OFF",
                &kill,
            ],
        )
        .await;
        drop(holder);
        buffer_pool_is(&mut c, 256 << 20).await;
        let mut load = Load::new();
        load.spawn(
            "random reads",
            random_reads(conn(&server).await, load.flag()),
        );
        load.spawn(
            "bulk updates",
            bulk_updates(conn(&server).await, load.flag(), Duration::from_secs(10)),
        );
        load.spawn(
            "small commits",
            small_commits(conn(&server).await, load.flag()),
        );
        // The agent: no fail of PD205 or PD209 from two sample intervals after the fix on.
        let w = Arc::clone(&watcher);
        let after_fix = tokio::task::spawn_blocking(move || {
            w.after_fix(&["PD205", "PD209"], Duration::from_secs(12))
        });
        let j = doctor_while_loaded(server.root_url(), args("15s")).await;
        let after_fix = after_fix.await.unwrap();
        load.stop().await;
        let got = statuses(&j, &MEM_CODES);
        assert!(
            got.iter().all(|(_, s)| s == "pass"),
            "fixed: {got:?}\n{}",
            explain(&j, &MEM_CODES)
        );
        after_fix.assert_cleared();
        for i in idle {
            let _ = i.disconnect().await;
        }
        // Quiet: still no fail.
        let w = Arc::clone(&watcher);
        tokio::task::spawn_blocking(move || w.assert_quiet(&["PD205", "PD209"]))
            .await
            .unwrap();
        c.disconnect().await.unwrap();
    });
}

// ---------------------------------------------------------------------------------------------
// pitmem restarted: log waits (PD207), fixed by the restart its finding prints

/// Four connections, each inserting 10 MB in one statement, again and again: with a 2 MiB
/// log buffer the transactions wait for it.
async fn big_inserts(mut c: Conn, stop: Arc<AtomicBool>) -> u64 {
    let mut i = 0u64;
    while running(&stop) {
        c.query_drop("INSERT INTO pit.w (pad) SELECT REPEAT('x', 20000) FROM seq_1_to_500")
            .await
            .unwrap();
        c.query_drop("DELETE FROM pit.w").await.unwrap();
        i += 1;
    }
    i
}

#[test]
fn log_waits_fail_then_clear_after_the_restart_the_finding_prints() {
    let server = Server::get("pitmem");
    let _machine = machine_load_lock();
    // The pitfall: the smallest log buffer (11.8 rounds up to 2 MiB).
    restart_server("pitmem", "11.8", "innodb_log_buffer_size=2097152");
    block_on(async {
        let mut c = conn(&server).await;
        exec(
            &mut c,
            &[
                "CREATE DATABASE IF NOT EXISTS pit",
                "CREATE TABLE IF NOT EXISTS pit.w (id INT AUTO_INCREMENT PRIMARY KEY, pad TEXT) ENGINE=InnoDB",
                "USE pit",
            ],
        )
        .await;
        let watcher = Arc::new(
            tokio::task::spawn_blocking({
                let server = server.clone();
                move || Watcher::start(&server)
            })
            .await
            .unwrap(),
        );
        let start_load = |server: Server| async move {
            let mut load = Load::new();
            for _ in 0..4 {
                let mut c = conn(&server).await;
                c.query_drop("USE pit").await.unwrap();
                load.spawn("big inserts", big_inserts(c, load.flag()));
            }
            load
        };
        let load = start_load(server.clone()).await;
        let w = Arc::clone(&watcher);
        let report = tokio::task::spawn_blocking(move || {
            w.until(&["PD207"], "fail", Duration::from_secs(90));
            w.report()
        })
        .await
        .unwrap();
        load.stop().await;
        let fix = check(&report, "PD207")["remediation"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // The finding prints the option and the restart: apply exactly that.
        let size = fix
            .lines()
            .find_map(|l| l.trim().strip_prefix("innodb_log_buffer_size = "))
            .unwrap_or_else(|| panic!("no innodb_log_buffer_size in PD207's fix: {fix}"))
            .to_owned();
        assert!(fix.contains("restart mariadbd"), "{fix}");
        c.disconnect().await.unwrap();
        restart_server("pitmem", "11.8", &format!("innodb_log_buffer_size={size}"));
        let load = start_load(server.clone()).await;
        let w = Arc::clone(&watcher);
        let after_fix =
            tokio::task::spawn_blocking(move || w.after_fix(&["PD207"], Duration::from_secs(20)))
                .await
                .unwrap();
        let ran = load.stop().await;
        assert!(
            ran.iter().all(|(_, n)| *n > 0),
            "the load barely ran: {ran:?}"
        );
        after_fix.assert_cleared();
        // Quiet: still no fail.
        let w = Arc::clone(&watcher);
        tokio::task::spawn_blocking(move || w.assert_quiet(&["PD207"]))
            .await
            .unwrap();
        let mut c = conn(&server).await;
        exec(&mut c, &["DROP TABLE pit.w"]).await;
        c.disconnect().await.unwrap();
    });
    // Back to the harness's options for the other tests on pitmem.
    restart_server("pitmem", "11.8", "");
}
