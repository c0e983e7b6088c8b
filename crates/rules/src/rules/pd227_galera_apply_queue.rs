use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict, declare_rule, format_secs,
};

use super::galera;

declare_rule! {
    /// ### What it does
    /// On a Galera node, checks that write sets received from the cluster do not queue up
    /// waiting to be applied: `wsrep_local_recv_queue` at the last read and at every earlier
    /// read within {window_seconds} s (the agent's samples; doctor's window start) at least
    /// {max_recv_queue} write sets — the queue stays long, not a burst. One read alone decides
    /// only a short queue. The evidence sets `wsrep_slave_threads` (the appliers) against
    /// `wsrep_cert_deps_distance` (how many write sets could apply in parallel on average).
    ///
    /// ### Why is this bad?
    /// A node that applies more slowly than the cluster writes serves stale reads, and once
    /// its queue passes `gcs.fc_limit` (16 by default) it asks the whole cluster to pause
    /// (flow control, PD226): every node's writes then wait for it.
    ///
    /// ### Remediation
    /// When `wsrep_cert_deps_distance` is above `wsrep_slave_threads`, add appliers: `SET
    /// GLOBAL wsrep_slave_threads = N` (up to that distance and the node's CPUs; persist
    /// under `[mariadbd]`). Otherwise the node itself is slow: its CPU (PD806 cpu-saturated, a
    /// CPU limit on it), its storage (PD802), its buffer pool (PD205), or a long local
    /// transaction or backup on it.
    pub struct GaleraApplyQueue {
        code: "PD227",
        name: "galera-apply-queue",
        severity: Warning,
        scope: Database,
        summary: "a Galera node's receive queue stays long: its appliers cannot keep up",
        fails_when: "`wsrep_local_recv_queue` ≥ 16 write sets at every read over the last 300 s (at least two reads)",
        severity_why: "warning: the queue is measured now; it costs stale reads here and, past gcs.fc_limit, flow control everywhere",
        thresholds: [MAX_RECV_QUEUE, WINDOW_SECONDS],
    }
}

const MAX_RECV_QUEUE: Threshold = Threshold {
    key: "max_recv_queue",
    default: 16.0,
    min: 1.0,
    max: 1e9,
    unit: Unit::Count,
    doc: "write sets waiting to be applied (Galera's default gcs.fc_limit: 16)",
};
const WINDOW_SECONDS: Threshold = Threshold {
    key: "window_seconds",
    default: 300.0,
    min: 1.0,
    max: 3600.0,
    unit: Unit::Count,
    doc: "how far back every read must show the long queue",
};

impl Rule for GaleraApplyQueue {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        galera::node(db)?;
        let max = limits.get(&MAX_RECV_QUEUE);
        let reads = galera::readings(db, StatusVar::WsrepLocalRecvQueue, limits.get(&WINDOW_SECONDS));
        let now = db.status_u64(StatusVar::WsrepLocalRecvQueue)? as f64;
        let threads = db.var_u64(Var::WsrepSlaveThreads).ok();
        let deps = db.status_f64(StatusVar::WsrepCertDepsDistance).ok();
        let span = reads.iter().map(|r| r.0).fold(0.0, f64::max);
        let shown: Vec<String> = reads
            .iter()
            .rev()
            .map(|(ago, q)| {
                if *ago == 0.0 {
                    format!("{q} now")
                } else {
                    format!("{q} {} ago", format_secs(ago.round() as u64))
                }
            })
            .collect();
        let mut evidence = vec![format!(
            "wsrep_local_recv_queue: {}; average since the last read {}",
            shown.join(", "),
            db.status_f64(StatusVar::WsrepLocalRecvQueueAvg)
                .map_or("unknown".into(), |a| format!("{a:.1}"))
        )];
        evidence.push(format!(
            "wsrep_slave_threads {}, wsrep_cert_deps_distance {}",
            threads.map_or("unknown".into(), |t| t.to_string()),
            deps.map_or("unknown".into(), |d| format!("{d:.1}"))
        ));
        if now < max {
            return Ok(Verdict::pass(format!(
                "{now} write set(s) wait to be applied (limit {max})"
            ))
            .with_evidence_lines(evidence));
        }
        if reads.len() < 2 {
            return Err(Verdict::insufficient(format!(
                "{now} write sets wait to be applied at one read: whether the queue stays long needs an earlier read (the agent's next sample, or doctor --sample-window 10s)"
            ))
            .with_evidence_lines(evidence));
        }
        if reads.iter().any(|r| r.1 < max) {
            return Ok(Verdict::pass(format!(
                "{now} write sets wait to be applied now, but the queue was below {max} within the last {}: a burst",
                format_secs(span.round() as u64)
            ))
            .with_evidence_lines(evidence));
        }
        let more_appliers = match (threads, deps) {
            (Some(t), Some(d)) if d > t as f64 + 0.5 => Some((t, d)),
            _ => None,
        };
        let (cause, fix) = match more_appliers {
            Some((t, d)) => {
                let n = (d.round() as u64).clamp(t + 1, 64);
                (
                    format!("write sets could apply {d:.1} at a time on average, {t} applier(s) run"),
                    format!(
                        "Add appliers: `SET GLOBAL wsrep_slave_threads = {n};` (`wsrep_slave_threads = {n}` under `[mariadbd]`; no more than the node's CPUs allow). If the queue still stays long, the node itself is slow: its CPU (PD806 cpu-saturated; a CPU limit on it), storage (PD802), buffer pool (PD205)."
                    ),
                )
            }
            None => (
                "the appliers are as many as the write sets allow in parallel: the node itself is slow".to_owned(),
                "The node applies too slowly for its share of the cluster's writes: give it CPU (PD806 cpu-saturated; lift a CPU limit on it), faster storage (PD802), a buffer pool that holds the data (PD205), and keep long local transactions and backups off it.".to_owned(),
            ),
        };
        Ok(Verdict::fail(format!(
            "{now} write sets wait to be applied, and at least {max} at every read over the last {}: {cause}",
            format_secs(span.round() as u64)
        ))
        .with_evidence_lines(evidence)
        .with_remediation(fix))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn node(now: &str, then: &str, threads: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "ON")
            .var(Var::WsrepSlaveThreads, threads)
            .status(StatusVar::WsrepLocalRecvQueue, now)
            .status(StatusVar::WsrepLocalRecvQueueAvg, "80.5")
            .status(StatusVar::WsrepCertDepsDistance, "12.3")
            .window(60.0, &[(StatusVar::WsrepLocalRecvQueue, then)])
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        node("120", "90", "2").build()
    }

    #[test]
    fn a_queue_that_stays_long_fails_and_asks_for_appliers() {
        let v = verdict(&GaleraApplyQueue, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("120 write sets wait to be applied, and at least 16 at every read over the last 60 s"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("SET GLOBAL wsrep_slave_threads = 12;"));
        let v = verdict(&GaleraApplyQueue, &node("120", "90", "16").build());
        assert!(v.remediation.unwrap().contains("give it CPU"));
    }

    #[test]
    fn a_burst_a_short_queue_and_one_read() {
        assert_eq!(verdict(&GaleraApplyQueue, &node("120", "3", "2").build()).status, Status::Pass);
        assert_eq!(verdict(&GaleraApplyQueue, &node("3", "90", "2").build()).status, Status::Pass);
        let one = SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "ON")
            .status(StatusVar::WsrepLocalRecvQueue, "50")
            .build();
        assert_eq!(verdict(&GaleraApplyQueue, &one).status, Status::InsufficientData);
    }
}
