//! What a verdict was judged over: a window of status reads, or counters since start-up or
//! boot. Shared by `counters` (which measures) and `rule` (whose `Verdict` carries it), so
//! neither imports the other.

use serde::{Deserialize, Serialize};

use crate::format_secs;

/// Who took the status reads of a [`StatusWindow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// `powerdiag doctor`/`collect`: the two ends of its `--sample-window`.
    Doctor,
    /// `powerdiag agent`: its read now and earlier samples' reads.
    Agent,
}

/// What a rule's counts cover.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis {
    /// The difference between two reads `seconds` apart.
    Window { seconds: f64, source: WindowSource },
    /// The counters as they are: since start-up, `uptime` seconds.
    SinceStartup { uptime: u64 },
    /// OS counters since the host booted (doctor, when its window could not decide).
    SinceBoot,
}

impl Basis {
    /// "the last 5 min" or "since start-up", for a summary.
    pub fn short(&self) -> String {
        match *self {
            Basis::Window { seconds, .. } => format!("over the last {}", format_span(seconds)),
            Basis::SinceStartup { uptime } => {
                format!("since start-up {} ago", format_secs(uptime))
            }
            Basis::SinceBoot => "since boot".to_owned(),
        }
    }
}

pub(crate) fn format_span(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s")
    } else {
        format_secs(seconds.round() as u64)
    }
}
