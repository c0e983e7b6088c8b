//! deploy/: every artifact checked by the tool that consumes it. promtool checks the scrape
//! configurations and the alert rules and runs their unit tests; amtool checks the Alertmanager
//! route; systemd-analyze verifies the unit; shellcheck and sh -n read the AIX scripts, and the
//! SRC registration and the LDR_CNTRL wrapper run against stand-ins for the AIX commands. The
//! Grafana dashboard cannot be loaded into a Grafana here: its JSON structure is checked, and
//! every panel query runs against a real Prometheus that scraped the agent (started with the
//! unit's own command line) and must return data. A missing tool fails with the install hint.

mod aix;
mod alertmanager;
mod grafana;
mod grafana_alerting;
mod mixin;
mod prometheus;
mod scraped;
mod systemd;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    agent::{Agent, free_port, get, metric, spawn_agent},
    prometheus::{Prometheus, query, start_prometheus},
    support::*,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(rel: &str) -> PathBuf {
    root().join("deploy").join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs a tool, failing loudly (with the package to install) when it is missing.
fn tool(name: &str, package: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(name);
    cmd.args(args);
    run_tool(cmd, name, package)
}

fn run_tool(mut cmd: Command, name: &str, package: &str) -> Output {
    cmd.output().unwrap_or_else(|e| {
        panic!("{name}: {e}. Install it: apt-get install {package} (tests/harness/setup.sh does)")
    })
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn yaml(path: &Path) -> Value {
    yaml_serde::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The alert rules: (alert name, rule).
fn alerts() -> Vec<(String, Value)> {
    let rules = yaml(&deploy("prometheus/powerdiag.rules.yml"));
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .map(|r| (r["alert"].as_str().unwrap().to_owned(), r))
        .collect()
}

fn dashboard() -> Value {
    let path = deploy("grafana/powerdiag-fleet.json");
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel with queries (rows excluded), flattened out of collapsed rows too.
fn panels(d: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            out.extend(p["panels"].as_array().cloned().unwrap_or_default());
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// Metric names in a PromQL expression: identifiers starting with `powerdiag_`, and `up`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let word_end = rest[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |e| i + e);
        let word = &rest[i..word_end];
        let after = rest[word_end..].trim_start();
        // A label name (`up=...`) or a function (`rate(`) is not a metric.
        let is_label = after.starts_with('=') || after.starts_with("!=") || after.starts_with("=~");
        if word.starts_with("powerdiag_") || (word == "up" && !is_label && !after.starts_with('('))
        {
            names.insert(word.to_owned());
        }
        rest = &rest[word_end..];
    }
    names
}

/// `(metric, label)` for each label matcher of a selector in a PromQL expression:
/// `powerdiag_check{code="PD401", status=~"f.*"}` gives `(powerdiag_check, code)` and
/// `(powerdiag_check, status)`.
fn selector_labels(expr: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in metric_names(expr) {
        let mut rest = expr;
        while let Some(i) = rest.find(&format!("{name}{{")) {
            let before = rest[..i].chars().next_back();
            let inner = &rest[i + name.len() + 1..];
            rest = inner;
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue; // the end of a longer name
            }
            // Up to the closing brace outside quotes; matchers split at commas outside quotes.
            let (mut quoted, mut escaped, mut current) = (false, false, String::new());
            for c in inner.chars() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' if quoted => escaped = true,
                    '"' => quoted = !quoted,
                    ',' | '}' if !quoted => {
                        let label: String = current
                            .trim()
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !label.is_empty() {
                            out.push((name.clone(), label));
                        }
                        current.clear();
                        if c == '}' {
                            break;
                        }
                        continue;
                    }
                    _ => {}
                }
                if !quoted {
                    current.push(c);
                }
            }
        }
    }
    out
}

/// Labels a selector may use besides the catalogued ones: the target's, added by Prometheus
/// and the fleet configuration.
const TARGET_LABELS: &[&str] = &["job", "instance", "env", "team", "platform", "cluster"];

/// Metric names the agent exports: its catalogue (the encoder can write no other).
fn registered_names() -> BTreeSet<String> {
    powerdiag_agent::daemon::catalogue::CATALOGUE
        .iter()
        .map(|e| e.name.to_owned())
        .collect()
}

/// Metrics the agent registers but cannot export on this test machine, and why. A dashboard
/// query may come back empty only when every series it needs is one of these.
const ABSENT_HERE: &[(&str, &str)] = &[
    (
        "powerdiag_lpar_info",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_lpar_entitled_capacity",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_lpar_online_vcpus",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_cpu_frequency_effective_hertz",
        "needs SPURR/PURR (POWER) or cpufreq; the test VM has neither (its /proc/cpuinfo MHz is powerdiag_cpu_frequency_current_hertz, not a measurement)",
    ),
    (
        "powerdiag_cpu_frequency_nominal_hertz",
        "needs cpufreq (base or max frequency) or a POWER /proc/cpuinfo clock; the test VM has neither",
    ),
    (
        "powerdiag_mariadb_lock_blocker_info",
        "exported only while a session blocks others; nothing waits for a lock on the test server",
    ),
    (
        "powerdiag_mariadb_replication_thread_running",
        "exported only on a replica; the test server is none (tests/it/replication.rs scrapes it from a real replica)",
    ),
    (
        "powerdiag_mariadb_replication_lag_seconds",
        "exported only on a replica; the test server is none (tests/it/replication.rs scrapes it from a real replica)",
    ),
    (
        "powerdiag_mariadb_galera_cluster_size",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_primary",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_synced",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_ready",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_desync",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_flow_control_paused_seconds_total",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_flow_control_sent_total",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_receive_queue",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_applier_threads",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_galera_cert_deps_distance",
        "exported only on a Galera node; the test server is none (tests/it/galera.rs scrapes a real cluster)",
    ),
    (
        "powerdiag_mariadb_replication_sql_delay_seconds",
        "exported only on a replica; the test server is none (tests/it/replication.rs scrapes it from a real replica)",
    ),
];

/// Dashboard queries that may come back empty here although their metric exists, and why.
const EMPTY_HERE: &[(&str, &str, &str)] = &[(
    "TLB misses and events on mariadbd, per second",
    "A",
    "dTLB/iTLB-load-misses need a PMU, which the test VM lacks; the panel's query B (software events) returns data",
)];

// Shared by the systemd, AIX and scraped-agent tests.

/// `Key=value` settings of a unit file, continuation lines joined.
fn settings(unit: &str) -> Vec<(String, String)> {
    let joined = unit.replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

/// deploy/systemd/my.cnf with the test server's endpoint and root's password.
fn my_cnf(server: &Server) -> String {
    read(&deploy("systemd/my.cnf"))
        .lines()
        .map(|l| match l.split_once(" = ").map(|(k, _)| k) {
            Some("user") => "user = root".to_owned(),
            Some("password") => format!("password = {}", Server::root_password()),
            Some("port") => format!("port = {}", server.port),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// deploy/systemd/agent.toml with test-speed intervals (the keys must exist there).
fn fast_agent_toml(probe: bool) -> String {
    let toml = read(&deploy("systemd/agent.toml"));
    let mut out = toml.clone();
    for (from, to) in [
        ("timeout = \"5s\"", "timeout = \"1s\""),
        ("window = \"1s\"", "window = \"200ms\""),
        ("queries = 20", "queries = 4"),
        ("interval = \"60s\"", "interval = \"3s\""),
        (
            "interval = \"10m\"   # time between two reads of the digest table",
            "interval = \"3s\"    # time between two reads of the digest table",
        ),
    ] {
        assert!(toml.contains(from), "agent.toml lacks {from}");
        out = out.replace(from, to);
    }
    if !probe {
        out = out.replace("enabled = true", "enabled = false");
    }
    out
}

fn assert_mariadb_up(agent: &Agent) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let body = get(agent.port, "/metrics")
            .map(|(_, _, b)| b)
            .unwrap_or_default();
        if metric(&body, "powerdiag_mariadb_up") == Some(1.0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never reached MariaDB:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
