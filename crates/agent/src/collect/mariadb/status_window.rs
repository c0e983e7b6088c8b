//! The status window: a second read of the status counters so rules judge differences over
//! time, not counters since start-up (`powerdiag_rules::counters`).
//!
//! Doctor reads the status twice, `--sample-window` apart, after its other statements, so
//! nothing powerdiag sends but the second status read itself falls inside the window. The agent
//! reads the status every sample anyway: [`StatusTracker`] keeps the recent reads and pairs
//! the current one with the oldest read no older than `[sample] status_window` (at least the
//! previous sample), so its verdicts describe the last few minutes, not the server's life.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{Gathered, StatusWindow, WindowSource};

/// How the MariaDB collector gets the start of a status window.
#[derive(Debug, Clone, Default)]
pub enum StatusWindowMode {
    /// One read, no window (`doctor --sample-window 0`).
    #[default]
    None,
    /// Doctor: read again after this long.
    Doctor(Duration),
    /// The agent: pair the read with an earlier sample's.
    Agent(StatusTracker),
}

/// Reads kept at most: a window of an hour at a 1 s interval would need more, but then the
/// window's start is simply the oldest read kept.
const MAX_READS: usize = 128;

/// One status read and when it was taken.
type Read = (Instant, BTreeMap<String, String>);

/// The agent's recent status reads.
#[derive(Debug, Clone)]
pub struct StatusTracker {
    /// The longest window the agent judges.
    pub window: Duration,
    reads: Arc<Mutex<VecDeque<Read>>>,
}

impl StatusTracker {
    pub fn new(window: Duration) -> StatusTracker {
        StatusTracker {
            window,
            reads: Default::default(),
        }
    }

    /// The same reads, another window (a reloaded configuration).
    pub fn with_window(&self, window: Duration) -> StatusTracker {
        StatusTracker {
            window,
            reads: self.reads.clone(),
        }
    }

    /// Records `status` read at `now` and returns the window ending with it: from the oldest
    /// kept read at most `window` old (the previous read when even that one is older), or why
    /// there is none yet.
    pub(crate) fn record(
        &self,
        now: Instant,
        status: &BTreeMap<String, String>,
    ) -> Gathered<StatusWindow> {
        let Ok(mut reads) = self.reads.lock() else {
            return Gathered::Unavailable("status window state poisoned".into());
        };
        // Drop reads older than the window, but always keep the newest previous one.
        while reads.len() > 1
            && reads
                .get(1)
                .is_some_and(|(at, _)| now.duration_since(*at) >= self.window)
        {
            reads.pop_front();
        }
        let window = match reads.front() {
            Some((at, start)) => Gathered::Available(StatusWindow {
                seconds: now.duration_since(*at).as_secs_f64(),
                source: WindowSource::Agent,
                start: start.clone(),
            }),
            None => Gathered::Unavailable(
                "the agent's first sample: the status window starts at its next sample".into(),
            ),
        };
        reads.push_back((now, status.clone()));
        while reads.len() > MAX_READS {
            reads.pop_front();
        }
        window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(n: u64) -> BTreeMap<String, String> {
        [("questions".to_owned(), n.to_string())]
            .into_iter()
            .collect()
    }

    #[test]
    fn the_window_spans_the_reads_within_its_length() {
        let t = StatusTracker::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(matches!(t.record(t0, &st(0)), Gathered::Unavailable(_)));
        let at = |s| t0 + Duration::from_secs(s);
        for s in [15, 30, 45] {
            let Gathered::Available(w) = t.record(at(s), &st(s)) else {
                panic!("no window at {s}")
            };
            assert_eq!(w.seconds, 15.0 * (s / 15) as f64);
            assert_eq!(w.start["questions"], "0");
        }
        // At 75 s the read at 0 s is too old: the window starts at 15 s.
        let Gathered::Available(w) = t.record(at(75), &st(75)) else {
            panic!()
        };
        assert_eq!((w.seconds, w.start["questions"].as_str()), (60.0, "15"));
        // An interval longer than the window: the previous read.
        let Gathered::Available(w) = t.record(at(500), &st(500)) else {
            panic!()
        };
        assert_eq!((w.seconds, w.start["questions"].as_str()), (425.0, "75"));
    }
}
