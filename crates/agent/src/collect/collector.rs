//! What every collector is, and the one place that runs and times one — node_exporter's
//! `registerCollector` and `execute()`, mysqld_exporter's `Scraper{Name, Help, Version}`.
//!
//! Each collector, SQL or OS, has a [`Descriptor`] (name, help, enabled by default, what it
//! needs). The registry lists live in each folder's `mod.rs` (`host::COLLECTOR`,
//! `mariadb::collectors()`, `os::SECTIONS`); `collect::collectors()` joins them, and the
//! `--collector.NAME` / `--no-collector.NAME` flags, the agent's `[collectors]` table and
//! `powerdiag collectors` are made from it. This module knows none of them (it is what they
//! import). [`execute`] and [`execute_async`] are the only code that times a collector
//! and builds its [`CollectorRun`]: a disabled collector, or one whose server is too old, is
//! [`CollectError::Skipped`] and reports no run; every other error is a failed run.

use std::{collections::BTreeMap, future::Future, time::Instant};

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

/// The collectors a user turned on or off, checked against the registry: each choice with
/// where it was made, so that a skipped collector names the way back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    choices: BTreeMap<&'static str, (bool, Source)>,
}

/// Where a collector was turned on or off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// `--collector.NAME` / `--no-collector.NAME`.
    #[default]
    Flags,
    /// The agent's `[collectors]` table.
    Config,
}

/// A name that is no collector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown collector {name:?}: the collectors are {known} (powerdiag collectors lists them)")]
pub struct UnknownCollector {
    pub name: String,
    /// Every collector's name, comma-separated.
    pub known: String,
}

impl Selection {
    /// Every collector at its default.
    pub fn defaults() -> Selection {
        Selection::default()
    }

    /// `choices` as `(name, on)`, each one of `registry`'s collectors; a later choice for the
    /// same name wins.
    pub fn from_choices<'a>(
        registry: &[&'static Descriptor],
        choices: impl IntoIterator<Item = (&'a str, bool)>,
        source: Source,
    ) -> Result<Selection, UnknownCollector> {
        let mut s = Selection::default();
        for (name, on) in choices {
            let d = registry
                .iter()
                .find(|d| d.name == name)
                .ok_or_else(|| UnknownCollector {
                    name: name.into(),
                    known: registry
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            s.choices.insert(d.name, (on, source));
        }
        Ok(s)
    }

    /// These choices, with `over`'s winning where both choose (the agent's flags over its
    /// configuration file).
    pub fn overridden_by(&self, over: &Selection) -> Selection {
        let mut s = self.clone();
        s.choices.extend(over.choices.iter().map(|(k, v)| (*k, *v)));
        s
    }

    /// Was the collector named `name` turned on explicitly (not by default)?
    pub fn turned_on(&self, name: &str) -> bool {
        self.choices.get(name).is_some_and(|(on, _)| *on)
    }

    pub fn is_enabled(&self, d: &Descriptor) -> bool {
        self.choices
            .get(d.name)
            .map_or(d.default_enabled, |(on, _)| *on)
    }

    /// The skip of a collector that is not enabled, in the words its section will quote.
    fn skip(&self, d: &Descriptor) -> CollectError {
        let source = self.choices.get(d.name).map(|(_, s)| *s);
        let how = match source {
            Some(Source::Flags) => format!("--no-collector.{}", d.name),
            Some(Source::Config) => format!("[collectors] {} = false in the configuration", d.name),
            None => format!("default (--collector.{} turns it on)", d.name),
        };
        CollectError::skipped(format!("the {} collector is disabled by {how}", d.name))
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

    /// The names of `registry`'s collectors that will not run, in its order.
    pub fn disabled<'a>(
        &'a self,
        registry: &'a [&'static Descriptor],
    ) -> impl Iterator<Item = &'static str> + 'a {
        registry
            .iter()
            .filter(|d| !self.is_enabled(d))
            .map(|d| d.name)
    }
}

/// Runs one collector: gated by `selection` (and the server's version), timed, and reported
/// as its run — `None` when it was skipped by design.
pub fn execute<T>(
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
pub async fn execute_async<T, F>(
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

/// The whole sample, as the agent reports it when a collection overran its budget and was
/// abandoned (`powerdiag_collector_success{collector="sample"} 0`). Not in any registry: it
/// cannot be turned off.
pub const SAMPLE: Descriptor = Descriptor {
    name: "sample",
    help: "the whole sample: fails when a collection overran its budget and was abandoned",
    default_enabled: true,
    requires: Requires::Nothing,
};

/// The run of `d` that failed with `why` after `took` (a collection abandoned at its deadline;
/// [`execute`] builds every other run).
pub fn failed_run(d: &Descriptor, took: std::time::Duration, why: &str) -> CollectorRun {
    CollectorRun {
        name: d.name.into(),
        duration_seconds: took.as_secs_f64(),
        success: false,
        error: Some(why.to_owned()),
    }
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
