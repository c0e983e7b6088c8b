//! Finding the test servers and running the binary.

use std::{
    io::Write,
    path::PathBuf,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// A test server started by tests/run.sh.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub(crate) port: u16,
    pub(crate) socket: PathBuf,
    pub(crate) pidfile: PathBuf,
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| {
        panic!(
            "{key} is not set: this test needs the MariaDB servers that tests/run.sh starts \
             (the tests that need no server run without them). Run `tests/run.sh` (all tests), \
             or start them with tests/harness/mariadb.sh and export the variables printed by \
             `tests/harness/mariadb.sh env NAME`."
        )
    })
}

impl Server {
    pub(crate) fn get(name: &str) -> Server {
        let key = name.to_ascii_uppercase();
        Server {
            port: env(&format!("POWERDIAG_IT_{key}_PORT"))
                .parse()
                .expect("port"),
            socket: env(&format!("POWERDIAG_IT_{key}_SOCKET")).into(),
            pidfile: env(&format!("POWERDIAG_IT_{key}_PIDFILE")).into(),
        }
    }

    pub(crate) fn m118() -> Server {
        Server::get("m118")
    }
    pub(crate) fn m1011() -> Server {
        Server::get("m1011")
    }
    pub(crate) fn hang() -> Server {
        Server::get("hang")
    }

    pub(crate) fn root_password() -> String {
        std::env::var("POWERDIAG_IT_ROOT_PASSWORD").unwrap_or_else(|_| "powerdiag-it-root".into())
    }

    /// Root over TCP, password included: for `POWERDIAG_MARIADB_URL` only, never argv.
    pub(crate) fn root_url(&self) -> String {
        self.url("root", &Server::root_password())
    }

    pub(crate) fn url(&self, user: &str, password: &str) -> String {
        format!("mysql://{user}:{password}@127.0.0.1:{}/", self.port)
    }

    pub(crate) fn pid(&self) -> i32 {
        std::fs::read_to_string(&self.pidfile)
            .unwrap_or_else(|e| panic!("{}: {e}", self.pidfile.display()))
            .trim()
            .parse()
            .expect("pid")
    }

    /// A mysql_async pool for set-up statements.
    pub(crate) fn pool(&self) -> mysql_async::Pool {
        mysql_async::Pool::new(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(self.port)
                .user(Some("root"))
                .pass(Some(Server::root_password()))
                .prefer_socket(false),
        )
    }
}

/// The binary under test, with a clean environment: no URL from the caller, no ~/.my.cnf.
pub(crate) fn powerdiag() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_powerdiag"));
    c.env_remove("POWERDIAG_MARIADB_URL")
        .env("HOME", empty_home())
        .env("NO_COLOR", "1");
    c
}

fn empty_home() -> PathBuf {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
        .to_owned()
}

/// Output of one run plus its wall time.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) elapsed: Duration,
}

impl Run {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

pub(crate) fn run(cmd: &mut Command) -> Run {
    let t = Instant::now();
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run powerdiag");
    let r = Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed: t.elapsed(),
    };
    assert!(
        !r.stderr.contains("panicked"),
        "powerdiag panicked:\n{}",
        r.stderr
    );
    r
}

/// `doctor --format json` against `url` (passed in the environment, as users should). Unless
/// the test sets it, the sample window is 0: host shares since boot are stable, so a loaded CI
/// machine's momentary steal cannot change a database test's exit status.
///
/// PD806 judges the host's CPU pressure of the last minute whatever the window: unless the
/// test passes its own `--config.file`, its limits are set to 100% here, so that a CI machine
/// saturated by the suite itself cannot turn a database test's exit status into 1.
pub(crate) fn doctor_json(url: &str, extra: &[&str]) -> Run {
    let window: &[&str] = if extra.contains(&"--sample-window") {
        &[]
    } else {
        &["--sample-window", "0"]
    };
    let mut cmd = powerdiag();
    cmd.env("POWERDIAG_MARIADB_URL", url)
        .args(["doctor", "--format", "json"])
        .args(window)
        .args(extra);
    if !extra.contains(&"--config.file") {
        cmd.arg("--config.file").arg(host_load_neutral_config());
    }
    run(&mut cmd)
}

/// An agent configuration whose only setting lifts PD806's limits to 100% (see
/// [`doctor_json`]).
pub(crate) fn host_load_neutral_config() -> PathBuf {
    static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let path = empty_home().join("host-load-neutral.toml");
        std::fs::write(
            &path,
            "[rules.thresholds.PD806]\nmax_waiting_share = 1.0\nmax_process_share = 1.0\n",
        )
        .expect("write the doctor configuration");
        path
    })
    .clone()
}

/// The status of check `code` in a doctor JSON report.
pub(crate) fn status(report: &Value, code: &str) -> String {
    check(report, code)["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn check<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["code"] == code)
        .unwrap_or_else(|| panic!("no check {code} in {report:#}"))
}

/// Every check's code and status, for comparing two reports.
pub(crate) fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["code"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// The `hang` server is stopped, restarted and SIGSTOPped by several tests: one at a time.
pub(crate) fn hang_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Tests that keep the machine busy for a long time (`server_pitfalls`' workloads) and the
/// test whose verdicts measure the machine under a load it controls (`stability`): one at a
/// time, or the workloads' CPU use would flip a measured verdict such as PD103's stall share.
pub(crate) fn machine_load_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs tests/harness/mariadb.sh (the servers' own start/stop script).
pub(crate) fn harness(args: &[&str]) {
    harness_script("mariadb.sh", args);
}

/// Restarts the harness server `name` (`flavour`, its port unchanged) with the server
/// `options` for this start (`POWERDIAG_IT_MARIADB_OPTIONS`: `name=value`, space-separated;
/// "" for the harness's own); both steps must succeed.
pub(crate) fn restart_server(name: &str, flavour: &str, options: &str) {
    let port = Server::get(name).port.to_string();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/harness/mariadb.sh");
    for args in [vec!["stop", name], vec!["start", name, flavour, &port]] {
        let out = Command::new(&script)
            .args(&args)
            .env("POWERDIAG_IT_MARIADB_OPTIONS", options)
            .output()
            .unwrap_or_else(|e| panic!("tests/harness/mariadb.sh: {e}"));
        assert!(
            out.status.success(),
            "mariadb.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// tests/harness/sysbench.sh `run` in its own process group, killed (with the sysbench it
/// started) if the test ends before it does.
pub(crate) struct Sysbench(pub(crate) Option<std::process::Child>);

impl Sysbench {
    /// `run NAME SECONDS` with `threads` client threads, at most `rate` transactions a second
    /// (0: as fast as it goes).
    pub(crate) fn start(name: &str, seconds: u64, threads: u32, rate: u32) -> Sysbench {
        use std::os::unix::process::CommandExt;
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/harness/sysbench.sh");
        Sysbench(Some(
            Command::new(path)
                .args(["run", name, &seconds.to_string()])
                .env("POWERDIAG_SYSBENCH_THREADS", threads.to_string())
                .env("POWERDIAG_SYSBENCH_RATE", rate.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("tests/harness/sysbench.sh: {e}")),
        ))
    }
}

impl Drop for Sysbench {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", c.id())])
                .status();
            let _ = c.wait();
        }
    }
}

/// `sat118` is moved into a cgroup by tests/it/saturation.rs and crashed by
/// tests/it/error_log.rs: one at a time.
pub(crate) fn sat118_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs tests/harness/SCRIPT with `args`; it must succeed.
pub(crate) fn harness_script(script: &str, args: &[&str]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/harness")
        .join(script);
    let out = Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tests/harness/{script}: {e}"));
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The 11.8 server's vector cache is changed by one test and read by others: one at a time.
/// The `evict` 11.8 server is restarted by `evicted_stats` and has its globals changed by
/// `session_guard`: one test at a time.
pub(crate) fn evict_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn m118_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Percent-encodes a query-string value.
pub(crate) fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Number of CPUs in a kernel CPU list (`0-3,8` → 5), as the tests read it themselves.
pub(crate) fn count_cpus(list: &str) -> u64 {
    list.trim()
        .split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// Runs `program args` with `input` on its standard input (written from another thread, so a
/// program that answers before it has read everything cannot block) and returns what it
/// printed; `from` says where the program comes from when it cannot start.
pub(crate) fn run_with_input(program: &str, args: &[&str], input: &[u8], from: &str) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} ({from}): {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// promtool, the Prometheus project's own linter, accepts `body` as an exposition.
pub(crate) fn assert_promtool_accepts(body: &str) {
    let out = run_with_input(
        "promtool",
        &["check", "metrics"],
        body.as_bytes(),
        "Debian's prometheus package, installed by tests/harness/setup.sh",
    );
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
