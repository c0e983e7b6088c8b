use crate::{
    Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule,
    rules::lpar::describe,
};

declare_rule! {
    /// ### What it does
    /// On a shared-processor PowerVM partition, divides the entitled capacity by the number of
    /// online virtual processors. Fails below {min_entitlement_per_vcpu} processor units per virtual processor
    /// (*heuristic*, from common PowerVM sizing guidance: EC/VP < 0.6 means each virtual processor
    /// is guaranteed little physical time).
    ///
    /// ### Why is this bad?
    /// Beyond its entitlement a virtual processor only runs when the shared pool has idle
    /// cycles; otherwise the hypervisor preempts it and its cache contents are lost. Many
    /// virtual processors on a small entitlement spread that guarantee thin — the setting behind
    /// the field report's 70% stall share on a 12-vCPU shared LPAR.
    ///
    /// ### Remediation
    /// On the HMC, raise the partition's desired entitled capacity or lower its number of
    /// virtual processors so that EC/VP ≥ 0.6 (e.g. 12 VPs → entitlement ≥ 7.2). If the
    /// partition runs above 80% of its entitlement around the clock, consider dedicated
    /// processors (not donating: PD401).
    pub struct EntitlementLowPerVcpu {
        code: "PD407",
        name: "entitlement-low-per-vcpu",
        severity: Warning,
        scope: Host,
        summary: "a shared partition's entitlement is spread thin over its virtual processors",
        fails_when: "shared partition with < 0.6 entitled processor units per virtual processor *(heuristic)*",
        severity_why: "warning: thin entitlement makes preemption likely whenever the shared pool is busy",
        thresholds: [MIN_PER_VCPU],
    }
}

const MIN_PER_VCPU: Threshold = Threshold {
    key: "min_entitlement_per_vcpu",
    default: 0.6,
    min: 0.05,
    max: 1.0,
    unit: Unit::Number,
    doc: "processor units of entitlement per virtual processor below which the rule fails (heuristic)",
};

impl Rule for EntitlementLowPerVcpu {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let p = s.partition()?;
        if !p.shared {
            return Err(Verdict::not_applicable(
                "dedicated partition: entitlement is whole processors",
            ));
        }
        let (Some(ec), Some(vp)) = (p.entitled_capacity, p.online_vcpus.filter(|v| *v > 0)) else {
            return Err(Verdict::insufficient(
                "entitled capacity or virtual processor count unknown",
            ));
        };
        let per = ec / f64::from(vp);
        let evidence = describe(p);
        let min_per = limits.get(&MIN_PER_VCPU);
        Ok(if per < min_per {
            Verdict::fail(format!(
                "{ec:.2} processor units over {vp} virtual processors is {per:.2} per VP (heuristic minimum {min_per})"
            ))
            .with_remediation(format!(
                "On the HMC raise the desired entitled capacity to at least {:.1} for {vp} virtual processors, or reduce them to {} or fewer.",
                min_per * f64::from(vp),
                ((ec / min_per).floor() as u32).max(1)
            ))
        } else {
            Verdict::pass(format!("{per:.2} processor units per virtual processor"))
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
        crate::rules::examples::power_partition(true, false, false, 3.0, 12, 20, 1)
    }

    fn check(p: crate::PartitionFacts) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| on_power_lpar(o, p, 96, 8))
            .build();
        verdict(&EntitlementLowPerVcpu, &s)
    }

    #[test]
    fn verdicts() {
        let v = check(lpar(true, false, false, 3.0, 12));
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("0.25 per VP"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("at least 7.2"));
        assert_eq!(
            check(lpar(true, false, false, 9.0, 12)).status,
            Status::Pass
        );
        assert_eq!(
            check(lpar(false, true, false, 21.0, 21)).status,
            Status::NotApplicable
        );
        let mut p = lpar(true, false, false, 3.0, 12);
        p.online_vcpus = None;
        assert_eq!(check(p).status, Status::InsufficientData);
    }
}
