//! Operating-system facts: CPU, topology, memory pages, the mariadbd process, partition and
//! hardware counters. Filled by the Linux collector (procfs/sysfs/perf) and the AIX collector
//! (libperfstat); every section is gathered independently, so a malformed source loses only its
//! own facts, with the reason.

use serde::{Deserialize, Serialize};

use crate::{Gathered, Verdict};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OsFacts {
    /// Where the facts were read: `live`, or the recorded tree (`--path.procfs` etc.).
    pub source: String,
    pub cpu: Gathered<CpuFacts>,
    pub topology: Gathered<Topology>,
    pub memory: Gathered<MemoryFacts>,
    /// The mariadbd process; `Unavailable` when it was not found.
    pub process: Gathered<ProcessFacts>,
    /// CPU time shares (steal) over the sample window or since boot.
    pub cpu_time: Gathered<CpuTime>,
    /// `Available(None)`: not a partitioned (PowerVM) machine.
    pub partition: Gathered<Option<PartitionFacts>>,
    pub counters: Gathered<PerfCounters>,
    /// Swap-ins and swap-outs of the whole system over the window (or since boot).
    #[serde(default = "not_collected::<SwapActivity>")]
    pub swap: Gathered<SwapActivity>,
    /// The filesystems under the server's `datadir`, `tmpdir` and InnoDB log directory (a
    /// server on this host only), with their device's busy time over the window.
    #[serde(default = "not_collected::<Vec<Filesystem>>")]
    pub storage: Gathered<Vec<Filesystem>>,
    /// Whether threads waited for a CPU: the host's run queue and CPU pressure, and mariadbd's
    /// CPU use against what it may use (affinity, cgroup quota) over the window (PD806).
    #[serde(default = "not_collected::<CpuSaturation>")]
    pub saturation: Gathered<CpuSaturation>,
}

fn not_collected<T>() -> Gathered<T> {
    Gathered::Unavailable("not collected (a snapshot from an older powerdiag)".into())
}

impl OsFacts {
    /// Every section unavailable for the same reason.
    pub fn unavailable(source: &str, why: &str) -> OsFacts {
        let u = || why.to_owned();
        OsFacts {
            source: source.to_owned(),
            cpu: Gathered::Unavailable(u()),
            topology: Gathered::Unavailable(u()),
            memory: Gathered::Unavailable(u()),
            process: Gathered::Unavailable(u()),
            cpu_time: Gathered::Unavailable(u()),
            partition: Gathered::Unavailable(u()),
            counters: Gathered::Unavailable(u()),
            swap: Gathered::Unavailable(u()),
            storage: Gathered::Unavailable(u()),
            saturation: Gathered::Unavailable(u()),
        }
    }
}

/// A gathered section or the `insufficient_data` verdict naming it.
pub fn section<'a, T>(g: &'a Gathered<T>, what: &str) -> Result<&'a T, Verdict> {
    match g {
        Gathered::Available(v) => Ok(v),
        // Collectors that already say "unavailable: ..." are not told twice.
        Gathered::Unavailable(why) if why.starts_with("unavailable") => {
            Err(Verdict::insufficient(format!("{what} {why}")))
        }
        Gathered::Unavailable(why) => {
            Err(Verdict::insufficient(format!("{what} unavailable: {why}")))
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuFacts {
    pub model: Option<String>,
    /// `x86_64`, `aarch64`, `ppc64le`, `ppc64`.
    pub architecture: String,
    /// True on IBM POWER (any endianness).
    pub power: bool,
    pub sockets: Option<u32>,
    pub cores: Option<u32>,
    /// Online logical CPUs.
    pub threads: u32,
    pub threads_per_core: Option<u32>,
    /// `/sys/devices/system/cpu/smt/control` (`on`, `off`, `forceoff`, `notsupported`,
    /// `notimplemented`) or the AIX SMT mode (`smt4`).
    pub smt_control: Option<String>,
    pub smt_active: Option<bool>,
    /// Nominal (rated) frequency: `/proc/cpuinfo` clock on POWER, cpufreq base or max elsewhere.
    pub nominal_mhz: Option<f64>,
    /// Where `nominal_mhz` comes from; with it `None`, why it is unknown (`unknown on a
    /// pSeries guest …`).
    pub nominal_source: Option<String>,
    /// Average current frequency (cpufreq `scaling_cur_freq`, or cpuinfo `cpu MHz`).
    pub current_mhz: Option<f64>,
    /// Where `current_mhz` comes from: `cpufreq scaling_cur_freq` or [`CPUINFO_MHZ`] (not a
    /// measurement). Absent in snapshots recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_source: Option<String>,
    /// Effective frequency over the window (SPURR/PURR × nominal on POWER).
    pub effective_mhz: Option<f64>,
    pub effective_source: Option<String>,
    /// Share of CPU time busy over the window: frequency verdicts need load.
    pub busy_share: Option<f64>,
    pub governor: Option<String>,
    /// POWER Data Stream Control Register default (`dscr_default`).
    pub dscr_default: Option<u64>,
}

/// `CpuFacts::current_source` when the current frequency is `/proc/cpuinfo`'s `cpu MHz`
/// without cpufreq: on x86 virtual machines the TSC rate the hypervisor reports, on others a
/// value fixed at boot — a figure to show, not a measured frequency.
pub const CPUINFO_MHZ: &str = "/proc/cpuinfo cpu MHz (no cpufreq: not a measurement)";

impl CpuFacts {
    /// The frequency the CPUs ran at as measured, with its source: the effective frequency
    /// over the window (SPURR/PURR on POWER), else cpufreq's current frequency — never
    /// cpuinfo's `cpu MHz` without cpufreq ([`CPUINFO_MHZ`]).
    pub fn measured_mhz(&self) -> Option<(f64, String)> {
        if let Some(e) = self.effective_mhz {
            let source = self.effective_source.as_deref().unwrap_or("SPURR/PURR");
            return Some((e, source.to_owned()));
        }
        let c = self.current_mhz?;
        match self.current_source.as_deref() {
            Some(CPUINFO_MHZ) => None,
            Some(source) => Some((c, format!("current frequency ({source})"))),
            None => Some((c, "current frequency".to_owned())),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Topology {
    /// Distinct caches (one per shared CPU set), all levels.
    pub caches: Vec<Cache>,
    /// Total L3 (last-level) cache over the CPUs mariadbd may run on.
    pub l3_total_bytes: Option<u64>,
    /// The CPU list that total covers (mariadbd's affinity, else all online CPUs).
    pub l3_cpus: Option<String>,
    pub numa_nodes: Vec<NumaNode>,
    /// Why there is no node data at all (a recorded tree without `node/`); `None` when the
    /// nodes were read, or when the live kernel has no NUMA support (one implicit node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_unread: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// `None` when sysfs lists the cache without a `size` (QEMU's arm64 `virt` machine does).
    pub size_bytes: Option<u64>,
    pub shared_cpu_list: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NumaNode {
    pub id: u32,
    pub cpu_list: String,
    pub cpus: u32,
    pub memory_total_bytes: u64,
    pub memory_free_bytes: Option<u64>,
    /// What could not be read for this node (its CPU list or its meminfo); `None` when both
    /// were read. `cpus` and `memory_total_bytes` are then 0 for "unknown", not "none".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryFacts {
    /// `MemAvailable` (Linux): what can be allocated without swapping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Swap space configured and free (`SwapTotal`, `SwapFree`; AIX: paging space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_free_bytes: Option<u64>,
    pub base_page_bytes: Option<u64>,
    /// Transparent huge pages: the bracketed choice of `enabled` and `defrag`.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    /// HugeTLB pool (`/proc/meminfo`).
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    pub hugepage_bytes: Option<u64>,
    /// Page sizes the system supports, bytes (AIX: 4K, 64K, 16M, 16G).
    pub page_sizes: Vec<u64>,
}

/// Which allocator the process has mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Allocator {
    Jemalloc,
    Tcmalloc,
    Mimalloc,
    /// No known allocator library mapped: the C library's malloc.
    Libc,
}

/// Which compiler built mariadbd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compiler {
    Gcc,
    OpenXl,
    Other,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessFacts {
    pub pid: u32,
    pub name: String,
    /// How it was found: `pid_file` or `process name`.
    pub found_by: String,
    pub rss_bytes: Option<u64>,
    /// Anonymous memory backed by transparent huge pages.
    pub anon_huge_bytes: Option<u64>,
    /// Page sizes of its mappings, bytes: `KernelPageSize` / `MMUPageSize` values seen (Linux).
    pub kernel_page_sizes: Vec<u64>,
    pub mmu_page_sizes: Vec<u64>,
    /// AIX: data, text and stack page sizes (`getprocs64`), bytes.
    pub data_page_bytes: Option<u64>,
    pub text_page_bytes: Option<u64>,
    pub stack_page_bytes: Option<u64>,
    /// AIX: `LDR_CNTRL` from its environment; `Some("")` = read, absent.
    pub ldr_cntrl: Option<String>,
    /// `THP_enabled: 0` in its status: the process switched transparent huge pages off for
    /// itself (`prctl(PR_SET_THP_DISABLE)`), whatever the system setting.
    #[serde(default)]
    pub thp_disabled: Option<bool>,
    pub allocator: Option<Allocator>,
    /// The library that identified the allocator, e.g. `libjemalloc.so.2`; with no
    /// allocator, why it is unknown (e.g. `/proc/PID/maps is empty`).
    pub allocator_evidence: Option<String>,
    pub compiler: Option<Compiler>,
    pub compiler_evidence: Option<String>,
    /// CPUs it may run on.
    pub affinity: Option<String>,
    pub affinity_cpus: Option<u32>,
    pub threads: Option<u32>,
    /// mariadbd's memory in swap (`VmSwap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuTime {
    /// `window 1.00 s` or `since boot`.
    pub basis: String,
    pub steal_share: Option<f64>,
    pub busy_share: Option<f64>,
    /// Linux: the `/proc/stat` ticks (USER_HZ, all CPUs) the shares were computed from. A
    /// 1 s window on 2 CPUs is 200 ticks, where a handful of stolen ticks swing the share by
    /// several points. `None` where the counters are not tick-based (AIX PURR, timebase
    /// resolution) or in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticks: Option<u64>,
    /// Linux: the steal share since boot, beside a window's, for when the window is too short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_boot_steal_share: Option<f64>,
    /// Linux: the CPU time of all CPUs since boot per mode, in seconds (`/proc/stat` ticks /
    /// USER_HZ): the running counters the window shares are differences of, so a metric can
    /// count all of the time and not only the window. `None` elsewhere or in older snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_boot_seconds: Option<CpuSeconds>,
}

/// CPU time since boot of all CPUs, per mode, in seconds (the aggregate `cpu` line of
/// `/proc/stat`; guest time is already inside `user` and `nice`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuSeconds {
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub idle: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
}

impl CpuSeconds {
    /// `(mode, seconds)` in `/proc/stat` order, the mode as node_exporter names it.
    pub fn modes(&self) -> [(&'static str, f64); 8] {
        [
            ("user", self.user),
            ("nice", self.nice),
            ("system", self.system),
            ("idle", self.idle),
            ("iowait", self.iowait),
            ("irq", self.irq),
            ("softirq", self.softirq),
            ("steal", self.steal),
        ]
    }
}

/// Whether runnable threads waited for a CPU (PD806).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuSaturation {
    /// The CPUs the kernel schedules on (`/sys/devices/system/cpu/online`; AIX: online logical
    /// CPUs).
    pub online_cpus: Option<u32>,
    /// Threads runnable at the window's end (`procs_running` of `/proc/stat`; an instant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procs_running: Option<u32>,
    /// Load averages over 1, 5 and 15 minutes (runnable threads plus, on Linux, those in
    /// uninterruptible sleep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<[f64; 3]>,
    /// The kernel's CPU pressure (PSI), `None` where it has none (`pressure_unread` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<CpuPressure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_unread: Option<String>,
    /// mariadbd's CPU use over the window against what it may use, `None` when it was not
    /// measured (`process_unread` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessCpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_unread: Option<String>,
}

/// `/proc/pressure/cpu`'s `some` line: the share of wall time during which at least one
/// runnable thread waited for a CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuPressure {
    /// The kernel's running averages over the last 10, 60 and 300 seconds (0–1).
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// The share over the sample window, from the `total` stall time (µs); `None` without a
    /// window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_share: Option<f64>,
    /// The `total` counter: microseconds of stall since boot (for the metric).
    #[serde(default)]
    pub total_us: u64,
}

/// mariadbd's CPU time over a window, against the CPUs it may use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessCpu {
    /// What the window was: `window 1.00 s`, or `since the agent's last sample (60.0 s)`.
    pub basis: String,
    pub window_seconds: f64,
    /// User and system time of all its threads over the window, in ticks of
    /// `ticks_per_second` (Linux: USER_HZ clock ticks; AIX: 10 ms clock ticks).
    pub ticks: u64,
    /// Ticks per second (Linux: USER_HZ; AIX: 100).
    pub ticks_per_second: u64,
    /// The CPUs it may use: the least of the online CPUs, its affinity and its cgroup quota.
    pub allowed_cpus: f64,
    /// What set `allowed_cpus` (`online CPUs`, `CPU affinity`, `cgroup CPU quota`).
    pub allowed_by: String,
    /// Its cgroup's CPU controller, when one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupCpu>,
}

impl ProcessCpu {
    /// CPUs used on average over the window.
    pub fn cpus_used(&self) -> f64 {
        if self.window_seconds <= 0.0 || self.ticks_per_second == 0 {
            return 0.0;
        }
        self.ticks as f64 / self.ticks_per_second as f64 / self.window_seconds
    }
    /// The clock ticks it could have used over the window (rounded down, at least the used).
    pub fn allowed_ticks(&self) -> u64 {
        let t = self.allowed_cpus * self.window_seconds * self.ticks_per_second as f64;
        (t.max(0.0) as u64).max(self.ticks)
    }
}

/// A cgroup's CPU controller: its quota and its throttling over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CgroupCpu {
    /// The cgroup (as in `/proc/PID/cgroup`) whose quota is the tightest, else mariadbd's own.
    pub path: String,
    /// 1 or 2.
    pub version: u8,
    /// `cpu.max` (v2) or `cpu.cfs_quota_us / cpu.cfs_period_us` (v1) in CPUs; `None`: no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_cpus: Option<f64>,
    /// Enforcement periods over the window and those in which it was throttled (`cpu.stat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_seconds: Option<f64>,
}

/// A PowerVM logical partition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartitionFacts {
    /// Shared-processor partition (else dedicated).
    pub shared: bool,
    pub capped: bool,
    /// Dedicated partition donating idle cycles (`DedDonMode=1`, perfstat `donate_enabled`).
    pub donating: bool,
    /// Entitled capacity in processor units (e.g. 1.2).
    pub entitled_capacity: Option<f64>,
    pub online_vcpus: Option<u32>,
    pub max_vcpus: Option<u32>,
    pub smt_threads: Option<u32>,
    pub pool_id: Option<u32>,
    pub pool_cpus: Option<f64>,
    /// Basis of the dispatch counters below: `window 1.00 s` or `since boot`.
    pub counters_basis: Option<String>,
    pub dispatches: Option<u64>,
    pub dispatch_dispersions: Option<u64>,
    pub involuntary_vcsw: Option<u64>,
    pub voluntary_vcsw: Option<u64>,
    pub phantom_interrupts: Option<u64>,
    /// Far redispatches (other chip/socket/node) from `vcpudispatch_stats`, when enabled.
    pub far_dispatches: Option<u64>,
}

/// Hardware and software counters for mariadbd's threads over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfCounters {
    pub window_seconds: f64,
    /// What was counted, e.g. `mariadbd pid 1234, 45 threads`.
    pub target: String,
    pub events: Vec<PerfEvent>,
}

/// Pages swapped in and out (`/proc/vmstat` `pswpin`/`pswpout`; AIX page-space ins/outs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwapActivity {
    /// `window 1.00 s` or `since boot`.
    pub basis: String,
    /// Over the basis.
    pub pages_in: u64,
    pub pages_out: u64,
    /// Since boot (counters for `rate()`).
    pub total_pages_in: u64,
    pub total_pages_out: u64,
    pub page_bytes: Option<u64>,
}

/// A filesystem holding one or more of the server's directories.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Filesystem {
    /// The server variables whose directory it holds (`datadir`, `tmpdir`,
    /// `innodb_log_group_home_dir`).
    pub roles: Vec<String>,
    /// The first directory of those, as the server names it.
    pub path: String,
    pub mount_point: Option<String>,
    pub fs_type: Option<String>,
    /// The block device (`major:minor` and name) under it, when it has one.
    pub device: Option<String>,
    pub total_bytes: u64,
    /// Free to unprivileged users (`statvfs` `f_bavail`), what mariadbd can use.
    pub available_bytes: u64,
    /// Inodes (`statvfs` `f_files`; 0 on filesystems that allocate them as needed, btrfs):
    /// `None` when not read (AIX, a tree recorded without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_total: Option<u64>,
    /// Inodes free to unprivileged users (`statvfs` `f_favail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_available: Option<u64>,
    /// The device's busy share and average requests in flight over the window.
    pub busy_share: Option<f64>,
    pub avg_in_flight: Option<f64>,
    /// `window 1.00 s`; `None` without device statistics.
    pub io_basis: Option<String>,
    /// Why there are no device statistics (no window, a filesystem without a block device).
    pub io_unread: Option<String>,
    /// Why its size and free space could not be read (`statvfs` failed for this directory);
    /// `total_bytes` and `available_bytes` are then 0 and mean nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_unread: Option<String>,
}

impl PerfCounters {
    pub fn event(&self, name: &str) -> Option<&PerfEvent> {
        self.events.iter().find(|e| e.name == name)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerfEvent {
    /// `instructions`, `cycles`, `dTLB-load-misses`, `iTLB-load-misses`,
    /// `stalled-cycles-backend`, `context-switches`, `page-faults`, `cpu-migrations`.
    pub name: String,
    pub value: Option<u64>,
    /// Why there is no value, in words a user can act on.
    pub unavailable: Option<String>,
}

impl crate::Snapshot {
    pub fn cpu(&self) -> Result<&CpuFacts, Verdict> {
        section(&self.os()?.cpu, "CPU facts")
    }
    pub fn topology(&self) -> Result<&Topology, Verdict> {
        section(&self.os()?.topology, "cache and NUMA topology")
    }
    pub fn memory(&self) -> Result<&MemoryFacts, Verdict> {
        section(&self.os()?.memory, "memory page facts")
    }
    pub fn process(&self) -> Result<&ProcessFacts, Verdict> {
        section(&self.os()?.process, "the mariadbd process")
    }
    pub fn cpu_time(&self) -> Result<&CpuTime, Verdict> {
        section(&self.os()?.cpu_time, "CPU time (steal)")
    }
    pub fn counters(&self) -> Result<&PerfCounters, Verdict> {
        section(&self.os()?.counters, "hardware counters")
    }
    pub fn swap(&self) -> Result<&SwapActivity, Verdict> {
        section(&self.os()?.swap, "swap activity")
    }
    pub fn saturation(&self) -> Result<&CpuSaturation, Verdict> {
        section(&self.os()?.saturation, "CPU saturation")
    }
    pub fn storage(&self) -> Result<&[Filesystem], Verdict> {
        section(&self.os()?.storage, "the server's filesystems").map(Vec::as_slice)
    }
    /// The PowerVM partition, or `not_applicable` when the host is not one.
    pub fn partition(&self) -> Result<&PartitionFacts, Verdict> {
        match section(&self.os()?.partition, "partition (lparcfg / perfstat)")? {
            Some(p) => Ok(p),
            None => Err(Verdict::not_applicable("not a PowerVM logical partition")),
        }
    }
    /// `not_applicable` unless the host runs `os` (`linux`, `aix`).
    pub fn require_os(&self, os: &str) -> Result<(), Verdict> {
        match self.host.as_ref() {
            Ok(h) if h.os == os => Ok(()),
            Ok(h) => Err(Verdict::not_applicable(format!(
                "applies to {os}; this host runs {}",
                h.os
            ))),
            Err(why) => Err(Verdict::insufficient(format!(
                "host facts unavailable: {why}"
            ))),
        }
    }
    /// `not_applicable` unless the CPU is IBM POWER.
    pub fn require_power(&self) -> Result<&CpuFacts, Verdict> {
        let cpu = self.cpu()?;
        if cpu.power {
            Ok(cpu)
        } else {
            Err(Verdict::not_applicable(format!(
                "applies to IBM POWER; this CPU is {}",
                cpu.architecture
            )))
        }
    }
}

pub(crate) use crate::value::pct;
