//! PD101's false pass (issue 16): InnoDB's in-memory statistics of a hidden graph table that
//! is not in the dictionary cache (after a restart, or evicted because the server has more
//! tables than `table_definition_cache`) read `NUM_ROWS = 0` and `CLUST_INDEX_SIZE = 0` in
//! `INFORMATION_SCHEMA.INNODB_SYS_TABLESTATS`. Read as 0 bytes, the graph "fitted" the cache and
//! PD101 passed a thrashing cache. The hidden table's persistent statistics are also stale
//! (MariaDB 11.8 persisted 14 rows and 1 page for this 5,000-row index), so a loaded statistic
//! can be just as wrong. Each run here starts from a freshly restarted server, where nothing has
//! opened the vector table yet; whichever of the two states a run meets, PD101 must fail.
//!
//! This test owns the `evict` server (11.8, started by tests/run.sh with
//! `mhnsw_max_cache_size=1M`): it restarts it.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::{SeedableRng, rngs::StdRng};
use rand_distr::{Distribution, Normal};
use serde_json::Value;

use crate::agent::{eventually, get, start_agent};
use crate::support::*;

const ROWS: usize = 5_000;
const DIM: usize = 128;
/// The server option the harness starts `evict` with (tests/run.sh): a restart resets
/// `SET GLOBAL`, so the undersized cache must come from the option file.
pub(crate) const OPTIONS: &str = "mhnsw_max_cache_size=1M";

/// `pd_evict.docs`: 5,000 × 128-d vectors, a graph of ≈ 2 MB against a 1 MiB cache.
async fn prepare(server: &Server) {
    let pool = server.pool();
    let mut c = pool.get_conn().await.expect("connect as root");
    let rows: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='pd_evict' AND TABLE_NAME='docs'")
        .await
        .unwrap();
    let complete = rows == Some(1)
        && c.query_first::<u64, _>("SELECT COUNT(*) FROM pd_evict.docs")
            .await
            .unwrap()
            == Some(ROWS as u64);
    if !complete {
        c.query_drop("DROP DATABASE IF EXISTS pd_evict")
            .await
            .unwrap();
        c.query_drop("CREATE DATABASE pd_evict").await.unwrap();
        c.query_drop(format!(
            "CREATE TABLE pd_evict.docs (id INT PRIMARY KEY, e VECTOR({DIM}) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
        c.query_drop("SET GLOBAL mhnsw_max_cache_size = 268435456")
            .await
            .unwrap();
        let mut rng = StdRng::seed_from_u64(16);
        let unit = Normal::new(0.0f32, 1.0).unwrap();
        let mut batch = Vec::new();
        for id in 1..=ROWS {
            let v: Vec<String> = (0..DIM)
                .map(|_| format!("{:.3}", unit.sample(&mut rng)))
                .collect();
            batch.push(format!("({id},VEC_FromText('[{}]'))", v.join(",")));
            if batch.len() == 500 || id == ROWS {
                c.query_drop(format!(
                    "INSERT INTO pd_evict.docs (id, e) VALUES {}",
                    batch.join(",")
                ))
                .await
                .unwrap();
                batch.clear();
            }
        }
        // Persistent statistics for the hidden table too: the source doctor falls back on.
        c.query_drop("ANALYZE TABLE pd_evict.docs").await.unwrap();
    }
    drop(c);
    pool.disconnect().await.unwrap();
}

/// Restarts `evict` with its options; nothing opens the vector table afterwards.
fn restart() {
    restart_server("evict", "11.8", OPTIONS);
}

/// PD101 of a doctor report: must fail, never pass on an unknown or zero size. Returns
/// whether its evidence says the statistics were not loaded (the state this test is about).
fn pd101_fails(report: &Value) -> bool {
    let c = check(report, "PD101");
    assert_eq!(c["status"], "fail", "PD101 must fail: {c:#}");
    let evidence = c["evidence"].to_string();
    assert!(!evidence.contains("graph ≈ 0 B"), "{c:#}");
    // PD502 may fail or lack data; it never judges a 0-byte graph.
    let l3 = check(report, "PD502");
    assert!(!l3["summary"].to_string().contains(" 0 B"), "{l3:#}");
    evidence.contains("statistics of the hidden graph table were not loaded")
        || evidence.contains("(stale)")
}

#[test]
fn unloaded_hidden_table_statistics_are_never_zero_bytes() {
    let _lock = crate::support::evict_lock();
    let server = Server::get("evict");
    block_on(prepare(&server));
    let root = server.root_url();
    let mut unloaded_seen = 0;

    for extra in [&["--no-probe"][..], &["--probe-queries", "5"][..]] {
        restart();
        let r = doctor_json(&root, extra);
        assert_eq!(r.code, 2, "a critical finding: {}", r.stderr);
        if pd101_fails(&r.json()) {
            unloaded_seen += 1;
        }
    }

    // The agent (its probe off by default) on a freshly restarted server.
    restart();
    let agent = start_agent(
        &root,
        "[sample]\ninterval = \"2s\"\ntimeout = \"1500ms\"\nwindow = \"0s\"\n[probe]\nenabled = false\n",
    );
    let fail = "powerdiag_check{code=\"PD101\",name=\"mhnsw-cache-undersized\",severity=\"critical\",status=\"fail\"} 1";
    let pass = "powerdiag_check{code=\"PD101\",name=\"mhnsw-cache-undersized\",severity=\"critical\",status=\"pass\"} 1";
    let mut bodies = Vec::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            let body = get(agent.port, "/metrics")
                .map(|(_, _, b)| b)
                .unwrap_or_default();
            let done = body.contains(fail);
            assert!(!body.contains(pass), "the agent passed PD101:\n{body}");
            bodies.push(body);
            done
        }),
        "the agent never reported PD101 failing: {:?}",
        bodies.last()
    );
    let snapshot = get(agent.port, "/api/v1/snapshot")
        .map(|(_, _, b)| b)
        .unwrap_or_default();
    if snapshot.contains("were not loaded") || snapshot.contains("(stale)") {
        unloaded_seen += 1;
    }
    drop(agent);

    // The runs above must have met the state at least once, or this test proved nothing.
    assert!(
        unloaded_seen > 0,
        "no run read the hidden table with unloaded or stale statistics: the reproduction no longer works"
    );
}
