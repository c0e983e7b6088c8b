use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::Estimate,
    declare_rule,
    os::pct,
};

use super::fix::set_global;

declare_rule! {
    /// ### What it does
    /// Measures how many new connections needed a new thread: `Threads_created` /
    /// `Connections`, judged over the shortest
    /// recent window whose 95% interval lies on one side of the limit (the agent looks back up
    /// to `[sample] max_status_window`; doctor alone falls back to the counters since start-up
    /// of a server up at least {min_uptime} s, and says so). Fails above {max_created_share} (MySQLTuner: a thread cache hit rate
    /// of 50% or less). With `thread_cache_size = 0` every connection creates a thread, so the
    /// share is 100%; MySQLTuner flags that setting on its own, powerdiag only while
    /// connections arrive. Not applicable under `thread_handling = pool-of-threads`, where
    /// the pool's threads serve the connections and the thread cache is unused.
    ///
    /// ### Why is this bad?
    /// Creating a thread (stack, thread-local state, scheduler entry) costs tens of
    /// microseconds of server CPU per connection and more under contention. An application
    /// that connects per request — PHP without persistent connections, scripts, health
    /// checks — pays it on every request when the server keeps no threads to reuse.
    ///
    /// ### Remediation
    /// Keep threads for reuse: `SET GLOBAL thread_cache_size = N;` (dynamic; persist
    /// `thread_cache_size = N` under `[mariadbd]`); MariaDB's own default is
    /// `min(256, max_connections)`, which the finding proposes. For very many short
    /// connections, a connection pool in the application or `thread_handling =
    /// pool-of-threads` (a restart) avoids the per-connection thread altogether.
    pub struct ThreadCacheIneffective {
        code: "PD210",
        name: "thread-cache-ineffective",
        severity: Info,
        scope: Database,
        summary: "new connections create new threads instead of reusing cached ones",
        fails_when: "> 50% of new connections create a thread over the window (MySQLTuner); not under the thread pool",
        severity_why: "info: a new thread per connection costs little per connection; the cache size is configuration advice",
        thresholds: [MAX_CREATED_SHARE, MIN_UPTIME],
    }
}

const MAX_CREATED_SHARE: Threshold = Threshold {
    key: "max_created_share",
    default: 0.50,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Threads_created / Connections (MySQLTuner: a cache hit rate of 50% or less)",
};
impl Rule for ThreadCacheIneffective {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        if let Ok(h) = db.var(Var::ThreadHandling)
            && h.eq_ignore_ascii_case("pool-of-threads")
        {
            return Err(Verdict::not_applicable(
                "thread_handling = pool-of-threads: the thread pool serves connections and the thread cache is unused",
            ));
        }
        let cache = db.var_u64(Var::ThreadCacheSize)?;
        let max = limits.get(&MAX_CREATED_SHARE);
        let measure = |c: &crate::Counts<'_>| -> Result<Estimate, Verdict> {
            Ok(Estimate::share(
                c.get(StatusVar::ThreadsCreated)?,
                c.get(StatusVar::Connections)?,
            ))
        };
        let c = s.judge(limits.count(&MIN_UPTIME), |c| {
            Ok(Evidence::of(
                &measure(c)?,
                max,
                "connections needed a new thread",
            ))
        })?;
        let connections = c.get(StatusVar::Connections)?;
        let created = c.get(StatusVar::ThreadsCreated)?.min(connections);
        let share = measure(&c)?.value;
        let evidence = format!(
            "{created} threads created for {connections} connections ({}), {}; thread_cache_size {cache}",
            pct(share),
            c.describe()
        );
        if share <= max {
            return Ok(c.stamp(Verdict::pass(format!(
                "{} of connections needed a new thread (limit {})",
                pct(share),
                pct(max)
            ))
            .with_evidence(evidence)));
        }
        let max_connections = db.var_u64(Var::MaxConnections).unwrap_or(151);
        let want = max_connections.min(256).max(cache.saturating_mul(2)).max(8);
        Ok(c.stamp(Verdict::fail(format!(
            "{} of new connections created a thread ({created} of {connections}); thread_cache_size is {cache}",
            pct(share)
        ))
        .with_evidence(evidence)
        .with_remediation(format!(
            "{}\n(MariaDB's default is min(256, max_connections).) For very many short connections use a connection pool, or thread_handling = pool-of-threads (a restart).",
            set_global(&[("thread_cache_size", want.to_string(), want.to_string())])
        ))))
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

    fn server(cache: &str, created_start: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .var(Var::ThreadCacheSize, cache)
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::Connections, "1500")
            .status(StatusVar::ThreadsCreated, "1400")
            .window(
                5.0,
                &[
                    (StatusVar::Connections, "1000"),
                    (StatusVar::ThreadsCreated, created_start),
                ],
            )
    }

    #[test]
    fn verdicts() {
        let v = verdict(&ThreadCacheIneffective, &server("0", "900").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.remediation
                .unwrap()
                .starts_with("SET GLOBAL thread_cache_size = 151;")
        );
        assert_eq!(
            verdict(&ThreadCacheIneffective, &server("151", "1398").build()).status,
            Status::Pass
        );
        let pool = server("0", "900")
            .var(Var::ThreadHandling, "pool-of-threads")
            .build();
        assert_eq!(
            verdict(&ThreadCacheIneffective, &pool).status,
            Status::NotApplicable
        );
        let quiet = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::Connections, "12")
            .status(StatusVar::ThreadsCreated, "12")
            .build();
        assert_eq!(
            verdict(&ThreadCacheIneffective, &quiet).status,
            Status::InsufficientData
        );
    }
}
