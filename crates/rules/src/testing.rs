//! [`SnapshotBuilder`]: concise snapshots for rule tests, here and in the other crates.

use crate::{
    Allocator, Cache, Compiler, CpuFacts, CpuPressure, CpuSaturation, CpuTime, DbError,
    DbErrorKind, Digest, Filesystem, Gathered, HostFacts, MariadbFacts, MariadbSection,
    MemoryFacts, NumaNode, OsFacts, PerfCounters, PerfEvent, Probe, ProcessCpu, ProcessFacts,
    SCHEMA_VERSION, ServerVersion, Snapshot, StatementPeriod, StatementTotals, Statements,
    StatusVar, SwapActivity, Topology, Var, VectorIndex,
};

/// Builds a [`Snapshot`]: a Linux x86-64 host with 8 threads and 16 GiB, and (with
/// [`SnapshotBuilder::mariadb`]) a reachable server with the stock defaults of its version.
#[derive(Debug, Clone)]
pub struct SnapshotBuilder {
    snapshot: Snapshot,
}

impl Default for SnapshotBuilder {
    fn default() -> Self {
        SnapshotBuilder::new()
    }
}

impl SnapshotBuilder {
    /// A host without a database.
    pub fn new() -> SnapshotBuilder {
        let mut snapshot = Snapshot::new("test");
        snapshot.schema_version = SCHEMA_VERSION;
        snapshot.host = Gathered::Available(HostFacts {
            hostname: "db1".into(),
            os: "linux".into(),
            os_release: Some("Debian GNU/Linux 12 (bookworm)".into()),
            kernel: Some("6.1.0".into()),
            arch: "x86_64".into(),
            hardware_threads: Some(8),
            usable_threads: Some(8),
            memory_total_bytes: Some(16 << 30),
            memory_available_bytes: Some(8 << 30),
            page_size_bytes: Some(4096),
        });
        snapshot.os = Gathered::Available(linux_os());
        snapshot.mariadb.error = Some(DbError {
            kind: DbErrorKind::ConnectionRefused,
            message: "connection refused at 127.0.0.1:3306".into(),
            hint: "start the server or pass --mariadb.url".into(),
        });
        SnapshotBuilder { snapshot }
    }

    /// Adds a reachable MariaDB server of `version` with its default settings.
    pub fn mariadb(mut self, version: &str) -> SnapshotBuilder {
        let v = ServerVersion::parse(version, "mariadb.org binary distribution")
            .unwrap_or_else(|| panic!("bad test version {version}"));
        let vector = v.has_vector_indexes();
        let mut facts = MariadbFacts {
            version: v,
            same_host: Some(true),
            variables: Default::default(),
            status: Default::default(),
            vector_indexes: Gathered::Available(Vec::new()),
            probe: Gathered::Unavailable("probing disabled (--no-probe)".into()),
            statements: Gathered::Unavailable("statement digests were not read".into()),
            status_window: Gathered::Unavailable(
                "no sample window: doctor --sample-window 0".into(),
            ),
            innodb_size: Gathered::Unavailable("not read in this test".into()),
            transactions: Gathered::Unavailable("not read in this test".into()),
            locks: Gathered::Unavailable("not read in this test".into()),
            last_deadlock: Gathered::Unavailable("not read in this test".into()),
            replication: Gathered::Unavailable("not read in this test".into()),
            error_log: Gathered::Available(crate::ErrorLog {
                path: "/var/lib/mysql/db1.err".into(),
                read: "the last 4.0 MiB of 1.2 MiB".into(),
                covers_from: Some(1_700_000_000),
                events: Vec::new(),
                dropped: 0,
                counts: Default::default(),
            }),
            schema: Gathered::Unavailable("not read in this test".into()),
            notes: Vec::new(),
        };
        let mut defaults = vec![
            (Var::Version, version),
            (Var::VersionCompileOs, "debian-linux-gnu"),
            (Var::VersionCompileMachine, "x86_64"),
            (Var::InnodbChecksumAlgorithm, "full_crc32"),
            (Var::InnodbUseNativeAio, "ON"),
            (Var::PerformanceSchema, "OFF"),
            (Var::HaveProfiling, "YES"),
            (Var::InnodbBufferPoolSize, "134217728"),
            // MariaDB 10.11/11.8 defaults (SHOW GLOBAL VARIABLES of a fresh server).
            (Var::MaxConnections, "151"),
            (Var::ThreadHandling, "one-thread-per-connection"),
            (Var::InnodbPageSize, "16384"),
            (Var::InnodbFlushMethod, "O_DIRECT"),
            (Var::InnodbLogFileSize, "100663296"),
            (Var::InnodbLogBufferSize, "16777216"),
            (Var::InnodbBufferPoolSizeMax, "8796093022208"),
            (Var::InnodbStatsPersistent, "ON"),
            (Var::ThreadCacheSize, "151"),
            (Var::TableOpenCache, "2000"),
            (Var::TableDefinitionCache, "400"),
            (Var::OpenFilesLimit, "32183"),
            (Var::QueryCacheType, "OFF"),
            (Var::QueryCacheSize, "1048576"),
            (Var::SortBufferSize, "2097152"),
            (Var::TmpTableSize, "16777216"),
            (Var::MaxHeapTableSize, "16777216"),
            (Var::JoinBufferSize, "262144"),
            (Var::ReadBufferSize, "131072"),
            (Var::ReadRndBufferSize, "262144"),
            (Var::ThreadStack, "299008"),
            (Var::BinlogCacheSize, "32768"),
            (Var::LogBin, "OFF"),
            (Var::KeyBufferSize, "134217728"),
            (Var::AriaPagecacheBufferSize, "134217728"),
        ];
        if vector {
            defaults.extend([
                (Var::MhnswMaxCacheSize, "16777216"),
                (Var::MhnswDefaultM, "6"),
                (Var::MhnswDefaultDistance, "euclidean"),
            ]);
        }
        for (var, value) in defaults {
            facts
                .variables
                .insert(var.name().to_owned(), value.to_owned());
        }
        self.snapshot.mariadb = MariadbSection {
            target: Some("root@127.0.0.1:3306".into()),
            reachable: true,
            error: None,
            attempts: Vec::new(),
            facts: Some(facts),
        };
        self
    }

    fn facts(&mut self) -> &mut MariadbFacts {
        self.snapshot
            .mariadb
            .facts
            .as_mut()
            .expect("call .mariadb(version) first")
    }

    pub fn var(mut self, var: Var, value: &str) -> SnapshotBuilder {
        self.facts()
            .variables
            .insert(var.name().to_owned(), value.to_owned());
        self
    }

    pub fn without_var(mut self, var: Var) -> SnapshotBuilder {
        self.facts().variables.remove(var.name());
        self
    }

    pub fn status(mut self, s: StatusVar, value: &str) -> SnapshotBuilder {
        self.facts()
            .status
            .insert(s.name().to_owned(), value.to_owned());
        self
    }

    /// A status window of `seconds` whose first read is `start` (the end is the status set
    /// with [`SnapshotBuilder::status`]); names not given start equal to their end value, so
    /// only the given counters move.
    pub fn window(mut self, seconds: f64, start: &[(StatusVar, &str)]) -> SnapshotBuilder {
        let f = self.facts();
        let mut first = f.status.clone();
        for (v, value) in start {
            first.insert(v.name().to_owned(), (*value).to_owned());
        }
        f.status_window = Gathered::Available(crate::StatusWindow {
            seconds,
            source: crate::WindowSource::Doctor,
            start: first,
            longer: Vec::new(),
            history: None,
        });
        self
    }

    /// A longer window of the agent's, ending at the same read: `start` as in
    /// [`SnapshotBuilder::window`] (which must come first).
    pub fn longer_window(mut self, seconds: f64, start: &[(StatusVar, &str)]) -> SnapshotBuilder {
        let f = self.facts();
        let mut first = f.status.clone();
        for (v, value) in start {
            first.insert(v.name().to_owned(), (*value).to_owned());
        }
        if let Gathered::Available(w) = &mut f.status_window {
            w.longer.push(crate::WindowStart {
                seconds,
                start: first,
            });
        }
        self
    }

    /// Taken by the agent: its windows are the agent's, and it never judges counters since
    /// start-up.
    pub fn by_agent(mut self) -> SnapshotBuilder {
        self.snapshot.origin = Some(crate::Origin::Agent);
        if let Some(f) = self.snapshot.mariadb.facts.as_mut()
            && let Gathered::Available(w) = &mut f.status_window
        {
            w.source = crate::WindowSource::Agent;
        }
        self
    }

    /// The InnoDB data and index size.
    pub fn innodb_size(mut self, data_bytes: u64, index_bytes: u64) -> SnapshotBuilder {
        self.facts().innodb_size = Gathered::Available(crate::InnodbSize {
            tables: 10,
            data_bytes,
            index_bytes,
            oldest_stats_age_seconds: Some(60),
            from_files: false,
        });
        self
    }

    /// The open transactions.
    pub fn transactions(mut self, t: crate::Transactions) -> SnapshotBuilder {
        self.facts().transactions = Gathered::Available(t);
        self
    }

    /// The lock waits.
    pub fn locks(mut self, l: crate::Locks) -> SnapshotBuilder {
        self.facts().locks = Gathered::Available(l);
        self
    }

    /// The replication connections (empty: not a replica).
    pub fn replication(mut self, connections: Vec<crate::ReplicaConnection>) -> SnapshotBuilder {
        self.facts().replication = Gathered::Available(crate::Replication {
            scan: crate::ReplicaScan::Read,
            connections,
            earlier: Vec::new(),
        });
        self
    }

    /// Earlier readings of the replication connections (`replication` first), oldest first.
    pub fn replication_earlier(mut self, earlier: Vec<crate::LagReading>) -> SnapshotBuilder {
        if let Gathered::Available(r) = &mut self.facts().replication {
            r.earlier = earlier;
        }
        self
    }

    /// The schema read: `tables` listed, as many counted.
    pub fn schema(mut self, tables: Vec<crate::Table>) -> SnapshotBuilder {
        let n = tables.len() as u64;
        self.facts().schema = Gathered::Available(crate::Schema {
            source: "test".into(),
            tables_total: n,
            innodb_tables: n,
            candidates: n,
            tables,
            ..Default::default()
        });
        self
    }

    /// The last deadlock (`None`: the server detected none).
    pub fn last_deadlock(mut self, d: Option<crate::Deadlock>) -> SnapshotBuilder {
        self.facts().last_deadlock = Gathered::Available(d);
        self
    }

    pub fn vector_index(mut self, index: VectorIndex) -> SnapshotBuilder {
        if let Gathered::Available(v) = &mut self.facts().vector_indexes {
            v.push(index);
        } else {
            self.facts().vector_indexes = Gathered::Available(vec![index]);
        }
        self
    }

    pub fn vector_indexes_unavailable(mut self, why: &str) -> SnapshotBuilder {
        self.facts().vector_indexes = Gathered::Unavailable(why.to_owned());
        self
    }

    /// Statement digests over the doctor's default period (since reset, a 15-minute window):
    /// `digests` busiest first; the totals are their sums plus `other_time_us` of statements
    /// not listed. Sets `performance_schema` ON.
    pub fn statements(mut self, digests: Vec<Digest>, other_time_us: u64) -> SnapshotBuilder {
        let total = StatementTotals {
            digests: digests.len() as u64 + u64::from(other_time_us > 0),
            calls: digests.iter().map(|d| d.calls).sum::<u64>() + u64::from(other_time_us > 0),
            time_us: digests.iter().map(|d| d.time_us).sum::<u64>() + other_time_us,
        };
        self.facts().statements = Gathered::Available(Statements {
            period: StatementPeriod::SinceReset,
            interval_seconds: None,
            window_seconds: 900,
            uptime_seconds: Some(3600),
            first_seen: Some("2026-01-01 10:00:00".into()),
            last_seen: Some("2026-01-01 11:00:00".into()),
            total,
            overflowed: false,
            limit: 100,
            digests,
            notes: Vec::new(),
            tables: Vec::new(),
            counters: Vec::new(),
            history: Vec::new(),
            samples_note: None,
        });
        self.var(Var::PerformanceSchema, "ON")
    }

    pub fn statements_unavailable(mut self, why: &str) -> SnapshotBuilder {
        self.facts().statements = Gathered::Unavailable(why.to_owned());
        self
    }

    pub fn probe(mut self, probe: Probe) -> SnapshotBuilder {
        self.facts().probe = Gathered::Available(probe);
        self
    }

    pub fn host(mut self, edit: impl FnOnce(&mut HostFacts)) -> SnapshotBuilder {
        if let Gathered::Available(h) = &mut self.snapshot.host {
            edit(h);
        }
        self
    }

    /// Edits the OS facts (a healthy 8-thread x86-64 Linux host by default, see [`linux_os`]).
    pub fn os(mut self, edit: impl FnOnce(&mut OsFacts)) -> SnapshotBuilder {
        if let Gathered::Available(o) = &mut self.snapshot.os {
            edit(o);
        }
        self
    }

    /// An AIX 7.3 host: the field report's POWER9 S924 shared LPAR, see [`aix_os`].
    pub fn aix(self) -> SnapshotBuilder {
        self.host(|h| {
            h.os = "aix".into();
            h.os_release = Some("AIX 7.3".into());
            h.kernel = Some("7.3".into());
            h.arch = "powerpc64".into();
            h.hardware_threads = Some(48);
            h.usable_threads = Some(48);
            h.memory_total_bytes = Some(64 << 30);
            h.page_size_bytes = Some(4096);
        })
        .os(|o| *o = aix_os())
    }

    /// Edits the mariadbd process facts (when they are available).
    pub fn process(self, edit: impl FnOnce(&mut ProcessFacts)) -> SnapshotBuilder {
        self.os(|o| {
            if let Gathered::Available(p) = &mut o.process {
                edit(p);
            }
        })
    }

    pub fn host_unavailable(mut self, why: &str) -> SnapshotBuilder {
        self.snapshot.host = Gathered::Unavailable(why.to_owned());
        self
    }

    pub fn remote_server(mut self) -> SnapshotBuilder {
        self.facts().same_host = Some(false);
        self
    }

    pub fn build(self) -> Snapshot {
        self.snapshot
    }
}

/// A 20,000 × 768-d index, M=6: about 32 MiB of graph, double the default cache.
pub fn big_vector_index() -> VectorIndex {
    VectorIndex {
        schema: "app".into(),
        table: "docs".into(),
        index: "e".into(),
        column: Some("e".into()),
        dimensions: Some(768),
        distance: Some("euclidean".into()),
        m: Some(6),
        rows: Some(20_000),
        rows_source: Some("innodb_sys_tablestats".into()),
        hidden_table: Some("app/docs#i#01".into()),
        hidden_table_bytes: Some(2276 * 16384),
        cache_overflows: None,
        cache_memory_bytes: None,
        size_source: None,
    }
}

/// A healthy x86-64 Linux host: 1 socket, 4 cores, SMT2, 32 MiB L3, one NUMA node, THP madvise,
/// mariadbd with 2 GiB resident and jemalloc, no steal, not a partition, counters unavailable.
pub fn linux_os() -> OsFacts {
    OsFacts {
        source: "live".into(),
        cpu: Gathered::Available(CpuFacts {
            model: Some("Intel(R) Xeon(R) Gold 6230".into()),
            architecture: "x86_64".into(),
            power: false,
            sockets: Some(1),
            cores: Some(4),
            threads: 8,
            threads_per_core: Some(2),
            smt_control: Some("on".into()),
            smt_active: Some(true),
            nominal_mhz: Some(2100.0),
            nominal_source: Some("cpufreq base_frequency".into()),
            current_mhz: Some(2800.0),
            busy_share: Some(0.7),
            governor: Some("performance".into()),
            ..Default::default()
        }),
        topology: Gathered::Available(Topology {
            caches: vec![Cache {
                level: 3,
                kind: "Unified".into(),
                size_bytes: Some(32 << 20),
                shared_cpu_list: "0-7".into(),
            }],
            l3_total_bytes: Some(32 << 20),
            l3_cpus: Some("0-7".into()),
            numa_nodes: vec![NumaNode {
                id: 0,
                cpu_list: "0-7".into(),
                cpus: 8,
                memory_total_bytes: 16 << 30,
                memory_free_bytes: None,
                unread: None,
            }],
            numa_unread: None,
        }),
        memory: Gathered::Available(MemoryFacts {
            base_page_bytes: Some(4096),
            thp_enabled: Some("madvise".into()),
            thp_defrag: Some("madvise".into()),
            hugepages_total: Some(0),
            hugepages_free: Some(0),
            hugepage_bytes: Some(2 << 20),
            page_sizes: vec![4096, 2 << 20],
            available_bytes: Some(20 << 30),
            swap_total_bytes: Some(2 << 30),
            swap_free_bytes: Some(2 << 30),
        }),
        process: Gathered::Available(ProcessFacts {
            pid: 4242,
            name: "mariadbd".into(),
            found_by: "pid_file".into(),
            rss_bytes: Some(2 << 30),
            anon_huge_bytes: Some(1 << 30),
            kernel_page_sizes: vec![4096],
            mmu_page_sizes: vec![4096],
            allocator: Some(Allocator::Jemalloc),
            allocator_evidence: Some("libjemalloc.so.2".into()),
            affinity: Some("0-7".into()),
            affinity_cpus: Some(8),
            threads: Some(40),
            ..Default::default()
        }),
        cpu_time: Gathered::Available(CpuTime {
            basis: "window 1.00 s".into(),
            steal_share: Some(0.0),
            busy_share: Some(0.7),
            ..Default::default()
        }),
        partition: Gathered::Available(None),
        counters: Gathered::Available(PerfCounters {
            window_seconds: 1.0,
            target: "mariadbd pid 4242, 40 threads".into(),
            events: ["instructions", "dTLB-load-misses"]
                .iter()
                .map(|n| PerfEvent {
                    name: (*n).into(),
                    value: None,
                    unavailable: Some(
                        "unavailable: no PMU for this event (perf_event_open ENOENT)".into(),
                    ),
                })
                .collect(),
        }),
        swap: Gathered::Available(SwapActivity {
            basis: "window 1.00 s".into(),
            pages_in: 0,
            pages_out: 0,
            total_pages_in: 120,
            total_pages_out: 300,
            page_bytes: Some(4096),
        }),
        storage: Gathered::Available(vec![Filesystem {
            roles: vec!["datadir".into(), "innodb_log_group_home_dir".into()],
            path: "/var/lib/mysql/".into(),
            mount_point: Some("/var/lib/mysql".into()),
            fs_type: Some("xfs".into()),
            device: Some("259:1 nvme0n1p1".into()),
            total_bytes: 500 << 30,
            available_bytes: 250 << 30,
            inodes_total: Some(262_144_000),
            inodes_available: Some(261_000_000),
            busy_share: Some(0.12),
            avg_in_flight: Some(0.3),
            io_basis: Some("window 1.00 s".into()),
            io_unread: None,
            space_unread: None,
        }]),
        saturation: Gathered::Available(CpuSaturation {
            online_cpus: Some(64),
            procs_running: Some(12),
            load: Some([10.5, 9.8, 9.1]),
            pressure: Some(CpuPressure {
                avg10: 0.02,
                avg60: 0.03,
                avg300: 0.02,
                window_share: Some(0.01),
                total_us: 123_456_789,
            }),
            pressure_unread: None,
            process: Some(ProcessCpu {
                basis: "window 1.00 s".into(),
                window_seconds: 1.0,
                ticks: 800,
                ticks_per_second: 100,
                allowed_cpus: 64.0,
                allowed_by: "online CPUs".into(),
                cgroup: None,
            }),
            process_unread: None,
        }),
    }
}

/// A POWER9 CPU at 2750 MHz nominal with `threads` logical CPUs, SMT `smt`.
pub fn power9_cpu(threads: u32, smt: u32) -> CpuFacts {
    CpuFacts {
        model: Some("POWER9 (architected), altivec supported".into()),
        architecture: "ppc64le".into(),
        power: true,
        sockets: Some(1),
        cores: Some(threads / smt.max(1)),
        threads,
        threads_per_core: Some(smt),
        smt_control: Some(if smt > 1 { "on" } else { "off" }.into()),
        smt_active: Some(smt > 1),
        nominal_mhz: Some(2750.0),
        nominal_source: Some("/proc/cpuinfo clock".into()),
        busy_share: Some(0.6),
        dscr_default: Some(0),
        ..Default::default()
    }
}

/// A PowerVM partition.
pub fn lpar(
    shared: bool,
    capped: bool,
    donating: bool,
    entitled: f64,
    vcpus: u32,
) -> crate::PartitionFacts {
    crate::PartitionFacts {
        shared,
        capped,
        donating,
        entitled_capacity: Some(entitled),
        online_vcpus: Some(vcpus),
        max_vcpus: Some(vcpus),
        smt_threads: Some(8),
        counters_basis: Some("since boot".into()),
        dispatches: Some(1_000_000),
        dispatch_dispersions: Some(10_000),
        ..Default::default()
    }
}

/// The field report's POWER9 S924 shapes as OS facts on a Linux LPAR.
pub fn on_power_lpar(o: &mut OsFacts, p: crate::PartitionFacts, threads: u32, smt: u32) {
    o.cpu = Gathered::Available(power9_cpu(threads, smt));
    o.partition = Gathered::Available(Some(p));
    if let Gathered::Available(m) = &mut o.memory {
        m.base_page_bytes = Some(65536);
    }
}

/// The field report's starting point on AIX, as the AIX collector reports it: a POWER9 S924
/// (2750 MHz nominal) shared uncapped LPAR with 12 virtual processors, entitlement 3.0, SMT4,
/// boosting to 3.8 GHz; mariadbd built with the AIX Toolbox GCC, on 4 KB data, text and stack
/// pages, without `LDR_CNTRL` in its environment.
pub fn aix_os() -> OsFacts {
    let mut partition = lpar(true, false, false, 3.0, 12);
    partition.smt_threads = Some(4);
    partition.pool_id = Some(0);
    partition.pool_cpus = Some(24.0);
    partition.counters_basis = Some("window 1.00 s".into());
    partition.dispatches = Some(200_000);
    partition.dispatch_dispersions = None;
    partition.involuntary_vcsw = Some(45_000);
    partition.voluntary_vcsw = Some(155_000);
    partition.phantom_interrupts = Some(1_200);
    OsFacts {
        source: "live".into(),
        cpu: Gathered::Available(CpuFacts {
            model: Some("PowerPC_POWER9".into()),
            architecture: "ppc64".into(),
            power: true,
            cores: Some(12),
            threads: 48,
            threads_per_core: Some(4),
            smt_control: Some("smt4".into()),
            smt_active: Some(true),
            nominal_mhz: Some(2750.0),
            nominal_source: Some("perfstat_partition_config processorMHz".into()),
            effective_mhz: Some(3800.0),
            effective_source: Some("SPURR/PURR over 1.00 s".into()),
            busy_share: Some(0.73),
            dscr_default: Some(0),
            ..Default::default()
        }),
        topology: Gathered::Unavailable(
            "unavailable: the AIX collector does not read cache and NUMA topology yet".into(),
        ),
        memory: Gathered::Available(MemoryFacts {
            base_page_bytes: Some(4096),
            page_sizes: vec![4096, 64 << 10, 16 << 20],
            ..Default::default()
        }),
        process: Gathered::Available(ProcessFacts {
            pid: 8_454_302,
            name: "mariadbd".into(),
            found_by: "pid_file".into(),
            rss_bytes: Some(6 << 30),
            data_page_bytes: Some(4096),
            text_page_bytes: Some(4096),
            stack_page_bytes: Some(4096),
            ldr_cntrl: Some(String::new()),
            allocator: Some(Allocator::Libc),
            allocator_evidence: Some("no jemalloc, tcmalloc or mimalloc library loaded".into()),
            compiler: Some(Compiler::Gcc),
            compiler_evidence: Some(
                "GCC runtime loaded: /opt/freeware/lib/pthread/ppc64/libstdc++.a[libstdc++.so.6] (AIX Toolbox)"
                    .into(),
            ),
            threads: Some(40),
            ..Default::default()
        }),
        cpu_time: Gathered::Available(CpuTime {
            basis: "window 1.00 s".into(),
            steal_share: None,
            busy_share: Some(0.73),
            ..Default::default()
        }),
        partition: Gathered::Available(Some(partition)),
        counters: Gathered::Unavailable(
            "unavailable: the AIX collector does not read hardware counters yet".into(),
        ),
        swap: Gathered::Unavailable(
            "unavailable: the AIX collector does not read paging-space activity yet".into(),
        ),
        storage: Gathered::Unavailable(
            "unavailable: the AIX collector does not read filesystems yet".into(),
        ),
        saturation: Gathered::Unavailable(
            "unavailable: the AIX collector does not read the run queue yet".into(),
        ),
    }
}

/// A rule's verdict on `snapshot` with the default limits: both arms of `check` are verdicts.
/// A healthy GTID replica connection named `name` (`""` the default one) of `127.0.0.1:3306`.
pub fn replica(name: &str) -> crate::ReplicaConnection {
    crate::ReplicaConnection {
        name: name.into(),
        source: "127.0.0.1:3306".into(),
        io_running: "Yes".into(),
        sql_running: "Yes".into(),
        io_state: "Waiting for master to send event".into(),
        sql_state: "Slave has read all relay log; waiting for more updates".into(),
        seconds_behind_master: Some(0),
        using_gtid: "Slave_Pos".into(),
        gtid_io_pos: "0-1-42".into(),
        gtid_slave_pos: "0-1-42".into(),
        read_position: "mariadb-bin.000001:4242".into(),
        exec_position: "mariadb-bin.000001:4242".into(),
        relay_log_space: Some(4096),
        parallel_mode: Some("optimistic".into()),
        sql_delay: Some(0),
        retried_transactions: Some(0),
        ..Default::default()
    }
}

pub fn verdict(rule: &dyn crate::Rule, snapshot: &Snapshot) -> crate::Verdict {
    verdict_with(rule, snapshot, &crate::Limits::DEFAULT)
}

/// A rule's verdict on `snapshot` under `limits`.
pub fn verdict_with(
    rule: &dyn crate::Rule,
    snapshot: &Snapshot,
    limits: &crate::Limits,
) -> crate::Verdict {
    rule.check(snapshot, limits).unwrap_or_else(|v| v)
}

/// A digest for statement-rule tests: `calls` executions taking `time_us` in all, examining
/// and sending `examined`/`sent` rows each, in schema `app`.
pub fn digest(text: &str, calls: u64, time_us: u64, examined: u64, sent: u64) -> Digest {
    Digest {
        schema: Some("app".into()),
        digest: format!("{:032x}", text.len() as u64 * 7919 + calls),
        text: text.to_owned(),
        calls,
        time_us,
        rows_examined: examined * calls,
        rows_sent: sent * calls,
        last_seen_age_seconds: Some(5),
        ..Default::default()
    }
}

// Schema facts for PD705–PD708's tests.

/// 2026-11-27T20:00:00Z: the `taken_at` of [`with_tables`]' snapshots.
pub const SCHEMA_NOW: i64 = 1_795_809_600;

/// A B-tree index, 16 MiB, reads unknown; `PRIMARY` is the clustered one.
pub fn schema_index(name: &str, unique: bool, cols: &[&str]) -> crate::Index {
    crate::Index {
        name: name.into(),
        unique,
        kind: "BTREE".into(),
        clustered: name == "PRIMARY",
        columns: cols
            .iter()
            .map(|c| crate::IndexColumn {
                name: (*c).into(),
                sub_part: None,
            })
            .collect(),
        bytes: Some(16 << 20),
        reads: None,
    }
}

/// A table of schema `shop`: 50,000 rows, 8 MiB of data and 4 MiB of indexes, created 30 days
/// before [`SCHEMA_NOW`].
pub fn schema_table(name: &str, engine: &str, indexes: Vec<crate::Index>) -> crate::Table {
    crate::Table {
        schema: "shop".into(),
        name: name.into(),
        engine: Some(engine.into()),
        rows: Some(50_000),
        data_bytes: Some(8 << 20),
        index_bytes: Some(4 << 20),
        created_at: Some(SCHEMA_NOW - 30 * 86_400),
        indexes,
        ..Default::default()
    }
}

/// An 11.8 server whose schema holds `tables` among 100 more InnoDB tables, taken at
/// [`SCHEMA_NOW`].
pub fn with_tables(tables: Vec<crate::Table>) -> crate::Snapshot {
    let mut s = SnapshotBuilder::new().mariadb("11.8.5-MariaDB").build();
    s.taken_at = Some("2026-11-27T20:00:00Z".into());
    s.mariadb.facts.as_mut().expect("an 11.8 server").schema =
        crate::Gathered::Available(crate::Schema {
            source: "test".into(),
            read_at: Some(SCHEMA_NOW),
            tables_total: tables.len() as u64 + 100,
            innodb_tables: tables.iter().filter(|t| t.is_engine("InnoDB")).count() as u64 + 100,
            candidates: tables.len() as u64,
            tables,
            index_usage_unread: None,
        });
    s
}
