use std::{
    fs,
    path::{Path, PathBuf},
};

use super::*;
use crate::testing::*;

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
fn a_file_that_sets_nothing_is_an_error() {
    // exporter-toolkit reads these as "plain HTTP, no authentication"; a truncated or
    // emptied file must not silently mean that.
    for yaml in [
        "",
        "# nothing\n",
        "{}",
        "tls_server_config:\nhttp_server_config:\nbasic_auth_users:\n",
        "basic_auth_users: {}\n",
        "tls_server_config:\n  cert_file: ''\n",
    ] {
        let e = parse(yaml).unwrap_err();
        assert!(matches!(e, WebConfigError::Empty { .. }), "{yaml:?}: {e:?}");
        let e = e.to_string();
        assert!(
            e.starts_with("web config /etc/powerdiag/web.yml: the file sets nothing"),
            "{e}"
        );
        assert!(e.contains("drop --web.config.file"), "{e}");
    }
    // One setting is enough.
    for yaml in ["http_server_config:\n  http2: false\n", &users_yaml()] {
        let config = parse(yaml).unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
        assert!(config.tls.is_none() && config.rustls_config().unwrap().is_none());
    }
}

#[test]
fn a_user_may_appear_once() {
    let hash = bcrypt::hash("x", 4).unwrap();
    let e = parse_err(&format!(
        "basic_auth_users:\n  alice: {hash}\n  bob: {hash}\n  alice: {hash}\n"
    ));
    assert!(
        e.contains("basic_auth_users: user \"alice\" appears twice; keep one entry per user"),
        "{e}"
    );
    // The parser names the field; the message does not repeat it.
    assert!(!e.contains("basic_auth_users: basic_auth_users"), "{e}");
    assert!(e.contains("line "), "the line is named: {e}");
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

    let e = parse_err("basic_auth_users: {}\ntls_server_config:\n  cert_file: a\n  key_fil: b\n");
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

// -- reloading --------------------------------------------------------------------------------

/// A TLS + basic auth configuration in `dir` (copies of the test certificate).
fn secure(dir: &Path) -> WebConfig {
    fs::copy(testdata("test-server.crt"), dir.join("server.crt")).unwrap();
    fs::copy(testdata("test-server.key"), dir.join("server.key")).unwrap();
    fs::copy(testdata("test-ca.crt"), dir.join("ca.crt")).unwrap();
    load(&write_config(dir, &(SECURE_TLS.to_owned() + &users_yaml()))).unwrap()
}

const SECURE_TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
    client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n";

#[test]
fn a_reload_never_lowers_security() {
    let dir = tempfile::tempdir().unwrap();
    let running = secure(dir.path());
    let users = users_yaml();
    let tls = |extra: &str| {
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n".to_owned() + extra
    };
    for (yaml, expected) in [
        // Empty or truncated to nothing.
        (String::new(), "the file sets nothing"),
        ("# truncated\n".to_owned(), "the file sets nothing"),
        // TLS dropped.
        (users.clone(), "a reload never turns TLS off"),
        // Basic auth dropped.
        (
            SECURE_TLS.to_owned(),
            "a reload never turns authentication off",
        ),
        (
            SECURE_TLS.to_owned() + "basic_auth_users: {}\n",
            "a reload never turns authentication off",
        ),
        // Weaker client certificates or TLS version.
        (
            tls("  min_version: TLS13\n") + &users,
            "client_auth_type NoClientCert is weaker than the running RequireAndVerifyClientCert",
        ),
        (
            tls(
                "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
            ) + &users,
            "client_auth_type VerifyClientCertIfGiven is weaker",
        ),
        (
            tls("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
                + &users,
            "min_version Tls12 is below the running Tls13",
        ),
        // Unusable: not YAML, a bad hash, a missing key file.
        ("tls_server_config: [".to_owned(), "web config "),
        (
            SECURE_TLS.to_owned() + "basic_auth_users:\n  alice: x\n",
            "not a bcrypt hash",
        ),
        (
            "tls_server_config:\n  cert_file: server.crt\n  key_file: gone.key\n".to_owned()
                + &users,
            "key_file: cannot read",
        ),
    ] {
        write_config(dir.path(), &yaml);
        let e = reload(&running).unwrap_err().to_string();
        assert!(
            e.contains(expected),
            "{yaml:?}\nexpected: {expected}\ngot: {e}"
        );
        assert!(e.contains("web.yml"), "names the file: {e}");
    }

    // Same or stronger is fine: a new password, another certificate setting.
    let rotated = bcrypt::hash("n3w", 4).unwrap();
    write_config(
        dir.path(),
        &(SECURE_TLS.to_owned() + &format!("basic_auth_users:\n  carol: {rotated}\n")),
    );
    let new = reload(&running).unwrap();
    assert_eq!(new.basic_auth_users.keys().collect::<Vec<_>>(), ["carol"]);
}

/// Issue 38: an expired certificate is refused on reload (the running one stays), named with
/// its notAfter.
#[test]
fn an_expired_certificate_is_refused_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = tls_yaml("test-server.crt", "test-server.key") + &users_yaml();
    let running = load(&write_config(dir.path(), &yaml)).unwrap();
    let not_after = running.certificate_not_after().unwrap();
    assert!(super::reload_at(&running, not_after - std::time::Duration::from_secs(60)).is_ok());
    let e = super::reload_at(&running, not_after + std::time::Duration::from_secs(60))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tls_server_config.cert_file: the certificate expired at")
            && e.contains("renew it and send SIGHUP again")
            && e.contains("web.yml"),
        "{e}"
    );
}

#[test]
fn plain_http_cannot_turn_into_tls_by_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let running = load(&write_config(dir.path(), &users_yaml())).unwrap();
    write_config(
        dir.path(),
        &(tls_yaml("test-server.crt", "test-server.key") + &users_yaml()),
    );
    let e = reload(&running).unwrap_err().to_string();
    assert!(e.contains("restart the agent to turn TLS on"), "{e}");
    // Without TLS either way, users may change and even be added.
    write_config(dir.path(), &users_yaml());
    assert!(reload(&running).is_ok());
}

#[test]
fn verified_credentials_survive_a_reload_that_keeps_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let running = load(&write_config(dir.path(), &users_yaml())).unwrap();
    assert!(running.check_basic_auth(Some(&basic("alice", "s3cret"))));
    // The same file again: no bcrypt needed for alice after the reload.
    let new = reload(&running).unwrap();
    assert!(matches!(
        new.check_cached(Some(&basic("alice", "s3cret"))),
        crate::auth::Check::Allow
    ));
}
