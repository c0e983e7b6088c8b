use crate::{Limits, Rule, Snapshot, Threshold, Unit, Var, Verdict, declare_rule, format_bytes};

declare_rule! {
    /// ### What it does
    /// On Linux, checks whether mariadbd's memory is mapped with small pages only: 4 KiB base
    /// pages, and no huge pages behind its anonymous memory — transparent huge pages set to
    /// `never`, or set to `madvise`/`always` with `AnonHugePages` at (about) zero — and no
    /// HugeTLB pool in use through `large_pages`. It fires only when the server's resident
    /// memory exceeds {min_rss_bytes} (*heuristic*: below that the TLB reach of 4 KiB pages
    /// rarely matters); transparent huge pages count as in use from {min_huge_share} of it.
    /// 64 KiB base pages, as Linux on POWER uses by default, pass.
    ///
    /// ### Why is this bad?
    /// Every 4 KiB page needs its own TLB entry. A buffer pool or an MHNSW graph of gigabytes,
    /// walked by pointer chasing, misses the TLB constantly and pays a page-table walk each
    /// time. In the field report, the same MariaDB 11.8 vector search on POWER9 ran 112 → 208 QPS
    /// (sequential) once mariadbd used 64 KiB instead of 4 KiB pages on AIX, and about 40%
    /// faster in the summary table; Linux on POWER had used 64 KiB pages all along.
    ///
    /// ### Remediation
    /// Prefer transparent huge pages for mariadbd's anonymous memory:
    ///
    /// ```sh
    /// echo madvise > /sys/kernel/mm/transparent_hugepage/enabled   # or `always`
    /// ```
    ///
    /// (persist with `transparent_hugepage=madvise` on the kernel command line). Recent MariaDB
    /// releases switch THP off for their own process (`THP_enabled: 0` in
    /// `/proc/$(pidof mariadbd)/status`; believed to be since 10.6.17/10.11.7, MDEV-33279 —
    /// unverified); then only a HugeTLB pool helps (below). With `madvise`,
    /// the allocator must ask for huge pages (jemalloc: `thp:always`). Trade-offs: `always` can
    /// raise memory use and cause compaction stalls; some vendors advise `never` for databases
    /// because of latency spikes from `defrag`: keep `defrag` at `madvise` or `defer`.
    /// Alternatively reserve a HugeTLB pool (`vm.nr_hugepages`) and set `large_pages = ON`
    /// under `[mariadbd]` (restart needed; the pool is locked memory).
    pub struct SmallPagesLinux {
        code: "PD302",
        name: "small-pages-linux",
        severity: Info,
        scope: Host,
        summary: "mariadbd's large memory is mapped with 4 KiB pages only, so TLB misses dominate pointer-chasing work",
        fails_when: "Linux, 4 KiB base pages, mariadbd > 1 GiB resident with ~no huge pages (THP never, or madvise/always with `AnonHugePages` ≈ 0) *(heuristic)*",
        severity_why: "info: the benefit of huge pages for MariaDB on Linux is not measured here, so it is advice",
        thresholds: [MIN_RSS, MIN_HUGE_SHARE],
    }
}

const MIN_RSS: Threshold = Threshold {
    key: "min_rss_bytes",
    default: 1073741824.0,
    min: 0.0,
    max: 1125899906842624.0,
    unit: Unit::Bytes,
    doc: "mariadbd's resident memory from which page size matters (heuristic)",
};
const MIN_HUGE_SHARE: Threshold = Threshold {
    key: "min_huge_share",
    default: 0.01,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of resident memory in huge pages below which THP counts as not in use (heuristic)",
};

impl Rule for SmallPagesLinux {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        s.require_os("linux")?;
        let mem = s.memory()?;
        let p = s.process()?;
        let base = mem
            .base_page_bytes
            .or_else(|| p.kernel_page_sizes.first().copied())
            .ok_or_else(|| Verdict::insufficient("the base page size is unknown"))?;
        let rss = p
            .rss_bytes
            .ok_or_else(|| Verdict::insufficient("mariadbd's resident memory is unknown"))?;
        let thp = mem.thp_enabled.as_deref().unwrap_or("unknown");
        let huge = p.anon_huge_bytes.unwrap_or(0);
        let mut evidence = vec![
            format!("base page size {}", format_bytes(base)),
            format!("transparent_hugepage/enabled = {thp}"),
            format!(
                "mariadbd pid {}: {} resident, {} in transparent huge pages",
                p.pid,
                format_bytes(rss),
                format_bytes(huge)
            ),
        ];
        if p.thp_disabled == Some(true) {
            evidence.push(
                "mariadbd's /proc/PID/status: THP_enabled: 0 (disabled for the process)".into(),
            );
        }
        let with = |mut v: Verdict| {
            v.evidence = evidence.clone();
            Ok(v)
        };
        if base > 4096 {
            return with(Verdict::pass(format!(
                "base pages are {}",
                format_bytes(base)
            )));
        }
        let min_rss = limits.count(&MIN_RSS);
        if rss < min_rss {
            return with(Verdict::pass(format!(
                "mariadbd has only {} resident (page size matters from {}, heuristic)",
                format_bytes(rss),
                format_bytes(min_rss)
            )));
        }
        let large_pages = s
            .db()
            .ok()
            .and_then(|d| d.var_bool(Var::LargePages).ok())
            .unwrap_or(false);
        if large_pages && mem.hugepages_total.unwrap_or(0) > 0 {
            return with(Verdict::pass("large_pages is ON with a HugeTLB pool"));
        }
        let share = huge as f64 / rss as f64;
        if thp != "never" && share >= limits.get(&MIN_HUGE_SHARE) {
            return with(Verdict::pass(format!(
                "{:.0}% of mariadbd's resident memory is in transparent huge pages",
                share * 100.0
            )));
        }
        let why = if thp == "never" {
            "transparent huge pages are disabled (never)".to_owned()
        } else if p.thp_disabled == Some(true) {
            format!(
                "mariadbd switched transparent huge pages off for itself (THP_enabled: 0), so THP `{thp}` does not apply"
            )
        } else {
            format!("transparent huge pages are `{thp}` but back none of it")
        };
        with(Verdict::fail(format!(
            "mariadbd has {} resident in {} pages and {why}",
            format_bytes(rss),
            format_bytes(base)
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn check(edit: impl FnOnce(&mut crate::OsFacts)) -> Verdict {
        let s = SnapshotBuilder::new().os(edit).build();
        verdict(&SmallPagesLinux, &s)
    }

    fn thp_never_big(o: &mut crate::OsFacts) {
        if let Gathered::Available(m) = &mut o.memory {
            m.thp_enabled = Some("never".into());
        }
        if let Gathered::Available(p) = &mut o.process {
            p.rss_bytes = Some(48 << 30);
            p.anon_huge_bytes = Some(0);
        }
    }

    #[test]
    fn fails_with_thp_never_and_a_large_server() {
        let v = check(thp_never_big);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary.contains("48 GiB") && v.summary.contains("never"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn passes_with_huge_pages_64k_pages_or_a_small_server() {
        assert_eq!(check(|_| {}).status, Status::Pass);
        assert_eq!(
            check(|o| {
                thp_never_big(o);
                if let Gathered::Available(m) = &mut o.memory {
                    m.base_page_bytes = Some(65536);
                }
            })
            .status,
            Status::Pass
        );
        assert_eq!(
            check(|o| {
                thp_never_big(o);
                if let Gathered::Available(p) = &mut o.process {
                    p.rss_bytes = Some(512 << 20);
                }
            })
            .status,
            Status::Pass
        );
    }

    #[test]
    fn madvise_without_huge_pages_fails() {
        let v = check(|o| {
            if let Gathered::Available(p) = &mut o.process {
                p.rss_bytes = Some(8 << 30);
                p.anon_huge_bytes = Some(0);
            }
        });
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("madvise"));
    }

    #[test]
    fn says_when_mariadbd_disabled_thp_for_itself() {
        let v = check(|o| {
            if let Gathered::Available(p) = &mut o.process {
                p.rss_bytes = Some(8 << 30);
                p.anon_huge_bytes = Some(0);
                p.thp_disabled = Some(true);
            }
        });
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("THP_enabled: 0"), "{}", v.summary);
    }

    #[test]
    fn not_applicable_off_linux_insufficient_without_the_process() {
        let s = SnapshotBuilder::new().host(|h| h.os = "aix".into()).build();
        assert_eq!(verdict(&SmallPagesLinux, &s).status, Status::NotApplicable);
        let v = check(|o| {
            o.process = Gathered::Unavailable("no mariadbd or mysqld process on this host".into())
        });
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("no mariadbd"));
    }
}
