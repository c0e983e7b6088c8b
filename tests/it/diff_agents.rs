//! `powerdiag diff` of two running agents (issue 15): each side's last snapshot is read from
//! `/api/v1/snapshot` with the TLS and basic-auth options a scraper would use. The agents need
//! no database: an unreachable one still yields host facts and a snapshot.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use crate::agent::{Agent, eventually, free_port, get, spawn_agent, testdata};
use crate::support::*;

const CONFIG: &str =
    "[sample]\ninterval = \"2s\"\ntimeout = \"1s\"\nwindow = \"0s\"\n[probe]\nenabled = false\n";

/// An agent process killed on drop, for agents the plain-HTTP readiness check cannot reach.
pub(crate) struct Child(
    std::process::Child,
    #[allow(dead_code, reason = "kept for the files")] tempfile::TempDir,
);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(dir: &tempfile::TempDir, port: u16, web_config: Option<&str>) -> Command {
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_powerdiag"));
    cmd.env("POWERDIAG_MARIADB_URL", "mysql://x@127.0.0.1:1/")
        .args(["agent", "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config.file")
        .arg(&cfg);
    if let Some(yaml) = web_config {
        let web = dir.path().join("web.yml");
        std::fs::write(&web, yaml).unwrap();
        cmd.arg("--web.config.file").arg(&web);
    }
    cmd
}

fn agent() -> Agent {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    spawn_agent(command(&dir, port, None), port, dir)
}

pub(crate) fn tls_agent(web_config: &str) -> (Child, u16) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = command(&dir, port, Some(web_config))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Child(child, dir), port)
}

#[test]
fn two_live_agents_compare_in_one_command() {
    let (a, b) = (agent(), agent());
    for x in [&a, &b] {
        assert!(
            eventually(Duration::from_secs(15), || get(x.port, "/api/v1/snapshot")
                .is_some_and(|(code, _, _)| code == 200)),
            "the agent on {} has a snapshot",
            x.port
        );
    }
    let r = run(powerdiag().args([
        "diff",
        "--format",
        "json",
        &format!("http://127.0.0.1:{}", a.port),
        &format!("http://127.0.0.1:{}/", b.port),
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    // Same host twice: comparable, and nothing that matters differs.
    assert_eq!(j["a"]["host"], j["b"]["host"], "{j:#}");
    assert!(j["differences"].is_array(), "{j:#}");

    // A file on one side, an agent on the other.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.json");
    let (_, _, body) = get(a.port, "/api/v1/snapshot").unwrap();
    std::fs::write(&file, body).unwrap();
    let r = run(powerdiag()
        .arg("diff")
        .arg(&file)
        .arg(format!("http://127.0.0.1:{}", b.port)));
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Nothing listening: a clear error naming the URL, exit 3.
    let gone = free_port();
    let r = run(powerdiag()
        .arg("diff")
        .arg(&file)
        .arg(format!("http://127.0.0.1:{gone}")));
    assert_eq!(r.code, 3);
    assert!(
        r.stderr
            .contains(&format!("127.0.0.1:{gone}/api/v1/snapshot"))
            && r.stderr.contains("cannot connect"),
        "{}",
        r.stderr
    );
}

#[test]
fn tls_and_basic_auth_as_a_scraper_uses_them() {
    let hash = bcrypt::hash("diff-Pw-7", 6).unwrap();
    let (_secure, secure_port) = tls_agent(&format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prometheus: '{hash}'\n",
        testdata("test-server.crt").display(),
        testdata("test-server.key").display()
    ));
    let plain = agent();
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("password");
    std::fs::write(&pw, "diff-Pw-7\n").unwrap();
    let url = format!("https://localhost:{}", secure_port);
    let other = format!("http://127.0.0.1:{}", plain.port);
    let ca = testdata("test-ca.crt");
    let diff = |extra: &[&str]| {
        let mut c = powerdiag();
        c.args(["diff", "--format", "json", "--agent.ca-file"])
            .arg(&ca)
            .args(extra)
            .args([&url, &other]);
        run(&mut c)
    };
    // The credentials go to both sides, the plain-HTTP one too: that takes
    // --agent.allow-insecure-auth (issue 38; diff_hardening.rs checks the refusal).
    let ok = || {
        diff(&[
            "--agent.username",
            "prometheus",
            "--agent.password-file",
            pw.to_str().unwrap(),
            "--agent.allow-insecure-auth",
        ])
    };
    assert!(
        eventually(Duration::from_secs(15), || ok().code == 0),
        "diff over TLS with basic auth: {}",
        ok().stderr
    );
    // Without credentials: 401, and the flags that fix it.
    let r = diff(&[]);
    assert_eq!(r.code, 3);
    assert!(
        r.stderr.contains("HTTP 401") && r.stderr.contains("--agent.password-file"),
        "{}",
        r.stderr
    );
    // Without the CA: the certificate is not trusted.
    let r = run(powerdiag().args(["diff", &url, &other]));
    assert_eq!(r.code, 3, "{}", r.stderr);
    // A password in the URL is refused and never echoed.
    let r = run(powerdiag().args([
        "diff",
        &format!("https://prometheus:diff-Pw-7@localhost:{}", secure_port),
        &other,
    ]));
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("--agent.password-file"), "{}", r.stderr);
    assert!(!r.stderr.contains("diff-Pw-7"), "{}", r.stderr);
}
