use crate::{
    Digest, DigestHistory, IntervalPoint, Limits, Rule, Snapshot, StatementPeriod, Statements,
    Threshold, Unit, Verdict, declare_rule, format_us,
};

declare_rule! {
    /// ### What it does
    /// Judges each busy statement against its own recent past, from the agent's intervals
    /// (doctor reads the digest table once and has no past: `insufficient_data`, naming the
    /// agent). The agent keeps the last 48 intervals of the busiest digests in memory. An
    /// interval *counts* when the digest ran at least {min_calls} times in it. The last interval
    /// is regressed when its time per call is at least {min_slowdown}× the median of the earlier
    /// counting intervals (at most the last {baseline_intervals}, at least {min_intervals} of them) and
    /// above the slowest of them — or its rows examined per call are at least {min_slowdown}× their
    /// median, at least {min_examined} rows more per call, and above the most of them. A run of
    /// regressed intervals is judged against the intervals before it, so the regression stays
    /// visible while it lasts and the finding says when it started; it clears with the first
    /// interval back to normal. A load spike that raises calls but not time per call passes.
    /// With the agent's opt-in `[statements] samples` the evidence shows a recent concrete
    /// execution of each regressed statement (literals replaced by `?` unless `[statements]
    /// redact = false`), and with `[statements] explain` its plan and the index it lacks.
    /// No peer does this without a human: PMM's Query Analytics and pt-query-digest show a
    /// statement's time over a chosen period and leave the comparison to the reader.
    ///
    /// ### Why is this bad?
    /// A statement that became several times slower per call after a deploy, an index change
    /// or a new plan is usually the cause of the whole application's slowdown that follows,
    /// and the cheapest to fix: the change is recent and known. Its total time may still be
    /// small enough that no total-time ranking shows it.
    ///
    /// ### Remediation
    /// Compare the plan now with the one it had. Rows examined per call that grew with the
    /// time per call mean the plan reads more rows: an index dropped or made invisible
    /// (`SHOW INDEX FROM` the tables named), or statistics that changed the plan (`ANALYZE
    /// TABLE`, then `EXPLAIN` again). The same rows at a higher time per call mean each row
    /// costs more: lock waits (PD217), a buffer pool that no longer holds the table (PD205),
    /// or a saturated disk or CPU (PD802, PD806). A deploy that changed the statement shows in
    /// the application's change log at the time the finding gives.
    pub struct StatementRegressed {
        code: "PD709",
        name: "statement-regressed",
        severity: Warning,
        scope: Database,
        summary: "a statement became much slower per call than in its own recent past",
        fails_when: "in the agent's last interval, a statement that ran ≥ 20 times took ≥ 3× its median time per call of its earlier intervals and more than any of them (or examined ≥ 3× its median rows per call, ≥ 100 more)",
        severity_why: "warning: the statement is measured slower now, which the application waits for; it is not yet an outage",
        thresholds: [MIN_SLOWDOWN, MIN_CALLS, MIN_INTERVALS, BASELINE_INTERVALS, MIN_EXAMINED],
    }
}

const MIN_SLOWDOWN: Threshold = Threshold {
    key: "min_slowdown",
    default: 3.0,
    min: 1.1,
    max: 1e6,
    unit: Unit::Number,
    doc: "time (or rows examined) per call over the statement's own median",
};
const MIN_CALLS: Threshold = Threshold {
    key: "min_calls",
    default: 20.0,
    min: 1.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "fewest calls for an interval's mean to count",
};
const MIN_INTERVALS: Threshold = Threshold {
    key: "min_intervals",
    default: 3.0,
    min: 1.0,
    max: 47.0,
    unit: Unit::Count,
    doc: "fewest earlier counting intervals the median needs",
};
const BASELINE_INTERVALS: Threshold = Threshold {
    key: "baseline_intervals",
    default: 24.0,
    min: 1.0,
    max: 47.0,
    unit: Unit::Count,
    doc: "most earlier counting intervals in the median (the newest)",
};
const MIN_EXAMINED: Threshold = Threshold {
    key: "min_examined",
    default: 100.0,
    min: 0.0,
    max: 1e12,
    unit: Unit::Number,
    doc: "fewest more rows examined per call for rows alone to count as a regression",
};

impl StatementRegressed {
    /// The time-per-call factor `diff` uses for its per-statement regressions (this rule's
    /// default).
    pub const DEFAULT_SLOWDOWN: f64 = MIN_SLOWDOWN.default;
    /// The fewest calls on each side for `diff` to compare a statement.
    pub const DEFAULT_MIN_CALLS: f64 = MIN_CALLS.default;

    /// The (schema, digest) of the statements this rule fails on, judged as [`Rule::check`]
    /// judges them: the agent takes their concrete statements (`[statements] samples`) before
    /// the rule runs, so its evidence can print one.
    pub fn regressed(st: &Statements, limits: &Limits) -> Vec<(Option<String>, String)> {
        if st.period != StatementPeriod::Interval {
            return Vec::new();
        }
        let p = Params::new(limits);
        judge_all(st, &p)
            .into_iter()
            .filter(|j| !j.run.is_empty())
            .map(|j| (j.digest.schema.clone(), j.digest.digest.clone()))
            .collect()
    }
}

impl Params {
    fn new(limits: &Limits) -> Params {
        Params {
            slowdown: limits.get(&MIN_SLOWDOWN),
            min_calls: limits.count(&MIN_CALLS),
            min_intervals: limits.count(&MIN_INTERVALS) as usize,
            baseline: limits.count(&BASELINE_INTERVALS) as usize,
            min_examined: limits.get(&MIN_EXAMINED),
        }
    }
}

/// Every busy statement of the last interval with a past long enough to judge, in the
/// listing's order (busiest first).
fn judge_all<'a>(st: &'a Statements, p: &Params) -> Vec<Judged<'a>> {
    let Some(now) = st.history.iter().filter_map(|h| h.points.last()).map(|x| x.at).max() else {
        return Vec::new();
    };
    let history: std::collections::HashMap<_, _> = st
        .history
        .iter()
        .map(|h| ((&h.schema, h.digest.as_str()), h))
        .collect();
    st.judged()
        .filter(|d| d.calls >= p.min_calls)
        .filter_map(|d| judge(d, history.get(&(&d.schema, d.digest.as_str()))?, now, p))
        .collect()
}

/// The limits, read once.
struct Params {
    slowdown: f64,
    min_calls: u64,
    min_intervals: usize,
    baseline: usize,
    min_examined: f64,
}

/// A statement's past as one number per interval, with the spread.
struct Baseline {
    intervals: usize,
    time_median: f64,
    time_max: f64,
    examined_median: f64,
    examined_max: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn baseline(points: &[IntervalPoint]) -> Baseline {
    let t: Vec<f64> = points.iter().map(IntervalPoint::time_per_call_us).collect();
    let e: Vec<f64> = points.iter().map(IntervalPoint::examined_per_call).collect();
    Baseline {
        intervals: points.len(),
        time_max: t.iter().copied().fold(0.0, f64::max),
        examined_max: e.iter().copied().fold(0.0, f64::max),
        time_median: median(t),
        examined_median: median(e),
    }
}

impl Params {
    fn slower(&self, p: &IntervalPoint, b: &Baseline) -> bool {
        let t = p.time_per_call_us();
        let e = p.examined_per_call();
        (t >= self.slowdown * b.time_median && t > b.time_max)
            || (e >= self.slowdown * b.examined_median
                && e - b.examined_median >= self.min_examined
                && e > b.examined_max)
    }
}

/// One statement judged: its regressed run (empty when it is not regressed) and the baseline
/// before it.
struct Judged<'a> {
    digest: &'a Digest,
    run: Vec<IntervalPoint>,
    /// The interval before the run's first (its start), when known.
    before_run: Option<IntervalPoint>,
    baseline: Baseline,
}

/// Judges one digest whose last counting point is the snapshot's interval: `None` when its
/// past is too short.
fn judge<'a>(d: &'a Digest, h: &DigestHistory, now: i64, p: &Params) -> Option<Judged<'a>> {
    let counting: Vec<IntervalPoint> = h
        .points
        .iter()
        .copied()
        .filter(|x| x.calls >= p.min_calls)
        .collect();
    if counting.last()?.at != now || counting.len() <= p.min_intervals {
        return None;
    }
    let n = counting.len();
    let base_of = |k: usize| {
        let before = &counting[..n - k];
        baseline(&before[before.len().saturating_sub(p.baseline)..])
    };
    // The longest run of regressed intervals ending now, each judged against what came
    // before the run (so a run's own points never raise its baseline).
    let k = (1..=n - p.min_intervals)
        .rev()
        .find(|&k| {
            let b = base_of(k);
            counting[n - k..].iter().all(|x| p.slower(x, &b))
        })
        .unwrap_or(0);
    let before_run = h
        .points
        .iter()
        .rev()
        .find(|x| x.at < counting[n - k.max(1)].at)
        .copied();
    Some(Judged {
        digest: d,
        run: counting[n - k..].to_vec(),
        before_run,
        baseline: base_of(k.max(1)),
    })
}

fn utc(at: i64) -> String {
    crate::value::format_unix_utc(at)
}

fn evidence(j: &Judged) -> String {
    let now = j.run.last().expect("a regressed run has a point");
    let first = j.run[0];
    let start = match j.before_run {
        Some(b) => format!("the interval {}–{}", utc(b.at), utc(first.at)),
        None => format!("the interval that ended {}", utc(first.at)),
    };
    format!(
        "digest {} in schema {}: {} — {} per call now against a median of {} over its {} earlier interval(s) (slowest {}), {:.1}×; rows examined per call {:.1} against {:.1}; {} calls in the last {}; slower since {start} ({} interval(s))",
        crate::short_digest(&j.digest.digest),
        j.digest.schema_name(),
        j.digest.short_text(160),
        format_us(now.time_per_call_us()),
        format_us(j.baseline.time_median),
        j.baseline.intervals,
        format_us(j.baseline.time_max),
        now.time_per_call_us() / j.baseline.time_median.max(1e-3),
        now.examined_per_call(),
        j.baseline.examined_median,
        now.calls,
        crate::format_secs(now.seconds.round() as u64),
        j.run.len(),
    )
}

impl Rule for StatementRegressed {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let st = s.db()?.busy_statements()?;
        if st.period != StatementPeriod::Interval {
            return Err(Verdict::insufficient(
                "a statement's own past is kept by the agent, which reads the digest table every `[statements] interval`; doctor reads it once (totals since the last reset), which has no past to compare with: run the agent".to_owned(),
            ));
        }
        let p = Params::new(limits);
        if st.history.iter().all(|h| h.points.is_empty()) {
            return Err(Verdict::insufficient(
                "the agent has no interval history of the statements yet (it keeps it in memory: a restart starts it again)".to_owned(),
            ));
        }
        let judged = judge_all(st, &p);
        if judged.is_empty() {
            let longest = st
                .history
                .iter()
                .map(|h| h.points.iter().filter(|x| x.calls >= p.min_calls).count())
                .max()
                .unwrap_or(0);
            return Err(Verdict::insufficient(format!(
                "no statement with ≥ {} calls in the last interval has {} earlier interval(s) of ≥ {} calls to compare with yet (the most any has: {}); the agent keeps them in memory, so a restart starts again",
                p.min_calls,
                p.min_intervals,
                p.min_calls,
                longest.saturating_sub(1)
            )));
        }
        let (regressed, steady): (Vec<&Judged>, Vec<&Judged>) =
            judged.iter().partition(|j| !j.run.is_empty());
        if regressed.is_empty() {
            return Ok(Verdict::pass(format!(
                "{} busy statement(s) run no slower per call than in their own recent past (at most {}× its median)",
                steady.len(),
                p.slowdown
            ))
            .with_evidence(format!("period: {}", st.period_text())));
        }
        let top = regressed[0];
        let last = top.run.last().expect("a regressed run has a point");
        let mut v = Verdict::fail(format!(
            "{} statement(s) became slower per call than in their own past: {} takes {} per call, {:.1}× its median of {}",
            regressed.len(),
            top.digest.short_text(100),
            format_us(last.time_per_call_us()),
            last.time_per_call_us() / top.baseline.time_median.max(1e-3),
            format_us(top.baseline.time_median)
        ));
        let mut tables = Vec::new();
        for j in &regressed {
            v = v.with_evidence(evidence(j));
            for line in j.digest.sample_lines() {
                v = v.with_evidence(line);
            }
            for (schema, table) in j.digest.tables() {
                let t = format!("`{schema}`.`{table}`");
                if !tables.contains(&t) {
                    tables.push(t);
                }
            }
        }
        v = v.with_evidence(format!("period: {}", st.period_text()));
        let rows_grew = regressed.iter().any(|j| {
            let x = j.run.last().expect("a regressed run has a point");
            x.examined_per_call() >= p.slowdown * j.baseline.examined_median.max(1.0)
        });
        let mut rem = if rows_grew {
            "the plan reads more rows than before: an index dropped or made invisible, or statistics that changed the plan. Check the tables' indexes and run EXPLAIN on the statement:".to_owned()
        } else {
            "each call reads as many rows as before but takes longer: look for lock waits (PD217), a buffer pool that no longer holds the table (PD205), a saturated disk or CPU (PD802, PD806). The tables:".to_owned()
        };
        for t in &tables {
            rem.push_str(&format!("\n    SHOW INDEX FROM {t};"));
        }
        if rows_grew {
            for t in &tables {
                rem.push_str(&format!("\n    ANALYZE TABLE {t};"));
            }
            // With the agent's `[statements] explain`: the index the plan now reads without.
            for create in regressed.iter().filter_map(|j| j.digest.plan_index()) {
                rem.push_str(&format!(
                    "\nthe index its plan now lacks (EXPLAIN of a recent execution: the condition's columns on the table it reads whole, then its sort):\n    {create}"
                ));
            }
        }
        rem.push_str("\nand compare with what changed when it started (a deploy, a migration, an index change).");
        Ok(v.with_remediation(rem))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{SnapshotBuilder, digest, verdict};
    use crate::{Status, StatementPeriod};

    const TEXT: &str = "SELECT `id` , `total` FROM `orders` WHERE `customer_id` = ?";
    const T0: i64 = 1_795_809_600;

    /// A snapshot of the agent whose last interval is `last` and whose digest's past is
    /// `points` (time per call µs, rows examined per call, calls), one every 10 s.
    fn agent(points: &[(u64, u64, u64)]) -> Snapshot {
        let pts: Vec<IntervalPoint> = points
            .iter()
            .enumerate()
            .map(|(i, &(t, e, calls))| IntervalPoint {
                at: T0 + 10 * i as i64,
                seconds: 10.0,
                calls,
                time_us: t * calls,
                rows_examined: e * calls,
            })
            .collect();
        let &(t, e, calls) = points.last().unwrap();
        let d = digest(TEXT, calls, t * calls, e, 1);
        let mut s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![d.clone()], 0)
            .build();
        let st = match &mut s.mariadb.facts.as_mut().unwrap().statements {
            crate::Gathered::Available(st) => st,
            _ => unreachable!(),
        };
        st.period = StatementPeriod::Interval;
        st.interval_seconds = Some(10.0);
        st.history = vec![DigestHistory {
            schema: d.schema.clone(),
            digest: d.digest.clone(),
            points: pts,
        }];
        s
    }

    pub(crate) fn failing_example() -> Snapshot {
        agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 50), (2_000, 20_000, 50)])
    }

    #[test]
    fn an_index_dropped_fails_naming_the_moment_and_the_fix_clears_it() {
        let v = verdict(&StatementRegressed, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary.starts_with("1 statement(s) became slower per call than in their own past: SELECT `id`")
                && v.summary.contains("takes 2.0 ms per call, 19.5× its median of 102 µs"),
            "{v:?}"
        );
        assert!(
            v.evidence[0].contains("rows examined per call 20000.0 against 1.0")
                && v.evidence[0].contains("slower since the interval 2026-11-27T20:00:30Z–2026-11-27T20:00:40Z (1 interval(s))"),
            "{v:?}"
        );
        assert!(v.remediation.clone().unwrap().contains("SHOW INDEX FROM `app`.`orders`;"));
        // Still slow two intervals later: judged against the intervals before the run.
        let v = verdict(
            &StatementRegressed,
            &agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 50), (2_000, 20_000, 50), (2_100, 20_000, 50), (1_900, 20_000, 50)]),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[0].contains("(3 interval(s))") && v.evidence[0].contains("over its 4 earlier"), "{v:?}");
        // Fixed: the next interval is back to normal.
        let v = verdict(
            &StatementRegressed,
            &agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 50), (2_000, 20_000, 50), (101, 1, 50)]),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn load_noise_and_a_short_past_do_not_fail() {
        // Five times the calls at the same time per call.
        let v = verdict(
            &StatementRegressed,
            &agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 250)]),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // A noisy statement whose past already reached 4× its median: 3.5× is within it.
        let v = verdict(
            &StatementRegressed,
            &agent(&[(100, 1, 50), (400, 1, 50), (90, 1, 50), (110, 1, 50), (350, 1, 50)]),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // Too few calls in the last interval to count.
        let v = verdict(
            &StatementRegressed,
            &agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 50), (2_000, 1, 5)]),
        );
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        // Two earlier intervals only (after an agent restart).
        let v = verdict(&StatementRegressed, &agent(&[(100, 1, 50), (110, 1, 50), (2_000, 1, 50)]));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("(the most any has: 2)") && v.summary.contains("a restart"), "{v:?}");
    }

    #[test]
    fn the_agent_learns_which_statements_regressed_before_the_rule_runs() {
        let limits = crate::Settings::default();
        let st = |s: &Snapshot| match &s.mariadb.facts.as_ref().unwrap().statements {
            crate::Gathered::Available(st) => st.clone(),
            _ => unreachable!(),
        };
        let failing = st(&failing_example());
        assert_eq!(
            StatementRegressed::regressed(&failing, &limits.limits("PD709")),
            vec![(failing.digests[0].schema.clone(), failing.digests[0].digest.clone())]
        );
        let steady = st(&agent(&[(100, 1, 50), (110, 1, 50), (95, 1, 50), (105, 1, 250)]));
        assert!(StatementRegressed::regressed(&steady, &limits.limits("PD709")).is_empty());
        // A changed threshold is the rule's: 19.5× is not regressed at 25×.
        let mut tight = crate::Settings::default();
        tight.set("PD709", "min_slowdown", 25.0).unwrap();
        tight.set("PD709", "min_examined", 1e9).unwrap();
        assert!(StatementRegressed::regressed(&failing, &tight.limits("PD709")).is_empty());
    }

    #[test]
    fn a_sample_and_its_plan_name_the_missing_index() {
        let mut s = failing_example();
        let st = match &mut s.mariadb.facts.as_mut().unwrap().statements {
            crate::Gathered::Available(st) => st,
            _ => unreachable!(),
        };
        st.digests[0].sample = Some(crate::StatementSample {
            sql_text: "SELECT `id`, `total` FROM `orders` WHERE `customer_id` = ?".into(),
            redacted: true,
            schema: Some("app".into()),
            plan: crate::Gathered::Available(crate::Plan {
                tables: vec![crate::PlanTable {
                    table: "orders".into(),
                    access_type: "ALL".into(),
                    rows: Some(200_000),
                    condition: Some("orders.customer_id = ?".into()),
                    index_columns: vec!["customer_id".into()],
                    ..Default::default()
                }],
            }),
        });
        let v = verdict(&StatementRegressed, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.evidence.iter().any(|e| e
                == "a recent execution (literals replaced by ?): SELECT `id`, `total` FROM `orders` WHERE `customer_id` = ?")
                && v.evidence.iter().any(|e| e.contains("orders: ALL (every row), no key, ~200000 rows")),
            "{v:?}"
        );
        assert!(
            v.remediation
                .unwrap()
                .contains("\n    CREATE INDEX `pd_orders_customer_id` ON `app`.`orders` (`customer_id`);"),
        );
    }

    #[test]
    fn doctor_has_no_past() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![digest(TEXT, 100, 10_000, 1, 1)], 0)
            .build();
        let v = verdict(&StatementRegressed, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("run the agent"), "{v:?}");
    }
}
