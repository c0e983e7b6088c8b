use std::{fmt::Write, path::Path};

use owo_colors::OwoColorize;
use powerdiag_rules::Diff;

use super::{esc, md_cell, md_code};

pub(crate) fn text(d: &Diff, pa: &Path, pb: &Path) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}", "powerdiag diff".bold());
    for (label, side, path) in [("A", &d.a, pa), ("B", &d.b, pb)] {
        let _ = writeln!(
            o,
            "  {label}: {} — {}; {}; MariaDB {} ({}{})",
            esc(&side.host).bold(),
            esc(&side.os),
            esc(&side.cpu),
            esc(&side.mariadb),
            esc(&path.display().to_string()),
            side.taken_at
                .as_deref()
                .map(|t| format!(", {}", esc(t)))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(o);
    if d.comparable.comparable {
        let _ = writeln!(o, "{}", "Comparable: same CPU model, cores and L3.".green());
    } else {
        let _ = writeln!(
            o,
            "{}",
            "NOT comparable hardware — part of any gap is the machine itself:"
                .yellow()
                .bold()
        );
        for r in &d.comparable.reasons {
            let _ = writeln!(o, "  - {}", esc(r));
        }
    }
    if let Some(r) = d.probe_latency_ratio {
        let _ = writeln!(o, "Measured: {}.", probe_sentence(r));
    }
    let _ = writeln!(o);
    if d.differences.is_empty() {
        let _ = writeln!(o, "No differences in the facts powerdiag compares.");
        if let Some(st) = &d.statements {
            o.push_str(&statements_text(st));
        }
        return o;
    }
    let _ = writeln!(o, "{}", "Differences, highest known impact first".bold());
    for x in &d.differences {
        let rule = x
            .rule
            .as_deref()
            .map(|r| format!(" [{}]", esc(r)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "\n  {} (up to {:.2}×){}",
            esc(&x.topic).bold(),
            x.impact,
            rule.dimmed()
        );
        let _ = writeln!(o, "    A: {}", esc(&x.a));
        let _ = writeln!(o, "    B: {}", esc(&x.b));
        let _ = writeln!(o, "    {}", esc(&x.evidence).dimmed());
    }
    for n in &d.notes {
        let _ = writeln!(o, "\n  note: {}", esc(n));
    }
    if let Some(st) = &d.statements {
        o.push_str(&statements_text(st));
    }
    let _ = writeln!(
        o,
        "\nDetails of a rule: powerdiag explain CODE; each side's verdicts: powerdiag doctor --from FILE"
    );
    o
}

fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "?".into(), |r| format!("{r:.2}/s"))
}

fn statements_text(st: &powerdiag_rules::StatementsDiff) -> String {
    use powerdiag_rules::{display_text, format_us};
    let mut o = String::new();
    let _ = writeln!(o, "\n{}", "Statements".bold());
    let _ = writeln!(o, "  A: {}", esc(&st.period_a));
    let _ = writeln!(o, "  B: {}", esc(&st.period_b));
    if !st.both.is_empty() {
        let _ = writeln!(
            o,
            "  on both sides (calls per second and time per call, A -> B):"
        );
        for c in &st.both {
            let regressed = if c.regressed {
                format!(
                    "REGRESSED {:.1}× (rows examined per call {:.1} -> {:.1})  ",
                    c.mean_seconds_b / c.mean_seconds_a.max(1e-9),
                    c.rows_examined_per_call_a,
                    c.rows_examined_per_call_b
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "    {regressed}{} -> {}, {} -> {}  {} {}",
                rate(c.calls_per_second_a),
                rate(c.calls_per_second_b),
                format_us(c.mean_seconds_a * 1e6),
                format_us(c.mean_seconds_b * 1e6),
                display_text(c.schema.as_deref().unwrap_or("-"), 32),
                display_text(&c.text, 120)
            );
        }
    }
    for (label, list) in [("only in A", &st.only_a), ("only in B", &st.only_b)] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(o, "  {label}:");
        for s in list {
            let _ = writeln!(
                o,
                "    {:.1}% of time, {} calls, {} per call  {} {}",
                s.time_share * 100.0,
                s.calls,
                format_us(s.mean_seconds * 1e6),
                display_text(s.schema.as_deref().unwrap_or("-"), 32),
                display_text(&s.text, 120)
            );
        }
    }
    o
}

pub(crate) fn markdown(d: &Diff, pa: &Path, pb: &Path) -> String {
    let mut o = String::from("# powerdiag diff\n\n");
    let _ = writeln!(
        o,
        "- A: **{}** — {}; {}; MariaDB {} ({})",
        esc(&d.a.host),
        esc(&d.a.os),
        esc(&d.a.cpu),
        esc(&d.a.mariadb),
        md_code(&pa.display().to_string())
    );
    let _ = writeln!(
        o,
        "- B: **{}** — {}; {}; MariaDB {} ({})",
        esc(&d.b.host),
        esc(&d.b.os),
        esc(&d.b.cpu),
        esc(&d.b.mariadb),
        md_code(&pb.display().to_string())
    );
    if d.comparable.comparable {
        let _ = writeln!(o, "- Comparable hardware.");
    } else {
        let _ = writeln!(
            o,
            "- **Not comparable hardware**: {}.",
            esc(&d.comparable.reasons.join("; "))
        );
    }
    if let Some(r) = d.probe_latency_ratio {
        let _ = writeln!(o, "- Measured: {}.", probe_sentence(r));
    }
    for n in &d.notes {
        let _ = writeln!(o, "- Note: {}.", esc(n));
    }
    let _ = writeln!(
        o,
        "\n| difference | A | B | known impact | rule | evidence |\n|---|---|---|---|---|---|"
    );
    for x in &d.differences {
        let _ = writeln!(
            o,
            "| {} | {} | {} | up to {:.2}× | {} | {} |",
            md_cell(&x.topic),
            md_cell(&x.a),
            md_cell(&x.b),
            x.impact,
            md_cell(x.rule.as_deref().unwrap_or("")),
            md_cell(&x.evidence)
        );
    }
    if let Some(st) = &d.statements {
        let cell = |s: &str| powerdiag_rules::display_text(s, 300).replace('|', "\\|");
        let _ = writeln!(
            o,
            "\n## Statements\n\n- A: {}\n- B: {}\n\n| where | schema | statement | calls/s A | calls/s B | time per call A | time per call B |\n|---|---|---|---|---|---|---|",
            cell(&st.period_a),
            cell(&st.period_b)
        );
        let us = |s: f64| powerdiag_rules::format_us(s * 1e6);
        for c in &st.both {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                if c.regressed {
                    "both, **regressed**"
                } else {
                    "both"
                },
                cell(c.schema.as_deref().unwrap_or("-")),
                cell(&c.text),
                rate(c.calls_per_second_a),
                rate(c.calls_per_second_b),
                us(c.mean_seconds_a),
                us(c.mean_seconds_b)
            );
        }
        for (label, list, a_side) in [("only A", &st.only_a, true), ("only B", &st.only_b, false)] {
            for s in list {
                let (ta, tb) = if a_side {
                    (us(s.mean_seconds), String::new())
                } else {
                    (String::new(), us(s.mean_seconds))
                };
                let _ = writeln!(
                    o,
                    "| {label} | {} | {} | | | {ta} | {tb} |",
                    cell(s.schema.as_deref().unwrap_or("-")),
                    cell(&s.text)
                );
            }
        }
    }
    o
}

/// The probe's latency ratio (B over A) as one sentence, the same in every format: which side
/// was faster and by how much, or that they ran alike (within 5%: no "1.0× faster").
fn probe_sentence(b_over_a: f64) -> String {
    if !b_over_a.is_finite() || b_over_a <= 0.0 {
        return "probe latencies could not be compared".into();
    }
    if (0.95..=1.0 / 0.95).contains(&b_over_a) {
        return format!(
            "probe queries on the same vector index ran alike on both (B/A latency {b_over_a:.2})"
        );
    }
    let (faster, x) = if b_over_a >= 1.0 {
        ("A", b_over_a)
    } else {
        ("B", 1.0 / b_over_a)
    };
    format!("probe queries on the same vector index ran {x:.1}× faster on {faster}")
}
