//! The server's own error log (issue 37) on real servers. `sat118` (MariaDB 11.8, shared with
//! tests/it/saturation.rs under `sat118_lock`) logs to a file: it is crashed with `kill -SEGV`
//! and started again, and doctor fails PD803 as critical, quoting the crash report's `got
//! signal 11` line; the agent follows that file through a rotation and a truncation.
//! `jrn118` logs to stderr, into a private systemd journal (tests/harness/journald.sh): doctor
//! and the agent read it there, through a crash too.

use std::{process::Command, time::Duration};

use crate::support::*;

const NAME: &str = "sat118";

#[test]
fn a_crash_and_restart_fail_pd803_critical_with_the_crash_report() {
    let _server = sat118_lock();
    let server = Server::get(NAME);
    let before = doctor_json(
        &server.root_url(),
        &["--sample-window", "0", "--no-probe", "--statements", "0"],
    )
    .json();
    assert_ne!(
        check(&before, "PD803")["severity"],
        "critical",
        "no crash yet: {}",
        check(&before, "PD803")
    );
    let status = Command::new("kill")
        .args(["-SEGV", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The harness's stop waits for the (already dead) process; its start brings it back.
    restart_server(NAME, "11.8", "");
    let report = doctor_json(
        &server.root_url(),
        &["--sample-window", "0", "--no-probe", "--statements", "0"],
    )
    .json();
    let c = check(&report, "PD803");
    let text = c.to_string();
    assert_eq!(c["status"], "fail", "{text}");
    assert_eq!(c["severity"], "critical", "{text}");
    assert!(
        c["summary"].as_str().unwrap().contains("after a crash"),
        "{text}"
    );
    assert!(text.contains("got signal 11"), "{text}");
    // The log was read where log_error names it, and said what it covered.
    let log = &report["snapshot"]["mariadb"]["facts"]["error_log"]["available"];
    assert!(
        log["path"].as_str().unwrap().ends_with("/sat118/error.log"),
        "{log}"
    );
}

fn harness_path(script: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/harness")
        .join(script)
}

/// The agent's counter of `kind` events read in the error log (0 before the first).
fn events(body: &str, kind: &str) -> f64 {
    crate::agent::metric(
        body,
        &format!("powerdiag_mariadb_error_log_events_total{{kind=\"{kind}\"}}"),
    )
    .unwrap_or(0.0)
}

/// The agent follows the file through a rotation (renamed, `FLUSH ERROR LOGS` opens a new
/// one) and a truncation in place (copytruncate), reading the new bytes of each sample: the
/// lines written after each still reach its counters, and the snapshot says what happened.
/// "Too many connections" is logged only at log_warnings ≥ 4 and only for a refusal before
/// authentication (past max_connections + extra_max_connections: SUPER logins once the
/// ordinary ones are full); testdata/errorlog/README.md has the survey.
#[test]
fn the_agent_reads_the_log_through_rotation_and_truncation() {
    use mysql_async::prelude::Queryable;
    let _server = sat118_lock();
    let server = Server::get(NAME);
    let log = server.pidfile.parent().unwrap().join("error.log");
    let watcher = crate::watcher::Watcher::start(&server);
    let body = |w: &crate::watcher::Watcher| w.read(&[]).map(|(_, b)| b).unwrap_or_default();
    assert!(
        crate::agent::eventually(Duration::from_secs(30), || events(&body(&watcher), "ready")
            >= 1.0),
        "the first read finds the start-up: {}",
        body(&watcher)
    );
    // Rotation: the server writes to a new file after FLUSH ERROR LOGS.
    std::fs::rename(&log, log.with_extension("log.1")).unwrap();
    block_on(async {
        let mut c = crate::watcher::conn(&server).await;
        crate::watcher::exec(
            &mut c,
            &[
                "FLUSH ERROR LOGS",
                "CREATE USER IF NOT EXISTS 'pd_tmc'@'127.0.0.1' IDENTIFIED BY 'pd-tmc-pw'",
                "SET GLOBAL max_connections = 10, log_warnings = 4",
            ],
        )
        .await;
        // Fill the ordinary connections, then past the extra one SUPER keeps.
        let mut held = Vec::new();
        for user in ["pd_tmc"; 12].into_iter().chain(["root"; 3]) {
            let pw = if user == "root" {
                Server::root_password()
            } else {
                "pd-tmc-pw".into()
            };
            if let Ok(c) = mysql_async::Conn::new(
                crate::watcher::opts(&server)
                    .user(Some(user))
                    .pass(Some(pw)),
            )
            .await
            {
                held.push(c);
            }
        }
        for c in held {
            let _ = c.disconnect().await;
        }
        crate::watcher::exec(
            &mut c,
            &["SET GLOBAL max_connections = 200, log_warnings = 2"],
        )
        .await;
        c.disconnect().await.unwrap();
    });
    assert!(
        log.exists(),
        "FLUSH ERROR LOGS made a new {}",
        log.display()
    );
    let mut last = String::new();
    assert!(
        crate::agent::eventually(Duration::from_secs(30), || {
            last = body(&watcher);
            events(&last, "too_many_connections") >= 1.0
        }),
        "the refusals logged in the new file reach the agent: {last}"
    );
    let snapshot = |w: &crate::watcher::Watcher| -> serde_json::Value {
        let (_, _, b) = crate::agent::get(w.agent.port, "/api/v1/snapshot").unwrap();
        serde_json::from_str(&b).unwrap()
    };
    let read = |s: &serde_json::Value| {
        s["mariadb"]["facts"]["error_log"]["available"]["read"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let s = snapshot(&watcher);
    assert!(
        read(&s).contains("rotated or truncated 1 time"),
        "{}",
        read(&s)
    );
    // Truncation in place, then an aborted connection (a client gone without COM_QUIT).
    let before = events(&body(&watcher), "aborted_connection");
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&log)
        .unwrap();
    block_on(async {
        let mut c = crate::watcher::conn(&server).await;
        c.query_drop("SELECT 1").await.unwrap();
        // Dropped without disconnect: the server sees the socket close mid-session.
        drop(c);
    });
    assert!(
        crate::agent::eventually(Duration::from_secs(30), || {
            last = body(&watcher);
            events(&last, "aborted_connection") > before
        }),
        "the line written after the truncation reaches the agent (before: {before}): {last}"
    );
    let s = snapshot(&watcher);
    assert!(
        read(&s).contains("rotated or truncated 2 time"),
        "{}",
        read(&s)
    );
}

fn journal_dir() -> String {
    std::env::var("POWERDIAG_IT_JOURNAL_DIR").unwrap_or_else(|_| {
        panic!("POWERDIAG_IT_JOURNAL_DIR is not set: tests/run.sh starts the private journal (tests/harness/journald.sh) and jrn118 in it")
    })
}

/// `cmd` run in the private journal's mount namespace.
fn in_journal(cmd: &[&str]) -> Command {
    let mut c = Command::new(harness_path("journald.sh"));
    c.arg("exec").arg(journal_dir()).args(cmd);
    c
}

fn doctor_in_journal(server: &Server) -> serde_json::Value {
    let home = tempfile::tempdir().unwrap();
    let mut c = in_journal(&[
        env!("CARGO_BIN_EXE_powerdiag"),
        "doctor",
        "--format",
        "json",
        "--sample-window",
        "0",
        "--no-probe",
        "--statements",
        "0",
    ]);
    c.env("POWERDIAG_MARIADB_URL", server.root_url())
        .env("HOME", home.path())
        .env("NO_COLOR", "1");
    run(&mut c).json()
}

/// A server whose `log_error` is empty logs to stderr, which systemd's units send to the
/// journal (Debian's default). `jrn118` does that into a private journal (Debian's own
/// journald, tests/harness/journald.sh): doctor reads its entries there, PD201 judges the
/// CRC-32 line of its start, and the agent — reading only the entries after the newest it has
/// seen — follows a `kill -SEGV` and the restart to PD803 critical.
#[test]
fn a_server_logging_to_the_journal_is_read_there_through_a_crash() {
    let server = Server::get("jrn118");
    let report = doctor_in_journal(&server);
    let log = &report["snapshot"]["mariadb"]["facts"]["error_log"]["available"];
    assert!(
        log["path"]
            .as_str()
            .unwrap_or_default()
            .starts_with("the systemd journal"),
        "{}",
        report["snapshot"]["mariadb"]["facts"]["error_log"]
    );
    let kinds: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"]["kind"].as_str().unwrap())
        .collect();
    for k in ["starting", "crc32", "ready"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    // PD201 follows the implementation InnoDB named (hardware unless it says generic).
    let implementation = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|e| e["kind"]["implementation"].as_str())
        .unwrap();
    let pd201 = check(&report, "PD201");
    let want = if implementation.contains("generic") {
        "fail"
    } else {
        "pass"
    };
    assert_eq!(pd201["status"], want, "{pd201}");
    assert!(pd201.to_string().contains(implementation), "{pd201}");

    let watcher = crate::watcher::Watcher::start_wrapped(
        &server,
        "",
        &[
            harness_path("journald.sh").to_str().unwrap(),
            "exec",
            &journal_dir(),
        ],
    );
    let body = |w: &crate::watcher::Watcher| w.read(&[]).map(|(_, b)| b).unwrap_or_default();
    assert!(
        crate::agent::eventually(Duration::from_secs(30), || events(&body(&watcher), "ready")
            >= 1.0),
        "the agent's first read finds the start-up: {}",
        body(&watcher)
    );
    let status = Command::new("kill")
        .args(["-SEGV", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let port = server.port.to_string();
    let mariadb_sh = harness_path("mariadb.sh");
    let mariadb_sh = mariadb_sh.to_str().unwrap();
    for args in [
        vec![mariadb_sh, "stop", "jrn118"],
        vec![mariadb_sh, "start", "jrn118", "11.8", &port],
    ] {
        let out = in_journal(&args)
            .env("POWERDIAG_IT_LOG", "journal")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // PD803 already fails (as info: a clean start under an hour ago); the crash makes it
    // critical once the agent has read the crash report from the journal.
    let critical = |b: &str| {
        b.lines().any(|l| {
            l.starts_with("powerdiag_check{code=\"PD803\"")
                && l.contains("severity=\"critical\",status=\"fail\"")
        })
    };
    let mut last = String::new();
    assert!(
        crate::agent::eventually(Duration::from_secs(60), || {
            last = body(&watcher);
            events(&last, "crash") >= 1.0 && critical(&last)
        }),
        "{last}"
    );
    let report = doctor_in_journal(&server);
    let c = check(&report, "PD803");
    assert_eq!(c["severity"], "critical", "{c}");
    assert!(c.to_string().contains("got signal 11"), "{c}");
}
