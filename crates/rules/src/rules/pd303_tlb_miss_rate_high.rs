use crate::{Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Counts mariadbd's data-TLB load misses and retired instructions with hardware counters
    /// over the sample window (`perf_event_open` on all its threads, user space) and fails above
    /// {max_misses_per_1k_instructions} dTLB miss per 1,000 instructions (*heuristic*: perf's
    /// POWER9 `DTLB_MISS_RATE` metric is published without a threshold; this cut-off marks a
    /// TLB-bound workload). At least {min_instructions} instructions are needed to judge.
    ///
    /// ### Why is this bad?
    /// Each dTLB miss costs a page-table walk of tens to hundreds of cycles. A high miss rate
    /// means the working set's pages do not fit the TLB's reach — typical of a large buffer pool
    /// or vector graph on 4 KiB pages. In the field report, moving mariadbd from 4 KiB to 64 KiB
    /// pages took sequential vector search from 112 to 208 QPS.
    ///
    /// ### Remediation
    /// Use larger pages for mariadbd: transparent huge pages or `large_pages` on Linux (PD302),
    /// the `LDR_CNTRL` 64K page settings on AIX (PD301). Re-measure the miss rate afterwards.
    pub struct TlbMissRateHigh {
        code: "PD303",
        name: "tlb-miss-rate-high",
        severity: Warning,
        scope: Host,
        summary: "mariadbd misses the data TLB often: its pages are too small for its working set",
        fails_when: "hardware counters show > 1 dTLB miss per 1,000 instructions in mariadbd *(heuristic)*",
        severity_why: "warning: a high dTLB miss rate is measured now, but not the time its page walks cost",
        thresholds: [MAX_PER_1K, MIN_INSTRUCTIONS],
    }
}

const MAX_PER_1K: Threshold = Threshold {
    key: "max_misses_per_1k_instructions",
    default: 1.0,
    min: 0.0,
    max: 1000.0,
    unit: Unit::Number,
    doc: "dTLB load misses per 1,000 instructions above which the rule fails (heuristic)",
};
const MIN_INSTRUCTIONS: Threshold = Threshold {
    key: "min_instructions",
    default: 10_000_000.0,
    min: 1.0,
    max: 1e15,
    unit: Unit::Count,
    doc: "instructions mariadbd must retire in the window to be judged",
};

impl Rule for TlbMissRateHigh {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let c = s.counters()?;
        let value = |name: &str| -> Result<u64, Verdict> {
            match c.event(name) {
                Some(e) => e.value.ok_or_else(|| {
                    Verdict::insufficient(format!(
                        "hardware counter {name} {}",
                        e.unavailable.as_deref().unwrap_or("has no value")
                    ))
                }),
                None => Err(Verdict::insufficient(format!(
                    "hardware counter {name} was not collected"
                ))),
            }
        };
        let instructions = value("instructions")?;
        let misses = value("dTLB-load-misses")?;
        let rate = misses as f64 * 1000.0 / instructions.max(1) as f64;
        let evidence = format!(
            "{misses} dTLB load misses in {instructions} instructions over {:.2} s ({}): {rate:.2} per 1,000",
            c.window_seconds, c.target
        );
        let min_instructions = limits.count(&MIN_INSTRUCTIONS);
        let max_rate = limits.get(&MAX_PER_1K);
        if instructions < min_instructions {
            return Err(Verdict::insufficient(format!(
                "mariadbd retired only {instructions} instructions in the window (needs ≥ {min_instructions}); run doctor while the server is busy"
            ))
            .with_evidence(evidence));
        }
        Ok(if rate > max_rate {
            Verdict::fail(format!(
                "{rate:.2} dTLB misses per 1,000 instructions (heuristic limit {max_rate})"
            ))
        } else {
            Verdict::pass(format!("{rate:.2} dTLB misses per 1,000 instructions"))
        }
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, PerfCounters, PerfEvent, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn check(instructions: Option<u64>, misses: Option<u64>) -> Verdict {
        let ev = |name: &str, value: Option<u64>| PerfEvent {
            name: name.into(),
            value,
            unavailable: value
                .is_none()
                .then(|| "unavailable: no PMU for this event (perf_event_open ENOENT)".into()),
        };
        let s = SnapshotBuilder::new()
            .os(|o| {
                o.counters = Gathered::Available(PerfCounters {
                    window_seconds: 1.0,
                    target: "mariadbd pid 1".into(),
                    events: vec![
                        ev("instructions", instructions),
                        ev("dTLB-load-misses", misses),
                    ],
                })
            })
            .build();
        verdict(&TlbMissRateHigh, &s)
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            check(Some(1_000_000_000), Some(5_000_000)).status,
            Status::Fail
        );
        assert_eq!(
            check(Some(1_000_000_000), Some(100_000)).status,
            Status::Pass
        );
        assert_eq!(
            check(Some(1_000), Some(100)).status,
            Status::InsufficientData
        );
        let v = check(None, None);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("ENOENT"), "{}", v.summary);
        let s = SnapshotBuilder::new()
            .os(|o| o.counters = Gathered::Unavailable("unavailable: not the live /proc".into()))
            .build();
        assert!(
            verdict(&TlbMissRateHigh, &s)
                .summary
                .contains("not the live /proc")
        );
    }
}
