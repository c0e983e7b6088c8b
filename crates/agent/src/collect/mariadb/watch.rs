//! The agent's watch between spaced samples: two counters MariaDB keeps globally, read every
//! interval on the kept connection, that end the spacing when something starts.
//!
//! With many idle clients the agent spaces its samples (`[sample] spacing_connections`),
//! because each sample's status read makes MariaDB add up every connection's counters (~2 KB a
//! connection: at 5,000 clients ~7 ms of server CPU at a 15 s rhythm, ~18 ms after a pause
//! that let them leave the CPU's caches). `SHOW GLOBAL STATUS LIKE` with a pattern that
//! matches no per-session counter skips that sum (MariaDB computes a value only for the names
//! the pattern matches; a `WHERE` computes every value first): each statement below costs
//! ~0.1 ms at 5,000 connections, as on an idle server. `Threads_running` is not among them:
//! MariaDB counts it by walking every connection (2.4 ms at 5,000).
//!
//! Between two spaced samples the watch asks for
//! - `Innodb_row_lock_current_waits`: a session waiting for a row lock ends the spacing at
//!   once, so a row-lock pile-up is sampled (and its chain read, PD217–PD220) within one
//!   interval, as without clients;
//! - `Threads_connected`: clients that arrive in numbers (at least `spacing_connections` more
//!   than at the sample: an application opening connections while its queries queue) end the
//!   spacing too; clients that leave shorten it to what their number now asks.
//!
//! A failed read, or no kept connection, ends the spacing as well (the sample says why). What
//! the watch cannot see cheaply — sessions piling up behind a metadata lock with no row-lock
//! wait and no new connections, a busy server — shows at the next spaced sample.

use std::collections::BTreeMap;

use powerdiag_rules::StatusVar;

use super::{
    Reuse,
    server::parse_name_values,
    session::{Session, text_rows},
};

/// The watch's statements: one name each, so no per-session counter is computed.
pub(crate) const WATCH_SQL: [&str; 2] = [
    "SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_current_waits'",
    "SHOW GLOBAL STATUS LIKE 'Threads_connected'",
];

/// What one watch read saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    pub row_lock_waits: u64,
    pub connected: u64,
}

/// Why a watch ends the spacing, for the agent's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchVerdict {
    /// Wait on; the spacing (in intervals) the clients now ask for.
    Wait { spacing: u32 },
    /// Sample at this interval.
    SampleNow(String),
}

impl Watched {
    /// The verdict against the sample's connected clients (`at_sample`) and its spacing:
    /// sample now on a row-lock wait or a surge of `per_interval` clients or more; otherwise
    /// the spacing for the clients connected now, never above the sample's.
    pub fn verdict(&self, at_sample: u64, spacing: u32, per_interval: u64) -> WatchVerdict {
        if self.row_lock_waits > 0 {
            return WatchVerdict::SampleNow(format!(
                "{} session(s) waiting for a row lock (Innodb_row_lock_current_waits)",
                self.row_lock_waits
            ));
        }
        if per_interval > 0 && self.connected >= at_sample.saturating_add(per_interval) {
            return WatchVerdict::SampleNow(format!(
                "{} clients connected, {} at the last sample (Threads_connected)",
                self.connected, at_sample
            ));
        }
        let now = if per_interval == 0 {
            1
        } else {
            self.connected.div_ceil(per_interval).clamp(1, 60) as u32
        };
        WatchVerdict::Wait {
            spacing: now.min(spacing),
        }
    }

    fn parse(rows: &BTreeMap<String, String>) -> Option<Watched> {
        let num = |v: StatusVar| rows.get(v.name())?.trim().parse::<u64>().ok();
        Some(Watched {
            row_lock_waits: num(StatusVar::InnodbRowLockCurrentWaits)?,
            connected: num(StatusVar::ThreadsConnected)?,
        })
    }
}

async fn read(s: &mut Session) -> Result<Watched, String> {
    let mut seen = BTreeMap::new();
    for sql in WATCH_SQL {
        let rows = s.query(sql).await.map_err(|e| e.message)?;
        seen.extend(parse_name_values(&text_rows(&rows)));
    }
    Watched::parse(&seen).ok_or_else(|| {
        format!(
            "the watch read returned no number for Innodb_row_lock_current_waits or Threads_connected: {seen:?}"
        )
    })
}

impl Reuse {
    /// One watch read on the kept connection, which stays kept after a read that worked. An
    /// error (no kept connection, a failed or refused read) means: sample now, and say why.
    pub async fn watch(&self) -> Result<Watched, String> {
        let Some((mut s, target)) = self.take_session() else {
            return Err("no connection kept from the last sample".into());
        };
        let watched = read(&mut s).await;
        if watched.is_ok() {
            self.put_session(s, target);
        }
        watched.map_err(|e| format!("the watch read failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(row_lock_waits: u64, connected: u64) -> Watched {
        Watched {
            row_lock_waits,
            connected,
        }
    }

    #[test]
    fn a_row_lock_wait_or_a_surge_of_clients_ends_the_spacing() {
        let w = watched(1, 5000).verdict(5000, 20, 250);
        assert!(matches!(w, WatchVerdict::SampleNow(ref why) if why.contains("1 session(s) waiting for a row lock")), "{w:?}");
        // 250 more clients than at the sample: a surge.
        let w = watched(0, 5250).verdict(5000, 20, 250);
        assert!(matches!(w, WatchVerdict::SampleNow(ref why) if why.contains("5250 clients connected, 5000 at the last sample")), "{w:?}");
        // Fewer more: wait on, at the sample's spacing (never longer).
        assert_eq!(
            watched(0, 5249).verdict(5000, 20, 250),
            WatchVerdict::Wait { spacing: 20 }
        );
    }

    #[test]
    fn clients_leaving_shorten_the_spacing() {
        assert_eq!(
            watched(0, 1000).verdict(5000, 20, 250),
            WatchVerdict::Wait { spacing: 4 }
        );
        assert_eq!(
            watched(0, 3).verdict(5000, 20, 250),
            WatchVerdict::Wait { spacing: 1 }
        );
        // Spacing off: never waits.
        assert_eq!(
            watched(0, 5000).verdict(5000, 20, 0),
            WatchVerdict::Wait { spacing: 1 }
        );
    }

    #[test]
    fn the_read_needs_both_numbers() {
        let rows = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            Watched::parse(&rows(&[
                ("innodb_row_lock_current_waits", "2"),
                ("threads_connected", "17")
            ])),
            Some(watched(2, 17))
        );
        assert_eq!(
            Watched::parse(&rows(&[("threads_connected", "17")])),
            None
        );
        assert_eq!(
            Watched::parse(&rows(&[
                ("innodb_row_lock_current_waits", "x"),
                ("threads_connected", "17")
            ])),
            None
        );
    }

    #[test]
    fn each_statement_names_one_global_counter() {
        for sql in WATCH_SQL {
            assert!(sql.starts_with("SHOW GLOBAL STATUS LIKE '"), "{sql}");
            assert!(!sql.contains('%'), "{sql}");
        }
    }
}
