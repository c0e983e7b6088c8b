//! Doctor reports in text, JSON and Markdown. The only module that prints.
#![allow(clippy::print_stderr)]

mod blocking;
mod diff;
mod json;
mod markdown;
mod replication;
mod statements;
mod text;

use std::{borrow::Cow, io::Write};

use anyhow::Result;
use powerdiag_rules::{Check, Report, Snapshot, escape_lines};

/// Outside text (anything from the server, the host, a snapshot or a saved file) for one line
/// of the text or Markdown report: control, bidirectional and invisible format characters and
/// line breaks shown as `\u{1b}`, `\u{202e}`, `\n` (see [`powerdiag_rules::escape_text`]).
/// Applied before colouring, so the report's own SGR codes are the only escapes it prints.
pub(crate) use powerdiag_rules::escape_text as esc;

use crate::args::{ColorChoice, Format};

pub(crate) use json::doctor_json;

pub(crate) fn doctor(
    s: &Snapshot,
    r: &Report,
    code: u8,
    format: Format,
    color: ColorChoice,
    top_statements: u32,
) -> Result<()> {
    let top = statements::top(s, top_statements);
    let blocking = blocking::blocking(s);
    match format {
        // JSON escapes control characters itself and keeps the raw values.
        Format::Json => write_stdout(
            &(serde_json::to_string_pretty(&doctor_json(
                s,
                r,
                code,
                top.as_ref(),
                blocking.as_ref(),
            ))? + "\n"),
        ),
        Format::Markdown => write_stdout(&markdown::render(
            s,
            r,
            code,
            top.as_ref(),
            blocking.as_ref(),
        )),
        Format::Text => {
            let choice = match color {
                ColorChoice::Auto => anstream::ColorChoice::Auto,
                ColorChoice::Always => anstream::ColorChoice::Always,
                ColorChoice::Never => anstream::ColorChoice::Never,
            };
            let mut out = anstream::AutoStream::new(std::io::stdout().lock(), choice);
            ignore_broken_pipe(
                out.write_all(text::render(s, r, code, top.as_ref(), blocking.as_ref()).as_bytes())
                    .and_then(|_| out.flush()),
            )
        }
    }
}

pub(crate) fn diff(
    d: &powerdiag_rules::Diff,
    a: &std::path::Path,
    b: &std::path::Path,
    format: Format,
    color: ColorChoice,
) -> Result<()> {
    match format {
        Format::Json => write_stdout(&(serde_json::to_string_pretty(d)? + "\n")),
        Format::Markdown => write_stdout(&diff::markdown(d, a, b)),
        Format::Text => write_styled(&diff::text(d, a, b), color),
    }
}

fn write_styled(text: &str, color: ColorChoice) -> Result<()> {
    let choice = match color {
        ColorChoice::Auto => anstream::ColorChoice::Auto,
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
    };
    let mut out = anstream::AutoStream::new(std::io::stdout().lock(), choice);
    ignore_broken_pipe(out.write_all(text.as_bytes()).and_then(|_| out.flush()))
}

/// A status line on stderr (e.g. what `collect -o` wrote).
pub(crate) fn note(message: &str) {
    eprintln!("powerdiag: {message}");
}

/// Writes to stdout; a closed pipe (`powerdiag doctor | head`) is not an error.
pub(crate) fn write_stdout(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    ignore_broken_pipe(out.write_all(s.as_bytes()).and_then(|_| out.flush()))
}

fn ignore_broken_pipe(r: std::io::Result<()>) -> Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// An error that stops powerdiag, on stderr.
pub(crate) fn error(message: &str) {
    eprintln!("powerdiag: error: {message}");
}

/// What ran and what could not decide: the headline of every report format, so "no findings"
/// over checks that could not judge never reads as a clean bill of health.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Tally {
    /// The checks evaluated (every enabled rule).
    pub(crate) checks: usize,
    pub(crate) fail: usize,
    pub(crate) pass: usize,
    pub(crate) not_applicable: usize,
    pub(crate) insufficient_data: usize,
    /// Why the `insufficient_data` checks could not decide: one entry per distinct reason (the
    /// verdict's summary), with the checks that gave it, in code order.
    pub(crate) insufficient_data_reasons: Vec<Undecided>,
    /// The headline as one sentence (the text report's, without colour).
    pub(crate) line: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Undecided {
    pub(crate) reason: String,
    pub(crate) codes: Vec<String>,
}

impl Tally {
    pub(crate) fn of(r: &Report) -> Tally {
        use powerdiag_rules::Status;
        let mut reasons: Vec<Undecided> = Vec::new();
        for c in r
            .checks
            .iter()
            .filter(|c| c.status == Status::InsufficientData)
        {
            match reasons.iter_mut().find(|u| u.reason == c.summary) {
                Some(u) => u.codes.push(c.code.clone()),
                None => reasons.push(Undecided {
                    reason: c.summary.clone(),
                    codes: vec![c.code.clone()],
                }),
            }
        }
        let (checks, fail, pass, not_applicable, insufficient_data) = (
            r.checks.len(),
            r.count(Status::Fail),
            r.count(Status::Pass),
            r.count(Status::NotApplicable),
            r.count(Status::InsufficientData),
        );
        let decided = format!("{pass} pass, {not_applicable} not applicable");
        let line = match (fail, insufficient_data) {
            (0, 0) => format!("No findings: all {checks} checks decided ({decided})"),
            (0, n) => format!(
                "No findings in the {} of {checks} checks that could decide ({decided}); {n} could not (insufficient_data)",
                checks - n
            ),
            (f, 0) => format!("{f} of {checks} checks fail ({decided})"),
            (f, n) => format!(
                "{f} of {checks} checks fail ({decided}); {n} could not decide (insufficient_data)"
            ),
        };
        Tally {
            checks,
            fail,
            pass,
            not_applicable,
            insufficient_data,
            insufficient_data_reasons: reasons,
            line,
        }
    }
}

/// `1.2 ms`, `3.4 s`.
pub(crate) fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.1} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

/// `PD403 max_steal = 10.0% (default 5.0%)` for every threshold a report's checks were judged
/// with that is not the rule's default (set by `--config.file`).
pub(crate) fn configured_thresholds(r: &powerdiag_rules::Report) -> Vec<String> {
    r.checks
        .iter()
        .flat_map(|c| {
            c.thresholds.iter().map(|(key, value)| {
                match powerdiag_rules::Settings::threshold(&c.code, key) {
                    Ok(t) => format!(
                        "{} {key} = {} (default {})",
                        c.code,
                        t.format(*value),
                        t.format(t.default)
                    ),
                    // A saved report from another version may name a threshold we lack.
                    Err(_) => format!("{} {key} = {value}", c.code),
                }
            })
        })
        .collect()
}

/// The report with every verdict's text made safe for a terminal or Markdown: rules quote
/// outside values (variable values, names, paths, server messages) in summaries, evidence and
/// remediations. One-line fields are escaped with [`esc`]; the remediation keeps the line
/// breaks its rule wrote and escapes everything else.
pub(crate) fn escaped_report(r: &Report) -> Report {
    let checks = r
        .checks
        .iter()
        .map(|c| {
            // Every field named, so a new text field cannot be added without deciding here.
            let Check {
                code,
                name,
                status,
                severity,
                scope,
                summary,
                evidence,
                remediation,
                thresholds,
            } = c;
            Check {
                code: esc(code).into_owned(),
                name: esc(name).into_owned(),
                status: *status,
                severity: *severity,
                scope: *scope,
                summary: esc(summary).into_owned(),
                evidence: evidence.iter().map(|e| esc(e).into_owned()).collect(),
                remediation: escape_lines(remediation).into_owned(),
                thresholds: thresholds
                    .iter()
                    .map(|(k, v)| (esc(k).into_owned(), *v))
                    .collect(),
            }
        })
        .collect();
    Report { checks }
}

/// Outside text for a Markdown table cell: [`esc`], then `|` as `\|`.
pub(crate) fn md_cell(s: &str) -> String {
    esc(s).replace('|', "\\|")
}

/// Outside text as a Markdown code span: `` `text` `` unchanged when it holds no backtick, else
/// delimited by one backtick more than its longest run and padded with spaces (CommonMark), so
/// it cannot close the span early.
pub(crate) fn md_code(s: &str) -> String {
    let t = esc(s);
    let run = longest_run(&t, '`');
    if run == 0 {
        return format!("`{t}`");
    }
    let fence = "`".repeat(run + 1);
    format!("{fence} {t} {fence}")
}

/// The fence for a fenced code block around `s`: three backticks, or one more than the longest
/// backtick run inside so no line of `s` can close the block.
pub(crate) fn md_fence(s: &str) -> Cow<'static, str> {
    match longest_run(s, '`') {
        0..=2 => Cow::Borrowed("```"),
        n => Cow::Owned("`".repeat(n + 1)),
    }
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerdiag_rules::testing::SnapshotBuilder;

    #[test]
    fn markdown_helpers_keep_outside_text_in_its_cell_span_and_block() {
        assert_eq!(md_cell("a|b\u{1b}"), "a\\|b\\u{1b}");
        assert_eq!(md_code("root@h:3306"), "`root@h:3306`");
        assert_eq!(md_code("a`b"), "`` a`b ``");
        assert_eq!(md_code("x```\ny"), "```` x```\\ny ````");
        assert_eq!(md_fence("SET GLOBAL x = 1;"), "```");
        assert_eq!(md_fence("a\n```\nb"), "````");
    }

    #[test]
    fn text_and_markdown_escape_the_version_and_verdicts() {
        let payload = "\u{1b}]0;owned\u{7}\r\n\u{9b}\u{7f}\u{202e}\u{2066}";
        let s = SnapshotBuilder::new()
            .mariadb(&format!("11.8.6-MariaDB{payload}"))
            .build();
        let mut r = powerdiag_rules::evaluate(&s);
        r.checks[0].summary = format!("summary{payload}");
        r.checks[0].evidence = vec![format!("evidence{payload}")];
        r.checks[0].remediation = format!("line one{payload}\nline two");
        for out in [
            text::render(&s, &r, 0, None, None),
            markdown::render(&s, &r, 0, None, None),
        ] {
            // The report's own SGR colour codes removed: `ESC [ digits m`.
            let plain = out
                .split("\u{1b}[")
                .enumerate()
                .map(|(i, part)| match i {
                    0 => part,
                    _ => part
                        .trim_start_matches(|c: char| c.is_ascii_digit())
                        .strip_prefix('m')
                        .unwrap_or("\u{1b}"),
                })
                .collect::<String>();
            assert!(
                !plain.contains([
                    '\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{7f}', '\u{202e}', '\u{2066}'
                ]),
                "{out:?}"
            );
            assert!(out.contains(
                "11.8.6-MariaDB\\u{1b}]0;owned\\u{7}\\r\\n\\u{9b}\\u{7f}\\u{202e}\\u{2066}"
            ));
            assert!(out.contains("summary\\u{1b}"), "{out}");
        }
        let esc = escaped_report(&r);
        assert_eq!(
            esc.checks[0].remediation,
            "line one\\u{1b}]0;owned\\u{7}\\r\n\\u{9b}\\u{7f}\\u{202e}\\u{2066}\nline two"
        );
        assert_eq!(esc.checks[1..], r.checks[1..]);
    }
}
