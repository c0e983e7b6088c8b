//! Metric label injection (issue 16, item 1): a user with CREATE names a schema, a table and a
//! vector index with `"`, `}` and newlines, shaped to end the label and forge a
//! `powerdiag_check{code="PD401",status="fail"}` series. Against MariaDB 11.8 and a real
//! Prometheus scraping the agent: the names arrive as exact label values, no forged series
//! exists, every series is a catalogued metric with its declared labels, and the scrape stays
//! healthy. (Before the encoder escaped every label value, Prometheus stored the forged
//! series.)

use std::{
    collections::BTreeSet,
    process::Command,
    time::{Duration, Instant},
};

use mysql_async::prelude::Queryable;
use powerdiag_agent::daemon::catalogue;
use serde_json::Value;

use crate::{
    agent::{get, start_agent},
    prometheus::{query, start_prometheus},
    support::*,
};

/// Ends the `schema` label and starts a `powerdiag_check` line (at most 64 characters, the
/// limit of a MariaDB identifier).
const SCHEMA: &str = "pd\"} 1\npowerdiag_check{code=\"PD401\",status=\"fail\",x=\"";
const TABLE: &str = "t\"},\n{\\";
const INDEX: &str = "e\"\n}";

/// A MariaDB identifier, quoted.
fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// Drops the hostile schema, also when the test fails.
struct Cleanup(Server);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let server = self.0.clone();
        block_on(async move {
            if let Ok(mut c) = server.pool().get_conn().await {
                let _ = c
                    .query_drop(format!("DROP DATABASE IF EXISTS {}", ident(SCHEMA)))
                    .await;
            }
        });
    }
}

/// Polls a PromQL query until it returns series or `limit` passes.
fn poll(prom: &crate::prometheus::Prometheus, q: &str, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let r = query(prom, q);
        if !r.is_empty() || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A query whose answer is large: through curl, since large answers come chunked, which the
/// tests' minimal HTTP client does not decode.
fn query_large(p: &crate::prometheus::Prometheus, q: &str) -> Vec<Value> {
    let url = format!(
        "http://127.0.0.1:{}/api/v1/query?query={}",
        p.port,
        urlencode(q)
    );
    let o = Command::new("curl")
        .args(["-fsS", "--max-time", "10", &url])
        .output()
        .expect("curl (tests/harness/setup.sh installs it)");
    assert!(
        o.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[test]
fn hostile_names_neither_forge_series_nor_break_the_scrape() {
    assert!(SCHEMA.chars().count() <= 64);
    let _lock = m118_lock();
    let server = Server::m118();
    let _cleanup = Cleanup(server.clone());
    block_on(async {
        let mut c = server.pool().get_conn().await.expect("connect as root");
        c.query_drop(format!("DROP DATABASE IF EXISTS {}", ident(SCHEMA)))
            .await
            .unwrap();
        c.query_drop(format!("CREATE DATABASE {}", ident(SCHEMA)))
            .await
            .unwrap();
        c.query_drop(format!(
            "CREATE TABLE {}.{} (id INT PRIMARY KEY, v VECTOR(4) NOT NULL, VECTOR INDEX {} (v)) ENGINE=InnoDB",
            ident(SCHEMA),
            ident(TABLE),
            ident(INDEX)
        ))
        .await
        .unwrap();
        let rows: Vec<String> = (1..=50)
            .map(|i| format!("({i}, VEC_FromText('[{i},1,2,3]'))"))
            .collect();
        c.query_drop(format!(
            "INSERT INTO {}.{} VALUES {}",
            ident(SCHEMA),
            ident(TABLE),
            rows.join(",")
        ))
        .await
        .unwrap();
    });

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

    // 1. The names arrive whole, as label values, on the vector index's series.
    let hostile = |r: &Value| {
        r["metric"]["schema"] == SCHEMA
            && r["metric"]["table"] == TABLE
            && r["metric"]["index"] == INDEX
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let r = query(&prom, "powerdiag_mariadb_vector_index_rows");
        if r.iter().any(hostile) || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        rows.iter().any(hostile),
        "no vector index series with the hostile names: {rows:?}"
    );

    // 2. No forged series: PD401 has its one series, and every powerdiag_check series has
    // exactly the declared labels.
    let pd401 = poll(
        &prom,
        "powerdiag_check{code=\"PD401\"}",
        Duration::from_secs(5),
    );
    assert_eq!(pd401.len(), 1, "PD401 series: {pd401:?}");
    let checks = query_large(&prom, "powerdiag_check");
    let mut want: BTreeSet<&str> = catalogue::CHECK.labels.into_iter().collect();
    want.extend(["__name__", "instance", "job"]);
    for c in &checks {
        let keys: BTreeSet<&str> = c["metric"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, want, "forged series: {c}");
    }
    assert!(checks.len() >= 20, "{checks:?}");

    // 3. Every stored series of the agent is a catalogued metric with its declared labels.
    let all = query_large(&prom, &format!("{{instance=\"{instance}\"}}"));
    assert!(all.len() > 50, "{all:?}");
    for s in &all {
        let m = s["metric"].as_object().unwrap();
        let name = m["__name__"].as_str().unwrap();
        if name == "up" || name.starts_with("scrape_") {
            continue; // Prometheus's own
        }
        let entry = catalogue::find(name).unwrap_or_else(|| panic!("{name} is not catalogued"));
        let keys: BTreeSet<&str> = m
            .keys()
            .map(String::as_str)
            .filter(|k| !["__name__", "instance", "job"].contains(k))
            .collect();
        let declared: BTreeSet<&str> = entry.labels.iter().copied().collect();
        assert_eq!(keys, declared, "{name}: {s}");
    }

    // 4. The scrape is healthy: up, and the whole body parsed (Prometheus scrapes
    // OpenMetrics; promtool reads the text format).
    let up = query(&prom, "up{job=\"powerdiag\"}");
    assert_eq!(
        up.first().map(|r| r["value"][1].clone()),
        Some(Value::from("1")),
        "{up:?}"
    );
    let scraped = query(&prom, "scrape_samples_scraped{job=\"powerdiag\"}");
    assert!(
        scraped
            .first()
            .and_then(|r| r["value"][1].as_str())
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|n| n > 50.0),
        "samples scraped: {scraped:?}"
    );
    let (_, _, body) = get(agent.port, "/metrics").unwrap();
    assert_promtool_accepts(&body);
}
