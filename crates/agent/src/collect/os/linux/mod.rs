//! The Linux collector: procfs, sysfs and perf counters, every file relative to [`Roots`].
//! Each section is collected on its own; a malformed file loses only that section.

mod cpu;
mod fs;
mod lparcfg;
mod memory;
mod perf;
mod process;
mod stat;
mod topology;

use std::time::{Duration, Instant};

use powerdiag_rules::{Gathered, OsFacts, PerfCounters};

use super::Roots;

const NOT_LIVE: &str = "unavailable: not the live /proc (reading a recorded tree)";

/// The first half of a windowed sample.
#[derive(Debug)]
pub(super) struct Window {
    roots: Roots,
    started: Instant,
    process: Result<(u32, String), String>,
    ticks: Option<stat::Ticks>,
    lpar: Option<lparcfg::Fields>,
    spurr_purr: Option<(u64, u64)>,
    perf: Option<perf::Session>,
}

impl Window {
    pub(super) fn begin(roots: &Roots, pid_file: Option<&str>, window: Duration) -> Window {
        let live = roots.is_live();
        let process = process::find(roots, pid_file);
        // Opening a counter per thread and event costs ~0.1 ms each: only with a window.
        let perf = match (&process, live) {
            (Ok((pid, _)), true) if !window.is_zero() => Some(perf::start(roots, *pid)),
            _ => None,
        };
        // No window ("0s"): no first reading, so the shares, dispatches and SPURR/PURR ratio are
        // since boot, as documented. A first reading would make the "window" the few
        // milliseconds the collectors take, where one stolen tick reads as a large steal share.
        let windowed = live && !window.is_zero();
        Window {
            roots: roots.clone(),
            started: Instant::now(),
            ticks: if windowed {
                stat::read_ticks(roots).ok()
            } else {
                None
            },
            lpar: if windowed {
                lparcfg::read_fields(roots).ok().flatten()
            } else {
                None
            },
            spurr_purr: if windowed {
                cpu::spurr_purr(roots)
            } else {
                None
            },
            process,
            perf,
        }
    }

    pub(super) fn remaining(&self, min_window: Duration) -> Duration {
        if self.roots.is_live() {
            min_window.saturating_sub(self.started.elapsed())
        } else {
            Duration::ZERO
        }
    }

    pub(super) fn finish(self, min_window: Duration) -> OsFacts {
        let live = self.roots.is_live();
        if live && let Some(rest) = min_window.checked_sub(self.started.elapsed()) {
            std::thread::sleep(rest);
        }
        let window = self.started.elapsed();
        let secs = window.as_secs_f64();
        let r = &self.roots;

        let counters = match (self.perf, &self.process) {
            (Some(s), _) => Gathered::Available(perf::finish(s, window)),
            (None, _) if !live => Gathered::Unavailable(NOT_LIVE.into()),
            (None, Ok(_)) if min_window.is_zero() => Gathered::Unavailable(
                "not collected: the sample window is 0 (--sample-window)".into(),
            ),
            (None, Err(why)) => Gathered::Unavailable(format!("no process to count: {why}")),
            (None, Ok(_)) => Gathered::Available(PerfCounters::default()),
        };
        let process = match &self.process {
            Ok((pid, by)) => process::collect(r, *pid, by),
            Err(why) => Err(why.clone()),
        };
        let affinity: Option<Vec<u32>> = process
            .as_ref()
            .ok()
            .and_then(|p| p.affinity.as_deref())
            .and_then(|a| fs::parse_cpu_list(a).ok());
        let base_page = if live {
            Some(rustix::param::page_size() as u64)
        } else {
            process
                .as_ref()
                .ok()
                .and_then(|p| p.kernel_page_sizes.first().copied())
        };
        let cpu_time = stat::read_ticks(r).map(|now| stat::shares(self.ticks, now, secs));
        let mut cpu = cpu::collect(r);
        if let (Ok(c), Ok(t)) = (&mut cpu, &cpu_time) {
            c.busy_share = t.busy_share;
        }
        // POWER: effective frequency = ΔSPURR/ΔPURR × nominal (as powerpc-utils' lparstat -E).
        if let Ok(c) = &mut cpu
            && let Some(nominal) = c.nominal_mhz
            && let Some(now) = cpu::spurr_purr(r)
            && let Some((ratio, windowed)) = cpu::spurr_ratio(self.spurr_purr, now)
        {
            c.effective_mhz = Some(ratio * nominal);
            c.effective_source = Some(if windowed {
                format!("SPURR/PURR over {secs:.2} s")
            } else {
                "SPURR/PURR since boot".into()
            });
        }
        let partition = lparcfg::read_fields(r).map(|now| {
            now.map(|now| {
                let mut p = lparcfg::facts(&now, self.lpar.as_ref(), secs);
                p.far_dispatches = lparcfg::far_dispatches(r);
                if let Ok(c) = &cpu {
                    p.smt_threads = c.threads_per_core;
                }
                p
            })
        });
        OsFacts {
            source: r.describe(),
            topology: gathered(topology::collect(r, affinity.as_deref())),
            memory: gathered(memory::collect(r, base_page)),
            process: gathered(process),
            cpu_time: gathered(cpu_time),
            partition: gathered(partition),
            cpu: gathered(cpu),
            counters,
        }
    }
}

fn gathered<T>(r: Result<T, String>) -> Gathered<T> {
    match r {
        Ok(v) => Gathered::Available(v),
        Err(e) => Gathered::Unavailable(e),
    }
}
