//! The Grafana-managed alert rules (deploy/grafana/provisioning/alerting/powerdiag.yml): read
//! into structs that mirror Grafana's file provisioning types field by field (Grafana's
//! pkg/services/provisioning/alerting: `AlertingFileV1`, `AlertRuleGroupV1`, `AlertRuleV1`,
//! `QueryV1`, ngalert's `RelativeTimeRange`), unknown fields refused, and compared with the
//! Prometheus rules: the same alerts, expressions, `for`, labels and runbooks. No servers; the
//! scraped-agent test (scraped.rs) runs every rule's query against a real Prometheus.

use serde::Deserialize;

use super::*;

/// A provisioning file (`AlertingFileV1`). Only `groups` is used here; the other resources
/// Grafana reads from the same file are listed so that a misspelt key fails.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertingFile {
    #[serde(rename = "apiVersion")]
    api_version: i64,
    groups: Vec<RuleGroup>,
    #[serde(rename = "deleteRules")]
    delete_rules: Option<Vec<Value>>,
    #[serde(rename = "contactPoints")]
    contact_points: Option<Vec<Value>>,
    #[serde(rename = "deleteContactPoints")]
    delete_contact_points: Option<Vec<Value>>,
    policies: Option<Vec<Value>>,
    #[serde(rename = "resetPolicies")]
    reset_policies: Option<Vec<Value>>,
    #[serde(rename = "muteTimes")]
    mute_times: Option<Vec<Value>>,
    #[serde(rename = "deleteMuteTimes")]
    delete_mute_times: Option<Vec<Value>>,
    templates: Option<Vec<Value>>,
    #[serde(rename = "deleteTemplates")]
    delete_templates: Option<Vec<Value>>,
}

/// `AlertRuleGroupV1`: Grafana refuses a group without name or folder, and an interval that
/// does not parse.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleGroup {
    #[serde(rename = "orgId")]
    org_id: i64,
    name: String,
    folder: String,
    interval: String,
    rules: Vec<Rule>,
}

/// `AlertRuleV1`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    uid: String,
    title: String,
    condition: String,
    data: Vec<Query>,
    #[serde(rename = "dashboardUid")]
    dashboard_uid: Option<String>,
    /// Grafana still reads its old misspelling.
    #[serde(rename = "dasboardUid")]
    dasboard_uid: Option<String>,
    #[serde(rename = "panelId")]
    panel_id: Option<i64>,
    #[serde(rename = "noDataState")]
    no_data_state: String,
    #[serde(rename = "execErrState")]
    exec_err_state: String,
    #[serde(rename = "for")]
    for_: String,
    #[serde(rename = "keepFiringFor")]
    keep_firing_for: Option<String>,
    missing_series_evals_to_resolve: Option<i64>,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    #[serde(rename = "isPaused")]
    is_paused: Option<bool>,
    notification_settings: Option<Value>,
    record: Option<Value>,
}

/// `QueryV1`: one node of the rule, a data source query or an expression (`__expr__`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    #[serde(rename = "refId")]
    ref_id: String,
    #[serde(rename = "queryType")]
    query_type: Option<String>,
    #[serde(rename = "relativeTimeRange")]
    relative_time_range: RelativeTimeRange,
    #[serde(rename = "datasourceUid")]
    datasource_uid: String,
    model: Value,
}

/// ngalert's `RelativeTimeRange`: seconds before the evaluation time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RelativeTimeRange {
    from: u64,
    to: u64,
}

/// Grafana's expression data source.
const EXPR: &str = "__expr__";

fn alerting_file() -> AlertingFile {
    let path = deploy("grafana/provisioning/alerting/powerdiag.yml");
    yaml_serde::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every rule with its Prometheus query node's expression: (title, expr).
pub(super) fn grafana_queries() -> Vec<(String, String)> {
    alerting_file()
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .map(|r| {
            let q = r
                .data
                .iter()
                .find(|q| q.datasource_uid != EXPR)
                .unwrap_or_else(|| panic!("{}: no query node", r.title));
            (
                r.title.clone(),
                q.model["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A Prometheus duration (`model.ParseDuration`, which Grafana uses for `for` and `interval`):
/// units y w d h m s ms, each at most once, largest first. Milliseconds.
fn parse_duration(s: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 7] = [
        ("y", 365 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("ms", 1),
        ("m", 60_000),
        ("s", 1000),
    ];
    let order = |u: &str| {
        ["y", "w", "d", "h", "m", "s", "ms"]
            .iter()
            .position(|x| *x == u)
    };
    let (mut rest, mut total, mut last) = (s, 0u64, None);
    if s.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, ms) = UNITS.iter().find(|(u, _)| rest.starts_with(u))?;
        let pos = order(unit);
        if last.is_some_and(|l| pos <= l) {
            return None;
        }
        last = Some(pos);
        total += n * ms;
        rest = &rest[unit.len()..];
    }
    Some(total)
}

/// Grafana's template functions a rule here may pipe into (its annotation and label template
/// reference).
const TEMPLATE_FUNCTIONS: &[&str] = &[
    "humanize",
    "humanize1024",
    "humanizeDuration",
    "humanizePercentage",
    "humanizeTimestamp",
    "title",
    "toUpper",
    "toLower",
];

/// Checks the `{{ ... }}` actions of a Grafana annotation: each is `$labels.NAME` or
/// `$values.REF.Value` (REF a node of the rule), optionally piped into a template function.
/// Grafana's `$value` is a string of every node's labels and values, not the sample: it must
/// not be formatted as a number.
fn check_template(rule: &str, key: &str, text: &str, refs: &BTreeSet<&str>) {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let close = rest[open..]
            .find("}}")
            .unwrap_or_else(|| panic!("{rule} {key}: unclosed {{{{ in {text:?}"));
        let action = rest[open + 2..open + close].trim();
        let mut stages = action.split('|').map(str::trim);
        let var = stages.next().unwrap();
        let ok = match var.split('.').collect::<Vec<_>>()[..] {
            ["$labels", name] => {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            }
            ["$values", r, "Value"] => refs.contains(r),
            _ => false,
        };
        assert!(
            ok,
            "{rule} {key}: {{{{ {action} }}}} is not a Grafana variable here"
        );
        for f in stages {
            assert!(
                TEMPLATE_FUNCTIONS.contains(&f),
                "{rule} {key}: {f} is not one of Grafana's template functions"
            );
        }
        rest = &rest[open + close + 2..];
    }
    assert!(!rest.contains("}}"), "{rule} {key}: stray }}}} in {text:?}");
}

#[test]
fn the_grafana_alert_rules_are_well_formed_provisioning() {
    let f = alerting_file();
    assert_eq!(f.api_version, 1);
    // Rules only: no contact point, policy or template is provisioned (or deleted) here.
    assert!(
        f.delete_rules.is_none()
            && f.contact_points.is_none()
            && f.delete_contact_points.is_none()
            && f.policies.is_none()
            && f.reset_policies.is_none()
            && f.mute_times.is_none()
            && f.delete_mute_times.is_none()
            && f.templates.is_none()
            && f.delete_templates.is_none()
    );
    assert!(!f.groups.is_empty());
    let ds = yaml(&deploy("grafana/provisioning/datasources/prometheus.yml"));
    let ds_uid = ds["datasources"][0]["uid"]
        .as_str()
        .expect("the Prometheus data source has a fixed uid");
    let dashboards = yaml(&deploy("grafana/provisioning/dashboards/powerdiag.yml"));
    let mut uids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    let mut groups = BTreeSet::new();
    for g in &f.groups {
        assert!(g.org_id >= 1, "{}: orgId {}", g.name, g.org_id);
        assert!(!g.name.trim().is_empty() && groups.insert(g.name.as_str()));
        // The dashboard's folder.
        assert_eq!(g.folder, dashboards["providers"][0]["folder"], "{}", g.name);
        let interval = parse_duration(&g.interval)
            .unwrap_or_else(|| panic!("{}: interval {}", g.name, g.interval));
        // Grafana evaluates on a 10 s base interval: a group's interval is a multiple of it.
        assert!(
            interval > 0 && interval.is_multiple_of(10_000),
            "{}: {}",
            g.name,
            g.interval
        );
        assert!(!g.rules.is_empty(), "{}: no rules", g.name);
        for r in &g.rules {
            let t = &r.title;
            assert!(!t.trim().is_empty());
            assert!(titles.insert(t.as_str()), "{t}: title twice in the folder");
            assert!(
                !r.uid.is_empty()
                    && r.uid.len() <= 40
                    && r.uid
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{t}: uid {:?} (at most 40 of [a-zA-Z0-9_-])",
                r.uid
            );
            assert!(uids.insert(r.uid.as_str()), "{t}: uid {} twice", r.uid);
            assert!(parse_duration(&r.for_).is_some(), "{t}: for {:?}", r.for_);
            assert!(
                ["NoData", "Alerting", "OK", "KeepLast"].contains(&r.no_data_state.as_str()),
                "{t}: noDataState {}",
                r.no_data_state
            );
            assert!(
                ["Alerting", "Error", "OK", "KeepLast"].contains(&r.exec_err_state.as_str()),
                "{t}: execErrState {}",
                r.exec_err_state
            );
            // As in Prometheus: no series, no alert.
            assert_eq!(r.no_data_state, "OK", "{t}");
            assert!(
                r.dashboard_uid.is_none()
                    && r.dasboard_uid.is_none()
                    && r.panel_id.is_none()
                    && r.keep_firing_for.is_none()
                    && r.missing_series_evals_to_resolve.is_none()
                    && r.is_paused.is_none()
                    && r.notification_settings.is_none()
                    && r.record.is_none(),
                "{t}: a field this file does not set"
            );
            // The nodes: one Prometheus instant query, then expressions over it.
            let refs: BTreeSet<&str> = r.data.iter().map(|q| q.ref_id.as_str()).collect();
            assert_eq!(refs.len(), r.data.len(), "{t}: a refId twice");
            assert!(
                refs.contains(r.condition.as_str()),
                "{t}: condition {}",
                r.condition
            );
            let (queries, exprs): (Vec<&Query>, Vec<&Query>) =
                r.data.iter().partition(|q| q.datasource_uid != EXPR);
            assert_eq!(queries.len(), 1, "{t}: one data source query");
            let q = queries[0];
            assert_eq!(q.datasource_uid, ds_uid, "{t}");
            assert_eq!(q.model["datasource"]["uid"], ds_uid, "{t}");
            assert_eq!(q.model["datasource"]["type"], "prometheus", "{t}");
            assert_eq!(q.model["refId"], q.ref_id.as_str(), "{t}");
            assert_eq!(q.model["instant"], true, "{t}");
            assert!(
                q.model["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{t}"
            );
            assert!(
                q.query_type.as_deref().unwrap_or_default().is_empty(),
                "{t}"
            );
            let range = &q.relative_time_range;
            // An instant query looks 5 minutes back; the window covers it.
            assert!(range.from >= 300 && range.to == 0, "{t}: {range:?}");
            assert!(!exprs.is_empty(), "{t}: no expression node");
            assert!(
                exprs.iter().any(|e| e.ref_id == r.condition),
                "{t}: the condition is an expression"
            );
            for e in &exprs {
                let m = &e.model;
                assert_eq!(m["datasource"]["uid"], EXPR, "{t} {}", e.ref_id);
                assert_eq!(m["datasource"]["type"], EXPR, "{t} {}", e.ref_id);
                assert_eq!(m["refId"], e.ref_id.as_str(), "{t}");
                assert_eq!(
                    (e.relative_time_range.from, e.relative_time_range.to),
                    (0, 0),
                    "{t}"
                );
                match m["type"].as_str() {
                    // Every `$REF` a math expression names is a node.
                    Some("math") => {
                        let x = m["expression"].as_str().unwrap();
                        for part in x.split('$').skip(1) {
                            let name: String = part
                                .chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect();
                            assert!(
                                refs.contains(name.as_str()) && name != e.ref_id,
                                "{t}: {x} names ${name}"
                            );
                        }
                    }
                    Some("threshold" | "reduce") => {
                        assert!(refs.contains(m["expression"].as_str().unwrap()), "{t}");
                    }
                    other => panic!("{t}: expression type {other:?}"),
                }
            }
            for (k, v) in &r.annotations {
                check_template(t, k, v, &refs);
            }
        }
    }
}

#[test]
fn the_grafana_alert_rules_are_the_prometheus_rules() {
    let f = alerting_file();
    type Key = (String, String, String, BTreeMap<String, String>, String);
    let grafana: BTreeSet<Key> = f
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .map(|r| {
            let q = r.data.iter().find(|q| q.datasource_uid != EXPR).unwrap();
            (
                r.title.clone(),
                q.model["expr"].as_str().unwrap().to_owned(),
                r.for_.clone(),
                r.labels.clone(),
                r.annotations["runbook_url"].clone(),
            )
        })
        .collect();
    let prometheus: BTreeSet<Key> = alerts()
        .into_iter()
        .map(|(name, r)| {
            let labels = r["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            (
                name,
                r["expr"].as_str().unwrap().to_owned(),
                r["for"].as_str().unwrap().to_owned(),
                labels,
                r["annotations"]["runbook_url"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(grafana.len(), alerts().len(), "one Grafana rule per alert");
    assert_eq!(grafana, prometheus);

    // The same groups, and the same annotations but for Prometheus's `$value` (the sample),
    // which Grafana calls `$values.A.Value` (A the query node).
    let prom_rules = yaml(&deploy("prometheus/powerdiag.rules.yml"));
    let prom_groups: Vec<(&str, Vec<&str>)> = prom_rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let rules = g["rules"].as_array().unwrap();
            (
                g["name"].as_str().unwrap(),
                rules.iter().map(|r| r["alert"].as_str().unwrap()).collect(),
            )
        })
        .collect();
    let grafana_groups: Vec<(&str, Vec<&str>)> = f
        .groups
        .iter()
        .map(|g| {
            let titles = g.rules.iter().map(|r| r.title.as_str()).collect();
            (g.name.as_str(), titles)
        })
        .collect();
    assert_eq!(grafana_groups, prom_groups);
    let by_name: BTreeMap<String, Value> = alerts().into_iter().collect();
    let mut rewritten = 0;
    for r in f.groups.iter().flat_map(|g| &g.rules) {
        let q = r.data.iter().find(|q| q.datasource_uid != EXPR).unwrap();
        let prom = by_name[&r.title]["annotations"].as_object().unwrap();
        let keys: Vec<&String> = prom.keys().collect();
        assert_eq!(
            r.annotations.keys().collect::<Vec<_>>(),
            keys,
            "{}",
            r.title
        );
        for (k, v) in prom {
            let v = v.as_str().unwrap();
            let want = v.replace("{{ $value ", &format!("{{{{ $values.{}.Value ", q.ref_id));
            rewritten += usize::from(want != v);
            assert_eq!(r.annotations[k], want, "{} {k}", r.title);
        }
    }
    // PowerdiagSampleStale's summary and description show the sample's age,
    // PowerdiagReplicationLag's summary the lag, PowerdiagGaleraNodeLost's the nodes left.
    assert_eq!(rewritten, 4);
}

#[test]
fn the_duration_parser_is_prometheus_s() {
    assert_eq!(parse_duration("2m"), Some(120_000));
    assert_eq!(parse_duration("1h30m"), Some(5_400_000));
    assert_eq!(parse_duration("500ms"), Some(500));
    assert_eq!(parse_duration("1m5s"), Some(65_000));
    for bad in ["", "5", "m", "30m1h", "1m1m", "1.5h", "-1m", "5 m"] {
        assert_eq!(parse_duration(bad), None, "{bad}");
    }
}
