//! When a measurement is enough to decide: confidence intervals for the shares and rates the
//! windowed rules judge (PD205–PD214).
//!
//! A fixed minimum ("at least 10,000 page requests") refuses obvious verdicts — 35% of 7,705
//! requests missing the pool is known to within about a percent — and accepts doubtful ones —
//! 1.2% of 10,000 against a 1% limit is not clearly above it. Instead a rule measures an
//! [`Estimate`] with its 95% interval and decides only when the whole interval lies on one side
//! of its limit ([`Estimate::side`]); otherwise it looks at a longer window, and says
//! `insufficient_data` when none decides.
//!
//! - **Shares** (`part` of `whole` events: misses of requests, disk tables of temporary
//!   tables): the Wilson score interval. Unlike the normal approximation it stays inside
//!   [0, 1], behaves at 0 and `whole` events, and is accurate from a handful of events.
//! - **Rates** (`count` events in `seconds`): the score interval of a Poisson count,
//!   `(k + z²/2 ± z·√(k + z²/4)) / t`, the same construction for counts.
//!
//! A fail also needs at least `counters::MIN_FAILING_EVENTS` failing events: the events
//! come in bursts, not independently (see there).
//!
//! An interval that is narrower than [`RESOLUTION`] of the limit decides by the point
//! estimate: with billions of events a share exactly at the limit is a pass, not "unknown for
//! ever".
//!
//! The intervals assume independent events. Page requests and temporary tables come in
//! bursts from the same statements, so the true uncertainty is larger; the agent therefore
//! looks at windows of at least a minute and the limits themselves are heuristics with
//! margin. The 95% level matches the usual reporting ("35% ± 1.1%").

use std::fmt;

/// The normal quantile of a two-sided 95% interval.
pub const Z: f64 = 1.959_963_984_540_054;

/// An interval narrower than this share of the limit (on each side) decides by the point
/// estimate.
pub const RESOLUTION: f64 = 0.01;

/// Where an estimate lies against a limit that a rule fails above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Above the limit: the whole interval exceeds it.
    Above,
    /// At or below the limit: the whole interval is at most it.
    Below,
    /// The interval contains the limit: more events are needed.
    Straddles,
}

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `part` of `whole` events.
    Share { part: u64, whole: u64 },
    /// `count` events over `seconds`, per second.
    Rate { count: u64, seconds: f64 },
}

/// A measured share or rate with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub kind: Kind,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

impl Estimate {
    /// `part` of `whole` (`part` is clamped to `whole`), with its Wilson interval. No events:
    /// the interval is [0, 1].
    pub fn share(part: u64, whole: u64) -> Estimate {
        let part = part.min(whole);
        let kind = Kind::Share { part, whole };
        if whole == 0 {
            return Estimate {
                kind,
                value: 0.0,
                low: 0.0,
                high: 1.0,
            };
        }
        let n = whole as f64;
        let p = part as f64 / n;
        let z2 = Z * Z;
        let denom = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denom;
        let half = Z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        Estimate {
            kind,
            value: p,
            low: (centre - half).clamp(0.0, p),
            high: (centre + half).clamp(p, 1.0),
        }
    }

    /// `count` events over `seconds`, per second, with the Poisson score interval.
    pub fn rate(count: u64, seconds: f64) -> Estimate {
        let t = if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            f64::MIN_POSITIVE
        };
        let k = count as f64;
        let z2 = Z * Z;
        let half = Z * (k + z2 / 4.0).sqrt();
        let value = k / t;
        Estimate {
            kind: Kind::Rate { count, seconds: t },
            value,
            low: ((k + z2 / 2.0 - half) / t).clamp(0.0, value),
            high: ((k + z2 / 2.0 + half) / t).max(value),
        }
    }

    /// Which side of `limit` the estimate lies on (a rule fails above it).
    pub fn side(&self, limit: f64) -> Side {
        if self.low > limit {
            return Side::Above;
        }
        if self.high <= limit {
            return Side::Below;
        }
        // Narrow enough that the limit's own precision is the question: the point decides.
        let tolerance = limit.abs() * RESOLUTION;
        if limit > 0.0 && self.value - self.low <= tolerance && self.high - self.value <= tolerance
        {
            return if self.value > limit {
                Side::Above
            } else {
                Side::Below
            };
        }
        Side::Straddles
    }

    /// The number of events behind the estimate (the whole of a share, the count of a rate).
    pub fn events(&self) -> u64 {
        match self.kind {
            Kind::Share { whole, .. } => whole,
            Kind::Rate { count, .. } => count,
        }
    }
}

impl fmt::Display for Estimate {
    /// "35.0% ± 1.1% (95% interval 33.9–36.1%)" for a share, "2.50/s (95% interval 1.9–3.2/s)"
    /// for a rate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Share { .. } => {
                let half = (self.high - self.low) / 2.0;
                write!(
                    f,
                    "{} ± {} (95% interval {}–{})",
                    share_text(self.value),
                    share_text(half),
                    share_text(self.low),
                    share_text(self.high)
                )
            }
            Kind::Rate { .. } => write!(
                f,
                "{}/s (95% interval {}–{}/s)",
                rate_text(self.value),
                rate_text(self.low),
                rate_text(self.high)
            ),
        }
    }
}

fn share_text(x: f64) -> String {
    let p = x * 100.0;
    if p != 0.0 && p.abs() < 0.1 {
        format!("{p:.3}%")
    } else {
        format!("{p:.1}%")
    }
}

pub(crate) fn rate_text(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.1 {
        format!("{x:.4}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_decides_at_7705_requests() {
        // 35% of 7,705 page requests missed the pool: far above a 1% limit.
        let e = Estimate::share(2_697, 7_705);
        assert_eq!(e.side(0.01), Side::Above);
        assert!((e.high - e.low) / 2.0 < 0.011, "{e}");
        assert!(e.to_string().starts_with("35.0% ± 1.1%"), "{e}");
    }

    #[test]
    fn tiny_counts_do_not_decide_near_the_limit() {
        // 1 of 3 temporary tables on disk against 25%: could be anything.
        assert_eq!(Estimate::share(1, 3).side(0.25), Side::Straddles);
        // No events at all.
        assert_eq!(Estimate::share(0, 0).side(0.25), Side::Straddles);
        assert_eq!(Estimate::rate(0, 60.0).side(0.001), Side::Straddles);
        // 3 of 3 against 25% is already clear (Wilson low ≈ 44%).
        assert_eq!(Estimate::share(3, 3).side(0.25), Side::Above);
        // 0 of 40 against 25% too (high ≈ 8.8%).
        assert_eq!(Estimate::share(0, 40).side(0.25), Side::Below);
    }

    #[test]
    fn exactly_at_the_limit() {
        // Small counts exactly at the limit: undecided.
        assert_eq!(Estimate::share(25, 100).side(0.25), Side::Straddles);
        // Huge counts exactly at the limit: the point decides, and at the limit passes.
        let e = Estimate::share(250_000_000, 1_000_000_000);
        assert_eq!(e.side(0.25), Side::Below);
        // One event over among a billion is still at the limit within its resolution.
        assert_eq!(
            Estimate::share(250_000_001, 1_000_000_000).side(0.25),
            Side::Above
        );
        let r = Estimate::rate(1_000_000_000, 1_000_000_000.0);
        assert_eq!(r.side(1.0), Side::Below);
    }

    #[test]
    fn huge_counts_are_precise() {
        let e = Estimate::share(u64::MAX / 3, u64::MAX);
        assert!(e.high - e.low < 1e-6, "{e:?}");
        assert_eq!(e.side(0.3), Side::Above);
        assert_eq!(e.side(0.4), Side::Below);
        let r = Estimate::rate(u64::MAX, 1e9);
        assert!(r.low.is_finite() && r.high.is_finite());
    }

    #[test]
    fn rates_against_a_zero_limit() {
        // Any event is a rate above zero; none proves nothing about a zero limit.
        assert_eq!(Estimate::rate(1, 60.0).side(0.0), Side::Above);
        assert_eq!(Estimate::rate(0, 3_600.0).side(0.0), Side::Straddles);
        // A clear rate against a positive limit.
        assert_eq!(Estimate::rate(600, 60.0).side(1.0), Side::Above);
        assert_eq!(Estimate::rate(10, 60.0).side(1.0), Side::Below);
    }

    #[test]
    fn bad_seconds_do_not_panic() {
        for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let r = Estimate::rate(5, t);
            assert!(!r.low.is_nan(), "{t}: {r:?}");
        }
    }

    #[test]
    fn the_interval_contains_the_point() {
        for (k, n) in [(0, 1), (1, 1), (1, 2), (7, 10), (999, 1000), (5, 1_000_000)] {
            let e = Estimate::share(k, n);
            assert!(e.low <= e.value && e.value <= e.high, "{k}/{n}: {e:?}");
            assert!(e.low >= 0.0 && e.high <= 1.0);
        }
    }
}
