//! The `powerdiag agent` daemon: a sampler on its own interval, and an HTTP server that only
//! serves the last sample. One cancellation token stops both; SIGHUP reloads both
//! configuration files.

pub mod body;
pub mod catalogue;
pub mod config;
pub mod http;
pub mod metrics;
pub mod sampler;
pub mod self_info;

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::Arc,
    time::{Duration, SystemTime},
};

use powerdiag_exporter_web::{self as web, WebConfig, WebConfigError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::collect::{
    collector::Selection,
    mariadb::target::{self, Candidate, TargetRequest},
    os::Roots,
};
pub use config::{Config, ConfigError};
use metrics::ReloadStatus;
pub use self_info::BuildInfo;

/// How to run the agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// `host:port` or `:port` (all interfaces).
    pub listen_address: String,
    pub telemetry_path: String,
    pub config_file: Option<PathBuf>,
    /// The exporter-toolkit web configuration (TLS, basic auth), `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    pub candidates: Vec<Candidate>,
    /// Set with `--mariadb.defaults-file`: SIGHUP re-reads it and plans the targets again.
    pub target_reload: Option<TargetReload>,
    pub roots: Roots,
    /// `powerdiag_build_info`'s labels (the binary's build script knows them).
    pub build: BuildInfo,
    /// Collectors turned on or off by `--collector.NAME` / `--no-collector.NAME`: they win
    /// over the configuration file's `[collectors]`, at start and on every reload.
    pub collectors: Selection,
}

/// What SIGHUP needs to plan the MariaDB targets again: the defaults file's path and the rest
/// of the request the running targets were planned from (URL, `~/.my.cnf`, user, sockets).
#[derive(Debug, Clone)]
pub struct TargetReload {
    pub defaults_file: PathBuf,
    pub request: TargetRequest,
}

impl TargetReload {
    /// Reads the defaults file (with its includes) and plans the targets; TLS files are
    /// checked as at start-up. Errors name the file and never carry a password. The file
    /// refused as world-writable is an error (`load_defaults_file`), not an empty file: a
    /// reload keeps the running targets and counts as failed, as for any other bad file, where
    /// ignoring it replaced them with `root@127.0.0.1:3306`.
    pub fn plan(&self) -> Result<Vec<Candidate>, String> {
        let file = target::load_defaults_file(&self.defaults_file).map_err(|e| e.to_string())?;
        for w in &file.warnings {
            tracing::warn!(file = %self.defaults_file.display(), "{w}");
        }
        let mut request = self.request.clone();
        request.defaults_file = Some(file);
        let candidates = target::plan(&request).map_err(|e| e.to_string())?;
        for c in &candidates {
            if let (Some(tls), target::Endpoint::Tcp { .. }) = (&c.tls, &c.endpoint) {
                tls.check_files()
                    .map_err(|e| format!("{}: {e}", c.source))?;
            }
        }
        Ok(candidates)
    }
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("--config.file")]
    Config(#[from] ConfigError),
    #[error("--web.config.file")]
    WebConfig(#[from] WebConfigError),
    #[error("--web.listen-address {address}: {message}")]
    Listen { address: String, message: String },
    #[error(
        "--web.telemetry-path {0:?}: must start with / and not be one of the agent's other paths"
    )]
    TelemetryPath(String),
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// How long a shutdown may take before the agent exits anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// `:9987` → `0.0.0.0:9987`; `[::1]:9987` and `127.0.0.1:9987` as given; a host name
/// (`localhost:9987`, as exporter-toolkit accepts) resolved to its first address.
pub async fn parse_listen(address: &str) -> Result<SocketAddr, AgentError> {
    let full = if address.starts_with(':') {
        format!("0.0.0.0{address}")
    } else {
        address.to_owned()
    };
    let bad = |message: String| AgentError::Listen {
        address: address.to_owned(),
        message,
    };
    if let Ok(a) = full.parse() {
        return Ok(a);
    }
    let Some((host, port)) = full.rsplit_once(':') else {
        return Err(bad(
            "expected HOST:PORT or :PORT, e.g. :9987, 127.0.0.1:9987 or localhost:9987".into(),
        ));
    };
    let port: u16 = port.parse().map_err(|_| {
        bad(format!(
            "{port:?} is not a port number (1-65535), e.g. :9987 or localhost:9987"
        ))
    })?;
    let mut found = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| bad(format!("the host name {host:?} does not resolve: {e}")))?;
    found
        .next()
        .ok_or_else(|| bad(format!("the host name {host:?} has no address")))
}

/// The listen queue asked of the kernel (it caps it at `net.core.somaxconn`): tokio's default
/// of 128 overflowed under 200 concurrent scrapes.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as tokio's `bind` does).
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Loads the configuration (or the defaults), binds, then runs until SIGTERM/SIGINT.
/// Everything that can be wrong with the flags or the file fails here, before binding.
pub async fn run(opts: AgentOptions) -> Result<(), AgentError> {
    let mut config = match &opts.config_file {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    config.selection = config.selection.overridden_by(&opts.collectors);
    // Builds the TLS configuration too: a bad certificate fails before binding.
    let web = match &opts.web_config_file {
        Some(p) => Some(Arc::new(web::load(p)?)),
        None => None,
    };
    let tp = &opts.telemetry_path;
    if !tp.starts_with('/') || ["/", "/healthz", "/api/v1/snapshot"].contains(&tp.as_str()) {
        return Err(AgentError::TelemetryPath(tp.clone()));
    }
    let addr = parse_listen(&opts.listen_address).await?;
    let listener = bind(addr).map_err(|e| AgentError::Listen {
        address: opts.listen_address.clone(),
        message: e.to_string(),
    })?;
    let serve_options = web::ServeOptions::default();
    tracing::info!(
        address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        path = %tp,
        tls = web.as_ref().is_some_and(|w| w.tls.is_some()),
        basic_auth = web.as_ref().is_some_and(|w| !w.basic_auth_users.is_empty()),
        max_connections = serve_options.max_connections,
        "listening"
    );
    if let Some(warning) = web
        .as_ref()
        .and_then(|w| w.certificate_warning(SystemTime::now()))
    {
        tracing::warn!("{warning}");
    }

    let cancel = CancellationToken::new();
    let (config_tx, config_rx) = watch::channel(Arc::new(config));
    let (sample_tx, sample_rx) = watch::channel(None);
    let (candidates_tx, candidates_rx) = watch::channel(Arc::new(opts.candidates.clone()));
    // Start-up loaded every file: the first "reload".
    let (reload_tx, reload_rx) = watch::channel(ReloadStatus::loaded(SystemTime::now()));
    let sampler = tokio::spawn(sampler::run(
        sampler::SamplerSetup {
            candidates: candidates_rx,
            roots: opts.roots.clone(),
            build: opts.build.clone(),
        },
        config_rx.clone(),
        sample_tx,
        cancel.clone(),
    ));
    let (web_tx, web_rx) = watch::channel(web);
    tokio::spawn(signals(
        Reloadable {
            config_file: opts.config_file.clone(),
            collectors: opts.collectors.clone(),
            config: config_tx,
            web_config_file: opts.web_config_file.clone(),
            web: web_tx,
            target: opts.target_reload.clone(),
            candidates: candidates_tx,
            status: reload_tx,
        },
        cancel.clone(),
    ));

    let app = http::app(http::AppState {
        samples: sample_rx,
        config: config_rx,
        telemetry_path: tp.clone(),
        started: SystemTime::now(),
        reload: reload_rx,
    });
    let shutdown = cancel.clone();
    let server = web::serve_with(
        listener,
        app,
        web_rx,
        async move { shutdown.cancelled().await },
        serve_options,
    );
    let served = tokio::select! {
        r = server => r,
        // Drain for at most the grace period once asked to stop.
        () = async { cancel.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => Ok(()),
    };
    cancel.cancel();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, sampler).await;
    tracing::info!("stopped");
    served.map_err(AgentError::Serve)
}

/// What SIGHUP re-reads, and where the new versions go.
struct Reloadable {
    config_file: Option<PathBuf>,
    /// The command line's collector choices, applied over each reloaded file's.
    collectors: Selection,
    config: watch::Sender<Arc<Config>>,
    web_config_file: Option<PathBuf>,
    web: watch::Sender<Option<Arc<WebConfig>>>,
    target: Option<TargetReload>,
    candidates: watch::Sender<Arc<Vec<Candidate>>>,
    /// `powerdiag_config_last_reload_successful` and its timestamp.
    status: watch::Sender<ReloadStatus>,
}

impl Reloadable {
    /// Re-reads `--config.file`, `--web.config.file` and `--mariadb.defaults-file`, each on
    /// its own: a bad file keeps the running version of that file and says why. The reload
    /// counts as successful only when every file loaded.
    fn reload(&self) {
        let mut ok = true;
        match &self.config_file {
            None => tracing::info!("SIGHUP: no --config.file to reload"),
            Some(p) => match Config::load(p) {
                Ok(mut c) => {
                    c.selection = c.selection.overridden_by(&self.collectors);
                    tracing::info!(file = %p.display(), "SIGHUP: configuration reloaded");
                    self.config.send_replace(Arc::new(c));
                }
                Err(e) => {
                    ok = false;
                    tracing::error!(error = %e, "SIGHUP: reload failed; keeping the running configuration")
                }
            },
        }
        if let Some(t) = &self.target {
            match t.plan() {
                Ok(c) => {
                    // The same targets keep the open connection; others replace it at the
                    // next sample.
                    let changed = self.candidates.send_if_modified(|running| {
                        if **running == c {
                            return false;
                        }
                        *running = Arc::new(c);
                        true
                    });
                    tracing::info!(
                        file = %t.defaults_file.display(),
                        changed,
                        "SIGHUP: MariaDB defaults file reloaded"
                    );
                }
                Err(e) => {
                    ok = false;
                    tracing::error!(
                        file = %t.defaults_file.display(),
                        error = %e,
                        "SIGHUP: MariaDB defaults file reload failed; keeping the running targets"
                    )
                }
            }
        }
        if let Some(p) = &self.web_config_file {
            // web::reload refuses a file that would lower the running security (TLS or basic
            // auth dropped, a weaker client_auth_type or min_version) or that sets nothing.
            let running = self.web.borrow().clone();
            let reloaded = match &running {
                Some(running) => web::reload(running),
                None => web::load(p),
            };
            match reloaded {
                Ok(w) => {
                    tracing::info!(
                        file = %p.display(),
                        tls = w.tls.is_some(),
                        basic_auth = !w.basic_auth_users.is_empty(),
                        "SIGHUP: web configuration reloaded; new connections use it"
                    );
                    self.web.send_replace(Some(Arc::new(w)));
                }
                Err(e) => {
                    ok = false;
                    tracing::error!(error = %e, "SIGHUP: web configuration reload failed; keeping the running one")
                }
            }
        }
        self.status.send_modify(|st| {
            if ok {
                *st = ReloadStatus::loaded(SystemTime::now());
            } else {
                st.successful = false;
            }
        });
    }
}

/// SIGTERM/SIGINT stop the agent; SIGHUP reloads the configuration files (a bad file keeps the
/// running configuration and says why). A reload reads files, so it runs on a blocking thread:
/// SIGTERM is served while it runs, and a SIGHUP during a reload is ignored (and logged).
async fn signals(files: Reloadable, cancel: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::error!("cannot install signal handlers");
            return;
        };
        let files = Arc::new(files);
        let mut reloading: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
                _ = hup.recv() => {
                    if reloading.as_ref().is_some_and(|r| !r.is_finished()) {
                        tracing::warn!("SIGHUP: the previous reload is still running; this one is ignored");
                    } else {
                        let files = files.clone();
                        reloading = Some(tokio::task::spawn_blocking(move || files.reload()));
                    }
                }
                () = cancel.cancelled() => return,
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = files;
        let _ = tokio::signal::ctrl_c().await;
    }
    cancel.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--web.listen-address` takes `:PORT`, addresses and host names (as exporter-toolkit).
    #[tokio::test]
    async fn listen_addresses() {
        assert_eq!(
            parse_listen(":9987").await.unwrap(),
            "0.0.0.0:9987".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:9987").await.unwrap(),
            "[::1]:9987".parse().unwrap()
        );
        assert!(
            parse_listen("localhost:9987")
                .await
                .unwrap()
                .ip()
                .is_loopback()
        );
        for bad in [
            "9987",
            "localhost:http",
            "localhost:99999",
            "no-such-host.invalid:9987",
        ] {
            let e = parse_listen(bad).await.unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    /// Issue 16, item 3: SIGHUP with an emptied or TLS-less file keeps the running TLS + basic
    /// auth configuration (it used to switch to plain HTTP without authentication).
    #[test]
    fn a_reload_that_would_lower_security_keeps_the_running_web_config() {
        let dir = tempfile::tempdir().unwrap();
        let testdata =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../exporter-web/testdata");
        let hash = "$2y$04$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze";
        let tls = format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            testdata.join("test-server.crt").display(),
            testdata.join("test-server.key").display()
        );
        let users = format!("basic_auth_users:\n  prometheus: '{hash}'\n");
        let file = dir.path().join("web.yml");
        std::fs::write(&file, format!("{tls}{users}")).unwrap();
        let running = Arc::new(web::load(&file).unwrap());
        let (config, _config_rx) = watch::channel(Arc::new(Config::default()));
        let (web_tx, web_rx) = watch::channel(Some(running.clone()));
        let (files, _candidates, status) = reloadable(config, Some(file.clone()), web_tx, None);
        for downgrade in [String::new(), users.clone(), tls.clone()] {
            std::fs::write(&file, &downgrade).unwrap();
            files.reload();
            let now = web_rx.borrow().clone().unwrap();
            assert!(Arc::ptr_eq(&now, &running), "after {downgrade:?}");
            assert!(!status.borrow().successful, "after {downgrade:?}");
        }
        // A file that keeps both is taken.
        std::fs::write(&file, format!("{tls}{users}")).unwrap();
        files.reload();
        assert!(!Arc::ptr_eq(&web_rx.borrow().clone().unwrap(), &running));
        assert!(status.borrow().successful);
    }

    type Reloaded = (
        Reloadable,
        watch::Receiver<Arc<Vec<Candidate>>>,
        watch::Receiver<ReloadStatus>,
    );

    fn reloadable(
        config: watch::Sender<Arc<Config>>,
        web_config_file: Option<PathBuf>,
        web: watch::Sender<Option<Arc<WebConfig>>>,
        target: Option<TargetReload>,
    ) -> Reloaded {
        let planned = target
            .as_ref()
            .map(|t| t.plan().unwrap())
            .unwrap_or_default();
        let (candidates, candidates_rx) = watch::channel(Arc::new(planned));
        let (status, status_rx) = watch::channel(ReloadStatus::loaded(SystemTime::UNIX_EPOCH));
        let files = Reloadable {
            config_file: None,
            collectors: Selection::defaults(),
            config,
            web_config_file,
            web,
            target,
            candidates,
            status,
        };
        (files, candidates_rx, status_rx)
    }

    /// SIGHUP re-reads `--mariadb.defaults-file`: new credentials reach the sampler as new
    /// targets; a file that no longer loads keeps the running targets and marks the reload
    /// failed (`powerdiag_config_last_reload_successful 0`) until a good one loads again; an
    /// unchanged file keeps the targets (and the open connection).
    #[test]
    fn the_defaults_file_reloads_on_sighup_and_a_bad_one_keeps_the_targets() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my.cnf");
        let write = |text: &str| {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        };
        write("[client]\nuser=mon\npassword=first\nhost=127.0.0.1\nport=3306\n");
        let target = TargetReload {
            defaults_file: file.clone(),
            request: TargetRequest::default(),
        };
        let (config, _config_rx) = watch::channel(Arc::new(Config::default()));
        let (web, _web_rx) = watch::channel(None);
        let (files, mut candidates, status) = reloadable(config, None, web, Some(target));
        let first = candidates.borrow_and_update().clone();
        assert_eq!(first.len(), 1);

        // Unchanged: no new targets.
        files.reload();
        assert!(!candidates.has_changed().unwrap());
        assert!(status.borrow().successful);

        // A new password: new targets, a newer success.
        write("[client]\nuser=mon\npassword=second\nhost=127.0.0.1\nport=3306\n");
        let before = status.borrow().success_timestamp;
        files.reload();
        assert!(candidates.has_changed().unwrap());
        let second = candidates.borrow_and_update().clone();
        assert_ne!(first, second);
        assert!(status.borrow().successful);
        assert!(status.borrow().success_timestamp > before);

        // A missing !includedir directory (an error, as for the client): kept, failed, and
        // the error carries no password.
        write("!includedir /nonexistent/powerdiag.d\n[client]\nuser=mon\npassword=third\n");
        files.reload();
        assert!(!candidates.has_changed().unwrap());
        assert!(!status.borrow().successful);
        let err = files.target.as_ref().unwrap().plan().unwrap_err();
        assert!(err.contains("/nonexistent/powerdiag.d"), "{err}");
        assert!(!err.contains("third"), "{err}");

        // Fixed again.
        write("[client]\nuser=mon\npassword=second\nhost=127.0.0.1\nport=3306\n");
        files.reload();
        assert!(status.borrow().successful);
        assert!(
            !candidates.has_changed().unwrap(),
            "same targets as before the bad file"
        );
    }

    /// Issue 38, item 3: a world-writable `--mariadb.defaults-file` is an error for `plan()`
    /// (start-up refuses it), and on SIGHUP it keeps the running targets and marks the reload
    /// failed; it used to be ignored, leaving `root@127.0.0.1:3306` and a successful reload.
    #[test]
    fn a_world_writable_defaults_file_keeps_the_targets() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my.cnf");
        let write = |text: &str, mode: u32| {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let good = "[client]\nuser=mon\npassword=pw\nhost=192.0.2.7\nport=3307\n";
        let target = TargetReload {
            defaults_file: file.clone(),
            request: TargetRequest::default(),
        };
        write(good, 0o646);
        let err = target.plan().unwrap_err();
        assert!(
            err.contains(&file.display().to_string())
                && err.contains("world-writable (mode 0646)")
                && err.ends_with(&format!("chmod o-w {}", file.display())),
            "{err}"
        );
        assert!(
            !err.contains("pw\n") && !err.contains("password=pw"),
            "{err}"
        );

        write(good, 0o600);
        let (config, _config_rx) = watch::channel(Arc::new(Config::default()));
        let (web, _web_rx) = watch::channel(None);
        let (files, mut candidates, status) = reloadable(config, None, web, Some(target));
        let running = candidates.borrow_and_update().clone();
        assert_eq!(running.len(), 1);
        write(good, 0o666);
        files.reload();
        assert!(
            !candidates.has_changed().unwrap(),
            "the running targets are kept"
        );
        assert_eq!(*candidates.borrow(), running);
        assert!(!status.borrow().successful);
        write(good, 0o600);
        files.reload();
        assert!(status.borrow().successful);
        assert!(!candidates.has_changed().unwrap());
    }
}
