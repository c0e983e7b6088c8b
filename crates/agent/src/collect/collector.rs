//! What every collector is, and the one place that runs and times one — node_exporter's
//! `registerCollector` and `execute()`, mysqld_exporter's `Scraper{Name, Help, Version}`.
//!
//! Each collector, SQL or OS, has a [`Descriptor`] (name, help, enabled by default, what it
//! needs). The registry lists live in each folder's `mod.rs` (`host::COLLECTOR`,
//! `mariadb::COLLECTORS`, `os::SECTIONS`); [`all`] joins them, and the `--collector.NAME` /
//! `--no-collector.NAME` flags, the agent's `[collectors]` table and `powerdiag collectors` are
//! made from it. [`execute`] and [`execute_async`] are the only code that times a collector
//! and builds its [`CollectorRun`]: a disabled collector, or one whose server is too old, is
//! [`CollectError::Skipped`] and reports no run; every other error is a failed run.

use std::{collections::BTreeSet, future::Future, time::Instant};

use powerdiag_rules::{CollectorRun, Gathered, ServerVersion};

use super::CollectError;

/// A collector as the registry, the flags and `powerdiag collectors` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// The `collector` label of its run, and the NAME of `--collector.NAME`.
    pub name: &'static str,
    /// One line: what it reads, and what it costs where that matters.
    pub help: &'static str,
    /// Runs unless `--no-collector.NAME` (or `[collectors] NAME = false`).
    pub default_enabled: bool,
    /// What it needs beyond being enabled.
    pub requires: Requires,
}

/// What a collector needs to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requires {
    /// Nothing: it runs wherever its registry is compiled in.
    Nothing,
    /// A MariaDB server of at least this version (major, minor).
    Mariadb(u32, u32),
    /// A platform, said in words (`POWER`, `Linux`): the collector itself reports
    /// `unavailable` elsewhere.
    Platform(&'static str),
}

impl Requires {
    /// For `powerdiag collectors`.
    pub fn describe(&self) -> String {
        match self {
            Requires::Nothing => String::new(),
            Requires::Mariadb(major, minor) => format!("MariaDB {major}.{minor}+"),
            Requires::Platform(p) => (*p).to_owned(),
        }
    }
}

/// Every collector, in the order a collection runs them.
pub fn all() -> Vec<&'static Descriptor> {
    let mut out = vec![&super::host::COLLECTOR];
    out.extend(super::mariadb::collectors());
    out.extend(super::os::SECTIONS.iter().copied());
    out
}

/// The collectors a user turned on or off, checked against the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Names turned on that are off by default.
    enabled: BTreeSet<&'static str>,
    /// Names turned off.
    disabled: BTreeSet<&'static str>,
    /// Where the choice was made, for the reason a skipped collector gives: `flag` or `config`.
    source: Source,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    #[default]
    Flags,
    Config,
}

/// A name that is no collector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown collector {name:?}: the collectors are {} (powerdiag collectors lists them)",
    known()
)]
pub struct UnknownCollector {
    pub name: String,
}

fn known() -> String {
    all().iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}

impl Selection {
    /// Every collector at its default.
    pub fn defaults() -> Selection {
        Selection::default()
    }

    /// `choices` as `(name, on)`; a later choice for the same name wins.
    pub fn from_choices<'a>(
        choices: impl IntoIterator<Item = (&'a str, bool)>,
        source: Source,
    ) -> Result<Selection, UnknownCollector> {
        let mut s = Selection {
            source,
            ..Selection::default()
        };
        for (name, on) in choices {
            let d = find(name).ok_or_else(|| UnknownCollector { name: name.into() })?;
            s.enabled.remove(d.name);
            s.disabled.remove(d.name);
            if on != d.default_enabled {
                if on {
                    s.enabled.insert(d.name);
                } else {
                    s.disabled.insert(d.name);
                }
            }
        }
        Ok(s)
    }

    pub fn is_enabled(&self, d: &Descriptor) -> bool {
        if d.default_enabled {
            !self.disabled.contains(d.name)
        } else {
            self.enabled.contains(d.name)
        }
    }

    /// The skip of a collector that is not enabled, in the words its section will quote.
    fn skip(&self, d: &Descriptor) -> CollectError {
        let how = match (self.source, d.default_enabled) {
            (Source::Flags, true) => format!("--no-collector.{}", d.name),
            (Source::Flags, false) => format!("off by default; --collector.{} turns it on", d.name),
            (Source::Config, true) => format!("[collectors] {} = false", d.name),
            (Source::Config, false) => {
                format!("off by default; [collectors] {} = true turns it on", d.name)
            }
        };
        CollectError::skipped(format!("the {} collector is disabled ({how})", d.name))
    }

    /// Whether `d` may run: enabled, and its server new enough.
    pub(crate) fn gate(
        &self,
        d: &Descriptor,
        server: Option<&ServerVersion>,
    ) -> Result<(), CollectError> {
        if !self.is_enabled(d) {
            return Err(self.skip(d));
        }
        if let (Requires::Mariadb(major, minor), Some(v)) = (d.requires, server)
            && !v.at_least(major, minor, 0)
        {
            return Err(CollectError::skipped(format!(
                "the {} collector needs MariaDB {major}.{minor} or later (this server: {}.{}.{})",
                d.name, v.major, v.minor, v.patch
            )));
        }
        Ok(())
    }

    /// The names turned off, for a report's summary.
    pub fn disabled(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.disabled.iter().copied()
    }
}

/// The collector named `name`.
pub fn find(name: &str) -> Option<&'static Descriptor> {
    all().into_iter().find(|d| d.name == name)
}

/// Runs one collector: gated by `selection` (and the server's version), timed, and reported
/// as its run — `None` when it was skipped by design.
pub(crate) fn execute<T>(
    d: &Descriptor,
    selection: &Selection,
    server: Option<&ServerVersion>,
    f: impl FnOnce() -> Result<T, CollectError>,
) -> (Result<T, CollectError>, Option<CollectorRun>) {
    let started = Instant::now();
    let out = selection.gate(d, server).and_then(|()| f());
    let run = run_of(d, started, &out);
    (out, run)
}

/// [`execute`] for a collector that awaits (the SQL ones).
pub(crate) async fn execute_async<T, F>(
    d: &Descriptor,
    selection: &Selection,
    server: Option<&ServerVersion>,
    f: impl FnOnce() -> F,
) -> (Result<T, CollectError>, Option<CollectorRun>)
where
    F: Future<Output = Result<T, CollectError>>,
{
    let started = Instant::now();
    let out = match selection.gate(d, server) {
        Ok(()) => f().await,
        Err(e) => Err(e),
    };
    let run = run_of(d, started, &out);
    (out, run)
}

/// A collector's result as its section of the snapshot: the error's sentence when it failed or
/// was skipped.
pub(crate) fn gathered<T>(out: Result<T, CollectError>) -> Gathered<T> {
    match out {
        Ok(v) => Gathered::Available(v),
        Err(e) => Gathered::Unavailable(e.to_string()),
    }
}

fn run_of<T>(
    d: &Descriptor,
    started: Instant,
    out: &Result<T, CollectError>,
) -> Option<CollectorRun> {
    match out {
        Err(e) if !e.is_failure() => None,
        _ => Some(CollectorRun {
            name: d.name.into(),
            duration_seconds: started.elapsed().as_secs_f64(),
            success: out.is_ok(),
            error: out.as_ref().err().map(ToString::to_string),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_helped() {
        let mut seen = BTreeSet::new();
        for d in all() {
            assert!(seen.insert(d.name), "{} listed twice", d.name);
            assert!(
                d.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()),
                "{}",
                d.name
            );
            assert!(d.help.len() > 20 && !d.help.ends_with('.'), "{}", d.name);
        }
        for name in [
            "host",
            "mariadb",
            "mariadb_statements",
            "mariadb_innodb",
            "mariadb_vector_indexes",
            "mariadb_probe",
            "process",
            "cpu_time",
            "cpu",
            "topology",
            "memory",
            "partition",
            "counters",
            "swap",
            "storage",
        ] {
            assert!(find(name).is_some(), "{name} is not registered");
        }
    }

    #[test]
    fn selections_skip_with_the_way_back() {
        let s = Selection::from_choices(
            [("cpu", false), ("swap", false), ("swap", true)],
            Source::Flags,
        )
        .unwrap();
        let cpu = find("cpu").unwrap();
        let (out, run) = execute(cpu, &s, None, || Ok(1));
        assert!(run.is_none(), "a disabled collector reports no run");
        assert_eq!(
            out.unwrap_err().to_string(),
            "the cpu collector is disabled (--no-collector.cpu)"
        );
        assert!(s.is_enabled(find("swap").unwrap()), "the later choice wins");
        assert_eq!(s.disabled().collect::<Vec<_>>(), ["cpu"]);
        let e = Selection::from_choices([("cpus", false)], Source::Config).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown collector \"cpus\": the collectors are host, mariadb,"),
            "{e}"
        );
    }

    #[test]
    fn too_old_a_server_skips_and_failures_are_runs() {
        let v = find("mariadb_vector_indexes").unwrap();
        let old = ServerVersion::parse("10.11.14-MariaDB", "").unwrap();
        let (out, run) = execute(v, &Selection::defaults(), Some(&old), || Ok(()));
        assert!(run.is_none());
        assert_eq!(
            out.unwrap_err().to_string(),
            "the mariadb_vector_indexes collector needs MariaDB 11.7 or later (this server: 10.11.14)"
        );
        let (out, run) = execute(find("cpu").unwrap(), &Selection::defaults(), None, || {
            Err::<(), _>(CollectError::unsupported("no cpufreq"))
        });
        let run = run.unwrap();
        assert!(out.is_err() && !run.success);
        assert_eq!(run.error.as_deref(), Some("unavailable: no cpufreq"));
    }
}
