use std::{net::IpAddr, sync::Arc, time::Duration};

use super::*;
use crate::testing::*;

// -- basic auth ---------------------------------------------------------------------------

#[test]
fn basic_auth_accepts_only_the_right_password() {
    let config = parse(&users_yaml()).unwrap();
    assert!(config.check_basic_auth(Some(&basic("alice", "s3cret"))));
    assert!(
        config.check_basic_auth(Some(&basic("bob", "hunter2"))),
        "$2y$ hashes (htpasswd) work"
    );
    // The scheme is case-insensitive; surrounding blanks are fine.
    assert!(config.check_basic_auth(Some(&format!(" basic {}", BASE64.encode("alice:s3cret")))));

    assert!(!config.check_basic_auth(Some(&basic("alice", "wrong"))));
    assert!(
        !config.check_basic_auth(Some(&basic("alice", "hunter2"))),
        "bob's password"
    );
    assert!(!config.check_basic_auth(Some(&basic("alice", ""))));
    assert!(
        !config.check_basic_auth(Some(&basic("mallory", "s3cret"))),
        "unknown user"
    );
    assert!(!config.check_basic_auth(Some(&basic("", ""))));
}

#[test]
fn basic_auth_rejects_missing_and_malformed_headers() {
    let config = parse(&users_yaml()).unwrap();
    assert!(!config.check_basic_auth(None));
    assert!(!config.check_basic_auth(Some("")));
    assert!(!config.check_basic_auth(Some("Basic")));
    assert!(!config.check_basic_auth(Some("Basic ")));
    assert!(!config.check_basic_auth(Some(&format!("Bearer {}", BASE64.encode("alice:s3cret")))));
    assert!(!config.check_basic_auth(Some("Basic !!!not-base64!!!")));
    assert!(
        !config.check_basic_auth(Some("Basic YWxpY2U6czNjcmV0=")),
        "bad padding"
    );
    assert!(
        !config.check_basic_auth(Some(&format!("Basic {}", BASE64.encode("alice-s3cret")))),
        "no colon"
    );
    assert!(
        !config.check_basic_auth(Some(&format!(
            "Basic {}",
            BASE64.encode(b"\xffalice:s3cret")
        ))),
        "user not UTF-8"
    );
}

#[test]
fn outcomes_are_cached_as_digests() {
    let config = parse(&users_yaml()).unwrap();
    let right = basic("alice", "s3cret");
    assert!(matches!(
        config.check_cached(Some(&right)),
        Check::Bcrypt(_)
    ));
    assert!(config.check_basic_auth(Some(&right)));
    assert!(matches!(config.check_cached(Some(&right)), Check::Allow));
    // A failure is remembered too: the same wrong password costs no second bcrypt...
    let wrong = basic("alice", "wrong");
    assert!(matches!(
        config.check_cached(Some(&wrong)),
        Check::Bcrypt(_)
    ));
    assert!(!config.check_basic_auth(Some(&wrong)));
    assert!(matches!(config.check_cached(Some(&wrong)), Check::Deny));
    // ... and so is an unknown user's (checked against the decoy hash the first time).
    let unknown = basic("mallory", "s3cret");
    assert!(matches!(
        config.check_cached(Some(&unknown)),
        Check::Bcrypt(_)
    ));
    assert!(!config.check_basic_auth(Some(&unknown)));
    assert!(matches!(config.check_cached(Some(&unknown)), Check::Deny));
    // Another wrong password still needs bcrypt; the right one still passes.
    assert!(matches!(
        config.check_cached(Some(&basic("alice", "wrong2"))),
        Check::Bcrypt(_)
    ));
    assert!(config.check_basic_auth(Some(&right)));
    assert!(matches!(config.check_cached(None), Check::Deny));
    // Only fixed-size digests are kept, never the password.
    let verified = lock(&config.auth.verified);
    assert_eq!(verified.len(), 1);
    let failed = lock(&config.auth.failed);
    assert_eq!(failed.len(), 2);
    assert!(
        !verified
            .iter()
            .chain(failed.iter())
            .any(|k| k.windows(5).any(|w| w == b"wrong" || w == b"s3cre"))
    );
}

#[test]
fn a_password_that_matched_another_hash_is_not_trusted_after_a_change() {
    // The digest covers the hash: after a reload that changes alice's hash, her old password's
    // cached success does not apply.
    let config = parse(&users_yaml()).unwrap();
    assert!(config.check_basic_auth(Some(&basic("alice", "s3cret"))));
    let new_hash = bcrypt::hash("n3w", 4).unwrap();
    let changed = parse(&format!("basic_auth_users:\n  alice: {new_hash}\n"))
        .unwrap()
        .with_auth_cache_of(&config);
    assert!(matches!(
        changed.check_cached(Some(&basic("alice", "s3cret"))),
        Check::Bcrypt(_)
    ));
    assert!(!changed.check_basic_auth(Some(&basic("alice", "s3cret"))));
    assert!(changed.check_basic_auth(Some(&basic("alice", "n3w"))));
}

#[test]
fn the_caches_stay_bounded() {
    let config = parse(&users_yaml()).unwrap();
    for (set, capacity) in [
        (&config.auth.verified, VERIFIED_CAPACITY),
        (&config.auth.failed, FAILED_CAPACITY),
    ] {
        for i in 0..(capacity * 2 + 3) {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            AuthCache::remember(set, capacity, key);
        }
        let len = lock(set).len();
        assert!((1..=capacity).contains(&len), "{len}");
    }
}

#[test]
fn no_users_means_no_authentication() {
    let config = parse("http_server_config:\n  http2: false\nbasic_auth_users: {}\n").unwrap();
    assert!(config.check_basic_auth(None));
    assert!(config.check_basic_auth(Some("garbage")));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The pool's bounds without a server: a full queue and a busy client get `Busy` at once, and
/// checks whose requester went away are dropped unrun.
#[test]
fn the_pool_bounds_queue_and_clients_and_drops_abandoned_checks() {
    runtime().block_on(async {
        // Cost 12 (~250 ms a check): slow enough that the queue fills up.
        let hash = bcrypt::hash("s3cret", 12).unwrap();
        let web = Arc::new(parse(&format!("basic_auth_users:\n  alice: {hash}\n")).unwrap());
        let stats = Arc::new(AuthStats::default());
        let limits = AuthLimits {
            workers: 1,
            queue: 2,
            per_client: 1,
            wait: Duration::from_secs(60),
        };
        let pool = Arc::new(BcryptPool::new(limits, stats.clone()).unwrap());
        let pending = |password: &str| match web.check_cached(Some(&basic("alice", password))) {
            Check::Bcrypt(p) => p,
            _ => panic!("expected a bcrypt check"),
        };
        let client = |i: u8| IpAddr::from([127, 0, 0, i]);

        // One client, two checks: the second is refused at once.
        let first = tokio::spawn({
            let (pool, web, p) = (pool.clone(), web.clone(), pending("wrong-1"));
            async move { pool.check(web, p, client(1)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            pool.check(web.clone(), pending("wrong-2"), client(1))
                .await
                .is_err(),
            "a second pending check of the same client"
        );
        // Many clients: the queue (2) plus the running check, the rest refused at once.
        let mut waiting = Vec::new();
        for i in 2..12 {
            let (pool, web, p) = (pool.clone(), web.clone(), pending(&format!("wrong-{i}")));
            waiting.push(tokio::spawn(
                async move { pool.check(web, p, client(i)).await },
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(stats.max_queued() <= 2, "{}", stats.max_queued());
        assert!(stats.busy() >= 8, "{}", stats.busy());
        // The requesters leave: what is still queued is dropped, not run.
        for w in &waiting {
            w.abort();
        }
        assert!(matches!(first.await.unwrap(), Ok(false)));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while stats.queued() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(stats.queued(), 0);
        assert!(stats.dropped() >= 1, "{stats:?}");
        assert!(stats.bcrypt_runs() <= 3, "{stats:?}");
        // And the pool still serves the right password.
        assert!(matches!(
            pool.check(web.clone(), pending("s3cret"), client(1)).await,
            Ok(true)
        ));
    });
}
