//! TLS to MariaDB against the `tls` server (11.8 with ssl_ca/ssl_cert/ssl_key from
//! tests/harness/tls.sh's throw-away PKI, whose directory is `POWERDIAG_IT_TLS_CERTS`): accounts
//! created `REQUIRE SSL` and `REQUIRE X509` reached through the defaults file (with an
//! `!include`) and through URL parameters; without TLS, with the wrong CA and without the client
//! certificate the error says what to fix.

use std::{os::unix::fs::PermissionsExt, path::PathBuf};

use mysql_async::prelude::Queryable;
use serde_json::Value;

use crate::support::{Run, Server, block_on, doctor_json, powerdiag, run};

const SSL_PW: &str = "tls-it-ssl-pw";
const X509_PW: &str = "tls-it-x509-pw";

fn certs() -> PathBuf {
    let dir = std::env::var("POWERDIAG_IT_TLS_CERTS").unwrap_or_else(|_| {
        panic!(
            "POWERDIAG_IT_TLS_CERTS is not set: this test needs the tls server that tests/run.sh \
             starts (tests/harness/tls.sh certs DIR, then mariadb.sh start tls 11.8 PORT with \
             POWERDIAG_IT_MARIADB_OPTIONS=\"$(tests/harness/tls.sh server-options DIR)\")"
        )
    });
    PathBuf::from(dir)
}

/// The `tls` server with its two accounts (re-created: each test may run alone).
fn server() -> Server {
    let server = Server::get("tls");
    block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        let have: Option<String> = c.query_first("SELECT @@have_ssl").await.unwrap();
        assert_eq!(
            have.as_deref(),
            Some("YES"),
            "the tls server has no TLS: start it with tests/harness/tls.sh server-options"
        );
        for sql in [
            format!(
                "CREATE OR REPLACE USER pd_ssl@'127.0.0.1' IDENTIFIED BY '{SSL_PW}' REQUIRE SSL"
            ),
            "GRANT SELECT, PROCESS ON *.* TO pd_ssl@'127.0.0.1'".to_owned(),
            format!(
                "CREATE OR REPLACE USER pd_x509@'127.0.0.1' IDENTIFIED BY '{X509_PW}' REQUIRE X509"
            ),
            "GRANT SELECT, PROCESS ON *.* TO pd_x509@'127.0.0.1'".to_owned(),
        ] {
            c.query_drop(sql).await.unwrap();
        }
        drop(c);
        pool.disconnect().await.unwrap();
    });
    server
}

fn url(server: &Server, user: &str, pw: &str, query: &str) -> String {
    format!("mysql://{user}:{pw}@127.0.0.1:{}/{query}", server.port)
}

fn mariadb(r: &Run) -> Value {
    r.json()["mariadb"].clone()
}

fn reachable(r: &Run) {
    let m = mariadb(r);
    assert_eq!(m["reachable"], true, "{m:#}\nstderr: {}", r.stderr);
    assert!(m["version"].as_str().unwrap().starts_with("11.8."), "{m:#}");
}

#[test]
fn require_ssl_account_through_the_defaults_file_and_the_url() {
    let server = server();
    let ca = certs().join("ca.pem");

    // Defaults file: the TLS lines in an included file, the CA path relative to it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf.d")).unwrap();
    std::fs::copy(&ca, dir.path().join("conf.d/ca.pem")).unwrap();
    std::fs::write(
        dir.path().join("conf.d/tls.cnf"),
        "[client]\nssl-ca = ca.pem\nssl-verify-server-cert\n",
    )
    .unwrap();
    let cnf = dir.path().join("my.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nuser = pd_ssl\npassword = {SSL_PW}\nhost = 127.0.0.1\nport = {}\n!includedir conf.d\n",
            server.port
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = run(powerdiag()
        .args([
            "doctor",
            "--format",
            "json",
            "--no-probe",
            "--sample-window",
            "0",
        ])
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    reachable(&r);
    // 0600: no permission warning; the password is in no output.
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert!(!r.stdout.contains(SSL_PW) && !r.stderr.contains(SSL_PW));

    // collect through the same file.
    let out = dir.path().join("snapshot.json");
    let c = run(powerdiag()
        .args(["collect", "--no-probe", "--sample-window", "0", "-o"])
        .arg(&out)
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    assert_eq!(c.code, 0, "{}", c.stderr);
    let snap: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(snap["mariadb"]["reachable"], true, "{snap:#}");
    assert!(!std::fs::read_to_string(&out).unwrap().contains(SSL_PW));

    // URL parameters.
    let q = format!("?ssl-ca={}", ca.display());
    reachable(&doctor_json(
        &url(&server, "pd_ssl", SSL_PW, &q),
        &["--no-probe"],
    ));
    // mysql_async's names: TLS without verifying the server (an unrelated CA is then no matter).
    let q = format!(
        "?require_ssl=true&verify_ca=false&ssl-ca={}",
        certs().join("other-ca.pem").display()
    );
    reachable(&doctor_json(
        &url(&server, "pd_ssl", SSL_PW, &q),
        &["--no-probe"],
    ));
}

#[test]
fn without_tls_or_with_the_wrong_ca_the_error_says_what_to_fix() {
    let server = server();

    // A REQUIRE SSL account in clear: the server says only "access denied"; the hint names TLS.
    let r = doctor_json(&url(&server, "pd_ssl", SSL_PW, ""), &["--no-probe"]);
    let m = mariadb(&r);
    assert_eq!(m["reachable"], false, "{m:#}");
    assert_eq!(m["error"]["kind"], "access_denied", "{m:#}");
    let hint = m["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("REQUIRE SSL") && hint.contains("ssl-ca"),
        "{hint}"
    );

    // The wrong CA: a TLS error naming the CA file, and what to do.
    let other = certs().join("other-ca.pem");
    let r = doctor_json(
        &url(
            &server,
            "pd_ssl",
            SSL_PW,
            &format!("?ssl-ca={}", other.display()),
        ),
        &["--no-probe"],
    );
    let m = mariadb(&r);
    assert_eq!(m["reachable"], false, "{m:#}");
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    let message = m["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "not signed by the CA in ssl-ca {}",
            other.display()
        )),
        "{message}"
    );
    let hint = m["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("POWERDIAG_MARIADB_URL") && hint.contains("ssl-verify-server-cert=0"),
        "{hint}"
    );
    assert!(!r.stdout.contains(SSL_PW) && !r.stderr.contains(SSL_PW));

    // The same from a defaults file: its path is what to fix.
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("wrong.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nuser=pd_ssl\npassword={SSL_PW}\nhost=127.0.0.1\nport={}\nssl-ca={}\n",
            server.port,
            other.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o640)).unwrap();
    let r = run(powerdiag()
        .args([
            "doctor",
            "--format",
            "json",
            "--no-probe",
            "--sample-window",
            "0",
        ])
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    let m = mariadb(&r);
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    assert!(
        m["error"]["hint"]
            .as_str()
            .unwrap()
            .contains(&format!("--mariadb.defaults-file {}", cnf.display())),
        "{m:#}"
    );
    // Mode 0640 with a password: a warning on stderr, not a failure.
    assert!(
        r.stderr
            .contains("holds a password and is readable by its group (mode 0640); chmod 600 it"),
        "{}",
        r.stderr
    );

    // A CA file that is not one: named before any connection.
    let r = doctor_json(
        &url(
            &server,
            "pd_ssl",
            SSL_PW,
            &format!("?ssl-ca={}", cnf.display()),
        ),
        &["--no-probe"],
    );
    let m = mariadb(&r);
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    assert!(
        m["error"]["message"].as_str().unwrap().contains(&format!(
            "ssl-ca {}: holds no PEM certificate",
            cnf.display()
        )),
        "{m:#}"
    );
}

#[test]
fn require_x509_account_needs_the_client_certificate() {
    let server = server();
    let c = certs();
    let ca = c.join("ca.pem");

    // TLS alone is not enough: the hint asks for the client certificate.
    let r = doctor_json(
        &url(
            &server,
            "pd_x509",
            X509_PW,
            &format!("?ssl-ca={}", ca.display()),
        ),
        &["--no-probe"],
    );
    let m = mariadb(&r);
    assert_eq!(m["error"]["kind"], "access_denied", "{m:#}");
    let hint = m["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("REQUIRE X509") && hint.contains("ssl-cert and ssl-key"),
        "{hint}"
    );

    // With it, from the URL and from a defaults file.
    let q = format!(
        "?ssl-ca={}&ssl-cert={}&ssl-key={}",
        ca.display(),
        c.join("client.pem").display(),
        c.join("client-key.pem").display()
    );
    reachable(&doctor_json(
        &url(&server, "pd_x509", X509_PW, &q),
        &["--no-probe"],
    ));
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("x509.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nuser=pd_x509\npassword={X509_PW}\nhost=127.0.0.1\nport={}\nssl-ca={}\nssl-cert={}\nssl-key={}\n",
            server.port,
            ca.display(),
            c.join("client.pem").display(),
            c.join("client-key.pem").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = run(powerdiag()
        .args([
            "doctor",
            "--format",
            "json",
            "--no-probe",
            "--sample-window",
            "0",
        ])
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    reachable(&r);
}

/// Needs no server: the agent checks the TLS files before it binds, and logs the defaults
/// file's permission warning.
#[test]
fn the_agent_checks_tls_files_before_binding_and_logs_the_permission_warning() {
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("my.cnf");
    std::fs::write(
        &cnf,
        "[client]\nuser=mon\npassword=agent-tls-secret\nhost=127.0.0.1\nport=1\nssl-ca=/nonexistent/ca.pem\n",
    )
    .unwrap();
    std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = crate::agent::free_port();
    let r = run(powerdiag()
        .args([
            "agent",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("ssl-ca /nonexistent/ca.pem: cannot read it: No such file"),
        "{}",
        r.stderr
    );
    let warn = r
        .stderr
        .lines()
        .find(|l| l.contains("holds a password"))
        .unwrap_or_else(|| panic!("no permission warning:\n{}", r.stderr));
    assert!(
        warn.contains("level=warn") && warn.contains("(mode 0644); chmod 600 it"),
        "{warn}"
    );
    assert!(!r.stderr.contains("agent-tls-secret"), "{}", r.stderr);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// m1011 runs without TLS (`have_ssl` DISABLED): asking for TLS is an error that says so;
/// `ssl-mode=PREFERRED` connects in clear.
#[test]
fn a_server_without_tls() {
    let server = Server::m1011();
    let root = server.root_url();
    let r = doctor_json(&format!("{root}?ssl=1"), &["--no-probe"]);
    let m = mariadb(&r);
    assert_eq!(m["reachable"], false, "{m:#}");
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    let message = m["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the server does not offer TLS (have_ssl is not YES), but TLS is asked for in POWERDIAG_MARIADB_URL"),
        "{message}"
    );
    assert!(
        m["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("ssl_cert and ssl_key"),
        "{m:#}"
    );
    let r = doctor_json(&format!("{root}?ssl-mode=PREFERRED"), &["--no-probe"]);
    assert_eq!(mariadb(&r)["reachable"], true, "{}", r.stdout);
}

/// ssl-mode=VERIFY_CA checks the certificate against the CA and not the name; VERIFY_IDENTITY
/// checks both; REQUIRED neither. The `tlsname` server's certificate is signed by the test CA
/// but names another host (IP:10.99.99.99, DNS:db.invalid), and powerdiag connects to
/// 127.0.0.1.
#[test]
fn verify_ca_skips_only_the_name() {
    let server = Server::get("tlsname");
    let ca = certs().join("ca.pem");
    let other = certs().join("other-ca.pem");
    let root = |query: String| {
        format!(
            "mysql://root:{}@127.0.0.1:{}/{query}",
            Server::root_password(),
            server.port
        )
    };
    // VERIFY_CA with the right CA: connects (the name is not checked), from the URL …
    let r = doctor_json(
        &root(format!("?ssl-mode=VERIFY_CA&ssl-ca={}", ca.display())),
        &["--no-probe"],
    );
    reachable(&r);
    // … and as `ssl-verify-server-cert` with `verify_identity=false` (mysql_async's names).
    let r = doctor_json(
        &root(format!(
            "?require_ssl=true&verify_identity=false&ssl-ca={}",
            ca.display()
        )),
        &["--no-probe"],
    );
    reachable(&r);
    // From a defaults file.
    let dir = tempfile::tempdir().unwrap();
    let cnf = dir.path().join("my.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[client]\nuser=root\npassword={}\nhost=127.0.0.1\nport={}\nssl-ca={}\nssl-mode=VERIFY_CA\n",
            Server::root_password(),
            server.port,
            ca.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = run(powerdiag()
        .args([
            "doctor",
            "--format",
            "json",
            "--no-probe",
            "--sample-window",
            "0",
        ])
        .arg("--mariadb.defaults-file")
        .arg(&cnf));
    reachable(&r);

    // VERIFY_CA with another CA: refused, naming the CA file.
    let r = doctor_json(
        &root(format!("?ssl-mode=VERIFY_CA&ssl-ca={}", other.display())),
        &["--no-probe"],
    );
    let m = mariadb(&r);
    assert_eq!(m["reachable"], false, "{m:#}");
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    let message = m["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "not signed by the CA in ssl-ca {}",
            other.display()
        )),
        "{message}"
    );

    // VERIFY_IDENTITY: the name is checked and refused.
    let r = doctor_json(
        &root(format!("?ssl-mode=VERIFY_IDENTITY&ssl-ca={}", ca.display())),
        &["--no-probe"],
    );
    let m = mariadb(&r);
    assert_eq!(m["reachable"], false, "{m:#}");
    assert_eq!(m["error"]["kind"], "tls", "{m:#}");
    let message = m["error"]["message"].as_str().unwrap();
    assert!(message.contains("127.0.0.1"), "{message}");

    // REQUIRED: encrypted, nothing verified.
    let r = doctor_json(
        &root(format!("?ssl-mode=REQUIRED&ssl-ca={}", other.display())),
        &["--no-probe"],
    );
    reachable(&r);
    assert!(!r.stdout.contains(&Server::root_password()));
}
