//! `/proc/powerpc/lparcfg` (key names from the kernel's arch/powerpc/platforms/pseries/lparcfg.c)
//! and `/proc/powerpc/vcpudispatch_stats`.

use crate::collect::{collector::Descriptor, os::sections};
use std::collections::HashMap;

use powerdiag_rules::{Gathered, OsFacts, PartitionFacts};

use super::fs::read;
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `partition` section: PowerVM's lparcfg, counters over the window; `None` off pSeries.
pub(super) struct Partition;

impl Collector for Partition {
    const SECTION: &'static Descriptor = &sections::PARTITION;
    type Baseline = Fields;
    type Output = Option<PartitionFacts>;

    fn begin(&self, ctx: &Ctx) -> Option<Fields> {
        read_fields(ctx.roots).ok().flatten()
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Fields>,
        so_far: &OsFacts,
    ) -> Result<Option<PartitionFacts>, CollectError> {
        let r = ctx.roots;
        read_fields(r).map(|now| {
            now.map(|now| {
                let mut p = facts(&now, baseline.as_ref(), ctx.window.as_secs_f64());
                p.far_dispatches = far_dispatches(r);
                if let Ok(c) = so_far.cpu.as_ref() {
                    p.smt_threads = c.threads_per_core;
                }
                p
            })
        })
    }

    fn store(facts: &mut OsFacts, section: Gathered<Option<PartitionFacts>>) {
        facts.partition = section;
    }
}

pub(super) type Fields = HashMap<String, String>;

/// `platform : pSeries` in /proc/cpuinfo (PowerNV bare metal says `PowerNV`).
pub(super) fn is_pseries(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "platform" && v.trim().eq_ignore_ascii_case("pseries")
        })
    })
}

/// Where lparcfg is: the kernel's path, and the one sos, apport and other collectors record
/// (`proc/ppc64/lparcfg`, the old name the kernel still links).
pub(super) const PATHS: [&str; 2] = ["powerpc/lparcfg", "ppc64/lparcfg"];

/// `Ok(None)`: no lparcfg on a machine that is not a pSeries platform, so not a PowerVM
/// partition. A pSeries platform (PowerVM LPAR or KVM guest) without lparcfg is a partition of
/// unknown mode: an error, so the partition rules say `insufficient_data`.
pub(super) fn read_fields(r: &Roots) -> Result<Option<Fields>, CollectError> {
    let Some(path) = PATHS.iter().map(|p| r.proc(p)).find(|p| p.exists()) else {
        // The live host's kernel says whether it runs on POWER at all: elsewhere there is no
        // pSeries platform to look for in cpuinfo (read twice a sample otherwise).
        if r.is_live() && !std::env::consts::ARCH.starts_with("powerpc") {
            return Ok(None);
        }
        let cpuinfo = read(&r.proc("cpuinfo")).unwrap_or_default();
        if is_pseries(&cpuinfo) {
            return Err(CollectError::unsupported(format!(
                "a pSeries platform (PowerVM partition or KVM guest) without lparcfg ({} or {}): the partition mode is unknown",
                r.proc(PATHS[0]).display(),
                r.proc(PATHS[1]).display()
            )));
        }
        return Ok(None);
    };
    let text = read(&path)?;
    let fields = parse(&text);
    if !fields.contains_key("shared_processor_mode") {
        return Err(CollectError::parse(
            &path,
            "no shared_processor_mode line; not an lparcfg file?",
        ));
    }
    Ok(Some(fields))
}

/// `key=value` lines; the first line (`lparcfg 1.9`) and anything else without `=` is skipped.
pub(super) fn parse(text: &str) -> Fields {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn num<T: std::str::FromStr>(f: &Fields, key: &str) -> Option<T> {
    f.get(key).and_then(|v| v.parse().ok())
}

/// Facts from one lparcfg read, with counters as deltas from `earlier` when given (a window),
/// else since boot.
pub(super) fn facts(now: &Fields, earlier: Option<&Fields>, window_secs: f64) -> PartitionFacts {
    // `dispatches` and `dispatch_dispersions` are sums over the CPUs of 32-bit lppaca
    // counters (arch/powerpc/platforms/pseries/lparcfg.c, splpar_dispatch_data). A CPU's
    // counter that wraps inside the window lowers the sum by 2^32: one wrap is added back
    // (more would take billions of events in one window), anything else is unknown.
    let wrapping = |key: &str| -> Option<u64> {
        let b: u64 = num(now, key)?;
        match earlier.and_then(|e| num::<u64>(e, key)) {
            Some(a) if b >= a => Some(b - a),
            Some(a) => (b + (1u64 << 32)).checked_sub(a),
            None => Some(b),
        }
    };
    PartitionFacts {
        shared: num::<u32>(now, "shared_processor_mode") == Some(1),
        capped: num::<u32>(now, "capped") == Some(1),
        donating: num::<u32>(now, "DedDonMode") == Some(1),
        entitled_capacity: num::<f64>(now, "partition_entitled_capacity").map(|c| c / 100.0),
        online_vcpus: num(now, "partition_active_processors"),
        max_vcpus: num(now, "partition_potential_processors"),
        smt_threads: None,
        pool_id: num(now, "pool"),
        pool_cpus: num::<f64>(now, "pool_num_procs")
            .or_else(|| num::<f64>(now, "pool_capacity").map(|c| c / 100.0)),
        counters_basis: Some(if earlier.is_some() {
            format!("window {window_secs:.2} s")
        } else {
            "since boot".into()
        }),
        // `dispatches` is Σ yield_count, which the hypervisor increments when it dispatches a
        // virtual processor and again when the processor yields or is preempted (odd: not
        // running; lppaca.h): two per dispatch. `dispatch_dispersions` (Σ dispersion_count)
        // counts once per dispatch onto another physical processor, so the dispersion share
        // is dispersions / (yield_count / 2).
        dispatches: wrapping("dispatches").map(|y| y / 2),
        dispatch_dispersions: wrapping("dispatch_dispersions"),
        involuntary_vcsw: None,
        voluntary_vcsw: None,
        phantom_interrupts: None,
        far_dispatches: None,
    }
}

/// Sum of the "distant node" column of `vcpudispatch_stats` (lines `cpuN total same-cpu
/// same-chip other-chip other-socket home-node neighbour-node distant-node`). `None` when the
/// statistics are not enabled.
pub(super) fn far_dispatches(r: &Roots) -> Option<u64> {
    let text = read(&r.proc("powerpc/vcpudispatch_stats")).ok()?;
    let mut any = false;
    let mut far: u64 = 0;
    for line in text.lines().filter(|l| l.starts_with("cpu")) {
        let cols: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|c| c.parse().ok())
            .collect();
        if cols.len() == 8 {
            any = true;
            far = far.saturating_add(cols[7]);
        }
    }
    any.then_some(far)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lparcfg_where_sos_records_it_and_unknown_mode_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let roots = Roots::tree(dir.path());
        std::fs::create_dir_all(dir.path().join("proc/ppc64")).unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "processor\t: 0\ncpu\t\t: POWER9 (architected)\n\nplatform\t: pSeries\nmodel\t\t: IBM,9009-42A\n",
        )
        .unwrap();
        let e = read_fields(&roots).unwrap_err();
        assert!(e.to_string().contains("partition mode is unknown"), "{e}");
        std::fs::write(
            dir.path().join("proc/ppc64/lparcfg"),
            "lparcfg 1.9\nshared_processor_mode=1\ncapped=0\n",
        )
        .unwrap();
        let f = read_fields(&roots).unwrap().unwrap();
        assert_eq!(
            f.get("shared_processor_mode").map(String::as_str),
            Some("1")
        );
        // Bare metal (PowerNV) or x86: not a partition.
        std::fs::remove_file(dir.path().join("proc/ppc64/lparcfg")).unwrap();
        std::fs::write(dir.path().join("proc/cpuinfo"), "platform\t: PowerNV\n").unwrap();
        assert_eq!(read_fields(&roots).unwrap(), None);
    }

    const SHARED: &str = "lparcfg 1.9\nserial_number=IBM,0221234\nsystem_type=IBM,9009-42A\npartition_id=7\n\
        partition_entitled_capacity=300\nDedDonMode=0\npool=0\npool_capacity=2400\npool_num_procs=24\n\
        capped=0\ndispatches=1000000\ndispatch_dispersions=300000\npartition_active_processors=12\n\
        partition_potential_processors=16\nshared_processor_mode=1\n";

    #[test]
    fn shared_uncapped() {
        let f = facts(&parse(SHARED), None, 0.0);
        assert!(f.shared && !f.capped && !f.donating);
        assert_eq!(f.entitled_capacity, Some(3.0));
        assert_eq!(f.online_vcpus, Some(12));
        assert_eq!(f.pool_cpus, Some(24.0));
        assert_eq!(f.counters_basis.as_deref(), Some("since boot"));
        assert_eq!(f.dispatch_dispersions, Some(300_000));
    }

    #[test]
    fn deltas_over_a_window() {
        let a = parse(SHARED);
        let b = parse(&SHARED.replace("dispatches=1000000", "dispatches=1000500"));
        let f = facts(&b, Some(&a), 1.0);
        // yield_count moves twice per dispatch (dispatched, then yielded or preempted).
        assert_eq!(f.dispatches, Some(250));
        assert_eq!(f.dispatch_dispersions, Some(0));
    }

    /// A CPU's 32-bit yield_count wrapping inside the window lowers the sum by 2^32.
    #[test]
    fn a_wrapped_counter_inside_the_window() {
        let a = parse(&SHARED.replace("dispatches=1000000", "dispatches=4294967000"));
        let b = parse(&SHARED.replace("dispatches=1000000", "dispatches=704"));
        let f = facts(&b, Some(&a), 1.0);
        assert_eq!(f.dispatches, Some(500));
    }

    #[test]
    fn dedicated_donating_and_garbage() {
        let f = facts(
            &parse("shared_processor_mode=0\ncapped=1\nDedDonMode=1\n"),
            None,
            0.0,
        );
        assert!(!f.shared && f.donating);
        let f = facts(&parse("shared_processor_mode=x\n=\n\u{0}==\n"), None, 0.0);
        assert!(!f.shared && f.entitled_capacity.is_none());
    }
}
