//! Where to connect: `--mariadb.url`, `POWERDIAG_MARIADB_URL`, `--mariadb.defaults-file`, or the
//! usual local defaults. Pure: reading files is the caller's job (`option_file.rs` reads the
//! defaults file), so every path is testable.

use std::path::PathBuf;

pub use super::option_file::{
    DefaultsFile, MAX_INCLUDE_DEPTH, MAX_OPTION_FILE_BYTES, load_defaults_file, load_named,
};
pub use super::settings::{ClientSettings, Password, TargetError};
use super::tls::parse_bool;
pub use super::tls::{SslMode, Tls, TlsSwitches};

/// How to reach the server: one endpoint and the credentials for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub user: String,
    pub password: Option<Password>,
    pub endpoint: Endpoint,
    /// Where these settings came from, for error messages.
    pub source: String,
    /// TLS for a TCP endpoint (never used on a unix socket).
    pub tls: Option<Tls>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Socket(PathBuf),
}

impl Candidate {
    /// `user@host:port` or `user@/path/to.sock`: what reports show. No password.
    pub fn display(&self) -> String {
        match &self.endpoint {
            Endpoint::Tcp { host, port } if host.contains(':') => {
                format!("{}@[{host}]:{port}", self.user)
            }
            Endpoint::Tcp { host, port } => format!("{}@{host}:{port}", self.user),
            Endpoint::Socket(p) => format!("{}@{}", self.user, p.display()),
        }
    }

    /// True for a unix socket or a loopback address: the server shares this host.
    pub fn is_local(&self) -> bool {
        match &self.endpoint {
            Endpoint::Socket(_) => true,
            Endpoint::Tcp { host, .. } => {
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .map(|ip| ip.is_loopback())
                        .unwrap_or(false)
            }
        }
    }
}

fn invalid(source_name: &str, message: impl Into<String>) -> TargetError {
    TargetError::Invalid {
        source_name: source_name.to_owned(),
        message: message.into(),
    }
}

pub const DEFAULT_PORT: u16 = 3306;

/// Unix sockets that MariaDB packages use, in the order they are tried.
pub const DEFAULT_SOCKETS: &[&str] = &[
    "/run/mysqld/mysqld.sock",
    "/var/run/mysqld/mysqld.sock",
    "/var/lib/mysql/mysql.sock",
    "/tmp/mysql.sock",
];

/// The URL parameters [`parse_url`] takes (`_` and `-` are the same, as in a my.cnf).
pub const URL_PARAMETERS: &str = "socket, ssl, ssl-ca, ssl-cert, ssl-key, ssl-verify-server-cert, ssl-mode, require_ssl, verify_ca, verify_identity";

/// Parses `mysql://user[:password]@host[:port][/][?socket=/path]` (also `mariadb://`).
/// Percent-encoded user and password are decoded. The error never repeats the URL, which may
/// hold a password.
///
/// TLS parameters: the my.cnf names (`ssl`, `ssl-ca`, `ssl-cert`, `ssl-key`,
/// `ssl-verify-server-cert`, `ssl-mode`) and mysql_async's (`require_ssl`, `verify_ca`,
/// `verify_identity`), e.g. `?ssl-ca=/etc/powerdiag/ca.pem`.
pub fn parse_url(raw: &str, source_name: &str) -> Result<ClientSettings, TargetError> {
    let url = url::Url::parse(raw.trim()).map_err(|e| {
        invalid(
            source_name,
            format!("not a URL ({e}); expected mysql://user[:password]@host[:port]/"),
        )
    })?;
    if !matches!(url.scheme(), "mysql" | "mariadb") {
        return Err(invalid(
            source_name,
            format!(
                "scheme {:?} is not mysql:// (expected mysql://user[:password]@host[:port]/)",
                url.scheme()
            ),
        ));
    }
    let decode = |s: &str, what: &str| -> Result<String, TargetError> {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| {
                invalid(
                    source_name,
                    format!("the {what} is not valid UTF-8 after percent-decoding"),
                )
            })
    };
    let mut s = ClientSettings::default();
    if !url.username().is_empty() {
        s.user = Some(decode(url.username(), "user")?);
    }
    if let Some(p) = url.password() {
        s.password = Some(Password::new(decode(p, "password")?));
    }
    if let Some(h) = url.host_str().filter(|h| !h.is_empty()) {
        s.host = Some(h.trim_start_matches('[').trim_end_matches(']').to_owned());
    }
    s.port = url.port();
    for (k, v) in url.query_pairs() {
        let key = k.replace('_', "-").to_ascii_lowercase();
        let flag = |name: &str| {
            parse_bool(Some(v.as_ref())).ok_or_else(|| {
                invalid(
                    source_name,
                    format!("URL parameter {name}={v:?} is not a boolean (true/false, 1/0)"),
                )
            })
        };
        let path = || PathBuf::from(v.as_ref());
        match key.as_str() {
            "socket" => s.socket = Some(path()),
            "ssl" | "require-ssl" => s.tls.ssl = Some(flag(&k)?),
            "ssl-verify-server-cert" | "verify-ca" => s.tls.verify_server_cert = Some(flag(&k)?),
            "verify-identity" => s.tls.verify_identity = Some(flag(&k)?),
            "ssl-mode" => {
                s.tls.mode = Some(SslMode::parse(&v).ok_or_else(|| {
                    invalid(
                        source_name,
                        format!("URL parameter ssl-mode={v:?} is not DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"),
                    )
                })?)
            }
            "ssl-ca" => s.tls.ca = Some(path()),
            "ssl-cert" => s.tls.cert = Some(path()),
            "ssl-key" => s.tls.key = Some(path()),
            _ => {
                return Err(invalid(
                    source_name,
                    format!("unknown URL parameter {k:?} (supported: {URL_PARAMETERS})"),
                ));
            }
        }
    }
    if s.tls.mode.is_some()
        && (s.tls.ssl.is_some()
            || s.tls.verify_server_cert.is_some()
            || s.tls.verify_identity.is_some())
    {
        return Err(invalid(
            source_name,
            "ssl-mode and ssl/ssl-verify-server-cert/require_ssl/verify_ca/verify_identity say the same thing: give one of them",
        ));
    }
    if s.host.is_none() && s.socket.is_none() {
        return Err(invalid(
            source_name,
            "no host (expected mysql://user@host:port/ or ?socket=/path)",
        ));
    }
    Ok(s)
}

/// Parses a my.cnf's text (no `!include`: use [`load_defaults_file`] to read one with its
/// includes). See `option_file.rs` for the groups and keys.
pub fn parse_my_cnf(text: &str, source_name: &str) -> Result<ClientSettings, TargetError> {
    DefaultsFile::from_text(std::path::Path::new(source_name), text).map(|f| f.settings)
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct TargetRequest {
    /// `--mariadb.url` or `POWERDIAG_MARIADB_URL`, with the name of where it came from.
    pub url: Option<(String, String)>,
    /// `--mariadb.defaults-file`, read with its includes ([`load_defaults_file`]).
    pub defaults_file: Option<DefaultsFile>,
    /// `~/.my.cnf`, when it exists (used only without url and defaults file).
    pub home_my_cnf: Option<DefaultsFile>,
    /// The OS user name, the default MariaDB user as for the `mariadb` client.
    pub os_user: Option<String>,
    /// Which of [`DEFAULT_SOCKETS`] exist on this machine.
    pub existing_sockets: Vec<PathBuf>,
}

/// The flag whose URL may not hold a password (`POWERDIAG_MARIADB_URL` may).
pub const URL_FLAG: &str = "--mariadb.url";

/// Turns the request into the endpoints to try, in order.
///
/// - A URL: exactly that endpoint. A defaults file may supply what the URL leaves out.
/// - A defaults file: its socket, or its host and port (default 3306).
/// - Nothing: `~/.my.cnf` if present, then each existing default socket, then 127.0.0.1:3306.
pub fn plan(req: &TargetRequest) -> Result<Vec<Candidate>, TargetError> {
    let mut settings = ClientSettings::default();
    let source;
    let explicit;
    if let Some(file) = &req.defaults_file {
        settings.overlay(file.settings.clone());
        source = format!("--mariadb.defaults-file {}", file.path.display());
        explicit = true;
    } else if let Some(file) = &req.home_my_cnf {
        settings.overlay(file.settings.clone());
        source = file.path.display().to_string();
        explicit = false;
    } else {
        source = "local defaults".to_owned();
        explicit = false;
    }
    let source = if let Some((name, url)) = &req.url {
        let from_url = parse_url(url, name)?;
        if from_url.password.is_some() && name == URL_FLAG {
            return Err(invalid(
                URL_FLAG,
                "a password on the command line is readable by every local user (ps, /proc/PID/cmdline) for the whole life of the process; give the URL without it and put the password in the [client] section of --mariadb.defaults-file (mode 0600), or in POWERDIAG_MARIADB_URL (the environment is readable only by the same user and root)",
            ));
        }
        // A URL names one endpoint: don't mix in a socket or host from a file.
        settings.host = None;
        settings.socket = None;
        settings.port = None;
        settings.overlay(from_url);
        name.clone()
    } else {
        source
    };
    let explicit = explicit || req.url.is_some();
    // The file's TLS settings and the URL's, merged: e.g. ssl-ca from the file, ssl-mode from
    // the URL.
    let tls = settings
        .tls
        .resolve()
        .map_err(|m| invalid(&source, m.to_string()))?;

    let user = settings
        .user
        .clone()
        .or_else(|| req.os_user.clone())
        .unwrap_or_else(|| "root".to_owned());
    let make = |endpoint| Candidate {
        user: user.clone(),
        password: settings.password.clone(),
        endpoint,
        source: source.clone(),
        tls: tls.clone(),
    };
    let mut out = Vec::new();
    if let Some(sock) = &settings.socket {
        out.push(make(Endpoint::Socket(sock.clone())));
    }
    if let Some(host) = &settings.host {
        out.push(make(Endpoint::Tcp {
            host: host.clone(),
            port: settings.port.unwrap_or(DEFAULT_PORT),
        }));
    }
    if out.is_empty() && explicit {
        // A defaults file without host or socket: the client's own default, TCP to localhost.
        out.push(make(Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port: settings.port.unwrap_or(DEFAULT_PORT),
        }));
    }
    if !explicit && out.is_empty() {
        for sock in &req.existing_sockets {
            out.push(make(Endpoint::Socket(sock.clone())));
        }
        out.push(make(Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port: settings.port.unwrap_or(DEFAULT_PORT),
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password in `--mariadb.url` is refused (argv is world-readable); the same URL from the
    /// environment is accepted.
    #[test]
    fn no_password_on_the_command_line() {
        let req = |name: &str| TargetRequest {
            url: Some((name.into(), "mysql://mon:s3cret@db:3306/".into())),
            ..Default::default()
        };
        let e = plan(&req(URL_FLAG)).unwrap_err().to_string();
        assert!(
            e.starts_with("--mariadb.url: a password on the command line")
                && e.contains("--mariadb.defaults-file")
                && !e.contains("s3cret"),
            "{e}"
        );
        assert!(plan(&req("POWERDIAG_MARIADB_URL")).is_ok());
        let no_password = TargetRequest {
            url: Some((URL_FLAG.into(), "mysql://mon@db:3306/".into())),
            ..Default::default()
        };
        assert!(plan(&no_password).is_ok());
    }

    #[test]
    fn url_with_everything() {
        let s = parse_url("mysql://mon:p%40ss%3Aw@db.example:3307/", "--mariadb.url").unwrap();
        assert_eq!(s.user.as_deref(), Some("mon"));
        assert_eq!(s.password, Some(Password::new("p@ss:w")));
        assert_eq!(s.host.as_deref(), Some("db.example"));
        assert_eq!(s.port, Some(3307));
        let s = parse_url("mariadb://root@[::1]:3306", "x").unwrap();
        assert_eq!(s.host.as_deref(), Some("::1"));
        let s = parse_url(
            "mysql://root@localhost/?socket=/run/mysqld/mysqld.sock",
            "x",
        )
        .unwrap();
        assert_eq!(s.socket, Some(PathBuf::from("/run/mysqld/mysqld.sock")));
    }

    #[test]
    fn bad_urls_are_named_and_never_echo_the_password() {
        for bad in [
            "http://u:secretpw@h/",
            "mysql://u:secretpw@h:99999/",
            "u:secretpw@h",
            "mysql://u:secretpw@h/?tls=1",
            "mysql:///",
        ] {
            let e = parse_url(bad, "--mariadb.url").unwrap_err().to_string();
            assert!(e.starts_with("--mariadb.url: "), "{e}");
            assert!(!e.contains("secretpw"), "{e}");
        }
    }

    #[test]
    fn password_debug_is_masked() {
        let s = parse_url("mysql://u:hunter2@h/", "x").unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
        let c = &plan(&TargetRequest {
            url: Some(("x".into(), "mysql://u:hunter2@h/".into())),
            ..Default::default()
        })
        .unwrap()[0];
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(c.display(), "u@h:3306");
    }

    #[test]
    fn my_cnf_groups_quotes_and_comments() {
        let text = "# comment\n[mysqld]\nport=1\n[client]\nuser = mon\npassword = \"a b#c\"\nport=3307 # note\n\
                    socket=/tmp/x.sock\n[client-mariadb]\nuser=override\n[other]\nhost=nope\n";
        let s = parse_my_cnf(text, "f").unwrap();
        assert_eq!(s.user.as_deref(), Some("override"));
        assert_eq!(s.password, Some(Password::new("a b#c")));
        assert_eq!(s.port, Some(3307));
        assert_eq!(s.socket, Some(PathBuf::from("/tmp/x.sock")));
        assert_eq!(s.host, None);
    }

    #[test]
    fn my_cnf_errors_name_the_line() {
        let e = parse_my_cnf("[client]\nport=abc\n", "/etc/my.cnf")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc/my.cnf") && e.contains("line 2"), "{e}");
        let e = parse_my_cnf("[client\n", "f").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        // Hostile input: binary junk and huge lines do not panic.
        let junk = "\u{0}[\u{ffff}]=\n".repeat(1000) + &"x".repeat(100_000);
        let _ = parse_my_cnf(&junk, "f");
    }

    #[test]
    fn defaults_try_sockets_then_tcp() {
        let req = TargetRequest {
            os_user: Some("alice".into()),
            existing_sockets: vec![PathBuf::from("/run/mysqld/mysqld.sock")],
            ..Default::default()
        };
        let c = plan(&req).unwrap();
        let shown: Vec<_> = c.iter().map(Candidate::display).collect();
        assert_eq!(
            shown,
            ["alice@/run/mysqld/mysqld.sock", "alice@127.0.0.1:3306"]
        );
        assert!(c.iter().all(Candidate::is_local));
    }

    #[test]
    fn home_my_cnf_supplies_credentials_for_defaults() {
        let req = TargetRequest {
            home_my_cnf: Some(
                DefaultsFile::from_text(
                    "/root/.my.cnf".as_ref(),
                    "[client]\nuser=mon\npassword=pw\n",
                )
                .unwrap(),
            ),
            os_user: Some("root".into()),
            ..Default::default()
        };
        let c = plan(&req).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].user, "mon");
        assert_eq!(c[0].password, Some(Password::new("pw")));
    }

    #[test]
    fn url_overrides_defaults_file_endpoint_but_keeps_its_password() {
        let req = TargetRequest {
            url: Some((
                "POWERDIAG_MARIADB_URL".into(),
                "mysql://mon@10.0.0.5:3310/".into(),
            )),
            defaults_file: Some(
                DefaultsFile::from_text(
                    "/etc/pd.cnf".as_ref(),
                    "[client]\npassword=pw\nsocket=/x.sock\n",
                )
                .unwrap(),
            ),
            ..Default::default()
        };
        let c = plan(&req).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].display(), "mon@10.0.0.5:3310");
        assert_eq!(c[0].password, Some(Password::new("pw")));
        assert!(!c[0].is_local());
        assert_eq!(c[0].source, "POWERDIAG_MARIADB_URL");
    }

    #[test]
    fn defaults_file_socket() {
        let req = TargetRequest {
            defaults_file: Some(
                DefaultsFile::from_text(
                    "/etc/pd.cnf".as_ref(),
                    "[client]\nuser=mon\nsocket=/s.sock\n",
                )
                .unwrap(),
            ),
            ..Default::default()
        };
        let c = plan(&req).unwrap();
        assert_eq!(
            c.iter().map(Candidate::display).collect::<Vec<_>>(),
            ["mon@/s.sock"]
        );
    }

    #[test]
    fn url_tls_parameters_merge_with_the_defaults_file() {
        let s = parse_url(
            "mysql://mon@db:3306/?ssl-ca=/etc/pd/ca.pem&ssl_cert=/c.pem&ssl-key=/k.pem",
            "x",
        )
        .unwrap();
        let t = s.tls.resolve().unwrap().unwrap();
        assert_eq!(t.mode, SslMode::VerifyIdentity);
        assert_eq!(t.ca, Some(PathBuf::from("/etc/pd/ca.pem")));
        assert_eq!(
            t.identity,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
        // mysql_async's names.
        let s = parse_url("mysql://h/?require_ssl=true&verify_identity=false", "x").unwrap();
        assert_eq!(s.tls.resolve().unwrap().unwrap().mode, SslMode::VerifyCa);
        let s = parse_url("mysql://h/?require_ssl=true&verify_ca=false", "x").unwrap();
        assert_eq!(s.tls.resolve().unwrap().unwrap().mode, SslMode::Required);
        for bad in [
            "mysql://u:secretpw@h/?ssl=perhaps",
            "mysql://u:secretpw@h/?ssl-mode=sometimes",
            "mysql://u:secretpw@h/?ssl-mode=REQUIRED&ssl=1",
        ] {
            let e = parse_url(bad, "--mariadb.url").unwrap_err().to_string();
            assert!(!e.contains("secretpw"), "{e}");
        }
        // The file gives the CA; the URL only switches verification off.
        let c = plan(&TargetRequest {
            url: Some((
                "--mariadb.url".into(),
                "mysql://mon@10.0.0.5/?ssl-verify-server-cert=0".into(),
            )),
            defaults_file: Some(
                DefaultsFile::from_text(
                    "/etc/pd.cnf".as_ref(),
                    "[client]
ssl-ca=ca.pem
",
                )
                .unwrap(),
            ),
            ..Default::default()
        })
        .unwrap();
        let t = c[0].tls.as_ref().unwrap();
        assert_eq!(t.mode, SslMode::Required);
        assert_eq!(t.ca, Some(PathBuf::from("/etc/ca.pem")));
        // A half client identity is a plan error naming the source.
        let e = plan(&TargetRequest {
            url: Some(("--mariadb.url".into(), "mysql://h/?ssl-cert=/c.pem".into())),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--mariadb.url: ssl-cert is given without ssl-key"),
            "{e}"
        );
    }
}
