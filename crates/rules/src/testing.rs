//! [`SnapshotBuilder`]: concise snapshots for rule tests, here and in the other crates.

use crate::{
    DbError, DbErrorKind, Gathered, HostFacts, MariadbFacts, MariadbSection, Probe, SCHEMA_VERSION,
    ServerVersion, Snapshot, StatusVar, Var, VectorIndex,
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
    }
}
