use crate::{Gathered, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Reads `SHOW PROFILE ALL` of one probe query and takes its dominant stage (the longest,
    /// usually "Sending data"). The stage's *stall* is the part of its Duration not spent on
    /// CPU: `Duration − (CPU_user + CPU_system)`. The rule fails when the stall exceeds 50% of
    /// the stage's Duration. Stages shorter than 0.2 ms are too coarse to judge.
    ///
    /// ### Why is this bad?
    /// A CPU-bound vector search should spend its time on the CPU. In the field report (POWER9,
    /// 100k × 768-d) the dominant stage on AIX took 4.70 ms of which only 1.41 ms was CPU_user:
    /// 3.29 ms (70%) of stalls, against 0.81 ms with ~0.01 ms of stalls (1%) on Linux on the same
    /// machine. The cause was the shared LPAR: the hypervisor preempted the virtual processors,
    /// and the L2/L3 lines the pointer-chasing graph walk needed were lost each time. Stalls of
    /// this size point at the partition (PD403 hypervisor-preemption, PD407, PD401) and at
    /// memory placement (PD501), not at the query.
    ///
    /// Note that MHNSW cache thrashing does *not* show up here: on a dedicated host a thrashing
    /// query is still CPU-bound (Duration = CPU in every stage); use PD102 for it.
    ///
    /// ### Remediation
    /// Look at the host's partition and CPU checks (PD4xx) in the same report: steal time,
    /// entitlement per virtual CPU, donating mode. On PowerVM, raise the entitlement or move the
    /// LPAR to dedicated processors; elsewhere, reduce vCPU overcommit on the hypervisor. Check
    /// NUMA placement (`numactl --hardware`) when the host has several nodes.
    pub struct ProfilerStallDominated {
        code: "PD103",
        name: "profiler-stall-dominated",
        severity: Warning,
        scope: Database,
        summary: "a probe query's dominant stage spends most of its time stalled off the CPU",
        thresholds: [MAX_STALL_SHARE, MIN_STAGE_US],
    }
}

const MAX_STALL_SHARE: Threshold = Threshold {
    key: "max_stall_share",
    default: 0.5,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of the dominant stage's duration that may be spent off the CPU",
};
const MIN_STAGE_US: Threshold = Threshold {
    key: "min_stage_us",
    default: 200.0,
    min: 1.0,
    max: 1e9,
    unit: Unit::Count,
    doc: "shortest dominant stage worth judging, in µs (rusage granularity makes shorter ones noise)",
};

impl Rule for ProfilerStallDominated {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let probe = match &db.probe {
            Gathered::Available(p) => p,
            Gathered::Unavailable(why) => {
                return Err(Verdict::insufficient(format!(
                    "the profile comes from a probe query, which did not run: {why}"
                )));
            }
        };
        let profile = match &probe.profile {
            Some(Gathered::Available(p)) => p,
            Some(Gathered::Unavailable(why)) => {
                return Err(Verdict::insufficient(format!("no query profile: {why}")));
            }
            None => {
                return Err(Verdict::not_applicable(
                    "no probe query was profiled (no vector index to probe)",
                ));
            }
        };
        let Some(stage) = profile.stages.iter().max_by_key(|s| s.duration_us) else {
            return Err(Verdict::insufficient("the query profile has no stages"));
        };
        let total: u64 = profile
            .stages
            .iter()
            .map(|s| s.duration_us)
            .fold(0, u64::saturating_add);
        let cpu = stage.cpu_user_us.saturating_add(stage.cpu_system_us);
        let stall = stage.duration_us.saturating_sub(cpu);
        let share = if stage.duration_us == 0 {
            0.0
        } else {
            stall as f64 / stage.duration_us as f64
        };
        let line = format!(
            "{}: dominant stage \"{}\" {:.3} ms of {:.3} ms total; CPU_user {:.3} ms + CPU_system {:.3} ms; stall {:.3} ms ({:.0}%); {} involuntary context switches, {} major faults",
            profile.index,
            stage.status,
            stage.duration_us as f64 / 1000.0,
            total as f64 / 1000.0,
            stage.cpu_user_us as f64 / 1000.0,
            stage.cpu_system_us as f64 / 1000.0,
            stall as f64 / 1000.0,
            share * 100.0,
            stage.context_involuntary,
            stage.page_faults_major,
        );
        let min_stage_us = limits.count(&MIN_STAGE_US);
        if stage.duration_us < min_stage_us {
            return Err(Verdict::insufficient(format!(
                "the dominant stage took {} µs, too short to attribute (needs ≥ {min_stage_us} µs)",
                stage.duration_us
            ))
            .with_evidence(line));
        }
        let max_share = limits.get(&MAX_STALL_SHARE);
        let v = if share > max_share {
            Verdict::fail(format!(
                "the dominant stage \"{}\" of a probe query spent {:.0}% of its time stalled off the CPU (limit {:.0}%)",
                stage.status,
                share * 100.0,
                max_share * 100.0
            ))
        } else {
            Verdict::pass(format!(
                "the dominant stage \"{}\" is CPU-bound: {:.0}% stalled",
                stage.status,
                share * 100.0
            ))
        };
        Ok(v.with_evidence(line))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Probe, ProfileStage, QueryProfile, Status, testing::*};

    fn stage(status: &str, duration_us: u64, cpu_user_us: u64) -> ProfileStage {
        ProfileStage {
            status: status.into(),
            duration_us,
            cpu_user_us,
            ..Default::default()
        }
    }

    fn probe_with(stages: Vec<ProfileStage>) -> Probe {
        Probe {
            indexes: vec![],
            profile: Some(Gathered::Available(QueryProfile {
                index: "app.docs (e)".into(),
                stages,
            })),
        }
    }

    /// The field report's AIX shared LPAR: 4.70 ms, 1.41 ms CPU.
    pub(crate) fn stalled_probe() -> Probe {
        probe_with(vec![
            stage("Opening tables", 20, 20),
            stage("Sending data", 4700, 1410),
        ])
    }

    fn check(p: Probe) -> Verdict {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .probe(p)
            .build();
        verdict(&ProfilerStallDominated, &s)
    }

    #[test]
    fn fails_on_the_field_reports_aix_profile() {
        let v = check(stalled_probe());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("70%"), "{}", v.summary);
    }

    #[test]
    fn passes_on_a_cpu_bound_profile() {
        let v = check(probe_with(vec![stage("Sending data", 810, 800)]));
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn insufficient_on_tiny_or_missing_profiles() {
        assert_eq!(
            check(probe_with(vec![stage("Sending data", 90, 0)])).status,
            Status::InsufficientData
        );
        assert_eq!(check(probe_with(vec![])).status, Status::InsufficientData);
        let p = Probe {
            indexes: vec![],
            profile: Some(Gathered::Unavailable("have_profiling=NO".into())),
        };
        assert_eq!(check(p).status, Status::InsufficientData);
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(
            verdict(&ProfilerStallDominated, &s).status,
            Status::InsufficientData
        );
    }

    #[test]
    fn not_applicable_when_nothing_was_profiled() {
        assert_eq!(check(Probe::default()).status, Status::NotApplicable);
    }

    #[test]
    fn cpu_above_duration_is_not_negative_stall() {
        let v = check(probe_with(vec![stage("Sending data", 1000, 5000)]));
        assert_eq!(v.status, Status::Pass);
    }
}
