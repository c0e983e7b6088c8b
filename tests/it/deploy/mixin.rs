//! The monitoring mixin (deploy/mixin): the shipped rules and dashboard are a fresh render of
//! it, and its `_config` reaches every alert (a fork with another job name or runbook location
//! changes one line). Needs Debian's `jsonnet`; no servers.

use super::*;

#[test]
fn the_shipped_rules_and_dashboard_are_the_rendered_mixin() {
    let script = deploy("mixin/render.sh");
    let o = run_tool(
        {
            let mut c = Command::new(&script);
            c.arg("--check");
            c
        },
        "jsonnet",
        "jsonnet",
    );
    assert!(
        o.status.success(),
        "deploy/ differs from the mixin; run deploy/mixin/render.sh:\n{}",
        text(&o)
    );
}

#[test]
fn the_config_reaches_every_alert() {
    let mixin = deploy("mixin/mixin.libsonnet");
    let expr = format!(
        "local m = (import '{}') + {{ _config+:: {{ jobSelector: 'job=\"db-agents\"', runbookBaseUrl: 'https://wiki.example/rb', configurationCheckFor: '4h' }} }}; m.prometheusAlerts",
        mixin.display()
    );
    let o = tool("jsonnet", "jsonnet", &["-e", &expr]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut seen = 0;
    for g in v["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let name = r["alert"].as_str().unwrap();
            let expr = r["expr"].as_str().unwrap();
            assert!(expr.contains("job=\"db-agents\""), "{name}: {expr}");
            assert!(!expr.contains("job=\"powerdiag\""), "{name}: {expr}");
            let url = r["annotations"]["runbook_url"].as_str().unwrap();
            assert!(url.starts_with("https://wiki.example/rb/"), "{name}: {url}");
            if name == "PowerdiagConfigurationCheckFailing" {
                assert_eq!(r["for"], "4h");
                assert_eq!(
                    r["labels"]["severity"], "warning",
                    "configuration never pages"
                );
            }
            seen += 1;
        }
    }
    assert_eq!(seen, alerts().len(), "the same alerts as the shipped file");

    // The Grafana-managed rules are rendered from the same config.
    let expr = format!(
        "local m = (import '{}') + {{ _config+:: {{ jobSelector: 'job=\"db-agents\"', runbookBaseUrl: 'https://wiki.example/rb', configurationCheckFor: '4h' }} }}; m.grafanaAlerts",
        mixin.display()
    );
    let o = tool("jsonnet", "jsonnet", &["-e", &expr]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut grafana = 0;
    for g in v["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let name = r["title"].as_str().unwrap();
            let exprs: Vec<&str> = r["data"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|d| d["model"]["expr"].as_str())
                .collect();
            assert!(
                !exprs.is_empty() && exprs.iter().all(|e| e.contains("job=\"db-agents\"")),
                "{name}: {exprs:?}"
            );
            let url = r["annotations"]["runbook_url"].as_str().unwrap();
            assert!(url.starts_with("https://wiki.example/rb/"), "{name}: {url}");
            if name == "PowerdiagConfigurationCheckFailing" {
                assert_eq!(r["for"], "4h");
            }
            grafana += 1;
        }
    }
    assert_eq!(grafana, seen, "Grafana gets every alert");
}
