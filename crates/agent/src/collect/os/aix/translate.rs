//! Raw libperfstat values, plus the parsed output of the commands in [`super::ps`], → the
//! snapshot's [`OsFacts`]. Pure: no I/O and no clock (the window length comes in as a
//! number), so it compiles and is tested on every platform with values built from the
//! perfstat-sys types. See `README.md` next to this file for the mapping table.

use perfstat_sys::{
    PAGE_16M, PartitionTotal, PartitionTotalLayout, name_bytes, perfstat_cpu_total_t,
    perfstat_memory_page_t, perfstat_memory_total_t, perfstat_partition_config_t,
    perfstat_partition_total_t, perfstat_process_t, processor_mhz,
};
use powerdiag_rules::{
    Allocator, CollectorRun, Compiler, CpuFacts, CpuSaturation, CpuTime, Filesystem, Gathered,
    MemoryFacts, OsFacts, PartitionFacts, ProcessCpu, ProcessFacts, SwapActivity,
};

use super::ps::{self, PageSizes};
use crate::collect::{
    CollectError,
    collector::{self, Descriptor, Selection},
    os::{find::NAMES, sections},
};

const TOPOLOGY: &str = "unavailable: the AIX collector does not read cache and NUMA topology yet";
const COUNTERS: &str = "unavailable: the AIX collector does not read hardware counters yet";

/// A raw reading: the value, or why it could not be read.
pub(crate) type Read<T> = Result<T, CollectError>;

/// What the AIX collector read for one sample window, before any interpretation. Each part is
/// the value or the reason it could not be read.
#[derive(Debug, Clone)]
pub(crate) struct Raw {
    /// Wall-clock length of the window, seconds.
    pub(crate) window_secs: f64,
    /// `perfstat_partition_total` at the start of the window; `None` when it failed (the
    /// counters are then read since boot).
    pub(crate) before: Option<PartitionTotal>,
    /// `perfstat_partition_total` at the end of the window.
    pub(crate) now: Read<PartitionTotal>,
    pub(crate) config: Read<perfstat_partition_config_t>,
    pub(crate) cpu_total: Read<perfstat_cpu_total_t>,
    /// The filled entries of `perfstat_memory_page` (one per page size).
    pub(crate) pages: Read<Vec<perfstat_memory_page_t>>,
    /// `perfstat_memory_total` when the window opened; `None` without a window (or when that
    /// read failed): the paging-space counters are then since boot.
    pub(crate) memory_before: Option<perfstat_memory_total_t>,
    /// `perfstat_memory_total` at the end of the window: paging space and its traffic.
    pub(crate) memory_total: Read<perfstat_memory_total_t>,
    /// `os_default_pd` from `dscrctl -q`.
    pub(crate) dscr: Read<u64>,
    pub(crate) process: Read<RawProcess>,
    /// The server's directories and their `df -k` output, or why there are none (not
    /// connected, a remote server): the reason of an unavailable `storage` section.
    pub(crate) storage: Read<Vec<RawDir>>,
    /// mariadbd's `perfstat_process` when the window opened (its CPU time over the window;
    /// the closing reading is [`RawProcess::perfstat`]): `None` when no window was opened
    /// (`--sample-window 0`, mariadbd not found, not the live system), else the reading or
    /// why it failed.
    pub(crate) process_before: Option<Read<perfstat_process_t>>,
}

/// One server directory (`datadir`, `tmpdir`, ...) and what `df -k` printed for it.
#[derive(Debug, Clone)]
pub(crate) struct RawDir {
    pub(crate) role: String,
    /// As the server names it.
    pub(crate) path: String,
    pub(crate) df: Read<String>,
}

/// Why the AIX storage section has no device busy time.
/// (perfstat_disk_t is not bound: IBM publishes its field names, not the sizes and offsets a
/// binding must check; see README.md.)
pub(crate) const NO_DISK_BUSY: &str =
    "disk busy time is not read on AIX yet (perfstat_disk_t is not bound)";

/// What was read about mariadbd.
#[derive(Debug, Clone)]
pub(crate) struct RawProcess {
    pub(crate) pid: u32,
    /// `pid_file` or `process name`.
    pub(crate) found_by: String,
    pub(crate) perfstat: Read<perfstat_process_t>,
    pub(crate) page_sizes: Read<PageSizes>,
    /// `LDR_CNTRL` from its environment: `Ok(None)` = environment read, not set.
    pub(crate) ldr_cntrl: Read<Option<String>>,
    /// Loaded modules (`procldd`).
    pub(crate) modules: Read<Vec<String>>,
}

/// The snapshot's OS facts from one window's raw values, each section a collector of its own
/// (`os/sections.rs`, in that order) run through [`collector::execute`]: the sections share
/// one libperfstat reading, so a run times the section's translation, not the reading. The
/// sections AIX does not read yet are skipped by design and report no run.
pub(crate) fn collect(raw: &Raw, selection: &Selection) -> (OsFacts, Vec<CollectorRun>) {
    let window: Read<Window> = match &raw.now {
        Ok(now) => Ok(Window::of(now, raw.before.as_ref(), raw.window_secs)),
        Err(e) => Err(e.clone()),
    };
    let mut runs = Vec::new();
    let mut f = OsFacts::unavailable("live", "not collected");
    f.process = section(&sections::PROCESS, selection, &mut runs, || process(raw));
    f.cpu_time = section(&sections::CPU_TIME, selection, &mut runs, || {
        window.clone().map(|w| CpuTime {
            basis: w.basis.clone(),
            steal_share: w.steal_share,
            busy_share: w.busy_share,
            // PURR counters have timebase resolution: no tick granularity to guard against.
            ticks: None,
            since_boot_steal_share: None,
            since_boot_seconds: None,
        })
    });
    f.cpu = section(&sections::CPU, selection, &mut runs, || {
        cpu(raw, window.as_ref().ok())
    });
    f.topology = section(&sections::TOPOLOGY, selection, &mut runs, || {
        Err::<powerdiag_rules::Topology, _>(CollectError::skipped(TOPOLOGY))
    });
    f.memory = section(&sections::MEMORY, selection, &mut runs, || memory(raw));
    f.partition = section(&sections::PARTITION, selection, &mut runs, || {
        match (&raw.now, &window) {
            (Ok(now), Ok(w)) => Ok(partition(now, w)),
            (Err(e), _) | (_, Err(e)) => Err(e.clone()),
        }
    });
    f.counters = section(&sections::COUNTERS, selection, &mut runs, || {
        Err::<powerdiag_rules::PerfCounters, _>(CollectError::skipped(COUNTERS))
    });
    f.swap = section(&sections::SWAP, selection, &mut runs, || swap(raw));
    f.storage = section(&sections::STORAGE, selection, &mut runs, || storage(raw));
    let online = f.cpu.as_ref().ok().map(|c| c.threads).filter(|n| *n > 0);
    f.saturation = section(&sections::SATURATION, selection, &mut runs, || {
        saturation(raw, online)
    });
    (f, runs)
}

/// The snapshot's OS facts from one window's raw values, every section enabled.
#[cfg(test)]
pub(crate) fn os_facts(raw: &Raw) -> OsFacts {
    collect(raw, &Selection::defaults()).0
}

/// One section: run, timed and stored.
fn section<T>(
    d: &Descriptor,
    selection: &Selection,
    runs: &mut Vec<CollectorRun>,
    read: impl FnOnce() -> Read<T>,
) -> Gathered<T> {
    let (out, run) = collector::execute(d, selection, None, read);
    runs.extend(run);
    collector::gathered(out)
}

/// The filesystems under the server's directories, one entry per mount point with the roles
/// it holds, as the Linux collector groups them: size and free space from `df -k` (1024-byte
/// blocks), inodes derived from its `Iused` and `%Iused` (approximate: see [`ps::Inodes`];
/// none for a remote filesystem or `%Iused` 0); a directory `df` could not read is its own
/// entry with the reason.
fn storage(raw: &Raw) -> Read<Vec<Filesystem>> {
    let dirs = raw.storage.as_ref().map_err(Clone::clone)?;
    let mut by_mount: Vec<(String, Filesystem)> = Vec::new();
    for d in dirs {
        let row =
            d.df.as_ref()
                .map_err(Clone::clone)
                .and_then(|out| ps::parse_df(out));
        let key = match &row {
            Ok(r) => r.mount_point.clone(),
            Err(_) => d.path.clone(),
        };
        if let Some((_, fs)) = by_mount.iter_mut().find(|(k, _)| *k == key) {
            fs.roles.push(d.role.clone());
            continue;
        }
        let mut fs = Filesystem {
            roles: vec![d.role.clone()],
            path: d.path.clone(),
            io_unread: Some(NO_DISK_BUSY.into()),
            ..Default::default()
        };
        match row {
            Ok(r) => {
                fs.mount_point = Some(r.mount_point);
                fs.device = Some(r.device);
                fs.total_bytes = r.total_kb.saturating_mul(1024);
                fs.available_bytes = r.available_kb.saturating_mul(1024);
                fs.inodes_total = r.inodes.map(|i| i.total);
                fs.inodes_available = r.inodes.map(|i| i.available);
            }
            Err(e) => fs.space_unread = Some(e.to_string()),
        }
        by_mount.push((key, fs));
    }
    Ok(by_mount.into_iter().map(|(_, fs)| fs).collect())
}

/// `perfstat_partition_total` counters over the window (or since boot), and what follows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    /// `window 1.00 s` or `since boot`.
    pub(crate) basis: String,
    /// Δ(puser + psys) / Δ(puser + psys + pidle + pwait): the busy share of the processor
    /// time the partition consumed.
    pub(crate) busy_share: Option<f64>,
    /// Effective / nominal frequency: ΔSPURR/ΔPURR.
    pub(crate) spurr_ratio: Option<f64>,
    pub(crate) spurr_source: Option<String>,
    /// Dedicated partitions: Δbusy_stolen_purr over all the partition's processor time
    /// (consumed + donated + stolen). `None` on shared partitions, which have no such counter.
    pub(crate) steal_share: Option<f64>,
    pub(crate) involuntary_vcsw: u64,
    pub(crate) voluntary_vcsw: u64,
    pub(crate) phantom_interrupts: u64,
    // Not in the snapshot yet: `PartitionFacts` has no fields for them (README, "Open items").
    /// Physical processors consumed (`lparstat` physc): ΔPURR / Δtimebase.
    #[cfg_attr(not(test), allow(dead_code, reason = "no PartitionFacts field yet"))]
    pub(crate) consumed_cpus: Option<f64>,
    /// Idle processors in the shared pool (`lparstat` app): Δpool_idle_time (ns) over the
    /// window; needs `pool_util_authority`.
    #[cfg_attr(not(test), allow(dead_code, reason = "no PartitionFacts field yet"))]
    pub(crate) pool_idle_cpus: Option<f64>,
    /// Δ(idle_donated_purr + busy_donated_purr), timebase ticks.
    #[cfg_attr(not(test), allow(dead_code, reason = "no PartitionFacts field yet"))]
    pub(crate) donated_purr: u64,
    /// Δ(idle_stolen_purr + busy_stolen_purr), timebase ticks.
    #[cfg_attr(not(test), allow(dead_code, reason = "no PartitionFacts field yet"))]
    pub(crate) stolen_purr: u64,
}

impl Window {
    /// Deltas from `before` to `now`; totals since boot when there is no usable `before`.
    pub(crate) fn of(now: &PartitionTotal, before: Option<&PartitionTotal>, secs: f64) -> Window {
        let t = &now.data;
        let b = before
            .filter(|b| t.timebase_last > b.data.timebase_last)
            .map(|b| &b.data);
        let d = |f: fn(&perfstat_partition_total_t) -> u64| match b {
            Some(b) => f(t).saturating_sub(f(b)),
            None => f(t),
        };
        let (basis, over) = match b {
            Some(_) => (format!("window {secs:.2} s"), format!("over {secs:.2} s")),
            None => ("since boot".to_owned(), "since boot".to_owned()),
        };
        let flags = t.type_.flags();
        let busy = d(|x| x.puser).saturating_add(d(|x| x.psys));
        let purr = busy
            .saturating_add(d(|x| x.pidle))
            .saturating_add(d(|x| x.pwait));
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);

        // SPURR/PURR: while busy (user + system) when the partition runs in SPURR mode, else
        // the 7.1 total counters.
        let busy_spurr = d(|x| x.puser_spurr).saturating_add(d(|x| x.psys_spurr));
        let counters_filled = now.layout == PartitionTotalLayout::Aix71
            && before.is_none_or(|b| b.layout == PartitionTotalLayout::Aix71);
        let (spurr_ratio, spurr_source) = if t.spurrflag != 0 && busy > 0 && busy_spurr > 0 {
            (
                share(busy_spurr, busy),
                Some(format!("SPURR/PURR (user+system) {over}")),
            )
        } else if counters_filled && d(|x| x.purr_counter) > 0 && d(|x| x.spurr_counter) > 0 {
            (
                share(d(|x| x.spurr_counter), d(|x| x.purr_counter)),
                Some(format!("SPURR/PURR {over}")),
            )
        } else {
            (None, None)
        };

        let donated = d(|x| x.idle_donated_purr).saturating_add(d(|x| x.busy_donated_purr));
        let stolen = d(|x| x.idle_stolen_purr).saturating_add(d(|x| x.busy_stolen_purr));
        let steal_share = if flags.shared_enabled() {
            None
        } else {
            share(
                d(|x| x.busy_stolen_purr),
                purr.saturating_add(donated).saturating_add(stolen),
            )
        };
        let timebase = d(|x| x.timebase_last);
        let pool_idle_cpus =
            (flags.shared_enabled() && flags.pool_util_authority() && b.is_some() && secs > 0.0)
                .then(|| d(|x| x.pool_idle_time) as f64 / (secs * 1e9));
        Window {
            basis,
            busy_share: share(busy, purr),
            spurr_ratio,
            spurr_source,
            steal_share,
            involuntary_vcsw: d(|x| x.invol_virt_cswitch),
            voluntary_vcsw: d(|x| x.vol_virt_cswitch),
            phantom_interrupts: d(|x| x.phantintrs),
            consumed_cpus: share(purr, timebase),
            pool_idle_cpus,
            donated_purr: donated,
            stolen_purr: stolen,
        }
    }
}

/// `Some(v)` for positive values of a C int.
fn positive(v: i32) -> Option<u32> {
    u32::try_from(v).ok().filter(|v| *v > 0)
}

fn text(name: &[core::ffi::c_char]) -> Option<String> {
    let s = String::from_utf8_lossy(name_bytes(name)).trim().to_owned();
    (!s.is_empty()).then_some(s)
}

/// `perfstat_cpu_total.loadavg` is fixed point with this many fraction bits (`SBITS`).
const LOADAVG_SHIFT: u32 = 16;

/// The load averages against the online CPUs, and mariadbd's CPU time over the window from
/// two `perfstat_process` readings. AIX has no CPU pressure figures: named.
fn saturation(raw: &Raw, online_cpus: Option<u32>) -> Read<CpuSaturation> {
    let c = raw.cpu_total.as_ref().map_err(Clone::clone)?;
    let load = c
        .loadavg
        .map(|v| v as f64 / f64::from(1u32 << LOADAVG_SHIFT));
    let (process, process_unread) = match process_cpu(raw, online_cpus) {
        Ok(p) => (Some(p), None),
        Err(why) => (None, Some(why)),
    };
    Ok(CpuSaturation {
        online_cpus,
        procs_running: None,
        load: Some(load),
        pressure: None,
        pressure_unread: Some("AIX has no CPU pressure (PSI) figures".into()),
        process,
        process_unread,
    })
}

/// `perfstat_process`'s CPU times are in milliseconds, but AIX charges a process's CPU time
/// at its clock tick (10 ms, HZ 100): the window's time is counted in those ticks, so that
/// PD806's interval is as wide as the measurement is coarse.
const PROCESS_CPU_TICKS_PER_SECOND: u64 = 100;

/// mariadbd's user + system CPU time over the window, against the online logical CPUs, or
/// why it was not measured.
///
/// `perfstat_process_t.ucpu_time` and `scpu_time` are doubles whose unit depends on the call:
/// IBM documents them as "User/System mode CPU time is in percentage or milliseconds based on
/// whether it is filled by perfstat_process_util or perfstat_process respectively". The
/// collector calls `perfstat_process` (perfstat-sys `process`), so they are cumulative
/// milliseconds since the process started (perfstat-sys's `include/perfstat.h`: "ms from
/// perfstat_process"); their difference over the window is the CPU time used in it, counted
/// here as ticks of 1 ms.
///
/// AIX has no cgroups and the collector reads no affinity (`bindprocessor`, WLM, RSETs), so
/// the CPUs it may use are the online logical CPUs (`cpu.threads`).
fn process_cpu(raw: &Raw, online: Option<u32>) -> Result<ProcessCpu, String> {
    let p = raw.process.as_ref().map_err(ToString::to_string)?;
    let Some(before) = &raw.process_before else {
        return Err(
            "no window (--sample-window 0): doctor --sample-window or the agent's [sample] window measures it, from a perfstat_process reading at each end"
                .into(),
        );
    };
    let before = before.as_ref().map_err(|e| {
        format!("mariadbd's perfstat_process reading at the window's start failed: {e}")
    })?;
    let now = p.perfstat.as_ref().map_err(|e| {
        format!("mariadbd's perfstat_process reading at the window's end failed: {e}")
    })?;
    let secs = raw.window_secs;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!(
            "no window: its length is {secs} s (doctor --sample-window or the agent's [sample] window measures it)"
        ));
    }
    if before.pid != now.pid {
        return Err(format!(
            "the perfstat_process readings are of two processes (pid {} at the window's start, {} at its end): mariadbd restarted during the window",
            before.pid, now.pid
        ));
    }
    let cpu_ms = |r: &perfstat_process_t| {
        let ms = r.ucpu_time + r.scpu_time;
        (ms.is_finite() && ms >= 0.0).then_some(ms)
    };
    let (Some(a), Some(b)) = (cpu_ms(before), cpu_ms(now)) else {
        return Err(format!(
            "perfstat_process gave no usable CPU time (ucpu_time + scpu_time: {} ms at the window's start, {} ms at its end)",
            before.ucpu_time + before.scpu_time,
            now.ucpu_time + now.scpu_time
        ));
    };
    if b < a {
        return Err(format!(
            "mariadbd's CPU time went backwards over the window ({a:.0} ms at the start, {b:.0} ms at the end): restarted under the same pid?"
        ));
    }
    let Some(allowed) = online.filter(|n| *n > 0) else {
        return Err("the online logical CPUs are unknown".into());
    };
    Ok(ProcessCpu {
        basis: format!("window {secs:.2} s"),
        window_seconds: secs,
        // Whole milliseconds: `as` saturates, and the difference is finite and ≥ 0.
        ticks: ((b - a) / 10.0).round() as u64,
        ticks_per_second: PROCESS_CPU_TICKS_PER_SECOND,
        allowed_cpus: f64::from(allowed),
        allowed_by: "online logical CPUs".into(),
        cgroup: None,
    })
}

fn cpu(raw: &Raw, window: Option<&Window>) -> Read<CpuFacts> {
    let total = raw.now.as_ref().ok().map(|t| &t.data);
    let config = raw.config.as_ref().ok();
    let cpu_total = raw.cpu_total.as_ref().ok();
    if total.is_none() && config.is_none() && cpu_total.is_none() {
        return Err(reasons(&[
            raw.now.as_ref().err(),
            raw.config.as_ref().err(),
            raw.cpu_total.as_ref().err(),
        ]));
    }
    let smt_enabled = total
        .map(|t| t.type_.flags())
        .or_else(|| config.map(|c| c.conf.flags()))
        .map(|f| f.smt_enabled());
    let smt = total
        .map(|t| t.smt_thrds)
        .filter(|n| *n > 0)
        .or_else(|| config.map(|c| c.smtthreads).filter(|n| *n > 0));
    let threads = total
        .map(|t| t.online_lcpus)
        .filter(|n| *n > 0)
        .or_else(|| config.map(|c| c.lcpus).filter(|n| *n > 0))
        .or_else(|| cpu_total.and_then(|c| positive(c.ncpus)))
        .unwrap_or(0);
    let cores = total
        .and_then(|t| positive(t.online_cpus))
        .or_else(|| config.and_then(|c| u32::try_from(c.vcpus.online).ok().filter(|n| *n > 0)));
    let model = cpu_total
        .and_then(|c| text(&c.description))
        .or_else(|| config.and_then(|c| text(&c.processorFamily)));
    let (nominal_mhz, nominal_source) = match (
        config
            .map(processor_mhz)
            .filter(|m| m.is_finite() && *m > 0.0),
        cpu_total.map(|c| c.processorHZ).filter(|hz| *hz > 0),
    ) {
        (Some(mhz), _) => (
            Some(mhz),
            Some("perfstat_partition_config processorMHz".to_owned()),
        ),
        (None, Some(hz)) => (
            Some(hz as f64 / 1e6),
            Some("perfstat_cpu_total processorHZ".to_owned()),
        ),
        (None, None) => (None, None),
    };
    let (effective_mhz, effective_source) = match (window.and_then(|w| w.spurr_ratio), nominal_mhz)
    {
        (Some(r), Some(n)) => (Some(r * n), window.and_then(|w| w.spurr_source.clone())),
        _ => (None, None),
    };
    Ok(CpuFacts {
        model,
        // AIX runs big-endian 64-bit on POWER only.
        architecture: "ppc64".into(),
        power: true,
        cores,
        threads,
        threads_per_core: smt,
        smt_control: match (smt_enabled, smt) {
            (Some(false), _) => Some("off".into()),
            (_, Some(n)) => Some(format!("smt{n}")),
            (_, None) => None,
        },
        smt_active: smt.map(|n| n > 1 && smt_enabled != Some(false)),
        nominal_mhz,
        nominal_source,
        effective_mhz,
        effective_source,
        busy_share: window.and_then(|w| w.busy_share),
        dscr_default: raw.dscr.as_ref().ok().copied(),
        ..Default::default()
    })
}

fn reasons(errs: &[Option<&CollectError>]) -> CollectError {
    CollectError::Several(errs.iter().flatten().map(|e| (*e).clone()).collect())
}

/// `None`: not a logical partition.
fn partition(now: &PartitionTotal, w: &Window) -> Option<PartitionFacts> {
    let t = &now.data;
    let f = t.type_.flags();
    if !f.lpar_enabled() {
        return None;
    }
    let shared = f.shared_enabled();
    Some(PartitionFacts {
        shared,
        capped: f.capped(),
        donating: f.donate_enabled(),
        entitled_capacity: (t.entitled_proc_capacity > 0)
            .then(|| f64::from(t.entitled_proc_capacity) / 100.0),
        online_vcpus: positive(t.online_cpus),
        max_vcpus: positive(t.max_cpus),
        smt_threads: Some(t.smt_thrds).filter(|n| *n > 0),
        pool_id: if shared {
            u32::try_from(t.pool_id).ok()
        } else {
            None
        },
        pool_cpus: if shared {
            positive(t.phys_cpus_pool).map(f64::from)
        } else {
            None
        },
        counters_basis: Some(w.basis.clone()),
        // lparstat's vcsw: every virtual context switch is a (re)dispatch of a virtual
        // processor, as Linux's lparcfg `dispatches` is.
        dispatches: Some(w.involuntary_vcsw.saturating_add(w.voluntary_vcsw)),
        // No perfstat_partition_total counterpart (Linux: vcpudispatch_stats).
        dispatch_dispersions: None,
        involuntary_vcsw: Some(w.involuntary_vcsw),
        voluntary_vcsw: Some(w.voluntary_vcsw),
        phantom_interrupts: Some(w.phantom_interrupts),
        far_dispatches: None,
    })
}

fn memory(raw: &Raw) -> Read<MemoryFacts> {
    let pages = raw.pages.as_ref().map_err(Clone::clone)?;
    let mut sizes: Vec<u64> = pages.iter().map(|p| p.psize).filter(|s| *s > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return Err(CollectError::Library {
            call: "perfstat_memory_page",
            message: "perfstat_memory_page reported no page sizes".into(),
        });
    }
    // The 16 MB large-page pool (vmo lgpg_regions) is AIX's counterpart of Linux's HugeTLB
    // pool: pinned, reserved up front, used only on request.
    let large = pages.iter().find(|p| p.psize == PAGE_16M);
    // Paging space (AIX's swap) and the memory available without paging out working
    // storage, from perfstat_memory_total; unknown when that call failed. real_avail is 0 in
    // layouts before it existed: unknown, not "nothing available".
    let total = raw.memory_total.as_ref().ok();
    Ok(MemoryFacts {
        base_page_bytes: sizes.first().copied(),
        hugepages_total: large.map(|p| p.real_total),
        hugepages_free: large.map(|p| p.real_free),
        hugepage_bytes: large.map(|_| PAGE_16M),
        page_sizes: sizes,
        swap_total_bytes: total.map(|t| t.pgsp_total.saturating_mul(AIX_PAGE)),
        swap_free_bytes: total.map(|t| t.pgsp_free.saturating_mul(AIX_PAGE)),
        available_bytes: total
            .filter(|t| t.real_avail > 0)
            .map(|t| t.real_avail.saturating_mul(AIX_PAGE)),
        ..Default::default()
    })
}

/// AIX counts memory and paging space in 4 KB pages in `perfstat_memory_total_t`.
const AIX_PAGE: u64 = 4096;

/// Paging-space traffic (`pgspins`/`pgspouts`, 4 KB pages) over the window, else since boot.
fn swap(raw: &Raw) -> Read<SwapActivity> {
    let now = raw.memory_total.as_ref().map_err(Clone::clone)?;
    let (basis, pages_in, pages_out) = match &raw.memory_before {
        Some(b) if now.pgspins >= b.pgspins && now.pgspouts >= b.pgspouts => (
            format!("window {:.2} s", raw.window_secs),
            now.pgspins - b.pgspins,
            now.pgspouts - b.pgspouts,
        ),
        _ => ("since boot".to_owned(), now.pgspins, now.pgspouts),
    };
    Ok(SwapActivity {
        basis,
        pages_in,
        pages_out,
        total_pages_in: now.pgspins,
        total_pages_out: now.pgspouts,
        page_bytes: Some(AIX_PAGE),
    })
}

fn process(raw: &Raw) -> Read<ProcessFacts> {
    let p = raw.process.as_ref().map_err(Clone::clone)?;
    let ps = p.perfstat.as_ref().ok();
    let sizes = p.page_sizes.as_ref().ok();
    let (compiler, compiler_evidence, allocator, allocator_evidence) = match &p.modules {
        Ok(modules) => {
            let (c, ce) = compiler(modules);
            let (a, ae) = allocator(modules);
            (c, Some(ce), Some(a), Some(ae))
        }
        Err(why) => (None, Some(why.to_string()), None, None),
    };
    Ok(ProcessFacts {
        pid: p.pid,
        name: ps
            .and_then(|s| text(&s.proc_name))
            .unwrap_or_else(|| NAMES[0].to_owned()),
        found_by: p.found_by.clone(),
        // perfstat_process_t::real_inuse is in KB (text, data, shared libraries, file pages,
        // shared memory and mappings).
        rss_bytes: ps.map(|s| s.real_inuse.saturating_mul(1024)),
        // pgsp_inuse: the paging space it holds, in KB as real_inuse (Linux's VmSwap).
        swap_bytes: ps.map(|s| s.pgsp_inuse.saturating_mul(1024)),
        data_page_bytes: sizes.and_then(|s| s.data),
        text_page_bytes: sizes.and_then(|s| s.text),
        stack_page_bytes: sizes.and_then(|s| s.stack),
        ldr_cntrl: match &p.ldr_cntrl {
            Ok(Some(v)) => Some(v.clone()),
            Ok(None) => Some(String::new()),
            Err(_) => None,
        },
        allocator,
        allocator_evidence,
        compiler,
        compiler_evidence,
        threads: ps.and_then(|s| u32::try_from(s.num_threads).ok()),
        ..Default::default()
    })
}

/// The archive (or file) name and the member of a loaded module:
/// `/usr/lib/libc.a[shr_64.o]` → (`libc.a`, `shr_64.o`).
fn module_names(module: &str) -> (&str, &str) {
    let (path, member) = match module.split_once('[') {
        Some((p, m)) => (p, m.trim_end_matches(']')),
        None => (module, ""),
    };
    (path.rsplit('/').next().unwrap_or(path), member)
}

/// Which compiler's C++ runtime is loaded, and the evidence in words.
///
/// GCC: `libstdc++` or `libgcc_s` (AIX Toolbox, `/opt/freeware`); IBM Open XL: LLVM `libc++` /
/// `libc++abi` (fileset `libc++.rte`); IBM XL C/C++ (classic): `libC.a`.
pub(crate) fn compiler(modules: &[String]) -> (Option<Compiler>, String) {
    let find = |pred: &dyn Fn(&str, &str) -> bool| {
        modules.iter().find(|m| {
            let (file, member) = module_names(m);
            pred(file, member)
        })
    };
    let starts = |prefix: &'static str| {
        move |f: &str, m: &str| f.starts_with(prefix) || m.starts_with(prefix)
    };
    let stdcxx = find(&starts("libstdc++"));
    let libgcc = find(&starts("libgcc_s"));
    let libcxx = find(&starts("libc++"));
    let toolbox = |m: &str| {
        if m.starts_with("/opt/freeware/") {
            " (AIX Toolbox)"
        } else {
            ""
        }
    };
    match (stdcxx.or(libgcc), libcxx) {
        (Some(g), Some(x)) => (
            None,
            format!(
                "both GCC's {g} and Open XL's {x} are loaded; which one mariadbd itself uses cannot be told"
            ),
        ),
        (Some(g), None) => (
            Some(Compiler::Gcc),
            format!("GCC runtime loaded: {g}{}", toolbox(g)),
        ),
        (None, Some(x)) => (
            Some(Compiler::OpenXl),
            format!("Open XL runtime loaded: {x} (LLVM libc++)"),
        ),
        (None, None) => match find(&|f, _| f == "libC.a") {
            Some(xlc) => (
                Some(Compiler::Other),
                format!("IBM XL C/C++ runtime loaded: {xlc}"),
            ),
            None => (
                None,
                format!(
                    "no GCC (libstdc++, libgcc_s) or Open XL (libc++) runtime among its {} loaded modules (statically linked?)",
                    modules.len()
                ),
            ),
        },
    }
}

/// Which allocator library is loaded (as on Linux: jemalloc, tcmalloc, mimalloc, else the C
/// library's malloc).
pub(crate) fn allocator(modules: &[String]) -> (Allocator, String) {
    for (prefix, kind) in [
        ("libjemalloc", Allocator::Jemalloc),
        ("libtcmalloc", Allocator::Tcmalloc),
        ("libmimalloc", Allocator::Mimalloc),
    ] {
        if let Some(m) = modules.iter().find(|m| {
            let (file, member) = module_names(m);
            file.starts_with(prefix) || member.starts_with(prefix)
        }) {
            return (kind, m.clone());
        }
    }
    (
        Allocator::Libc,
        "no jemalloc, tcmalloc or mimalloc library loaded".into(),
    )
}

#[cfg(test)]
mod tests;
