//! `ssl-mode=VERIFY_CA` (and `ssl-verify-server-cert` with `verify_identity=false`): the
//! server's certificate must chain to the CA, be valid now and be meant for a server, but it may
//! name any host.
//!
//! mysql_async 0.37.1 cannot skip only the name on rustls 0.23: it recognises the name error by
//! its text (`e.to_string().contains("NotValidForName")`, `rustls_io.rs`), which rustls now
//! prints as "certificate not valid for name …" (`NotValidForNameContext`), so it refuses every
//! name mismatch (blackbeam/mysql_async#404; fixed upstream by #408, not released). So powerdiag
//! first learns a name the certificate *is* valid for, from a TLS handshake of its own whose
//! verifier checks everything but the name ([`CaOnly`]), and then connects through the driver
//! with that name as the TLS host name (`SslOpts::with_danger_tls_hostname_override`): the
//! driver checks the chain, the dates and that name in full. A certificate that names no host
//! at all (no subjectAltName) cannot be checked this way, and the error says so.
//!
//! The handshake speaks just enough of the protocol to start TLS: the server's greeting, then
//! an `SSLRequest` packet, then the TLS handshake, then the connection is dropped (the server
//! counts it as an aborted connection, as any TLS probe).

use std::{sync::Arc, time::Duration};

use rustls::{
    ClientConfig, RootCertStore,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use x509_cert::{
    Certificate,
    der::{Decode, oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME},
    ext::pkix::{SubjectAltName, name::GeneralName},
};

use super::tls::{Tls, TlsFileError, read_pem};

/// Why the name could not be learned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VerifyCaError {
    /// The TCP connection or the greeting failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server's first packet is not a greeting that offers TLS, or the server refused.
    #[error("{0}")]
    Protocol(String),
    /// The TLS handshake failed: the certificate does not chain to the CA, has expired, …
    #[error("{0}")]
    Handshake(rustls::Error),
    /// The certificate is fine but names no host and no address.
    #[error(
        "the server's certificate names no host or address (no subjectAltName), so ssl-mode=VERIFY_CA cannot check it through the driver"
    )]
    NoName,
    /// A TLS file (ssl-ca, ssl-cert, ssl-key) could not be used.
    #[error("{0}")]
    File(TlsFileError),
}

/// The largest greeting read: real ones are about 100 bytes.
const MAX_GREETING: usize = 16 << 10;

const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SSL: u32 = 0x800;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
/// utf8mb4_general_ci.
const CHARSET: u8 = 45;

/// A name `host:port`'s certificate is valid for, checked against `tls`'s CA (or the public
/// roots without one), within `timeout`.
pub(crate) async fn certificate_name(
    host: &str,
    port: u16,
    tls: &Tls,
    timeout: Duration,
) -> Result<String, VerifyCaError> {
    let probe = async {
        let mut stream = TcpStream::connect((host, port)).await?;
        start_tls(&mut stream).await?;
        let config = client_config(tls)?;
        // The name is not checked; a host the type cannot hold (an underscore) still probes.
        let server_name = ServerName::try_from(host.to_owned())
            .unwrap_or_else(|_| ServerName::try_from("powerdiag.invalid").expect("a DNS name"));
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let stream =
            connector
                .connect(server_name, stream)
                .await
                .map_err(|e| match into_rustls(e) {
                    Ok(r) => VerifyCaError::Handshake(r),
                    Err(io) => VerifyCaError::Io(io),
                })?;
        let (_, session) = stream.get_ref();
        let leaf = session
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or(VerifyCaError::NoName)?;
        name_of(leaf).ok_or(VerifyCaError::NoName)
    };
    match tokio::time::timeout(timeout, probe).await {
        Ok(r) => r,
        Err(_) => Err(VerifyCaError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no TLS handshake within the deadline",
        ))),
    }
}

/// The rustls error inside a handshake's I/O error.
fn into_rustls(e: std::io::Error) -> Result<rustls::Error, std::io::Error> {
    let is_rustls = e
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
    if !is_rustls {
        return Err(e);
    }
    e.into_inner()
        .and_then(|inner| inner.downcast::<rustls::Error>().ok())
        .map(|b| *b)
        .ok_or_else(|| std::io::Error::other("TLS handshake failed"))
}

/// Reads the server's greeting and asks for TLS (`SSLRequest`).
async fn start_tls(stream: &mut TcpStream) -> Result<(), VerifyCaError> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    if len == 0 || len > MAX_GREETING {
        return Err(VerifyCaError::Protocol(format!(
            "the server's first packet is {len} bytes long: not a MariaDB greeting"
        )));
    }
    let mut greeting = vec![0u8; len];
    stream.read_exact(&mut greeting).await?;
    if !offers_tls(&greeting)? {
        return Err(VerifyCaError::Protocol(
            "the server offers no TLS (have_ssl is not YES)".into(),
        ));
    }
    let flags = CLIENT_LONG_PASSWORD
        | CLIENT_PROTOCOL_41
        | CLIENT_SSL
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH;
    let mut packet = Vec::with_capacity(36);
    packet.extend_from_slice(&[32, 0, 0, header[3].wrapping_add(1)]);
    packet.extend_from_slice(&flags.to_le_bytes());
    packet.extend_from_slice(&(16u32 << 20).to_le_bytes());
    packet.push(CHARSET);
    packet.extend_from_slice(&[0; 23]);
    stream.write_all(&packet).await?;
    Ok(())
}

/// Whether a greeting (protocol 10) offers TLS; an error packet is the server's refusal.
fn offers_tls(greeting: &[u8]) -> Result<bool, VerifyCaError> {
    match greeting.first() {
        Some(0xff) => {
            // Error packet: code, then (with a `#`) the SQL state, then the message.
            let text = greeting.get(3..).unwrap_or_default();
            let text = text
                .strip_prefix(b"#")
                .map_or(text, |t| t.get(5..).unwrap_or_default());
            return Err(VerifyCaError::Protocol(format!(
                "the server refused the connection: {}",
                String::from_utf8_lossy(text)
                    .chars()
                    .take(200)
                    .collect::<String>()
            )));
        }
        Some(10) => {}
        _ => {
            return Err(VerifyCaError::Protocol(
                "the server's first packet is not a MariaDB greeting (protocol 10)".into(),
            ));
        }
    }
    // Version (NUL-terminated), connection id (4), scramble (8), filler (1), capabilities (2).
    let nul = greeting[1..]
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| VerifyCaError::Protocol("a greeting without a version".into()))?;
    let at = 1 + nul + 1 + 4 + 8 + 1;
    let caps = greeting
        .get(at..at + 2)
        .ok_or_else(|| VerifyCaError::Protocol("a greeting too short for its flags".into()))?;
    Ok(u32::from(u16::from_le_bytes([caps[0], caps[1]])) & CLIENT_SSL != 0)
}

/// The probe's TLS configuration: the CA (or the public roots), the client certificate when
/// one is configured, and a verifier that forgives only the name.
fn client_config(tls: &Tls) -> Result<ClientConfig, VerifyCaError> {
    super::tls::install_provider();
    let mut roots = RootCertStore::empty();
    match &tls.ca {
        Some(ca) => {
            let bytes = read_pem("ssl-ca", ca).map_err(VerifyCaError::File)?;
            for cert in CertificateDer::pem_slice_iter(&bytes).flatten() {
                roots.add(cert).map_err(VerifyCaError::Handshake)?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let inner = WebPkiServerVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| VerifyCaError::Protocol(format!("the CA cannot be used: {e}")))?;
    let builder = ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(CaOnly { inner }));
    let config = match &tls.identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let cert_bytes = read_pem("ssl-cert", cert).map_err(VerifyCaError::File)?;
            let key_bytes = read_pem("ssl-key", key).map_err(VerifyCaError::File)?;
            let chain: Vec<_> = CertificateDer::pem_slice_iter(&cert_bytes)
                .flatten()
                .collect();
            let key = PrivateKeyDer::from_pem_slice(&key_bytes)
                .map_err(|e| VerifyCaError::Protocol(format!("ssl-key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(VerifyCaError::Handshake)?
        }
    };
    Ok(config)
}

/// WebPKI's verification with one error forgiven: the certificate naming another host.
#[derive(Debug)]
struct CaOnly {
    inner: Arc<WebPkiServerVerifier>,
}

/// True for the errors `ssl-mode=VERIFY_CA` accepts: a name mismatch, by its variant (never its
/// text), and nothing else.
fn is_name_mismatch(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. }
        )
    )
}

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(e) if is_name_mismatch(&e) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A name the certificate is valid for, as the driver will check it: a DNS name first (a
/// wildcard made concrete), else an IP address. WebPKI ignores the subject's CN, so only the
/// subjectAltName counts.
fn name_of(leaf: &CertificateDer<'_>) -> Option<String> {
    let cert = Certificate::from_der(leaf.as_ref()).ok()?;
    let extensions = cert.tbs_certificate().extensions()?;
    let san = extensions
        .iter()
        .find(|e| e.extn_id == ID_CE_SUBJECT_ALT_NAME)?;
    let names = SubjectAltName::from_der(san.extn_value.as_bytes()).ok()?;
    let mut ip = None;
    let mut wildcard = None;
    for name in names.0 {
        match name {
            GeneralName::DnsName(dns) => {
                let dns = dns.as_str().to_owned();
                match dns.strip_prefix("*.") {
                    Some(rest) => {
                        wildcard.get_or_insert_with(|| format!("powerdiag-verify-ca.{rest}"));
                    }
                    None if ServerName::try_from(dns.as_str()).is_ok() => return Some(dns),
                    None => {}
                }
            }
            GeneralName::IpAddress(bytes) => {
                let b = bytes.as_bytes();
                let addr = match b.len() {
                    4 => <[u8; 4]>::try_from(b).ok().map(std::net::IpAddr::from),
                    16 => <[u8; 16]>::try_from(b).ok().map(std::net::IpAddr::from),
                    _ => None,
                };
                if let Some(a) = addr {
                    ip.get_or_insert(a.to_string());
                }
            }
            _ => {}
        }
    }
    wildcard.or(ip)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use rustls::CertificateError as C;

    use super::*;
    use crate::collect::mariadb::tls::SslMode;

    fn testdata(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../exporter-web/testdata")
            .join(name)
    }

    /// Only a name mismatch is forgiven, recognised by its variant.
    #[test]
    fn only_the_name_is_forgiven() {
        let context = rustls::Error::InvalidCertificate(C::NotValidForNameContext {
            expected: ServerName::try_from("db.example").unwrap(),
            presented: vec!["10.99.99.99".into()],
        });
        assert!(
            !context.to_string().contains("NotValidForName"),
            "the text the driver looks for is gone: {context}"
        );
        assert!(is_name_mismatch(&context));
        assert!(is_name_mismatch(&rustls::Error::InvalidCertificate(
            C::NotValidForName
        )));
        for other in [
            C::Expired,
            C::NotValidYet,
            C::UnknownIssuer,
            C::BadSignature,
            C::Revoked,
            C::InvalidPurpose,
        ] {
            assert!(!is_name_mismatch(&rustls::Error::InvalidCertificate(other)));
        }
        assert!(!is_name_mismatch(&rustls::Error::HandshakeNotComplete));
    }

    #[test]
    fn names_from_the_subject_alt_name() {
        let pem = std::fs::read(testdata("test-server.crt")).unwrap();
        let leaf = CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap();
        // SAN DNS:localhost, IP:127.0.0.1: the DNS name first.
        assert_eq!(name_of(&leaf).as_deref(), Some("localhost"));
        // The client certificate names no host.
        let pem = std::fs::read(testdata("test-client.crt")).unwrap();
        let leaf = CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(name_of(&leaf), None);
    }

    #[test]
    fn greetings() {
        // MariaDB 11.8's greeting (version, id, scramble, filler, capabilities with CLIENT_SSL).
        let mut g = vec![10u8];
        g.extend_from_slice(b"11.8.6-MariaDB\0");
        g.extend_from_slice(&[1, 0, 0, 0]);
        g.extend_from_slice(b"abcdefgh");
        g.push(0);
        g.extend_from_slice(&0xfffeu16.to_le_bytes());
        assert!(offers_tls(&g).unwrap());
        let n = g.len();
        g[n - 2..].copy_from_slice(&0xf7feu16.to_le_bytes());
        assert!(!offers_tls(&g).unwrap());
        let refused = b"\xff\x69\x04#HY000Too many connections";
        let e = offers_tls(refused).unwrap_err().to_string();
        assert_eq!(e, "the server refused the connection: Too many connections");
        assert!(offers_tls(b"\x0aversion-without-end").is_err());
        assert!(offers_tls(b"HTTP/1.1 400").is_err());
    }

    /// A server speaking the greeting and TLS with the test certificates (DNS:localhost,
    /// IP:127.0.0.1): the name is learned whatever the host was called, a wrong CA is refused.
    #[tokio::test]
    async fn the_handshake_checks_the_ca_and_learns_a_name() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            super::super::tls::install_provider();
            let chain: Vec<_> = CertificateDer::pem_file_iter(testdata("test-server.crt"))
                .unwrap()
                .flatten()
                .collect();
            let key = PrivateKeyDer::from_pem_file(testdata("test-server.key")).unwrap();
            let config = rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
            for _ in 0..2 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut g = vec![10u8];
                g.extend_from_slice(b"11.8.6-MariaDB\0\x01\0\0\0abcdefgh\0");
                g.extend_from_slice(&0xfffeu16.to_le_bytes());
                let mut packet = vec![g.len() as u8, 0, 0, 0];
                packet.extend_from_slice(&g);
                s.write_all(&packet).await.unwrap();
                let mut req = [0u8; 36];
                s.read_exact(&mut req).await.unwrap();
                assert_eq!(&req[..4], &[32, 0, 0, 1]);
                let _ = acceptor.accept(s).await;
            }
        });
        let with_ca = |ca: &str| Tls {
            mode: SslMode::VerifyCa,
            ca: Some(testdata(ca)),
            identity: None,
        };
        // Connected as "127.0.0.1"; asked for a name the certificate does hold.
        let name = certificate_name(
            "127.0.0.1",
            port,
            &with_ca("test-ca.crt"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(name, "localhost");
        // Signed by another CA: refused, with rustls's reason.
        let e = certificate_name(
            "127.0.0.1",
            port,
            &with_ca("test-client.crt"),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                &e,
                VerifyCaError::Handshake(rustls::Error::InvalidCertificate(C::UnknownIssuer))
            ),
            "{e:?}"
        );
        server.await.unwrap();
    }
}
