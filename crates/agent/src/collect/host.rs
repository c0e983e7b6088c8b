//! Basic host facts: OS, architecture, host name, hardware threads, memory. Read under
//! [`Roots`] like every other OS file, so a recorded tree describes its own machine.

use powerdiag_rules::HostFacts;

use super::{
    CollectError,
    collector::{Descriptor, Requires},
    os::Roots,
};

/// The `host` collector.
pub const COLLECTOR: Descriptor = Descriptor {
    name: "host",
    help: "OS, architecture, host name, kernel, hardware threads usable, memory, base page size",
    default_enabled: true,
    requires: Requires::Nothing,
};

/// Collects what the platform offers; a fact that cannot be read stays `None`. A recorded
/// tree takes nothing from the live host: its name, kernel, release and architecture come
/// from the tree or stay unknown.
pub fn collect(roots: &Roots) -> Result<HostFacts, CollectError> {
    let live = roots.is_live();
    let mut h = HostFacts {
        os: std::env::consts::OS.to_owned(),
        arch: if live {
            super::os::live_architecture()
        } else {
            "unknown".into()
        },
        usable_threads: if live { usable_threads() } else { None },
        ..Default::default()
    };
    #[cfg(unix)]
    if live {
        let uname = rustix::system::uname();
        h.hostname = uname.nodename().to_string_lossy().into_owned();
        h.kernel = Some(uname.release().to_string_lossy().into_owned());
        h.page_size_bytes = Some(rustix::param::page_size() as u64);
    }
    #[cfg(target_os = "linux")]
    linux::fill(&mut h, roots);
    if h.hostname.is_empty() {
        return Err(CollectError::Unreadable {
            what: "the host name".into(),
        });
    }
    Ok(h)
}

/// The threads this process may use: its CPU affinity and cgroup CPU quota.
fn available_parallelism() -> Option<u32> {
    std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
}

/// [`available_parallelism`], kept like the host's other fixed facts: the standard library
/// reads the cgroup hierarchy for the quota (four files, one of them the mount table).
#[cfg(target_os = "linux")]
fn usable_threads() -> Option<u32> {
    use super::os::linux::kept::{Kept, STATIC_REUSE};
    static USABLE: Kept<(), Option<u32>> = Kept::new();
    USABLE.get((), STATIC_REUSE, available_parallelism)
}

#[cfg(not(target_os = "linux"))]
fn usable_threads() -> Option<u32> {
    available_parallelism()
}

#[cfg(target_os = "linux")]
mod linux {
    use powerdiag_rules::HostFacts;
    use procfs::Meminfo;

    use crate::collect::os::{
        Roots,
        linux::{
            cpu_architecture_of, fs,
            kept::{Kept, STATIC_REUSE},
        },
    };

    pub(super) fn fill(h: &mut HostFacts, r: &Roots) {
        let read = |p: std::path::PathBuf| fs::read_trim(&p).ok();
        if !r.is_live() {
            // A recorded tree: its own name and kernel; the architecture by the one detector.
            h.hostname =
                read(r.proc("sys/kernel/hostname")).unwrap_or_else(|| "recorded-host".into());
            h.kernel = read(r.proc("sys/kernel/osrelease"));
            h.page_size_bytes = r
                .recorded
                .as_deref()
                .and_then(crate::collect::os::recorded::page_size);
            if let Some(ci) = read(r.proc("cpuinfo")) {
                h.arch = cpu_architecture_of(r, &ci);
            }
        }
        if let Ok(m) = fs::parse_procfs::<Meminfo>(&r.proc("meminfo")) {
            h.memory_total_bytes = Some(m.mem_total);
            h.memory_available_bytes = m.mem_available;
        }
        h.hardware_threads =
            read(r.sys("devices/system/cpu/online")).and_then(|s| count_cpu_list(&s));
        let os_release = || read(r.root("/etc/os-release")).and_then(|t| pretty_name(&t));
        h.os_release = if r.is_live() {
            // An upgrade rewrites it without a reboot: kept, not for the process's life.
            static OS_RELEASE: Kept<(), Option<String>> = Kept::new();
            OS_RELEASE.get((), STATIC_REUSE, os_release)
        } else {
            os_release()
        };
    }

    /// `0-3,8,10-11` → 7.
    pub(super) fn count_cpu_list(s: &str) -> Option<u32> {
        let mut n: u32 = 0;
        for part in s.trim().split(',').filter(|p| !p.is_empty()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
                None => {
                    let a = part.trim().parse::<u32>().ok()?;
                    (a, a)
                }
            };
            n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
        }
        (n > 0).then_some(n)
    }

    pub(super) fn pretty_name(os_release: &str) -> Option<String> {
        os_release.lines().find_map(|l| {
            let v = l.strip_prefix("PRETTY_NAME=")?;
            Some(v.trim().trim_matches('"').to_owned())
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn cpu_lists() {
            assert_eq!(count_cpu_list("0-1\n"), Some(2));
            assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
            assert_eq!(count_cpu_list("3-1"), None);
            assert_eq!(count_cpu_list("x"), None);
            assert_eq!(count_cpu_list(""), None);
        }

        #[test]
        fn os_release() {
            let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
            assert_eq!(
                pretty_name(t).as_deref(),
                Some("Debian GNU/Linux 12 (bookworm)")
            );
        }
    }
}
