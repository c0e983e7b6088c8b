//! The Linux collector: procfs, sysfs and perf counters, every file relative to [`Roots`].
//! One [`Collector`](super::registry::Collector) per section, listed in [`COLLECTORS`]; a
//! malformed file loses only its own section.

mod cpu;
pub(crate) mod fs;
pub(crate) mod kept;
mod lparcfg;
mod memory;
mod midr;
mod perf;
mod perf_group;
mod process;
mod saturation;
mod stat;
mod storage;
mod swap;
mod topology;

use std::{
    any::Any,
    time::{Duration, Instant},
};

use powerdiag_rules::{CollectorRun, OsFacts};

use super::{
    Found, Roots, ServerProcess,
    registry::{self, Ctx, Registered},
};
use crate::collect::{CollectError, collector::Selection};

pub(crate) use cpu::architecture_of as cpu_architecture_of;

pub(super) const NOT_LIVE: &str = "unavailable: not the live /proc (reading a recorded tree)";

/// The Linux sections, in the order they run: a collector may read the sections above it
/// (`cpu` the busy share of `cpu_time`, `topology` and `memory` the `process` facts,
/// `partition` the SMT threads of `cpu`). Adding one: a file with a `Collector` and a line here.
static COLLECTORS: &[&dyn Registered] = &[
    &process::Process,
    &stat::CpuTimes,
    &cpu::Cpu,
    &topology::Topo,
    &memory::Memory,
    &lparcfg::Partition,
    &perf::Counters,
    &swap::Swap,
    &storage::Storage,
    &saturation::Saturation,
];

/// The first half of a windowed sample.
#[derive(Debug)]
pub(super) struct Window {
    roots: Roots,
    started: Instant,
    windowed: bool,
    /// A recorded tree's window length (`recorded/window-seconds`); `None` when live.
    recorded: Option<Duration>,
    process: Result<Found, CollectError>,
    server_dirs: Result<Vec<(String, String)>, CollectError>,
    selection: Selection,
    baselines: Vec<Option<Box<dyn Any + Send>>>,
}

impl Window {
    pub(super) fn begin(
        roots: &Roots,
        target: ServerProcess<'_>,
        window: Duration,
        selection: &Selection,
    ) -> Window {
        let process = super::find::find(roots, target, || process::by_name(roots));
        let server_dirs = super::find::server_dirs(target);
        // No window ("0s"): no first reading, so the shares, dispatches and SPURR/PURR ratio are
        // since boot, as documented. A first reading would make the "window" the few
        // milliseconds the collectors take, where one stolen tick reads as a large steal share.
        // A recorded tree with a recorded window: the first readings come from the files
        // recorded when it opened (`recorded/window-start/proc`), whatever `window` says.
        let recorded = (!roots.is_live())
            .then(|| roots.recorded_window())
            .flatten();
        let windowed = recorded.is_some() || (roots.is_live() && !window.is_zero());
        let ctx = Ctx {
            roots: recorded.as_ref().map_or(roots, |(start, _)| start),
            windowed,
            window: Duration::ZERO,
            process: &process,
            server_dirs: &server_dirs,
            selection,
        };
        let baselines = registry::begin(COLLECTORS, &ctx);
        Window {
            roots: roots.clone(),
            started: Instant::now(),
            windowed,
            recorded: recorded.map(|(_, length)| length),
            process,
            server_dirs,
            selection: selection.clone(),
            baselines,
        }
    }

    pub(super) fn remaining(&self, min_window: Duration) -> Duration {
        if self.roots.is_live() {
            min_window.saturating_sub(self.started.elapsed())
        } else {
            Duration::ZERO
        }
    }

    /// Ends the window; every section must start before `budget` has passed from here.
    pub(super) fn finish(
        self,
        min_window: Duration,
        budget: Duration,
    ) -> (OsFacts, Vec<CollectorRun>) {
        if self.roots.is_live()
            && let Some(rest) = min_window.checked_sub(self.started.elapsed())
        {
            std::thread::sleep(rest);
        }
        let deadline = Instant::now() + budget;
        let ctx = Ctx {
            roots: &self.roots,
            windowed: self.windowed,
            window: self.recorded.unwrap_or_else(|| self.started.elapsed()),
            process: &self.process,
            server_dirs: &self.server_dirs,
            selection: &self.selection,
        };
        let mut facts = OsFacts::unavailable(&self.roots.describe(), "not collected");
        let runs = registry::finish(
            COLLECTORS,
            &ctx,
            self.baselines,
            &mut facts,
            deadline,
            budget,
        );
        (facts, runs)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::{path::Path, sync::mpsc, time::Duration};

    use super::*;

    /// Writes `text` at `rel` under a test tree, creating the directories.
    pub(in crate::collect::os::linux) fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn fifo(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    /// Collects a tree on another thread: a hang fails the test instead of wedging it.
    fn collect(tree: &Path) -> (OsFacts, Vec<CollectorRun>) {
        let roots = Roots::tree(tree);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let w = Window::begin(
                &roots,
                ServerProcess::Unknown,
                Duration::ZERO,
                &Selection::defaults(),
            );
            let _ = tx.send(w.finish(Duration::ZERO, Duration::from_secs(30)));
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("collecting a hostile tree hung")
    }

    /// Issue 16, item 8: a directory in place of cpuinfo made the procfs crate's line reader
    /// spin at 100% CPU; FIFOs in place of stat and meminfo blocked forever; a sparse 1 GB
    /// node/online cost gigabytes and was quoted into the report; an empty status surfaced as
    /// "Internal error: bug at ...procfs-core...".
    #[test]
    fn hostile_trees_end_with_a_reason_per_section() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        std::fs::create_dir_all(t.join("proc/cpuinfo")).unwrap();
        fifo(t, "proc/stat");
        fifo(t, "proc/meminfo");
        write(t, "proc/77/comm", "mariadbd\n");
        write(t, "proc/77/status", "");
        write(t, "sys/devices/system/cpu/online", "0-1\n");
        let sparse = std::fs::File::create({
            std::fs::create_dir_all(t.join("sys/devices/system/node")).unwrap();
            t.join("sys/devices/system/node/online")
        })
        .unwrap();
        sparse.set_len(1 << 30).unwrap();

        let (facts, runs) = collect(t);
        let why = |g: Result<(), &str>| g.unwrap_err().to_owned();
        let cpu = why(facts.cpu.as_ref().map(drop));
        assert!(
            cpu.ends_with("cpuinfo is a directory, not a regular file; refusing to read it"),
            "{cpu}"
        );
        let stat = why(facts.cpu_time.as_ref().map(drop));
        assert!(
            stat.ends_with("stat is a FIFO, not a regular file; refusing to read it"),
            "{stat}"
        );
        let mem = why(facts.memory.as_ref().map(drop));
        assert!(mem.contains("meminfo is a FIFO"), "{mem}");
        let topo = facts
            .topology
            .as_ref()
            .unwrap()
            .numa_unread
            .clone()
            .unwrap();
        assert!(topo.contains("node/online is larger than"), "{topo}");
        assert!(topo.len() < 300, "{topo}");
        let process = why(facts.process.as_ref().map(drop));
        assert!(
            process.ends_with("77/status: truncated or malformed: a required field is missing"),
            "{process}"
        );
        // Each failed section is its own failed run; counters are not collected from a tree.
        let failed: Vec<&str> = runs
            .iter()
            .filter(|r| !r.success)
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(failed, ["process", "cpu_time", "cpu", "memory", "swap"]);
        assert!(!runs.iter().any(|r| r.name == "counters"));
        let all = format!("{facts:?}");
        assert!(
            !all.contains("Internal error") && !all.contains("bug at"),
            "{all}"
        );
    }
}
