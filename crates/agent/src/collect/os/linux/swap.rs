//! `/proc/vmstat`: pages swapped in and out (`pswpin`, `pswpout`) over the window.

use crate::collect::{collector::Descriptor, os::sections};
use powerdiag_rules::{Gathered, OsFacts, SwapActivity};

use crate::collect::{
    CollectError,
    os::{
        Roots,
        registry::{Collector, Ctx},
    },
};

/// The `swap` section: the system's swap traffic over the window (since boot without one).
pub(super) struct Swap;

/// `(pswpin, pswpout)` since boot.
type Counts = (u64, u64);

impl Collector for Swap {
    const SECTION: &'static Descriptor = &sections::SWAP;
    type Baseline = Counts;
    type Output = SwapActivity;

    fn begin(&self, ctx: &Ctx) -> Option<Counts> {
        read(ctx.roots).ok()
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<Counts>,
        so_far: &OsFacts,
    ) -> Result<SwapActivity, CollectError> {
        let now = read(ctx.roots)?;
        let page_bytes = so_far.memory.as_ref().ok().and_then(|m| m.base_page_bytes);
        Ok(activity(
            baseline,
            now,
            ctx.window.as_secs_f64(),
            page_bytes,
        ))
    }

    fn store(facts: &mut OsFacts, section: Gathered<SwapActivity>) {
        facts.swap = section;
    }
}

/// The two counters of `/proc/vmstat` (`name value` lines). Only those two lines are parsed:
/// parsing all ~180 into a map twice a sample was 5% of the agent's CPU.
fn read(r: &Roots) -> Result<Counts, CollectError> {
    let path = r.proc("vmstat");
    let text = super::fs::read(&path)?;
    let get = |k: &str| {
        text.lines()
            .find_map(|l| {
                let (name, value) = l.split_once(' ')?;
                (name == k).then(|| value.trim().parse::<u64>().ok())?
            })
            .ok_or_else(|| CollectError::parse(&path, format!("no `{k}` counter")))
    };
    Ok((get("pswpin")?, get("pswpout")?))
}

fn activity(
    before: Option<Counts>,
    now: Counts,
    secs: f64,
    page_bytes: Option<u64>,
) -> SwapActivity {
    let (basis, (pages_in, pages_out)) = match before {
        Some(b) => (
            format!("window {secs:.2} s"),
            (now.0.saturating_sub(b.0), now.1.saturating_sub(b.1)),
        ),
        None => ("since boot".to_owned(), now),
    };
    SwapActivity {
        basis,
        pages_in,
        pages_out,
        total_pages_in: now.0,
        total_pages_out: now.1,
        page_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::os::linux::tests::write;

    #[test]
    fn over_a_window_and_since_boot() {
        let a = activity(Some((10, 20)), (14, 20), 1.0, Some(4096));
        assert_eq!(
            (a.basis.as_str(), a.pages_in, a.pages_out),
            ("window 1.00 s", 4, 0)
        );
        assert_eq!((a.total_pages_in, a.total_pages_out), (14, 20));
        let b = activity(None, (14, 20), 0.0, None);
        assert_eq!((b.basis.as_str(), b.pages_in), ("since boot", 14));
    }

    #[test]
    fn a_vmstat_without_the_counters_is_named() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "proc/vmstat", "nr_free_pages 100\npswpin 7\n");
        let e = read(&Roots::tree(d.path())).unwrap_err().to_string();
        assert!(e.ends_with("vmstat: no `pswpout` counter"), "{e}");
        write(d.path(), "proc/vmstat", "pswpin 7\npswpout 9\n");
        assert_eq!(read(&Roots::tree(d.path())).unwrap(), (7, 9));
        // A name that only starts like the counter is another counter; a value that is not a
        // number is no counter.
        write(
            d.path(),
            "proc/vmstat",
            "pswpin_x 1\npswpin 7\npswpout nine\n",
        );
        let e = read(&Roots::tree(d.path())).unwrap_err().to_string();
        assert!(e.ends_with("vmstat: no `pswpout` counter"), "{e}");
    }
}
