//! `powerdiag doctor`: collect, judge, report, exit with the worst severity.

use std::{path::Path, time::SystemTime};

use anyhow::{Context, Result};
use powerdiag_agent::collect::{
    self, CollectOptions, MariadbOptions, ProbeOptions,
    mariadb::target::{self, TargetRequest},
};
use powerdiag_rules::{Settings, Severity, evaluate_with};

use crate::{
    args::{CollectArgs, DoctorArgs, PathArgs},
    exit,
    progress::Bar,
    report,
};

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

/// Collects one snapshot of this host (and its server) as the flags say.
pub(crate) fn collect_snapshot(args: &CollectArgs) -> Result<powerdiag_rules::Snapshot> {
    let request = target_request(args)?;
    let candidates = target::plan(&request)?;
    let opts = CollectOptions {
        candidates,
        mariadb: MariadbOptions {
            timeout: args.timeout,
            probe: (!args.no_probe).then(|| ProbeOptions {
                queries: args.probe_queries,
                ..Default::default()
            }),
            vector_cache: None,
            reuse: None,
            statements: Some(collect::StatementOptions {
                window: args.statements_window,
                ..Default::default()
            }),
            // Status read at both ends of the sample window, so rates are real.
            status_window: collect::mariadb::StatusWindowMode::Doctor(args.sample_window),
            innodb_cache: None,
        },
        taken_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
        roots: roots(&args.paths)?,
        sample_window: args.sample_window,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let bar = Bar::new();
    let (snapshot, _stats) = runtime.block_on(collect::collect(&opts, &bar));
    // Leave no background task (e.g. a hung connection) holding the process.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(snapshot)
}

/// `--path.*`, each checked to be a directory before anything runs.
pub(crate) fn roots(p: &PathArgs) -> Result<collect::os::Roots> {
    for (flag, path) in [
        ("--path.procfs", &p.procfs),
        ("--path.sysfs", &p.sysfs),
        ("--path.rootfs", &p.rootfs),
    ] {
        anyhow::ensure!(path.is_dir(), "{flag} {}: not a directory", path.display());
    }
    Ok(collect::os::Roots {
        procfs: p.procfs.clone(),
        sysfs: p.sysfs.clone(),
        rootfs: p.rootfs.clone(),
    })
}

pub(crate) fn exit_code(worst: Option<Severity>) -> u8 {
    match worst {
        Some(Severity::Critical) => exit::CRITICAL,
        Some(Severity::Warning) => exit::WARNING,
        Some(Severity::Info) | None => exit::OK,
    }
}

fn target_request(args: &CollectArgs) -> Result<TargetRequest> {
    connection_request(
        args.connection.mariadb_url.as_deref(),
        args.connection.mariadb_defaults_file.as_deref(),
    )
}

/// The connection request from `--mariadb.url` / `POWERDIAG_MARIADB_URL` and
/// `--mariadb.defaults-file` (shared by doctor, collect and agent).
pub(crate) fn connection_request(
    url: Option<&str>,
    defaults_file: Option<&Path>,
) -> Result<TargetRequest> {
    let mut req = TargetRequest::default();
    if let Some(url) = url {
        let from_env = std::env::var("POWERDIAG_MARIADB_URL").ok().as_deref() == Some(url);
        let name = if from_env {
            "POWERDIAG_MARIADB_URL"
        } else {
            "--mariadb.url"
        };
        req.url = Some((name.to_owned(), url.to_owned()));
    }
    if let Some(path) = defaults_file {
        let text = read_config(path).with_context(|| {
            format!("--mariadb.defaults-file {}: cannot read it", path.display())
        })?;
        req.defaults_file = Some((path.to_owned(), text));
    } else if req.url.is_none()
        && let Some(home) = std::env::var_os("HOME")
    {
        let path = Path::new(&home).join(".my.cnf");
        // A ~/.my.cnf we cannot read is skipped, not fatal: it was not asked for.
        if let Ok(text) = read_config(&path) {
            req.home_my_cnf = Some((path, text));
        }
    }
    req.os_user = std::env::var("USER")
        .ok()
        .or_else(|| std::env::var("LOGNAME").ok());
    req.existing_sockets = target::DEFAULT_SOCKETS
        .iter()
        .map(std::path::PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    Ok(req)
}

/// Largest option file accepted: real ones are a few KiB.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

fn read_config(path: &Path) -> Result<String> {
    // Regular files only, checked on the opened file; opening never waits on a FIFO.
    let bytes =
        powerdiag_exporter_web::read_regular_file(path, MAX_CONFIG_BYTES).map_err(|e| match e {
            powerdiag_exporter_web::ReadError::TooLarge(_) => {
                anyhow::anyhow!("larger than 1 MiB; is this really a my.cnf?")
            }
            e => anyhow::anyhow!("{e}"),
        })?;
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("not UTF-8 text"))
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
