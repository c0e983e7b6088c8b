//! examples/: two snapshots modelled on the field report (MariaDB 11.8.5, IBM Power S924,
//! POWER9 2750 MHz, 100,000 × 768-d vectors). They are generated here, so they always match the
//! current schema (`UPDATE_EXAMPLES=1 cargo test -p powerdiag --test it examples` rewrites
//! them), and the README walkthrough's commands are checked against them.

use std::path::{Path, PathBuf};

use powerdiag_rules::{
    Compiler, CpuFacts, CpuTime, Gathered, IndexProbe, MemoryFacts, NumaNode, Probe, ProbeQuery,
    ProfileStage, QueryProfile, Snapshot, Topology, Var, VectorIndex, testing::*,
};

use crate::support::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn index() -> VectorIndex {
    VectorIndex {
        schema: "app".into(),
        table: "docs".into(),
        index: "e".into(),
        column: Some("e".into()),
        dimensions: Some(768),
        distance: Some("euclidean".into()),
        m: None,
        rows: Some(100_000),
        rows_source: Some("innodb_sys_tablestats (hidden graph table)".into()),
        hidden_table: Some("app/docs#i#01".into()),
        hidden_table_bytes: Some(11053 * 16384),
        cache_overflows: None,
        cache_memory_bytes: None,
        size_source: None,
    }
}

/// 20 distinct 10-NN queries and 5 repeats at `latency_us`, rebuilding the cache `rebuild`.
fn probe(latency_us: u64, thrash: bool, profile: (u64, u64)) -> Probe {
    let queries = (0..25)
        .map(|i| ProbeQuery {
            latency_us: if i == 0 {
                latency_us + latency_us / 3
            } else {
                latency_us
            },
            repeat: i >= 20,
            handler_read_last: u64::from(thrash || i == 0),
            handler_read_rnd: if thrash { 480 } else { 11 },
            buffer_pool_read_requests: if thrash { 1500 } else { 36 },
        })
        .collect();
    Probe {
        indexes: vec![IndexProbe {
            schema: "app".into(),
            table: "docs".into(),
            index: "e".into(),
            limit: 10,
            queries,
            budget_exhausted: false,
            error: None,
        }],
        // Five profiled queries, as the probe takes them: the field report's profile with a
        // few percent of run-to-run variation.
        profile: Some(Gathered::Available(profiled(profile, 0))),
        more_profiles: (1..5).map(|k| profiled(profile, k)).collect(),
    }
}

/// One profiled k-NN query: the dominant stage `(duration µs, CPU µs)`, varied by `k`.
fn profiled(profile: (u64, u64), k: u64) -> QueryProfile {
    let vary = |x: u64| x + x * (k % 3) / 50;
    QueryProfile {
        index: "app.docs (e)".into(),
        stages: vec![
            ProfileStage {
                status: "Opening tables".into(),
                duration_us: 18,
                cpu_user_us: 18,
                ..Default::default()
            },
            ProfileStage {
                status: "Sending data".into(),
                duration_us: vary(profile.0),
                cpu_user_us: vary(profile.1),
                ..Default::default()
            },
        ],
    }
}

fn power9(threads: u32, effective: f64, smt: &str) -> CpuFacts {
    let mut c = power9_cpu(threads, 4);
    c.effective_mhz = Some(effective);
    c.effective_source = Some("SPURR/PURR over 1.00 s".into());
    c.smt_control = Some(smt.into());
    c.busy_share = Some(0.3);
    c
}

fn topology(cores: u32, nodes: u32) -> Topology {
    // POWER9: each pair of cores shares 10 MB of L3.
    Topology {
        caches: Vec::new(),
        l3_total_bytes: Some(u64::from(cores / 2) * (10 << 20)),
        l3_cpus: Some(format!("0-{}", cores * 4 - 1)),
        numa_nodes: (0..nodes)
            .map(|id| NumaNode {
                id,
                cpu_list: format!(
                    "{}-{}",
                    id * cores * 4 / nodes,
                    (id + 1) * cores * 4 / nodes - 1
                ),
                cpus: cores * 4 / nodes,
                memory_total_bytes: 128 << 30,
                memory_free_bytes: None,
                unread: None,
            })
            .collect(),
        numa_unread: None,
    }
}

/// AIX 7.3, 12-vCPU shared uncapped LPAR boosting to 3.8 GHz; GCC build; 16 MiB vector cache;
/// 4 KB pages without LDR_CNTRL: 42 QPS (23.8 ms per query), 70% of "Sending data" stalled.
fn aix() -> Snapshot {
    let mut s = SnapshotBuilder::new()
        .mariadb("11.8.5-MariaDB")
        .var(Var::VersionCompileOs, "AIX")
        .var(Var::VersionCompileMachine, "powerpc")
        .var(Var::InnodbBufferPoolSize, "8589934592")
        .vector_index(index())
        .probe(probe(23_800, true, (4_700, 1_410)))
        .host(|h| {
            h.hostname = "s924-aix".into();
            h.os = "aix".into();
            h.os_release = Some("AIX 7.3 TL2".into());
            h.kernel = Some("7.3".into());
            h.arch = "powerpc64".into();
            h.hardware_threads = Some(48);
            h.usable_threads = Some(48);
            h.memory_total_bytes = Some(256 << 30);
            h.memory_available_bytes = None;
            h.page_size_bytes = Some(4096);
        })
        .os(|o| {
            o.cpu = Gathered::Available(power9(48, 3800.0, "smt4"));
            o.topology = Gathered::Available(topology(12, 1));
            // AIX's collector reads no inodes (`df -P` has none).
            if let Gathered::Available(fs) = &mut o.storage {
                for f in fs {
                    f.inodes_total = None;
                    f.inodes_available = None;
                }
            }
            o.memory = Gathered::Available(MemoryFacts {
                base_page_bytes: Some(4096),
                page_sizes: vec![4096, 65536, 16 << 20, 16 << 30],
                ..Default::default()
            });
            if let Gathered::Available(p) = &mut o.process {
                p.pid = 9_175_072;
                p.found_by = "pid_file".into();
                p.rss_bytes = Some(3 << 30);
                p.anon_huge_bytes = None;
                p.kernel_page_sizes = Vec::new();
                p.mmu_page_sizes = Vec::new();
                p.data_page_bytes = Some(4096);
                p.text_page_bytes = Some(4096);
                p.stack_page_bytes = Some(4096);
                p.ldr_cntrl = Some(String::new());
                p.compiler = Some(Compiler::Gcc);
                p.compiler_evidence =
                    Some("procldd: /opt/freeware/lib/pthread/ppc64/libstdc++.a, /opt/freeware/lib/pthread/ppc64/libgcc_s.a".into());
                p.allocator = Some(powerdiag_rules::Allocator::Libc);
                p.allocator_evidence = Some("no jemalloc, tcmalloc or mimalloc module loaded".into());
                p.affinity = None;
                p.affinity_cpus = None;
            }
            o.cpu_time = Gathered::Available(CpuTime { basis: "window 1.00 s".into(), steal_share: None, busy_share: Some(0.3), ..Default::default() });
            let mut p = lpar(true, false, false, 7.2, 12);
            p.smt_threads = Some(4);
            p.counters_basis = Some("window 1.00 s".into());
            p.dispatches = Some(41_000);
            p.dispatch_dispersions = None;
            p.involuntary_vcsw = Some(18_000);
            p.voluntary_vcsw = Some(23_000);
            p.phantom_interrupts = Some(120);
            o.partition = Gathered::Available(Some(p));
            o.counters = Gathered::Unavailable("hardware counters are not collected on AIX yet (pmapi)".into());
            o.source = "live".into();
        })
        .build();
    s.taken_at = Some("2025-11-03T09:12:00Z".into());
    s.powerdiag_version = env!("CARGO_PKG_VERSION").into();
    s.mariadb.target = Some("pd_mon@/tmp/mysql.sock".into());
    s
}

/// Linux on the same S924: 24 dedicated cores, 64 KB pages, the cache sized to fit: 971 QPS.
fn linux() -> Snapshot {
    let mut s = SnapshotBuilder::new()
        .mariadb("11.8.5-MariaDB-ubu2404")
        .var(Var::VersionCompileMachine, "ppc64le")
        .var(Var::MhnswMaxCacheSize, "4294967296")
        .var(Var::InnodbBufferPoolSize, "8589934592")
        .vector_index(index())
        .probe(probe(1_030, false, (810, 800)))
        .host(|h| {
            h.hostname = "s924-linux".into();
            h.os_release = Some("Ubuntu 24.04.1 LTS".into());
            h.kernel = Some("6.8.0-45-generic".into());
            h.arch = "powerpc64le".into();
            h.hardware_threads = Some(96);
            h.usable_threads = Some(96);
            h.memory_total_bytes = Some(256 << 30);
            h.page_size_bytes = Some(65536);
        })
        .os(|o| {
            on_power_lpar(o, lpar(false, true, false, 24.0, 24), 96, 4);
            o.cpu = Gathered::Available(power9(96, 2750.0, "4"));
            o.topology = Gathered::Available(topology(24, 2));
            if let Gathered::Available(m) = &mut o.memory {
                m.page_sizes = vec![65536, 2 << 20];
            }
            if let Gathered::Available(p) = &mut o.process {
                p.rss_bytes = Some(12 << 30);
                p.anon_huge_bytes = Some(0);
                p.kernel_page_sizes = vec![65536];
                p.mmu_page_sizes = vec![65536];
                p.allocator = Some(powerdiag_rules::Allocator::Libc);
                p.allocator_evidence =
                    Some("no jemalloc, tcmalloc or mimalloc library mapped".into());
                p.affinity = Some("0-95".into());
                p.affinity_cpus = Some(96);
            }
            o.cpu_time = Gathered::Available(CpuTime {
                basis: "window 1.00 s".into(),
                steal_share: Some(0.0),
                busy_share: Some(0.3),
                ..Default::default()
            });
            // 30% of 96 CPUs busy: a short run queue, little waiting.
            o.saturation = Gathered::Available(powerdiag_rules::CpuSaturation {
                online_cpus: Some(96),
                procs_running: Some(31),
                load: Some([28.7, 27.9, 26.4]),
                pressure: Some(powerdiag_rules::CpuPressure {
                    avg10: 0.012,
                    avg60: 0.018,
                    avg300: 0.015,
                    window_share: Some(0.01),
                    total_us: 3_141_592_653,
                }),
                pressure_unread: None,
                process: Some(powerdiag_rules::ProcessCpu {
                    basis: "window 1.00 s".into(),
                    window_seconds: 1.0,
                    ticks: 2_710,
                    ticks_per_second: 100,
                    allowed_cpus: 96.0,
                    allowed_by: "online CPUs".into(),
                    cgroup: None,
                }),
                process_unread: None,
            });
        })
        .build();
    s.taken_at = Some("2025-11-03T10:40:00Z".into());
    s.powerdiag_version = env!("CARGO_PKG_VERSION").into();
    s
}

#[test]
fn examples_are_current_and_tell_the_field_reports_story() {
    let dir = examples();
    for (name, snap) in [
        ("s924-aix-shared-gcc.json", aix()),
        ("s924-linux-dedicated.json", linux()),
    ] {
        let path = dir.join(name);
        let generated = serde_json::to_string_pretty(&snap).unwrap() + "\n";
        if std::env::var_os("UPDATE_EXAMPLES").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "examples/{name} is stale: UPDATE_EXAMPLES=1 cargo test -p powerdiag --test it examples"
        );
    }

    // doctor --from: the AIX host fails what the field report found.
    let aix = run(powerdiag()
        .args(["doctor", "--format", "json", "--from"])
        .arg(dir.join("s924-aix-shared-gcc.json")));
    let j = aix.json();
    for (code, want) in [
        ("PD101", "fail"),
        ("PD102", "fail"),
        ("PD103", "fail"),
        ("PD301", "fail"),
        ("PD403", "fail"),
        ("PD601", "fail"),
        ("PD401", "pass"),
        ("PD404", "pass"),
    ] {
        assert_eq!(status(&j, code), want, "{code}: {:#}", check(&j, code));
    }
    assert_eq!(aix.code, 2);
    let linux = run(powerdiag()
        .args(["doctor", "--format", "json", "--from"])
        .arg(dir.join("s924-linux-dedicated.json")));
    let j = linux.json();
    for (code, want) in [
        ("PD101", "pass"),
        ("PD102", "pass"),
        ("PD103", "pass"),
        ("PD302", "pass"),
        ("PD402", "fail"),
    ] {
        assert_eq!(status(&j, code), want, "{code}: {:#}", check(&j, code));
    }
    assert_eq!(linux.code, 0, "only info findings");

    // README's account of the two reports is the reports': every failing check it lists fails,
    // and every failing check is listed.
    let readme = std::fs::read_to_string(dir.join("../README.md")).unwrap();
    let start = readme
        .find("`powerdiag doctor --from examples/s924-aix-shared-gcc.json` fails")
        .expect("README describes the AIX example's report");
    let para = &readme[start..];
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    let (aix_text, linux_text) = para
        .split_once("The Linux\nsnapshot")
        .expect("README describes the Linux example's report");
    let linux_text = linux_text.split("Both\n").next().unwrap();
    let codes = |t: &str| -> std::collections::BTreeSet<String> {
        t.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| {
                w.len() == 5 && w.starts_with("PD") && w[2..].chars().all(|c| c.is_ascii_digit())
            })
            .map(str::to_owned)
            .collect()
    };
    let failing = |j: &serde_json::Value| -> std::collections::BTreeSet<String> {
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["code"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        codes(aix_text),
        failing(&aix.json()),
        "README on the AIX example: {aix_text}"
    );
    assert_eq!(
        codes(linux_text),
        failing(&j),
        "README on the Linux example: {linux_text}"
    );
    // A replayed snapshot has no collector timings: no empty "Collectors:" line.
    let text = run(powerdiag()
        .args(["doctor", "--color", "never", "--from"])
        .arg(dir.join("s924-linux-dedicated.json")));
    assert!(!text.stdout.contains("Collectors:"), "{}", text.stdout);

    // diff: the cache first, not comparable (twice the cores), 23× measured.
    let d = run(powerdiag()
        .args(["diff", "--format", "json"])
        .arg(dir.join("s924-aix-shared-gcc.json"))
        .arg(dir.join("s924-linux-dedicated.json")));
    assert_eq!(d.code, 0);
    let j = d.json();
    assert_eq!(
        j["differences"][0]["topic"], "vector cache vs graph size",
        "{j:#}"
    );
    assert_eq!(j["comparable"]["comparable"], false);
    assert!(
        j["comparable"]["reasons"]
            .to_string()
            .contains("2.00× the cores (24 vs 12)"),
        "{j:#}"
    );
    let ratio = j["probe_latency_ratio"].as_f64().unwrap();
    assert!((1.0 / ratio - 23.1).abs() < 0.5, "{ratio}");
    let topics: Vec<&str> = j["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["topic"].as_str().unwrap())
        .collect();
    // The Linux build's compiler is not detected: a note, not a ranked difference.
    assert!(
        j["notes"]
            .to_string()
            .contains("compiler of mariadbd not compared: A GCC, B unknown"),
        "{j:#}"
    );
    for t in [
        "memory page size",
        "partition mode",
        "effective CPU frequency",
        "cores and L3",
    ] {
        assert!(topics.contains(&t), "{t} missing from {topics:?}");
    }
    let text = run(powerdiag()
        .arg("diff")
        .arg(dir.join("s924-aix-shared-gcc.json"))
        .arg(dir.join("s924-linux-dedicated.json")));
    assert!(
        text.stdout.contains("NOT comparable hardware"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("23.1× faster on B"), "{}", text.stdout);
}

#[test]
fn snapshot_files_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let full = std::fs::read_to_string(examples().join("s924-linux-dedicated.json")).unwrap();
    let cases = [
        (
            write("truncated.json", &full.as_bytes()[..full.len() / 3]),
            "truncated",
        ),
        (
            write(
                "newer.json",
                full.replacen(
                    &format!("\"schema_version\": {}", powerdiag_rules::SCHEMA_VERSION),
                    "\"schema_version\": 99",
                    1,
                )
                .as_bytes(),
            ),
            "upgrade powerdiag",
        ),
        (
            write("foreign.json", b"{\"hello\": \"world\"}"),
            "not a powerdiag snapshot",
        ),
        (write("binary.json", &[0xff, 0xfe, 0, 1]), "not UTF-8"),
        (dir.path().join("missing.json"), "cannot open"),
    ];
    for (path, needle) in cases {
        let good = examples().join("s924-linux-dedicated.json");
        for mut cmd in [
            {
                let mut c = powerdiag();
                c.args(["doctor", "--from"]).arg(&path);
                c
            },
            {
                let mut c = powerdiag();
                c.arg("diff").arg(&path).arg(&good);
                c
            },
        ] {
            let r = run(&mut cmd);
            assert_eq!(r.code, 3, "{}: {}", path.display(), r.stderr);
            assert!(
                r.stderr.contains(needle),
                "{}: {}",
                path.display(),
                r.stderr
            );
            assert!(
                r.stderr.contains(&path.display().to_string()),
                "names the file: {}",
                r.stderr
            );
        }
    }
    // A collect → doctor --from round trip gives the same verdicts as the live run.
    let out = dir.path().join("live.json");
    let live = run(powerdiag().args([
        "doctor",
        "--format",
        "json",
        "--no-probe",
        "--sample-window",
        "0",
    ]));
    let c = run(powerdiag()
        .args(["collect", "--no-probe", "--sample-window", "0", "-o"])
        .arg(&out));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(c.stderr.contains("wrote"), "{}", c.stderr);
    let replay = run(powerdiag()
        .args(["doctor", "--format", "json", "--from"])
        .arg(&out));
    assert_eq!(replay.code, live.code);
    assert_eq!(verdicts(&replay.json()), verdicts(&live.json()));
}
