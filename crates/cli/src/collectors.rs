//! `powerdiag collectors`: the registry the collector flags (`collector_flags.rs`) are made from.

use anyhow::Result;
use powerdiag_agent::collect;

use crate::{
    args::{CollectorsArgs, Format},
    exit, report,
};

/// `powerdiag collectors`: every collector with its default, what it needs and what it reads.
pub(crate) fn list(args: &CollectorsArgs) -> Result<u8> {
    let all = collect::collectors();
    let out = match args.format {
        Format::Json => {
            let rows: Vec<_> = all
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "name": d.name,
                        "default_enabled": d.default_enabled,
                        "requires": d.requires.describe(),
                        "help": d.help,
                    })
                })
                .collect();
            serde_json::to_string_pretty(&rows)? + "\n"
        }
        Format::Markdown => {
            let mut s =
                String::from("| collector | default | requires | reads |\n|---|---|---|---|\n");
            for d in &all {
                s += &format!(
                    "| {} | {} | {} | {} |\n",
                    d.name,
                    if d.default_enabled { "on" } else { "off" },
                    d.requires.describe(),
                    d.help
                );
            }
            s
        }
        Format::Text => {
            let width = all.iter().map(|d| d.name.len()).max().unwrap_or(0);
            let mut s = String::new();
            for d in &all {
                let requires = d.requires.describe();
                s += &format!(
                    "{:<width$}  {:<3}  {}{}\n",
                    d.name,
                    if d.default_enabled { "on" } else { "off" },
                    d.help,
                    if requires.is_empty() {
                        String::new()
                    } else {
                        format!(" [{requires}]")
                    },
                );
            }
            s += "\nTurn one off with --no-collector.NAME (doctor, collect, agent) or [collectors] NAME = false (agent.toml).\n";
            s
        }
    };
    report::write_stdout(&out)?;
    Ok(exit::OK)
}
