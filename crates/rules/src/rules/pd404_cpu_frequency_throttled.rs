use crate::{Impact, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, os::pct};

declare_rule! {
    /// ### What it does
    /// Compares the CPU's effective frequency with its nominal one while the host is under load
    /// (at least {min_busy} busy over the window, *heuristic*). Effective frequency is SPURR/PURR ×
    /// nominal on POWER, else the average of cpufreq's current frequencies (or `/proc/cpuinfo`
    /// "cpu MHz"). Nominal is POWER's `/proc/cpuinfo` clock, cpufreq `base_frequency`, or
    /// `cpuinfo_max_freq`. Fails below {min_frequency_ratio} of nominal (*heuristic*: there is no published
    /// cut-off; 90–95% is common practice). Running at or above nominal passes at any load.
    ///
    /// ### Why is this bad?
    /// A throttled CPU makes every query slower in proportion, and it is invisible from inside
    /// the database. Frequency is a first-order factor in the field report: a POWER9 shared core
    /// boosting to ~3.8 GHz against one held at the 2.75 GHz nominal is 38% more clock, enough to
    /// reverse which LPAR configuration wins single-query latency.
    ///
    /// ### Remediation
    /// Set the platform to a performance power mode, and check cooling and power capping
    /// (`ipmitool dcmi power get_limit`), which throttle silently.
    ///
    /// #### POWER
    /// "Maximum performance" (or "Static power saver" off) in ASMI or the HMC.
    ///
    /// #### x86
    /// The BIOS performance profile and the `performance` cpufreq governor
    /// (`cpupower frequency-set -g performance`).
    pub struct CpuFrequencyThrottled {
        code: "PD404",
        name: "cpu-frequency-throttled",
        severity: Warning,
        scope: Host,
        summary: "the CPU runs well below its nominal frequency under load",
        fails_when: "effective frequency < 90% of nominal while ≥ 50% busy *(heuristic)*",
        severity_why: "warning: a frequency below nominal while ≥ 50% busy slows CPU-bound queries in proportion under the present load",
        thresholds: [MIN_RATIO, MIN_BUSY],
        impact: [FREQUENCY],
    }
}

/// The factor when either effective frequency is unknown; else the diff uses the ratio of the two.
const FREQUENCY: Impact = Impact {
    factor: 1.1,
    evidence: "per-query CPU time scales with the clock: the ratio of the two effective frequencies (a shared POWER9 core boosts to ~3.8 GHz, a dedicated capped one stays at 2.75 GHz)",
};

const MIN_RATIO: Threshold = Threshold {
    key: "min_frequency_ratio",
    default: 0.90,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "effective over nominal frequency under load below which the CPU counts as throttled",
};
const MIN_BUSY: Threshold = Threshold {
    key: "min_busy",
    default: 0.50,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of CPU time busy over the window needed to judge the frequency (heuristic)",
};

impl Rule for CpuFrequencyThrottled {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let cpu = s.cpu()?;
        let nominal = cpu.nominal_mhz.ok_or_else(|| {
            Verdict::insufficient(match cpu.nominal_source.as_deref() {
                // The collector says why (a pSeries guest's clock line is the hypervisor's).
                Some(why) => format!("the nominal CPU frequency is {why}"),
                None => "the nominal CPU frequency is unknown (no cpufreq, no POWER clock line)"
                    .into(),
            })
        })?;
        let (effective, source) = cpu.measured_mhz().ok_or_else(|| {
            Verdict::insufficient(match cpu.current_source.as_deref() {
                Some(crate::CPUINFO_MHZ) => {
                    "the effective CPU frequency is unknown: no cpufreq, and /proc/cpuinfo's cpu MHz is not a measurement (on a virtual machine it is the TSC rate)"
                }
                _ => "the effective CPU frequency is unknown",
            })
        })?;
        let busy = cpu
            .busy_share
            .ok_or_else(|| Verdict::insufficient("CPU load over the window is unknown"))?;
        let ratio = effective / nominal;
        let evidence = format!(
            "{source} {effective:.0} MHz vs nominal {nominal:.0} MHz ({}), {} busy, governor {}",
            pct(ratio),
            pct(busy),
            cpu.governor.as_deref().unwrap_or("n/a")
        );
        if ratio >= 1.0 {
            // Boosting above nominal is never throttling, whatever the load.
            return Ok(Verdict::pass(format!(
                "the CPU runs at {} of nominal{}",
                pct(ratio),
                if ratio > 1.02 { " (boosting)" } else { "" }
            ))
            .with_evidence(evidence));
        }
        let min_busy = limits.get(&MIN_BUSY);
        if busy < min_busy {
            return Err(Verdict::insufficient(format!(
                "the host was {} busy over the window; frequency is judged under load (≥ {}, heuristic)",
                pct(busy),
                pct(min_busy)
            ))
            .with_evidence(evidence));
        }
        Ok(if ratio < limits.get(&MIN_RATIO) {
            Verdict::fail(format!(
                "the CPU runs at {} of its nominal frequency under load",
                pct(ratio)
            ))
        } else {
            Verdict::pass(format!(
                "the CPU runs at {} of nominal under load",
                pct(ratio)
            ))
        }
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn check(current: Option<f64>, busy: f64) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(c) = &mut o.cpu {
                    c.nominal_mhz = Some(3690.0);
                    c.current_mhz = current;
                    c.busy_share = Some(busy);
                }
            })
            .build();
        verdict(&CpuFrequencyThrottled, &s)
    }

    #[test]
    fn verdicts() {
        let v = check(Some(2061.0), 0.9);
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("55.9%"), "{}", v.summary);
        assert_eq!(check(Some(3600.0), 0.9).status, Status::Pass);
        assert_eq!(check(Some(2061.0), 0.1).status, Status::InsufficientData);
        assert_eq!(
            check(Some(5000.0), 0.1).status,
            Status::Pass,
            "boosting at idle"
        );
        assert_eq!(check(None, 0.9).status, Status::InsufficientData);
    }
}
