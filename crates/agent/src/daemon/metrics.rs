//! The agent's metrics. A fresh prometheus-client registry is filled from each sample in the
//! sampler and encoded once; a scrape only appends the sample's age to that text.
//!
//! Verdicts: `powerdiag_check{code, name, severity, status} 1` — one series per rule whose
//! `status` label is the current verdict (`fail`, `pass`, `not_applicable`,
//! `insufficient_data`). An alert on `powerdiag_check{status="fail", severity="critical"} == 1`
//! names the rule and the host (the `instance` label).

use std::{
    fmt::Write,
    sync::atomic::AtomicU64,
    time::{Duration, SystemTime},
};

use powerdiag_rules::{Gathered, Report, Settings, Snapshot, StatusVar, Var};
use prometheus_client::{
    encoding::text::encode_registry,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

type Labels = Vec<(String, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;

/// A registry under construction, with one family per metric name.
struct Builder {
    registry: Registry,
}

impl Builder {
    fn gauge(&mut self, name: &str, help: &str, series: Vec<(Labels, f64)>) {
        if series.is_empty() {
            return;
        }
        let f = G::default();
        for (labels, v) in series {
            f.get_or_create(&labels).set(v);
        }
        self.registry.register(name, help, f);
    }

    fn one(&mut self, name: &str, help: &str, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(v);
            self.registry.register(name, help, g);
        }
    }

    /// A counter family; the series' values are running totals.
    fn counters(&mut self, name: &str, help: &str, series: Vec<(Labels, f64)>) {
        if series.is_empty() {
            return;
        }
        let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
        for (labels, v) in series {
            if v.is_finite() && v >= 0.0 {
                f.get_or_create(&labels).inc_by(v);
            }
        }
        self.registry.register(name, help, f);
    }

    fn counter(&mut self, name: &str, help: &str, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite() && *v >= 0.0) {
            let c = Counter::<f64, AtomicU64>::default();
            c.inc_by(v);
            self.registry.register(name, help, c);
        }
    }
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Encodes everything a sample says (OpenMetrics text without `# EOF`).
pub(crate) fn encode_sample(
    s: &Snapshot,
    report: &Report,
    settings: &Settings,
    taken_at: SystemTime,
    duration: Duration,
    sql: u32,
) -> String {
    let mut b = Builder {
        registry: Registry::with_prefix("powerdiag"),
    };
    b.one(
        "up",
        "1: the agent is running and serving samples",
        Some(1.0),
    );
    b.gauge(
        "build_info",
        "powerdiag build information",
        vec![(l(&[("version", env!("CARGO_PKG_VERSION"))]), 1.0)],
    );
    let ts = taken_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .ok();
    b.one(
        "sample_timestamp_seconds",
        "Unix time the last sample started",
        ts,
    );
    b.one(
        "sample_duration_seconds",
        "How long the last sample took",
        Some(duration.as_secs_f64()),
    );
    b.one(
        "sample_sql_statements",
        "SQL statements the last sample sent to MariaDB",
        Some(f64::from(sql)),
    );
    b.one(
        "mariadb_up",
        "1 when the last sample reached MariaDB",
        Some(if s.mariadb.reachable { 1.0 } else { 0.0 }),
    );
    b.gauge(
        "collector_success",
        "1 when the collector succeeded in the last sample",
        s.collectors
            .iter()
            .map(|c| {
                (
                    l(&[("collector", &c.name)]),
                    if c.success { 1.0 } else { 0.0 },
                )
            })
            .collect(),
    );
    b.gauge(
        "collector_duration_seconds",
        "How long the collector took in the last sample",
        s.collectors
            .iter()
            .map(|c| (l(&[("collector", &c.name)]), c.duration_seconds))
            .collect(),
    );
    b.gauge(
        "check",
        "1 for each rule, labelled with its current verdict (status: fail, pass, not_applicable, insufficient_data)",
        report
            .checks
            .iter()
            .map(|c| {
                (
                    l(&[("code", &c.code), ("name", &c.name), ("severity", c.severity.as_str()), ("status", c.status.as_str())]),
                    1.0,
                )
            })
            .collect(),
    );
    b.gauge(
        "check_threshold",
        "The limit each evaluated rule judges against: its default or the value set under [rules.thresholds] (ratios as 0..1, sizes in bytes)",
        settings
            .effective()
            .filter(|(r, _, _)| !settings.is_disabled(r.meta().code))
            .map(|(r, t, v)| {
                (
                    l(&[("code", r.meta().code), ("name", r.meta().name), ("threshold", t.key)]),
                    v,
                )
            })
            .collect(),
    );
    mariadb(&mut b, s);
    statements(&mut b, s);
    os(&mut b, s);
    let mut out = String::with_capacity(8192);
    // Writing into a String cannot fail.
    let _ = encode_registry(&mut out, &b.registry);
    out
}

fn mariadb(b: &mut Builder, s: &Snapshot) {
    let Some(f) = &s.mariadb.facts else { return };
    b.gauge(
        "mariadb_version_info",
        "The MariaDB server's version",
        vec![(
            l(&[("version", &f.version.raw), ("short", &f.version.short())]),
            1.0,
        )],
    );
    b.one(
        "mariadb_mhnsw_max_cache_size_bytes",
        "mhnsw_max_cache_size: the limit of each vector index's graph cache",
        f.var_u64(Var::MhnswMaxCacheSize).ok().map(|v| v as f64),
    );
    if let Gathered::Available(v) = &f.vector_indexes {
        let labels = |i: &powerdiag_rules::VectorIndex| {
            l(&[
                ("schema", &i.schema),
                ("table", &i.table),
                ("index", &i.index),
            ])
        };
        b.gauge(
            "mariadb_vector_index_graph_bytes",
            "Estimated memory the whole graph of the vector index needs in the MHNSW cache",
            v.iter()
                .filter_map(|i| Some((labels(i), f.graph_estimate(i)?.bytes as f64)))
                .collect(),
        );
        b.gauge(
            "mariadb_vector_index_rows",
            "Vectors in the index",
            v.iter()
                .filter_map(|i| Some((labels(i), i.rows? as f64)))
                .collect(),
        );
    }
    if let Gathered::Available(p) = &f.probe {
        probe(b, p);
    }
    let st = |v: StatusVar| f.status_u64(v).ok().map(|x| x as f64);
    for (var, name, help) in [
        (
            StatusVar::HandlerReadLast,
            "mariadb_handler_read_last",
            "Handler_read_last: each MHNSW cache rebuild reads the graph's entry point with it",
        ),
        (
            StatusVar::HandlerReadRnd,
            "mariadb_handler_read_rnd",
            "Handler_read_rnd: rows (and graph nodes) read by position",
        ),
        (
            StatusVar::InnodbBufferPoolReadRequests,
            "mariadb_innodb_buffer_pool_read_requests",
            "Innodb_buffer_pool_read_requests",
        ),
        (
            StatusVar::InnodbBufferPoolReads,
            "mariadb_innodb_buffer_pool_reads",
            "Innodb_buffer_pool_reads: reads that missed the buffer pool",
        ),
        (
            StatusVar::Questions,
            "mariadb_questions",
            "Questions: statements sent by clients",
        ),
        (
            StatusVar::SlowQueries,
            "mariadb_slow_queries",
            "Slow_queries",
        ),
    ] {
        b.counter(name, help, st(var));
    }
    b.one(
        "mariadb_threads_connected",
        "Threads_connected",
        st(StatusVar::ThreadsConnected),
    );
    b.one(
        "mariadb_threads_running",
        "Threads_running",
        st(StatusVar::ThreadsRunning),
    );
    b.one(
        "mariadb_memory_used_bytes",
        "Memory_used (global)",
        st(StatusVar::MemoryUsed),
    );
    b.one("mariadb_uptime_seconds", "Uptime", st(StatusVar::Uptime));
    server_health(b, f);
}

/// The everyday server facts (PD205–PD216, PD503): the server's own counters as counters, so
/// PromQL rates them over any window (buffer-pool misses = rate(reads) / rate(read_requests));
/// gauges and limits beside them. Names follow the status variable.
fn server_health(b: &mut Builder, f: &powerdiag_rules::MariadbFacts) {
    let st = |v: StatusVar| f.status_u64(v).ok().map(|x| x as f64);
    let var = |v: Var| f.var_u64(v).ok().map(|x| x as f64);
    for (v, name, help) in [
        (
            StatusVar::ComSelect,
            "mariadb_com_select",
            "Com_select: SELECTs executed (not answered by the query cache)",
        ),
        (
            StatusVar::CreatedTmpTables,
            "mariadb_created_tmp_tables",
            "Created_tmp_tables: internal temporary tables",
        ),
        (
            StatusVar::CreatedTmpDiskTables,
            "mariadb_created_tmp_disk_tables",
            "Created_tmp_disk_tables: internal temporary tables written to disk (PD208)",
        ),
        (
            StatusVar::Connections,
            "mariadb_connections",
            "Connections: connection attempts",
        ),
        (
            StatusVar::ThreadsCreated,
            "mariadb_threads_created",
            "Threads_created: threads created for connections (PD210)",
        ),
        (
            StatusVar::ConnectionErrorsMaxConnections,
            "mariadb_connection_errors_max_connections",
            "Connection_errors_max_connections: connections refused at max_connections (PD209)",
        ),
        (
            StatusVar::TableOpenCacheHits,
            "mariadb_table_open_cache_hits",
            "Table_open_cache_hits",
        ),
        (
            StatusVar::TableOpenCacheMisses,
            "mariadb_table_open_cache_misses",
            "Table_open_cache_misses (PD211)",
        ),
        (
            StatusVar::OpenedTableDefinitions,
            "mariadb_opened_table_definitions",
            "Opened_table_definitions: table definitions read (PD211)",
        ),
        (
            StatusVar::QcacheHits,
            "mariadb_qcache_hits",
            "Qcache_hits: SELECTs answered by the query cache (PD212)",
        ),
        (
            StatusVar::QcacheLowmemPrunes,
            "mariadb_qcache_lowmem_prunes",
            "Qcache_lowmem_prunes (PD212)",
        ),
        (
            StatusVar::SortScan,
            "mariadb_sort_scan",
            "Sort_scan: sorts done by scanning",
        ),
        (
            StatusVar::SortRange,
            "mariadb_sort_range",
            "Sort_range: sorts done on ranges",
        ),
        (
            StatusVar::SortMergePasses,
            "mariadb_sort_merge_passes",
            "Sort_merge_passes: merge passes of sorts larger than sort_buffer_size (PD213)",
        ),
        (
            StatusVar::SelectFullJoin,
            "mariadb_select_full_join",
            "Select_full_join: joins that scanned the joined table (PD214)",
        ),
        (
            StatusVar::SelectRangeCheck,
            "mariadb_select_range_check",
            "Select_range_check: joins that chose an index row by row (PD214)",
        ),
        (
            StatusVar::InnodbLogWaits,
            "mariadb_innodb_log_waits",
            "Innodb_log_waits: waits for the log buffer (PD207)",
        ),
        (
            StatusVar::InnodbLsnCurrent,
            "mariadb_innodb_redo_written_bytes",
            "Innodb_lsn_current: redo log bytes written since the log was created (PD206)",
        ),
    ] {
        b.counter(name, help, st(v));
    }
    for (value, name, help) in [
        (
            var(Var::MaxConnections),
            "mariadb_max_connections",
            "max_connections",
        ),
        (
            st(StatusVar::MaxUsedConnections),
            "mariadb_max_used_connections",
            "Max_used_connections: most connections open at once since start-up (PD209)",
        ),
        (st(StatusVar::OpenFiles), "mariadb_open_files", "Open_files"),
        (
            var(Var::OpenFilesLimit),
            "mariadb_open_files_limit",
            "open_files_limit",
        ),
        (
            st(StatusVar::InnodbCheckpointAge),
            "mariadb_innodb_checkpoint_age_bytes",
            "Innodb_checkpoint_age: redo not yet checkpointed (PD206)",
        ),
        (
            st(StatusVar::InnodbCheckpointMaxAge),
            "mariadb_innodb_checkpoint_max_age_bytes",
            "Innodb_checkpoint_max_age: where InnoDB flushes synchronously (PD206)",
        ),
        (
            var(Var::InnodbLogFileSize),
            "mariadb_innodb_log_file_size_bytes",
            "innodb_log_file_size",
        ),
        (
            st(StatusVar::InnodbHistoryListLength),
            "mariadb_innodb_history_list_length",
            "Innodb_history_list_length: undo history purge has not removed (PD215)",
        ),
        (
            var(Var::InnodbBufferPoolSize),
            "mariadb_innodb_buffer_pool_size_bytes",
            "innodb_buffer_pool_size (PD205)",
        ),
    ] {
        b.one(name, help, value);
    }
    if let Gathered::Available(size) = &f.innodb_size {
        b.gauge(
            "mariadb_innodb_size_bytes",
            "InnoDB data (kind=data: clustered indexes) and secondary indexes (kind=index) from mysql.innodb_table_stats (PD205)",
            vec![
                (l(&[("kind", "data")]), size.data_bytes as f64),
                (l(&[("kind", "index")]), size.index_bytes as f64),
            ],
        );
    }
    if let Gathered::Available(t) = &f.transactions {
        b.one(
            "mariadb_innodb_open_transactions",
            "Open InnoDB transactions (information_schema.INNODB_TRX)",
            Some(t.open as f64),
        );
        b.one(
            "mariadb_innodb_oldest_transaction_age_seconds",
            "Age of the oldest open InnoDB transaction, 0 when none is open (PD215)",
            Some(t.oldest.as_ref().map_or(0.0, |o| o.age_seconds as f64)),
        );
    }
}

/// The vector probe's results, in the sample that ran it (the agent probes on its own, slower
/// schedule, so these series exist for one sample per probe interval: query them with
/// `last_over_time(...[probe interval])`).
fn probe(b: &mut Builder, p: &powerdiag_rules::Probe) {
    let mut latency = Vec::new();
    let mut rebuilds = Vec::new();
    let mut queries = Vec::new();
    for i in &p.indexes {
        let first: Vec<u64> = i
            .queries
            .iter()
            .filter(|q| !q.repeat)
            .map(|q| q.latency_us)
            .collect();
        let repeat: Vec<u64> = i
            .queries
            .iter()
            .filter(|q| q.repeat)
            .map(|q| q.latency_us)
            .collect();
        let id = |extra: &[(&str, &str)]| {
            let mut v = vec![
                ("schema", i.schema.as_str()),
                ("table", i.table.as_str()),
                ("index", i.index.as_str()),
            ];
            v.extend_from_slice(extra);
            l(&v)
        };
        for (pass, lat) in [("first", first), ("repeat", repeat)] {
            if lat.is_empty() {
                continue;
            }
            queries.push((id(&[("pass", pass)]), lat.len() as f64));
            for (q, v) in quantiles(lat) {
                latency.push((id(&[("pass", pass), ("quantile", q)]), v as f64 / 1e6));
            }
        }
        if !i.queries.is_empty() {
            rebuilds.push((
                id(&[]),
                i.queries.iter().map(|q| q.handler_read_last).sum::<u64>() as f64,
            ));
        }
    }
    b.gauge(
        "mariadb_probe_query_latency_seconds",
        "Latency of the vector probe's k-NN queries (pass: first = distinct vectors, repeat = the first ones again; quantile over the queries; 1 = slowest)",
        latency,
    );
    b.gauge(
        "mariadb_probe_queries",
        "k-NN queries the vector probe ran",
        queries,
    );
    b.gauge(
        "mariadb_probe_cache_rebuilds",
        "MHNSW cache rebuilds during the probe (Handler_read_last moved by its queries)",
        rebuilds,
    );
}

/// The median, 90th percentile and maximum (nearest rank) of `v`.
fn quantiles(mut v: Vec<u64>) -> [(&'static str, u64); 3] {
    v.sort_unstable();
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    [("0.5", rank(0.5)), ("0.9", rank(0.9)), ("1", rank(1.0))]
}

fn os(b: &mut Builder, s: &Snapshot) {
    let Ok(o) = s.os.as_ref() else { return };
    if let Ok(c) = o.cpu.as_ref() {
        let mhz = |v: Option<f64>| v.map(|m| m * 1e6);
        b.one(
            "cpu_frequency_nominal_hertz",
            "Nominal CPU frequency",
            mhz(c.nominal_mhz),
        );
        b.one(
            "cpu_frequency_effective_hertz",
            "Effective CPU frequency over the window (SPURR/PURR on POWER), else the current one",
            mhz(c.effective_mhz.or(c.current_mhz)),
        );
        b.one(
            "cpu_threads",
            "Online logical CPUs",
            Some(f64::from(c.threads)),
        );
        b.one(
            "cpu_threads_per_core",
            "Hardware threads per core (SMT)",
            c.threads_per_core.map(f64::from),
        );
    }
    if let Ok(t) = o.cpu_time.as_ref() {
        b.one(
            "cpu_steal_ratio",
            "Share of CPU time stolen by the hypervisor over the window",
            t.steal_share,
        );
        b.one(
            "cpu_busy_ratio",
            "Share of CPU time busy over the window",
            t.busy_share,
        );
    }
    if let Ok(Some(p)) = o.partition.as_ref() {
        let mode = if p.shared { "shared" } else { "dedicated" };
        let yes = |x: bool| if x { "true" } else { "false" };
        b.gauge(
            "lpar_info",
            "PowerVM partition mode",
            vec![(
                l(&[
                    ("mode", mode),
                    ("capped", yes(p.capped)),
                    ("donating", yes(p.donating)),
                ]),
                1.0,
            )],
        );
        b.one(
            "lpar_entitled_capacity",
            "Entitled capacity in processor units",
            p.entitled_capacity,
        );
        b.one(
            "lpar_online_vcpus",
            "Online virtual processors",
            p.online_vcpus.map(f64::from),
        );
    }
    if let Ok(m) = o.memory.as_ref() {
        b.one(
            "memory_base_page_bytes",
            "Base page size",
            m.base_page_bytes.map(|v| v as f64),
        );
        if let Some(thp) = &m.thp_enabled {
            b.gauge(
                "transparent_hugepage_info",
                "Transparent huge pages settings",
                vec![(
                    l(&[
                        ("enabled", thp),
                        ("defrag", m.thp_defrag.as_deref().unwrap_or("")),
                    ]),
                    1.0,
                )],
            );
        }
    }
    if let Ok(p) = o.process.as_ref() {
        b.one(
            "mariadbd_resident_bytes",
            "mariadbd resident memory",
            p.rss_bytes.map(|v| v as f64),
        );
        b.one(
            "mariadbd_anon_huge_bytes",
            "mariadbd anonymous memory in transparent huge pages",
            p.anon_huge_bytes.map(|v| v as f64),
        );
        let mut pages: Vec<(Labels, f64)> = Vec::new();
        for (segment, v) in [
            ("data", p.data_page_bytes),
            ("text", p.text_page_bytes),
            ("stack", p.stack_page_bytes),
        ] {
            if let Some(v) = v {
                pages.push((l(&[("segment", segment)]), v as f64));
            }
        }
        if pages.is_empty()
            && let Some(k) = p.kernel_page_sizes.first()
        {
            pages.push((l(&[("segment", "all")]), *k as f64));
        }
        b.gauge(
            "mariadbd_page_size_bytes",
            "Page size of mariadbd's memory (AIX: per segment)",
            pages,
        );
    }
    if let Ok(c) = o.counters.as_ref() {
        b.gauge(
            "mariadbd_perf_events",
            "Hardware and software events counted on mariadbd's threads over the window (absent when unavailable)",
            c.events.iter().filter_map(|e| Some((l(&[("event", &e.name)]), e.value? as f64))).collect(),
        );
        b.one(
            "mariadbd_perf_window_seconds",
            "Length of the counting window",
            Some(c.window_seconds),
        );
    }
}

/// Longest digest text in the info metric's label (characters, before escaping).
const DIGEST_TEXT_LABEL_CHARS: usize = 200;

/// A label value from outside (schema names, digest text): control characters escaped and
/// cut by `display_text`, then the exposition format's own escapes (`\\`, `\"`, `\n`) —
/// prometheus-client writes label values as they are.
pub(crate) fn label_value(raw: &str, max_chars: usize) -> String {
    let shown = powerdiag_rules::display_text(raw, max_chars);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The agent's statement counters: the busiest digests of the last interval each with their
/// own series (`[statements] top`), the rest summed into `digest="other"`: running totals
/// since the agent started, so `rate()` works. The digest text goes in an info metric only.
fn statements(b: &mut Builder, s: &Snapshot) {
    let Some(f) = &s.mariadb.facts else { return };
    let Gathered::Available(st) = &f.statements else {
        return;
    };
    let key = |d: &powerdiag_rules::DigestCounters| {
        l(&[
            (
                "schema",
                &label_value(d.schema.as_deref().unwrap_or(""), 64),
            ),
            ("digest", &label_value(&d.digest, 64)),
        ])
    };
    let series = |v: fn(&powerdiag_rules::DigestCounters) -> f64| -> Vec<(Labels, f64)> {
        st.counters.iter().map(|d| (key(d), v(d))).collect()
    };
    b.counters(
        "mariadb_statement_calls",
        "Statement executions since the agent started, per digest (the busiest of the last interval; digest=\"other\" sums the rest)",
        series(|d| d.calls as f64),
    );
    b.counters(
        "mariadb_statement_seconds",
        "Statement time since the agent started, per digest",
        series(|d| d.time_us as f64 / 1e6),
    );
    b.counters(
        "mariadb_statement_rows_examined",
        "Rows examined since the agent started, per digest",
        series(|d| d.rows_examined as f64),
    );
    b.counters(
        "mariadb_statement_rows_sent",
        "Rows sent since the agent started, per digest",
        series(|d| d.rows_sent as f64),
    );
    b.counters(
        "mariadb_statement_no_index",
        "Executions that used no index or no good index since the agent started, per digest",
        series(|d| d.no_index_used as f64),
    );
    b.gauge(
        "mariadb_statement_info",
        "The digest text (truncated, escaped) of each digest with its own statement series",
        st.counters
            .iter()
            .filter(|d| d.digest != "other")
            .map(|d| {
                let mut labels = key(d);
                labels.push((
                    "text".to_owned(),
                    label_value(&d.text, DIGEST_TEXT_LABEL_CHARS),
                ));
                (labels, 1.0)
            })
            .collect(),
    );
}

/// The Prometheus text format (0.0.4) of an OpenMetrics body: no `# UNIT` lines, and counter
/// families named by their `_total` sample in `# HELP`/`# TYPE` (OpenMetrics names the family
/// without it). Done once per sample, not per scrape.
pub(crate) fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The scrape body: the encoded sample (OpenMetrics, or the Prometheus text of it), its age
/// now, and `# EOF` for OpenMetrics.
pub(crate) fn render(
    encoded: &str,
    taken_at: Option<SystemTime>,
    now: SystemTime,
    openmetrics: bool,
) -> String {
    let mut out = String::with_capacity(encoded.len() + 256);
    out.push_str(encoded);
    if let Some(t) = taken_at {
        let age = now.duration_since(t).unwrap_or_default().as_secs_f64();
        let _ = write!(
            out,
            "# HELP powerdiag_sample_age_seconds Seconds since the served sample started.\n# TYPE powerdiag_sample_age_seconds gauge\npowerdiag_sample_age_seconds {age}\n"
        );
    }
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerdiag_rules::{evaluate, testing::*};

    fn sample() -> String {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .status(StatusVar::HandlerReadLast, "42")
            .build();
        encode_sample(
            &s,
            &evaluate(&s),
            &Settings::default(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(1000),
            Duration::from_millis(1200),
            9,
        )
    }

    #[test]
    fn verdicts_facts_and_health_are_exported() {
        let text = sample();
        for needle in [
            "powerdiag_up 1",
            "powerdiag_mariadb_up 1",
            "powerdiag_check{code=\"PD101\",name=\"mhnsw-cache-undersized\",severity=\"critical\",status=\"fail\"} 1",
            "powerdiag_mariadb_mhnsw_max_cache_size_bytes 16777216",
            "powerdiag_mariadb_vector_index_graph_bytes{schema=\"app\",table=\"docs\",index=\"e\"}",
            "powerdiag_mariadb_handler_read_last_total 42",
            "powerdiag_sample_sql_statements 9",
            "powerdiag_check_threshold{code=\"PD403\",name=\"hypervisor-preemption\",threshold=\"max_steal\"} 0.05",
            "powerdiag_memory_base_page_bytes 4096",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        assert!(!text.contains("# EOF"), "EOF is added per scrape");
    }

    #[test]
    fn probe_latencies_and_rebuilds_per_index() {
        let q = |latency_us, repeat, handler_read_last| powerdiag_rules::ProbeQuery {
            latency_us,
            repeat,
            handler_read_last,
            ..Default::default()
        };
        let mut queries: Vec<_> = (1..=10).map(|i| q(i * 1000, false, 1)).collect();
        queries.push(q(500, true, 0));
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .probe(powerdiag_rules::Probe {
                indexes: vec![powerdiag_rules::IndexProbe {
                    schema: "app".into(),
                    table: "docs".into(),
                    index: "e".into(),
                    limit: 10,
                    queries,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .build();
        let text = encode_sample(
            &s,
            &evaluate(&s),
            &Settings::default(),
            SystemTime::UNIX_EPOCH,
            Duration::ZERO,
            1,
        );
        let id = "schema=\"app\",table=\"docs\",index=\"e\"";
        for needle in [
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",quantile=\"0.5\"}} 0.005"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",quantile=\"0.9\"}} 0.009"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",quantile=\"1\"}} 0.01"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"repeat\",quantile=\"1\"}} 0.0005"
            ),
            format!("powerdiag_mariadb_probe_queries{{{id},pass=\"first\"}} 10"),
            format!("powerdiag_mariadb_probe_cache_rebuilds{{{id}}} 10"),
        ] {
            assert!(text.contains(&needle), "{needle} missing from\n{text}");
        }
        // No probe in the sample: no probe series.
        assert!(!sample().contains("powerdiag_mariadb_probe"));
    }

    #[test]
    fn statement_counters_are_bounded_and_their_labels_escaped() {
        let mut s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .statements(Vec::new(), 0)
            .build();
        if let Some(f) = &mut s.mariadb.facts
            && let Gathered::Available(st) = &mut f.statements
        {
            st.counters = vec![
                powerdiag_rules::DigestCounters {
                    schema: Some("a\"pp".into()),
                    digest: "abc123".into(),
                    text: "SELECT `x\\y` FROM `t\"` WHERE `a` = ?\n}".into(),
                    calls: 7,
                    time_us: 1_500_000,
                    rows_examined: 70,
                    rows_sent: 7,
                    no_index_used: 7,
                },
                powerdiag_rules::DigestCounters {
                    digest: "other".into(),
                    calls: 3,
                    ..Default::default()
                },
            ];
        }
        let text = encode_sample(
            &s,
            &evaluate(&s),
            &Settings::default(),
            SystemTime::UNIX_EPOCH,
            Duration::ZERO,
            1,
        );
        let id = "schema=\"a\\\"pp\",digest=\"abc123\"";
        for needle in [
            format!("powerdiag_mariadb_statement_calls_total{{{id}}} 7"),
            format!("powerdiag_mariadb_statement_seconds_total{{{id}}} 1.5"),
            format!("powerdiag_mariadb_statement_no_index_total{{{id}}} 7"),
            "powerdiag_mariadb_statement_calls_total{schema=\"\",digest=\"other\"} 3".to_owned(),
            format!(
                "powerdiag_mariadb_statement_info{{{id},text=\"SELECT `x\\\\y` FROM `t\\\"` WHERE `a` = ? }}\"}} 1"
            ),
        ] {
            assert!(text.contains(&needle), "{needle} missing from\n{text}");
        }
        assert!(!text.contains("digest=\"other\",text"), "{text}");
    }

    #[test]
    fn render_adds_age_and_the_right_ending() {
        let enc = sample();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let om = render(&enc, Some(t), t + Duration::from_secs(7), true);
        assert!(
            om.ends_with("powerdiag_sample_age_seconds 7\n# EOF\n"),
            "{om}"
        );
        let text = render(
            &to_prometheus_text(&enc),
            Some(t),
            t + Duration::from_secs(7),
            false,
        );
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
        assert!(
            text.contains("# TYPE powerdiag_mariadb_handler_read_last_total counter"),
            "{text}"
        );
    }
}
