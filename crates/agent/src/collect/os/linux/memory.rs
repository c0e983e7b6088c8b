//! Pages: base page size, transparent huge pages, the HugeTLB pool.

use powerdiag_rules::MemoryFacts;
use procfs::{FromRead, Meminfo};

use super::fs::{bracketed, read_trim};
use crate::collect::os::Roots;

/// `base_page`: the base page size when known (live: the running kernel's; a tree: the
/// mariadbd mappings' `KernelPageSize`).
pub(super) fn collect(r: &Roots, base_page: Option<u64>) -> Result<MemoryFacts, String> {
    let path = r.proc("meminfo");
    let m = Meminfo::from_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
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
    })
}
