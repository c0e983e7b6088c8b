//! The golden exposition: recorded snapshots (`examples/*.json`) → the exact `/metrics` text
//! the agent serves, as insta snapshots (`tests/snapshots/`), so a renamed, re-typed or
//! re-labelled metric shows up in review. Each body must pass `promtool check metrics` — in
//! every configuration the shipped configurations enable (the probe on as in
//! `deploy/systemd/agent.toml`, off as by default, statement counters on) — and every
//! catalogued metric appears in at least one of them.
//!
//! promtool is Debian's `prometheus` package (tests/harness/setup.sh installs it), found the
//! way tests/harness/prometheus.sh finds it: `$POWERDIAG_PROMTOOL`, else /usr/bin/promtool.
//! Review a changed snapshot with `cargo insta review`; accept with `INSTA_UPDATE=always`.

// A failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    collections::BTreeSet,
    io::Write,
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, SystemTime},
};

use powerdiag_agent::daemon::{
    catalogue::CATALOGUE,
    metrics::{ReloadStatus, SampleMetrics, encode_sample, render, to_prometheus_text},
    self_info::{BuildInfo, ProcessStats},
};
use powerdiag_rules::{
    CollectorRun, CpuSeconds, DigestCounters, Gathered, Settings, Snapshot, StatusVar, VectorIndex,
    evaluate, read_snapshot, testing::SnapshotBuilder,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> Snapshot {
    let path = root().join("examples").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    read_snapshot(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The probe off (`[probe] enabled = false`, the agent's default): no probe in the sample.
fn without_probe(mut s: Snapshot) -> Snapshot {
    if let Some(f) = &mut s.mariadb.facts {
        f.probe = Gathered::Unavailable("the probe is off".into());
    }
    s
}

/// What the recorded examples (doctor snapshots) lack and a running agent's sample has: the
/// collector runs, the status counters, the statement counters (`[statements]`), the perf
/// events' values, the CPU seconds since boot — and names that need escaping.
fn with_agent_facts(mut s: Snapshot) -> Snapshot {
    if s.collectors.is_empty() {
        for (name, secs, ok) in [
            ("host", 0.0012, true),
            ("os", 1.0213, true),
            ("mariadb", 0.0034, true),
            ("mariadb_vector_indexes", 0.0121, true),
            ("mariadb_statements", 0.0089, true),
            ("mariadb_probe", 0.0, false),
        ] {
            s.collectors.push(CollectorRun {
                name: name.into(),
                duration_seconds: secs,
                success: ok,
                error: (!ok).then(|| "the probe is off".into()),
            });
        }
    }
    if let Some(f) = &mut s.mariadb.facts {
        // The everyday server counters and gauges (PD205-PD216).
        for (i, var) in [
            StatusVar::ComSelect,
            StatusVar::CreatedTmpTables,
            StatusVar::CreatedTmpDiskTables,
            StatusVar::Connections,
            StatusVar::ThreadsCreated,
            StatusVar::ConnectionErrorsMaxConnections,
            StatusVar::TableOpenCacheHits,
            StatusVar::TableOpenCacheMisses,
            StatusVar::OpenedTableDefinitions,
            StatusVar::QcacheHits,
            StatusVar::QcacheLowmemPrunes,
            StatusVar::SortScan,
            StatusVar::SortRange,
            StatusVar::SortMergePasses,
            StatusVar::SelectFullJoin,
            StatusVar::SelectRangeCheck,
            StatusVar::InnodbLogWaits,
            StatusVar::InnodbLsnCurrent,
            StatusVar::MaxUsedConnections,
            StatusVar::OpenFiles,
            StatusVar::InnodbCheckpointAge,
            StatusVar::InnodbCheckpointMaxAge,
            StatusVar::InnodbHistoryListLength,
            StatusVar::InnodbRowLockWaits,
            StatusVar::InnodbRowLockTime,
            StatusVar::InnodbDeadlocks,
            StatusVar::BinlogCacheDiskUse,
            StatusVar::BinlogCacheUse,
            StatusVar::RplSemiSyncMasterClients,
            StatusVar::RplSemiSyncMasterYesTx,
            StatusVar::RplSemiSyncMasterNoTx,
            StatusVar::RplSemiSyncMasterNoTimes,
            StatusVar::SlavesConnected,
            StatusVar::SlaveRetriedTransactions,
        ]
        .into_iter()
        .enumerate()
        {
            f.status
                .insert(var.name().into(), (1000 + 17 * i as u64).to_string());
        }
        // A Galera node that lost one of three nodes, paused by another's flow control.
        f.variables
            .insert(powerdiag_rules::Var::WsrepOn.name().into(), "ON".into());
        f.variables.insert(
            powerdiag_rules::Var::WsrepDesync.name().into(),
            "OFF".into(),
        );
        f.variables.insert(
            powerdiag_rules::Var::WsrepSlaveThreads.name().into(),
            "4".into(),
        );
        for (v, value) in [
            (StatusVar::WsrepClusterStatus, "Primary"),
            (StatusVar::WsrepLocalStateComment, "Synced"),
            (StatusVar::WsrepReady, "ON"),
            (StatusVar::WsrepConnected, "ON"),
            (StatusVar::WsrepClusterSize, "2"),
            (StatusVar::WsrepFlowControlPausedNs, "12500000000"),
            (StatusVar::WsrepFlowControlSent, "0"),
            (StatusVar::WsrepFlowControlRecv, "622"),
            (StatusVar::WsrepLocalRecvQueue, "3"),
            (StatusVar::WsrepLocalSendQueue, "0"),
            (StatusVar::WsrepCertDepsDistance, "56.0377"),
        ] {
            f.status.insert(v.name().into(), value.into());
        }
        // A semi-sync primary that fell back to asynchronous (PD224).
        f.status.insert(
            StatusVar::RplSemiSyncMasterStatus.name().into(),
            "OFF".into(),
        );
        f.variables.insert(
            powerdiag_rules::Var::RplSemiSyncMasterEnabled.name().into(),
            "ON".into(),
        );
        f.innodb_size = Gathered::Available(powerdiag_rules::InnodbSize {
            tables: 42,
            data_bytes: 3 << 30,
            index_bytes: 1 << 30,
            ..Default::default()
        });
        f.transactions = Gathered::Available(powerdiag_rules::Transactions {
            open: 2,
            oldest: Some(powerdiag_rules::OpenTransaction {
                age_seconds: 75,
                ..Default::default()
            }),
        });
        // A replica of two sources: the default connection lagging 7 s, `eu"\n` (escaped)
        // with its SQL thread stopped (no lag).
        let mut stopped = powerdiag_rules::testing::replica("eu\"\n");
        stopped.sql_running = "No".into();
        stopped.seconds_behind_master = None;
        let mut lagging = powerdiag_rules::testing::replica("");
        lagging.seconds_behind_master = Some(7);
        f.replication = Gathered::Available(powerdiag_rules::Replication {
            scan: powerdiag_rules::ReplicaScan::Read,
            connections: vec![lagging, stopped],
            earlier: Vec::new(),
        });
        // A row-lock queue: connection 9, idle in its transaction, blocks two sessions (its
        // user and host need escaping).
        f.locks = Gathered::Available(powerdiag_rules::Locks {
            sessions: vec![powerdiag_rules::LockSession {
                id: 9,
                user: "app\"}".into(),
                host: "10.0.0.9:5\n1234".into(),
                command: "Sleep".into(),
                seconds: 40.0,
                statement: Some("SELECT * FROM `orders` WHERE `id` = ? FOR UPDATE".into()),
                transaction: Some(powerdiag_rules::SessionTransaction {
                    age_seconds: 45,
                    state: "RUNNING".into(),
                    rows_locked: 1,
                    rows_modified: 0,
                }),
                ..Default::default()
            }],
            waits: [(11, 30.5), (12, 12.25)]
                .map(|(waiter, seconds)| powerdiag_rules::LockWait {
                    waiter,
                    blocker: Some(9),
                    seconds,
                    ..Default::default()
                })
                .to_vec(),
            ..Default::default()
        });
        for (var, v) in [
            (StatusVar::HandlerReadLast, "1234"),
            (StatusVar::HandlerReadRnd, "98765"),
            (StatusVar::InnodbBufferPoolReadRequests, "123456789"),
            (StatusVar::InnodbBufferPoolReads, "4567"),
            (StatusVar::Questions, "345678"),
            (StatusVar::SlowQueries, "12"),
            (StatusVar::ThreadsConnected, "17"),
            (StatusVar::ThreadsRunning, "3"),
            (StatusVar::MemoryUsed, "536870912"),
            (StatusVar::Uptime, "86400"),
        ] {
            f.status.insert(var.name().to_owned(), v.to_owned());
        }
        if !matches!(f.statements, Gathered::Available(_)) {
            let with = SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .statements(Vec::new(), 0)
                .build();
            f.statements = with.mariadb.facts.unwrap().statements;
        }
        if let Gathered::Available(st) = &mut f.statements {
            st.counters = vec![
                DigestCounters {
                    schema: Some("shop".into()),
                    digest: "5f1b7c0e9a2d4e6f8a0b1c2d3e4f5a6b".into(),
                    text: "SELECT `id` , `title` FROM `docs` ORDER BY VEC_DISTANCE_EUCLIDEAN ( `e` , ? ) LIMIT ?".into(),
                    calls: 1200,
                    time_us: 8_400_000,
                    rows_examined: 96_000,
                    rows_sent: 12_000,
                    no_index_used: 0,
                },
                DigestCounters {
                    schema: Some("we\"ird\\sch}ema\n".into()),
                    digest: "0a1b2c3d4e5f60718293a4b5c6d7e8f9".into(),
                    text: "SELECT * FROM `t\"}` WHERE `a` = ?".into(),
                    calls: 40,
                    time_us: 250_000,
                    rows_examined: 400_000,
                    rows_sent: 40,
                    no_index_used: 40,
                },
                DigestCounters {
                    digest: "other".into(),
                    calls: 77,
                    time_us: 90_000,
                    rows_examined: 300,
                    rows_sent: 150,
                    ..Default::default()
                },
            ];
        }
        // The error log's event counts since the agent started (and this start's CRC-32
        // line, which PD201 judges on 10.6+).
        if let Gathered::Available(log) = &mut f.error_log {
            log.events = vec![powerdiag_rules::LogEvent {
                at: Some(1_762_080_000),
                kind: powerdiag_rules::LogEventKind::Crc32 {
                    implementation: "crc32 + pclmulqdq".into(),
                },
                line: "2025-11-02 10:40:00 0 [Note] InnoDB: Using crc32 + pclmulqdq instructions"
                    .into(),
            }];
            log.counts = [
                ("starting", 1),
                ("crc32", 1),
                ("ready", 1),
                ("aborted_connection", 12),
            ]
            .map(|(k, n)| (k.to_owned(), n))
            .into();
        }
        if let Gathered::Available(v) = &mut f.vector_indexes
            && let Some(first) = v.first().cloned()
        {
            v.push(VectorIndex {
                schema: "x\"} 1\npowerdiag_check{code=\"PD401\",status=\"fail\",s=\"".into(),
                table: "t\\\"}".into(),
                ..first
            });
        }
    }
    if let Gathered::Available(o) = &mut s.os
        && let Gathered::Available(c) = &mut o.counters
    {
        for (e, v) in c.events.iter_mut().zip([987_654_321u64, 4_321]) {
            e.value = Some(v);
            e.unavailable = None;
        }
    }
    if let Gathered::Available(o) = &mut s.os
        && let Gathered::Available(t) = &mut o.cpu_time
    {
        t.since_boot_seconds = Some(CpuSeconds {
            user: 812_345.67,
            nice: 12.5,
            system: 98_765.43,
            idle: 9_876_543.21,
            iowait: 4_321.0,
            irq: 0.0,
            softirq: 1_234.56,
            steal: 2_345.67,
        });
    }
    // Swap and the server's filesystems (schema 3 and later; the examples predate them), with
    // a mount point that tries to break out of its label.
    if let Gathered::Available(o) = &mut s.os {
        o.swap = Gathered::Available(powerdiag_rules::SwapActivity {
            basis: "window 1.00 s".into(),
            pages_in: 0,
            pages_out: 3,
            total_pages_in: 1_200,
            total_pages_out: 4_800,
            page_bytes: Some(65_536),
        });
        o.storage = Gathered::Available(vec![powerdiag_rules::Filesystem {
            roles: vec!["datadir".into(), "tmpdir".into()],
            path: "/srv/my\"sql}/".into(),
            mount_point: Some("/srv/my\"sql}".into()),
            fs_type: Some("xfs".into()),
            device: Some("259:1 nvme0n1p1".into()),
            total_bytes: 500 << 30,
            available_bytes: 40 << 30,
            inodes_total: Some(262_144_000),
            inodes_available: Some(9_000_000),
            busy_share: Some(0.25),
            avg_in_flight: Some(1.5),
            io_basis: Some("window 1.00 s".into()),
            io_unread: None,
            space_unread: None,
        }]);
        if let Gathered::Available(m) = &mut o.memory {
            m.available_bytes = Some(20 << 30);
            m.swap_total_bytes = Some(8 << 30);
            m.swap_free_bytes = Some(7 << 30);
        }
        if let Gathered::Available(p) = &mut o.process {
            p.swap_bytes = Some(0);
        }
        // The kernel's current figure (schema 3 and later records its source).
        if let Gathered::Available(c) = &mut o.cpu {
            c.current_mhz = Some(2_750.0);
            c.current_source = Some("cpufreq scaling_cur_freq".into());
        }
    }
    s
}

fn body(s: &Snapshot, openmetrics: bool) -> String {
    let taken_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_762_166_400);
    let encoded = encode_sample(&SampleMetrics {
        snapshot: s,
        report: &evaluate(s),
        settings: &Settings::default(),
        taken_at,
        duration: Duration::from_millis(1234),
        interval: Duration::from_secs(15),
        sql_statements: 3,
        build: &BuildInfo {
            version: "1.2.3".into(),
            revision: "0123456789ab".into(),
            target: "powerpc64le-unknown-linux-gnu".into(),
            rustc: "1.95.0".into(),
        },
        process: &ProcessStats {
            cpu_seconds: Some(12.34),
            open_fds: Some(11),
            max_fds: Some(1024),
            virtual_memory_bytes: Some(123_456_789),
            resident_memory_bytes: Some(9_437_184),
            start_time_seconds: Some(1_762_160_000.25),
        },
    });
    let now = taken_at + Duration::from_millis(4500);
    // Loaded at start-up, 60 s before the sample.
    let reload = ReloadStatus::loaded(taken_at - Duration::from_secs(60));
    if openmetrics {
        render(&encoded, Some(taken_at), now, true, &reload)
    } else {
        render(
            &to_prometheus_text(&encoded),
            Some(taken_at),
            now,
            false,
            &reload,
        )
    }
}

fn promtool() -> PathBuf {
    std::env::var_os("POWERDIAG_PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/promtool"))
}

/// `promtool check metrics` on `text`: its complaints, empty when it has none.
fn promtool_check(text: &str) -> String {
    let tool = promtool();
    let mut child = Command::new(&tool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}. Install Debian's prometheus package (tests/harness/setup.sh does) or set POWERDIAG_PROMTOOL",
                tool.display()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.trim().is_empty() {
        String::new()
    } else {
        format!("exit {:?}: {said}", out.status.code())
    }
}

/// Sample names in a Prometheus text body.
fn names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

fn configurations() -> Vec<(&'static str, Snapshot)> {
    vec![
        // deploy/systemd/agent.toml: probe and statements on.
        (
            "linux_probe_on",
            with_agent_facts(example("s924-linux-dedicated.json")),
        ),
        // The defaults: probe off.
        (
            "linux_probe_off",
            without_probe(with_agent_facts(example("s924-linux-dedicated.json"))),
        ),
        ("aix_probe_on", example("s924-aix-shared-gcc.json")),
    ]
}

#[test]
fn golden_exposition() {
    let mut seen = BTreeSet::new();
    let mut complaints = Vec::new();
    for (name, snapshot) in configurations() {
        let text = body(&snapshot, false);
        let said = promtool_check(&text);
        if !said.is_empty() {
            complaints.push(format!("{name}: {said}"));
        }
        seen.extend(names(&text));
        insta::assert_snapshot!(name, text);
    }
    let om = body(&configurations()[0].1, true);
    insta::assert_snapshot!("linux_probe_on_openmetrics", om);
    assert!(
        complaints.is_empty(),
        "promtool check metrics:\n{}",
        complaints.join("\n")
    );
    // Every catalogued metric is in at least one golden body, so none goes unreviewed.
    let missing: Vec<&str> = CATALOGUE
        .iter()
        .map(|e| e.name)
        .filter(|n| !seen.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "catalogued but in no golden body: {missing:?}"
    );
}

/// promtool does complain: the check above is not vacuous.
#[test]
fn promtool_rejects_a_quantile_label_on_a_gauge() {
    let said = promtool_check(
        "# HELP x_seconds Latency.\n# TYPE x_seconds gauge\nx_seconds{quantile=\"0.5\"} 1\n",
    );
    assert!(said.contains("quantile"), "{said}");
}
