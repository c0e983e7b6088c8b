//! CPU: model, architecture, sockets/cores/threads, SMT, frequencies, governor, DSCR.

use std::collections::BTreeSet;

use powerdiag_rules::{CpuFacts, Gathered, OsFacts};
use procfs::CpuInfo;

use super::fs::{parse_cpu_list, parse_procfs, read_trim, read_u64};
use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `cpu` section: cpuinfo and sysfs, with the busy share of `cpu_time` (registered
/// before it) and, on POWER, the effective frequency from SPURR/PURR over the window.
pub(super) struct Cpu;

impl Collector for Cpu {
    const NAME: &'static str = "cpu";
    /// Σ SPURR, Σ PURR when the window opened.
    type Baseline = (u64, u64);
    type Output = CpuFacts;

    fn begin(&self, ctx: &Ctx) -> Option<(u64, u64)> {
        spurr_purr(ctx.roots)
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<(u64, u64)>,
        so_far: &OsFacts,
    ) -> Result<CpuFacts, CollectError> {
        let mut c = collect(ctx.roots)?;
        if let Ok(t) = so_far.cpu_time.as_ref() {
            c.busy_share = t.busy_share;
        }
        // POWER: effective frequency = ΔSPURR/ΔPURR × nominal (as powerpc-utils' lparstat -E).
        if let Some(nominal) = c.nominal_mhz
            && let Some(now) = spurr_purr(ctx.roots)
            && let Some((ratio, windowed)) = spurr_ratio(baseline, now)
        {
            c.effective_mhz = Some(ratio * nominal);
            c.effective_source = Some(if windowed {
                format!("SPURR/PURR over {:.2} s", ctx.window.as_secs_f64())
            } else {
                "SPURR/PURR since boot".into()
            });
        }
        Ok(c)
    }

    fn store(facts: &mut OsFacts, section: Gathered<CpuFacts>) {
        facts.cpu = section;
    }
}

pub(super) fn collect(r: &Roots) -> Result<CpuFacts, CollectError> {
    let info: CpuInfo = parse_procfs(&r.proc("cpuinfo"))?;
    let online =
        super::topology::online_cpus(r).unwrap_or_else(|_| (0..info.num_cores() as u32).collect());
    let first = |key: &str| -> Option<String> {
        // procfs keeps values shared by every CPU in `fields`, the rest per CPU.
        info.get_field(0, key)
            .or_else(|| info.fields.get(key).map(String::as_str))
            .map(|s| s.trim().to_owned())
    };
    let power = first("cpu").is_some_and(|c| c.to_ascii_uppercase().starts_with("POWER"));
    let architecture = architecture(
        r,
        power,
        first("vendor_id").is_some(),
        first("CPU implementer").is_some(),
    );
    let model = if power {
        first("cpu")
    } else {
        first("model name").or_else(|| first("Hardware"))
    };

    let mut cpu = CpuFacts {
        model,
        architecture,
        power,
        threads: online.len() as u32,
        ..Default::default()
    };

    // Topology over the online CPUs: a core is a distinct set of thread siblings
    // (`thread_siblings_list`, or the `thread_siblings` mask of older kernels); (package,
    // core_id) pairs are not unique on every platform and are only the fallback. PowerVM
    // partitions report physical_package_id -1 (unknown): cores still count, sockets do not.
    let mut packages = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    let mut siblings: BTreeSet<Vec<u32>> = BTreeSet::new();
    let mut all_siblings = true;
    for n in &online {
        let t = r.sys(format!("devices/system/cpu/cpu{n}/topology"));
        let id = |f: &str| {
            read_trim(&t.join(f))
                .ok()
                .and_then(|v| v.parse::<i64>().ok())
        };
        if let (Some(p), Some(c)) = (id("physical_package_id"), id("core_id")) {
            if p >= 0 {
                packages.insert(p);
            }
            pairs.insert((p, c));
        }
        let set = read_trim(&t.join("thread_siblings_list"))
            .ok()
            .and_then(|l| parse_cpu_list(&l).ok())
            .or_else(|| {
                read_trim(&t.join("thread_siblings"))
                    .ok()
                    .and_then(|m| super::fs::parse_cpu_mask(&m).ok())
            });
        match set {
            Some(set) if !set.is_empty() => {
                siblings.insert(set);
            }
            _ => all_siblings = false,
        }
    }
    let cores: usize = if all_siblings && !siblings.is_empty() {
        siblings.len()
    } else {
        pairs.len()
    };
    if cores > 0 {
        cpu.sockets = (!packages.is_empty()).then_some(packages.len() as u32);
        cpu.cores = Some(cores as u32);
        cpu.threads_per_core = Some((online.len() / cores).max(1) as u32);
    }
    cpu.smt_control = read_trim(&r.sys("devices/system/cpu/smt/control")).ok();
    cpu.smt_active = read_trim(&r.sys("devices/system/cpu/smt/active"))
        .ok()
        .map(|s| s == "1");

    // Nominal frequency: cpufreq's base or maximum where the kernel has cpufreq. Without it
    // (a PowerVM LPAR), POWER's cpuinfo `clock` is the nominal frequency; with it, `clock`
    // shows the current one (arch/powerpc/kernel/setup-common.c asks cpufreq first).
    let policy = first_policy(r);
    let khz = |name: &str| {
        policy
            .as_ref()
            .and_then(|p| read_u64(&p.join(name)).ok())
            .map(|k| k as f64 / 1000.0)
    };
    if let Some(b) = khz("base_frequency") {
        cpu.nominal_mhz = Some(b);
        cpu.nominal_source = Some("cpufreq base_frequency".into());
    } else if let Some(m) = khz("cpuinfo_max_freq") {
        cpu.nominal_mhz = Some(m);
        cpu.nominal_source = Some("cpufreq cpuinfo_max_freq".into());
    } else if power && let Some(mhz) = first("clock").and_then(|c| parse_mhz(&c)) {
        cpu.nominal_mhz = Some(mhz);
        cpu.nominal_source = Some("/proc/cpuinfo clock".into());
    }
    // Current frequency: the average over cpufreq policies, else cpuinfo's "cpu MHz".
    let cur: Vec<f64> = policies(r)
        .iter()
        .filter_map(|p| read_u64(&p.join("scaling_cur_freq")).ok())
        .map(|k| k as f64 / 1000.0)
        .collect();
    cpu.current_mhz = if cur.is_empty() {
        // procfs keeps values shared by every CPU in `fields`: get_field looks in both.
        let mhz: Vec<f64> = (0..info.num_cores())
            .filter_map(|i| info.get_field(i, "cpu MHz"))
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        (!mhz.is_empty()).then(|| mhz.iter().sum::<f64>() / mhz.len() as f64)
    } else {
        Some(cur.iter().sum::<f64>() / cur.len() as f64)
    };
    cpu.governor = policy
        .as_ref()
        .and_then(|p| read_trim(&p.join("scaling_governor")).ok());
    if power {
        cpu.dscr_default = read_trim(&r.sys("devices/system/cpu/dscr_default"))
            .ok()
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok());
    }
    Ok(cpu)
}

/// The machine's architecture as `uname -m` names it — the one detector for the whole report
/// (`host.arch` and `cpu.architecture`). Live: the running kernel's. A recorded tree: its
/// `kernel/arch` (Linux 6.1+) or the suffix of its `osrelease` (`…el8.ppc64le`), else what its
/// cpuinfo shows; POWER's byte order is then unknown and said so, never guessed.
pub(crate) fn architecture(r: &Roots, power: bool, x86: bool, arm: bool) -> String {
    if r.is_live() {
        return crate::collect::os::live_architecture();
    }
    let from_tree = read_trim(&r.proc("sys/kernel/arch")).ok().or_else(|| {
        let rel = read_trim(&r.proc("sys/kernel/osrelease")).ok()?;
        ["ppc64le", "ppc64", "x86_64", "aarch64"]
            .into_iter()
            .find(|a| rel.ends_with(&format!(".{a}")))
            .map(str::to_owned)
    });
    match from_tree {
        Some(a) if !a.is_empty() && a.len() < 32 => a,
        _ if power => "ppc64 (byte order unknown)".into(),
        _ if x86 => "x86_64".into(),
        _ if arm => "aarch64".into(),
        _ => "unknown".into(),
    }
}

/// The same detection from a cpuinfo text alone (the host collector).
pub(crate) fn architecture_of(r: &Roots, cpuinfo: &str) -> String {
    let has = |key: &str| {
        cpuinfo
            .lines()
            .any(|l| l.split_once(':').is_some_and(|(k, _)| k.trim() == key))
    };
    let power = cpuinfo.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "cpu" && v.trim().to_ascii_uppercase().starts_with("POWER")
        })
    });
    architecture(r, power, has("vendor_id"), has("CPU implementer"))
}

/// Σ SPURR and Σ PURR over the online CPUs (POWER, root only: mode 0400). The kernel prints
/// them in hex (arch/powerpc/kernel/sysfs.c).
pub(super) fn spurr_purr(r: &Roots) -> Option<(u64, u64)> {
    let online = super::topology::online_cpus(r).ok()?;
    let hex = |p: std::path::PathBuf| -> Option<u64> {
        let t = read_trim(&p).ok()?;
        u64::from_str_radix(t.trim_start_matches("0x"), 16).ok()
    };
    let (mut s, mut p) = (0u64, 0u64);
    for n in online {
        let dir = r.sys(format!("devices/system/cpu/cpu{n}"));
        s = s.saturating_add(hex(dir.join("spurr"))?);
        p = p.saturating_add(hex(dir.join("purr"))?);
    }
    Some((s, p))
}

/// Effective/nominal ratio from two SPURR/PURR samples (or one, since boot).
pub(super) fn spurr_ratio(earlier: Option<(u64, u64)>, now: (u64, u64)) -> Option<(f64, bool)> {
    match earlier {
        Some((s0, p0)) if now.1 > p0 => {
            Some((now.0.saturating_sub(s0) as f64 / (now.1 - p0) as f64, true))
        }
        _ if now.1 > 0 => Some((now.0 as f64 / now.1 as f64, false)),
        _ => None,
    }
}

/// `2750.000000MHz` → 2750.0.
pub(super) fn parse_mhz(s: &str) -> Option<f64> {
    let v: f64 = s.trim().trim_end_matches("MHz").trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v)
}

fn policies(r: &Roots) -> Vec<std::path::PathBuf> {
    let dir = r.sys("devices/system/cpu/cpufreq");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("policy"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn first_policy(r: &Roots) -> Option<std::path::PathBuf> {
    policies(r).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Some platforms (several arm64 servers) report core_id 0 on every CPU of a package: the
    /// (package, core_id) pairs would count one core. The thread siblings count them right.
    #[test]
    fn cores_come_from_thread_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let mut cpuinfo = String::new();
        for n in 0..4 {
            cpuinfo += &format!("processor\t: {n}\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\n");
            let t = format!("sys/devices/system/cpu/cpu{n}/topology");
            w(&format!("{t}/physical_package_id"), "0\n");
            w(&format!("{t}/core_id"), "0\n");
            w(&format!("{t}/thread_siblings_list"), &format!("{n}\n"));
        }
        w("proc/cpuinfo", &cpuinfo);
        w("sys/devices/system/cpu/online", "0-3\n");
        let c = collect(&Roots::tree(dir.path())).unwrap();
        assert_eq!((c.cores, c.threads_per_core), (Some(4), Some(1)), "{c:?}");
        // Without sibling files, the pairs are all there is.
        for n in 0..4 {
            std::fs::remove_file(dir.path().join(format!(
                "sys/devices/system/cpu/cpu{n}/topology/thread_siblings_list"
            )))
            .unwrap();
        }
        let c = collect(&Roots::tree(dir.path())).unwrap();
        assert_eq!(c.cores, Some(1), "{c:?}");
    }

    #[test]
    fn spurr_over_purr() {
        assert_eq!(
            spurr_ratio(Some((100, 100)), (238, 200)),
            Some((1.38, true))
        );
        assert_eq!(spurr_ratio(None, (275, 250)), Some((1.1, false)));
        assert_eq!(spurr_ratio(Some((5, 5)), (5, 5)), Some((1.0, false)));
        assert_eq!(spurr_ratio(None, (0, 0)), None);
    }

    #[test]
    fn mhz() {
        assert_eq!(parse_mhz("2750.000000MHz"), Some(2750.0));
        assert_eq!(parse_mhz("3690MHz"), Some(3690.0));
        assert_eq!(parse_mhz("fast"), None);
        assert_eq!(parse_mhz("-1MHz"), None);
    }
}
