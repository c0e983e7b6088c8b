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
}
