//! Verdicts that hold (issue 16): doctor, run several times on an unchanged server while the
//! host carries background load, gives the same verdict for every rule. A measured share near
//! its limit may be "borderline, not judged" (`insufficient_data` saying so) in one run, and a
//! rule judging status counters over the sample window may find too little in one window
//! (`insufficient_data` naming the window), but no rule may pass in one run and fail in another,
//! and no other verdict may change.
//!
//! Runs against the 11.8 server's 20k × 768 vector index with its default 16 MiB cache (the
//! probe measures a thrashing cache), holding the 11.8 lock like the vector test.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use crate::support::*;

/// Runs of doctor compared.
const RUNS: usize = 3;

/// A busy thread per CPU but one: load beside the server, not a saturated host.
fn background_load(stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (0..cpus.saturating_sub(1).max(1))
        .map(|_| {
            let stop = Arc::clone(stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..100_000u64 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i),
                        );
                    }
                }
            })
        })
        .collect()
}

#[test]
fn doctor_gives_the_same_verdicts_run_after_run_under_load() {
    let _lock = m118_lock();
    let _machine = machine_load_lock();
    let server = Server::m118();
    block_on(crate::vector::prepare(&server));
    let root = server.root_url();

    let stop = Arc::new(AtomicBool::new(false));
    let load = background_load(&stop);
    // The default window (1 s), as a user runs it: the case where PD403 flipped.
    let reports: Vec<serde_json::Value> = (0..RUNS)
        .map(|_| doctor_json(&root, &["--sample-window", "1s"]).json())
        .collect();
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }

    let mut by_rule: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for r in &reports {
        for c in r["checks"].as_array().unwrap() {
            by_rule
                .entry(c["code"].as_str().unwrap().to_owned())
                .or_default()
                .push((
                    c["status"].as_str().unwrap().to_owned(),
                    c["summary"].as_str().unwrap_or_default().to_owned(),
                ));
        }
    }
    assert!(by_rule.len() > 15, "{by_rule:?}");
    for (code, runs) in &by_rule {
        assert_eq!(runs.len(), RUNS, "{code}: {runs:?}");
        let same = runs.iter().all(|(s, _)| *s == runs[0].0);
        if same {
            continue;
        }
        let has = |st: &str| runs.iter().any(|(s, _)| s == st);
        assert!(
            !(has("pass") && has("fail")),
            "{code} passed in one run and failed in another on an unchanged host: {runs:#?}"
        );
        for (s, summary) in runs {
            // How much happens in a 1 s window depends on what else uses the server.
            let quiet_window = s == "insufficient_data" && summary.contains("sample window");
            assert!(
                s == "pass" || s == "fail" || summary.contains("borderline") || quiet_window,
                "{code} changed its verdict without saying why: {runs:#?}"
            );
        }
    }
    // The probe's measurements are judged the same way each time.
    for code in ["PD101", "PD102"] {
        assert!(
            by_rule[code].iter().all(|(s, _)| s == "fail"),
            "{code}: {:#?}",
            by_rule[code]
        );
    }
}
