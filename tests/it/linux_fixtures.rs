//! Recorded /proc + /sys trees replay the Linux collector exactly: each tree under
//! tests/fixtures/linux → its facts and every rule's verdict, compared with an insta snapshot.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use powerdiag_agent::collect::{
    self, CollectOptions, MariadbOptions, NoProgress,
    os::{self, Roots},
};
use powerdiag_rules::{Gathered, Snapshot, evaluate};
use serde_json::json;

use crate::support::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/linux")
}

fn trees() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("tests/fixtures/linux")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("proc").is_dir())
        .collect();
    v.sort();
    v
}

pub(crate) fn replay(tree: &Path) -> Snapshot {
    let opts = CollectOptions {
        candidates: Vec::new(),
        mariadb: MariadbOptions {
            timeout: Duration::from_secs(1),
            probe: None,
            vector_cache: None,
            reuse: None,
            statements: None,
            status_window: Default::default(),
            innodb_cache: None,
            lock_cache: None,
            error_log_cache: None,
            schema_cache: None,
            replication_cache: None,
            dictionary_bound: None,
        },
        taken_at: None,
        roots: Roots::tree(tree),
        sample_window: Duration::ZERO,
        collectors: Default::default(),
    };
    block_on(collect::collect(&opts, &NoProgress)).0
}

#[test]
fn every_tree_replays_to_its_expected_facts_and_verdicts() {
    let trees = trees();
    assert!(
        trees.len() >= 11,
        "expected the eleven fixture trees, found {trees:?}"
    );
    for tree in trees {
        let name = tree.file_name().unwrap().to_string_lossy().into_owned();
        let snap = replay(&tree);
        let report = evaluate(&snap);
        let verdicts: Vec<_> = report
            .checks
            .iter()
            .filter(|c| c.scope == powerdiag_rules::Scope::Host)
            .map(|c| json!({"code": c.code, "status": c.status, "summary": c.summary}))
            .collect();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_suffix(name.clone());
        settings.set_prepend_module_to_snapshot(false);
        // Where the tree was read from depends on the checkout: not part of the facts.
        let mut os = serde_json::to_value(&snap.os).unwrap();
        if let Some(src) = os.pointer_mut("/available/source") {
            assert!(
                src.as_str()
                    .unwrap_or_default()
                    .starts_with("recorded tree"),
                "{src}"
            );
            *src = json!("recorded tree");
        }
        // Reasons that name a file name it under the tree: the checkout's path is not a fact.
        fn untree(v: &mut serde_json::Value, prefix: &str) {
            match v {
                serde_json::Value::String(s) => *s = s.replace(prefix, "<tree>"),
                serde_json::Value::Array(a) => a.iter_mut().for_each(|v| untree(v, prefix)),
                serde_json::Value::Object(o) => o.values_mut().for_each(|v| untree(v, prefix)),
                _ => {}
            }
        }
        untree(&mut os, &tree.display().to_string());
        let mut verdicts = serde_json::Value::Array(verdicts);
        untree(&mut verdicts, &tree.display().to_string());
        settings.bind(|| {
            insta::assert_json_snapshot!(
                "linux_tree",
                json!({"host": snap.host, "os": os, "verdicts": verdicts})
            );
        });
    }
}

/// Live-only sources say so when pointed at a tree.
/// A public capture with its own oracle: prometheus/procfs's test tree (Apache-2.0, see the
/// tree's README), replayed to the values procfs's own tests expect of the same files.
#[test]
fn prometheus_procfs_fixtures_replay_to_procfs_own_expected_values() {
    let snap = replay(&fixtures().join("procfs-fixtures"));
    let host = snap.host.as_ref().expect("host facts");
    assert_eq!(host.memory_total_bytes, Some(16_042_172_416)); // MemTotalBytes
    let os = snap.os.as_ref().expect("os facts");
    let mem = os.memory.as_ref().expect("memory");
    assert_eq!(mem.swap_total_bytes, Some(0)); // SwapTotal
    assert_eq!(mem.hugepage_bytes, Some(2_097_152)); // HugepagesizeBytes
    assert_eq!(
        mem.available_bytes, None,
        "no MemAvailable line: unknown, not 0"
    );
    let t = os.cpu_time.as_ref().expect("cpu time");
    let secs = t.since_boot_seconds.as_ref().expect("since boot");
    assert!((secs.user - 3018.54).abs() < 1e-6, "{secs:?}"); // CPUTotal.User = 301854 / 100
    let cpu = os.cpu.as_ref().expect("cpu");
    assert_eq!(cpu.nominal_mhz, Some(2400.0)); // policy0 CpuinfoMaximumFrequency
    assert_eq!(cpu.current_mhz, Some(1219.917)); // policy0 ScalingCurrentFrequency only
    assert_eq!(cpu.governor.as_deref(), Some("powersave"));
    // cpu/offline lists 2; cpu0/online is 1; cpu1 has no online file (always online).
    assert_eq!(cpu.threads, 2, "{cpu:?}");
    assert_eq!(cpu.cores, Some(2), "thread siblings 0,4 and 1,5: {cpu:?}");
    // Nodes whose CPUs and memory could not be read are not judged.
    let report = evaluate(&snap);
    let pd501 = report.checks.iter().find(|c| c.code == "PD501").unwrap();
    assert_eq!(
        pd501.status,
        powerdiag_rules::Status::InsufficientData,
        "{pd501:?}"
    );
}

/// Swapping and a saturated disk cannot be produced on the test VM (no swap device, one
/// virtual disk): x86-swapping-saturated-datadir records them over a 30 s window
/// (`recorded/`), replayed here with the directories a connected local server reports.
#[test]
fn a_recorded_window_replays_swapping_and_a_saturated_datadir() {
    let tree = fixtures().join("x86-swapping-saturated-datadir");
    let dirs: Vec<(String, String)> = [
        ("datadir", "/var/lib/mysql/"),
        ("tmpdir", "/tmp"),
        ("innodb_log_group_home_dir", "/var/lib/mysql/"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    let judge = |roots: &Roots| {
        let server = os::ServerProcess::Local {
            pid_file: "/run/mysqld/mysqld.pid",
            dirs: &dirs,
        };
        // The requested window is zero: a tree's window is the recorded one.
        let w = os::begin(roots, server, Duration::ZERO, &Default::default());
        let (facts, _) = os::finish(w, Duration::ZERO, Duration::from_secs(30));
        let mut snap = Snapshot::new("test");
        snap.os = Gathered::Available(facts);
        let report = evaluate(&snap);
        let status = |code: &str| {
            let c = report.checks.iter().find(|c| c.code == code).unwrap();
            (c.status, c.summary.clone())
        };
        (snap, status("PD504"), status("PD801"), status("PD802"))
    };

    let (snap, pd504, pd801, pd802) = judge(&Roots::tree(&tree));
    let Gathered::Available(os) = &snap.os else {
        panic!("no os facts")
    };
    let swap = os.swap.as_ref().unwrap();
    assert_eq!(
        (swap.basis.as_str(), swap.pages_in, swap.pages_out),
        ("window 30.00 s", 41_344, 58_880)
    );
    let fs = os.storage.as_ref().unwrap();
    assert_eq!(fs.len(), 2, "{fs:?}");
    let data = fs.iter().find(|f| f.roles[0] == "datadir").unwrap();
    assert_eq!(data.roles, ["datadir", "innodb_log_group_home_dir"]);
    assert_eq!(
        (
            data.mount_point.as_deref(),
            data.fs_type.as_deref(),
            data.device.as_deref()
        ),
        (Some("/var/lib/mysql"), Some("xfs"), Some("252:16 vdb"))
    );
    // The recorded statvfs: 131006464 and 55050240 blocks of 4 KiB.
    assert_eq!(
        (data.total_bytes, data.available_bytes),
        (131_006_464 * 4096, 55_050_240 * 4096)
    );
    // And its inodes (f_files, f_favail): PD807 judges them.
    assert_eq!(
        (data.inodes_total, data.inodes_available),
        (Some(262_144_000), Some(262_112_640))
    );
    let report = evaluate(&snap);
    let pd807 = report.checks.iter().find(|c| c.code == "PD807").unwrap();
    assert_eq!(pd807.status, powerdiag_rules::Status::Pass, "{pd807:?}");
    assert!(
        pd807
            .evidence
            .iter()
            .any(|e| e.contains("1838333 of 1900544 inodes free")),
        "{pd807:?}"
    );
    // Δio_ticks 29460 ms and Δtime_in_queue 391530 ms over 30 s.
    assert_eq!(data.busy_share, Some(29_460.0 / 30_000.0));
    assert_eq!(data.avg_in_flight, Some(391_530.0 / 30_000.0));
    assert_eq!(data.io_basis.as_deref(), Some("window 30.00 s"));
    let tmp = fs.iter().find(|f| f.roles == ["tmpdir"]).unwrap();
    assert_eq!(tmp.device.as_deref(), Some("252:1 vda1"));

    use powerdiag_rules::Status;
    assert_eq!(pd504.0, Status::Fail, "{pd504:?}");
    // Swapping during the recorded window fails; mariadbd's 3.2 GiB in swap is evidence.
    assert!(
        pd504
            .1
            .contains("swapped 161.5 MiB in and 230 MiB out over the window 30.00 s"),
        "{pd504:?}"
    );
    assert_eq!(pd802.0, Status::Fail, "{pd802:?}");
    assert!(
        pd802
            .1
            .contains("252:16 vdb (under datadir, innodb_log_group_home_dir) was busy 98"),
        "{pd802:?}"
    );
    assert_eq!(pd801.0, Status::Pass, "{pd801:?}");

    // The same tree without its records: no window and no free space, and the rules say so
    // instead of passing.
    let bare = tempfile::tempdir().unwrap();
    for sub in ["proc", "sys", "root"] {
        copy_dir(&tree.join(sub), &bare.path().join(sub));
    }
    let (snap, pd504, pd801, pd802) = judge(&Roots::tree(bare.path()));
    let Gathered::Available(os) = &snap.os else {
        panic!("no os facts")
    };
    assert_eq!(os.swap.as_ref().unwrap().basis, "since boot");
    // mariadbd's memory in swap is a leftover, not swapping now: without a window, unknown.
    assert_eq!(
        pd504.0,
        Status::InsufficientData,
        "VmSwap alone is evidence, not a fail: {pd504:?}"
    );
    assert_eq!(pd801.0, Status::InsufficientData, "{pd801:?}");
    assert!(pd801.1.contains("recorded/statvfs"), "{pd801:?}");
    assert_eq!(pd802.0, Status::InsufficientData, "{pd802:?}");
}

#[test]
fn counters_are_live_only() {
    let snap = replay(&fixtures().join("x86-thp-never-large-mariadbd"));
    let Gathered::Available(os) = &snap.os else {
        panic!("no os facts")
    };
    assert_eq!(
        os.counters.as_ref().err(),
        Some("unavailable: not the live /proc (reading a recorded tree)")
    );
    assert!(os.source.starts_with("recorded tree"));
}

/// A malformed or truncated file costs only its own facts, with the file named.
#[test]
fn malformed_files_lose_only_their_section() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    copy_dir(&fixtures().join("power9-shared-uncapped-steal"), &tree);
    std::fs::write(tree.join("proc/meminfo"), "MemTotal: lots\n").unwrap();
    std::fs::write(tree.join("proc/stat"), "cpu  1 2\n").unwrap();
    std::fs::write(
        tree.join("proc/powerpc/lparcfg"),
        "\u{0}\u{1}garbage without keys\n",
    )
    .unwrap();
    std::fs::write(tree.join("sys/devices/system/cpu/online"), "0-\n").unwrap();
    let snap = replay(&tree);
    let Gathered::Available(os) = &snap.os else {
        panic!("no os facts")
    };
    let err = |r: Result<(), &str>| r.err().unwrap_or_default().to_owned();
    assert!(
        err(os.memory.as_ref().map(drop)).contains("meminfo"),
        "{:?}",
        os.memory
    );
    assert!(
        err(os.cpu_time.as_ref().map(drop)).contains("proc/stat"),
        "{:?}",
        os.cpu_time
    );
    assert!(
        err(os.partition.as_ref().map(drop)).contains("lparcfg"),
        "{:?}",
        os.partition
    );
    assert!(
        err(os.topology.as_ref().map(drop)).contains("CPU list"),
        "{:?}",
        os.topology
    );
    // The others are still there.
    assert!(os.cpu.as_ref().is_ok(), "{:?}", os.cpu);
    assert!(os.process.as_ref().is_ok(), "{:?}", os.process);
    // And the rules say why they cannot judge.
    let report = evaluate(&snap);
    let pd403 = report.checks.iter().find(|c| c.code == "PD403").unwrap();
    assert_eq!(pd403.status, powerdiag_rules::Status::InsufficientData);
    assert!(pd403.summary.contains("proc/stat"), "{}", pd403.summary);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_dir(&e.path(), &t);
        } else if ft.is_file() {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The whole pipeline through the binary's --path flags.
#[test]
fn doctor_replays_a_tree_through_the_path_flags() {
    let tree = fixtures().join("power9-dedicated-donating");
    let r = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", "mysql://nobody@127.0.0.1:1/")
        .args([
            "doctor",
            "--format",
            "json",
            "--no-probe",
            "--timeout",
            "1s",
        ])
        .arg("--path.procfs")
        .arg(tree.join("proc"))
        .arg("--path.sysfs")
        .arg(tree.join("sys"))
        .arg("--path.rootfs")
        .arg(tree.join("root")));
    let j = r.json();
    assert_eq!(status(&j, "PD401"), "fail", "{:#}", check(&j, "PD401"));
    assert_eq!(r.code, 2, "a donating partition is critical");
    let bad = run(powerdiag().args(["doctor", "--path.procfs", "/nonexistent"]));
    assert_eq!(bad.code, 3);
    assert!(
        bad.stderr.contains("--path.procfs /nonexistent"),
        "{}",
        bad.stderr
    );
}
