use super::lpar::describe;
use crate::{Impact, Limits, Rule, Snapshot, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Flags a dedicated-processor PowerVM partition that donates its idle processor cycles
    /// to the shared pool: `DedDonMode=1` in Linux's `/proc/powerpc/lparcfg`, or the
    /// `donate_enabled` flag of `perfstat_partition_total` on AIX.
    ///
    /// ### Why is this bad?
    /// A donating partition gives its idle cycles away and has to reclaim them on every burst
    /// of work, which adds latency exactly when a query arrives. In the field report (POWER9
    /// S924, MariaDB 11.8 vector search, 30 queries) the dedicated LPAR took 0.325 s in donating
    /// mode against 0.205 s capped: a 60% regression. The report's conclusion: "Never use
    /// donating mode for databases."
    ///
    /// ### Remediation
    /// On the HMC, change the partition profile's processor sharing mode for dedicated
    /// processors so that idle processors are **kept** (not shared "when active" or "always"),
    /// then activate the profile. On AIX `lparstat -i` shows `Mode : Donating` before and
    /// `Capped` after; on Linux `/proc/powerpc/lparcfg` shows `DedDonMode=0`.
    pub struct LparDonatingMode {
        code: "PD401",
        name: "lpar-donating-mode",
        severity: Critical,
        scope: Host,
        summary: "a dedicated PowerVM partition donates its idle cycles, adding latency to every burst",
        fails_when: "dedicated PowerVM partition donating idle cycles (`DedDonMode=1`, perfstat `donate_enabled`)",
        severity_why: "critical: donating mode adds latency to every burst (60% slower in the field report)",
        impact: [DONATING],
    }
}

/// One side donates idle cycles, the other does not.
const DONATING: Impact = Impact {
    factor: 1.6,
    evidence: "a dedicated partition donating idle cycles: 0.325 s vs 0.205 s per query capped (1.6×)",
};

impl Rule for LparDonatingMode {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let p = s.partition()?;
        let mode = describe(p);
        if p.shared {
            return Ok(Verdict::pass(
                "shared-processor partition: donation applies to dedicated ones",
            )
            .with_evidence(mode));
        }
        Ok(if p.donating {
            Verdict::fail("this dedicated partition is in donating mode: it reclaims donated cycles on every burst (60% slower in the field report)")
        } else {
            Verdict::pass("dedicated partition, not donating")
        }
        .with_evidence(mode))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::power_partition(false, true, true, 21.0, 21, 84, 4)
    }

    fn check(p: crate::PartitionFacts) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| on_power_lpar(o, p, 84, 4))
            .build();
        verdict(&LparDonatingMode, &s)
    }

    #[test]
    fn verdicts() {
        let v = check(lpar(false, true, true, 21.0, 21));
        assert_eq!(v.status, Status::Fail);
        assert!(v.evidence[0].contains("dedicated, capped, donating"));
        assert_eq!(
            check(lpar(false, true, false, 21.0, 21)).status,
            Status::Pass
        );
        assert_eq!(
            check(lpar(true, false, false, 3.0, 12)).status,
            Status::Pass
        );
        let plain = SnapshotBuilder::new().build();
        assert_eq!(
            verdict(&LparDonatingMode, &plain).status,
            Status::NotApplicable
        );
        let unknown = SnapshotBuilder::new()
            .os(|o| {
                o.partition =
                    crate::Gathered::Unavailable("/proc/powerpc/lparcfg: permission denied".into())
            })
            .build();
        assert_eq!(
            verdict(&LparDonatingMode, &unknown).status,
            Status::InsufficientData
        );
    }
}
