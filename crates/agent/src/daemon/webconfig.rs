//! The Prometheus exporter-toolkit web configuration file (`--web.config.file`), as node_exporter
//! and mysqld_exporter read it: TLS (`tls_server_config`), response headers and HTTP/2
//! (`http_server_config`) and bcrypt basic auth (`basic_auth_users`); and [`serve`], which serves
//! an axum app with them.
//!
//! The format is exporter-toolkit's (`docs/web-configuration.md`, `web/tls_config.go`): unknown
//! keys are errors, relative file names resolve against the config file's directory, a
//! `basic_auth_users` value must be a bcrypt hash, and an empty `basic_auth_users` means no
//! authentication.
//!
//! What powerdiag does not do is refused with an error naming the setting, never silently
//! ignored: `rate_limit`, `client_allowed_sans`, the client-auth types that accept unverified
//! certificates (`RequestClientCert`, `RequireAnyClientCert`), TLS 1.0/1.1, and the cipher suites
//! and curves rustls with the *ring* provider lacks (CBC suites, `CurveP521`). Unlike
//! exporter-toolkit, which re-reads the file on every request, the file and certificates are read
//! when loaded and when [`serve`] starts: restart the server to pick up a renewed certificate.

use std::{
    collections::{BTreeMap, HashSet},
    fmt, io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, OnceLock},
    time::Duration,
};

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use rustls::{
    RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion,
    crypto::{CryptoProvider, SupportedKxGroup, ring},
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::sync::watch;
use zeroize::Zeroizing;

/// The `WWW-Authenticate` challenge of a 401 answer.
const CHALLENGE: &str = "Basic realm=\"powerdiag\"";

/// A client must finish the TLS handshake within this time, else its connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP/1 client must send the request headers within this time (slow-loris guard).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// After the shutdown signal, open requests get this long to finish before [`serve`] returns.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Verified credentials remembered (as salted SHA-256 digests); full means start afresh.
const AUTH_CACHE_CAPACITY: usize = 128;

/// The response headers `http_server_config.headers` may set, with their allowed values (empty:
/// any value). exporter-toolkit's list, so every Prometheus exporter accepts the same file.
const CONFIGURABLE_HEADERS: &[(&str, &[&str])] = &[
    ("Content-Security-Policy", &[]),
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
];

/// Go's names of the TLS 1.3 suites: accepted in `cipher_suites` and ignored, as Go does (TLS 1.3
/// suites are not configurable there either).
const GO_TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

// ---------------------------------------------------------------------------------------------
// The configuration

/// A loaded web configuration file. Built by [`load`] (or [`WebConfig::parse`]); shared as
/// `Arc<WebConfig>` by the server, since it also holds the cache of verified credentials.
pub struct WebConfig {
    /// The file this was read from (named in every error).
    pub path: PathBuf,
    /// `tls_server_config`; `None` serves plain HTTP.
    pub tls: Option<TlsConfig>,
    /// `http_server_config`.
    pub http: HttpConfig,
    /// `basic_auth_users`: user name to bcrypt hash. Empty: no authentication.
    pub basic_auth_users: BTreeMap<String, String>,
    response_headers: Vec<(HeaderName, HeaderValue)>,
    auth: AuthState,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The web configuration file itself cannot be read.
    #[error("cannot read web config {}: {error}", path.display())]
    Read {
        /// The web configuration file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// Not YAML, or not the expected shape (unknown key, wrong type); the message has the line.
    #[error("web config {}: {message}", path.display())]
    Yaml {
        /// The web configuration file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
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
        error: io::Error,
    },
    /// The certificates and key do not make a TLS configuration (bad PEM, key does not match).
    #[error("web config {}: {message}", path.display())]
    Tls {
        /// The web configuration file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads and checks the web configuration file at `path`: the YAML, the bcrypt hashes, and, when
/// TLS is configured, the certificate, key and client CA files (the key must match the
/// certificate), exactly as [`WebConfig::rustls_config`] will use them.
pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| WebConfigError::Read {
        path: path.to_owned(),
        error,
    })?;
    let config = WebConfig::parse(&text, path)?;
    config.rustls_config()?;
    Ok(config)
}

impl WebConfig {
    /// Parses `text` as the contents of the file `path`, whose directory relative file names
    /// resolve against. Reads no file: [`load`] also checks the certificates.
    pub fn parse(text: &str, path: &Path) -> Result<WebConfig, WebConfigError> {
        // An empty file (or one with only comments) is the all-defaults configuration, as in Go.
        let raw: RawConfig = yaml_serde::from_str(text).map_err(|e| {
            let mut message = e.to_string();
            // The parser leaves the position out of the message at line 1, column 1.
            if let Some(at) = e.location().filter(|_| !message.contains(" at line ")) {
                message.push_str(&format!(" at line {} column {}", at.line(), at.column()));
            }
            WebConfigError::Yaml {
                path: path.to_owned(),
                message,
            }
        })?;
        let invalid = |field: &str, message: String| WebConfigError::Invalid {
            path: path.to_owned(),
            field: field.to_owned(),
            message,
        };

        if raw.rate_limit.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(invalid(
                "rate_limit",
                "not supported by powerdiag; remove it (rate-limit in a reverse proxy if needed)"
                    .to_owned(),
            ));
        }

        let dir = path.parent().unwrap_or(Path::new(""));
        let tls = match raw.tls_server_config {
            Some(raw_tls) => raw_tls.resolve(dir, &invalid)?,
            None => None,
        };

        let http = match raw.http_server_config {
            Some(raw_http) => HttpConfig {
                http2: raw_http.http2.unwrap_or(true),
                headers: raw_http
                    .headers
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(_, v)| !v.is_empty())
                    .collect(),
            },
            None => HttpConfig::default(),
        };
        let mut response_headers = Vec::with_capacity(http.headers.len());
        for (name, value) in &http.headers {
            let field = format!("http_server_config.headers.{name}");
            let Some((_, allowed)) = CONFIGURABLE_HEADERS.iter().find(|(n, _)| n == name) else {
                let names: Vec<&str> = CONFIGURABLE_HEADERS.iter().map(|(n, _)| *n).collect();
                return Err(invalid(
                    &field,
                    format!("this header cannot be set; use one of {}", names.join(", ")),
                ));
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(invalid(
                    &field,
                    format!("invalid value {value:?}; use one of {}", allowed.join(", ")),
                ));
            }
            let header_value = HeaderValue::from_str(value)
                .map_err(|_| invalid(&field, format!("{value:?} is not a valid header value")))?;
            // The names are the constants above, so this cannot fail; no panic path all the same.
            let header_name = HeaderName::try_from(name.as_str())
                .map_err(|_| invalid(&field, "not a header name".to_owned()))?;
            response_headers.push((header_name, header_value));
        }

        let basic_auth_users = raw.basic_auth_users.unwrap_or_default();
        let mut decoy_cost = 0;
        for (user, hash) in &basic_auth_users {
            let cost = bcrypt_cost(hash).ok_or_else(|| {
                invalid(
                    &format!("basic_auth_users.{user}"),
                    "not a bcrypt hash (expected $2y$, $2b$ or $2a$, a cost of 04 to 31 and 53 more characters); \
                     make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                        .to_owned(),
                )
            })?;
            decoy_cost = decoy_cost.max(cost);
        }

        Ok(WebConfig {
            path: path.to_owned(),
            tls,
            http,
            basic_auth_users,
            response_headers,
            auth: AuthState::new(decoy_cost),
        })
    }

    /// The rustls server configuration (ring provider) for `tls_server_config`, reading the
    /// certificate, key and client CA now; `None` when TLS is not configured. ALPN offers `h2`
    /// only if `http_server_config.http2` is on.
    pub fn rustls_config(&self) -> Result<Option<Arc<ServerConfig>>, WebConfigError> {
        let Some(tls) = &self.tls else {
            return Ok(None);
        };
        let tls_error = |message: String| WebConfigError::Tls {
            path: self.path.clone(),
            message,
        };
        let provider = Arc::new(tls.crypto_provider(&self.path)?);
        let versions: Vec<&'static SupportedProtocolVersion> = [
            (TlsVersion::Tls12, &rustls::version::TLS12),
            (TlsVersion::Tls13, &rustls::version::TLS13),
        ]
        .into_iter()
        .filter(|(v, _)| (tls.min_version..=tls.max_version).contains(v))
        .map(|(_, version)| version)
        .collect();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| tls_error(format!("tls_server_config: {e}")))?;

        let builder = match tls.client_auth {
            ClientAuth::NoClientCert => builder.with_no_client_auth(),
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
                // resolve() made sure a client CA is configured for these.
                let Some(source) = &tls.client_ca else {
                    return Err(tls_error(
                        "tls_server_config: client_auth_type needs client_ca_file".to_owned(),
                    ));
                };
                let field = source.field("client_ca");
                let pem = source.read(&self.path, field)?;
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert =
                        cert.map_err(|e| tls_error(format!("{field}: not PEM certificates: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| tls_error(format!("{field}: unusable CA certificate: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(tls_error(format!(
                        "{field}: no PEM certificate (BEGIN CERTIFICATE) in it"
                    )));
                }
                let mut verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                if tls.client_auth == ClientAuth::VerifyClientCertIfGiven {
                    verifier = verifier.allow_unauthenticated();
                }
                let verifier = verifier
                    .build()
                    .map_err(|e| tls_error(format!("{field}: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };

        let (cert_field, key_field) = (tls.cert.field("cert"), tls.key.field("key"));
        let cert_pem = tls.cert.read(&self.path, cert_field)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error(format!("{cert_field}: not PEM certificates: {e}")))?;
        if chain.is_empty() {
            return Err(tls_error(format!(
                "{cert_field}: no PEM certificate (BEGIN CERTIFICATE) in it"
            )));
        }
        let key_pem = Zeroizing::new(tls.key.read(&self.path, key_field)?);
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            tls_error(format!(
                "{key_field}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1) in it: {e}"
            ))
        })?;
        let mut config = builder.with_single_cert(chain, key).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => tls_error(format!(
                "{key_field} does not match the certificate in {cert_field}: \
                 use the key the certificate was issued for"
            )),
            e => tls_error(format!("{cert_field}, {key_field}: {e}")),
        })?;
        config.ignore_client_order = tls.prefer_server_cipher_suites;
        config.alpn_protocols = if self.http.http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(Some(Arc::new(config)))
    }

    /// Whether a request with this `Authorization` header value may pass: always when
    /// `basic_auth_users` is empty; else only `Basic` credentials of a configured user whose
    /// password matches the bcrypt hash. Unknown users cost a bcrypt run too (no user
    /// enumeration by timing); at most one bcrypt runs at a time. Verified credentials are
    /// remembered as salted SHA-256 digests (never the password), so a scrape every second costs
    /// one bcrypt, not one per scrape. Blocks for the bcrypt time (about 70 ms at cost 10).
    pub fn check_basic_auth(&self, authorization_header: Option<&str>) -> bool {
        match self.check_cached(authorization_header) {
            Cached::Allow => true,
            Cached::Deny => false,
            Cached::NeedsBcrypt => self.check_bcrypt(authorization_header),
        }
    }

    /// The fast part of [`WebConfig::check_basic_auth`]: everything but bcrypt.
    fn check_cached(&self, authorization_header: Option<&str>) -> Cached {
        if self.basic_auth_users.is_empty() {
            return Cached::Allow;
        }
        let Some(credentials) = authorization_header.and_then(Credentials::parse) else {
            return Cached::Deny;
        };
        let hash = self.basic_auth_users.get(credentials.user());
        match hash {
            Some(hash) if self.auth.is_verified(&self.auth.key(&credentials, hash)) => {
                Cached::Allow
            }
            _ => Cached::NeedsBcrypt,
        }
    }

    fn check_bcrypt(&self, authorization_header: Option<&str>) -> bool {
        let Some(credentials) = authorization_header.and_then(Credentials::parse) else {
            return false;
        };
        let known = self.basic_auth_users.get(credentials.user());
        let hash = known.map_or_else(|| self.auth.decoy_hash(), String::as_str);
        let matches = {
            let _one_at_a_time = lock(&self.auth.bcrypt);
            bcrypt::verify(credentials.password(), hash).unwrap_or(false)
        };
        match known {
            Some(hash) if matches => {
                self.auth.remember(self.auth.key(&credentials, hash));
                true
            }
            _ => false,
        }
    }
}

enum Cached {
    Allow,
    Deny,
    NeedsBcrypt,
}

/// The bcrypt cost of `hash` if it is a bcrypt hash (what Go's `bcrypt.Cost` accepts).
fn bcrypt_cost(hash: &str) -> Option<u32> {
    let parts: bcrypt::HashParts = hash.parse().ok()?;
    let cost = parts.get_cost();
    (4..=31).contains(&cost).then_some(cost)
}

// ---------------------------------------------------------------------------------------------
// Basic auth

/// Decoded `Basic` credentials; the buffer is zeroed when dropped.
struct Credentials {
    decoded: Zeroizing<Vec<u8>>,
    colon: usize,
}

impl Credentials {
    /// `Basic <base64(user:password)>`; the scheme is case-insensitive (RFC 7617), the user UTF-8.
    fn parse(header: &str) -> Option<Credentials> {
        let (scheme, encoded) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = Zeroizing::new(BASE64.decode(encoded.trim()).ok()?);
        let colon = decoded.iter().position(|&b| b == b':')?;
        std::str::from_utf8(decoded.get(..colon)?).ok()?;
        Some(Credentials { decoded, colon })
    }

    fn user(&self) -> &str {
        self.decoded
            .get(..self.colon)
            .and_then(|u| std::str::from_utf8(u).ok())
            .unwrap_or_default()
    }

    fn password(&self) -> &[u8] {
        self.decoded.get(self.colon + 1..).unwrap_or_default()
    }
}

/// The cache of verified credentials and the bcrypt serialisation.
struct AuthState {
    /// Per-process random salt of the cache digests.
    salt: [u8; 32],
    verified: Mutex<HashSet<[u8; 32]>>,
    /// Held while bcrypt runs: one at a time, as exporter-toolkit does (it is CPU-bound).
    bcrypt: Mutex<()>,
    /// Unknown users are checked against this hash, made on first need at the highest
    /// configured cost, so they take as long as known ones.
    decoy: OnceLock<String>,
    decoy_cost: u32,
}

impl AuthState {
    fn new(decoy_cost: u32) -> AuthState {
        AuthState {
            salt: rand::random(),
            verified: Mutex::new(HashSet::new()),
            bcrypt: Mutex::new(()),
            decoy: OnceLock::new(),
            decoy_cost,
        }
    }

    /// Salted SHA-256 of user, password and the hash they were verified against.
    fn key(&self, credentials: &Credentials, hash: &str) -> [u8; 32] {
        let mut digest = Sha256::new();
        digest.update(self.salt);
        for part in [
            credentials.user().as_bytes(),
            credentials.password(),
            hash.as_bytes(),
        ] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        digest.finalize().into()
    }

    fn is_verified(&self, key: &[u8; 32]) -> bool {
        lock(&self.verified).contains(key)
    }

    fn remember(&self, key: [u8; 32]) {
        let mut verified = lock(&self.verified);
        if verified.len() >= AUTH_CACHE_CAPACITY {
            verified.clear();
        }
        verified.insert(key);
    }

    fn decoy_hash(&self) -> &str {
        self.decoy.get_or_init(|| {
            let password: [u8; 16] = rand::random();
            // On failure (cannot happen for costs 4..=31) the empty hash fails every check.
            bcrypt::hash(password, self.decoy_cost.max(4)).unwrap_or_default()
        })
    }
}

/// Locks, ignoring poisoning: the guarded data stays consistent (a set, or nothing).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// The file as written; resolved into [`WebConfig`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<yaml_serde::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

/// `Some` non-empty string (Go treats an empty string as unset).
fn set(value: Option<String>) -> Option<String> {
    value.filter(|s| !s.is_empty())
}

impl RawTls {
    /// `None` when the section sets nothing (plain HTTP, as in Go); else a complete TLS setup.
    fn resolve(
        self,
        dir: &Path,
        invalid: &dyn Fn(&str, String) -> WebConfigError,
    ) -> Result<Option<TlsConfig>, WebConfigError> {
        const S: &str = "tls_server_config";
        let cert = set(self.cert);
        let key = set(self.key);
        let client_ca = set(self.client_ca);
        let cert_file = set(self.cert_file);
        let key_file = set(self.key_file);
        let client_auth_type = set(self.client_auth_type);
        let client_ca_file = set(self.client_ca_file);
        let min_version = set(self.min_version);
        let max_version = set(self.max_version);
        let cipher_suites = self.cipher_suites.unwrap_or_default();
        let curve_preferences = self.curve_preferences.unwrap_or_default();

        if self
            .client_allowed_sans
            .is_some_and(|sans| !sans.is_empty())
        {
            return Err(invalid(
                &format!("{S}.client_allowed_sans"),
                "not supported by powerdiag; remove it (client_auth_type: RequireAndVerifyClientCert with a \
                 dedicated client_ca_file limits access to the certificates that CA signs)"
                    .to_owned(),
            ));
        }
        let anything_set = cert.is_some()
            || key.is_some()
            || client_ca.is_some()
            || cert_file.is_some()
            || key_file.is_some()
            || client_auth_type.is_some()
            || client_ca_file.is_some()
            || min_version.is_some()
            || max_version.is_some()
            || !cipher_suites.is_empty()
            || !curve_preferences.is_empty()
            || self.prefer_server_cipher_suites.is_some();
        if !anything_set {
            return Ok(None);
        }

        let source = |inline: Option<String>,
                      file: Option<String>,
                      name: &str|
         -> Result<Option<PemSource>, WebConfigError> {
            match (inline, file) {
                (Some(_), Some(_)) => Err(invalid(
                    &format!("{S}.{name}"),
                    format!("set only one of {name} (inline PEM) and {name}_file"),
                )),
                (Some(text), None) => Ok(Some(PemSource::Inline(text))),
                (None, Some(file)) => Ok(Some(PemSource::File(dir.join(file)))),
                (None, None) => Ok(None),
            }
        };
        let cert = source(cert, cert_file, "cert")?.ok_or_else(|| {
            invalid(
                &format!("{S}.cert_file"),
                "missing: TLS needs cert_file (or cert) and key_file (or key)".to_owned(),
            )
        })?;
        let key = source(key, key_file, "key")?.ok_or_else(|| {
            invalid(
                &format!("{S}.key_file"),
                "missing: TLS needs cert_file (or cert) and key_file (or key)".to_owned(),
            )
        })?;
        let client_ca = source(client_ca, client_ca_file, "client_ca")?;

        let client_auth = match client_auth_type.as_deref() {
            None | Some("NoClientCert") => ClientAuth::NoClientCert,
            Some("VerifyClientCertIfGiven") => ClientAuth::VerifyClientCertIfGiven,
            Some("RequireAndVerifyClientCert") => ClientAuth::RequireAndVerifyClientCert,
            Some(other @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert")) => {
                return Err(invalid(
                    &format!("{S}.client_auth_type"),
                    format!(
                        "{other} accepts client certificates without verifying them and is not supported; \
                         use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) with client_ca_file"
                    ),
                ));
            }
            Some(other) => {
                return Err(invalid(
                    &format!("{S}.client_auth_type"),
                    format!(
                        "unknown value {other:?}; use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                    ),
                ));
            }
        };
        match (client_auth, &client_ca) {
            (ClientAuth::NoClientCert, Some(_)) => {
                return Err(invalid(
                    &format!("{S}.client_auth_type"),
                    "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type: \
                     RequireAndVerifyClientCert, or remove client_ca_file"
                        .to_owned(),
                ));
            }
            (
                ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert,
                None,
            ) => {
                return Err(invalid(
                    &format!("{S}.client_ca_file"),
                    "missing: client_auth_type verifies client certificates, so it needs client_ca_file (or client_ca)"
                        .to_owned(),
                ));
            }
            _ => {}
        }

        let version = |value: Option<&str>, name: &str, default: TlsVersion| match value {
            None => Ok(default),
            Some("TLS12") => Ok(TlsVersion::Tls12),
            Some("TLS13") => Ok(TlsVersion::Tls13),
            Some(old @ ("TLS10" | "TLS11")) => Err(invalid(
                &format!("{S}.{name}"),
                format!(
                    "{old} is not supported (rustls implements TLS 1.2 and 1.3 only); use TLS12 or TLS13"
                ),
            )),
            Some(other) => Err(invalid(
                &format!("{S}.{name}"),
                format!("unknown TLS version {other:?}; use TLS12 or TLS13"),
            )),
        };
        let min_version = version(min_version.as_deref(), "min_version", TlsVersion::Tls12)?;
        let max_version = version(max_version.as_deref(), "max_version", TlsVersion::Tls13)?;
        if min_version > max_version {
            return Err(invalid(
                &format!("{S}.min_version"),
                "is above max_version".to_owned(),
            ));
        }

        let mut suites = Vec::new();
        for name in cipher_suites {
            if GO_TLS13_SUITES.contains(&name.as_str()) {
                continue;
            }
            if tls12_suite(&name).is_none() {
                let known: Vec<&str> = tls12_suites().filter_map(|s| s.suite().as_str()).collect();
                return Err(invalid(
                    &format!("{S}.cipher_suites"),
                    format!(
                        "{name:?} is not a cipher suite rustls implements; use some of {}",
                        known.join(", ")
                    ),
                ));
            }
            suites.push(name);
        }

        let mut curves = Vec::new();
        for name in curve_preferences {
            curves.push(match name.as_str() {
                "X25519" => Curve::X25519,
                "CurveP256" => Curve::P256,
                "CurveP384" => Curve::P384,
                "CurveP521" => {
                    return Err(invalid(
                        &format!("{S}.curve_preferences"),
                        "CurveP521 is not supported by rustls's ring provider; use X25519, CurveP256 or CurveP384".to_owned(),
                    ));
                }
                other => {
                    return Err(invalid(
                        &format!("{S}.curve_preferences"),
                        format!("unknown curve {other:?}; use X25519, CurveP256 or CurveP384"),
                    ));
                }
            });
        }

        Ok(Some(TlsConfig {
            cert,
            key,
            client_auth,
            client_ca,
            min_version,
            max_version,
            cipher_suites: suites,
            prefer_server_cipher_suites: self.prefer_server_cipher_suites.unwrap_or(true),
            curve_preferences: curves,
        }))
    }
}

fn tls12_suites() -> impl Iterator<Item = SupportedCipherSuite> {
    ring::ALL_CIPHER_SUITES
        .iter()
        .copied()
        .filter(|s| s.version() == &rustls::version::TLS12)
}

fn tls12_suite(name: &str) -> Option<SupportedCipherSuite> {
    tls12_suites().find(|s| s.suite().as_str() == Some(name))
}

impl TlsConfig {
    /// The ring provider restricted to the configured TLS 1.2 suites and curves.
    fn crypto_provider(&self, path: &Path) -> Result<CryptoProvider, WebConfigError> {
        let mut provider = ring::default_provider();
        if !self.cipher_suites.is_empty() {
            let mut suites: Vec<SupportedCipherSuite> = provider
                .cipher_suites
                .iter()
                .copied()
                .filter(|s| s.version() == &rustls::version::TLS13)
                .collect();
            for name in &self.cipher_suites {
                suites.push(tls12_suite(name).ok_or_else(|| WebConfigError::Invalid {
                    path: path.to_owned(),
                    field: "tls_server_config.cipher_suites".to_owned(),
                    message: format!("{name:?} is not a cipher suite rustls implements"),
                })?);
            }
            provider.cipher_suites = suites;
        }
        if !self.curve_preferences.is_empty() {
            provider.kx_groups = self
                .curve_preferences
                .iter()
                .map(|curve| -> &'static dyn SupportedKxGroup {
                    match curve {
                        Curve::X25519 => ring::kx_group::X25519,
                        Curve::P256 => ring::kx_group::SECP256R1,
                        Curve::P384 => ring::kx_group::SECP384R1,
                    }
                })
                .collect();
        }
        Ok(provider)
    }
}

impl PemSource {
    /// The setting this came from, for messages: `tls_server_config.NAME` or `..._file`.
    fn field(&self, name: &'static str) -> &'static str {
        match (self, name) {
            (PemSource::File(_), "cert") => "tls_server_config.cert_file",
            (PemSource::File(_), "key") => "tls_server_config.key_file",
            (PemSource::File(_), _) => "tls_server_config.client_ca_file",
            (PemSource::Inline(_), "cert") => "tls_server_config.cert",
            (PemSource::Inline(_), "key") => "tls_server_config.key",
            (PemSource::Inline(_), _) => "tls_server_config.client_ca",
        }
    }

    fn read(&self, config: &Path, field: &'static str) -> Result<Vec<u8>, WebConfigError> {
        match self {
            PemSource::File(file) => std::fs::read(file).map_err(|error| WebConfigError::File {
                path: config.to_owned(),
                field,
                file: file.clone(),
                error,
            }),
            PemSource::Inline(text) => Ok(text.as_bytes().to_vec()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Serving

/// Serves `app` on `listener` until `shutdown` completes: plain HTTP/1.1 without a web config or
/// without `tls_server_config`, else TLS (HTTP/2 by ALPN unless `http2: false`). With
/// `basic_auth_users`, every request, unknown paths included, needs valid credentials, else 401
/// with `WWW-Authenticate: Basic realm="powerdiag"`; the configured headers go on every response.
///
/// After `shutdown`, no new connection is accepted and open requests get 10 s to finish. An
/// error is returned only before serving starts (the TLS files cannot be used); failed
/// handshakes and accept errors are logged and serving goes on.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    web: Option<Arc<WebConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (_keep, updates) = watch::channel(web);
    serve_reloadable(listener, app, updates, shutdown).await
}

/// [`serve`] with a web configuration that can change while serving (SIGHUP): each new
/// connection takes the TLS settings, and each request the users and headers, current at that
/// moment; open connections keep what they started with. Send only configurations whose
/// [`WebConfig::rustls_config`] succeeded: one that fails here keeps the previous TLS settings.
pub async fn serve_reloadable(
    listener: tokio::net::TcpListener,
    app: Router,
    mut web: watch::Receiver<Option<Arc<WebConfig>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let tls = |web: Option<&WebConfig>| -> Result<_, WebConfigError> {
        let acceptor = match web {
            Some(w) => w.rustls_config()?.map(tokio_rustls::TlsAcceptor::from),
            None => None,
        };
        let http2 = acceptor.is_some() && web.is_none_or(|w| w.http.http2);
        Ok((acceptor, http2))
    };
    let (mut acceptor, mut http2) = tls(web.borrow_and_update().as_deref())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let app = app.layer(middleware::from_fn_with_state(web.clone(), guard));

    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    let service = TowerToHyperService::new(app);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);

    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept on {:?} failed: {e}", listener.local_addr().ok());
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        if web.has_changed().unwrap_or(false) {
            match tls(web.borrow_and_update().as_deref()) {
                Ok(new) => (acceptor, http2) = new,
                Err(e) => {
                    tracing::error!(error = %e, "new web configuration unusable; keeping the previous TLS settings")
                }
            }
        }
        let watcher = graceful.watcher();
        let builder = if http2 {
            builder.clone()
        } else {
            builder.clone().http1_only()
        };
        let service = service.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let served = match acceptor {
                None => {
                    watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), service))
                        .await
                }
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(stream)) => {
                            watcher
                                .watch(builder.serve_connection(TokioIo::new(stream), service))
                                .await
                        }
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake with {peer} failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(
                                "TLS handshake with {peer} timed out after {TLS_HANDSHAKE_TIMEOUT:?}"
                            );
                            return;
                        }
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection from {peer}: {e}");
            }
        });
    }

    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open {DRAIN_TIMEOUT:?} after shutdown; closing them");
    }
    Ok(())
}

/// Errors of one connection, not of the listener (as axum's `serve` sorts them).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The middleware [`serve`] puts in front of every route: basic auth, then the configured headers.
async fn guard(
    State(web): State<watch::Receiver<Option<Arc<WebConfig>>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(web) = web.borrow().clone() else {
        return next.run(request).await;
    };
    let mut response = if authorized(&web, request.headers()).await {
        next.run(request).await
    } else {
        unauthorized()
    };
    for (name, value) in &web.response_headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

async fn authorized(web: &Arc<WebConfig>, headers: &HeaderMap) -> bool {
    // A header that is not visible ASCII cannot be valid Basic credentials: treated as absent.
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match web.check_cached(header) {
        Cached::Allow => true,
        Cached::Deny => false,
        Cached::NeedsBcrypt => {
            // bcrypt takes tens of milliseconds of CPU: off the async workers.
            let header = header.map(|h| Zeroizing::new(h.to_owned()));
            let web = web.clone();
            tokio::task::spawn_blocking(move || {
                web.check_bcrypt(header.as_deref().map(String::as_str))
            })
            .await
            .unwrap_or(false)
        }
    }
}

fn unauthorized() -> Response {
    let challenge = HeaderValue::from_static(CHALLENGE);
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "Unauthorized\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::{fs, net::SocketAddr};

    use axum::routing::get;
    use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

    use super::*;

    fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/daemon/testdata")
            .join(name)
    }

    /// Writes `yaml` as `web.yml` in `dir` and returns its path.
    fn write_config(dir: &Path, yaml: &str) -> PathBuf {
        let path = dir.join("web.yml");
        fs::write(&path, yaml).unwrap();
        path
    }

    fn parse(yaml: &str) -> Result<WebConfig, WebConfigError> {
        WebConfig::parse(yaml, Path::new("/etc/powerdiag/web.yml"))
    }

    fn parse_err(yaml: &str) -> String {
        parse(yaml).unwrap_err().to_string()
    }

    fn tls_yaml(cert: &str, key: &str) -> String {
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            testdata(cert).display(),
            testdata(key).display()
        )
    }

    fn basic(user: &str, password: &str) -> String {
        format!("Basic {}", BASE64.encode(format!("{user}:{password}")))
    }

    /// A config with user alice (password "s3cret") and bob ("hunter2", a `$2y$` hash as
    /// htpasswd writes), at bcrypt's lowest cost to keep the tests fast.
    fn users_yaml() -> String {
        let alice = bcrypt::hash("s3cret", 4).unwrap();
        let bob = bcrypt::hash_with_result("hunter2", 4)
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY);
        assert!(bob.starts_with("$2y$04$"), "{bob}");
        format!("basic_auth_users:\n  alice: {alice}\n  bob: {bob}\n")
    }

    // -- parsing ------------------------------------------------------------------------------

    #[test]
    fn parses_the_exporter_toolkit_sample() {
        // exporter-toolkit docs/web-config.yml
        let yaml = r#"
# TLS and basic authentication configuration example.
#
# Additionally, a certificate and a key file are needed.
tls_server_config:
  cert_file: server.crt
  key_file: server.key

# Usernames and passwords required to connect.
# Passwords are hashed with bcrypt: https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md#about-bcrypt.
basic_auth_users:
  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze
  bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m
"#;
        let config = parse(yaml).unwrap();
        let tls = config.tls.as_ref().unwrap();
        assert_eq!(
            tls.cert,
            PemSource::File(PathBuf::from("/etc/powerdiag/server.crt"))
        );
        assert_eq!(
            tls.key,
            PemSource::File(PathBuf::from("/etc/powerdiag/server.key"))
        );
        assert_eq!(tls.client_auth, ClientAuth::NoClientCert);
        assert_eq!(tls.client_ca, None);
        assert_eq!(
            (tls.min_version, tls.max_version),
            (TlsVersion::Tls12, TlsVersion::Tls13)
        );
        assert!(tls.prefer_server_cipher_suites);
        assert_eq!(config.http, HttpConfig::default());
        assert!(config.http.http2);
        assert_eq!(
            config.basic_auth_users.keys().collect::<Vec<_>>(),
            ["alice", "bob"]
        );
        assert!(config.basic_auth_users["alice"].starts_with("$2y$10$"));
    }

    #[test]
    fn parses_every_supported_setting() {
        let yaml = r#"
tls_server_config:
  cert_file: /tls/server.crt
  key_file: /tls/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  min_version: TLS13
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]
  prefer_server_cipher_suites: false
  curve_preferences: [X25519, CurveP256]
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
    Content-Security-Policy: ""
basic_auth_users: {}
"#;
        let config = parse(yaml).unwrap();
        let tls = config.tls.as_ref().unwrap();
        assert_eq!(tls.cert, PemSource::File(PathBuf::from("/tls/server.crt")));
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerifyClientCert);
        assert_eq!(
            tls.client_ca,
            Some(PemSource::File(PathBuf::from("/etc/powerdiag/ca.crt")))
        );
        assert_eq!(tls.min_version, TlsVersion::Tls13);
        // Go's TLS 1.3 names are accepted and dropped: TLS 1.3 suites are not configurable.
        assert_eq!(tls.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
        assert!(!tls.prefer_server_cipher_suites);
        assert_eq!(tls.curve_preferences, [Curve::X25519, Curve::P256]);
        assert!(!config.http.http2);
        // A blank header value means "unset".
        assert_eq!(
            config.http.headers.keys().collect::<Vec<_>>(),
            [
                "Strict-Transport-Security",
                "X-Content-Type-Options",
                "X-Frame-Options"
            ]
        );
        assert_eq!(config.response_headers.len(), 3);
        assert!(config.basic_auth_users.is_empty());
    }

    #[test]
    fn an_empty_file_or_empty_sections_mean_plain_http_without_auth() {
        for yaml in [
            "",
            "# nothing\n",
            "{}",
            "tls_server_config:\nhttp_server_config:\nbasic_auth_users:\n",
        ] {
            let config = parse(yaml).unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
            assert!(config.tls.is_none(), "{yaml:?}");
            assert!(config.basic_auth_users.is_empty(), "{yaml:?}");
            assert!(config.check_basic_auth(None), "{yaml:?}");
            assert!(config.rustls_config().unwrap().is_none(), "{yaml:?}");
        }
    }

    #[test]
    fn inline_pem_is_accepted_and_never_printed() {
        let key = fs::read_to_string(testdata("test-server.key")).unwrap();
        let cert = fs::read_to_string(testdata("test-server.crt")).unwrap();
        let indent = |pem: &str| {
            pem.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        };
        let yaml = format!(
            "tls_server_config:\n  cert: |\n{}  key: |\n{}",
            indent(&cert),
            indent(&key)
        );
        let config = parse(&yaml).unwrap();
        assert!(matches!(
            config.tls.as_ref().unwrap().key,
            PemSource::Inline(_)
        ));
        assert!(config.rustls_config().unwrap().is_some());
        let debug = format!("{config:?}");
        assert!(!debug.contains("PRIVATE KEY"), "{debug}");
        assert!(debug.contains("Inline(<"), "{debug}");
    }

    #[test]
    fn debug_shows_users_but_not_their_hashes() {
        let config = parse(&users_yaml()).unwrap();
        let debug = format!("{config:?}");
        assert!(debug.contains("alice") && debug.contains("bob"), "{debug}");
        assert!(!debug.contains("$2"), "{debug}");
    }

    #[test]
    fn relative_paths_resolve_against_the_config_files_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("tls")).unwrap();
        fs::copy(
            testdata("test-server.crt"),
            dir.path().join("tls/server.crt"),
        )
        .unwrap();
        fs::copy(
            testdata("test-server.key"),
            dir.path().join("tls/server.key"),
        )
        .unwrap();
        fs::copy(testdata("test-ca.crt"), dir.path().join("ca.crt")).unwrap();
        let path = write_config(
            dir.path(),
            "tls_server_config:\n  cert_file: tls/server.crt\n  key_file: ./tls/server.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
        );
        // Loaded from elsewhere: the working directory must not matter.
        let config = load(&path).unwrap();
        let tls = config.tls.as_ref().unwrap();
        assert_eq!(tls.cert, PemSource::File(dir.path().join("tls/server.crt")));
        assert_eq!(
            tls.key,
            PemSource::File(dir.path().join("./tls/server.key"))
        );
        assert_eq!(
            tls.client_ca,
            Some(PemSource::File(dir.path().join("ca.crt")))
        );
        assert!(config.rustls_config().unwrap().is_some());
    }

    #[test]
    fn unknown_fields_are_rejected_by_name_with_their_line() {
        let e = parse_err("tls_config:\n  cert_file: a\n");
        assert!(e.contains("/etc/powerdiag/web.yml"), "{e}");
        assert!(e.contains("unknown field `tls_config`"), "{e}");
        assert!(e.contains("line 1"), "{e}");

        let e =
            parse_err("basic_auth_users: {}\ntls_server_config:\n  cert_file: a\n  key_fil: b\n");
        assert!(e.contains("unknown field `key_fil`"), "{e}");
        assert!(e.contains("line 4"), "{e}");

        let e = parse_err("http_server_config:\n  http3: true\n");
        assert!(e.contains("unknown field `http3`"), "{e}");
    }

    #[test]
    fn bad_yaml_names_the_line() {
        let e = parse_err("basic_auth_users:\n  alice: [unclosed\n");
        assert!(e.starts_with("web config /etc/powerdiag/web.yml: "), "{e}");
        assert!(e.contains("line"), "{e}");
        let e = parse_err("http_server_config:\n  http2: maybe\n");
        assert!(e.contains("http2"), "{e}");
    }

    #[test]
    fn basic_auth_values_must_be_bcrypt_hashes() {
        for bad in [
            "s3cret",
            "$1$abcdefgh$abcdefghijklmnopqrstuv",
            "$2y$03$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze",
            "''",
        ] {
            let e = parse_err(&format!("basic_auth_users:\n  alice: {bad}\n"));
            assert!(
                e.contains("basic_auth_users.alice: not a bcrypt hash"),
                "{bad}: {e}"
            );
            assert!(e.contains("htpasswd"), "{e}");
        }
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        let cases = [
            (
                "rate_limit:\n  interval: 1s\n  burst: 5\n",
                "rate_limit: not supported",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n",
                "min_version: TLS11 is not supported",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: SSL3\n",
                "unknown TLS version \"SSL3\"",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
                "min_version: is above max_version",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n  client_ca_file: c\n",
                "RequireAnyClientCert accepts client certificates without verifying",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Whatever\n",
                "unknown value \"Whatever\"",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
                "client_ca_file: missing",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
                "client_ca_file is set but client_auth_type is NoClientCert",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n",
                "client_allowed_sans: not supported",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
                "\"TLS_RSA_WITH_AES_128_CBC_SHA\" is not a cipher suite rustls implements",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [CurveP521]\n",
                "CurveP521 is not supported",
            ),
            (
                "tls_server_config:\n  cert_file: a\n",
                "tls_server_config.key_file: missing",
            ),
            (
                "tls_server_config:\n  key_file: b\n",
                "tls_server_config.cert_file: missing",
            ),
            (
                "tls_server_config:\n  min_version: TLS13\n",
                "tls_server_config.cert_file: missing",
            ),
            (
                "tls_server_config:\n  cert: x\n  cert_file: a\n  key_file: b\n",
                "set only one of cert (inline PEM) and cert_file",
            ),
            (
                "http_server_config:\n  headers:\n    Server: powerdiag\n",
                "headers.Server: this header cannot be set",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
                "invalid value \"allow\"; use one of deny, sameorigin",
            ),
        ];
        for (yaml, expected) in cases {
            let e = parse_err(yaml);
            assert!(
                e.starts_with("web config /etc/powerdiag/web.yml: "),
                "{yaml}: {e}"
            );
            assert!(
                e.contains(expected),
                "{yaml}\nexpected: {expected}\ngot: {e}"
            );
            assert!(!e.ends_with('.'), "{e}");
        }
    }

    // -- loading and TLS ----------------------------------------------------------------------

    #[test]
    fn builds_a_rustls_config_from_the_test_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let config = load(&write_config(
            dir.path(),
            &tls_yaml("test-server.crt", "test-server.key"),
        ))
        .unwrap();
        let rustls = config.rustls_config().unwrap().unwrap();
        assert_eq!(
            rustls.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(rustls.ignore_client_order);

        let yaml = tls_yaml("test-server.crt", "test-server.key")
            + "  min_version: TLS13\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n  curve_preferences: [CurveP384]\nhttp_server_config:\n  http2: false\n";
        let config = load(&write_config(dir.path(), &yaml)).unwrap();
        let rustls = config.rustls_config().unwrap().unwrap();
        assert_eq!(rustls.alpn_protocols, [b"http/1.1".to_vec()]);
        let suites: Vec<_> = rustls
            .crypto_provider()
            .cipher_suites
            .iter()
            .filter_map(|s| s.suite().as_str())
            .collect();
        assert!(
            suites.contains(&"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
            "{suites:?}"
        );
        assert!(
            !suites.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            "{suites:?}"
        );
        assert!(suites.contains(&"TLS13_AES_128_GCM_SHA256"), "{suites:?}");
        assert_eq!(rustls.crypto_provider().kx_groups.len(), 1);
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_config(dir.path(), &tls_yaml("test-server.crt", "test-other.key"));
        let e = load(&path).unwrap_err();
        assert!(matches!(e, WebConfigError::Tls { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("tls_server_config.key_file does not match the certificate in tls_server_config.cert_file"), "{e}");
    }

    #[test]
    fn missing_or_unusable_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(&dir.path().join("absent.yml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot read web config ") && e.contains("absent.yml"),
            "{e}"
        );

        let path = write_config(
            dir.path(),
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
        );
        let e = load(&path).unwrap_err().to_string();
        assert!(
            e.contains("tls_server_config.cert_file: cannot read ") && e.contains("nope.crt"),
            "{e}"
        );

        // A key where the certificate belongs, and a certificate where the key belongs.
        let e = load(&write_config(
            dir.path(),
            &tls_yaml("test-server.key", "test-server.key"),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tls_server_config.cert_file: no PEM certificate"),
            "{e}"
        );
        let e = load(&write_config(
            dir.path(),
            &tls_yaml("test-server.crt", "test-server.crt"),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tls_server_config.key_file: no usable PEM private key"),
            "{e}"
        );
    }

    // -- basic auth ---------------------------------------------------------------------------

    #[test]
    fn basic_auth_accepts_only_the_right_password() {
        let config = parse(&users_yaml()).unwrap();
        assert!(config.check_basic_auth(Some(&basic("alice", "s3cret"))));
        assert!(
            config.check_basic_auth(Some(&basic("bob", "hunter2"))),
            "$2y$ hashes (htpasswd) work"
        );
        // The scheme is case-insensitive; surrounding blanks are fine.
        assert!(
            config.check_basic_auth(Some(&format!(" basic {}", BASE64.encode("alice:s3cret"))))
        );

        assert!(!config.check_basic_auth(Some(&basic("alice", "wrong"))));
        assert!(
            !config.check_basic_auth(Some(&basic("alice", "hunter2"))),
            "bob's password"
        );
        assert!(!config.check_basic_auth(Some(&basic("alice", ""))));
        assert!(
            !config.check_basic_auth(Some(&basic("mallory", "s3cret"))),
            "unknown user"
        );
        assert!(!config.check_basic_auth(Some(&basic("", ""))));
    }

    #[test]
    fn basic_auth_rejects_missing_and_malformed_headers() {
        let config = parse(&users_yaml()).unwrap();
        assert!(!config.check_basic_auth(None));
        assert!(!config.check_basic_auth(Some("")));
        assert!(!config.check_basic_auth(Some("Basic")));
        assert!(!config.check_basic_auth(Some("Basic ")));
        assert!(
            !config.check_basic_auth(Some(&format!("Bearer {}", BASE64.encode("alice:s3cret"))))
        );
        assert!(!config.check_basic_auth(Some("Basic !!!not-base64!!!")));
        assert!(
            !config.check_basic_auth(Some("Basic YWxpY2U6czNjcmV0=")),
            "bad padding"
        );
        assert!(
            !config.check_basic_auth(Some(&format!("Basic {}", BASE64.encode("alice-s3cret")))),
            "no colon"
        );
        assert!(
            !config.check_basic_auth(Some(&format!(
                "Basic {}",
                BASE64.encode(b"\xffalice:s3cret")
            ))),
            "user not UTF-8"
        );
    }

    #[test]
    fn verified_credentials_are_cached_as_digests() {
        let config = parse(&users_yaml()).unwrap();
        let right = basic("alice", "s3cret");
        assert!(matches!(
            config.check_cached(Some(&right)),
            Cached::NeedsBcrypt
        ));
        assert!(config.check_basic_auth(Some(&right)));
        assert!(matches!(config.check_cached(Some(&right)), Cached::Allow));
        // Failures are not cached (nor are they a shortcut): the next try runs bcrypt again.
        assert!(!config.check_basic_auth(Some(&basic("alice", "wrong"))));
        assert!(matches!(
            config.check_cached(Some(&basic("alice", "wrong"))),
            Cached::NeedsBcrypt
        ));
        assert!(matches!(config.check_cached(None), Cached::Deny));
        // Only fixed-size digests are kept, never the password.
        let verified = lock(&config.auth.verified);
        assert_eq!(verified.len(), 1);
        assert!(
            !verified
                .iter()
                .any(|k| k.windows(6).any(|w| w == b"s3cret"))
        );
    }

    #[test]
    fn the_cache_stays_bounded() {
        let config = parse(&users_yaml()).unwrap();
        for i in 0..(AUTH_CACHE_CAPACITY * 2 + 3) {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            config.auth.remember(key);
        }
        let len = lock(&config.auth.verified).len();
        assert!((1..=AUTH_CACHE_CAPACITY).contains(&len), "{len}");
    }

    #[test]
    fn no_users_means_no_authentication() {
        let config = parse("basic_auth_users: {}\n").unwrap();
        assert!(config.check_basic_auth(None));
        assert!(config.check_basic_auth(Some("garbage")));
    }

    // -- serving ------------------------------------------------------------------------------

    fn app() -> Router {
        Router::new().route("/metrics", get(|| async { "powerdiag_up 1\n" }))
    }

    struct Server {
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        task: JoinHandle<io::Result<()>>,
    }

    impl Server {
        async fn start(web: Option<WebConfig>) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (stop, stopped) = oneshot::channel::<()>();
            let task = tokio::spawn(serve(listener, app(), web.map(Arc::new), async move {
                let _ = stopped.await;
            }));
            Server { addr, stop, task }
        }

        async fn stop(self) {
            self.stop.send(()).unwrap();
            tokio::time::timeout(Duration::from_secs(5), self.task)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        }
    }

    /// A client that trusts `roots` (none: trusts nothing), with the ring provider, optionally
    /// presenting the test client certificate.
    fn client(roots: &[&str], client_cert: bool) -> reqwest::Client {
        let mut store = RootCertStore::empty();
        for root in roots {
            for cert in CertificateDer::pem_file_iter(testdata(root)).unwrap() {
                store.add(cert.unwrap()).unwrap();
            }
        }
        let builder =
            rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(store);
        let mut tls = if client_cert {
            let chain = CertificateDer::pem_file_iter(testdata("test-client.crt"))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(testdata("test-client.key")).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        } else {
            builder.with_no_client_auth()
        };
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        reqwest::Client::builder()
            .no_proxy()
            .tls_backend_preconfigured(tls)
            .build()
            .unwrap()
    }

    async fn get_status(
        client: &reqwest::Client,
        url: &str,
        auth: Option<&str>,
    ) -> reqwest::Response {
        let mut request = client.get(url);
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        request.send().await.unwrap()
    }

    fn tls_web_config(dir: &Path, extra: &str) -> WebConfig {
        let yaml = tls_yaml("test-server.crt", "test-server.key") + extra;
        load(&write_config(dir, &yaml)).unwrap()
    }

    #[tokio::test]
    async fn https_with_basic_auth() {
        let dir = tempfile::tempdir().unwrap();
        let extra =
            users_yaml() + "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n";
        let server = Server::start(Some(tls_web_config(dir.path(), &extra))).await;
        let client = client(&["test-ca.crt"], false);
        let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());

        let ok = get_status(&client, &url, Some(&basic("alice", "s3cret"))).await;
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.version(), reqwest::Version::HTTP_2, "h2 by ALPN");
        assert_eq!(ok.headers()["x-content-type-options"], "nosniff");
        assert_eq!(ok.text().await.unwrap(), "powerdiag_up 1\n");
        // Again: now from the cache.
        assert_eq!(
            get_status(&client, &url, Some(&basic("alice", "s3cret")))
                .await
                .status(),
            200
        );

        for auth in [
            Some(basic("alice", "wrong")),
            Some(basic("eve", "s3cret")),
            Some("Bearer x".to_owned()),
            None,
        ] {
            let denied = get_status(&client, &url, auth.as_deref()).await;
            assert_eq!(denied.status(), 401, "{auth:?}");
            assert_eq!(
                denied.headers()["www-authenticate"],
                "Basic realm=\"powerdiag\""
            );
            assert_eq!(
                denied.headers()["x-content-type-options"],
                "nosniff",
                "headers on 401s too"
            );
        }
        // Unknown paths are behind the guard as well: 401, not 404.
        let other = format!("https://127.0.0.1:{}/nope", server.addr.port());
        assert_eq!(get_status(&client, &other, None).await.status(), 401);
        assert_eq!(
            get_status(&client, &other, Some(&basic("bob", "hunter2")))
                .await
                .status(),
            404
        );
        server.stop().await;
    }

    #[tokio::test]
    async fn https_without_http2_speaks_http1() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(Some(tls_web_config(
            dir.path(),
            "http_server_config:\n  http2: false\n",
        )))
        .await;
        let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
        let response = get_status(&client(&["test-ca.crt"], false), &url, None).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), reqwest::Version::HTTP_11);
        server.stop().await;
    }

    #[tokio::test]
    async fn a_client_that_does_not_trust_the_certificate_fails() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(Some(tls_web_config(dir.path(), ""))).await;
        let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
        let e = client(&[], false).get(&url).send().await.unwrap_err();
        assert!(e.is_connect(), "{e:?}");
        // Plain HTTP to the TLS port does not get an answer either.
        let plain = client(&[], false);
        assert!(
            plain
                .get(format!("http://127.0.0.1:{}/metrics", server.addr.port()))
                .send()
                .await
                .is_err()
        );
        // The server survived both.
        let ok = get_status(&client(&["test-ca.crt"], false), &url, None).await;
        assert_eq!(ok.status(), 200);
        server.stop().await;
    }

    #[tokio::test]
    async fn client_certificates_are_required_when_configured() {
        let dir = tempfile::tempdir().unwrap();
        let extra = format!(
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
            testdata("test-ca.crt").display()
        );
        let server = Server::start(Some(tls_web_config(dir.path(), &extra))).await;
        let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
        assert_eq!(
            get_status(&client(&["test-ca.crt"], true), &url, None)
                .await
                .status(),
            200
        );
        assert!(
            client(&["test-ca.crt"], false)
                .get(&url)
                .send()
                .await
                .is_err()
        );
        server.stop().await;
    }

    #[tokio::test]
    async fn plain_http_with_and_without_a_web_config() {
        let server = Server::start(None).await;
        let url = format!("http://127.0.0.1:{}/metrics", server.addr.port());
        let plain = client(&[], false);
        let response = get_status(&plain, &url, None).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), reqwest::Version::HTTP_11);
        server.stop().await;

        let server = Server::start(Some(parse(&users_yaml()).unwrap())).await;
        let url = format!("http://127.0.0.1:{}/metrics", server.addr.port());
        assert_eq!(
            get_status(&plain, &url, Some(&basic("alice", "s3cret")))
                .await
                .status(),
            200
        );
        assert_eq!(
            get_status(&plain, &url, Some(&basic("alice", "nope")))
                .await
                .status(),
            401
        );
        assert_eq!(get_status(&plain, &url, None).await.status(), 401);
        server.stop().await;
    }

    #[tokio::test]
    async fn shutdown_stops_accepting_and_returns() {
        let server = Server::start(None).await;
        let addr = server.addr;
        server.stop().await;
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "listener closed"
        );
    }

    #[tokio::test]
    async fn serve_refuses_unusable_tls_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::copy(testdata("test-server.crt"), dir.path().join("server.crt")).unwrap();
        fs::copy(testdata("test-server.key"), dir.path().join("server.key")).unwrap();
        let yaml = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
        let config = load(&write_config(dir.path(), yaml)).unwrap();
        // The key disappears between load and serve.
        fs::remove_file(dir.path().join("server.key")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let web = Some(Arc::new(config));
        let e = serve(listener, app(), web, std::future::pending())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = e.to_string();
        assert!(
            e.contains("tls_server_config.key_file: cannot read ") && e.contains("server.key"),
            "{e}"
        );
    }
}
