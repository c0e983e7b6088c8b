//! `/proc/stat`: CPU time shares (steal, busy) over the window, or since boot for a tree, and
//! the CPU seconds since boot per mode.

use powerdiag_rules::{CpuSeconds, CpuTime, Gathered, OsFacts};

use super::fs::read;
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `cpu_time` section: steal and busy shares over the window (since boot without one).
pub(super) struct CpuTimes;

impl Collector for CpuTimes {
    const NAME: &'static str = "cpu_time";
    type Baseline = Ticks;
    type Output = CpuTime;

    fn begin(&self, ctx: &Ctx) -> Option<Ticks> {
        read_ticks(ctx.roots).ok()
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Ticks>,
        _: &OsFacts,
    ) -> Result<CpuTime, CollectError> {
        read_ticks(ctx.roots).map(|now| shares(baseline, now, ctx.window.as_secs_f64()))
    }

    fn store(facts: &mut OsFacts, section: Gathered<CpuTime>) {
        facts.cpu_time = section;
    }
}

/// Aggregate CPU ticks from the `cpu` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Ticks {
    total: u64,
    idle: u64,
    steal: u64,
    /// user nice system idle iowait irq softirq steal, as read.
    modes: [u64; 8],
}

pub(super) fn read_ticks(r: &Roots) -> Result<Ticks, CollectError> {
    let path = r.proc("stat");
    parse(&read(&path)?)
        .ok_or_else(|| CollectError::parse(&path, "no well-formed aggregate `cpu` line"))
}

/// Parses the first `cpu ` line: user nice system idle iowait irq softirq steal [guest guest_nice].
/// guest time is already inside user, so it is not added again.
pub(super) fn parse(text: &str) -> Option<Ticks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    let total = v.iter().take(8).fold(0u64, |a, b| a.saturating_add(*b));
    Some(Ticks {
        total,
        idle: get(3).saturating_add(get(4)),
        steal: get(7),
        modes: std::array::from_fn(get),
    })
}

/// The since-boot ticks in seconds. `/proc/stat` counts in USER_HZ, which the kernel reports
/// to user space as the clock tick (`sysconf(_SC_CLK_TCK)`); a recorded tree is assumed to come
/// from a kernel with the same USER_HZ (100 on every architecture Linux still supports).
fn seconds(t: &Ticks, user_hz: u64) -> Option<CpuSeconds> {
    if user_hz == 0 {
        return None;
    }
    let s = |i: usize| t.modes[i] as f64 / user_hz as f64;
    Some(CpuSeconds {
        user: s(0),
        nice: s(1),
        system: s(2),
        idle: s(3),
        iowait: s(4),
        irq: s(5),
        softirq: s(6),
        steal: s(7),
    })
}

pub(super) fn shares(a: Option<Ticks>, b: Ticks, window_secs: f64) -> CpuTime {
    let since_boot_seconds = seconds(&b, rustix::param::clock_ticks_per_second());
    let since_boot_steal_share = (b.total > 0).then(|| b.steal as f64 / b.total as f64);
    let (basis, d) = match a {
        Some(a) if b.total > a.total => (
            format!("window {window_secs:.2} s"),
            Ticks {
                total: b.total - a.total,
                idle: b.idle.saturating_sub(a.idle),
                steal: b.steal.saturating_sub(a.steal),
                modes: b.modes,
            },
        ),
        _ => ("since boot".to_owned(), b),
    };
    if d.total == 0 {
        return CpuTime {
            basis,
            steal_share: None,
            busy_share: None,
            ticks: Some(0),
            since_boot_steal_share,
            since_boot_seconds,
        };
    }
    let t = d.total as f64;
    CpuTime {
        basis,
        steal_share: Some(d.steal as f64 / t),
        busy_share: Some(1.0 - (d.idle.saturating_add(d.steal)) as f64 / t),
        ticks: Some(d.total),
        since_boot_steal_share,
        since_boot_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_over_a_window_and_since_boot() {
        let a = parse("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3 4\n").unwrap();
        let b = parse("cpu  160 0 70 900 10 0 0 60 5 0\n").unwrap();
        let w = shares(Some(a), b, 1.0);
        assert_eq!(w.basis, "window 1.00 s");
        assert!((w.steal_share.unwrap() - 20.0 / 200.0).abs() < 1e-9);
        let boot = shares(None, b, 0.0);
        assert_eq!(boot.basis, "since boot");
        assert!((boot.steal_share.unwrap() - 60.0 / 1200.0).abs() < 1e-9);
        // No time passed: fall back to since boot.
        assert_eq!(shares(Some(b), b, 0.1).basis, "since boot");
    }

    #[test]
    fn seconds_since_boot_per_mode() {
        let t = parse("cpu  160 1 70 900 10 2 3 60 5 0\n").unwrap();
        let s = seconds(&t, 100).unwrap();
        assert_eq!(
            s.modes(),
            [
                ("user", 1.6),
                ("nice", 0.01),
                ("system", 0.7),
                ("idle", 9.0),
                ("iowait", 0.1),
                ("irq", 0.02),
                ("softirq", 0.03),
                ("steal", 0.6)
            ]
        );
        // An old kernel's line without steal: 0 s.
        let old = parse("cpu  1 2 3 4\n").unwrap();
        assert_eq!(seconds(&old, 100).unwrap().steal, 0.0);
        assert_eq!(seconds(&old, 0), None);
        // Every sample carries them, window or not.
        let w = shares(Some(old), t, 1.0);
        assert_eq!(
            w.since_boot_seconds,
            seconds(&t, rustix::param::clock_ticks_per_second())
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("cpu  1 2 x 4"), None);
        assert_eq!(parse("cpu  1 2"), None);
        assert!(parse(&format!("cpu  {} {} 0 0", u64::MAX, u64::MAX)).is_some());
    }
}
