//! When something kept between the agent's samples is due to be read again.

use std::time::{Duration, Instant};

/// True while something read at `at` may still be reused for `reuse`. Samples start on a fixed
/// interval, but each read lands a little into its sample: with a reuse equal to the interval
/// (the default: statements, variables every 60 s), the next sample finds it a few
/// milliseconds short of due and skips it, so the read happened every other sample (measured:
/// the agent read the digests and variables every 120 s). The last 5% of the reuse period
/// therefore counts as due.
pub(crate) fn still_fresh(at: Instant, reuse: Duration) -> bool {
    at.elapsed() + reuse / 20 < reuse
}
