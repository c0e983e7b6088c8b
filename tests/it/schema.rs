//! Schema hygiene (issue 36: PD705 duplicate-index, PD706 unused-index, PD707
//! table-without-primary-key, PD708 non-transactional-tables) on real servers: `schema118`
//! (MariaDB 11.8, performance_schema ON) and `schema1011` (10.11, OFF), owned by this file.
//! Each gets a schema with a redundant `(a)` beside `(a, b)`, a UNIQUE `(a)` beside `(a, b)`
//! (not to drop), an index never read during a workload that reads every other one (and one
//! a foreign key needs), an InnoDB table of 50,000 rows without a primary key and an Aria
//! table being written. Doctor fails each rule naming exactly those; the DDL the findings
//! print, applied as printed, makes them pass — for doctor, and for an agent within two
//! samples (its schema is read again after DDL). PD706 judges after `min_period`, lowered to
//! a second here; on 10.11 (performance_schema OFF) it says what is missing. A prefix index
//! (`name(10)`) beside `(name, x)` looks redundant in InnoDB's dictionary, which keeps no
//! prefix lengths: the read opens that table to learn it is not. The collector is on by
//! default: nothing turns it on here.

use std::time::Duration;

use serde_json::Value;

use crate::support::*;
use crate::watcher::{Watcher, conn, exec, explain};

const SETUP: &[&str] = &[
    "DROP DATABASE IF EXISTS pd_schema",
    "CREATE DATABASE pd_schema",
    "CREATE TABLE pd_schema.dup (id INT PRIMARY KEY, a INT, b INT, KEY k_a (a), KEY k_ab (a, b)) ENGINE=InnoDB",
    "CREATE TABLE pd_schema.uniq (id INT PRIMARY KEY, a INT, b INT, UNIQUE KEY u_a (a), KEY k_ab (a, b)) ENGINE=InnoDB",
    "CREATE TABLE pd_schema.nopk (a INT, b VARCHAR(20)) ENGINE=InnoDB",
    "INSERT INTO pd_schema.nopk SELECT seq, CONCAT('row ', seq) FROM pd_schema.seq_1_to_50000",
    "ANALYZE TABLE pd_schema.nopk",
    "CREATE TABLE pd_schema.sessions (id INT PRIMARY KEY, v INT) ENGINE=Aria",
    "INSERT INTO pd_schema.sessions VALUES (1, 1), (2, 2), (3, 3)",
    "UPDATE pd_schema.sessions SET v = v + 1",
    "CREATE TABLE pd_schema.shops (id INT PRIMARY KEY) ENGINE=InnoDB",
    "CREATE TABLE pd_schema.pref (id INT PRIMARY KEY, name VARCHAR(100), x INT, KEY k_n10 (name(10)), KEY k_nx (name, x)) ENGINE=InnoDB",
    "CREATE TABLE pd_schema.used (id INT PRIMARY KEY, u INT, n INT, shop_id INT, KEY k_used (u), KEY k_unused (n), KEY k_fk (shop_id), CONSTRAINT fk_shop FOREIGN KEY (shop_id) REFERENCES pd_schema.shops (id)) ENGINE=InnoDB",
    "INSERT INTO pd_schema.shops VALUES (1)",
    "INSERT INTO pd_schema.used SELECT seq, seq % 10, seq % 7, 1 FROM pd_schema.seq_1_to_100",
    "INSERT INTO pd_schema.dup SELECT seq, seq, seq FROM pd_schema.seq_1_to_100",
    "INSERT INTO pd_schema.uniq SELECT seq, seq, seq FROM pd_schema.seq_1_to_100",
    "INSERT INTO pd_schema.pref SELECT seq, CONCAT('n', seq % 10), seq FROM pd_schema.seq_1_to_100",
];

/// The workload: reads through every secondary index but `used.k_unused` (and `k_fk`, which
/// the foreign key needs and PD706 leaves alone).
const WORKLOAD: &[&str] = &[
    "SELECT COUNT(*) FROM pd_schema.used FORCE INDEX (k_used) WHERE u = 3",
    "SELECT COUNT(*) FROM pd_schema.dup FORCE INDEX (k_a) WHERE a = 3",
    "SELECT COUNT(*) FROM pd_schema.dup FORCE INDEX (k_ab) WHERE a = 3 AND b = 3",
    "SELECT COUNT(*) FROM pd_schema.uniq FORCE INDEX (k_ab) WHERE a = 3 AND b = 3",
    "SELECT COUNT(*) FROM pd_schema.pref FORCE INDEX (k_n10) WHERE name = 'n3'",
    "SELECT COUNT(*) FROM pd_schema.pref FORCE INDEX (k_nx) WHERE name = 'n3' AND x = 3",
];

/// The workload again after the fixes: `ALTER TABLE` restarts a table's counts.
const WORKLOAD_AFTER: &[&str] = &[
    "SELECT COUNT(*) FROM pd_schema.used FORCE INDEX (k_used) WHERE u = 3",
    "SELECT COUNT(*) FROM pd_schema.dup FORCE INDEX (k_ab) WHERE a = 3 AND b = 3",
    "SELECT COUNT(*) FROM pd_schema.uniq FORCE INDEX (k_ab) WHERE a = 3 AND b = 3",
    // A DDL after the reads: the agent reads the schema again after it, so it judges the
    // counts above, not those of the moment between the fixes and the workload.
    "CREATE TABLE pd_schema.after_the_workload (id INT PRIMARY KEY) ENGINE=InnoDB",
];

/// PD706 judges after a second of statistics instead of a week.
const QUICK_PD706: &str = "[rules.thresholds.PD706]\nmin_period = 1\n";

/// The agent's configuration: PD706 quick.
const AGENT: &str = QUICK_PD706;

const CODES: [&str; 3] = ["PD705", "PD707", "PD708"];

fn doctor(server: &Server) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("doctor.toml");
    std::fs::write(
        &cfg,
        format!("{QUICK_PD706}[rules.thresholds.PD806]\nmax_waiting_share = 1.0\nmax_process_share = 1.0\n"),
    )
    .unwrap();
    doctor_json(
        &server.root_url(),
        &[
            "--sample-window",
            "0",
            "--no-probe",
            "--statements",
            "0",
            "--config.file",
            cfg.to_str().unwrap(),
        ],
    )
    .json()
}

/// The `ALTER TABLE` lines a finding prints for our schema.
fn printed_ddl(c: &Value) -> Vec<String> {
    c["remediation"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("ALTER TABLE `pd_schema`."))
        .map(str::to_owned)
        .collect()
}

fn scenario(name: &str, performance_schema: bool) {
    let server = Server::get(name);
    block_on(async {
        let mut c = conn(&server).await;
        exec(&mut c, SETUP).await;
        exec(&mut c, WORKLOAD).await;
        c.disconnect().await.unwrap();
        // CREATE_TIME has whole seconds: past PD706's one-second period.
        tokio::time::sleep(Duration::from_millis(2100)).await;
    });
    let report = doctor(&server);
    let text = explain(&report, &CODES);
    let pd705 = check(&report, "PD705");
    assert_eq!(pd705["status"], "fail", "{text}");
    let evidence = pd705["evidence"].to_string();
    assert!(
        evidence
            .contains("pd_schema.dup: KEY `k_a` (`a`) is a left prefix of KEY `k_ab` (`a`,`b`)"),
        "{text}"
    );
    assert!(
        !evidence.contains("u_a") && !evidence.contains("uniq"),
        "the UNIQUE key is never the one to drop: {text}"
    );
    assert!(
        !evidence.contains("k_n10"),
        "a prefix of `name` is no prefix of `(name, x)`: {text}"
    );
    assert_eq!(
        printed_ddl(pd705),
        ["ALTER TABLE `pd_schema`.`dup` DROP INDEX `k_a`;"],
        "{text}"
    );

    let pd707 = check(&report, "PD707");
    assert_eq!(pd707["status"], "fail", "{text}");
    assert!(
        pd707["summary"]
            .as_str()
            .unwrap()
            .starts_with("1 InnoDB table(s) without a primary key"),
        "{text}"
    );
    assert!(
        pd707["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("pd_schema.nopk: ~"),
        "{text}"
    );
    assert_eq!(printed_ddl(pd707).len(), 1, "{text}");

    let pd708 = check(&report, "PD708");
    assert_eq!(pd708["status"], "fail", "{text}");
    assert!(
        pd708["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("pd_schema.sessions: Aria"),
        "{text}"
    );
    assert_eq!(
        printed_ddl(pd708),
        ["ALTER TABLE `pd_schema`.`sessions` ENGINE=InnoDB;"],
        "{text}"
    );

    let pd706 = check(&report, "PD706");
    let mut codes = CODES.to_vec();
    let mut fixes = vec![pd705, pd707, pd708];
    if performance_schema {
        assert_eq!(pd706["status"], "fail", "{pd706:#}");
        assert_eq!(
            printed_ddl(pd706),
            ["ALTER TABLE `pd_schema`.`used` DROP INDEX `k_unused`;"],
            "only the unread index, not the one the foreign key needs: {pd706:#}"
        );
        codes.push("PD706");
        fixes.push(pd706);
    } else {
        assert_eq!(pd706["status"], "insufficient_data", "{pd706:#}");
        assert!(
            pd706["summary"]
                .as_str()
                .unwrap()
                .contains("performance_schema = OFF"),
            "{pd706:#}"
        );
    }

    // An agent sees the same, then the fix within two samples: the DDL moves the status
    // counters its cached schema is keyed on.
    let watcher = Watcher::start_with(&server, AGENT);
    watcher.until(&codes, "fail", Duration::from_secs(30));
    let ddl: Vec<String> = fixes.into_iter().flat_map(printed_ddl).collect();
    block_on(async {
        let mut c = conn(&server).await;
        let refs: Vec<&str> = ddl.iter().map(String::as_str).collect();
        exec(&mut c, &refs).await;
        // Rebuilt tables count from now: past the (one-second) period, then read again.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        exec(&mut c, WORKLOAD_AFTER).await;
        c.disconnect().await.unwrap();
    });
    watcher.until(&codes, "pass", Duration::from_secs(30));
    let report = doctor(&server);
    for code in &codes {
        assert_eq!(
            check(&report, code)["status"],
            "pass",
            "{}",
            explain(&report, &codes)
        );
    }
    block_on(async {
        let mut c = conn(&server).await;
        exec(&mut c, &["DROP DATABASE pd_schema"]).await;
        c.disconnect().await.unwrap();
    });
}

#[test]
fn schema_rules_fail_on_the_provoked_schema_and_pass_after_the_printed_ddl_11_8() {
    scenario("schema118", true);
}

#[test]
fn schema_rules_fail_on_the_provoked_schema_and_pass_after_the_printed_ddl_10_11() {
    scenario("schema1011", false);
}
