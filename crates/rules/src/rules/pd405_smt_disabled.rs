use crate::{Impact, Limits, Rule, Snapshot, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// On IBM POWER, checks that simultaneous multithreading is on: `smt/control` is not `off`
    /// or `forceoff`, and cores run more than one hardware thread (AIX: `smt_thrds` > 1).
    ///
    /// ### Why is this bad?
    /// POWER cores are built for SMT: with the hardware threads off, most of the core's
    /// execution resources idle while a thread waits on memory. In the MySQL-on-POWER8 record
    /// run (sysbench point selects, 344k QPS) SMT2 gave about 50% more throughput than SMT off
    /// and SMT4 roughly doubled it; SMT4 or SMT8 were best. Database work, dominated by memory
    /// stalls, is the textbook case for SMT.
    ///
    /// ### Remediation
    /// #### Linux
    /// `ppc64_cpu --smt=4` (or `--smt=8`), persisted through a systemd unit or the
    /// distribution's tuned profile; check `/sys/devices/system/cpu/smt/control` is not
    /// `forceoff` (kernel command line `nosmt`).
    ///
    /// #### AIX
    /// `smtctl -t 4 -w boot` (or `-w now`).
    pub struct SmtDisabled {
        code: "PD405",
        name: "smt-disabled",
        severity: Warning,
        scope: Host,
        summary: "simultaneous multithreading is off on a POWER host",
        fails_when: "POWER host with SMT off",
        severity_why: "warning: SMT off leaves POWER cores idle on memory stalls (up to 2× less throughput measured), likely under a concurrent load",
        impact: [SMT_OFF, SMT_LEVEL],
    }
}

/// One side runs without SMT.
const SMT_OFF: Impact = Impact {
    factor: 2.0,
    evidence: "MySQL on POWER8: SMT4 roughly doubled throughput over SMT off (2×)",
};
/// Both sides run SMT, at different levels.
const SMT_LEVEL: Impact = Impact {
    factor: 1.3,
    evidence: "MySQL on POWER8: SMT2 gave ~1.5× and SMT4 ~2× the throughput of SMT off (SMT2 → SMT4 ≈ 1.3×)",
};

impl Rule for SmtDisabled {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let cpu = s.require_power()?;
        let control = cpu.smt_control.as_deref();
        let per_core = cpu.threads_per_core;
        let evidence = format!(
            "smt/control {}, {} threads per core",
            control.unwrap_or("unknown"),
            per_core
                .map(|t| t.to_string())
                .unwrap_or_else(|| "?".into())
        );
        let off = matches!(control, Some("off" | "forceoff")) || per_core == Some(1);
        if control.is_none() && per_core.is_none() {
            return Err(Verdict::insufficient(
                "neither smt/control nor the thread topology could be read",
            ));
        }
        Ok(if off {
            Verdict::fail("SMT is off: each POWER core runs one hardware thread (SMT4 doubled throughput on POWER8)")
        } else {
            Verdict::pass(format!("SMT is on ({} threads per core)", per_core.unwrap_or(0)))
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
        crate::rules::examples::power_partition(true, false, false, 3.0, 12, 20, 1)
    }

    fn check(threads: u32, smt: u32) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| o.cpu = Gathered::Available(power9_cpu(threads, smt)))
            .build();
        verdict(&SmtDisabled, &s)
    }

    #[test]
    fn verdicts() {
        assert_eq!(check(20, 1).status, Status::Fail);
        assert_eq!(check(96, 8).status, Status::Pass);
        assert_eq!(
            verdict(&SmtDisabled, &SnapshotBuilder::new().build()).status,
            Status::NotApplicable
        );
    }
}
