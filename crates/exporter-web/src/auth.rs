//! Basic auth against `basic_auth_users` (bcrypt hashes), with bcrypt's cost bounded.
//!
//! bcrypt takes tens of milliseconds of CPU per check, so an unauthenticated client sending
//! wrong passwords can make the server work. Bounded here:
//! - verified credentials are remembered (salted SHA-256 digests, never the password), so a
//!   scraper costs one bcrypt, not one per scrape, and keeps that across reloads while its hash
//!   is unchanged;
//! - failed credentials are remembered the same way: the same wrong password costs nothing twice;
//! - the remaining checks run on a small dedicated thread pool (`BcryptPool`; not tokio's
//!   blocking pool, which name lookups share), behind a bounded queue and at most
//!   [`AuthLimits::per_client`] pending checks per client address; beyond that the answer is
//!   429 at once;
//! - a check whose client is gone (connection closed, wait timed out) is dropped from the queue
//!   unrun.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    net::IpAddr,
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use sha2::{Digest as _, Sha256};
use tokio::sync::oneshot;
use zeroize::Zeroizing;

use crate::types::{AuthCache, WebConfig};

/// Verified credentials remembered (as salted SHA-256 digests); full means start afresh.
pub(crate) const VERIFIED_CAPACITY: usize = 128;
/// Failed credentials remembered; full means start afresh.
pub(crate) const FAILED_CAPACITY: usize = 4096;

/// How much bcrypt work unauthenticated clients can cause.
#[derive(Debug, Clone)]
pub struct AuthLimits {
    /// Threads running bcrypt (default 1: at cost 10 that is ~14 checks a second, plenty for
    /// scrapers whose verified credentials are remembered).
    pub workers: usize,
    /// Checks waiting for a thread; when full, a request that needs bcrypt gets 429 at once.
    pub queue: usize,
    /// Checks one client address may have pending; more get 429 at once.
    pub per_client: usize,
    /// How long a request waits for its check before giving up with 429 (its queued check is
    /// then dropped unrun).
    pub wait: Duration,
}

impl Default for AuthLimits {
    fn default() -> Self {
        AuthLimits {
            workers: 1,
            queue: 8,
            per_client: 2,
            wait: Duration::from_secs(10),
        }
    }
}

/// Counters of the bcrypt pool, for logs and tests.
#[derive(Debug, Default)]
pub struct AuthStats {
    runs: AtomicU64,
    dropped: AtomicU64,
    busy: AtomicU64,
    queued: AtomicUsize,
    max_queued: AtomicUsize,
}

impl AuthStats {
    /// bcrypt checks run.
    pub fn bcrypt_runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }
    /// Queued checks dropped unrun because their client was gone.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// Requests answered 429 (queue full, too many pending for the client, wait timed out).
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }
    /// Checks waiting now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
    /// The most checks ever waiting at once.
    pub fn max_queued(&self) -> usize {
        self.max_queued.load(Ordering::Relaxed)
    }
}

/// The bcrypt cost of `hash` if it is a bcrypt hash (what Go's `bcrypt.Cost` accepts).
pub(crate) fn bcrypt_cost(hash: &str) -> Option<u32> {
    let parts: bcrypt::HashParts = hash.parse().ok()?;
    let cost = parts.get_cost();
    (4..=31).contains(&cost).then_some(cost)
}

/// Decoded `Basic` credentials; the buffer is zeroed when dropped.
pub(crate) struct Credentials {
    decoded: Zeroizing<Vec<u8>>,
    colon: usize,
}

impl Credentials {
    /// `Basic <base64(user:password)>`; the scheme is case-insensitive (RFC 7617), the user UTF-8.
    pub(crate) fn parse(header: &str) -> Option<Credentials> {
        let (scheme, encoded) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = Zeroizing::new(BASE64.decode(encoded.trim()).ok()?);
        let colon = decoded.iter().position(|&b| b == b':')?;
        std::str::from_utf8(decoded.get(..colon)?).ok()?;
        Some(Credentials { decoded, colon })
    }

    pub(crate) fn user(&self) -> &str {
        self.decoded
            .get(..self.colon)
            .and_then(|u| std::str::from_utf8(u).ok())
            .unwrap_or_default()
    }

    pub(crate) fn password(&self) -> &[u8] {
        self.decoded.get(self.colon + 1..).unwrap_or_default()
    }
}

impl AuthCache {
    pub(crate) fn new() -> AuthCache {
        AuthCache {
            salt: rand::random(),
            verified: Mutex::new(HashSet::new()),
            failed: Mutex::new(HashSet::new()),
        }
    }

    /// Salted SHA-256 of user, password and the hash they are checked against ("" for an
    /// unknown user).
    fn key(&self, credentials: &Credentials, hash: &str) -> [u8; 32] {
        let mut digest = Sha256::new();
        digest.update(self.salt);
        for part in [
            credentials.user().as_bytes(),
            credentials.password(),
            hash.as_bytes(),
        ] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        digest.finalize().into()
    }

    pub(crate) fn remember(set: &Mutex<HashSet<[u8; 32]>>, capacity: usize, key: [u8; 32]) {
        let mut set = lock(set);
        if set.len() >= capacity {
            set.clear();
        }
        set.insert(key);
    }
}

/// What the caches say about a request.
pub(crate) enum Check {
    Allow,
    Deny,
    /// Only bcrypt can tell.
    Bcrypt(Pending),
}

/// A bcrypt check to run: the password (zeroed when dropped) against the user's hash, or
/// against the decoy hash for an unknown user.
pub(crate) struct Pending {
    key: [u8; 32],
    hash: Option<String>,
    password: Zeroizing<Vec<u8>>,
}

impl WebConfig {
    /// Whether a request with this `Authorization` header value may pass: always when
    /// `basic_auth_users` is empty; else only `Basic` credentials of a configured user whose
    /// password matches the bcrypt hash. Unknown users cost a bcrypt run too (no user
    /// enumeration by timing). Blocks for the bcrypt time (about 70 ms at cost 10) unless the
    /// outcome is remembered; the server runs it on its bcrypt pool instead.
    pub fn check_basic_auth(&self, authorization_header: Option<&str>) -> bool {
        match self.check_cached(authorization_header) {
            Check::Allow => true,
            Check::Deny => false,
            Check::Bcrypt(pending) => self.run_bcrypt(&pending),
        }
    }

    /// Everything but bcrypt: no users, a malformed header, a remembered outcome.
    pub(crate) fn check_cached(&self, authorization_header: Option<&str>) -> Check {
        if self.basic_auth_users.is_empty() {
            return Check::Allow;
        }
        let Some(credentials) = authorization_header.and_then(Credentials::parse) else {
            return Check::Deny;
        };
        let hash = self.basic_auth_users.get(credentials.user());
        let key = self.auth.key(&credentials, hash.map_or("", String::as_str));
        if hash.is_some() && lock(&self.auth.verified).contains(&key) {
            return Check::Allow;
        }
        if lock(&self.auth.failed).contains(&key) {
            return Check::Deny;
        }
        Check::Bcrypt(Pending {
            key,
            hash: hash.cloned(),
            password: Zeroizing::new(credentials.password().to_vec()),
        })
    }

    /// Runs bcrypt for `pending` and remembers the outcome.
    pub(crate) fn run_bcrypt(&self, pending: &Pending) -> bool {
        let hash = pending.hash.as_deref().unwrap_or_else(|| self.decoy_hash());
        let matches = bcrypt::verify(&pending.password[..], hash).unwrap_or(false);
        let allowed = matches && pending.hash.is_some();
        if allowed {
            AuthCache::remember(&self.auth.verified, VERIFIED_CAPACITY, pending.key);
        } else {
            AuthCache::remember(&self.auth.failed, FAILED_CAPACITY, pending.key);
        }
        allowed
    }

    fn decoy_hash(&self) -> &str {
        self.decoy.get_or_init(|| {
            let password: [u8; 16] = rand::random();
            // On failure (cannot happen for costs 4..=31) the empty hash fails every check.
            bcrypt::hash(password, self.decoy_cost.max(4)).unwrap_or_default()
        })
    }
}

/// Why a check was not run: the pool is saturated (answered 429).
#[derive(Debug)]
pub(crate) struct Busy;

struct Job {
    web: Arc<WebConfig>,
    pending: Pending,
    reply: oneshot::Sender<bool>,
}

/// The checks waiting for a worker. The queue's length is the `queued` statistic, read and
/// bounded under the same lock, so the bound and the statistic cannot disagree.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Set when the pool is dropped: the workers finish what is queued, then stop.
    closed: bool,
}

/// A few threads that run bcrypt, fed by a bounded queue. Dropping the pool stops them once the
/// queue is empty.
pub(crate) struct BcryptPool {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    limits: AuthLimits,
    stats: Arc<AuthStats>,
}

impl std::fmt::Debug for BcryptPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BcryptPool")
            .field("limits", &self.limits)
            .field("queued", &self.stats.queued())
            .finish_non_exhaustive()
    }
}

impl BcryptPool {
    pub(crate) fn new(limits: AuthLimits, stats: Arc<AuthStats>) -> std::io::Result<BcryptPool> {
        let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        for i in 0..limits.workers.max(1) {
            let queue = queue.clone();
            let stats = stats.clone();
            std::thread::Builder::new()
                .name(format!("bcrypt-{i}"))
                .spawn(move || worker(&queue, &stats))?;
        }
        Ok(BcryptPool {
            queue,
            per_client: Mutex::new(HashMap::new()),
            limits,
            stats,
        })
    }

    /// Runs `pending` on the pool for `client` and returns whether the request may pass.
    pub(crate) async fn check(
        &self,
        web: Arc<WebConfig>,
        pending: Pending,
        client: IpAddr,
    ) -> Result<bool, Busy> {
        let busy = || {
            self.stats.busy.fetch_add(1, Ordering::Relaxed);
            Busy
        };
        let Some(_slot) = ClientSlot::take(self, client) else {
            return Err(busy());
        };
        let (reply, answer) = oneshot::channel();
        {
            let (lock_q, ready) = &*self.queue;
            let mut q = lock(lock_q);
            if q.jobs.len() >= self.limits.queue.max(1) {
                drop(q);
                return Err(busy());
            }
            q.jobs.push_back(Job {
                web,
                pending,
                reply,
            });
            let depth = q.jobs.len();
            self.stats.queued.store(depth, Ordering::Relaxed);
            self.stats.max_queued.fetch_max(depth, Ordering::Relaxed);
            ready.notify_one();
        }
        match tokio::time::timeout(self.limits.wait, answer).await {
            Ok(Ok(allowed)) => Ok(allowed),
            // Timed out (the dropped receiver tells the worker to skip it) or the pool stopped.
            _ => Err(busy()),
        }
    }
}

impl Drop for BcryptPool {
    fn drop(&mut self) {
        let (lock_q, ready) = &*self.queue;
        lock(lock_q).closed = true;
        ready.notify_all();
    }
}

fn worker(queue: &(Mutex<Queue>, Condvar), stats: &AuthStats) {
    let (lock_q, ready) = queue;
    loop {
        let job = {
            let mut q = lock(lock_q);
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    stats.queued.store(q.jobs.len(), Ordering::Relaxed);
                    break job;
                }
                if q.closed {
                    return;
                }
                q = ready
                    .wait(q)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        if job.reply.is_closed() {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let allowed = job.web.run_bcrypt(&job.pending);
        stats.runs.fetch_add(1, Ordering::Relaxed);
        let _ = job.reply.send(allowed);
    }
}

/// One of a client's pending checks; given back when dropped.
struct ClientSlot<'a> {
    pool: &'a BcryptPool,
    client: IpAddr,
}

impl<'a> ClientSlot<'a> {
    fn take(pool: &'a BcryptPool, client: IpAddr) -> Option<ClientSlot<'a>> {
        let mut pending = lock(&pool.per_client);
        let n = pending.entry(client).or_insert(0);
        if *n >= pool.limits.per_client.max(1) {
            return None;
        }
        *n += 1;
        Some(ClientSlot { pool, client })
    }
}

impl Drop for ClientSlot<'_> {
    fn drop(&mut self) {
        let mut pending = lock(&self.pool.per_client);
        if let Some(n) = pending.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                pending.remove(&self.client);
            }
        }
    }
}

/// Locks, ignoring poisoning: the guarded data stays consistent (a set, a map, a receiver).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
