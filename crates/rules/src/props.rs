//! Property test: no snapshot, however odd, makes evaluation panic or lose a rule.

use proptest::prelude::*;

use crate::{
    Gathered, IndexProbe, Probe, ProbeQuery, ProfileStage, QueryProfile, RULES, Snapshot,
    StatusVar, Var, VectorIndex, evaluate, testing::SnapshotBuilder,
};

fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("ON".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("99999999999999999999999".to_owned()),
        Just("-1".to_owned()),
        Just("16M".to_owned()),
        "\\PC{0,12}",
    ]
}

fn odd_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX / 2),
        any::<u64>()
    ]
}

fn vector_index() -> impl Strategy<Value = VectorIndex> {
    (
        proptest::option::of(odd_u64()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(odd_u64()),
        proptest::option::of(odd_string()),
    )
        .prop_map(|(rows, dimensions, m, hidden, distance)| VectorIndex {
            schema: "s".into(),
            table: "t".into(),
            index: "i".into(),
            rows,
            dimensions,
            m,
            hidden_table_bytes: hidden,
            distance,
            ..Default::default()
        })
}

fn probe() -> impl Strategy<Value = Probe> {
    let query =
        (odd_u64(), any::<bool>(), odd_u64(), odd_u64(), odd_u64()).prop_map(|(l, r, a, b, c)| {
            ProbeQuery {
                latency_us: l,
                repeat: r,
                handler_read_last: a,
                handler_read_rnd: b,
                buffer_pool_read_requests: c,
            }
        });
    let stage =
        (odd_string(), odd_u64(), odd_u64(), odd_u64()).prop_map(|(s, d, u, y)| ProfileStage {
            status: s,
            duration_us: d,
            cpu_user_us: u,
            cpu_system_us: y,
            ..Default::default()
        });
    (
        proptest::collection::vec(query, 0..30),
        any::<u32>(),
        proptest::collection::vec(stage, 0..5),
        any::<bool>(),
    )
        .prop_map(|(queries, limit, stages, with_profile)| Probe {
            indexes: vec![IndexProbe {
                schema: "s".into(),
                table: "t".into(),
                index: "i".into(),
                limit,
                queries,
                ..Default::default()
            }],
            profile: with_profile.then(|| {
                Gathered::Available(QueryProfile {
                    index: "i".into(),
                    stages: stages.clone(),
                })
            }),
            more_profiles: if with_profile {
                vec![QueryProfile {
                    index: "i".into(),
                    stages,
                }]
            } else {
                vec![]
            },
        })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        prop_oneof![
            Just("11.8.6-MariaDB"),
            Just("10.2.1-MariaDB"),
            Just("8.0.36"),
            Just("10.11.9-MariaDB")
        ],
        proptest::collection::vec((0..Var::ALL.len(), odd_string()), 0..12),
        proptest::collection::vec((0..StatusVar::ALL.len(), odd_string()), 0..6),
        proptest::collection::vec(vector_index(), 0..4),
        proptest::option::of(probe()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(version, vars, status, indexes, probe, threads)| {
            let mut b = SnapshotBuilder::new()
                .mariadb(version)
                .host(|h| h.hardware_threads = threads);
            for (i, v) in vars {
                b = b.var(Var::ALL[i], &v);
            }
            for (i, v) in status {
                b = b.status(StatusVar::ALL[i], &v);
            }
            for idx in indexes {
                b = b.vector_index(idx);
            }
            if let Some(p) = probe {
                b = b.probe(p);
            }
            b.build()
        })
}

proptest! {
    #[test]
    fn evaluation_never_panics_and_covers_every_rule(s in snapshot()) {
        let report = evaluate(&s);
        prop_assert_eq!(report.checks.len(), RULES.len());
        for c in &report.checks {
            prop_assert!(!c.summary.is_empty(), "{} has an empty summary", c.code);
        }
        // A snapshot survives a JSON round trip unchanged.
        let json = serde_json::to_string(&s).unwrap();
        let back: Snapshot = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, s);
    }

    /// Any threshold anywhere in its accepted range, including the extremes.
    #[test]
    fn any_accepted_threshold_is_safe(s in snapshot(), picks in proptest::collection::vec((any::<prop::sample::Index>(), 0.0f64..=1.0, 0u8..3), 0..8)) {
        let all: Vec<_> = crate::Settings::default().effective().map(|(r, t, _)| (r.meta().code, t)).collect();
        let mut settings = crate::Settings::default();
        for (i, x, edge) in picks {
            let (code, t) = all[i.index(all.len())];
            let v = match edge { 0 => t.min, 1 => t.max, _ => t.min + (t.max - t.min) * x };
            let v = if matches!(t.unit, crate::Unit::Count | crate::Unit::Bytes) { v.round() } else { v };
            prop_assert!(settings.set(code, t.key, v).is_ok(), "{code} {} = {v}", t.key);
        }
        let report = crate::evaluate_with(&s, &settings);
        prop_assert_eq!(report.checks.len(), RULES.len());
    }
}
