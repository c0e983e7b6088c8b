//! `doctor` on this machine with no database at all.

use std::net::TcpStream;

use crate::support::*;

fn assert_no_local_server() {
    assert!(
        TcpStream::connect(("127.0.0.1", 3306)).is_err(),
        "something listens on 127.0.0.1:3306; this test needs a machine without a default MariaDB \
         (tests/harness/setup.sh keeps Debian's service stopped)"
    );
    for s in [
        "/run/mysqld/mysqld.sock",
        "/var/run/mysqld/mysqld.sock",
        "/var/lib/mysql/mysql.sock",
        "/tmp/mysql.sock",
    ] {
        assert!(
            !std::path::Path::new(s).exists(),
            "{s} exists; this test needs no default MariaDB"
        );
    }
}

#[test]
fn reports_host_facts_and_how_to_reach_the_server() {
    assert_no_local_server();
    let r = run(powerdiag().args(["doctor", "--format", "json"]));
    assert_ne!(
        r.code, 3,
        "unreachable database is not exit 3: {}",
        r.stderr
    );
    let j = r.json();
    assert_eq!(j["schema_version"], powerdiag_rules::SCHEMA_VERSION);
    assert_eq!(j["mariadb"]["reachable"], false);
    assert_eq!(j["mariadb"]["error"]["kind"], "connection_refused");
    assert!(
        j["mariadb"]["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--mariadb.url")
    );

    // Host facts, cross-checked against what the test reads itself.
    let host = &j["host"];
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(host["hostname"], hostname.trim());
    assert_eq!(host["os"], "linux");
    assert_eq!(host["arch"], std::env::consts::ARCH);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let threads: u64 = count_cpus(&online);
    assert_eq!(host["hardware_threads"], threads);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(host["memory_total_bytes"], kb * 1024);

    // Every database check says why it could not judge.
    for c in j["checks"].as_array().unwrap() {
        if c["scope"] == "database" {
            assert_eq!(c["status"], "insufficient_data", "{c:#}");
            assert!(
                c["summary"].as_str().unwrap().contains("not reachable"),
                "{c:#}"
            );
        }
    }
    // Host checks judge this machine as it is (steal, say, under a loaded CI host): what must
    // hold is that no database check fails and the exit status follows the worst finding.
    let findings = j["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["scope"] == "host"),
        "{findings:#?}"
    );
    let worst = j["summary"]["worst"].as_str();
    let expected = match worst {
        Some("critical") => 2,
        Some("warning") => 1,
        _ => 0,
    };
    assert_eq!(
        r.code, expected,
        "exit status follows the worst finding {worst:?}"
    );

    // The summary counts what ran and says why the undecided checks could not decide: never a
    // bare "no findings" over a dozen insufficient_data checks.
    let s = &j["summary"];
    let n = |k: &str| s[k].as_u64().unwrap();
    let checks = j["checks"].as_array().unwrap().len() as u64;
    assert_eq!(n("checks"), checks, "{s:#}");
    assert_eq!(
        n("fail") + n("pass") + n("not_applicable") + n("insufficient_data"),
        checks
    );
    let reasons = s["insufficient_data_reasons"].as_array().unwrap();
    let listed: u64 = reasons
        .iter()
        .map(|r| r["codes"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(
        listed,
        n("insufficient_data"),
        "every undecided check has its reason: {s:#}"
    );
    let db = reasons
        .iter()
        .find(|r| {
            r["reason"]
                .as_str()
                .unwrap()
                .starts_with("MariaDB not reachable")
        })
        .expect("the connection is the reason of the database checks");
    assert!(
        db["codes"].as_array().unwrap().iter().any(|c| c == "PD101"),
        "{db:#}"
    );
    let line = s["line"].as_str().unwrap();
    assert!(
        line.contains(&format!("of {checks} checks"))
            && line.contains(&format!("{} could not", n("insufficient_data"))),
        "{line}"
    );

    // The text report tells a newcomer what to do.
    let t = run(powerdiag().arg("doctor"));
    assert_ne!(t.code, 3, "{}", t.stderr);
    assert!(t.stdout.contains(hostname.trim()), "{}", t.stdout);
    assert!(t.stdout.contains("not reachable"), "{}", t.stdout);
    assert!(t.stdout.contains("POWERDIAG_MARIADB_URL"), "{}", t.stdout);
    assert!(t.stdout.contains("--mariadb.defaults-file"), "{}", t.stdout);
    assert!(!t.stdout.contains("\nNo findings.\n"), "{}", t.stdout);
    assert!(t.stdout.contains("could not"), "{}", t.stdout);
    assert!(
        t.stdout.contains("Could not decide:\n")
            && t.stdout.contains("MariaDB not reachable (see above)"),
        "{}",
        t.stdout
    );
    assert!(
        !t.stdout.contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
}
