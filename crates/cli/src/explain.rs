//! `powerdiag rules` and `powerdiag explain`.

use anyhow::{Result, bail};
use powerdiag_rules::{RULES, Unit, find_rule};

use crate::{
    args::{ExplainArgs, Format, RulesArgs},
    exit, report,
};

pub(crate) fn list(args: &RulesArgs) -> Result<u8> {
    let out = match args.format {
        Format::Json => {
            let rules: Vec<_> = RULES
                .iter()
                .map(|r| {
                    let m = r.meta();
                    let thresholds: Vec<_> = m
                        .thresholds
                        .iter()
                        .map(|t| {
                            serde_json::json!({
                                "key": t.key, "default": t.default, "min": t.min, "max": t.max,
                                "unit": t.unit.as_str(), "description": t.doc,
                            })
                        })
                        .collect();
                    serde_json::json!({
                        "code": m.code, "name": m.name, "severity": m.severity,
                        "scope": m.scope, "summary": m.summary, "thresholds": thresholds,
                    })
                })
                .collect();
            serde_json::to_string_pretty(&rules)? + "\n"
        }
        Format::Markdown => {
            let mut s = String::from("| code | name | severity | detects |\n|---|---|---|---|\n");
            for r in RULES {
                let m = r.meta();
                s += &format!(
                    "| {} | {} | {} | {} |\n",
                    m.code, m.name, m.severity, m.summary
                );
            }
            s
        }
        Format::Text => {
            let mut s = String::new();
            for r in RULES {
                let m = r.meta();
                s += &format!(
                    "{:<6} {:<32} {:<9} {}\n",
                    m.code, m.name, m.severity, m.summary
                );
            }
            s + "\nFull explanation: powerdiag explain CODE\n"
        }
    };
    report::write_stdout(&out)?;
    Ok(exit::OK)
}

pub(crate) fn explain(args: &ExplainArgs) -> Result<u8> {
    let Some(rule) = find_rule(&args.rule) else {
        bail!(
            "unknown rule {:?}: `powerdiag rules` lists the codes (PD101) and names (mhnsw-cache-undersized)",
            args.rule
        );
    };
    let m = rule.meta();
    let mut text = format!(
        "{} {} (severity: {}, scope: {})\n{}\n\n{}\n",
        m.code,
        m.name,
        m.severity,
        match m.scope {
            powerdiag_rules::Scope::Database => "database",
            powerdiag_rules::Scope::Host => "host",
        },
        m.summary,
        m.explanation()
    );
    if !m.thresholds.is_empty() {
        text += &format!(
            "\n### Thresholds\nChange them under [rules.thresholds.{}] in the file given to `powerdiag agent --config.file` (and `powerdiag doctor --config.file`):\n\n",
            m.code
        );
        for t in m.thresholds {
            let hint = match t.unit {
                Unit::Ratio => ", as 0.05 or \"5%\"",
                Unit::Bytes => ", as bytes or \"1G\"",
                Unit::Count | Unit::Number => "",
            };
            text += &format!(
                "- {} (default {}; {} from {} to {}{hint}): {}\n",
                t.key,
                t.format(t.default),
                t.unit.as_str(),
                t.format(t.min),
                t.format(t.max),
                t.doc
            );
        }
    }
    report::write_stdout(&text)?;
    Ok(exit::OK)
}
