//! The Grafana dashboard's structure and the metric names it uses (no servers needed), and
//! the provisioning examples.

use super::*;

#[test]
fn the_dashboard_is_well_formed_grafana_json() {
    let d = dashboard();
    assert_eq!(d["uid"], "powerdiag-fleet");
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(
        d["schemaVersion"]
            .as_u64()
            .is_some_and(|v| (36..=41).contains(&v))
    );
    let vars = d["templating"]["list"].as_array().unwrap();
    let var = |n: &str| {
        vars.iter()
            .find(|v| v["name"] == n)
            .unwrap_or_else(|| panic!("variable {n} missing"))
    };
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    for v in ["job", "instance"] {
        assert_eq!(var(v)["datasource"]["uid"], "${datasource}");
    }
    let mut ids = BTreeSet::new();
    let mut area = 0;
    for p in d["panels"].as_array().unwrap() {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(!title.is_empty(), "a panel without title: {p}");
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "duplicate id in {title}"
        );
        let g = &p["gridPos"];
        for k in ["x", "y", "w", "h"] {
            assert!(g[k].is_u64(), "{title}: gridPos.{k}");
        }
        assert!(
            g["x"].as_u64().unwrap() + g["w"].as_u64().unwrap() <= 24,
            "{title}: wider than the grid"
        );
        area += g["w"].as_u64().unwrap() * g["h"].as_u64().unwrap();
        if p["type"] == "row" {
            continue;
        }
        assert!(
            ["stat", "table", "timeseries"].contains(&p["type"].as_str().unwrap()),
            "{title}: panel type {}",
            p["type"]
        );
        assert!(
            p["description"].as_str().is_some_and(|s| !s.is_empty()),
            "{title}: no description"
        );
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no queries");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            assert!(
                refs.insert(t["refId"].as_str().unwrap()),
                "{title}: duplicate refId"
            );
            let expr = t["expr"].as_str().unwrap();
            assert!(
                !metric_names(expr).is_empty(),
                "{title}: {expr} uses no metric"
            );
            if expr.contains("powerdiag_") {
                assert!(
                    expr.contains("instance=~\"$instance\""),
                    "{title}: {expr} ignores $instance"
                );
            }
        }
    }
    // No two panels overlap: total area equals the union's (cells counted once).
    let mut cells = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        for i in x..x + w {
            for j in y..y + h {
                assert!(
                    cells.insert((i, j)),
                    "panel {} overlaps another at ({i},{j})",
                    p["title"]
                );
            }
        }
    }
    assert_eq!(cells.len() as u64, area);
    // The sections the issue asks for.
    let titles: Vec<&str> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["title"].as_str())
        .collect();
    for wanted in [
        "Failing checks by host and severity",
        "Vector index graph vs mhnsw_max_cache_size",
        "Probe query latency",
        "Partition (PowerVM LPAR)",
        "Effective vs nominal CPU frequency",
        "Steal and busy",
        "Page sizes",
        "TLB misses and events on mariadbd, per second",
        "Collector success",
        "Buffer pool misses",
        "Connections vs max_connections",
    ] {
        assert!(titles.contains(&wanted), "{wanted} missing: {titles:?}");
    }
}

#[test]
fn every_metric_deploy_uses_is_registered_by_the_agent() {
    let registered = registered_names();
    let mut used = BTreeSet::new();
    for p in panels(&dashboard()) {
        for t in p["targets"].as_array().unwrap() {
            used.extend(metric_names(t["expr"].as_str().unwrap()));
        }
    }
    for (_, r) in alerts() {
        used.extend(metric_names(r["expr"].as_str().unwrap()));
    }
    assert!(used.len() > 20, "{used:?}");
    for m in &used {
        assert!(
            m == "up" || registered.contains(m),
            "{m} is used by deploy/ but is not in the agent's catalogue (crates/agent/src/daemon/catalogue.rs)"
        );
    }
    for (m, why) in ABSENT_HERE {
        assert!(
            registered.contains(*m),
            "{m} ({why}) is not a metric of the agent"
        );
    }
    // Every label a selector matches on is one the metric has.
    let mut exprs: Vec<String> = Vec::new();
    for p in panels(&dashboard()) {
        for t in p["targets"].as_array().unwrap() {
            exprs.push(t["expr"].as_str().unwrap().to_owned());
        }
    }
    for (_, r) in alerts() {
        exprs.push(r["expr"].as_str().unwrap().to_owned());
    }
    let mut matched = 0;
    for expr in &exprs {
        for (m, label) in selector_labels(expr) {
            let Some(entry) = powerdiag_agent::daemon::catalogue::find(&m) else {
                continue; // `up`, checked above
            };
            assert!(
                entry.labels.contains(&label.as_str()) || TARGET_LABELS.contains(&label.as_str()),
                "{expr}: {m} has no label {label} (catalogue: {:?})",
                entry.labels
            );
            matched += 1;
        }
    }
    assert!(matched > 20, "{matched}");
    assert_eq!(
        selector_labels(
            "rate(powerdiag_x_total{a=\"1,}\", b!~\"x\"}[5m]) + powerdiag_y{c=\"\\\"\"}"
        ),
        [
            ("powerdiag_x_total", "a"),
            ("powerdiag_x_total", "b"),
            ("powerdiag_y", "c")
        ]
        .iter()
        .map(|(m, l)| (m.to_string(), l.to_string()))
        .collect::<Vec<_>>()
    );
    // The extraction itself.
    assert_eq!(
        metric_names(
            "sum(up{job=~\"$job\"}) + rate(powerdiag_x_total{up=\"1\"}[1m]) / on(instance) powerdiag_y"
        ),
        ["powerdiag_x_total", "powerdiag_y", "up"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn the_grafana_provisioning_examples_point_at_the_dashboard() {
    let dash = yaml(&deploy("grafana/provisioning/dashboards/powerdiag.yml"));
    assert_eq!(dash["apiVersion"], 1);
    let p = &dash["providers"][0];
    assert_eq!(p["type"], "file");
    assert!(p["options"]["path"].is_string());
    let ds = yaml(&deploy("grafana/provisioning/datasources/prometheus.yml"));
    assert_eq!(ds["datasources"][0]["type"], "prometheus");
    // The install line in the provider file copies the dashboard into its path.
    let text = read(&deploy("grafana/provisioning/dashboards/powerdiag.yml"));
    assert!(text.contains(&format!(
        "{}/powerdiag-fleet.json",
        p["options"]["path"].as_str().unwrap()
    )));
}
