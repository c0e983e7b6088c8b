//! Statement digests: `performance_schema.events_statements_summary_by_digest` (MariaDB 10.6+
//! has every column read here; it has no `QUERY_SAMPLE_TEXT`, so everything works from the
//! digest text).
//!
//! One read is two bounded statements, whatever the number of digests or tables: one
//! aggregate (the consumer's state and the totals over every digest, so shares are of all
//! statement time, not of the listed ones) and the busiest digests by `SUM_TIMER_WAIT` with a
//! `LIMIT`. Doctor reads once and keeps the totals since the table's last reset, of digests
//! seen within a recent window ([`StatementOptions::window`], `--statements-window`, default
//! 15 minutes). The agent reads every `[statements] interval` and records the difference
//! from its previous read ([`StatementTracker`]), so a fix shows within an interval or two,
//! without a restart or a `TRUNCATE`.
//!
//! Left out: digests whose session's default schema is a system schema (`mysql`,
//! `performance_schema`, `information_schema`, `sys`; in the SQL of both statements), and —
//! judged in Rust on the rows read, see [`is_server_state`] — digests whose text reads server
//! state rather than application data (`SHOW ...`, `SET ...`, `SELECT @@...`, anything naming a
//! system schema's table) and the probe's shapes (`SELECT 1 FROM ... ORDER BY VEC_DISTANCE...`,
//! anything calling `VEC_ToText`); their calls and time are taken out of the totals. That is
//! every statement powerdiag itself sends but the probe's one `SELECT MIN(pk), MAX(pk)`, so
//! doctor's own probe does not change the next doctor's statement verdicts. Recognising
//! powerdiag by its connection is not possible here: the digest table has no user or thread
//! column, and a marker comment does not survive into the digest text. Other monitors'
//! statements (exporters reading `SHOW GLOBAL STATUS`) are left out by the same patterns, which
//! is intended: no index fixes them.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{
    DbError, DbErrorKind, Digest, DigestCounters, DigestHistory, Gathered, HISTORY_DIGESTS_MAX,
    HISTORY_POINTS_MAX, IntervalPoint, MariadbFacts, StatementPeriod, StatementTotals, Statements,
    StatusVar, Var,
};

use super::part::{Ctx, Part, PartFuture};
use super::session::{Session, TextRow, tcol, tcol_u64, text_rows};
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// What to read.
#[derive(Debug, Clone)]
pub struct StatementOptions {
    /// Most digests read (the `LIMIT`).
    pub limit: u32,
    /// Digests seen within this long before the read are listed and totalled (doctor).
    pub window: Duration,
    /// The agent's interval state; `None` records totals since reset (doctor).
    pub tracker: Option<StatementTracker>,
    /// The agent: digests given their own running counters (the rest are `other`).
    pub counters_top: u32,
    /// One recent concrete execution of each statement PD701, PD703 and PD709 can name, from
    /// performance_schema's statement history (the agent's opt-in `[statements] samples`;
    /// doctor's `--explain` implies it).
    pub samples: bool,
    /// And its plan: `EXPLAIN FORMAT=JSON` of the plain `SELECT`s among them (doctor's
    /// `--explain`, the agent's opt-in `[statements] explain`).
    pub explain: bool,
    /// Replace the literals of those executions and plans by `?` (doctor's `--redact`, the
    /// agent's `[statements] redact`, on by default).
    pub redact: bool,
    /// The rule settings PD709 judges with (the agent's `[rules.thresholds]`), to know which
    /// statements it will name.
    pub settings: powerdiag_rules::Settings,
}

impl Default for StatementOptions {
    fn default() -> Self {
        StatementOptions {
            limit: 100,
            window: Duration::from_secs(900),
            tracker: None,
            counters_top: 20,
            samples: false,
            explain: false,
            redact: false,
            settings: powerdiag_rules::Settings::default(),
        }
    }
}

/// The agent's statement state between samples: the previous raw read and the last interval.
#[derive(Debug, Clone)]
pub struct StatementTracker {
    /// Time between two reads.
    pub interval: Duration,
    state: Arc<Mutex<TrackerState>>,
}

#[derive(Debug, Default)]
struct TrackerState {
    /// The last raw (cumulative) read and when it was taken.
    previous: Option<(Instant, Raw)>,
    /// The last interval's statements, reported until the next read.
    last: Option<Statements>,
    /// Running totals for the metrics, by (schema, digest); `other` under (None, "other").
    counters: HashMap<(Option<String>, String), DigestCounters>,
    /// Each followed digest's recent intervals (PD709's baselines), oldest first.
    history: HashMap<Key, VecDeque<IntervalPoint>>,
}

type Key = (Option<String>, String);

/// Adds one interval to the running counters: the `top` busiest digests of the interval each
/// keep their own (a digest that leaves the top drops its series; one that comes back starts
/// again from 0, which Prometheus reads as a counter reset), everything else goes to `other`:
/// listed digests outside the top, and the calls and time of digests not listed at all (their
/// rows are unknown). Bounded: at most `top` + 1 entries.
pub(crate) fn accumulate(
    counters: &mut HashMap<Key, DigestCounters>,
    interval: &Statements,
    top: usize,
) -> Vec<DigestCounters> {
    let other_key: Key = (None, "other".to_owned());
    let mut other = counters
        .remove(&other_key)
        .unwrap_or_else(|| DigestCounters {
            digest: "other".into(),
            ..Default::default()
        });
    let mut kept: HashMap<Key, DigestCounters> = HashMap::new();
    let (mut listed_calls, mut listed_time) = (0u64, 0u64);
    for (i, d) in interval.digests.iter().enumerate() {
        listed_calls = listed_calls.saturating_add(d.calls);
        listed_time = listed_time.saturating_add(d.time_us);
        let key: Key = (d.schema.clone(), d.digest.clone());
        let entry = if i < top {
            kept.entry(key.clone()).or_insert_with(|| {
                counters.remove(&key).unwrap_or_else(|| DigestCounters {
                    schema: d.schema.clone(),
                    digest: d.digest.clone(),
                    text: d.text.clone(),
                    ..Default::default()
                })
            })
        } else {
            &mut other
        };
        entry.calls = entry.calls.saturating_add(d.calls);
        entry.time_us = entry.time_us.saturating_add(d.time_us);
        entry.rows_examined = entry.rows_examined.saturating_add(d.rows_examined);
        entry.rows_sent = entry.rows_sent.saturating_add(d.rows_sent);
        entry.no_index_used = entry.no_index_used.saturating_add(d.no_index_used);
    }
    other.calls = other
        .calls
        .saturating_add(interval.total.calls.saturating_sub(listed_calls));
    other.time_us = other
        .time_us
        .saturating_add(interval.total.time_us.saturating_sub(listed_time));
    *counters = kept;
    counters.insert(other_key, other);
    let mut out: Vec<DigestCounters> = counters.values().cloned().collect();
    out.sort_by(|a, b| (a.digest == "other", b.time_us).cmp(&(b.digest == "other", a.time_us)));
    out
}

/// Adds the interval ending at `at` (Unix seconds) to each followed digest's past: the `top`
/// busiest digests of the interval are followed, and a followed digest keeps gaining points
/// while it is listed. Bounded: [`HISTORY_POINTS_MAX`] points per digest, at most
/// [`HISTORY_DIGESTS_MAX`] digests (the one whose last point is oldest goes first). Returns
/// the past of the interval's listed digests that are followed.
pub(crate) fn record_history(
    history: &mut HashMap<Key, VecDeque<IntervalPoint>>,
    interval: &Statements,
    top: usize,
    at: i64,
) -> Vec<DigestHistory> {
    let seconds = interval.interval_seconds.unwrap_or(0.0);
    let mut out = Vec::new();
    for (i, d) in interval.digests.iter().enumerate() {
        let key: Key = (d.schema.clone(), d.digest.clone());
        if i >= top && !history.contains_key(&key) {
            continue;
        }
        let points = history.entry(key).or_default();
        points.push_back(IntervalPoint {
            at,
            seconds,
            calls: d.calls,
            time_us: d.time_us,
            rows_examined: d.rows_examined,
        });
        while points.len() > HISTORY_POINTS_MAX {
            points.pop_front();
        }
        out.push(DigestHistory {
            schema: d.schema.clone(),
            digest: d.digest.clone(),
            points: points.iter().copied().collect(),
        });
    }
    while history.len() > HISTORY_DIGESTS_MAX {
        let Some(oldest) = history
            .iter()
            .min_by_key(|(_, p)| p.back().map_or(i64::MIN, |p| p.at))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        history.remove(&oldest);
    }
    out
}

impl StatementTracker {
    pub fn new(interval: Duration) -> StatementTracker {
        StatementTracker {
            interval,
            state: Default::default(),
        }
    }

    /// Same state, another interval (a reloaded configuration).
    pub fn with_interval(&self, interval: Duration) -> StatementTracker {
        StatementTracker {
            interval,
            state: self.state.clone(),
        }
    }

    /// The last interval, when the next read is not due yet. The first interval after a start
    /// lasts at most [`FIRST_INTERVAL_MAX`], so the statement verdicts come after a minute
    /// rather than after a whole (default 10-minute) interval.
    fn not_due(&self) -> Option<Option<Statements>> {
        let st = self.state.lock().ok()?;
        let (at, _) = st.previous.as_ref()?;
        let interval = match st.last {
            Some(_) => self.interval,
            None => self.interval.min(FIRST_INTERVAL_MAX),
        };
        super::due::still_fresh(*at, interval).then(|| st.last.clone())
    }
}

/// The longest first interval: the second read of the digest table comes this soon after the
/// first (or after `interval`, if shorter).
pub(crate) const FIRST_INTERVAL_MAX: Duration = Duration::from_secs(60);

/// One read of the table: cumulative counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Raw {
    pub(crate) consumer: Option<String>,
    pub(crate) global_instrumentation: Option<String>,
    /// Every application digest in the table.
    pub(crate) all: StatementTotals,
    /// Those seen within the window.
    pub(crate) window: StatementTotals,
    pub(crate) first_seen: Option<String>,
    pub(crate) last_seen: Option<String>,
    pub(crate) overflowed: bool,
    pub(crate) digests: Vec<Digest>,
}

const TABLE: &str = "performance_schema.events_statements_summary_by_digest";

/// Digests of sessions whose default schema is a system schema: left out in SQL (cheap).
pub(crate) fn schema_filter() -> &'static str {
    "(SCHEMA_NAME IS NULL OR SCHEMA_NAME NOT IN ('mysql','performance_schema','information_schema','sys'))"
}

/// Extra rows the busiest-digests read asks for, to make up for powerdiag's own and other
/// server-state statements dropped afterwards ([`is_server_state`]).
const OWN_MARGIN: u32 = 32;

/// A statement that reads server state rather than application data, or powerdiag's probe:
/// `SHOW …`, `SET …`, `SELECT @@…`, anything naming a system schema's table, `SELECT 1 FROM …
/// ORDER BY VEC_DISTANCE…` and `VEC_ToText`. Judged in Rust on the rows read: a `LIKE` filter
/// in SQL makes the server build every digest's text, which more than doubled the cost of a
/// read with 1,000 digests (tests/bench.sh).
pub(crate) fn is_server_state(text: &str) -> bool {
    let t = text.trim_start().to_ascii_uppercase();
    ["SHOW ", "SET ", "SELECT @@"]
        .iter()
        .any(|p| t.starts_with(p))
        || [
            "`PERFORMANCE_SCHEMA` .",
            "`INFORMATION_SCHEMA` .",
            "`MYSQL` .",
            "`SYS` .",
        ]
        .iter()
        .any(|p| t.contains(p))
        || (t.starts_with("SELECT ? FROM ") && t.contains("VEC_DISTANCE"))
        || t.contains("VEC_TOTEXT")
}

/// Drops the server-state digests from a read, takes their calls and time out of the totals
/// (those read: powerdiag's own are among the busiest by time, the ones not read are too small
/// to matter), and keeps the busiest `limit`.
pub(crate) fn drop_server_state(raw: &mut Raw, window_secs: u64, limit: u32) {
    let mut kept = Vec::with_capacity(raw.digests.len());
    for d in std::mem::take(&mut raw.digests) {
        if !is_server_state(&d.text) {
            kept.push(d);
            continue;
        }
        for t in [&mut raw.all]
            .into_iter()
            .chain((d.last_seen_age_seconds.unwrap_or(0) <= window_secs).then_some(&mut raw.window))
        {
            t.digests = t.digests.saturating_sub(1);
            t.calls = t.calls.saturating_sub(d.calls);
            t.time_us = t.time_us.saturating_sub(d.time_us);
        }
    }
    kept.truncate(limit as usize);
    // The two statements read at slightly different moments (the aggregate's own digest has
    // one more execution by the second): the listed digests are part of the totals, so the
    // totals are at least their sums.
    let (calls, time) = kept.iter().fold((0u64, 0u64), |(c, t), d| {
        (c.saturating_add(d.calls), t.saturating_add(d.time_us))
    });
    for t in [&mut raw.all, &mut raw.window] {
        t.calls = t.calls.max(calls);
        t.time_us = t.time_us.max(time);
        t.digests = t.digests.max(kept.len() as u64);
    }
    raw.digests = kept;
}

fn recent(window_secs: u64) -> String {
    format!("LAST_SEEN >= NOW(6) - INTERVAL {window_secs} SECOND")
}

/// The aggregate: consumer state, totals over all digests (and, for doctor, over the window),
/// first/last seen. The agent passes no window: it differences the totals over all digests,
/// and each `LAST_SEEN` comparison costs the server a timestamp conversion per digest.
pub(crate) fn aggregate_sql(window_secs: Option<u64>) -> String {
    let window = match window_secs {
        Some(w) => {
            let r = recent(w);
            format!(
                "SUM({r}), SUM(IF({r}, COUNT_STAR, 0)), SUM(IF({r}, SUM_TIMER_WAIT, 0)) DIV 1000000"
            )
        }
        None => "NULL, NULL, NULL".to_owned(),
    };
    format!(
        "SELECT \
         (SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest'), \
         (SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'global_instrumentation'), \
         COUNT(*), SUM(COUNT_STAR), SUM(SUM_TIMER_WAIT) DIV 1000000, {window}, \
         DATE_FORMAT(MIN(FIRST_SEEN), '%Y-%m-%d %H:%i:%s'), DATE_FORMAT(MAX(LAST_SEEN), '%Y-%m-%d %H:%i:%s'), SUM(DIGEST IS NULL) \
         FROM {TABLE} WHERE {}",
        schema_filter()
    )
}

/// The busiest digests seen within the window.
pub(crate) fn top_sql(window_secs: u64, limit: u32) -> String {
    format!(
        "SELECT SCHEMA_NAME, DIGEST, DIGEST_TEXT, COUNT_STAR, \
         SUM_TIMER_WAIT DIV 1000000, MAX_TIMER_WAIT DIV 1000000, SUM_LOCK_TIME DIV 1000000, \
         SUM_ROWS_EXAMINED, SUM_ROWS_SENT, SUM_ROWS_AFFECTED, SUM_NO_INDEX_USED, \
         SUM_NO_GOOD_INDEX_USED, SUM_CREATED_TMP_TABLES, SUM_CREATED_TMP_DISK_TABLES, \
         SUM_SORT_MERGE_PASSES, SUM_SELECT_FULL_JOIN, \
         DATE_FORMAT(FIRST_SEEN, '%Y-%m-%d %H:%i:%s'), DATE_FORMAT(LAST_SEEN, '%Y-%m-%d %H:%i:%s'), \
         TIMESTAMPDIFF(SECOND, LAST_SEEN, NOW(6)), TIMESTAMPDIFF(SECOND, FIRST_SEEN, NOW(6)) \
         FROM {TABLE} WHERE DIGEST IS NOT NULL AND {} AND {} \
         ORDER BY SUM_TIMER_WAIT DESC LIMIT {}",
        schema_filter(),
        recent(window_secs),
        limit.saturating_add(OWN_MARGIN)
    )
}

/// Parses the aggregate's one row into `raw`.
pub(crate) fn parse_aggregate(row: &TextRow, raw: &mut Raw) {
    let u = |i| tcol_u64(row, i).unwrap_or(0);
    raw.consumer = tcol(row, 0);
    raw.global_instrumentation = tcol(row, 1);
    raw.all = StatementTotals {
        digests: u(2),
        calls: u(3),
        time_us: u(4),
    };
    raw.window = StatementTotals {
        digests: u(5),
        calls: u(6),
        time_us: u(7),
    };
    raw.first_seen = tcol(row, 8);
    raw.last_seen = tcol(row, 9);
    raw.overflowed = u(10) > 0;
}

/// Parses the top-digest rows into `raw`.
pub(crate) fn parse_top(rows: &[TextRow], raw: &mut Raw) {
    for row in rows {
        let u = |i| tcol_u64(row, i).unwrap_or(0);
        raw.digests.push(Digest {
            schema: tcol(row, 0),
            digest: tcol(row, 1).unwrap_or_default(),
            text: tcol(row, 2).unwrap_or_default(),
            calls: u(3),
            time_us: u(4),
            max_time_us: u(5),
            lock_time_us: u(6),
            rows_examined: u(7),
            rows_sent: u(8),
            rows_affected: u(9),
            no_index_used: u(10),
            no_good_index_used: u(11),
            tmp_tables: u(12),
            tmp_disk_tables: u(13),
            sort_merge_passes: u(14),
            select_full_join: u(15),
            first_seen: tcol(row, 16),
            last_seen: tcol(row, 17),
            last_seen_age_seconds: tcol_u64(row, 18),
            first_seen_age_seconds: tcol_u64(row, 19),
            sample: None,
        });
    }
}

/// Why the digests cannot be read, from the server's facts before any statement: `None` when
/// performance_schema is on (or unknown: the read will tell).
pub(crate) fn precondition(facts: &MariadbFacts) -> Option<String> {
    match facts.var_bool(Var::PerformanceSchema) {
        Ok(false) => Some(
            "performance_schema is OFF (MariaDB's default), so the server keeps no statement digests; fix: add `performance_schema = ON` under [mariadbd] in my.cnf and restart the server (the variable is not dynamic)".into(),
        ),
        _ => None,
    }
}

/// Why the consumers make the table useless, if they do.
pub(crate) fn consumer_problem(raw: &Raw) -> Option<String> {
    let off = |v: &Option<String>| !v.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("YES"));
    let mut names = Vec::new();
    if off(&raw.global_instrumentation) {
        names.push("global_instrumentation");
    }
    if off(&raw.consumer) {
        names.push("statements_digest");
    }
    if names.is_empty() {
        return None;
    }
    let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    Some(format!(
        "the {} consumer{} disabled in performance_schema.setup_consumers, so the digest table is not updated; fix (no restart): UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ({}); and to keep it after a restart add {} under [mariadbd] in my.cnf",
        names.join(" and "),
        if names.len() == 1 { " is" } else { "s are" },
        list.join(", "),
        names
            .iter()
            .map(|n| format!("`performance_schema_consumer_{n} = ON`"))
            .collect::<Vec<_>>()
            .join(" and ")
    ))
}

/// The message for a failed read: a missing privilege names the GRANT.
pub(crate) fn read_error(e: &DbError, account: &str) -> String {
    if e.kind == DbErrorKind::MissingPrivilege {
        format!(
            "{}; fix: GRANT SELECT ON performance_schema.* TO {account}",
            e.message
        )
    } else if e.hint.is_empty() {
        e.message.clone()
    } else {
        format!("{}; fix: {}", e.message, e.hint)
    }
}

/// Doctor's record: the window's digests, totals since reset.
pub(crate) fn since_reset(
    raw: Raw,
    window_secs: u64,
    limit: u32,
    uptime: Option<u64>,
) -> Statements {
    Statements {
        period: StatementPeriod::SinceReset,
        interval_seconds: None,
        window_seconds: window_secs,
        uptime_seconds: uptime,
        first_seen: raw.first_seen,
        last_seen: raw.last_seen,
        total: raw.window,
        overflowed: raw.overflowed,
        limit,
        digests: raw.digests,
        notes: Vec::new(),
        tables: Vec::new(),
        counters: Vec::new(),
        history: Vec::new(),
        samples_note: None,
    }
}

/// The agent's record: what happened between `prev` and `cur`, `elapsed` apart.
pub(crate) fn interval(
    prev: &Raw,
    cur: &Raw,
    elapsed: Duration,
    limit: u32,
    uptime: Option<u64>,
) -> Statements {
    let secs = elapsed.as_secs_f64();
    let mut notes = Vec::new();
    // A reset (TRUNCATE, restart) between the reads: everything now in the table is newer
    // than the previous read.
    let reset = cur.all.calls < prev.all.calls || cur.all.time_us < prev.all.time_us;
    let before: HashMap<(&Option<String>, &str), &Digest> = prev
        .digests
        .iter()
        .map(|d| ((&d.schema, d.digest.as_str()), d))
        .collect();
    let mut digests = Vec::new();
    let mut unknown = 0;
    for d in &cur.digests {
        let delta = match before.get(&(&d.schema, d.digest.as_str())) {
            _ if reset => Some(d.clone()),
            Some(p) if d.calls >= p.calls => Some(subtract(d, p)),
            Some(_) => Some(d.clone()),
            // Not listed last time: new since then if first seen within the interval.
            None => match d.first_seen_age_seconds {
                Some(age) if (age as f64) <= secs + 1.0 => Some(d.clone()),
                _ => None,
            },
        };
        match delta {
            Some(x) if x.calls > 0 => digests.push(x),
            Some(_) => {}
            None => unknown += 1,
        }
    }
    if unknown > 0 {
        notes.push(format!(
            "{unknown} digest(s) entered the busiest {limit} during the interval and are left out until the next one (their earlier counts were not read)"
        ));
    }
    if reset {
        notes.push("the digest table was reset between the reads: the interval shows counts since the reset".into());
    }
    digests.sort_by_key(|d| std::cmp::Reverse(d.time_us));
    let total = if reset {
        cur.all.clone()
    } else {
        StatementTotals {
            digests: digests.len() as u64,
            calls: cur.all.calls.saturating_sub(prev.all.calls),
            time_us: cur.all.time_us.saturating_sub(prev.all.time_us),
        }
    };
    Statements {
        period: StatementPeriod::Interval,
        interval_seconds: Some(secs),
        window_seconds: elapsed.as_secs().max(1),
        uptime_seconds: uptime,
        first_seen: cur.first_seen.clone(),
        last_seen: cur.last_seen.clone(),
        total,
        overflowed: cur.overflowed,
        limit,
        digests,
        notes,
        tables: Vec::new(),
        counters: Vec::new(),
        history: Vec::new(),
        samples_note: None,
    }
}

fn subtract(d: &Digest, p: &Digest) -> Digest {
    Digest {
        calls: d.calls - p.calls,
        time_us: d.time_us.saturating_sub(p.time_us),
        lock_time_us: d.lock_time_us.saturating_sub(p.lock_time_us),
        rows_examined: d.rows_examined.saturating_sub(p.rows_examined),
        rows_sent: d.rows_sent.saturating_sub(p.rows_sent),
        rows_affected: d.rows_affected.saturating_sub(p.rows_affected),
        no_index_used: d.no_index_used.saturating_sub(p.no_index_used),
        no_good_index_used: d.no_good_index_used.saturating_sub(p.no_good_index_used),
        tmp_tables: d.tmp_tables.saturating_sub(p.tmp_tables),
        tmp_disk_tables: d.tmp_disk_tables.saturating_sub(p.tmp_disk_tables),
        sort_merge_passes: d.sort_merge_passes.saturating_sub(p.sort_merge_passes),
        select_full_join: d.select_full_join.saturating_sub(p.select_full_join),
        ..d.clone()
    }
}

/// Reads the table once (two statements).
async fn read(
    s: &mut Session,
    window_secs: u64,
    limit: u32,
    window_totals: bool,
) -> Result<Raw, CollectError> {
    let failed = |message: String| CollectError::Database {
        message,
        hint: String::new(),
    };
    let mut raw = Raw::default();
    let rows = s
        .query(&aggregate_sql(window_totals.then_some(window_secs)))
        .await
        .map_err(|e| failed(read_error(&e, s.account())))?;
    let row = text_rows(&rows)
        .into_iter()
        .next()
        .ok_or_else(|| failed(format!("{TABLE}: the aggregate returned no row")))?;
    parse_aggregate(&row, &mut raw);
    if let Some(why) = consumer_problem(&raw) {
        return Err(failed(why));
    }
    let rows = s
        .query(&top_sql(window_secs, limit))
        .await
        .map_err(|e| failed(read_error(&e, s.account())))?;
    parse_top(&text_rows(&rows), &mut raw);
    drop_server_state(&mut raw, window_secs, limit);
    Ok(raw)
}

/// The indexes of the tables PD701's and PD703's candidates read (one statement, always sent
/// after a read of the digests); a failure is a note, the digests stand.
async fn add_indexes(s: &mut Session, st: &mut Statements) {
    match super::schema::indexes_of(s, &st.tables_to_index()).await {
        Ok(tables) => st.tables = tables,
        Err(e) => st.notes.push(format!(
            "the indexes of the statements' tables are unknown (information_schema.STATISTICS: {})",
            e.message
        )),
    }
}

/// Most statements `--explain` takes a concrete execution of and explains.
pub(crate) const EXPLAINED_MAX: usize = 5;

/// The statement that turns on the statement history `--explain` reads (until a restart).
pub(crate) const HISTORY_CONSUMERS_FIX: &str = "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')";

/// What turning the history on costs, measured (docs/performance.md, "Statement history").
pub(crate) const HISTORY_CONSUMERS_COST: &str = "cost: each statement's event is then copied into a ring of performance_schema_events_statements_history_long_size rows, under 4 µs of server CPU per statement as measured on MariaDB 11.8 (not distinguishable from noise on a 106 µs point SELECT), and no memory beyond the buffers the server allocated at start-up";

/// The listed statements whose concrete execution is taken: those PD701 and PD703 can name
/// ([`explain_candidates`]), then those PD709 fails on (the agent's intervals), at most
/// [`EXPLAINED_MAX`] of each.
pub(crate) fn sample_candidates(
    st: &Statements,
    settings: &powerdiag_rules::Settings,
) -> Vec<usize> {
    let mut idx = explain_candidates(st);
    let regressed =
        powerdiag_rules::rules::StatementRegressed::regressed(st, &settings.limits("PD709"));
    let more: Vec<usize> = st
        .digests
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            !idx.contains(i)
                && regressed
                    .iter()
                    .any(|(schema, digest)| *schema == d.schema && *digest == d.digest)
                && d.digest.chars().all(|c| c.is_ascii_hexdigit())
                && !d.digest.is_empty()
        })
        .map(|(i, _)| i)
        .take(EXPLAINED_MAX)
        .collect();
    idx.extend(more);
    idx
}

/// The listed statements PD701 and PD703 can name, busiest first: `SELECT`s (only those can be
/// explained safely) that used no index or read ten rows or more per row sent.
pub(crate) fn explain_candidates(st: &Statements) -> Vec<usize> {
    let mut idx: Vec<usize> = st
        .digests
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            d.calls > 0
                && d.kind() == powerdiag_rules::StatementKind::Select
                && !d.is_vector_search()
                && (d.no_index_share() > 0.0
                    || d.examined_per_call() >= 10.0 * d.sent_per_call().max(1.0))
                && d.digest.chars().all(|c| c.is_ascii_hexdigit())
                && !d.digest.is_empty()
        })
        .map(|(i, _)| i)
        .collect();
    idx.sort_by_key(|&i| std::cmp::Reverse(st.digests[i].time_us));
    idx.truncate(EXPLAINED_MAX);
    idx
}

/// One recent concrete execution of each statement `idx` names, from performance_schema's
/// statement history, and with `explain` its `EXPLAIN FORMAT=JSON` (plain `SELECT`s only, in
/// a read-only transaction, at most 2 s). Two statements, plus with `explain` three per
/// explained statement (a `USE` of its schema, the transaction, the `EXPLAIN`: doctor's
/// session closes after the collection; the agent's next sample sets its own schema-free
/// statements). Literals replaced by `?` when `redact`.
async fn add_samples(
    s: &mut Session,
    st: &mut Statements,
    idx: Vec<usize>,
    explain: bool,
    redact: bool,
) {
    if idx.is_empty() {
        return;
    }
    let what = if explain {
        "no concrete statement to EXPLAIN"
    } else {
        "no concrete statement taken"
    };
    let note = |why: String| Some(format!("{what}: {why}"));
    let consumers = match s
        .query("SELECT NAME, ENABLED, @@performance_schema_max_sql_text_length FROM performance_schema.setup_consumers WHERE NAME IN ('events_statements_current', 'events_statements_history', 'events_statements_history_long')")
        .await
    {
        Ok(rows) => text_rows(&rows),
        Err(e) => {
            st.samples_note = note(format!("performance_schema.setup_consumers: {}", e.message));
            return;
        }
    };
    let on = |name: &str| {
        consumers
            .iter()
            .any(|r| tcol(r, 0).as_deref() == Some(name) && tcol(r, 1).as_deref() == Some("YES"))
    };
    let max_len = consumers
        .first()
        .and_then(|r| tcol_u64(r, 2))
        .map(|n| n as usize);
    let table = if on("events_statements_current") && on("events_statements_history_long") {
        "events_statements_history_long"
    } else if on("events_statements_current") && on("events_statements_history") {
        "events_statements_history"
    } else {
        st.samples_note = note(format!(
            "performance_schema keeps no statement history (the consumers events_statements_current and events_statements_history_long are off, as MariaDB ships them); turn them on with `{HISTORY_CONSUMERS_FIX}` (until a restart; in my.cnf: performance_schema_consumer_events_statements_current = ON and performance_schema_consumer_events_statements_history_long = ON) — {HISTORY_CONSUMERS_COST}"
        ));
        return;
    };
    let list = idx
        .iter()
        .map(|&i| format!("'{}'", st.digests[i].digest))
        .collect::<Vec<_>>()
        .join(",");
    let rows = match s
        .query(&format!(
            "SELECT DIGEST, SQL_TEXT, CURRENT_SCHEMA FROM performance_schema.{table} WHERE DIGEST IN ({list}) AND SQL_TEXT IS NOT NULL ORDER BY TIMER_START DESC"
        ))
        .await
    {
        Ok(rows) => text_rows(&rows),
        Err(e) => {
            st.samples_note = note(format!("performance_schema.{table}: {}", e.message));
            return;
        }
    };
    let mut missing = 0;
    for i in idx {
        let digest = st.digests[i].digest.clone();
        let Some(row) = rows
            .iter()
            .find(|r| tcol(r, 0).as_deref() == Some(digest.as_str()))
        else {
            missing += 1;
            continue;
        };
        let text = tcol(row, 1).unwrap_or_default();
        let schema = tcol(row, 2);
        let mut plan = match powerdiag_rules::plan::not_explainable(&text, max_len) {
            Some(why) => Gathered::Unavailable(why),
            None if !explain => Gathered::Unavailable(
                "not explained: the agent runs EXPLAIN only with [statements] explain = true"
                    .into(),
            ),
            None => explain_plan(s, schema.as_deref(), &text).await,
        };
        let sql_text = if redact {
            if let Gathered::Available(p) = &mut plan {
                for t in &mut p.tables {
                    t.condition = t.condition.as_deref().map(powerdiag_rules::plan::redact);
                }
            }
            powerdiag_rules::plan::redact(&text)
        } else {
            text
        };
        st.digests[i].sample = Some(powerdiag_rules::StatementSample {
            sql_text,
            redacted: redact,
            schema,
            plan,
        });
        if !s.alive() {
            break;
        }
    }
    if missing > 0 {
        st.notes.push(format!(
            "{missing} statement(s) to explain had no execution left in performance_schema.{table} (a ring of the latest statements of all sessions)"
        ));
    }
}

/// `EXPLAIN FORMAT=JSON` of a plain `SELECT` in `schema`, read-only, at most 2 s.
async fn explain_plan(
    s: &mut Session,
    schema: Option<&str>,
    text: &str,
) -> Gathered<powerdiag_rules::Plan> {
    if let Some(db) = schema
        && let Err(e) = s.exec(&format!("USE `{}`", db.replace('`', "``"))).await
    {
        return Gathered::Unavailable(format!("USE of its schema: {}", e.message));
    }
    if let Err(e) = s.exec("START TRANSACTION READ ONLY").await {
        return Gathered::Unavailable(format!("a read-only transaction: {}", e.message));
    }
    let r = s
        .query(&format!(
            "SET STATEMENT max_statement_time = 2 FOR EXPLAIN FORMAT=JSON {text}"
        ))
        .await;
    let _ = s.exec("ROLLBACK").await;
    match r {
        Ok(rows) => match text_rows(&rows).first().and_then(|r| tcol(r, 0)) {
            Some(json) => match powerdiag_rules::plan::parse_plan(&json) {
                Ok(p) => Gathered::Available(p),
                Err(e) => Gathered::Unavailable(e),
            },
            None => Gathered::Unavailable("EXPLAIN returned no row".into()),
        },
        Err(e) => Gathered::Unavailable(format!("EXPLAIN: {}", e.message)),
    }
}

/// Why a sample has no statements, and whether that is a collector failure (a read that
/// failed) or a fact (performance_schema off, the agent's first interval).
#[derive(Debug)]
pub(crate) struct Unread {
    pub(crate) why: String,
    pub(crate) failed: bool,
}

const FIRST_INTERVAL: &str = "the first interval is not complete yet: statements are judged from the second read of the digest table on";

/// The statements part of a sample: `Err` is the reason, for `Gathered::Unavailable`.
pub(crate) async fn collect(
    s: &mut Session,
    facts: &MariadbFacts,
    opts: &StatementOptions,
) -> Result<Statements, Unread> {
    if let Some(why) = precondition(facts) {
        return Err(Unread { why, failed: false });
    }
    let failed = |e: CollectError| Unread {
        why: e.to_string(),
        failed: true,
    };
    let uptime = facts.status_u64(StatusVar::Uptime).ok();
    let Some(tracker) = &opts.tracker else {
        let window = opts.window.as_secs().max(1);
        let raw = read(s, window, opts.limit, true).await.map_err(failed)?;
        let mut st = since_reset(raw, window, opts.limit, uptime);
        add_indexes(s, &mut st).await;
        if opts.samples || opts.explain {
            let idx = explain_candidates(&st);
            add_samples(s, &mut st, idx, opts.explain, opts.redact).await;
        }
        return Ok(st);
    };
    if let Some(last) = tracker.not_due() {
        return last.ok_or_else(|| Unread {
            why: FIRST_INTERVAL.into(),
            failed: false,
        });
    }
    // Digests seen since a little before the previous read.
    let window = (tracker.interval.as_secs() * 2).max(10);
    let raw = read(s, window, opts.limit, false).await.map_err(failed)?;
    let now = Instant::now();
    let lock = || {
        tracker.state.lock().map_err(|_| {
            failed(CollectError::Internal {
                what: "the statement tracker".into(),
                message: "its lock was poisoned by a panic".into(),
            })
        })
    };
    let mut result = {
        let mut state = lock()?;
        let mut result = state
            .previous
            .as_ref()
            .map(|(at, prev)| interval(prev, &raw, now.duration_since(*at), opts.limit, uptime));
        if let Some(st) = &mut result {
            st.counters = accumulate(&mut state.counters, st, opts.counters_top as usize);
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            st.history = record_history(&mut state.history, st, opts.counters_top as usize, at);
        }
        state.previous = Some((now, raw));
        result
    };
    if let Some(st) = &mut result {
        add_indexes(s, st).await;
        if opts.samples || opts.explain {
            let idx = sample_candidates(st, &opts.settings);
            add_samples(s, st, idx, opts.explain, opts.redact).await;
        }
    }
    lock()?.last = result.clone();
    result.ok_or_else(|| Unread {
        why: FIRST_INTERVAL.into(),
        failed: false,
    })
}

/// The `mariadb_statements` collector: the digest table (performance_schema OFF is a fact, not
/// a failure).
pub(super) struct StatementsPart<'o> {
    /// `None` leaves the digests unread.
    pub(super) opts: Option<&'o StatementOptions>,
}

/// The `mariadb_statements` collector.
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_statements",
    help: "statement digests from performance_schema: two bounded statements",
    default_enabled: true,
    requires: Requires::Nothing,
};

impl Part for StatementsPart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut powerdiag_rules::MariadbFacts, why: String) {
        facts.statements = powerdiag_rules::Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let Some(sopts) = self.opts else {
                ctx.facts.statements = powerdiag_rules::Gathered::Unavailable(
                    "statement digests not read (doctor --statements 0, or the agent's [statements] enabled = false)".into(),
                );
                return Err(CollectError::skipped("statement digests disabled"));
            };
            match collect(ctx.s, ctx.facts, sopts).await {
                Ok(st) => {
                    ctx.facts.statements = powerdiag_rules::Gathered::Available(st);
                    Ok(())
                }
                Err(u) => {
                    ctx.facts.statements = powerdiag_rules::Gathered::Unavailable(u.why.clone());
                    if u.failed {
                        Err(CollectError::Database {
                            message: u.why,
                            hint: String::new(),
                        })
                    } else {
                        Ok(())
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_is_bounded_per_digest_and_in_digests() {
        let mut history = HashMap::new();
        let interval = |n: usize| Statements {
            period: StatementPeriod::Interval,
            interval_seconds: Some(10.0),
            digests: (0..n)
                .map(|i| Digest {
                    schema: Some("app".into()),
                    digest: format!("{i:032x}"),
                    calls: 10,
                    time_us: 1000,
                    ..Default::default()
                })
                .collect(),
            ..since_reset(Raw::default(), 60, 100, None)
        };
        // 60 intervals of 100 listed digests, the busiest 20 followed.
        for at in 0..60 {
            let out = record_history(&mut history, &interval(100), 20, at);
            assert_eq!(out.len(), 20);
            assert_eq!(
                out[0].points.len(),
                (at as usize + 1).min(HISTORY_POINTS_MAX)
            );
        }
        assert_eq!(history.len(), 20);
        assert!(history.values().all(|p| p.len() == HISTORY_POINTS_MAX));
        assert_eq!(history.values().next().unwrap().back().unwrap().at, 59);
        // Followed digests that leave the top keep gaining points while listed; new ones come
        // in, and the least recently busy go first beyond HISTORY_DIGESTS_MAX.
        for round in 0..10i64 {
            let mut st = interval(100);
            st.digests.rotate_left(20 * (round as usize % 5));
            record_history(&mut history, &st, 20, 100 + round);
            assert!(history.len() <= HISTORY_DIGESTS_MAX);
        }
        assert_eq!(history.len(), HISTORY_DIGESTS_MAX);
    }

    fn row(v: &[&str]) -> TextRow {
        v.iter()
            .map(|s| (*s != "NULL").then(|| (*s).to_owned()))
            .collect()
    }

    /// A row as MariaDB 11.8 returned it for the test application's listing.
    fn listing(calls: &str, time: &str, no_index: &str) -> TextRow {
        row(&[
            "orm",
            "3f1c0e5a9b2d4c6e8f0a1b2c3d4e5f60",
            "SELECT `shop_item` . `id` , `shop_item` . `name` FROM `shop_item` WHERE `shop_item` . `category` = ? ORDER BY `shop_item` . `created` DESC LIMIT ?",
            calls,
            time,
            "90000",
            "1000",
            "100000000",
            "2000",
            "0",
            no_index,
            "0",
            "0",
            "0",
            "0",
            "0",
            "2026-11-24 02:00:00.000000",
            "2026-11-24 02:10:00.000000",
            "3",
            "600",
        ])
    }

    #[test]
    fn parses_rows_and_aggregate() {
        let mut raw = Raw::default();
        parse_aggregate(
            &row(&[
                "YES",
                "YES",
                "12",
                "5000",
                "9000000",
                "8",
                "4000",
                "8000000",
                "2026-11-24 01:00:00.000000",
                "2026-11-24 02:10:00.000000",
                "0",
            ]),
            &mut raw,
        );
        parse_top(&[listing("100", "4000000", "100")], &mut raw);
        assert_eq!(consumer_problem(&raw), None);
        let st = since_reset(raw, 900, 100, Some(4000));
        assert_eq!(st.total.time_us, 8_000_000);
        let d = &st.digests[0];
        assert_eq!(
            (d.calls, d.time_us, d.no_index_used, d.rows_examined),
            (100, 4_000_000, 100, 100_000_000)
        );
        assert_eq!(d.schema.as_deref(), Some("orm"));
        assert!(
            st.period_text().contains("server up 66 min 40 s"),
            "{}",
            st.period_text()
        );
    }

    #[test]
    fn consumer_and_privilege_reasons_name_the_fix() {
        let raw = Raw {
            consumer: Some("NO".into()),
            global_instrumentation: Some("YES".into()),
            ..Default::default()
        };
        let why = consumer_problem(&raw).unwrap_or_default();
        assert!(
            why.contains("statements_digest consumer is disabled")
                && why.contains("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('statements_digest')"),
            "{why}"
        );
        let e = DbError {
            kind: DbErrorKind::MissingPrivilege,
            message: "ERROR 1142 (42000): SELECT command denied".into(),
            hint: String::new(),
        };
        assert!(
            read_error(&e, "'mon'@'127.0.0.1'")
                .ends_with("GRANT SELECT ON performance_schema.* TO 'mon'@'127.0.0.1'")
        );
    }

    #[test]
    fn intervals_subtract_and_survive_resets() {
        let mut a = Raw {
            all: StatementTotals {
                digests: 1,
                calls: 100,
                time_us: 4_000_000,
            },
            ..Default::default()
        };
        parse_top(&[listing("100", "4000000", "100")], &mut a);
        let mut b = Raw {
            all: StatementTotals {
                digests: 1,
                calls: 150,
                time_us: 4_500_000,
            },
            ..Default::default()
        };
        // After an index: 50 more calls, none without an index.
        parse_top(&[listing("150", "4500000", "100")], &mut b);
        let st = interval(&a, &b, Duration::from_secs(60), 100, None);
        let d = &st.digests[0];
        assert_eq!((d.calls, d.time_us, d.no_index_used), (50, 500_000, 0));
        assert_eq!(st.total.calls, 50);
        // TRUNCATE between the reads: the new counts are the interval.
        let mut c = Raw {
            all: StatementTotals {
                digests: 1,
                calls: 10,
                time_us: 100_000,
            },
            ..Default::default()
        };
        parse_top(&[listing("10", "100000", "0")], &mut c);
        let st = interval(&b, &c, Duration::from_secs(60), 100, None);
        assert_eq!(st.digests[0].calls, 10);
        assert!(st.notes.iter().any(|n| n.contains("reset")));
    }

    #[test]
    fn running_counters_keep_the_top_and_sum_the_rest_into_other() {
        let mut a = Raw::default();
        parse_top(&[listing("100", "4000000", "100")], &mut a);
        let mut st = since_reset(a, 60, 100, None);
        let mut second = st.digests[0].clone();
        second.digest = "ffff".into();
        second.time_us = 1;
        st.digests.push(second);
        st.total = StatementTotals {
            digests: 3,
            calls: 250,
            time_us: 4_000_101,
        };
        let mut counters = HashMap::new();
        accumulate(&mut counters, &st, 1);
        let out = accumulate(&mut counters, &st, 1);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!((out[0].calls, out[0].time_us), (200, 8_000_000));
        // other: the second listed digest (100 calls) and the 50 unlisted calls, twice.
        assert_eq!(
            (out[1].digest.as_str(), out[1].calls, out[1].time_us),
            ("other", 300, 202)
        );
    }

    #[test]
    fn server_state_and_own_statements_are_left_out_of_list_and_totals() {
        // Digest texts as MariaDB 11.8 wrote them for powerdiag's own statements.
        for own in [
            "SHOW GLOBAL STATUS WHERE `Variable_name` IN (...)",
            "SET SESSION MAX_STATEMENT_TIME = ? , `transaction_read_only` = ?",
            "SELECT @@GLOBAL . `version` , @@GLOBAL . `version_comment`",
            "SELECT ( SELECT ENABLED FROM `performance_schema` . `setup_consumers` WHERE NAME = ? )",
            "SELECT ? FROM `app` . `docs` ORDER BY `VEC_DISTANCE_EUCLIDEAN` ( `e` , `VEC_FromText` (?) ) LIMIT ?",
            "SELECT `VEC_ToText` ( `e` ) FROM `app` . `docs` LIMIT ?",
        ] {
            assert!(is_server_state(own), "{own}");
        }
        for app in [
            "SELECT `id` FROM `docs` ORDER BY `VEC_DISTANCE_EUCLIDEAN` ( `e` , `VEC_FromText` (?) ) LIMIT ?",
            "SELECT `settings` FROM `shop_setup` WHERE `id` = ?",
            "SELECT `VERSION` ( ) , @@`sql_mode`",
        ] {
            assert!(!is_server_state(app), "{app}");
        }
        let mut raw = Raw {
            all: StatementTotals {
                digests: 3,
                calls: 300,
                time_us: 3_000,
            },
            window: StatementTotals {
                digests: 3,
                calls: 300,
                time_us: 3_000,
            },
            ..Default::default()
        };
        parse_top(
            &[listing("100", "1000", "0"), listing("100", "1000", "0")],
            &mut raw,
        );
        raw.digests[0].text = "SHOW GLOBAL STATUS".into();
        drop_server_state(&mut raw, 900, 10);
        assert_eq!(raw.digests.len(), 1);
        assert_eq!(
            (raw.all.calls, raw.window.time_us, raw.window.digests),
            (200, 2_000, 2)
        );
        assert!(schema_filter().contains("'sys'"));
        assert!(top_sql(900, 10).ends_with("ORDER BY SUM_TIMER_WAIT DESC LIMIT 42"));
    }

    #[test]
    fn the_first_interval_lasts_a_minute_then_the_configured_interval() {
        let tracker = StatementTracker::new(Duration::from_secs(600));
        let read_ago = |secs: u64, last: Option<Statements>| {
            let mut st = tracker.state.lock().unwrap();
            st.previous = Some((Instant::now() - Duration::from_secs(secs), Raw::default()));
            st.last = last;
        };
        // Never read: due.
        assert!(tracker.not_due().is_none());
        // One read, 30 s ago: the first interval is not over.
        read_ago(30, None);
        assert_eq!(tracker.not_due(), Some(None));
        // One read, 61 s ago: the second read is due although the interval is 10 minutes.
        read_ago(61, None);
        assert!(tracker.not_due().is_none());
        // After the first interval, the configured one: 61 s and 9 minutes are not due.
        let done = Statements {
            period: StatementPeriod::Interval,
            ..since_reset(Raw::default(), 60, 100, None)
        };
        read_ago(61, Some(done.clone()));
        assert_eq!(tracker.not_due(), Some(Some(done.clone())));
        read_ago(540, Some(done.clone()));
        assert!(tracker.not_due().is_some());
        read_ago(600, Some(done));
        assert!(tracker.not_due().is_none());
        // An interval shorter than a minute is not lengthened.
        let short = StatementTracker::new(Duration::from_secs(20));
        short.state.lock().unwrap().previous =
            Some((Instant::now() - Duration::from_secs(21), Raw::default()));
        assert!(short.not_due().is_none());
    }
}
