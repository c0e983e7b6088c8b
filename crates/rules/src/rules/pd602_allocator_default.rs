use crate::{Allocator, Impact, Limits, Platform, Rule, Snapshot, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Looks at the libraries mapped into mariadbd (`/proc/PID/maps` on Linux) for jemalloc,
    /// tcmalloc or mimalloc, and reports when none is present: the server uses the C library's
    /// malloc. An allocator linked statically into mariadbd cannot be seen this way.
    ///
    /// ### Why is this bad?
    /// A small, steady gain: in the MySQL-on-POWER8 measurements jemalloc gave 3–4% more
    /// throughput than glibc malloc, with less fragmentation on long-running servers with many
    /// threads. Information, not a fault.
    ///
    /// ### Remediation
    /// #### Linux
    /// Install jemalloc (Debian/Ubuntu `libjemalloc2`, RHEL `jemalloc` from EPEL) and preload
    /// it for mariadbd, e.g. in a systemd drop-in (`systemctl edit mariadb`):
    ///
    /// ```ini
    /// [Service]
    /// Environment="LD_PRELOAD=/usr/lib/<multiarch>/libjemalloc.so.2"
    /// ```
    ///
    /// with the library's path on the host (`ldconfig -p | grep jemalloc`; Debian/Ubuntu
    /// `/usr/lib/<multiarch>/`, where `<multiarch>` is `x86_64-linux-gnu`,
    /// `powerpc64le-linux-gnu` or `aarch64-linux-gnu` — a report fills in the host's; RHEL
    /// `/usr/lib64/`), or `malloc-lib=` under `[mysqld_safe]` when the server is started by
    /// mysqld_safe. Restart and check that
    /// `/proc/$(pidof mariadbd)/maps` lists libjemalloc.
    ///
    /// #### AIX
    /// jemalloc is rarely packaged for AIX; tune the system allocator instead through
    /// mariadbd's environment (its start script or SRC definition:
    /// `MALLOCOPTIONS=multiheap:8,considersize`, or another `MALLOCTYPE`; see IBM's "System
    /// memory allocation using the malloc subsystem"), restart it, and measure: the 3–4%
    /// figure comes from Linux on POWER8.
    pub struct AllocatorDefault {
        code: "PD602",
        name: "allocator-default",
        severity: Info,
        scope: Host,
        summary: "mariadbd uses the C library's malloc; jemalloc was 3–4% faster",
        fails_when: "mariadbd maps no jemalloc/tcmalloc/mimalloc (libc malloc)",
        severity_why: "info: jemalloc's small gain (3–4%) is measured elsewhere, not here, so it is advice",
        impact: [ALLOCATOR],
    }
}

/// Different memory allocators.
const ALLOCATOR: Impact = Impact {
    factor: 1.035,
    evidence: "jemalloc +3–4% on POWER8",
};

impl Rule for AllocatorDefault {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let p = s.process()?;
        // Unknown is not libc: the collector says why in the evidence (the file it could not
        // read in full, or that was empty), and that is what is missing.
        let alloc = p.allocator.ok_or_else(|| {
            Verdict::insufficient(match p.allocator_evidence.as_deref() {
                Some(why) => format!("mariadbd's mapped libraries could not be read: {why}"),
                None => "mariadbd's mapped libraries could not be read".to_owned(),
            })
        })?;
        let evidence = format!(
            "mariadbd pid {}: {}",
            p.pid,
            p.allocator_evidence
                .as_deref()
                .unwrap_or("allocator detected from its maps")
        );
        Ok(match alloc {
            Allocator::Libc => Verdict::fail(
                "mariadbd uses the C library's malloc (no jemalloc, tcmalloc or mimalloc mapped)",
            )
            .with_remediation(remediation(&Platform::of(s))),
            other => Verdict::pass(format!("mariadbd uses {}", serde_name(other))),
        }
        .with_evidence(evidence))
    }
}

/// The remediation for this host's platform, with its Debian multiarch directory in the
/// `LD_PRELOAD` example.
fn remediation(platform: &Platform) -> String {
    let text = AllocatorDefault::META.remediation_for(platform);
    let multiarch = match platform.arch.as_deref() {
        Some("x86_64") => "x86_64-linux-gnu",
        Some("powerpc64le") => "powerpc64le-linux-gnu",
        Some("aarch64") => "aarch64-linux-gnu",
        _ => return text,
    };
    text.replace(
        "/usr/lib/<multiarch>/libjemalloc",
        &format!("/usr/lib/{multiarch}/libjemalloc"),
    )
}

fn serde_name(a: Allocator) -> &'static str {
    match a {
        Allocator::Jemalloc => "jemalloc",
        Allocator::Tcmalloc => "tcmalloc",
        Allocator::Mimalloc => "mimalloc",
        Allocator::Libc => "libc malloc",
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

    #[test]
    fn verdicts() {
        let check = |a: Option<Allocator>| {
            let s = SnapshotBuilder::new()
                .os(|o| {
                    if let Gathered::Available(p) = &mut o.process {
                        p.allocator = a;
                    }
                })
                .build();
            verdict(&AllocatorDefault, &s).status
        };
        assert_eq!(check(Some(Allocator::Libc)), Status::Fail);
        assert_eq!(check(Some(Allocator::Jemalloc)), Status::Pass);
        assert_eq!(check(None), Status::InsufficientData);
    }

    /// An unknown allocator names what is missing, as the collector reported it.
    #[test]
    fn unknown_names_the_file() {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(p) = &mut o.process {
                    p.allocator = None;
                    p.allocator_evidence = Some("/proc/9/maps is empty".into());
                }
            })
            .build();
        let v = verdict(&AllocatorDefault, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("/proc/9/maps is empty"), "{}", v.summary);
    }

    /// The host's platform first: AIX advice on AIX, the host's library path on Linux.
    #[test]
    fn remediation_for_the_host() {
        let on = |os: &str, arch: &str| {
            let s = SnapshotBuilder::new()
                .host(|h| {
                    h.os = os.into();
                    h.arch = arch.into();
                })
                .os(|o| {
                    if let Gathered::Available(p) = &mut o.process {
                        p.allocator = Some(Allocator::Libc);
                    }
                })
                .build();
            let v = verdict(&AllocatorDefault, &s);
            assert_eq!(v.status, Status::Fail);
            v.remediation.unwrap()
        };
        let aix = on("aix", "powerpc64");
        assert!(aix.starts_with("AIX:\n"), "{aix}");
        assert!(aix.find("MALLOCOPTIONS") < aix.find("LD_PRELOAD"), "{aix}");
        let x86 = on("linux", "x86_64");
        assert!(x86.starts_with("Linux:\n"), "{x86}");
        assert!(
            x86.contains("LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            "{x86}"
        );
        let power = on("linux", "powerpc64le");
        assert!(
            power.contains("LD_PRELOAD=/usr/lib/powerpc64le-linux-gnu/libjemalloc.so.2"),
            "{power}"
        );
    }
}
