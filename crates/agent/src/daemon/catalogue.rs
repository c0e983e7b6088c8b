//! The catalogue: every metric the agent exports — name, type, unit, help, labels and when its
//! series exist. The encoder (`metrics.rs`) can only write a metric declared here, with exactly
//! the declared labels (a label count that differs does not compile); docs/metrics.md's metric table
//! is generated from it (`markdown()`, checked by a test) and the deploy tests check every
//! metric an alert or dashboard uses against it.
//!
//! Names are interface (alerts, dashboards and users' queries use them): rename one only with
//! `deploy/` in the same commit. A counter's name is its sample name, with `_total`.

/// How Prometheus treats a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// One metric, with its `N` labels in the order the encoder writes them.
#[derive(Debug)]
pub struct Metric<const N: usize> {
    /// The sample name as Prometheus stores it (counters end in `_total`).
    pub name: &'static str,
    pub kind: Kind,
    /// The base unit the name ends with (`seconds`, `bytes`, ...), written as `# UNIT` in
    /// OpenMetrics.
    pub unit: Option<&'static str>,
    pub help: &'static str,
    pub labels: [&'static str; N],
    /// When its series exist (docs/metrics.md).
    pub when: &'static str,
}

/// A catalogue row: [`Metric`] without the label count in its type.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Option<&'static str>,
    pub help: &'static str,
    pub labels: &'static [&'static str],
    pub when: &'static str,
}

impl<const N: usize> Metric<N> {
    /// The family name OpenMetrics writes in `# HELP`/`# TYPE` (a counter's without `_total`).
    pub fn family(&self) -> &'static str {
        match self.kind {
            Kind::Counter => self.name.strip_suffix("_total").unwrap_or(self.name),
            Kind::Gauge => self.name,
        }
    }
}

macro_rules! catalogue {
    (@unit) => { None };
    (@unit $u:literal) => { Some($u) };
    ($(
        $id:ident: $kind:ident $name:literal [$($label:literal),*] $(unit $unit:literal)?
            when $when:ident
            $help:literal;
    )*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $help)]
            pub const $id: Metric<{ <[&str]>::len(&[$($label),*]) }> = Metric {
                name: $name,
                kind: Kind::$kind,
                unit: catalogue!(@unit $($unit)?),
                help: $help,
                labels: [$($label),*],
                when: $when,
            };
        )*
        /// Every metric, in the order of docs/metrics.md's table.
        pub static CATALOGUE: &[Entry] = &[$(
            Entry {
                name: $name,
                kind: Kind::$kind,
                unit: catalogue!(@unit $($unit)?),
                help: $help,
                labels: &[$($label),*],
                when: $when,
            },
        )*];
    };
}

const ALWAYS: &str = "every sample";
const SCRAPE: &str = "every scrape";
const DB: &str = "MariaDB reached";
const VECTOR: &str = "per vector index";
const PROBE: &str = "`[probe] enabled`, in the sample that ran the probe";
const STATEMENTS: &str = "`[statements] enabled`, performance_schema ON, from the second read";
const CPU: &str = "CPU facts read";
const CPU_TIME: &str = "CPU time read";
const LINUX_CPU_TIME: &str = "Linux, /proc/stat read";
const PARTITION: &str = "PowerVM partition";
const MEMORY: &str = "memory facts read";
const MARIADBD: &str = "mariadbd found";
const COUNTERS: &str = "Linux, perf counters on mariadbd";
const SELF_LINUX: &str = "Linux: the agent's own process";
const INNODB_SIZE: &str = "MariaDB reached, SELECT on mysql.innodb_table_stats";
const INNODB_TRX: &str = "MariaDB reached, PROCESS (information_schema.INNODB_TRX)";
const LOCKS: &str = "MariaDB reached, PROCESS (the mariadb_locks collector)";
const BLOCKING: &str = "while a session blocks others (at most 5 series)";
const REPLICA: &str = "a replica: per replication connection (REPLICA MONITOR)";
const REPLICA_LAG: &str = "a replica whose SQL thread runs: per replication connection";
const GALERA: &str = "a Galera node (wsrep_on = ON)";
const SWAP: &str = "Linux, /proc/vmstat read";
const STORAGE: &str = "a server on this host, live: per directory role";
const STORAGE_INODES: &str =
    "a server on this host, live: per directory role (AIX: derived from df's Iused and %Iused)";
const PSI: &str = "Linux 4.20+ with PSI: /proc/pressure/cpu read";
const LOAD: &str = "Linux /proc/loadavg, AIX perfstat_cpu_total read";
const MARIADBD_CPU: &str = "mariadbd found on this host, live, with a window";
const ERROR_LOG: &str = "a server on this host whose error log (or journal) was read";
const STORAGE_IO: &str = "a server on this host, live, with a window and a block device";

catalogue! {
    UP: Gauge "powerdiag_up" [] when ALWAYS
        "1: the agent is running and serving samples";
    BUILD_INFO: Gauge "powerdiag_build_info" ["version", "revision", "target", "rustc"] when ALWAYS
        "powerdiag build information: version, git revision, target triple and rustc version (value 1)";
    SAMPLE_TIMESTAMP: Gauge "powerdiag_sample_timestamp_seconds" [] unit "seconds" when ALWAYS
        "Unix time the last sample started";
    SAMPLE_DURATION: Gauge "powerdiag_sample_duration_seconds" [] unit "seconds" when ALWAYS
        "How long the last sample took";
    SAMPLE_INTERVAL: Gauge "powerdiag_sample_interval_seconds" [] unit "seconds" when ALWAYS
        "Time until the next sample: the agent's [sample] interval, times the spacing for many connected clients ([sample] spacing_connections; a row-lock wait ends it sooner); a sample older than a few of these is stale";
    SAMPLE_SQL: Gauge "powerdiag_sample_sql_statements" [] when ALWAYS
        "SQL statements the last sample sent to MariaDB";
    SAMPLE_AGE: Gauge "powerdiag_sample_age_seconds" [] unit "seconds" when SCRAPE
        "Seconds since the served sample started";
    CONFIG_RELOAD_SUCCESS: Gauge "powerdiag_config_last_reload_successful" [] when SCRAPE
        "1 when the last load of the configuration files (at start-up or on SIGHUP: --config.file, --web.config.file, --mariadb.defaults-file) succeeded, 0 when one failed and the running configuration was kept";
    CONFIG_RELOAD_TIME: Gauge "powerdiag_config_last_reload_success_timestamp_seconds" [] unit "seconds" when SCRAPE
        "Unix time of the last successful load of the configuration files";
    MARIADB_UP: Gauge "powerdiag_mariadb_up" [] when ALWAYS
        "1 when the last sample reached MariaDB";
    COLLECTOR_SUCCESS: Gauge "powerdiag_collector_success" ["collector"] when ALWAYS
        "1 when the collector succeeded in the last sample";
    COLLECTOR_DURATION: Gauge "powerdiag_collector_duration_seconds" ["collector"] unit "seconds" when ALWAYS
        "How long the collector took in the last sample";
    CHECK: Gauge "powerdiag_check" ["code", "name", "severity", "status"] when ALWAYS
        "1 for each rule, labelled with its current verdict (status: fail, pass, not_applicable, insufficient_data)";
    CHECK_THRESHOLD: Gauge "powerdiag_check_threshold" ["code", "name", "threshold"] when ALWAYS
        "The limit each evaluated rule judges against: its default or the value set under [rules.thresholds] (ratios as 0..1, sizes in bytes)";

    MARIADB_VERSION_INFO: Gauge "powerdiag_mariadb_version_info" ["version", "short"] when DB
        "The MariaDB server's version";
    MHNSW_MAX_CACHE_SIZE: Gauge "powerdiag_mariadb_mhnsw_max_cache_size_bytes" [] unit "bytes" when DB
        "mhnsw_max_cache_size: the limit of each vector index's graph cache";
    VECTOR_INDEX_GRAPH: Gauge "powerdiag_mariadb_vector_index_graph_bytes" ["schema", "table", "index"] unit "bytes" when VECTOR
        "Estimated memory the whole graph of the vector index needs in the MHNSW cache";
    VECTOR_INDEX_ROWS: Gauge "powerdiag_mariadb_vector_index_rows" ["schema", "table", "index"] when VECTOR
        "Vectors in the index";
    PROBE_LATENCY: Gauge "powerdiag_mariadb_probe_query_latency_seconds" ["schema", "table", "index", "pass", "percentile"] unit "seconds" when PROBE
        "Latency of the vector probe's k-NN queries (pass: first = distinct vectors, repeat = the first ones again; percentile over the queries, nearest rank: 50, 90, 100 = slowest)";
    PROBE_QUERIES: Gauge "powerdiag_mariadb_probe_queries" ["schema", "table", "index", "pass"] when PROBE
        "k-NN queries the vector probe ran";
    PROBE_REBUILDS: Gauge "powerdiag_mariadb_probe_cache_rebuilds" ["schema", "table", "index"] when PROBE
        "MHNSW cache rebuilds during the probe (Handler_read_last moved by its queries)";
    HANDLER_READ_LAST: Counter "powerdiag_mariadb_handler_read_last_total" [] when DB
        "Handler_read_last: each MHNSW cache rebuild reads the graph's entry point with it";
    HANDLER_READ_RND: Counter "powerdiag_mariadb_handler_read_rnd_total" [] when DB
        "Handler_read_rnd: rows (and graph nodes) read by position";
    BUFFER_POOL_READ_REQUESTS: Counter "powerdiag_mariadb_innodb_buffer_pool_read_requests_total" [] when DB
        "Innodb_buffer_pool_read_requests";
    BUFFER_POOL_READS: Counter "powerdiag_mariadb_innodb_buffer_pool_reads_total" [] when DB
        "Innodb_buffer_pool_reads: reads that missed the buffer pool";
    QUESTIONS: Counter "powerdiag_mariadb_questions_total" [] when DB
        "Questions: statements sent by clients";
    SLOW_QUERIES: Counter "powerdiag_mariadb_slow_queries_total" [] when DB
        "Slow_queries";
    SRV_COM_SELECT: Counter "powerdiag_mariadb_com_select_total" [] when DB
        "Com_select: SELECTs executed (not answered by the query cache)";
    SRV_CREATED_TMP_TABLES: Counter "powerdiag_mariadb_created_tmp_tables_total" [] when DB
        "Created_tmp_tables: internal temporary tables";
    SRV_CREATED_TMP_DISK_TABLES: Counter "powerdiag_mariadb_created_tmp_disk_tables_total" [] when DB
        "Created_tmp_disk_tables: internal temporary tables written to disk (PD208)";
    SRV_CONNECTIONS: Counter "powerdiag_mariadb_connections_total" [] when DB
        "Connections: connection attempts";
    SRV_THREADS_CREATED: Counter "powerdiag_mariadb_threads_created_total" [] when DB
        "Threads_created: threads created for connections (PD210)";
    SRV_CONNECTION_ERRORS_MAX_CONNECTIONS: Counter "powerdiag_mariadb_connection_errors_max_connections_total" [] when DB
        "Connection_errors_max_connections: connections refused at max_connections (PD209)";
    SRV_TABLE_OPEN_CACHE_HITS: Counter "powerdiag_mariadb_table_open_cache_hits_total" [] when DB
        "Table_open_cache_hits";
    SRV_TABLE_OPEN_CACHE_MISSES: Counter "powerdiag_mariadb_table_open_cache_misses_total" [] when DB
        "Table_open_cache_misses (PD211)";
    SRV_OPENED_TABLE_DEFINITIONS: Counter "powerdiag_mariadb_opened_table_definitions_total" [] when DB
        "Opened_table_definitions: table definitions read (PD211)";
    SRV_QCACHE_HITS: Counter "powerdiag_mariadb_qcache_hits_total" [] when DB
        "Qcache_hits: SELECTs answered by the query cache (PD212)";
    SRV_QCACHE_LOWMEM_PRUNES: Counter "powerdiag_mariadb_qcache_lowmem_prunes_total" [] when DB
        "Qcache_lowmem_prunes (PD212)";
    SRV_SORT_SCAN: Counter "powerdiag_mariadb_sort_scan_total" [] when DB
        "Sort_scan: sorts done by scanning";
    SRV_SORT_RANGE: Counter "powerdiag_mariadb_sort_range_total" [] when DB
        "Sort_range: sorts done on ranges";
    SRV_SORT_MERGE_PASSES: Counter "powerdiag_mariadb_sort_merge_passes_total" [] when DB
        "Sort_merge_passes: merge passes of sorts larger than sort_buffer_size (PD213)";
    SRV_SELECT_FULL_JOIN: Counter "powerdiag_mariadb_select_full_join_total" [] when DB
        "Select_full_join: joins that scanned the joined table (PD214)";
    SRV_SELECT_RANGE_CHECK: Counter "powerdiag_mariadb_select_range_check_total" [] when DB
        "Select_range_check: joins that chose an index row by row (PD214)";
    SRV_INNODB_LOG_WAITS: Counter "powerdiag_mariadb_innodb_log_waits_total" [] when DB
        "Innodb_log_waits: waits for the log buffer (PD207)";
    SRV_INNODB_REDO_WRITTEN_BYTES: Counter "powerdiag_mariadb_innodb_redo_written_bytes_total" [] unit "bytes" when DB
        "Innodb_lsn_current: redo log bytes written since the log was created (PD206)";
    SRV_MAX_CONNECTIONS: Gauge "powerdiag_mariadb_max_connections" [] when DB
        "max_connections";
    SRV_MAX_USED_CONNECTIONS: Gauge "powerdiag_mariadb_max_used_connections" [] when DB
        "Max_used_connections: most connections open at once since start-up (PD209)";
    SRV_OPEN_FILES: Gauge "powerdiag_mariadb_open_files" [] when DB
        "Open_files";
    SRV_OPEN_FILES_LIMIT: Gauge "powerdiag_mariadb_open_files_limit" [] when DB
        "open_files_limit";
    SRV_INNODB_CHECKPOINT_AGE_BYTES: Gauge "powerdiag_mariadb_innodb_checkpoint_age_bytes" [] unit "bytes" when DB
        "Innodb_checkpoint_age: redo not yet checkpointed (PD206)";
    SRV_INNODB_CHECKPOINT_MAX_AGE_BYTES: Gauge "powerdiag_mariadb_innodb_checkpoint_max_age_bytes" [] unit "bytes" when DB
        "Innodb_checkpoint_max_age: where InnoDB flushes synchronously (PD206)";
    SRV_INNODB_LOG_FILE_SIZE_BYTES: Gauge "powerdiag_mariadb_innodb_log_file_size_bytes" [] unit "bytes" when DB
        "innodb_log_file_size";
    SRV_INNODB_HISTORY_LIST_LENGTH: Gauge "powerdiag_mariadb_innodb_history_list_length" [] when DB
        "Innodb_history_list_length: undo history purge has not removed (PD215)";
    SRV_INNODB_BUFFER_POOL_SIZE_BYTES: Gauge "powerdiag_mariadb_innodb_buffer_pool_size_bytes" [] unit "bytes" when DB
        "innodb_buffer_pool_size (PD205)";
    SRV_INNODB_SIZE: Gauge "powerdiag_mariadb_innodb_size_bytes" ["kind"] unit "bytes" when INNODB_SIZE
        "InnoDB data (kind=data: clustered indexes) and secondary indexes (kind=index) from mysql.innodb_table_stats (PD205)";
    SRV_OPEN_TRANSACTIONS: Gauge "powerdiag_mariadb_innodb_open_transactions" [] when INNODB_TRX
        "Open InnoDB transactions (information_schema.INNODB_TRX)";
    SRV_OLDEST_TRANSACTION_AGE: Gauge "powerdiag_mariadb_innodb_oldest_transaction_age_seconds" [] unit "seconds" when INNODB_TRX
        "Age of the oldest open InnoDB transaction, 0 when none is open (PD215)";
    SRV_INNODB_ROW_LOCK_WAITS: Counter "powerdiag_mariadb_innodb_row_lock_waits_total" [] when DB
        "Innodb_row_lock_waits: row-lock waits begun (PD217)";
    SRV_INNODB_ROW_LOCK_WAIT_SECONDS: Counter "powerdiag_mariadb_innodb_row_lock_wait_seconds_total" [] unit "seconds" when DB
        "Innodb_row_lock_time: time the ended row-lock waits took (PD217)";
    SRV_INNODB_DEADLOCKS: Counter "powerdiag_mariadb_innodb_deadlocks_total" [] when DB
        "Innodb_deadlocks (PD218)";
    LOCK_WAITING_SESSIONS: Gauge "powerdiag_mariadb_lock_waiting_sessions" ["kind"] when LOCKS
        "Sessions waiting for a lock now, by kind: row (InnoDB), metadata (a table's), other_metadata (schema, global read, backup, flush), table (table-level) (PD217, PD219)";
    LOCK_OLDEST_WAIT: Gauge "powerdiag_mariadb_lock_oldest_wait_seconds" ["kind"] unit "seconds" when LOCKS
        "The longest present wait for a lock of this kind, 0 when none waits (PD217, PD219)";
    LOCK_BLOCKER_INFO: Gauge "powerdiag_mariadb_lock_blocker_info" ["thread_id", "user", "host", "command", "statement"] when BLOCKING
        "A session at the root of a lock queue; the value is the number of sessions queued behind it. statement: its statement with literals masked, cut to 64 characters (PD217, PD219, PD220)";
    REPLICATION_THREAD_RUNNING: Gauge "powerdiag_mariadb_replication_thread_running" ["connection", "thread"] when REPLICA
        "1 when the replication connection's thread runs (thread io: Slave_IO_Running Yes, or Connecting without an error; sql: Slave_SQL_Running Yes), else 0 (PD221; the mysqld exporter's mysql_slave_status_slave_io_running/_sql_running)";
    REPLICATION_LAG: Gauge "powerdiag_mariadb_replication_lag_seconds" ["connection"] unit "seconds" when REPLICA_LAG
        "Seconds_Behind_Master: how far the applied events' timestamps trail the replica's clock; 0 while the IO thread is behind, absent while the SQL thread is stopped";
    REPLICATION_SQL_DELAY: Gauge "powerdiag_mariadb_replication_sql_delay_seconds" ["connection"] unit "seconds" when REPLICA
        "SQL_Delay: the delay the replication connection keeps by design (MASTER_DELAY); lag less this is what PD222 judges (the mysqld exporter's mysql_slave_status_sql_delay)";
    REPLICAS_CONNECTED: Gauge "powerdiag_mariadb_replicas_connected" [] when DB
        "Slaves_connected: replicas connected to this server as their primary";
    REPLICATION_RETRIED: Counter "powerdiag_mariadb_replication_retried_transactions_total" [] when DB
        "Slave_retried_transactions: transactions a replica's applier retried (a lock wait timeout or deadlock on the replica)";
    SEMISYNC_ENABLED: Gauge "powerdiag_mariadb_semisync_primary_enabled" [] when DB
        "1 when rpl_semi_sync_master_enabled = ON: commits wait for a replica's acknowledgement (PD224)";
    SEMISYNC_RUNNING: Gauge "powerdiag_mariadb_semisync_primary_running" [] when DB
        "1 when Rpl_semi_sync_master_status = ON: the primary replicates semi-synchronously now; 0 when it fell back to asynchronous or semi-sync is off (PD224)";
    SEMISYNC_CLIENTS: Gauge "powerdiag_mariadb_semisync_primary_clients" [] when DB
        "Rpl_semi_sync_master_clients: semi-sync replicas connected (PD224)";
    SEMISYNC_TRANSACTIONS: Counter "powerdiag_mariadb_semisync_transactions_total" ["acknowledged"] when DB
        "Commits on a semi-sync primary: acknowledged=yes by a replica (Rpl_semi_sync_master_yes_tx), no: committed without (_no_tx) (PD224)";
    SEMISYNC_FALLBACKS: Counter "powerdiag_mariadb_semisync_fallbacks_total" [] when DB
        "Rpl_semi_sync_master_no_times: times the primary fell back to asynchronous replication (PD224)";
    GALERA_CLUSTER_SIZE: Gauge "powerdiag_mariadb_galera_cluster_size" [] when GALERA
        "wsrep_cluster_size: nodes in this node's component; below its recent maximum a node was lost (PD225)";
    GALERA_PRIMARY: Gauge "powerdiag_mariadb_galera_primary" [] when GALERA
        "1 when wsrep_cluster_status = Primary: the node is in the component that takes writes (PD225)";
    GALERA_SYNCED: Gauge "powerdiag_mariadb_galera_synced" [] when GALERA
        "1 when wsrep_local_state_comment = Synced (PD225; the mysqld exporter's mysql_global_status_wsrep_local_state = 4)";
    GALERA_READY: Gauge "powerdiag_mariadb_galera_ready" [] when GALERA
        "1 when wsrep_ready = ON: the node accepts queries (PD225)";
    GALERA_DESYNC: Gauge "powerdiag_mariadb_galera_desync" [] when GALERA
        "1 when wsrep_desync = ON: desynced on purpose (a backup), so not Synced is expected";
    GALERA_FC_PAUSED: Counter "powerdiag_mariadb_galera_flow_control_paused_seconds_total" [] unit "seconds" when GALERA
        "wsrep_flow_control_paused_ns: time replication was paused by flow control (PD226)";
    GALERA_FC_SENT: Counter "powerdiag_mariadb_galera_flow_control_sent_total" [] when GALERA
        "wsrep_flow_control_sent: flow-control messages this node sent: it could not keep up (PD226)";
    GALERA_FC_RECV: Counter "powerdiag_mariadb_galera_flow_control_received_total" [] when GALERA
        "wsrep_flow_control_recv: flow-control messages received, its own included (PD226)";
    GALERA_RECV_QUEUE: Gauge "powerdiag_mariadb_galera_receive_queue" [] when GALERA
        "wsrep_local_recv_queue: write sets received and waiting to be applied (PD227)";
    GALERA_SEND_QUEUE: Gauge "powerdiag_mariadb_galera_send_queue" [] when GALERA
        "wsrep_local_send_queue: write sets waiting to be sent";
    GALERA_CERT_DEPS: Gauge "powerdiag_mariadb_galera_cert_deps_distance" [] when GALERA
        "wsrep_cert_deps_distance: how many write sets could apply in parallel on average (PD227)";
    GALERA_APPLIERS: Gauge "powerdiag_mariadb_galera_applier_threads" [] when GALERA
        "wsrep_slave_threads: the node's appliers (PD227)";
    SRV_BINLOG_CACHE_USE: Counter "powerdiag_mariadb_binlog_cache_transactions_total" [] when DB
        "Binlog_cache_use: transactions that used the binary log cache (PD223)";
    SRV_BINLOG_CACHE_DISK_USE: Counter "powerdiag_mariadb_binlog_cache_spills_total" [] when DB
        "Binlog_cache_disk_use: transactions whose binary log cache spilled to a temporary file (PD223)";
    THREADS_CONNECTED: Gauge "powerdiag_mariadb_threads_connected" [] when DB
        "Threads_connected";
    THREADS_RUNNING: Gauge "powerdiag_mariadb_threads_running" [] when DB
        "Threads_running";
    MEMORY_USED: Gauge "powerdiag_mariadb_memory_used_bytes" [] unit "bytes" when DB
        "Memory_used (global)";
    UPTIME: Gauge "powerdiag_mariadb_uptime_seconds" [] unit "seconds" when DB
        "Uptime";
    ERROR_LOG_EVENTS: Counter "powerdiag_mariadb_error_log_events_total" ["kind"] when ERROR_LOG
        "Events read in the server's error log (or its journal entries) since the agent started, per kind: starting, ready, shutdown, shutdown_complete, crash, crash_recovery, long_wait, page_cleaner_lag, checkpoint_age, too_many_connections, aborted_connection, crc32, deadlock (PD803, PD804); the agent's first read counts its tail of the log";

    STATEMENT_CALLS: Counter "powerdiag_mariadb_statement_calls_total" ["schema", "digest"] when STATEMENTS
        "Statement executions since the agent started, per digest (the busiest of the last interval; digest=\"other\" sums the rest)";
    STATEMENT_SECONDS: Counter "powerdiag_mariadb_statement_seconds_total" ["schema", "digest"] unit "seconds" when STATEMENTS
        "Statement time since the agent started, per digest";
    STATEMENT_ROWS_EXAMINED: Counter "powerdiag_mariadb_statement_rows_examined_total" ["schema", "digest"] when STATEMENTS
        "Rows examined since the agent started, per digest";
    STATEMENT_ROWS_SENT: Counter "powerdiag_mariadb_statement_rows_sent_total" ["schema", "digest"] when STATEMENTS
        "Rows sent since the agent started, per digest";
    STATEMENT_NO_INDEX: Counter "powerdiag_mariadb_statement_no_index_total" ["schema", "digest"] when STATEMENTS
        "Executions that used no index or no good index since the agent started, per digest";
    STATEMENT_INFO: Gauge "powerdiag_mariadb_statement_info" ["schema", "digest", "text"] when STATEMENTS
        "The digest text (truncated, escaped) of each digest with its own statement series";

    CPU_FREQUENCY_NOMINAL: Gauge "powerdiag_cpu_frequency_nominal_hertz" [] unit "hertz" when CPU
        "Nominal CPU frequency";
    CPU_FREQUENCY_EFFECTIVE: Gauge "powerdiag_cpu_frequency_effective_hertz" [] unit "hertz" when CPU
        "Effective CPU frequency over the window (SPURR/PURR on POWER), else cpufreq's current one; absent when neither was measured (/proc/cpuinfo's cpu MHz without cpufreq is not a measurement)";
    CPU_FREQUENCY_CURRENT: Gauge "powerdiag_cpu_frequency_current_hertz" [] unit "hertz" when CPU
        "Current CPU frequency as the kernel reports it: the average of cpufreq's scaling_cur_freq, else /proc/cpuinfo's cpu MHz (without cpufreq, on a virtual machine, the TSC rate: not a measurement)";
    CPU_THREADS: Gauge "powerdiag_cpu_threads" [] when CPU
        "Online logical CPUs";
    CPU_THREADS_PER_CORE: Gauge "powerdiag_cpu_threads_per_core" [] when CPU
        "Hardware threads per core (SMT)";
    CPU_STEAL_RATIO: Gauge "powerdiag_cpu_steal_ratio" [] unit "ratio" when CPU_TIME
        "Share of CPU time stolen by the hypervisor over the window";
    CPU_BUSY_RATIO: Gauge "powerdiag_cpu_busy_ratio" [] unit "ratio" when CPU_TIME
        "Share of CPU time busy over the window";
    CPU_SECONDS: Counter "powerdiag_cpu_seconds_total" ["mode"] unit "seconds" when LINUX_CPU_TIME
        "CPU time of all CPUs since boot per mode (user, nice, system, idle, iowait, irq, softirq, steal), from /proc/stat: rate() over it sees all of the time, not only the sample window";
    CPU_PRESSURE_WAITING: Counter "powerdiag_cpu_pressure_waiting_seconds_total" [] unit "seconds" when PSI
        "Time during which at least one runnable thread waited for a CPU, since boot (/proc/pressure/cpu `some` total): rate() is the share of time threads waited (PD806)";
    LOAD_AVERAGE: Gauge "powerdiag_load_average" ["window"] when LOAD
        "Load average over 1m, 5m and 15m (window): runnable threads, plus on Linux those in uninterruptible sleep";
    PROCS_RUNNING: Gauge "powerdiag_procs_running" [] when LINUX_CPU_TIME
        "Threads runnable at the sample's end (/proc/stat procs_running; an instant)";
    MARIADBD_CPUS_ALLOWED: Gauge "powerdiag_mariadbd_cpus_allowed" [] when MARIADBD_CPU
        "CPUs mariadbd may use: the least of the online CPUs, its CPU affinity and its cgroup's CPU quota (PD806)";
    MARIADBD_CPUS_USED: Gauge "powerdiag_mariadbd_cpus_used" [] when MARIADBD_CPU
        "CPUs mariadbd's threads used on average since the previous sample (user + system time): against powerdiag_mariadbd_cpus_allowed, its saturation (PD806)";
    LPAR_INFO: Gauge "powerdiag_lpar_info" ["mode", "capped", "donating"] when PARTITION
        "PowerVM partition mode";
    LPAR_ENTITLED_CAPACITY: Gauge "powerdiag_lpar_entitled_capacity" [] when PARTITION
        "Entitled capacity in processor units";
    LPAR_ONLINE_VCPUS: Gauge "powerdiag_lpar_online_vcpus" [] when PARTITION
        "Online virtual processors";
    MEMORY_BASE_PAGE: Gauge "powerdiag_memory_base_page_bytes" [] unit "bytes" when MEMORY
        "Base page size";
    THP_INFO: Gauge "powerdiag_transparent_hugepage_info" ["enabled", "defrag"] when MEMORY
        "Transparent huge pages settings";
    MEMORY_AVAILABLE: Gauge "powerdiag_memory_available_bytes" [] unit "bytes" when MEMORY
        "Memory available without swapping (MemAvailable)";
    SWAP_SIZE: Gauge "powerdiag_swap_size_bytes" [] unit "bytes" when MEMORY
        "Swap space configured (SwapTotal)";
    SWAP_FREE: Gauge "powerdiag_swap_free_bytes" [] unit "bytes" when MEMORY
        "Swap space free (SwapFree)";
    SWAP_PAGES: Counter "powerdiag_swap_pages_total" ["direction"] when SWAP
        "Pages swapped in and out since boot (pswpin, pswpout): rate() above 0 is swapping (PD504)";
    MARIADBD_SWAP: Gauge "powerdiag_mariadbd_swap_bytes" [] unit "bytes" when MARIADBD
        "mariadbd's memory in swap (VmSwap)";
    FILESYSTEM_SIZE: Gauge "powerdiag_filesystem_size_bytes" ["role", "mountpoint"] unit "bytes" when STORAGE
        "Size of the filesystem holding the server's datadir, tmpdir or InnoDB log directory (role)";
    FILESYSTEM_AVAIL: Gauge "powerdiag_filesystem_avail_bytes" ["role", "mountpoint"] unit "bytes" when STORAGE
        "Space of that filesystem available to mariadbd (statvfs f_bavail; PD801)";
    FILESYSTEM_FILES: Gauge "powerdiag_filesystem_files" ["role", "mountpoint"] when STORAGE_INODES
        "Inodes of that filesystem (statvfs f_files; 0 where they are allocated as needed, as on btrfs; PD807)";
    FILESYSTEM_FILES_FREE: Gauge "powerdiag_filesystem_files_free" ["role", "mountpoint"] when STORAGE_INODES
        "Inodes of that filesystem free to mariadbd (statvfs f_favail; PD807)";
    DISK_BUSY_RATIO: Gauge "powerdiag_disk_busy_ratio" ["role", "device"] unit "ratio" when STORAGE_IO
        "Share of the window the device under the role's filesystem was busy (PD802)";
    DISK_IN_FLIGHT: Gauge "powerdiag_disk_requests_in_flight" ["role", "device"] when STORAGE_IO
        "Average requests in flight on that device over the window (PD802)";
    MARIADBD_RESIDENT: Gauge "powerdiag_mariadbd_resident_bytes" [] unit "bytes" when MARIADBD
        "mariadbd resident memory";
    MARIADBD_ANON_HUGE: Gauge "powerdiag_mariadbd_anon_huge_bytes" [] unit "bytes" when MARIADBD
        "mariadbd anonymous memory in transparent huge pages";
    MARIADBD_PAGE_SIZE: Gauge "powerdiag_mariadbd_page_size_bytes" ["segment"] unit "bytes" when MARIADBD
        "Page size of mariadbd's memory (AIX: per segment)";
    MARIADBD_PERF_EVENTS: Gauge "powerdiag_mariadbd_perf_events" ["event"] when COUNTERS
        "Hardware and software events counted on mariadbd's threads over the window (absent when unavailable)";
    MARIADBD_PERF_WINDOW: Gauge "powerdiag_mariadbd_perf_window_seconds" [] unit "seconds" when COUNTERS
        "Length of the counting window";

    PROCESS_CPU_SECONDS: Counter "process_cpu_seconds_total" [] unit "seconds" when SELF_LINUX
        "Total user and system CPU time spent in seconds";
    PROCESS_OPEN_FDS: Gauge "process_open_fds" [] when SELF_LINUX
        "Number of open file descriptors";
    PROCESS_MAX_FDS: Gauge "process_max_fds" [] when SELF_LINUX
        "Maximum number of open file descriptors";
    PROCESS_VIRTUAL_MEMORY: Gauge "process_virtual_memory_bytes" [] unit "bytes" when SELF_LINUX
        "Virtual memory size in bytes";
    PROCESS_RESIDENT_MEMORY: Gauge "process_resident_memory_bytes" [] unit "bytes" when SELF_LINUX
        "Resident memory size in bytes";
    PROCESS_START_TIME: Gauge "process_start_time_seconds" [] unit "seconds" when SELF_LINUX
        "Start time of the process since unix epoch in seconds";
}

/// Looks a metric up by its sample name.
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOGUE.iter().find(|e| e.name == name)
}

/// docs/metrics.md's metric table (between its `metrics` markers).
pub fn markdown() -> String {
    let mut out = String::from(
        "| metric | type | unit | labels | exported when | help |\n|---|---|---|---|---|---|\n",
    );
    for e in CATALOGUE {
        let labels = if e.labels.is_empty() {
            String::new()
        } else {
            e.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            e.name,
            e.kind.as_str(),
            e.unit.unwrap_or(""),
            labels,
            e.when,
            e.help.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn valid_name(s: &str) -> bool {
        let mut c = s.chars();
        c.next().is_some_and(|f| f.is_ascii_lowercase() || f == '_')
            && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    }

    #[test]
    fn names_are_unique_well_formed_and_carry_their_unit() {
        let mut seen = BTreeSet::new();
        for e in CATALOGUE {
            assert!(seen.insert(e.name), "{} twice", e.name);
            assert!(valid_name(e.name), "{}", e.name);
            assert!(
                e.name.starts_with("powerdiag_") || e.name.starts_with("process_"),
                "{}: the agent's metrics are powerdiag_*, its own process's process_*",
                e.name
            );
            let base = match e.kind {
                Kind::Counter => e
                    .name
                    .strip_suffix("_total")
                    .unwrap_or_else(|| panic!("counter {} must end in _total", e.name)),
                Kind::Gauge => {
                    assert!(
                        !e.name.ends_with("_total"),
                        "gauge {} ends in _total",
                        e.name
                    );
                    e.name
                }
            };
            if let Some(u) = e.unit {
                assert!(base.ends_with(&format!("_{u}")), "{}: unit {u}", e.name);
            }
            for suffix in ["_seconds", "_bytes", "_hertz", "_ratio"] {
                if base.ends_with(suffix) {
                    assert_eq!(e.unit, Some(&suffix[1..]), "{}: declare its unit", e.name);
                }
            }
            // A summary/histogram's reserved suffixes and labels are not ours to use.
            for reserved in ["_sum", "_count", "_bucket"] {
                assert!(!e.name.ends_with(reserved), "{}", e.name);
            }
            let mut labels = BTreeSet::new();
            for l in e.labels {
                assert!(
                    valid_name(l) && !l.starts_with("__"),
                    "{}: label {l}",
                    e.name
                );
                assert!(labels.insert(l), "{}: label {l} twice", e.name);
                assert!(
                    !["quantile", "le", "job", "instance"].contains(l),
                    "{}: label {l} is reserved (promtool, Prometheus)",
                    e.name
                );
            }
            assert!(
                !e.help.is_empty() && !e.help.contains(['\n', '\\']) && !e.help.ends_with('.'),
                "{}: help is one line, no backslash, no final period (the registry adds it)",
                e.name
            );
        }
    }

    #[test]
    fn the_readme_lists_every_metric() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
        let readme = std::fs::read_to_string(path).unwrap();
        const BEGIN: &str =
            "<!-- metrics: generated from crates/agent/src/daemon/catalogue.rs -->\n";
        const END: &str = "<!-- /metrics -->";
        let start = readme
            .find(BEGIN)
            .expect("docs/metrics.md lacks the metrics marker")
            + BEGIN.len();
        let end = start
            + readme[start..]
                .find(END)
                .expect("docs/metrics.md lacks <!-- /metrics -->");
        let table = markdown();
        if readme[start..end] != table {
            if std::env::var_os("UPDATE_README").is_some() {
                let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
                std::fs::write(path, updated).unwrap();
            } else {
                panic!(
                    "docs/metrics.md's metric table is stale: run `UPDATE_README=1 cargo test -p powerdiag-agent catalogue`"
                );
            }
        }
    }
}
