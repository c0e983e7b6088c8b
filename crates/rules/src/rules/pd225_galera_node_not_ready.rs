use crate::{
    Limits, Rule, Snapshot, StatusVar, Var, Verdict, declare_rule, display_text,
    format_secs,
};

use super::galera;

declare_rule! {
    /// ### What it does
    /// On a Galera node (`wsrep_on = ON`), checks that it takes part in the cluster now: in the
    /// Primary component (`wsrep_cluster_status = Primary`), `Synced`
    /// (`wsrep_local_state_comment`; a node desynced on purpose with `wsrep_desync = ON` is
    /// reported, not failed), accepting queries (`wsrep_ready = ON`), and that the cluster has
    /// as many nodes as at its largest over the agent's recent windows (`wsrep_cluster_size`
    /// below its recent maximum: a node left or was lost). The mysqld mixin's
    /// `MySQLGaleraNotReady` and `MySQLGaleraOutOfSync`, plus the lost node.
    ///
    /// ### Why is this bad?
    /// A node outside the Primary component, or not ready, refuses every query (ERROR 1047
    /// "WSREP has not yet prepared node for application use"): the application's connections to
    /// it fail. A node that is joining, or a donor, serves stale data or none. A cluster that
    /// lost a node has less redundancy: with two nodes left, one more failure loses quorum and
    /// stops writes on the survivor.
    ///
    /// ### Remediation
    /// - Not Primary (a partition, lost quorum): check the network between the nodes; if the
    ///   other nodes are gone for good, bootstrap the most advanced node
    ///   (`SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'` on the one with the highest
    ///   `wsrep_last_committed`), never two.
    /// - Not synced or not ready: a joining node finishes its state transfer by itself (watch
    ///   the error log); a donor returns to Synced when the transfer ends.
    /// - A node lost: start it again (`systemctl start mariadb` on it); it rejoins by IST or
    ///   SST. If it was removed on purpose, the finding clears once the largest size over the
    ///   agent's `[sample] max_status_window` is the present one.
    pub struct GaleraNodeNotReady {
        code: "PD225",
        name: "galera-node-not-ready",
        severity: Critical,
        scope: Database,
        summary: "a Galera node is not in the Primary component, not synced, not ready, or its cluster lost a node",
        fails_when: "`wsrep_cluster_status` ≠ Primary, `wsrep_local_state_comment` ≠ Synced (without `wsrep_desync`), `wsrep_ready` OFF, or `wsrep_cluster_size` below its maximum over the recent windows (the mysqld mixin's MySQLGaleraNotReady/OutOfSync)",
        severity_why: "critical: a node not ready refuses queries now, and a lost node leaves the cluster one failure from losing quorum",
    }
}

/// How far back the cluster's largest size is looked for (the agent's windows, up to an hour).
const SIZE_HISTORY_SECONDS: f64 = 3600.0;

impl Rule for GaleraNodeNotReady {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        galera::node(db)?;
        let status = db.status_str(StatusVar::WsrepClusterStatus)?;
        let state = db.status_str(StatusVar::WsrepLocalStateComment)?;
        let ready = db.status_str(StatusVar::WsrepReady)?;
        let size = db.status_u64(StatusVar::WsrepClusterSize)?;
        let desync = db.var_bool(Var::WsrepDesync).unwrap_or(false);
        let sizes = galera::readings(db, StatusVar::WsrepClusterSize, SIZE_HISTORY_SECONDS);
        let (max_at, max) = sizes
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.total_cmp(&a.0)))
            .unwrap_or((0.0, size as f64));
        let looked = sizes.iter().map(|r| r.0).fold(0.0, f64::max);
        let mut evidence = vec![format!(
            "wsrep_cluster_status {}, wsrep_local_state_comment {}, wsrep_ready {}, wsrep_connected {}, wsrep_cluster_size {size}",
            display_text(status, 32),
            display_text(state, 32),
            display_text(ready, 8),
            display_text(db.status_str(StatusVar::WsrepConnected).unwrap_or("unknown"), 8)
        )];
        evidence.push(if looked > 0.0 {
            format!(
                "largest cluster size over the last {}: {} ({} ago)",
                format_secs(looked.round() as u64),
                max as u64,
                format_secs(max_at.round() as u64)
            )
        } else {
            "no earlier read of the cluster size (doctor --sample-window 0, or the agent's first sample)".to_owned()
        });
        if let Ok(addr) = db.var(Var::WsrepClusterAddress) {
            evidence.push(format!(
                "wsrep_cluster_address {}",
                display_text(addr, 200)
            ));
        }
        let mut problems: Vec<(String, &str)> = Vec::new();
        if !status.eq_ignore_ascii_case("Primary") {
            problems.push((
                format!("the node is in a {} component, not the Primary one: it refuses queries (a partition, or quorum lost)", display_text(status, 32)),
                "Check the network between the nodes (the error log names the peers it lost). If the other nodes are gone for good, bootstrap the most advanced one only: `SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'` on the node with the highest `wsrep_last_committed`.",
            ));
        }
        if !ready.eq_ignore_ascii_case("ON") {
            problems.push((
                "wsrep_ready is OFF: the node refuses queries (ERROR 1047)".to_owned(),
                "The node is not ready: let it finish joining (its error log shows the state transfer), or restart it if it is stuck.",
            ));
        }
        if !state.eq_ignore_ascii_case("Synced") {
            if desync {
                evidence.push(format!(
                    "{} with wsrep_desync = ON: desynced on purpose (a backup), not failed",
                    display_text(state, 32)
                ));
            } else {
                problems.push((
                    format!("the node is {}, not Synced", display_text(state, 32)),
                    "A joining node finishes its state transfer by itself (watch the error log); a donor returns to Synced when the transfer ends; keep applications off the node until then.",
                ));
            }
        }
        if (size as f64) < max {
            problems.push((
                format!(
                    "the cluster has {size} node(s), down from {} {} ago: a node left or was lost",
                    max as u64,
                    format_secs(max_at.round() as u64)
                ),
                "Start the lost node again (`systemctl start mariadb` there): it rejoins by IST or SST. If it was removed on purpose, the finding clears once the largest size over the agent's `[sample] max_status_window` is the present one.",
            ));
        }
        if problems.is_empty() {
            return Ok(Verdict::pass(format!(
                "the node is Primary, Synced and ready in a cluster of {size}"
            ))
            .with_evidence_lines(evidence));
        }
        let summary = problems
            .iter()
            .map(|p| p.0.clone())
            .collect::<Vec<_>>()
            .join("; ");
        let fix = problems
            .iter()
            .map(|p| p.1)
            .collect::<Vec<_>>()
            .join("\n\n");
        Ok(Verdict::fail(summary)
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

    pub(crate) fn node(status: &str, state: &str, size: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::WsrepOn, "ON")
            .status(StatusVar::WsrepClusterStatus, status)
            .status(StatusVar::WsrepLocalStateComment, state)
            .status(StatusVar::WsrepReady, "ON")
            .status(StatusVar::WsrepConnected, "ON")
            .status(StatusVar::WsrepClusterSize, size)
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        node("Primary", "Synced", "2")
            .window(60.0, &[(StatusVar::WsrepClusterSize, "3")])
            .build()
    }

    #[test]
    fn a_lost_node_fails_and_a_steady_cluster_passes() {
        let v = verdict(&GaleraNodeNotReady, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("the cluster has 2 node(s), down from 3 60 s ago"), "{}", v.summary);
        let s = node("Primary", "Synced", "3")
            .window(60.0, &[(StatusVar::WsrepClusterSize, "3")])
            .build();
        assert_eq!(verdict(&GaleraNodeNotReady, &s).status, Status::Pass);
    }

    #[test]
    fn not_primary_not_synced_and_desynced_on_purpose() {
        let v = verdict(&GaleraNodeNotReady, &node("non-Primary", "Initialized", "1").status(StatusVar::WsrepReady, "OFF").build());
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("non-Primary component") && v.summary.contains("wsrep_ready is OFF"), "{}", v.summary);
        let s = node("Primary", "Donor/Desynced", "3").var(Var::WsrepDesync, "ON").build();
        assert_eq!(verdict(&GaleraNodeNotReady, &s).status, Status::Pass);
        let s = node("Primary", "Donor/Desynced", "3").build();
        assert_eq!(verdict(&GaleraNodeNotReady, &s).status, Status::Fail);
        let off = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").var(Var::WsrepOn, "OFF").build();
        assert_eq!(verdict(&GaleraNodeNotReady, &off).status, Status::NotApplicable);
    }
}
