//! PD801 and PD807 on a real server whose datadir is on a small filesystem (a tmpfs that
//! `tests/run.sh` mounts for the `tiny` server): filled past the limit — space, then inodes —
//! it fails, freed it passes. Swap and a
//! saturated disk cannot be produced on this VM: PD504 and PD802 are covered by their unit
//! tests and by the recorded window of tests/fixtures/linux/x86-swapping-saturated-datadir
//! (tests/it/linux_fixtures.rs); here PD802 must say why it could not judge a tmpfs (no block
//! device), and record.sh's window and statvfs of a live server's host must replay.

use std::{path::PathBuf, time::Duration};

use mysql_async::prelude::Queryable;
use powerdiag_agent::collect::os::{self, Roots, ServerProcess};
use powerdiag_rules::Gathered;

use crate::support::{Server, block_on, check, doctor_json};

/// tests/fixtures/linux/record.sh with RECORD_WINDOW and RECORD_DIRS on the host of a live
/// server: the tree replays over the recorded window, with the recorded free space.
#[test]
fn record_sh_records_a_window_and_free_space_that_replay() {
    let server = Server::m1011();
    let (datadir, tmpdir): (String, String) = block_on(async {
        let mut c = server.pool().get_conn().await.unwrap();
        c.query_first("SELECT @@datadir, @@tmpdir")
            .await
            .unwrap()
            .unwrap()
    });
    let out = tempfile::tempdir().unwrap();
    let tree = out.path().join("tree");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/linux/record.sh");
    let rec = std::process::Command::new(script)
        .arg(&tree)
        .arg(server.pid().to_string())
        .env("RECORD_WINDOW", "1")
        .env("RECORD_DIRS", format!("{datadir} {tmpdir}"))
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "record.sh: {}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let recorded = tree.join("recorded");
    let seconds: f64 = std::fs::read_to_string(recorded.join("window-seconds"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(seconds >= 1.0, "{seconds}");
    // path -> bytes available, as stat -f printed them.
    let table = std::fs::read_to_string(recorded.join("statvfs")).unwrap();
    let row = |dir: &str| -> Vec<u64> {
        table
            .lines()
            .find(|l| l.split('\t').next() == Some(dir))
            .unwrap_or_else(|| panic!("{dir} not in {table}"))
            .split('\t')
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect()
    };
    let available = |dir: &str| -> u64 {
        let r = row(dir);
        r[0] * r[2]
    };

    let dirs = vec![
        ("datadir".to_owned(), datadir.clone()),
        ("tmpdir".to_owned(), tmpdir.clone()),
    ];
    let roots = Roots::tree(&tree);
    let w = os::begin(
        &roots,
        ServerProcess::Local {
            pid_file: "/run/mysqld/mysqld.pid",
            dirs: &dirs,
        },
        Duration::ZERO,
        &Default::default(),
    );
    let (facts, _) = os::finish(w, Duration::ZERO, Duration::from_secs(30));
    let window = format!("window {seconds:.2} s");
    assert_eq!(facts.swap.as_ref().unwrap().basis, window);
    assert_eq!(facts.cpu_time.as_ref().unwrap().basis, window);
    let Gathered::Available(fs) = &facts.storage else {
        panic!("{:?}", facts.storage)
    };
    for f in fs {
        assert_eq!(f.space_unread, None, "{f:?}");
        assert_eq!(f.available_bytes, available(&f.path), "{f:?}");
        // The inodes as stat -f printed them (f_files, f_ffree): PD807's facts.
        let r = row(&f.path);
        assert_eq!(
            (f.inodes_total, f.inodes_available),
            (Some(r[3]), Some(r[4])),
            "{f:?}"
        );
        assert!(f.total_bytes >= f.available_bytes, "{f:?}");
        // Over the recorded window, or a filesystem without a block device (tmpfs, overlay).
        match (&f.io_basis, &f.io_unread) {
            (Some(basis), None) => assert_eq!(basis, &window, "{f:?}"),
            (None, Some(why)) => assert!(why.contains("has no block device"), "{f:?}"),
            other => panic!("{other:?}: {f:?}"),
        }
    }
    assert!(fs.iter().any(|f| f.roles.contains(&"datadir".to_owned())));
}

/// The `tiny` server's filesystem is filled by two tests: one at a time.
fn tiny_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tiny_mount() -> PathBuf {
    PathBuf::from(
        std::env::var("POWERDIAG_IT_TINY_DIR")
            .expect("POWERDIAG_IT_TINY_DIR: start the servers with tests/run.sh"),
    )
}

/// (total, free) inodes of the filesystem at `path`, as `stat -f` prints them.
fn inodes(path: &std::path::Path) -> (u64, u64) {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%c %d"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let n: Vec<u64> = text
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    (n[0], n[1])
}

/// Sets the tmpfs's inode count (`mount -o remount,nr_inodes=N`).
fn set_inodes(mount: &std::path::Path, n: u64) {
    let st = std::process::Command::new("mount")
        .args(["-o", &format!("remount,nr_inodes={n}")])
        .arg(mount)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "remount {} with nr_inodes={n}",
        mount.display()
    );
}

/// Puts the tmpfs's inode count back, whatever the test did.
struct InodesBack(PathBuf, u64);

impl Drop for InodesBack {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.join("inode-fill"));
        set_inodes(&self.0, self.1);
    }
}

/// The tmpfs gets room for only 500 more files, then files take all but 2% of its inodes:
/// PD807 is critical, naming the datadir; removed, it passes.
#[test]
fn an_inode_starved_datadir_fails_pd807_and_freeing_them_passes() {
    let _tiny = tiny_lock();
    let server = Server::get("tiny");
    let mount = tiny_mount();
    let report = || doctor_json(&server.root_url(), &["--no-probe", "--sample-window", "0"]);
    let pd807 = check(&report().json(), "PD807").clone();
    assert_eq!(pd807["status"], "pass", "{pd807:#}");

    let (total, free) = inodes(&mount);
    let _back = InodesBack(mount.clone(), total);
    let cap = total - free + 500;
    set_inodes(&mount, cap);
    let (cap_seen, free) = inodes(&mount);
    assert_eq!(cap_seen, cap);
    let dir = mount.join("inode-fill");
    std::fs::create_dir(&dir).unwrap();
    // Leave 2% free: below PD807's 3% critical line (the directory took one).
    let leave = cap * 2 / 100;
    for i in 0..free - 1 - leave {
        std::fs::File::create(dir.join(i.to_string())).unwrap();
    }
    let j = report().json();
    let pd807 = check(&j, "PD807");
    assert_eq!(pd807["status"], "fail", "{pd807:#}");
    assert_eq!(pd807["severity"], "critical", "{pd807:#}");
    assert!(
        pd807["summary"].as_str().unwrap().contains("datadir"),
        "{pd807:#}"
    );

    // Freed: passes again.
    std::fs::remove_dir_all(&dir).unwrap();
    let pd807 = check(&report().json(), "PD807").clone();
    assert_eq!(pd807["status"], "pass", "{pd807:#}");
}

#[test]
fn a_nearly_full_datadir_fails_pd801_and_freeing_it_passes() {
    let _tiny = tiny_lock();
    let server = Server::get("tiny");
    let mount = tiny_mount();
    let fill = mount.join("fill");
    let _ = std::fs::remove_file(&fill);
    let report = || doctor_json(&server.root_url(), &["--no-probe", "--sample-window", "0"]);

    let r = report();
    let j = r.json();
    let pd801 = check(&j, "PD801");
    assert_eq!(pd801["status"], "pass", "{pd801:#}");
    assert!(pd801.to_string().contains("tmpfs"), "{pd801:#}");
    // No block device under a tmpfs: not measured, and not a pass.
    let pd802 = check(&j, "PD802");
    assert_eq!(pd802["status"], "insufficient_data", "{pd802:#}");
    assert!(
        pd802["summary"]
            .as_str()
            .unwrap()
            .contains("no block device"),
        "{pd802:#}"
    );

    // Leave 3% of the filesystem free: below the 5% critical line.
    let out = std::process::Command::new("df")
        .args(["--output=size,avail", "-B1"])
        .arg(&mount)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let nums: Vec<u64> = text
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let (size, avail) = (nums[0], nums[1]);
    let len = avail.saturating_sub(size * 3 / 100);
    let st = std::process::Command::new("fallocate")
        .args(["-l", &len.to_string()])
        .arg(&fill)
        .status()
        .unwrap();
    assert!(st.success(), "fallocate {len} bytes in {}", mount.display());
    let r = report();
    let _ = std::fs::remove_file(&fill);
    let j = r.json();
    let pd801 = check(&j, "PD801");
    assert_eq!(pd801["status"], "fail", "{pd801:#}");
    let summary = pd801["summary"].as_str().unwrap();
    assert!(
        summary.contains("datadir") && summary.contains("critically low"),
        "{summary}"
    );
    assert_ne!(
        r.code, 0,
        "a failing warning changes the exit status: {}",
        r.stdout
    );

    // Freed: passes again.
    let pd801 = check(&report().json(), "PD801").clone();
    assert_eq!(pd801["status"], "pass", "{pd801:#}");
}
