//! The agent's watch between spaced samples: one counter MariaDB keeps globally, read at every
//! interval on the kept connection, that ends the spacing when a row-lock wait starts.
//!
//! With many idle clients the agent spaces its samples (`[sample] spacing_connections`),
//! because each sample's status read makes MariaDB add up every connection's counters (~2 KB a
//! connection: at 5,000 clients ~7 ms of server CPU at a 15 s rhythm). `SHOW GLOBAL STATUS
//! LIKE` with a pattern that matches no per-session counter skips that sum (MariaDB computes a
//! value only for the names the pattern matches; a `WHERE` computes every value first): the
//! statement below costs ~0.1 ms back to back at 5,000 connections, as on an idle server
//! (0.5–1.4 ms once its caches went cold 15 s later). `Threads_running` cannot be watched so:
//! MariaDB counts it by walking every connection (2.4 ms at 5,000), as it does `Questions`.
//!
//! A session waiting for a row lock (`Innodb_row_lock_current_waits`) ends the spacing at
//! once, so a row-lock pile-up is sampled — and its chain read, PD217–PD220 — within one
//! interval, as without clients. A failed read, or no kept connection, ends it too (the sample
//! says why). What the watch cannot see — sessions piling up behind a metadata lock, a server
//! that became busy, clients arriving or leaving — shows at the next spaced sample, at most a
//! minute later (`daemon::sampler`'s cap on the spacing).

use powerdiag_rules::StatusVar;

use super::{
    Reuse,
    server::parse_name_values,
    session::{Session, text_rows},
};

/// The watch's statement: one name, so no per-session counter is computed.
pub(crate) const WATCH_SQL: &str = "SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_current_waits'";

/// What one watch read saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    pub row_lock_waits: u64,
}

impl Watched {
    /// `Some(why)` when the spacing should end at this interval.
    pub fn sample_now(&self) -> Option<String> {
        (self.row_lock_waits > 0).then(|| {
            format!(
                "{} session(s) waiting for a row lock (Innodb_row_lock_current_waits)",
                self.row_lock_waits
            )
        })
    }
}

async fn read(s: &mut Session) -> Result<Watched, String> {
    let rows = parse_name_values(&text_rows(
        &s.query(WATCH_SQL).await.map_err(|e| e.message)?,
    ));
    let value = rows.get(StatusVar::InnodbRowLockCurrentWaits.name());
    match value.and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(row_lock_waits) => Ok(Watched { row_lock_waits }),
        None => Err(format!(
            "Innodb_row_lock_current_waits is not a number: {value:?} (InnoDB not loaded?)"
        )),
    }
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

    #[test]
    fn a_row_lock_wait_ends_the_spacing() {
        assert_eq!(Watched { row_lock_waits: 0 }.sample_now(), None);
        let why = Watched { row_lock_waits: 3 }.sample_now().unwrap();
        assert!(why.contains("3 session(s) waiting for a row lock"), "{why}");
    }

    #[test]
    fn the_statement_names_one_global_counter() {
        assert!(WATCH_SQL.starts_with("SHOW GLOBAL STATUS LIKE '"));
        assert!(!WATCH_SQL.contains('%'));
        assert!(
            WATCH_SQL.contains(
                StatusVar::InnodbRowLockCurrentWaits
                    .name()
                    .trim_start_matches("innodb")
            )
        );
    }
}
