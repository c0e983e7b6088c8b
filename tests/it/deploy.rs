//! deploy/: every artifact checked by the tool that consumes it. promtool checks the scrape
//! configurations and the alert rules and runs their unit tests; amtool checks the Alertmanager
//! route; systemd-analyze verifies the unit; shellcheck and sh -n read the AIX scripts, and the
//! SRC registration and the LDR_CNTRL wrapper run against stand-ins for the AIX commands. The
//! Grafana dashboard cannot be loaded into a Grafana here: its JSON structure is checked, and
//! every panel query runs against a real Prometheus that scraped the agent (started with the
//! unit's own command line) and must return data. A missing tool fails with the install hint.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    agent::{Agent, free_port, get, metric, spawn_agent},
    prometheus::{Prometheus, query, start_prometheus},
    support::*,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(rel: &str) -> PathBuf {
    root().join("deploy").join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs a tool, failing loudly (with the package to install) when it is missing.
fn tool(name: &str, package: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(name);
    cmd.args(args);
    run_tool(cmd, name, package)
}

fn run_tool(mut cmd: Command, name: &str, package: &str) -> Output {
    cmd.output().unwrap_or_else(|e| {
        panic!("{name}: {e}. Install it: apt-get install {package} (tests/harness/setup.sh does)")
    })
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn yaml(path: &Path) -> Value {
    yaml_serde::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The alert rules: (alert name, rule).
fn alerts() -> Vec<(String, Value)> {
    let rules = yaml(&deploy("prometheus/powerdiag.rules.yml"));
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .map(|r| (r["alert"].as_str().unwrap().to_owned(), r))
        .collect()
}

fn dashboard() -> Value {
    let path = deploy("grafana/powerdiag-fleet.json");
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel with queries (rows excluded), flattened out of collapsed rows too.
fn panels(d: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        if p["type"] == "row" {
            out.extend(p["panels"].as_array().cloned().unwrap_or_default());
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// Metric names in a PromQL expression: identifiers starting with `powerdiag_`, and `up`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let word_end = rest[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |e| i + e);
        let word = &rest[i..word_end];
        let after = rest[word_end..].trim_start();
        // A label name (`up=...`) or a function (`rate(`) is not a metric.
        let is_label = after.starts_with('=') || after.starts_with("!=") || after.starts_with("=~");
        if word.starts_with("powerdiag_") || (word == "up" && !is_label && !after.starts_with('('))
        {
            names.insert(word.to_owned());
        }
        rest = &rest[word_end..];
    }
    names
}

/// Metric names the agent registers, from its source: `"name"` literals in metrics.rs plus
/// the per-scrape age; counters get `_total`.
fn registered_names() -> BTreeSet<String> {
    let src = read(&root().join("crates/agent/src/daemon/metrics.rs"));
    let mut names = BTreeSet::new();
    for (i, _) in src.match_indices('"') {
        let rest = &src[i + 1..];
        if let Some(end) = rest.find('"') {
            let lit = &rest[..end];
            if !lit.is_empty() && lit.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                names.insert(format!("powerdiag_{lit}"));
                names.insert(format!("powerdiag_{lit}_total"));
            }
        }
    }
    names.insert("powerdiag_sample_age_seconds".into());
    names
}

/// Metrics the agent registers but cannot export on this test machine, and why. A dashboard
/// query may come back empty only when every series it needs is one of these.
const ABSENT_HERE: &[(&str, &str)] = &[
    (
        "powerdiag_lpar_info",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_lpar_entitled_capacity",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_lpar_online_vcpus",
        "PowerVM only: the test VM has no /proc/powerpc/lparcfg",
    ),
    (
        "powerdiag_cpu_frequency_nominal_hertz",
        "needs cpufreq (base or max frequency) or a POWER /proc/cpuinfo clock; the test VM has neither",
    ),
];

/// Dashboard queries that may come back empty here although their metric exists, and why.
const EMPTY_HERE: &[(&str, &str, &str)] = &[(
    "TLB misses and events on mariadbd, per second",
    "A",
    "dTLB/iTLB-load-misses need a PMU, which the test VM lacks; the panel's query B (software events) returns data",
)];

// ---------------------------------------------------------------------------------------------
// Prometheus and Alertmanager: the configuration tools.

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

// ---------------------------------------------------------------------------------------------
// systemd

/// The unit (and its drop-ins) in a temp directory, ExecStart pointing at the built binary.
fn unit_copy(dir: &Path) -> PathBuf {
    let unit = read(&deploy("systemd/powerdiag-agent.service"));
    assert!(unit.contains("ExecStart=/usr/local/bin/powerdiag agent"));
    let unit = unit.replace("/usr/local/bin/powerdiag", env!("CARGO_BIN_EXE_powerdiag"));
    let path = dir.join("powerdiag-agent.service");
    std::fs::write(&path, unit).unwrap();
    let d = dir.join("powerdiag-agent.service.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(
        deploy("systemd/powerdiag-agent.service.d/perf.conf"),
        d.join("perf.conf"),
    )
    .unwrap();
    path
}

fn verify(unit: &Path) -> Output {
    tool(
        "systemd-analyze",
        "systemd",
        &["verify", unit.to_str().unwrap()],
    )
}

#[test]
fn systemd_analyze_verifies_the_unit_and_its_drop_in() {
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_copy(dir.path());
    let o = verify(&unit);
    assert!(o.status.success(), "systemd-analyze verify:\n{}", text(&o));
    // verify reports bad settings as warnings with status 0: there must be none.
    assert_eq!(text(&o).trim(), "", "systemd-analyze verify warns");

    // The check sees the drop-in (a bad key there is reported) and a bad setting in the unit.
    let perf = dir.path().join("powerdiag-agent.service.d/perf.conf");
    let good = read(&perf);
    std::fs::write(&perf, format!("{good}Bogus=1\n")).unwrap();
    assert!(
        text(&verify(&unit)).contains("perf.conf"),
        "the drop-in is verified too"
    );
    std::fs::write(&perf, good).unwrap();
    let u = read(&unit);
    std::fs::write(
        &unit,
        u.replace("ProtectSystem=strict", "ProtectSystem=bogus"),
    )
    .unwrap();
    assert!(text(&verify(&unit)).contains("bogus"));
    std::fs::write(&unit, u).unwrap();

    // systemd's own exposure score for the hardened unit (0 = locked down, 10 = exposed).
    let o = tool(
        "systemd-analyze",
        "systemd",
        &[
            "security",
            "--offline=yes",
            "--threshold=25",
            unit.to_str().unwrap(),
        ],
    );
    assert!(
        o.status.success(),
        "systemd-analyze security:\n{}",
        text(&o)
    );
    let score = text(&o);
    assert!(score.contains("Overall exposure level"), "{score}");
}

/// `Key=value` settings of a unit file, continuation lines joined.
fn settings(unit: &str) -> Vec<(String, String)> {
    let joined = unit.replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

#[test]
fn the_unit_is_hardened_and_takes_the_password_from_a_credential() {
    let unit = settings(&read(&deploy("systemd/powerdiag-agent.service")));
    let get = |k: &str| -> Vec<&str> {
        unit.iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    for (k, v) in [
        ("User", "powerdiag"),
        ("ProtectSystem", "strict"),
        ("NoNewPrivileges", "yes"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("LoadCredential", "my.cnf:/etc/powerdiag/my.cnf"),
    ] {
        assert_eq!(get(k), vec![v], "{k}");
    }
    let exec = get("ExecStart")[0];
    assert!(exec.contains("--mariadb.defaults-file=%d/my.cnf"), "{exec}");
    assert!(
        !exec.contains("mysql://"),
        "no URL (and so no password) in argv: {exec}"
    );
    // CAP_PERFMON only in the perf drop-in, with the one system call it needs.
    let perf = settings(&read(&deploy(
        "systemd/powerdiag-agent.service.d/perf.conf",
    )));
    assert_eq!(
        perf,
        [
            ("CapabilityBoundingSet".to_owned(), "CAP_PERFMON".to_owned()),
            ("AmbientCapabilities".to_owned(), "CAP_PERFMON".to_owned()),
            ("SystemCallFilter".to_owned(), "perf_event_open".to_owned()),
        ]
    );
    let sysusers = read(&deploy("systemd/powerdiag.sysusers.conf"));
    assert!(sysusers.lines().any(|l| l.starts_with("u powerdiag ")));
    let env = read(&deploy("systemd/powerdiag-agent.env"));
    assert!(
        !env.lines()
            .any(|l| l.starts_with("POWERDIAG_MARIADB_URL=") && l.contains(":@"))
    );
}

// ---------------------------------------------------------------------------------------------
// AIX

fn shell_checks(script: &Path) {
    let o = tool("sh", "dash", &["-n", script.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "sh -n {}:\n{}",
        script.display(),
        text(&o)
    );
    let o = tool(
        "shellcheck",
        "shellcheck",
        &["-s", "sh", script.to_str().unwrap()],
    );
    assert!(
        o.status.success(),
        "shellcheck {}:\n{}",
        script.display(),
        text(&o)
    );
}

#[test]
fn aix_scripts_pass_shellcheck() {
    for s in [
        "aix/powerdiag-src.sh",
        "aix/rc.powerdiag",
        "aix/mariadbd-64k",
        "doctor.sh",
    ] {
        let p = deploy(s);
        if s == "doctor.sh" {
            let o = tool("bash", "bash", &["-n", p.to_str().unwrap()]);
            assert!(o.status.success(), "{}", text(&o));
            continue;
        }
        shell_checks(&p);
    }
}

#[test]
fn the_ldr_cntrl_wrapper_execs_mariadbd_with_64k_pages_and_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("mariadbd");
    let out = dir.path().join("out");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"LDR_CNTRL=$LDR_CNTRL\" \"$@\" >{}\n",
            out.display()
        ),
    )
    .unwrap();
    make_executable(&fake);
    let o = Command::new(deploy("aix/mariadbd-64k"))
        .env("MARIADBD", &fake)
        .args(["--defaults-file=/etc/my.cnf", "--user=mysql"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read(&out),
        "LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K\n--defaults-file=/etc/my.cnf\n--user=mysql\n"
    );
    // The documented value is the one PD301 recommends.
    let explain = powerdiag().args(["explain", "PD301"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&explain.stdout)
            .contains("LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K")
    );
}

fn make_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Stand-ins for AIX's SRC commands: each logs its arguments, one per line, to `log`.
fn fake_aix_commands(bin: &Path, log: &Path) {
    for (cmd, body) in [
        ("mkssys", "exit 0"),
        ("lssrc", "exit 1"), // not registered yet
        ("mkitab", "exit 0"),
        ("lsitab", "exit 1"),
        // The agent's user: uid 4242; everything else as the real id.
        (
            "id",
            "if [ \"$1\" = -u ] && [ -n \"$2\" ]; then echo 4242; else echo 0; fi",
        ),
    ] {
        let p = bin.join(cmd);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\n{{ echo \"== {cmd}\"; printf '%s\\n' \"$@\"; }} >>{}\n{body}\n",
                log.display()
            ),
        )
        .unwrap();
        make_executable(&p);
    }
}

#[test]
fn the_aix_src_definition_starts_a_working_agent() {
    let server = Server::m1011();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("calls");
    fake_aix_commands(&bin, &log);
    let mycnf = dir.path().join("my.cnf");
    std::fs::write(&mycnf, my_cnf(&server)).unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, fast_agent_toml(false)).unwrap();
    let port = free_port();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let run = |mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&mycnf, std::fs::Permissions::from_mode(mode)).unwrap();
        let _ = std::fs::remove_file(&log);
        Command::new(deploy("aix/powerdiag-src.sh"))
            .arg("add")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("POWERDIAG_BIN", env!("CARGO_BIN_EXE_powerdiag"))
            .env("POWERDIAG_USER", user.trim())
            .env("POWERDIAG_CONFIG", &config)
            .env("POWERDIAG_MYCNF", &mycnf)
            .env("POWERDIAG_LISTEN", format!("127.0.0.1:{port}"))
            .env("POWERDIAG_LOG", dir.path().join("log/agent.log"))
            .output()
            .unwrap()
    };
    // A password file others can read is refused.
    let o = run(0o644);
    assert!(
        !o.status.success() && text(&o).contains("must be mode 0600"),
        "{}",
        text(&o)
    );
    let o = run(0o600);
    assert!(o.status.success(), "powerdiag-src.sh add:\n{}", text(&o));
    let calls = read(&log);
    let mkssys: Vec<&str> = calls
        .split("== ")
        .find_map(|c| c.strip_prefix("mkssys\n"))
        .unwrap_or_else(|| panic!("mkssys not called:\n{calls}"))
        .lines()
        .collect();
    let arg = |flag: &str| {
        let i = mkssys
            .iter()
            .position(|a| *a == flag)
            .unwrap_or_else(|| panic!("{flag} missing: {mkssys:?}"));
        mkssys[i + 1]
    };
    assert_eq!(arg("-s"), "powerdiag");
    assert_eq!(arg("-u"), "4242");
    assert_eq!(arg("-n"), "15", "stopsrc sends SIGTERM");
    assert_eq!(arg("-f"), "9");
    for flag in ["-S", "-R", "-Q"] {
        assert!(mkssys.contains(&flag), "{flag} missing: {mkssys:?}");
    }
    assert!(
        !arg("-a").contains("mysql://"),
        "no URL or password in the SRC definition"
    );
    // SRC starts `-p` with the `-a` words: do exactly that.
    let mut cmd = Command::new(arg("-p"));
    cmd.args(arg("-a").split_whitespace());
    let agent = spawn_agent(cmd, port, tempfile::tempdir().unwrap());
    assert_mariadb_up(&agent);
}

#[test]
fn the_aix_rc_script_starts_reloads_and_stops_the_agent() {
    // The script switches to the agent's user with su, which asks non-root callers for a
    // password: tests/run.sh runs as root (setup.sh needs it anyway).
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    assert_eq!(
        uid.trim(),
        "0",
        "this test runs deploy/aix/rc.powerdiag, which needs root (su)"
    );
    let server = Server::m1011();
    let dir = tempfile::tempdir().unwrap();
    let mycnf = dir.path().join("my.cnf");
    std::fs::write(&mycnf, my_cnf(&server)).unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, fast_agent_toml(false)).unwrap();
    let port = free_port();
    let rc = |action: &str| {
        Command::new(deploy("aix/rc.powerdiag"))
            .arg(action)
            .env("POWERDIAG_BIN", env!("CARGO_BIN_EXE_powerdiag"))
            .env("POWERDIAG_USER", "root")
            .env("POWERDIAG_CONFIG", &config)
            .env("POWERDIAG_MYCNF", &mycnf)
            .env("POWERDIAG_LISTEN", format!("127.0.0.1:{port}"))
            .env("POWERDIAG_LOG", dir.path().join("log/agent.log"))
            .env("POWERDIAG_PIDFILE", dir.path().join("agent.pid"))
            .env_remove("POWERDIAG_MARIADB_URL")
            .output()
            .unwrap()
    };
    let o = rc("start");
    // Stop it whatever happens below.
    struct Stop<'a>(&'a dyn Fn(&str) -> Output);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = (self.0)("stop");
        }
    }
    let _stop = Stop(&rc);
    assert!(o.status.success(), "rc.powerdiag start:\n{}", text(&o));
    let pid: u32 = read(&dir.path().join("agent.pid")).trim().parse().unwrap();
    let o = rc("status");
    assert!(
        o.status.success() && text(&o).contains(&format!("pid {pid}")),
        "{}",
        text(&o)
    );
    // The pid file names the agent itself, not su or a shell.
    let args = read(Path::new(&format!("/proc/{pid}/cmdline")));
    assert!(args.contains("powerdiag\0agent\0"), "{args:?}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while get(port, "/metrics")
        .map(|(_, _, b)| metric(&b, "powerdiag_mariadb_up"))
        .unwrap_or_default()
        != Some(1.0)
    {
        assert!(Instant::now() < deadline, "the agent never reached MariaDB");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(rc("reload").status.success());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        read(&dir.path().join("log/agent.log")).contains("reload"),
        "SIGHUP reached the agent"
    );
    assert!(rc("stop").status.success());
    let o = rc("status");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the agent is gone"
    );
}

// ---------------------------------------------------------------------------------------------
// The agent as deployed, scraped by a real Prometheus with the deploy/ configuration.

/// deploy/systemd/my.cnf with the test server's endpoint and root's password.
fn my_cnf(server: &Server) -> String {
    read(&deploy("systemd/my.cnf"))
        .lines()
        .map(|l| match l.split_once(" = ").map(|(k, _)| k) {
            Some("user") => "user = root".to_owned(),
            Some("password") => format!("password = {}", Server::root_password()),
            Some("port") => format!("port = {}", server.port),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// deploy/systemd/agent.toml with test-speed intervals (the keys must exist there).
fn fast_agent_toml(probe: bool) -> String {
    let toml = read(&deploy("systemd/agent.toml"));
    let mut out = toml.clone();
    for (from, to) in [
        ("interval = \"15s\"", "interval = \"3s\""),
        ("timeout = \"5s\"", "timeout = \"1s\""),
        ("window = \"1s\"", "window = \"200ms\""),
        ("queries = 20", "queries = 4"),
        ("interval = \"60s\"", "interval = \"3s\""),
    ] {
        assert!(toml.contains(from), "agent.toml lacks {from}");
        out = out.replace(from, to);
    }
    if !probe {
        out = out.replace("enabled = true", "enabled = false");
    }
    out
}

fn assert_mariadb_up(agent: &Agent) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let body = get(agent.port, "/metrics")
            .map(|(_, _, b)| b)
            .unwrap_or_default();
        if metric(&body, "powerdiag_mariadb_up") == Some(1.0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never reached MariaDB:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

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
    // undersized vector cache) pending or firing for this host.
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
            a["labels"]["alertname"] == "PowerdiagCriticalCheckFailing"
                && a["labels"]["code"] == "PD101"
        });
    let pd101 = pd101.unwrap_or_else(|| panic!("PD101 alert not pending: {alerts_now}"));
    assert_eq!(pd101["labels"]["instance"], instance);
    assert_eq!(
        pd101["annotations"]["summary"],
        "PD101 mhnsw-cache-undersized fails on 127.0.0.1"
    );
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

// ---------------------------------------------------------------------------------------------
// The dashboard's structure and the names it uses (no servers needed).

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
            "{m} is used by deploy/ but crates/agent/src/daemon/metrics.rs does not register it"
        );
    }
    for (m, why) in ABSENT_HERE {
        assert!(
            registered.contains(*m),
            "{m} ({why}) is not a metric of the agent"
        );
    }
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
