//! Alertmanager: amtool checks the route.

use super::*;

#[test]
fn amtool_checks_the_alertmanager_route() {
    let cfg = deploy("prometheus/alertmanager.yml");
    let c = cfg.to_str().unwrap();
    let o = tool("amtool", "prometheus-alertmanager", &["check-config", c]);
    assert!(o.status.success(), "amtool check-config:\n{}", text(&o));
    for (labels, receiver) in [
        (
            [
                "alertname=PowerdiagCriticalCheckFailing",
                "severity=critical",
            ],
            "dba-pager",
        ),
        (
            ["alertname=PowerdiagWarningCheckFailing", "severity=warning"],
            "dba-mail",
        ),
        (
            ["alertname=PowerdiagAgentDown", "severity=warning"],
            "dba-mail",
        ),
        (["alertname=SomethingElse", "severity=critical"], "default"),
    ] {
        let mut args = vec!["config", "routes", "test", "--config.file", c];
        args.extend(labels);
        let o = tool("amtool", "prometheus-alertmanager", &args);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            receiver,
            "{labels:?}: {}",
            text(&o)
        );
    }
    // Every alert's severity has a route.
    for (name, r) in alerts() {
        let sev = r["labels"]["severity"].as_str().unwrap();
        let label = format!("alertname={name}");
        let sev = format!("severity={sev}");
        let o = tool(
            "amtool",
            "prometheus-alertmanager",
            &["config", "routes", "test", "--config.file", c, &label, &sev],
        );
        assert_ne!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "default",
            "{name}"
        );
    }
    // Every inhibit rule's source is an alert the rules define, and its target a check alert
    // for a rule that exists: a renamed alert would silently stop inhibiting.
    let am = yaml(&cfg);
    let names: Vec<String> = alerts().into_iter().map(|(n, _)| n).collect();
    let codes: Vec<&str> = powerdiag_rules::RULES
        .iter()
        .map(|r| r.meta().code)
        .collect();
    for rule in am["inhibit_rules"].as_array().unwrap() {
        for m in rule["source_matchers"]
            .as_array()
            .unwrap()
            .iter()
            .chain(rule["target_matchers"].as_array().unwrap())
        {
            let m = m.as_str().unwrap();
            let value = m.split('"').nth(1).unwrap_or_default();
            // `=` names one; `=~` an alternation of names.
            for v in value.split('|') {
                if m.starts_with("alertname") {
                    assert!(names.iter().any(|n| n == v), "{m}: no alert {v}");
                } else if m.starts_with("code") {
                    assert!(codes.contains(&v), "{m}: no rule {v}");
                }
            }
        }
    }
}
