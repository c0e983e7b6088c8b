//! The agent's metrics. Each sample is encoded once, in the sampler, into a fresh
//! prometheus-client registry; a scrape only appends the sample's age to that text.
//!
//! Only metrics of the catalogue (`catalogue.rs`) can be written, with exactly their declared
//! labels, and every label value goes through `LabelSet`, which escapes it per the
//! exposition format (`\\`, `\"`, `\n`): outside text (schema, table and index names, digest
//! text, versions, event names) can never end a label or a line (prometheus-client writes
//! label values as they are).
//!
//! Verdicts: `powerdiag_check{code, name, severity, status} 1` — one series per rule whose
//! `status` label is the current verdict (`fail`, `pass`, `not_applicable`,
//! `insufficient_data`). An alert on `powerdiag_check{status="fail", severity="critical"} == 1`
//! names the rule and the host (the `instance` label).

use std::{
    collections::HashSet,
    fmt::Write,
    time::{Duration, SystemTime},
};

use powerdiag_rules::{Gathered, Report, Settings, Snapshot, StatusVar, Var};
use prometheus_client::{
    encoding::{
        EncodeLabelSet, EncodeMetric, LabelSetEncoder, MetricEncoder, NoLabelSet,
        text::encode_registry,
    },
    metrics::MetricType,
    registry::{Registry, Unit},
};

use super::{
    catalogue::{self as c, Kind, Metric},
    self_info::{BuildInfo, ProcessStats},
};

/// Label values in the catalogue's order. Written escaped: the only label type the encoder
/// has, so no label value reaches the text unescaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LabelSet(Vec<(&'static str, String)>);

impl EncodeLabelSet for LabelSet {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for (k, v) in &self.0 {
            let mut label = encoder.encode_label();
            let mut key = label.encode_label_key()?;
            key.write_str(k)?;
            let mut value = key.encode_label_value()?;
            escape_into(&mut value, v)?;
            value.finish()?;
        }
        Ok(())
    }
}

/// The exposition format's label-value escapes (Prometheus text 0.0.4 and OpenMetrics alike):
/// backslash, double quote and line feed.
fn escape_into(w: &mut impl Write, raw: &str) -> std::fmt::Result {
    let mut rest = raw;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        w.write_str(&rest[..i])?;
        w.write_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[i + 1..];
    }
    w.write_str(rest)
}

/// One metric's series, in the order they were added (so the text is reproducible).
#[derive(Debug)]
struct Series {
    kind: Kind,
    points: Vec<(LabelSet, f64)>,
}

impl Series {
    fn value(&self, e: &mut MetricEncoder<'_>, v: &f64) -> Result<(), std::fmt::Error> {
        match self.kind {
            Kind::Gauge => e.encode_gauge(v),
            Kind::Counter => e.encode_counter::<NoLabelSet, f64, f64>(v, None),
        }
    }
}

impl EncodeMetric for Series {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, v) in &self.points {
            // An empty family label set would be written as `{}`.
            if labels.0.is_empty() {
                self.value(&mut encoder, v)?;
            } else {
                self.value(&mut encoder.encode_family(labels)?, v)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        match self.kind {
            Kind::Gauge => MetricType::Gauge,
            Kind::Counter => MetricType::Counter,
        }
    }
}

/// A registry under construction: catalogue metrics only.
struct Builder {
    registry: Registry,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            registry: Registry::default(),
        }
    }

    /// Registers `m` with `series` (label values in the catalogue's order). Non-finite values,
    /// negative counters and a repeated label set (the first one stays) are left out; a
    /// metric without series is not written at all.
    fn add<const N: usize, S: AsRef<str>>(
        &mut self,
        m: &Metric<N>,
        series: impl IntoIterator<Item = ([S; N], f64)>,
    ) {
        let mut seen = HashSet::new();
        let points: Vec<(LabelSet, f64)> = series
            .into_iter()
            .filter(|(_, v)| v.is_finite() && (m.kind == Kind::Gauge || *v >= 0.0))
            .map(|(values, v)| {
                let labels = m
                    .labels
                    .iter()
                    .zip(values)
                    .map(|(k, v)| (*k, v.as_ref().to_owned()))
                    .collect();
                (LabelSet(labels), v)
            })
            .filter(|(l, _)| seen.insert(l.clone()))
            .collect();
        if points.is_empty() {
            return;
        }
        let base = m.family();
        let metric = Series {
            kind: m.kind,
            points,
        };
        match m.unit {
            Some(u) => self.registry.register_with_unit(
                base.strip_suffix(&format!("_{u}")).unwrap_or(base),
                m.help,
                Unit::Other(u.to_owned()),
                metric,
            ),
            None => self.registry.register(base, m.help, metric),
        }
    }

    /// A metric without labels, when the value is known.
    fn one(&mut self, m: &Metric<0>, v: Option<f64>) {
        self.add(m, v.map(|v| ([] as [&str; 0], v)));
    }

    fn finish(self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        out
    }
}

/// What a sample's metrics are made of.
#[derive(Debug, Clone, Copy)]
pub struct SampleMetrics<'a> {
    pub snapshot: &'a Snapshot,
    pub report: &'a Report,
    pub settings: &'a Settings,
    pub taken_at: SystemTime,
    pub duration: Duration,
    /// `[sample] interval`.
    pub interval: Duration,
    pub sql_statements: u32,
    pub build: &'a BuildInfo,
    pub process: &'a ProcessStats,
}

/// Encodes everything a sample says (OpenMetrics text without `# EOF`).
pub fn encode_sample(m: &SampleMetrics<'_>) -> String {
    let s = m.snapshot;
    let mut b = Builder::new();
    b.one(&c::UP, Some(1.0));
    let bi = m.build;
    b.add(
        &c::BUILD_INFO,
        [(
            [
                bi.version.as_str(),
                bi.revision.as_str(),
                bi.target.as_str(),
                bi.rustc.as_str(),
            ],
            1.0,
        )],
    );
    let ts = m
        .taken_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .ok();
    b.one(&c::SAMPLE_TIMESTAMP, ts);
    b.one(&c::SAMPLE_DURATION, Some(m.duration.as_secs_f64()));
    b.one(&c::SAMPLE_INTERVAL, Some(m.interval.as_secs_f64()));
    b.one(&c::SAMPLE_SQL, Some(f64::from(m.sql_statements)));
    b.one(
        &c::MARIADB_UP,
        Some(if s.mariadb.reachable { 1.0 } else { 0.0 }),
    );
    b.add(
        &c::COLLECTOR_SUCCESS,
        s.collectors
            .iter()
            .map(|r| ([r.name.as_str()], if r.success { 1.0 } else { 0.0 })),
    );
    b.add(
        &c::COLLECTOR_DURATION,
        s.collectors
            .iter()
            .map(|r| ([r.name.as_str()], r.duration_seconds)),
    );
    b.add(
        &c::CHECK,
        m.report.checks.iter().map(|k| {
            (
                [
                    k.code.as_str(),
                    k.name.as_str(),
                    k.severity.as_str(),
                    k.status.as_str(),
                ],
                1.0,
            )
        }),
    );
    b.add(
        &c::CHECK_THRESHOLD,
        m.settings
            .effective()
            .filter(|(r, _, _)| !m.settings.is_disabled(r.meta().code))
            .map(|(r, t, v)| ([r.meta().code, r.meta().name, t.key], v)),
    );
    mariadb(&mut b, s);
    statements(&mut b, s);
    os(&mut b, s);
    process(&mut b, m.process);
    b.finish()
}

fn mariadb(b: &mut Builder, s: &Snapshot) {
    let Some(f) = &s.mariadb.facts else { return };
    b.add(
        &c::MARIADB_VERSION_INFO,
        [([f.version.raw.clone(), f.version.short()], 1.0)],
    );
    b.one(
        &c::MHNSW_MAX_CACHE_SIZE,
        f.var_u64(Var::MhnswMaxCacheSize).ok().map(|v| v as f64),
    );
    if let Gathered::Available(v) = &f.vector_indexes {
        let id =
            |i: &powerdiag_rules::VectorIndex| [i.schema.clone(), i.table.clone(), i.index.clone()];
        b.add(
            &c::VECTOR_INDEX_GRAPH,
            v.iter()
                .filter_map(|i| Some((id(i), f.graph_estimate(i)?.bytes as f64))),
        );
        b.add(
            &c::VECTOR_INDEX_ROWS,
            v.iter().filter_map(|i| Some((id(i), i.rows? as f64))),
        );
    }
    if let Gathered::Available(p) = &f.probe {
        probe(b, p);
    }
    if let Gathered::Available(log) = &f.error_log {
        b.add(
            &c::ERROR_LOG_EVENTS,
            log.counts.iter().map(|(k, n)| ([k.as_str()], *n as f64)),
        );
    }
    let st = |v: StatusVar| f.status_u64(v).ok().map(|x| x as f64);
    for (var, m) in [
        (StatusVar::HandlerReadLast, &c::HANDLER_READ_LAST),
        (StatusVar::HandlerReadRnd, &c::HANDLER_READ_RND),
        (
            StatusVar::InnodbBufferPoolReadRequests,
            &c::BUFFER_POOL_READ_REQUESTS,
        ),
        (StatusVar::InnodbBufferPoolReads, &c::BUFFER_POOL_READS),
        (StatusVar::Questions, &c::QUESTIONS),
        (StatusVar::SlowQueries, &c::SLOW_QUERIES),
        (StatusVar::ThreadsConnected, &c::THREADS_CONNECTED),
        (StatusVar::ThreadsRunning, &c::THREADS_RUNNING),
        (StatusVar::MemoryUsed, &c::MEMORY_USED),
        (StatusVar::Uptime, &c::UPTIME),
    ] {
        b.one(m, st(var));
    }
    server_health(b, f);
}

/// The everyday server facts (PD205–PD216, PD503): the server's own counters as counters, so
/// PromQL rates them over any window (buffer-pool misses = rate(reads) / rate(read_requests));
/// gauges and limits beside them. Names follow the status variable.
fn server_health(b: &mut Builder, f: &powerdiag_rules::MariadbFacts) {
    let st = |v: StatusVar| f.status_u64(v).ok().map(|x| x as f64);
    let var = |v: Var| f.var_u64(v).ok().map(|x| x as f64);
    for (v, m) in [
        (StatusVar::ComSelect, &c::SRV_COM_SELECT),
        (StatusVar::CreatedTmpTables, &c::SRV_CREATED_TMP_TABLES),
        (
            StatusVar::CreatedTmpDiskTables,
            &c::SRV_CREATED_TMP_DISK_TABLES,
        ),
        (StatusVar::Connections, &c::SRV_CONNECTIONS),
        (StatusVar::ThreadsCreated, &c::SRV_THREADS_CREATED),
        (
            StatusVar::ConnectionErrorsMaxConnections,
            &c::SRV_CONNECTION_ERRORS_MAX_CONNECTIONS,
        ),
        (StatusVar::TableOpenCacheHits, &c::SRV_TABLE_OPEN_CACHE_HITS),
        (
            StatusVar::TableOpenCacheMisses,
            &c::SRV_TABLE_OPEN_CACHE_MISSES,
        ),
        (
            StatusVar::OpenedTableDefinitions,
            &c::SRV_OPENED_TABLE_DEFINITIONS,
        ),
        (StatusVar::QcacheHits, &c::SRV_QCACHE_HITS),
        (StatusVar::QcacheLowmemPrunes, &c::SRV_QCACHE_LOWMEM_PRUNES),
        (StatusVar::SortScan, &c::SRV_SORT_SCAN),
        (StatusVar::SortRange, &c::SRV_SORT_RANGE),
        (StatusVar::SortMergePasses, &c::SRV_SORT_MERGE_PASSES),
        (StatusVar::SelectFullJoin, &c::SRV_SELECT_FULL_JOIN),
        (StatusVar::SelectRangeCheck, &c::SRV_SELECT_RANGE_CHECK),
        (StatusVar::InnodbLogWaits, &c::SRV_INNODB_LOG_WAITS),
        (StatusVar::InnodbRowLockWaits, &c::SRV_INNODB_ROW_LOCK_WAITS),
        (StatusVar::InnodbDeadlocks, &c::SRV_INNODB_DEADLOCKS),
        (StatusVar::BinlogCacheUse, &c::SRV_BINLOG_CACHE_USE),
        (StatusVar::BinlogCacheDiskUse, &c::SRV_BINLOG_CACHE_DISK_USE),
        (
            StatusVar::InnodbLsnCurrent,
            &c::SRV_INNODB_REDO_WRITTEN_BYTES,
        ),
    ] {
        b.one(m, st(v));
    }
    for (m, value) in [
        (&c::SRV_MAX_CONNECTIONS, var(Var::MaxConnections)),
        (
            &c::SRV_MAX_USED_CONNECTIONS,
            st(StatusVar::MaxUsedConnections),
        ),
        (&c::SRV_OPEN_FILES, st(StatusVar::OpenFiles)),
        (&c::SRV_OPEN_FILES_LIMIT, var(Var::OpenFilesLimit)),
        (
            &c::SRV_INNODB_CHECKPOINT_AGE_BYTES,
            st(StatusVar::InnodbCheckpointAge),
        ),
        (
            &c::SRV_INNODB_CHECKPOINT_MAX_AGE_BYTES,
            st(StatusVar::InnodbCheckpointMaxAge),
        ),
        (
            &c::SRV_INNODB_LOG_FILE_SIZE_BYTES,
            var(Var::InnodbLogFileSize),
        ),
        (
            &c::SRV_INNODB_HISTORY_LIST_LENGTH,
            st(StatusVar::InnodbHistoryListLength),
        ),
        (
            &c::SRV_INNODB_BUFFER_POOL_SIZE_BYTES,
            var(Var::InnodbBufferPoolSize),
        ),
    ] {
        b.one(m, value);
    }
    if let Gathered::Available(size) = &f.innodb_size {
        b.add(
            &c::SRV_INNODB_SIZE,
            [
                (["data"], size.data_bytes as f64),
                (["index"], size.index_bytes as f64),
            ],
        );
    }
    b.one(
        &c::SRV_INNODB_ROW_LOCK_WAIT_SECONDS,
        st(StatusVar::InnodbRowLockTime).map(|ms| ms / 1000.0),
    );
    if let Gathered::Available(l) = &f.locks {
        locks(
            b,
            l,
            f.status_u64(StatusVar::InnodbRowLockCurrentWaits).ok(),
        );
    }
    if let Gathered::Available(r) = &f.replication {
        replication(b, r);
    }
    semisync(b, f);
    galera(b, f);
    if let Gathered::Available(t) = &f.transactions {
        b.one(&c::SRV_OPEN_TRANSACTIONS, Some(t.open as f64));
        b.one(
            &c::SRV_OLDEST_TRANSACTION_AGE,
            Some(t.oldest.as_ref().map_or(0.0, |o| o.age_seconds as f64)),
        );
    }
}

/// Each replication connection's threads and lag (none on a server that is no replica).
fn replication(b: &mut Builder, r: &powerdiag_rules::Replication) {
    let running = |yes: bool| if yes { 1.0 } else { 0.0 };
    b.add(
        &c::REPLICATION_THREAD_RUNNING,
        r.connections.iter().flat_map(|c| {
            [
                ([c.name.clone(), "io".to_owned()], running(c.io_runs())),
                ([c.name.clone(), "sql".to_owned()], running(c.sql_ok())),
            ]
        }),
    );
    b.add(
        &c::REPLICATION_LAG,
        r.connections
            .iter()
            .filter_map(|c| Some(([c.name.clone()], c.seconds_behind_master? as f64))),
    );
    b.add(
        &c::REPLICATION_SQL_DELAY,
        r.connections
            .iter()
            .filter_map(|c| Some(([c.name.clone()], c.sql_delay? as f64))),
    );
}

/// Semi-synchronous replication on this server as a primary (PD224).
fn semisync(b: &mut Builder, f: &powerdiag_rules::MariadbFacts) {
    let st = |v: StatusVar| f.status_u64(v).ok().map(|x| x as f64);
    let flag = |on: bool| if on { 1.0 } else { 0.0 };
    b.one(
        &c::SEMISYNC_ENABLED,
        f.var_bool(Var::RplSemiSyncMasterEnabled).ok().map(flag),
    );
    b.one(
        &c::SEMISYNC_RUNNING,
        f.status
            .get(StatusVar::RplSemiSyncMasterStatus.name())
            .map(|v| flag(v.eq_ignore_ascii_case("ON"))),
    );
    b.one(
        &c::SEMISYNC_CLIENTS,
        st(StatusVar::RplSemiSyncMasterClients),
    );
    b.one(&c::REPLICAS_CONNECTED, st(StatusVar::SlavesConnected));
    b.one(
        &c::REPLICATION_RETRIED,
        st(StatusVar::SlaveRetriedTransactions),
    );
    b.add(
        &c::SEMISYNC_TRANSACTIONS,
        [
            ("yes", StatusVar::RplSemiSyncMasterYesTx),
            ("no", StatusVar::RplSemiSyncMasterNoTx),
        ]
        .into_iter()
        .filter_map(|(l, v)| Some(([l], st(v)?))),
    );
    b.one(
        &c::SEMISYNC_FALLBACKS,
        st(StatusVar::RplSemiSyncMasterNoTimes),
    );
}

/// A Galera node's state, flow control and queues (nothing unless `wsrep_on = ON`).
fn galera(b: &mut Builder, f: &powerdiag_rules::MariadbFacts) {
    if !f.var_bool(Var::WsrepOn).unwrap_or(false) {
        return;
    }
    let flag = |on: bool| if on { 1.0 } else { 0.0 };
    let is = |v: StatusVar, want: &str| {
        f.status_str(v)
            .ok()
            .map(|s| flag(s.eq_ignore_ascii_case(want)))
    };
    let num = |v: StatusVar| f.status_f64(v).ok();
    b.one(&c::GALERA_CLUSTER_SIZE, num(StatusVar::WsrepClusterSize));
    b.one(
        &c::GALERA_PRIMARY,
        is(StatusVar::WsrepClusterStatus, "Primary"),
    );
    b.one(
        &c::GALERA_SYNCED,
        is(StatusVar::WsrepLocalStateComment, "Synced"),
    );
    b.one(&c::GALERA_READY, is(StatusVar::WsrepReady, "ON"));
    b.one(
        &c::GALERA_DESYNC,
        f.var_bool(Var::WsrepDesync).ok().map(flag),
    );
    b.one(
        &c::GALERA_FC_PAUSED,
        num(StatusVar::WsrepFlowControlPausedNs).map(|ns| ns / 1e9),
    );
    b.one(&c::GALERA_FC_SENT, num(StatusVar::WsrepFlowControlSent));
    b.one(&c::GALERA_FC_RECV, num(StatusVar::WsrepFlowControlRecv));
    b.one(&c::GALERA_RECV_QUEUE, num(StatusVar::WsrepLocalRecvQueue));
    b.one(&c::GALERA_SEND_QUEUE, num(StatusVar::WsrepLocalSendQueue));
    b.one(&c::GALERA_CERT_DEPS, num(StatusVar::WsrepCertDepsDistance));
    b.one(
        &c::GALERA_APPLIERS,
        f.var_u64(Var::WsrepSlaveThreads).ok().map(|t| t as f64),
    );
}

/// Statement text in the blocker's info series, characters.
const BLOCKER_STATEMENT_CHARS: usize = 64;

/// Who waits (per kind: how many, the longest) and, while a queue exists, who blocks it.
/// Without a read (nothing could wait) the row count is the status read's
/// `Innodb_row_lock_current_waits` and every other kind is 0.
fn locks(b: &mut Builder, l: &powerdiag_rules::Locks, row_waits: Option<u64>) {
    use powerdiag_rules::{LockKind, LockScan};
    let kinds = [
        LockKind::Row,
        LockKind::Metadata,
        LockKind::OtherMetadata,
        LockKind::Table,
    ];
    let quiet = matches!(l.scan, LockScan::Quiet { .. });
    b.add(
        &c::LOCK_WAITING_SESSIONS,
        kinds.map(|k| {
            let n = match (quiet, k) {
                (true, LockKind::Row) => row_waits.unwrap_or(0) as f64,
                _ => l.waiting(k) as f64,
            };
            ([k.label()], n)
        }),
    );
    b.add(
        &c::LOCK_OLDEST_WAIT,
        kinds.map(|k| {
            let oldest = l.waits_of(k).first().map_or(0.0, |w| w.seconds);
            ([k.label()], oldest)
        }),
    );
    b.add(
        &c::LOCK_BLOCKER_INFO,
        l.roots().into_iter().take(5).map(|r| {
            let s = l.session(r.id);
            (
                [
                    r.id.to_string(),
                    s.map(|s| cut(&s.user, 64)).unwrap_or_default(),
                    s.map(|s| cut(&s.host, 64)).unwrap_or_default(),
                    s.map(|s| {
                        if s.idle_in_transaction() {
                            "idle in transaction".to_owned()
                        } else {
                            cut(&s.command, 32)
                        }
                    })
                    .unwrap_or_default(),
                    s.and_then(|s| s.statement.as_deref())
                        .map(|st| cut(st, BLOCKER_STATEMENT_CHARS))
                        .unwrap_or_default(),
                ],
                r.queued.len() as f64,
            )
        }),
    );
}

/// The vector probe's results, in the sample that ran it (the agent probes on its own, slower
/// schedule, so these series exist for one sample per probe interval: query them with
/// `last_over_time(...[probe interval])`).
fn probe(b: &mut Builder, p: &powerdiag_rules::Probe) {
    let mut latency = Vec::new();
    let mut rebuilds = Vec::new();
    let mut queries = Vec::new();
    for i in &p.indexes {
        let id = [i.schema.as_str(), i.table.as_str(), i.index.as_str()];
        for (pass, repeat) in [("first", false), ("repeat", true)] {
            let lat: Vec<u64> = i
                .queries
                .iter()
                .filter(|q| q.repeat == repeat)
                .map(|q| q.latency_us)
                .collect();
            if lat.is_empty() {
                continue;
            }
            let [s, t, x] = id;
            queries.push(([s, t, x, pass], lat.len() as f64));
            for (pct, v) in percentiles(lat) {
                latency.push(([s, t, x, pass, pct], v as f64 / 1e6));
            }
        }
        if !i.queries.is_empty() {
            rebuilds.push((
                id,
                i.queries.iter().map(|q| q.handler_read_last).sum::<u64>() as f64,
            ));
        }
    }
    b.add(&c::PROBE_LATENCY, latency);
    b.add(&c::PROBE_QUERIES, queries);
    b.add(&c::PROBE_REBUILDS, rebuilds);
}

/// The median, 90th percentile and maximum (nearest rank) of `v`. Exported as a gauge with a
/// `percentile` label, not a summary: these describe one probe's queries, and a summary's
/// `quantile` series need running `_sum`/`_count` counters (promtool rejects `quantile` on a
/// gauge).
fn percentiles(mut v: Vec<u64>) -> [(&'static str, u64); 3] {
    v.sort_unstable();
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    [("50", rank(0.5)), ("90", rank(0.9)), ("100", rank(1.0))]
}

fn os(b: &mut Builder, s: &Snapshot) {
    let Ok(o) = s.os.as_ref() else { return };
    if let Ok(cpu) = o.cpu.as_ref() {
        let hz = |v: Option<f64>| v.map(|m| m * 1e6);
        b.one(&c::CPU_FREQUENCY_NOMINAL, hz(cpu.nominal_mhz));
        b.one(
            &c::CPU_FREQUENCY_EFFECTIVE,
            hz(cpu.measured_mhz().map(|(m, _)| m)),
        );
        b.one(&c::CPU_FREQUENCY_CURRENT, hz(cpu.current_mhz));
        b.one(&c::CPU_THREADS, Some(f64::from(cpu.threads)));
        b.one(
            &c::CPU_THREADS_PER_CORE,
            cpu.threads_per_core.map(f64::from),
        );
    }
    if let Ok(t) = o.cpu_time.as_ref() {
        b.one(&c::CPU_STEAL_RATIO, t.steal_share);
        b.one(&c::CPU_BUSY_RATIO, t.busy_share);
        if let Some(secs) = &t.since_boot_seconds {
            b.add(&c::CPU_SECONDS, secs.modes().map(|(mode, v)| ([mode], v)));
        }
    }
    if let Ok(Some(p)) = o.partition.as_ref() {
        let mode = if p.shared { "shared" } else { "dedicated" };
        let yes = |x: bool| if x { "true" } else { "false" };
        b.add(
            &c::LPAR_INFO,
            [([mode, yes(p.capped), yes(p.donating)], 1.0)],
        );
        b.one(&c::LPAR_ENTITLED_CAPACITY, p.entitled_capacity);
        b.one(&c::LPAR_ONLINE_VCPUS, p.online_vcpus.map(f64::from));
    }
    if let Ok(mem) = o.memory.as_ref() {
        b.one(&c::MEMORY_BASE_PAGE, mem.base_page_bytes.map(|v| v as f64));
        b.one(&c::MEMORY_AVAILABLE, mem.available_bytes.map(|v| v as f64));
        b.one(&c::SWAP_SIZE, mem.swap_total_bytes.map(|v| v as f64));
        b.one(&c::SWAP_FREE, mem.swap_free_bytes.map(|v| v as f64));
        if let Some(thp) = &mem.thp_enabled {
            b.add(
                &c::THP_INFO,
                [([thp.as_str(), mem.thp_defrag.as_deref().unwrap_or("")], 1.0)],
            );
        }
    }
    if let Ok(a) = o.swap.as_ref() {
        b.add(
            &c::SWAP_PAGES,
            [
                (["in"], a.total_pages_in as f64),
                (["out"], a.total_pages_out as f64),
            ],
        );
    }
    if let Ok(filesystems) = o.storage.as_ref() {
        // One family per metric: every series of a metric in one `add`.
        let (mut size, mut avail, mut busy, mut queue) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut files, mut files_free) = (Vec::new(), Vec::new());
        for f in filesystems {
            let mount = f.mount_point.as_deref().unwrap_or(&f.path);
            for role in &f.roles {
                if f.space_unread.is_none() {
                    size.push(([role.as_str(), mount], f.total_bytes as f64));
                    avail.push(([role.as_str(), mount], f.available_bytes as f64));
                }
                if let (Some(t), Some(a)) = (f.inodes_total, f.inodes_available) {
                    files.push(([role.as_str(), mount], t as f64));
                    files_free.push(([role.as_str(), mount], a as f64));
                }
                if let (Some(b), Some(q), Some(dev)) =
                    (f.busy_share, f.avg_in_flight, f.device.as_deref())
                {
                    busy.push(([role.as_str(), dev], b));
                    queue.push(([role.as_str(), dev], q));
                }
            }
        }
        b.add(&c::FILESYSTEM_SIZE, size);
        b.add(&c::FILESYSTEM_AVAIL, avail);
        b.add(&c::FILESYSTEM_FILES, files);
        b.add(&c::FILESYSTEM_FILES_FREE, files_free);
        b.add(&c::DISK_BUSY_RATIO, busy);
        b.add(&c::DISK_IN_FLIGHT, queue);
    }
    if let Ok(s) = o.saturation.as_ref() {
        b.one(
            &c::CPU_PRESSURE_WAITING,
            s.pressure.map(|p| p.total_us as f64 / 1e6),
        );
        if let Some(load) = s.load {
            b.add(
                &c::LOAD_AVERAGE,
                [(["1m"], load[0]), (["5m"], load[1]), (["15m"], load[2])],
            );
        }
        b.one(&c::PROCS_RUNNING, s.procs_running.map(f64::from));
        if let Some(p) = &s.process {
            b.one(&c::MARIADBD_CPUS_ALLOWED, Some(p.allowed_cpus));
            b.one(&c::MARIADBD_CPUS_USED, Some(p.cpus_used()));
        }
    }
    if let Ok(p) = o.process.as_ref() {
        b.one(&c::MARIADBD_SWAP, p.swap_bytes.map(|v| v as f64));
        b.one(&c::MARIADBD_RESIDENT, p.rss_bytes.map(|v| v as f64));
        b.one(&c::MARIADBD_ANON_HUGE, p.anon_huge_bytes.map(|v| v as f64));
        let mut pages: Vec<([&str; 1], f64)> = [
            ("data", p.data_page_bytes),
            ("text", p.text_page_bytes),
            ("stack", p.stack_page_bytes),
        ]
        .into_iter()
        .filter_map(|(segment, v)| Some(([segment], v? as f64)))
        .collect();
        if pages.is_empty()
            && let Some(k) = p.kernel_page_sizes.first()
        {
            pages.push((["all"], *k as f64));
        }
        b.add(&c::MARIADBD_PAGE_SIZE, pages);
    }
    if let Ok(counters) = o.counters.as_ref() {
        b.add(
            &c::MARIADBD_PERF_EVENTS,
            counters
                .events
                .iter()
                .filter_map(|e| Some(([e.name.as_str()], e.value? as f64))),
        );
        b.one(&c::MARIADBD_PERF_WINDOW, Some(counters.window_seconds));
    }
}

/// The agent's own process (Linux), as client_golang names it.
fn process(b: &mut Builder, p: &ProcessStats) {
    let f = |v: Option<u64>| v.map(|v| v as f64);
    b.one(&c::PROCESS_CPU_SECONDS, p.cpu_seconds);
    b.one(&c::PROCESS_OPEN_FDS, f(p.open_fds));
    b.one(&c::PROCESS_MAX_FDS, f(p.max_fds));
    b.one(&c::PROCESS_VIRTUAL_MEMORY, f(p.virtual_memory_bytes));
    b.one(&c::PROCESS_RESIDENT_MEMORY, f(p.resident_memory_bytes));
    b.one(&c::PROCESS_START_TIME, p.start_time_seconds);
}

/// Longest digest text in the info metric's label (characters, before escaping).
const DIGEST_TEXT_LABEL_CHARS: usize = 200;

/// A label value from a long outside text (digest text): whitespace and control characters
/// collapsed and cut by `display_text`; the encoder escapes it like every label value.
fn cut(raw: &str, max_chars: usize) -> String {
    powerdiag_rules::display_text(raw, max_chars)
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
        [
            cut(d.schema.as_deref().unwrap_or(""), 64),
            cut(&d.digest, 64),
        ]
    };
    let series = |v: fn(&powerdiag_rules::DigestCounters) -> f64| {
        st.counters.iter().map(move |d| (key(d), v(d)))
    };
    b.add(&c::STATEMENT_CALLS, series(|d| d.calls as f64));
    b.add(&c::STATEMENT_SECONDS, series(|d| d.time_us as f64 / 1e6));
    b.add(
        &c::STATEMENT_ROWS_EXAMINED,
        series(|d| d.rows_examined as f64),
    );
    b.add(&c::STATEMENT_ROWS_SENT, series(|d| d.rows_sent as f64));
    b.add(&c::STATEMENT_NO_INDEX, series(|d| d.no_index_used as f64));
    b.add(
        &c::STATEMENT_INFO,
        st.counters.iter().filter(|d| d.digest != "other").map(|d| {
            let [schema, digest] = key(d);
            ([schema, digest, cut(&d.text, DIGEST_TEXT_LABEL_CHARS)], 1.0)
        }),
    );
}

/// The Prometheus text format (0.0.4) of an OpenMetrics body: no `# UNIT` lines, and counter
/// families named by their `_total` sample in `# HELP`/`# TYPE` (OpenMetrics names the family
/// without it). Done at most once per sample (on the first scrape that asks), not per scrape.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
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

/// The scrape body: the encoded sample (OpenMetrics, or the Prometheus text of it) followed by
/// [`scrape_lines`].
pub fn render(
    encoded: &str,
    taken_at: Option<SystemTime>,
    now: SystemTime,
    openmetrics: bool,
    reload: &ReloadStatus,
) -> String {
    let mut out = String::with_capacity(encoded.len() + 512);
    out.push_str(encoded);
    out.push_str(&scrape_lines(taken_at, now, openmetrics, reload));
    out
}

/// What a scrape adds after the encoded sample: the sample's age now, the last reload's
/// outcome, and `# EOF` for OpenMetrics.
pub fn scrape_lines(
    taken_at: Option<SystemTime>,
    now: SystemTime,
    openmetrics: bool,
    reload: &ReloadStatus,
) -> String {
    let mut out = String::with_capacity(512);
    let mut gauge = |m: &Metric<0>, value: f64| {
        let _ = write!(
            out,
            "# HELP {n} {h}.\n# TYPE {n} gauge\n",
            n = m.name,
            h = m.help
        );
        if let (true, Some(unit)) = (openmetrics, m.unit) {
            let _ = writeln!(out, "# UNIT {} {unit}", m.name);
        }
        let _ = writeln!(out, "{} {value}", m.name);
    };
    if let Some(t) = taken_at {
        let age = now.duration_since(t).unwrap_or_default().as_secs_f64();
        gauge(&c::SAMPLE_AGE, age);
    }
    gauge(
        &c::CONFIG_RELOAD_SUCCESS,
        if reload.successful { 1.0 } else { 0.0 },
    );
    gauge(&c::CONFIG_RELOAD_TIME, reload.success_timestamp);
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The outcome of the last configuration load (start-up or SIGHUP), exported on every scrape
/// as `powerdiag_config_last_reload_successful` and its timestamp, as Prometheus and
/// Alertmanager export theirs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReloadStatus {
    pub successful: bool,
    /// Unix time of the last load that succeeded.
    pub success_timestamp: f64,
}

impl ReloadStatus {
    /// A successful load at `at`.
    pub fn loaded(at: SystemTime) -> ReloadStatus {
        ReloadStatus {
            successful: true,
            success_timestamp: at
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerdiag_rules::{evaluate, testing::*};

    fn encode(s: &Snapshot, taken_at: SystemTime, duration: Duration, sql: u32) -> String {
        encode_sample(&SampleMetrics {
            snapshot: s,
            report: &evaluate(s),
            settings: &Settings::default(),
            taken_at,
            duration,
            interval: Duration::from_secs(15),
            sql_statements: sql,
            build: &BuildInfo::default(),
            process: &ProcessStats::default(),
        })
    }

    fn sample() -> String {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .vector_index(big_vector_index())
            .status(StatusVar::HandlerReadLast, "42")
            .build();
        encode(
            &s,
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
            "powerdiag_build_info{version=\"0.1.0\",revision=\"unknown\",target=\"unknown\",rustc=\"unknown\"} 1",
            "# UNIT powerdiag_sample_duration_seconds seconds",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        assert!(!text.contains("# EOF"), "EOF is added per scrape");
        // No process facts given: no process_* series (other OSes).
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("process_") || l.contains(" process_")),
            "{text}"
        );
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
        let text = encode(&s, SystemTime::UNIX_EPOCH, Duration::ZERO, 1);
        let id = "schema=\"app\",table=\"docs\",index=\"e\"";
        for needle in [
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",percentile=\"50\"}} 0.005"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",percentile=\"90\"}} 0.009"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"first\",percentile=\"100\"}} 0.01"
            ),
            format!(
                "powerdiag_mariadb_probe_query_latency_seconds{{{id},pass=\"repeat\",percentile=\"100\"}} 0.0005"
            ),
            format!("powerdiag_mariadb_probe_queries{{{id},pass=\"first\"}} 10"),
            format!("powerdiag_mariadb_probe_cache_rebuilds{{{id}}} 10"),
        ] {
            assert!(text.contains(&needle), "{needle} missing from\n{text}");
        }
        assert!(!text.contains("quantile"), "{text}");
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
        let text = encode(&s, SystemTime::UNIX_EPOCH, Duration::ZERO, 1);
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

    /// Every label of every metric goes through the same escaping: a vector index's schema,
    /// table and index name, the server version, perf event names, THP settings.
    #[test]
    fn every_label_value_is_escaped() {
        let hostile = "x\"} 1\npowerdiag_check{code=\"PD401\",status=\"fail\",s=\"\\";
        let escaped =
            "x\\\"} 1\\npowerdiag_check{code=\\\"PD401\\\",status=\\\"fail\\\",s=\\\"\\\\";
        let mut index = big_vector_index();
        index.schema = hostile.into();
        index.table = hostile.into();
        index.index = hostile.into();
        let mut s = SnapshotBuilder::new()
            .mariadb(&format!("11.8.6-MariaDB{hostile}"))
            .vector_index(index)
            .build();
        if let Gathered::Available(o) = &mut s.os {
            if let Gathered::Available(m) = &mut o.memory {
                m.thp_enabled = Some(hostile.into());
            }
            if let Gathered::Available(c) = &mut o.counters {
                c.events[0].name = hostile.into();
                c.events[0].value = Some(7);
            }
        }
        s.collectors.push(powerdiag_rules::CollectorRun {
            name: hostile.into(),
            duration_seconds: 0.1,
            success: true,
            error: None,
        });
        let text = encode(&s, SystemTime::UNIX_EPOCH, Duration::ZERO, 1);
        // Every line is a comment or one whole sample of a catalogued metric; the only
        // powerdiag_check series are the rules'.
        let mut checks = 0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                c::find(name).is_some(),
                "forged or broken line: {line}\n{text}"
            );
            checks += usize::from(name == c::CHECK.name);
        }
        assert_eq!(checks, evaluate(&s).checks.len(), "{text}");
        for (metric, label) in [
            ("powerdiag_mariadb_vector_index_graph_bytes", "schema"),
            ("powerdiag_mariadb_vector_index_graph_bytes", "table"),
            ("powerdiag_mariadb_vector_index_graph_bytes", "index"),
            ("powerdiag_transparent_hugepage_info", "enabled"),
            ("powerdiag_mariadbd_perf_events", "event"),
            ("powerdiag_collector_success", "collector"),
        ] {
            let want = format!("{label}=\"{escaped}\"");
            assert!(
                text.lines()
                    .any(|l| l.starts_with(metric) && l.contains(&want)),
                "{metric} {want} missing from\n{text}"
            );
        }
        assert!(
            text.contains(&format!("version=\"11.8.6-MariaDB{escaped}\"")),
            "{text}"
        );
    }

    #[test]
    fn escaping() {
        let e = |s: &str| {
            let mut out = String::new();
            escape_into(&mut out, s).unwrap();
            out
        };
        assert_eq!(e("plain"), "plain");
        assert_eq!(e("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(e("\n\n"), "\\n\\n");
        assert_eq!(e("é\"}"), "é\\\"}");
        assert_eq!(e(""), "");
    }

    #[test]
    fn a_filesystem_whose_space_is_unknown_has_no_size_series() {
        let mut s = SnapshotBuilder::new().build();
        if let Gathered::Available(o) = &mut s.os
            && let Gathered::Available(fs) = &mut o.storage
        {
            let mut unread = fs[0].clone();
            unread.roles = vec!["tmpdir".into()];
            unread.mount_point = Some("/srv/tmp".into());
            unread.total_bytes = 0;
            unread.available_bytes = 0;
            unread.inodes_total = None;
            unread.inodes_available = None;
            unread.space_unread = Some("/srv/tmp: permission denied".into());
            fs.push(unread);
        }
        let text = encode(&s, SystemTime::UNIX_EPOCH, Duration::ZERO, 1);
        let series = |role: &str| {
            text.lines()
                .filter(|l| l.starts_with("powerdiag_filesystem_") && l.contains(role))
                .count()
        };
        // datadir's size, free space and inodes; nothing for the unread tmpdir (0 would read as
        // full).
        assert_eq!(series("role=\"datadir\""), 4, "{text}");
        assert_eq!(series("role=\"tmpdir\""), 0, "{text}");
    }

    #[test]
    fn cpu_seconds_and_own_process() {
        let mut s = SnapshotBuilder::new().build();
        if let Gathered::Available(o) = &mut s.os
            && let Gathered::Available(t) = &mut o.cpu_time
        {
            t.since_boot_seconds = Some(powerdiag_rules::CpuSeconds {
                user: 12.5,
                steal: 0.25,
                ..Default::default()
            });
        }
        let text = encode_sample(&SampleMetrics {
            snapshot: &s,
            report: &evaluate(&s),
            settings: &Settings::default(),
            taken_at: SystemTime::UNIX_EPOCH,
            duration: Duration::ZERO,
            interval: Duration::from_secs(15),
            sql_statements: 0,
            build: &BuildInfo::default(),
            process: &ProcessStats {
                cpu_seconds: Some(1.5),
                open_fds: Some(9),
                max_fds: Some(1024),
                virtual_memory_bytes: Some(1 << 30),
                resident_memory_bytes: Some(10 << 20),
                start_time_seconds: Some(1_700_000_000.5),
            },
        });
        let prom = to_prometheus_text(&text);
        for needle in [
            "# TYPE powerdiag_cpu_seconds_total counter",
            "powerdiag_cpu_seconds_total{mode=\"user\"} 12.5",
            "powerdiag_cpu_seconds_total{mode=\"steal\"} 0.25",
            "powerdiag_cpu_seconds_total{mode=\"idle\"} 0",
            "# TYPE process_cpu_seconds_total counter",
            "process_cpu_seconds_total 1.5",
            "process_open_fds 9",
            "process_max_fds 1024",
            "process_resident_memory_bytes 10485760",
            "process_virtual_memory_bytes 1073741824",
            "process_start_time_seconds 1700000000.5",
        ] {
            assert!(prom.contains(needle), "{needle} missing from\n{prom}");
        }
    }

    #[test]
    fn render_adds_age_and_the_right_ending() {
        let enc = sample();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut reload = ReloadStatus::loaded(t);
        let om = render(&enc, Some(t), t + Duration::from_secs(7), true, &reload);
        assert!(om.contains("powerdiag_sample_age_seconds 7\n"), "{om}");
        assert!(
            om.ends_with(
                "powerdiag_config_last_reload_successful 1\n\
                 # HELP powerdiag_config_last_reload_success_timestamp_seconds Unix time of the last successful load of the configuration files.\n\
                 # TYPE powerdiag_config_last_reload_success_timestamp_seconds gauge\n\
                 # UNIT powerdiag_config_last_reload_success_timestamp_seconds seconds\n\
                 powerdiag_config_last_reload_success_timestamp_seconds 1000\n# EOF\n"
            ),
            "{om}"
        );
        // A failed reload keeps the last success's time.
        reload.successful = false;
        let text = render(
            &to_prometheus_text(&enc),
            Some(t),
            t + Duration::from_secs(7),
            false,
            &reload,
        );
        assert!(
            text.contains("powerdiag_config_last_reload_successful 0\n"),
            "{text}"
        );
        assert!(text.contains("powerdiag_config_last_reload_success_timestamp_seconds 1000\n"));
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
        assert!(
            text.contains("# TYPE powerdiag_mariadb_handler_read_last_total counter"),
            "{text}"
        );
    }

    /// Every series the encoder writes is of a catalogued metric with exactly its labels.
    #[test]
    fn the_encoder_writes_only_catalogued_metrics() {
        let text = to_prometheus_text(&sample());
        let mut names = HashSet::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let entry = c::find(name).unwrap_or_else(|| panic!("{name} is not catalogued"));
            let labels: Vec<&str> = line
                .split_once('{')
                .map(|(_, rest)| {
                    rest.split(",")
                        .filter_map(|kv| kv.split_once("=\"").map(|(k, _)| k))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(labels, entry.labels, "{line}");
            names.insert(name);
        }
        assert!(names.len() > 20, "{names:?}");
    }
}
