use crate::{Limits, Rule, Snapshot, StatusVar, Var, Verdict, declare_rule, display_text};

declare_rule! {
    /// ### What it does
    /// On a primary with semi-synchronous replication enabled (`rpl_semi_sync_master_enabled =
    /// ON`, built into MariaDB since 10.3.3), checks that it runs semi-synchronously now:
    /// `Rpl_semi_sync_master_status = ON`, and over the window no fall-back to asynchronous
    /// (`Rpl_semi_sync_master_no_times` unchanged). The evidence is the semi-sync replicas
    /// connected (`Rpl_semi_sync_master_clients`), the transactions committed with and
    /// without a replica's acknowledgement over the window (`_yes_tx`, `_no_tx`), and the
    /// timeout. Not applicable where semi-sync is not enabled on this server.
    ///
    /// ### Why is this bad?
    /// Semi-sync is enabled so that a commit returns only once a replica has the transaction:
    /// a failover then loses nothing. When no replica acknowledges within
    /// `rpl_semi_sync_master_timeout` (10 s by default) the primary silently switches to
    /// asynchronous replication and keeps committing — applications see no error, but every
    /// transaction from then on can be lost with the primary. It switches back only once a
    /// semi-sync replica has caught up. A primary that falls back and recovers over and over
    /// also pays the timeout on commits each time.
    ///
    /// ### Remediation
    /// - No semi-sync replica connected (`Rpl_semi_sync_master_clients = 0`): on each replica
    ///   meant to acknowledge, `SET GLOBAL rpl_semi_sync_slave_enabled = ON; STOP REPLICA
    ///   IO_THREAD; START REPLICA IO_THREAD;` (and `rpl_semi_sync_slave_enabled = ON` under
    ///   `[mariadbd]`); check that the replicas run (PD221).
    /// - Replicas connected but too slow to acknowledge: look at the network between them and
    ///   the replicas' storage (the acknowledgement follows the relay log's write); raise
    ///   `rpl_semi_sync_master_timeout` only if waiting is preferred to losing durability.
    /// - Semi-sync not wanted: `SET GLOBAL rpl_semi_sync_master_enabled = OFF` says so
    ///   explicitly rather than pretending.
    pub struct SemisyncFellBack {
        code: "PD224",
        name: "semisync-fell-back",
        severity: Critical,
        scope: Database,
        summary: "semi-sync replication is enabled but the primary runs asynchronously",
        fails_when: "`rpl_semi_sync_master_enabled = ON` and `Rpl_semi_sync_master_status = OFF` now, or `Rpl_semi_sync_master_no_times` grew over the window (it fell back)",
        severity_why: "critical: transactions are committed now without the replica copy semi-sync was enabled for, silently",
    }
}

fn replica_fix(clients: Option<u64>) -> String {
    let on_replicas = "on each replica meant to acknowledge: `SET GLOBAL rpl_semi_sync_slave_enabled = ON; STOP REPLICA IO_THREAD; START REPLICA IO_THREAD;` (and `rpl_semi_sync_slave_enabled = ON` under `[mariadbd]`), and check that the replicas run (PD221)";
    match clients {
        Some(0) => format!(
            "No semi-sync replica is connected (Rpl_semi_sync_master_clients = 0): {on_replicas}. The primary returns to semi-sync by itself once one has caught up."
        ),
        _ => format!(
            "Replicas are connected but did not acknowledge within rpl_semi_sync_master_timeout: check the network to them and their storage (they acknowledge once the relay log is written), and that semi-sync is on there ({on_replicas}). Raise the timeout only if commits waiting is preferred to losing durability."
        ),
    }
}

impl Rule for SemisyncFellBack {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        if !db.var_bool(Var::RplSemiSyncMasterEnabled)? {
            return Err(Verdict::not_applicable(
                "semi-synchronous replication is not enabled on this server (rpl_semi_sync_master_enabled = OFF)",
            ));
        }
        let status = db
            .status
            .get(StatusVar::RplSemiSyncMasterStatus.name())
            .ok_or_else(|| {
                Verdict::insufficient("status Rpl_semi_sync_master_status was not reported")
            })?;
        let on = status.eq_ignore_ascii_case("ON");
        let clients = db.status_u64(StatusVar::RplSemiSyncMasterClients).ok();
        let timeout = db
            .var_u64(Var::RplSemiSyncMasterTimeout)
            .map(|ms| format!("{ms} ms"))
            .unwrap_or_else(|_| "unknown".into());
        let mut evidence = vec![format!(
            "Rpl_semi_sync_master_status {}, semi-sync replicas connected (Rpl_semi_sync_master_clients) {}, rpl_semi_sync_master_timeout {timeout}",
            display_text(status, 8),
            clients.map_or("unknown".into(), |c| c.to_string())
        )];
        // The window: transactions acknowledged or not, and the fall-backs.
        let window = db.window_counts();
        let mut fell_back = 0;
        match &window {
            Ok(c) => {
                let get = |v| c.get(v).ok();
                if let (Some(yes), Some(no)) = (
                    get(StatusVar::RplSemiSyncMasterYesTx),
                    get(StatusVar::RplSemiSyncMasterNoTx),
                ) {
                    evidence.push(format!(
                        "over {}: {yes} transaction(s) acknowledged by a replica, {no} committed without",
                        c.describe()
                    ));
                }
                fell_back = get(StatusVar::RplSemiSyncMasterNoTimes).unwrap_or(0);
                if fell_back > 0 {
                    evidence.push(format!(
                        "fell back to asynchronous {fell_back} time(s) over the window (Rpl_semi_sync_master_no_times)"
                    ));
                }
            }
            Err(why) => {
                // evidence only: no window to judge the fall-backs over
                if let Ok(n) = db.status_u64(StatusVar::RplSemiSyncMasterNoTimes) {
                    evidence.push(format!(
                        "fell back {n} time(s) since start-up (no window: {why})"
                    ));
                }
            }
        }
        if !on {
            return Ok(Verdict::fail(format!(
                "semi-sync is enabled but the primary replicates asynchronously now: {} semi-sync replica(s) connected, commits return without a replica's copy",
                clients.map_or("unknown".into(), |c| c.to_string())
            ))
            .with_evidence_lines(evidence)
            .with_remediation(replica_fix(clients)));
        }
        if fell_back > 0 {
            return Ok(Verdict::fail(format!(
                "semi-sync fell back to asynchronous {fell_back} time(s) over the window (running semi-synchronously again now): commits then returned without a replica's copy"
            ))
            .with_evidence_lines(evidence)
            .with_remediation(replica_fix(clients)));
        }
        Ok(Verdict::pass(format!(
            "the primary replicates semi-synchronously ({} replica(s) acknowledging)",
            clients.map_or("unknown".into(), |c| c.to_string())
        ))
        .with_evidence_lines(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn primary(status: &str, clients: &str, no_times: (&str, &str)) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB-log")
            .var(Var::RplSemiSyncMasterEnabled, "ON")
            .var(Var::RplSemiSyncMasterTimeout, "10000")
            .status(StatusVar::RplSemiSyncMasterStatus, status)
            .status(StatusVar::RplSemiSyncMasterClients, clients)
            .status(StatusVar::RplSemiSyncMasterYesTx, "500")
            .status(StatusVar::RplSemiSyncMasterNoTx, "40")
            .status(StatusVar::RplSemiSyncMasterNoTimes, no_times.1)
            .window(
                60.0,
                &[
                    (StatusVar::RplSemiSyncMasterYesTx, "400"),
                    (StatusVar::RplSemiSyncMasterNoTx, "10"),
                    (StatusVar::RplSemiSyncMasterNoTimes, no_times.0),
                ],
            )
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        primary("OFF", "0", ("3", "3")).build()
    }

    #[test]
    fn asynchronous_now_fails_with_the_replica_side_fix() {
        let v = verdict(&SemisyncFellBack, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("asynchronously now: 0 semi-sync replica(s) connected"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("SET GLOBAL rpl_semi_sync_slave_enabled = ON"));
        assert!(v.evidence.iter().any(|e| e.contains("100 transaction(s) acknowledged by a replica, 30 committed without")), "{:?}", v.evidence);
    }

    #[test]
    fn a_fall_back_within_the_window_fails_and_a_steady_one_passes() {
        let v = verdict(&SemisyncFellBack, &primary("ON", "2", ("3", "4")).build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("fell back to asynchronous 1 time(s) over the window"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("did not acknowledge within"));
        let v = verdict(&SemisyncFellBack, &primary("ON", "2", ("4", "4")).build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let off = primary("ON", "2", ("4", "4")).var(Var::RplSemiSyncMasterEnabled, "OFF").build();
        assert_eq!(verdict(&SemisyncFellBack, &off).status, Status::NotApplicable);
    }
}
