//! The rule registry. A new rule is one new file here plus one line in `rules!`.

use crate::Rule;

mod blocking;
pub(crate) mod digest_text;
#[cfg(test)]
mod examples;
mod fix;
mod galera;
mod lpar;
mod memory;
mod mhnsw;

pub use mhnsw::{GraphEstimate, estimate_graph_bytes};

/// Declares every rule once: the line `pdNNN_file::TypeName,` makes the module, its export, its
/// [`RULES`] entry and (in tests) its place in the registry-wide tests, which call the rule
/// file's own `tests::failing_example()` (a rule without one does not compile). Rules in code
/// order.
macro_rules! rules {
    ($($module:ident :: $Rule:ident,)*) => {
        $(
            mod $module;
            pub use $module::$Rule;
        )*

        /// Every rule, in code order.
        pub static RULES: &[&dyn Rule] = &[$(&$Rule,)*];

        /// Each rule with the snapshot its own file says makes it fail.
        #[cfg(test)]
        pub(crate) fn failing_examples() -> Vec<(&'static dyn Rule, crate::Snapshot)> {
            vec![$((&$Rule as &'static dyn Rule, $module::tests::failing_example()),)*]
        }
    };
}

rules! {
    pd101_mhnsw_cache_undersized::MhnswCacheUndersized,
    pd102_mhnsw_cache_thrashing::MhnswCacheThrashing,
    pd103_profiler_stall_dominated::ProfilerStallDominated,
    pd201_innodb_checksum_software::InnodbChecksumSoftware,
    pd202_mariadb_old_write_scalability::MariadbOldWriteScalability,
    pd203_innodb_native_aio_off::InnodbNativeAioOff,
    pd204_performance_schema_off::PerformanceSchemaOff,
    pd205_innodb_buffer_pool_undersized::InnodbBufferPoolUndersized,
    pd206_innodb_redo_log_undersized::InnodbRedoLogUndersized,
    pd207_innodb_log_waits::InnodbLogWaits,
    pd208_tmp_tables_on_disk::TmpTablesOnDisk,
    pd209_connections_near_limit::ConnectionsNearLimit,
    pd210_thread_cache_ineffective::ThreadCacheIneffective,
    pd211_table_cache_misses::TableCacheMisses,
    pd212_query_cache_contention::QueryCacheContention,
    pd213_sort_merge_passes::SortMergePasses,
    pd214_joins_without_index::JoinsWithoutIndex,
    pd215_long_transaction::LongTransaction,
    pd216_innodb_flush_method_buffered::InnodbFlushMethodBuffered,
    pd217_row_lock_waits::RowLockWaits,
    pd218_deadlocks::Deadlocks,
    pd219_metadata_lock_pileup::MetadataLockPileup,
    pd220_idle_transaction_holding_locks::IdleTransactionHoldingLocks,
    pd221_replication_stopped::ReplicationStopped,
    pd222_replication_lag::ReplicationLag,
    pd223_binlog_cache_spills::BinlogCacheSpills,
    pd224_semisync_fell_back::SemisyncFellBack,
    pd225_galera_node_not_ready::GaleraNodeNotReady,
    pd226_galera_flow_control::GaleraFlowControl,
    pd227_galera_apply_queue::GaleraApplyQueue,
    pd301_small_pages_aix::SmallPagesAix,
    pd302_small_pages_linux::SmallPagesLinux,
    pd303_tlb_miss_rate_high::TlbMissRateHigh,
    pd401_lpar_donating_mode::LparDonatingMode,
    pd402_lpar_dedicated_capped_latency::LparDedicatedCappedLatency,
    pd403_hypervisor_preemption::HypervisorPreemption,
    pd404_cpu_frequency_throttled::CpuFrequencyThrottled,
    pd405_smt_disabled::SmtDisabled,
    pd406_dscr_default::DscrDefault,
    pd407_entitlement_low_per_vcpu::EntitlementLowPerVcpu,
    pd501_numa_memoryless_nodes::NumaMemorylessNodes,
    pd502_working_set_exceeds_l3::WorkingSetExceedsL3,
    pd503_memory_overcommitted::MemoryOvercommitted,
    pd504_swap_activity::SwapActivity,
    pd601_aix_gcc_build::AixGccBuild,
    pd602_allocator_default::AllocatorDefault,
    pd701_statement_no_index::StatementNoIndex,
    pd702_statement_n_plus_one::StatementNPlusOne,
    pd703_statement_rows_examined_high::StatementRowsExaminedHigh,
    pd704_statement_temp_disk_tables::StatementTempDiskTables,
    pd705_duplicate_index::DuplicateIndex,
    pd706_unused_index::UnusedIndex,
    pd707_table_without_primary_key::TableWithoutPrimaryKey,
    pd708_non_transactional_tables::NonTransactionalTables,
    pd709_statement_regressed::StatementRegressed,
    pd801_datadir_space_low::DatadirSpaceLow,
    pd802_storage_saturated::StorageSaturated,
    pd803_server_restarted::ServerRestarted,
    pd804_innodb_flushing_lags::InnodbFlushingLags,
    pd805_version_end_of_life::VersionEndOfLife,
    pd806_cpu_saturated::CpuSaturated,
    pd807_inodes_low::InodesLow,
}

/// The rule table of docs/rules.md (between its `<!-- rules -->` markers), made from the
/// declarations: code, name, severity and when each rule fails.
pub fn markdown_table() -> String {
    let mut out = String::from("| code | name | severity | fails when |\n|---|---|---|---|\n");
    for rule in RULES {
        let m = rule.meta();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            m.code, m.name, m.severity, m.fails_when
        ));
    }
    out
}

/// The severity table of README.md (between its `<!-- severity-table:start -->` markers), made
/// from the declarations: code, name, severity and why (`severity_why` without its severity
/// word).
pub fn severity_table() -> String {
    let mut out = String::from("| code | name | severity | why |\n|---|---|---|---|\n");
    for rule in RULES {
        let m = rule.meta();
        let why = m
            .severity_why
            .split_once(": ")
            .map_or(m.severity_why, |(_, why)| why);
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            m.code, m.name, m.severity, why
        ));
    }
    out
}

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
    use crate::{Status, testing::SnapshotBuilder};

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
            for h in m.remediation_headings() {
                assert!(
                    crate::PLATFORM_HEADINGS.contains(&h.as_str()),
                    "{}: remediation block `#### {h}` is not one of {:?}",
                    m.code,
                    crate::PLATFORM_HEADINGS
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

    /// Every rule fails on the example its own file gives, and the registry reaches it.
    #[test]
    fn every_rule_fails_on_its_own_example() {
        let examples = failing_examples();
        assert_eq!(examples.len(), RULES.len());
        for (rule, s) in examples {
            let code = rule.meta().code;
            let check = crate::evaluate(&s)
                .checks
                .into_iter()
                .find(|c| c.code == code)
                .expect("the registry evaluates every rule");
            assert_eq!(
                check.status,
                Status::Fail,
                "{code} on its failing_example: {check:?}"
            );
        }
    }

    /// Replaces what lies between `open` and `close` in the file at `path` (relative to the
    /// workspace) with `want` when `UPDATE_DOCS` is set; otherwise panics when it differs.
    fn check_generated(path: &str, open: &str, close: &str, want: &str) {
        let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
        let doc = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"));
        let start = doc
            .find(open)
            .unwrap_or_else(|| panic!("{path} lacks {}", open.trim()))
            + open.len();
        let end = start
            + doc[start..]
                .find(close)
                .unwrap_or_else(|| panic!("{path} lacks {close}"));
        if doc[start..end] != *want {
            if std::env::var_os("UPDATE_DOCS").is_some() {
                let updated = format!("{}{want}{}", &doc[..start], &doc[end..]);
                std::fs::write(&full, updated).unwrap_or_else(|e| panic!("write {path}: {e}"));
            } else {
                panic!(
                    "{path}'s generated table is stale: run `UPDATE_DOCS=1 cargo test -p powerdiag-rules the_docs_rule_table`"
                );
            }
        }
    }

    /// docs/rules.md's rule table and README.md's severity table are the declarations'
    /// (`UPDATE_DOCS=1` rewrites both).
    /// Issue 32's policy, as far as a test can see it in the code: no rule judges a status
    /// counter since start-up. A counter is read through `Snapshot::judge` or a window
    /// (`Counts::get`); `status_u64` of a counter (its value since start-up) is allowed only as
    /// evidence, marked `// evidence only` on the line before.
    #[test]
    fn no_rule_judges_a_counter_since_start_up() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
        let mut offences = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "mod.rs" {
                continue;
            }
            if text.contains("startup_counts(") {
                offences.push(format!(
                    "{name}: calls startup_counts (only counters.rs may)"
                ));
            }
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(rest) = line.split("status_u64(StatusVar::").nth(1) else {
                    continue;
                };
                let ident: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
                let var = crate::StatusVar::ALL
                    .iter()
                    .find(|v| format!("{v:?}") == ident)
                    .unwrap_or_else(|| panic!("{name}: unknown StatusVar::{ident}"));
                let marked = i > 0 && lines[i - 1].contains("evidence only");
                if var.is_counter() && !marked {
                    offences.push(format!(
                        "{name}:{}: reads the counter {} since start-up",
                        i + 1,
                        var.name()
                    ));
                }
            }
        }
        assert!(offences.is_empty(), "{offences:#?}");
    }

    #[test]
    fn the_docs_rule_table_is_generated() {
        check_generated(
            "docs/rules.md",
            "<!-- rules -->\n",
            "<!-- /rules -->",
            &markdown_table(),
        );
        check_generated(
            "README.md",
            "<!-- severity-table:start -->\n",
            "<!-- severity-table:end -->",
            &severity_table(),
        );
        for rule in RULES {
            let m = rule.meta();
            for (field, text) in [
                ("fails_when", m.fails_when),
                ("severity_why", m.severity_why),
            ] {
                assert!(
                    !text.is_empty() && !text.contains('|') && !text.contains('\n'),
                    "{}: {field} is one table cell",
                    m.code
                );
            }
        }
    }

    /// Every `severity_why` opens with its rule's severity word: `critical: `, `warning: `
    /// or `info: `, then the reason.
    #[test]
    fn every_severity_why_starts_with_its_severity() {
        for rule in RULES {
            let m = rule.meta();
            let prefix = format!("{}: ", m.severity.as_str());
            assert!(
                m.severity_why.starts_with(&prefix) && m.severity_why.len() > prefix.len() + 10,
                "{}: severity_why must start with `{prefix}` and say why: {:?}",
                m.code,
                m.severity_why
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
        s.os = crate::Gathered::Unavailable("not collected".into());
        for c in crate::evaluate(&s).checks {
            assert_ne!(c.status, Status::Pass, "{} passed with no facts", c.code);
            assert_ne!(c.status, Status::Fail, "{} failed with no facts", c.code);
            assert!(!c.summary.is_empty());
        }
    }
}
