use crate::{
    Impact, Limits, Rule, Snapshot, Verdict, declare_rule,
    rules::lpar::describe,
};

declare_rule! {
    /// ### What it does
    /// Reports a dedicated, capped PowerVM partition whose processors run at their nominal
    /// frequency: a *measured* effective frequency (SPURR/PURR × nominal) within 2% of
    /// nominal. Without SPURR readings (a recorded tree, `--sample-window 0` on Linux, a platform
    /// that reports none) the frequency is unknown and the rule says `insufficient_data`: staying
    /// at nominal is then an assumption. It is information about a trade-off, not a fault.
    ///
    /// ### Why is this bad?
    /// Shared, uncapped partitions on POWER9 benefit from Workload Optimized Frequency: a lightly
    /// loaded shared core boosts to about 3.8 GHz, while a dedicated capped partition is held at
    /// the 2.75 GHz nominal — 38% less clock for single-query latency. In the field report (30
    /// vector queries), 12 shared vCPUs took 0.190 s (GCC build) / 0.063 s (Open XL) against
    /// 0.205 s / 0.082 s for 12 dedicated capped cores. Dedicated processors suit sustained
    /// multi-threaded throughput; latency-bound work (one query at a time) gains from shared
    /// uncapped.
    ///
    /// ### Remediation
    /// Decide by workload: for latency-bound, mostly single-threaded query streams consider a
    /// shared uncapped partition with enough entitlement (see PD407) so cores can boost; for
    /// sustained parallel throughput keep dedicated processors. Check the server's power mode
    /// in ASMI/HMC ("Maximum performance" allows the highest frequencies).
    pub struct LparDedicatedCappedLatency {
        code: "PD402",
        name: "lpar-dedicated-capped-latency",
        severity: Info,
        scope: Host,
        summary: "a dedicated capped partition runs at nominal frequency without the boost shared partitions get",
        fails_when: "dedicated capped partition at nominal frequency (no boost for single queries)",
        severity_why: "info: nominal frequency is a trade-off of the partition mode, not a fault, so it is advice",
        impact: [PARTITION_MODE],
    }
}

/// Other partition modes (shared or dedicated, capped or uncapped).
const PARTITION_MODE: Impact = Impact {
    factor: 1.3,
    evidence: "12 shared uncapped vs 12 dedicated capped vCPUs: 0.063 s vs 0.082 s per query (1.3×, Open XL build)",
};

/// Effective/nominal ratio above which the partition is boosting.
const BOOSTING: f64 = 1.02;

impl Rule for LparDedicatedCappedLatency {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let p = s.partition()?;
        if p.shared || p.donating || !p.capped {
            return Err(Verdict::not_applicable(format!(
                "applies to dedicated capped partitions; {}",
                describe(p)
            )));
        }
        let cpu = s.cpu()?;
        // Only a measured effective frequency shows the partition stays at nominal: without
        // SPURR readings, "no boost" is an assumption, not a finding.
        let freq = match (cpu.effective_mhz, cpu.nominal_mhz) {
            (Some(e), Some(n)) if n > 0.0 => {
                if e / n > BOOSTING {
                    return Ok(Verdict::pass(format!(
                        "effective frequency {e:.0} MHz is above nominal {n:.0} MHz"
                    ))
                    .with_evidence(describe(p)));
                }
                format!(
                    "effective frequency {e:.0} MHz ({}), nominal {n:.0} MHz",
                    cpu.effective_source.as_deref().unwrap_or("measured")
                )
            }
            (None, Some(n)) => {
                return Err(Verdict::insufficient(format!(
                    "the effective frequency was not measured (no SPURR/PURR readings: run on the live host with a sample window); nominal {n:.0} MHz"
                ))
                .with_evidence(describe(p)));
            }
            _ => {
                return Err(Verdict::insufficient(
                    "the partition's nominal and effective frequencies are unknown",
                )
                .with_evidence(describe(p)));
            }
        };
        Ok(Verdict::fail(
            "dedicated capped partition at nominal frequency: single queries miss the boost a shared uncapped partition gets (+38% clock in the field report)",
        )
        .with_evidence(describe(p))
        .with_evidence(freq))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        let mut s = crate::rules::examples::power_partition(false, true, false, 21.0, 21, 84, 4);
        if let crate::Gathered::Available(o) = &mut s.os
            && let crate::Gathered::Available(c) = &mut o.cpu
        {
            c.effective_mhz = c.nominal_mhz;
        }
        s
    }

    fn check(p: crate::PartitionFacts, effective: Option<f64>) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                on_power_lpar(o, p, 84, 4);
                if let Gathered::Available(c) = &mut o.cpu {
                    c.effective_mhz = effective;
                }
            })
            .build();
        verdict(&LparDedicatedCappedLatency, &s)
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            check(lpar(false, true, false, 21.0, 21), Some(2750.0)).status,
            Status::Fail
        );
        // Not measured: no verdict on an assumed frequency.
        let v = check(lpar(false, true, false, 21.0, 21), None);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("not measured"), "{}", v.summary);
        assert_eq!(
            check(lpar(false, true, false, 21.0, 21), Some(3400.0)).status,
            Status::Pass
        );
        assert_eq!(
            check(lpar(true, false, false, 3.0, 12), Some(3800.0)).status,
            Status::NotApplicable
        );
        assert_eq!(
            check(lpar(false, true, true, 21.0, 21), None).status,
            Status::NotApplicable
        );
    }
}
