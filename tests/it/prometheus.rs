//! A real Prometheus (Debian's package, started by tests/harness/prometheus.sh) scrapes the
//! agent, which watches MariaDB 11.8 with an undersized vector cache; Prometheus's HTTP API
//! then shows PD101 failing for that instance.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    agent::{get, start_agent},
    support::*,
};

pub(crate) struct Prometheus {
    name: String,
    pub(crate) port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", &self.name]).output();
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/harness/prometheus.sh")
}

pub(crate) fn query(p: &Prometheus, promql: &str) -> Vec<Value> {
    let Some((200, _, body)) = get(
        p.port,
        &format!("/api/v1/query?query={}", urlencode(promql)),
    ) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Prometheus's active alerts: (alertname, code label, state: pending or firing).
pub(crate) fn alerts(p: &Prometheus) -> Vec<(String, String, String)> {
    let Some((200, _, body)) = get(p.port, "/api/v1/alerts") else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["alerts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|a| {
            let l = |k: &str| a["labels"][k].as_str().unwrap_or_default().to_owned();
            (
                l("alertname"),
                l("code"),
                a["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A Prometheus scraping the agent on `agent_port` every second as job `powerdiag`, with the
/// shipped alert rules (deploy/prometheus/powerdiag.rules.yml) evaluated every second and
/// every `for:` shortened to `for_` in the copy; `dir` holds its files.
pub(crate) fn prometheus_with_alerts(
    dir: &std::path::Path,
    agent_port: u16,
    for_: &str,
) -> Prometheus {
    let rules = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/prometheus/powerdiag.rules.yml"),
    )
    .unwrap();
    let shortened: String = rules
        .lines()
        .map(|l| match l.split_once("for: ") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}for: \"{for_}\""),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(shortened, rules, "no `for:` found in the rules");
    std::fs::write(dir.join("powerdiag.rules.yml"), shortened).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  - job_name: powerdiag\n    static_configs:\n      - targets: ['127.0.0.1:{agent_port}']\n",
            dir.join("powerdiag.rules.yml").display()
        ),
    )
    .unwrap();
    start_prometheus(&cfg)
}

/// Starts a throw-away Prometheus (tests/harness/prometheus.sh) with `config`, stopped when
/// dropped.
pub(crate) fn start_prometheus(config: &std::path::Path) -> Prometheus {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let name = format!("prom{port}");
    let out = Command::new(script())
        .args(["start", &name, &port.to_string()])
        .arg(config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "prometheus.sh start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Prometheus { name, port }
}

#[test]
fn prometheus_sees_pd101_failing_for_the_instance() {
    let _lock = m118_lock();
    let server = Server::m118();
    block_on(crate::vector::prepare(&server));
    let agent = start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"2s\"\ntimeout = \"1s\"\nwindow = \"200ms\"\n",
    );
    let instance = format!("127.0.0.1:{}", agent.port);

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: powerdiag\n    static_configs:\n      - targets: ['{instance}']\n"),
    )
    .unwrap();
    let prom = start_prometheus(&cfg);

    let deadline = Instant::now() + Duration::from_secs(30);
    let failing = loop {
        let r = query(
            &prom,
            "powerdiag_check{code=\"PD101\",status=\"fail\"} == 1",
        );
        if !r.is_empty() || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(failing.len(), 1, "PD101 failing in Prometheus: {failing:?}");
    let m = &failing[0]["metric"];
    assert_eq!(m["instance"], instance.as_str());
    assert_eq!(m["name"], "mhnsw-cache-undersized");
    assert_eq!(m["severity"], "critical");
    assert_eq!(m["job"], "powerdiag");

    let up = query(&prom, "powerdiag_mariadb_up");
    assert_eq!(
        up.first()
            .map(|r| r["value"][1].as_str().unwrap_or_default().to_owned()),
        Some("1".into()),
        "{up:?}"
    );
    let scrape = query(&prom, "up{job=\"powerdiag\"}");
    assert_eq!(
        scrape.first().map(|r| r["value"][1].clone()),
        Some(Value::from("1")),
        "Prometheus scraped the agent: {scrape:?}"
    );
    let collectors = query(&prom, "powerdiag_collector_success == 1");
    let names: Vec<&str> = collectors
        .iter()
        .filter_map(|r| r["metric"]["collector"].as_str())
        .collect();
    for c in [
        "host",
        "mariadb",
        "mariadb_vector_indexes",
        "cpu",
        "memory",
        "cpu_time",
    ] {
        assert!(
            names.contains(&c),
            "collector {c} missing from {names:?}; all: {:?}",
            query(&prom, "powerdiag_collector_success")
        );
    }
    let graph = query(
        &prom,
        "powerdiag_mariadb_vector_index_graph_bytes > on(instance, job) group_left powerdiag_mariadb_mhnsw_max_cache_size_bytes",
    );
    assert!(
        !graph.is_empty(),
        "the graph-vs-cache comparison works in PromQL"
    );
}
