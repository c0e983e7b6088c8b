//! The server's own error log (issue 37: PD803) on a real server: `sat118` (MariaDB 11.8,
//! shared with tests/it/saturation.rs under `sat118_lock`) is crashed with `kill -SEGV` and
//! started again by the harness. Doctor then fails PD803 as critical, quoting the crash
//! report's `got signal 11` line it read from the file `log_error` names.

use std::process::Command;

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
