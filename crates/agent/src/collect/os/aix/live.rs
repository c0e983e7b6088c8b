//! The live AIX sample (AIX only): libperfstat calls and the commands of [`super::ps`] around
//! the window. Everything they return goes to [`super::translate`] unchanged; nothing here
//! interprets a value.

use std::time::{Duration, Instant};

use perfstat_sys::{PartitionTotal, PerfstatError, perfstat_memory_page_t, perfstat_process_t};
use powerdiag_rules::{CollectorRun, OsFacts};

use super::{
    ps,
    translate::{self, Raw, RawDir, RawProcess},
};
use crate::collect::{
    CollectError,
    collector::Selection,
    os::{Found, Roots, ServerProcess, find::NAMES},
};

const NOT_LIVE: &str = "unavailable: the AIX collector reads the live system only (recorded trees hold Linux /proc and /sys)";

/// More than the page sizes `perfstat_memory_page` reports (4K, 64K, 16M, 16G).
const MAX_PAGE_SIZES: usize = 8;

/// The first half of a windowed sample.
#[derive(Debug)]
pub(crate) struct Window {
    roots: Roots,
    started: Instant,
    process: Result<Found, CollectError>,
    /// The server's directories (`datadir`, `tmpdir`, ...), or why there are none.
    server_dirs: Result<Vec<(String, String)>, CollectError>,
    before: Option<PartitionTotal>,
    /// `perfstat_memory_total` when the window opened (the paging-space counters).
    memory_before: Option<perfstat_sys::perfstat_memory_total_t>,
    /// mariadbd's `perfstat_process` when the window opened (its CPU time over the window);
    /// `None` without a window or without mariadbd.
    process_before: Option<Result<perfstat_process_t, CollectError>>,
    selection: Selection,
}

impl Window {
    /// `window` zero: no first sample, the counters are read since boot.
    pub(crate) fn begin(
        roots: &Roots,
        server: ServerProcess<'_>,
        window: Duration,
        selection: &Selection,
    ) -> Window {
        let live = roots.is_live();
        let started = Instant::now();
        let process = if live {
            crate::collect::os::find::find(roots, server, by_name)
        } else {
            Err(CollectError::skipped(NOT_LIVE))
        };
        let process_before = match &process {
            Ok(f) if live && !window.is_zero() => {
                Some(perfstat_sys::process(u64::from(f.pid)).map_err(library("perfstat_process")))
            }
            _ => None,
        };
        Window {
            roots: roots.clone(),
            started,
            process,
            process_before,
            server_dirs: crate::collect::os::find::server_dirs(server),
            before: if live && !window.is_zero() {
                perfstat_sys::partition_total().ok()
            } else {
                None
            },
            memory_before: if live && !window.is_zero() {
                perfstat_sys::memory_total().ok()
            } else {
                None
            },
            selection: selection.clone(),
        }
    }

    /// The AIX sections come from one libperfstat read, not from the registry: `budget` bounds
    /// only the external commands (each has its own timeout).
    pub(crate) fn finish(
        self,
        min_window: Duration,
        budget: Duration,
    ) -> (OsFacts, Vec<CollectorRun>) {
        let _ = budget;
        if !self.roots.is_live() {
            return (
                OsFacts::unavailable(&self.roots.describe(), NOT_LIVE),
                Vec::new(),
            );
        }
        if let Some(rest) = min_window.checked_sub(self.started.elapsed()) {
            std::thread::sleep(rest);
        }
        let window_secs = self.started.elapsed().as_secs_f64();
        // mariadbd's closing perfstat_process reading first, before the other calls and the
        // commands, so that its CPU time covers the window and no more.
        let mariadbd = self.process.map(|f| {
            let perfstat =
                perfstat_sys::process(u64::from(f.pid)).map_err(library("perfstat_process"));
            (f, perfstat)
        });
        let raw = Raw {
            window_secs,
            before: self.before,
            now: perfstat_sys::partition_total().map_err(library("perfstat_partition_total")),
            config: perfstat_sys::partition_config().map_err(library("perfstat_partition_config")),
            cpu_total: perfstat_sys::cpu_total().map_err(library("perfstat_cpu_total")),
            pages: memory_pages(),
            memory_before: self.memory_before,
            memory_total: perfstat_sys::memory_total().map_err(library("perfstat_memory_total")),
            dscr: ps::run(ps::DSCRCTL, &["-q".to_owned()], ps::TIMEOUT).and_then(|out| {
                ps::parse_dscr(&out).ok_or_else(|| CollectError::Command {
                    program: ps::DSCRCTL.to_owned(),
                    message: "dscrctl -q printed no os_default_pd".to_owned(),
                })
            }),
            process: mariadbd.map(|(f, perfstat)| process(f.pid, f.by.to_owned(), perfstat)),
            process_before: self.process_before,
            storage: self.server_dirs.map(|dirs| {
                dirs.into_iter()
                    .map(|(role, path)| RawDir {
                        df: ps::run(ps::DF, &ps::df_args(&path), ps::TIMEOUT),
                        role,
                        path,
                    })
                    .collect()
            }),
        };
        translate::collect(&raw, &self.selection)
    }
}

/// A libperfstat call's failure, in its own words.
fn library(call: &'static str) -> impl Fn(PerfstatError) -> CollectError {
    move |e| CollectError::Library {
        call,
        message: e.to_string(),
    }
}

fn memory_pages() -> Result<Vec<perfstat_memory_page_t>, CollectError> {
    let mut buf = [perfstat_memory_page_t::default(); MAX_PAGE_SIZES];
    let filled = perfstat_sys::memory_pages(&mut buf).map_err(library("perfstat_memory_page"))?;
    Ok(buf[..filled.filled].to_vec())
}

/// The pids of the processes named mariadbd/mysqld (`ps`), for `os::find`.
fn by_name() -> Result<Vec<u32>, CollectError> {
    let out = ps::run(ps::PS, &ps::find_args(), ps::TIMEOUT)?;
    Ok(ps::pids_named(&out, &NAMES))
}

/// `perfstat`: its `perfstat_process` reading, taken when the window closed.
fn process(
    pid: u32,
    found_by: String,
    perfstat: Result<perfstat_process_t, CollectError>,
) -> RawProcess {
    RawProcess {
        pid,
        found_by,
        perfstat,
        page_sizes: ps::run(ps::PS, &ps::page_size_args(pid), ps::TIMEOUT)
            .and_then(|out| ps::parse_page_sizes(&out, pid)),
        ldr_cntrl: ps::run(ps::PS, &ps::environment_args(pid), ps::TIMEOUT)
            .and_then(|out| ps::parse_ldr_cntrl(&out, pid)),
        modules: ps::run(ps::PROCLDD, &[pid.to_string()], ps::TIMEOUT)
            .map(|out| ps::parse_modules(&out)),
    }
}
