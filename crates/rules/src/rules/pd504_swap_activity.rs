use crate::{Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, value::format_bytes};

declare_rule! {
    /// ### What it does
    /// Checks that the host does not swap while it serves the database: pages swapped in or
    /// out over the sample window (`/proc/vmstat` `pswpin`/`pswpout`; AIX: paging-space
    /// `pgspins`/`pgspouts` of `perfstat_memory_total`) of at least {min_swap_pages}. Passes
    /// on a host with no swap space configured (nothing can be swapped).
    ///
    /// A verdict about now: mariadbd's memory in swap (`VmSwap`; AIX: `perfstat_process`
    /// `pgsp_inuse`) and the counters since boot are evidence, never a fail on their own —
    /// pages swapped out last week and never touched since cost nothing now, and the kernel
    /// leaves them there. Without a window the verdict is `insufficient_data`.
    ///
    /// Peers: MySQLTuner 2.9.1 checks `vm.swappiness` above 10 (`mysqltuner.pl` 5066–5089)
    /// and warns when the worst-case memory exceeds RAM + swap (1259–1275), not swap activity;
    /// PMM alerts when swap is more than 80% used (`pmm_node_swap_filled_up`); the node-mixin
    /// alerts on sustained major page faults.
    ///
    /// ### Why is this bad?
    /// A buffer-pool page that was swapped out costs a disk read where a memory read was
    /// expected — three to five orders of magnitude slower — and InnoDB cannot see it coming:
    /// it believes the page is cached. Swapping is almost always overcommitted memory (PD503)
    /// or another process growing beside mariadbd.
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
        severity: Warning,
        scope: Host,
        summary: "the host swaps while it serves the database",
        fails_when: "pages swapped in or out during the window (`/proc/vmstat`); `VmSwap` and since-boot counters are evidence only; no swap configured passes",
        severity_why: "warning: swapping during the window is measured, but not what the swapped pages cost the queries",
        thresholds: [MIN_SWAP_PAGES],
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

impl Rule for SwapActivity {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let mut evidence = Vec::new();
        let mut no_swap = false;
        if let Ok(m) = s.memory()
            && let (Some(total), Some(free)) = (m.swap_total_bytes, m.swap_free_bytes)
        {
            no_swap = total == 0;
            evidence.push(format!(
                "swap space {} configured, {} in use",
                format_bytes(total),
                format_bytes(total.saturating_sub(free))
            ));
        }
        if let Ok(p) = s.process()
            && let Some(bytes) = p.swap_bytes
        {
            evidence.push(format!(
                "mariadbd pid {}: VmSwap {} (pages swapped out earlier; evidence, not judged)",
                p.pid,
                format_bytes(bytes)
            ));
        }
        let finish = |mut v: Verdict, evidence: Vec<String>| {
            v.evidence = evidence;
            v
        };
        if no_swap {
            return Ok(finish(
                Verdict::pass("no swap space is configured: nothing can be swapped"),
                evidence,
            ));
        }
        let a = s.swap()?;
        if a.basis == "since boot" {
            evidence.push(format!(
                "{} pages swapped in, {} out since boot (history, not judged)",
                a.pages_in, a.pages_out
            ));
            return Err(finish(
                Verdict::insufficient(
                    "the swap counters are since boot only: swapping now needs a window (doctor --sample-window; the agent's [sample] window)",
                ),
                evidence,
            ));
        }
        let page = a.page_bytes.unwrap_or(4096);
        evidence.push(format!(
            "{} pages swapped in, {} out ({})",
            a.pages_in, a.pages_out, a.basis
        ));
        let pages = a.pages_in.saturating_add(a.pages_out);
        Ok(finish(
            if pages >= limits.count(&MIN_SWAP_PAGES) {
                Verdict::fail(format!(
                    "the host swapped {} in and {} out over the {}",
                    format_bytes(a.pages_in.saturating_mul(page)),
                    format_bytes(a.pages_out.saturating_mul(page)),
                    a.basis
                ))
            } else {
                Verdict::pass(format!("no swapping over the {}", a.basis))
            },
            evidence,
        ))
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
    fn swapping_in_the_window_fails() {
        let v = with((0, 250), "window 1.00 s", Some(0));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("1000 KiB out"), "{}", v.summary);
        assert_eq!(with((3, 0), "window 1.00 s", None).status, Status::Fail);
    }

    #[test]
    fn leftovers_in_swap_are_evidence_not_a_fail() {
        // 64 MiB of mariadbd in swap, but nothing moved during the window: passes, says so.
        let v = with((0, 0), "window 1.00 s", Some(64 << 20));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(
            v.evidence.iter().any(|e| e.contains("VmSwap 64 MiB")),
            "{v:?}"
        );
        // Without a window neither VmSwap nor the counters since boot decide.
        let v = with((900, 900), "since boot", Some(1 << 20));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("since boot only"), "{}", v.summary);
    }

    #[test]
    fn no_swap_configured_passes() {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(a) = &mut o.swap {
                    a.basis = "since boot".into();
                }
                if let Gathered::Available(m) = &mut o.memory {
                    m.swap_total_bytes = Some(0);
                    m.swap_free_bytes = Some(0);
                }
            })
            .build();
        let v = verdict(&SwapActivity, &s);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("no swap space"), "{v:?}");
    }

    #[test]
    fn missing_counters_are_insufficient() {
        assert_eq!(with((0, 0), "window 1.00 s", None).status, Status::Pass);
        let s = SnapshotBuilder::new()
            .os(|o| o.swap = Gathered::Unavailable("/proc/vmstat does not exist".into()))
            .process(|p| p.swap_bytes = None)
            .build();
        let v = verdict(&SwapActivity, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("vmstat does not exist"), "{}", v.summary);
    }
}
