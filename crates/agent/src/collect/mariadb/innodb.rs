//! InnoDB facts in one bounded statement each, whatever the number of tables or sessions:
//! the data and index size from the persistent statistics (PD205) and the oldest open
//! transaction (PD215). What each misses is documented on the types
//! ([`InnodbSize`], [`Transactions`]).
//!
//! The agent reads each on its own schedule ([`InnodbCache`]): the size every
//! `[sample] innodb_refresh` (30 minutes: it is a sum over one statistics row per table, ~2.7 ms
//! of server CPU at 10,000 tables, and InnoDB rewrites those rows only when it recalculates a
//! table's statistics), the transactions every `[sample] transactions_refresh` (10 minutes: a
//! transaction is judged by the hour, and the read costs ~1 ms whatever the tables).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{DbError, Gathered, InnodbSize, OpenTransaction, Transactions};

use super::part::{Ctx, Part, PartFuture};
use super::session::{Session, TextRow, tcol, tcol_u64, text_rows};
use crate::collect::CollectError;

/// Pages × page size per kind of index, the table count and the oldest statistics' age.
/// `innodb_page_size` is the server's own, so the product is done in SQL.
pub(crate) const SIZE_SQL: &str = "SELECT COUNT(*), \
     COALESCE(SUM(clustered_index_size), 0) * @@innodb_page_size, \
     COALESCE(SUM(sum_of_other_index_sizes), 0) * @@innodb_page_size, \
     TIMESTAMPDIFF(SECOND, MIN(last_update), NOW()) \
     FROM mysql.innodb_table_stats";

/// The oldest transaction, its session, and the number open: one row (none when no
/// transaction is open).
pub(crate) const TRX_SQL: &str = "SELECT t.trx_mysql_thread_id, \
     TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), t.trx_state, t.trx_rows_modified, \
     t.trx_rows_locked, p.USER, p.HOST, p.COMMAND, p.TIME, \
     (SELECT COUNT(*) FROM information_schema.INNODB_TRX) \
     FROM information_schema.INNODB_TRX t \
     LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
     ORDER BY t.trx_started LIMIT 1";

/// The size row, or why it is unusable.
pub(crate) fn parse_size(rows: &[TextRow]) -> Result<InnodbSize, String> {
    let row = rows
        .first()
        .ok_or("mysql.innodb_table_stats returned no row")?;
    let tables = tcol_u64(row, 0).ok_or("unreadable table count")?;
    if tables == 0 {
        return Err(
            "mysql.innodb_table_stats is empty: no InnoDB table has persistent statistics (innodb_stats_persistent = OFF, or no tables)"
                .into(),
        );
    }
    Ok(InnodbSize {
        tables,
        data_bytes: tcol_u64(row, 1).ok_or("unreadable clustered index size")?,
        index_bytes: tcol_u64(row, 2).ok_or("unreadable secondary index size")?,
        oldest_stats_age_seconds: tcol(row, 3)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|s| s.max(0) as u64),
    })
}

/// The transaction row: none open when there is no row.
pub(crate) fn parse_transactions(rows: &[TextRow]) -> Transactions {
    let Some(row) = rows.first() else {
        return Transactions::default();
    };
    Transactions {
        open: tcol_u64(row, 9).unwrap_or(1).max(1),
        oldest: Some(OpenTransaction {
            thread_id: tcol_u64(row, 0).unwrap_or(0),
            age_seconds: tcol(row, 1)
                .and_then(|s| s.trim().parse::<i64>().ok())
                .map(|s| s.max(0) as u64)
                .unwrap_or(0),
            state: tcol(row, 2).unwrap_or_default(),
            rows_modified: tcol_u64(row, 3).unwrap_or(0),
            rows_locked: tcol_u64(row, 4).unwrap_or(0),
            user: tcol(row, 5),
            host: tcol(row, 6),
            command: tcol(row, 7),
            command_seconds: tcol_u64(row, 8),
        }),
    }
}

fn why(e: DbError, what: &str) -> String {
    if e.hint.is_empty() {
        format!("{what}: {}", e.message)
    } else {
        format!("{what}: {}; fix: {}", e.message, e.hint)
    }
}

/// Reads the InnoDB size (`SELECT` on `mysql.innodb_table_stats`).
pub(crate) async fn read_size(s: &mut Session) -> Gathered<InnodbSize> {
    match s.query(SIZE_SQL).await {
        Ok(rows) => match parse_size(&text_rows(&rows)) {
            Ok(size) => Gathered::Available(size),
            Err(e) => Gathered::Unavailable(e),
        },
        Err(e) => {
            let hint = format!(
                "GRANT SELECT ON mysql.innodb_table_stats TO {}",
                s.account()
            );
            let mut w = why(e, "reading mysql.innodb_table_stats");
            if w.contains("denied") {
                w.push_str(&format!(" ({hint})"));
            }
            Gathered::Unavailable(w)
        }
    }
}

/// Reads the open transactions (`PROCESS` privilege).
pub(crate) async fn read_transactions(s: &mut Session) -> Gathered<Transactions> {
    match s.query(TRX_SQL).await {
        Ok(rows) => Gathered::Available(parse_transactions(&text_rows(&rows))),
        Err(e) => {
            let hint = format!("GRANT PROCESS ON *.* TO {}", s.account());
            let mut w = why(e, "reading information_schema.INNODB_TRX");
            if w.contains("denied") || w.contains("PROCESS") {
                w.push_str(&format!(" ({hint})"));
            }
            Gathered::Unavailable(w)
        }
    }
}

/// The agent's last InnoDB facts: the size reused for `refresh`, the transactions for
/// `transactions_refresh`.
#[derive(Debug, Clone)]
pub struct InnodbCache {
    pub refresh: Duration,
    pub transactions_refresh: Duration,
    last: Arc<Mutex<Kept>>,
}

#[derive(Debug, Default)]
struct Kept {
    size: Option<(Instant, Gathered<InnodbSize>)>,
    transactions: Option<(Instant, Gathered<Transactions>)>,
}

fn fresh<T: Clone>(kept: &Option<(Instant, T)>, refresh: Duration) -> Option<T> {
    let (at, v) = kept.as_ref()?;
    super::still_fresh(*at, refresh).then(|| v.clone())
}

impl InnodbCache {
    pub fn new(refresh: Duration, transactions_refresh: Duration) -> InnodbCache {
        InnodbCache {
            refresh,
            transactions_refresh,
            last: Default::default(),
        }
    }

    /// The same facts with other refreshes (a reloaded configuration).
    pub fn with_refresh(&self, refresh: Duration, transactions_refresh: Duration) -> InnodbCache {
        InnodbCache {
            refresh,
            transactions_refresh,
            last: self.last.clone(),
        }
    }

    /// The size and the transactions still fresh, each `None` when due.
    pub(crate) fn fresh(&self) -> (Option<Gathered<InnodbSize>>, Option<Gathered<Transactions>>) {
        match self.last.lock() {
            Ok(k) => (
                fresh(&k.size, self.refresh),
                fresh(&k.transactions, self.transactions_refresh),
            ),
            Err(_) => (None, None),
        }
    }

    pub(crate) fn store_size(&self, size: &Gathered<InnodbSize>) {
        if let Ok(mut k) = self.last.lock() {
            k.size = Some((Instant::now(), size.clone()));
        }
    }

    pub(crate) fn store_transactions(&self, trx: &Gathered<Transactions>) {
        if let Ok(mut k) = self.last.lock() {
            k.transactions = Some((Instant::now(), trx.clone()));
        }
    }
}

/// The `mariadb_innodb` collector: the InnoDB size and the open transactions (one statement
/// each), or the agent's recent ones (no run then).
pub(super) struct Innodb;

impl Part for Innodb {
    fn name(&self) -> &'static str {
        "mariadb_innodb"
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let cache = ctx.opts.innodb_cache.as_ref();
            let (kept_size, kept_trx) = cache.map(InnodbCache::fresh).unwrap_or_default();
            if let (Some(size), Some(trx)) = (&kept_size, &kept_trx) {
                ctx.facts.innodb_size = size.clone();
                ctx.facts.transactions = trx.clone();
                return Err(CollectError::skipped("InnoDB facts served from the cache"));
            }
            // An empty statistics table is a fact, kept like a value; a statement that failed
            // is a failed collector, and is tried again at the next sample rather than kept for
            // the whole refresh.
            let mut failed: Vec<String> = Vec::new();
            let mut read_failed = |w: Option<&str>| match w.filter(|w| w.starts_with("reading ")) {
                Some(w) => {
                    failed.push(w.to_owned());
                    true
                }
                None => false,
            };
            let size = match kept_size {
                Some(size) => size,
                None => {
                    let size = read_size(ctx.s).await;
                    let bad = read_failed(size.as_ref().err());
                    if let Some(c) = cache.filter(|_| !bad) {
                        c.store_size(&size);
                    }
                    size
                }
            };
            let trx = match kept_trx {
                Some(trx) => trx,
                None => {
                    let trx = read_transactions(ctx.s).await;
                    let bad = read_failed(trx.as_ref().err());
                    if let Some(c) = cache.filter(|_| !bad) {
                        c.store_transactions(&trx);
                    }
                    trx
                }
            };
            ctx.facts.innodb_size = size;
            ctx.facts.transactions = trx;
            if failed.is_empty() {
                Ok(())
            } else {
                Err(CollectError::Other(failed.join("; ")))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &[Option<&str>]) -> TextRow {
        v.iter().map(|c| c.map(str::to_owned)).collect()
    }

    #[test]
    fn sizes() {
        let s = parse_size(&[row(&[
            Some("12"),
            Some("1048576000"),
            Some("52428800"),
            Some("37"),
        ])])
        .unwrap();
        assert_eq!(s.tables, 12);
        assert_eq!(s.total_bytes(), 1_048_576_000 + 52_428_800);
        assert_eq!(s.oldest_stats_age_seconds, Some(37));
        assert!(
            parse_size(&[row(&[Some("0"), Some("0"), Some("0"), None])])
                .unwrap_err()
                .contains("empty")
        );
        assert!(parse_size(&[]).is_err());
        assert!(parse_size(&[row(&[Some("x")])]).is_err());
    }

    #[test]
    fn transactions() {
        assert_eq!(parse_transactions(&[]), Transactions::default());
        let t = parse_transactions(&[row(&[
            Some("42"),
            Some("7200"),
            Some("RUNNING"),
            Some("3"),
            Some("4"),
            Some("app"),
            Some("10.0.0.7:5123"),
            Some("Sleep"),
            Some("7100"),
            Some("2"),
        ])]);
        assert_eq!(t.open, 2);
        let o = t.oldest.unwrap();
        assert_eq!((o.thread_id, o.age_seconds, o.rows_locked), (42, 7200, 4));
        assert_eq!(o.command.as_deref(), Some("Sleep"));
        // A session gone between the two tables: no user, still a transaction.
        let t = parse_transactions(&[row(&[
            Some("9"),
            Some("-1"),
            Some("RUNNING"),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ])]);
        assert_eq!(t.open, 1);
        assert_eq!(t.oldest.unwrap().age_seconds, 0);
    }

    #[test]
    fn size_and_transactions_each_on_their_own_schedule() {
        let cache = InnodbCache::new(Duration::from_secs(1800), Duration::from_secs(300));
        assert_eq!(cache.fresh(), (None, None));
        let size = Gathered::Available(InnodbSize {
            tables: 3,
            data_bytes: 1,
            index_bytes: 2,
            oldest_stats_age_seconds: None,
        });
        let trx = Gathered::Available(Transactions::default());
        cache.store_size(&size);
        cache.store_transactions(&trx);
        assert_eq!(cache.fresh(), (Some(size.clone()), Some(trx.clone())));
        // Six minutes later: the transactions are due, the size is not.
        let ago = |secs| Instant::now() - Duration::from_secs(secs);
        {
            let mut k = cache.last.lock().unwrap();
            k.size = Some((ago(360), size.clone()));
            k.transactions = Some((ago(360), trx.clone()));
        }
        assert_eq!(cache.fresh(), (Some(size.clone()), None));
        // A reload that shortens the size's refresh keeps what was read.
        let reloaded = cache.with_refresh(Duration::from_secs(300), Duration::from_secs(600));
        assert_eq!(reloaded.fresh(), (None, Some(trx)));
    }
}
