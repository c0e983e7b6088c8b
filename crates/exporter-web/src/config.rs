//! The web configuration file: [`load`], parsing ([`WebConfig::parse`]) and the reload rule
//! ([`reload`]: a reload never lowers security). The types are defined in `types.rs`
//! (which `auth` and `tls` use without this module) and re-exported here.

use std::{
    collections::BTreeMap,
    fmt,
    path::Path,
    sync::{Arc, OnceLock},
    time::SystemTime,
};

use axum::http::{HeaderName, HeaderValue};
use rustls::ServerConfig;
use serde::{Deserialize, Deserializer, de};

pub use crate::types::{
    ClientAuth, Curve, HttpConfig, PemSource, TlsConfig, TlsVersion, WebConfig, WebConfigError,
};
use crate::{
    read::{MAX_CONFIG_FILE_BYTES, read_regular_file},
    tls,
    types::AuthCache,
};

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

/// Reads and checks the web configuration file at `path`: the YAML, the bcrypt hashes, and, when
/// TLS is configured, the certificate, key and client CA files (the key must match the
/// certificate). The TLS configuration is built now and kept: [`crate::serve()`] uses it.
pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let bytes =
        read_regular_file(path, MAX_CONFIG_FILE_BYTES).map_err(|error| WebConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
    let text = String::from_utf8(bytes).map_err(|_| WebConfigError::Yaml {
        path: path.to_owned(),
        message: "not UTF-8 text".to_owned(),
    })?;
    let mut config = WebConfig::parse(&text, path)?;
    config.built = config.build_tls()?;
    Ok(config)
}

/// Reads the file `running` came from again (SIGHUP) and returns the new configuration if it
/// may replace the running one. A reload never lowers security: it is an error
/// ([`WebConfigError::Downgrade`]) when the new file drops TLS, basic auth or the client
/// certificate requirement, or lowers `min_version`, that the running configuration has; it
/// also cannot turn TLS on (the listener was started without it). Both need a restart, which
/// is explicit. A file that does not load or [sets nothing](WebConfigError::Empty) is an error
/// too, and so is a certificate that has expired (the running one stays; at start an expired
/// certificate is only a warning, so that an agent can come up to be fixed). The credentials
/// verified so far stay verified while their user's hash is unchanged.
pub fn reload(running: &WebConfig) -> Result<WebConfig, WebConfigError> {
    reload_at(running, std::time::SystemTime::now())
}

/// [`reload`] as of `now`.
pub(crate) fn reload_at(
    running: &WebConfig,
    now: std::time::SystemTime,
) -> Result<WebConfig, WebConfigError> {
    let new = load(&running.path)?;
    running.check_reload(&new)?;
    if let Some(not_after) = new.certificate_not_after()
        && not_after < now
    {
        return Err(WebConfigError::Invalid {
            path: new.path.clone(),
            field: "tls_server_config.cert_file".into(),
            message: format!(
                "the certificate expired at {} (notAfter): a reload never replaces the running certificate with an expired one; renew it and send SIGHUP again",
                humantime::format_rfc3339_seconds(not_after)
            ),
        });
    }
    Ok(new.with_auth_cache_of(running))
}

impl WebConfig {
    /// Parses `text` as the contents of the file `path`, whose directory relative file names
    /// resolve against. Reads no file: [`load`] also checks the certificates.
    pub fn parse(text: &str, path: &Path) -> Result<WebConfig, WebConfigError> {
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

        let http_set = raw.http_server_config.as_ref().is_some_and(|h| {
            h.http2.is_some() || h.headers.as_ref().is_some_and(|m| !m.is_empty())
        });
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
            let cost = crate::auth::bcrypt_cost(hash).ok_or_else(|| {
                invalid(
                    &format!("basic_auth_users.{user}"),
                    "not a bcrypt hash (expected $2y$, $2b$ or $2a$, a cost of 04 to 31 and 53 more characters); \
                     make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                        .to_owned(),
                )
            })?;
            decoy_cost = decoy_cost.max(cost);
        }

        // exporter-toolkit reads an empty file as "plain HTTP, no authentication"; a truncated
        // or emptied file must not silently mean that here.
        if tls.is_none() && !http_set && basic_auth_users.is_empty() {
            return Err(WebConfigError::Empty {
                path: path.to_owned(),
            });
        }

        Ok(WebConfig {
            path: path.to_owned(),
            tls,
            http,
            basic_auth_users,
            response_headers,
            auth: Arc::new(AuthCache::new()),
            decoy: OnceLock::new(),
            decoy_cost,
            built: None,
        })
    }

    /// Whether `new` may replace `self` on a reload: an error names what it would lower.
    pub fn check_reload(&self, new: &WebConfig) -> Result<(), WebConfigError> {
        let refuse = |message: String| {
            Err(WebConfigError::Downgrade {
                path: new.path.clone(),
                message,
            })
        };
        match (&self.tls, &new.tls) {
            (Some(_), None) => {
                return refuse(
                    "the running agent serves TLS and the new file has no tls_server_config: a reload never \
                     turns TLS off; restart the agent to serve plain HTTP on purpose"
                        .to_owned(),
                );
            }
            (None, Some(_)) => {
                return refuse(
                    "the running agent serves plain HTTP: TLS needs a new listener; restart the agent to \
                     turn TLS on"
                        .to_owned(),
                );
            }
            (Some(old), Some(tls)) => {
                if tls.client_auth < old.client_auth {
                    return refuse(format!(
                        "client_auth_type {:?} is weaker than the running {:?}: a reload never lowers it; \
                         restart the agent to lower it on purpose",
                        tls.client_auth, old.client_auth
                    ));
                }
                if tls.min_version < old.min_version {
                    return refuse(format!(
                        "min_version {:?} is below the running {:?}: a reload never lowers it; restart the \
                         agent to lower it on purpose",
                        tls.min_version, old.min_version
                    ));
                }
            }
            (None, None) => {}
        }
        if !self.basic_auth_users.is_empty() && new.basic_auth_users.is_empty() {
            return refuse(
                "the running agent requires basic auth and the new file has no basic_auth_users: a reload \
                 never turns authentication off; restart the agent to serve without it on purpose"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// `self` with the credential cache of `running` (its entries hold the hash they were
    /// verified against, so a changed hash never matches an old entry).
    pub(crate) fn with_auth_cache_of(mut self, running: &WebConfig) -> WebConfig {
        self.auth = running.auth.clone();
        self
    }

    /// The rustls configuration built when the file was loaded, or built now from the files.
    pub(crate) fn server_config(&self) -> Result<Option<Arc<ServerConfig>>, WebConfigError> {
        match &self.built {
            Some(built) => Ok(Some(built.config.clone())),
            None => Ok(self.build_tls()?.map(|b| b.config)),
        }
    }

    /// When the end-entity certificate stops being valid (`notAfter`), if TLS is configured
    /// and the certificate was read by [`load`].
    pub fn certificate_not_after(&self) -> Option<SystemTime> {
        self.built.as_ref().and_then(|b| b.not_after)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// The file as written; resolved into [`WebConfig`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    #[serde(default, deserialize_with = "unique_users")]
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<yaml_serde::Value>,
}

/// `basic_auth_users` as a map whose keys appear once: a second `alice:` would silently replace
/// the first (exporter-toolkit's YAML parser rejects it, and so does this).
fn unique_users<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Users;
    impl<'de> de::Visitor<'de> for Users {
        type Value = Option<BTreeMap<String, String>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of user names to bcrypt hashes")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(Users)
        }

        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut users = BTreeMap::new();
            while let Some((user, hash)) = map.next_entry::<String, String>()? {
                if users.contains_key(&user) {
                    return Err(de::Error::custom(format!(
                        "user {user:?} appears twice; keep one entry per user"
                    )));
                }
                users.insert(user, hash);
            }
            Ok(Some(users))
        }
    }
    deserializer.deserialize_option(Users)
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
            if tls::tls12_suite(&name).is_none() {
                let known: Vec<&str> = tls::tls12_suites()
                    .filter_map(|s| s.suite().as_str())
                    .collect();
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

#[cfg(test)]
mod tests;
