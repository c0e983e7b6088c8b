//! The MariaDB collectors' shape: one [`Part`] per piece of [`MariadbFacts`] read on the
//! server's connection after its own facts (variables, status), listed once in `mod.rs`'s
//! `BEFORE_WINDOW` or `AFTER_WINDOW` — the SQL side of the OS registry (`os::registry`).
//!
//! As there, [`run`] does the bookkeeping: it runs the parts in order on the one session
//! through [`collector::execute_async`], which gates each by the selection and the server's
//! version, times it and reports its [`CollectorRun`]
//! (`powerdiag_collector_success{collector="mariadb_statements"}` and so on). A part stores its
//! own facts (an unavailable piece says why); it returns [`CollectError::Skipped`] when it did
//! not run by design — disabled, or served from the agent's cache — and reports no run then.
//! Facts about the server are not failures: performance_schema OFF makes the statement part
//! succeed with the statements `Unavailable` and the reason.

use std::{future::Future, pin::Pin};

use powerdiag_rules::{CollectorRun, MariadbFacts};

use super::session::Session;
use crate::collect::{
    CollectError,
    collector::{self, Descriptor, Selection},
};

/// What a part works with: the session and the facts read so far (its own piece included).
/// Its options are its own fields (`mod.rs` builds the parts of each collection from
/// `MariadbOptions`).
pub(super) struct Ctx<'a> {
    pub s: &'a mut Session,
    pub facts: &'a mut MariadbFacts,
}

pub(super) type PartFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), CollectError>> + Send + 'a>>;

/// One MariaDB collector. Adding one: a type implementing this in its own file (its options as
/// fields), and a line in `mod.rs`'s `before_window` or `after_window`.
pub(super) trait Part: Send + Sync {
    /// Its name (the `collector` label of its run), help, default and minimum version.
    fn descriptor(&self) -> &'static Descriptor;

    /// Reads its piece into `ctx.facts`. `Err` is a failed run, except
    /// [`CollectError::Skipped`] (not run by design: no run reported).
    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a>;

    /// Marks its piece unavailable for `why`: the part is turned off.
    fn disabled(&self, facts: &mut MariadbFacts, why: String);
}

/// Runs `parts` in order through [`collector::execute_async`], each its own run.
pub(super) async fn run(
    parts: &[&dyn Part],
    ctx: &mut Ctx<'_>,
    selection: &Selection,
    runs: &mut Vec<CollectorRun>,
) {
    for part in parts {
        let version = ctx.facts.version.clone();
        let (out, run) =
            collector::execute_async(part.descriptor(), selection, Some(&version), || {
                part.collect(ctx)
            })
            .await;
        if let Err(e) = out
            && !selection.is_enabled(part.descriptor())
        {
            part.disabled(ctx.facts, e.to_string());
        }
        runs.extend(run);
    }
}
