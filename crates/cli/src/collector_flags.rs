//! The collector flags (`--collector.NAME`, `--no-collector.NAME`), generated from the
//! agent's registry as mysqld_exporter and node_exporter generate theirs.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use powerdiag_agent::collect::{
    self,
    collector::{Selection, Source},
};

/// The collectors turned on or off on the command line; a later flag for the same collector
/// wins.
#[derive(Debug, Clone, Default)]
pub(crate) struct CollectorFlags {
    pub(crate) selection: Selection,
}

const HEADING: &str = "Collectors (powerdiag collectors lists them)";

fn on_id(name: &str) -> String {
    format!("collector.{name}")
}

fn off_id(name: &str) -> String {
    format!("no-collector.{name}")
}

impl Args for CollectorFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for d in collect::collectors() {
            // The flag that changes the default is shown; the other is accepted, for scripts
            // that state every choice.
            let on = Arg::new(on_id(d.name))
                .long(on_id(d.name))
                .action(ArgAction::SetTrue)
                .help(format!("Run the {} collector: {}", d.name, d.help))
                .help_heading(HEADING)
                .hide(d.default_enabled);
            let off = Arg::new(off_id(d.name))
                .long(off_id(d.name))
                .action(ArgAction::SetTrue)
                .help(format!("Do not run the {} collector ({})", d.name, d.help))
                .help_heading(HEADING)
                .hide(!d.default_enabled);
            cmd = cmd.arg(on).arg(off);
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for CollectorFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut choices: Vec<(usize, &'static str, bool)> = Vec::new();
        for d in collect::collectors() {
            for (id, on) in [(on_id(d.name), true), (off_id(d.name), false)] {
                if m.get_flag(&id) {
                    let at = m.index_of(&id).unwrap_or_default();
                    choices.push((at, d.name, on));
                }
            }
        }
        choices.sort_unstable();
        let selection = Selection::from_choices(
            &collect::collectors(),
            choices.into_iter().map(|(_, name, on)| (name, on)),
            Source::Flags,
        )
        .map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))?;
        Ok(CollectorFlags { selection })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
