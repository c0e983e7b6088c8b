use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Verdict, declare_rule, display_text,
    format_secs,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Looks for the transaction that holds back InnoDB's purge: the oldest open transaction
    /// (`information_schema.INNODB_TRX`, with its session from `PROCESSLIST` when one is open)
    /// open longer than {max_transaction_age} s, or a history list
    /// (`Innodb_history_list_length`: committed changes whose old row versions purge cannot
    /// remove yet) longer than {max_history_length} (MySQLTuner's limit). Both are read as they
    /// are at the end of the sample window: a gauge, not a rate. Reading `INNODB_TRX` needs the
    /// `PROCESS` privilege; without it, a history list in bounds is `insufficient_data`.
    ///
    /// ### Why is this bad?
    /// InnoDB keeps every row version an open transaction might still read. Behind a
    /// transaction left open — a session idle after `BEGIN`, a client with autocommit off, a
    /// long report under REPEATABLE READ — the undo history grows with every write on the
    /// server, purge stops, every read of a changed row walks back through more versions, and
    /// the undo tablespace grows on disk. The whole server slows down while the one session
    /// responsible does nothing.
    ///
    /// ### Remediation
    /// End the transaction: `KILL <id>` for the session the finding names (its open work is
    /// rolled back), then fix the client — commit promptly, autocommit on, no user think time
    /// inside a transaction. MariaDB can end idle transactions itself:
    /// `SET GLOBAL idle_transaction_timeout = N;` (seconds; persist it under `[mariadbd]`).
    pub struct LongTransaction {
        code: "PD215",
        name: "long-transaction",
        severity: Warning,
        scope: Database,
        summary: "an old open transaction holds back InnoDB purge",
        fails_when: "a transaction open > 1 h (`INNODB_TRX`) or a history list > 100,000 (MySQLTuner) *(heuristic)*",
        severity_why: "warning: a stalled purge slows reads and grows the undo log as the present load writes",
        thresholds: [MAX_TRANSACTION_AGE, MAX_HISTORY_LENGTH],
    }
}

const MAX_TRANSACTION_AGE: Threshold = Threshold {
    key: "max_transaction_age",
    default: 3600.0,
    min: 1.0,
    max: 1e9,
    unit: Unit::Count,
    doc: "seconds the oldest transaction may be open (heuristic)",
};
const MAX_HISTORY_LENGTH: Threshold = Threshold {
    key: "max_history_length",
    default: 100_000.0,
    min: 1.0,
    max: 1e15,
    unit: Unit::Count,
    doc: "Innodb_history_list_length (MySQLTuner: 100,000)",
};

impl Rule for LongTransaction {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let max_age = limits.count(&MAX_TRANSACTION_AGE);
        let max_history = limits.count(&MAX_HISTORY_LENGTH);
        let mut evidence = Vec::new();
        let mut problems = Vec::new();
        let history = db.status_u64(StatusVar::InnodbHistoryListLength).ok();
        match history {
            Some(h) => {
                evidence.push(format!("Innodb_history_list_length {h}"));
                if h > max_history {
                    problems.push(format!(
                        "the history list is {h} long (limit {max_history}): purge is held back"
                    ));
                }
            }
            None => evidence.push("Innodb_history_list_length was not reported".into()),
        }
        let trx = match db.transactions() {
            Ok(t) => Some(t),
            Err(v) if problems.is_empty() => {
                let mut v = v;
                v.summary = format!(
                    "{} (GRANT PROCESS ON *.* to the monitoring user)",
                    v.summary
                );
                v.evidence = evidence;
                return Err(v);
            }
            Err(v) => {
                evidence.push(v.summary);
                None
            }
        };
        let mut kill = None;
        if let Some(t) = trx {
            match &t.oldest {
                Some(o) => {
                    let who = match (&o.user, &o.host) {
                        (Some(u), Some(h)) => {
                            format!(" by {}@{}", display_text(u, 64), display_text(h, 64))
                        }
                        _ => String::new(),
                    };
                    let doing = match (&o.command, o.command_seconds) {
                        (Some(c), Some(secs)) => {
                            format!(", {} for {}", display_text(c, 32), format_secs(secs))
                        }
                        _ => String::new(),
                    };
                    evidence.push(format!(
                        "{} open transactions; the oldest: connection {}{who}, {} for {}{doing}, {} rows modified, {} locked",
                        t.open,
                        o.thread_id,
                        display_text(&o.state, 32),
                        format_secs(o.age_seconds),
                        o.rows_modified,
                        o.rows_locked
                    ));
                    if o.age_seconds > max_age {
                        problems.push(format!(
                            "connection {}{who} has had a transaction open for {} (limit {})",
                            o.thread_id,
                            format_secs(o.age_seconds),
                            format_secs(max_age)
                        ));
                    }
                    kill = Some((o.thread_id, o.age_seconds));
                }
                None => evidence.push("no open InnoDB transaction".into()),
            }
        }
        if history.is_none() && trx.is_none() {
            return Err(Verdict::insufficient(
                "neither Innodb_history_list_length nor the open transactions could be read",
            ));
        }
        let mut v = if problems.is_empty() {
            Verdict::pass(format!(
                "no transaction open longer than {} and the history list is in bounds",
                format_secs(max_age)
            ))
        } else {
            let mut rem = String::new();
            if let Some((id, age)) = kill {
                rem.push_str(&format!(
                    "KILL {id};  -- ends connection {id} and rolls its transaction back (open for {})\n",
                    format_secs(age)
                ));
            }
            rem.push_str("Then fix the client (commit promptly, autocommit on, no waiting inside a transaction), and let the server end idle transactions:\n");
            rem.push_str(&set_global(&[(
                "idle_transaction_timeout",
                max_age.to_string(),
                max_age.to_string(),
            )]));
            Verdict::fail(problems.join("; ")).with_remediation(rem)
        };
        v.evidence = evidence;
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        OpenTransaction, Status, Transactions,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    fn trx(age: u64) -> Transactions {
        Transactions {
            open: 3,
            oldest: Some(OpenTransaction {
                thread_id: 42,
                age_seconds: age,
                state: "RUNNING".into(),
                rows_modified: 1,
                rows_locked: 1,
                user: Some("app".into()),
                host: Some("10.0.0.7:51234".into()),
                command: Some("Sleep".into()),
                command_seconds: Some(age),
            }),
        }
    }

    #[test]
    fn verdicts() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::InnodbHistoryListLength, "120")
            .transactions(trx(7200))
            .build();
        let v = verdict(&LongTransaction, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("connection 42 by app@10.0.0.7:51234"));
        assert!(v.remediation.unwrap().starts_with("KILL 42;"));
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::InnodbHistoryListLength, "120")
            .transactions(trx(5))
            .build();
        assert_eq!(verdict(&LongTransaction, &s).status, Status::Pass);
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::InnodbHistoryListLength, "2000000")
            .build();
        let v = verdict(&LongTransaction, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
    }

    #[test]
    fn without_process_a_short_history_is_insufficient() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::InnodbHistoryListLength, "12")
            .build();
        let v = verdict(&LongTransaction, &s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("GRANT PROCESS"), "{v:?}");
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .transactions(Transactions::default())
            .build();
        assert_eq!(verdict(&LongTransaction, &s).status, Status::Pass);
    }
}
