//! `powerdiag`: performance diagnostics for MariaDB hosts.

mod agent;
mod args;
mod collection;
mod collector_flags;
mod collectors;
mod diff;
mod doctor;
mod explain;
mod generate;
mod progress;
mod report;
mod snapshot;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Exit codes (Nagios plugin convention).
pub(crate) mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const WARNING: u8 = 1;
    pub(crate) const CRITICAL: u8 = 2;
    /// powerdiag itself could not do what was asked: bad flag, unreadable config.
    pub(crate) const UNKNOWN: u8 = 3;
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::UNKNOWN
            } else {
                exit::OK
            };
            // Help and version go to stdout; usage errors to stderr. Both best effort.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Doctor(a) => doctor::run(&a),
        Command::Rules(a) => explain::list(&a),
        Command::Collectors(a) => collectors::list(&a),
        Command::Explain(a) => explain::explain(&a),
        Command::Collect(a) => snapshot::collect(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Agent(a) => agent::run(&a),
        Command::Completions(a) => generate::completions(&a),
        Command::Man(a) => generate::man(&a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            report::error(&format!("{e:#}"));
            ExitCode::from(exit::UNKNOWN)
        }
    }
}
