//! Galera (issue 34, PD225–PD227) on a real three-node cluster of MariaDB 11.8 (`gal1`..`gal3`,
//! started by tests/run.sh through tests/harness/galera.sh, owned by this file): healthy → all
//! pass on every node; gal3 held to 2% of a CPU (tests/harness/cpu-cgroup.sh) while gal1 writes
//! → gal3's receive queue stays long (PD227) and it sends flow control, which pauses gal1
//! (PD226 on gal1: "another node sends them", on gal3: "this node sent"); the CPU limit lifted
//! → cleared on gal1's agent within two samples; gal3 killed → gal1's agent fails PD225 (the
//! cluster down from 3 nodes); gal3 restarted (it rejoins by IST) → cleared.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mysql_async::{Conn, prelude::Queryable};
use serde_json::Value;

use crate::support::*;
use crate::watcher::{Watcher, conn, exec, explain, global_status};

const CGROUP: &str = "gal3";

/// doctor with a 2 s window (PD226 measures the time paused over it).
fn doctor(server: &Server) -> Value {
    doctor_json(
        &server.root_url(),
        &[
            "--sample-window",
            "2s",
            "--no-probe",
            "--statements",
            "0",
            "--timeout",
            "20s",
        ],
    )
    .json()
}

async fn status_u64(c: &mut Conn, name: &str) -> u64 {
    let v = global_status(c, name).await;
    v.parse().unwrap_or_else(|_| panic!("status {name}: {v:?}"))
}

/// Single-row updates of a table without a key on gal1 (each a full scan wherever it is
/// applied), until dropped.
struct Writes {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writes {
    fn start(server: &Server) -> Writes {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let opts = crate::watcher::opts(server);
        let thread = std::thread::spawn(move || {
            block_on(async {
                let mut c = Conn::new(opts).await.unwrap();
                let mut i = 0u64;
                while !flag.load(Ordering::Relaxed) {
                    i += 1;
                    c.query_drop(format!(
                        "UPDATE pd_galera.nk SET b = b + 1 WHERE a = {}",
                        4900 + i % 100
                    ))
                    .await
                    .unwrap();
                }
            })
        });
        Writes {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Leaves the CPU-limited cgroup when the test ends, however it ends.
struct Cgroup;

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::process::Command::new(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/harness/cpu-cgroup.sh"),
        )
        .args(["leave", CGROUP])
        .status();
    }
}

#[test]
fn a_galera_cluster_healthy_throttled_and_losing_a_node() {
    let nodes = [
        Server::get("gal1"),
        Server::get("gal2"),
        Server::get("gal3"),
    ];
    let [g1, _, g3] = &nodes;

    // Healthy: every node Primary, Synced, ready, in a cluster of 3.
    block_on(async {
        exec(
            &mut conn(g1).await,
            &[
                "DROP DATABASE IF EXISTS pd_galera",
                "CREATE DATABASE pd_galera",
                "CREATE TABLE pd_galera.nk (a INT, b INT) ENGINE=InnoDB",
                "INSERT INTO pd_galera.nk SELECT seq, seq FROM pd_galera.seq_1_to_5000",
            ],
        )
        .await
    });
    for n in &nodes {
        let report = doctor(n);
        let text = explain(&report, &["PD225", "PD226", "PD227"]);
        let pd225 = check(&report, "PD225");
        assert_eq!(pd225["status"], "pass", "{text}");
        assert_eq!(
            pd225["summary"], "the node is Primary, Synced and ready in a cluster of 3",
            "{text}"
        );
        assert_eq!(status(&report, "PD226"), "pass", "{text}");
        assert_eq!(status(&report, "PD227"), "pass", "{text}");
    }
    assert_eq!(
        status(&doctor(&Server::get("m118")), "PD225"),
        "not_applicable"
    );
    let out = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", g1.root_url())
        .args([
            "doctor",
            "--no-probe",
            "--statements",
            "0",
            "--color",
            "never",
        ]));
    assert!(
        out.stdout
            .contains("  galera: Primary, Synced, ready ON, cluster of 3; receive queue "),
        "{}",
        out.stdout
    );

    // gal3 held to 2% of a CPU while gal1 writes: its queue grows and it sends flow control.
    let watcher = Watcher::start(g1);
    watcher.until(&["PD225", "PD226"], "pass", Duration::from_secs(30));
    let cgroup = Cgroup;
    harness_script("cpu-cgroup.sh", &["enter", CGROUP, &g3.pid().to_string()]);
    harness_script("cpu-cgroup.sh", &["quota", CGROUP, "2"]);
    let writes = Writes::start(g1);
    block_on(async {
        let mut c = conn(g1).await;
        let t0 = std::time::Instant::now();
        while status_u64(&mut c, "wsrep_flow_control_recv").await == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no flow control within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let (verdicts, body) = watcher.until(&["PD226"], "fail", Duration::from_secs(60));
    let paused: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("powerdiag_mariadb_galera_flow_control_paused_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no flow-control time in {body}"));
    assert!(paused > 0.0, "{body}");
    assert!(body.contains("powerdiag_mariadb_galera_synced 1"), "{body}");
    let report = watcher.report();
    let pd226 = check(&report, "PD226");
    assert!(
        pd226["summary"]
            .as_str()
            .unwrap()
            .contains("this node sent none and received"),
        "{verdicts:?} {}",
        explain(&report, &["PD226"])
    );
    // gal3's queue stays long across doctor's window once flow control holds it near
    // gcs.fc_limit (before, it is still growing, or a burst), and gal3 is seen sending: a
    // window that falls inside one long pause holds no flow-control message at all (seen on a
    // loaded host: paused 94.5% of a 1.7 s window, 0 sent, 0 received), so it names no sender.
    let t0 = std::time::Instant::now();
    let report = loop {
        let report = doctor(g3);
        let sender_seen = check(&report, "PD226")["summary"]
            .as_str()
            .is_some_and(|s| s.contains("this node sent "));
        if (status(&report, "PD227") == "fail" && sender_seen)
            || t0.elapsed() > Duration::from_secs(60)
        {
            break report;
        }
    };
    let text = explain(&report, &["PD226", "PD227"]);
    let pd227 = check(&report, "PD227");
    assert_eq!(pd227["status"], "fail", "{text}");
    assert!(
        check(&report, "PD226")["summary"]
            .as_str()
            .unwrap()
            .contains("this node sent "),
        "{text}"
    );
    assert!(
        pd227["summary"]
            .as_str()
            .unwrap()
            .contains("write sets wait to be applied, and at least 16 at every read"),
        "{text}"
    );
    assert!(
        pd227["remediation"]
            .as_str()
            .unwrap()
            .contains("a CPU limit on it"),
        "{text}"
    );
    // The fix the finding names: the node's CPU. Lifted, gal3 first applies the backlog it
    // holds and goes on sending flow control until its queue is below `gcs.fc_limit` (seconds
    // on a loaded host: seen failing PD226 6 s after the lift); from the moment it stops
    // sending, gal1's flow control clears within two samples while the writes go on.
    drop(cgroup);
    block_on(async {
        let mut c = conn(g3).await;
        let t0 = std::time::Instant::now();
        let mut sent = status_u64(&mut c, "wsrep_flow_control_sent").await;
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = status_u64(&mut c, "wsrep_flow_control_sent").await;
            if now == sent {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "gal3 still sends flow control 120 s after its CPU limit was lifted"
            );
            sent = now;
        }
        // And gal1 no longer paused: under a loaded host another node (gal2) may send flow
        // control for a while too; the fix moment is when the cluster stops pausing the writer
        // (its pause counter still over two polls), which is what PD226 judges.
        let mut c = conn(g1).await;
        let mut paused = status_u64(&mut c, "wsrep_flow_control_paused_ns").await;
        let mut still = 0;
        while still < 2 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = status_u64(&mut c, "wsrep_flow_control_paused_ns").await;
            still = if now == paused { still + 1 } else { 0 };
            paused = now;
            assert!(
                t0.elapsed() < Duration::from_secs(180),
                "gal1 is still paused by flow control 180 s after gal3's CPU limit was lifted"
            );
        }
    });
    watcher
        .after_fix(&["PD226"], Duration::from_secs(4))
        .assert_cleared();
    drop(writes);
    block_on(async {
        let mut c = conn(g3).await;
        let t0 = std::time::Instant::now();
        while status_u64(&mut c, "wsrep_local_recv_queue").await > 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "gal3 did not catch up"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    assert_eq!(status(&doctor(g3), "PD227"), "pass");

    // gal3 killed: the cluster is down to 2 nodes on the survivors' agent; restarted, it
    // rejoins by IST and the finding clears.
    harness_script("galera.sh", &["kill", "3"]);
    let (_, body) = watcher.until(&["PD225"], "fail", Duration::from_secs(60));
    let report = watcher.report();
    let pd225 = check(&report, "PD225");
    assert!(
        pd225["summary"]
            .as_str()
            .unwrap()
            .starts_with("the cluster has 2 node(s), down from 3 "),
        "{}",
        explain(&report, &["PD225"])
    );
    assert!(
        body.contains("powerdiag_mariadb_galera_cluster_size 2"),
        "{body}"
    );
    harness_script("galera.sh", &["node", "3"]);
    watcher
        .after_fix(&["PD225"], Duration::from_secs(4))
        .assert_cleared();
    drop(watcher);
    assert_eq!(status(&doctor(g3), "PD225"), "pass");
}
