//! The `mariadb_schema` collector: the user tables and their indexes (PD705–PD708), one
//! statement per source whatever the number of tables — `information_schema.TABLES` (engine,
//! rows, sizes, last write), `information_schema.STATISTICS` (every index's columns in order),
//! `mysql.innodb_index_stats` (each InnoDB index's size) and, with performance_schema ON,
//! `table_io_waits_summary_by_table` (rows written since statistics began). Rows are folded as
//! they arrive ([`Session::query_each`]), never held whole.
//!
//! Only the tables a schema rule can judge are kept (see [`Schema`]), largest first, at most
//! `max_tables`; the rest are counted. Doctor reads it once; the agent every `[schema]
//! interval` (a day) and after DDL — the `Com_create_*`/`Com_alter_*`/`Com_drop_*` mark the
//! vector collector already watches — so the fix a finding prints clears it at the next
//! sample.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use powerdiag_rules::{Gathered, Index, IndexColumn, Schema, Table};

use super::part::{Ctx, Part, PartFuture};
use super::server::ChangeMark;
use super::session::{Session, TextRow, tcol, tcol_u64};
use super::vector::SCHEMA_CHANGES;
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// The schemas never read (the server's own).
const SYSTEM: &str = "('mysql', 'information_schema', 'performance_schema', 'sys')";

fn tables_sql() -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, \
         UNIX_TIMESTAMP(UPDATE_TIME), UNIX_TIMESTAMP(CREATE_TIME) FROM information_schema.TABLES \
         WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {SYSTEM}"
    )
}

fn statistics_sql() -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, INDEX_TYPE, COLUMN_NAME, \
         SUB_PART, NULLABLE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA NOT IN {SYSTEM}"
    )
}

/// Each InnoDB index's size (pages × page size); partitions (`t#P#p0`) are summed.
const INDEX_SIZES_SQL: &str = "SELECT database_name, table_name, index_name, \
     stat_value * @@innodb_page_size FROM mysql.innodb_index_stats WHERE stat_name = 'size'";

fn index_usage_sql() -> String {
    format!(
        "SELECT OBJECT_SCHEMA, OBJECT_NAME, INDEX_NAME, COUNT_READ \
         FROM performance_schema.table_io_waits_summary_by_index_usage \
         WHERE OBJECT_TYPE = 'TABLE' AND INDEX_NAME IS NOT NULL AND OBJECT_SCHEMA NOT IN {SYSTEM}"
    )
}

/// InnoDB's foreign keys from its dictionary (no table is opened): `db/table` names in the
/// server's file-name encoding, the child's and the parent's columns in order.
const FOREIGN_KEYS_SQL: &str = "SELECT f.FOR_NAME, f.REF_NAME, c.FOR_COL_NAME, c.REF_COL_NAME, \
     f.ID FROM information_schema.INNODB_SYS_FOREIGN f \
     JOIN information_schema.INNODB_SYS_FOREIGN_COLS c ON c.ID = f.ID ORDER BY f.ID, c.POS";

fn writes_sql() -> String {
    format!(
        "SELECT OBJECT_SCHEMA, OBJECT_NAME, COUNT_WRITE \
         FROM performance_schema.table_io_waits_summary_by_table \
         WHERE OBJECT_TYPE = 'TABLE' AND COUNT_WRITE > 0 AND OBJECT_SCHEMA NOT IN {SYSTEM}"
    )
}

/// How long the agent waits before reading again after a failed read.
const RETRY: Duration = Duration::from_secs(600);

/// How many tables the snapshot lists at most, by default.
pub const DEFAULT_MAX_TABLES: usize = 2_000;

/// Off by default: `information_schema.TABLES` and `STATISTICS` open every table, ~0.3 ms of
/// server CPU per table each (3.1 s and 3.4 s at 10,000 tables, docs/performance.md), so a
/// server with many tables pays seconds per read. Turn it on where that is acceptable; the
/// dictionary-based read that bounds it is the next step (issue 36).
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_schema",
    help: "the user tables and their indexes for PD705-PD708 (information_schema.TABLES and STATISTICS, InnoDB's index sizes and foreign keys, performance_schema's index reads and table writes): one statement per source, but information_schema opens every table (~0.65 ms of server CPU per table per read), so off by default; the agent reads it daily and after DDL",
    default_enabled: false,
    requires: Requires::Nothing,
};

/// The tables being built, keyed by (schema, name).
#[derive(Default)]
pub(crate) struct Builder {
    tables: Vec<Table>,
    by_name: HashMap<(String, String), usize>,
}

impl Builder {
    /// One row of [`tables_sql`].
    pub(crate) fn table_row(&mut self, r: &TextRow) {
        let (Some(schema), Some(name)) = (tcol(r, 0), tcol(r, 1)) else {
            return;
        };
        let i = self.tables.len();
        self.tables.push(Table {
            schema: schema.clone(),
            name: name.clone(),
            engine: tcol(r, 2),
            rows: tcol_u64(r, 3),
            data_bytes: tcol_u64(r, 4),
            index_bytes: tcol_u64(r, 5),
            writes: None,
            updated_at: unix(tcol(r, 6)),
            created_at: unix(tcol(r, 7)),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
        });
        self.by_name.insert((schema, name), i);
    }

    fn table(&mut self, schema: &str, name: &str) -> Option<&mut Table> {
        let i = *self.by_name.get(&(schema.to_owned(), name.to_owned()))?;
        self.tables.get_mut(i)
    }

    /// One row of [`statistics_sql`] (a column of an index, in index order).
    pub(crate) fn statistics_row(&mut self, r: &TextRow) {
        let (Some(schema), Some(name), Some(index), Some(column)) =
            (tcol(r, 0), tcol(r, 1), tcol(r, 2), tcol(r, 5))
        else {
            return;
        };
        let Some(t) = self.table(&schema, &name) else {
            return;
        };
        let col = IndexColumn {
            name: column,
            sub_part: tcol_u64(r, 6),
            nullable: tcol(r, 7).is_some_and(|n| n.eq_ignore_ascii_case("YES")),
        };
        match t.indexes.iter_mut().find(|i| i.name == index) {
            Some(i) => i.columns.push(col),
            None => t.indexes.push(Index {
                name: index,
                unique: tcol_u64(r, 3) == Some(0),
                kind: tcol(r, 4).unwrap_or_else(|| "BTREE".into()),
                columns: vec![col],
                bytes: None,
                reads: None,
            }),
        }
    }

    /// One row of [`INDEX_SIZES_SQL`].
    pub(crate) fn size_row(&mut self, r: &TextRow) {
        let (Some(schema), Some(name), Some(index), Some(bytes)) =
            (tcol(r, 0), tcol(r, 1), tcol(r, 2), tcol_u64(r, 3))
        else {
            return;
        };
        // A partition's statistics are its own table's: `t#P#p0` (`#p#` before 10.x).
        let base = name
            .split_once("#P#")
            .or_else(|| name.split_once("#p#"))
            .map_or(name.as_str(), |(b, _)| b)
            .to_owned();
        if let Some(i) = self
            .table(&schema, &base)
            .and_then(|t| t.indexes.iter_mut().find(|i| i.name == index))
        {
            i.bytes = Some(i.bytes.unwrap_or(0).saturating_add(bytes));
        }
    }

    /// One row of [`index_usage_sql`].
    pub(crate) fn index_usage_row(&mut self, r: &TextRow) {
        if let (Some(schema), Some(name), Some(index), Some(n)) =
            (tcol(r, 0), tcol(r, 1), tcol(r, 2), tcol_u64(r, 3))
            && let Some(i) = self
                .table(&schema, &name)
                .and_then(|t| t.indexes.iter_mut().find(|i| i.name == index))
        {
            i.reads = Some(n);
        }
    }

    /// One row of [`FOREIGN_KEYS_SQL`]: a column pair of a key, in order.
    pub(crate) fn foreign_key_row(&mut self, r: &TextRow, open: &mut Option<OpenKey>) {
        let (Some(child), Some(parent), Some(fc), Some(pc), Some(id)) =
            (tcol(r, 0), tcol(r, 1), tcol(r, 2), tcol(r, 3), tcol(r, 4))
        else {
            return;
        };
        if open.as_ref().is_none_or(|k| k.id != id) {
            self.close_key(open.take());
            *open = Some(OpenKey {
                id,
                child: decode_table(&child),
                parent: decode_table(&parent),
                child_cols: Vec::new(),
                parent_cols: Vec::new(),
            });
        }
        if let Some(k) = open.as_mut() {
            k.child_cols.push(fc);
            k.parent_cols.push(pc);
        }
    }

    /// Files a finished key on both its tables.
    pub(crate) fn close_key(&mut self, key: Option<OpenKey>) {
        let Some(k) = key else { return };
        for (table, cols) in [(k.child, k.child_cols), (k.parent, k.parent_cols)] {
            if let Some((db, name)) = table
                && let Some(t) = self.table(&db, &name)
                && !t.foreign_keys.contains(&cols)
            {
                t.foreign_keys.push(cols);
            }
        }
    }

    /// One row of [`writes_sql`].
    pub(crate) fn writes_row(&mut self, r: &TextRow) {
        if let (Some(schema), Some(name), Some(w)) = (tcol(r, 0), tcol(r, 1), tcol_u64(r, 2))
            && let Some(t) = self.table(&schema, &name)
        {
            t.writes = Some(w);
        }
    }

    /// The snapshot's facts: counts of all, the tables a rule can judge (largest first, at
    /// most `max_tables`). Tables with performance_schema's write counts read but none for
    /// them were not written.
    pub(crate) fn finish(
        mut self,
        max_tables: usize,
        writes_read: bool,
        index_usage_unread: Option<String>,
        read_at: i64,
    ) -> Schema {
        if writes_read {
            for t in &mut self.tables {
                t.writes.get_or_insert(0);
            }
        }
        let tables_total = self.tables.len() as u64;
        let innodb_tables = self.tables.iter().filter(|t| t.is_engine("InnoDB")).count() as u64;
        let mut listed: Vec<Table> = self.tables.into_iter().filter(Schema::lists).collect();
        let candidates = listed.len() as u64;
        listed.sort_by_key(|t| {
            std::cmp::Reverse(
                t.data_bytes
                    .unwrap_or(0)
                    .saturating_add(t.index_bytes.unwrap_or(0)),
            )
        });
        listed.truncate(max_tables);
        Schema {
            source: format!(
                "information_schema.TABLES and STATISTICS, mysql.innodb_index_stats{}",
                if writes_read {
                    ", performance_schema.table_io_waits_summary_by_table"
                } else {
                    ""
                }
            ),
            read_at: Some(read_at),
            tables_total,
            innodb_tables,
            candidates,
            tables: listed,
            index_usage_unread,
        }
    }
}

/// `UNIX_TIMESTAMP()`'s text (`1795809000.000000`) as whole seconds.
fn unix(v: Option<String>) -> Option<i64> {
    v?.trim().split('.').next()?.parse().ok()
}

/// A foreign key being read (its column pairs come one row each).
pub(crate) struct OpenKey {
    id: String,
    child: Option<(String, String)>,
    parent: Option<(String, String)>,
    child_cols: Vec<String>,
    parent_cols: Vec<String>,
}

/// `db/table` in the server's file-name encoding (`@0020` for a space, `@002d` for `-`) as
/// (schema, table); `None` when it cannot be decoded.
pub(crate) fn decode_table(name: &str) -> Option<(String, String)> {
    let (db, table) = name.split_once('/')?;
    Some((decode_part(db)?, decode_part(table)?))
}

fn decode_part(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('@') {
        out.push_str(&rest[..i]);
        let hex = rest.get(i + 1..i + 5)?;
        out.push(char::from_u32(u32::from_str_radix(hex, 16).ok()?)?);
        rest = &rest[i + 5..];
    }
    out.push_str(rest);
    Some(out)
}

fn why(e: powerdiag_rules::DbError, what: &str) -> String {
    if e.hint.is_empty() {
        format!("{what}: {}", e.message)
    } else {
        format!("{what}: {}; fix: {}", e.message, e.hint)
    }
}

/// Reads the schema: the two `information_schema` reads must succeed; the sizes and writes
/// only add to them (their failure is a note).
pub(crate) async fn read(
    s: &mut Session,
    max_tables: usize,
    performance_schema: bool,
    notes: &mut Vec<String>,
) -> Gathered<Schema> {
    let mut b = Builder::default();
    if let Err(e) = s.query_each(&tables_sql(), |r| b.table_row(&r)).await {
        return Gathered::Unavailable(why(e, "reading information_schema.TABLES"));
    }
    if let Err(e) = s
        .query_each(&statistics_sql(), |r| b.statistics_row(&r))
        .await
    {
        return Gathered::Unavailable(why(e, "reading information_schema.STATISTICS"));
    }
    if let Err(e) = s.query_each(INDEX_SIZES_SQL, |r| b.size_row(&r)).await {
        notes.push(format!(
            "index sizes unknown ({}; GRANT SELECT ON mysql.innodb_index_stats TO {})",
            e.message,
            s.account()
        ));
    }
    let mut open = None;
    match s
        .query_each(FOREIGN_KEYS_SQL, |r| b.foreign_key_row(&r, &mut open))
        .await
    {
        Ok(_) => b.close_key(open),
        Err(e) => notes.push(format!(
            "foreign keys unknown ({}): PD706 may list an index a foreign key needs",
            e.message
        )),
    }
    let mut index_usage_unread = Some(
        "performance_schema = OFF (set performance_schema=ON in [mariadbd]; a restart)".to_owned(),
    );
    let mut writes_read = false;
    if performance_schema {
        index_usage_unread = match s
            .query_each(&index_usage_sql(), |r| b.index_usage_row(&r))
            .await
        {
            Ok(_) => None,
            Err(e) => Some(format!(
                "reading performance_schema.table_io_waits_summary_by_index_usage: {} (GRANT SELECT ON performance_schema.* TO {})",
                e.message,
                s.account()
            )),
        };
        match s.query_each(&writes_sql(), |r| b.writes_row(&r)).await {
            Ok(_) => writes_read = true,
            Err(e) => notes.push(format!(
                "writes per table unknown ({}; GRANT SELECT ON performance_schema.* TO {})",
                e.message,
                s.account()
            )),
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Gathered::Available(b.finish(max_tables, writes_read, index_usage_unread, now))
}

/// What the agent keeps between samples: the last schema, when it was read and the DDL mark
/// then.
#[derive(Debug, Clone)]
pub struct SchemaCache {
    pub interval: Duration,
    pub max_tables: usize,
    last: Arc<Mutex<Option<KeptSchema>>>,
}

/// When the schema was read, the DDL mark then, and what the read gave.
type KeptSchema = (Instant, Option<ChangeMark>, Gathered<Schema>);

impl SchemaCache {
    pub fn new(interval: Duration, max_tables: usize) -> SchemaCache {
        SchemaCache {
            interval,
            max_tables,
            last: Default::default(),
        }
    }

    /// The same facts under other settings (a reloaded configuration).
    pub fn with_settings(&self, interval: Duration, max_tables: usize) -> SchemaCache {
        SchemaCache {
            interval,
            max_tables,
            last: self.last.clone(),
        }
    }

    /// The kept schema while fresh and no DDL ran since (`now`: this sample's mark).
    fn fresh(&self, now: Option<&ChangeMark>) -> Option<Gathered<Schema>> {
        let k = self.last.lock().ok()?;
        let (at, mark, schema) = k.as_ref()?;
        let same = matches!((mark, now), (Some(then), Some(now)) if then.unchanged_at(now));
        // A failed read (a timeout at scale, a missing grant) is tried again sooner, but not
        // every sample.
        let keep = match schema {
            Gathered::Available(_) => self.interval,
            Gathered::Unavailable(_) => self.interval.min(RETRY),
        };
        (same && super::due::still_fresh(*at, keep)).then(|| schema.clone())
    }

    fn store(&self, mark: Option<ChangeMark>, schema: &Gathered<Schema>) {
        if let Ok(mut k) = self.last.lock() {
            *k = Some((Instant::now(), mark, schema.clone()));
        }
    }
}

/// The `mariadb_schema` collector.
pub(super) struct SchemaPart<'o> {
    /// The agent's cache; `None` reads every time with the default cap (doctor).
    pub(super) cache: Option<&'o SchemaCache>,
}

impl Part for SchemaPart<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut powerdiag_rules::MariadbFacts, why: String) {
        facts.schema = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            let mark = ChangeMark::of(&ctx.facts.status, &SCHEMA_CHANGES);
            if let Some(kept) = self.cache.and_then(|c| c.fresh(mark.as_ref())) {
                ctx.facts.schema = kept;
                return Err(CollectError::skipped("the schema served from the cache"));
            }
            let max_tables = self.cache.map_or(DEFAULT_MAX_TABLES, |c| c.max_tables);
            let pfs = ctx
                .facts
                .var_bool(powerdiag_rules::Var::PerformanceSchema)
                .unwrap_or(false);
            let mut notes = Vec::new();
            let schema = read(ctx.s, max_tables, pfs, &mut notes).await;
            ctx.facts.notes.extend(notes);
            if let Some(c) = self.cache {
                c.store(mark, &schema);
            }
            match &schema {
                Gathered::Available(_) => {
                    ctx.facts.schema = schema;
                    Ok(())
                }
                Gathered::Unavailable(why) => {
                    let e = CollectError::Internal {
                        what: "reading the schema".into(),
                        message: why.clone(),
                    };
                    ctx.facts.schema = schema;
                    Err(e)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cols: &[Option<&str>]) -> TextRow {
        cols.iter().map(|c| c.map(str::to_owned)).collect()
    }

    /// Rows as MariaDB 11.8 returns them (captured from a test server's schema).
    #[test]
    fn folds_the_rows_into_tables_and_keeps_the_judged_ones() {
        let mut b = Builder::default();
        for r in [
            [
                Some("shop"),
                Some("orders"),
                Some("InnoDB"),
                Some("50000"),
                Some("5783552"),
                Some("2637824"),
                None,
            ],
            [
                Some("shop"),
                Some("plain"),
                Some("InnoDB"),
                Some("10"),
                Some("16384"),
                Some("0"),
                None,
            ],
            [
                Some("shop"),
                Some("nopk"),
                Some("InnoDB"),
                Some("50000"),
                Some("2637824"),
                Some("0"),
                None,
            ],
            [
                Some("shop"),
                Some("sessions"),
                Some("Aria"),
                Some("3"),
                Some("8192"),
                Some("8192"),
                Some("1795809000.000000"),
            ],
        ] {
            b.table_row(&row(&r));
        }
        for r in [
            [
                Some("shop"),
                Some("orders"),
                Some("PRIMARY"),
                Some("0"),
                Some("BTREE"),
                Some("id"),
                None,
                Some(""),
            ],
            [
                Some("shop"),
                Some("orders"),
                Some("k_a"),
                Some("1"),
                Some("BTREE"),
                Some("a"),
                None,
                Some("YES"),
            ],
            [
                Some("shop"),
                Some("orders"),
                Some("k_ab"),
                Some("1"),
                Some("BTREE"),
                Some("a"),
                None,
                Some("YES"),
            ],
            [
                Some("shop"),
                Some("orders"),
                Some("k_ab"),
                Some("1"),
                Some("BTREE"),
                Some("b"),
                Some("10"),
                Some("YES"),
            ],
            [
                Some("shop"),
                Some("plain"),
                Some("PRIMARY"),
                Some("0"),
                Some("BTREE"),
                Some("id"),
                None,
                Some(""),
            ],
            [
                Some("gone"),
                Some("t"),
                Some("PRIMARY"),
                Some("0"),
                Some("BTREE"),
                Some("id"),
                None,
                Some(""),
            ],
        ] {
            b.statistics_row(&row(&r));
        }
        b.size_row(&row(&[
            Some("shop"),
            Some("orders"),
            Some("k_a"),
            Some("1048576"),
        ]));
        b.size_row(&row(&[
            Some("shop"),
            Some("orders#P#p1"),
            Some("k_a"),
            Some("1048576"),
        ]));
        b.writes_row(&row(&[Some("shop"), Some("sessions"), Some("42")]));
        b.index_usage_row(&row(&[
            Some("shop"),
            Some("orders"),
            Some("k_a"),
            Some("0"),
        ]));
        b.index_usage_row(&row(&[
            Some("shop"),
            Some("orders"),
            Some("k_ab"),
            Some("77"),
        ]));
        let mut open = None;
        for r in [
            [
                Some("shop/orders"),
                Some("shop/nopk"),
                Some("a"),
                Some("x"),
                Some("shop/fk1"),
            ],
            [
                Some("shop/orders"),
                Some("shop/nopk"),
                Some("b"),
                Some("y"),
                Some("shop/fk1"),
            ],
            [
                Some("shop@002dx/t"),
                Some("shop/orders"),
                Some("c"),
                Some("id"),
                Some("shop@002dx/fk2"),
            ],
        ] {
            b.foreign_key_row(&row(&r), &mut open);
        }
        b.close_key(open);
        let s = b.finish(10, true, None, 1_795_809_600);
        assert_eq!((s.tables_total, s.innodb_tables, s.candidates), (4, 3, 3));
        let names: Vec<&str> = s.tables.iter().map(|t| t.name.as_str()).collect();
        // Largest first; `plain` (InnoDB, a primary key and one index) is only counted.
        assert_eq!(names, ["orders", "nopk", "sessions"]);
        let orders = &s.tables[0];
        assert_eq!(orders.indexes.len(), 3);
        assert_eq!(orders.indexes[2].columns[1].sub_part, Some(10));
        assert!(orders.indexes[1].columns[0].nullable);
        assert!(orders.indexes[0].unique && !orders.indexes[1].unique);
        assert_eq!(orders.indexes[1].bytes, Some(2 << 20));
        assert_eq!(orders.writes, Some(0));
        assert_eq!(
            (orders.indexes[1].reads, orders.indexes[2].reads),
            (Some(0), Some(77))
        );
        assert_eq!(
            orders.foreign_keys,
            [vec!["a".to_owned(), "b".into()], vec!["id".into()]]
        );
        assert_eq!(s.tables[1].foreign_keys, [vec!["x".to_owned(), "y".into()]]);
        assert_eq!(
            decode_table("shop@002dx/my@0020t"),
            Some(("shop-x".into(), "my t".into()))
        );
        assert_eq!(decode_table("bad@zz/t"), None);
        assert_eq!(s.tables[2].writes, Some(42));
        assert_eq!(s.tables[2].updated_at, Some(1_795_809_000));
        // The cap keeps the largest and says how many were left.
        let mut b = Builder::default();
        for n in ["a", "b", "c"] {
            b.table_row(&row(&[
                Some("s"),
                Some(n),
                Some("MyISAM"),
                None,
                Some(n),
                None,
                None,
            ]));
        }
        let s = b.finish(2, false, Some("performance_schema = OFF".into()), 0);
        assert_eq!((s.tables.len(), s.left_out()), (2, 1));
        assert!(s.tables[0].writes.is_none());
    }
}
