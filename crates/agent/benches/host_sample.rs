//! Cost of one host sample (the OS collector without a sample window): live on this machine,
//! and replaying the 96-CPU POWER9 fixture tree (the largest sysfs walk in the fixtures).
//!
//! `cargo bench -p powerdiag-agent --bench host_sample`. The work is synchronous file reading
//! and parsing, so wall time per iteration is CPU time.

use std::{hint::black_box, path::Path, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use powerdiag_agent::collect::os::{self, Roots};

fn host_sample(c: &mut Criterion) {
    let live = Roots::default();
    c.bench_function("host sample, live", |b| {
        b.iter(|| {
            black_box(os::finish(
                os::begin(
                    &live,
                    os::ServerProcess::Unknown,
                    Duration::ZERO,
                    &Default::default(),
                ),
                Duration::ZERO,
                Duration::from_secs(5),
            ))
        })
    });
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux/power9-shared-uncapped-steal");
    let tree = Roots::tree(&tree);
    c.bench_function("host sample, POWER9 96-CPU tree", |b| {
        b.iter(|| {
            black_box(os::finish(
                os::begin(
                    &tree,
                    os::ServerProcess::Unknown,
                    Duration::ZERO,
                    &Default::default(),
                ),
                Duration::ZERO,
                Duration::from_secs(5),
            ))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = host_sample
}
criterion_main!(benches);
