//! `rules`, `explain`, `--help`: the parts of the interface that need no server.

use crate::support::*;

#[test]
fn rules_lists_every_rule() {
    let r = run(powerdiag().arg("rules"));
    assert_eq!(r.code, 0);
    for code in [
        "PD101", "PD102", "PD103", "PD201", "PD202", "PD203", "PD204",
    ] {
        assert!(r.stdout.contains(code), "{code} missing:\n{}", r.stdout);
    }
    assert!(r.stdout.contains("mhnsw-cache-undersized") && r.stdout.contains("critical"));
    let j: serde_json::Value =
        serde_json::from_str(&run(powerdiag().args(["rules", "--format", "json"])).stdout).unwrap();
    assert_eq!(j.as_array().unwrap().len(), powerdiag_rules::RULES.len());
}

#[test]
fn explain_by_code_and_name() {
    let by_code = run(powerdiag().args(["explain", "PD101"]));
    assert_eq!(by_code.code, 0);
    assert!(
        by_code
            .stdout
            .starts_with("PD101 mhnsw-cache-undersized (severity: critical")
    );
    assert!(by_code.stdout.contains("42 QPS"), "cites the field report");
    assert!(
        by_code.stdout.contains("SET GLOBAL mhnsw_max_cache_size"),
        "gives the SQL"
    );
    assert!(
        by_code.stdout.contains("[mariadbd]"),
        "gives the my.cnf line"
    );
    let by_name = run(powerdiag().args(["explain", "mhnsw-cache-undersized"]));
    assert_eq!(by_name.stdout, by_code.stdout);
    let lower = run(powerdiag().args(["explain", "pd101"]));
    assert_eq!(lower.stdout, by_code.stdout);

    let unknown = run(powerdiag().args(["explain", "PD999"]));
    assert_eq!(unknown.code, 3);
    assert!(
        unknown.stderr.contains("PD999") && unknown.stderr.contains("powerdiag rules"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn help_says_what_the_probe_runs() {
    let r = run(powerdiag().args(["doctor", "--help"]));
    assert_eq!(r.code, 0);
    for needle in [
        "--mariadb.url",
        "--mariadb.defaults-file",
        "--no-probe",
        "--probe-queries",
        "--timeout",
        "SHOW PROFILE ALL",
        "READ ONLY",
        "Handler_read_last",
    ] {
        assert!(r.stdout.contains(needle), "{needle} missing from --help");
    }
    assert_eq!(run(powerdiag().arg("--version")).code, 0);
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let plain = run(powerdiag().args(["doctor", "--no-probe"]));
    assert!(!plain.stdout.contains('\u{1b}'), "no colour into a pipe");
    let forced = run(powerdiag().args(["doctor", "--no-probe", "--color", "always"]));
    assert!(forced.stdout.contains('\u{1b}'), "--color always colours");
    let never =
        run(powerdiag()
            .env_remove("NO_COLOR")
            .args(["doctor", "--no-probe", "--color", "never"]));
    assert!(!never.stdout.contains('\u{1b}'));
}

#[test]
fn thresholds_are_documented_and_configurable() {
    let explain = run(powerdiag().args(["explain", "PD403"]));
    assert!(
        explain.stdout.contains("[rules.thresholds.PD403]")
            && explain
                .stdout
                .contains("- max_involuntary_switches (default 30.0%;"),
        "{}",
        explain.stdout
    );
    let rules: serde_json::Value =
        serde_json::from_str(&run(powerdiag().args(["rules", "--format", "json"])).stdout).unwrap();
    let pd403 = rules
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "PD403")
        .unwrap();
    assert_eq!(pd403["thresholds"].as_array().unwrap().len(), 5);
    assert_eq!(pd403["thresholds"][0]["key"], "max_steal");
    assert_eq!(pd403["thresholds"][0]["default"], 0.05);

    // The AIX field report fails PD403 on 43.9% involuntary switches (limit 30%).
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/s924-aix-shared-gcc.json");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "[rules]\ndisabled = [\"mhnsw-cache-undersized\"]\n[rules.thresholds.hypervisor-preemption]\nmax_involuntary_switches = \"50%\"\n",
    )
    .unwrap();
    let doctor = |extra: &[&str]| {
        let r = run(powerdiag()
            .args(["doctor", "--format", "json", "--from"])
            .arg(&example)
            .args(extra));
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v["checks"].as_array().unwrap().clone()
    };
    let status = |checks: &[serde_json::Value], code: &str| {
        checks
            .iter()
            .find(|c| c["code"] == code)
            .map(|c| c["status"].as_str().unwrap().to_owned())
    };
    let default = doctor(&[]);
    assert_eq!(status(&default, "PD403").as_deref(), Some("fail"));
    assert_eq!(status(&default, "PD101").as_deref(), Some("fail"));
    let configured = doctor(&["--config.file", cfg.to_str().unwrap()]);
    assert_eq!(status(&configured, "PD403").as_deref(), Some("pass"));
    assert_eq!(
        status(&configured, "PD101"),
        None,
        "disabled rules are not reported"
    );
    let pd403 = configured.iter().find(|c| c["code"] == "PD403").unwrap();
    assert_eq!(pd403["thresholds"]["max_involuntary_switches"], 0.5);

    let text = run(powerdiag()
        .args(["doctor", "--color", "never", "--from"])
        .arg(&example)
        .arg("--config.file")
        .arg(&cfg));
    assert!(
        text.stdout.contains(
            "Configured thresholds: PD403 max_involuntary_switches = 50.0% (default 30.0%)"
        ),
        "{}",
        text.stdout
    );

    std::fs::write(
        &cfg,
        "[rules.thresholds.PD403]\nmax_involuntary_switches = 30\n",
    )
    .unwrap();
    let bad = run(powerdiag()
        .args(["doctor", "--from"])
        .arg(&example)
        .arg("--config.file")
        .arg(&cfg));
    assert_eq!(bad.code, 3);
    assert!(
        bad.stderr.contains("agent.toml: rules.thresholds.PD403: max_involuntary_switches: 3000.0% is not between 0.0% and 100.0% (a ratio: for 30% write 0.3 or \"30%\")"),
        "{}",
        bad.stderr
    );
}

#[test]
fn version_names_revision_build_date_and_target() {
    let r = run(powerdiag().arg("--version"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r.stdout.trim();
    let rest = line
        .strip_prefix(&format!(
            "powerdiag {} (revision ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("no version first: {line}"));
    let (rev, rest) = rest.split_once(", built ").expect("build date");
    assert!(
        rev == "unknown" || (rev.len() == 12 && rev.chars().all(|c| c.is_ascii_hexdigit())),
        "revision: {line}"
    );
    let (date, target) = rest.split_once(", target ").expect("target");
    let d: Vec<&str> = date.split('-').collect();
    assert!(
        d.len() == 3 && d.iter().all(|p| p.parse::<u32>().is_ok()) && d[0].len() == 4,
        "date YYYY-MM-DD: {line}"
    );
    let target = target.strip_suffix(')').expect("closing parenthesis");
    assert!(
        target.starts_with(std::env::consts::ARCH) && target.contains(std::env::consts::OS),
        "the target of this build: {line}"
    );
}

#[test]
fn short_help_does_not_point_below_at_nothing() {
    // `-h` has no text after the options: the probe flag points at --help instead.
    let short = run(powerdiag().args(["doctor", "-h"]));
    assert_eq!(short.code, 0);
    assert!(!short.stdout.contains("see below"), "{}", short.stdout);
    assert!(
        short
            .stdout
            .contains("Do not run the probe queries (what they run: --help)"),
        "{}",
        short.stdout
    );
    let long = run(powerdiag().args(["doctor", "--help"]));
    let below = long.stdout.find("(what they run: below)").expect("--help");
    assert!(long.stdout[below..].contains("The probe (on by default"));
}

#[test]
fn rules_columns_line_up() {
    let r = run(powerdiag().arg("rules"));
    // The summary starts at the same column on every line, whatever the severity's length.
    let columns: std::collections::BTreeSet<usize> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("PD"))
        .map(|l| {
            let sev = ["critical", "warning", "info"]
                .iter()
                .find_map(|s| l.find(&format!(" {s} ")).map(|i| i + 1 + s.len()))
                .unwrap_or_else(|| panic!("no severity in {l:?}"));
            sev + l[sev..].len() - l[sev..].trim_start().len()
        })
        .collect();
    assert_eq!(
        columns.len(),
        1,
        "summaries start at columns {columns:?}:\n{}",
        r.stdout
    );
}

#[test]
fn completions_for_each_shell() {
    let bash = run(powerdiag().args(["completions", "bash"]));
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    for sub in [
        "doctor",
        "agent",
        "explain",
        "completions",
        "--mariadb.defaults-file",
    ] {
        assert!(bash.stdout.contains(sub), "bash completion lacks {sub}");
    }
    // bash itself loads it and registers the completion function.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("powerdiag.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(". '{}' && complete -p powerdiag", script.display()))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("powerdiag"),
        "bash did not register the completion: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let zsh = run(powerdiag().args(["completions", "zsh"]));
    assert!(
        zsh.stdout.starts_with("#compdef powerdiag"),
        "{}",
        zsh.stdout
    );
    let fish = run(powerdiag().args(["completions", "fish"]));
    assert!(
        fish.stdout.contains("complete -c powerdiag"),
        "{}",
        fish.stdout
    );
    let bad = run(powerdiag().args(["completions", "tcsh"]));
    assert_eq!(bad.code, 3);
    assert!(bad.stderr.contains("possible values"), "{}", bad.stderr);
}

#[test]
fn man_pages_for_the_command_and_each_subcommand() {
    let page = run(powerdiag().arg("man"));
    assert_eq!(page.code, 0, "{}", page.stderr);
    assert!(
        page.stdout.starts_with(".ie \\n(.g .ds Aq") || page.stdout.contains(".TH powerdiag 1")
    );
    for needle in [
        ".TH powerdiag 1",
        ".SH SYNOPSIS",
        "powerdiag\\-doctor(1)",
        ".SH \"EXIT STATUS\"",
        "/usr/share/powerdiag/runbooks/",
        ".SH \"SEE ALSO\"",
    ] {
        assert!(
            page.stdout.contains(needle),
            "{needle} missing:\n{}",
            page.stdout
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let r = run(powerdiag().args(["man", "--output-dir"]).arg(dir.path()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for want in [
        "powerdiag.1",
        "powerdiag-doctor.1",
        "powerdiag-agent.1",
        "powerdiag-explain.1",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let doctor = std::fs::read_to_string(dir.path().join("powerdiag-doctor.1")).unwrap();
    assert!(
        doctor.contains(".TH powerdiag-doctor 1") && doctor.contains("mariadb.defaults\\-file")
    );
}

/// Issue 38 (5): a symbolic link planted at a page's name in --output-dir is replaced by the
/// page, never followed: its target stays as it was.
#[cfg(unix)]
#[test]
fn man_output_dir_replaces_a_planted_symlink_instead_of_following_it() {
    use std::os::unix::fs::PermissionsExt;
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("powerdiag.1");
    std::os::unix::fs::symlink(&victim, &page).unwrap();
    let r = run(powerdiag().args(["man", "--output-dir"]).arg(dir.path()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the link's target was overwritten"
    );
    let m = std::fs::symlink_metadata(&page).unwrap();
    assert!(m.file_type().is_file(), "{:?}", m.file_type());
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .contains(".TH powerdiag 1")
    );
    // Pages stay readable by all, as a plain write made them (0644 under umask 022).
    assert_ne!(
        m.permissions().mode() & 0o044,
        0,
        "{:o}",
        m.permissions().mode()
    );
    // No temporary file is left behind.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{name}");
    }
}

/// `powerdiag collectors` lists the registry, in every format, and each name is a flag.
#[test]
fn collectors_lists_the_registry_and_each_name_is_a_flag() {
    let names: Vec<&str> = powerdiag_agent::collect::collectors()
        .iter()
        .map(|d| d.name)
        .collect();
    let text = run(powerdiag().arg("collectors"));
    assert_eq!(text.code, 0, "{}", text.stderr);
    for n in &names {
        assert!(
            text.stdout.lines().any(|l| l.starts_with(&format!("{n} "))),
            "{n} missing:\n{}",
            text.stdout
        );
    }
    let j = run(powerdiag().args(["collectors", "--format", "json"])).json();
    let listed: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, names);
    let help = run(powerdiag().args(["doctor", "--help"]));
    for n in &names {
        // The flag that changes it: off for the collectors on by default, on for the others.
        assert!(
            help.stdout.contains(&format!("--no-collector.{n}"))
                || help.stdout.contains(&format!("--collector.{n}")),
            "doctor --help lacks --no-collector.{n} / --collector.{n}"
        );
    }
    // A name that is no collector is a usage error (exit 3), naming the flag.
    let bad = run(powerdiag().args(["doctor", "--no-collector.cpus"]));
    assert_eq!(bad.code, 3, "{}", bad.stderr);
    assert!(bad.stderr.contains("--no-collector.cpus"), "{}", bad.stderr);
}

/// A collector turned off is not run (no run reported), and its section says how to turn it
/// back on; the last flag for a collector wins.
#[test]
fn a_collector_turned_off_says_how_to_turn_it_on() {
    let r = run(powerdiag().args([
        "collect",
        "--no-probe",
        "--sample-window",
        "0",
        "--mariadb.url",
        "mysql://nobody@127.0.0.1:1/",
        "--no-collector.cpu",
        "--no-collector.swap",
        "--collector.swap",
        "--no-collector.mariadb",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = r.json();
    let s = s.get("snapshot").unwrap_or(&s);
    assert_eq!(
        s["os"]["available"]["cpu"]["unavailable"],
        "the cpu collector is disabled by --no-collector.cpu"
    );
    assert!(s["os"]["available"]["swap"]["available"].is_object());
    let runs: Vec<&str> = s["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        !runs.contains(&"cpu") && !runs.contains(&"mariadb"),
        "{runs:?}"
    );
    assert!(runs.contains(&"swap") && runs.contains(&"host"), "{runs:?}");
    assert!(
        s["mariadb"]["attempts"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "a disabled mariadb collector connects nowhere: {}",
        s["mariadb"]
    );
}
