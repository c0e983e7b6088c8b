//! The MariaDB collectors' shape: one [`Part`] per piece of [`MariadbFacts`] read on the
//! server's connection after its own facts (variables, status), listed once in [`BEFORE_WINDOW`]
//! or [`AFTER_WINDOW`] — the SQL side of the OS registry (`os::registry`).
//!
//! As there, the registry does the bookkeeping: it runs the parts in order on the one session,
//! times each, and reports one [`CollectorRun`] per part
//! (`powerdiag_collector_success{collector="mariadb_statements"}` and so on). A part stores its
//! own facts (an unavailable piece says why); it returns [`CollectError::Skipped`] when it did
//! not run by design — disabled, or served from the agent's cache — and reports no run then.
//! Facts about the server are not failures: performance_schema OFF makes the statement part
//! succeed with the statements `Unavailable` and the reason.

use std::{future::Future, pin::Pin, time::Instant};

use powerdiag_rules::{CollectorRun, MariadbFacts};

use super::{MariadbOptions, ProbeObserver, innodb, probe, session::Session, statements, vector};
use crate::collect::CollectError;

/// What a part works with: the session, the facts read so far (its own piece included), and
/// the options.
pub(super) struct Ctx<'a> {
    pub s: &'a mut Session,
    pub facts: &'a mut MariadbFacts,
    pub opts: &'a MariadbOptions,
    pub observer: &'a dyn ProbeObserver,
}

pub(super) type PartFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), CollectError>> + Send + 'a>>;

/// One MariaDB collector. Adding one: a type implementing this in its own file, and a line in
/// [`BEFORE_WINDOW`] or [`AFTER_WINDOW`].
pub(super) trait Part: Sync {
    /// The `collector` label of its run.
    fn name(&self) -> &'static str;

    /// Reads its piece into `ctx.facts`. `Err` is a failed run, except
    /// [`CollectError::Skipped`] (not run by design: no run reported).
    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a>;
}

/// Read before the window opens, so their statements are not counted in doctor's status
/// window and the probe's k-NN queries are not in the digest read.
pub(super) static BEFORE_WINDOW: &[&dyn Part] = &[&statements::StatementsPart, &innodb::Innodb];

/// Read once the window is open (the probe's latency is measured while the OS counters run).
pub(super) static AFTER_WINDOW: &[&dyn Part] = &[&vector::VectorIndexes, &probe::ProbePart];

/// Runs `parts` in order, each timed as its own run.
pub(super) async fn run(parts: &[&dyn Part], ctx: &mut Ctx<'_>, runs: &mut Vec<CollectorRun>) {
    for part in parts {
        let started = Instant::now();
        let out = part.collect(ctx).await;
        match out {
            Err(e) if !e.is_failure() => {}
            out => runs.push(CollectorRun {
                name: part.name().into(),
                duration_seconds: started.elapsed().as_secs_f64(),
                success: out.is_ok(),
                error: out.err().map(|e| e.to_string()),
            }),
        }
    }
}
