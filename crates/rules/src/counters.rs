//! Status counters over a window, for the rules that judge rates and shares (PD205–PD216).
//!
//! A server's status counters count since start-up. A share computed from them (MySQLTuner's
//! way) describes the server's whole life: a problem fixed last week still shows, a problem that
//! started an hour ago hides behind months of good history. So the snapshot keeps two reads of
//! the same counters — [`MariadbFacts::status`] at the end and [`StatusWindow::start`] at the
//! start of a window: doctor's two reads `--sample-window` apart, or the agent's current read
//! and one about `[sample] status_window` older — and the rules judge the difference.
//!
//! [`MariadbFacts::judged_counts`] chooses the basis a rule judges, in this order:
//! 1. the window, when it saw enough of what the rule measures (each rule says how much: a
//!    share of 3 temporary tables means nothing);
//! 2. else the counters since start-up, when the server has been up long enough
//!    ([`MIN_UPTIME`], MySQLTuner's 24-hour caveat) and they saw enough — the verdict says it
//!    rests on them;
//! 3. else `insufficient_data`, naming what the window saw and how to get a longer one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{MariadbFacts, StatusVar, Threshold, Unit, Verdict, format_secs};

/// Who took the two status reads of a [`StatusWindow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// `powerdiag doctor`/`collect`: the two ends of its `--sample-window`.
    Doctor,
    /// `powerdiag agent`: its read now and one about `[sample] status_window` earlier.
    Agent,
}

/// The status read at the start of a window; [`MariadbFacts::status`] is its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusWindow {
    /// Seconds between the two reads.
    pub seconds: f64,
    pub source: WindowSource,
    /// The status at the start, as `status` (lower-case names, only the names in
    /// [`StatusVar`]).
    pub start: BTreeMap<String, String>,
}

pub(crate) fn status_window_not_recorded() -> crate::Gathered<StatusWindow> {
    crate::Gathered::Unavailable("not recorded: the snapshot predates status windows".into())
}

/// How long a server must have been up before a rule judges its counters since start-up
/// (when the window saw too little). Each rule that falls back to them declares it.
pub(crate) const MIN_UPTIME: Threshold = Threshold {
    key: "min_uptime",
    default: 86_400.0,
    min: 0.0,
    max: 1e10,
    unit: Unit::Count,
    doc: "seconds the server must have been up before its counters since start-up are judged, when the sample window saw too little (MySQLTuner: 24 h)",
};

/// What a rule's counts cover.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis {
    /// The difference between two reads `seconds` apart.
    Window { seconds: f64, source: WindowSource },
    /// The counters as they are: since start-up, `uptime` seconds.
    SinceStartup { uptime: u64 },
}

/// Status counters over one [`Basis`].
#[derive(Debug, Clone)]
pub struct Counts<'a> {
    db: &'a MariadbFacts,
    start: Option<&'a BTreeMap<String, String>>,
    basis: Basis,
    /// Why the window was not used, when the basis is since start-up.
    note: Option<String>,
}

impl Counts<'_> {
    pub fn basis(&self) -> Basis {
        self.basis
    }

    pub fn is_window(&self) -> bool {
        matches!(self.basis, Basis::Window { .. })
    }

    /// Seconds the counts cover: the window, or the uptime.
    pub fn seconds(&self) -> f64 {
        match self.basis {
            Basis::Window { seconds, .. } => seconds,
            Basis::SinceStartup { uptime } => uptime as f64,
        }
    }

    /// A counter's growth over the basis (its value since start-up without a window); a
    /// gauge's value at the end of it.
    pub fn get(&self, v: StatusVar) -> Result<u64, Verdict> {
        let end = self.db.status_u64(v)?;
        let Some(start) = self.start.filter(|_| v.is_counter()) else {
            return Ok(end);
        };
        let raw = start.get(v.name()).ok_or_else(|| {
            Verdict::insufficient(format!(
                "status {} is missing from the window's first read",
                v.name()
            ))
        })?;
        let begin = crate::parse_u64(raw).ok_or_else(|| {
            Verdict::insufficient(format!(
                "status {} has an unexpected value {raw:?} in the window's first read",
                v.name()
            ))
        })?;
        end.checked_sub(begin).ok_or_else(|| {
            Verdict::insufficient(format!(
                "status {} went down during the window ({begin} → {end}: FLUSH STATUS or a restart); the next window will tell",
                v.name()
            ))
        })
    }

    /// The gauge's value at the start of the window (`None` without a window).
    pub fn start_value(&self, v: StatusVar) -> Option<u64> {
        self.start
            .and_then(|s| s.get(v.name()))
            .and_then(|raw| crate::parse_u64(raw))
    }

    /// Growth per second over the basis.
    pub fn per_second(&self, v: StatusVar) -> Result<f64, Verdict> {
        Ok(self.get(v)? as f64 / self.seconds().max(1e-3))
    }

    /// The basis in words, for evidence: "over doctor's 5.0 s sample window", "since start-up
    /// (server up 3 d 4 h; …)".
    pub fn describe(&self) -> String {
        match self.basis {
            Basis::Window { seconds, source } => describe_window(seconds, source),
            Basis::SinceStartup { uptime } => {
                let mut s = format!(
                    "counters since start-up (server up {})",
                    format_secs(uptime)
                );
                if let Some(n) = &self.note {
                    s.push_str(&format!(", because {n}"));
                }
                s
            }
        }
    }
}

fn describe_window(seconds: f64, source: WindowSource) -> String {
    match source {
        WindowSource::Doctor => format!("over doctor's {seconds:.1} s sample window"),
        WindowSource::Agent => format!("over the agent's {seconds:.0} s status window"),
    }
}

/// A window shorter than this is no window (two reads in the same instant).
const MIN_WINDOW_SECONDS: f64 = 0.05;

impl MariadbFacts {
    /// The counters over the sample window, or why there is none.
    pub fn window_counts(&self) -> Result<Counts<'_>, String> {
        let w = match &self.status_window {
            crate::Gathered::Available(w) => w,
            crate::Gathered::Unavailable(why) => return Err(why.clone()),
        };
        if w.seconds.is_nan() || w.seconds < MIN_WINDOW_SECONDS {
            return Err(format!("the window was {:.3} s long", w.seconds));
        }
        let uptime = |m: &BTreeMap<String, String>| {
            m.get(StatusVar::Uptime.name())
                .and_then(|u| crate::parse_u64(u))
        };
        if let (Some(a), Some(b)) = (uptime(&w.start), uptime(&self.status))
            && b < a
        {
            return Err(format!(
                "the server restarted during the window (uptime {a} s → {b} s)"
            ));
        }
        Ok(Counts {
            db: self,
            start: Some(&w.start),
            basis: Basis::Window {
                seconds: w.seconds,
                source: w.source,
            },
            note: None,
        })
    }

    /// The counters since start-up, or the verdict when the uptime is unknown.
    pub fn startup_counts(&self) -> Result<Counts<'_>, Verdict> {
        let uptime = self.status_u64(StatusVar::Uptime)?;
        Ok(Counts {
            db: self,
            start: None,
            basis: Basis::SinceStartup { uptime },
            note: None,
        })
    }

    /// The counts a rate or share rule judges (see the module documentation): the window when
    /// `shortfall` finds nothing missing in it, else the counters since start-up of a server up
    /// at least `min_uptime` seconds, else `insufficient_data`. `shortfall` returns what the
    /// counts lack, e.g. `Some("only 3 temporary tables were created (20 needed)")`, or
    /// `None` when they are enough.
    pub fn judged_counts(
        &self,
        min_uptime: u64,
        shortfall: impl Fn(&Counts<'_>) -> Result<Option<String>, Verdict>,
    ) -> Result<Counts<'_>, Verdict> {
        let mut why = Vec::new();
        let mut agent = false;
        match self.window_counts() {
            Ok(w) => {
                agent = matches!(
                    w.basis,
                    Basis::Window {
                        source: WindowSource::Agent,
                        ..
                    }
                );
                match shortfall(&w)? {
                    None => return Ok(w),
                    Some(short) => why.push(format!("{}, {short}", w.describe())),
                }
            }
            Err(reason) => why.push(format!("no sample window ({reason})")),
        }
        let uptime = self.status_u64(StatusVar::Uptime)?;
        let mut startup = self.startup_counts()?;
        if uptime < min_uptime {
            why.push(format!(
                "the server has been up only {} (counters since start-up are judged after {})",
                format_secs(uptime),
                format_secs(min_uptime)
            ));
        } else {
            match shortfall(&startup)? {
                None => {
                    startup.note = Some(why.join("; "));
                    return Ok(startup);
                }
                Some(short) => why.push(format!("since start-up {short}")),
            }
        }
        let hint = if agent {
            "the agent judges again at its next sample; a quiet server needs a longer [sample] status_window"
        } else {
            "run doctor with a longer --sample-window (e.g. 60s) while the server is busy"
        };
        Err(Verdict::insufficient(format!("{}; {hint}", why.join("; "))))
    }
}

/// `Some("only N things (M needed)")` when `n < min`: the usual shortfall.
pub(crate) fn at_least(n: u64, min: u64, what: &str) -> Option<String> {
    (n < min).then(|| format!("only {n} {what} ({min} needed to judge)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Status, testing::SnapshotBuilder};

    fn facts(s: &crate::Snapshot) -> &MariadbFacts {
        s.mariadb.facts.as_ref().unwrap()
    }

    #[test]
    fn window_differences_and_gauges() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "1000")
            .status(StatusVar::CreatedTmpTables, "150")
            .status(StatusVar::ThreadsConnected, "7")
            .window(
                10.0,
                &[
                    (StatusVar::Uptime, "990"),
                    (StatusVar::CreatedTmpTables, "100"),
                    (StatusVar::ThreadsConnected, "3"),
                ],
            )
            .build();
        let c = facts(&s).window_counts().unwrap();
        assert_eq!(c.get(StatusVar::CreatedTmpTables), Ok(50));
        assert_eq!(c.get(StatusVar::ThreadsConnected), Ok(7));
        assert_eq!(c.start_value(StatusVar::ThreadsConnected), Some(3));
        assert_eq!(c.per_second(StatusVar::CreatedTmpTables), Ok(5.0));
        assert_eq!(c.describe(), "over doctor's 10.0 s sample window");
    }

    #[test]
    fn counters_that_go_down_are_not_judged() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "1000")
            .status(StatusVar::CreatedTmpTables, "5")
            .window(10.0, &[(StatusVar::CreatedTmpTables, "100")])
            .build();
        let v = facts(&s)
            .window_counts()
            .unwrap()
            .get(StatusVar::CreatedTmpTables)
            .unwrap_err();
        assert!(v.summary.contains("FLUSH STATUS"), "{v:?}");
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "5")
            .window(10.0, &[(StatusVar::Uptime, "1000")])
            .build();
        assert!(facts(&s).window_counts().unwrap_err().contains("restarted"));
    }

    #[test]
    fn the_basis_falls_back_to_start_up_only_on_a_server_up_long_enough() {
        let need = |c: &Counts<'_>| Ok(at_least(c.get(StatusVar::CreatedTmpTables)?, 20, "x"));
        let quiet = |uptime: &str| {
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .status(StatusVar::Uptime, uptime)
                .status(StatusVar::CreatedTmpTables, "5000")
                .window(1.0, &[(StatusVar::CreatedTmpTables, "4998")])
                .build()
        };
        let s = quiet("100000");
        let c = facts(&s).judged_counts(86_400, need).unwrap();
        assert!(!c.is_window());
        assert!(c.describe().contains("only 2 x"), "{}", c.describe());
        let s = quiet("600");
        let v = facts(&s).judged_counts(86_400, need).unwrap_err();
        assert_eq!(v.status, Status::InsufficientData);
        assert!(
            v.summary.contains("up only 10 min") && v.summary.contains("--sample-window"),
            "{}",
            v.summary
        );
        // No window at all: the reason is quoted.
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "600")
            .build();
        let v = facts(&s).judged_counts(86_400, need).unwrap_err();
        assert!(v.summary.contains("no sample window"), "{}", v.summary);
    }
}
