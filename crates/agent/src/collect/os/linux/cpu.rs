//! CPU: model, architecture, sockets/cores/threads, SMT, frequencies, governor, DSCR.

use crate::collect::{collector::Descriptor, os::sections};
use std::collections::BTreeSet;

use powerdiag_rules::{CpuFacts, Gathered, OsFacts};
use procfs::CpuInfo;

use super::{
    fs::{parse_cpu_list, parse_procfs, read_trim, read_u64},
    kept::{Kept, STATIC_REUSE},
};
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
    const SECTION: &'static Descriptor = &sections::CPU;
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
    let online = super::topology::online_cpus(r).ok();
    let Fixed { mut cpu, policies } = if r.is_live() {
        FIXED.get_or_try(online.clone(), STATIC_REUSE, || fixed(r, online))?
    } else {
        fixed(r, online)?
    };
    // Current frequency: the average over cpufreq policies, else (kept with the fixed facts)
    // cpuinfo's "cpu MHz".
    let cur: Vec<f64> = policies
        .iter()
        .filter_map(|p| read_u64(&p.join("scaling_cur_freq")).ok())
        .filter(|&k| k > 0)
        .map(|k| k as f64 / 1000.0)
        .collect();
    if !cur.is_empty() {
        cpu.current_mhz = Some(cur.iter().sum::<f64>() / cur.len() as f64);
        cpu.current_source = Some("cpufreq scaling_cur_freq".into());
    }
    cpu.governor = policies
        .first()
        .and_then(|p| read_trim(&p.join("scaling_governor")).ok());
    if cpu.power {
        cpu.dscr_default = read_trim(&r.sys("devices/system/cpu/dscr_default"))
            .ok()
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok());
    }
    Ok(cpu)
}

/// What the section reads from files that change only with the hardware or the online CPUs
/// (cpuinfo, the topology, cpufreq's limits): on the live host, kept while the online CPU
/// list stays the same, at most [`STATIC_REUSE`] (reading them was ~7% of the agent's CPU per
/// sample, measured). Without cpufreq, cpuinfo's "cpu MHz" is kept with them: it is then no
/// measurement anyway (an x86 guest shows the TSC rate) and is never used as one.
#[derive(Debug, Clone)]
struct Fixed {
    cpu: CpuFacts,
    /// The cpufreq policy directories.
    policies: Vec<std::path::PathBuf>,
}

static FIXED: Kept<Option<Vec<u32>>, Fixed> = Kept::new();

fn fixed(r: &Roots, online: Option<Vec<u32>>) -> Result<Fixed, CollectError> {
    let info: CpuInfo = parse_procfs(&r.proc("cpuinfo"))?;
    let online = online.unwrap_or_else(|| (0..info.num_cores() as u32).collect());
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
    // arm64 prints no `model name`: the name comes from the MIDR fields, as lscpu does.
    let model = if power {
        first("cpu")
    } else {
        first("model name")
            .or_else(|| {
                let implementer = first("CPU implementer")?;
                super::midr::model(&implementer, first("CPU part").as_deref())
            })
            .or_else(|| first("Hardware"))
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

    // Nominal frequency: cpufreq's nominal, base or maximum where the kernel has cpufreq.
    // powernv-cpufreq (bare-metal POWER) has `cpuinfo_nominal_freq`; its `cpuinfo_max_freq` is
    // the boost (WOF) ceiling, which would make a CPU at nominal look throttled. Without cpufreq
    // (a PowerVM LPAR), POWER's cpuinfo `clock` is the nominal frequency; with it, `clock`
    // shows the current one (arch/powerpc/kernel/setup-common.c asks cpufreq first).
    let policies = policies(r);
    let policy = policies.first();
    let khz = |name: &str| {
        policy
            .and_then(|p| read_u64(&p.join(name)).ok())
            .filter(|&k| k > 0)
            .map(|k| k as f64 / 1000.0)
    };
    let nominal = ["cpuinfo_nominal_freq", "base_frequency", "cpuinfo_max_freq"]
        .into_iter()
        .find_map(|name| khz(name).map(|mhz| (mhz, format!("cpufreq {name}"))));
    if let Some((mhz, source)) = nominal {
        cpu.nominal_mhz = Some(mhz);
        cpu.nominal_source = Some(source);
    } else if power
        && read_trim(&r.proc("cpuinfo")).is_ok_and(|t| super::lparcfg::is_pseries(&t))
        && !super::lparcfg::PATHS.iter().any(|p| r.proc(p).is_file())
    {
        // A pSeries guest of KVM or QEMU (PowerVM always has lparcfg): its `clock` line is
        // what the hypervisor says (QEMU fixes 1000 MHz) and SPURR/PURR are emulated, so a
        // ratio of the two would be made up.
        cpu.nominal_source = Some(
            "unknown on a pSeries guest without lparcfg (KVM, QEMU): /proc/cpuinfo's clock is the hypervisor's, not the hardware's".into(),
        );
    } else if power && let Some(mhz) = first("clock").and_then(|c| parse_mhz(&c)) {
        cpu.nominal_mhz = Some(mhz);
        cpu.nominal_source = Some("/proc/cpuinfo clock".into());
    }
    // cpuinfo's "cpu MHz", used by `collect` when cpufreq gives no current frequency. Without
    // cpufreq it is not a measurement (an x86 guest shows the TSC rate the hypervisor
    // reports), so it is recorded with its source and never used as an effective frequency.
    // procfs keeps values shared by every CPU in `fields`: get_field looks in both.
    let mhz: Vec<f64> = (0..info.num_cores())
        .filter_map(|i| info.get_field(i, "cpu MHz"))
        .filter_map(|v| v.trim().parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .collect();
    if !mhz.is_empty() {
        cpu.current_mhz = Some(mhz.iter().sum::<f64>() / mhz.len() as f64);
        cpu.current_source = Some(powerdiag_rules::CPUINFO_MHZ.into());
    }
    Ok(Fixed { cpu, policies })
}

/// The machine's architecture as `uname -m` names it — the one detector for the whole report
/// (`host.arch` and `cpu.architecture`). Live: the running kernel's. A recorded tree: its
/// recorded `uname -m`, its `kernel/arch` (Linux 6.1+) or the suffix of its `osrelease`
/// (`…el8.ppc64le`), else what its
/// cpuinfo shows; POWER's byte order is then unknown and said so, never guessed.
pub(crate) fn architecture(r: &Roots, power: bool, x86: bool, arm: bool) -> String {
    if r.is_live() {
        return crate::collect::os::live_architecture();
    }
    if let Some(m) = r
        .recorded
        .as_deref()
        .and_then(crate::collect::os::recorded::machine)
    {
        return m;
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

/// The cpufreq policy directories: `cpufreq/policyN` (Linux 4.3+), else each CPU's own
/// `cpuN/cpufreq` (older kernels; on newer ones these are links to the policies).
fn policies(r: &Roots) -> Vec<std::path::PathBuf> {
    let named = |dir: std::path::PathBuf, prefix: &str| -> Vec<(u32, std::path::PathBuf)> {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| {
                        let n = e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()?;
                        Some((n, e.path()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut v = named(r.sys("devices/system/cpu/cpufreq"), "policy");
    if v.is_empty() {
        v = named(r.sys("devices/system/cpu"), "cpu")
            .into_iter()
            .map(|(n, p)| (n, p.join("cpufreq")))
            .filter(|(_, p)| p.is_dir())
            .collect();
    }
    // Numeric order: policy10 after policy2.
    v.sort_by_key(|(n, _)| *n);
    v.into_iter().map(|(_, p)| p).collect()
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

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    /// powernv-cpufreq: `cpuinfo_max_freq` is the WOF/boost ceiling, `cpuinfo_nominal_freq`
    /// the rated frequency PD404 compares with.
    #[test]
    fn powernv_nominal_is_the_nominal_not_the_boost_ceiling() {
        let p = "sys/devices/system/cpu/cpufreq/policy0";
        let dir = tree(&[
            (
                "proc/cpuinfo",
                "processor\t: 0\ncpu\t\t: POWER9, altivec supported\nclock\t\t: 3283.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\n",
            ),
            ("sys/devices/system/cpu/online", "0\n"),
            (&format!("{p}/cpuinfo_max_freq"), "3800000\n"),
            (&format!("{p}/cpuinfo_nominal_freq"), "3200000\n"),
            (&format!("{p}/scaling_cur_freq"), "3283000\n"),
        ]);
        let c = collect(&Roots::tree(dir.path())).unwrap();
        assert_eq!(c.nominal_mhz, Some(3200.0), "{c:?}");
        assert_eq!(
            c.nominal_source.as_deref(),
            Some("cpufreq cpuinfo_nominal_freq")
        );
        assert_eq!(c.current_mhz, Some(3283.0));
        assert_eq!(
            c.current_source.as_deref(),
            Some("cpufreq scaling_cur_freq")
        );
    }

    /// Kernels before 4.3 (and some drivers) have each CPU's `cpuN/cpufreq` and no `policyN`.
    #[test]
    fn per_cpu_cpufreq_without_policies() {
        let mut files = vec![(
            "proc/cpuinfo".to_owned(),
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\ncpu MHz\t\t: 2100.000\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\ncpu MHz\t\t: 2100.000\n\n".to_owned(),
        )];
        for (n, cur) in [(0, "1200000"), (1, "2400000")] {
            let d = format!("sys/devices/system/cpu/cpu{n}/cpufreq");
            files.push((format!("{d}/cpuinfo_max_freq"), "3000000\n".into()));
            files.push((format!("{d}/scaling_cur_freq"), format!("{cur}\n")));
            files.push((format!("{d}/scaling_governor"), "powersave\n".into()));
        }
        files.push(("sys/devices/system/cpu/online".into(), "0-1\n".into()));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let c = collect(&Roots::tree(tree(&refs).path())).unwrap();
        assert_eq!(c.nominal_mhz, Some(3000.0), "{c:?}");
        assert_eq!(c.current_mhz, Some(1800.0));
        assert_eq!(
            c.current_source.as_deref(),
            Some("cpufreq scaling_cur_freq")
        );
        assert_eq!(c.governor.as_deref(), Some("powersave"));
    }

    /// A pSeries guest of QEMU or KVM (no lparcfg): its clock line is the hypervisor's, so the
    /// nominal frequency is unknown and says why; a PowerVM LPAR (lparcfg) keeps its clock.
    #[test]
    fn a_pseries_guest_without_lparcfg_has_no_nominal_frequency() {
        let cpuinfo = "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\nclock\t\t: 1000.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\ntimebase\t: 512000000\nplatform\t: pSeries\nmodel\t\t: IBM pSeries (emulated by qemu)\n";
        let guest = tree(&[
            ("proc/cpuinfo", cpuinfo),
            ("sys/devices/system/cpu/online", "0\n"),
        ]);
        let c = collect(&Roots::tree(guest.path())).unwrap();
        assert_eq!(c.nominal_mhz, None, "{c:?}");
        assert!(
            c.nominal_source
                .as_deref()
                .is_some_and(|s| s.contains("pSeries guest without lparcfg")),
            "{c:?}"
        );
        let lpar = tree(&[
            ("proc/cpuinfo", cpuinfo),
            (
                "proc/powerpc/lparcfg",
                "lparcfg 1.9\nshared_processor_mode=0\n",
            ),
            ("sys/devices/system/cpu/online", "0\n"),
        ]);
        let c = collect(&Roots::tree(lpar.path())).unwrap();
        assert_eq!(c.nominal_mhz, Some(1000.0), "{c:?}");
    }

    /// An x86 guest without cpufreq: cpuinfo's `cpu MHz` is recorded as what it is, and is not
    /// a measured frequency (no effective-frequency metric, no PD404 verdict from it).
    #[test]
    fn cpuinfo_mhz_without_cpufreq_is_not_a_measurement() {
        let dir = tree(&[
            (
                "proc/cpuinfo",
                "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\ncpu MHz\t\t: 2593.906\n\n",
            ),
            ("sys/devices/system/cpu/online", "0\n"),
        ]);
        let c = collect(&Roots::tree(dir.path())).unwrap();
        assert_eq!(c.current_mhz, Some(2593.906), "{c:?}");
        assert_eq!(
            c.current_source.as_deref(),
            Some(powerdiag_rules::CPUINFO_MHZ)
        );
        assert_eq!(c.nominal_mhz, None);
        assert_eq!(c.measured_mhz(), None);
    }

    #[test]
    fn arm64_model_from_midr() {
        let mut cpuinfo = String::new();
        for n in 0..2 {
            cpuinfo += &format!(
                "processor\t: {n}\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
            );
        }
        let dir = tree(&[
            ("proc/cpuinfo", &cpuinfo),
            ("sys/devices/system/cpu/online", "0-1\n"),
        ]);
        let c = collect(&Roots::tree(dir.path())).unwrap();
        assert_eq!(c.model.as_deref(), Some("ARM Neoverse-N1"), "{c:?}");
        assert_eq!(c.architecture, "aarch64");
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
