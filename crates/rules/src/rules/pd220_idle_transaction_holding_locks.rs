use crate::{LockScan, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, format_secs};

use super::blocking::{chain_lines, kill_line, locks};
use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Looks for the usual root of a lock queue: a session idle inside its transaction — no
    /// statement running (`PROCESSLIST` command `Sleep`, a transaction open in `INNODB_TRX`)
    /// — for more than {max_idle} s while other sessions wait for its row or metadata locks.
    /// PD215 judges a transaction by its age alone; this rule fails only when the idle
    /// transaction is measurably holding others up now, and names it.
    ///
    /// ### Why is this bad?
    /// An idle transaction does nothing but keep its locks: every row it wrote or read `FOR
    /// UPDATE`, and a metadata lock on every table it touched. Whoever needs them waits — a
    /// writer up to `innodb_lock_wait_timeout`, a DDL and everything queued behind it
    /// indefinitely — until the client commits, which it may never do (a crashed worker, a
    /// pooled connection returned with a transaction open, a debugger paused mid-request).
    ///
    /// ### Remediation
    /// `KILL <id>` for the session the finding names: its transaction is rolled back and the
    /// queue moves. Then fix the client (commit or roll back before returning a connection to
    /// the pool, autocommit on, no waiting inside a transaction) and let the server end idle
    /// transactions: `SET GLOBAL idle_transaction_timeout = 60;` (seconds; also under
    /// `[mariadbd]`), or `idle_write_transaction_timeout` for those that wrote.
    pub struct IdleTransactionHoldingLocks {
        code: "PD220",
        name: "idle-transaction-holding-locks",
        severity: Critical,
        scope: Database,
        summary: "an idle transaction holds locks other sessions wait for",
        fails_when: "a session idle in its transaction > 10 s blocks other sessions now *(heuristic)*",
        severity_why: "critical: sessions are queued now behind a session doing nothing",
        thresholds: [MAX_IDLE],
    }
}

const MAX_IDLE: Threshold = Threshold {
    key: "max_idle",
    default: 10.0,
    min: 0.0,
    max: 1e9,
    unit: Unit::Number,
    doc: "seconds a session may sit idle in a transaction others wait for (heuristic)",
};

impl Rule for IdleTransactionHoldingLocks {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let l = locks(s)?;
        let max_idle = limits.get(&MAX_IDLE);
        if let LockScan::Quiet { .. } = l.scan {
            return Ok(Verdict::pass(
                "no session waits for a lock, so no idle transaction holds anyone up",
            ));
        }
        let roots = l.roots();
        let idle: Vec<_> = roots
            .iter()
            .filter(|r| {
                l.session(r.id)
                    .is_some_and(|s| s.idle_in_transaction() && s.seconds > max_idle)
            })
            .cloned()
            .collect();
        let mut evidence = chain_lines(l, &roots);
        if roots.is_empty() {
            return Ok(Verdict::pass("no session is blocked by another").with_evidence_lines(evidence));
        }
        let Some(first) = idle.first() else {
            return Ok(Verdict::pass(format!(
                "the sessions others wait for are busy, not idle in a transaction for more than {}",
                format_secs(max_idle as u64)
            ))
            .with_evidence_lines(evidence));
        };
        let (sess, who) = l
            .session(first.id)
            .map(|s| {
                (
                    s.seconds,
                    format!(
                        " ({}@{})",
                        crate::display_text(&s.user, 48),
                        crate::display_text(&s.host, 64)
                    ),
                )
            })
            .unwrap_or_default();
        evidence.push(format!(
            "{} idle {} holding up {} sessions in all",
            idle.len(),
            if idle.len() == 1 { "transaction is" } else { "transactions are" },
            idle.iter().map(|r| r.queued.len()).sum::<usize>()
        ));
        if let Ok(t) = s.db().and_then(|db| db.var_u64(crate::Var::IdleTransactionTimeout)) {
            evidence.push(if t == 0 {
                "idle_transaction_timeout is 0: the server never ends an idle transaction".to_owned()
            } else {
                format!("idle_transaction_timeout {}", format_secs(t))
            });
        }
        let mut rem: Vec<String> = idle.iter().take(3).map(|r| kill_line(l, r)).collect();
        rem.push("Then fix the client (commit or roll back before returning a connection to its pool; no waiting inside a transaction), and let the server end idle transactions:".into());
        rem.push(set_global(&[("idle_transaction_timeout", "60".into(), "60".into())]));
        Ok(Verdict::fail(format!(
            "connection {}{who} has been idle in its transaction for {} while {} {} for its locks",
            first.id,
            format_secs(sess.round() as u64),
            first.queued.len(),
            if first.queued.len() == 1 { "session waits" } else { "sessions wait" }
        ))
        .with_evidence_lines(evidence)
        .with_remediation(rem.join("\n")))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        MetadataSource, Status,
        rules::examples,
        testing::verdict,
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        examples::row_lock_queue()
    }

    #[test]
    fn the_idle_blocker_is_named() {
        let v = verdict(&IdleTransactionHoldingLocks, &examples::row_lock_queue());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary.starts_with("connection 9 (app@10.0.0.9:50009) has been idle in its transaction for 40 s while 3 sessions wait"),
            "{v:?}"
        );
        assert!(v.remediation.unwrap().starts_with("KILL 9;"));
        // The server's own limit is shown beside it.
        let mut s = examples::row_lock_queue();
        if let Some(f) = s.mariadb.facts.as_mut() {
            f.variables
                .insert(crate::Var::IdleTransactionTimeout.name().into(), "0".into());
        }
        let v = verdict(&IdleTransactionHoldingLocks, &s);
        assert!(
            v.evidence.iter().any(|e| e.contains("never ends an idle transaction")),
            "{v:?}"
        );
    }

    #[test]
    fn a_busy_blocker_is_not_this_rule() {
        // The pile-up's holder runs a statement: PD219's finding, not an idle transaction.
        let v = verdict(
            &IdleTransactionHoldingLocks,
            &examples::metadata_pileup(MetadataSource::PerformanceSchema),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }
}
