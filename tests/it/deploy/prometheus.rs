//! Prometheus: promtool checks the scrape configurations and the alert rules and runs their
//! unit tests; every alert is unit-tested and names its rule and the fix.

use super::*;

#[test]
fn promtool_checks_the_scrape_configs_and_rules_and_runs_the_rule_unit_tests() {
    for file in ["prometheus.yml", "prometheus-fleet.yml"] {
        let p = deploy(&format!("prometheus/{file}"));
        let o = tool(
            "promtool",
            "prometheus",
            &["check", "config", p.to_str().unwrap()],
        );
        assert!(
            o.status.success(),
            "promtool check config {file}:\n{}",
            text(&o)
        );
        // check config also checks the rule files it names: make sure it found ours.
        assert!(text(&o).contains("1 rule files found"), "{}", text(&o));
    }
    let rules = deploy("prometheus/powerdiag.rules.yml");
    let o = tool(
        "promtool",
        "prometheus",
        &["check", "rules", rules.to_str().unwrap()],
    );
    assert!(o.status.success(), "promtool check rules:\n{}", text(&o));
    let tests = deploy("prometheus/powerdiag.rules.test.yml");
    let o = tool(
        "promtool",
        "prometheus",
        &["test", "rules", tests.to_str().unwrap()],
    );
    assert!(o.status.success(), "promtool test rules:\n{}", text(&o));
    assert!(text(&o).contains("SUCCESS"), "{}", text(&o));

    // The unit tests must be able to fail: a changed `for:` breaks them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("powerdiag.rules.yml"),
        read(&rules).replace("for: \"30m\"", "for: \"10m\""),
    )
    .unwrap();
    std::fs::copy(&tests, dir.path().join("powerdiag.rules.test.yml")).unwrap();
    let o = tool(
        "promtool",
        "prometheus",
        &[
            "test",
            "rules",
            dir.path()
                .join("powerdiag.rules.test.yml")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(
        !o.status.success(),
        "a mutated rule must fail the tests:\n{}",
        text(&o)
    );
}

#[test]
fn every_alert_is_unit_tested_firing_and_not_firing() {
    let tests = yaml(&deploy("prometheus/powerdiag.rules.test.yml"));
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for t in tests["tests"].as_array().unwrap() {
        for a in t["alert_rule_test"].as_array().unwrap() {
            let name = a["alertname"].as_str().unwrap().to_owned();
            if a["exp_alerts"].as_array().is_some_and(|v| !v.is_empty()) {
                firing.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    for (name, _) in alerts() {
        assert!(
            firing.contains(&name),
            "{name}: no promtool test where it fires"
        );
        assert!(
            quiet.contains(&name),
            "{name}: no promtool test where it does not fire"
        );
    }
}

#[test]
fn alerts_name_the_rule_and_say_what_to_do() {
    let runbooks = root().join("docs/runbooks");
    let mut bases = BTreeSet::new();
    let names: Vec<String> = alerts().into_iter().map(|(n, _)| n).collect();
    for wanted in [
        "PowerdiagCriticalCheckFailing",
        "PowerdiagConfigurationCheckFailing",
        "PowerdiagWarningCheckFailing",
        "PowerdiagAgentDown",
        "PowerdiagMariadbUnreachable",
        "PowerdiagSampleStale",
        "PowerdiagCollectorFailing",
        "PowerdiagReplicationNotRunning",
        "PowerdiagReplicationLag",
        "PowerdiagSemisyncFellBack",
        "PowerdiagGaleraNotReady",
        "PowerdiagGaleraOutOfSync",
        "PowerdiagGaleraNodeLost",
        "PowerdiagGaleraFlowControl",
        "PowerdiagGaleraApplyQueue",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} missing: {names:?}"
        );
    }
    for (name, r) in alerts() {
        let sev = r["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&sev),
            "{name}: severity {sev:?}"
        );
        assert!(r["for"].is_string(), "{name}: no `for`");
        let a = &r["annotations"];
        let summary = a["summary"].as_str().unwrap_or_default();
        let description = a["description"].as_str().unwrap_or_default();
        assert!(
            summary.contains("{{ $labels.instance }}"),
            "{name}: summary names no host"
        );
        // Every link is BASE/PAGE.md with one BASE for all (the one place to point them at a
        // copy of docs/runbooks/), and PAGE is a page there: the rule's code for the check
        // alerts (every rule has its generated page, tests/it/runbooks.rs), else the alert's.
        let url = a["runbook_url"].as_str().unwrap_or_default();
        let (base, page) = url
            .rsplit_once('/')
            .unwrap_or_else(|| panic!("{name}: runbook_url {url:?} is not BASE/PAGE.md"));
        assert!(
            base.starts_with("https://") || base.starts_with("file:///"),
            "{name}: runbook base {base:?} is not a real location"
        );
        bases.insert(base.to_owned());
        let check_alert = r["expr"].as_str().unwrap().contains("powerdiag_check");
        if check_alert {
            assert_eq!(page, "{{ $labels.code }}.md", "{name}: {url}");
            for rule in powerdiag_rules::RULES {
                let code = rule.meta().code;
                assert!(
                    runbooks.join(format!("{code}.md")).is_file(),
                    "{name}: no runbook docs/runbooks/{code}.md"
                );
            }
        } else {
            assert_eq!(page, format!("{name}.md"), "{name}: {url}");
            let text = read(&runbooks.join(page));
            assert!(
                text.starts_with(&format!("# {name}\n")),
                "docs/runbooks/{page} must start with `# {name}`"
            );
        }
        if check_alert {
            // The check alerts name the rule and point at its explanation.
            for needle in ["{{ $labels.code }}", "{{ $labels.name }}"] {
                assert!(summary.contains(needle), "{name}: summary lacks {needle}");
            }
            assert!(
                description.contains("powerdiag explain {{ $labels.code }}"),
                "{name}: description does not say `powerdiag explain CODE`"
            );
        } else {
            assert!(
                description.starts_with(&format!("{name}:")),
                "{name}: description must name the alert"
            );
        }
    }
    assert_eq!(
        bases.len(),
        1,
        "every runbook_url must share one base: {bases:?}"
    );
    // The packages install docs/runbooks/ there (Cargo.toml's deb and rpm assets).
    assert_eq!(
        bases.first().map(String::as_str),
        Some("file:///usr/share/powerdiag/runbooks")
    );
}
