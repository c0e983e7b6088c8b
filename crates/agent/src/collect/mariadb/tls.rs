//! TLS to MariaDB: the switches a defaults file or URL gives (`ssl`, `ssl-ca`, `ssl-cert`,
//! `ssl-key`, `ssl-verify-server-cert`, MySQL's `ssl-mode`, mysql_async's `require_ssl`,
//! `verify_ca`, `verify_identity`), resolved into one [`Tls`] per target, and the driver's
//! options built from it: rustls on the *ring* provider, the certificate files read by us
//! (regular files only, size-capped) so an error names the file.

use std::{path::PathBuf, sync::Once};

use mysql_async::{ClientIdentity, SslOpts};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

/// How the connection is secured, as MySQL's `--ssl-mode` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disabled,
    /// TLS when the server offers it, without verifying its certificate; else in clear.
    Preferred,
    /// TLS, without verifying the server's certificate (encryption only).
    Required,
    /// TLS; the server's certificate must be signed by the CA, whatever host name it names.
    VerifyCa,
    /// TLS; the certificate must be signed by the CA and name the host connected to.
    VerifyIdentity,
}

impl SslMode {
    /// `ssl-mode` values, case-insensitive (`VERIFY_CA`, `verify-ca`).
    pub fn parse(s: &str) -> Option<SslMode> {
        Some(
            match s.trim().to_ascii_uppercase().replace('-', "_").as_str() {
                "DISABLED" => SslMode::Disabled,
                "PREFERRED" => SslMode::Preferred,
                "REQUIRED" => SslMode::Required,
                "VERIFY_CA" => SslMode::VerifyCa,
                "VERIFY_IDENTITY" => SslMode::VerifyIdentity,
                _ => return None,
            },
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyIdentity)
    }
}

/// A boolean option value as MariaDB's option parser takes it: 1/0, ON/OFF, TRUE/FALSE (and
/// YES/NO); an option given without a value is true.
pub(crate) fn parse_bool(v: Option<&str>) -> Option<bool> {
    let Some(v) = v else { return Some(true) };
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// The TLS switches of one source (a defaults file, a URL), before they are resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSwitches {
    /// `ssl` / `skip-ssl` / `require_ssl`.
    pub ssl: Option<bool>,
    /// `ssl-mode`.
    pub mode: Option<SslMode>,
    /// `ssl-verify-server-cert` / `verify_ca` (mysql_async) / `ssl-skip-verification`.
    pub verify_server_cert: Option<bool>,
    /// `verify_identity` (mysql_async): false checks the CA only, not the host name.
    pub verify_identity: Option<bool>,
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsSwitches {
    /// Switches of `other` override ours. `ssl-mode` and the `ssl`/verify switches say the same
    /// thing in two vocabularies: whichever the later source uses replaces the other.
    pub(crate) fn overlay(&mut self, other: TlsSwitches) {
        if other.mode.is_some() {
            self.ssl = None;
            self.verify_server_cert = None;
            self.verify_identity = None;
        }
        if other.ssl.is_some()
            || other.verify_server_cert.is_some()
            || other.verify_identity.is_some()
        {
            self.mode = None;
        }
        self.ssl = other.ssl.or(self.ssl);
        self.mode = other.mode.or(self.mode);
        self.verify_server_cert = other.verify_server_cert.or(self.verify_server_cert);
        self.verify_identity = other.verify_identity.or(self.verify_identity);
        self.ca = other.ca.or(self.ca.take());
        self.cert = other.cert.or(self.cert.take());
        self.key = other.key.or(self.key.take());
    }

    /// The TLS to use, `None` for none. TLS is on with `ssl`, or when a CA, certificate or key
    /// is given (as the `mariadb` client: each implies `--ssl`), unless `ssl=0` / `skip-ssl` /
    /// `ssl-mode=DISABLED`. The server's certificate is verified (CA and host name) unless
    /// `ssl-verify-server-cert=0` (or `ssl-mode=REQUIRED`/`PREFERRED`) says otherwise; without
    /// an `ssl-ca` it is verified against the built-in public roots (webpki-roots).
    pub fn resolve(&self) -> Result<Option<Tls>, TlsSettingError> {
        let mode = match self.mode {
            Some(m) => m,
            None => {
                let any_file = self.ca.is_some() || self.cert.is_some() || self.key.is_some();
                let on = self
                    .ssl
                    .unwrap_or(any_file || self.verify_server_cert == Some(true));
                if !on {
                    SslMode::Disabled
                } else if self.verify_server_cert == Some(false) {
                    SslMode::Required
                } else if self.verify_identity == Some(false) {
                    SslMode::VerifyCa
                } else {
                    SslMode::VerifyIdentity
                }
            }
        };
        if mode == SslMode::Disabled {
            return Ok(None);
        }
        let identity = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            (Some(_), None) => return Err(TlsSettingError::CertWithoutKey),
            (None, Some(_)) => return Err(TlsSettingError::KeyWithoutCert),
        };
        Ok(Some(Tls {
            mode,
            ca: self.ca.clone(),
            identity,
        }))
    }
}

/// TLS options that cannot be used together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsSettingError {
    #[error("ssl-cert is given without ssl-key: a client certificate needs its private key")]
    CertWithoutKey,
    #[error("ssl-key is given without ssl-cert: a private key needs its client certificate")]
    KeyWithoutCert,
}

/// TLS for one target (TCP only: a unix socket is local and never encrypted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: SslMode,
    /// `ssl-ca`: the only CA trusted for the server's certificate.
    pub ca: Option<PathBuf>,
    /// `ssl-cert` and `ssl-key`: the client certificate (for `REQUIRE X509` accounts).
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// Largest certificate, CA or key file read: real ones are a few KiB.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// A TLS file that cannot be used: which option, which file, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFileError {
    pub option: &'static str,
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for TlsFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.option,
            self.path.display(),
            self.reason
        )
    }
}

pub(crate) fn read_pem(
    option: &'static str,
    path: &std::path::Path,
) -> Result<Vec<u8>, TlsFileError> {
    let err = |reason: String| TlsFileError {
        option,
        path: path.to_owned(),
        reason,
    };
    powerdiag_safe_read::read_regular_file(path, MAX_PEM_BYTES)
        .map_err(|e| err(format!("cannot read it: {e}")))
}

impl Tls {
    /// Reads and checks the files and builds the driver's options. Called on every new
    /// connection, so renewed certificates are picked up without a restart.
    pub(crate) fn ssl_opts(&self) -> Result<SslOpts, TlsFileError> {
        install_provider();
        let mut opts = SslOpts::default();
        if let Some(ca) = &self.ca {
            let bytes = read_pem("ssl-ca", ca)?;
            let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| TlsFileError {
                    option: "ssl-ca",
                    path: ca.clone(),
                    reason: format!("not a PEM certificate file ({e})"),
                })?;
            if certs.is_empty() {
                return Err(TlsFileError {
                    option: "ssl-ca",
                    path: ca.clone(),
                    reason: "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
                });
            }
            // Only this CA: the mariadb client does not add public roots to an ssl-ca either.
            opts = opts
                .with_root_certs(vec![bytes.into()])
                .with_disable_built_in_roots(true);
        }
        if let Some((cert, key)) = &self.identity {
            let cert_bytes = read_pem("ssl-cert", cert)?;
            let n = CertificateDer::pem_slice_iter(&cert_bytes)
                .filter(Result::is_ok)
                .count();
            if n == 0 {
                return Err(TlsFileError {
                    option: "ssl-cert",
                    path: cert.clone(),
                    reason: "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
                });
            }
            let key_bytes = read_pem("ssl-key", key)?;
            if PrivateKeyDer::from_pem_slice(&key_bytes).is_err() {
                return Err(TlsFileError {
                    option: "ssl-key",
                    path: key.clone(),
                    reason: "holds no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1; an encrypted key is not supported)".into(),
                });
            }
            opts = opts.with_client_identity(Some(ClientIdentity::new(
                cert_bytes.into(),
                key_bytes.into(),
            )));
        }
        opts = match self.mode {
            SslMode::Preferred | SslMode::Required => opts.with_danger_accept_invalid_certs(true),
            // The driver's name skip does not work on rustls 0.23 (verify_ca.rs): the session
            // learns a name the certificate holds and gives it as the TLS host name.
            SslMode::VerifyCa => opts,
            SslMode::VerifyIdentity | SslMode::Disabled => opts,
        };
        Ok(opts)
    }

    /// Reads and checks the files now (the agent, before it binds): the error names the option
    /// and the file.
    pub fn check_files(&self) -> Result<(), TlsFileError> {
        self.ssl_opts().map(drop)
    }

    /// True when the server's certificate is checked.
    pub fn verifies(&self) -> bool {
        self.mode.verifies()
    }
}

/// mysql_async builds its rustls configuration with the process-default provider: make that
/// *ring*, the provider the web layer and `remote.rs` name explicitly (no aws-lc-rs is built).
pub(crate) fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: a provider is installed already, which is the one used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The rustls error inside a driver error, if the TLS handshake is what failed.
pub(crate) fn rustls_error(e: &mysql_async::Error) -> Option<&rustls::Error> {
    match e {
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        mysql_async::Error::Io(mysql_async::IoError::Tls(mysql_async::TlsError::Tls(r))) => Some(r),
        _ => None,
    }
}

/// The message and hint for a failed TLS handshake with `tls`, naming the file to fix.
pub(crate) fn explain_handshake(
    err: &rustls::Error,
    tls: &Tls,
    host: &str,
    source: &str,
) -> (String, String) {
    use rustls::{CertificateError as C, Error as E};
    let ca = match &tls.ca {
        Some(p) => format!("the CA in ssl-ca {}", p.display()),
        None => "the built-in public CAs (no ssl-ca given)".to_owned(),
    };
    let skip = "or ssl-verify-server-cert=0 to encrypt without verifying";
    match err {
        E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => (
            format!("the server's TLS certificate is not signed by {ca}"),
            format!(
                "in {source}, set ssl-ca to the CA that signed the server's certificate (the server's ssl_ca: SELECT @@ssl_ca), {skip}"
            ),
        ),
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => (
            format!("the server's TLS certificate (signed by {ca}) does not name the host {host}"),
            format!(
                "connect by a name or address in the certificate's subjectAltName, or in {source} set ssl-mode=VERIFY_CA (URL: verify_identity=false) to check the CA only"
            ),
        ),
        E::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => (
            format!("the server's TLS certificate is expired or not valid yet ({err})"),
            "renew the server's certificate (ssl_cert), or check this host's clock".into(),
        ),
        E::InvalidCertificate(_) => (
            format!("the server's TLS certificate was refused: {err} (verified against {ca})"),
            format!("check the server's ssl_cert against {ca}, {skip}"),
        ),
        E::AlertReceived(alert) => {
            let ours = match &tls.identity {
                Some((c, _)) => format!("the client certificate ssl-cert {}", c.display()),
                None => "no client certificate (ssl-cert/ssl-key not given)".into(),
            };
            (
                format!("the server ended the TLS handshake ({alert:?}); we sent {ours}"),
                format!(
                    "if the account or server requires a client certificate, give in {source} an ssl-cert and ssl-key signed by the server's ssl_ca"
                ),
            )
        }
        other => (
            format!("the TLS handshake failed: {other}"),
            format!(
                "check the TLS settings in {source} against the server's (SHOW GLOBAL VARIABLES LIKE 'ssl%'; have_ssl must be YES)"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw() -> TlsSwitches {
        TlsSwitches::default()
    }

    #[test]
    fn off_unless_asked_and_verifying_by_default() {
        assert_eq!(sw().resolve().unwrap(), None);
        let ca = TlsSwitches {
            ca: Some("/ca.pem".into()),
            ..sw()
        };
        let t = ca.resolve().unwrap().unwrap();
        assert_eq!(t.mode, SslMode::VerifyIdentity);
        assert!(t.verifies());
        let on = TlsSwitches {
            ssl: Some(true),
            ..sw()
        };
        assert_eq!(on.resolve().unwrap().unwrap().mode, SslMode::VerifyIdentity);
        let no_verify = TlsSwitches {
            verify_server_cert: Some(false),
            ..ca.clone()
        };
        assert_eq!(
            no_verify.resolve().unwrap().unwrap().mode,
            SslMode::Required
        );
        let ca_only = TlsSwitches {
            verify_identity: Some(false),
            ..ca.clone()
        };
        assert_eq!(ca_only.resolve().unwrap().unwrap().mode, SslMode::VerifyCa);
        let off = TlsSwitches {
            ssl: Some(false),
            ..ca
        };
        assert_eq!(off.resolve().unwrap(), None);
    }

    #[test]
    fn cert_and_key_come_together() {
        let e = TlsSwitches {
            cert: Some("/c.pem".into()),
            ..sw()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(e.contains("ssl-cert is given without ssl-key"), "{e}");
        let e = TlsSwitches {
            key: Some("/k.pem".into()),
            ..sw()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(e.contains("ssl-key is given without ssl-cert"), "{e}");
    }

    #[test]
    fn a_later_source_replaces_the_other_vocabulary() {
        let mut file = TlsSwitches {
            mode: Some(SslMode::Required),
            ca: Some("/ca.pem".into()),
            ..sw()
        };
        file.overlay(TlsSwitches {
            verify_server_cert: Some(true),
            ..sw()
        });
        assert_eq!(file.mode, None);
        let t = file.resolve().unwrap().unwrap();
        assert_eq!(t.mode, SslMode::VerifyIdentity);
        assert_eq!(t.ca, Some("/ca.pem".into()));
        file.overlay(TlsSwitches {
            mode: Some(SslMode::Disabled),
            ..sw()
        });
        assert_eq!(file.resolve().unwrap(), None);
    }

    #[test]
    fn values() {
        assert_eq!(SslMode::parse("verify_ca"), Some(SslMode::VerifyCa));
        assert_eq!(
            SslMode::parse("VERIFY-IDENTITY"),
            Some(SslMode::VerifyIdentity)
        );
        assert_eq!(SslMode::parse("maybe"), None);
        assert_eq!(parse_bool(None), Some(true));
        assert_eq!(parse_bool(Some("OFF")), Some(false));
        assert_eq!(parse_bool(Some("2")), None);
    }

    #[test]
    fn file_errors_name_the_option_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("ca.pem");
        std::fs::write(&bad, "not a certificate\n").unwrap();
        let t = Tls {
            mode: SslMode::VerifyIdentity,
            ca: Some(bad.clone()),
            identity: None,
        };
        let e = t.ssl_opts().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("ssl-ca {}: holds no PEM", bad.display())),
            "{e}"
        );
        let t = Tls {
            ca: Some(dir.path().join("absent.pem")),
            ..t
        };
        let e = t.ssl_opts().unwrap_err().to_string();
        assert!(e.contains("absent.pem: cannot read it"), "{e}");
        let t = Tls {
            ca: Some(dir.path().to_owned()),
            ..t
        };
        let e = t.ssl_opts().unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
