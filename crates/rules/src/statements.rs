//! Statement digests: `performance_schema.events_statements_summary_by_digest`, as the
//! statement rules (PD701–PD704), the "Top statements" report and the agent's metrics read it.
//!
//! The server's table is cumulative since it was last reset. Doctor records it as it is
//! ([`StatementPeriod::SinceReset`]), keeping only digests seen within a recent window; the
//! agent records the difference between two of its reads ([`StatementPeriod::Interval`]), so a
//! fix shows within an interval or two.

use serde::{Deserialize, Serialize};

use crate::{Gathered, MariadbFacts, Verdict, display_text, format_secs, os::pct};

/// What the statement counts cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatementPeriod {
    /// Totals since the digest table was last reset (server start or `TRUNCATE`): doctor.
    SinceReset,
    /// Differences between two reads `interval_seconds` apart: the agent.
    Interval,
}

/// The digest table at one read: the totals and the busiest digests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Statements {
    pub period: StatementPeriod,
    /// For [`StatementPeriod::Interval`]: seconds between the two reads.
    #[serde(default)]
    pub interval_seconds: Option<f64>,
    /// Only digests whose `LAST_SEEN` is at most this many seconds before the read are listed
    /// and totalled: the statements the application runs now.
    pub window_seconds: u64,
    /// Server uptime at the read (`Uptime`).
    #[serde(default)]
    pub uptime_seconds: Option<u64>,
    /// Oldest `FIRST_SEEN` of the digests in the table (server time): where the counts start.
    #[serde(default)]
    pub first_seen: Option<String>,
    /// Newest `LAST_SEEN`.
    #[serde(default)]
    pub last_seen: Option<String>,
    /// Every application digest in the window, not only the listed ones: the denominator of
    /// every share.
    pub total: StatementTotals,
    /// The digest table overflowed (`performance_schema_digests_size`): statements beyond it
    /// are counted in one row without text, in the totals only.
    #[serde(default)]
    pub overflowed: bool,
    /// The read's `LIMIT`: at most this many digests are listed.
    pub limit: u32,
    /// The busiest digests by total time, busiest first.
    pub digests: Vec<Digest>,
    /// Partial problems (a digest the interval could not difference, a reset between reads).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The indexes of the tables named by the listed statements that used no index or read
    /// ten rows or more per row sent (`information_schema.STATISTICS`, at most
    /// [`INDEXED_TABLES_MAX`] tables, one statement): PD701 and PD703 name them. Each table's
    /// `engine` is not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<crate::Table>,
    /// The agent only: running totals since the agent started, for its metrics — the busiest
    /// digests of the last interval (`[statements] top`) and one `other` entry (digest
    /// `other`) summing every other statement, so the series stay bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<DigestCounters>,
    /// The agent only: the recent intervals of the listed digests it follows (the busiest of
    /// each interval, at most [`HISTORY_DIGESTS_MAX`] digests of [`HISTORY_POINTS_MAX`]
    /// intervals each, in memory: a restart loses them): each statement's own past, which
    /// PD709 judges the last interval against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<DigestHistory>,
    /// `--explain` was asked for but no concrete statements could be read, and why (the
    /// consumers to enable, with their cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_note: Option<String>,
}

/// Most intervals the agent keeps per digest: 48, eight hours at the default 10-minute
/// `[statements] interval`.
pub const HISTORY_POINTS_MAX: usize = 48;
/// Most digests whose intervals the agent keeps: the least recently busy is dropped first.
pub const HISTORY_DIGESTS_MAX: usize = 80;

/// One digest's recent agent intervals, oldest first; the last is the snapshot's interval
/// when the digest ran in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DigestHistory {
    pub schema: Option<String>,
    pub digest: String,
    pub points: Vec<IntervalPoint>,
}

/// What one digest cost in one agent interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalPoint {
    /// When the interval ended (the agent's read), Unix seconds.
    pub at: i64,
    /// How long the interval was, seconds.
    pub seconds: f64,
    pub calls: u64,
    /// Statement time, µs.
    pub time_us: u64,
    pub rows_examined: u64,
}

impl IntervalPoint {
    pub fn time_per_call_us(&self) -> f64 {
        per(self.time_us, self.calls)
    }

    pub fn examined_per_call(&self) -> f64 {
        per(self.rows_examined, self.calls)
    }
}

/// How many tables [`Statements::tables`] holds at most.
pub(crate) const INDEXED_TABLES_MAX: usize = 20;

impl Statements {
    /// The tables whose indexes [`Statements::tables`] should hold: those named by the listed
    /// statements that could use an index and used none, or read ten rows or more per row
    /// sent — PD701's and PD703's candidates — busiest first, at most
    /// [`INDEXED_TABLES_MAX`].
    pub fn tables_to_index(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for d in self.digests.iter().filter(|d| {
            d.can_use_index()
                && !d.is_vector_search()
                && (d.no_index_share() > 0.0
                    || d.examined_per_call() >= 10.0 * d.sent_per_call().max(1.0))
        }) {
            for t in d.tables() {
                if out.len() < INDEXED_TABLES_MAX && !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }

    /// Evidence lines naming the indexes of the tables `d` reads, where they were read:
    /// `shop.orders has PRIMARY KEY (`id`), KEY `k_c` (`customer_id`)`.
    pub fn index_lines(&self, d: &Digest) -> Vec<String> {
        d.tables()
            .iter()
            .filter_map(|(schema, name)| {
                let t = self
                    .tables
                    .iter()
                    .find(|t| &t.schema == schema && &t.name == name)?;
                Some(if t.indexes.is_empty() {
                    format!("{} has no index", t.display())
                } else {
                    let defs: Vec<String> =
                        t.indexes.iter().map(crate::Index::definition).collect();
                    format!("{} has {}", t.display(), defs.join(", "))
                })
            })
            .collect()
    }
}

/// Running totals of one digest (or of `other`) since the agent started: counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DigestCounters {
    pub schema: Option<String>,
    /// The digest hash, or `other`.
    pub digest: String,
    /// The digest text (empty for `other`).
    pub text: String,
    pub calls: u64,
    pub time_us: u64,
    pub rows_examined: u64,
    pub rows_sent: u64,
    pub no_index_used: u64,
}

/// Totals over every application digest in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatementTotals {
    /// Distinct digests.
    pub digests: u64,
    pub calls: u64,
    /// Statement time, µs (`SUM_TIMER_WAIT`).
    pub time_us: u64,
}

/// One normalised statement and what its executions cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Digest {
    /// The session's default database when it ran (`SCHEMA_NAME`), not necessarily the
    /// tables' schema.
    pub schema: Option<String>,
    /// The digest hash (`DIGEST`).
    pub digest: String,
    /// The normalised text (`DIGEST_TEXT`): literals are `?`, long texts end in `...`.
    pub text: String,
    /// Executions (`COUNT_STAR`).
    pub calls: u64,
    /// Total time, µs (`SUM_TIMER_WAIT`).
    pub time_us: u64,
    /// Longest execution, µs (`MAX_TIMER_WAIT`; since reset even in an interval).
    #[serde(default)]
    pub max_time_us: u64,
    #[serde(default)]
    pub lock_time_us: u64,
    pub rows_examined: u64,
    pub rows_sent: u64,
    #[serde(default)]
    pub rows_affected: u64,
    /// Executions that scanned a table without an index (`SUM_NO_INDEX_USED`).
    pub no_index_used: u64,
    /// Executions where no good index was found (`SUM_NO_GOOD_INDEX_USED`).
    #[serde(default)]
    pub no_good_index_used: u64,
    #[serde(default)]
    pub tmp_tables: u64,
    /// Internal temporary tables written to disk (`SUM_CREATED_TMP_DISK_TABLES`).
    #[serde(default)]
    pub tmp_disk_tables: u64,
    #[serde(default)]
    pub sort_merge_passes: u64,
    /// Joins that scanned the joined table without an index (`SUM_SELECT_FULL_JOIN`).
    #[serde(default)]
    pub select_full_join: u64,
    #[serde(default)]
    pub first_seen: Option<String>,
    #[serde(default)]
    pub last_seen: Option<String>,
    /// Seconds between `LAST_SEEN` and the read.
    #[serde(default)]
    pub last_seen_age_seconds: Option<u64>,
    /// Seconds between `FIRST_SEEN` and the read.
    #[serde(default)]
    pub first_seen_age_seconds: Option<u64>,
    /// One recent execution and its plan (`doctor --explain`, for the statements the rules
    /// name): literals from production unless redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<crate::StatementSample>,
}

/// The statement's leading keyword, for deciding which rules can judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    Select,
    /// UPDATE, DELETE, INSERT ... SELECT, REPLACE ... SELECT: statements that read rows to
    /// change them and so can use an index.
    ReadWrite,
    /// Anything else: INSERT ... VALUES, COMMIT, CALL, DDL.
    Other,
}

impl Digest {
    /// The leading keyword's kind (`WITH` counts as a SELECT, a leading `(` too).
    pub fn kind(&self) -> StatementKind {
        let t = self
            .text
            .trim_start_matches(|c: char| c == '(' || c.is_whitespace());
        let word: String = t
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect::<String>()
            .to_ascii_uppercase();
        let upper = self.text.to_ascii_uppercase();
        match word.as_str() {
            "SELECT" | "WITH" | "VALUES" | "TABLE" => StatementKind::Select,
            "UPDATE" | "DELETE" => StatementKind::ReadWrite,
            "INSERT" | "REPLACE" if upper.contains("SELECT") => StatementKind::ReadWrite,
            _ => StatementKind::Other,
        }
    }

    /// The tables its text names (after `FROM`, `JOIN`, `UPDATE`, `INTO`), as (schema,
    /// table): an unqualified name is in the session's default schema, so it is left out when
    /// that is unknown.
    pub fn tables(&self) -> Vec<(String, String)> {
        crate::rules::digest_text::tables_named(&self.text)
            .into_iter()
            .filter_map(|(schema, table)| Some((schema.or_else(|| self.schema.clone())?, table)))
            .collect()
    }

    /// Can an index change how this statement reads rows?
    pub fn can_use_index(&self) -> bool {
        self.kind() != StatementKind::Other
    }

    /// A k-NN vector search (`ORDER BY VEC_DISTANCE...`): performance_schema counts each as a
    /// no-index scan though the vector index is used, and its rows examined is the `LIMIT`.
    /// PD101/PD102 judge those, not the statement rules.
    pub fn is_vector_search(&self) -> bool {
        self.text.to_ascii_uppercase().contains("VEC_DISTANCE")
    }

    pub fn mean_us(&self) -> f64 {
        per(self.time_us, self.calls)
    }

    pub fn examined_per_call(&self) -> f64 {
        per(self.rows_examined, self.calls)
    }

    pub fn sent_per_call(&self) -> f64 {
        per(self.rows_sent, self.calls)
    }

    /// Share of executions that used no index or no good index (at most 1).
    pub fn no_index_share(&self) -> f64 {
        let n = self
            .no_index_used
            .saturating_add(self.no_good_index_used)
            .min(self.calls);
        per(n, self.calls)
    }

    /// Share of `total`'s statement time.
    pub fn time_share(&self, total: &StatementTotals) -> f64 {
        per(self.time_us, total.time_us).min(1.0)
    }

    /// The schema for a report: `-` when the session had no default database.
    pub fn schema_name(&self) -> &str {
        self.schema.as_deref().unwrap_or("-")
    }

    /// The digest text for a terminal or report: control characters escaped, whitespace runs
    /// folded, at most `max_chars` characters (ending in `…` when cut).
    pub fn display_text(&self, max_chars: usize) -> String {
        display_text(&self.text, max_chars)
    }

    /// The digest text shortened for a finding: a long `SELECT` list becomes its first
    /// column and `…` so the `FROM` and `WHERE` that identify the statement stay visible;
    /// then [`display_text`] to `max_chars`.
    pub fn short_text(&self, max_chars: usize) -> String {
        let text = display_text(&self.text, usize::MAX);
        if text.chars().count() <= max_chars {
            return text;
        }
        let upper = text.to_ascii_uppercase();
        if let (true, Some(from)) = (upper.starts_with("SELECT "), upper.find(" FROM ")) {
            let list = &text["SELECT ".len()..from];
            let first = list.split(" , ").next().unwrap_or(list);
            if first.len() < list.len() {
                let shorter = format!("SELECT {first} , …{}", &text[from..]);
                return display_text(&shorter, max_chars);
            }
        }
        display_text(&text, max_chars)
    }

    /// Evidence from `--explain`: the concrete execution and what its plan reads.
    pub fn sample_lines(&self) -> Vec<String> {
        let Some(sample) = &self.sample else {
            return Vec::new();
        };
        let literals = if sample.redacted {
            "literals replaced by ?"
        } else {
            "literals from production; doctor's --redact or the agent's [statements] redact = true replaces them"
        };
        let mut out = vec![format!(
            "a recent execution ({literals}): {}",
            display_text(&sample.sql_text, 300)
        )];
        out.push(match &sample.plan {
            Gathered::Available(p) => format!(
                "its plan (EXPLAIN FORMAT=JSON): {}",
                p.tables
                    .iter()
                    .map(|t| display_text(&t.summary(), 200))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Gathered::Unavailable(why) => {
                format!("its plan was not read: {}", display_text(why, 300))
            }
        });
        out
    }

    /// The `CREATE INDEX` its plan asks for: the first table read whole, with the columns of
    /// its condition (equalities, then ranges) and its sort.
    pub fn plan_index(&self) -> Option<String> {
        let sample = self.sample.as_ref()?;
        let Gathered::Available(plan) = &sample.plan else {
            return None;
        };
        let (table, cols) = plan.missing_index()?;
        let q = |s: &str| format!("`{}`", s.replace('`', "``"));
        let name: String = format!("pd_{}_{}", table, cols.join("_"))
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        // The schema the statement names the table in, else the session's.
        let named = self
            .tables()
            .into_iter()
            .find(|(_, t)| t == table)
            .map(|(schema, _)| schema);
        let on = match named
            .as_deref()
            .or(sample.schema.as_deref())
            .or(self.schema.as_deref())
        {
            Some(schema) => format!("{}.{}", q(schema), q(table)),
            None => q(table),
        };
        Some(format!(
            "CREATE INDEX {} ON {on} ({});",
            q(&name),
            cols.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ")
        ))
    }

    /// `schema` `text` with the numbers a reader needs, one line.
    pub fn evidence(&self, total: &StatementTotals) -> String {
        format!(
            "digest {} in schema {}: {} — {} of statement time, {} calls, {} per call, {:.1} rows examined and {:.1} sent per call, no index in {}",
            short_digest(&self.digest),
            self.schema_name(),
            self.short_text(200),
            pct(self.time_share(total)),
            self.calls,
            format_us(self.mean_us()),
            self.examined_per_call(),
            self.sent_per_call(),
            pct(self.no_index_share()),
        )
    }
}

fn per(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The first 12 hex digits of a digest hash: enough to find it in the table.
pub fn short_digest(d: &str) -> &str {
    d.get(..12).unwrap_or(d)
}

/// A duration in µs as `850 µs`, `12.3 ms` or `4.20 s`.
pub fn format_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

impl Statements {
    /// Where the counts come from, in words: "since the digest table was last reset (first
    /// seen …, server up 3 h), digests seen in the last 15 min".
    pub fn period_text(&self) -> String {
        let window = format_secs(self.window_seconds);
        match self.period {
            StatementPeriod::SinceReset => {
                let mut s = String::from("totals since the digest table was last reset");
                let mut parts = Vec::new();
                if let Some(f) = &self.first_seen {
                    parts.push(format!("oldest digest first seen {f}"));
                }
                if let Some(l) = &self.last_seen {
                    parts.push(format!("last seen {l}"));
                }
                if let Some(u) = self.uptime_seconds {
                    parts.push(format!("server up {}", format_secs(u)));
                }
                if !parts.is_empty() {
                    s.push_str(&format!(" ({})", parts.join(", ")));
                }
                s.push_str(&format!(
                    ", of the digests seen in the last {window} before the read"
                ));
                s
            }
            StatementPeriod::Interval => format!(
                "the {} between two reads",
                format_secs(self.interval_seconds.unwrap_or(0.0).round() as u64)
            ),
        }
    }

    /// Executions per second of `d` over the period: the interval (agent), or since the
    /// digest was first seen (doctor). `None` when the length is unknown.
    pub fn calls_per_second(&self, d: &Digest) -> Option<f64> {
        let secs = match self.period {
            StatementPeriod::Interval => self.interval_seconds?,
            StatementPeriod::SinceReset => d.first_seen_age_seconds? as f64,
        };
        (secs > 0.0).then(|| d.calls as f64 / secs)
    }

    /// The digests a statement rule may judge (listed ones with calls in the period).
    pub fn judged(&self) -> impl Iterator<Item = &Digest> {
        self.digests.iter().filter(|d| d.calls > 0)
    }
}

pub(crate) fn statements_not_collected() -> Gathered<Statements> {
    Gathered::Unavailable("statement digests were not collected".into())
}

impl MariadbFacts {
    /// The statement digests, or the `insufficient_data` verdict naming why they are missing
    /// and the fix.
    pub fn statements(&self) -> Result<&Statements, Verdict> {
        match &self.statements {
            Gathered::Available(s) => Ok(s),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "statement digests unavailable: {why}"
            ))),
        }
    }

    /// The statements with at least one judged digest, or `insufficient_data` for an idle
    /// period (nothing ran: nothing to judge, which is not a pass).
    pub fn busy_statements(&self) -> Result<&Statements, Verdict> {
        let st = self.statements()?;
        if st.total.calls == 0 || st.judged().next().is_none() {
            return Err(Verdict::insufficient(format!(
                "no application statement ran in the period judged ({}); run powerdiag while the application is busy",
                st.period_text()
            )));
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Digest {
        Digest {
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(d("SELECT * FROM `t`").kind(), StatementKind::Select);
        assert_eq!(
            d("( SELECT 1 ) UNION ( SELECT 2 )").kind(),
            StatementKind::Select
        );
        assert_eq!(d("UPDATE `t` SET `a` = ?").kind(), StatementKind::ReadWrite);
        assert_eq!(
            d("INSERT INTO `t` VALUES (...)").kind(),
            StatementKind::Other
        );
        assert_eq!(
            d("INSERT INTO `t` SELECT * FROM `u`").kind(),
            StatementKind::ReadWrite
        );
        assert_eq!(d("COMMIT").kind(), StatementKind::Other);
        assert!(
            d("SELECT `id` FROM `t` ORDER BY `VEC_DISTANCE_EUCLIDEAN` ( `e` , `VEC_FromText` (?) ) LIMIT ?")
                .is_vector_search()
        );
    }

    #[test]
    fn display_text_escapes_folds_and_cuts() {
        assert_eq!(
            display_text("SELECT  \n ?\u{1b}[2J", 100),
            "SELECT ?\\u{1b}[2J"
        );
        assert_eq!(display_text("abcdef", 3), "abc…");
        assert_eq!(display_text("ab", 3), "ab");
        let long = d("SELECT `t` . `a` , `t` . `b` , `t` . `c` FROM `t` WHERE `t` . `x` = ?");
        assert_eq!(
            long.short_text(40),
            "SELECT `t` . `a` , … FROM `t` WHERE `t`…"
        );
        assert_eq!(format_secs(900), "15 min");
        assert_eq!(format_us(850.0), "850 µs");
        assert_eq!(format_us(12_345.0), "12.3 ms");
    }
}
