use crate::{
    Limits, Rule, Snapshot, Threshold, Unit, Var, Verdict, declare_rule, format_bytes,
    value::my_cnf_size,
};

use super::{
    fix::{mib_floor, set_global},
    memory::{MAX_WORST_CASE, MemoryModel, memory_model},
};

declare_rule! {
    /// ### What it does
    /// Adds up what the server may allocate — its global buffers plus the per-connection
    /// buffers times `max_connections` (MySQLTuner's "maximum possible memory usage") — and
    /// compares it with the host's RAM. Fails when that worst case exceeds {max_worst_case}
    /// of RAM (MySQLTuner 2.9.1's 85%, `mysqltuner.pl` ~13690), or when the InnoDB buffer pool
    /// alone exceeds {max_buffer_pool} of RAM (a heuristic: MySQLTuner's "dangerously high"
    /// is the whole worst case above 90%, and it has no buffer-pool-against-RAM check).
    ///
    /// Global: `innodb_buffer_pool_size`, `innodb_log_buffer_size`, `key_buffer_size`,
    /// `aria_pagecache_buffer_size`, `query_cache_size`. Per connection: `read_buffer_size`,
    /// `read_rnd_buffer_size`, `sort_buffer_size`, `join_buffer_size`, `thread_stack`, one
    /// in-memory temporary table (the smaller of `tmp_table_size` and `max_heap_table_size`,
    /// as MySQLTuner 2.x counts it and as PD208's fix assumes), a 16 KiB packet buffer and
    /// `binlog_cache_size` with the binary log on (MySQLTuner adds it always). Like MySQLTuner
    /// 2.x, `max_allowed_packet` is not counted: a connection allocates it only for a packet
    /// that large. Not counted (not read): performance_schema's memory (MySQLTuner 2.x adds
    /// it), the table caches, MHNSW vector caches (PD101), allocator overhead — hence the
    /// margin.
    /// The RAM is the host's `MemTotal`, so the rule needs powerdiag on the database host; a
    /// cgroup memory limit is not read.
    ///
    /// The other rules size their memory fixes with the same model (PD205's buffer pool,
    /// PD208's temporary tables, PD209's connections), so following one fix never produces
    /// this finding.
    ///
    /// ### Why is this bad?
    /// The per-connection buffers are allocated when a query needs them, so the worst case
    /// arrives exactly when the server is busiest: a burst of connections running sorts and
    /// joins. Past RAM the kernel swaps the buffer pool out (every page hit becomes a disk
    /// read, see PD504) or the OOM killer ends mariadbd, losing every connection and the warm
    /// buffer pool at once. A buffer pool above 90% of RAM leaves no room for the connections,
    /// the kernel and the file system.
    ///
    /// ### Remediation
    /// Bring the worst case under the limit: per-connection buffers back to their defaults
    /// (raise `sort_buffer_size` or `join_buffer_size` for the session that needs it, not
    /// globally), `max_connections` to what the application really opens (a connection pool
    /// in front of many clients), or a smaller buffer pool. The finding prints the exact
    /// `SET GLOBAL` statements for this server (all dynamic; new connections get the new
    /// per-connection sizes) and the `[mariadbd]` lines to persist them.
    pub struct MemoryOvercommitted {
        code: "PD503",
        name: "memory-overcommitted",
        severity: Warning,
        scope: Database,
        summary: "the server's buffers can outgrow the host's RAM",
        fails_when: "global buffers + per-connection buffers (a temporary table each) × `max_connections` > 85% of RAM (MySQLTuner 2.x), or the buffer pool alone > 90% *(heuristic)*",
        severity_why: "warning: the worst case past RAM makes swapping or the OOM killer likely in a burst of the present load",
        thresholds: [MAX_WORST_CASE, MAX_BUFFER_POOL],
    }
}

const MAX_BUFFER_POOL: Threshold = Threshold {
    key: "max_buffer_pool",
    default: 0.90,
    min: 0.1,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "the InnoDB buffer pool alone, as a share of RAM (heuristic)",
};

/// Per-connection buffers' defaults (MariaDB 10.6–11.8): a larger global value is the usual
/// cause of an overcommitted server.
const PER_CONNECTION_DEFAULTS: [(Var, &str, u64); 4] = [
    (Var::SortBufferSize, "sort_buffer_size", 2 << 20),
    (Var::JoinBufferSize, "join_buffer_size", 256 << 10),
    (Var::ReadRndBufferSize, "read_rnd_buffer_size", 256 << 10),
    (Var::ReadBufferSize, "read_buffer_size", 128 << 10),
];

impl Rule for MemoryOvercommitted {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let m = memory_model(s)?;
        let max_share = limits.get(&MAX_WORST_CASE);
        let max_pool = limits.get(&MAX_BUFFER_POOL);
        let pool_share = m.buffer_pool as f64 / m.ram.max(1) as f64;
        let evidence = [
            m.summary(),
            format!(
                "innodb_buffer_pool_size {} ({:.0}% of RAM)",
                format_bytes(m.buffer_pool),
                pool_share * 100.0
            ),
            format!(
                "per connection: {}",
                m.per_connection
                    .iter()
                    .map(|(n, b)| format!("{n} {}", format_bytes(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ];
        let mut problems = Vec::new();
        if m.share() > max_share {
            problems.push(format!(
                "the worst case {} is {:.0}% of {} RAM (limit {:.0}%)",
                format_bytes(m.worst_case_bytes()),
                m.share() * 100.0,
                format_bytes(m.ram),
                max_share * 100.0
            ));
        }
        if pool_share > max_pool {
            problems.push(format!(
                "the buffer pool alone is {:.0}% of RAM (limit {:.0}%)",
                pool_share * 100.0,
                max_pool * 100.0
            ));
        }
        let mut v = if problems.is_empty() {
            Verdict::pass(format!(
                "the worst case fits: {} of {} RAM ({:.0}%)",
                format_bytes(m.worst_case_bytes()),
                format_bytes(m.ram),
                m.share() * 100.0
            ))
        } else {
            Verdict::fail(format!("memory overcommitted: {}", problems.join("; ")))
                .with_remediation(remedy(&m, s, max_share, max_pool))
        };
        v.evidence = evidence.to_vec();
        Ok(v)
    }
}

/// The changes that bring the worst case under `max_share` of RAM: per-connection buffers
/// above their defaults back to them, then a buffer pool within `max_pool`, then the
/// connections that still fit.
fn remedy(m: &MemoryModel, s: &Snapshot, max_share: f64, max_pool: f64) -> String {
    let mut items = Vec::new();
    let mut model = m.clone();
    if let Ok(db) = s.db() {
        for (var, name, default) in PER_CONNECTION_DEFAULTS {
            if db.var_u64(var).is_ok_and(|v| v > default) {
                items.push((name, default.to_string(), my_cnf_size(default)));
                for (n, b) in &mut model.per_connection {
                    if *n == name {
                        *b = default;
                    }
                }
            }
        }
    }
    let budget = (m.ram as f64 * max_share) as u64;
    let others = model.worst_case_bytes().saturating_sub(model.buffer_pool);
    let pool_cap = (m.ram as f64 * max_pool) as u64;
    if model.worst_case_bytes() > budget || model.buffer_pool > pool_cap {
        // The pool takes what the rest leaves, at least 128 MiB (InnoDB's default).
        let pool = mib_floor(budget.saturating_sub(others).min(pool_cap)).max(128 << 20);
        if pool < model.buffer_pool {
            items.push((
                "innodb_buffer_pool_size",
                pool.to_string(),
                my_cnf_size(pool),
            ));
            model.buffer_pool = pool;
            model.global[0].1 = pool;
        }
    }
    if model.worst_case_bytes() > budget {
        let per = model.per_connection_bytes().max(1);
        let fit = budget.saturating_sub(model.global_bytes()) / per;
        items.push((
            "max_connections",
            fit.max(10).to_string(),
            fit.max(10).to_string(),
        ));
        model.max_connections = fit.max(10);
    }
    let mut text = set_global(&items);
    text.push_str(&format!(
        "\nafter it: {}. Per-connection buffers apply to new connections; a query that needs a bigger sort or join buffer can SET SESSION it.",
        model.summary()
    ));
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    #[test]
    fn a_default_server_passes() {
        let s = SnapshotBuilder::new().mariadb("10.11.14-MariaDB").build();
        let v = verdict(&MemoryOvercommitted, &s);
        assert_eq!(v.status, Status::Pass, "{v:?}");
    }

    #[test]
    fn a_global_sort_buffer_times_many_connections_fails_and_the_fix_fits() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::SortBufferSize, "67108864")
            .var(Var::MaxConnections, "500")
            .build();
        let v = verdict(&MemoryOvercommitted, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(
            fix.starts_with("SET GLOBAL sort_buffer_size = 2097152;"),
            "{fix}"
        );
        assert!(fix.contains("    sort_buffer_size = 2M"), "{fix}");
        assert!(!fix.contains("SET GLOBAL max_connections"), "{fix}");
    }

    #[test]
    fn a_buffer_pool_near_ram_fails_and_is_sized_to_fit() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::InnodbBufferPoolSize, &(15u64 << 30).to_string())
            .build();
        let v = verdict(&MemoryOvercommitted, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("buffer pool alone"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(
            fix.contains("SET GLOBAL innodb_buffer_pool_size = "),
            "{fix}"
        );
        assert!(fix.contains("after it: worst case"), "{fix}");
        // The fix's own worst case is within 85% of RAM.
        let pct: f64 = fix
            .rsplit('(')
            .next()
            .and_then(|t| t.split('%').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(pct <= 85.0, "{fix}");
    }

    #[test]
    fn unknowns() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .without_var(Var::SortBufferSize)
            .build();
        assert_eq!(
            verdict(&MemoryOvercommitted, &s).status,
            Status::InsufficientData
        );
        let s = SnapshotBuilder::new().build();
        assert_eq!(
            verdict(&MemoryOvercommitted, &s).status,
            Status::InsufficientData
        );
    }
}
