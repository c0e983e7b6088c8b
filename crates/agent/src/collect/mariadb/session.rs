//! One connection with a deadline on every statement, and errors classified for users.

use std::time::Duration;

use mysql_async::{Conn, OptsBuilder, Row, SslOpts, Value, prelude::Queryable};
use powerdiag_rules::{DbError, DbErrorKind};

use super::{
    target::{Candidate, Endpoint},
    tls::{self, SslMode, Tls},
};

/// How a TLS error says that the server offers no TLS (for ssl-mode=PREFERRED's retry).
const NO_TLS: &str = "the server does not offer TLS";

/// A connection whose statements each have a deadline. After a timeout the connection is in an
/// unknown protocol state, so every later statement fails at once instead of waiting again.
pub(crate) struct Session {
    conn: Option<Conn>,
    timeout: Duration,
    pub(crate) target: String,
    /// `'user'@'host'` as the server sees us, for GRANT hints.
    account: String,
    /// Statements sent, for the bounded-queries budget.
    pub(crate) statements: u32,
    /// The timeout this session's guards (`max_statement_time`, read-only) were set with.
    pub(crate) guarded: Option<Duration>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// `ssl-mode=VERIFY_CA`: the driver's options with a name the server's certificate holds, once
/// a handshake of powerdiag's own has checked the certificate against the CA (`verify_ca.rs`).
/// A server that cannot be reached is left to the driver's connection, whose error says why.
async fn verify_ca_opts(
    c: &Candidate,
    tls: &Tls,
    host: &str,
    port: u16,
    timeout: Duration,
    opts: SslOpts,
    target: &str,
) -> Result<SslOpts, DbError> {
    use super::verify_ca::{VerifyCaError as E, certificate_name};
    match certificate_name(host, port, tls, timeout).await {
        Ok(name) => Ok(opts.with_danger_tls_hostname_override(Some(name))),
        Err(E::Io(_)) => Ok(opts),
        Err(E::Handshake(err)) => {
            let (message, hint) = tls::explain_handshake(&err, tls, host, &c.source);
            Err(DbError {
                kind: DbErrorKind::Tls,
                message: format!("{target}: {message}"),
                hint,
            })
        }
        Err(E::File(e)) => Err(DbError {
            kind: DbErrorKind::Tls,
            message: format!("{target}: {e}"),
            hint: format!(
                "fix {} in {} (a readable PEM file; docs/connecting.md: TLS to MariaDB)",
                e.option, c.source
            ),
        }),
        Err(e @ E::NoName) => Err(DbError {
            kind: DbErrorKind::Tls,
            message: format!("{target}: {e}"),
            hint: "give the server's certificate a subjectAltName that names its host, or connect with ssl-mode=REQUIRED (TLS without checking the certificate)".into(),
        }),
        Err(e @ E::Protocol(_)) => Err(DbError {
            kind: DbErrorKind::Tls,
            message: format!("{target}: {e}, but ssl-mode=VERIFY_CA is asked for in {}", c.source),
            hint: "enable TLS on the server (ssl_cert, ssl_key) or connect without ssl-mode=VERIFY_CA".into(),
        }),
    }
}

impl Session {
    pub(crate) async fn connect(c: &Candidate, timeout: Duration) -> Result<Session, DbError> {
        let target = c.display();
        // TLS on TCP only: a unix socket is local (and the driver cannot secure one).
        let tls = match (&c.tls, &c.endpoint) {
            (Some(tls), Endpoint::Tcp { .. }) => Some(tls),
            _ => None,
        };
        let ssl_opts = match tls.map(Tls::ssl_opts).transpose() {
            Ok(o) => o,
            Err(e) => {
                return Err(DbError {
                    kind: DbErrorKind::Tls,
                    message: format!("{target}: {e}"),
                    hint: format!(
                        "fix {} in {} (a readable PEM file; docs/connecting.md: TLS to MariaDB)",
                        e.option, c.source
                    ),
                });
            }
        };
        let preferred = tls.is_some_and(|t| t.mode == SslMode::Preferred);
        let ssl_opts = match (tls, &c.endpoint, ssl_opts) {
            (Some(t), Endpoint::Tcp { host, port }, Some(opts)) if t.mode == SslMode::VerifyCa => {
                Some(verify_ca_opts(c, t, host, *port, timeout, opts, &target).await?)
            }
            (_, _, opts) => opts,
        };
        match Self::connect_with(c, timeout, ssl_opts, &target).await {
            // ssl-mode=PREFERRED: in clear when the server offers no TLS.
            Err(e) if preferred && e.kind == DbErrorKind::Tls && e.message.contains(NO_TLS) => {
                Self::connect_with(c, timeout, None, &target).await
            }
            r => r,
        }
    }

    async fn connect_with(
        c: &Candidate,
        timeout: Duration,
        ssl_opts: Option<SslOpts>,
        target: &str,
    ) -> Result<Session, DbError> {
        let with_tls = ssl_opts.is_some();
        let mut b = OptsBuilder::default()
            .user(Some(c.user.clone()))
            .pass(c.password.as_ref().map(|p| p.expose().to_owned()))
            .prefer_socket(false)
            .stmt_cache_size(0)
            .tcp_nodelay(true)
            // Known, so the driver does not ask the server for them on every connection
            // (`SELECT @@max_allowed_packet, @@wait_timeout`, one statement more per sample).
            // Our statements and rows are far smaller; the server's own limits still apply.
            .max_allowed_packet(Some(64 << 20))
            .wait_timeout(Some(28_800))
            .ssl_opts(ssl_opts);
        match &c.endpoint {
            Endpoint::Tcp { host, port } => b = b.ip_or_hostname(host.clone()).tcp_port(*port),
            Endpoint::Socket(path) => b = b.socket(Some(path.to_string_lossy().into_owned())),
        }
        let target = target.to_owned();
        let conn = match tokio::time::timeout(timeout, Conn::new(b)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(classify(&e, &target, c, with_tls)),
            Err(_) => {
                return Err(DbError {
                    kind: DbErrorKind::Timeout,
                    message: format!(
                        "{target}: no answer within {} (the server may be hung, overloaded, or behind a firewall that drops packets)",
                        human(timeout)
                    ),
                    hint: "check that mariadbd is running and responsive (e.g. `mariadb-admin ping`), or raise --timeout".into(),
                });
            }
        };
        let host = match &c.endpoint {
            Endpoint::Socket(_) => "localhost".to_owned(),
            Endpoint::Tcp { host, .. } => host.clone(),
        };
        let account = format!("{}@{}", sql_str(&c.user), sql_str(&host));
        let version = conn.server_version();
        let mut s = Session {
            conn: Some(conn),
            timeout,
            target,
            account,
            statements: 0,
            guarded: None,
        };
        s.guard(version).await;
        Ok(s)
    }

    /// The session's guards, before any other statement (a `SET GLOBAL max_statement_time`
    /// of 1 ms would otherwise stop the first read): the server itself stops a statement that
    /// runs too long, nothing this session runs can write, and the SQL mode is the default
    /// one, so the statements and string literals powerdiag writes mean the same on every
    /// server (`NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES` change how literals parse). On a server
    /// without `max_statement_time` (MySQL) the statement fails and `guarded` stays `None`:
    /// the server collector then sets what that server has.
    async fn guard(&mut self, (major, minor, _): (u16, u16, u16)) {
        // MariaDB 11.1 renamed tx_read_only (the handshake's version is MariaDB's own).
        let ro = if (major, minor) >= (11, 1) {
            "transaction_read_only"
        } else {
            "tx_read_only"
        };
        let secs = self.timeout.as_secs_f64().max(1.0);
        let sql = format!("SET SESSION max_statement_time = {secs}, {ro} = 1, sql_mode = ''");
        if self.exec(&sql).await.is_ok() {
            self.guarded = Some(self.timeout);
        }
    }

    /// Runs a text-protocol query and returns its rows.
    pub(crate) async fn query(&mut self, sql: &str) -> Result<Vec<Row>, DbError> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(skipped());
        };
        self.statements += 1;
        match tokio::time::timeout(self.timeout, conn.query::<Row, _>(sql)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => Err(classify_query(&e, &self.target)),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// Runs a text-protocol query and hands each row to `f` as it arrives, so a large result
    /// (the schema of 100,000 tables) is never held whole; returns the number of rows.
    pub(crate) async fn query_each(
        &mut self,
        sql: &str,
        mut f: impl FnMut(TextRow) + Send,
    ) -> Result<u64, DbError> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(skipped());
        };
        self.statements += 1;
        let read = async {
            let mut result = conn.query_iter(sql).await?;
            let mut n = 0u64;
            result
                .for_each(|row: Row| {
                    n += 1;
                    f((0..row.len()).map(|i| col(&row, i)).collect());
                })
                .await?;
            Ok::<u64, mysql_async::Error>(n)
        };
        match tokio::time::timeout(self.timeout, read).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(classify_query(&e, &self.target)),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// A statement past the deadline: the connection is dropped without waiting on it (the
    /// server is not answering), so the sample's later statements are skipped.
    fn timed_out(&mut self) -> DbError {
        self.conn = None;
        DbError {
            kind: DbErrorKind::Timeout,
            message: format!(
                "{}: a statement got no answer within {}",
                self.target,
                human(self.timeout)
            ),
            hint: "the server stopped answering mid-collection; check it with `mariadb-admin ping` or raise --timeout".into(),
        }
    }

    /// Runs a statement whose result does not matter.
    pub(crate) async fn exec(&mut self, sql: &str) -> Result<(), DbError> {
        self.query(sql).await.map(drop)
    }

    /// The account for GRANT hints, e.g. `'mon'@'127.0.0.1'` (the server may match a wider host).
    pub(crate) fn account(&self) -> &str {
        &self.account
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// True while the connection is usable.
    pub(crate) fn alive(&self) -> bool {
        self.conn.is_some()
    }

    /// Closes politely, without waiting longer than a second.
    pub(crate) async fn close(mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.disconnect()).await;
        }
    }
}

pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// A statement not sent because an earlier one timed out (the connection is gone).
fn skipped() -> DbError {
    DbError {
        kind: DbErrorKind::Timeout,
        message: "skipped: an earlier statement timed out".into(),
        hint: String::new(),
    }
}

/// A result set as text: one `Option<String>` per column (`None` for NULL). Parsers take this
/// form so they can be tested on captured rows without a server.
pub(crate) type TextRow = Vec<Option<String>>;

pub(crate) fn text_rows(rows: &[Row]) -> Vec<TextRow> {
    rows.iter()
        .map(|r| (0..r.len()).map(|i| col(r, i)).collect())
        .collect()
}

/// Column `i` of a text row.
pub(crate) fn tcol(row: &TextRow, i: usize) -> Option<String> {
    row.get(i).cloned().flatten()
}

pub(crate) fn tcol_u64(row: &TextRow, i: usize) -> Option<u64> {
    tcol(row, i).and_then(|s| s.trim().parse().ok())
}

/// Column `i` of a text-protocol row as a string; `None` for NULL or a missing column.
pub(crate) fn col(row: &Row, i: usize) -> Option<String> {
    match row.as_ref(i)? {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Int(v) => Some(v.to_string()),
        Value::UInt(v) => Some(v.to_string()),
        Value::Float(v) => Some(v.to_string()),
        Value::Double(v) => Some(v.to_string()),
        other => Some(other.as_sql(true)),
    }
}

pub(crate) fn col_u64(row: &Row, i: usize) -> Option<u64> {
    col(row, i).and_then(|s| s.trim().parse().ok())
}

/// Seconds as a decimal string (`0.000123`) to microseconds.
pub(crate) fn col_secs_us(row: &Row, i: usize) -> u64 {
    col(row, i)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(|s| (s * 1e6).round().max(0.0) as u64)
        .unwrap_or(0)
}

/// A SQL string literal, escaped by the driver for the session's SQL mode: the guard
/// ([`Session::guard`]) sets the default mode, where backslashes escape.
pub(crate) fn sql_str(s: &str) -> String {
    Value::from(s).as_sql(false)
}

/// A quoted identifier.
pub(crate) fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// Server error codes (include/mysqld_error.h).
mod code {
    pub(super) const DBACCESS_DENIED: u16 = 1044;
    pub(super) const ACCESS_DENIED: u16 = 1045;
    pub(super) const TABLEACCESS_DENIED: u16 = 1142;
    pub(super) const COLUMNACCESS_DENIED: u16 = 1143;
    pub(super) const SPECIFIC_ACCESS_DENIED: u16 = 1227;
    pub(super) const STATEMENT_TIMEOUT: u16 = 1969;
}

fn classify(e: &mysql_async::Error, target: &str, c: &Candidate, with_tls: bool) -> DbError {
    use std::io::ErrorKind as K;
    if let (Some(err), Some(tls), Endpoint::Tcp { host, .. }) =
        (tls::rustls_error(e), &c.tls, &c.endpoint)
    {
        let (message, hint) = tls::explain_handshake(err, tls, host, &c.source);
        return DbError {
            kind: DbErrorKind::Tls,
            message: format!("{target}: {message}"),
            hint,
        };
    }
    if let mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) = e {
        return DbError {
            kind: DbErrorKind::Tls,
            message: format!("{target}: {NO_TLS} (have_ssl is not YES), but TLS is asked for in {}", c.source),
            hint: "give the server ssl_cert and ssl_key (and restart it), or remove the ssl options to connect in clear".into(),
        };
    }
    if let mysql_async::Error::Io(mysql_async::IoError::Io(io)) = e {
        let text = io.to_string();
        let (kind, message, hint) = match (io.kind(), &c.endpoint) {
            (K::ConnectionRefused, Endpoint::Tcp { host, port }) => (
                DbErrorKind::ConnectionRefused,
                format!("{target}: connection refused (nothing listens on {host}:{port})"),
                "start MariaDB, or point powerdiag at it with POWERDIAG_MARIADB_URL=mysql://USER:PASSWORD@HOST:PORT/ (--mariadb.url takes the same without the password) or --mariadb.defaults-file PATH (a my.cnf with a [client] section)".to_owned(),
            ),
            (K::ConnectionRefused, Endpoint::Socket(p)) => (
                DbErrorKind::ConnectionRefused,
                format!("{target}: connection refused on socket {} (stale socket: is mariadbd running?)", p.display()),
                "start MariaDB, or pass the right socket in --mariadb.defaults-file ([client] socket=...)".to_owned(),
            ),
            (K::NotFound, Endpoint::Socket(p)) => (
                DbErrorKind::SocketMissing,
                format!("{target}: socket {} does not exist", p.display()),
                "check the server's socket (SELECT @@socket) and pass it in --mariadb.defaults-file, or use --mariadb.url with host and port".to_owned(),
            ),
            (K::PermissionDenied, Endpoint::Socket(p)) => (
                DbErrorKind::ConnectionRefused,
                format!("{target}: permission denied on socket {}", p.display()),
                "run powerdiag as a user that may open the socket, or connect over TCP with --mariadb.url".to_owned(),
            ),
            _ if text.contains("lookup") || text.contains("resolve") || text.contains("Name or service") => (
                DbErrorKind::UnknownHost,
                format!("{target}: unknown host ({text})"),
                "check the host name in --mariadb.url or the defaults file".to_owned(),
            ),
            (K::TimedOut, _) => (
                DbErrorKind::Timeout,
                format!("{target}: connection timed out"),
                "check the network path and firewall, or raise --timeout".to_owned(),
            ),
            _ => (
                DbErrorKind::Other,
                format!("{target}: {text}"),
                "check that the server runs and the address is right".to_owned(),
            ),
        };
        return DbError {
            kind,
            message,
            hint,
        };
    }
    if let mysql_async::Error::Server(s) = e
        && matches!(s.code, code::ACCESS_DENIED | code::DBACCESS_DENIED)
    {
        let with_pw = c.password.is_some();
        // A REQUIRE SSL / X509 account refused without TLS (or without a client certificate)
        // gets the same "access denied" as a wrong password: say so.
        let tls_hint = match (
            &c.endpoint,
            with_tls,
            c.tls.as_ref().and_then(|t| t.identity.as_ref()),
        ) {
            (Endpoint::Socket(_), ..) => "",
            (_, false, _) => {
                "; if the account requires TLS (REQUIRE SSL or X509 in SHOW CREATE USER), give ssl-ca (and for X509 ssl-cert and ssl-key) in the [client] section of the defaults file or as URL parameters"
            }
            (_, true, None) => {
                "; if the account requires a client certificate (REQUIRE X509 or SUBJECT/ISSUER), give ssl-cert and ssl-key in the defaults file or as URL parameters"
            }
            (_, true, Some(_)) => {
                "; the account may require another client certificate (REQUIRE SUBJECT/ISSUER)"
            }
        };
        return DbError {
            kind: DbErrorKind::AccessDenied,
            message: format!(
                "{target}: access denied for user '{}' ({})",
                c.user,
                if with_pw {
                    "using a password"
                } else {
                    "without a password"
                }
            ),
            hint: if with_pw {
                format!(
                    "check the user and password (in POWERDIAG_MARIADB_URL or the [client] section of --mariadb.defaults-file) and that the account may connect from this host{tls_hint}"
                )
            } else {
                format!(
                    "give a password in the [client] section of a defaults file (--mariadb.defaults-file, mode 0600) or in POWERDIAG_MARIADB_URL{tls_hint}"
                )
            },
        };
    }
    if let mysql_async::Error::Driver(d) = e {
        let text = d.to_string();
        return DbError {
            kind: DbErrorKind::Protocol,
            message: format!("{target}: {text}"),
            hint: if text.contains("auth") {
                "the account uses an authentication plugin powerdiag does not speak; create the monitoring user with a password (see docs/connecting.md, least-privilege GRANTs)".into()
            } else {
                "is this a MariaDB or MySQL server?".into()
            },
        };
    }
    classify_query(e, target)
}

/// Classifies an error from a statement on an open connection.
pub(crate) fn classify_query(e: &mysql_async::Error, target: &str) -> DbError {
    match e {
        mysql_async::Error::Server(s) => {
            let (kind, hint) = match s.code {
                code::TABLEACCESS_DENIED
                | code::COLUMNACCESS_DENIED
                | code::SPECIFIC_ACCESS_DENIED
                | code::DBACCESS_DENIED => (
                    DbErrorKind::MissingPrivilege,
                    "grant the privilege named in the message (docs/connecting.md: least-privilege GRANTs)",
                ),
                code::STATEMENT_TIMEOUT => (DbErrorKind::Timeout, "raise --timeout"),
                _ => (DbErrorKind::Other, ""),
            };
            DbError {
                kind,
                message: format!("{target}: ERROR {} ({}): {}", s.code, s.state, s.message),
                hint: hint.into(),
            }
        }
        mysql_async::Error::Io(_) => DbError {
            kind: DbErrorKind::ConnectionRefused,
            message: format!("{target}: connection lost: {e}"),
            hint: "the server closed the connection; check its error log".into(),
        },
        other => DbError {
            kind: DbErrorKind::Other,
            message: format!("{target}: {other}"),
            hint: String::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(sql_str("a'b\\c"), "'a\\'b\\\\c'");
        assert_eq!(ident("we`ird"), "`we``ird`");
        assert_eq!(human(Duration::from_secs(5)), "5 s");
        assert_eq!(human(Duration::from_millis(1500)), "1.5 s");
    }
}
