//! systemd: systemd-analyze verifies the unit and its drop-in; the unit is hardened and takes
//! the password from a credential.

use super::*;

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
        // Issue 16: no core dump (it would hold the database password), and descriptors for
        // the agent's connection cap (half the limit, at most 512) with room for the rest.
        ("LimitCORE", "0"),
        ("LimitNOFILE", "2048"),
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
