use crate::{
    CpuSaturation, Limits, ProcessCpu, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule,
    os::pct,
    stats::{Estimate, Side},
};

declare_rule! {
    /// ### What it does
    /// Checks whether threads wait for a CPU on the server's host, two ways:
    ///
    /// - **The host**: runnable threads waited for a CPU during at least {max_waiting_share}
    ///   of the last minute — the kernel's CPU pressure (`/proc/pressure/cpu`, `some avg60`,
    ///   Linux 4.20+): at such moments the runnable threads outnumber the CPUs they may run
    ///   on. Without pressure figures (older kernels, `psi=0`, AIX) a 1-minute load average
    ///   below half the online CPUs still passes — a queue longer than the CPUs for most of
    ///   the minute would average at least that — and anything higher is
    ///   `insufficient_data`.
    /// - **mariadbd**: its user and system time over the window reached {max_process_share}
    ///   of the CPUs it may use — the least of the online CPUs, its CPU affinity and its
    ///   cgroup's CPU quota (`cpu.max`, or v1's `cpu.cfs_quota_us`, the tightest along its
    ///   cgroup's ancestors). The share is decided on its 95% interval over the window's
    ///   CPU-time ticks (USER_HZ on Linux, 10 ms on AIX): a short window decides
    ///   only a clear case. The agent measures from its
    ///   previous sample (up to ten minutes), doctor over `--sample-window`.
    ///
    /// Stolen time (PD403) is named beside it: a hypervisor that takes the CPUs away looks
    /// the same from inside and is fixed elsewhere. `Threads_running` against the CPUs and the
    /// cgroup's throttled periods are evidence. Peers: the node mixin's
    /// `NodeSystemSaturation` (load per CPU above 2 for 15 minutes) and PMM's CPU saturation
    /// panel (load over CPUs).
    ///
    /// ### Why is this bad?
    /// A thread that waits for a CPU adds its wait to every statement it runs: at a run
    /// queue of twice the CPUs, each query's CPU part takes about twice as long, latency
    /// percentiles climb before throughput falls, and InnoDB's background threads (purge,
    /// page cleaner) fall behind with it. A cgroup quota makes this invisible to the host's
    /// tools: the host looks idle while mariadbd is throttled in every period.
    ///
    /// ### Remediation
    /// Find what uses the CPUs: `top -H -p $(pidof mariadbd)` for the server's threads,
    /// the top statements (`powerdiag doctor`'s statement section: a missing index, PD701,
    /// or a statement storm, PD702, are the usual causes), then other processes on the host.
    /// Lower the work or add CPUs: more vCPUs or entitlement (PowerVM: PD401, PD407), or move
    /// the other work away.
    ///
    /// When mariadbd is held by its cgroup quota, raise it: `systemctl set-property
    /// mariadb.service CPUQuota=400%` (systemd), `docker update --cpus 4`, or the
    /// container's `resources.limits.cpu` (Kubernetes). When its CPU affinity is narrower
    /// than the host (`taskset -p $(pidof mariadbd)`, `CPUAffinity=` in the unit, `numactl`),
    /// widen it.
    pub struct CpuSaturated {
        code: "PD806",
        name: "cpu-saturated",
        severity: Warning,
        scope: Host,
        summary: "threads wait for a CPU: the host's CPUs, or those mariadbd may use, are saturated",
        fails_when: "runnable threads waited for a CPU ≥ 50% of the last minute (PSI `some avg60`), or mariadbd used ≥ 90% of the CPUs it may use (affinity, cgroup quota) over the window, on its 95% interval",
        severity_why: "warning: saturation slows every statement, but it is measured as waiting, not as what the waiting cost the queries",
        thresholds: [MAX_WAITING_SHARE, MAX_PROCESS_SHARE],
    }
}

const MAX_WAITING_SHARE: Threshold = Threshold {
    key: "max_waiting_share",
    default: 0.5,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of the last minute during which runnable threads waited for a CPU (PSI `some avg60`): \"most of the window\"",
};
const MAX_PROCESS_SHARE: Threshold = Threshold {
    key: "max_process_share",
    default: 0.9,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of the CPUs mariadbd may use (affinity, cgroup quota) that its threads used over the window",
};

/// A part's outcome: failed (with its summary), passed, or unknown (why).
enum Part {
    Fail(String),
    Pass,
    Unknown(String),
}

impl Rule for CpuSaturated {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let sat = s.saturation()?;
        let mut evidence = Vec::new();
        let host = host_part(sat, limits.get(&MAX_WAITING_SHARE), &mut evidence);
        let process = match (&sat.process, sat.process_unread.as_deref()) {
            (Some(p), _) => process_part(p, limits.get(&MAX_PROCESS_SHARE), &mut evidence),
            (None, Some(why)) if why.contains("another host") => {
                return Err(Verdict::insufficient(format!(
                    "mariadbd's CPU {why}: run powerdiag on the server's host"
                )));
            }
            (None, why) => Part::Unknown(format!(
                "mariadbd's CPU use was not measured: {}",
                why.unwrap_or("no reason recorded")
            )),
        };
        if let Some(running) = s
            .db()
            .ok()
            .and_then(|db| db.status_u64(crate::StatusVar::ThreadsRunning).ok())
            && let Some(cpus) = sat.online_cpus
        {
            evidence.push(format!(
                "Threads_running {running} against {cpus} online CPUs (an instant)"
            ));
        }
        if let Ok(t) = s.cpu_time()
            && let Some(steal) = t.steal_share
            && steal >= 0.02
        {
            evidence.push(format!(
                "{} of the CPU time was stolen by the hypervisor ({}): that part is the host's neighbours, fixed by PD403's remedies, not by less work here",
                pct(steal),
                t.basis
            ));
        }
        let fails: Vec<String> = [&host, &process]
            .into_iter()
            .filter_map(|p| match p {
                Part::Fail(why) => Some(why.clone()),
                _ => None,
            })
            .collect();
        if !fails.is_empty() {
            return Ok(Verdict::fail(fails.join("; ")).with_evidence_lines(evidence));
        }
        let unknown: Vec<&str> = [&host, &process]
            .into_iter()
            .filter_map(|p| match p {
                Part::Unknown(why) => Some(why.as_str()),
                _ => None,
            })
            .collect();
        if !unknown.is_empty() {
            let mut v = Verdict::insufficient(unknown.join("; "));
            v.evidence = evidence;
            return Err(v);
        }
        Ok(Verdict::pass(
            "no CPU saturation: threads rarely waited for a CPU, and mariadbd stayed below what it may use",
        )
        .with_evidence_lines(evidence))
    }
}

fn host_part(sat: &CpuSaturation, limit: f64, evidence: &mut Vec<String>) -> Part {
    let cpus = sat
        .online_cpus
        .map(|n| format!("{n} online CPUs"))
        .unwrap_or_else(|| "the online CPUs (count unknown)".into());
    if let Some(running) = sat.procs_running {
        evidence.push(format!(
            "{running} runnable threads at the window's end against {cpus} (an instant)"
        ));
    }
    if let Some(p) = &sat.pressure {
        evidence.push(format!(
            "runnable threads waited for a CPU during {} of the last minute (CPU pressure `some`: {} over 10 s, {} over 5 min{})",
            pct(p.avg60),
            pct(p.avg10),
            pct(p.avg300),
            p.window_share
                .map(|w| format!(", {} over the window", pct(w)))
                .unwrap_or_default()
        ));
        return if p.avg60 >= limit {
            Part::Fail(format!(
                "runnable threads waited for a CPU during {} of the last minute on this host of {cpus}",
                pct(p.avg60)
            ))
        } else {
            Part::Pass
        };
    }
    let unread = sat
        .pressure_unread
        .as_deref()
        .unwrap_or("no CPU pressure figures");
    match (sat.load, sat.online_cpus) {
        (Some([load1, ..]), Some(n)) if n > 0 => {
            evidence.push(format!("load average {load1:.2} over the last minute, {cpus}"));
            if load1 < 0.5 * f64::from(n) {
                // A queue above n for more than half the minute averages more than n/2.
                Part::Pass
            } else {
                Part::Unknown(format!(
                    "{unread}; a load average of {load1:.2} on {n} CPUs cannot tell whether runnable threads outnumbered the CPUs for most of the last minute"
                ))
            }
        }
        _ => Part::Unknown(format!("{unread}, and no load average with the online CPUs")),
    }
}

fn process_part(p: &ProcessCpu, limit: f64, evidence: &mut Vec<String>) -> Part {
    let used = p.cpus_used();
    let share = Estimate::share(p.ticks, p.allowed_ticks());
    evidence.push(format!(
        "mariadbd used {used:.2} CPUs of the {:.2} it may use ({}: {share}), {}",
        p.allowed_cpus, p.allowed_by, p.basis
    ));
    if let Some(c) = &p.cgroup {
        let quota = c
            .quota_cpus
            .map(|q| format!("quota {q:.2} CPUs"))
            .unwrap_or_else(|| "no CPU quota".into());
        let throttled = match (c.periods, c.throttled_periods) {
            (Some(n), Some(k)) if n > 0 => format!(
                ", throttled in {k} of {n} periods ({}){}",
                pct(k as f64 / n as f64),
                c.throttled_seconds
                    .map(|s| format!(", {s:.2} s throttled"))
                    .unwrap_or_default()
            ),
            _ => String::new(),
        };
        evidence.push(format!(
            "its cgroup {} (v{}): {quota}{throttled}",
            crate::display_text(&c.path, 160),
            c.version
        ));
    }
    match share.side(limit) {
        Side::Above => Part::Fail(format!(
            "mariadbd used {used:.2} of the {:.2} CPUs its {} allows ({})",
            p.allowed_cpus,
            p.allowed_by,
            pct(share.value)
        )),
        Side::Below => Part::Pass,
        Side::Straddles => Part::Unknown(format!(
            "mariadbd used {} of the CPUs it may use over {:.1} s ({} CPU-time ticks): too few to tell against {}; a longer window decides (doctor --sample-window 10s)",
            pct(share.value),
            p.window_seconds,
            share.events(),
            pct(limit)
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        CgroupCpu, CpuPressure, Gathered, Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn with(f: impl FnOnce(&mut CpuSaturation)) -> Snapshot {
        SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(s) = &mut o.saturation {
                    f(s);
                }
            })
            .build()
    }

    fn pressure(avg60: f64) -> Option<CpuPressure> {
        Some(CpuPressure {
            avg10: avg60,
            avg60,
            avg300: avg60,
            window_share: None,
            total_us: 0,
        })
    }

    /// mariadbd held by a 2-CPU quota on a 64-CPU host: the host is idle, the server is not.
    pub(crate) fn failing_example() -> Snapshot {
        with(|s| {
            s.process = Some(ProcessCpu {
                basis: "since the agent's last sample (60.0 s)".into(),
                window_seconds: 60.0,
                ticks: 11_900,
                ticks_per_second: 100,
                allowed_cpus: 2.0,
                allowed_by: "cgroup CPU quota".into(),
                cgroup: Some(CgroupCpu {
                    path: "/system.slice/mariadb.service".into(),
                    version: 2,
                    quota_cpus: Some(2.0),
                    periods: Some(600),
                    throttled_periods: Some(590),
                    throttled_seconds: Some(41.3),
                }),
            });
        })
    }

    #[test]
    fn a_quota_held_server_fails_on_an_idle_host() {
        let v = verdict(&CpuSaturated, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary
                .contains("mariadbd used 1.98 of the 2.00 CPUs its cgroup CPU quota allows"),
            "{}",
            v.summary
        );
        assert!(
            v.evidence
                .iter()
                .any(|e| e.contains("throttled in 590 of 600 periods")),
            "{:?}",
            v.evidence
        );
    }

    #[test]
    fn host_pressure_decides_on_the_last_minute() {
        let v = verdict(&CpuSaturated, &with(|s| s.pressure = pressure(0.7)));
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.summary.contains("during 70.0% of the last minute"),
            "{}",
            v.summary
        );
        // At the limit it fails; below it passes (the builder's mariadbd uses 8 of 64 CPUs).
        assert_eq!(
            verdict(&CpuSaturated, &with(|s| s.pressure = pressure(0.5))).status,
            Status::Fail
        );
        let v = verdict(&CpuSaturated, &with(|s| s.pressure = pressure(0.49)));
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    /// Without PSI a low load average passes, a high one is unknown, never a guess.
    #[test]
    fn without_pressure_the_load_average_bounds_only_a_pass() {
        let no_psi = |load1: f64| {
            with(|s| {
                s.pressure = None;
                s.pressure_unread = Some("no /proc/pressure/cpu (kernel before 4.20)".into());
                s.load = Some([load1, load1, load1]);
            })
        };
        assert_eq!(verdict(&CpuSaturated, &no_psi(31.0)).status, Status::Pass);
        let v = verdict(&CpuSaturated, &no_psi(40.0));
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("kernel before 4.20"), "{}", v.summary);
        assert!(v.summary.contains("cannot tell"), "{}", v.summary);
    }

    /// A second's window decides only a clear case: 95% of one CPU over 1 s straddles 90%.
    #[test]
    fn a_short_window_decides_only_clear_cases() {
        let one = |ticks: u64, secs: f64| {
            with(|s| {
                s.process = Some(ProcessCpu {
                    basis: format!("window {secs:.2} s"),
                    window_seconds: secs,
                    ticks,
                    ticks_per_second: 100,
                    allowed_cpus: 1.0,
                    allowed_by: "CPU affinity".into(),
                    cgroup: None,
                })
            })
        };
        let v = verdict(&CpuSaturated, &one(95, 1.0));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("--sample-window"), "{}", v.summary);
        assert_eq!(verdict(&CpuSaturated, &one(950, 10.0)).status, Status::Fail);
        assert_eq!(verdict(&CpuSaturated, &one(30, 1.0)).status, Status::Pass);
        // Zero ticks over a zero window: nothing measured, nothing decided.
        assert_eq!(
            verdict(&CpuSaturated, &one(0, 0.0)).status,
            Status::InsufficientData
        );
    }

    #[test]
    fn a_remote_server_and_a_missing_section_are_named() {
        let v = verdict(
            &CpuSaturated,
            &with(|s| {
                s.process = None;
                s.process_unread = Some("unavailable: the server runs on another host".into());
            }),
        );
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("another host"), "{}", v.summary);
        let s = SnapshotBuilder::new()
            .os(|o| o.saturation = Gathered::Unavailable("unavailable: no /proc".into()))
            .build();
        let v = verdict(&CpuSaturated, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("CPU saturation"), "{}", v.summary);
    }

    #[test]
    fn steal_is_named_beside_saturation() {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(s) = &mut o.saturation {
                    s.pressure = pressure(0.8);
                }
                if let Gathered::Available(t) = &mut o.cpu_time {
                    t.steal_share = Some(0.2);
                }
            })
            .build();
        let v = verdict(&CpuSaturated, &s);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.evidence.iter().any(|e| e.contains("stolen") && e.contains("PD403")),
            "{:?}",
            v.evidence
        );
    }
}
