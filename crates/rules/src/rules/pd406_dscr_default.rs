use crate::{Limits, Rule, Snapshot, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// On IBM POWER, reports when the Data Stream Control Register default is 0 (the hardware
    /// prefetcher at its default depth), from `/sys/devices/system/cpu/dscr_default` on Linux or
    /// `dscrctl -q` on AIX. Information for read-heavy servers.
    ///
    /// ### Why is this bad?
    /// The DSCR sets how aggressively the POWER prefetcher streams data. In the MySQL-on-POWER8
    /// measurements, DSCR=1 gave about 10% more throughput than 0 for point selects. It is
    /// workload-dependent — pointer-chasing (vector graphs) gains nothing, and in the field
    /// report's shared LPAR DSCR tuning was not honoured at all — so this is an experiment to run,
    /// not a setting to copy.
    ///
    /// ### Remediation
    /// Measure with your workload, and revert if throughput does not improve.
    ///
    /// #### Linux
    /// `echo 1 > /sys/devices/system/cpu/dscr_default` (as root; persist with a udev rule or
    /// systemd unit).
    ///
    /// #### AIX
    /// `dscrctl -n -s 1` (now) and `dscrctl -b -s 1` (at boot).
    pub struct DscrDefault {
        code: "PD406",
        name: "dscr-default",
        severity: Info,
        scope: Host,
        summary: "the POWER prefetch depth (DSCR) is at its default; DSCR=1 helped read-heavy work by ~10%",
        fails_when: "POWER host with DSCR 0 (default prefetch depth)",
        severity_why: "info: DSCR gains depend on the workload and are not measured here, so it is an experiment to run",
    }
}

impl Rule for DscrDefault {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let cpu = s.require_power()?;
        let dscr = cpu
            .dscr_default
            .ok_or_else(|| Verdict::insufficient("dscr_default could not be read"))?;
        let evidence = format!("dscr_default = {dscr:#x}");
        Ok(if dscr == 0 {
            Verdict::fail("DSCR is 0 (default prefetch depth); DSCR=1 was ~10% faster for point selects on POWER8")
        } else {
            Verdict::pass(format!("DSCR is set to {dscr:#x}"))
        }
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::power_partition(false, true, true, 21.0, 21, 84, 4)
    }

    #[test]
    fn verdicts() {
        let check = |d: Option<u64>| {
            let mut c = power9_cpu(96, 8);
            c.dscr_default = d;
            let s = SnapshotBuilder::new()
                .os(|o| o.cpu = Gathered::Available(c))
                .build();
            verdict(&DscrDefault, &s).status
        };
        assert_eq!(check(Some(0)), Status::Fail);
        assert_eq!(check(Some(1)), Status::Pass);
        assert_eq!(check(None), Status::InsufficientData);
        assert_eq!(
            verdict(&DscrDefault, &SnapshotBuilder::new().build()).status,
            Status::NotApplicable
        );
    }
}
