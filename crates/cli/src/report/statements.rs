//! The "Top statements" section: the busiest statement digests of the period, as
//! pt-query-digest profiles a slow log, from performance_schema.

use std::fmt::Write;

use powerdiag_rules::{Gathered, Snapshot, Statements, display_text, format_us, short_digest};
use serde::Serialize;

/// Longest digest text shown in the text report (the JSON keeps the server's text).
const TEXT_CHARS: usize = 120;

/// The section as data: what JSON writes and the text and Markdown forms render.
#[derive(Debug, Serialize)]
pub(crate) struct TopStatements {
    /// Why there is no profile (performance_schema off, no privilege, ...), with the fix.
    pub(crate) unavailable: Option<String>,
    /// What the counts cover, in words.
    pub(crate) period: Option<String>,
    pub(crate) total_calls: u64,
    pub(crate) total_time_seconds: f64,
    pub(crate) statements: Vec<TopStatement>,
}

#[derive(Debug, Serialize)]
pub(crate) struct TopStatement {
    pub(crate) rank: usize,
    pub(crate) schema: Option<String>,
    pub(crate) digest: String,
    /// The digest text as the server gave it (literals are `?`).
    pub(crate) text: String,
    /// Share of all statement time in the period.
    pub(crate) time_share: f64,
    pub(crate) calls: u64,
    pub(crate) time_seconds: f64,
    pub(crate) mean_seconds: f64,
    pub(crate) rows_examined_per_call: f64,
    pub(crate) rows_sent_per_call: f64,
    /// Share of executions that used no index or no good index.
    pub(crate) no_index_share: f64,
    pub(crate) tmp_disk_tables: u64,
}

/// The section for `n` statements; `None` when no MariaDB facts exist or `n` is 0.
pub(crate) fn top(s: &Snapshot, n: u32) -> Option<TopStatements> {
    if n == 0 {
        return None;
    }
    let facts = s.mariadb.facts.as_ref()?;
    Some(match &facts.statements {
        Gathered::Unavailable(why) => TopStatements {
            unavailable: Some(why.clone()),
            period: None,
            total_calls: 0,
            total_time_seconds: 0.0,
            statements: Vec::new(),
        },
        Gathered::Available(st) => available(st, n as usize),
    })
}

fn available(st: &Statements, n: usize) -> TopStatements {
    let statements = st
        .judged()
        .take(n)
        .enumerate()
        .map(|(i, d)| TopStatement {
            rank: i + 1,
            schema: d.schema.clone(),
            digest: d.digest.clone(),
            text: d.text.clone(),
            time_share: d.time_share(&st.total),
            calls: d.calls,
            time_seconds: d.time_us as f64 / 1e6,
            mean_seconds: d.mean_us() / 1e6,
            rows_examined_per_call: d.examined_per_call(),
            rows_sent_per_call: d.sent_per_call(),
            no_index_share: d.no_index_share(),
            tmp_disk_tables: d.tmp_disk_tables,
        })
        .collect();
    TopStatements {
        unavailable: None,
        period: Some(st.period_text()),
        total_calls: st.total.calls,
        total_time_seconds: st.total.time_us as f64 / 1e6,
        statements,
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// Plain-text table lines (no colour: the caller styles the heading).
pub(crate) fn text(t: &TopStatements) -> String {
    let mut o = String::new();
    if let Some(why) = &t.unavailable {
        let _ = writeln!(o, "  unavailable: {}", super::esc(why));
        return o;
    }
    if let Some(p) = &t.period {
        let _ = writeln!(
            o,
            "  {}: {} calls, {} of statement time",
            super::esc(p),
            t.total_calls,
            super::secs(t.total_time_seconds)
        );
    }
    if t.statements.is_empty() {
        let _ = writeln!(o, "  no application statement ran in this period");
        return o;
    }
    let _ = writeln!(
        o,
        "  {:>2} {:>6} {:>8} {:>9} {:>10} {:>8} {:>7} {:>5}  {:<12} statement",
        "#", "time", "calls", "per call", "exam/call", "sent/call", "noidx", "disk", "schema"
    );
    for s in &t.statements {
        let _ = writeln!(
            o,
            "  {:>2} {:>6} {:>8} {:>9} {:>10.1} {:>8.1} {:>7} {:>5}  {:<12} {}",
            s.rank,
            pct(s.time_share),
            s.calls,
            format_us(s.mean_seconds * 1e6),
            s.rows_examined_per_call,
            s.rows_sent_per_call,
            pct(s.no_index_share),
            s.tmp_disk_tables,
            display_text(s.schema.as_deref().unwrap_or("-"), 12),
            display_text(&s.text, TEXT_CHARS)
        );
    }
    o
}

/// A Markdown table; digest text in code spans with pipes and backticks made safe.
pub(crate) fn markdown(t: &TopStatements) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Top statements\n");
    if let Some(why) = &t.unavailable {
        let _ = writeln!(o, "Unavailable: {}\n", md_cell(why));
        return o;
    }
    if let Some(p) = &t.period {
        let _ = writeln!(
            o,
            "Period: {}; {} calls, {} of statement time.\n",
            md_cell(p),
            t.total_calls,
            super::secs(t.total_time_seconds)
        );
    }
    if t.statements.is_empty() {
        let _ = writeln!(o, "No application statement ran in this period.\n");
        return o;
    }
    let _ = writeln!(
        o,
        "| # | share of time | calls | time per call | rows examined/call | rows sent/call | no index | on-disk tmp tables | schema | digest | statement |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in &t.statements {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
            s.rank,
            pct(s.time_share),
            s.calls,
            format_us(s.mean_seconds * 1e6),
            s.rows_examined_per_call,
            s.rows_sent_per_call,
            pct(s.no_index_share),
            s.tmp_disk_tables,
            md_cell(s.schema.as_deref().unwrap_or("-")),
            md_cell(short_digest(&s.digest)),
            md_code(&s.text)
        );
    }
    let _ = writeln!(o);
    o
}

/// Digest text as a Markdown code span: delimited by two backticks (the text quotes its
/// identifiers with one), padded with spaces, a double backtick inside broken up.
fn md_code(text: &str) -> String {
    let t = md_cell(&display_text(text, 300)).replace("``", "` `");
    format!("`` {t} ``")
}

fn md_cell(s: &str) -> String {
    display_text(s, 1000).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerdiag_rules::testing::{SnapshotBuilder, digest};

    #[test]
    fn renders_ranked_rows_and_escapes_text() {
        let mut d = digest(
            "SELECT `a|b` FROM `t` WHERE `x` = ?\u{1b}[31m",
            10,
            2_000_000,
            100,
            1,
        );
        d.no_index_used = 10;
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(vec![d, digest("SELECT 1", 5, 10, 0, 1)], 2_000_000)
            .build();
        let t = top(&s, 1).expect("section");
        assert_eq!(t.statements.len(), 1);
        assert!((t.statements[0].time_share - 0.5).abs() < 0.01);
        let text = text(&t);
        assert!(
            text.contains("50.0%") && text.contains("100.0%") && !text.contains('\u{1b}'),
            "{text}"
        );
        let md = markdown(&t);
        assert!(md.contains("a\\|b") && !md.contains('\u{1b}'), "{md}");
        assert!(top(&s, 0).is_none());
    }
}
