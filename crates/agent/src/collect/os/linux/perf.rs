//! Hardware and software counters for mariadbd's threads (perf_event_open), live only.

use std::{io, time::Duration};

use perf_event::{
    Builder, Counter,
    events::{Cache, CacheOp, CacheResult, Event, Hardware, Software, WhichCache},
};
use powerdiag_rules::{Gathered, OsFacts, PerfCounters, PerfEvent};

use super::fs::read_trim;
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
    const NAME: &'static str = "counters";
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

fn events() -> Vec<(&'static str, Event)> {
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
        (
            "context-switches",
            Event::Software(Software::CONTEXT_SWITCHES),
        ),
        ("page-faults", Event::Software(Software::PAGE_FAULTS)),
        ("cpu-migrations", Event::Software(Software::CPU_MIGRATIONS)),
    ]
}

/// Counters started on every thread of a process.
#[derive(Debug)]
pub(super) struct Session {
    pid: u32,
    threads: usize,
    events: Vec<(&'static str, Result<Vec<Counter>, String>)>,
}

/// Why an event could not be opened, in words a user can act on.
fn explain(e: &io::Error, r: &Roots) -> String {
    let paranoid =
        read_trim(&r.proc("sys/kernel/perf_event_paranoid")).unwrap_or_else(|_| "?".into());
    match e.raw_os_error() {
        Some(libc_errno::ENOENT) => {
            "unavailable: no PMU for this event (perf_event_open ENOENT; typical in a VM without a virtual PMU)".into()
        }
        Some(libc_errno::EACCES) | Some(libc_errno::EPERM) => format!(
            "forbidden: kernel.perf_event_paranoid is {paranoid} (user-space counting of another process needs ≤ 2) or powerdiag lacks CAP_PERFMON and ptrace access to mariadbd (perf_event_open {})",
            if e.raw_os_error() == Some(libc_errno::EACCES) { "EACCES" } else { "EPERM" }
        ),
        Some(libc_errno::EOPNOTSUPP) | Some(libc_errno::EINVAL) => {
            "not supported by this CPU or kernel (perf_event_open EOPNOTSUPP/EINVAL)".into()
        }
        Some(libc_errno::ESRCH) => "the thread exited before it could be counted (ESRCH)".into(),
        Some(libc_errno::EMFILE) => "too many open files (EMFILE); raise the file limit".into(),
        _ => format!("perf_event_open failed: {e}"),
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
    let all = events();
    let per_event = (MAX_FDS / all.len()).max(1);
    let tids: Vec<u32> = tids.into_iter().take(per_event).collect();
    let mut out = Vec::new();
    for (name, event) in all {
        let mut counters = Vec::new();
        let mut error = None;
        for &tid in &tids {
            let hardware = !matches!(event, Event::Software(_));
            let mut builder = Builder::new()
                .kind(event.clone())
                .observe_pid(tid as i32)
                .any_cpu();
            // Hardware events in user space only: allowed at perf_event_paranoid 2, the common
            // default. Software events (context switches, faults) happen in the kernel.
            if !hardware {
                builder.exclude_kernel(false);
            }
            let built = builder.build();
            match built {
                Ok(mut c) => {
                    if c.enable().is_ok() {
                        counters.push(c);
                    }
                }
                // A thread that exited meanwhile is not the event's fault.
                Err(e) if e.raw_os_error() == Some(libc_errno::ESRCH) => {}
                Err(e) => {
                    error = Some(explain(&e, r));
                    break;
                }
            }
        }
        let result = match error {
            Some(e) => Err(e),
            None if counters.is_empty() => Err("no thread of mariadbd could be counted".into()),
            None => Ok(counters),
        };
        out.push((name, result));
    }
    Session {
        pid,
        threads: tids.len(),
        events: out,
    }
}

pub(super) fn finish(s: Session, window: Duration) -> PerfCounters {
    let events = s
        .events
        .into_iter()
        .map(|(name, result)| match result {
            Ok(mut counters) => {
                let mut sum: u64 = 0;
                let mut failed = None;
                for c in &mut counters {
                    match c.read() {
                        Ok(v) => sum = sum.saturating_add(v),
                        Err(e) => failed = Some(format!("reading the counter failed: {e}")),
                    }
                }
                PerfEvent {
                    name: name.into(),
                    value: failed.is_none().then_some(sum),
                    unavailable: failed,
                }
            }
            Err(why) => PerfEvent {
                name: name.into(),
                value: None,
                unavailable: Some(why),
            },
        })
        .collect();
    PerfCounters {
        window_seconds: window.as_secs_f64(),
        target: format!(
            "mariadbd pid {}, {} threads (hardware events: user space)",
            s.pid, s.threads
        ),
        events,
    }
}
