//! The rule registry. A new rule is one new file here plus one line in [`RULES`].

use crate::Rule;

mod fix;
mod memory;
mod mhnsw;
pub(crate) mod pd101_mhnsw_cache_undersized;
mod pd102_mhnsw_cache_thrashing;
mod pd103_profiler_stall_dominated;
mod pd201_innodb_checksum_software;
mod pd202_mariadb_old_write_scalability;
mod pd203_innodb_native_aio_off;
mod pd204_performance_schema_off;
mod pd205_innodb_buffer_pool_undersized;
mod pd206_innodb_redo_log_undersized;
mod pd207_innodb_log_waits;
mod pd208_tmp_tables_on_disk;
mod pd209_connections_near_limit;
mod pd210_thread_cache_ineffective;
mod pd211_table_cache_misses;
mod pd212_query_cache_contention;
mod pd213_sort_merge_passes;
mod pd214_joins_without_index;
mod pd215_long_transaction;
mod pd216_innodb_flush_method_buffered;
mod pd301_small_pages_aix;
mod pd302_small_pages_linux;
mod pd303_tlb_miss_rate_high;
pub(crate) mod pd401_lpar_donating_mode;
mod pd402_lpar_dedicated_capped_latency;
mod pd403_hypervisor_preemption;
mod pd404_cpu_frequency_throttled;
mod pd405_smt_disabled;
mod pd406_dscr_default;
mod pd407_entitlement_low_per_vcpu;
mod pd501_numa_memoryless_nodes;
mod pd502_working_set_exceeds_l3;
mod pd503_memory_overcommitted;
mod pd504_swap_activity;
mod pd601_aix_gcc_build;
mod pd602_allocator_default;
mod pd701_statement_no_index;
mod pd702_statement_n_plus_one;
mod pd703_statement_rows_examined_high;
mod pd704_statement_temp_disk_tables;
mod pd801_datadir_space_low;
mod pd802_storage_saturated;

pub use mhnsw::{GraphEstimate, estimate_graph_bytes};
pub use pd101_mhnsw_cache_undersized::MhnswCacheUndersized;
pub use pd102_mhnsw_cache_thrashing::MhnswCacheThrashing;
pub use pd103_profiler_stall_dominated::ProfilerStallDominated;
pub use pd201_innodb_checksum_software::InnodbChecksumSoftware;
pub use pd202_mariadb_old_write_scalability::MariadbOldWriteScalability;
pub use pd203_innodb_native_aio_off::InnodbNativeAioOff;
pub use pd204_performance_schema_off::PerformanceSchemaOff;
pub use pd205_innodb_buffer_pool_undersized::InnodbBufferPoolUndersized;
pub use pd206_innodb_redo_log_undersized::InnodbRedoLogUndersized;
pub use pd207_innodb_log_waits::InnodbLogWaits;
pub use pd208_tmp_tables_on_disk::TmpTablesOnDisk;
pub use pd209_connections_near_limit::ConnectionsNearLimit;
pub use pd210_thread_cache_ineffective::ThreadCacheIneffective;
pub use pd211_table_cache_misses::TableCacheMisses;
pub use pd212_query_cache_contention::QueryCacheContention;
pub use pd213_sort_merge_passes::SortMergePasses;
pub use pd214_joins_without_index::JoinsWithoutIndex;
pub use pd215_long_transaction::LongTransaction;
pub use pd216_innodb_flush_method_buffered::InnodbFlushMethodBuffered;
pub use pd301_small_pages_aix::SmallPagesAix;
pub use pd302_small_pages_linux::SmallPagesLinux;
pub use pd303_tlb_miss_rate_high::TlbMissRateHigh;
pub use pd401_lpar_donating_mode::LparDonatingMode;
pub use pd402_lpar_dedicated_capped_latency::LparDedicatedCappedLatency;
pub use pd403_hypervisor_preemption::HypervisorPreemption;
pub use pd404_cpu_frequency_throttled::CpuFrequencyThrottled;
pub use pd405_smt_disabled::SmtDisabled;
pub use pd406_dscr_default::DscrDefault;
pub use pd407_entitlement_low_per_vcpu::EntitlementLowPerVcpu;
pub use pd501_numa_memoryless_nodes::NumaMemorylessNodes;
pub use pd502_working_set_exceeds_l3::WorkingSetExceedsL3;
pub use pd503_memory_overcommitted::MemoryOvercommitted;
pub use pd504_swap_activity::SwapActivity;
pub use pd601_aix_gcc_build::AixGccBuild;
pub use pd602_allocator_default::AllocatorDefault;
pub use pd701_statement_no_index::StatementNoIndex;
pub use pd702_statement_n_plus_one::StatementNPlusOne;
pub use pd703_statement_rows_examined_high::StatementRowsExaminedHigh;
pub use pd704_statement_temp_disk_tables::StatementTempDiskTables;
pub use pd801_datadir_space_low::DatadirSpaceLow;
pub use pd802_storage_saturated::StorageSaturated;

/// Every rule, in code order.
pub static RULES: &[&dyn Rule] = &[
    &MhnswCacheUndersized,
    &MhnswCacheThrashing,
    &ProfilerStallDominated,
    &InnodbChecksumSoftware,
    &MariadbOldWriteScalability,
    &InnodbNativeAioOff,
    &PerformanceSchemaOff,
    &InnodbBufferPoolUndersized,
    &InnodbRedoLogUndersized,
    &InnodbLogWaits,
    &TmpTablesOnDisk,
    &ConnectionsNearLimit,
    &ThreadCacheIneffective,
    &TableCacheMisses,
    &QueryCacheContention,
    &SortMergePasses,
    &JoinsWithoutIndex,
    &LongTransaction,
    &InnodbFlushMethodBuffered,
    &SmallPagesAix,
    &SmallPagesLinux,
    &TlbMissRateHigh,
    &LparDonatingMode,
    &LparDedicatedCappedLatency,
    &HypervisorPreemption,
    &CpuFrequencyThrottled,
    &SmtDisabled,
    &DscrDefault,
    &EntitlementLowPerVcpu,
    &NumaMemorylessNodes,
    &WorkingSetExceedsL3,
    &MemoryOvercommitted,
    &SwapActivity,
    &AixGccBuild,
    &AllocatorDefault,
    &StatementNoIndex,
    &StatementNPlusOne,
    &StatementRowsExaminedHigh,
    &StatementTempDiskTables,
    &DatadirSpaceLow,
    &StorageSaturated,
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
        s.os = crate::Gathered::Unavailable("not collected".into());
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
            ("PD205", Severity::Warning),
            ("PD206", Severity::Warning),
            ("PD207", Severity::Warning),
            ("PD208", Severity::Warning),
            ("PD209", Severity::Warning),
            ("PD210", Severity::Info),
            ("PD211", Severity::Info),
            ("PD212", Severity::Warning),
            ("PD213", Severity::Info),
            ("PD214", Severity::Info),
            ("PD215", Severity::Warning),
            ("PD216", Severity::Info),
            ("PD301", Severity::Warning),
            ("PD302", Severity::Warning),
            ("PD303", Severity::Warning),
            ("PD401", Severity::Critical),
            ("PD402", Severity::Info),
            ("PD403", Severity::Warning),
            ("PD404", Severity::Warning),
            ("PD405", Severity::Warning),
            ("PD406", Severity::Info),
            ("PD407", Severity::Warning),
            ("PD501", Severity::Warning),
            ("PD502", Severity::Info),
            ("PD503", Severity::Warning),
            ("PD601", Severity::Info),
            ("PD602", Severity::Info),
            ("PD701", Severity::Warning),
            ("PD702", Severity::Info),
            ("PD703", Severity::Warning),
            ("PD704", Severity::Info),
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
    use crate::{
        Allocator, CpuTime, Digest, Gathered, NumaNode, PerfCounters, PerfEvent, Snapshot, Var,
        testing::*,
    };

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
            // The everyday server pitfalls at once (PD205–PD216, PD503).
            everyday_pitfalls(),
            SnapshotBuilder::new()
                .mariadb("10.2.44-MariaDB")
                .host(|h| h.hardware_threads = Some(48))
                .var(Var::InnodbChecksumAlgorithm, "innodb")
                .var(Var::InnodbUseNativeAio, "OFF")
                .var(Var::PerformanceSchema, "OFF")
                .build(),
            // A Linux host with every host pitfall at once.
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .vector_index(big_vector_index())
                .os(|o| {
                    if let Gathered::Available(m) = &mut o.memory {
                        m.thp_enabled = Some("never".into());
                    }
                    if let Gathered::Available(p) = &mut o.process {
                        p.rss_bytes = Some(48 << 30);
                        p.anon_huge_bytes = Some(0);
                        p.allocator = Some(Allocator::Libc);
                        p.swap_bytes = Some(1 << 30);
                    }
                    if let Gathered::Available(fs) = &mut o.storage {
                        fs[0].available_bytes = fs[0].total_bytes / 50;
                        fs[0].busy_share = Some(0.99);
                        fs[0].avg_in_flight = Some(30.0);
                    }
                    if let Gathered::Available(c) = &mut o.cpu {
                        c.current_mhz = Some(1000.0);
                    }
                    o.cpu_time = Gathered::Available(CpuTime {
                        basis: "since boot".into(),
                        steal_share: Some(0.2),
                        busy_share: Some(0.8),
                        ..Default::default()
                    });
                    if let Gathered::Available(t) = &mut o.topology {
                        t.numa_nodes.push(NumaNode {
                            id: 1,
                            cpu_list: "8-15".into(),
                            cpus: 8,
                            memory_total_bytes: 0,
                            memory_free_bytes: None,
                            unread: None,
                        });
                    }
                    o.counters = Gathered::Available(PerfCounters {
                        window_seconds: 1.0,
                        target: "mariadbd".into(),
                        events: vec![
                            PerfEvent {
                                name: "instructions".into(),
                                value: Some(1 << 30),
                                unavailable: None,
                            },
                            PerfEvent {
                                name: "dTLB-load-misses".into(),
                                value: Some(1 << 25),
                                unavailable: None,
                            },
                        ],
                    });
                })
                .build(),
            // POWER partitions: dedicated donating; shared with thin entitlement; SMT off.
            SnapshotBuilder::new()
                .os(|o| on_power_lpar(o, lpar(false, true, true, 21.0, 21), 84, 4))
                .build(),
            // Dedicated capped, measured at nominal (PD402 needs a measured frequency).
            SnapshotBuilder::new()
                .os(|o| {
                    on_power_lpar(o, lpar(false, true, false, 21.0, 21), 84, 4);
                    if let Gathered::Available(c) = &mut o.cpu {
                        c.effective_mhz = c.nominal_mhz;
                    }
                })
                .build(),
            SnapshotBuilder::new()
                .os(|o| on_power_lpar(o, lpar(true, false, false, 3.0, 12), 20, 1))
                .build(),
            // AIX as the field report found it: GCC build, 4 KB pages, no LDR_CNTRL.
            SnapshotBuilder::new().aix().build(),
            // The ORM field report: an unindexed listing, N+1 lookups, a COUNT over a JOIN,
            // a GROUP BY on disk.
            SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .statements(orm_statements(), 0)
                .build(),
        ]
    }

    /// A server with every everyday pitfall: a tiny buffer pool missing reads, a redo log
    /// at its checkpoint limit, temporary tables on disk, connections at the limit, no thread
    /// cache, a churning table cache, the query cache on, sort merge passes, unindexed joins,
    /// a transaction open for hours, buffered data files, and a global sort buffer that
    /// overcommits memory.
    fn everyday_pitfalls() -> Snapshot {
        use crate::{OpenTransaction, StatusVar as S, Transactions};
        // (counter, value at the end, value at the start of a 10 s window)
        let moved: [(S, &str, &str); 21] = [
            (S::Uptime, "100010", "100000"),
            (S::InnodbBufferPoolReadRequests, "1100000", "1000000"),
            (S::InnodbBufferPoolReads, "10000", "0"),
            (S::InnodbLsnCurrent, "900000000", "800000000"),
            (S::InnodbLogWaits, "20", "10"),
            (S::CreatedTmpTables, "200", "100"),
            (S::CreatedTmpDiskTables, "90", "10"),
            (S::Connections, "1200", "1000"),
            (S::ThreadsCreated, "1200", "1000"),
            (S::ConnectionErrorsMaxConnections, "5", "0"),
            (S::TableOpenCacheHits, "1100", "1000"),
            (S::TableOpenCacheMisses, "1100", "1000"),
            (S::OpenedTableDefinitions, "10", "10"),
            (S::ComSelect, "2000", "1000"),
            (S::QcacheHits, "10", "0"),
            (S::QcacheLowmemPrunes, "0", "0"),
            (S::SortScan, "200", "100"),
            (S::SortRange, "0", "0"),
            (S::SortMergePasses, "300", "100"),
            (S::SelectFullJoin, "150", "100"),
            (S::SelectRangeCheck, "0", "0"),
        ];
        let mut b = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .var(Var::SortBufferSize, "268435456")
            .var(Var::ThreadCacheSize, "0")
            .var(Var::TableOpenCache, "10")
            .var(Var::QueryCacheType, "ON")
            .var(Var::QueryCacheSize, "16777216")
            .var(Var::InnodbFlushMethod, "fsync")
            .var(Var::InnodbLogFileSize, "8388608")
            .innodb_size(4 << 30, 1 << 30)
            .transactions(Transactions {
                open: 1,
                oldest: Some(OpenTransaction {
                    thread_id: 7,
                    age_seconds: 7200,
                    state: "RUNNING".into(),
                    ..Default::default()
                }),
            })
            .status(S::InnodbCheckpointAge, "7000000")
            .status(S::InnodbCheckpointMaxAge, "7000000")
            .status(S::InnodbHistoryListLength, "500000")
            .status(S::ThreadsConnected, "150")
            .status(S::MaxUsedConnections, "151")
            .status(S::OpenFiles, "30")
            .status(S::OpenTableDefinitions, "20");
        for (v, end, _) in moved {
            b = b.status(v, end);
        }
        let start: Vec<(S, &str)> = moved.iter().map(|(v, _, start)| (*v, *start)).collect();
        b.window(10.0, &start).build()
    }

    fn orm_statements() -> Vec<Digest> {
        let mut listing = super::pd701_statement_no_index::tests::scan();
        listing.tmp_tables = listing.calls;
        listing.tmp_disk_tables = listing.calls;
        vec![
            listing,
            digest(
                "SELECT `id` FROM `patchwork_patch` WHERE `project_id` = ? LIMIT ?",
                200,
                1_000_000,
                50,
                50,
            ),
            digest(
                "SELECT `name` FROM `patchwork_person` WHERE `id` = ?",
                10_000,
                1_000_000,
                1,
                1,
            ),
            digest(
                "SELECT COUNT ( * ) FROM `patchwork_patch` JOIN `patchwork_project` ON `a` = `b`",
                200,
                2_000_000,
                100_000,
                1,
            ),
        ]
    }
}
