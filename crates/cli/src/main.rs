//! `powerdiag`: performance diagnostics for MariaDB hosts.

mod agent;
mod args;
mod collection;
mod collector_flags;
mod collectors;
mod diff;
mod doctor;
mod explain;
mod generate;
mod progress;
mod report;
mod snapshot;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// The static (musl) builds allocate through mimalloc: musl's allocator kept growing a
/// long-running agent whose live heap stays under 1 MB (docs/performance.md, "Memory").
#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc commits its first arena whole on Linux (~14 MB resident at start, against the
/// agent's 16 MB budget); committed page by page as used instead, set before the first
/// allocation (so not from the environment, whose reading allocates).
fn tune_allocator() {
    // SAFETY: sets an option of mimalloc's; called first thing in `main`, on one thread.
    // `mi_option_arena_eager_commit` is 4 in mimalloc 2's `mi_option_t` (libmimalloc-sys does
    // not name it).
    #[cfg(all(target_os = "linux", target_env = "musl"))]
    unsafe {
        libmimalloc_sys::mi_option_set(4, 0)
    };
}

/// Exit codes (Nagios plugin convention).
pub(crate) mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const WARNING: u8 = 1;
    pub(crate) const CRITICAL: u8 = 2;
    /// powerdiag itself could not do what was asked: bad flag, unreadable config.
    pub(crate) const UNKNOWN: u8 = 3;
}

/// mysql_async keeps up to 128 packet buffers for reuse (`MYSQL_ASYNC_BUFFER_POOL_CAP`), each
/// as large as the biggest packet it carried, up to 4 MiB (`MYSQL_ASYNC_BUFFER_SIZE_CAP`): a
/// long-running agent, whose result rows pass through them, kept growing as they filled
/// (heaptrack at 100,000 tables, 15 s samples: +79 kB in 17 minutes at 128, then steps of
/// 7–17 kB at 16 as the vector listing's statement grew pooled buffers). One connection's
/// statements, one at a time, need few: 4 kept, of 16 KiB at most (a larger one is shrunk as
/// it goes back), so at most 64 KiB. A value the environment gives is kept.
fn bound_driver_buffers() {
    for (var, value) in [
        ("MYSQL_ASYNC_BUFFER_POOL_CAP", "4"),
        ("MYSQL_ASYNC_BUFFER_SIZE_CAP", "16384"),
    ] {
        if std::env::var_os(var).is_none() {
            // SAFETY: called from `main` before the agent starts its runtime or any thread, so
            // no other thread reads or writes the environment meanwhile.
            unsafe { std::env::set_var(var, value) };
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::UNKNOWN
            } else {
                exit::OK
            };
            // Help and version go to stdout; usage errors to stderr. Both best effort.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Doctor(a) => doctor::run(&a),
        Command::Rules(a) => explain::list(&a),
        Command::Collectors(a) => collectors::list(&a),
        Command::Explain(a) => explain::explain(&a),
        Command::Collect(a) => snapshot::collect(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Agent(a) => {
            bound_driver_buffers();
            agent::run(&a)
        }
        Command::Completions(a) => generate::completions(&a),
        Command::Man(a) => generate::man(&a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            report::error(&format!("{e:#}"));
            ExitCode::from(exit::UNKNOWN)
        }
    }
}
