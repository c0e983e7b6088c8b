//! The status window: a second read of the status counters so rules judge differences over
//! time, not counters since start-up (`powerdiag_rules::counters`).
//!
//! Doctor reads the status twice, `--sample-window` apart, after its other statements, so
//! nothing powerdiag sends but the second status read itself falls inside the window. The agent
//! reads the status every sample anyway: [`StatusTracker`] keeps the reads of the last
//! `[sample] max_status_window` (an hour) and hands the rules windows ending at the current
//! read — the shortest from the oldest read no older than `[sample] status_window` (at least
//! the previous sample), then about twice, four times… as long, up to the oldest kept — so
//! each rule judges the shortest recent window that holds enough evidence, never the
//! server's life.
//!
//! The history restarts when the server restarts, when a global variable changes or when
//! the schema changes (`ALTER TABLE`, `CREATE`/`DROP INDEX`): a window never mixes a problem
//! with its fix, so a fail clears at the first sample after the fix that decides.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{Gathered, StatusVar, StatusWindow, WindowSource, WindowStart};

/// How the MariaDB collector gets the start of a status window.
#[derive(Debug, Clone, Default)]
pub enum StatusWindowMode {
    /// One read, no window (`doctor --sample-window 0`).
    #[default]
    None,
    /// Doctor: read again after this long.
    Doctor(Duration),
    /// The agent: pair the read with earlier samples'.
    Agent(StatusTracker),
}

/// Reads kept at most, whatever the interval: older ones are thinned to about
/// `max_window / THIN` apart.
const MAX_READS: usize = 1024;
/// Kept reads are at least `max_window / THIN` apart (the previous read always stays).
const THIN: u32 = 512;

/// The status counters whose growth means the schema changed.
const SCHEMA_CHANGES: [StatusVar; 3] = [
    StatusVar::ComAlterTable,
    StatusVar::ComCreateIndex,
    StatusVar::ComDropIndex,
];

/// One status read and when it was taken.
type Read = (Instant, Compact);

/// A status read as kept in the history: one slot per [`StatusVar`], numbers as numbers (an
/// hour of reads every 15 s is 240 of them: as maps of strings ~14 kB each by their layout,
/// 3.4 MB, against ~2.2 kB here). Lossless: a value that is not a number, or a name outside
/// [`StatusVar`], is kept as text.
#[derive(Debug, Clone, PartialEq)]
struct Compact {
    known: Box<[Option<Value>]>,
    other: Box<[(Box<str>, Box<str>)]>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Number(u64),
    Text(Box<str>),
}

impl Compact {
    fn of(status: &BTreeMap<String, String>) -> Compact {
        let mut known: Vec<Option<Value>> = vec![None; StatusVar::ALL.len()];
        let mut other = Vec::new();
        for (k, v) in status {
            // Only a canonical number round-trips as one ("007" stays text).
            let value = match v.parse::<u64>() {
                Ok(n) if n.to_string() == *v => Value::Number(n),
                _ => Value::Text(v.as_str().into()),
            };
            match StatusVar::ALL.iter().position(|s| s.name() == k) {
                Some(i) => known[i] = Some(value),
                None => other.push((k.as_str().into(), v.as_str().into())),
            }
        }
        Compact {
            known: known.into_boxed_slice(),
            other: other.into_boxed_slice(),
        }
    }

    fn get(&self, v: StatusVar) -> Option<u64> {
        match self.known.get(v as usize)? {
            Some(Value::Number(n)) => Some(*n),
            Some(Value::Text(t)) => powerdiag_rules::parse_u64(t),
            None => None,
        }
    }

    /// The read as the status map it came from.
    fn to_map(&self) -> BTreeMap<String, String> {
        let known = StatusVar::ALL
            .iter()
            .zip(self.known.iter())
            .filter_map(|(s, v)| {
                let v = match v.as_ref()? {
                    Value::Number(n) => n.to_string(),
                    Value::Text(t) => t.to_string(),
                };
                Some((s.name().to_owned(), v))
            });
        let other = self
            .other
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()));
        known.chain(other).collect()
    }
}

#[derive(Debug, Default)]
struct History {
    reads: VecDeque<Read>,
    /// The global variables at the newest read, to see a change.
    variables: BTreeMap<String, String>,
    /// When and why the history was last restarted.
    restarted: Option<(Instant, String)>,
}

/// The agent's recent status reads.
#[derive(Debug, Clone)]
pub struct StatusTracker {
    /// The shortest window the agent judges (`[sample] status_window`).
    pub window: Duration,
    /// The longest (`[sample] max_status_window`): older reads are dropped.
    pub max_window: Duration,
    history: Arc<Mutex<History>>,
}

impl StatusTracker {
    pub fn new(window: Duration, max_window: Duration) -> StatusTracker {
        StatusTracker {
            window,
            max_window: max_window.max(window),
            history: Default::default(),
        }
    }

    /// The same reads, other windows (a reloaded configuration).
    pub fn with_windows(&self, window: Duration, max_window: Duration) -> StatusTracker {
        StatusTracker {
            window,
            max_window: max_window.max(window),
            history: self.history.clone(),
        }
    }

    /// Records `status` read at `now` (with the global `variables` then) and returns the
    /// windows ending with it, or why there are none yet.
    pub(crate) fn record(
        &self,
        now: Instant,
        status: &BTreeMap<String, String>,
        variables: &BTreeMap<String, String>,
    ) -> Gathered<StatusWindow> {
        let Ok(mut h) = self.history.lock() else {
            return Gathered::Unavailable("status window state poisoned".into());
        };
        if let Some(why) = change(&h, status, variables) {
            h.reads.clear();
            h.restarted = Some((now, why));
        }
        if !variables.is_empty() {
            h.variables = variables.clone();
        }
        // Drop reads older than the longest window, but always keep the previous one.
        while h.reads.len() > 1
            && h.reads
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > self.max_window)
        {
            h.reads.pop_front();
        }
        let window = self.windows(&h, now);
        // Thin: the previous read has served as the shortest window's start; drop it when it
        // is too close to the one before to matter for longer windows.
        let spacing = self.max_window / THIN;
        let n = h.reads.len();
        if n >= 2 && h.reads[n - 1].0.duration_since(h.reads[n - 2].0) < spacing {
            h.reads.pop_back();
        }
        h.reads.push_back((now, Compact::of(status)));
        while h.reads.len() > MAX_READS {
            h.reads.pop_front();
        }
        window
    }

    fn windows(&self, h: &History, now: Instant) -> Gathered<StatusWindow> {
        let age = |at: &Instant| now.duration_since(*at);
        // The shortest: the oldest read within `window`, else the previous read.
        let Some(first) = h
            .reads
            .iter()
            .position(|(at, _)| age(at) <= self.window)
            .or_else(|| h.reads.len().checked_sub(1))
        else {
            return Gathered::Unavailable(match &h.restarted {
                Some((_, why)) => format!("{why}: the status windows start again at this sample"),
                None => {
                    "the agent's first sample: the status windows start at its next sample".into()
                }
            });
        };
        let (at, start) = &h.reads[first];
        let shortest = age(at);
        // Longer windows: the oldest read within 2×, 4×, … the shortest, then the oldest kept.
        let mut longer = Vec::new();
        let mut last = first;
        let mut reach = shortest.max(Duration::from_secs(1));
        while last > 0 {
            reach = reach.saturating_mul(2).min(self.max_window);
            let Some(i) = h.reads.iter().position(|(at, _)| age(at) <= reach) else {
                break;
            };
            let i = if reach >= self.max_window { 0 } else { i };
            if i < last {
                let (at, start) = &h.reads[i];
                longer.push(WindowStart {
                    seconds: age(at).as_secs_f64(),
                    start: start.to_map(),
                });
                last = i;
            }
            if reach >= self.max_window {
                break;
            }
        }
        let oldest = age(&h.reads[0].0);
        let history = h.restarted.as_ref().and_then(|(at, why)| {
            (age(at) <= oldest + Duration::from_secs(1)).then(|| {
                format!(
                    "the status history starts {} ago: {why}",
                    humantime::format_duration(Duration::from_secs(age(at).as_secs()))
                )
            })
        });
        Gathered::Available(StatusWindow {
            seconds: shortest.as_secs_f64(),
            source: WindowSource::Agent,
            start: start.to_map(),
            longer,
            history,
        })
    }
}

/// Why the history must restart before `status`, if it must: the server restarted, a global
/// variable changed, or the schema changed since the newest read.
fn change(
    h: &History,
    status: &BTreeMap<String, String>,
    variables: &BTreeMap<String, String>,
) -> Option<String> {
    let (_, last) = h.reads.back()?;
    let num = |m: &BTreeMap<String, String>, v: StatusVar| {
        m.get(v.name()).and_then(|x| powerdiag_rules::parse_u64(x))
    };
    if let (Some(a), Some(b)) = (last.get(StatusVar::Uptime), num(status, StatusVar::Uptime))
        && b < a
    {
        return Some("the server restarted".into());
    }
    if !variables.is_empty() && !h.variables.is_empty() && *variables != h.variables {
        let mut names: Vec<&str> = variables
            .iter()
            .filter(|(k, v)| h.variables.get(*k) != Some(*v))
            .map(|(k, _)| k.as_str())
            .chain(
                h.variables
                    .keys()
                    .filter(|k| !variables.contains_key(*k))
                    .map(String::as_str),
            )
            .collect();
        names.sort_unstable();
        names.dedup();
        let more = names.len().saturating_sub(5);
        names.truncate(5);
        return Some(format!(
            "global variables changed ({}{})",
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    let moved: Vec<&str> = SCHEMA_CHANGES
        .iter()
        .filter(|v| match (last.get(**v), num(status, **v)) {
            (Some(a), Some(b)) => b != a,
            _ => false,
        })
        .map(|v| v.name())
        .collect();
    if !moved.is_empty() {
        return Some(format!("the schema changed ({})", moved.join(", ")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The history keeps reads compact and gives them back unchanged.
    #[test]
    fn a_kept_read_is_the_read() {
        let read: BTreeMap<String, String> = [
            ("uptime", "1000"),
            ("questions", "18446744073709551615"),
            ("threads_connected", "007"),
            ("rpl_semi_sync_master_status", "ON"),
            ("not_a_status_var", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let c = Compact::of(&read);
        assert_eq!(c.to_map(), read);
        assert_eq!(c.get(StatusVar::Uptime), Some(1000));
        assert_eq!(c.get(StatusVar::ThreadsConnected), Some(7));
        assert_eq!(c.get(StatusVar::Questions), Some(u64::MAX));
    }

    fn st(n: u64) -> BTreeMap<String, String> {
        [
            ("questions".to_owned(), n.to_string()),
            ("uptime".to_owned(), (1000 + n).to_string()),
        ]
        .into_iter()
        .collect()
    }

    fn vars(size: &str) -> BTreeMap<String, String> {
        [("tmp_table_size".to_owned(), size.to_owned())]
            .into_iter()
            .collect()
    }

    fn available(g: Gathered<StatusWindow>) -> StatusWindow {
        match g {
            Gathered::Available(w) => w,
            Gathered::Unavailable(why) => panic!("no window: {why}"),
        }
    }

    /// (seconds, questions at the start) of every window, shortest first.
    fn spans(w: &StatusWindow) -> Vec<(f64, String)> {
        std::iter::once((w.seconds, w.start["questions"].clone()))
            .chain(
                w.longer
                    .iter()
                    .map(|l| (l.seconds, l.start["questions"].clone())),
            )
            .collect()
    }

    #[test]
    fn the_windows_double_up_to_the_longest() {
        let t = StatusTracker::new(Duration::from_secs(60), Duration::from_secs(3600));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(matches!(
            t.record(t0, &st(0), &vars("1")),
            Gathered::Unavailable(why) if why.contains("first sample")
        ));
        for s in (60..=1200).step_by(60) {
            t.record(at(s), &st(s), &vars("1"));
        }
        let w = available(t.record(at(1260), &st(1260), &vars("1")));
        let got: Vec<f64> = spans(&w).iter().map(|x| x.0).collect();
        assert_eq!(got, vec![60.0, 120.0, 240.0, 480.0, 960.0, 1260.0]);
        assert_eq!(spans(&w)[2].1, "1020");
        // After more than an hour, the oldest kept is an hour old.
        for s in (1320..=4000).step_by(60) {
            t.record(at(s), &st(s), &vars("1"));
        }
        let w = available(t.record(at(4020), &st(4020), &vars("1")));
        assert_eq!(spans(&w).last().unwrap().0, 3600.0);
        assert!(w.history.is_none());
    }

    #[test]
    fn an_interval_longer_than_the_window_uses_the_previous_read() {
        let t = StatusTracker::new(Duration::from_secs(60), Duration::from_secs(3600));
        let t0 = Instant::now();
        t.record(t0, &st(0), &vars("1"));
        let w = available(t.record(t0 + Duration::from_secs(500), &st(500), &vars("1")));
        assert_eq!(spans(&w), vec![(500.0, "0".to_owned())]);
    }

    #[test]
    fn a_changed_variable_or_schema_or_a_restart_restarts_the_history() {
        let t = StatusTracker::new(Duration::from_secs(60), Duration::from_secs(3600));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        for s in [0, 60, 120] {
            t.record(at(s), &st(s), &vars("16777216"));
        }
        // The fix: tmp_table_size raised between two samples.
        let g = t.record(at(180), &st(180), &vars("67108864"));
        assert!(
            matches!(&g, Gathered::Unavailable(why) if why.contains("global variables changed (tmp_table_size)")),
            "{g:?}"
        );
        // The next sample judges only the time since the fix, and says why there is no more.
        let w = available(t.record(at(240), &st(240), &vars("67108864")));
        assert_eq!(spans(&w), vec![(60.0, "180".to_owned())]);
        assert!(
            w.history.as_deref().unwrap().contains("tmp_table_size"),
            "{:?}",
            w.history
        );
        // An index added.
        let mut ddl = st(300);
        ddl.insert("com_create_index".into(), "1".into());
        let mut before = st(240);
        before.insert("com_create_index".into(), "0".into());
        t.record(at(270), &before, &vars("67108864"));
        let g = t.record(at(300), &ddl, &vars("67108864"));
        assert!(
            matches!(&g, Gathered::Unavailable(why) if why.contains("schema changed (com_create_index)")),
            "{g:?}"
        );
        // A restart: uptime went down.
        let mut restarted = st(0);
        restarted.insert("uptime".into(), "5".into());
        restarted.insert("com_create_index".into(), "1".into());
        let g = t.record(at(360), &restarted, &vars("67108864"));
        assert!(
            matches!(&g, Gathered::Unavailable(why) if why.contains("restarted")),
            "{g:?}"
        );
    }

    #[test]
    fn a_fast_interval_is_thinned_and_bounded() {
        let t = StatusTracker::new(Duration::from_secs(60), Duration::from_secs(3600));
        let t0 = Instant::now();
        for s in 0..7200u64 {
            t.record(t0 + Duration::from_secs(s), &st(s), &vars("1"));
        }
        let kept = t.history.lock().unwrap().reads.len();
        assert!(kept <= 600, "{kept} reads kept");
        let w = available(t.record(t0 + Duration::from_secs(7200), &st(7200), &vars("1")));
        let s = spans(&w);
        assert!(s[0].0 <= 60.0 && s[0].0 >= 50.0, "{s:?}");
        assert!(
            s.last().unwrap().0 <= 3600.0 && s.last().unwrap().0 > 3500.0,
            "{s:?}"
        );
    }
}
