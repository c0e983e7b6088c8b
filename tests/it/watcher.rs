//! What the tests that provoke a pitfall on a real server and follow its fix share: root
//! connections, and [`Watcher`], an agent sampling every 2 s for the whole of a test, which
//! keeps its status history across the provoked state, the fix and the quiet after it, as in
//! production (`server_pitfalls.rs`, `locks.rs`).

use std::time::Duration;

use mysql_async::{Conn, OptsBuilder, prelude::Queryable};
use serde_json::Value;

use crate::support::*;

pub(crate) fn opts(server: &Server) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(server.port)
        .user(Some("root"))
        .pass(Some(Server::root_password()))
        .prefer_socket(false)
}

pub(crate) async fn conn(server: &Server) -> Conn {
    Conn::new(opts(server)).await.expect("connect as root")
}

pub(crate) async fn exec(c: &mut Conn, sqls: &[&str]) {
    for sql in sqls {
        c.query_drop(*sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// A global status variable's value (`SHOW GLOBAL STATUS LIKE`); panics when the server has
/// none of that name.
pub(crate) async fn global_status(c: &mut Conn, name: &str) -> String {
    let v: Option<(String, String)> = c
        .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .await
        .unwrap();
    v.unwrap_or_else(|| panic!("no status {name}")).1
}

pub(crate) fn explain(j: &Value, codes: &[&str]) -> String {
    codes
        .iter()
        .map(|c| format!("{c}: {:#}", check(j, c)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The current snapshot of the agent on `port` judged again by `powerdiag doctor --from`
/// (JSON; `Null` when the agent does not answer).
pub(crate) fn agent_report(port: u16) -> Value {
    let Some((_, _, body)) = crate::agent::get(port, "/api/v1/snapshot") else {
        return Value::Null;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, body).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_powerdiag"))
        .args(["doctor", "--format", "json", "--from"])
        .arg(&path)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// The agent sampling every `INTERVAL` for the whole of a test: it keeps its status history
/// across the provoked state, the fix and the quiet after it, as in production.
pub(crate) struct Watcher {
    pub(crate) agent: crate::agent::Agent,
}

/// The watcher's sample interval.
pub(crate) const INTERVAL: Duration = Duration::from_secs(2);

impl Watcher {
    pub(crate) fn start(server: &Server) -> Watcher {
        Watcher::start_with(server, "")
    }

    /// [`Watcher::start`] with more configuration (TOML tables) after the watcher's own.
    pub(crate) fn start_with(server: &Server, more: &str) -> Watcher {
        Watcher::start_wrapped(server, more, &[])
    }

    /// [`Watcher::start_with`], the agent started through `wrapper` (a program and its
    /// arguments, which then run the agent's command line: tests/harness/journald.sh exec).
    pub(crate) fn start_wrapped(server: &Server, more: &str, wrapper: &[&str]) -> Watcher {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("agent.toml");
        std::fs::write(
            &cfg,
            format!("[sample]\ninterval = \"2s\"\ntimeout = \"1500ms\"\nwindow = \"0s\"\nstatus_window = \"2s\"\nmax_status_window = \"10m\"\n[probe]\nenabled = false\n[statements]\nenabled = false\n{more}"),
        )
        .unwrap();
        let port = crate::agent::free_port();
        let bin = env!("CARGO_BIN_EXE_powerdiag");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = std::process::Command::new(program);
                c.args(args).arg(bin);
                c
            }
            None => std::process::Command::new(bin),
        };
        // Quiet logs: nothing reads the agent's stderr pipe while it runs.
        cmd.env("POWERDIAG_MARIADB_URL", server.root_url())
            .args(["agent", "--log.level", "error", "--web.listen-address"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--config.file")
            .arg(&cfg);
        Watcher {
            agent: crate::agent::spawn_agent(cmd, port, dir),
        }
    }

    /// The agent's current verdicts on `codes` (`powerdiag_check` in /metrics) and the
    /// metrics text.
    pub(crate) fn read(&self, codes: &[&str]) -> Option<(Vec<(String, String)>, String)> {
        let (_, _, body) = crate::agent::get(self.agent.port, "/metrics")?;
        let got = codes
            .iter()
            .map(|code| {
                let needle = format!("code=\"{code}\"");
                let status = body
                    .lines()
                    .filter(|l| {
                        l.starts_with("powerdiag_check{")
                            && l.contains(&needle)
                            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0)
                    })
                    .find_map(|l| {
                        l.split("status=\"")
                            .nth(1)?
                            .split('"')
                            .next()
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                ((*code).to_owned(), status)
            })
            .collect();
        Some((got, body))
    }

    /// Waits (up to `limit`) until every code's verdict is `want`; returns the verdicts and
    /// the metrics text.
    pub(crate) fn until(
        &self,
        codes: &[&str],
        want: &str,
        limit: Duration,
    ) -> (Vec<(String, String)>, String) {
        let mut last = None;
        let reached = crate::agent::eventually(limit, || {
            last = self.read(codes);
            last.as_ref()
                .is_some_and(|(got, _)| got.iter().all(|(_, s)| s == want))
        });
        let (got, body) = last.unwrap_or_default();
        assert!(
            reached,
            "the agent's verdicts never all became {want}: {got:?}"
        );
        (got, body)
    }

    /// The agent's checks on `codes` in full, judged again from its current snapshot (for
    /// assertion messages).
    pub(crate) fn explain(&self, codes: &[&str]) -> String {
        explain(&self.report(), codes)
    }

    /// The agent's current snapshot judged again by `powerdiag doctor --from` (JSON).
    pub(crate) fn report(&self) -> Value {
        agent_report(self.agent.port)
    }

    /// Right after a fix: watches `codes` for two sample intervals (and a sample's own time),
    /// then for `busy` more while the load goes on; returns what failed in each span.
    pub(crate) fn after_fix(&self, codes: &[&str], busy: Duration) -> AfterFix {
        AfterFix {
            late: self.fails_during(codes, 2 * INTERVAL + Duration::from_secs(2)),
            again: self.fails_during(codes, busy),
            explained: self.explain(codes),
        }
    }

    /// Ten sample intervals of a quiet server: no verdict on `codes` may fail (the agent must
    /// not fall back on counters that hold the provoked minutes). Returns the last verdicts.
    pub(crate) fn assert_quiet(&self, codes: &[&str]) -> Vec<(String, String)> {
        let fails = self.fails_during(codes, 10 * INTERVAL);
        assert!(
            fails.is_empty(),
            "a verdict failed on the quiet server: {fails:?}\n{}",
            self.explain(codes)
        );
        self.read(codes).map(|(got, _)| got).unwrap_or_default()
    }

    /// Reads the verdicts every 200 ms for `span` and returns every (code, status) seen that
    /// is a `fail`, with when (seconds from the start).
    pub(crate) fn fails_during(&self, codes: &[&str], span: Duration) -> Vec<(f64, String)> {
        let t0 = std::time::Instant::now();
        let mut seen = Vec::new();
        while t0.elapsed() < span {
            if let Some((got, _)) = self.read(codes) {
                for (code, st) in got {
                    if st == "fail" {
                        seen.push((t0.elapsed().as_secs_f64(), code));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        seen
    }
}

/// What failed after a fix ([`Watcher::after_fix`]), with when (seconds into each span).
pub(crate) struct AfterFix {
    late: Vec<(f64, String)>,
    again: Vec<(f64, String)>,
    explained: String,
}

impl AfterFix {
    /// No fail from two sample intervals after the fix on.
    pub(crate) fn assert_cleared(&self) {
        let last_late = self.late.last().map_or(0.0, |(t, _)| *t);
        assert!(
            last_late <= (2 * INTERVAL).as_secs_f64() + 2.0,
            "a verdict still failed after two sample intervals: {:?}\n{}",
            self.late,
            self.explained
        );
        assert!(
            self.again.is_empty(),
            "a verdict failed again after the fix: {:?}\n{}",
            self.again,
            self.explained
        );
    }
}
