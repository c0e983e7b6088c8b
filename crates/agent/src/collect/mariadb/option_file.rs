//! The defaults file (`--mariadb.defaults-file`, `~/.my.cnf`): MariaDB's option-file syntax,
//! its `[client]`, `[client-server]` and `[client-mariadb]` groups, and the `!include FILE` /
//! `!includedir DIR` directives.
//!
//! As the `mariadb` client: options apply in the order read (a later line wins, whatever its
//! group), an included file is read where its directive stands, `!includedir` reads the
//! directory's `*.cnf` files in name order, a missing `!include` file is skipped (with a
//! warning here), a missing `!includedir` directory is an error, and a world-writable file is
//! ignored with a warning. Except the file named with `--mariadb.defaults-file`: world-writable,
//! it is an error (`chmod o-w FILE`). Ignoring it would mean ignoring everything the user
//! asked for and connecting with the built-in defaults (`root@127.0.0.1:3306`): the agent
//! would go on with targets nobody chose, and a SIGHUP would replace its running targets
//! with those while reporting a successful reload. An `!include`d world-writable file is still
//! skipped with a warning, as the client does: the named file, which the user chose, is read,
//! and the targets are those the `mariadb --defaults-file=FILE` client would use (a shared
//! `!includedir` often holds server files the client skips the same way); the warning is logged
//! on every start and reload. `~/.my.cnf` is not asked for: read as the client reads it. Unlike
//! the client, a relative include path (and a relative
//! `ssl-ca`/`ssl-cert`/`ssl-key`) is taken from the directory of the file that names it, not
//! the working directory (the agent's is `/`); an include cycle is an error naming the chain,
//! nesting is capped at 10 levels (MariaDB's limit), at 256 files and at 4 MiB in all. Every
//! file is read through `read_regular_file` (regular files only, opened without blocking,
//! 1 MiB each).
//!
//! A file that sets a password and that group or others may read draws a warning (docs/connecting.md: mode
//! 0600); the caller logs it (the agent) or prints it on stderr (doctor, collect).

use std::path::{Path, PathBuf};

use super::{
    settings::{ClientSettings, Password, TargetError},
    tls::{SslMode, parse_bool},
};

/// Largest option file accepted: real ones are a few KiB.
pub const MAX_OPTION_FILE_BYTES: u64 = 1 << 20;
/// Nesting of `!include`/`!includedir` (MariaDB's own limit).
pub const MAX_INCLUDE_DEPTH: usize = 10;
/// Files read through one defaults file, and their total size.
const MAX_FILES: usize = 256;
const MAX_TOTAL_BYTES: u64 = 4 << 20;

/// A defaults file and everything it includes, read and parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefaultsFile {
    /// The file named (`--mariadb.defaults-file`, `~/.my.cnf`).
    pub path: PathBuf,
    /// The client settings of all the files, in the order read.
    pub settings: ClientSettings,
    /// Every file read, in order (the first is `path`).
    pub files: Vec<PathBuf>,
    /// What the user should know but that does not stop the tool: a password file others may
    /// read, a world-writable file ignored, a missing `!include`, an option not supported.
    pub warnings: Vec<String>,
}

impl DefaultsFile {
    /// Parses `text` as the contents of `path`, without reading anything (tests, and callers
    /// that have the text): `!include` and `!includedir` lines are errors here.
    pub fn from_text(path: &Path, text: &str) -> Result<DefaultsFile, TargetError> {
        let mut r = Reader::new(path);
        r.parse(text, path, 0, false)?;
        Ok(r.finish(path))
    }
}

/// Reads the defaults file at `path` with its includes. The one entry point for the cli and
/// for a reload: the error names `--mariadb.defaults-file PATH` (or `source_name`) and, for an
/// included file, that file and line.
/// The file named must not be world-writable (an error, not ignored: see the module's
/// documentation).
pub fn load_defaults_file(path: &Path) -> Result<DefaultsFile, TargetError> {
    let mut r = Reader::new(path);
    r.source_name = format!("--mariadb.defaults-file {}", path.display());
    r.refuse_world_writable = true;
    r.read_file(path, 0, None)?;
    Ok(r.finish(path))
}

/// [`load_defaults_file`] with another name for errors (`~/.my.cnf`'s path), for a file not
/// asked for: world-writable, it is ignored with a warning, as the client does.
pub fn load_named(path: &Path, source_name: &str) -> Result<DefaultsFile, TargetError> {
    let mut r = Reader::new(path);
    r.source_name = source_name.to_owned();
    r.read_file(path, 0, None)?;
    Ok(r.finish(path))
}

/// Which client group a line is in.
const GROUPS: [&str; 3] = ["client", "client-server", "client-mariadb"];

struct Reader {
    source_name: String,
    settings: ClientSettings,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
    /// Canonical paths of the files being read (the include chain), for the loop guard.
    stack: Vec<PathBuf>,
    total_bytes: u64,
    /// `password=` lines seen, so a file's own password lines are known once it is parsed.
    password_lines: usize,
    /// A world-writable top file is an error (`--mariadb.defaults-file`), not ignored.
    refuse_world_writable: bool,
}

impl Reader {
    fn new(path: &Path) -> Reader {
        Reader {
            source_name: path.display().to_string(),
            settings: ClientSettings::default(),
            files: Vec::new(),
            warnings: Vec::new(),
            stack: Vec::new(),
            total_bytes: 0,
            password_lines: 0,
            refuse_world_writable: false,
        }
    }

    fn finish(self, path: &Path) -> DefaultsFile {
        DefaultsFile {
            path: path.to_owned(),
            settings: self.settings,
            files: self.files,
            warnings: self.warnings,
        }
    }

    /// What a warning about a file starts with: nothing for the file named, the source for an
    /// included one (`--mariadb.defaults-file /etc/powerdiag/my.cnf: /etc/.../x.cnf ...`).
    fn prefix(&self, from: Option<(&Path, usize)>) -> String {
        match from {
            Some(_) => format!("{}: ", self.source_name),
            None if self.source_name.starts_with("--") => "--mariadb.defaults-file ".to_owned(),
            None => String::new(),
        }
    }

    fn err(&self, message: impl Into<String>) -> TargetError {
        TargetError::Invalid {
            source_name: self.source_name.clone(),
            message: message.into(),
        }
    }

    /// Reads one file; `from` is the including file and line, `None` for the top file.
    fn read_file(
        &mut self,
        path: &Path,
        depth: usize,
        from: Option<(&Path, usize)>,
    ) -> Result<(), TargetError> {
        let at = |from: Option<(&Path, usize)>| match from {
            Some((f, l)) => format!(" (included from {} line {l})", f.display()),
            None => String::new(),
        };
        if self.files.len() >= MAX_FILES {
            return Err(self.err(format!(
                "{}{}: more than {MAX_FILES} option files through includes",
                path.display(),
                at(from)
            )));
        }
        let (bytes, meta) =
            match powerdiag_safe_read::read_regular_file_with_metadata(path, MAX_OPTION_FILE_BYTES)
            {
                Ok(r) => r,
                Err(powerdiag_safe_read::ReadError::Io(e))
                    if e.kind() == std::io::ErrorKind::NotFound && from.is_some() =>
                {
                    // The mariadb client skips a missing !include file without a word.
                    self.warnings.push(format!(
                        "{}: {} does not exist; skipped{}",
                        self.source_name,
                        path.display(),
                        at(from)
                    ));
                    return Ok(());
                }
                Err(powerdiag_safe_read::ReadError::TooLarge(_)) => {
                    return Err(self.err(format!(
                        "{}{}: larger than 1 MiB; is this really a my.cnf?",
                        path.display(),
                        at(from)
                    )));
                }
                Err(e) => {
                    return Err(self.err(format!(
                        "{}{}: cannot read it: {e}",
                        path.display(),
                        at(from)
                    )));
                }
            };
        self.total_bytes += bytes.len() as u64;
        if self.total_bytes > MAX_TOTAL_BYTES {
            return Err(self.err(format!(
                "{}{}: the option files through includes exceed {} MiB in all",
                path.display(),
                at(from),
                MAX_TOTAL_BYTES >> 20
            )));
        }
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if let Some(i) = self.stack.iter().position(|p| *p == canonical) {
            let chain: Vec<String> = self.stack[i..]
                .iter()
                .chain(std::iter::once(&canonical))
                .map(|p| p.display().to_string())
                .collect();
            return Err(self.err(format!(
                "include loop: {} (remove the !include or !includedir that closes it)",
                chain.join(" → ")
            )));
        }
        let mode = file_mode(&meta);
        if mode & 0o002 != 0 && from.is_none() && self.refuse_world_writable {
            return Err(self.err(format!(
                "world-writable (mode {:04o}): anyone could have set its credentials, and the mariadb client would ignore it; chmod o-w {}",
                mode & 0o7777,
                path.display()
            )));
        }
        if mode & 0o002 != 0 {
            // As the mariadb client: anyone could have written it.
            self.warnings.push(format!(
                "{}{} is world-writable (mode {:04o}) and is ignored, as the mariadb client does; chmod o-w it",
                self.prefix(from),
                path.display(),
                mode & 0o7777
            ));
            return Ok(());
        }
        // The file may hold a password: its text is wiped from memory when parsed.
        let text = zeroize::Zeroizing::new(String::from_utf8(bytes).map_err(|e| {
            zeroize::Zeroize::zeroize(&mut e.into_bytes());
            self.err(format!("{}{}: not UTF-8 text", path.display(), at(from)))
        })?);
        self.files.push(path.to_owned());
        self.stack.push(canonical);
        let had_password = self.password_lines;
        let r = self.parse(&text, path, depth, true);
        self.stack.pop();
        r?;
        if self.password_lines > had_password && mode & 0o044 != 0 {
            self.warnings.push(format!(
                "{}{} holds a password and is readable by {} (mode {:04o}); chmod 600 it",
                self.prefix(from),
                path.display(),
                match (mode & 0o040 != 0, mode & 0o004 != 0) {
                    (true, true) => "its group and others",
                    (true, false) => "its group",
                    _ => "others",
                },
                mode & 0o7777
            ));
        }
        Ok(())
    }

    /// Parses one file's text; without `includes`, a directive that would read a file is an
    /// error.
    fn parse(
        &mut self,
        text: &str,
        path: &Path,
        depth: usize,
        includes: bool,
    ) -> Result<(), TargetError> {
        let name = path.display().to_string();
        let mut in_client_group = false;
        for (n, raw_line) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = raw_line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(directive) = line.strip_prefix('!') {
                let directive = directive.trim_start();
                let (keyword, arg) = match directive.split_once(char::is_whitespace) {
                    Some((k, a)) => (k, a.trim()),
                    None => (directive, ""),
                };
                if !matches!(keyword, "include" | "includedir") {
                    self.warnings.push(format!(
                        "{}: {name} line {line_no}: unknown directive !{keyword}; ignored",
                        self.source_name
                    ));
                    continue;
                }
                if arg.is_empty() {
                    return Err(self.err(format!("{name} line {line_no}: !{keyword} needs a path")));
                }
                if !includes {
                    return Err(self.err(format!(
                        "{name} line {line_no}: !{keyword} is not read here"
                    )));
                }
                if depth + 1 > MAX_INCLUDE_DEPTH {
                    return Err(self.err(format!(
                        "{name} line {line_no}: !{keyword} nests deeper than {MAX_INCLUDE_DEPTH} levels"
                    )));
                }
                let target = resolve(path, arg);
                if keyword == "include" {
                    self.read_file(&target, depth + 1, Some((path, line_no)))?;
                } else {
                    for file in self.list_dir(&target, &name, line_no)? {
                        self.read_file(&file, depth + 1, Some((path, line_no)))?;
                    }
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                let Some(group) = rest.split_once(']').map(|(g, _)| g) else {
                    return Err(
                        self.err(format!("{name} line {line_no}: unterminated group header"))
                    );
                };
                in_client_group = GROUPS.iter().any(|g| g.eq_ignore_ascii_case(group.trim()));
                continue;
            }
            if !in_client_group {
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim(), Some(unquote(v.trim()))),
                None => (line, None),
            };
            self.option(key, value, path, &name, line_no)?;
        }
        Ok(())
    }

    /// The `*.cnf` files of an `!includedir`, in name order (as MariaDB sorts them).
    fn list_dir(
        &self,
        dir: &Path,
        name: &str,
        line_no: usize,
    ) -> Result<Vec<PathBuf>, TargetError> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            self.err(format!(
                "{name} line {line_no}: !includedir {}: {e}",
                dir.display()
            ))
        })?;
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| {
                self.err(format!(
                    "{name} line {line_no}: !includedir {}: {e}",
                    dir.display()
                ))
            })?;
            let file_name = entry.file_name();
            if Path::new(&file_name)
                .extension()
                .is_some_and(|e| e == "cnf")
            {
                files.push(entry.path());
                if files.len() > MAX_FILES {
                    return Err(self.err(format!(
                        "{name} line {line_no}: !includedir {}: more than {MAX_FILES} .cnf files",
                        dir.display()
                    )));
                }
            }
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        Ok(files)
    }

    fn option(
        &mut self,
        key: &str,
        value: Option<String>,
        path: &Path,
        name: &str,
        line_no: usize,
    ) -> Result<(), TargetError> {
        let mut key = key.replace('_', "-").to_ascii_lowercase();
        // `loose-` only says "no error if unknown"; `skip-`/`disable-`/`enable-` negate or set a
        // boolean.
        if let Some(k) = key.strip_prefix("loose-") {
            key = k.to_owned();
        }
        let mut negated = None;
        for (prefix, neg) in [("skip-", true), ("disable-", true), ("enable-", false)] {
            if let Some(k) = key.strip_prefix(prefix)
                && matches!(k, "ssl" | "ssl-verify-server-cert")
            {
                negated = Some(neg);
                key = k.to_owned();
            }
        }
        let src = self.source_name.clone();
        let err = |what: String| TargetError::Invalid {
            source_name: src.clone(),
            message: format!("{name} line {line_no}: {what}"),
        };
        let boolean = |v: Option<&str>| -> Result<bool, TargetError> {
            let b = parse_bool(v).ok_or_else(|| {
                err(format!(
                    "{key} = {:?} is not a boolean (1/0, ON/OFF, TRUE/FALSE)",
                    v.unwrap_or_default()
                ))
            })?;
            Ok(if negated == Some(true) { !b } else { b })
        };
        let s = &mut self.settings;
        match (key.as_str(), value) {
            ("user", Some(v)) => s.user = Some(v),
            ("password", Some(v)) => {
                s.password = Some(Password::new(v));
                self.password_lines += 1;
            }
            ("host", Some(v)) => s.host = Some(v),
            ("port", Some(v)) => {
                s.port = Some(
                    v.parse()
                        .map_err(|_| err(format!("port {v:?} is not a number 1-65535")))?,
                )
            }
            ("socket", Some(v)) => s.socket = Some(PathBuf::from(v)),
            ("ssl", v) => {
                s.tls.mode = None;
                s.tls.ssl = Some(boolean(v.as_deref())?);
            }
            ("ssl-verify-server-cert", v) => {
                s.tls.mode = None;
                s.tls.verify_server_cert = Some(boolean(v.as_deref())?);
            }
            // mysqld_exporter's my.cnf key (with its spelling), and the correct spelling.
            ("ssl-skip-verfication" | "ssl-skip-verification", v) => {
                s.tls.mode = None;
                s.tls.verify_server_cert = Some(!boolean(v.as_deref())?);
            }
            ("ssl-mode", Some(v)) => {
                let mode = SslMode::parse(&v).ok_or_else(|| {
                    err(format!(
                        "ssl-mode {v:?} is not DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
                    ))
                })?;
                s.tls.ssl = None;
                s.tls.verify_server_cert = None;
                s.tls.verify_identity = None;
                s.tls.mode = Some(mode);
            }
            ("ssl-ca", Some(v)) => s.tls.ca = Some(resolve(path, &v)),
            ("ssl-cert", Some(v)) => s.tls.cert = Some(resolve(path, &v)),
            ("ssl-key", Some(v)) => s.tls.key = Some(resolve(path, &v)),
            (
                k @ ("ssl-capath" | "ssl-crl" | "ssl-crlpath" | "ssl-cipher" | "tls-version"
                | "ssl-fp" | "ssl-fplist" | "ssl-passphrase"),
                _,
            ) => {
                let warning = format!(
                    "{}: {name} line {line_no}: {k} is not supported by powerdiag and is ignored (give the CA file with ssl-ca)",
                    self.source_name
                );
                self.warnings.push(warning);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A path from an option file: `~/` is the home directory (as the client), a relative path is
/// relative to the directory of the file that names it.
fn resolve(file: &Path, arg: &str) -> PathBuf {
    if let Some(rest) = arg.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    let p = PathBuf::from(arg);
    if p.is_absolute() {
        return p;
    }
    match file.parent() {
        Some(dir) => dir.join(p),
        None => p,
    }
}

#[cfg(unix)]
fn file_mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode()
}

#[cfg(not(unix))]
fn file_mode(_: &std::fs::Metadata) -> u32 {
    0o600
}

fn unquote(v: &str) -> String {
    // Strip an inline comment only outside quotes.
    let bytes = v.as_bytes();
    if let Some(&q) = bytes.first()
        && (q == b'"' || q == b'\'')
        && let Some(end) = v[1..].find(q as char)
    {
        return v[1..1 + end].to_owned();
    }
    match v.find(" #") {
        Some(i) => v[..i].trim_end().to_owned(),
        None => v.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::PermissionsExt};

    use super::*;
    use crate::collect::mariadb::settings::Password;

    fn write(path: &Path, text: &str, mode: u32) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn include_and_includedir_in_order_with_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("conf.d")).unwrap();
        write(
            &d.join("main.cnf"),
            "[client]\nuser=first\nhost=db1\n!include extra/creds.cnf\n!includedir conf.d\nport=3310\n",
            0o600,
        );
        fs::create_dir(d.join("extra")).unwrap();
        // The included file starts outside any group: its [client] line opens one.
        write(
            &d.join("extra/creds.cnf"),
            "user=not-a-client-option\n[client]\nuser=mon\npassword=pw\nssl-ca=ca.pem\n",
            0o600,
        );
        // Name order: 10-a before 20-b; the later one wins. Not-.cnf files are not read.
        write(
            &d.join("conf.d/20-b.cnf"),
            "[client-mariadb]\nhost=db3\n",
            0o644,
        );
        write(
            &d.join("conf.d/10-a.cnf"),
            "[client]\nhost=db2\nport=1\n",
            0o644,
        );
        write(&d.join("conf.d/zz.cnf.bak"), "[client]\nhost=nope\n", 0o644);
        write(&d.join("conf.d/README"), "[client]\nhost=nope\n", 0o644);
        let f = load_defaults_file(&d.join("main.cnf")).unwrap();
        let s = &f.settings;
        assert_eq!(s.user.as_deref(), Some("mon"));
        assert_eq!(s.password, Some(Password::new("pw")));
        assert_eq!(s.host.as_deref(), Some("db3"));
        // After the includes in main.cnf: its own later line wins.
        assert_eq!(s.port, Some(3310));
        // Relative to the file that names it.
        assert_eq!(s.tls.ca, Some(d.join("extra/ca.pem")));
        let names: Vec<_> = f
            .files
            .iter()
            .map(|p| p.strip_prefix(d).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "main.cnf",
                "extra/creds.cnf",
                "conf.d/10-a.cnf",
                "conf.d/20-b.cnf"
            ]
        );
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    #[test]
    fn loops_are_errors_naming_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("self.cnf"), "[client]\n!include self.cnf\n", 0o600);
        let e = load_defaults_file(&d.join("self.cnf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("include loop: ") && e.contains("self.cnf → "),
            "{e}"
        );
        write(&d.join("a.cnf"), "!include b.cnf\n", 0o600);
        write(&d.join("b.cnf"), "!includedir sub\n", 0o600);
        fs::create_dir(d.join("sub")).unwrap();
        write(&d.join("sub/c.cnf"), "!include ../a.cnf\n", 0o600);
        let e = load_defaults_file(&d.join("a.cnf"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mariadb.defaults-file "), "{e}");
        assert!(
            e.contains("a.cnf → ") && e.contains("b.cnf → ") && e.contains("c.cnf → "),
            "{e}"
        );
        assert!(e.contains("remove the !include"), "{e}");
    }

    #[test]
    fn a_diamond_is_not_a_loop_but_depth_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("top.cnf"),
            "!include x.cnf\n!include x.cnf\n",
            0o600,
        );
        write(&d.join("x.cnf"), "[client]\nuser=x\n", 0o600);
        assert_eq!(
            load_defaults_file(&d.join("top.cnf")).unwrap().files.len(),
            3
        );
        for i in 0..=MAX_INCLUDE_DEPTH + 1 {
            write(
                &d.join(format!("n{i}.cnf")),
                &format!("!include n{}.cnf\n", i + 1),
                0o600,
            );
        }
        let e = load_defaults_file(&d.join("n0.cnf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nests deeper than 10 levels"), "{e}");
    }

    #[test]
    fn missing_include_warns_missing_includedir_fails() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("a.cnf"),
            "[client]\nuser=u\n!include gone.cnf\n",
            0o600,
        );
        let f = load_defaults_file(&d.join("a.cnf")).unwrap();
        assert_eq!(f.settings.user.as_deref(), Some("u"));
        assert!(
            f.warnings[0].contains("gone.cnf does not exist; skipped (included from ")
                && f.warnings[0].contains("a.cnf line 3)"),
            "{:?}",
            f.warnings
        );
        write(&d.join("b.cnf"), "!includedir nodir\n", 0o600);
        let e = load_defaults_file(&d.join("b.cnf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1: !includedir ") && e.contains("nodir"),
            "{e}"
        );
        write(&d.join("c.cnf"), "!include\n", 0o600);
        let e = load_defaults_file(&d.join("c.cnf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("!include needs a path"), "{e}");
        // The named file itself must exist.
        let e = load_defaults_file(&d.join("absent.cnf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("absent.cnf: cannot read it"), "{e}");
    }

    #[test]
    fn only_regular_capped_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("conf.d")).unwrap();
        fs::create_dir(d.join("conf.d/dir.cnf")).unwrap();
        write(&d.join("a.cnf"), "!includedir conf.d\n", 0o600);
        let e = load_defaults_file(&d.join("a.cnf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dir.cnf") && e.contains("not a regular file"),
            "{e}"
        );
        write(&d.join("b.cnf"), "!include /dev/zero\n", 0o600);
        let e = load_defaults_file(&d.join("b.cnf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero (included from ") && e.contains("character device"),
            "{e}"
        );
        let big = d.join("big.cnf");
        fs::File::create(&big).unwrap().set_len(2 << 20).unwrap();
        write(&d.join("c.cnf"), "!include big.cnf\n", 0o600);
        let e = load_defaults_file(&d.join("c.cnf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than 1 MiB"), "{e}");
    }

    #[test]
    fn permission_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A password others may read: a warning naming the file and the fix, and it is used.
        write(
            &d.join("open.cnf"),
            "[client]\nuser=u\npassword=secret\n",
            0o644,
        );
        let f = load_defaults_file(&d.join("open.cnf")).unwrap();
        assert_eq!(f.settings.password, Some(Password::new("secret")));
        assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
        let w = &f.warnings[0];
        assert!(
            w.contains("open.cnf holds a password and is readable by its group and others (mode 0644); chmod 600 it"),
            "{w}"
        );
        assert!(!w.contains("secret"), "{w}");
        write(&d.join("group.cnf"), "[client]\npassword=x\n", 0o640);
        let f = load_defaults_file(&d.join("group.cnf")).unwrap();
        assert!(
            f.warnings[0].contains("readable by its group (mode 0640)"),
            "{:?}",
            f.warnings
        );
        // Without a password, or at 0600: nothing to say.
        write(&d.join("nopw.cnf"), "[client]\nuser=u\n", 0o644);
        assert!(
            load_defaults_file(&d.join("nopw.cnf"))
                .unwrap()
                .warnings
                .is_empty()
        );
        write(
            &d.join("closed.cnf"),
            "[client]\npassword=x\n!include nopw.cnf\n",
            0o600,
        );
        assert!(
            load_defaults_file(&d.join("closed.cnf"))
                .unwrap()
                .warnings
                .is_empty()
        );
        // The included file that holds the password is the one named.
        write(&d.join("inc.cnf"), "!include open.cnf\n", 0o600);
        let f = load_defaults_file(&d.join("inc.cnf")).unwrap();
        assert!(
            f.warnings[0].contains("open.cnf holds a password"),
            "{:?}",
            f.warnings
        );
        // World-writable: ignored, as the mariadb client does.
        write(&d.join("ww.cnf"), "[client]\nuser=evil\n", 0o666);
        write(
            &d.join("top.cnf"),
            "[client]\nuser=good\n!include ww.cnf\n",
            0o600,
        );
        let f = load_defaults_file(&d.join("top.cnf")).unwrap();
        assert_eq!(f.settings.user.as_deref(), Some("good"));
        assert!(
            f.warnings[0].contains("ww.cnf is world-writable (mode 0666) and is ignored"),
            "{:?}",
            f.warnings
        );
        // Issue 38, item 3: the file named itself world-writable is an error naming it and
        // the fix (ignored, it left the built-in root@127.0.0.1:3306); ~/.my.cnf, not asked
        // for, is still ignored with a warning.
        let ww = d.join("ww.cnf");
        let e = load_defaults_file(&ww).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "--mariadb.defaults-file {0}: world-writable (mode 0666): anyone could have set its credentials, and the mariadb client would ignore it; chmod o-w {0}",
                ww.display()
            )
        );
        let f = load_named(&ww, &ww.display().to_string()).unwrap();
        assert_eq!(f.settings.user, None);
        assert!(f.warnings[0].contains("is world-writable (mode 0666) and is ignored"));
    }

    #[test]
    fn tls_options_and_switches() {
        let p = Path::new("/etc/powerdiag/my.cnf");
        let f = DefaultsFile::from_text(
            p,
            "[client]\nssl-ca = certs/ca.pem\nssl_cert=/abs/client.pem\nssl-key=\"/abs/client key.pem\"\nssl-verify-server-cert\nloose-ssl-capath=/etc/ssl/certs\n",
        )
        .unwrap();
        let t = &f.settings.tls;
        assert_eq!(t.ca, Some(PathBuf::from("/etc/powerdiag/certs/ca.pem")));
        assert_eq!(t.cert, Some(PathBuf::from("/abs/client.pem")));
        assert_eq!(t.key, Some(PathBuf::from("/abs/client key.pem")));
        assert_eq!(t.verify_server_cert, Some(true));
        assert!(
            f.warnings[0].contains("ssl-capath is not supported"),
            "{:?}",
            f.warnings
        );
        let t = DefaultsFile::from_text(p, "[client]\nssl\nskip-ssl-verify-server-cert\n")
            .unwrap()
            .settings
            .tls;
        assert_eq!(t.resolve().unwrap().unwrap().mode, SslMode::Required);
        let t = DefaultsFile::from_text(p, "[client]\nssl-ca=/ca\nskip-ssl\n")
            .unwrap()
            .settings
            .tls;
        assert_eq!(t.resolve().unwrap(), None);
        let t = DefaultsFile::from_text(p, "[client]\nssl-mode=VERIFY_CA\nssl-ca=/ca\n")
            .unwrap()
            .settings
            .tls;
        assert_eq!(t.resolve().unwrap().unwrap().mode, SslMode::VerifyCa);
        // mysqld_exporter's key.
        let t = DefaultsFile::from_text(p, "[client]\nssl-ca=/ca\nssl-skip-verfication=true\n")
            .unwrap()
            .settings
            .tls;
        assert_eq!(t.resolve().unwrap().unwrap().mode, SslMode::Required);
        let e = DefaultsFile::from_text(p, "[client]\nssl=maybe\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2: ssl = \"maybe\" is not a boolean"),
            "{e}"
        );
        let e = DefaultsFile::from_text(p, "[client]\nssl-mode=sometimes\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl-mode \"sometimes\" is not DISABLED"), "{e}");
        // Options in other groups are not ours.
        let t = DefaultsFile::from_text(p, "[mysqld]\nssl-ca=/server-ca\n")
            .unwrap()
            .settings
            .tls;
        assert_eq!(t.ca, None);
    }

    #[test]
    fn later_lines_win_whatever_their_group() {
        let s = DefaultsFile::from_text(
            Path::new("f"),
            "[client-mariadb]\nuser=a\n[client]\nuser=b\n",
        )
        .unwrap()
        .settings;
        assert_eq!(s.user.as_deref(), Some("b"));
    }
}
