//! The server variables and status counters powerdiag reads, by name.
//!
//! Rules look facts up through these enums, never through strings, so a misspelt variable is a
//! compile error (pt-variable-advisor once read `expire_log_days` and never fired). The
//! collectors read exactly these names, which keeps every sample bounded and the snapshot free
//! of anything not on the list.

macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $Enum:ident { $($Variant:ident => $name:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $Enum { $($Variant,)* }

        impl $Enum {
            /// Every name, in declaration order.
            pub const ALL: &'static [$Enum] = &[$($Enum::$Variant,)*];

            /// The server's own (lower-case) name.
            pub const fn name(self) -> &'static str {
                match self { $($Enum::$Variant => $name,)* }
            }

            /// Looks a name up case-insensitively.
            pub fn from_name(name: &str) -> Option<$Enum> {
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(name))
            }
        }
    };
}

named_enum! {
    /// A global server variable (`@@name`).
    pub enum Var {
        Version => "version",
        VersionComment => "version_comment",
        VersionCompileOs => "version_compile_os",
        VersionCompileMachine => "version_compile_machine",
        Hostname => "hostname",
        PidFile => "pid_file",
        Datadir => "datadir",
        Tmpdir => "tmpdir",
        LogError => "log_error",
        InnodbLogGroupHomeDir => "innodb_log_group_home_dir",
        Port => "port",
        Socket => "socket",
        MhnswMaxCacheSize => "mhnsw_max_cache_size",
        MhnswDefaultM => "mhnsw_default_m",
        MhnswDefaultDistance => "mhnsw_default_distance",
        MhnswEfSearch => "mhnsw_ef_search",
        InnodbChecksumAlgorithm => "innodb_checksum_algorithm",
        InnodbUseNativeAio => "innodb_use_native_aio",
        InnodbBufferPoolSize => "innodb_buffer_pool_size",
        InnodbFlushMethod => "innodb_flush_method",
        InnodbFlushLogAtTrxCommit => "innodb_flush_log_at_trx_commit",
        InnodbLogFileSize => "innodb_log_file_size",
        InnodbIoCapacity => "innodb_io_capacity",
        InnodbPageSize => "innodb_page_size",
        PerformanceSchema => "performance_schema",
        HaveProfiling => "have_profiling",
        LargePages => "large_pages",
        ThreadHandling => "thread_handling",
        ThreadPoolSize => "thread_pool_size",
        MaxConnections => "max_connections",
        TableOpenCache => "table_open_cache",
        QueryCacheType => "query_cache_type",
        // The everyday server pitfalls (PD205–PD216) and the memory model (PD503).
        InnodbBufferPoolSizeMax => "innodb_buffer_pool_size_max",
        InnodbLogBufferSize => "innodb_log_buffer_size",
        InnodbDataFileBuffering => "innodb_data_file_buffering",
        InnodbStatsPersistent => "innodb_stats_persistent",
        ThreadCacheSize => "thread_cache_size",
        TableDefinitionCache => "table_definition_cache",
        OpenFilesLimit => "open_files_limit",
        QueryCacheSize => "query_cache_size",
        SortBufferSize => "sort_buffer_size",
        TmpTableSize => "tmp_table_size",
        MaxHeapTableSize => "max_heap_table_size",
        JoinBufferSize => "join_buffer_size",
        ReadBufferSize => "read_buffer_size",
        ReadRndBufferSize => "read_rnd_buffer_size",
        ThreadStack => "thread_stack",
        BinlogCacheSize => "binlog_cache_size",
        LogBin => "log_bin",
        // Replication and Galera context (PD707).
        BinlogFormat => "binlog_format",
        WsrepOn => "wsrep_on",
        // Replication lag's causes (PD222).
        SlaveParallelThreads => "slave_parallel_threads",
        // Semi-synchronous replication, built into the server since 10.3.3 (PD224).
        RplSemiSyncMasterEnabled => "rpl_semi_sync_master_enabled",
        RplSemiSyncMasterTimeout => "rpl_semi_sync_master_timeout",
        RplSemiSyncMasterWaitNoSlave => "rpl_semi_sync_master_wait_no_slave",
        // Galera (PD225–PD227).
        WsrepSlaveThreads => "wsrep_slave_threads",
        WsrepDesync => "wsrep_desync",
        WsrepClusterAddress => "wsrep_cluster_address",
        KeyBufferSize => "key_buffer_size",
        AriaPagecacheBufferSize => "aria_pagecache_buffer_size",
        // Lock waits (PD217–PD220).
        InnodbPrintAllDeadlocks => "innodb_print_all_deadlocks",
        InnodbLockWaitTimeout => "innodb_lock_wait_timeout",
        LockWaitTimeout => "lock_wait_timeout",
        IdleTransactionTimeout => "idle_transaction_timeout",
    }
}

impl Var {
    /// A boolean variable: `SHOW VARIABLES` spells it `ON`/`OFF`, `SELECT @@name` `1`/`0`.
    pub const fn is_bool(self) -> bool {
        matches!(
            self,
            Var::InnodbUseNativeAio
                | Var::PerformanceSchema
                | Var::LargePages
                | Var::InnodbDataFileBuffering
                | Var::InnodbStatsPersistent
                | Var::LogBin
                | Var::WsrepOn
                | Var::InnodbPrintAllDeadlocks
                | Var::RplSemiSyncMasterEnabled
                | Var::RplSemiSyncMasterWaitNoSlave
                | Var::WsrepDesync
        )
    }
}

named_enum! {
    /// A global status counter or gauge (`SHOW GLOBAL STATUS`).
    pub enum StatusVar {
        Uptime => "uptime",
        Questions => "questions",
        ThreadsConnected => "threads_connected",
        ThreadsRunning => "threads_running",
        SlowQueries => "slow_queries",
        ComSelect => "com_select",
        HandlerReadLast => "handler_read_last",
        HandlerReadRnd => "handler_read_rnd",
        HandlerReadRndNext => "handler_read_rnd_next",
        InnodbBufferPoolReadRequests => "innodb_buffer_pool_read_requests",
        InnodbBufferPoolReads => "innodb_buffer_pool_reads",
        InnodbBufferPoolPagesTotal => "innodb_buffer_pool_pages_total",
        InnodbBufferPoolPagesFree => "innodb_buffer_pool_pages_free",
        MemoryUsed => "memory_used",
        FeatureVectorIndex => "feature_vector_index",
        // The everyday server pitfalls (PD205–PD216).
        Connections => "connections",
        ThreadsCreated => "threads_created",
        MaxUsedConnections => "max_used_connections",
        MaxUsedConnectionsTime => "max_used_connections_time",
        ConnectionErrorsMaxConnections => "connection_errors_max_connections",
        CreatedTmpTables => "created_tmp_tables",
        CreatedTmpDiskTables => "created_tmp_disk_tables",
        TableOpenCacheHits => "table_open_cache_hits",
        TableOpenCacheMisses => "table_open_cache_misses",
        TableOpenCacheOverflows => "table_open_cache_overflows",
        OpenedTableDefinitions => "opened_table_definitions",
        OpenTableDefinitions => "open_table_definitions",
        OpenFiles => "open_files",
        QcacheHits => "qcache_hits",
        QcacheInserts => "qcache_inserts",
        QcacheLowmemPrunes => "qcache_lowmem_prunes",
        SortMergePasses => "sort_merge_passes",
        SortScan => "sort_scan",
        SortRange => "sort_range",
        SelectFullJoin => "select_full_join",
        SelectRangeCheck => "select_range_check",
        InnodbLogWaits => "innodb_log_waits",
        InnodbLsnCurrent => "innodb_lsn_current",
        InnodbCheckpointAge => "innodb_checkpoint_age",
        InnodbCheckpointMaxAge => "innodb_checkpoint_max_age",
        InnodbHistoryListLength => "innodb_history_list_length",
        // Lock waits (PD217–PD220): the same names on 10.6, 10.11 and 11.8.
        InnodbRowLockCurrentWaits => "innodb_row_lock_current_waits",
        InnodbRowLockWaits => "innodb_row_lock_waits",
        InnodbRowLockTime => "innodb_row_lock_time",
        InnodbDeadlocks => "innodb_deadlocks",
        // Schema and privilege changes: the agent lists the vector indexes again only after
        // one (or a restart), since the list costs the server per table on it, and what a
        // user may see of it moves with its grants.
        ComCreateTable => "com_create_table",
        ComAlterTable => "com_alter_table",
        ComDropTable => "com_drop_table",
        ComRenameTable => "com_rename_table",
        ComCreateIndex => "com_create_index",
        ComDropIndex => "com_drop_index",
        ComDropDb => "com_drop_db",
        ComGrant => "com_grant",
        ComGrantRole => "com_grant_role",
        ComRevoke => "com_revoke",
        ComRevokeAll => "com_revoke_all",
        ComRevokeRole => "com_revoke_role",
        // Setting changes: the agent reads the variables again only after one of these moved
        // (or the buffer pool's size did), or every `variables_refresh` at the latest.
        ComSetOption => "com_set_option",
        // Replication configured or started (PD221): the agent reads the replica status
        // again after one of these moved (or a restart); a standalone server pays nothing.
        ComChangeMaster => "com_change_master",
        ComStartSlave => "com_start_slave",
        ComStartAllSlaves => "com_start_all_slaves",
        // The binary log's per-session caches (PD223).
        BinlogCacheUse => "binlog_cache_use",
        BinlogCacheDiskUse => "binlog_cache_disk_use",
        BinlogStmtCacheUse => "binlog_stmt_cache_use",
        BinlogStmtCacheDiskUse => "binlog_stmt_cache_disk_use",
        // Semi-synchronous replication on a primary (PD224): ON/OFF now, the semi-sync
        // replicas connected, transactions acknowledged or not, and the fall-backs.
        RplSemiSyncMasterStatus => "rpl_semi_sync_master_status",
        RplSemiSyncMasterClients => "rpl_semi_sync_master_clients",
        RplSemiSyncMasterYesTx => "rpl_semi_sync_master_yes_tx",
        RplSemiSyncMasterNoTx => "rpl_semi_sync_master_no_tx",
        RplSemiSyncMasterNoTimes => "rpl_semi_sync_master_no_times",
        // Replication on either side: the replicas connected to this primary, the replica's
        // running connections, its retried transactions and skipped errors.
        SlavesConnected => "slaves_connected",
        SlavesRunning => "slaves_running",
        SlaveRetriedTransactions => "slave_retried_transactions",
        SlaveSkippedErrors => "slave_skipped_errors",
        // Galera (PD225–PD227): the node's state now, the cluster's size, flow control (time
        // paused, messages sent and received) and the queues.
        WsrepClusterStatus => "wsrep_cluster_status",
        WsrepClusterSize => "wsrep_cluster_size",
        WsrepLocalStateComment => "wsrep_local_state_comment",
        WsrepReady => "wsrep_ready",
        WsrepConnected => "wsrep_connected",
        WsrepFlowControlPaused => "wsrep_flow_control_paused",
        WsrepFlowControlPausedNs => "wsrep_flow_control_paused_ns",
        WsrepFlowControlSent => "wsrep_flow_control_sent",
        WsrepFlowControlRecv => "wsrep_flow_control_recv",
        WsrepLocalRecvQueue => "wsrep_local_recv_queue",
        WsrepLocalRecvQueueAvg => "wsrep_local_recv_queue_avg",
        WsrepLocalSendQueue => "wsrep_local_send_queue",
        WsrepLocalSendQueueAvg => "wsrep_local_send_queue_avg",
        WsrepCertDepsDistance => "wsrep_cert_deps_distance",
        ComInstallPlugin => "com_install_plugin",
        ComUninstallPlugin => "com_uninstall_plugin",
    }
}

impl StatusVar {
    /// A counter that only grows while the server runs (a window's difference means
    /// something); the others are gauges or high-water marks read as they are.
    pub const fn is_counter(self) -> bool {
        !matches!(
            self,
            StatusVar::Uptime
                | StatusVar::ThreadsConnected
                | StatusVar::ThreadsRunning
                | StatusVar::InnodbBufferPoolPagesTotal
                | StatusVar::InnodbBufferPoolPagesFree
                | StatusVar::MemoryUsed
                | StatusVar::MaxUsedConnections
                | StatusVar::MaxUsedConnectionsTime
                | StatusVar::OpenTableDefinitions
                | StatusVar::OpenFiles
                | StatusVar::InnodbCheckpointAge
                | StatusVar::InnodbCheckpointMaxAge
                | StatusVar::InnodbHistoryListLength
                | StatusVar::InnodbRowLockCurrentWaits
                | StatusVar::RplSemiSyncMasterStatus
                | StatusVar::RplSemiSyncMasterClients
                | StatusVar::SlavesConnected
                | StatusVar::SlavesRunning
                | StatusVar::WsrepClusterStatus
                | StatusVar::WsrepClusterSize
                | StatusVar::WsrepLocalStateComment
                | StatusVar::WsrepReady
                | StatusVar::WsrepConnected
                | StatusVar::WsrepFlowControlPaused
                | StatusVar::WsrepLocalRecvQueue
                | StatusVar::WsrepLocalRecvQueueAvg
                | StatusVar::WsrepLocalSendQueue
                | StatusVar::WsrepLocalSendQueueAvg
                | StatusVar::WsrepCertDepsDistance
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_are_unique_lower_case_and_round_trip() {
        let mut seen = HashSet::new();
        for v in Var::ALL {
            assert!(seen.insert(v.name()), "duplicate {}", v.name());
            assert_eq!(v.name(), v.name().to_ascii_lowercase());
            assert_eq!(Var::from_name(&v.name().to_ascii_uppercase()), Some(*v));
        }
        for s in StatusVar::ALL {
            assert!(seen.insert(s.name()), "duplicate {}", s.name());
            assert_eq!(StatusVar::from_name(s.name()), Some(*s));
        }
    }
}
