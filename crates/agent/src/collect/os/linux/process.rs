//! The mariadbd process: found from the server's pid file, else by name; its memory, page
//! sizes, allocator, affinity and threads.

use crate::collect::{collector::Descriptor, os::sections};
use std::{
    collections::BTreeSet,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use powerdiag_rules::{Allocator, Gathered, OsFacts, ProcessFacts};
use procfs::{FromRead, process::Status};

use super::fs::{
    MAX_FILE, MAX_STREAM, format_cpu_list, open, parse_procfs, read, read_bytes, read_trim,
};
use crate::collect::{
    CollectError,
    os::{
        Roots,
        find::NAMES,
        registry::{Collector, Ctx},
    },
};

/// The `process` section: mariadbd, found once by the registry (`os::find`).
pub(super) struct Process;

impl Collector for Process {
    const SECTION: &'static Descriptor = &sections::PROCESS;
    type Baseline = ();
    type Output = ProcessFacts;

    fn collect(&self, ctx: &Ctx, _: Option<()>, _: &OsFacts) -> Result<ProcessFacts, CollectError> {
        let found = ctx.process.as_ref().map_err(Clone::clone)?;
        collect(ctx.roots, found.pid, found.by)
    }

    fn store(facts: &mut OsFacts, section: Gathered<ProcessFacts>) {
        facts.process = section;
    }
}

/// The pids of the processes named mariadbd/mysqld (by comm, or by argv[0] when the server
/// runs through a loader or wrapper), for `os::find`.
pub(super) fn by_name(r: &Roots) -> Result<Vec<u32>, CollectError> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(&r.procfs).map_err(|e| CollectError::io(&r.procfs, &e))?;
    for e in entries.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = read_trim(&e.path().join("comm")).unwrap_or_default();
        let cmdline = read(&e.path().join("cmdline")).unwrap_or_default();
        if server_name(&comm, &cmdline).is_some() {
            found.push(pid);
        }
    }
    Ok(found)
}

/// The first `n` lines of a reader (the head of a recorded smaps).
trait TakeLines: std::io::BufRead + Sized {
    fn take_lines(self, n: usize) -> std::io::Cursor<String> {
        let head: Vec<String> = self.lines().map_while(Result::ok).take(n).collect();
        std::io::Cursor::new(head.join("\n"))
    }
}
impl<R: std::io::BufRead> TakeLines for R {}

/// What one pass over `/proc/PID/smaps` (or `smaps_rollup`, or `maps`) yields.
#[derive(Debug, Default, PartialEq)]
pub(super) struct SmapsScan {
    pub(super) kernel_page_sizes: BTreeSet<u64>,
    pub(super) mmu_page_sizes: BTreeSet<u64>,
    pub(super) anon_huge_bytes: u64,
    /// `Shared_Hugetlb` + `Private_Hugetlb`.
    pub(super) hugetlb_bytes: u64,
    /// File names of the mapped files (`libc.so.6`, `libjemalloc.so.2`, ...).
    pub(super) libraries: BTreeSet<String>,
}

/// Reads smaps-format text line by line: mapping headers (`addr perms offset dev inode [path]`)
/// and `Key: value kB` lines. Hand-written because procfs's MemoryMaps allocates a map per
/// mapping and a large server has thousands.
pub(super) fn scan_smaps(r: impl std::io::BufRead) -> SmapsScan {
    let mut out = SmapsScan::default();
    for line in r.lines().map_while(Result::ok) {
        if let Some((key, rest)) = line.split_once(':')
            && !key.contains(' ')
            && !key.contains('-')
        {
            let kb = || {
                rest.split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .map(|v| v.saturating_mul(1024))
            };
            match key {
                "KernelPageSize" => out.kernel_page_sizes.extend(kb()),
                "MMUPageSize" => out.mmu_page_sizes.extend(kb()),
                "AnonHugePages" => {
                    out.anon_huge_bytes = out.anon_huge_bytes.saturating_add(kb().unwrap_or(0))
                }
                "Shared_Hugetlb" | "Private_Hugetlb" => {
                    out.hugetlb_bytes = out.hugetlb_bytes.saturating_add(kb().unwrap_or(0))
                }
                _ => {}
            }
            continue;
        }
        // A mapping header: the sixth field, when present, is the path.
        if let Some(path) = line.split_whitespace().nth(5)
            && path.starts_with('/')
            && let Some(name) = path.rsplit('/').next()
        {
            out.libraries.insert(name.to_owned());
        }
    }
    out
}

/// Whether a process (its `comm` and NUL-separated `cmdline`) is a MariaDB server, and its
/// name: comm is mariadbd/mysqld, or argv[0] is, or an argument right after a dynamic loader is
/// (`/lib64/ld-linux-x86-64.so.2 --argv0 /usr/sbin/mariadbd ...`). A script named mariadbd is
/// not a server: the kernel sets comm to the script's name but argv to `INTERPRETER [ARG]
/// SCRIPT ...`, so a comm match whose argv[1] or argv[2] is the script itself is a wrapper
/// (`/bin/sh /opt/wrap/mariadbd --datadir=...`), whatever it later runs.
fn server_name(comm: &str, cmdline: &str) -> Option<String> {
    let base = |a: &str| a.rsplit('/').next().unwrap_or_default().to_owned();
    let mut args = cmdline.split('\0');
    let argv0 = args.next().unwrap_or_default();
    if NAMES.contains(&base(argv0).as_str()) {
        return Some(base(argv0));
    }
    if base(argv0).starts_with("ld-") {
        return args.take(6).map(base).find(|b| NAMES.contains(&b.as_str()));
    }
    if !NAMES.contains(&comm) {
        return None;
    }
    // comm matches but argv[0] does not: a script (its interpreter in argv[0], the script's
    // path one or two arguments later), or a server whose argv[0] was set (`exec -a`).
    let script = cmdline
        .split('\0')
        .skip(1)
        .take(2)
        .any(|a| (a.contains('/') && base(a) == comm) || a == comm);
    (!script).then(|| comm.to_owned())
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

/// The allocator mariadbd maps, with the library that says so.
fn read_allocator(dir: &std::path::Path) -> Option<(Allocator, String)> {
    let file = open(&dir.join("maps"), MAX_STREAM).ok()?;
    let m = scan_smaps(std::io::BufReader::new(file));
    let find = |needle: &str| m.libraries.iter().find(|l| l.starts_with(needle)).cloned();
    Some(if let Some(l) = find("libjemalloc") {
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
    })
}

/// How long the live mariadbd's huge-page use from `smaps_rollup` is reused: reading it makes
/// the kernel walk mariadbd's page tables under its memory-map lock (7.6 ms for a 400 MB
/// mariadbd on the test VM, growing with the buffer pool), while THP use moves slowly.
const SMAPS_REUSE: Duration = Duration::from_secs(300);

/// The live process a kept reading belongs to: a pid and its start time (a new process that
/// reuses the pid is another process).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Live {
    pid: u32,
    started: Option<u64>,
}

#[derive(Debug)]
struct KeptProcess {
    of: Live,
    /// When smaps_rollup was read, and its `AnonHugePages` and HugeTLB bytes.
    huge: Option<(Instant, (u64, u64))>,
    allocator: Option<(Allocator, String)>,
}

static KEPT: Mutex<Option<KeptProcess>> = Mutex::new(None);

/// `f` of what is kept for this live process (`None`: not live, or nothing kept for it).
fn kept<T>(live: Option<&Live>, f: impl FnOnce(&KeptProcess) -> T) -> Option<T> {
    let live = live.filter(|l| l.started.is_some())?;
    let guard = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref().filter(|k| &k.of == live).map(f)
}

/// Updates what is kept for this live process (starting afresh for another one).
fn keep(live: Option<&Live>, f: impl FnOnce(&mut KeptProcess)) {
    let Some(live) = live.filter(|l| l.started.is_some()) else {
        return;
    };
    let mut guard = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.as_ref().is_none_or(|k| &k.of != live) {
        *guard = Some(KeptProcess {
            of: live.clone(),
            huge: None,
            allocator: None,
        });
    }
    if let Some(k) = guard.as_mut() {
        f(k);
    }
}

/// A process's start time (`/proc/PID/stat` `starttime`, in clock ticks since boot).
pub(super) fn process_start(r: &Roots, pid: u32) -> Option<u64> {
    parse_procfs::<procfs::process::Stat>(&r.proc(format!("{pid}/stat")))
        .ok()
        .map(|s| s.starttime)
}

pub(super) fn collect(r: &Roots, pid: u32, found_by: &str) -> Result<ProcessFacts, CollectError> {
    let dir = r.proc(pid.to_string());
    let status_path = dir.join("status");
    let status_bytes = read_bytes(&status_path, MAX_FILE)?;
    let status = Status::from_read(status_bytes.as_slice())
        .map_err(|e| CollectError::procfs(&status_path, e))?;
    let mut f = ProcessFacts {
        pid,
        name: status.name.clone(),
        found_by: found_by.to_owned(),
        rss_bytes: status.vmrss.map(|kb| kb.saturating_mul(1024)),
        threads: u32::try_from(status.threads).ok(),
        swap_bytes: status.vmswap.map(|kb| kb.saturating_mul(1024)),
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
    f.thp_disabled = std::str::from_utf8(&status_bytes).ok().and_then(|t| {
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

    // Huge pages. smaps and smaps_rollup make the kernel walk the process's page tables
    // (7.6 ms for a 400 MB mariadbd on this VM, growing with its size), so ask the free
    // system-wide counters first: no huge pages anywhere means none in mariadbd either.
    let system = parse_procfs::<procfs::Meminfo>(&r.proc("meminfo")).ok();
    let hugetlb_used = system
        .as_ref()
        .and_then(|m| Some(m.hugepages_total?.saturating_sub(m.hugepages_free?)))
        .unwrap_or(1);
    let thp_in_use = system.as_ref().and_then(|m| m.anon_hugepages).unwrap_or(1);
    let live = r.is_live().then(|| Live {
        pid,
        started: process_start(r, pid),
    });
    let mut hugetlb_bytes = 0;
    if thp_in_use == 0 && hugetlb_used == 0 {
        f.anon_huge_bytes = Some(0);
    } else if let Some((anon, hugetlb)) = kept(live.as_ref(), |k| k.huge)
        .flatten()
        .filter(|(at, _)| at.elapsed() < SMAPS_REUSE)
        .map(|(_, h)| h)
    {
        f.anon_huge_bytes = Some(anon);
        hugetlb_bytes = hugetlb;
    } else if let Ok(file) = open(&dir.join("smaps_rollup"), MAX_STREAM) {
        let m = scan_smaps(std::io::BufReader::new(file));
        f.anon_huge_bytes = Some(m.anon_huge_bytes);
        hugetlb_bytes = m.hugetlb_bytes;
        keep(live.as_ref(), |k| {
            k.huge = Some((Instant::now(), (m.anon_huge_bytes, m.hugetlb_bytes)));
        });
    }
    // Page sizes: the base page (live: the kernel's; a tree: the first mapping's in smaps),
    // plus the HugeTLB size when mariadbd holds HugeTLB pages.
    let base = if r.is_live() {
        Some(rustix::param::page_size() as u64)
    } else {
        open(&dir.join("smaps"), MAX_STREAM).ok().and_then(|file| {
            scan_smaps(std::io::BufReader::new(file).take_lines(64))
                .kernel_page_sizes
                .first()
                .copied()
        })
    };
    f.kernel_page_sizes = base.into_iter().collect();
    if hugetlb_bytes > 0
        && let Some(h) = system.as_ref().and_then(|m| m.hugepagesize)
    {
        f.kernel_page_sizes.push(h);
    }
    f.mmu_page_sizes = f.kernel_page_sizes.clone();

    // The allocator from the mapped libraries (maps costs no page walk); it is linked or
    // preloaded at start, so the live process's is read once.
    let allocator = match kept(live.as_ref(), |k| k.allocator.clone()).flatten() {
        Some(a) => Some(a),
        None => {
            let a = read_allocator(&dir);
            if let Some(a) = &a {
                keep(live.as_ref(), |k| k.allocator = Some(a.clone()));
            }
            a
        }
    };
    if let Some((alloc, evidence)) = allocator {
        f.allocator = Some(alloc);
        f.allocator_evidence = Some(evidence);
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is kept belongs to one process run: a new start time (the pid reused) or
    /// another pid starts afresh; a tree (no start time) keeps nothing.
    #[test]
    fn kept_readings_belong_to_one_process_run() {
        let run = |pid, started| Live {
            pid,
            started: Some(started),
        };
        let a = run(4_000_000_001, 123);
        keep(Some(&a), |k| {
            k.allocator = Some((Allocator::Jemalloc, "libjemalloc.so.2".into()))
        });
        assert_eq!(
            kept(Some(&a), |k| k.allocator.clone())
                .flatten()
                .map(|x| x.0),
            Some(Allocator::Jemalloc)
        );
        // Kept from the allocator's read alone: no huge-page reading to reuse yet.
        assert_eq!(kept(Some(&a), |k| k.huge.is_none()), Some(true));
        assert!(kept(Some(&run(4_000_000_001, 456)), |_| ()).is_none());
        assert!(kept(Some(&run(4_000_000_002, 123)), |_| ()).is_none());
        let tree = Live {
            pid: 4_000_000_001,
            started: None,
        };
        assert!(kept(Some(&tree), |_| ()).is_none());
        assert!(kept(None, |_| ()).is_none());
    }

    #[test]
    fn start_time_after_a_command_with_spaces() {
        let d = tempfile::tempdir().unwrap();
        crate::collect::os::linux::tests::write(
            d.path(),
            "proc/9/stat",
            "9 (my (odd) d) R 1 9 1782 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 87654 3133440 358 18446744073709551615 94621979529216 94621979549097 140728977608976 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94621979565104 94621979566720 94622477692928 140728977611457 140728977611477 140728977611477 140728977612779 0\n",
        );
        assert_eq!(process_start(&Roots::tree(d.path()), 9), Some(87654));
    }

    const SMAPS: &str = "\
55d0c0000000-55d0c1000000 r-xp 00000000 fd:01 1234                       /usr/sbin/mariadbd
Size:              16384 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
AnonHugePages:         0 kB
VmFlags: rd ex mr mw me
7f0000000000-7f0080000000 rw-p 00000000 00:00 0
Size:            2097152 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
AnonHugePages:   1048576 kB
THPeligible:    1
7f1000000000-7f1000200000 r-xp 00000000 fd:01 99   /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
KernelPageSize:       64 kB
MMUPageSize:          64 kB
7f2000000000-7f2000001000 rw-p 00000000 00:00 0                          [stack]
KernelPageSize:        4 kB
";

    #[test]
    fn a_script_named_mariadbd_is_not_a_server() {
        // The server itself, by comm, by argv[0], or run through the dynamic loader.
        assert_eq!(
            server_name("mariadbd", "/usr/sbin/mariadbd\0--user=mysql\0").as_deref(),
            Some("mariadbd")
        );
        assert_eq!(
            server_name(
                "ld-linux-x86-64",
                "/lib64/ld-linux-x86-64.so.2\0--argv0\0/opt/m/usr/sbin/mariadbd\0--datadir=/d\0"
            )
            .as_deref(),
            Some("mariadbd")
        );
        assert_eq!(
            server_name("mysqld", "/usr/libexec/mysqld\0--basedir=/usr\0").as_deref(),
            Some("mysqld")
        );
        // argv[0] rewritten (`exec -a mdb /usr/sbin/mariadbd`): comm still names the binary.
        assert_eq!(
            server_name("mariadbd", "mdb\0--datadir=/d\0").as_deref(),
            Some("mariadbd")
        );
        // A kernel thread or a zombie has an empty cmdline: comm decides.
        assert_eq!(server_name("mariadbd", "").as_deref(), Some("mariadbd"));
        // Wrapper scripts named mariadbd: the kernel sets comm to the script's name, argv to
        // the interpreter, its optional argument, then the script.
        for cmdline in [
            "/bin/sh\0/opt/wrap/mariadbd\0--datadir=/d\0",
            "/usr/bin/bash\0-e\0/opt/wrap/mariadbd\0--datadir=/d\0",
            "/bin/sh\0./mariadbd\0",
            "/usr/bin/env\0mariadbd\0",
        ] {
            assert_eq!(server_name("mariadbd", cmdline), None, "{cmdline:?}");
        }
        // Other processes, including a client naming the server in an argument.
        assert_eq!(server_name("bash", "/bin/bash\0").as_deref(), None);
        assert_eq!(
            server_name("less", "less\0/var/log/mysql/mariadbd.log\0").as_deref(),
            None
        );
        assert_eq!(
            server_name("systemctl", "systemctl\0restart\0mariadbd\0").as_deref(),
            None
        );
    }

    #[test]
    fn smaps_scan() {
        let m = scan_smaps(SMAPS.as_bytes());
        assert_eq!(
            m.kernel_page_sizes.into_iter().collect::<Vec<_>>(),
            vec![4096, 65536]
        );
        assert_eq!(m.anon_huge_bytes, 1 << 30);
        assert!(m.libraries.contains("libjemalloc.so.2") && m.libraries.contains("mariadbd"));
        assert!(!m.libraries.iter().any(|l| l.contains("stack")));
        let junk = scan_smaps("\u{0}:\nKernelPageSize: x kB\n-:-\n".as_bytes());
        assert!(junk.kernel_page_sizes.is_empty());
    }
}
