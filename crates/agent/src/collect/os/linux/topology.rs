//! Caches (`cpu*/cache/index*`) and NUMA nodes (`node*/cpulist`, `node*/meminfo`).

use std::collections::{BTreeMap, BTreeSet};

use powerdiag_rules::{Cache, NumaNode, Topology};

use super::fs::{format_cpu_list, parse_cpu_list, parse_size, read, read_trim};
use crate::collect::os::Roots;

/// `allowed`: the CPUs mariadbd may run on (its affinity), for the L3 total.
pub(super) fn collect(r: &Roots, allowed: Option<&[u32]>) -> Result<Topology, String> {
    let online = parse_cpu_list(&read_trim(&r.sys("devices/system/cpu/online"))?)?;
    let mut caches: BTreeMap<(u32, String, String), u64> = BTreeMap::new();
    // Per cache index, the CPUs already covered by a cache seen on another CPU: a shared cache
    // is read once, not once per CPU (on a 96-CPU POWER9 that is ~10× fewer files).
    let mut covered: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for n in &online {
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
            let Ok(shared) = read_trim(&p.join("shared_cpu_list")) else {
                continue;
            };
            let shared_cpus = parse_cpu_list(&shared).unwrap_or_default();
            covered
                .entry(index)
                .or_default()
                .extend(shared_cpus.iter().copied());
            let (Ok(level), Ok(kind), Ok(size)) = (
                read_trim(&p.join("level")),
                read_trim(&p.join("type")),
                read_trim(&p.join("size")),
            ) else {
                continue;
            };
            let (Ok(level), Some(size)) = (level.parse::<u32>(), parse_size(&size)) else {
                continue;
            };
            // Normalise the list so "0-1" and "0,1" are the same cache.
            let shared = if shared_cpus.is_empty() {
                shared
            } else {
                format_cpu_list(&shared_cpus)
            };
            caches.insert((level, kind, shared), size);
        }
    }
    let caches: Vec<Cache> = caches
        .into_iter()
        .map(|((level, kind, shared_cpu_list), size_bytes)| Cache {
            level,
            kind,
            size_bytes,
            shared_cpu_list,
        })
        .collect();

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
    let l3_total_bytes = top.filter(|l| *l >= 3).map(|level| {
        caches
            .iter()
            .filter(|c| c.level == level && c.kind != "Instruction")
            .filter(|c| {
                parse_cpu_list(&c.shared_cpu_list)
                    .is_ok_and(|cpus| cpus.iter().any(|x| allowed.contains(x)))
            })
            .map(|c| c.size_bytes)
            .fold(0u64, u64::saturating_add)
    });

    Ok(Topology {
        caches,
        l3_total_bytes,
        l3_cpus: Some(format_cpu_list(&allowed.into_iter().collect::<Vec<_>>())),
        numa_nodes: numa(r)?,
    })
}

fn numa(r: &Roots) -> Result<Vec<NumaNode>, String> {
    let base = r.sys("devices/system/node");
    let Ok(online) = read_trim(&base.join("online")) else {
        return Ok(Vec::new()); // kernel without NUMA: one implicit node
    };
    let mut nodes = Vec::new();
    for id in parse_cpu_list(&online)? {
        let dir = base.join(format!("node{id}"));
        let cpu_list = read_trim(&dir.join("cpulist")).unwrap_or_default();
        let cpus = parse_cpu_list(&cpu_list)
            .map(|c| c.len() as u32)
            .unwrap_or(0);
        let meminfo = read(&dir.join("meminfo"))?;
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
        let memory_total_bytes = field("MemTotal")
            .ok_or_else(|| format!("{}: no MemTotal", dir.join("meminfo").display()))?;
        nodes.push(NumaNode {
            id,
            cpu_list,
            cpus,
            memory_total_bytes,
            memory_free_bytes: field("MemFree"),
        });
    }
    Ok(nodes)
}
