//! Hardware and software counters for mariadbd's threads (perf_event_open), live only.

use crate::collect::{collector::Descriptor, os::sections};
use std::{
    collections::BTreeMap,
    io,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use perf_event::{
    Builder, Counter,
    events::{Cache, CacheOp, CacheResult, Event, Hardware, WhichCache},
};
use perf_event_open_sys::bindings::{
    PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS, PERF_COUNT_SW_PAGE_FAULTS,
};
use powerdiag_rules::{Gathered, OsFacts, PerfCounters, PerfEvent};

use super::{fs::read_trim, kept::STATIC_REUSE, perf_group::Group};
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `counters` section: perf events on mariadbd's threads over the window. Not collected
/// (and no failed run) on a recorded tree, without a window, or without a process to count.
pub(super) struct Counters;

impl Collector for Counters {
    const SECTION: &'static Descriptor = &sections::COUNTERS;
    type Baseline = Session;
    type Output = PerfCounters;

    fn begin(&self, ctx: &Ctx) -> Option<Session> {
        // Opening a counter per thread and event costs ~0.1 ms each: only with a window.
        let found = ctx.process.as_ref().ok()?;
        ctx.roots.is_live().then(|| start(ctx.roots, found.pid))
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Session>,
        _: &OsFacts,
    ) -> Result<PerfCounters, CollectError> {
        match (baseline, ctx.process) {
            (Some(s), _) => Ok(finish(s, ctx.window)),
            (None, _) if !ctx.roots.is_live() => Err(CollectError::skipped(super::NOT_LIVE)),
            (None, Err(why)) => Err(CollectError::skipped(format!("no process to count: {why}"))),
            (None, Ok(_)) => Err(CollectError::skipped(
                "not collected: the sample window is 0 (--sample-window)",
            )),
        }
    }

    fn store(facts: &mut OsFacts, section: Gathered<PerfCounters>) {
        facts.counters = section;
    }
}

/// Open counters at most (threads × events); keeps well under the default 1024 file limit.
const MAX_FDS: usize = 512;

/// Hardware events, one counter per thread and event (the kernel multiplexes those the PMU
/// cannot count at once).
fn hardware() -> Vec<(&'static str, Event)> {
    let cache = |which| {
        Event::Cache(Cache {
            which,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        })
    };
    vec![
        ("instructions", Event::Hardware(Hardware::INSTRUCTIONS)),
        ("cycles", Event::Hardware(Hardware::CPU_CYCLES)),
        ("dTLB-load-misses", cache(WhichCache::DTLB)),
        ("iTLB-load-misses", cache(WhichCache::ITLB)),
        (
            "stalled-cycles-backend",
            Event::Hardware(Hardware::STALLED_CYCLES_BACKEND),
        ),
    ]
}

/// Software events, one group per thread ([`Group`]); counted in the kernel too (context
/// switches and faults happen there).
const SOFTWARE: [(&str, u32); 3] = [
    ("context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("page-faults", PERF_COUNT_SW_PAGE_FAULTS),
    ("cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS),
];

/// Counters started on every thread of a process, per event by thread id.
#[derive(Debug)]
pub(super) struct Session {
    pid: u32,
    /// The process's start time (`/proc/PID/stat` field 22), so a new process that reuses
    /// the pid never inherits counters attached to the old one's threads.
    started: Option<u64>,
    /// The last process id the kernel handed out (`/proc/sys/kernel/ns_last_pid`), read after
    /// the threads were listed and before their counters were opened: see [`may_be_new`].
    last_pid: Option<u32>,
    threads: usize,
    /// The hardware events.
    events: Vec<(&'static str, Result<ByThread, PerfError>)>,
    /// The software events' groups, by thread id.
    software: Result<BTreeMap<u32, Group>, PerfError>,
    /// Events the kernel or the CPU does not have (no PMU in a VM, an event this CPU lacks),
    /// with when that was found: not tried again for [`STATIC_REUSE`] (each try costs a
    /// failed perf_event_open per event and a read of perf_event_paranoid).
    unsupported: BTreeMap<&'static str, (Instant, PerfError)>,
}

/// Why an event is not counted; the snapshot quotes its sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PerfError {
    /// `perf_event_open` refused, explained (no PMU for the event, `perf_event_paranoid`, ...).
    #[error("{0}")]
    Refused(String),
    /// Every thread exited before its counter opened.
    #[error("no thread of mariadbd could be counted")]
    NoThread,
}

/// One event's counters, by thread id.
type ByThread = BTreeMap<u32, Counter>;

/// The counters of the last window, kept open (and disabled) for the next: opening one counter
/// per thread and event was 12% of the agent's CPU per sample, and a kept counter needs only a
/// reset and an enable. A window takes them out while it runs, so two windows at once (never
/// the agent's) each get their own.
static KEPT: Mutex<Option<Session>> = Mutex::new(None);

/// Why event `name` could not be opened, in words a user can act on. An `ENOENT` names the
/// event the PMU lacks; [`reword_without_pmu`] says "no PMU" once no hardware event opened.
fn explain(e: &io::Error, r: &Roots, name: &str) -> String {
    let paranoid =
        read_trim(&r.proc("sys/kernel/perf_event_paranoid")).unwrap_or_else(|_| "?".into());
    match e.raw_os_error() {
        Some(libc_errno::ENOENT) => {
            format!("unavailable: {LACKS} {name} (perf_event_open ENOENT)")
        }
        Some(libc_errno::EACCES) | Some(libc_errno::EPERM) => format!(
            "forbidden: kernel.perf_event_paranoid is {paranoid} (user-space counting of another process needs ≤ 2) or powerdiag lacks CAP_PERFMON and ptrace access to mariadbd (perf_event_open {})",
            if e.raw_os_error() == Some(libc_errno::EACCES) {
                "EACCES"
            } else {
                "EPERM"
            }
        ),
        Some(libc_errno::EOPNOTSUPP) | Some(libc_errno::EINVAL) => {
            "not supported by this CPU or kernel (perf_event_open EOPNOTSUPP/EINVAL)".into()
        }
        Some(libc_errno::ESRCH) => "the thread exited before it could be counted (ESRCH)".into(),
        Some(libc_errno::EMFILE) => "too many open files (EMFILE); raise the file limit".into(),
        _ => format!("perf_event_open failed: {e}"),
    }
}

/// The start of an `ENOENT` explanation: the PMU is there but lacks the event.
const LACKS: &str = "this CPU's PMU does not count";

/// When no hardware event opened and some were refused with `ENOENT`, there is no PMU at all
/// (a VM without a virtual PMU), not a PMU without those events: says so.
fn reword_without_pmu(
    out: &mut [(&'static str, Result<ByThread, PerfError>)],
    unsupported: &mut BTreeMap<&'static str, (Instant, PerfError)>,
) {
    if out.iter().any(|(_, r)| r.is_ok()) {
        return;
    }
    let reword = |e: &mut PerfError, name: &str| {
        if let PerfError::Refused(why) = e
            && why.starts_with(&format!("unavailable: {LACKS}"))
        {
            *why = format!(
                "unavailable: no hardware PMU (perf_event_open ENOENT for {name} and every other hardware event; typical in a VM without a virtual PMU)"
            );
        }
    };
    for (name, r) in out.iter_mut() {
        if let Err(e) = r {
            reword(e, name);
        }
    }
    for (name, (_, e)) in unsupported.iter_mut() {
        reword(e, name);
    }
}

/// The errno values perf_event_open reports (Linux, all architectures powerdiag targets).
mod libc_errno {
    pub(super) const EPERM: i32 = 1;
    pub(super) const ENOENT: i32 = 2;
    pub(super) const ESRCH: i32 = 3;
    pub(super) const EACCES: i32 = 13;
    pub(super) const EINVAL: i32 = 22;
    pub(super) const EMFILE: i32 = 24;
    pub(super) const EOPNOTSUPP: i32 = 95;
}

pub(super) fn start(r: &Roots, pid: u32) -> Session {
    let tids: Vec<u32> = std::fs::read_dir(r.proc(format!("{pid}/task")))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let started = super::process::process_start(r, pid);
    let last_pid = read_trim(&r.proc("sys/kernel/ns_last_pid"))
        .ok()
        .and_then(|v| v.parse().ok());
    let kept = KEPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .filter(|k| k.pid == pid && k.started.is_some() && k.started == started);
    let (kept, kept_software, mut unsupported, kept_last_pid) = match kept {
        Some(k) => (k.events, k.software.ok(), k.unsupported, k.last_pid),
        None => Default::default(),
    };
    // A kept counter stays on the thread it was opened on: one whose id may since belong to
    // a new thread is opened again.
    let keep = |tid: u32| tids.contains(&tid) && !may_be_new(tid, kept_last_pid, last_pid);
    unsupported.retain(|_, (at, _)| at.elapsed() < STATIC_REUSE);
    let mut kept = kept.into_iter();
    let hardware = hardware();
    // Threads counted at most: one descriptor per event on each.
    let per_event = (MAX_FDS / (hardware.len() + SOFTWARE.len())).max(1);
    let mut out = Vec::new();
    for (name, event) in hardware {
        if let Some((_, why)) = unsupported.get(name) {
            // Keeps the kept list in step with the hardware list.
            kept.next();
            out.push((name, Err(why.clone())));
            continue;
        }
        // The kept counters of threads still there, counted again from zero.
        let mut counters = match kept.next() {
            Some((kept_name, Ok(c))) if kept_name == name => c,
            _ => BTreeMap::new(),
        };
        counters.retain(|&tid, c| keep(tid) && c.reset().is_ok() && c.enable().is_ok());
        let mut error = None;
        for &tid in &tids {
            if counters.len() >= per_event {
                break;
            }
            if counters.contains_key(&tid) {
                continue;
            }
            // Hardware events in user space only (the builder's default): allowed at
            // perf_event_paranoid 2, the common default.
            let builder = Builder::new()
                .kind(event.clone())
                .observe_pid(tid as i32)
                .any_cpu();
            match builder.build() {
                Ok(mut c) => {
                    if c.enable().is_ok() {
                        counters.insert(tid, c);
                    }
                }
                // A thread that exited meanwhile is not the event's fault.
                Err(e) if e.raw_os_error() == Some(libc_errno::ESRCH) => {}
                Err(e) => {
                    let why = PerfError::Refused(explain(&e, r, name));
                    if matches!(
                        e.raw_os_error(),
                        Some(libc_errno::ENOENT | libc_errno::EOPNOTSUPP | libc_errno::EINVAL)
                    ) {
                        unsupported.insert(name, (Instant::now(), why.clone()));
                    }
                    error = Some(why);
                    break;
                }
            }
        }
        let result = match error {
            Some(e) => Err(e),
            None if counters.is_empty() => Err(PerfError::NoThread),
            None => Ok(counters),
        };
        out.push((name, result));
    }
    reword_without_pmu(&mut out, &mut unsupported);
    let mut kept_software = kept_software.unwrap_or_default();
    kept_software.retain(|&tid, _| keep(tid));
    Session {
        pid,
        started,
        last_pid,
        threads: tids.len().min(per_event),
        events: out,
        software: start_software(r, &tids, kept_software, per_event),
        unsupported,
    }
}

/// Whether thread id `tid` may have been handed to a new thread since the last window, whose
/// counters were opened after the kernel's last process id read `before`; it reads `now`
/// (after this window's threads were listed). A counter stays on the thread it was opened on,
/// and a thread that exits leaves its counter counting nothing (`ENABLE` on it still
/// succeeds), so a new thread of mariadbd that got the old one's id (ids are reused once the
/// kernel's counter wraps at `pid_max`, 32,768 on many hosts) would go uncounted behind it.
///
/// The kernel hands ids out in increasing order, wrapping past `pid_max`: an id handed out
/// between the two reads lies in `(before, now]`, or, when the counter wrapped, above
/// `before` or at most `now`. Any other id was not handed out meanwhile (assuming fewer than
/// `pid_max` new processes and threads in one interval), so its counter is still its
/// thread's. An id in the range may be the same thread (the kernel skips ids in use): its
/// counter is opened again, which costs one `perf_event_open`. Without either read every
/// counter is opened again, as before counters were kept.
fn may_be_new(tid: u32, before: Option<u32>, now: Option<u32>) -> bool {
    match (before, now) {
        (Some(before), Some(now)) if now >= before => tid > before && tid <= now,
        (Some(before), Some(now)) => tid > before || tid <= now,
        _ => true,
    }
}

/// The software groups of `tids`: the kept ones of threads still there, reset and enabled,
/// and new ones for the rest, up to `cap` threads.
fn start_software(
    r: &Roots,
    tids: &[u32],
    mut groups: BTreeMap<u32, Group>,
    cap: usize,
) -> Result<BTreeMap<u32, Group>, PerfError> {
    groups.retain(|tid, g| tids.contains(tid) && g.reset().is_ok() && g.enable().is_ok());
    let configs = SOFTWARE.map(|(_, c)| u64::from(c));
    for &tid in tids {
        if groups.len() >= cap {
            break;
        }
        if groups.contains_key(&tid) {
            continue;
        }
        match Group::open(tid, &configs) {
            Ok(g) => {
                if g.enable().is_ok() {
                    groups.insert(tid, g);
                }
            }
            // A thread that exited meanwhile is not the events' fault.
            Err(e) if e.raw_os_error() == Some(libc_errno::ESRCH) => {}
            Err(e) => return Err(PerfError::Refused(explain(&e, r, "software events"))),
        }
    }
    if groups.is_empty() {
        return Err(PerfError::NoThread);
    }
    Ok(groups)
}

pub(super) fn finish(mut s: Session, window: Duration) -> PerfCounters {
    let events = s
        .events
        .iter_mut()
        .map(|(name, result)| match result {
            Ok(counters) => {
                let mut sum: u64 = 0;
                let mut failed = None;
                for c in counters.values_mut() {
                    match c.read() {
                        Ok(v) => sum = sum.saturating_add(v),
                        Err(e) => failed = Some(format!("reading the counter failed: {e}")),
                    }
                    // Kept for the next window, not counting until then.
                    let _ = c.disable();
                }
                PerfEvent {
                    name: (*name).into(),
                    value: failed.is_none().then_some(sum),
                    unavailable: failed,
                }
            }
            Err(why) => PerfEvent {
                name: (*name).into(),
                value: None,
                unavailable: Some(why.to_string()),
            },
        })
        .collect::<Vec<_>>();
    let mut events = events;
    events.extend(finish_software(&mut s.software));
    let counters = PerfCounters {
        window_seconds: window.as_secs_f64(),
        target: format!(
            "mariadbd pid {}, {} threads (hardware events: user space)",
            s.pid, s.threads
        ),
        events,
    };
    *KEPT.lock().unwrap_or_else(PoisonError::into_inner) = Some(s);
    counters
}

/// The software events summed over the threads' groups, each group disabled for the next
/// window (disabled first: a disabled group's read needs no interrupt).
fn finish_software(groups: &mut Result<BTreeMap<u32, Group>, PerfError>) -> Vec<PerfEvent> {
    let mut sums = [0u64; SOFTWARE.len()];
    let mut failed = None;
    match groups {
        Ok(groups) => {
            for g in groups.values_mut() {
                let _ = g.disable();
                match g.read() {
                    Ok(counts) => {
                        for (sum, c) in sums.iter_mut().zip(counts) {
                            *sum = sum.saturating_add(c);
                        }
                    }
                    Err(e) => failed = Some(format!("reading the counter failed: {e}")),
                }
            }
        }
        Err(why) => failed = Some(why.to_string()),
    }
    SOFTWARE
        .iter()
        .zip(sums)
        .map(|((name, _), sum)| PerfEvent {
            name: (*name).into(),
            value: failed.is_none().then_some(sum),
            unavailable: failed.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// About `n` voluntary context switches on this thread: a sleep gives the CPU up unless
    /// its timer fires before the thread is off it (measured: 49 of 50 once), so the
    /// assertions count on half.
    fn switch(n: usize) {
        for _ in 0..n {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The kernel ids of the software groups, by thread id.
    fn ids(s: &Session) -> BTreeMap<u32, u64> {
        s.software
            .as_ref()
            .map(|g| g.iter().map(|(&tid, g)| (tid, g.id())).collect())
            .unwrap_or_default()
    }

    /// An event the PMU lacks is named (the kernel's arm64 PMU counts `cycles` but not the
    /// TLB events in a QEMU guest); with no hardware event counted at all, there is no PMU.
    #[test]
    fn names_the_event_the_pmu_lacks_or_says_there_is_no_pmu() {
        let enoent = io::Error::from_raw_os_error(libc_errno::ENOENT);
        let roots = Roots::default();
        let lacks = |name: &'static str| {
            (
                name,
                Err(PerfError::Refused(explain(&enoent, &roots, name))),
            )
        };
        let mut out: Vec<(&'static str, Result<ByThread, PerfError>)> =
            vec![("cycles", Ok(BTreeMap::new())), lacks("dTLB-load-misses")];
        let mut unsupported = BTreeMap::new();
        reword_without_pmu(&mut out, &mut unsupported);
        assert_eq!(
            out[1].1.as_ref().unwrap_err().to_string(),
            "unavailable: this CPU's PMU does not count dTLB-load-misses (perf_event_open ENOENT)"
        );
        let mut out = vec![lacks("cycles"), lacks("dTLB-load-misses")];
        let mut unsupported = BTreeMap::from([(
            "cycles",
            (Instant::now(), out[0].1.as_ref().unwrap_err().clone()),
        )]);
        reword_without_pmu(&mut out, &mut unsupported);
        for e in [out[1].1.as_ref().unwrap_err(), &unsupported["cycles"].1] {
            assert!(
                e.to_string()
                    .starts_with("unavailable: no hardware PMU (perf_event_open ENOENT for")
                    && e.to_string()
                        .ends_with("typical in a VM without a virtual PMU)"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_thread_id_handed_out_since_the_last_window_is_counted_afresh() {
        // Ids 1,001 to 1,200 were handed out between the windows.
        assert!(!may_be_new(1000, Some(1000), Some(1200)));
        assert!(may_be_new(1001, Some(1000), Some(1200)));
        assert!(may_be_new(1200, Some(1000), Some(1200)));
        assert!(!may_be_new(1201, Some(1000), Some(1200)));
        assert!(!may_be_new(50, Some(1000), Some(1200)));
        // None.
        assert!(!may_be_new(1000, Some(1000), Some(1000)));
        // The counter wrapped past pid_max: 32,001 and up, then up to 400.
        assert!(may_be_new(32500, Some(32000), Some(400)));
        assert!(may_be_new(350, Some(32000), Some(400)));
        assert!(!may_be_new(401, Some(32000), Some(400)));
        assert!(!may_be_new(32000, Some(32000), Some(400)));
        // Not known: every counter is opened again.
        assert!(may_be_new(5, None, Some(400)));
        assert!(may_be_new(5, Some(400), None));
        assert!(may_be_new(5, None, None));
    }

    /// The second window reuses the first's counters (same kernel ids), counted again from
    /// zero: context switches made in it are counted, and those between the windows are
    /// not. Runs as root on the test machine (software events need no PMU; page faults are no
    /// measure here: transparent huge pages make one fault of 512 pages).
    #[test]
    fn counters_are_kept_between_windows_and_reset() {
        const EVENT: &str = "context-switches";
        let roots = Roots::default();
        let pid = std::process::id();
        let value = |c: &PerfCounters| {
            c.events
                .iter()
                .find(|e| e.name == EVENT)
                .and_then(|e| e.value)
                .unwrap_or_else(|| panic!("{EVENT} not counted: {c:?}"))
        };
        let first = start(&roots, pid);
        let first_ids = ids(&first);
        let first_last_pid = first.last_pid;
        assert!(
            !first_ids.is_empty(),
            "{EVENT} not counted: {:?}",
            first.software
        );
        assert!(
            KEPT.lock().unwrap().is_none(),
            "the window holds the counters"
        );
        // Events this machine lacks (no PMU here: the hardware ones) are not tried again.
        let first_unsupported = first.unsupported.clone();
        switch(50);
        let a = finish(first, Duration::from_secs(1));
        assert!(value(&a) >= 25, "{a:?}");
        // Switches between the windows (at least ~1,000) are not counted in the next one.
        switch(2000);
        let second = start(&roots, pid);
        let second_ids = ids(&second);
        // Kept: exactly the groups of threads still there whose ids were not handed out
        // between the windows (the test's own thread among them, unless the kernel's id
        // counter wrapped meanwhile).
        let kept: Vec<u32> = second_ids
            .iter()
            .filter(|&(tid, id)| first_ids.get(tid) == Some(id))
            .map(|(&tid, _)| tid)
            .collect();
        let expected: Vec<u32> = second_ids
            .keys()
            .copied()
            .filter(|&tid| {
                first_ids.contains_key(&tid) && !may_be_new(tid, first_last_pid, second.last_pid)
            })
            .collect();
        assert_eq!(
            kept, expected,
            "ids handed out between: {first_last_pid:?} to {:?}",
            second.last_pid
        );
        if let (Some(before), Some(now)) = (first_last_pid, second.last_pid)
            && now >= before
        {
            assert!(!kept.is_empty(), "no counter was kept");
        }
        for (name, (found, why)) in &first_unsupported {
            assert_eq!(
                second.unsupported.get(name).map(|(at, _)| at),
                Some(found),
                "{name} tried again"
            );
            let err = second.events.iter().find(|(n, _)| n == name).unwrap();
            assert_eq!(err.1.as_ref().err(), Some(why));
        }
        switch(50);
        let b = finish(second, Duration::from_secs(1));
        assert!(value(&b) >= 25, "{b:?}");
        assert!(
            value(&b) < 1000,
            "the switches between the windows were counted: {b:?}"
        );
    }
}
