use crate::{Compiler, Impact, Limits, Rule, Snapshot, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// On AIX, tells which compiler built mariadbd from the C++ runtime loaded into the running
    /// server (`procldd <pid>`): GCC's `libstdc++` or `libgcc_s` — on AIX the AIX Toolbox
    /// packages under `/opt/freeware` — mean a GCC build; LLVM's `libc++` (fileset
    /// `libc++.rte`) means IBM Open XL C/C++. Information: it fires for a GCC build and says
    /// which library gave it away. When neither runtime is loaded (a statically linked
    /// runtime) or the list of loaded modules cannot be read, it says it cannot tell.
    ///
    /// ### Why is this bad?
    /// The compiler was the largest single factor in the field report (MariaDB 11.8 vector
    /// search on a POWER9 S924 under AIX): the GCC 13.3 build took 6.3 ms per query, the IBM
    /// Open XL 17.1.3 build 2.1 ms — 3× faster — and GCC's run-to-run variance was 10–40%
    /// against under 2% for Open XL. On a 12-vCPU shared LPAR, 30 queries took 0.190 s with
    /// GCC and 0.063 s with Open XL.
    ///
    /// ### Remediation
    /// Build MariaDB with IBM Open XL C/C++ for AIX (17.1.3 or later), e.g.
    /// `cmake -DCMAKE_C_COMPILER=ibm-clang_r -DCMAKE_CXX_COMPILER=ibm-clang++_r ...`, and keep
    /// to the plain optimised build: in the
    /// field report Open XL with LTO was 27% slower (forced exports), `-ffast-math` broke the
    /// MHNSW distance computations, `-funroll-loops` was slower, and PGO profiles were not
    /// written on XCOFF. Measure the new build with your own workload before switching.
    pub struct AixGccBuild {
        code: "PD601",
        name: "aix-gcc-build",
        severity: Info,
        scope: Host,
        summary: "mariadbd on AIX was built with GCC; the Open XL build was 3× faster per query",
        fails_when: "AIX and mariadbd has GCC's C++ runtime loaded (`libstdc++`/`libgcc_s`, AIX Toolbox) rather than Open XL's `libc++` (`procldd`)",
        severity_why: "info: the build's speed is measured elsewhere (3× in the field report), not here, so the compiler is advice",
        impact: [COMPILER],
    }
}

/// mariadbd built by different compilers.
const COMPILER: Impact = Impact {
    factor: 3.0,
    evidence: "GCC 13.3 build 6.3 ms/query vs IBM Open XL 17.1.3 2.1 ms/query (3×); GCC varies 10–40% run to run",
};

impl Rule for AixGccBuild {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        s.require_os("aix")?;
        let p = s.process()?;
        let how = p.compiler_evidence.as_deref();
        let Some(compiler) = p.compiler else {
            return Err(Verdict::insufficient(format!(
                "the compiler that built mariadbd could not be told from its loaded modules{}",
                how.map(|h| format!(": {h}")).unwrap_or_default()
            )));
        };
        let evidence = format!(
            "mariadbd pid {}: {}",
            p.pid,
            how.unwrap_or("detected from its loaded modules (procldd)")
        );
        Ok(match compiler {
            Compiler::Gcc => Verdict::fail(
                "mariadbd was built with GCC (its GCC C++ runtime is loaded): the Open XL build was 3× faster per query in the field report (6.3 → 2.1 ms)",
            ),
            Compiler::OpenXl => Verdict::pass("mariadbd was built with IBM Open XL C/C++"),
            Compiler::Other => {
                Verdict::pass("mariadbd was not built with GCC (another compiler's runtime is loaded)")
            }
        }
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, ProcessFacts, Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::testing::SnapshotBuilder::new().aix().build()
    }

    fn check(edit: impl FnOnce(&mut ProcessFacts)) -> Verdict {
        let s = SnapshotBuilder::new().aix().process(edit).build();
        verdict(&AixGccBuild, &s)
    }

    #[test]
    fn fails_for_a_gcc_build_and_says_how_it_knows() {
        let v = check(|_| {});
        assert_eq!(v.status, Status::Fail);
        assert!(v.summary.contains("3×"), "{}", v.summary);
        assert!(v.evidence[0].contains("libstdc++.a"), "{:?}", v.evidence);
    }

    #[test]
    fn passes_for_open_xl_and_other_compilers() {
        let v = check(|p| {
            p.compiler = Some(Compiler::OpenXl);
            p.compiler_evidence = Some("Open XL runtime loaded: /usr/lib/libc++.a".into());
        });
        assert_eq!(v.status, Status::Pass);
        assert!(v.evidence[0].contains("libc++.a"));
        let v = check(|p| {
            p.compiler = Some(Compiler::Other);
            p.compiler_evidence = None;
        });
        assert_eq!(v.status, Status::Pass);
        assert!(v.evidence[0].contains("procldd"));
    }

    #[test]
    fn insufficient_when_it_cannot_tell() {
        let v = check(|p| {
            p.compiler = None;
            p.compiler_evidence = Some("procldd 8454302: permission denied".into());
        });
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("permission denied"), "{}", v.summary);
        let v = check(|p| {
            p.compiler = None;
            p.compiler_evidence = None;
        });
        assert_eq!(v.status, Status::InsufficientData);
        let s = SnapshotBuilder::new()
            .aix()
            .os(|o| o.process = Gathered::Unavailable("no mariadbd or mysqld process".into()))
            .build();
        assert_eq!(verdict(&AixGccBuild, &s).status, Status::InsufficientData);
    }

    #[test]
    fn not_applicable_off_aix() {
        // A Linux process with a GCC runtime is not this rule's business.
        let s = SnapshotBuilder::new()
            .process(|p| p.compiler = Some(Compiler::Gcc))
            .build();
        assert_eq!(verdict(&AixGccBuild, &s).status, Status::NotApplicable);
    }
}
