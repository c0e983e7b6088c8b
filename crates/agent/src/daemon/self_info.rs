//! The agent about itself: its build (`powerdiag_build_info`) and its own process
//! (`process_*`, as client_golang and node_exporter export them), read once per sample so a
//! scrape still only serves the sample.

/// What `powerdiag_build_info` says; the binary fills it from its build script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: String,
    /// Short git revision, or `unknown` outside a checkout.
    pub revision: String,
    /// Target triple.
    pub target: String,
    /// `rustc` version, e.g. `1.95.0`.
    pub rustc: String,
}

impl Default for BuildInfo {
    /// The library's version; the rest unknown.
    fn default() -> Self {
        let unknown = || "unknown".to_owned();
        BuildInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            revision: unknown(),
            target: unknown(),
            rustc: unknown(),
        }
    }
}

/// The agent's own process. Each field is `None` where it could not be read; on other OSes
/// than Linux every field is `None` and no `process_*` series is exported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub resident_memory_bytes: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// This process now: `/proc/self/{stat,limits,fd}` and the boot time from `/proc/stat`
    /// (the real `/proc`, not `--path.procfs`: it is the agent's own process).
    #[cfg(target_os = "linux")]
    pub fn read() -> ProcessStats {
        use procfs::process::{LimitValue, Process};
        let Ok(me) = Process::myself() else {
            return ProcessStats::default();
        };
        let ticks = procfs::ticks_per_second() as f64;
        let stat = me.stat().ok();
        let max_fds = me.limits().ok().map(|l| match l.max_open_files.soft_limit {
            LimitValue::Value(v) => v,
            LimitValue::Unlimited => u64::MAX,
        });
        let boot = procfs::boot_time_secs().ok();
        ProcessStats {
            cpu_seconds: stat
                .as_ref()
                .filter(|_| ticks > 0.0)
                .map(|s| s.utime.saturating_add(s.stime) as f64 / ticks),
            open_fds: me.fd_count().ok().map(|n| n as u64),
            max_fds,
            virtual_memory_bytes: stat.as_ref().map(|s| s.vsize),
            resident_memory_bytes: stat
                .as_ref()
                .map(|s| s.rss.saturating_mul(procfs::page_size())),
            start_time_seconds: match (&stat, boot) {
                (Some(s), Some(b)) if ticks > 0.0 => Some(b as f64 + s.starttime as f64 / ticks),
                _ => None,
            },
        }
    }

    /// Not exported here (client_golang exports them on Linux and Windows only).
    #[cfg(not(target_os = "linux"))]
    pub fn read() -> ProcessStats {
        ProcessStats::default()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let p = ProcessStats::read();
        assert!(p.resident_memory_bytes.unwrap() > 1 << 20, "{p:?}");
        assert!(p.virtual_memory_bytes.unwrap() >= p.resident_memory_bytes.unwrap());
        assert!(p.open_fds.unwrap() >= 3 && p.open_fds <= p.max_fds, "{p:?}");
        assert!(p.cpu_seconds.unwrap() >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = p.start_time_seconds.unwrap();
        // Started within the last day, not in the future (boot time is whole seconds).
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
    }
}
