//! Pages: base page size, transparent huge pages, the HugeTLB pool.

use crate::collect::{collector::Descriptor, os::sections};
use powerdiag_rules::{Gathered, MemoryFacts, OsFacts};
use procfs::Meminfo;

use super::fs::{bracketed, parse_procfs, read_trim};
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `memory` section. The base page is the running kernel's, or in a recorded tree the
/// page size of mariadbd's mappings (the `process` section, registered before it).
pub(super) struct Memory;

impl Collector for Memory {
    const SECTION: &'static Descriptor = &sections::MEMORY;
    type Baseline = ();
    type Output = MemoryFacts;

    fn collect(
        &self,
        ctx: &Ctx,
        _: Option<()>,
        so_far: &OsFacts,
    ) -> Result<MemoryFacts, CollectError> {
        let base_page = if ctx.roots.is_live() {
            Some(rustix::param::page_size() as u64)
        } else {
            so_far
                .process
                .as_ref()
                .ok()
                .and_then(|p| p.kernel_page_sizes.first().copied())
        };
        collect(ctx.roots, base_page)
    }

    fn store(facts: &mut OsFacts, section: Gathered<MemoryFacts>) {
        facts.memory = section;
    }
}

/// `base_page`: the base page size when known (live: the running kernel's; a tree: the
/// mariadbd mappings' `KernelPageSize`).
pub(super) fn collect(r: &Roots, base_page: Option<u64>) -> Result<MemoryFacts, CollectError> {
    let m: Meminfo = parse_procfs(&r.proc("meminfo"))?;
    let thp = |f: &str| {
        read_trim(&r.sys(format!("kernel/mm/transparent_hugepage/{f}")))
            .ok()
            .and_then(|s| bracketed(&s))
    };
    let mut page_sizes: Vec<u64> = base_page.into_iter().collect();
    page_sizes.extend(m.hugepagesize);
    Ok(MemoryFacts {
        base_page_bytes: base_page,
        thp_enabled: thp("enabled"),
        thp_defrag: thp("defrag"),
        hugepages_total: m.hugepages_total,
        hugepages_free: m.hugepages_free,
        hugepage_bytes: m.hugepagesize,
        page_sizes,
        available_bytes: m.mem_available,
        swap_total_bytes: Some(m.swap_total),
        swap_free_bytes: Some(m.swap_free),
    })
}
