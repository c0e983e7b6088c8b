use std::{fs, path::Path, time::Duration};

use super::*;
use crate::{
    config::load,
    read::{Kind, ReadError},
    testing::*,
};

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

// -- files that are not regular, or too large --------------------------------------------------

#[test]
fn special_or_huge_files_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // The configuration itself: a device (it used to be read until memory ran out).
    let e = load(Path::new("/dev/zero")).unwrap_err();
    assert!(
        matches!(
            e,
            WebConfigError::Read {
                error: ReadError::NotRegular(Kind::CharDevice),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "cannot read web config /dev/zero: it is a character device, not a regular file: give \
         the path of a regular file"
    );
    let e = load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("it is a directory"), "{e}");
    let big = dir.path().join("big.yml");
    fs::File::create(&big).unwrap().set_len(1 << 30).unwrap();
    let e = load(&big).unwrap_err().to_string();
    assert!(e.contains("big.yml: larger than 1024 KiB"), "{e}");

    // A directory as the key, a huge file as the CA.
    fs::create_dir(dir.path().join("key.d")).unwrap();
    let yaml = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: key.d\n",
        testdata("test-server.crt").display()
    );
    let e = load(&write_config(dir.path(), &yaml))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tls_server_config.key_file: cannot read ")
            && e.contains("key.d: it is a directory, not a regular file"),
        "{e}"
    );
    let yaml = tls_yaml("test-server.crt", "test-server.key")
        + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: big.yml\n";
    let e = load(&write_config(dir.path(), &yaml))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tls_server_config.client_ca_file: cannot read ") && e.contains("larger than"),
        "{e}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_as_certificate_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("server.crt");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    fs::copy(testdata("test-server.key"), dir.path().join("server.key")).unwrap();
    let path = write_config(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    // On a thread: a regression (a blocking open) fails here instead of hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load(&path).map(|_| ()).map_err(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a FIFO certificate must not block the load")
        .unwrap_err();
    assert!(
        e.contains("tls_server_config.cert_file: cannot read ")
            && e.contains("server.crt: it is a FIFO (named pipe), not a regular file"),
        "{e}"
    );
}

// -- certificate expiry -----------------------------------------------------------------------

#[test]
fn expired_and_soon_expiring_certificates_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let config = load(&write_config(
        dir.path(),
        &tls_yaml("test-server.crt", "test-server.key"),
    ))
    .unwrap();
    // The test certificate: notAfter 2036-11-19T02:10:38Z.
    let not_after = config.certificate_not_after().unwrap();
    assert_eq!(
        humantime::format_rfc3339_seconds(not_after).to_string(),
        "2036-11-19T02:10:38Z"
    );
    let day = Duration::from_secs(86_400);
    assert_eq!(config.certificate_warning(not_after - 400 * day), None);
    let soon = config.certificate_warning(not_after - 3 * day).unwrap();
    assert!(
        soon.contains("tls_server_config.cert_file: the certificate expires in 3 day(s) (notAfter 2036-11-19T02:10:38Z)"),
        "{soon}"
    );
    assert!(soon.starts_with("web config "), "{soon}");
    let expired = config.certificate_warning(not_after + 10 * day).unwrap();
    assert!(
        expired.contains("the certificate expired 10 day(s) ago") && expired.contains("renew it"),
        "{expired}"
    );
    // Without TLS there is nothing to warn about.
    let plain = parse(&users_yaml()).unwrap();
    assert_eq!(plain.certificate_warning(not_after + 10 * day), None);
}
