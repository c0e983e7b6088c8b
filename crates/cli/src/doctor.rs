//! `powerdiag doctor`: collect, judge, report, exit with the worst severity.

use anyhow::Result;
use powerdiag_rules::{Settings, Severity, evaluate_with};

use crate::{args::DoctorArgs, collection::collect_snapshot, exit, report};

pub(crate) fn run(args: &DoctorArgs) -> Result<u8> {
    // A bad configuration is reported before anything is collected.
    let settings = match &args.config_file {
        Some(path) => {
            powerdiag_agent::daemon::Config::load(path)
                .map_err(|e| anyhow::anyhow!("--config.file: {e}"))?
                .rules
                .settings
        }
        None => Settings::default(),
    };
    let snapshot = match &args.from {
        Some(path) => crate::snapshot::load(path)?,
        None => collect_snapshot(&args.collect)?,
    };
    let checks = evaluate_with(&snapshot, &settings);
    let code = exit_code(checks.worst());
    report::doctor(
        &snapshot,
        &checks,
        code,
        args.format,
        args.color,
        args.statements,
    )?;
    Ok(code)
}

pub(crate) fn exit_code(worst: Option<Severity>) -> u8 {
    match worst {
        Some(Severity::Critical) => exit::CRITICAL,
        Some(Severity::Warning) => exit::WARNING,
        Some(Severity::Info) | None => exit::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_nagios() {
        assert_eq!(exit_code(None), 0);
        assert_eq!(exit_code(Some(Severity::Info)), 0);
        assert_eq!(exit_code(Some(Severity::Warning)), 1);
        assert_eq!(exit_code(Some(Severity::Critical)), 2);
    }
}
