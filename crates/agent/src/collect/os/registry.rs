//! The OS collectors' shape: one [`Collector`] per section of [`OsFacts`] (named in
//! `sections.rs`), listed once in the platform's registry (`linux::COLLECTORS`), as
//! node_exporter's `registerCollector`.
//!
//! The registry, not the collectors, does the bookkeeping: it takes every enabled collector's
//! first reading when the sample window opens, runs them in registry order when it closes (a
//! collector may read the sections registered before it from `so_far`) through
//! [`collector::execute`], which times each and reports its run
//! (`powerdiag_collector_success{collector="cpu"}` and so on), and stores its section
//! (`Gathered::Unavailable` with the error's sentence on failure). A collector that is
//! [`CollectError::Skipped`] (disabled, or not collected by design) reports no run; one that
//! would start after the deadline is a [`CollectError::Timeout`].

use std::{
    any::Any,
    time::{Duration, Instant},
};

use powerdiag_rules::{CollectorRun, Gathered, OsFacts};

use super::{Found, Roots};
use crate::collect::{
    CollectError,
    collector::{self, Descriptor, Selection},
};

/// What every collector sees.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub roots: &'a Roots,
    /// True when the window has two readings: the live system and a non-zero window.
    pub windowed: bool,
    /// The window's measured length (zero before it ends, or without a window).
    pub window: Duration,
    /// mariadbd, looked up once for every collector.
    pub process: &'a Result<Found, CollectError>,
    /// The server's directories as `(variable, path)`, when it runs on this host; else why not.
    pub server_dirs: &'a Result<Vec<(String, String)>, CollectError>,
    /// The collectors turned on or off.
    pub selection: &'a Selection,
}

/// One section of the OS facts. One file, one `impl`, one line in the registry.
pub(crate) trait Collector: Sync {
    /// Its section (`sections.rs`): the name of its run and of `--collector.NAME`.
    const SECTION: &'static Descriptor;
    /// The first reading of a windowed collector (`()` for the others).
    type Baseline: Send + 'static;
    type Output;

    /// The first reading, when the window opens (only when `ctx.windowed`).
    fn begin(&self, _ctx: &Ctx) -> Option<Self::Baseline> {
        None
    }

    /// The section, when the window closes.
    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Self::Baseline>,
        so_far: &OsFacts,
    ) -> Result<Self::Output, CollectError>;

    /// Where the section goes.
    fn store(facts: &mut OsFacts, section: Gathered<Self::Output>);
}

/// The object-safe face of a [`Collector`], implemented for every one.
pub(crate) trait Registered: Sync {
    fn descriptor(&self) -> &'static Descriptor;
    fn begin_any(&self, ctx: &Ctx) -> Option<Box<dyn Any + Send>>;
    fn finish_any(
        &self,
        ctx: &Ctx,
        baseline: Option<Box<dyn Any + Send>>,
        facts: &mut OsFacts,
    ) -> Option<CollectorRun>;
    fn fail(&self, ctx: &Ctx, facts: &mut OsFacts, e: CollectError) -> Option<CollectorRun>;
}

impl<C: Collector> Registered for C {
    fn descriptor(&self) -> &'static Descriptor {
        C::SECTION
    }

    fn begin_any(&self, ctx: &Ctx) -> Option<Box<dyn Any + Send>> {
        if !ctx.windowed || !ctx.selection.is_enabled(C::SECTION) {
            return None;
        }
        self.begin(ctx).map(|b| Box::new(b) as Box<dyn Any + Send>)
    }

    fn finish_any(
        &self,
        ctx: &Ctx,
        baseline: Option<Box<dyn Any + Send>>,
        facts: &mut OsFacts,
    ) -> Option<CollectorRun> {
        // The registry hands each collector its own baseline back: the downcast cannot fail.
        let baseline = baseline
            .and_then(|b| b.downcast::<C::Baseline>().ok())
            .map(|b| *b);
        let (out, run) = collector::execute(C::SECTION, ctx.selection, None, || {
            self.collect(ctx, baseline, facts)
        });
        C::store(facts, collector::gathered(out));
        run
    }

    fn fail(&self, ctx: &Ctx, facts: &mut OsFacts, e: CollectError) -> Option<CollectorRun> {
        let (out, run) =
            collector::execute(C::SECTION, ctx.selection, None, || Err::<C::Output, _>(e));
        C::store(facts, collector::gathered(out));
        run
    }
}

/// Every collector's first reading (in registry order; `None` for the unwindowed).
pub(crate) fn begin(collectors: &[&dyn Registered], ctx: &Ctx) -> Vec<Option<Box<dyn Any + Send>>> {
    collectors.iter().map(|c| c.begin_any(ctx)).collect()
}

/// Runs every collector in registry order into `facts`; those that would start after
/// `deadline` are not started and fail with a timeout.
pub(crate) fn finish(
    collectors: &[&dyn Registered],
    ctx: &Ctx,
    baselines: Vec<Option<Box<dyn Any + Send>>>,
    facts: &mut OsFacts,
    deadline: Instant,
    budget: Duration,
) -> Vec<CollectorRun> {
    let mut runs = Vec::new();
    let mut baselines = baselines.into_iter();
    for c in collectors {
        let baseline = baselines.next().flatten();
        if Instant::now() >= deadline {
            let late = CollectError::Timeout {
                what: format!("the {} collector", c.descriptor().name),
                after: budget,
            };
            runs.extend(c.fail(ctx, facts, late));
            continue;
        }
        runs.extend(c.finish_any(ctx, baseline, facts));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counting;
    impl Collector for Counting {
        const SECTION: &'static Descriptor = &crate::collect::os::sections::CPU_TIME;
        type Baseline = u32;
        type Output = powerdiag_rules::CpuTime;
        fn begin(&self, _ctx: &Ctx) -> Option<u32> {
            Some(7)
        }
        fn collect(
            &self,
            _ctx: &Ctx,
            b: Option<u32>,
            _so_far: &OsFacts,
        ) -> Result<Self::Output, CollectError> {
            match b {
                Some(7) => Ok(Default::default()),
                other => Err(CollectError::unsupported(format!("baseline {other:?}"))),
            }
        }
        fn store(f: &mut OsFacts, s: Gathered<Self::Output>) {
            f.cpu_time = s;
        }
    }

    struct Skips;
    impl Collector for Skips {
        const SECTION: &'static Descriptor = &crate::collect::os::sections::COUNTERS;
        type Baseline = ();
        type Output = powerdiag_rules::PerfCounters;
        fn collect(
            &self,
            _: &Ctx,
            _: Option<()>,
            so_far: &OsFacts,
        ) -> Result<Self::Output, CollectError> {
            // Sees the section registered before it.
            assert!(so_far.cpu_time.as_ref().is_ok());
            Err(CollectError::skipped("unavailable: not live"))
        }
        fn store(f: &mut OsFacts, s: Gathered<Self::Output>) {
            f.counters = s;
        }
    }

    #[test]
    fn baselines_return_to_their_collector_and_skips_report_no_run() {
        let roots = Roots::default();
        let process = Err(CollectError::skipped("none"));
        let server_dirs = Err(CollectError::skipped("none"));
        let ctx = Ctx {
            roots: &roots,
            windowed: true,
            window: Duration::from_secs(1),
            process: &process,
            server_dirs: &server_dirs,
            selection: &Selection::defaults(),
        };
        let list: [&dyn Registered; 2] = [&Counting, &Skips];
        let b = begin(&list, &ctx);
        let mut facts = OsFacts::unavailable("test", "not collected");
        let far = Instant::now() + Duration::from_secs(3600);
        let runs = finish(&list, &ctx, b, &mut facts, far, Duration::from_secs(1));
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].name.as_str(), runs[0].success), ("cpu_time", true));
        assert_eq!(
            facts.counters,
            Gathered::Unavailable("unavailable: not live".into())
        );
    }

    #[test]
    fn past_the_deadline_every_collector_times_out() {
        let roots = Roots::default();
        let process = Err(CollectError::skipped("none"));
        let server_dirs = Err(CollectError::skipped("none"));
        let ctx = Ctx {
            roots: &roots,
            windowed: false,
            window: Duration::ZERO,
            process: &process,
            server_dirs: &server_dirs,
            selection: &Selection::defaults(),
        };
        let list: [&dyn Registered; 2] = [&Counting, &Skips];
        let mut facts = OsFacts::unavailable("test", "not collected");
        let runs = finish(
            &list,
            &ctx,
            begin(&list, &ctx),
            &mut facts,
            Instant::now(),
            Duration::from_secs(2),
        );
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| !r.success));
        assert_eq!(
            runs[1].error.as_deref(),
            Some("the counters collector did not finish within 2.0 s (the collection deadline)")
        );
    }
}
