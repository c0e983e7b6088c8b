//! The mariadbd process: found from the server's pid file, else by name; its memory, page
//! sizes, allocator, affinity and threads.

use std::collections::BTreeSet;

use powerdiag_rules::{Allocator, ProcessFacts};
use procfs::process::{MMapPath, Process};

use super::fs::{format_cpu_list, read, read_trim};
use crate::collect::os::Roots;

/// Process names of a MariaDB (or MySQL) server.
const NAMES: [&str; 2] = ["mariadbd", "mysqld"];

/// Finds mariadbd: the pid in `pid_file` (read under rootfs), else the one process named
/// mariadbd/mysqld (by comm, or by argv[0] when it runs through a loader or wrapper).
pub(super) fn find(r: &Roots, pid_file: Option<&str>) -> Result<(u32, String), String> {
    if let Some(pf) = pid_file.filter(|p| !p.is_empty()) {
        let path = r.root(pf);
        match read_trim(&path).map(|s| s.parse::<u32>()) {
            Ok(Ok(pid)) if r.proc(pid.to_string()).is_dir() => return Ok((pid, "pid_file".into())),
            Ok(Ok(pid)) => {
                return Err(format!(
                    "the server's pid file {} names pid {pid}, which is not running",
                    path.display()
                ));
            }
            Ok(Err(_)) => return Err(format!("{}: not a pid", path.display())),
            Err(_) => {} // not readable (permissions, another mount namespace): fall back to names
        }
    }
    let mut found = Vec::new();
    let entries =
        std::fs::read_dir(&r.procfs).map_err(|e| format!("{}: {e}", r.procfs.display()))?;
    for e in entries.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = read_trim(&e.path().join("comm")).unwrap_or_default();
        if NAMES.contains(&comm.as_str()) || server_in_cmdline(&e.path().join("cmdline")).is_some()
        {
            found.push(pid);
        }
    }
    found.sort_unstable();
    match found.as_slice() {
        [] => Err("no mariadbd or mysqld process on this host".into()),
        [pid] => Ok((*pid, "process name".into())),
        many => Err(format!(
            "{} mariadbd processes ({}); connect powerdiag to the server to pick one by its pid_file",
            many.len(),
            many.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The server's name when argv[0], or an argument right after a loader, is a mariadbd/mysqld
/// binary (`/lib64/ld-linux-x86-64.so.2 --argv0 /usr/sbin/mariadbd ...`).
fn server_in_cmdline(path: &std::path::Path) -> Option<String> {
    let cmdline = read(path).ok()?;
    let mut args = cmdline.split('\0');
    let argv0 = args.next()?;
    let base = |a: &str| a.rsplit('/').next().unwrap_or_default().to_owned();
    if NAMES.contains(&base(argv0).as_str()) {
        return Some(base(argv0));
    }
    if base(argv0).starts_with("ld-") {
        return args.take(6).map(base).find(|b| NAMES.contains(&b.as_str()));
    }
    None
}

pub(super) fn collect(r: &Roots, pid: u32, found_by: &str) -> Result<ProcessFacts, String> {
    let dir = r.proc(pid.to_string());
    let p = Process::new_with_root(dir.clone()).map_err(|e| format!("{}: {e}", dir.display()))?;
    let status = p
        .status()
        .map_err(|e| format!("{}/status: {e}", dir.display()))?;
    let mut f = ProcessFacts {
        pid,
        name: status.name.clone(),
        found_by: found_by.to_owned(),
        rss_bytes: status.vmrss.map(|kb| kb.saturating_mul(1024)),
        threads: u32::try_from(status.threads).ok(),
        ..Default::default()
    };
    if let Some(ranges) = &status.cpus_allowed_list {
        let cpus: Vec<u32> = ranges
            .iter()
            .flat_map(|(a, b)| *a..=(*b).min(a.saturating_add(65_536)))
            .collect();
        f.affinity_cpus = Some(cpus.len() as u32);
        f.affinity = Some(format_cpu_list(&cpus));
    }
    // procfs's Status has no THP_enabled (kernel 5.0+): read the line itself.
    f.thp_disabled = read(&dir.join("status")).ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim() == "0"))
    });
    // A server run through a dynamic loader (`ld.so --argv0 .../mariadbd ...`) reports the
    // loader as its name.
    if !NAMES.contains(&f.name.as_str())
        && let Some(name) = server_in_cmdline(&dir.join("cmdline"))
    {
        f.name = name;
    }

    // Page sizes and huge pages from smaps (every mapping).
    if let Ok(maps) = p.smaps() {
        let mut kernel = BTreeSet::new();
        let mut mmu = BTreeSet::new();
        let mut anon_huge: u64 = 0;
        for m in maps.iter() {
            let x = &m.extension.map;
            if let Some(v) = x.get("KernelPageSize") {
                kernel.insert(*v);
            }
            if let Some(v) = x.get("MMUPageSize") {
                mmu.insert(*v);
            }
            anon_huge = anon_huge.saturating_add(x.get("AnonHugePages").copied().unwrap_or(0));
        }
        f.kernel_page_sizes = kernel.into_iter().collect();
        f.mmu_page_sizes = mmu.into_iter().collect();
        f.anon_huge_bytes = Some(anon_huge);
    }
    // smaps_rollup is exact and cheap where the kernel has it.
    if let Ok(r) = p.smaps_rollup()
        && let Some(m) = r.memory_map_rollup.iter().next()
        && let Some(a) = m.extension.map.get("AnonHugePages")
    {
        f.anon_huge_bytes = Some(*a);
    }

    // Allocator from the mapped libraries.
    if let Ok(maps) = p.maps() {
        let libs: BTreeSet<String> = maps
            .iter()
            .filter_map(|m| match &m.pathname {
                MMapPath::Path(p) => p.file_name().and_then(|n| n.to_str()).map(str::to_owned),
                _ => None,
            })
            .collect();
        let find = |needle: &str| libs.iter().find(|l| l.starts_with(needle)).cloned();
        let (alloc, lib) = if let Some(l) = find("libjemalloc") {
            (Allocator::Jemalloc, l)
        } else if let Some(l) = find("libtcmalloc") {
            (Allocator::Tcmalloc, l)
        } else if let Some(l) = find("libmimalloc") {
            (Allocator::Mimalloc, l)
        } else {
            (
                Allocator::Libc,
                "no jemalloc, tcmalloc or mimalloc library mapped".to_owned(),
            )
        };
        f.allocator = Some(alloc);
        f.allocator_evidence = Some(lib);
    }
    Ok(f)
}
