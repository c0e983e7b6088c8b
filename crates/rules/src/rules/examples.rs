//! Snapshots shared by several rules' `failing_example`s: whole servers and hosts with
//! many pitfalls at once, as the field reports found them.

use crate::{
    Allocator, CpuTime, Digest, Gathered, NumaNode, PerfCounters, PerfEvent, Snapshot, StatusVar,
    Var, testing::*,
};

/// A server too old for its host, with the settings of its day: InnoDB's own checksums,
/// simulated AIO, performance_schema off, on 48 hardware threads.
pub(crate) fn old_server() -> Snapshot {
    SnapshotBuilder::new()
        .mariadb("10.2.44-MariaDB")
        .host(|h| h.hardware_threads = Some(48))
        .var(Var::InnodbChecksumAlgorithm, "innodb")
        .var(Var::InnodbUseNativeAio, "OFF")
        .var(Var::PerformanceSchema, "OFF")
        .build()
}

/// A Linux host with every host pitfall at once: no huge pages under a 48 GiB mariadbd, libc
/// malloc, memory in swap, a nearly full and saturated data disk, a throttled clock, steal,
/// a memoryless NUMA node, dTLB misses, and a vector graph larger than the L3.
pub(crate) fn linux_host_pitfalls() -> Snapshot {
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
            // Swapping during the window (PD504).
            if let Gathered::Available(a) = &mut o.swap {
                a.pages_in = 300;
                a.pages_out = 900;
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
        .build()
}

/// A dedicated POWER partition with the given flags (`shared`, `capped`, `donating`),
/// entitlement and virtual processors, on 84 CPUs at `smt` threads a core.
pub(crate) fn power_partition(
    shared: bool,
    capped: bool,
    donating: bool,
    entitlement: f64,
    vcpus: u32,
    cpus: u32,
    smt: u32,
) -> Snapshot {
    SnapshotBuilder::new()
        .os(|o| {
            on_power_lpar(
                o,
                lpar(shared, capped, donating, entitlement, vcpus),
                cpus,
                smt,
            )
        })
        .build()
}

/// The ORM field report: an unindexed listing, N+1 lookups, a COUNT over a JOIN, a GROUP BY
/// on disk.
pub(crate) fn orm_report() -> Snapshot {
    SnapshotBuilder::new()
        .mariadb("11.8.6-MariaDB")
        .statements(orm_statements(), 0)
        .build()
}

/// A server with every everyday pitfall: a tiny buffer pool missing reads, a redo log
/// at its checkpoint limit, temporary tables on disk, connections at the limit, no thread
/// cache, a churning table cache, the query cache on, sort merge passes, unindexed joins,
/// a transaction open for hours, buffered data files, and a global sort buffer that
/// overcommits memory.
pub(crate) fn everyday_pitfalls() -> Snapshot {
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
    let mut listing = scan();
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

/// The ORM field report's listing: the project's patches by state, newest first.
const LISTING: &str = "SELECT `id` , `name` , `state` , `date` FROM `patchwork_patch` WHERE `project_id` = ? AND `state` = ? ORDER BY `date` DESC LIMIT ?";

/// The listing as an unindexed scan: 200 calls, 100,000 rows examined for 50 sent.
pub(crate) fn scan() -> Digest {
    let mut d = digest(LISTING, 200, 8_000_000, 100_000, 50);
    d.no_index_used = 200;
    d
}

fn lock_session(
    id: u64,
    command: &str,
    seconds: f64,
    state: Option<&str>,
    statement: Option<&str>,
) -> crate::LockSession {
    crate::LockSession {
        id,
        user: "app".into(),
        host: format!("10.0.0.{id}:5{id:04}"),
        db: Some("shop".into()),
        command: command.into(),
        seconds,
        state: state.map(Into::into),
        statement: statement.map(Into::into),
        transaction: None,
    }
}

fn trx(age: u64, state: &str, rows_locked: u64) -> Option<crate::SessionTransaction> {
    Some(crate::SessionTransaction {
        age_seconds: age,
        state: state.into(),
        rows_locked,
        rows_modified: rows_locked,
    })
}

/// Connection 9 ran `SELECT … FOR UPDATE` and has been idle in its transaction for 40 s;
/// connections 11–13 wait for its rows (the scenario (a)).
pub(crate) fn row_lock_queue() -> Snapshot {
    let mut sessions = vec![crate::LockSession {
        transaction: trx(45, "RUNNING", 3),
        ..lock_session(9, "Sleep", 40.0, None, None)
    }];
    let mut waits = Vec::new();
    for (id, secs) in [(11, 30.0), (12, 25.0), (13, 12.0)] {
        sessions.push(crate::LockSession {
            transaction: trx(secs as u64, "LOCK WAIT", 1),
            ..lock_session(
                id,
                "Query",
                secs,
                Some("Updating"),
                Some("UPDATE `orders` SET `state` = ? WHERE `id` = ?"),
            )
        });
        waits.push(crate::LockWait {
            waiter: id,
            blocker: Some(9),
            kind: crate::LockKind::Row,
            seconds: secs,
            object: Some("`shop`.`orders` index PRIMARY".into()),
            mode: Some("X".into()),
            probable: false,
        });
    }
    SnapshotBuilder::new()
        .mariadb("11.8.6-MariaDB")
        .status(StatusVar::Uptime, "6000")
        .status(StatusVar::InnodbRowLockCurrentWaits, "3")
        .status(StatusVar::InnodbRowLockWaits, "103")
        .status(StatusVar::InnodbRowLockTime, "5000")
        .status(StatusVar::InnodbDeadlocks, "0")
        .window(
            60.0,
            &[
                (StatusVar::InnodbRowLockWaits, "100"),
                (StatusVar::InnodbRowLockTime, "5000"),
                (StatusVar::InnodbDeadlocks, "0"),
            ],
        )
        .locks(crate::Locks {
            scan: crate::LockScan::Read,
            sessions,
            waits,
            metadata_source: crate::MetadataSource::NotNeeded,
            truncated: false,
        })
        .build()
}

/// Connection 9 runs a long `SELECT` in a transaction on `orders`; connection 10's `ALTER
/// TABLE` waits for it, and connections 11–20 queue behind the `ALTER` (scenario (b)).
pub(crate) fn metadata_pileup(source: crate::MetadataSource) -> Snapshot {
    let probable = matches!(source, crate::MetadataSource::Processlist { .. });
    let mut sessions = vec![
        crate::LockSession {
            transaction: trx(50, "RUNNING", 0),
            ..lock_session(
                9,
                "Query",
                48.0,
                Some("User sleep"),
                Some("SELECT SLEEP(?)"),
            )
        },
        lock_session(
            10,
            "Query",
            30.0,
            Some("Waiting for table metadata lock"),
            Some("ALTER TABLE `orders` ADD COLUMN `note` TEXT"),
        ),
    ];
    let mut waits = vec![crate::LockWait {
        waiter: 10,
        blocker: Some(9),
        kind: crate::LockKind::Metadata,
        seconds: 30.0,
        object: Some("`shop`.`orders`".into()),
        mode: (!probable).then(|| "SHARED_READ".into()),
        probable,
    }];
    for id in 11..=20 {
        let secs = 30.0 - (id - 10) as f64;
        sessions.push(lock_session(
            id,
            "Query",
            secs,
            Some("Waiting for table metadata lock"),
            Some("SELECT * FROM `orders` WHERE `id` = ?"),
        ));
        waits.push(crate::LockWait {
            waiter: id,
            blocker: Some(10),
            kind: crate::LockKind::Metadata,
            seconds: secs,
            object: Some("`shop`.`orders`".into()),
            mode: None,
            probable: false,
        });
    }
    SnapshotBuilder::new()
        .mariadb("11.8.6-MariaDB")
        .status(StatusVar::Uptime, "6000")
        .status(StatusVar::ThreadsRunning, "13")
        .status(StatusVar::InnodbRowLockCurrentWaits, "0")
        .locks(crate::Locks {
            scan: crate::LockScan::Read,
            sessions,
            waits,
            metadata_source: source,
            truncated: false,
        })
        .build()
}

/// Two code paths update the same two rows in opposite orders: 40 deadlocks in a minute.
pub(crate) fn deadlock_storm() -> Snapshot {
    SnapshotBuilder::new()
        .mariadb("11.8.6-MariaDB")
        .status(StatusVar::Uptime, "6000")
        .status(StatusVar::InnodbDeadlocks, "140")
        .window(60.0, &[(StatusVar::InnodbDeadlocks, "100")])
        .last_deadlock(Some(crate::Deadlock {
            at: Some("2026-11-27 16:50:01".into()),
            transactions: vec![
                crate::DeadlockTransaction {
                    thread_id: Some(21),
                    user: Some("app".into()),
                    host: Some("10.0.0.21".into()),
                    statement: Some("UPDATE `accounts` SET `balance` = `balance` - ? WHERE `id` = ?".into()),
                    holds: vec!["lock_mode X locks rec but not gap on index PRIMARY of table `shop`.`accounts`".into()],
                    waits_for: Some("lock_mode X locks rec but not gap on index PRIMARY of table `shop`.`accounts`".into()),
                },
                crate::DeadlockTransaction {
                    thread_id: Some(22),
                    user: Some("app".into()),
                    host: Some("10.0.0.22".into()),
                    statement: Some("UPDATE `accounts` SET `balance` = `balance` + ? WHERE `id` = ?".into()),
                    holds: vec!["lock_mode X locks rec but not gap on index PRIMARY of table `shop`.`accounts`".into()],
                    waits_for: Some("lock_mode X locks rec but not gap on index PRIMARY of table `shop`.`accounts`".into()),
                },
            ],
            rolled_back: Some(2),
            deadlocks: 140,
        }))
        .build()
}
