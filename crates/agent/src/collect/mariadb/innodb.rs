//! InnoDB facts in bounded statements, whatever the number of tables or sessions:
//! the data and index size from the persistent statistics (PD205) and the oldest open
//! transaction (PD215). What each misses is documented on the types
//! ([`InnodbSize`], [`Transactions`]).
//!
//! The agent reads each on its own schedule ([`InnodbCache`]): the size every
//! `[sample] innodb_refresh` (30 minutes: it is a sum over one statistics row per table, ~2.7 ms
//! of server CPU at 10,000 tables, and InnoDB rewrites those rows only when it recalculates a
//! table's statistics), the transactions every `[sample] transactions_refresh` (10 minutes: a
//! transaction is judged by the hour; `INNODB_TRX` alone, plus the oldest transaction's session
//! when there is one).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{DbError, Gathered, InnodbSize, OpenTransaction, Transactions};

use super::part::{Ctx, Part, PartFuture};
use super::session::{Session, TextRow, tcol, tcol_u64, text_rows};
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// Pages × page size per kind of index, the table count and the oldest statistics' age.
/// `innodb_page_size` is the server's own, so the product is done in SQL.
pub(crate) const SIZE_SQL: &str = "SELECT COUNT(*), \
     COALESCE(SUM(clustered_index_size), 0) * @@innodb_page_size, \
     COALESCE(SUM(sum_of_other_index_sizes), 0) * @@innodb_page_size, \
     TIMESTAMPDIFF(SECOND, MIN(last_update), NOW()) \
     FROM mysql.innodb_table_stats";

/// The oldest transaction and the number open: one row (none when no transaction is open).
/// The session's user, host and command come from `PROCESSLIST` ([`session_sql`]), read only
/// when a transaction is open: joined here it cost the server 0.35 ms against 0.07 ms without
/// (back to back), 1.29 ms against 0.39 ms every 10 s (MariaDB 11.8, the 2-core VM), every
/// read, for a row that is usually absent.
pub(crate) const TRX_SQL: &str = "SELECT trx_mysql_thread_id, \
     TIMESTAMPDIFF(SECOND, trx_started, NOW()), trx_state, trx_rows_modified, \
     trx_rows_locked, COUNT(*) OVER () \
     FROM information_schema.INNODB_TRX ORDER BY trx_started LIMIT 1";

/// The session of thread `id`: user, host, command and its time.
pub(crate) fn session_sql(id: u64) -> String {
    format!("SELECT USER, HOST, COMMAND, TIME FROM information_schema.PROCESSLIST WHERE ID = {id}")
}

/// Why the size row cannot be used: the section's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SizeError {
    #[error("mysql.innodb_table_stats returned no row")]
    NoRow,
    #[error("unreadable {0}")]
    Unreadable(&'static str),
    #[error(
        "mysql.innodb_table_stats is empty: no InnoDB table has persistent statistics (innodb_stats_persistent = OFF, or no tables)"
    )]
    Empty,
}

/// The size row, or why it is unusable.
pub(crate) fn parse_size(rows: &[TextRow]) -> Result<InnodbSize, SizeError> {
    let row = rows.first().ok_or(SizeError::NoRow)?;
    let tables = tcol_u64(row, 0).ok_or(SizeError::Unreadable("table count"))?;
    if tables == 0 {
        return Err(SizeError::Empty);
    }
    Ok(InnodbSize {
        tables,
        data_bytes: tcol_u64(row, 1).ok_or(SizeError::Unreadable("clustered index size"))?,
        index_bytes: tcol_u64(row, 2).ok_or(SizeError::Unreadable("secondary index size"))?,
        oldest_stats_age_seconds: tcol(row, 3)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|s| s.max(0) as u64),
        from_files: false,
    })
}

/// The transactions from [`TRX_SQL`]'s rows (none open when there is no row) and, when read,
/// the oldest one's session ([`session_sql`]'s rows: none when the session ended in between).
pub(crate) fn parse_transactions(rows: &[TextRow], session: &[TextRow]) -> Transactions {
    let Some(row) = rows.first() else {
        return Transactions::default();
    };
    let who = session.first();
    let at = |i| who.and_then(|r| tcol(r, i));
    Transactions {
        open: tcol_u64(row, 5).unwrap_or(1).max(1),
        oldest: Some(OpenTransaction {
            thread_id: tcol_u64(row, 0).unwrap_or(0),
            age_seconds: tcol(row, 1)
                .and_then(|s| s.trim().parse::<i64>().ok())
                .map(|s| s.max(0) as u64)
                .unwrap_or(0),
            state: tcol(row, 2).unwrap_or_default(),
            rows_modified: tcol_u64(row, 3).unwrap_or(0),
            rows_locked: tcol_u64(row, 4).unwrap_or(0),
            user: at(0),
            host: at(1),
            command: at(2),
            command_seconds: who.and_then(|r| tcol_u64(r, 3)),
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

/// Doctor with a dictionary bound (`--dictionary-max-tables`) and the server's data directory
/// on this host: when the directory holds more tablespace files than the bound, their sizes
/// instead of the statistics' sum (20-60 ms of server CPU at 100,000 tables; listing costs the
/// server nothing). Anything else — under the bound, a server elsewhere, a directory this
/// process may not list — reads [`SIZE_SQL`]. (InnoDB's own row estimate of
/// `mysql.innodb_table_stats` cannot decide it: it lagged 730 against 19,457 rows while tables
/// were being created.)
async fn bounded_size(ctx: &mut Ctx<'_>, bound: super::DictionaryBound) -> Gathered<InnodbSize> {
    if let Some(listed) = super::datadir::list_local(ctx.facts, true, ctx.s.timeout()).await {
        match listed {
            Ok(t) if t.files > bound.max_tables => {
                return Gathered::Available(InnodbSize {
                    tables: t.files,
                    data_bytes: t.bytes,
                    index_bytes: 0,
                    oldest_stats_age_seconds: None,
                    from_files: true,
                });
            }
            Ok(_) => {}
            Err(why) => ctx.facts.notes.push(format!(
                "InnoDB size summed by the server: its data directory could not be listed ({why})"
            )),
        }
    }
    read_size(ctx.s).await
}

/// Reads the InnoDB size (`SELECT` on `mysql.innodb_table_stats`).
pub(crate) async fn read_size(s: &mut Session) -> Gathered<InnodbSize> {
    match s.query(SIZE_SQL).await {
        Ok(rows) => match parse_size(&text_rows(&rows)) {
            Ok(size) => Gathered::Available(size),
            Err(e) => Gathered::Unavailable(e.to_string()),
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
        Ok(rows) => {
            let rows = text_rows(&rows);
            // The session only when there is a transaction with one (a thread id of 0 is
            // InnoDB's own or a prepared XA transaction without a session). A session read
            // that fails leaves the transaction without its user: it is still judged.
            let thread = rows.first().and_then(|r| tcol_u64(r, 0)).filter(|t| *t > 0);
            let session = match thread {
                Some(id) => s
                    .query(&session_sql(id))
                    .await
                    .map(|r| text_rows(&r))
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            Gathered::Available(parse_transactions(&rows, &session))
        }
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
    super::due::still_fresh(*at, refresh).then(|| v.clone())
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
pub(super) struct Innodb<'o> {
    /// The agent's cache; `None` reads both every time (doctor).
    pub(super) cache: Option<&'o InnodbCache>,
    /// Doctor's dictionary bound: above it, the size from the files ([`bounded_size`]).
    pub(super) bound: Option<super::DictionaryBound>,
}

/// The `mariadb_innodb` collector.
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_innodb",
    help: "the InnoDB data size (mysql.innodb_table_stats) and the oldest open transaction (INNODB_TRX)",
    default_enabled: true,
    requires: Requires::Nothing,
};

impl Part for Innodb<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut powerdiag_rules::MariadbFacts, why: String) {
        facts.innodb_size = Gathered::Unavailable(why.clone());
        facts.transactions = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let cache = self.cache;
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
                    let size = match self.bound {
                        Some(bound) => bounded_size(ctx, bound).await,
                        None => read_size(ctx.s).await,
                    };
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
            CollectError::failed_statements(failed)
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
                .to_string()
                .contains("empty")
        );
        assert!(parse_size(&[]).is_err());
        assert!(parse_size(&[row(&[Some("x")])]).is_err());
    }

    #[test]
    fn transactions() {
        assert_eq!(parse_transactions(&[], &[]), Transactions::default());
        let trx = row(&[
            Some("42"),
            Some("7200"),
            Some("RUNNING"),
            Some("3"),
            Some("4"),
            Some("2"),
        ]);
        let session = row(&[
            Some("app"),
            Some("10.0.0.7:5123"),
            Some("Sleep"),
            Some("7100"),
        ]);
        let t = parse_transactions(std::slice::from_ref(&trx), &[session]);
        assert_eq!(t.open, 2);
        let o = t.oldest.unwrap();
        assert_eq!((o.thread_id, o.age_seconds, o.rows_locked), (42, 7200, 4));
        assert_eq!(o.user.as_deref(), Some("app"));
        assert_eq!(o.command.as_deref(), Some("Sleep"));
        assert_eq!(o.command_seconds, Some(7100));
        // A session gone between the two reads: no user, still a transaction.
        let t = parse_transactions(&[trx], &[]);
        let o = t.oldest.unwrap();
        assert_eq!(
            (o.user, o.command_seconds, o.rows_modified),
            (None, None, 3)
        );
        let t = parse_transactions(
            &[row(&[
                Some("9"),
                Some("-1"),
                Some("RUNNING"),
                None,
                None,
                None,
            ])],
            &[],
        );
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
            from_files: false,
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
