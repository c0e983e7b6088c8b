use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict, declare_rule, os::pct,
};

use super::{fix::set_global, memory::memory_model, memory::MAX_WORST_CASE};

declare_rule! {
    /// ### What it does
    /// Compares the connections with `max_connections`. Fails when
    /// - connections were refused for the limit (`Connection_errors_max_connections` grew over
    ///   the shortest recent window: the agent's last sample, doctor's sample window), or
    /// - the connections open (`Threads_connected`) reached {max_used_share} of
    ///   `max_connections` at any status read of the last five minutes the snapshot holds
    ///   (PMM alerts on `max_over_time(threads_connected[5m])` at 80%; MySQLTuner's 85%).
    ///
    /// `Max_used_connections` (the most ever open at once since start-up or `FLUSH STATUS`) is
    /// evidence, never a fail on its own: one spike last month would keep the alert firing
    /// until a restart. Without a window (doctor `--sample-window 0`) refusals since start-up
    /// are shown but not judged.
    ///
    /// MySQLTuner also flags `Aborted_connects` above 3% of connections; powerdiag does not:
    /// that counter counts failed logins (a wrong password, a port scanner, a client timing
    /// out during the handshake) — a security or network matter, not the limit.
    /// `Connection_errors_max_connections` counts exactly the connections the limit refused.
    ///
    /// ### Why is this bad?
    /// At the limit, the next client gets `ERROR 1040 (HY000): Too many connections`: the
    /// application fails rather than slows. Near it, a burst (a deploy, a retry storm after a
    /// hiccup) reaches it. Usually the cause is connections held idle (persistent connections,
    /// pools sized per web worker) rather than work.
    ///
    /// ### Remediation
    /// Fewer connections held open: a connection pool sized for the work (a few per CPU core),
    /// idle ones closed (`wait_timeout`), MariaDB's thread pool (`thread_handling =
    /// pool-of-threads`) for many mostly idle clients. Then a limit with headroom:
    /// `SET GLOBAL max_connections = N;` (dynamic; persist `max_connections = N` under
    /// `[mariadbd]`). Each connection may allocate its own buffers, so the finding sizes N
    /// against RAM with PD503's model.
    pub struct ConnectionsNearLimit {
        code: "PD209",
        name: "connections-near-limit",
        severity: Warning,
        scope: Database,
        summary: "connections reach max_connections",
        fails_when: "connections refused at the limit over the last window, or open connections ≥ 85% of `max_connections` at a read of the last 5 min",
        severity_why: "warning: connections near the limit make refusals likely under the present load",
        thresholds: [MAX_USED_SHARE],
    }
}

const MAX_USED_SHARE: Threshold = Threshold {
    key: "max_used_share",
    default: 0.85,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "connections open at once, as a share of max_connections (MySQLTuner: 85%; PMM: 80%)",
};

/// Seconds back over which open connections are judged (PMM's `max_over_time(…[5m])`).
const RECENT: f64 = 300.0;

impl Rule for ConnectionsNearLimit {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max = db.var_u64(Var::MaxConnections)?.max(1);
        let limit = limits.get(&MAX_USED_SHARE);
        let windows = db.windows().unwrap_or_default();
        // The most connections open at any read of the last five minutes: the end, and the
        // starts of the windows that reach back no further.
        let connected_end = db.status_u64(StatusVar::ThreadsConnected)?;
        let mut reads = 1;
        let mut connected = connected_end;
        for w in windows.iter().filter(|w| w.seconds() <= RECENT) {
            if let Some(c) = w.start_value(StatusVar::ThreadsConnected) {
                connected = connected.max(c);
                reads += 1;
            }
        }
        let max_used = db.status_u64(StatusVar::MaxUsedConnections)?;
        let when = db
            .status
            .get(StatusVar::MaxUsedConnectionsTime.name())
            .filter(|t| !t.is_empty())
            .map(|t| format!(" at {}", crate::display_text(t, 40)))
            .unwrap_or_default();
        let shortest = windows.first();
        let refused = match shortest {
            Some(w) => Some(w.get(StatusVar::ConnectionErrorsMaxConnections)?),
            None => None,
        };
        let mut evidence = vec![
            if reads == 1 {
                format!(
                    "{connected} connections open ({} of max_connections {max})",
                    pct(connected as f64 / max as f64)
                )
            } else {
                format!(
                    "{connected} connections open at most ({} of max_connections {max}), the largest of {reads} status reads in the last {}",
                    pct(connected as f64 / max as f64),
                    crate::format_secs(
                        windows
                            .iter()
                            .filter(|w| w.seconds() <= RECENT)
                            .map(|w| w.seconds())
                            .fold(0.0, f64::max)
                            .round() as u64
                    )
                )
            },
            format!(
                "Max_used_connections {max_used} ({}){when}, since start-up or FLUSH STATUS: evidence, not judged",
                pct(max_used as f64 / max as f64)
            ),
        ];
        match (refused, shortest) {
            (Some(n), Some(w)) => evidence.push(format!(
                "{n} connections refused for the limit (Connection_errors_max_connections), {}",
                w.describe()
            )),
            _ => evidence.push(format!(
                "{} connections refused for the limit since start-up (Connection_errors_max_connections): history, not judged without a window",
                // evidence only: shown, never judged
                db.status_u64(StatusVar::ConnectionErrorsMaxConnections).unwrap_or(0)
            )),
        }
        let mut problems = Vec::new();
        if let Some(n) = refused.filter(|n| *n > 0) {
            problems.push(format!("{n} connections were refused at the limit"));
        }
        if connected as f64 >= limit * max as f64 {
            problems.push(format!(
                "{connected} of {max} connections are open ({})",
                pct(connected as f64 / max as f64)
            ));
        }
        if problems.is_empty() {
            let mut v = Verdict::pass(format!(
                "connections stay below {} of max_connections ({max}): at most {connected} open recently",
                pct(limit)
            ));
            v.evidence = evidence;
            return Ok(v);
        }
        let peak = connected;
        let mut want = (peak as f64 / limit * 1.25).ceil() as u64;
        want = want.max(max + max / 2);
        let mut note = String::new();
        match memory_model(s) {
            Ok(m) => {
                let per = m.per_connection_bytes().max(1);
                let fit = max + m.room(MAX_WORST_CASE.default) / per;
                if fit < want {
                    note = format!(
                        " — only {fit} fit in RAM with these per-connection buffers ({}); holding fewer connections open is the fix",
                        m.summary()
                    );
                    want = fit;
                }
            }
            Err(v) => evidence.push(format!("not sized against RAM: {}", v.summary)),
        }
        let mut v = Verdict::fail(format!(
            "connections reach the limit of {max}: {}",
            problems.join("; ")
        ))
        .with_basis(shortest.map(|w| w.basis()))
        .with_remediation(if want > max {
            format!(
                "Hold fewer connections open (a pool sized for the work, wait_timeout for idle ones, thread_handling = pool-of-threads for many idle clients); then raise the limit to {want}{note}:\n{}",
                set_global(&[("max_connections", want.to_string(), want.to_string())])
            )
        } else {
            format!(
                "Hold fewer connections open (a pool sized for the work, wait_timeout for idle ones, thread_handling = pool-of-threads for many idle clients){note}"
            )
        });
        v.evidence = evidence;
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    fn server(connected: &str, max_used: &str, refused: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::MaxConnections, "100")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::ThreadsConnected, connected)
            .status(StatusVar::MaxUsedConnections, max_used)
            .status(StatusVar::MaxUsedConnectionsTime, "2026-01-01 10:00:00")
            .status(StatusVar::ConnectionErrorsMaxConnections, refused)
    }

    #[test]
    fn verdicts() {
        let v = verdict(&ConnectionsNearLimit, &server("5", "12", "0").build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let v = verdict(&ConnectionsNearLimit, &server("90", "90", "0").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .contains("SET GLOBAL max_connections = 150;")
        );
        // A high-water mark alone is history: evidence, not a fail.
        let v = verdict(&ConnectionsNearLimit, &server("5", "100", "0").build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(
            v.evidence[1].contains("at 2026-01-01 10:00:00")
                && v.evidence[1].contains("not judged"),
            "{v:?}"
        );
        // A read of the last five minutes at the limit fails; one ten minutes old does not.
        let s = server("5", "95", "0")
            .window(60.0, &[])
            .longer_window(240.0, &[(StatusVar::ThreadsConnected, "95")])
            .by_agent()
            .build();
        assert_eq!(verdict(&ConnectionsNearLimit, &s).status, Status::Fail);
        let s = server("5", "95", "0")
            .window(60.0, &[])
            .longer_window(600.0, &[(StatusVar::ThreadsConnected, "95")])
            .by_agent()
            .build();
        assert_eq!(verdict(&ConnectionsNearLimit, &s).status, Status::Pass);
        // Refused connections in the window fail even below the share.
        let v = verdict(
            &ConnectionsNearLimit,
            &server("5", "20", "7")
                .window(5.0, &[(StatusVar::ConnectionErrorsMaxConnections, "3")])
                .build(),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("4 connections were refused"), "{v:?}");
    }

    #[test]
    fn a_raise_is_limited_by_ram() {
        let s = server("95", "95", "0")
            .var(Var::SortBufferSize, "268435456")
            .host(|h| h.memory_total_bytes = Some(32 << 30))
            .build();
        let fix = verdict(&ConnectionsNearLimit, &s).remediation.unwrap();
        assert!(fix.contains("fit in RAM"), "{fix}");
    }

    #[test]
    fn missing_status_is_insufficient() {
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(
            verdict(&ConnectionsNearLimit, &s).status,
            Status::InsufficientData
        );
    }
}
