//! The agent as deployed (the unit's command line), scraped by a real Prometheus with the
//! deploy/ configuration: every dashboard query returns data and the alerts evaluate, the
//! Grafana-managed ones' queries too.

use super::*;

/// Starts the agent with the systemd unit's ExecStart: `%d` is a credentials directory holding
/// the my.cnf, the configuration file is the deployed one made faster, and
/// `$POWERDIAG_AGENT_ARGS` comes from the env example with a free loopback port.
fn agent_as_the_unit_starts_it(server: &Server, port: u16) -> Agent {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    std::fs::create_dir(&creds).unwrap();
    std::fs::write(creds.join("my.cnf"), my_cnf(server)).unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, fast_agent_toml(true)).unwrap();
    let env = read(&deploy("systemd/powerdiag-agent.env"));
    let extra = env
        .lines()
        .find_map(|l| l.strip_prefix("POWERDIAG_AGENT_ARGS="))
        .expect("POWERDIAG_AGENT_ARGS in powerdiag-agent.env")
        .replace(
            "--web.listen-address=:9987",
            &format!("--web.listen-address=127.0.0.1:{port}"),
        );
    let unit = settings(&read(&deploy("systemd/powerdiag-agent.service")));
    let exec = &unit.iter().find(|(k, _)| k == "ExecStart").unwrap().1;
    let words: Vec<String> = exec
        .split_whitespace()
        .flat_map(|w| match w {
            "$POWERDIAG_AGENT_ARGS" => extra.split_whitespace().map(str::to_owned).collect(),
            w => vec![
                w.replace("%d", creds.to_str().unwrap())
                    .replace("/etc/powerdiag/agent.toml", config.to_str().unwrap()),
            ],
        })
        .collect();
    assert_eq!(words[0], "/usr/local/bin/powerdiag");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_powerdiag"));
    cmd.args(&words[1..]).env_remove("POWERDIAG_MARIADB_URL");
    spawn_agent(cmd, port, dir)
}

/// prometheus-fleet.yml with its rules, at test speed, its file_sd directory holding the
/// example targets file and one for the agent.
fn fleet_prometheus(dir: &Path, agent_port: u16) -> Prometheus {
    let fleet = read(&deploy("prometheus/prometheus-fleet.yml"));
    assert!(fleet.contains("scrape_interval: 30s") && fleet.contains("evaluation_interval: 30s"));
    let cfg = fleet
        .replace(
            "scrape_interval: 30s",
            "scrape_interval: 1s\n  scrape_timeout: 1s",
        )
        .replace("evaluation_interval: 30s", "evaluation_interval: 1s");
    std::fs::write(dir.join("prometheus.yml"), cfg).unwrap();
    std::fs::copy(
        deploy("prometheus/powerdiag.rules.yml"),
        dir.join("powerdiag.rules.yml"),
    )
    .unwrap();
    std::fs::create_dir(dir.join("targets")).unwrap();
    std::fs::copy(
        deploy("prometheus/targets/powerdiag.yml"),
        dir.join("targets/powerdiag.yml"),
    )
    .unwrap();
    std::fs::write(
        dir.join("targets/test.yml"),
        format!("- targets: ['127.0.0.1:{agent_port}']\n  labels:\n    env: test\n"),
    )
    .unwrap();
    start_prometheus(&dir.join("prometheus.yml"))
}

/// The dashboard's variables as Grafana would fill them in for this one host.
fn substitute(expr: &str, instance: &str) -> String {
    expr.replace("$__rate_interval", "10s")
        .replace("$__interval", "2s")
        .replace("$__range", "1m")
        .replace("$instance", &regex_escape(instance))
        .replace("$job", "powerdiag")
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c == '.' {
                vec!['\\', '\\', '.']
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A Prometheus API call (through curl: large answers come chunked, which the tests' minimal
/// HTTP client does not decode).
fn api(p: &Prometheus, path: &str) -> Value {
    let url = format!("http://127.0.0.1:{}{path}", p.port);
    let o = tool("curl", "curl", &["-fsS", "--max-time", "10", &url]);
    assert!(o.status.success(), "{url}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{url}: {e}: {}", text(&o)))
}

#[test]
fn dashboard_and_alerts_work_against_prometheus_scraping_the_deployed_agent() {
    let _lock = m118_lock();
    let server = Server::m118();
    block_on(crate::vector::prepare(&server));
    // Prometheus first: the agent probes in its first sample only (then every 10 minutes),
    // and Prometheus must scrape that sample.
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let prom = fleet_prometheus(dir.path(), port);
    let instance = "127.0.0.1"; // the fleet config's relabelling drops the port
    // Service discovery hands targets to the scrape manager every few seconds: wait for ours.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !api(&prom, "/api/v1/targets")["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["labels"]["instance"] == instance)
    {
        assert!(
            Instant::now() < deadline,
            "Prometheus never picked up targets/test.yml"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let agent = agent_as_the_unit_starts_it(&server, port);
    assert_mariadb_up(&agent);

    // 0. The deployed agent's exposition, with the probe's series in it (the first sample
    // ran the probe), passes promtool (a `quantile` label on a gauge did not).
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = get(agent.port, "/metrics")
            .map(|(_, _, b)| b)
            .unwrap_or_default();
        if body.contains("powerdiag_mariadb_probe_query_latency_seconds{")
            || Instant::now() > deadline
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        body.contains("powerdiag_mariadb_probe_query_latency_seconds{"),
        "no probe series in\n{body}"
    );
    let mut promtool = Command::new("promtool");
    promtool
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = promtool.spawn().unwrap_or_else(|e| {
        panic!(
            "promtool: {e}. Install it: apt-get install prometheus (tests/harness/setup.sh does)"
        )
    });
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), body.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "promtool check metrics on the deployed agent: {}",
        text(&o)
    );

    // 1. Every panel query returns data (rates need a few scrapes: poll up to 60 s).
    let d = dashboard();
    let targets: Vec<(String, String, String)> = panels(&d)
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap().to_owned();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| {
                    (
                        title.clone(),
                        t["refId"].as_str().unwrap().to_owned(),
                        t["expr"].as_str().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let scraped: BTreeSet<String> = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = api(
                &prom,
                &format!(
                    "/api/v1/label/__name__/values?match[]={}",
                    urlencode(&format!("{{instance=\"{instance}\"}}"))
                ),
            );
            let names: BTreeSet<String> = v["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect();
            // The probe's series exist in the sample that ran it (the first one); the
            // statement counters from the second read of the digest table on.
            if (names.contains("powerdiag_mariadb_probe_query_latency_seconds")
                && names.contains("powerdiag_mariadb_statement_seconds_total"))
                || Instant::now() > deadline
            {
                break names;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let absent: BTreeMap<&str, &str> = ABSENT_HERE.iter().copied().collect();
    // Why a query may be empty on this machine, if it may.
    let excuse = |title: &str, refid: &str, expr: &str| -> Option<String> {
        let missing: Vec<String> = metric_names(expr)
            .into_iter()
            .filter(|m| !scraped.contains(m))
            .collect();
        if !missing.is_empty() && missing.iter().all(|m| absent.contains_key(m.as_str())) {
            let why: Vec<&str> = missing.iter().map(|m| absent[m.as_str()]).collect();
            return Some(format!("{missing:?}: {}", why.join("; ")));
        }
        EMPTY_HERE
            .iter()
            .find(|(t, r, _)| *t == title && *r == refid)
            .map(|(_, _, why)| (*why).to_owned())
    };
    let mut results: BTreeMap<(String, String), usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (title, refid, expr) in &targets {
            let n = query(&prom, &substitute(expr, instance)).len();
            results.insert((title.clone(), refid.clone()), n);
        }
        let done = targets.iter().all(|(title, refid, expr)| {
            results[&(title.clone(), refid.clone())] > 0 || excuse(title, refid, expr).is_some()
        });
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let mut failures = Vec::new();
    let mut panel_has_data: BTreeMap<&str, bool> = BTreeMap::new();
    for (title, refid, expr) in &targets {
        let n = results[&(title.clone(), refid.clone())];
        *panel_has_data.entry(title).or_default() |= n > 0;
        if n > 0 {
            continue;
        }
        match excuse(title, refid, expr) {
            Some(why) => eprintln!("deploy: panel {title:?} query {refid} is empty here: {why}"),
            None => failures.push(format!("{title} / {refid}: {}", substitute(expr, instance))),
        }
    }
    for (title, has) in &panel_has_data {
        if !has {
            failures.push(format!("panel {title:?}: no query returns data"));
        }
    }
    assert!(
        failures.is_empty(),
        "dashboard queries without data:\n{}",
        failures.join("\n")
    );

    // 2. Every metric the alerts and the dashboard use was scraped from the agent, or is one
    // of the machine-dependent ones.
    let mut used = BTreeSet::new();
    for (_, _, expr) in &targets {
        used.extend(metric_names(expr));
    }
    for (_, r) in alerts() {
        used.extend(metric_names(r["expr"].as_str().unwrap()));
    }
    for m in &used {
        if m == "up" {
            continue; // Prometheus's own, checked below
        }
        assert!(
            scraped.contains(m) || absent.contains_key(m.as_str()),
            "{m} is used by deploy/ but the agent did not export it (scraped: {scraped:?})"
        );
    }

    // 3. The rules load and evaluate against the real series: healthy, and PD101 (the
    // undersized vector cache, a configuration finding) pending or firing for this host.
    let rules = api(&prom, "/api/v1/rules");
    let mut loaded = 0;
    for g in rules["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "rule {}: {}", r["name"], r["lastError"]);
            loaded += 1;
        }
    }
    assert_eq!(loaded, alerts().len());
    let alerts_now = api(&prom, "/api/v1/alerts");
    let pd101 = alerts_now["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["labels"]["alertname"] == "PowerdiagConfigurationCheckFailing"
                && a["labels"]["code"] == "PD101"
        });
    let pd101 = pd101.unwrap_or_else(|| panic!("PD101 alert not pending: {alerts_now}"));
    assert_eq!(pd101["labels"]["instance"], instance);
    // A configuration finding opens a ticket; it never pages.
    assert_eq!(pd101["labels"]["severity"], "warning");
    assert_eq!(
        pd101["annotations"]["summary"],
        "PD101 mhnsw-cache-undersized (critical, configuration) fails on 127.0.0.1"
    );

    // 4. The Grafana-managed rules (deploy/grafana/provisioning/alerting) send Prometheus the
    // same queries: each evaluates without error, and the configuration rule's returns PD101
    // for this host, which its condition turns into a firing alert.
    let queries = super::grafana_alerting::grafana_queries();
    assert_eq!(queries.len(), alerts().len());
    for (title, expr) in &queries {
        let v = api(&prom, &format!("/api/v1/query?query={}", urlencode(expr)));
        assert_eq!(v["status"], "success", "Grafana rule {title}: {expr}: {v}");
        assert!(v["data"]["result"].is_array(), "Grafana rule {title}: {v}");
        if title == "PowerdiagConfigurationCheckFailing" {
            assert!(
                v["data"]["result"].as_array().unwrap().iter().any(|s| {
                    s["metric"]["code"] == "PD101" && s["metric"]["instance"] == instance
                }),
                "Grafana rule {title}: no PD101 series for {instance}: {v}"
            );
        }
    }
    // The example targets from targets/powerdiag.yml were read too (they cannot be reached).
    let t = api(&prom, "/api/v1/targets");
    let active: Vec<String> = t["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["labels"]["instance"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    for host in [
        "db1.example.com",
        "db2.example.com",
        "aix-db1.example.com",
        instance,
    ] {
        assert!(
            active.iter().any(|a| a == host),
            "{host} not a target: {active:?}"
        );
    }
    let up = query(
        &prom,
        &format!("up{{job=\"powerdiag\",instance=\"{instance}\"}}"),
    );
    assert_eq!(
        up.first().map(|r| r["value"][1].clone()),
        Some(Value::from("1"))
    );
}
