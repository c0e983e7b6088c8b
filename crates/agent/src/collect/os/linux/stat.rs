//! `/proc/stat`: CPU time shares (steal, busy) over the window, or since boot for a tree, and
//! the CPU seconds since boot per mode.

use crate::collect::{collector::Descriptor, os::sections};
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
    const SECTION: &'static Descriptor = &sections::CPU_TIME;
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
    parse(&read(&path)?).map_err(|e| CollectError::procfs(&path, e))
}

/// `/proc/stat` through the procfs crate's `KernelStats` (the aggregate `cpu` line: user nice
/// system idle iowait irq softirq steal [guest guest_nice]). guest time is already inside
/// user, so it is not added again. The ticks stay ticks: the system information given is only
/// what the parser needs, never the live host's (a recorded tree is not this machine).
pub(super) fn parse(text: &str) -> procfs::ProcResult<Ticks> {
    use procfs::FromReadSI;
    let info = procfs::ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: rustix::param::clock_ticks_per_second().max(1),
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    let k = procfs::KernelStats::from_read(text.as_bytes(), &info)?;
    let c = k.total;
    let modes = [
        c.user,
        c.nice,
        c.system,
        c.idle,
        c.iowait.unwrap_or(0),
        c.irq.unwrap_or(0),
        c.softirq.unwrap_or(0),
        c.steal.unwrap_or(0),
    ];
    Ok(Ticks {
        total: modes.iter().fold(0u64, |a, b| a.saturating_add(*b)),
        idle: modes[3].saturating_add(modes[4]),
        steal: modes[7],
        modes,
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

    /// A whole `/proc/stat` around the given cpu lines.
    fn stat(cpu: &str) -> String {
        format!(
            "{cpu}\nintr 0\nctxt 10\nbtime 1700000000\nprocesses 5\nprocs_running 1\nprocs_blocked 0\n"
        )
    }

    #[test]
    fn steal_over_a_window_and_since_boot() {
        let a = parse(&stat("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3 4")).unwrap();
        let b = parse(&stat("cpu  160 0 70 900 10 0 0 60 5 0")).unwrap();
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
        let t = parse(&stat("cpu  160 1 70 900 10 2 3 60 5 0")).unwrap();
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
        let old = parse(&stat("cpu  1 2 3 4")).unwrap();
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
        assert!(parse("").is_err());
        assert!(parse(&stat("cpu  1 2 x 4")).is_err());
        assert!(parse(&stat("cpu  1 2")).is_err());
        // Truncated after the cpu lines (no ctxt/btime/processes): not a whole /proc/stat.
        assert!(parse("cpu  1 2 3 4\n").is_err());
        assert!(parse(&stat(&format!("cpu  {} {} 0 0", u64::MAX, u64::MAX))).is_ok());
    }
}
