//! The server's memory model (MySQLTuner 2.9.1's formula, `mysqltuner.pl` lines 7031–7146,
//! with the departures listed below), shared by PD503
//! (memory-overcommitted) and by every rule whose fix adds memory (PD205's buffer pool,
//! PD208's temporary tables, PD209's connections), so one fix never recommends overcommitting
//! RAM.
//!
//! - global buffers: `innodb_buffer_pool_size`, `innodb_log_buffer_size`, `key_buffer_size`,
//!   `aria_pagecache_buffer_size`, `query_cache_size`;
//! - per connection: `read_buffer_size`, `read_rnd_buffer_size`, `sort_buffer_size`,
//!   `join_buffer_size`, `thread_stack`, one in-memory temporary table (the smaller of
//!   `tmp_table_size` and `max_heap_table_size`: each connection may build one, as MySQLTuner
//!   2.x counts it, lines 7050–7051, and as PD208's fix assumes), a `net_buffer_length`-sized
//!   packet buffer, and `binlog_cache_size` when the binary log is on;
//! - worst case: global + per connection × `max_connections`.
//!
//! Departures from MySQLTuner 2.9.1: `binlog_cache_size` only with the binary log on
//! (MySQLTuner adds it whatever `log_bin` is, lines 7048–7049); a 16 KiB packet buffer per
//! connection (MySQLTuner 1.x counted `max_allowed_packet`; 2.x comments it out, lines
//! 7056–7057); performance_schema's memory is not counted (MySQLTuner adds it from
//! `performance_schema`'s memory tables, lines 7131–7142: powerdiag does not read them);
//! nor are the dictionary and table caches, MHNSW vector caches (`mhnsw_max_cache_size` per
//! index, PD101) and allocator overhead — hence PD503's margin. The RAM is the host's
//! `MemTotal`; a cgroup memory limit is not read.

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
    ];
    let mut per_connection = vec![
        ("read_buffer_size", db.var_u64(Var::ReadBufferSize)?),
        ("read_rnd_buffer_size", db.var_u64(Var::ReadRndBufferSize)?),
        ("sort_buffer_size", db.var_u64(Var::SortBufferSize)?),
        ("join_buffer_size", db.var_u64(Var::JoinBufferSize)?),
        ("thread_stack", db.var_u64(Var::ThreadStack)?),
        ("temporary table", tmp),
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
        // 128M pool + 16M log buffer + 128M key + 128M Aria + 1M query cache.
        assert_eq!(m.global_bytes(), (128 + 16 + 128 + 128 + 1) << 20);
        // The buffers, a 16M temporary table and a packet buffer per connection.
        assert_eq!(
            m.per_connection_bytes(),
            131_072 + 262_144 + 2_097_152 + 262_144 + 299_008 + (16 << 20) + 16_384
        );
        // 3.2 GiB in the worst case: a stock server fits a 4 GiB host only just.
        assert!(m.share() < 0.21, "{}", m.summary());
        assert!(m.room(0.85) > 10 << 30);
    }

    #[test]
    fn binary_log_and_missing_facts() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::LogBin, "ON")
            .build();
        assert_eq!(memory_model(&s).unwrap().per_connection.len(), 8);
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
