use crate::{Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, value::format_bytes};

declare_rule! {
    /// ### What it does
    /// Checks that the host does not swap while it serves the database: pages swapped in or
    /// out over the sample window (`/proc/vmstat` `pswpin`/`pswpout`; AIX: paging-space
    /// `pgspins`/`pgspouts` of `perfstat_memory_total`) above {min_swap_pages}, or mariadbd with
    /// more than {max_vmswap_bytes} of its memory in swap (`VmSwap`; AIX: `perfstat_process`
    /// `pgsp_inuse`), which needs no window. Counters since boot alone decide nothing: swapping last week is not
    /// swapping now, so without a window and without `VmSwap` the verdict is
    /// `insufficient_data`.
    ///
    /// ### Why is this bad?
    /// A buffer-pool page that was swapped out costs a disk read where a memory read was
    /// expected — three to five orders of magnitude slower — and InnoDB cannot see it coming:
    /// it believes the page is cached. MySQLTuner and the PMM advisors flag any swap activity
    /// on a database host; the node-mixin alerts on sustained major page faults. Swapping is
    /// almost always overcommitted memory (PD503) or another process growing beside mariadbd.
    ///
    /// ### Remediation
    /// Size the buffer pool and the per-connection buffers to the RAM (PD503), then keep the
    /// kernel from choosing swap over the page cache: `sysctl -w vm.swappiness=1` (persist in
    /// `/etc/sysctl.d/`). To pin the pool, run mariadbd with `large_pages` (HugeTLB pages are
    /// never swapped) or `memlock` (`LimitMEMLOCK=infinity` in the systemd unit). AIX: check
    /// `lsps -a` and `vmstat -v`, and lower `maxperm`/`minperm` only with IBM's guidance.
    pub struct SwapActivity {
        code: "PD504",
        name: "swap-activity",
        severity: Critical,
        scope: Host,
        summary: "the host swaps, or mariadbd has memory in swap",
        fails_when: "pages swapped in or out during the window (`/proc/vmstat`), or mariadbd has memory in swap (`VmSwap`); since-boot counters alone decide nothing",
        thresholds: [MIN_SWAP_PAGES, MAX_VMSWAP],
    }
}

const MIN_SWAP_PAGES: Threshold = Threshold {
    key: "min_swap_pages",
    default: 1.0,
    min: 1.0,
    max: 1e12,
    unit: Unit::Count,
    doc: "pages swapped in plus out over the window that count as swapping",
};
const MAX_VMSWAP: Threshold = Threshold {
    key: "max_vmswap_bytes",
    default: 0.0,
    min: 0.0,
    max: 1e15,
    unit: Unit::Bytes,
    doc: "mariadbd memory in swap (VmSwap) tolerated",
};

impl Rule for SwapActivity {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let mut evidence = Vec::new();
        let mut problems = Vec::new();
        let mut known = false;
        if let Ok(m) = s.memory()
            && let (Some(total), Some(free)) = (m.swap_total_bytes, m.swap_free_bytes)
        {
            evidence.push(format!(
                "swap space {} configured, {} in use",
                format_bytes(total),
                format_bytes(total.saturating_sub(free))
            ));
        }
        let vmswap = s
            .process()
            .ok()
            .and_then(|p| p.swap_bytes.map(|b| (p.pid, b)));
        if let Some((pid, bytes)) = vmswap {
            evidence.push(format!(
                "mariadbd pid {pid}: VmSwap {}",
                format_bytes(bytes)
            ));
            if bytes as f64 > limits.get(&MAX_VMSWAP) {
                problems.push(format!(
                    "{} of mariadbd's memory is in swap",
                    format_bytes(bytes)
                ));
            }
        }
        let swap = s.swap();
        match &swap {
            Ok(a) if a.basis != "since boot" => {
                known = true;
                let page = a.page_bytes.unwrap_or(4096);
                evidence.push(format!(
                    "{} pages swapped in, {} out ({})",
                    a.pages_in, a.pages_out, a.basis
                ));
                let pages = a.pages_in.saturating_add(a.pages_out);
                if pages >= limits.count(&MIN_SWAP_PAGES) {
                    problems.push(format!(
                        "the host swapped {} in and {} out over the {}",
                        format_bytes(a.pages_in.saturating_mul(page)),
                        format_bytes(a.pages_out.saturating_mul(page)),
                        a.basis
                    ));
                }
            }
            Ok(a) => evidence.push(format!(
                "{} pages swapped in, {} out since boot (not judged: no window)",
                a.pages_in, a.pages_out
            )),
            Err(_) => {}
        }
        if !problems.is_empty() {
            let mut v = Verdict::fail(problems.join("; "));
            for e in evidence {
                v = v.with_evidence(e);
            }
            return Ok(v);
        }
        // mariadbd with nothing in swap says nothing about the swapping now: the pass needs
        // the window's counters.
        if !known {
            let why = match &swap {
                Err(v) => v.summary.clone(),
                Ok(_) => "the swap counters are since boot only: swapping now needs a window (--sample-window)".into(),
            };
            return Err(Verdict::insufficient(why));
        }
        let mut v = Verdict::pass(if vmswap.is_some() {
            "no swapping during the window and nothing of mariadbd in swap"
        } else {
            "no swapping during the window"
        });
        for e in evidence {
            v = v.with_evidence(e);
        }
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Gathered, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn with(pages: (u64, u64), basis: &str, vmswap: Option<u64>) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(a) = &mut o.swap {
                    a.pages_in = pages.0;
                    a.pages_out = pages.1;
                    a.basis = basis.into();
                }
            })
            .process(|p| p.swap_bytes = vmswap)
            .build();
        verdict(&SwapActivity, &s)
    }

    #[test]
    fn swapping_in_the_window_or_a_swapped_server_fails() {
        let v = with((0, 250), "window 1.00 s", Some(0));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("1000 KiB out"), "{}", v.summary);
        assert_eq!(
            with((0, 0), "window 1.00 s", Some(64 << 20)).status,
            Status::Fail
        );
        // VmSwap needs no window.
        assert_eq!(
            with((900, 900), "since boot", Some(1 << 20)).status,
            Status::Fail
        );
    }

    #[test]
    fn a_quiet_window_passes_and_since_boot_alone_decides_nothing() {
        assert_eq!(with((0, 0), "window 1.00 s", Some(0)).status, Status::Pass);
        assert_eq!(with((0, 0), "window 1.00 s", None).status, Status::Pass);
        let v = with((900, 900), "since boot", None);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("since boot only"), "{}", v.summary);
        // Nothing in swap now is not "no swapping now".
        let v = with((0, 0), "since boot", Some(0));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        let s = SnapshotBuilder::new()
            .os(|o| o.swap = Gathered::Unavailable("/proc/vmstat does not exist".into()))
            .process(|p| p.swap_bytes = None)
            .build();
        let v = verdict(&SwapActivity, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("vmstat does not exist"), "{}", v.summary);
    }
}
