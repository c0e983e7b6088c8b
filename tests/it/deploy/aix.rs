//! AIX: shellcheck and sh -n read the scripts; the SRC registration, the rc script and the
//! LDR_CNTRL wrapper run against stand-ins for the AIX commands.

use super::*;

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
