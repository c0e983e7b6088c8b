//! The rule registry. A new rule is one new file here plus one line in [`RULES`].

use crate::Rule;

mod mhnsw;
pub(crate) mod pd101_mhnsw_cache_undersized;
mod pd102_mhnsw_cache_thrashing;
mod pd103_profiler_stall_dominated;
mod pd201_innodb_checksum_software;
mod pd202_mariadb_old_write_scalability;
mod pd203_innodb_native_aio_off;
mod pd204_performance_schema_off;

pub use mhnsw::{GraphEstimate, estimate_graph_bytes};
pub use pd101_mhnsw_cache_undersized::MhnswCacheUndersized;
pub use pd102_mhnsw_cache_thrashing::MhnswCacheThrashing;
pub use pd103_profiler_stall_dominated::ProfilerStallDominated;
pub use pd201_innodb_checksum_software::InnodbChecksumSoftware;
pub use pd202_mariadb_old_write_scalability::MariadbOldWriteScalability;
pub use pd203_innodb_native_aio_off::InnodbNativeAioOff;
pub use pd204_performance_schema_off::PerformanceSchemaOff;

/// Every rule, in code order.
pub static RULES: &[&dyn Rule] = &[
    &MhnswCacheUndersized,
    &MhnswCacheThrashing,
    &ProfilerStallDominated,
    &InnodbChecksumSoftware,
    &MariadbOldWriteScalability,
    &InnodbNativeAioOff,
    &PerformanceSchemaOff,
];

/// Finds a rule by code (`PD101`, case-insensitive) or name (`mhnsw-cache-undersized`).
pub fn find_rule(code_or_name: &str) -> Option<&'static dyn Rule> {
    let key = code_or_name.trim();
    RULES.iter().copied().find(|r| {
        r.meta().code.eq_ignore_ascii_case(key) || r.meta().name.eq_ignore_ascii_case(key)
    })
}

#[cfg(test)]
mod registry_tests {
    use std::collections::HashSet;

    use super::*;
    use crate::{Severity, Status, testing::SnapshotBuilder};

    fn kebab(type_name: &str) -> String {
        let mut out = String::new();
        for (i, c) in type_name.chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    out.push('-');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn codes_and_names_are_unique_well_formed_and_ordered() {
        let mut codes = HashSet::new();
        let mut names = HashSet::new();
        let mut previous = "";
        for rule in RULES {
            let m = rule.meta();
            assert!(codes.insert(m.code), "duplicate code {}", m.code);
            assert!(names.insert(m.name), "duplicate name {}", m.name);
            assert!(
                m.code.len() == 5
                    && m.code.starts_with("PD")
                    && m.code[2..].chars().all(|c| c.is_ascii_digit()),
                "bad code {}",
                m.code
            );
            assert!(m.code > previous, "{} is out of order", m.code);
            previous = m.code;
            assert_eq!(
                m.name,
                kebab(m.type_name),
                "name must be the type's kebab-case form"
            );
        }
    }

    #[test]
    fn every_rule_is_documented() {
        for rule in RULES {
            let m = rule.meta();
            for heading in ["What it does", "Why is this bad?", "Remediation"] {
                let section = m.section(heading).unwrap_or_default();
                assert!(
                    section.len() > 40,
                    "{} lacks a real '### {heading}' section",
                    m.code
                );
            }
            assert!(
                !m.summary.is_empty() && !m.summary.ends_with('.'),
                "{} summary",
                m.code
            );
            assert!(find_rule(m.code).is_some() && find_rule(m.name).is_some());
            assert!(find_rule(&m.code.to_ascii_lowercase()).is_some());
        }
        assert!(find_rule("PD999").is_none());
    }

    /// Every rule can fail on some snapshot, and the registry reaches it.
    #[test]
    fn every_rule_is_reachable() {
        let fixtures = crate::rules::tests_support::failing_snapshots();
        for rule in RULES {
            let code = rule.meta().code;
            let fired = fixtures.iter().any(|s| {
                crate::evaluate(s)
                    .checks
                    .iter()
                    .any(|c| c.code == code && c.status == Status::Fail)
            });
            assert!(
                fired,
                "no fixture makes {code} fail; add one to tests_support"
            );
        }
    }

    /// An empty snapshot (nothing collected) never panics and never passes a database rule.
    #[test]
    fn nothing_collected_is_never_a_pass() {
        let mut s = SnapshotBuilder::new()
            .host_unavailable("not collected")
            .build();
        s.mariadb = Default::default();
        for c in crate::evaluate(&s).checks {
            assert_ne!(c.status, Status::Pass, "{} passed with no facts", c.code);
            assert_ne!(c.status, Status::Fail, "{} failed with no facts", c.code);
            assert!(!c.summary.is_empty());
        }
    }

    #[test]
    fn severities_match_the_catalogue() {
        let expect = [
            ("PD101", Severity::Critical),
            ("PD102", Severity::Critical),
            ("PD103", Severity::Warning),
            ("PD201", Severity::Warning),
            ("PD202", Severity::Warning),
            ("PD203", Severity::Info),
            ("PD204", Severity::Info),
        ];
        for (code, sev) in expect {
            assert_eq!(
                find_rule(code).map(|r| r.meta().severity),
                Some(sev),
                "{code}"
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use crate::{Snapshot, Var, testing::*};

    /// Snapshots under which each rule fails (the registry test checks coverage).
    pub(crate) fn failing_snapshots() -> Vec<Snapshot> {
        vec![
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .vector_index(big_vector_index())
                .probe(super::pd102_mhnsw_cache_thrashing::tests::thrashing_probe())
                .build(),
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .probe(super::pd103_profiler_stall_dominated::tests::stalled_probe())
                .build(),
            SnapshotBuilder::new()
                .mariadb("10.2.44-MariaDB")
                .host(|h| h.hardware_threads = Some(48))
                .var(Var::InnodbChecksumAlgorithm, "innodb")
                .var(Var::InnodbUseNativeAio, "OFF")
                .var(Var::PerformanceSchema, "OFF")
                .build(),
        ]
    }
}
