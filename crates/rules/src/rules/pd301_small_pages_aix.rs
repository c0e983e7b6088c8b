use crate::{Impact, Limits, ProcessFacts, Rule, Snapshot, Verdict, declare_rule, format_bytes};

declare_rule! {
    /// ### What it does
    /// On AIX, checks the page sizes mariadbd's data (heap), text and stack segments actually
    /// use — the `DPGSZ`, `TPGSZ` and `SPGSZ` columns of `ps -Z`, which come from
    /// `getprocs64` — and fails when any of them is 4 KB, AIX's default. When the page sizes
    /// could not be read, it falls back to mariadbd's environment: it fails when `LDR_CNTRL` is
    /// absent or does not ask for larger data pages (`DATAPSIZE`). 64 KB (or 16 MB) pages pass.
    ///
    /// ### Why is this bad?
    /// Every 4 KB page needs its own TLB entry, so a buffer pool or an MHNSW graph of hundreds
    /// of megabytes, walked by pointer chasing, misses the TLB constantly. In the
    /// field report (MariaDB 11.8 vector search on a POWER9 S924 under AIX) starting mariadbd
    /// with 64 KB pages through
    /// `LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K` took sequential
    /// queries from 112 to 208 QPS, and 12 workers to 2,721 QPS — about 40% faster in the
    /// summary table. A `MAP_ANON_64K` patch to MariaDB's own mmap calls added about 8% more.
    /// Linux on POWER uses 64 KB base pages, which is part of why it started ahead.
    ///
    /// ### Remediation
    /// Start mariadbd with 64 KB pages. Either set the loader control variable in the
    /// environment of mariadbd only (its start script or wrapper; children inherit it):
    ///
    /// ```sh
    /// export LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K
    /// ```
    ///
    /// or mark the binary once, so that no environment is needed (repeat after every
    /// upgrade of the binary):
    ///
    /// ```sh
    /// ldedit -btextpsize=64K -bdatapsize=64K -bstackpsize=64K /opt/mariadb/bin/mariadbd
    /// ```
    ///
    /// Restart mariadbd and check that `ps -Z -p <pid>` shows `64K` under DPGSZ, TPGSZ and
    /// SPGSZ.
    pub struct SmallPagesAix {
        code: "PD301",
        name: "small-pages-aix",
        severity: Warning,
        scope: Host,
        summary: "mariadbd runs on AIX's default 4 KB pages; 64 KB pages were ~40% faster",
        fails_when: "AIX and mariadbd's data, text or stack segment runs on 4 KB pages (`ps -Z` columns), or, when those cannot be read, its environment has no `LDR_CNTRL` asking for 64 KB data pages",
        severity_why: "warning: 4 KB pages cost ~40% in the field report's MariaDB on AIX, likely under a memory-heavy load",
        impact: [PAGE_SIZE],
    }
}

/// Different page sizes backing mariadbd's memory (PD301 and PD302).
const PAGE_SIZE: Impact = Impact {
    factor: 1.86,
    evidence: "4 KB → 64 KB pages for mariadbd on AIX: 112 → 208 QPS sequential (1.86×)",
};

/// AIX's default page size.
const SMALL: u64 = 4096;

impl Rule for SmallPagesAix {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        s.require_os("aix")?;
        let p = s.process()?;
        let segments = [
            ("data", p.data_page_bytes),
            ("text", p.text_page_bytes),
            ("stack", p.stack_page_bytes),
        ];
        let known: Vec<(&str, u64)> = segments
            .iter()
            .filter_map(|(name, size)| size.map(|b| (*name, b)))
            .collect();
        let mut evidence = Vec::new();
        if !known.is_empty() {
            evidence.push(format!(
                "mariadbd pid {}: {} pages (ps -Z)",
                p.pid,
                segments
                    .iter()
                    .map(|(name, size)| format!(
                        "{name} {}",
                        size.map_or_else(|| "unknown".to_owned(), format_bytes)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(line) = ldr_cntrl_evidence(p) {
            evidence.push(line);
        }
        let with = |mut v: Verdict| {
            v.evidence = evidence.clone();
            Ok(v)
        };
        if !known.is_empty() {
            let small: Vec<&str> = known
                .iter()
                .filter(|(_, b)| *b <= SMALL)
                .map(|(name, _)| *name)
                .collect();
            return if small.is_empty() {
                with(Verdict::pass(format!(
                    "mariadbd's {} use pages larger than 4 KB",
                    known
                        .iter()
                        .map(|(name, b)| format!("{name} ({})", format_bytes(*b)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            } else {
                with(Verdict::fail(format!(
                    "mariadbd's {} {} on 4 KB pages, AIX's default: 64 KB pages were ~40% faster in the field report",
                    small.join(", "),
                    if small.len() == 1 {
                        "segment runs"
                    } else {
                        "segments run"
                    }
                )))
            };
        }
        // Page sizes unknown: judge by what the environment asks the loader for.
        match p.ldr_cntrl.as_deref() {
            None => Err(Verdict::insufficient(
                "neither mariadbd's page sizes (ps -Z) nor its environment (LDR_CNTRL) could be read; run powerdiag as root or as the mariadbd user",
            )),
            Some("") => with(Verdict::fail(
                "LDR_CNTRL is not in mariadbd's environment, so (unless the binary was marked with ldedit) it runs on AIX's default 4 KB pages; its page sizes could not be read to confirm",
            )),
            Some(v) => match data_page_size(v) {
                Some(b) if b > SMALL => with(Verdict::pass(format!(
                    "LDR_CNTRL asks for {} data pages (its page sizes could not be read to confirm)",
                    format_bytes(b)
                ))),
                _ => with(Verdict::fail(
                    "LDR_CNTRL in mariadbd's environment does not ask for larger data pages (DATAPSIZE=64K)",
                )),
            },
        }
    }
}

fn ldr_cntrl_evidence(p: &ProcessFacts) -> Option<String> {
    match p.ldr_cntrl.as_deref()? {
        "" => Some("LDR_CNTRL is not set in mariadbd's environment".into()),
        v => Some(format!("mariadbd's environment: LDR_CNTRL={v}")),
    }
}

/// The `DATAPSIZE` of an `LDR_CNTRL` value (`@`-separated options, e.g.
/// `MAXDATA=0x80000000@DATAPSIZE=64K`), in bytes.
fn data_page_size(ldr_cntrl: &str) -> Option<u64> {
    ldr_cntrl.split('@').find_map(|opt| {
        let (key, value) = opt.split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("DATAPSIZE") {
            return None;
        }
        let value = value.trim().to_ascii_uppercase();
        let (digits, unit) = match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
            Some((i, _)) => value.split_at(i),
            None => (value.as_str(), ""),
        };
        let n: u64 = digits.parse().ok()?;
        let shift = match unit {
            "" => 0,
            "K" => 10,
            "M" => 20,
            "G" => 30,
            _ => return None,
        };
        n.checked_mul(1 << shift)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::testing::SnapshotBuilder::new().aix().build()
    }

    fn check(edit: impl FnOnce(&mut ProcessFacts)) -> Verdict {
        let s = SnapshotBuilder::new().aix().process(edit).build();
        verdict(&SmallPagesAix, &s)
    }

    fn sizes(p: &mut ProcessFacts, size: Option<u64>) {
        p.data_page_bytes = size;
        p.text_page_bytes = size;
        p.stack_page_bytes = size;
    }

    #[test]
    fn fails_on_4k_pages() {
        let v = check(|_| {});
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.summary
                .contains("data, text, stack segments run on 4 KB pages"),
            "{}",
            v.summary
        );
        assert!(v.evidence[0].contains("data 4 KiB, text 4 KiB, stack 4 KiB"));
        assert!(v.evidence[1].contains("LDR_CNTRL is not set"));
    }

    #[test]
    fn one_small_segment_is_enough_to_fail() {
        let v = check(|p| {
            sizes(p, Some(64 << 10));
            p.stack_page_bytes = Some(4096);
            p.ldr_cntrl = Some("DATAPSIZE=64K@TEXTPSIZE=64K".into());
        });
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("stack segment runs"), "{}", v.summary);
        assert!(v.evidence[1].contains("LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K"));
    }

    #[test]
    fn passes_on_64k_pages_whatever_the_environment() {
        let v = check(|p| sizes(p, Some(64 << 10)));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("data (64 KiB)"), "{}", v.summary);
        // Marked with ldedit, environment unreadable: the page sizes decide.
        let v = check(|p| {
            sizes(p, Some(64 << 10));
            p.ldr_cntrl = None;
        });
        assert_eq!(v.status, Status::Pass);
        // 16 MB data pages and an unknown stack.
        let v = check(|p| {
            sizes(p, Some(64 << 10));
            p.data_page_bytes = Some(16 << 20);
            p.stack_page_bytes = None;
        });
        assert_eq!(v.status, Status::Pass);
        assert!(v.evidence[0].contains("stack unknown"), "{:?}", v.evidence);
    }

    #[test]
    fn falls_back_to_the_environment() {
        let v = check(|p| sizes(p, None));
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("LDR_CNTRL is not in"), "{}", v.summary);
        let v = check(|p| {
            sizes(p, None);
            p.ldr_cntrl = Some("DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K".into());
        });
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let v = check(|p| {
            sizes(p, None);
            p.ldr_cntrl = Some("MAXDATA=0x80000000".into());
        });
        assert_eq!(v.status, Status::Fail);
        let v = check(|p| {
            sizes(p, None);
            p.ldr_cntrl = Some("DATAPSIZE=4K".into());
        });
        assert_eq!(v.status, Status::Fail);
    }

    #[test]
    fn insufficient_without_sizes_or_environment() {
        let v = check(|p| {
            sizes(p, None);
            p.ldr_cntrl = None;
        });
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("ps -Z"), "{}", v.summary);
        let s = SnapshotBuilder::new()
            .aix()
            .os(|o| o.process = Gathered::Unavailable("no mariadbd or mysqld process".into()))
            .build();
        let v = verdict(&SmallPagesAix, &s);
        assert_eq!(v.status, Status::InsufficientData);
    }

    #[test]
    fn not_applicable_off_aix() {
        let s = SnapshotBuilder::new().build();
        let v = verdict(&SmallPagesAix, &s);
        assert_eq!(v.status, Status::NotApplicable);
        assert!(v.summary.contains("applies to aix"), "{}", v.summary);
    }

    #[test]
    fn ldr_cntrl_data_page_size() {
        assert_eq!(data_page_size("DATAPSIZE=64K"), Some(64 << 10));
        assert_eq!(
            data_page_size("TEXTPSIZE=64K@datapsize=16m"),
            Some(16 << 20)
        );
        assert_eq!(data_page_size("MAXDATA=0x80000000@TEXTPSIZE=64K"), None);
        assert_eq!(data_page_size("DATAPSIZE=huge"), None);
        assert_eq!(data_page_size("DATAPSIZE=99999999999G"), None);
        assert_eq!(data_page_size(""), None);
    }
}
