//! The Prometheus exporter-toolkit web layer, as node_exporter and mysqld_exporter have it: the
//! web configuration file (`--web.config.file`) with TLS (`tls_server_config`), response headers
//! and HTTP/2 (`http_server_config`) and bcrypt basic auth (`basic_auth_users`); and [`serve()`],
//! which serves an axum app with it.
//!
//! The format is exporter-toolkit's (`docs/web-configuration.md`, `web/tls_config.go`): unknown
//! keys are errors, relative file names resolve against the config file's directory, a
//! `basic_auth_users` value must be a bcrypt hash, a user may appear once, and an empty
//! `basic_auth_users` means no authentication.
//!
//! What powerdiag does not do is refused with an error naming the setting, never silently
//! ignored: `rate_limit`, `client_allowed_sans`, the client-auth types that accept unverified
//! certificates (`RequestClientCert`, `RequireAnyClientCert`), TLS 1.0/1.1, and the cipher suites
//! and curves rustls with the *ring* provider lacks (CBC suites, `CurveP521`). Stricter than
//! exporter-toolkit on purpose: a file that sets nothing (empty, truncated to nothing) is an
//! error, not "plain HTTP without authentication".
//!
//! The file and the certificates it names are read by [`load`] (at start) and [`reload`] (the
//! agent calls it on SIGHUP): a renewed certificate or rotated password takes effect for new
//! connections and requests without a restart; a reload that would lower security is refused.
//! Every file read is size-capped, regular-file only and never blocks ([`read`]).
//!
//! Modules: [`config`] (types, parsing, the reload rule), [`tls`] (the rustls configuration,
//! certificate expiry), [`auth`] (basic auth, the bounded bcrypt pool), [`serve`](mod@serve)
//! (axum-server's accept loop, connection cap, the guard middleware), [`read`] (safe file reads).

pub mod auth;
pub mod config;
pub mod read;
pub mod serve;
pub mod tls;
mod types;

pub use auth::{AuthLimits, AuthStats};
pub use config::{
    ClientAuth, Curve, HttpConfig, PemSource, TlsConfig, TlsVersion, WebConfig, WebConfigError,
    load, reload,
};
pub use read::{
    MAX_CONFIG_FILE_BYTES, ReadError, read_regular_file, read_regular_file_with_metadata,
};
pub use serve::{ServeOptions, default_max_connections, serve, serve_reloadable, serve_with};

#[cfg(test)]
pub(crate) mod testing;
