use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Verdict, declare_rule, os::pct,
};

use super::galera;

declare_rule! {
    /// ### What it does
    /// On a Galera node, measures the share of the window during which flow control paused
    /// replication: the growth of `wsrep_flow_control_paused_ns` over the window's length (the
    /// agent: since its last sample; doctor: over its sample window). Fails above
    /// {max_paused_share} *(heuristic: Galera's documentation calls any value above 0 a sign
    /// that a node cannot keep up)*. It says whether this node is the one asking for the
    /// pauses: `wsrep_flow_control_sent` grew here (this node's receive queue passed
    /// `gcs.fc_limit`), or only `wsrep_flow_control_recv` did (another node sends them: the
    /// one where powerdiag shows `sent` growing, and PD227).
    ///
    /// ### Why is this bad?
    /// While paused, no node of the cluster commits a write: flow control throttles the whole
    /// cluster to the speed of its slowest node. A share of 30% paused is 30% of the time with
    /// every write waiting, whichever node the application writes to.
    ///
    /// ### Remediation
    /// Find the node that sends flow control (the finding says whether it is this one) and make
    /// it keep up: more appliers when `wsrep_cert_deps_distance` allows (`SET GLOBAL
    /// wsrep_slave_threads = N`), its CPU and storage (PD806 cpu-saturated, PD802
    /// storage-saturated), no long local transaction or backup on it. Raising `gcs.fc_limit`
    /// only lets the slow node fall further behind.
    pub struct GaleraFlowControl {
        code: "PD226",
        name: "galera-flow-control",
        severity: Warning,
        scope: Database,
        summary: "flow control pauses the Galera cluster's writes",
        fails_when: "flow control paused replication for > 10% of the window (`wsrep_flow_control_paused_ns`)",
        severity_why: "warning: the pauses are measured over the window, but what they cost depends on the write load",
        thresholds: [MAX_PAUSED_SHARE],
    }
}

const MAX_PAUSED_SHARE: Threshold = Threshold {
    key: "max_paused_share",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of the window paused by flow control (heuristic; Galera's documentation: ideally 0)",
};

impl Rule for GaleraFlowControl {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        galera::node(db)?;
        let c = db.window_counts().map_err(|why| {
            Verdict::insufficient(format!(
                "the time paused by flow control needs a window of two status reads: {why}"
            ))
        })?;
        let paused_ns = c.get(StatusVar::WsrepFlowControlPausedNs)?;
        let sent = c.get(StatusVar::WsrepFlowControlSent)?;
        let recv = c.get(StatusVar::WsrepFlowControlRecv)?;
        let share = (paused_ns as f64 / 1e9 / c.seconds()).min(1.0);
        let max = limits.get(&MAX_PAUSED_SHARE);
        let queue = db.status_u64(StatusVar::WsrepLocalRecvQueue).ok();
        let who = if sent > 0 {
            format!(
                "this node sent {sent} flow-control message(s): it is the one that cannot keep up (its receive queue: {})",
                queue.map_or("unknown".into(), |q| q.to_string())
            )
        } else if recv > 0 {
            format!(
                "this node sent none and received {recv}: another node sends them (the one whose wsrep_flow_control_sent grows; powerdiag there shows it, with PD227)"
            )
        } else {
            "no flow-control message over the window".to_owned()
        };
        let evidence = vec![
            format!(
                "{}: paused {:.1} s (wsrep_flow_control_paused_ns), flow-control messages sent {sent}, received {recv}",
                c.describe(),
                paused_ns as f64 / 1e9
            ),
            who.clone(),
        ];
        if share <= max {
            return Ok(c.stamp(
                Verdict::pass(format!(
                    "flow control paused replication {} of the window (limit {})",
                    pct(share),
                    pct(max)
                ))
                .with_evidence_lines(evidence),
            ));
        }
        let fix = if sent > 0 {
            "This node is the slow one: give its appliers room — `SET GLOBAL wsrep_slave_threads = N` up to `wsrep_cert_deps_distance` (PD227 says), its CPU and storage (PD806, PD802), and no long local transaction or backup on it."
        } else {
            "Another node is the slow one: run `powerdiag doctor` on each node and fix the one where flow-control messages are sent (PD226 names itself there) and its receive queue stays long (PD227)."
        };
        Ok(c.stamp(
            Verdict::fail(format!(
                "flow control paused the cluster's writes {} of the window (limit {}): {who}",
                pct(share),
                pct(max)
            ))
            .with_evidence_lines(evidence)
            .with_remediation(fix),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status, Var,
        testing::{SnapshotBuilder, verdict},
    };

    fn node(paused_ns: &str, sent: &str) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "ON")
            .status(StatusVar::WsrepFlowControlPausedNs, paused_ns)
            .status(StatusVar::WsrepFlowControlSent, sent)
            .status(StatusVar::WsrepFlowControlRecv, "40")
            .status(StatusVar::WsrepLocalRecvQueue, "120")
            .window(
                10.0,
                &[
                    (StatusVar::WsrepFlowControlPausedNs, "0"),
                    (StatusVar::WsrepFlowControlSent, "0"),
                    (StatusVar::WsrepFlowControlRecv, "0"),
                ],
            )
            .build()
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        node("4000000000", "0")
    }

    #[test]
    fn paused_by_another_node_or_by_this_one() {
        let v = verdict(&GaleraFlowControl, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("40.0% of the window") && v.summary.contains("another node sends them"), "{}", v.summary);
        let v = verdict(&GaleraFlowControl, &node("4000000000", "12"));
        assert!(v.summary.contains("this node sent 12 flow-control message(s)"), "{}", v.summary);
        assert_eq!(verdict(&GaleraFlowControl, &node("500000000", "0")).status, Status::Pass);
    }
}
