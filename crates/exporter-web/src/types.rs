//! The web configuration's types: [`WebConfig`] and its parts, [`WebConfigError`], and the state
//! a configuration carries that `auth` and `tls` fill in (the credential cache, the built rustls
//! configuration). A leaf: `config` parses into these, `auth` and `tls` implement on them, and
//! none of those needs another to name a type.

use std::{
    collections::{BTreeMap, HashSet},
    fmt, io,
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock},
    time::SystemTime,
};

use axum::http::{HeaderName, HeaderValue};
use powerdiag_safe_read::ReadError;
use rustls::ServerConfig;

/// A loaded web configuration file. Built by [`load`](crate::load) (or [`WebConfig::parse`]); shared as
/// `Arc<WebConfig>` by the server.
pub struct WebConfig {
    /// The file this was read from (named in every error).
    pub path: PathBuf,
    /// `tls_server_config`; `None` serves plain HTTP.
    pub tls: Option<TlsConfig>,
    /// `http_server_config`.
    pub http: HttpConfig,
    /// `basic_auth_users`: user name to bcrypt hash. Empty: no authentication.
    pub basic_auth_users: BTreeMap<String, String>,
    pub(crate) response_headers: Vec<(HeaderName, HeaderValue)>,
    /// Verified and failed credentials (digests), carried over by [`reload`](crate::reload).
    pub(crate) auth: Arc<AuthCache>,
    /// Unknown users are checked against this hash, made on first need at the highest
    /// configured cost, so they take as long as known ones.
    pub(crate) decoy: OnceLock<String>,
    pub(crate) decoy_cost: u32,
    /// The rustls configuration built by [`load`](crate::load) from the certificate files as they were then.
    pub(crate) built: Option<Built>,
}

/// `tls_server_config`, with file names resolved against the config file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `cert_file` or `cert`: the server's certificate chain, end-entity certificate first.
    pub cert: PemSource,
    /// `key_file` or `key`: the private key of the end-entity certificate.
    pub key: PemSource,
    /// `client_auth_type`.
    pub client_auth: ClientAuth,
    /// `client_ca_file` or `client_ca`: the CAs client certificates must chain to.
    pub client_ca: Option<PemSource>,
    /// `min_version` (default TLS 1.2).
    pub min_version: TlsVersion,
    /// `max_version` (default TLS 1.3).
    pub max_version: TlsVersion,
    /// `cipher_suites`: the TLS 1.2 suites by IANA name, in preference order; empty: rustls's
    /// defaults. TLS 1.3 suites are always rustls's defaults, as in Go.
    pub cipher_suites: Vec<String>,
    /// `prefer_server_cipher_suites` (default true): pick by the server's order, not the client's.
    pub prefer_server_cipher_suites: bool,
    /// `curve_preferences`: key-exchange groups in preference order; empty: rustls's defaults.
    pub curve_preferences: Vec<Curve>,
}

/// Where PEM text comes from: a file (`cert_file`, `key_file`, `client_ca_file`) or the config
/// file itself (`cert`, `key`, `client_ca`). `Debug` never shows inline text (it may be a key).
#[derive(Clone, PartialEq, Eq)]
pub enum PemSource {
    /// A file name, resolved against the config file's directory.
    File(PathBuf),
    /// PEM text written inline in the config file.
    Inline(String),
}

impl fmt::Debug for PemSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PemSource::File(path) => f.debug_tuple("File").field(path).finish(),
            PemSource::Inline(text) => write!(f, "Inline(<{} bytes>)", text.len()),
        }
    }
}

/// `client_auth_type`: whether clients must present a certificate the client CAs signed.
/// Ordered from the weakest to the strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientAuth {
    /// `NoClientCert` (the default): no client certificate is asked for.
    NoClientCert,
    /// `VerifyClientCertIfGiven`: a client may omit its certificate; one it sends must verify.
    VerifyClientCertIfGiven,
    /// `RequireAndVerifyClientCert`: every client must send a certificate that verifies.
    RequireAndVerifyClientCert,
}

/// `min_version` / `max_version`. rustls has no TLS 1.0 or 1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `TLS12`.
    Tls12,
    /// `TLS13`.
    Tls13,
}

/// A `curve_preferences` entry (Go's names); rustls's *ring* provider has no P-521.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// `X25519`.
    X25519,
    /// `CurveP256`.
    P256,
    /// `CurveP384`.
    P384,
}

/// `http_server_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// `http2` (default true). HTTP/2 is offered only over TLS (ALPN), as in exporter-toolkit.
    pub http2: bool,
    /// `headers`: added to every response, including 401s. Blank values are dropped.
    pub headers: BTreeMap<String, String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            http2: true,
            headers: BTreeMap::new(),
        }
    }
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hashes are not passwords, but there is no reason to print them either.
        let users: Vec<&str> = self.basic_auth_users.keys().map(String::as_str).collect();
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls)
            .field("http", &self.http)
            .field("basic_auth_users", &users)
            .finish_non_exhaustive()
    }
}

/// Why a web configuration file cannot be used. Every message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebConfigError {
    /// The web configuration file itself cannot be read (absent, not a regular file, too large).
    #[error("cannot read web config {}: {error}", path.display())]
    Read {
        /// The web configuration file.
        path: PathBuf,
        /// Why.
        error: ReadError,
    },
    /// Not YAML, or not the expected shape (unknown key, wrong type); the message has the line.
    #[error("web config {}: {message}", path.display())]
    Yaml {
        /// The web configuration file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// The file sets nothing: empty, only comments, or only empty sections. A truncated file
    /// looks like this, so it is refused rather than read as "plain HTTP, no authentication".
    #[error(
        "web config {}: the file sets nothing (empty, only comments or empty sections); \
         write the settings, or drop --web.config.file to serve plain HTTP without authentication",
        path.display()
    )]
    Empty {
        /// The web configuration file.
        path: PathBuf,
    },
    /// A setting has a value powerdiag does not accept.
    #[error("web config {}: {field}: {message}", path.display())]
    Invalid {
        /// The web configuration file.
        path: PathBuf,
        /// The setting, e.g. `tls_server_config.min_version`.
        field: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// A file the configuration names (certificate, key, CA) cannot be read.
    #[error("web config {}: {field}: cannot read {}: {error}", path.display(), file.display())]
    File {
        /// The web configuration file.
        path: PathBuf,
        /// The setting that names the file, e.g. `tls_server_config.cert_file`.
        field: &'static str,
        /// The file, resolved against the configuration file's directory.
        file: PathBuf,
        /// Why.
        error: ReadError,
    },
    /// The certificates and key do not make a TLS configuration (bad PEM, key does not match).
    #[error("web config {}: {message}", path.display())]
    Tls {
        /// The web configuration file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A reloaded file would lower the running security (or turn TLS on, which needs a new
    /// listener): refused, the running configuration stays.
    #[error("web config {}: {message}; the running configuration stays", path.display())]
    Downgrade {
        /// The web configuration file.
        path: PathBuf,
        /// What would be lowered and how to do it on purpose.
        message: String,
    },
}

impl WebConfigError {
    /// The same error as an [`io::Error`] of kind `InvalidInput` (for [`crate::serve()`]).
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, self)
    }
}

/// The remembered outcomes: digests of user, password and the hash they were checked against,
/// salted per process. Shared by a configuration and the ones reloaded from it.
pub(crate) struct AuthCache {
    pub(crate) salt: [u8; 32],
    pub(crate) verified: Mutex<HashSet<[u8; 32]>>,
    pub(crate) failed: Mutex<HashSet<[u8; 32]>>,
}

/// A built TLS configuration and its end-entity certificate's `notAfter`.
#[derive(Clone)]
pub(crate) struct Built {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) not_after: Option<SystemTime>,
}
