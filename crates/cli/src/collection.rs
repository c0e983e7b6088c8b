//! Collecting as the flags say: the connection request (`--mariadb.url`,
//! `--mariadb.defaults-file`, `~/.my.cnf`), the `--path.*` roots, and one snapshot. Shared by
//! `doctor`, `collect` and `agent`.

use std::{path::Path, time::SystemTime};

use anyhow::{Context, Result};
use powerdiag_agent::collect::{
    self, CollectOptions, MariadbOptions, ProbeOptions,
    mariadb::target::{self, TargetRequest},
};

use crate::{
    args::{CollectArgs, PathArgs},
    progress::Bar,
};

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
                explain: args.explain,
                redact: args.redact,
                ..Default::default()
            }),
            // Status read at both ends of the sample window, so rates are real.
            status_window: collect::mariadb::StatusWindowMode::Doctor(args.sample_window),
            innodb_cache: None,
            lock_cache: None,
            error_log_cache: None,
            schema_cache: None,
            // Read at both ends of the window too (PD222's trend).
            replication_cache: Some(Default::default()),
            dictionary_bound: Some(collect::DictionaryBound {
                max_tables: args.dictionary_max_tables,
                schema_max_tables: (!args.collectors.selection.turned_on("mariadb_schema"))
                    .then_some(args.dictionary_max_tables),
            }),
        },
        taken_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
        roots: roots(&args.paths)?,
        sample_window: args.sample_window,
        collectors: args.collectors.selection.clone(),
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
    let mut roots = collect::os::Roots {
        procfs: p.procfs.clone(),
        sysfs: p.sysfs.clone(),
        rootfs: p.rootfs.clone(),
        recorded: None,
    };
    // A recorded tree's own records (window, statvfs) beside its proc/, never for the live
    // system: checked now, so a broken recording is refused before anything is collected.
    if !roots.is_live() {
        roots.recorded = collect::os::recorded::beside(&p.procfs);
        if let Some(dir) = &roots.recorded {
            collect::os::recorded::check(dir).map_err(|e| anyhow::anyhow!("--path.procfs: {e}"))?;
        }
    }
    Ok(roots)
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
            target::URL_FLAG
        };
        req.url = Some((name.to_owned(), url.to_owned()));
    }
    if let Some(path) = defaults_file {
        // With its !include and !includedir files; errors name the file and line.
        let file = target::load_defaults_file(path)?;
        warn(&file.warnings);
        req.defaults_file = Some(file);
    } else if req.url.is_none()
        && let Some(home) = std::env::var_os("HOME")
    {
        let path = Path::new(&home).join(".my.cnf");
        // A ~/.my.cnf we cannot read is skipped, not fatal: it was not asked for. One we can
        // read is used with its includes, and its errors are reported.
        if powerdiag_safe_read::read_regular_file(&path, target::MAX_OPTION_FILE_BYTES).is_ok() {
            let file = target::load_named(&path, &path.display().to_string())?;
            warn(&file.warnings);
            req.home_my_cnf = Some(file);
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

/// A defaults-file warning (a password file others may read, an ignored file or option): a
/// logged warning in the agent (logging is set up by then), a line on stderr for the commands.
fn warn(warnings: &[String]) {
    for w in warnings {
        if tracing::dispatcher::has_been_set() {
            tracing::warn!("{w}");
        } else {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("powerdiag: warning: {w}");
            }
        }
    }
}
