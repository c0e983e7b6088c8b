//! Basic host facts: OS, architecture, host name, hardware threads, memory.

use powerdiag_rules::HostFacts;

/// Collects what the platform offers; a fact that cannot be read stays `None`.
pub fn collect() -> Result<HostFacts, String> {
    let mut h = HostFacts {
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        usable_threads: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
        ..Default::default()
    };
    #[cfg(unix)]
    {
        let uname = rustix::system::uname();
        h.hostname = uname.nodename().to_string_lossy().into_owned();
        h.kernel = Some(uname.release().to_string_lossy().into_owned());
        h.page_size_bytes = Some(rustix::param::page_size() as u64);
    }
    #[cfg(target_os = "linux")]
    linux::fill(&mut h);
    if h.hostname.is_empty() {
        return Err("the host name could not be read".into());
    }
    Ok(h)
}

#[cfg(target_os = "linux")]
mod linux {
    use powerdiag_rules::HostFacts;
    use procfs::Current;

    pub(super) fn fill(h: &mut HostFacts) {
        if let Ok(m) = procfs::Meminfo::current() {
            h.memory_total_bytes = Some(m.mem_total);
            h.memory_available_bytes = m.mem_available;
        }
        h.hardware_threads = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| count_cpu_list(&s))
            .or_else(|| {
                procfs::CpuInfo::current()
                    .ok()
                    .map(|c| c.num_cores() as u32)
            });
        h.os_release = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| pretty_name(&t));
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
