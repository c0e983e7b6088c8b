//! `powerdiag agent` against real servers: endpoints, metrics that promtool accepts, faults
//! (server down at start, restarted, hung), configuration errors and reloads, shutdown.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::support::*;

/// A running agent, killed when dropped.
pub(crate) struct Agent {
    pub(crate) child: Child,
    pub(crate) port: u16,
    _dir: tempfile::TempDir,
}

/// Everything `child` wrote to its (piped) stderr: call after it exited.
pub(crate) fn stderr_of(child: &mut Child) -> String {
    let mut log = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut log).unwrap();
    }
    log
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts an agent with `config` (TOML) watching `url`, and waits until it answers.
pub(crate) fn start_agent(url: &str, config: &str) -> Agent {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, config).unwrap();
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_powerdiag"));
    cmd.env("POWERDIAG_MARIADB_URL", url)
        .args(["agent", "--log.level", "debug", "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config.file")
        .arg(&cfg);
    spawn_agent(cmd, port, dir)
}

/// Spawns `cmd` (an agent listening on 127.0.0.1:`port`) with HOME in `dir`, no
/// POWERDIAG_MARIADB_URL unless `cmd` sets it, and waits until it answers.
pub(crate) fn spawn_agent(mut cmd: Command, port: u16, dir: tempfile::TempDir) -> Agent {
    let child = cmd
        .env("HOME", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let agent = Agent {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(port, "/healthz").is_none() {
        assert!(
            Instant::now() < deadline,
            "the agent did not answer within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    agent
}

/// A plain HTTP/1.1 GET; `None` when nothing answers. Returns (status, headers, body).
pub(crate) fn get_with(port: u16, path: &str, extra: &str) -> Option<(u16, String, String)> {
    let (status, head, body) = get_bytes(port, path, extra)?;
    Some((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// [`get_with`] with the body as it came (a gzipped one is not text).
pub(crate) fn get_bytes(port: u16, path: &str, extra: &str) -> Option<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    // Go's servers (Prometheus) chunk any answer over 2 KiB that has no Content-Length.
    if head
        .lines()
        .any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked")
    {
        body = dechunk(&body)?;
    }
    Some((status, head, body))
}

/// The body of a `Transfer-Encoding: chunked` answer; `None` when it is malformed.
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&raw[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

pub(crate) fn get(port: u16, path: &str) -> Option<(u16, String, String)> {
    get_with(port, path, "")
}

pub(crate) fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Waits until `f` holds or `limit` passes.
pub(crate) fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}

const FAST: &str = "[sample]\ninterval = \"2s\"\ntimeout = \"1s\"\nwindow = \"200ms\"\n";

#[test]
fn serves_metrics_snapshot_and_health() {
    let server = Server::m1011();
    let agent = start_agent(&server.root_url(), FAST);
    assert!(eventually(Duration::from_secs(8), || {
        get(agent.port, "/metrics")
            .is_some_and(|(_, _, b)| metric(&b, "powerdiag_mariadb_up") == Some(1.0))
    }));
    let (status, head, body) = get(agent.port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    for needle in [
        "powerdiag_up 1",
        "powerdiag_collector_success{collector=\"mariadb\"} 1",
        "powerdiag_collector_duration_seconds{collector=\"cpu\"}",
        "powerdiag_check{code=\"PD204\",name=\"performance-schema-off\",severity=\"info\",status=\"",
        "powerdiag_sample_age_seconds",
        "powerdiag_mariadb_questions_total",
        // The CPU time counters behind the window shares, and the agent's own process.
        "# TYPE powerdiag_cpu_seconds_total counter",
        "powerdiag_cpu_seconds_total{mode=\"steal\"}",
        "powerdiag_cpu_seconds_total{mode=\"idle\"}",
        "# TYPE process_cpu_seconds_total counter",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(body.contains(needle), "{needle} missing from\n{body}");
    }
    // The build: the binary's version, its git revision, target and compiler.
    let build = body
        .lines()
        .find(|l| l.starts_with("powerdiag_build_info{"))
        .unwrap_or_else(|| panic!("no powerdiag_build_info in\n{body}"));
    assert_eq!(
        build,
        format!(
            "powerdiag_build_info{{version=\"{}\",revision=\"{}\",target=\"{}\",rustc=\"{}\"}} 1.0",
            env!("CARGO_PKG_VERSION"),
            env!("POWERDIAG_GIT_REVISION"),
            env!("POWERDIAG_TARGET"),
            env!("POWERDIAG_RUSTC_VERSION")
        )
    );
    assert!(env!("POWERDIAG_RUSTC_VERSION").starts_with("1."));
    let rss = metric(&body, "process_resident_memory_bytes").unwrap();
    assert!(rss > 1e6 && rss < 1e9, "agent RSS {rss}");
    assert!(
        !body.contains(&Server::root_password()),
        "no secret in metrics"
    );

    // promtool, the Prometheus project's own linter, accepts the exposition.
    assert_promtool_accepts(&body);

    // OpenMetrics by negotiation, gzip when asked.
    let (_, head, body) = get_with(
        agent.port,
        "/metrics",
        "Accept: application/openmetrics-text; version=1.0.0\r\n",
    )
    .unwrap();
    assert!(
        head.contains("application/openmetrics-text") && body.ends_with("# EOF\n"),
        "{head}"
    );
    // Gzip as Prometheus asks for it: the sample's part is deflated once and each scrape
    // appends its own lines; gzip(1) decodes the one member to the same text as a plain
    // scrape of the same sample (but for the sample's age, which moves between the two).
    // Samples come every 2 s here: a pair that straddles two samples is taken again.
    let gunzip = |gz: &[u8]| -> String {
        let out = run_with_input("gzip", &["-d", "-c"], gz, "Debian's gzip");
        assert!(
            out.status.success(),
            "gzip -d: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let without_age = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("powerdiag_sample_age_seconds "))
            .map(str::to_owned)
            .collect()
    };
    let content_type = |h: &str| {
        h.lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-type"))
            .map(str::to_owned)
    };
    for (accept, eof) in [
        ("", false),
        (
            "Accept: application/openmetrics-text; version=1.0.0\r\n",
            true,
        ),
    ] {
        let extra = format!("{accept}Accept-Encoding: gzip\r\n");
        let mut same_sample = 0;
        for _ in 0..20 {
            let (_, plain_head, plain) = get_with(agent.port, "/metrics", accept).unwrap();
            let (status, head, gz) = get_bytes(agent.port, "/metrics", &extra).unwrap();
            assert_eq!(status, 200, "{head}");
            assert!(
                head.to_ascii_lowercase().contains("content-encoding: gzip"),
                "{head}"
            );
            assert_eq!(content_type(&head), content_type(&plain_head));
            assert!(
                gz.len() < plain.len() / 3,
                "{} of {} bytes",
                gz.len(),
                plain.len()
            );
            let text = gunzip(&gz);
            assert_eq!(text.ends_with("# EOF\n"), eof);
            let taken = |t: &str| metric(t, "powerdiag_sample_timestamp_seconds");
            if taken(&text).is_none() || taken(&text) != taken(&plain) {
                continue;
            }
            assert_eq!(without_age(&text), without_age(&plain));
            same_sample += 1;
            if same_sample == 2 {
                break;
            }
        }
        assert_eq!(same_sample, 2, "no two scrapes of one sample in 20 tries");
    }

    // The snapshot API serves what doctor --from reads.
    let (status, _, json) = get(agent.port, "/api/v1/snapshot").unwrap();
    assert_eq!(status, 200);
    let snap = powerdiag_rules::read_snapshot(&json).unwrap();
    assert!(snap.mariadb.reachable);
    assert!(!json.contains(&Server::root_password()));
    let (status, _, health) = get(agent.port, "/healthz").unwrap();
    assert_eq!(status, 200, "{health}");
    let (status, _, index) = get(agent.port, "/").unwrap();
    assert_eq!(status, 200);
    assert!(index.contains("/metrics") && index.contains("/api/v1/snapshot"));
}

#[test]
fn bad_flags_and_configuration_fail_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[sample]\nintervall = \"15s\"\n").unwrap();
    let bad_threshold = dir.path().join("threshold.toml");
    std::fs::write(&bad_threshold, "[rules.thresholds.PD403]\nsteal = 0.1\n").unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let with_listen = |mut v: Vec<String>| {
        v.extend(["--web.listen-address".to_owned(), listen.clone()]);
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with_listen(vec!["--config.file".into(), bad.display().to_string()]),
            "unknown field `intervall`",
        ),
        (
            with_listen(vec![
                "--config.file".into(),
                "/nonexistent/agent.toml".into(),
            ]),
            "/nonexistent/agent.toml",
        ),
        (
            with_listen(vec![
                "--config.file".into(),
                bad_threshold.display().to_string(),
            ]),
            "rules.thresholds.PD403: PD403 (hypervisor-preemption) has no threshold \"steal\"; it has max_steal,",
        ),
        (
            vec!["--web.listen-address".into(), "nowhere".into()],
            "--web.listen-address nowhere",
        ),
        (
            with_listen(vec!["--web.telemetry-path".into(), "metrics".into()]),
            "--web.telemetry-path",
        ),
        (
            with_listen(vec!["--log.level".into(), "chatty".into()]),
            "chatty",
        ),
    ];
    for (args, needle) in cases {
        let t = Instant::now();
        let r = run(powerdiag()
            .env("POWERDIAG_MARIADB_URL", "mysql://x@127.0.0.1:1/")
            .arg("agent")
            .args(&args));
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "{args:?}: nothing may listen"
        );
    }
}

#[test]
fn sighup_reloads_and_a_bad_reload_keeps_the_old_configuration() {
    let server = Server::m1011();
    let mut agent = start_agent(&server.root_url(), FAST);
    let has_pd204 =
        |a: &Agent| get(a.port, "/metrics").is_some_and(|(_, _, b)| b.contains("code=\"PD204\""));
    assert!(eventually(Duration::from_secs(8), || has_pd204(&agent)));
    let cfg: PathBuf = agent._dir.path().join("agent.toml");

    let reload = |a: &Agent| {
        get(a.port, "/metrics").and_then(|(_, _, b)| {
            Some((
                metric(&b, "powerdiag_config_last_reload_successful")?,
                metric(&b, "powerdiag_config_last_reload_success_timestamp_seconds")?,
            ))
        })
    };
    let (ok, started) = reload(&agent).expect("the reload metrics are exported");
    assert_eq!(ok, 1.0, "start-up loaded every file");

    std::fs::write(&cfg, "[sample]\ninterval = \"2s\"\ntimeout = \"oops\"\n").unwrap();
    signal(agent.child.id(), "HUP");
    assert!(
        eventually(Duration::from_secs(5), || reload(&agent)
            == Some((0.0, started))),
        "a failed reload reads 0 and keeps the last success's time: {:?}",
        reload(&agent)
    );
    assert!(
        get(agent.port, "/healthz").is_some_and(|(s, _, _)| s == 200),
        "still serving after a bad reload"
    );

    std::fs::write(
        &cfg,
        format!(
            "{FAST}[rules]\ndisabled = [\"PD204\"]\n[rules.thresholds.PD403]\nmax_steal = \"12%\"\n"
        ),
    )
    .unwrap();
    signal(agent.child.id(), "HUP");
    assert!(
        eventually(Duration::from_secs(8), || !has_pd204(&agent)),
        "the reloaded configuration disables PD204"
    );
    let (ok, at) = reload(&agent).unwrap();
    assert!(ok == 1.0 && at >= started, "a good reload: {ok} at {at}");
    let (_, _, body) = get(agent.port, "/metrics").unwrap();
    assert!(
        body.contains("powerdiag_check_threshold{code=\"PD403\",name=\"hypervisor-preemption\",threshold=\"max_steal\"} 0.12"),
        "the reloaded threshold is in effect and exported:\n{body}"
    );
    assert!(
        !body.contains("powerdiag_check_threshold{code=\"PD204\""),
        "disabled rules export no thresholds"
    );

    // SIGTERM: a clean exit within the grace period.
    signal(agent.child.id(), "TERM");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = agent.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(6),
            "SIGTERM did not stop the agent in 6 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let log = stderr_of(&mut agent.child);
    assert!(
        log.contains("reload failed; keeping the running configuration"),
        "{log}"
    );
    assert!(log.contains("configuration reloaded"), "{log}");
    assert!(log.contains("SIGTERM"), "{log}");
    assert!(!log.contains(&Server::root_password()), "no secret in logs");
}

/// Issue 18: SIGHUP re-reads `--mariadb.defaults-file` with the other files. A new password
/// takes effect at the next sample (the open connection is replaced), a file that no longer
/// loads keeps the running targets with `powerdiag_config_last_reload_successful 0`, and the
/// very first scrape already carries a complete sample.
#[test]
fn sighup_reloads_the_defaults_file_and_the_first_scrape_is_complete() {
    let server = Server::m1011();
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("client.cnf");
    let write = |password: &str, extra: &str| {
        std::fs::write(
            &cnf,
            format!(
                "{extra}[client]\nuser = root\npassword = \"{password}\"\nhost = 127.0.0.1\nport = {}\n",
                server.port
            ),
        )
        .unwrap();
        std::fs::set_permissions(&cnf, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    };
    write(&Server::root_password(), "");
    let cfg = dir.path().join("agent.toml");
    std::fs::write(&cfg, FAST).unwrap();
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_powerdiag"));
    cmd.args(["agent", "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config.file")
        .arg(&cfg)
        .arg("--mariadb.defaults-file")
        .arg(&cnf);
    let mut agent = spawn_agent(cmd, port, dir);

    // The first scrape waits for the first sample: MariaDB's series are there, not
    // powerdiag_up alone.
    // (Over TCP: root over the socket is authenticated by unix_socket, whatever the password.)
    let (status, _, body) = get(agent.port, "/metrics").unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&body, "powerdiag_mariadb_up"), Some(1.0), "{body}");
    assert!(
        body.contains("powerdiag_collector_success{collector=\"mariadb\"} 1"),
        "{body}"
    );

    let up = |a: &Agent| {
        get(a.port, "/metrics").and_then(|(_, _, b)| metric(&b, "powerdiag_mariadb_up"))
    };
    let reloaded = |a: &Agent| {
        get(a.port, "/metrics")
            .and_then(|(_, _, b)| metric(&b, "powerdiag_config_last_reload_successful"))
    };
    // A wrong password is a valid file: the reload succeeds and the next sample is refused.
    write("not-the-password", "");
    signal(agent.child.id(), "HUP");
    assert!(
        eventually(Duration::from_secs(10), || up(&agent) == Some(0.0)),
        "the new credentials are used at the next sample"
    );
    assert_eq!(reloaded(&agent), Some(1.0));

    // The right password again, then a file that does not load (a missing !includedir):
    // the running targets stay, and so do the successful samples.
    write(&Server::root_password(), "");
    signal(agent.child.id(), "HUP");
    assert!(eventually(Duration::from_secs(10), || up(&agent) == Some(1.0)));
    write("not-the-password", "!includedir /nonexistent/powerdiag.d\n");
    signal(agent.child.id(), "HUP");
    assert!(
        eventually(Duration::from_secs(5), || reloaded(&agent) == Some(0.0)),
        "a defaults file that does not load fails the reload"
    );
    let seq = |a: &Agent| {
        get(a.port, "/metrics")
            .and_then(|(_, _, b)| metric(&b, "powerdiag_sample_timestamp_seconds"))
    };
    let before = seq(&agent);
    assert!(eventually(Duration::from_secs(8), || seq(&agent) != before));
    assert_eq!(up(&agent), Some(1.0), "the running targets were kept");

    signal(agent.child.id(), "TERM");
    let _ = agent.child.wait();
    let log = stderr_of(&mut agent.child);
    assert!(log.contains("MariaDB defaults file reloaded"), "{log}");
    assert!(
        log.contains("MariaDB defaults file reload failed; keeping the running targets"),
        "{log}"
    );
    assert!(
        !log.contains(&Server::root_password()) && !log.contains("not-the-password"),
        "no secret in logs: {log}"
    );
}

pub(crate) fn signal(pid: u32, sig: &str) {
    assert!(
        Command::new("kill")
            .args([&format!("-{sig}"), &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// MariaDB down at start, back, then hung: the agent keeps serving, reports it, recovers.
#[test]
fn survives_a_server_that_is_down_comes_back_and_hangs() {
    let _lock = hang_lock();
    let server = Server::hang();
    harness(&["stop", "hang"]);
    let agent = start_agent(&server.root_url(), FAST);
    let up = |a: &Agent| {
        get(a.port, "/metrics").and_then(|(_, _, b)| metric(&b, "powerdiag_mariadb_up"))
    };
    assert!(
        eventually(Duration::from_secs(6), || up(&agent) == Some(0.0)),
        "mariadb_up 0 while the server is down"
    );
    let (_, _, body) = get(agent.port, "/metrics").unwrap();
    assert_eq!(metric(&body, "powerdiag_up"), Some(1.0));
    assert!(
        body.contains("powerdiag_collector_success{collector=\"mariadb\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("powerdiag_collector_success{collector=\"cpu\"} 1"),
        "host collectors still report:\n{body}"
    );

    // The server returns: up again within two intervals (2 × 2 s) of its start.
    harness(&["start", "hang", "10.11", &server.port.to_string()]);
    let back = Instant::now();
    assert!(
        eventually(Duration::from_secs(5), || up(&agent) == Some(1.0)),
        "mariadb_up 1 within two intervals"
    );
    let recovered = back.elapsed();
    assert!(recovered <= Duration::from_secs(5), "took {recovered:?}");

    // Restarted under a kept connection (whose sample reads status only, the variables being
    // kept): the next sample finds the connection dead, reconnects, and reports the new
    // server's counters, never the old variables without status.
    let uptime = |a: &Agent| {
        get(a.port, "/metrics").and_then(|(_, _, b)| {
            (metric(&b, "powerdiag_mariadb_up") == Some(1.0))
                .then(|| metric(&b, "powerdiag_mariadb_uptime_seconds"))
                .flatten()
        })
    };
    std::thread::sleep(Duration::from_secs(8)); // samples on the kept connection
    let before = uptime(&agent).expect("uptime while up");
    harness(&["stop", "hang"]);
    harness(&["start", "hang", "10.11", &server.port.to_string()]);
    let mut seen = Vec::new();
    assert!(
        eventually(Duration::from_secs(8), || {
            seen.push(uptime(&agent));
            seen.last().unwrap().is_some_and(|u| u < before)
        }),
        "after a restart the uptime (was {before}) never started again: {seen:?}"
    );

    // Hung: samples time out, scrapes stay fast with the last values and a growing age, and
    // nothing piles up (one sample at a time, each bounded).
    let pid = server.pid();
    signal(pid as u32, "STOP");
    let fds_before = open_fds(agent.child.id());
    let mut worst = Duration::ZERO;
    let mut ages = Vec::new();
    let mut ups = Vec::new();
    let until = Instant::now() + Duration::from_secs(7);
    while Instant::now() < until {
        let t = Instant::now();
        let (status, _, body) =
            get(agent.port, "/metrics").expect("the agent answers while the server hangs");
        worst = worst.max(t.elapsed());
        assert_eq!(status, 200);
        ages.extend(metric(&body, "powerdiag_sample_age_seconds"));
        ups.extend(metric(&body, "powerdiag_mariadb_up"));
        std::thread::sleep(Duration::from_millis(250));
    }
    let fds_after = open_fds(agent.child.id());
    signal(pid as u32, "CONT");
    assert!(
        worst < Duration::from_millis(500),
        "a scrape took {worst:?} while the server hung"
    );
    assert!(
        fds_after <= fds_before + 3,
        "file descriptors grew from {fds_before} to {fds_after}: connections pile up"
    );
    assert!(
        ups.contains(&0.0),
        "a hung server shows as mariadb_up 0 once its sample times out: {ups:?}"
    );
    // Samples keep finishing (each bounded by the 1 s timeout): the sampler is never stuck.
    assert!(
        ages.iter().all(|a| *a < 4.0),
        "sample ages while hung: {ages:?}"
    );
    assert!(
        eventually(Duration::from_secs(8), || up(&agent) == Some(1.0)),
        "back to 1 after SIGCONT"
    );
}

pub(crate) fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../exporter-web/testdata")
        .join(name)
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// TLS and basic auth from an exporter-toolkit web config, checked with real HTTPS requests.
#[test]
fn tls_and_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("scrape-Pw-9", 6).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prometheus: '{hash}'\n",
            testdata("test-server.crt").display(),
            testdata("test-server.key").display()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_powerdiag"))
        .env("POWERDIAG_MARIADB_URL", "mysql://x@127.0.0.1:1/")
        .args([
            "agent",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--web.config.file",
        ])
        .arg(&web)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ca = testdata("test-ca.crt");
    let ca = ca.to_str().unwrap();
    let url = format!("https://localhost:{port}/metrics");
    assert!(
        eventually(Duration::from_secs(10), || curl(&["--cacert", ca, &url]).0
            == "401"),
        "the agent answers over TLS"
    );
    assert_eq!(
        curl(&["--cacert", ca, "-u", "prometheus:scrape-Pw-9", &url]).0,
        "200"
    );
    assert_eq!(
        curl(&["--cacert", ca, "-u", "prometheus:wrong", &url]).0,
        "401",
        "wrong password"
    );
    assert_eq!(
        curl(&["--cacert", ca, "-u", "nobody:scrape-Pw-9", &url]).0,
        "401",
        "unknown user"
    );
    let snapshot = format!("https://localhost:{port}/api/v1/snapshot");
    let authorised = [
        "--cacert",
        ca,
        "-u",
        "prometheus:scrape-Pw-9",
        snapshot.as_str(),
    ];
    assert!(
        eventually(Duration::from_secs(5), || curl(&authorised).0 == "200"),
        "the snapshot API over TLS once the first sample is in"
    );
    let (code, err) = curl(&[&url]);
    assert_eq!(
        code, "000",
        "an untrusted certificate is refused by the client: {err}"
    );
    assert_eq!(
        curl(&[&format!("http://127.0.0.1:{port}/metrics")]).0,
        "000",
        "no plain HTTP on the TLS port"
    );

    // SIGHUP re-reads the web configuration: a bad one keeps the running one...
    std::fs::write(&web, "basic_auth_users:\n  prometheus: not-a-bcrypt-hash\n").unwrap();
    signal(child.id(), "HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        curl(&["--cacert", ca, "-u", "prometheus:scrape-Pw-9", &url]).0,
        "200",
        "a bad web configuration on reload keeps the running one"
    );
    // Issue 16, item 3: a reload never lowers security. An emptied file, one truncated to
    // nothing, one without TLS and one without users all keep TLS and basic auth.
    let tls_only = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        testdata("test-server.crt").display(),
        testdata("test-server.key").display()
    );
    for downgrade in [
        String::new(),
        "# truncated\n".to_owned(),
        format!("basic_auth_users:\n  prometheus: '{hash}'\n"),
        tls_only,
    ] {
        std::fs::write(&web, &downgrade).unwrap();
        signal(child.id(), "HUP");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            curl(&["--cacert", ca, &url]).0,
            "401",
            "still basic auth after reloading {downgrade:?}"
        );
        assert_eq!(
            curl(&[&format!("http://127.0.0.1:{port}/metrics")]).0,
            "000",
            "still no plain HTTP after reloading {downgrade:?}"
        );
        assert_eq!(
            curl(&["--cacert", ca, "-u", "prometheus:scrape-Pw-9", &url]).0,
            "200"
        );
    }
    // ... and a good one takes effect for new connections: password rotation without restart.
    let rotated = bcrypt::hash("rotated-Pw-2", 6).unwrap();
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prometheus: '{rotated}'\n",
            testdata("test-server.crt").display(),
            testdata("test-server.key").display()
        ),
    )
    .unwrap();
    signal(child.id(), "HUP");
    assert!(
        eventually(Duration::from_secs(5), || curl(&[
            "--cacert",
            ca,
            "-u",
            "prometheus:rotated-Pw-2",
            &url
        ])
        .0 == "200"),
        "the rotated password works after SIGHUP"
    );
    assert_eq!(
        curl(&["--cacert", ca, "-u", "prometheus:scrape-Pw-9", &url]).0,
        "401",
        "the old password no longer does"
    );
    let _ = child.kill();
    let _ = child.wait();
    let log = stderr_of(&mut child);
    assert!(
        !log.contains("scrape-Pw-9") && !log.contains(&hash) && !log.contains("rotated-Pw-2"),
        "no credential in the log"
    );
    assert!(
        log.contains("web configuration reload failed; keeping the running one")
            && log.contains("web configuration reloaded"),
        "{log}"
    );
    for reason in [
        "the file sets nothing",
        "a reload never turns TLS off",
        "a reload never turns authentication off",
    ] {
        assert!(
            log.contains(reason),
            "the reason is logged: {reason}\n{log}"
        );
    }

    // A web config that cannot work fails before binding, naming the file.
    let broken = dir.path().join("broken.yml");
    std::fs::write(
        &broken,
        "tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n",
    )
    .unwrap();
    let r = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", "mysql://x@127.0.0.1:1/")
        .args([
            "agent",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--web.config.file",
        ])
        .arg(&broken));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("broken.yml") && r.stderr.contains("/nonexistent.crt"),
        "{}",
        r.stderr
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// The keys of one logfmt line (`key=value` or `key="quoted value"`), in order.
fn logfmt_keys(line: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut in_quotes, mut escaped, mut at_key, mut key) = (false, false, true, String::new());
    for c in line.chars() {
        if in_quotes {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_quotes = false,
                _ => {}
            }
        } else if c == '"' {
            in_quotes = true;
        } else if c == ' ' {
            at_key = true;
            key.clear();
        } else if at_key && c == '=' {
            keys.push(std::mem::take(&mut key));
            at_key = false;
        } else if at_key {
            key.push(c);
        }
    }
    keys
}

#[test]
fn logfmt_lines_never_repeat_a_key() {
    // Nothing listens on this port: the sampler logs "MariaDB unavailable" with the target it
    // tried, a field that once repeated the event's own `target=` (its Rust module).
    let closed = free_port();
    let url = format!("mysql://powerdiag@127.0.0.1:{closed}");
    let mut agent = start_agent(&url, FAST);
    let down = |a: &Agent| {
        get(a.port, "/metrics").and_then(|(_, _, b)| metric(&b, "powerdiag_mariadb_up"))
    };
    assert!(
        eventually(Duration::from_secs(10), || down(&agent) == Some(0.0)),
        "a first sample with the server down"
    );
    let _ = agent.child.kill();
    let _ = agent.child.wait();
    let mut stderr = String::new();
    std::io::Read::read_to_string(agent.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("MariaDB unavailable") && stderr.contains(&format!("127.0.0.1:{closed}")),
        "the unavailable server is logged with its address:\n{stderr}"
    );
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let keys = logfmt_keys(line);
        assert!(keys.contains(&"level".to_owned()), "not logfmt: {line}");
        let mut seen = std::collections::HashSet::new();
        for k in &keys {
            assert!(seen.insert(k), "key '{k}' repeated in: {line}");
        }
    }
}

/// Issue 16, item 6: a FIFO where the certificate was (a hostile or broken deploy) fails the
/// SIGHUP reload at once, naming the file; the agent keeps serving and still stops on SIGTERM.
#[test]
fn a_fifo_certificate_on_reload_neither_blocks_nor_wedges_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("server.crt");
    std::fs::copy(testdata("test-server.crt"), &cert).unwrap();
    std::fs::copy(testdata("test-server.key"), dir.path().join("server.key")).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_powerdiag"))
        .env("POWERDIAG_MARIADB_URL", "mysql://x@127.0.0.1:1/")
        .args([
            "agent",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--web.config.file",
        ])
        .arg(&web)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ca = testdata("test-ca.crt");
    let ca = ca.to_str().unwrap();
    let url = format!("https://localhost:{port}/metrics");
    assert!(
        eventually(Duration::from_secs(10), || curl(&["--cacert", ca, &url]).0
            == "200"),
        "the agent answers over TLS"
    );
    std::fs::remove_file(&cert).unwrap();
    let made = Command::new("mkfifo").arg(&cert).status().unwrap();
    assert!(made.success(), "mkfifo");
    signal(child.id(), "HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        curl(&["--cacert", ca, &url]).0,
        "200",
        "still serving with the running certificate"
    );
    signal(child.id(), "TERM");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = stderr_of(&mut child);
    assert!(
        status.is_some_and(|s| s.success()),
        "SIGTERM stops the agent after the FIFO reload: {status:?}\n{log}"
    );
    assert!(
        log.contains("server.crt: it is a FIFO (named pipe), not a regular file"),
        "{log}"
    );
}
