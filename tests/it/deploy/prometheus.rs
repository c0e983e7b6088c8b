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
        read(&rules).replace("for: 30m", "for: 10m"),
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

/// GitHub-style anchors of README's headings.
fn readme_anchors() -> BTreeSet<String> {
    read(&root().join("README.md"))
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| {
            h.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn alerts_name_the_rule_and_say_what_to_do() {
    let cargo = read(&root().join("Cargo.toml"));
    let repo = cargo
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .unwrap()
        .trim_matches('"')
        .to_owned();
    let anchors = readme_anchors();
    let names: Vec<String> = alerts().into_iter().map(|(n, _)| n).collect();
    for wanted in [
        "PowerdiagCriticalCheckFailing",
        "PowerdiagWarningCheckFailing",
        "PowerdiagAgentDown",
        "PowerdiagMariadbUnreachable",
        "PowerdiagSampleStale",
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
        let url = a["runbook_url"].as_str().unwrap_or_default();
        let anchor = url
            .strip_prefix(&format!("{repo}#"))
            .unwrap_or_else(|| panic!("{name}: runbook_url {url} is not {repo}#<README section>"));
        assert!(
            anchors.contains(anchor),
            "{name}: README has no section #{anchor}"
        );
        if r["expr"].as_str().unwrap().contains("powerdiag_check") {
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
}
