use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict, declare_rule, os::pct,
};

use super::{fix::set_global, memory::memory_model, memory::MAX_WORST_CASE};

declare_rule! {
    /// ### What it does
    /// Compares the connections with `max_connections`. Fails when
    /// - connections were refused for the limit (`Connection_errors_max_connections` grew over
    ///   the sample window; without a window, since start-up), or
    /// - the connections open at either read of the window (`Threads_connected`) reach
    ///   {max_used_share} of `max_connections`, or
    /// - the most connections ever open at once (`Max_used_connections`, since start-up or
    ///   `FLUSH STATUS`, with the time it happened) reached {max_used_share} — MySQLTuner's
    ///   85% (PMM: 80%).
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
        fails_when: "connections refused at the limit, or open / most-ever-open connections ≥ 85% of `max_connections` (MySQLTuner)",
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

impl Rule for ConnectionsNearLimit {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max = db.var_u64(Var::MaxConnections)?.max(1);
        let limit = limits.get(&MAX_USED_SHARE);
        let window = db.window_counts().ok();
        let counts = match &window {
            Some(w) => w.clone(),
            None => db.startup_counts()?,
        };
        let connected_end = db.status_u64(StatusVar::ThreadsConnected)?;
        let connected = counts
            .start_value(StatusVar::ThreadsConnected)
            .unwrap_or(0)
            .max(connected_end);
        let max_used = db.status_u64(StatusVar::MaxUsedConnections)?;
        let when = db
            .status
            .get(StatusVar::MaxUsedConnectionsTime.name())
            .filter(|t| !t.is_empty())
            .map(|t| format!(" at {}", crate::display_text(t, 40)))
            .unwrap_or_default();
        let refused = counts.get(StatusVar::ConnectionErrorsMaxConnections)?;
        let mut evidence = vec![
            format!(
                "{connected} connections open ({} of max_connections {max}){}",
                pct(connected as f64 / max as f64),
                if window.is_some() {
                    ", the larger of the window's two reads"
                } else {
                    ""
                }
            ),
            format!(
                "Max_used_connections {max_used} ({}){when}, since start-up or FLUSH STATUS",
                pct(max_used as f64 / max as f64)
            ),
            format!(
                "{refused} connections refused for the limit (Connection_errors_max_connections), {}",
                counts.describe()
            ),
        ];
        let mut problems = Vec::new();
        if refused > 0 {
            problems.push(format!("{refused} connections were refused at the limit"));
        }
        if connected as f64 >= limit * max as f64 {
            problems.push(format!(
                "{connected} of {max} connections are open ({})",
                pct(connected as f64 / max as f64)
            ));
        } else if max_used as f64 >= limit * max as f64 {
            problems.push(format!(
                "up to {max_used} of {max} connections were open at once{when} ({})",
                pct(max_used as f64 / max as f64)
            ));
        }
        if problems.is_empty() {
            let mut v = Verdict::pass(format!(
                "connections stay below {} of max_connections ({max}): at most {max_used} at once",
                pct(limit)
            ));
            v.evidence = evidence;
            return Ok(v);
        }
        let peak = max_used.max(connected);
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
        let v = verdict(&ConnectionsNearLimit, &server("5", "100", "0").build());
        assert!(v.summary.contains("at 2026-01-01 10:00:00"), "{v:?}");
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
