//! Status counters over recent windows, for the rules that judge rates and shares
//! (PD205–PD214).
//!
//! A server's status counters count since start-up. A share computed from them (MySQLTuner's
//! way) describes the server's whole life: a problem fixed last week still shows, a problem that
//! started an hour ago hides behind months of good history. So the snapshot keeps reads of the
//! same counters at the start of one or more windows that all end at [`MariadbFacts::status`]
//! — doctor's one `--sample-window`, or the agent's windows from its previous sample up to
//! `[sample] max_status_window` (an hour) — and the rules judge differences.
//!
//! [`Snapshot::judge`] chooses the window a rule judges:
//! 1. the **shortest** window whose counts decide: the rule measures an estimate (a share or a
//!    rate, [`crate::stats`]) and the window decides when its 95% interval lies on one side of
//!    the rule's limit — "35% ± 1.1% of 7,705 requests" decides against 1%, "1 of 3" does not;
//! 2. for doctor only, when its window cannot decide, the counters since start-up of a server
//!    up at least [`MIN_UPTIME`]: the verdict says so in its summary and is at most a warning
//!    (`report::check_one`);
//! 3. else `insufficient_data`, naming what the longest window saw. The agent never judges
//!    counters since start-up: "too little activity in the last hour" is the honest answer on a
//!    quiet server, and an alert on it never fires on last week's history.
//!
//! The agent restarts its windows when a global variable changes, when the schema changes
//! (`Com_alter_table`, `Com_create_index`, `Com_drop_index`) or when the server restarts, so a
//! window never mixes the problem with its fix: a fail clears at the next sample that decides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    MariadbFacts, Snapshot, StatusVar, Threshold, Unit, Verdict,
    basis::{Basis, WindowSource, format_span},
    format_secs,
    stats::{Estimate, Side},
};

/// The status read at the start of the shortest window; [`MariadbFacts::status`] is its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusWindow {
    /// Seconds between the two reads.
    pub seconds: f64,
    pub source: WindowSource,
    /// The status at the start, as `status` (lower-case names, only the names in
    /// [`StatusVar`]).
    pub start: BTreeMap<String, String>,
    /// The starts of longer windows ending at the same read, shortest first: the agent's
    /// status history up to `[sample] max_status_window`. Empty for doctor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub longer: Vec<WindowStart>,
    /// Why the history holds no older read, when it was cut short: "the global variables
    /// changed 3 min ago (tmp_table_size)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
}

/// The start of one of the agent's longer windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowStart {
    /// Seconds from this read to the window's end.
    pub seconds: f64,
    /// The status then (names as [`StatusWindow::start`]).
    pub start: BTreeMap<String, String>,
}

pub(crate) fn status_window_not_recorded() -> crate::Gathered<StatusWindow> {
    crate::Gathered::Unavailable("not recorded: the snapshot predates status windows".into())
}

/// How long a server must have been up before doctor judges its counters since start-up
/// (when its window could not decide). Each rule that falls back to them declares it.
pub(crate) const MIN_UPTIME: Threshold = Threshold {
    key: "min_uptime",
    default: 86_400.0,
    min: 0.0,
    max: 1e10,
    unit: Unit::Count,
    doc: "seconds the server must have been up before doctor judges its counters since start-up, when its sample window could not decide (MySQLTuner: 24 h); the agent never does",
};

/// The fewest failing events (disk tables, misses, new threads…) a window needs to decide a
/// fail, whatever the interval says. The intervals assume independent events, but these come
/// in bursts — one statement builds several temporary tables, one monitoring query reads a
/// few pages — so "2 of 2 temporary tables on disk" in a quiet window is one statement, not a
/// pattern. A pass needs no such floor: its interval already needs many events.
pub(crate) const MIN_FAILING_EVENTS: u64 = 10;

/// What one window's counts show a rule: enough to decide, or not.
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    /// Enough: the text says what was measured ("35.0% ± 1.1% … of 7,705 page requests").
    Decides(String),
    /// Not enough: the text says what was measured and why it does not decide.
    Undecided(String),
}

impl Evidence {
    /// A share or rate against the limit a rule fails above: decides unless its interval
    /// straddles the limit. `what` names the events ("page requests missed the pool").
    pub fn of(e: &Estimate, limit: f64, what: &str) -> Evidence {
        let measured = match e.kind {
            crate::stats::Kind::Share { part, whole } => {
                format!("{part} of {whole} {what}: {e}")
            }
            crate::stats::Kind::Rate { count, seconds } => {
                format!("{count} {what} in {}: {e}", format_span(seconds))
            }
        };
        let failing = match e.kind {
            crate::stats::Kind::Share { part, .. } => part,
            crate::stats::Kind::Rate { count, .. } => count,
        };
        match e.side(limit) {
            Side::Straddles => Evidence::Undecided(format!(
                "{measured}, which includes the limit {}",
                limit_text(e, limit)
            )),
            Side::Above if failing < MIN_FAILING_EVENTS => Evidence::Undecided(format!(
                "{measured}: only {failing}, too few to be a pattern ({MIN_FAILING_EVENTS} needed to fail)"
            )),
            _ => Evidence::Decides(measured),
        }
    }

    /// Enough when `n` reaches `min`: for rules whose evidence is a volume rather than an
    /// interval (PD207: a log buffer's worth of redo written).
    pub fn at_least(n: u64, min: u64, what: &str) -> Evidence {
        if n < min {
            Evidence::Undecided(format!("only {n} {what} ({min} needed to judge)"))
        } else {
            Evidence::Decides(format!("{n} {what}"))
        }
    }
}

fn limit_text(e: &Estimate, limit: f64) -> String {
    match e.kind {
        crate::stats::Kind::Share { .. } => crate::os::pct(limit),
        crate::stats::Kind::Rate { .. } => format!("{}/s", crate::stats::rate_text(limit)),
    }
}

/// Status counters over one [`Basis`].
#[derive(Debug, Clone)]
pub struct Counts<'a> {
    db: &'a MariadbFacts,
    start: Option<&'a BTreeMap<String, String>>,
    basis: Basis,
    /// What the rule measured here, and why shorter windows did not decide.
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
            // Not a basis of status counts (OS counters only).
            Basis::SinceBoot => 0.0,
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

    /// A gauge with a fraction at the start of the window (`None` without a window).
    pub fn start_f64(&self, v: StatusVar) -> Option<f64> {
        self.start
            .and_then(|s| s.get(v.name()))
            .and_then(|raw| raw.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite())
    }

    /// Growth per second over the basis.
    pub fn per_second(&self, v: StatusVar) -> Result<f64, Verdict> {
        Ok(self.get(v)? as f64 / self.seconds().max(1e-3))
    }

    /// The basis in words, for evidence: "over doctor's 5.0 s sample window", "since start-up
    /// (server up 3 d 4 h; …)".
    pub fn describe(&self) -> String {
        let mut s = match self.basis {
            Basis::Window { seconds, source } => describe_window(seconds, source),
            Basis::SinceStartup { uptime } => format!(
                "counters since start-up (server up {})",
                format_secs(uptime)
            ),
            Basis::SinceBoot => "OS counters since boot".to_owned(),
        };
        if let Some(n) = &self.note {
            s.push_str(&format!(" ({n})"));
        }
        s
    }

    /// Marks `v` as judged over this basis, so the report names the window in its summary
    /// and caps a verdict on counters since start-up at a warning.
    pub fn stamp(&self, mut v: Verdict) -> Verdict {
        v.basis = Some(self.basis);
        v
    }
}

fn describe_window(seconds: f64, source: WindowSource) -> String {
    match source {
        WindowSource::Doctor => format!("over doctor's {seconds:.1} s sample window"),
        WindowSource::Agent => format!(
            "over the agent's last {} of status reads",
            format_span(seconds)
        ),
    }
}

/// A window shorter than this is no window (two reads in the same instant).
const MIN_WINDOW_SECONDS: f64 = 0.05;

impl MariadbFacts {
    /// The counters over the shortest window, or why there is none.
    pub fn window_counts(&self) -> Result<Counts<'_>, String> {
        self.windows()?
            .into_iter()
            .next()
            .ok_or_else(|| "no window".to_owned())
    }

    /// The counters over every window ending at [`MariadbFacts::status`], shortest first, or
    /// why there is none. A window across a restart is left out.
    pub fn windows(&self) -> Result<Vec<Counts<'_>>, String> {
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
        let end_uptime = uptime(&self.status);
        let mut out = Vec::new();
        let mut restarted = None;
        let starts = std::iter::once((w.seconds, &w.start))
            .chain(w.longer.iter().map(|l| (l.seconds, &l.start)));
        let mut last = 0.0;
        for (seconds, start) in starts {
            if !(seconds.is_finite() && seconds >= MIN_WINDOW_SECONDS && seconds > last) {
                continue;
            }
            last = seconds;
            if let (Some(a), Some(b)) = (uptime(start), end_uptime)
                && b < a
            {
                restarted.get_or_insert(format!(
                    "the server restarted during the window (uptime {a} s → {b} s)"
                ));
                continue;
            }
            out.push(Counts {
                db: self,
                start: Some(start),
                basis: Basis::Window {
                    seconds,
                    source: w.source,
                },
                note: None,
            });
        }
        if out.is_empty() {
            return Err(restarted.unwrap_or_else(|| "no window".into()));
        }
        Ok(out)
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
}

impl Snapshot {
    /// The counts a rate or share rule judges (see the module documentation): the shortest
    /// window whose [`Evidence`] decides; for doctor, the counters since start-up of a server
    /// up at least `min_uptime` seconds when its window cannot; else `insufficient_data`
    /// naming what was measured.
    pub fn judge(
        &self,
        min_uptime: u64,
        measure: impl Fn(&Counts<'_>) -> Result<Evidence, Verdict>,
    ) -> Result<Counts<'_>, Verdict> {
        let db = self.db()?;
        let agent = self.origin == Some(crate::Origin::Agent)
            || matches!(&db.status_window, crate::Gathered::Available(w) if w.source == WindowSource::Agent);
        let mut why = Vec::new();
        let mut longest = None;
        match db.windows() {
            Ok(windows) => {
                let mut undecided = None;
                for mut w in windows {
                    match measure(&w)? {
                        Evidence::Decides(text) => {
                            w.note = Some(match undecided {
                                None => text,
                                Some(_) => format!("{text}; shorter windows could not decide"),
                            });
                            return Ok(w);
                        }
                        Evidence::Undecided(text) => {
                            longest = Some(w.basis.short());
                            undecided = Some(format!("{}, {text}", w.describe()));
                        }
                    }
                }
                why.extend(undecided);
            }
            Err(reason) => why.push(format!("no status window ({reason})")),
        }
        if let crate::Gathered::Available(w) = &db.status_window
            && let Some(h) = &w.history
        {
            why.push(h.clone());
        }
        if agent {
            let head = match longest {
                Some(l) => format!("too little activity {l} to decide: "),
                None => String::new(),
            };
            return Err(Verdict::insufficient(format!(
                "{head}{}; the agent judges again at its next sample and never judges counters since start-up",
                why.join("; ")
            )));
        }
        let uptime = db.status_u64(StatusVar::Uptime)?;
        let mut startup = db.startup_counts()?;
        if uptime < min_uptime {
            why.push(format!(
                "the server has been up only {} (counters since start-up are judged after {})",
                format_secs(uptime),
                format_secs(min_uptime)
            ));
        } else {
            match measure(&startup)? {
                Evidence::Decides(text) => {
                    startup.note = Some(format!(
                        "{text}; doctor's window could not decide: {}",
                        why.join("; ")
                    ));
                    return Ok(startup);
                }
                Evidence::Undecided(text) => why.push(format!("since start-up {text}")),
            }
        }
        Err(Verdict::insufficient(format!(
            "{}; run doctor with a longer --sample-window (e.g. 60s) while the server is busy",
            why.join("; ")
        )))
    }
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

    /// Enough when at least 20 temporary tables were created: a stand-in measure.
    fn need(c: &Counts<'_>) -> Result<Evidence, Verdict> {
        Ok(Evidence::at_least(
            c.get(StatusVar::CreatedTmpTables)?,
            20,
            "temporary tables",
        ))
    }

    fn quiet(uptime: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, uptime)
            .status(StatusVar::CreatedTmpTables, "5000")
            .window(1.0, &[(StatusVar::CreatedTmpTables, "4998")])
    }

    #[test]
    fn doctor_falls_back_to_start_up_only_on_a_server_up_long_enough() {
        let s = quiet("100000").build();
        let c = s.judge(86_400, need).unwrap();
        assert!(!c.is_window());
        assert!(
            c.describe().contains("only 2 temporary tables")
                && c.describe().contains("doctor's window could not decide"),
            "{}",
            c.describe()
        );
        let s = quiet("600").build();
        let v = s.judge(86_400, need).unwrap_err();
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
        let v = s.judge(86_400, need).unwrap_err();
        assert!(v.summary.contains("no status window"), "{}", v.summary);
    }

    #[test]
    fn the_agent_never_judges_counters_since_start_up() {
        // Up for years, 5,000 temporary tables since start-up, 2 in the last minute.
        let s = quiet("100000000").by_agent().build();
        let v = s.judge(0, need).unwrap_err();
        assert_eq!(v.status, Status::InsufficientData);
        assert!(
            v.summary.contains("too little activity over the last 1 s")
                && v.summary.contains("never judges counters since start-up"),
            "{}",
            v.summary
        );
        // Also without any window (its first sample).
        let mut s = quiet("100000000").by_agent().build();
        s.mariadb.facts.as_mut().unwrap().status_window =
            crate::Gathered::Unavailable("the agent's first sample".into());
        let v = s.judge(0, need).unwrap_err();
        assert!(
            v.summary.contains("first sample") && !v.summary.contains("--sample-window"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn the_shortest_window_that_decides_is_judged() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "100000")
            .status(StatusVar::CreatedTmpTables, "5000")
            .window(60.0, &[(StatusVar::CreatedTmpTables, "4995")])
            .longer_window(120.0, &[(StatusVar::CreatedTmpTables, "4990")])
            .longer_window(600.0, &[(StatusVar::CreatedTmpTables, "4900")])
            .longer_window(3600.0, &[(StatusVar::CreatedTmpTables, "4000")])
            .by_agent()
            .build();
        let c = s.judge(0, need).unwrap();
        assert_eq!(c.seconds(), 600.0);
        assert_eq!(c.get(StatusVar::CreatedTmpTables), Ok(100));
        assert!(
            c.describe().contains("last 10 min")
                && c.describe().contains("shorter windows could not decide"),
            "{}",
            c.describe()
        );
    }

    #[test]
    fn a_fail_needs_a_pattern_not_one_burst() {
        use crate::stats::Estimate;
        // Two disk tables of two: one statement's burst, not a pattern.
        let e = Estimate::share(2, 2);
        assert!(
            matches!(Evidence::of(&e, 0.25, "x"), Evidence::Undecided(t) if t.contains("too few"))
        );
        // Ten of ten decides; so does a clear pass with no failing event at all.
        assert!(matches!(
            Evidence::of(&Estimate::share(10, 10), 0.25, "x"),
            Evidence::Decides(_)
        ));
        assert!(matches!(
            Evidence::of(&Estimate::share(0, 40), 0.25, "x"),
            Evidence::Decides(_)
        ));
    }

    #[test]
    fn a_window_across_a_restart_is_left_out() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .status(StatusVar::Uptime, "100")
            .status(StatusVar::CreatedTmpTables, "50")
            .window(
                60.0,
                &[
                    (StatusVar::Uptime, "40"),
                    (StatusVar::CreatedTmpTables, "45"),
                ],
            )
            .longer_window(
                600.0,
                &[
                    (StatusVar::Uptime, "9000"),
                    (StatusVar::CreatedTmpTables, "9000"),
                ],
            )
            .by_agent()
            .build();
        let w = facts(&s).windows().unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].seconds(), 60.0);
        let v = s.judge(0, need).unwrap_err();
        assert!(
            v.summary.contains("only 5 temporary tables"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn the_report_caps_start_up_verdicts_and_names_the_window() {
        use crate::Severity;
        // 4,000 of 5,000 temporary tables on disk since start-up, a day ago.
        let spilling = || {
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .var(crate::Var::TmpTableSize, "16777216")
                .var(crate::Var::MaxHeapTableSize, "16777216")
                .status(StatusVar::Uptime, "100000")
                .status(StatusVar::CreatedTmpTables, "5000")
                .status(StatusVar::CreatedTmpDiskTables, "4000")
        };
        let pd208 = |s: &crate::Snapshot| {
            let report = crate::evaluate(s);
            let c = report
                .checks
                .into_iter()
                .find(|c| c.code == "PD208")
                .unwrap();
            assert_eq!(c.status, Status::Fail, "{c:?}");
            c
        };
        // Doctor's 1 s window saw nothing: judged since start-up, said so, at most a warning.
        let c = pd208(&spilling().window(1.0, &[]).build());
        assert!(c.severity <= Severity::Warning);
        assert!(
            c.summary.contains("since start-up") && c.summary.contains("not necessarily now"),
            "{}",
            c.summary
        );
        // The same over a deciding window of the agent's: the summary names it.
        let c = pd208(
            &spilling()
                .window(
                    120.0,
                    &[
                        (StatusVar::CreatedTmpTables, "4900"),
                        (StatusVar::CreatedTmpDiskTables, "3920"),
                    ],
                )
                .by_agent()
                .build(),
        );
        assert!(
            c.summary.ends_with("(over the last 2 min)"),
            "{}",
            c.summary
        );
    }
}
