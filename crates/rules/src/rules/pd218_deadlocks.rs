use crate::{
    Deadlock, Evidence, Gathered, Limits, Rule, Snapshot, StatusVar, Threshold, Unit,
    Var, Verdict, counters::MIN_UPTIME, declare_rule, display_text, stats::Estimate,
};

declare_rule! {
    /// ### What it does
    /// Counts InnoDB deadlocks (`Innodb_deadlocks`) over the shortest recent window that
    /// decides, and fails when they come faster than {max_deadlocks_per_minute} per minute:
    /// the rate's 95% interval above the limit and at least 10 deadlocks. No deadlock for a
    /// minute decides a pass (the interval's top is then under the limit). The evidence is the
    /// last deadlock InnoDB recorded (`SHOW ENGINE INNODB STATUS`, read only when the counter
    /// moved): both transactions' statements (literals masked), the lock each held and the one
    /// it waited for, and which one InnoDB rolled back. MySQLTuner counts deadlocks since
    /// start-up; the mysqld mixin and PMM graph the counter without a limit. The agent looks
    /// back at most `[sample] max_status_window`; doctor alone falls back to the counters
    /// since start-up of a server up at least {min_uptime} s, and says so.
    ///
    /// ### Why is this bad?
    /// Each deadlock rolls back a whole transaction (error 1213) which the application must
    /// retry; a storm of them — two code paths locking the same rows in opposite orders under
    /// load — multiplies the work, holds locks longer and fills the error log. InnoDB keeps
    /// only the latest deadlock unless `innodb_print_all_deadlocks` is on.
    ///
    /// ### Remediation
    /// - Lock rows in one consistent order in every code path (sort the ids you update).
    /// - Keep transactions small: fewer rows locked for less time.
    /// - Index the `WHERE` of the statements involved: a scan locks every row it passes
    ///   (and the gaps under REPEATABLE READ).
    /// - Retry on error 1213 in the application (it is expected, not fatal).
    /// - Keep every deadlock for analysis: `SET GLOBAL innodb_print_all_deadlocks = ON;` (and
    ///   `innodb_print_all_deadlocks = ON` under `[mariadbd]`) writes each to the error log.
    pub struct Deadlocks {
        code: "PD218",
        name: "deadlocks",
        severity: Warning,
        scope: Database,
        summary: "transactions deadlock and are rolled back",
        fails_when: "more than 5 deadlocks per minute over a window (`Innodb_deadlocks`, 95% interval, ≥ 10 deadlocks) *(heuristic)*",
        severity_why: "warning: every deadlock is a rolled-back transaction the application retries, but sessions are not queued by it",
        thresholds: [MAX_DEADLOCKS_PER_MINUTE, MIN_UPTIME],
    }
}

const MAX_DEADLOCKS_PER_MINUTE: Threshold = Threshold {
    key: "max_deadlocks_per_minute",
    default: 5.0,
    min: 0.0,
    max: 1e9,
    unit: Unit::Number,
    doc: "deadlocks per minute over the window (heuristic: above what one minute without any can rule out)",
};

/// The last deadlock as evidence lines.
fn describe(d: &Deadlock) -> Vec<String> {
    let mut out = vec![format!(
        "the last deadlock{}{}:",
        d.at.as_deref()
            .map(|a| format!(" ({})", display_text(a, 40)))
            .unwrap_or_default(),
        match d.rolled_back {
            Some(n) => format!(", InnoDB rolled back transaction ({n})"),
            None => String::new(),
        }
    )];
    out.extend(d.lines().into_iter().map(|l| format!("  {l}")));
    out
}

impl Rule for Deadlocks {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let limit = limits.get(&MAX_DEADLOCKS_PER_MINUTE) / 60.0;
        let c = s
            .judge(limits.count(&MIN_UPTIME), |c| {
                let n = c.get(StatusVar::InnodbDeadlocks)?;
                Ok(Evidence::of(
                    &Estimate::rate(n, c.seconds()),
                    limit,
                    "deadlocks",
                ))
            })
            .map_err(|mut v| {
                // Undecided, but the last deadlock is still worth showing.
                if let Gathered::Available(Some(d)) = &db.last_deadlock {
                    v.evidence.extend(describe(d));
                }
                v
            })?;
        let n = c.get(StatusVar::InnodbDeadlocks)?;
        let per_minute = n as f64 * 60.0 / c.seconds().max(1e-3);
        let mut evidence = vec![format!("{n} deadlocks, {}", c.describe())];
        match &db.last_deadlock {
            Gathered::Available(Some(d)) => evidence.extend(describe(d)),
            Gathered::Available(None) => evidence.push("the server has detected no deadlock since start-up".into()),
            Gathered::Unavailable(why) => evidence.push(format!("the last deadlock is not known: {why}")),
        }
        let all = db.var(Var::InnodbPrintAllDeadlocks).ok().and_then(crate::parse_bool);
        if all == Some(false) && n > 0 {
            evidence.push("innodb_print_all_deadlocks is OFF: only the latest deadlock is kept; SET GLOBAL innodb_print_all_deadlocks = ON writes each to the error log".into());
        }
        let above = Estimate::rate(n, c.seconds()).side(limit) == crate::stats::Side::Above;
        Ok(c.stamp(if above {
            Verdict::fail(format!(
                "{n} deadlocks, {per_minute:.1} per minute (limit {})",
                limits.get(&MAX_DEADLOCKS_PER_MINUTE)
            ))
        } else {
            Verdict::pass(format!("{per_minute:.1} deadlocks per minute"))
        }
        .with_evidence_lines(evidence)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        rules::examples,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        examples::deadlock_storm()
    }

    #[test]
    fn a_storm_fails_with_both_statements() {
        let v = verdict(&Deadlocks, &examples::deadlock_storm());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("40 deadlocks, 40.0 per minute"), "{v:?}");
        let e = v.evidence.join("\n");
        assert!(e.contains("(1) connection 21"), "{e}");
        assert!(e.contains("balance` - ?"), "{e}");
        assert!(e.contains("rolled back transaction (2)"), "{e}");
    }

    fn window(start: &str, end: &str, seconds: f64) -> crate::Snapshot {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600000")
            .status(StatusVar::InnodbDeadlocks, end)
            .window(seconds, &[(StatusVar::InnodbDeadlocks, start)])
            .build()
    }

    #[test]
    fn a_quiet_minute_passes_and_a_few_seconds_cannot_tell() {
        // None in a minute: at most 3.7 per minute at 95%.
        assert_eq!(verdict(&Deadlocks, &window("7", "7", 60.0)).status, Status::Pass);
        // None in 10 s cannot rule out 5 per minute; the server's since start-up history
        // (7 in a week) decides for doctor, as a warning at most.
        let v = verdict(&Deadlocks, &window("7", "7", 10.0));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.evidence[0].contains("since start-up"), "{v:?}");
        // A few deadlocks are not a storm.
        assert_eq!(verdict(&Deadlocks, &window("7", "12", 60.0)).status, Status::Pass);
    }
}
