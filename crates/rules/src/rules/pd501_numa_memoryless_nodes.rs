use crate::{Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, format_bytes};

declare_rule! {
    /// ### What it does
    /// Reads the NUMA nodes (`/sys/devices/system/node/node*/{cpulist,meminfo}`) and fails when
    /// a node has CPUs but no memory, or when the nodes mariadbd may run on differ in memory by
    /// more than {max_memory_imbalance}× (*heuristic*).
    ///
    /// ### Why is this bad?
    /// Threads on a memoryless node get every allocation from a remote node: each cache miss
    /// pays the remote latency and all such traffic shares the remote node's bandwidth. In the
    /// MySQL Cluster on POWER8 report, memory on only 2 of 4 NUMA nodes lowered bandwidth, and
    /// binding the data nodes to the NUMA nodes that have memory was required. Badly balanced
    /// LPAR memory placement produces the same shape on PowerVM.
    ///
    /// ### Remediation
    /// Balance the hardware: populate every socket's DIMM channels, or on PowerVM ask for the
    /// partition's memory to be placed with its processors (HMC: `optmem` / Dynamic Platform
    /// Optimizer). Until then bind mariadbd to the nodes with memory, e.g. in its systemd unit:
    /// `NUMAPolicy=bind` and `NUMAMask=0,2` (or `numactl --cpunodebind=0,2 --membind=0,2`).
    pub struct NumaMemorylessNodes {
        code: "PD501",
        name: "numa-memoryless-nodes",
        severity: Warning,
        scope: Host,
        summary: "NUMA nodes with CPUs but no memory (or badly unbalanced memory) force remote accesses",
        fails_when: "a NUMA node has CPUs but no memory, or memory differs > 2× between nodes *(heuristic)*",
        severity_why: "warning: CPUs without local memory make remote accesses likely for every query",
        thresholds: [MAX_IMBALANCE],
    }
}

const MAX_IMBALANCE: Threshold = Threshold {
    key: "max_memory_imbalance",
    default: 2.0,
    min: 1.0,
    max: 1000.0,
    unit: Unit::Number,
    doc: "largest over smallest memory of NUMA nodes with CPUs above which the rule fails (heuristic)",
};

impl Rule for NumaMemorylessNodes {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let t = s.topology()?;
        if let Some(why) = &t.numa_unread {
            return Err(Verdict::insufficient(format!(
                "the NUMA nodes are unknown: {why}"
            )));
        }
        // Only nodes whose CPUs and memory were both read are judged: a 0 that could not be
        // read is not "no memory".
        let unread: Vec<String> = t
            .numa_nodes
            .iter()
            .filter_map(|n| n.unread.as_ref().map(|w| format!("node {}: {w}", n.id)))
            .collect();
        let complete: Vec<&crate::NumaNode> =
            t.numa_nodes.iter().filter(|n| n.unread.is_none()).collect();
        if t.numa_nodes.len() < 2 && unread.is_empty() {
            return Ok(Verdict::pass("one NUMA node: all memory is local"));
        }
        let evidence: Vec<String> = t
            .numa_nodes
            .iter()
            .map(|n| {
                format!(
                    "node {}: CPUs {} ({}), memory {}",
                    n.id,
                    n.cpu_list,
                    n.cpus,
                    format_bytes(n.memory_total_bytes)
                )
            })
            .collect();
        let memoryless: Vec<String> = complete
            .iter()
            .filter(|n| n.cpus > 0 && n.memory_total_bytes == 0)
            .map(|n| n.id.to_string())
            .collect();
        let mut v = if !memoryless.is_empty() {
            Verdict::fail(format!(
                "NUMA node(s) {} have CPUs but no memory: their threads allocate remotely",
                memoryless.join(", ")
            ))
        } else {
            let with_cpus: Vec<u64> = complete
                .iter()
                .filter(|n| n.cpus > 0)
                .map(|n| n.memory_total_bytes)
                .collect();
            let (lo, hi) = (
                with_cpus.iter().min().copied().unwrap_or(0),
                with_cpus.iter().max().copied().unwrap_or(0),
            );
            let max_imbalance = limits.get(&MAX_IMBALANCE);
            if lo > 0 && hi as f64 / lo as f64 > max_imbalance {
                Verdict::fail(format!(
                    "memory per NUMA node differs {:.1}× ({} to {}; heuristic limit {max_imbalance}×)",
                    hi as f64 / lo as f64,
                    format_bytes(lo),
                    format_bytes(hi)
                ))
            } else if !unread.is_empty() {
                let mut v = Verdict::insufficient(format!(
                    "{} of {} NUMA nodes could not be read completely: {}",
                    unread.len(),
                    t.numa_nodes.len(),
                    unread.join("; ")
                ));
                v.evidence = evidence;
                return Err(v);
            } else {
                Verdict::pass(format!(
                    "{} NUMA nodes, each with local memory",
                    t.numa_nodes.len()
                ))
            }
        };
        v.evidence = evidence;
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, NumaNode, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn check(mem: &[u64]) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(t) = &mut o.topology {
                    t.numa_nodes = mem
                        .iter()
                        .enumerate()
                        .map(|(i, m)| NumaNode {
                            id: i as u32,
                            cpu_list: format!("{}-{}", i * 16, i * 16 + 15),
                            cpus: 16,
                            memory_total_bytes: *m,
                            memory_free_bytes: None,
                            unread: None,
                        })
                        .collect();
                }
            })
            .build();
        verdict(&NumaMemorylessNodes, &s)
    }

    #[test]
    fn verdicts() {
        let v = check(&[64 << 30, 0, 64 << 30, 0]);
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("1, 3"), "{}", v.summary);
        assert_eq!(check(&[64 << 30, 16 << 30]).status, Status::Fail);
        assert_eq!(check(&[64 << 30, 60 << 30]).status, Status::Pass);
        assert_eq!(check(&[64 << 30]).status, Status::Pass);
        let s = SnapshotBuilder::new()
            .os(|o| o.topology = Gathered::Unavailable("node0/meminfo: no MemTotal".into()))
            .build();
        assert_eq!(
            verdict(&NumaMemorylessNodes, &s).status,
            Status::InsufficientData
        );
    }

    #[test]
    fn unread_nodes_are_not_judged() {
        let with = |edit: fn(&mut crate::Topology)| {
            let s = SnapshotBuilder::new()
                .os(|o| {
                    if let Gathered::Available(t) = &mut o.topology {
                        edit(t);
                    }
                })
                .build();
            verdict(&NumaMemorylessNodes, &s)
        };
        // A tree without node data is not "one node".
        let v = with(|t| {
            t.numa_nodes.clear();
            t.numa_unread = Some("no NUMA node data in the tree".into());
        });
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        // A node whose meminfo could not be read is not memoryless.
        let v = with(|t| {
            t.numa_nodes = (0..2)
                .map(|i| NumaNode {
                    id: i,
                    cpu_list: "0-7".into(),
                    cpus: 8,
                    memory_total_bytes: if i == 0 { 16 << 30 } else { 0 },
                    memory_free_bytes: None,
                    unread: (i == 1).then(|| "node1/meminfo: no MemTotal".into()),
                })
                .collect();
        });
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("node1/meminfo"), "{}", v.summary);
    }
}
