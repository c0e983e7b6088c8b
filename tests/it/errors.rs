//! Bad input and broken servers: clear messages, documented exit codes, no panics, no secrets.

use std::time::Duration;

use crate::support::*;

#[test]
fn unreachable_port() {
    let r = doctor_json("mysql://root:pw@127.0.0.1:1/", &["--timeout", "3s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["mariadb"]["reachable"], false);
    assert_eq!(j["mariadb"]["error"]["kind"], "connection_refused");
    assert!(
        j["mariadb"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:1")
    );
    assert_eq!(status(&j, "PD201"), "insufficient_data");
    assert!(r.elapsed < Duration::from_secs(3), "took {:?}", r.elapsed);
}

#[test]
fn unknown_host() {
    let r = doctor_json(
        "mysql://root@no-such-host.invalid:3306/",
        &["--timeout", "3s"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["mariadb"]["error"]["kind"], "unknown_host", "{j:#}");
}

#[test]
fn wrong_password_is_named_and_never_echoed() {
    let secret = "Wr0ng-S3cret-xyz";
    let server = Server::m1011();
    let r = doctor_json(&server.url("root", secret), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["mariadb"]["error"]["kind"], "access_denied", "{j:#}");
    assert!(
        j["mariadb"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("access denied for user 'root'")
    );
    let text = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", server.url("root", secret))
        .arg("doctor"));
    for out in [&r.stdout, &r.stderr, &text.stdout, &text.stderr] {
        assert!(!out.contains(secret), "password leaked:\n{out}");
    }
    assert!(text.stdout.contains("access denied"), "{}", text.stdout);
}

#[test]
fn right_password_never_appears_in_any_output() {
    let server = Server::m1011();
    let pw = Server::root_password();
    for format in ["text", "json", "markdown"] {
        let r = run(powerdiag()
            .env("POWERDIAG_MARIADB_URL", server.root_url())
            .args(["doctor", "--no-probe", "--format", format]));
        assert!(r.code == 0 || r.code == 1 || r.code == 2, "{}", r.stderr);
        assert!(
            !r.stdout.contains(&pw) && !r.stderr.contains(&pw),
            "password leaked in {format}"
        );
    }
}

#[test]
fn hung_server_answers_within_the_timeout() {
    let _lock = hang_lock();
    let server = Server::hang();
    let pid = server.pid();
    let url = server.root_url();
    // Sanity: the server answers before it is stopped.
    let before = doctor_json(&url, &["--no-probe"]);
    assert_eq!(
        before.json()["mariadb"]["reachable"],
        true,
        "{}",
        before.stdout
    );

    signal(pid, "STOP");
    let r = doctor_json(&url, &["--timeout", "2s"]);
    signal(pid, "CONT");

    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["mariadb"]["reachable"], false);
    assert_eq!(j["mariadb"]["error"]["kind"], "timeout", "{j:#}");
    assert!(
        j["mariadb"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer within 2 s")
    );
    // The deadline is the contract: 2 s to connect, plus process start and host facts.
    assert!(
        r.elapsed < Duration::from_secs(5),
        "doctor took {:?} against a hung server",
        r.elapsed
    );

    // And it recovers.
    let after = doctor_json(&url, &["--no-probe"]);
    assert_eq!(after.json()["mariadb"]["reachable"], true);
}

fn signal(pid: i32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill -{sig} {pid}");
}

#[test]
fn bad_urls_and_config_exit_3_with_the_input_named() {
    let r = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", "http://u:topsecret@h/")
        .arg("doctor"));
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("POWERDIAG_MARIADB_URL"), "{}", r.stderr);
    assert!(!r.stderr.contains("topsecret"), "{}", r.stderr);

    let r = run(powerdiag().args(["doctor", "--mariadb.url", "mysql://u@h:notaport/"]));
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("--mariadb.url"), "{}", r.stderr);

    let r = run(powerdiag().args(["doctor", "--mariadb.defaults-file", "/nonexistent/my.cnf"]));
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("/nonexistent/my.cnf"), "{}", r.stderr);

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.cnf");
    std::fs::write(&bad, "[client]\nport = eleven\n").unwrap();
    let r = run(powerdiag()
        .arg("doctor")
        .arg("--mariadb.defaults-file")
        .arg(&bad));
    assert_eq!(r.code, 3);
    assert!(
        r.stderr.contains("line 2") && r.stderr.contains("eleven"),
        "{}",
        r.stderr
    );

    let binary = dir.path().join("binary.cnf");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x5b]).unwrap();
    let r = run(powerdiag()
        .arg("doctor")
        .arg("--mariadb.defaults-file")
        .arg(&binary));
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("not UTF-8"), "{}", r.stderr);

    for args in [
        &["doctor", "--bogus"][..],
        &["doctor", "--format", "xml"],
        &["doctor", "--timeout", "soon"],
        &["doctor", "--probe-queries", "0"],
        &["nosuchcommand"],
    ] {
        let r = run(powerdiag().args(args));
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("error:"), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn defaults_file_and_unix_socket() {
    let server = Server::m1011();
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("client.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nuser = root\npassword = \"{}\"\nsocket = {}\n",
            Server::root_password(),
            server.socket.display()
        ),
    )
    .unwrap();
    let r = run(powerdiag()
        .arg("doctor")
        .arg("--format")
        .arg("json")
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    let j = r.json();
    assert_eq!(j["mariadb"]["reachable"], true, "{j:#}");
    assert_eq!(
        j["mariadb"]["target"],
        format!("root@{}", server.socket.display())
    );
    assert!(
        j["mariadb"]["version"]
            .as_str()
            .unwrap()
            .starts_with("10.11.")
    );
    assert!(!r.stdout.contains(&Server::root_password()));

    // ~/.my.cnf is used when nothing else is given.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".my.cnf"),
        std::fs::read_to_string(&cnf).unwrap(),
    )
    .unwrap();
    let r = run(powerdiag().env("HOME", home.path()).args([
        "doctor",
        "--format",
        "json",
        "--no-probe",
    ]));
    assert_eq!(r.json()["mariadb"]["reachable"], true, "{}", r.stdout);
}

/// A password in `--mariadb.url` is refused before anything connects (argv is world-readable),
/// for doctor and the agent alike, without repeating it; the environment variable may hold one.
#[test]
fn a_password_in_the_url_flag_is_refused() {
    for cmd in [
        &["doctor", "--no-probe", "--sample-window", "0"][..],
        &["agent", "--web.listen-address", "127.0.0.1:0"][..],
    ] {
        let r = run(powerdiag()
            .args(cmd)
            .args(["--mariadb.url", "mysql://mon:s3cret-pw@127.0.0.1:1/"]));
        assert_eq!(r.code, 3, "{cmd:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("--mariadb.url: a password on the command line")
                && r.stderr.contains("--mariadb.defaults-file"),
            "{}",
            r.stderr
        );
        assert!(!r.stderr.contains("s3cret-pw") && !r.stdout.contains("s3cret-pw"));
    }
    let r = run(powerdiag()
        .env(
            "POWERDIAG_MARIADB_URL",
            "mysql://mon:s3cret-pw@127.0.0.1:1/",
        )
        .args([
            "doctor",
            "--no-probe",
            "--sample-window",
            "0",
            "--timeout",
            "1s",
        ]));
    assert_ne!(r.code, 3, "{}", r.stderr);
    assert!(!r.stderr.contains("s3cret-pw") && !r.stdout.contains("s3cret-pw"));
}
