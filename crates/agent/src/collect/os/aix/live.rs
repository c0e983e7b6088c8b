//! The live AIX sample (AIX only): libperfstat calls and the commands of [`super::ps`] around
//! the window. Everything they return goes to [`super::translate`] unchanged; nothing here
//! interprets a value.

use std::time::{Duration, Instant};

use perfstat_sys::{PartitionTotal, PerfstatError, perfstat_memory_page_t};
use powerdiag_rules::OsFacts;

use super::{
    ps,
    translate::{self, NAMES, Raw, RawProcess},
};
use crate::collect::os::Roots;

const NOT_LIVE: &str = "unavailable: the AIX collector reads the live system only (recorded trees hold Linux /proc and /sys)";

/// More than the page sizes `perfstat_memory_page` reports (4K, 64K, 16M, 16G).
const MAX_PAGE_SIZES: usize = 8;

/// The first half of a windowed sample.
#[derive(Debug)]
pub(crate) struct Window {
    roots: Roots,
    started: Instant,
    process: Result<(u32, String), String>,
    before: Option<PartitionTotal>,
}

impl Window {
    /// `window` zero: no first sample, the counters are read since boot.
    pub(crate) fn begin(roots: &Roots, pid_file: Option<&str>, window: Duration) -> Window {
        let live = roots.is_live();
        Window {
            roots: roots.clone(),
            started: Instant::now(),
            process: if live {
                find(roots, pid_file)
            } else {
                Err(NOT_LIVE.into())
            },
            before: if live && !window.is_zero() {
                perfstat_sys::partition_total().ok()
            } else {
                None
            },
        }
    }

    pub(crate) fn finish(self, min_window: Duration) -> OsFacts {
        if !self.roots.is_live() {
            return OsFacts::unavailable(&self.roots.describe(), NOT_LIVE);
        }
        if let Some(rest) = min_window.checked_sub(self.started.elapsed()) {
            std::thread::sleep(rest);
        }
        let raw = Raw {
            window_secs: self.started.elapsed().as_secs_f64(),
            before: self.before,
            now: perfstat_sys::partition_total().map_err(text),
            config: perfstat_sys::partition_config().map_err(text),
            cpu_total: perfstat_sys::cpu_total().map_err(text),
            pages: memory_pages(),
            dscr: ps::run(ps::DSCRCTL, &["-q".to_owned()], ps::TIMEOUT).and_then(|out| {
                ps::parse_dscr(&out).ok_or_else(|| "dscrctl -q printed no os_default_pd".to_owned())
            }),
            process: self.process.map(|(pid, found_by)| process(pid, found_by)),
        };
        translate::os_facts(&raw)
    }
}

fn text(e: PerfstatError) -> String {
    e.to_string()
}

fn memory_pages() -> Result<Vec<perfstat_memory_page_t>, String> {
    let mut buf = [perfstat_memory_page_t::default(); MAX_PAGE_SIZES];
    let filled = perfstat_sys::memory_pages(&mut buf).map_err(text)?;
    Ok(buf[..filled.filled].to_vec())
}

/// Finds mariadbd: the pid in `pid_file` (read under rootfs), else the one process named
/// mariadbd/mysqld (`ps`).
fn find(r: &Roots, pid_file: Option<&str>) -> Result<(u32, String), String> {
    if let Some(pf) = pid_file.filter(|p| !p.is_empty()) {
        let path = r.root(pf);
        match std::fs::read_to_string(&path).map(|s| s.trim().parse::<u32>()) {
            Ok(Ok(pid)) if r.proc(pid.to_string()).is_dir() => {
                return Ok((pid, "pid_file".into()));
            }
            Ok(Ok(pid)) => {
                return Err(format!(
                    "the server's pid file {} names pid {pid}, which is not running",
                    path.display()
                ));
            }
            Ok(Err(_)) => return Err(format!("{}: not a pid", path.display())),
            Err(_) => {} // not readable (permissions, a WPAR): fall back to names
        }
    }
    let out = ps::run(ps::PS, &ps::find_args(), ps::TIMEOUT)?;
    match ps::pids_named(&out, &NAMES).as_slice() {
        [] => Err("no mariadbd or mysqld process on this host".into()),
        [pid] => Ok((*pid, "process name".into())),
        many => Err(format!(
            "{} mariadbd processes ({}); connect powerdiag to the server to pick one by its pid_file",
            many.len(),
            many.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn process(pid: u32, found_by: String) -> RawProcess {
    RawProcess {
        pid,
        found_by,
        perfstat: perfstat_sys::process(u64::from(pid)).map_err(text),
        page_sizes: ps::run(ps::PS, &ps::page_size_args(pid), ps::TIMEOUT)
            .and_then(|out| ps::parse_page_sizes(&out, pid)),
        ldr_cntrl: ps::run(ps::PS, &ps::environment_args(pid), ps::TIMEOUT)
            .and_then(|out| ps::parse_ldr_cntrl(&out, pid)),
        modules: ps::run(ps::PROCLDD, &[pid.to_string()], ps::TIMEOUT)
            .map(|out| ps::parse_modules(&out)),
    }
}
