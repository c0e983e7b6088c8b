//! Facts of the live host that change only when the hardware or the system does (the CPU
//! model, caches, cores, nominal frequency, the OS release), kept between samples instead of
//! read again every time: each is re-read when its key changes (the online CPU list: hotplug,
//! SMT switched off, a PowerVM DLPAR operation) and at least every [`STATIC_REUSE`] in any
//! case, so a change the key does not show is seen within that time. A recorded tree is
//! always read: callers keep only what they read from the live host.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// The longest a kept fact is reused.
pub(crate) const STATIC_REUSE: Duration = Duration::from_secs(600);

/// One kept value: when it was read, under which key.
pub(crate) struct Kept<K, V>(Mutex<Option<(Instant, K, V)>>);

impl<K: PartialEq, V: Clone> Kept<K, V> {
    pub(crate) const fn new() -> Self {
        Kept(Mutex::new(None))
    }

    /// The kept value when it was read under `key` less than `max_age` ago, else `read()`,
    /// kept when it succeeds (a failed read is tried again at the next sample).
    pub(crate) fn get_or_try<E>(
        &self,
        key: K,
        max_age: Duration,
        read: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, k, v)) = kept.as_ref()
            && *k == key
            && at.elapsed() < max_age
        {
            return Ok(v.clone());
        }
        let v = read()?;
        *kept = Some((Instant::now(), key, v.clone()));
        Ok(v)
    }

    /// [`Kept::get_or_try`] for a read that cannot fail.
    pub(crate) fn get(&self, key: K, max_age: Duration, read: impl FnOnce() -> V) -> V {
        self.get_or_try(key, max_age, || Ok::<V, std::convert::Infallible>(read()))
            .unwrap_or_else(|never| match never {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_until_the_key_changes_or_it_is_too_old() {
        let kept: Kept<Vec<u32>, u32> = Kept::new();
        let mut reads = 0;
        let mut read = |v| {
            reads += 1;
            v
        };
        assert_eq!(kept.get(vec![0, 1], STATIC_REUSE, || read(1)), 1);
        assert_eq!(kept.get(vec![0, 1], STATIC_REUSE, || read(2)), 1);
        // A CPU went offline: read again.
        assert_eq!(kept.get(vec![0], STATIC_REUSE, || read(3)), 3);
        // Too old.
        assert_eq!(kept.get(vec![0], Duration::ZERO, || read(4)), 4);
        assert_eq!(reads, 3);
    }

    #[test]
    fn a_failed_read_is_not_kept() {
        let kept: Kept<(), u32> = Kept::new();
        assert_eq!(kept.get_or_try((), STATIC_REUSE, || Err("no")), Err("no"));
        assert_eq!(
            kept.get_or_try((), STATIC_REUSE, || Ok::<_, &str>(7)),
            Ok(7)
        );
        assert_eq!(kept.get_or_try((), STATIC_REUSE, || Err("no")), Ok(7));
    }
}
