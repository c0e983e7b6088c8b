use crate::{
    Gathered, Impact, Limits, Rule, Snapshot, StatusVar, Var, Verdict, declare_rule, format_bytes,
};

declare_rule! {
    /// ### What it does
    /// Compares the server's hot structure with the total L3 cache of the CPUs mariadbd may run
    /// on: the largest vector graph (the PD101 estimate) when there are vector indexes, else the
    /// data held in the InnoDB buffer pool. Fails (as information) when it is larger.
    ///
    /// ### Why is this bad?
    /// It sets expectations rather than signalling a fault. Past the total L3, every access that
    /// misses goes to memory: on an 8-core POWER9 (pairs of cores share 10 MB of L3, 80 MB in
    /// all) read bandwidth falls from about 64 GB/s at 5 MB to 14–18 GB/s past 80 MB. A
    /// pointer-chasing graph walk over 300 MB is memory-latency-bound on any machine, and
    /// comparing two hosts must account for their L3: in the field report the remaining 10–18%
    /// gap matched 12.5% fewer cores, hence less L3.
    ///
    /// ### Remediation
    /// Nothing to switch: expect memory-bandwidth-bound performance and compare hosts with equal
    /// L3. Give mariadbd all the cores whose L3 it needs (CPU affinity, partition size), keep the
    /// data compact (fewer dimensions, quantised vectors), and use large pages (PD302/PD301) so
    /// TLB misses do not add to cache misses.
    pub struct WorkingSetExceedsL3 {
        code: "PD502",
        name: "working-set-exceeds-l3",
        severity: Info,
        scope: Host,
        summary: "the hot data is larger than the L3 cache of mariadbd's CPUs: expect memory-bound speed",
        fails_when: "the largest vector graph (or buffer-pool data) exceeds the L3 of mariadbd's CPUs",
        severity_why: "info: a working set larger than L3 is the hardware's limit, not a fault, so it is advice",
        impact: [CORES, CORES_MAX],
    }
}

const CORES_EVIDENCE: &str = "throughput grows at most linearly with cores and their L3: the cores ratio, counted up to 2× (the last 10–18% between the field report's best AIX and Linux runs matched 12.5% fewer cores)";
/// The factor when either core count is unknown; else the diff uses the cores ratio.
const CORES: Impact = Impact {
    factor: 1.1,
    evidence: CORES_EVIDENCE,
};
/// The most the cores ratio counts for.
const CORES_MAX: Impact = Impact {
    factor: 2.0,
    evidence: CORES_EVIDENCE,
};

impl Rule for WorkingSetExceedsL3 {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let t = s.topology()?;
        let l3 = t.l3_total_bytes.ok_or_else(|| {
            Verdict::insufficient("the CPUs' L3 size is unknown (no level-3 cache reported)")
        })?;
        s.db_host()?;
        let db = s.db()?;
        let graph = match &db.vector_indexes {
            Gathered::Available(v) => {
                // A graph whose size could not be read is not 0 bytes, and the buffer pool
                // would not stand for it.
                if let Some(i) = v.iter().find(|i| db.graph_estimate(i).is_none()) {
                    return Err(Verdict::insufficient(format!(
                        "the vector graph size of {} is unknown{}",
                        i.qualified_name(),
                        i.size_source
                            .as_deref()
                            .map(|s| format!(": {s}"))
                            .unwrap_or_default()
                    )));
                }
                v.iter()
                    .filter_map(|i| db.graph_estimate(i).map(|e| (i.qualified_name(), e.bytes)))
                    .max_by_key(|(_, b)| *b)
            }
            Gathered::Unavailable(_) => None,
        };
        let (what, bytes) = match graph {
            Some((name, b)) => (format!("the vector graph of {name}"), b),
            None => {
                let page = db.var_u64(Var::InnodbPageSize).unwrap_or(16384);
                let total = db.status_u64(StatusVar::InnodbBufferPoolPagesTotal)?;
                let free = db
                    .status_u64(StatusVar::InnodbBufferPoolPagesFree)
                    .unwrap_or(0);
                (
                    "the data in the InnoDB buffer pool".to_owned(),
                    total.saturating_sub(free).saturating_mul(page),
                )
            }
        };
        let evidence = format!(
            "{what}: {}; L3 over CPUs {}: {}",
            format_bytes(bytes),
            t.l3_cpus.as_deref().unwrap_or("?"),
            format_bytes(l3)
        );
        Ok(if bytes > l3 {
            Verdict::fail(format!(
                "{what} ({}) is {:.0}× the L3 of mariadbd's CPUs ({}): expect memory-bandwidth-bound performance",
                format_bytes(bytes),
                bytes as f64 / l3.max(1) as f64,
                format_bytes(l3)
            ))
        } else {
            Verdict::pass(format!("{what} fits in L3 ({} of {})", format_bytes(bytes), format_bytes(l3)))
        }
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    #[test]
    fn vector_graph_against_l3() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .build();
        let v = verdict(&WorkingSetExceedsL3, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("app.docs"));
    }

    #[test]
    fn buffer_pool_data_against_l3() {
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .status(StatusVar::InnodbBufferPoolPagesTotal, "8192")
            .status(StatusVar::InnodbBufferPoolPagesFree, "8000")
            .build();
        assert_eq!(verdict(&WorkingSetExceedsL3, &s).status, Status::Pass);
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .status(StatusVar::InnodbBufferPoolPagesTotal, "65536")
            .status(StatusVar::InnodbBufferPoolPagesFree, "0")
            .build();
        assert_eq!(verdict(&WorkingSetExceedsL3, &s).status, Status::Fail);
    }

    #[test]
    fn insufficient() {
        let s = SnapshotBuilder::new().mariadb("10.11.14-MariaDB").build();
        assert_eq!(
            verdict(&WorkingSetExceedsL3, &s).status,
            Status::InsufficientData
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .remote_server()
            .build();
        assert_eq!(
            verdict(&WorkingSetExceedsL3, &s).status,
            Status::InsufficientData
        );
    }
}
