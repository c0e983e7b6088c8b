//! The server's memory model (MySQLTuner's formula, with two departures), shared by PD503
//! (memory-overcommitted) and by every rule whose fix adds memory (PD205's buffer pool,
//! PD208's temporary tables, PD209's connections), so one fix never recommends overcommitting
//! RAM.
//!
//! - global buffers: `innodb_buffer_pool_size`, `innodb_log_buffer_size`, `key_buffer_size`,
//!   `aria_pagecache_buffer_size`, `query_cache_size` and the smaller of `tmp_table_size` and
//!   `max_heap_table_size` (MySQLTuner counts one temporary table);
//! - per connection: `read_buffer_size`, `read_rnd_buffer_size`, `sort_buffer_size`,
//!   `join_buffer_size`, `thread_stack`, a `net_buffer_length`-sized packet buffer (MySQLTuner
//!   counts `max_allowed_packet`, 16 MiB by default, which a connection allocates only for a
//!   packet that large: counted at its default it makes a stock server on a 4 GiB host look
//!   overcommitted) and `binlog_cache_size` when the binary log is on (as MySQLTuner 2.x);
//! - worst case: global + per connection × `max_connections`.
//!
//! Not counted (unknown from variables): performance_schema's memory, the dictionary and
//! table caches, MHNSW vector caches (`mhnsw_max_cache_size` per index, PD101), allocator
//! overhead. The RAM is the host's `MemTotal`; a cgroup memory limit is not read.

use crate::{Snapshot, Threshold, Unit, Var, Verdict, format_bytes};

/// A connection's packet buffer before it grows (`net_buffer_length`'s default).
const NET_BUFFER: u64 = 16 << 10;

/// The server's memory model against the host's RAM.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemoryModel {
    pub(crate) ram: u64,
    pub(crate) buffer_pool: u64,
    /// Global buffers, the buffer pool included.
    pub(crate) global: Vec<(Var, u64)>,
    /// Buffers each connection may allocate.
    pub(crate) per_connection: Vec<(&'static str, u64)>,
    pub(crate) max_connections: u64,
}

impl MemoryModel {
    pub(crate) fn global_bytes(&self) -> u64 {
        self.global
            .iter()
            .fold(0u64, |a, (_, b)| a.saturating_add(*b))
    }

    pub(crate) fn per_connection_bytes(&self) -> u64 {
        self.per_connection
            .iter()
            .fold(0u64, |a, (_, b)| a.saturating_add(*b))
    }

    /// Global buffers + per-connection buffers × `max_connections`.
    pub(crate) fn worst_case_bytes(&self) -> u64 {
        self.global_bytes().saturating_add(
            self.per_connection_bytes()
                .saturating_mul(self.max_connections),
        )
    }

    /// The worst case as a share of RAM.
    pub(crate) fn share(&self) -> f64 {
        self.worst_case_bytes() as f64 / self.ram.max(1) as f64
    }

    /// Bytes that could still be given to one buffer before the worst case reaches `share`
    /// of RAM (0 when it is already there).
    pub(crate) fn room(&self, share: f64) -> u64 {
        ((self.ram as f64 * share) as u64).saturating_sub(self.worst_case_bytes())
    }

    /// One line: the worst case against RAM.
    pub(crate) fn summary(&self) -> String {
        format!(
            "worst case {} = global {} + {} per connection × max_connections {}, against {} RAM ({:.0}%)",
            format_bytes(self.worst_case_bytes()),
            format_bytes(self.global_bytes()),
            format_bytes(self.per_connection_bytes()),
            self.max_connections,
            format_bytes(self.ram),
            self.share() * 100.0
        )
    }
}

/// The memory model, or the `insufficient_data` verdict naming the missing fact. Needs the
/// database's host (RAM describes the wrong machine for a remote server).
pub(crate) fn memory_model(s: &Snapshot) -> Result<MemoryModel, Verdict> {
    let db = s.db()?;
    let host = s.db_host()?;
    let ram = host
        .memory_total_bytes
        .filter(|r| *r > 0)
        .ok_or_else(|| Verdict::insufficient("the host's RAM (MemTotal) is unknown"))?;
    let opt = |v: Var| -> Result<u64, Verdict> {
        match db.var(v) {
            // Absent on this server (Aria on MySQL, the query cache on MySQL 8): nothing.
            Err(_) => Ok(0),
            Ok(_) => db.var_u64(v),
        }
    };
    let buffer_pool = db.var_u64(Var::InnodbBufferPoolSize)?;
    let tmp = db
        .var_u64(Var::TmpTableSize)?
        .min(db.var_u64(Var::MaxHeapTableSize)?);
    let global = vec![
        (Var::InnodbBufferPoolSize, buffer_pool),
        (Var::InnodbLogBufferSize, opt(Var::InnodbLogBufferSize)?),
        (Var::KeyBufferSize, opt(Var::KeyBufferSize)?),
        (
            Var::AriaPagecacheBufferSize,
            opt(Var::AriaPagecacheBufferSize)?,
        ),
        (Var::QueryCacheSize, opt(Var::QueryCacheSize)?),
        (Var::TmpTableSize, tmp),
    ];
    let mut per_connection = vec![
        ("read_buffer_size", db.var_u64(Var::ReadBufferSize)?),
        ("read_rnd_buffer_size", db.var_u64(Var::ReadRndBufferSize)?),
        ("sort_buffer_size", db.var_u64(Var::SortBufferSize)?),
        ("join_buffer_size", db.var_u64(Var::JoinBufferSize)?),
        ("thread_stack", db.var_u64(Var::ThreadStack)?),
        ("packet buffer", NET_BUFFER),
    ];
    if db.var_bool(Var::LogBin).unwrap_or(false) {
        per_connection.push(("binlog_cache_size", opt(Var::BinlogCacheSize)?));
    }
    Ok(MemoryModel {
        ram,
        buffer_pool,
        global,
        per_connection,
        max_connections: db.var_u64(Var::MaxConnections)?,
    })
}

/// PD503's limit on the worst case, also the room the fixes of PD205, PD208 and PD209 size
/// their growth against (at its default), so that no fix overcommits RAM.
pub(crate) const MAX_WORST_CASE: Threshold = Threshold {
    key: "max_worst_case",
    default: 0.85,
    min: 0.1,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "global buffers + per-connection buffers × max_connections, as a share of RAM (MySQLTuner: 85%)",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SnapshotBuilder;

    #[test]
    fn a_default_server_on_16_gib() {
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        let m = memory_model(&s).unwrap();
        // 128M pool + 16M log buffer + 128M key + 128M Aria + 1M query cache + 16M tmp.
        assert_eq!(m.global_bytes(), (128 + 16 + 128 + 128 + 1 + 16) << 20);
        assert_eq!(
            m.per_connection_bytes(),
            131_072 + 262_144 + 2_097_152 + 262_144 + 299_008 + 16_384
        );
        assert!(m.share() < 0.1, "{}", m.summary());
        assert!(m.room(0.85) > 12 << 30);
    }

    #[test]
    fn binary_log_and_missing_facts() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::LogBin, "ON")
            .build();
        assert_eq!(memory_model(&s).unwrap().per_connection.len(), 7);
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .host(|h| h.memory_total_bytes = None)
            .build();
        assert!(memory_model(&s).unwrap_err().summary.contains("RAM"));
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .remote_server()
            .build();
        assert!(memory_model(&s).is_err());
    }
}
