//! A running agent's last snapshot (`GET /api/v1/snapshot`), read the way a Prometheus scraper
//! reaches it: HTTP or HTTPS, a CA file, an optional client certificate, basic auth with the
//! password from a file. `powerdiag diff http://a:9987 https://b:9987` compares two live hosts.
//!
//! The body is size-capped ([`powerdiag_rules::MAX_SNAPSHOT_BYTES`]) and the request runs under
//! one deadline; a password is never taken from the URL (it would sit in argv).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rustls::{
    RootCertStore,
    crypto::ring,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use zeroize::Zeroizing;

/// The path an agent serves its last snapshot on.
pub const SNAPSHOT_PATH: &str = "/api/v1/snapshot";

/// Largest PEM or password file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// How to reach the agents.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// CA certificates (PEM) to verify an HTTPS agent; without it, the system's roots are not
    /// used either: an HTTPS agent then needs this file.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM), for agents that require one.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Basic auth user; the password comes from `password_file`.
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    /// The whole request, connect to last byte.
    pub timeout: Duration,
    /// Send basic auth to an `http://` agent (in clear text); without it, refused.
    pub allow_insecure_auth: bool,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            ca_file: None,
            cert_file: None,
            key_file: None,
            username: None,
            password_file: None,
            timeout: Duration::from_secs(30),
            allow_insecure_auth: false,
        }
    }
}

/// Why a snapshot could not be fetched. `Display` names the input and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    #[error("{url}: {reason}")]
    Url { url: String, reason: String },
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("{url}: {reason}")]
    Request { url: String, reason: String },
    #[error("{url}: the agent answered HTTP {status}{hint}")]
    Status {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{url}: the answer is larger than {limit} MiB: not a powerdiag snapshot")]
    TooLarge { url: String, limit: usize },
    #[error(
        "{url}: the agent announces {length} bytes (Content-Length), more than the {limit} MiB a \
         powerdiag snapshot can be: not a powerdiag agent, or check the URL"
    )]
    DeclaredTooLarge {
        url: String,
        length: u64,
        limit: usize,
    },
}

/// True when `s` names an agent rather than a file.
pub fn is_agent_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The snapshot URL for an agent address: `/api/v1/snapshot` is appended unless present.
pub fn snapshot_url(raw: &str) -> Result<url::Url, RemoteError> {
    let bad = |reason: &str| RemoteError::Url {
        url: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let mut u = url::Url::parse(raw).map_err(|e| bad(&format!("not a URL ({e})")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad("only http:// and https:// agents can be read"));
    }
    if u.password().is_some() {
        let _ = u.set_password(Some("xxxxx"));
        return Err(RemoteError::Url {
            url: u.to_string(),
            reason: "a password in the URL would sit in the process list: use --agent.username and --agent.password-file".into(),
        });
    }
    if !u.username().is_empty() {
        return Err(bad(
            "put the user in --agent.username (and the password in --agent.password-file), not in the URL",
        ));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !u.path().ends_with(SNAPSHOT_PATH) {
        let path = format!("{}{SNAPSHOT_PATH}", u.path().trim_end_matches('/'));
        u.set_path(&path);
    }
    u.set_query(None);
    u.set_fragment(None);
    Ok(u)
}

/// Reads a small regular file (PEM, password): size-capped, never a FIFO or a device (the
/// opened file is checked, not the path, and opening never waits on a FIFO).
fn read_small(path: &Path) -> Result<Vec<u8>, RemoteError> {
    powerdiag_safe_read::read_regular_file(path, MAX_FILE_BYTES).map_err(|e| RemoteError::File {
        path: path.display().to_string(),
        reason: match e {
            powerdiag_safe_read::ReadError::Io(e) => format!("cannot read it ({e})"),
            e => e.to_string(),
        },
    })
}

fn client(opts: &RemoteOptions) -> Result<reqwest::Client, RemoteError> {
    let file_err = |p: &Path, reason: String| RemoteError::File {
        path: p.display().to_string(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    if let Some(ca) = &opts.ca_file {
        let pem = read_small(ca)?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| file_err(ca, format!("not PEM certificates ({e})")))?;
            roots
                .add(cert)
                .map_err(|e| file_err(ca, format!("unusable CA certificate ({e})")))?;
        }
        if roots.is_empty() {
            return Err(file_err(ca, "no certificate in it".into()));
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| RemoteError::Request {
            url: String::new(),
            reason: format!("TLS set-up failed ({e})"),
        })?
        .with_root_certificates(roots);
    let mut tls = match (&opts.cert_file, &opts.key_file) {
        (Some(cert), Some(key)) => {
            let pem = read_small(cert)?;
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| file_err(cert, format!("not PEM certificates ({e})")))?;
            let key_pem = Zeroizing::new(read_small(key)?);
            let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                .map_err(|e| file_err(key, format!("not a PEM private key ({e})")))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| file_err(cert, format!("certificate and key do not match ({e})")))?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(p), None) | (None, Some(p)) => {
            return Err(file_err(
                p,
                "a client certificate needs both --agent.cert-file and --agent.key-file".into(),
            ));
        }
    };
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(opts.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| RemoteError::Request {
            url: String::new(),
            reason: format!("HTTP client set-up failed ({e})"),
        })
}

/// Fetches an agent's last snapshot as JSON text (`read_snapshot` parses it).
pub async fn fetch_snapshot(raw: &str, opts: &RemoteOptions) -> Result<String, RemoteError> {
    let url = snapshot_url(raw)?;
    let shown = url.to_string();
    if url.scheme() == "http" && opts.username.is_some() && !opts.allow_insecure_auth {
        return Err(RemoteError::Url {
            url: shown,
            reason: "basic auth over http:// would send the password in clear text: use the \
                     agent's https:// address, or give --agent.allow-insecure-auth to send it \
                     anyway"
                .into(),
        });
    }
    let client = client(opts)?;
    let mut request = client.get(url);
    match (&opts.username, &opts.password_file) {
        (Some(user), Some(file)) => {
            let bytes = Zeroizing::new(read_small(file)?);
            let text = std::str::from_utf8(&bytes).map_err(|_| RemoteError::File {
                path: file.display().to_string(),
                reason: "the password is not UTF-8 text".into(),
            })?;
            // One trailing newline is the file's, not the password's.
            let password = Zeroizing::new(text.strip_suffix('\n').unwrap_or(text).to_owned());
            request = request.basic_auth(user, Some(password.as_str()));
        }
        (Some(user), None) => request = request.basic_auth(user, None::<&str>),
        (None, Some(file)) => {
            return Err(RemoteError::File {
                path: file.display().to_string(),
                reason: "a password file needs --agent.username".into(),
            });
        }
        (None, None) => {}
    }
    let request_err = |e: reqwest::Error| RemoteError::Request {
        url: shown.clone(),
        reason: if e.is_timeout() {
            "no complete answer in time (--agent.timeout)".into()
        } else if let Some(tls) = tls_cause(&e) {
            tls_reason(tls, opts.ca_file.is_some())
        } else if e.is_connect() {
            format!(
                "cannot connect ({e}); is the agent running and is this its --web.listen-address?"
            )
        } else {
            e.to_string()
        },
    };
    let mut resp = request.send().await.map_err(request_err)?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(RemoteError::Status {
            url: shown,
            status,
            hint: match status {
                401 => ": give --agent.username and --agent.password-file",
                503 => ": it has no sample yet; try again after its first interval",
                404 => ": not a powerdiag agent, or an old one without /api/v1/snapshot",
                _ => "",
            },
        });
    }
    let limit = powerdiag_rules::MAX_SNAPSHOT_BYTES;
    // A declared length is refused before a byte of the body is read; a chunked body is capped
    // while it streams, below.
    if let Some(length) = resp.content_length()
        && length > limit as u64
    {
        return Err(RemoteError::DeclaredTooLarge {
            url: shown,
            length,
            limit: limit >> 20,
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(request_err)? {
        if body.len() + chunk.len() > limit {
            return Err(RemoteError::TooLarge {
                url: shown,
                limit: limit >> 20,
            });
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| RemoteError::Request {
        url: shown,
        reason: "the answer is not UTF-8 text: not a powerdiag snapshot".into(),
    })
}

/// The TLS error under a request error, if it failed in the handshake. The chain is walked
/// through `source()`; an `io::Error` wrapping the rustls error is opened too (its `source()`
/// skips the wrapped error itself).
fn tls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(tls) = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| tls_cause(inner))
        {
            return Some(tls);
        }
        next = err.source();
    }
    None
}

/// What went wrong in the TLS handshake, and the fix.
fn tls_reason(e: &rustls::Error, have_ca: bool) -> String {
    match e {
        rustls::Error::InvalidCertificate(_) if have_ca => format!(
            "the agent's certificate is not trusted ({e}): --agent.ca-file must be the CA that \
             signed the agent's certificate"
        ),
        rustls::Error::InvalidCertificate(_) => format!(
            "the agent's certificate is not trusted ({e}): give --agent.ca-file, the CA that \
             signed the agent's certificate"
        ),
        _ => format!(
            "the TLS handshake failed ({e}); is this the agent's https:// address, and does it \
             accept this client (--agent.cert-file, --agent.key-file)?"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_addresses_become_snapshot_urls() {
        assert!(is_agent_url("http://db1:9987"));
        assert!(is_agent_url("HTTPS://db1:9987"));
        assert!(!is_agent_url("snap.json"));
        assert!(!is_agent_url("-"));
        let u = |s| snapshot_url(s).map(|u| u.to_string());
        assert_eq!(
            u("http://db1:9987").unwrap(),
            "http://db1:9987/api/v1/snapshot"
        );
        assert_eq!(
            u("https://db1:9987/pd/").unwrap(),
            "https://db1:9987/pd/api/v1/snapshot"
        );
        assert_eq!(
            u("http://db1:9987/api/v1/snapshot?x=1").unwrap(),
            "http://db1:9987/api/v1/snapshot"
        );
        let e = u("http://u:secret@db1:9987").unwrap_err().to_string();
        assert!(e.contains("--agent.password-file"), "{e}");
        assert!(!e.contains("secret"), "the password is never echoed: {e}");
        assert!(u("ftp://db1").is_err());
    }

    #[tokio::test]
    async fn basic_auth_over_http_needs_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let mut opts = RemoteOptions {
            username: Some("u".into()),
            password_file: Some(pw),
            timeout: Duration::from_secs(2),
            ..RemoteOptions::default()
        };
        // Port 1: nothing listens. The refusal comes before any connection.
        let e = fetch_snapshot("http://127.0.0.1:1", &opts)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("--agent.allow-insecure-auth"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        opts.allow_insecure_auth = true;
        let e = fetch_snapshot("http://127.0.0.1:1", &opts)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot connect"), "{e}");
    }

    #[test]
    fn tls_failures_name_the_certificate_problem_and_the_fix() {
        let bad = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, bad);
        let found = tls_cause(&wrapped).unwrap();
        let text = tls_reason(found, true);
        assert!(
            text.contains("UnknownIssuer")
                && text
                    .contains("--agent.ca-file must be the CA that signed the agent's certificate"),
            "{text}"
        );
        assert!(tls_reason(found, false).contains("give --agent.ca-file"));
        let plain = std::io::Error::other("refused");
        assert!(tls_cause(&plain).is_none());
    }

    #[test]
    fn files_are_regular_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_small(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; (MAX_FILE_BYTES + 1) as usize]).unwrap();
        assert!(read_small(&big).unwrap_err().to_string().contains("larger"));
    }
}
