//! PD801 on a real server whose datadir is on a small filesystem (a tmpfs that `tests/run.sh`
//! mounts for the `tiny` server): filled past the limit it fails, freed it passes. Swap and a
//! saturated disk cannot be produced on this VM: PD504 and PD802 are covered by their unit
//! tests, and here PD802 must say why it could not judge a tmpfs (no block device).

use std::path::PathBuf;

use crate::support::{Server, check, doctor_json};

#[test]
fn a_nearly_full_datadir_fails_pd801_and_freeing_it_passes() {
    let server = Server::get("tiny");
    let mount = PathBuf::from(
        std::env::var("POWERDIAG_IT_TINY_DIR")
            .expect("POWERDIAG_IT_TINY_DIR: start the servers with tests/run.sh"),
    );
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
