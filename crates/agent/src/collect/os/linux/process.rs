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

use super::fs::{MAX_FILE, format_cpu_list, open, parse_procfs, read, read_bytes, read_trim};
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

/// The most bytes of `maps` scanned for the allocator. A real `maps` line is ~75 bytes plus
/// its path (this build machine's processes: 4-15 KiB of maps, lines under 130 bytes; the
/// recorded mariadbd trees: 8-18 KiB); at the default `vm.max_map_count` (65,530 mappings) and
/// 256 bytes a line a process could reach 16 MiB, which no mariadbd comes near. A file
/// reaching the cap is not a process's maps (a sparse 1 GiB file of NULs in a tree took the
/// scan to 1.7 s a sample): the scan stops there and says so.
pub(super) const MAX_MAPS: u64 = 16 << 20;
/// The most bytes of `smaps_rollup` read: one header and ~25 `Key: value kB` lines, under
/// 1 KiB (the recorded trees: 642-705 bytes).
pub(super) const MAX_ROLLUP: u64 = 64 << 10;
/// The lines of a recorded smaps read for its first mapping's page size.
const SMAPS_HEAD_LINES: usize = 64;
/// The longest line kept: a mapping header is ~75 bytes, its path at most PATH_MAX (4,096)
/// bytes and ` (deleted)`. A longer line is skipped, read in chunks, never buffered whole.
pub(super) const MAX_LINE: usize = 4096 + 256;

/// What one pass over `/proc/PID/smaps` (or `smaps_rollup`, or `maps`) yields.
#[derive(Debug, Default, PartialEq)]
pub(super) struct SmapsScan {
    pub(super) kernel_page_sizes: BTreeSet<u64>,
    pub(super) mmu_page_sizes: BTreeSet<u64>,
    pub(super) anon_huge_bytes: u64,
    /// `Shared_Hugetlb` + `Private_Hugetlb`.
    pub(super) hugetlb_bytes: u64,
    /// File names of the mapped files (`libc.so.6`, `libjemalloc.so.2`, ...), decoded lossily
    /// (a path may be any bytes).
    pub(super) libraries: BTreeSet<String>,
    /// The bytes read.
    pub(super) bytes: u64,
    /// Lines longer than [`MAX_LINE`], skipped.
    pub(super) long_lines: u64,
    /// The scan stopped at its byte cap with more to read.
    pub(super) truncated: bool,
    /// The read failed part way (what was read before is kept).
    pub(super) failed: Option<String>,
}

/// Reads smaps-format text line by line: mapping headers (`addr perms offset dev inode [path]`)
/// and `Key: value kB` lines. Hand-written because procfs's MemoryMaps allocates a map per
/// mapping and a large server has thousands. Lines are bytes (a path may be any bytes, so a
/// line of UTF-8 text would end the scan at the first other one), decoded lossily; at most
/// `max_lines` lines and `max_bytes` bytes are read, and a line longer than [`MAX_LINE`] is
/// skipped without being buffered.
pub(super) fn scan_smaps(
    mut r: impl std::io::BufRead,
    max_bytes: u64,
    max_lines: usize,
) -> SmapsScan {
    let mut out = SmapsScan::default();
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut long = false;
    let mut lines = 0;
    while lines < max_lines {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.failed = Some(e.to_string());
                break;
            }
        };
        if buf.is_empty() {
            // The end: a last line without its newline still counts.
            if long {
                out.long_lines += 1;
            } else if !line.is_empty() {
                out.line(&line);
            }
            break;
        }
        let room = max_bytes.saturating_sub(out.bytes);
        if room == 0 {
            out.truncated = true;
            break;
        }
        let buf = &buf[..buf.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        if !long {
            if line.len() + chunk.len() > MAX_LINE {
                long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + usize::from(newline.is_some());
        r.consume(used);
        out.bytes += used as u64;
        if newline.is_some() {
            if long {
                out.long_lines += 1;
            } else {
                out.line(&line);
            }
            line.clear();
            long = false;
            lines += 1;
        }
    }
    out
}

impl SmapsScan {
    /// One line (without its newline).
    fn line(&mut self, bytes: &[u8]) {
        let line = String::from_utf8_lossy(bytes);
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
                "KernelPageSize" => self.kernel_page_sizes.extend(kb()),
                "MMUPageSize" => self.mmu_page_sizes.extend(kb()),
                "AnonHugePages" => {
                    self.anon_huge_bytes = self.anon_huge_bytes.saturating_add(kb().unwrap_or(0))
                }
                "Shared_Hugetlb" | "Private_Hugetlb" => {
                    self.hugetlb_bytes = self.hugetlb_bytes.saturating_add(kb().unwrap_or(0))
                }
                _ => {}
            }
            return;
        }
        // A mapping header: the sixth field, when present, is the path.
        if let Some(path) = line.split_whitespace().nth(5)
            && path.starts_with('/')
            && let Some(name) = path.rsplit('/').next()
        {
            self.libraries.insert(name.to_owned());
        }
    }

    /// Why this scan of `path` is incomplete, if it is.
    fn incomplete(&self, path: &std::path::Path, cap: u64) -> Option<String> {
        let path = path.display();
        if let Some(e) = &self.failed {
            Some(format!(
                "{path}: the read failed after {} bytes ({e})",
                self.bytes
            ))
        } else if self.truncated {
            Some(format!(
                "{path}: scan truncated at {} MiB, more than any real process maps; check that the file is mariadbd's maps",
                cap >> 20
            ))
        } else if self.long_lines > 0 {
            Some(format!(
                "{path}: {} lines longer than {MAX_LINE} bytes skipped, not a real process's maps; check that the file is mariadbd's maps",
                self.long_lines
            ))
        } else {
            None
        }
    }
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

/// The allocator mariadbd maps, with the library that says so; else why it is unknown, naming
/// the file. A mapped allocator library is a fact however the scan ended; libc malloc (no such
/// library) only when `maps` was read to its end and lists mapped files: an empty, unreadable,
/// truncated or garbled `maps` leaves the allocator unknown, which is not libc.
fn read_allocator(dir: &std::path::Path) -> Result<(Allocator, String), String> {
    let path = dir.join("maps");
    let file = open(&path, MAX_MAPS).map_err(|e| e.to_string())?;
    let m = scan_smaps(std::io::BufReader::new(file), MAX_MAPS, usize::MAX);
    let find = |needle: &str| m.libraries.iter().find(|l| l.starts_with(needle)).cloned();
    if let Some(l) = find("libjemalloc") {
        return Ok((Allocator::Jemalloc, l));
    } else if let Some(l) = find("libtcmalloc") {
        return Ok((Allocator::Tcmalloc, l));
    } else if let Some(l) = find("libmimalloc") {
        return Ok((Allocator::Mimalloc, l));
    }
    if let Some(why) = m.incomplete(&path, MAX_MAPS) {
        return Err(why);
    }
    if m.bytes == 0 {
        return Err(format!(
            "{} is empty; a running mariadbd maps at least its own binary",
            path.display()
        ));
    }
    if m.libraries.is_empty() {
        return Err(format!(
            "{} lists no mapped files; check that the file is mariadbd's maps",
            path.display()
        ));
    }
    Ok((
        Allocator::Libc,
        "no jemalloc, tcmalloc or mimalloc library mapped".to_owned(),
    ))
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
    // Lossily: a name of other bytes must not hide the line.
    f.thp_disabled = String::from_utf8_lossy(&status_bytes)
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim() == "0"));
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
    } else if let Ok(file) = open(&dir.join("smaps_rollup"), MAX_ROLLUP)
        // A truncated or failed reading is no reading: the huge-page use stays unknown.
        && let m = scan_smaps(std::io::BufReader::new(file), MAX_ROLLUP, usize::MAX)
        && m.incomplete(&dir.join("smaps_rollup"), MAX_ROLLUP)
            .is_none()
    {
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
        let cap = (SMAPS_HEAD_LINES * MAX_LINE) as u64;
        open(&dir.join("smaps"), cap).ok().and_then(|file| {
            scan_smaps(std::io::BufReader::new(file), cap, SMAPS_HEAD_LINES)
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
        Some(a) => Ok(a),
        None => {
            let a = read_allocator(&dir);
            if let Ok(a) = &a {
                keep(live.as_ref(), |k| k.allocator = Some(a.clone()));
            }
            a
        }
    };
    match allocator {
        Ok((alloc, evidence)) => {
            f.allocator = Some(alloc);
            f.allocator_evidence = Some(evidence);
        }
        // Unknown: the evidence says why (PD602 reports insufficient data naming it).
        Err(why) => f.allocator_evidence = Some(why),
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
        let m = scan_smaps(SMAPS.as_bytes(), MAX_MAPS, usize::MAX);
        assert_eq!(
            m.kernel_page_sizes.into_iter().collect::<Vec<_>>(),
            vec![4096, 65536]
        );
        assert_eq!(m.anon_huge_bytes, 1 << 30);
        assert!(m.libraries.contains("libjemalloc.so.2") && m.libraries.contains("mariadbd"));
        assert!(!m.libraries.iter().any(|l| l.contains("stack")));
        let junk = scan_smaps(
            "\u{0}:\nKernelPageSize: x kB\n-:-\n".as_bytes(),
            MAX_MAPS,
            usize::MAX,
        );
        assert!(junk.kernel_page_sizes.is_empty());
    }

    /// A path of any bytes neither ends the scan nor hides what follows; a line over
    /// MAX_LINE is skipped, not buffered; the caps on lines and bytes hold.
    #[test]
    fn smaps_scan_reads_bytes_within_bounds() {
        let mut maps = b"7f00-7f01 r-xp 00000000 fd:01 1 /opt/\xff\xfe/libodd.so\n".to_vec();
        maps.extend_from_slice(
            b"7f10-7f11 r-xp 00000000 fd:01 2 /usr/lib/libjemalloc.so.2\n7f20-7f21 r-xp 0 0 3 /lib/libc.so.6",
        );
        let m = scan_smaps(maps.as_slice(), MAX_MAPS, usize::MAX);
        assert!(m.libraries.contains("libjemalloc.so.2"), "{m:?}");
        assert!(m.libraries.contains("libc.so.6"), "{m:?}");
        assert!(m.libraries.contains("libodd.so"), "{m:?}");
        assert_eq!(m.bytes, maps.len() as u64);
        assert!(
            m.incomplete(std::path::Path::new("maps"), MAX_MAPS)
                .is_none()
        );

        let mut long = vec![b'x'; MAX_LINE + 1];
        long.extend_from_slice(b"\n7f10-7f11 r-xp 0 fd:01 2 /usr/lib/libjemalloc.so.2\n");
        let m = scan_smaps(
            std::io::BufReader::with_capacity(64, long.as_slice()),
            1 << 20,
            9,
        );
        assert_eq!(m.long_lines, 1);
        assert!(m.libraries.contains("libjemalloc.so.2"), "{m:?}");

        let m = scan_smaps(SMAPS.as_bytes(), MAX_MAPS, 1);
        assert_eq!(m.libraries.len(), 1, "one line: {m:?}");
        let m = scan_smaps(SMAPS.as_bytes(), 10, usize::MAX);
        assert!(m.truncated && m.bytes == 10, "{m:?}");
    }

    /// A tree with mariadbd's status and the given `maps` (None: no file).
    fn tree_with_maps(maps: Option<&[u8]>) -> (tempfile::TempDir, ProcessFacts) {
        let d = tempfile::tempdir().unwrap();
        crate::collect::os::linux::tests::write(
            d.path(),
            "proc/9/status",
            include_str!(
                "../../../../../../tests/fixtures/linux/x86_64-vm-recorded/proc/16003/status"
            ),
        );
        if let Some(maps) = maps {
            std::fs::write(d.path().join("proc/9/maps"), maps).unwrap();
        }
        let f = collect(&Roots::tree(d.path()), 9, "pid_file").unwrap();
        (d, f)
    }

    /// The allocator: a jemalloc after a non-UTF-8 path is jemalloc; an empty or absent maps
    /// leaves it unknown (not libc), naming the file; libc only from a maps read in full.
    #[test]
    fn allocator_from_maps() {
        let (_d, f) = tree_with_maps(Some(
            b"5500-5501 r-xp 0 fd:01 1 /usr/sbin/mariadbd\n7f00-7f01 r-xp 0 fd:01 1 /opt/\xff/x.so\n7f10-7f11 r-xp 0 fd:01 2 /usr/lib/libjemalloc.so.2\n",
        ));
        assert_eq!(f.allocator, Some(Allocator::Jemalloc), "{f:?}");
        let (_d, f) = tree_with_maps(Some(
            b"5500-5501 r-xp 0 fd:01 1 /usr/sbin/mariadbd\n7f20-7f21 r-xp 0 fd:01 3 /lib/libc.so.6\n",
        ));
        assert_eq!(f.allocator, Some(Allocator::Libc), "{f:?}");
        let (_d, f) = tree_with_maps(Some(b""));
        assert_eq!(f.allocator, None, "{f:?}");
        let why = f.allocator_evidence.unwrap();
        assert!(
            why.ends_with("proc/9/maps is empty; a running mariadbd maps at least its own binary"),
            "{why}"
        );
        let (_d, f) = tree_with_maps(Some(b"\n\n[heap]\n"));
        assert_eq!(f.allocator, None, "{f:?}");
        assert!(
            f.allocator_evidence
                .unwrap()
                .contains("lists no mapped files")
        );
        let (_d, f) = tree_with_maps(None);
        assert_eq!(f.allocator, None, "{f:?}");
        let why = f.allocator_evidence.unwrap();
        assert!(why.contains("proc/9/maps does not exist"), "{why}");
    }

    /// A sparse 1 GiB file of NULs in place of maps (and of smaps_rollup and smaps): the scans
    /// stop at their caps, the allocator is unknown and the reason names the file.
    #[test]
    fn a_huge_maps_is_capped() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("proc/9");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["maps", "smaps", "smaps_rollup"] {
            std::fs::File::create(dir.join(name))
                .unwrap()
                .set_len(1 << 30)
                .unwrap();
        }
        let file = open(&dir.join("maps"), MAX_MAPS).unwrap();
        let m = scan_smaps(std::io::BufReader::new(file), MAX_MAPS, usize::MAX);
        assert!(m.truncated && m.bytes == MAX_MAPS, "{m:?}");
        let why = read_allocator(&dir).unwrap_err();
        assert!(
            why.starts_with(&format!(
                "{}: scan truncated at 16 MiB",
                dir.join("maps").display()
            )),
            "{why}"
        );

        crate::collect::os::linux::tests::write(
            d.path(),
            "proc/9/status",
            include_str!(
                "../../../../../../tests/fixtures/linux/x86_64-vm-recorded/proc/16003/status"
            ),
        );
        let f = collect(&Roots::tree(d.path()), 9, "pid_file").unwrap();
        assert_eq!(f.allocator, None);
        assert!(
            f.allocator_evidence
                .as_deref()
                .unwrap()
                .contains("proc/9/maps: scan truncated")
        );
        assert!(f.kernel_page_sizes.is_empty(), "{f:?}");
        assert_eq!(
            f.anon_huge_bytes, None,
            "a truncated smaps_rollup is no reading"
        );
    }
}
