//! Cost of judging: every rule on the example snapshots and on the largest snapshot the
//! collectors produce (96 POWER9 threads, the 64 vector indexes discovery describes at most),
//! and the snapshot's JSON encoding (what `collect` writes and the agent serves) and decoding
//! (`read_snapshot`, what `--from` and `diff` read).
//!
//! `cargo bench -p powerdiag-rules --bench rules`

use std::{hint::black_box, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use powerdiag_rules::{
    Snapshot, StatusVar, Var, evaluate, read_snapshot,
    testing::{SnapshotBuilder, big_vector_index, lpar, on_power_lpar},
};

const EXAMPLES: [(&str, &str); 2] = [
    (
        "s924-linux-dedicated",
        include_str!("../../../examples/s924-linux-dedicated.json"),
    ),
    (
        "s924-aix-shared-gcc",
        include_str!("../../../examples/s924-aix-shared-gcc.json"),
    ),
];

/// The largest snapshot the collectors produce: a 96-thread POWER9 LPAR and 64 vector indexes.
fn big_snapshot() -> Snapshot {
    let mut b = SnapshotBuilder::new()
        .mariadb("11.8.6-MariaDB")
        .os(|o| on_power_lpar(o, lpar(true, false, false, 3.0, 12), 96, 8))
        .var(Var::InnodbBufferPoolSize, "137438953472")
        .status(StatusVar::Questions, "123456789");
    for i in 0..64 {
        let mut v = big_vector_index();
        v.table = format!("docs_{i:02}");
        v.hidden_table = Some(format!("app/docs_{i:02}#i#01"));
        v.rows = Some(20_000 * (i + 1));
        b = b.vector_index(v);
    }
    b.build()
}

fn rules(c: &mut Criterion) {
    for (name, text) in EXAMPLES {
        let snapshot = read_snapshot(text).expect("example snapshot");
        c.bench_function(&format!("evaluate, {name}"), |b| {
            b.iter(|| black_box(evaluate(black_box(&snapshot))))
        });
    }
    let big = big_snapshot();
    c.bench_function("evaluate, 96 threads + 64 vector indexes", |b| {
        b.iter(|| black_box(evaluate(black_box(&big))))
    });
}

fn encoding(c: &mut Criterion) {
    let (name, text) = EXAMPLES[0];
    let snapshot = read_snapshot(text).expect("example snapshot");
    c.bench_function(&format!("encode JSON, {name}"), |b| {
        b.iter(|| black_box(serde_json::to_string(black_box(&snapshot)).expect("encode")))
    });
    c.bench_function(&format!("read_snapshot, {name}"), |b| {
        b.iter(|| black_box(read_snapshot(black_box(text)).expect("decode")))
    });
    let big = big_snapshot();
    let big_text = serde_json::to_string(&big).expect("encode");
    c.bench_function("encode JSON, 96 threads + 64 vector indexes", |b| {
        b.iter(|| black_box(serde_json::to_string(black_box(&big)).expect("encode")))
    });
    c.bench_function("read_snapshot, 96 threads + 64 vector indexes", |b| {
        b.iter(|| black_box(read_snapshot(black_box(&big_text)).expect("decode")))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = rules, encoding
}
criterion_main!(benches);
