//! `powerdiag completions SHELL` and `powerdiag man`: generated from the clap definition, so
//! they cannot drift from the flags.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::{
    args::{Cli, CompletionsArgs, ManArgs},
    exit, report,
};

pub(crate) fn completions(args: &CompletionsArgs) -> Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "powerdiag", &mut out);
    report::write_stdout(&String::from_utf8(out).context("completion script is not UTF-8")?)?;
    Ok(exit::OK)
}

/// The extra sections of powerdiag(1), after clap's NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
/// SUBCOMMANDS and VERSION: a title and its (term, description) items.
const SECTIONS: &[(&str, &[(&str, &str)])] = &[
    (
        "EXIT STATUS",
        &[
            ("0", "no warning or critical finding (doctor), or success"),
            ("1", "the worst finding is a warning"),
            ("2", "the worst finding is critical"),
            (
                "3",
                "powerdiag could not do what was asked: a bad flag, an unreadable configuration",
            ),
        ],
    ),
    (
        "FILES",
        &[
            (
                "/etc/powerdiag/agent.toml",
                "the agent's configuration: sample interval, probe, statement digests, rules",
            ),
            (
                "/etc/powerdiag/my.cnf",
                "the [client] section the agent connects with (0600; the unit passes it through LoadCredential=)",
            ),
            (
                "/etc/default/powerdiag-agent",
                "extra flags for the agent's systemd unit (POWERDIAG_AGENT_ARGS)",
            ),
            (
                "/usr/share/powerdiag/runbooks/",
                "one runbook per rule (PD101.md, ...) with the text of powerdiag explain, and one per agent alert",
            ),
        ],
    ),
];

pub(crate) fn man(args: &ManArgs) -> Result<u8> {
    let cmd = Cli::command();
    let Some(dir) = &args.output_dir else {
        report::write_stdout(&String::from_utf8(main_page(&cmd)?)?)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write(dir, "powerdiag.1", &main_page(&cmd)?)?;
    let mut n = 1;
    for sub in cmd.get_subcommands() {
        let name = format!("powerdiag-{}", sub.get_name());
        let sub = sub
            .clone()
            .name(name.clone())
            .version(cmd.get_version().unwrap_or_default().to_owned());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub).render(&mut page)?;
        write(dir, &format!("{name}.1"), &page)?;
        n += 1;
    }
    report::note(&format!("wrote {n} manual pages to {}", dir.display()));
    Ok(exit::OK)
}

fn main_page(cmd: &clap::Command) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    for (title, items) in SECTIONS {
        page.extend_from_slice(format!(".SH \"{title}\"\n").as_bytes());
        for (term, text) in *items {
            page.extend_from_slice(
                format!(
                    ".TP\n\\fB{}\\fR\n{}\n",
                    roff_escape(term),
                    roff_escape(text)
                )
                .as_bytes(),
            );
        }
    }
    let see_also: Vec<String> = cmd
        .get_subcommands()
        .map(|s| format!("\\fBpowerdiag\\-{}\\fR(1)", s.get_name()))
        .collect();
    page.extend_from_slice(format!(".SH \"SEE ALSO\"\n{}\n", see_also.join(", ")).as_bytes());
    Ok(page)
}

/// Plain text for a roff paragraph: backslashes and hyphens escaped, no line starting with a
/// control character.
fn roff_escape(text: &str) -> String {
    let t = text.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with(['.', '\'']) {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Writes one page through a temporary file created exclusively in `dir` and renamed over
/// `name`: a symbolic link planted at `dir/name` is replaced by the page, never followed (a
/// plain write would overwrite the link's target). Pages are readable by all (0666 less the
/// umask, as before).
fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    crate::snapshot::replace_file(&path, ".powerdiag-man-", Some(0o666), bytes).with_context(|| {
        format!(
            "--output-dir: cannot write {}: give a directory powerdiag can create files in",
            path.display()
        )
    })
}
