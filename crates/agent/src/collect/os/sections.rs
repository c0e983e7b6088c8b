//! The OS sections, named once: each platform's registry (`linux::COLLECTORS`, the AIX
//! sections of `aix::translate`) implements these, in this order, and the flags, the runs and
//! `powerdiag collectors` take their names from here.

use crate::collect::collector::{Descriptor, Requires};

const fn section(name: &'static str, help: &'static str, requires: Requires) -> Descriptor {
    Descriptor {
        name,
        help,
        default_enabled: true,
        requires,
    }
}

pub(crate) const PROCESS: Descriptor = section(
    "process",
    "mariadbd's process: resident and swapped memory, huge pages, threads, allocator and C++ runtime",
    Requires::Nothing,
);
pub(crate) const CPU_TIME: Descriptor = section(
    "cpu_time",
    "CPU time over the window: busy and steal shares (since boot without a window)",
    Requires::Nothing,
);
pub(crate) const CPU: Descriptor = section(
    "cpu",
    "processor model, cores, SMT, nominal and effective frequency, DSCR",
    Requires::Nothing,
);
pub(crate) const TOPOLOGY: Descriptor = section(
    "topology",
    "caches (the L3 over mariadbd's CPUs) and NUMA nodes with their memory",
    Requires::Nothing,
);
pub(crate) const MEMORY: Descriptor = section(
    "memory",
    "memory, base and huge page sizes, transparent huge pages",
    Requires::Nothing,
);
pub(crate) const PARTITION: Descriptor = section(
    "partition",
    "the PowerVM partition: dedicated or shared, capped, donating, entitlement, dispatches",
    Requires::Platform("POWER"),
);
pub(crate) const COUNTERS: Descriptor = section(
    "counters",
    "perf events on mariadbd's threads over the window (TLB misses need a PMU; software events always)",
    Requires::Platform("Linux"),
);
pub(crate) const SWAP: Descriptor = section(
    "swap",
    "pages swapped in and out over the window, and swap configured",
    Requires::Nothing,
);
pub(crate) const STORAGE: Descriptor = section(
    "storage",
    "the filesystems and devices under the server's directories: free space, busy time, queue",
    Requires::Nothing,
);
pub(crate) const SATURATION: Descriptor = section(
    "saturation",
    "CPU saturation: CPU pressure, run queue and load, mariadbd's CPU use against its affinity and cgroup quota",
    Requires::Nothing,
);

/// Every OS section, in the order the platforms collect them.
pub(crate) static SECTIONS: &[&Descriptor] = &[
    &PROCESS,
    &CPU_TIME,
    &CPU,
    &TOPOLOGY,
    &MEMORY,
    &PARTITION,
    &COUNTERS,
    &SWAP,
    &STORAGE,
    &SATURATION,
];
