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
            // The recorded page size, else the smallest of mariadbd's mappings.
            ctx.roots
                .recorded
                .as_deref()
                .and_then(crate::collect::os::recorded::page_size)
                .or_else(|| {
                    so_far
                        .process
                        .as_ref()
                        .ok()
                        .and_then(|p| p.kernel_page_sizes.first().copied())
                })
        };
        collect(ctx.roots, base_page)
    }

    fn store(facts: &mut OsFacts, section: Gathered<MemoryFacts>) {
        facts.memory = section;
    }
}

/// The sizes of `/sys/kernel/mm/hugepages/hugepages-<N>kB`, bytes; none when absent.
fn registered_huge_page_sizes(r: &Roots) -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir(r.sys("kernel/mm/hugepages")) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let kb: u64 = name
                .to_str()?
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            kb.checked_mul(1024)
        })
        .collect()
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
    // Every huge page size the kernel registered (`hugepages-2048kB`, `hugepages-1048576kB`,
    // ...); meminfo's `Hugepagesize` is only the default one.
    page_sizes.extend(registered_huge_page_sizes(r));
    page_sizes.sort_unstable();
    page_sizes.dedup();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::os::linux::tests::write;

    /// Every size the kernel registered under `/sys/kernel/mm/hugepages` is listed, not only
    /// meminfo's default `Hugepagesize` (arm64: 64 KiB, 2 MiB, 32 MiB and 1 GiB).
    #[test]
    fn lists_every_registered_huge_page_size() {
        let dir = tempfile::tempdir().unwrap();
        let meminfo = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/linux/x86_64-vm-recorded/proc/meminfo"
        ))
        .unwrap();
        write(dir.path(), "proc/meminfo", &meminfo);
        for kb in ["64", "2048", "32768", "1048576"] {
            write(
                dir.path(),
                &format!("sys/kernel/mm/hugepages/hugepages-{kb}kB/nr_hugepages"),
                "0\n",
            );
        }
        write(dir.path(), "sys/kernel/mm/hugepages/not-a-size/x", "0\n");
        let m = collect(&Roots::tree(dir.path()), Some(4096)).unwrap();
        assert_eq!(
            m.page_sizes,
            [4096, 64 << 10, 2 << 20, 32 << 20, 1 << 30],
            "{m:?}"
        );
        assert_eq!(
            m.hugepage_bytes,
            Some(2 << 20),
            "the default stays meminfo's"
        );
    }
}
