//! CPU saturation (PD806): the kernel's CPU pressure (`/proc/pressure/cpu`), the run queue
//! (`procs_running`, `/proc/loadavg`), and mariadbd's CPU time over the window against the
//! CPUs it may use — the online CPUs, its affinity, its cgroup's quota (v2 `cpu.max`, v1
//! `cpu.cfs_quota_us`/`cpu.cfs_period_us`, the tightest along the cgroup's ancestors) — with
//! the cgroup's throttling (`cpu.stat`).
//!
//! On the live host the window is the agent's: the last sample's closing reading is kept
//! (for one process, at most [`MAX_KEPT`]), so mariadbd's share covers the time since then,
//! not one second. Doctor, a first sample and a recorded tree measure over the sample window.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use powerdiag_rules::{CgroupCpu, CpuPressure, CpuSaturation, Gathered, OsFacts, ProcessCpu};

use super::fs::{parse_procfs, read};
use crate::collect::{
    CollectError,
    collector::Descriptor,
    os::{
        Roots,
        registry::{Collector, Ctx},
        sections,
    },
};

/// The oldest closing reading the agent's next sample measures from.
const MAX_KEPT: Duration = Duration::from_secs(600);

/// The cgroup levels walked up for a quota (a path deeper than this is unusual).
const MAX_DEPTH: usize = 32;

pub(super) struct Saturation;

/// The counters at one moment.
#[derive(Debug, Clone)]
pub(super) struct Reading {
    at: Instant,
    /// mariadbd's pid and start time (a reused pid is another process).
    process: Option<(u32, u64)>,
    /// mariadbd's user + system ticks.
    ticks: Option<u64>,
    /// PSI `some total` in µs.
    stall_us: Option<u64>,
    /// The throttling counters of the cgroup with the quota.
    throttle: Option<(PathBuf, Throttle)>,
}

/// A cgroup's `cpu.stat` counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Throttle {
    periods: u64,
    throttled: u64,
    throttled_ns: u64,
}

/// The agent's last closing reading on the live host.
static LAST: Mutex<Option<Reading>> = Mutex::new(None);

impl Collector for Saturation {
    const SECTION: &'static Descriptor = &sections::SATURATION;
    type Baseline = Reading;
    type Output = CpuSaturation;

    fn begin(&self, ctx: &Ctx) -> Option<Reading> {
        let fresh = reading(ctx);
        Some(kept(ctx, &fresh).unwrap_or(fresh))
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Reading>,
        so_far: &OsFacts,
    ) -> Result<CpuSaturation, CollectError> {
        let r = ctx.roots;
        let now = reading(ctx);
        // An agent without a sample window still has its previous sample's reading.
        let baseline = baseline.or_else(|| kept(ctx, &now));
        let online_cpus = so_far
            .cpu
            .as_ref()
            .ok()
            .map(|c| c.threads)
            .or_else(|| super::topology::online_cpus(r).ok().map(|c| c.len() as u32));
        let mut out = CpuSaturation {
            online_cpus,
            procs_running: procs_running(r).ok(),
            load: load(r).ok(),
            ..Default::default()
        };
        // A live window's length is its readings' distance (the agent's may span samples); a
        // recorded tree's is the one it recorded.
        let window = baseline.as_ref().map(|b| {
            if r.is_live() {
                now.at.duration_since(b.at)
            } else {
                ctx.window
            }
        });
        match pressure(r) {
            Ok((mut p, total)) => {
                if let (Some(w), Some(before)) =
                    (window, baseline.as_ref().and_then(|b| b.stall_us))
                    && !w.is_zero()
                    && total >= before
                {
                    p.window_share =
                        Some(((total - before) as f64 / 1e6 / w.as_secs_f64()).min(1.0));
                }
                out.pressure = Some(p);
            }
            Err(e) => out.pressure_unread = Some(e),
        }
        match process(ctx, so_far, baseline.as_ref(), &now, window, online_cpus) {
            Ok(p) => out.process = Some(p),
            Err(why) => out.process_unread = Some(why),
        }
        if r.is_live() {
            *LAST.lock().unwrap_or_else(PoisonError::into_inner) = Some(now);
        }
        Ok(out)
    }

    fn store(facts: &mut OsFacts, section: Gathered<CpuSaturation>) {
        facts.saturation = section;
    }
}

/// The agent's previous closing reading, taken, when it is of the same process and recent.
fn kept(ctx: &Ctx, now: &Reading) -> Option<Reading> {
    if !ctx.roots.is_live() {
        return None;
    }
    LAST.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .filter(|k| k.process == now.process && k.at.elapsed() <= MAX_KEPT)
}

fn reading(ctx: &Ctx) -> Reading {
    let r = ctx.roots;
    let pid = ctx.process.as_ref().ok().map(|f| f.pid);
    let stat = pid
        .and_then(|pid| parse_procfs::<procfs::process::Stat>(&r.proc(format!("{pid}/stat"))).ok());
    Reading {
        at: Instant::now(),
        process: pid.zip(stat.as_ref().map(|s| s.starttime)),
        ticks: stat.map(|s| s.utime.saturating_add(s.stime)),
        stall_us: pressure(r).ok().map(|(_, total)| total),
        throttle: pid.and_then(|pid| cgroup_of(r, pid).ok()).and_then(|cg| {
            let (dir, _) = tightest(&cg);
            throttle(&dir, cg.version).map(|t| (dir, t))
        }),
    }
}

/// `/proc/pressure/cpu`'s `some` line, with its `total` in µs.
fn pressure(r: &Roots) -> Result<(CpuPressure, u64), String> {
    let path = r.proc("pressure/cpu");
    let text = read(&path).map_err(|e| match e {
        CollectError::NotFound { .. } => format!(
            "no {}: the kernel is older than 4.20 or built without PSI",
            path.display()
        ),
        // The file exists but reading it fails (EOPNOTSUPP) when booted with psi=0.
        CollectError::Io { .. } => format!(
            "{} is not readable ({e}): PSI is turned off (boot with psi=1)",
            path.display()
        ),
        e => e.to_string(),
    })?;
    parse_pressure(&text).ok_or_else(|| format!("{}: no `some` line", path.display()))
}

fn parse_pressure(text: &str) -> Option<(CpuPressure, u64)> {
    let line = text.lines().find_map(|l| l.strip_prefix("some "))?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
    };
    let avg = |k: &str| {
        field(k)?
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| (v / 100.0).clamp(0.0, 1.0))
    };
    let total = field("total")?.parse::<u64>().ok()?;
    Some((
        CpuPressure {
            avg10: avg("avg10")?,
            avg60: avg("avg60")?,
            avg300: avg("avg300")?,
            window_share: None,
            total_us: total,
        },
        total,
    ))
}

/// `procs_running` of `/proc/stat`.
fn procs_running(r: &Roots) -> Result<u32, CollectError> {
    let path = r.proc("stat");
    read(&path)?
        .lines()
        .find_map(|l| l.strip_prefix("procs_running ")?.trim().parse().ok())
        .ok_or_else(|| CollectError::parse(&path, "no `procs_running` line"))
}

/// The three load averages of `/proc/loadavg`.
fn load(r: &Roots) -> Result<[f64; 3], CollectError> {
    let path = r.proc("loadavg");
    let text = read(&path)?;
    let mut it = text
        .split_whitespace()
        .map(|f| f.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0));
    match (it.next(), it.next(), it.next()) {
        (Some(Some(a)), Some(Some(b)), Some(Some(c))) => Ok([a, b, c]),
        _ => Err(CollectError::parse(&path, "not three load averages")),
    }
}

/// mariadbd's CPU use over the window against the CPUs it may use, or why not measured.
fn process(
    ctx: &Ctx,
    so_far: &OsFacts,
    before: Option<&Reading>,
    now: &Reading,
    window: Option<Duration>,
    online: Option<u32>,
) -> Result<ProcessCpu, String> {
    let found = ctx.process.as_ref().map_err(|e| e.to_string())?;
    let Some(before) = before else {
        return Err(
            "no window: doctor --sample-window or the agent's [sample] window measures it".into(),
        );
    };
    let window = window.unwrap_or_default();
    let (Some(a), Some(b)) = (before.ticks, now.ticks) else {
        return Err(format!(
            "{} not readable",
            ctx.roots.proc(format!("{}/stat", found.pid)).display()
        ));
    };
    if before.process != now.process {
        return Err("mariadbd restarted during the window".into());
    }
    let mut allowed = online.map(|n| (f64::from(n), "online CPUs"));
    let mut tighter = |cpus: f64, by: &'static str| {
        if cpus > 0.0 && allowed.is_none_or(|(a, _)| cpus < a) {
            allowed = Some((cpus, by));
        }
    };
    if let Some(n) = so_far.process.as_ref().ok().and_then(|p| p.affinity_cpus) {
        tighter(f64::from(n), "CPU affinity");
    }
    let cgroup = cgroup_of(ctx.roots, found.pid).ok().map(|cg| {
        let (dir, quota) = tightest(&cg);
        if let Some(q) = quota {
            tighter(q, "cgroup CPU quota");
        }
        let rel = dir
            .strip_prefix(&cg.mount)
            .map(|p| format!("/{}", p.display()))
            .unwrap_or_else(|_| cg.path.clone());
        let mut c = CgroupCpu {
            path: rel,
            version: cg.version,
            quota_cpus: quota,
            ..Default::default()
        };
        if let (Some((d0, t0)), Some((d1, t1))) = (&before.throttle, &now.throttle)
            && d0 == d1
            && t1.periods >= t0.periods
        {
            c.periods = Some(t1.periods - t0.periods);
            c.throttled_periods = Some(t1.throttled.saturating_sub(t0.throttled));
            c.throttled_seconds =
                Some(t1.throttled_ns.saturating_sub(t0.throttled_ns) as f64 / 1e9);
        }
        c
    });
    let Some((allowed_cpus, allowed_by)) = allowed else {
        return Err("the online CPUs are unknown".into());
    };
    let secs = window.as_secs_f64();
    let kept = ctx.roots.is_live() && secs > ctx.window.as_secs_f64() + 0.5;
    Ok(ProcessCpu {
        basis: if kept {
            format!("since the agent's last sample ({secs:.1} s)")
        } else {
            format!("window {secs:.2} s")
        },
        window_seconds: secs,
        ticks: b.saturating_sub(a),
        ticks_per_second: rustix::param::clock_ticks_per_second(),
        allowed_cpus,
        allowed_by: allowed_by.into(),
        cgroup,
    })
}

/// Where a process's CPU controller is: its cgroup directory under the mount, v1 or v2.
#[derive(Debug, Clone, PartialEq)]
struct Cgroup {
    /// The hierarchy's mount directory (under the sysfs root).
    mount: PathBuf,
    /// The process's path inside it, as `/proc/PID/cgroup` gives it.
    path: String,
    version: u8,
}

/// The CPU controller's cgroup of `pid`: the v1 hierarchy with `cpu` when there is one
/// (hybrid systems keep the controller there), else the unified hierarchy.
fn cgroup_of(r: &Roots, pid: u32) -> Result<Cgroup, CollectError> {
    let path = r.proc(format!("{pid}/cgroup"));
    let text = read(&path)?;
    let base = r.sys("fs/cgroup");
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(p)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpu") {
            let mount = [controllers, "cpu,cpuacct", "cpu", "cpuacct,cpu"]
                .iter()
                .map(|d| base.join(d))
                .find(|d| d.join("cpu.cfs_period_us").exists());
            if let Some(mount) = mount {
                return Ok(Cgroup {
                    mount,
                    path: p.to_owned(),
                    version: 1,
                });
            }
        }
    }
    if let Some(p) = text.lines().find_map(|l| l.strip_prefix("0::")) {
        let mount = [base.clone(), base.join("unified")]
            .into_iter()
            .find(|d| d.join("cgroup.controllers").exists());
        if let Some(mount) = mount {
            return Ok(Cgroup {
                mount,
                path: p.to_owned(),
                version: 2,
            });
        }
    }
    Err(CollectError::parse(
        &path,
        "no cgroup with a CPU controller mounted under /sys/fs/cgroup",
    ))
}

/// The cgroup directory with the tightest quota along the path up to the mount (the
/// process's own without any), and that quota in CPUs.
fn tightest(cg: &Cgroup) -> (PathBuf, Option<f64>) {
    let own = safe_join(&cg.mount, &cg.path);
    let mut best: (PathBuf, Option<f64>) = (own.clone(), None);
    let mut dir = Some(own.as_path());
    for _ in 0..MAX_DEPTH {
        let Some(d) = dir else { break };
        if !d.starts_with(&cg.mount) {
            break;
        }
        if let Some(q) = quota(d, cg.version)
            && best.1.is_none_or(|b| q < b)
        {
            best = (d.to_path_buf(), Some(q));
        }
        dir = d.parent();
    }
    best
}

/// `mount` joined with a cgroup path from procfs: no `..`, no absolute escape.
fn safe_join(mount: &Path, path: &str) -> PathBuf {
    let mut p = mount.to_path_buf();
    for part in path
        .split('/')
        .filter(|s| !s.is_empty() && *s != "." && *s != "..")
    {
        p.push(part);
    }
    p
}

/// A cgroup directory's CPU quota in CPUs, `None` without one.
fn quota(dir: &Path, version: u8) -> Option<f64> {
    if version == 2 {
        let text = read(&dir.join("cpu.max")).ok()?;
        parse_cpu_max(&text)
    } else {
        let q: i64 = read(&dir.join("cpu.cfs_quota_us"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let p: i64 = read(&dir.join("cpu.cfs_period_us"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (q > 0 && p > 0).then(|| q as f64 / p as f64)
    }
}

/// `cpu.max`: `max 100000` (none) or `QUOTA PERIOD` in µs.
fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut f = text.split_whitespace();
    let q: u64 = f.next()?.parse().ok()?;
    let p: u64 = f.next()?.parse().ok()?;
    (q > 0 && p > 0).then(|| q as f64 / p as f64)
}

/// A cgroup directory's throttling counters (`cpu.stat`; v1 counts nanoseconds, v2 µs).
fn throttle(dir: &Path, version: u8) -> Option<Throttle> {
    let text = read(&dir.join("cpu.stat")).ok()?;
    parse_cpu_stat(&text, version)
}

fn parse_cpu_stat(text: &str, version: u8) -> Option<Throttle> {
    let get = |k: &str| {
        text.lines().find_map(|l| {
            let (name, v) = l.split_once(' ')?;
            (name == k).then(|| v.trim().parse::<u64>().ok())?
        })
    };
    Some(Throttle {
        periods: get("nr_periods")?,
        throttled: get("nr_throttled")?,
        throttled_ns: if version == 2 {
            get("throttled_usec")?.saturating_mul(1000)
        } else {
            get("throttled_time")?
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::os::linux::tests::write;

    #[test]
    fn pressure_lines() {
        let (p, total) = parse_pressure(
            "some avg10=0.02 avg60=71.43 avg300=16.08 total=11646355674\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!(total, 11_646_355_674);
        assert!((p.avg60 - 0.7143).abs() < 1e-9 && (p.avg10 - 0.0002).abs() < 1e-9);
        assert_eq!(
            parse_pressure("full avg10=0 avg60=0 avg300=0 total=0"),
            None
        );
        assert_eq!(
            parse_pressure("some avg10=x avg60=0 avg300=0 total=0"),
            None
        );
        assert_eq!(
            parse_pressure("some avg10=NaN avg60=0 avg300=0 total=0"),
            None
        );
    }

    #[test]
    fn cgroup_files() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(1.5));
        assert_eq!(parse_cpu_max("0 100000\n"), None);
        let v2 = "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 600\nnr_throttled 590\nthrottled_usec 41300000\n";
        assert_eq!(
            parse_cpu_stat(v2, 2),
            Some(Throttle {
                periods: 600,
                throttled: 590,
                throttled_ns: 41_300_000_000
            })
        );
        let v1 = "nr_periods 10\nnr_throttled 2\nthrottled_time 7000\n";
        assert_eq!(parse_cpu_stat(v1, 1).unwrap().throttled_ns, 7000);
        assert_eq!(parse_cpu_stat("nr_periods 1\n", 2), None);
    }

    /// v2 at the root, v1 `cpu,cpuacct` on a hybrid host, the tightest quota among the
    /// ancestors, and a path from procfs that tries to climb out of the mount.
    #[test]
    fn the_cgroup_and_its_tightest_quota() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        let r = Roots::tree(t);
        write(t, "proc/7/cgroup", "0::/system.slice/mariadb.service\n");
        write(t, "sys/fs/cgroup/cgroup.controllers", "cpu io memory\n");
        write(t, "sys/fs/cgroup/system.slice/cpu.max", "300000 100000\n");
        write(
            t,
            "sys/fs/cgroup/system.slice/mariadb.service/cpu.max",
            "max 100000\n",
        );
        let cg = cgroup_of(&r, 7).unwrap();
        assert_eq!(
            (cg.version, cg.path.as_str()),
            (2, "/system.slice/mariadb.service")
        );
        let (dir, q) = tightest(&cg);
        assert_eq!(q, Some(3.0));
        assert!(dir.ends_with("sys/fs/cgroup/system.slice"), "{dir:?}");
        write(
            t,
            "sys/fs/cgroup/system.slice/mariadb.service/cpu.max",
            "50000 100000\n",
        );
        assert_eq!(tightest(&cg).1, Some(0.5));

        write(
            t,
            "proc/8/cgroup",
            "4:memory:/x\n3:cpu,cpuacct:/pd-sat\n0::/\n",
        );
        write(t, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        write(t, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        write(
            t,
            "sys/fs/cgroup/cpu,cpuacct/pd-sat/cpu.cfs_period_us",
            "100000\n",
        );
        write(
            t,
            "sys/fs/cgroup/cpu,cpuacct/pd-sat/cpu.cfs_quota_us",
            "25000\n",
        );
        let cg = cgroup_of(&r, 8).unwrap();
        assert_eq!(cg.version, 1);
        assert_eq!(tightest(&cg).1, Some(0.25));

        write(t, "proc/9/cgroup", "0::/../../../etc\n");
        let cg = cgroup_of(&r, 9).unwrap();
        assert!(safe_join(&cg.mount, &cg.path).starts_with(&cg.mount));
        assert!(safe_join(&cg.mount, &cg.path).ends_with("etc"));
        // No hierarchy mounted: named.
        let e = tempfile::tempdir().unwrap();
        write(e.path(), "proc/7/cgroup", "0::/\n");
        let err = cgroup_of(&Roots::tree(e.path()), 7)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no cgroup with a CPU controller"), "{err}");
    }

    #[test]
    fn missing_pressure_names_the_kernel() {
        let d = tempfile::tempdir().unwrap();
        let why = pressure(&Roots::tree(d.path())).unwrap_err();
        assert!(why.contains("older than 4.20"), "{why}");
        write(d.path(), "proc/loadavg", "1.5 0.25 0.00 2/300 1234\n");
        assert_eq!(load(&Roots::tree(d.path())).unwrap(), [1.5, 0.25, 0.0]);
        write(d.path(), "proc/loadavg", "1.5 -1 0\n");
        assert!(load(&Roots::tree(d.path())).is_err());
    }
}
