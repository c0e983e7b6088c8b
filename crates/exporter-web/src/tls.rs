//! `tls_server_config` → a rustls [`ServerConfig`] on the *ring* provider: certificates, key,
//! client CAs, versions, suites, curves, ALPN; and the certificate's expiry.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, SystemTime},
};

use rustls::{
    RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion,
    crypto::{CryptoProvider, SupportedKxGroup, ring},
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use zeroize::Zeroizing;

use crate::{
    read::{MAX_CONFIG_FILE_BYTES, read_regular_file},
    types::{
        Built, ClientAuth, Curve, PemSource, TlsConfig, TlsVersion, WebConfig, WebConfigError,
    },
};

/// A certificate that expires within this time is warned about.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

impl WebConfig {
    /// The rustls server configuration (ring provider) for `tls_server_config`, reading the
    /// certificate, key and client CA now; `None` when TLS is not configured. ALPN offers `h2`
    /// only if `http_server_config.http2` is on.
    pub fn rustls_config(&self) -> Result<Option<Arc<ServerConfig>>, WebConfigError> {
        Ok(self.build_tls()?.map(|b| b.config))
    }

    pub(crate) fn build_tls(&self) -> Result<Option<Built>, WebConfigError> {
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
        let Some(end_entity) = chain.first() else {
            return Err(tls_error(format!(
                "{cert_field}: no PEM certificate (BEGIN CERTIFICATE) in it"
            )));
        };
        let not_after = not_after(end_entity);
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
        Ok(Some(Built {
            config: Arc::new(config),
            not_after,
        }))
    }

    /// A warning when the served certificate has expired or expires within
    /// [`EXPIRY_WARNING`] of `now`; `None` otherwise (or without TLS).
    pub fn certificate_warning(&self, now: SystemTime) -> Option<String> {
        let not_after = self.certificate_not_after()?;
        let field = self
            .tls
            .as_ref()
            .map_or("tls_server_config.cert_file", |t| t.cert.field("cert"));
        expiry_warning(not_after, now)
            .map(|w| format!("web config {}: {field}: {w}", self.path.display()))
    }
}

/// "expired N days ago" / "expires in N days" when `not_after` is within
/// [`EXPIRY_WARNING`] of `now` or past.
pub(crate) fn expiry_warning(not_after: SystemTime, now: SystemTime) -> Option<String> {
    let at = humantime::format_rfc3339_seconds(not_after);
    match not_after.duration_since(now) {
        Err(past) => Some(format!(
            "the certificate expired {} day(s) ago (notAfter {at}); clients that check it refuse the \
             connection: renew it and send SIGHUP",
            past.duration().as_secs() / 86_400
        )),
        Ok(left) if left <= EXPIRY_WARNING => Some(format!(
            "the certificate expires in {} day(s) (notAfter {at}): renew it and send SIGHUP",
            left.as_secs() / 86_400
        )),
        Ok(_) => None,
    }
}

/// The certificate's `notAfter`; `None` if it does not parse (rustls then judges it anyway).
fn not_after(cert: &CertificateDer<'_>) -> Option<SystemTime> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    let since_epoch = cert
        .tbs_certificate()
        .validity()
        .not_after
        .to_unix_duration();
    SystemTime::UNIX_EPOCH.checked_add(since_epoch)
}

pub(crate) fn tls12_suites() -> impl Iterator<Item = SupportedCipherSuite> {
    ring::ALL_CIPHER_SUITES
        .iter()
        .copied()
        .filter(|s| s.version() == &rustls::version::TLS12)
}

pub(crate) fn tls12_suite(name: &str) -> Option<SupportedCipherSuite> {
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
    pub(crate) fn field(&self, name: &'static str) -> &'static str {
        match (self, name) {
            (PemSource::File(_), "cert") => "tls_server_config.cert_file",
            (PemSource::File(_), "key") => "tls_server_config.key_file",
            (PemSource::File(_), _) => "tls_server_config.client_ca_file",
            (PemSource::Inline(_), "cert") => "tls_server_config.cert",
            (PemSource::Inline(_), "key") => "tls_server_config.key",
            (PemSource::Inline(_), _) => "tls_server_config.client_ca",
        }
    }

    /// The PEM bytes: a file is size-capped, regular-file only and never waited on.
    fn read(&self, config: &Path, field: &'static str) -> Result<Vec<u8>, WebConfigError> {
        match self {
            PemSource::File(file) => {
                read_regular_file(file, MAX_CONFIG_FILE_BYTES).map_err(|error| {
                    WebConfigError::File {
                        path: config.to_owned(),
                        field,
                        file: file.clone(),
                        error,
                    }
                })
            }
            PemSource::Inline(text) => Ok(text.as_bytes().to_vec()),
        }
    }
}

#[cfg(test)]
mod tests;
