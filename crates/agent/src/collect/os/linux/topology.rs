//! Caches (`cpu*/cache/index*`) and NUMA nodes (`node*/cpulist`, `node*/meminfo`).

use crate::collect::{collector::Descriptor, os::sections};
use std::collections::{BTreeMap, BTreeSet};

use powerdiag_rules::{Cache, Gathered, NumaNode, OsFacts, Topology};

use super::{
    fs::{format_cpu_list, parse_cpu_list, parse_cpu_mask, parse_size, read, read_trim},
    kept::{Kept, STATIC_REUSE},
};
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `topology` section: caches and NUMA nodes; the L3 total over mariadbd's CPUs (its
/// affinity, from the `process` section registered before it).
pub(super) struct Topo;

impl Collector for Topo {
    const SECTION: &'static Descriptor = &sections::TOPOLOGY;
    type Baseline = ();
    type Output = Topology;

    fn collect(
        &self,
        ctx: &Ctx,
        _: Option<()>,
        so_far: &OsFacts,
    ) -> Result<Topology, CollectError> {
        let affinity: Option<Vec<u32>> = so_far
            .process
            .as_ref()
            .ok()
            .and_then(|p| p.affinity.as_deref())
            .and_then(|a| parse_cpu_list(a).ok());
        collect(ctx.roots, affinity.as_deref())
    }

    fn store(facts: &mut OsFacts, section: Gathered<Topology>) {
        facts.topology = section;
    }
}

/// `allowed`: the CPUs mariadbd may run on (its affinity), for the L3 total.
pub(super) fn collect(r: &Roots, allowed: Option<&[u32]>) -> Result<Topology, CollectError> {
    let online = online_cpus(r)?;
    let caches = if r.is_live() {
        LIVE_CACHES.get(online.clone(), STATIC_REUSE, || read_caches(r, &online))
    } else {
        read_caches(r, &online)
    };
    finish(r, caches, &online, allowed)
}

/// The live host's caches, kept while its online CPUs stay the same (`kept`): they are read
/// from one sysfs directory per CPU and cache index (8% of the agent's CPU per sample when
/// re-read every time, measured).
static LIVE_CACHES: Kept<Vec<u32>, Vec<Cache>> = Kept::new();

/// Every distinct cache of the online CPUs (a shared cache once).
fn read_caches(r: &Roots, online: &[u32]) -> Vec<Cache> {
    let mut caches: BTreeMap<(u32, String, String), Option<u64>> = BTreeMap::new();
    // Per cache index, the CPUs already covered by a cache seen on another CPU: a shared cache
    // is read once, not once per CPU (on a 96-CPU POWER9 that is ~10× fewer files).
    let mut covered: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for n in online {
        let dir = r.sys(format!("devices/system/cpu/cpu{n}/cache"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let index = e.file_name().to_string_lossy().into_owned();
            if !index.starts_with("index") || covered.get(&index).is_some_and(|c| c.contains(n)) {
                continue;
            }
            let p = e.path();
            // Older kernels have only the hex mask.
            let Some(shared) = read_trim(&p.join("shared_cpu_list")).ok().or_else(|| {
                read_trim(&p.join("shared_cpu_map"))
                    .ok()
                    .and_then(|m| parse_cpu_mask(&m).ok())
                    .map(|cpus| format_cpu_list(&cpus))
            }) else {
                continue;
            };
            let shared_cpus = parse_cpu_list(&shared).unwrap_or_default();
            covered
                .entry(index)
                .or_default()
                .extend(shared_cpus.iter().copied());
            let (Ok(level), Ok(kind)) = (read_trim(&p.join("level")), read_trim(&p.join("type")))
            else {
                continue;
            };
            let Ok(level) = level.parse::<u32>() else {
                continue;
            };
            // A cache listed without its size (QEMU's arm64 `virt`) is kept, size unknown.
            let size = read_trim(&p.join("size")).ok().and_then(|s| parse_size(&s));
            // Normalise the list so "0-1" and "0,1" are the same cache.
            let shared = if shared_cpus.is_empty() {
                shared
            } else {
                format_cpu_list(&shared_cpus)
            };
            caches.insert((level, kind, shared), size);
        }
    }
    caches
        .into_iter()
        .map(|((level, kind, shared_cpu_list), size_bytes)| Cache {
            level,
            kind,
            size_bytes,
            shared_cpu_list,
        })
        .collect()
}

/// The L3 total over the allowed CPUs and the NUMA nodes (their free memory changes: read
/// every time).
fn finish(
    r: &Roots,
    caches: Vec<Cache>,
    online: &[u32],
    allowed: Option<&[u32]>,
) -> Result<Topology, CollectError> {
    // Total last-level cache reachable from the allowed CPUs.
    // Affinity masks include offline and absent CPUs (all "possible" ones): keep the online.
    let online_set: BTreeSet<u32> = online.iter().copied().collect();
    let allowed: BTreeSet<u32> = match allowed {
        Some(a) => a
            .iter()
            .copied()
            .filter(|c| online_set.contains(c))
            .collect(),
        None => online_set,
    };
    let top = caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| c.level)
        .max();
    // Unknown when any of its caches' sizes is.
    let l3_total_bytes = top.filter(|l| *l >= 3).and_then(|level| {
        caches
            .iter()
            .filter(|c| c.level == level && c.kind != "Instruction")
            .filter(|c| {
                parse_cpu_list(&c.shared_cpu_list)
                    .is_ok_and(|cpus| cpus.iter().any(|x| allowed.contains(x)))
            })
            .map(|c| c.size_bytes)
            .try_fold(0u64, |sum, s| Some(sum.saturating_add(s?)))
    });

    let (numa_nodes, numa_unread) = numa(r)?;
    Ok(Topology {
        caches,
        l3_total_bytes,
        l3_cpus: Some(format_cpu_list(&allowed.into_iter().collect::<Vec<_>>())),
        numa_nodes,
        numa_unread,
    })
}

/// The online CPUs: `cpu/online`, else the `cpuN` directories (trees recorded without it).
pub(super) fn online_cpus(r: &Roots) -> Result<Vec<u32>, CollectError> {
    let base = r.sys("devices/system/cpu");
    let online = base.join("online");
    if let Ok(list) = read_trim(&online) {
        return parse_cpu_list(&list).map_err(|e| CollectError::parse(&online, e.to_string()));
    }
    // Without the online list: the cpuN directories, less the CPUs the kernel lists in
    // `offline` or whose own `online` reads 0 (a missing cpuN/online is a CPU that cannot be
    // taken offline, such as the boot CPU: online).
    let offline: Vec<u32> = read_trim(&base.join("offline"))
        .ok()
        .and_then(|l| parse_cpu_list(&l).ok())
        .unwrap_or_default();
    let mut ids: Vec<u32> = std::fs::read_dir(&base)
        .map_err(|e| CollectError::io(&base, &e))?
        .filter_map(Result::ok)
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("cpu")?
                .parse::<u32>()
                .ok()
        })
        .filter(|n| !offline.contains(n))
        .filter(|n| read_trim(&base.join(format!("cpu{n}/online"))).map_or(true, |v| v != "0"))
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return Err(CollectError::parse(
            &base,
            "no online list and no cpuN directories",
        ));
    }
    Ok(ids)
}

/// The NUMA nodes, and why there are none when a recorded tree has no node data. Nodes are
/// listed by `node/online`, else by the `nodeN` directories (trees recorded without it); a
/// node's CPUs come from `cpulist`, else from the `cpumap` mask (older kernels).
fn numa(r: &Roots) -> Result<(Vec<NumaNode>, Option<String>), CollectError> {
    let base = r.sys("devices/system/node");
    let online_path = base.join("online");
    let ids: Vec<u32> = match read_trim(&online_path) {
        Ok(online) => {
            parse_cpu_list(&online).map_err(|e| CollectError::parse(&online_path, e.to_string()))?
        }
        // There but unreadable (too large, not a regular file): say so, guess nothing.
        Err(e) if !matches!(e, CollectError::NotFound { .. }) => {
            return Ok((Vec::new(), Some(e.to_string())));
        }
        Err(_) => {
            let mut ids: Vec<u32> = std::fs::read_dir(&base)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter_map(|e| {
                            e.file_name()
                                .to_str()?
                                .strip_prefix("node")?
                                .parse::<u32>()
                                .ok()
                        })
                        .collect()
                })
                .unwrap_or_default();
            ids.sort_unstable();
            if ids.is_empty() {
                // The live kernel without NUMA support has one implicit node; a recorded
                // tree without node/ says nothing.
                let why = (!r.is_live()).then(|| {
                    format!(
                        "no NUMA node data in the tree ({} has no online list and no nodeN)",
                        base.display()
                    )
                });
                return Ok((Vec::new(), why));
            }
            ids
        }
    };
    let mut nodes = Vec::new();
    for id in ids {
        let dir = base.join(format!("node{id}"));
        let mut unread = Vec::new();
        let cpu_ids = match read_trim(&dir.join("cpulist")) {
            Ok(list) => parse_cpu_list(&list).ok(),
            Err(_) => read_trim(&dir.join("cpumap"))
                .ok()
                .and_then(|m| parse_cpu_mask(&m).ok()),
        };
        if cpu_ids.is_none() {
            unread.push(format!("{}: neither cpulist nor cpumap", dir.display()));
        }
        let cpu_ids = cpu_ids.unwrap_or_default();
        let meminfo = read(&dir.join("meminfo")).unwrap_or_default();
        let field = |name: &str| -> Option<u64> {
            meminfo.lines().find_map(|l| {
                let rest = l.split_once(&format!(" {name}:"))?.1;
                rest.split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
                    .map(|kb| kb.saturating_mul(1024))
            })
        };
        let memory_total_bytes = field("MemTotal");
        if memory_total_bytes.is_none() {
            unread.push(format!("{}: no MemTotal", dir.join("meminfo").display()));
        }
        nodes.push(NumaNode {
            id,
            cpu_list: format_cpu_list(&cpu_ids),
            cpus: cpu_ids.len() as u32,
            memory_total_bytes: memory_total_bytes.unwrap_or(0),
            memory_free_bytes: field("MemFree"),
            unread: (!unread.is_empty()).then(|| unread.join("; ")),
        });
    }
    Ok((nodes, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::os::linux::tests::write;

    /// An older kernel's layout: no `cpu/online`, no `node/online`, masks instead of lists.
    #[test]
    /// QEMU's arm64 `virt` machine lists its caches without `size`: they are kept, size
    /// unknown, and the L3 total is unknown rather than a sum of the known ones.
    fn keeps_caches_listed_without_a_size() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "sys/devices/system/cpu/online", "0-1\n");
        for cpu in 0..2 {
            for (index, level, kind, shared) in [
                ("index0", "1", "Data", cpu.to_string()),
                ("index1", "1", "Instruction", cpu.to_string()),
                ("index2", "2", "Unified", "0-1".to_owned()),
            ] {
                let c = format!("sys/devices/system/cpu/cpu{cpu}/cache/{index}");
                write(dir.path(), &format!("{c}/level"), &format!("{level}\n"));
                write(dir.path(), &format!("{c}/type"), &format!("{kind}\n"));
                write(
                    dir.path(),
                    &format!("{c}/shared_cpu_list"),
                    &format!("{shared}\n"),
                );
            }
        }
        write(
            dir.path(),
            "sys/devices/system/cpu/cpu0/cache/index3/level",
            "3\n",
        );
        write(
            dir.path(),
            "sys/devices/system/cpu/cpu0/cache/index3/type",
            "Unified\n",
        );
        write(
            dir.path(),
            "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
            "0-1\n",
        );
        let t = collect(&Roots::tree(dir.path()), None).unwrap();
        // Two L1d, two L1i, one shared L2, one L3: every size unknown.
        assert_eq!(t.caches.len(), 6, "{t:?}");
        assert!(t.caches.iter().all(|c| c.size_bytes.is_none()), "{t:?}");
        assert_eq!(t.l3_total_bytes, None);
    }

    #[test]
    fn reads_trees_without_online_lists_or_cpu_lists() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys/devices/system");
        for cpu in 0..4 {
            let c = format!("sys/devices/system/cpu/cpu{cpu}/cache/index3");
            write(dir.path(), &format!("{c}/level"), "3\n");
            write(dir.path(), &format!("{c}/type"), "Unified\n");
            write(dir.path(), &format!("{c}/size"), "8192K\n");
            write(dir.path(), &format!("{c}/shared_cpu_map"), "0000000f\n");
        }
        for (node, mask, mem) in [(0, "00000003", 8 << 20), (1, "0000000c", 0)] {
            write(
                dir.path(),
                &format!("sys/devices/system/node/node{node}/cpumap"),
                &format!("{mask}\n"),
            );
            write(
                dir.path(),
                &format!("sys/devices/system/node/node{node}/meminfo"),
                &format!(
                    "Node {node} MemTotal:       {mem} kB\nNode {node} MemFree:        1024 kB\n"
                ),
            );
        }
        assert!(sys.join("node/node1").is_dir());
        let roots = Roots::tree(dir.path());
        let t = collect(&roots, None).unwrap();
        assert_eq!(t.caches.len(), 1, "{t:?}");
        assert_eq!(t.caches[0].shared_cpu_list, "0-3");
        assert_eq!(t.l3_total_bytes, Some(8 << 20));
        assert_eq!(t.numa_nodes.len(), 2);
        assert_eq!(
            (t.numa_nodes[0].cpus, t.numa_nodes[0].cpu_list.as_str()),
            (2, "0-1")
        );
        assert_eq!(
            (t.numa_nodes[1].cpus, t.numa_nodes[1].memory_total_bytes),
            (2, 0)
        );
        assert_eq!(t.numa_nodes[1].unread, None, "0 kB was read: memoryless");
        assert_eq!(t.numa_unread, None);

        // A node without meminfo is unread, not memoryless; a tree without node/ says so.
        std::fs::remove_file(sys.join("node/node1/meminfo")).unwrap();
        let t = collect(&roots, None).unwrap();
        assert!(
            t.numa_nodes[1]
                .unread
                .as_deref()
                .unwrap()
                .contains("MemTotal")
        );
        std::fs::remove_dir_all(sys.join("node")).unwrap();
        let t = collect(&roots, None).unwrap();
        assert!(t.numa_nodes.is_empty());
        assert!(
            t.numa_unread
                .as_deref()
                .unwrap()
                .contains("no NUMA node data")
        );
    }
}
