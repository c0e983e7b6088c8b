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
use super::schema_dictionary::{Dictionary, decode_table};
use super::server::ChangeMark;
use super::session::{Session, TextRow, tcol, tcol_u64};
use super::vector::SCHEMA_CHANGES;
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// The schemas never read (the server's own).
const SYSTEM: &str = "('mysql', 'information_schema', 'performance_schema', 'sys')";

/// InnoDB's tables: `db/table`, file-name encoded; partitions `t#P#p0` (needs PROCESS).
const SYS_TABLES_SQL: &str = "SELECT TABLE_ID, NAME FROM information_schema.INNODB_SYS_TABLES";

/// Each InnoDB index: its table, kind bits (1 clustered, 2 unique, 32 FULLTEXT, 64 SPATIAL).
const SYS_INDEXES_SQL: &str =
    "SELECT TABLE_ID, INDEX_ID, NAME, TYPE FROM information_schema.INNODB_SYS_INDEXES";

/// Each InnoDB index's columns in order (no prefix lengths: see `schema_dictionary.rs`).
const SYS_FIELDS_SQL: &str = "SELECT INDEX_ID, NAME FROM information_schema.INNODB_SYS_FIELDS";

/// Each InnoDB table's rows and sizes from its persistent statistics.
const TABLE_STATS_SQL: &str = "SELECT database_name, table_name, n_rows, \
     clustered_index_size * @@innodb_page_size, sum_of_other_index_sizes * @@innodb_page_size \
     FROM mysql.innodb_table_stats";

/// The names the account may see, from the `.frm` listing alone (a directory read: no table
/// is opened).
fn names_sql() -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA NOT IN {SYSTEM}"
    )
}

/// `(schema, table)` pairs as an `IN` list of hex literals (any name, no quoting to get
/// wrong); the server opens only these tables. None is `FALSE`: the statement is still sent,
/// so a read sends the same statements whatever the schema.
fn in_list(tables: &[(String, String)]) -> String {
    if tables.is_empty() {
        return "FALSE".into();
    }
    let pairs: Vec<String> = tables
        .iter()
        .map(|(s, t)| format!("({}, {})", literal(s), literal(t)))
        .collect();
    format!("(TABLE_SCHEMA, TABLE_NAME) IN ({})", pairs.join(", "))
}

/// A name as a hex string literal (`_utf8mb4 X'73686F70'`): nothing in it to quote.
fn literal(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02X}")).collect();
    format!("_utf8mb4 X'{hex}'")
}

/// What only an opened table tells: engine, rows, sizes, last write, creation.
fn tables_sql(tables: &[(String, String)]) -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, \
         UNIX_TIMESTAMP(UPDATE_TIME), UNIX_TIMESTAMP(CREATE_TIME), TABLE_TYPE \
         FROM information_schema.TABLES WHERE {}",
        in_list(tables)
    )
}

/// Every index column of the given tables, with prefix lengths and nullability.
fn statistics_sql(tables: &[(String, String)]) -> String {
    format!(
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, INDEX_TYPE, COLUMN_NAME, \
         SUB_PART, NULLABLE FROM information_schema.STATISTICS WHERE {}",
        in_list(tables)
    )
}

/// The indexes' sizes (pages × page size) of the given InnoDB tables, their partitions'
/// (`t#P#p0`, summed) for the `partitioned` ones: ranges of the statistics table's primary
/// key, not the scan of every index's statistics (0.46 s at 100,000 tables).
fn index_sizes_sql(tables: &[(String, String)], partitioned: &[(String, String)]) -> String {
    let mut cond =
        in_list(tables).replace("(TABLE_SCHEMA, TABLE_NAME)", "(database_name, table_name)");
    for (s, t) in partitioned {
        cond.push_str(&format!(
            " OR (database_name = {} AND table_name LIKE CONCAT({}, '#P#%'))",
            literal(s),
            literal(t)
        ));
    }
    // FORCE INDEX: the optimizer judges from the statistics table's own statistics, which lag
    // while tables are created, and then scans it whole (see vector.rs' persistent_sql).
    format!(
        "SELECT database_name, table_name, index_name, stat_value * @@innodb_page_size \
         FROM mysql.innodb_index_stats FORCE INDEX (PRIMARY) WHERE stat_name = 'size' AND ({cond})"
    )
}

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

/// Tables a read opens at most (`information_schema` for what the dictionary lacks: other
/// engines' tables, prefix lengths, creation times): ~0.9 ms of server CPU each at 100,000
/// tables, so ≤ ~0.2 s.
pub(crate) const OPEN_MAX: usize = 200;

/// Tables up to which performance_schema's index counts (PD706) and writes per table are
/// read: ~0.9 s of server CPU at 100,000 tables with 2,000 open table handles
/// (docs/performance.md).
pub(crate) const PFS_MAX_TABLES: u64 = 20_000;

/// Open table handles up to which they are read. Each summary row of a table with a handle
/// open visits every open handle, so the read grows with the square of the handles: at 10,000
/// tables ~0.3 s of server CPU with 2,000 handles (MariaDB's default `table_open_cache`), ~1.15
/// s with 4,000 (docs/performance.md). The handles are estimated as a busy server's full cache,
/// `min(table_open_cache, InnoDB tables)`: a cache raised above this many leaves them out.
pub(crate) const PFS_MAX_HANDLES: u64 = 2_000;

/// How long the agent waits before reading again after a failed read.
const RETRY: Duration = Duration::from_secs(600);

/// How many tables the snapshot lists at most, by default.
pub const DEFAULT_MAX_TABLES: usize = 500;

/// On by default since it reads InnoDB's dictionary instead of opening every table (bounded
/// cost at 100,000 tables: docs/performance.md).
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_schema",
    help: "the user tables and their indexes for PD705-PD708 from InnoDB's dictionary (INNODB_SYS_TABLES, _INDEXES, _FIELDS, _FOREIGN, mysql.innodb_table_stats and innodb_index_stats), the .frm listing for other engines' tables, performance_schema's index reads and table writes; at most 200 tables opened per read; the agent reads it daily and after DDL",
    default_enabled: true,
    requires: Requires::Nothing,
};

/// The tables being built, keyed by (schema, name).
#[derive(Default)]
pub(crate) struct Builder {
    tables: Vec<Table>,
    by_name: HashMap<(String, String), usize>,
    /// (table, index) with a nullable column, from `information_schema.STATISTICS`.
    nullable: std::collections::HashSet<(usize, String)>,
    /// Dictionary indexes of tables being re-read (see [`Builder::reread_indexes`]).
    set_aside: Vec<(usize, Vec<Index>)>,
}

impl Builder {
    /// The tables kept from InnoDB's dictionary.
    pub(crate) fn from_tables(tables: Vec<Table>) -> Builder {
        let mut b = Builder::default();
        for t in tables {
            b.push(t);
        }
        b
    }

    fn push(&mut self, t: Table) {
        let key = (t.schema.clone(), t.name.clone());
        if !self.by_name.contains_key(&key) {
            self.by_name.insert(key, self.tables.len());
            self.tables.push(t);
        }
    }

    /// A name InnoDB does not know, to be filled by [`tables_sql`] (engine `None` until then),
    /// with its rows written when performance_schema said.
    pub(crate) fn other(&mut self, schema: &str, name: &str, writes: Option<u64>) {
        self.push(Table {
            schema: schema.to_owned(),
            name: name.to_owned(),
            writes,
            ..Default::default()
        });
    }

    /// One row of [`tables_sql`]: fills the table; a view is forgotten.
    pub(crate) fn table_row(&mut self, r: &TextRow) {
        let (Some(schema), Some(name)) = (tcol(r, 0), tcol(r, 1)) else {
            return;
        };
        let Some(&i) = self.by_name.get(&(schema, name)) else {
            return;
        };
        if tcol(r, 8).is_some_and(|t| t != "BASE TABLE") {
            if let Some(t) = self.tables.get_mut(i) {
                t.engine = None;
                t.indexes.clear();
            }
            return;
        }
        let Some(t) = self.tables.get_mut(i) else {
            return;
        };
        if let Some(e) = tcol(r, 2) {
            t.engine = Some(e);
        }
        t.rows = tcol_u64(r, 3).or(t.rows);
        t.data_bytes = tcol_u64(r, 4).or(t.data_bytes);
        t.index_bytes = tcol_u64(r, 5).or(t.index_bytes);
        t.updated_at = unix(tcol(r, 6)).or(t.updated_at);
        t.created_at = unix(tcol(r, 7)).or(t.created_at);
    }

    fn table(&mut self, schema: &str, name: &str) -> Option<&mut Table> {
        let i = *self.by_name.get(&(schema.to_owned(), name.to_owned()))?;
        self.tables.get_mut(i)
    }

    /// Before [`statistics_sql`] re-reads a dictionary table's indexes with their prefix
    /// lengths: sets them aside (see [`Builder::restore_unread`]), keeping which one InnoDB
    /// clusters by.
    pub(crate) fn reread_indexes(&mut self, schema: &str, name: &str) -> Option<String> {
        let i = *self.by_name.get(&(schema.to_owned(), name.to_owned()))?;
        let t = self.tables.get_mut(i)?;
        let clustered = t.clustered_key().map(|i| i.name.clone());
        self.set_aside.push((i, std::mem::take(&mut t.indexes)));
        t.prefix_lengths_unknown = false;
        clustered
    }

    /// After [`statistics_sql`]: a table it gave no row for (the account holds no privilege
    /// on it, so `information_schema` does not show it; dropped since) keeps the dictionary's
    /// indexes, prefix lengths unknown. Returns how many.
    pub(crate) fn restore_unread(&mut self) -> usize {
        let mut n = 0;
        for (i, indexes) in std::mem::take(&mut self.set_aside) {
            if let Some(t) = self.tables.get_mut(i)
                && t.indexes.is_empty()
            {
                t.indexes = indexes;
                t.prefix_lengths_unknown = true;
                n += 1;
            }
        }
        n
    }

    /// One row of [`statistics_sql`] (a column of an index, in index order).
    pub(crate) fn statistics_row(&mut self, r: &TextRow) {
        let (Some(schema), Some(name), Some(index), Some(column)) =
            (tcol(r, 0), tcol(r, 1), tcol(r, 2), tcol(r, 5))
        else {
            return;
        };
        let Some(&ti) = self.by_name.get(&(schema, name)) else {
            return;
        };
        if tcol(r, 7).is_some_and(|n| n.eq_ignore_ascii_case("YES")) {
            self.nullable.insert((ti, index.clone()));
        }
        let Some(t) = self.tables.get_mut(ti) else {
            return;
        };
        let col = IndexColumn {
            name: column,
            sub_part: tcol_u64(r, 6),
        };
        match t.indexes.iter_mut().find(|i| i.name == index) {
            Some(i) => i.columns.push(col),
            None => t.indexes.push(Index {
                name: index,
                unique: tcol_u64(r, 3) == Some(0),
                kind: tcol(r, 4).unwrap_or_else(|| "BTREE".into()),
                clustered: false,
                columns: vec![col],
                bytes: None,
                reads: None,
            }),
        }
    }

    /// After [`statistics_sql`] and [`tables_sql`]: the clustered index of each InnoDB table
    /// whose indexes were read there (`reread`: the one the dictionary named, `None` for a
    /// name it did not know) — the dictionary's, else `PRIMARY` or the first UNIQUE key of NOT
    /// NULL whole columns, as InnoDB picks it.
    pub(crate) fn mark_clustered(&mut self, reread: &HashMap<usize, Option<String>>) {
        for (&ti, named) in reread {
            let Some(t) = self.tables.get_mut(ti) else {
                continue;
            };
            if !t.is_engine("InnoDB") || t.indexes.iter().any(|i| i.clustered) {
                continue;
            }
            let pick = match named {
                Some(named) => Some(named.clone()),
                None => t
                    .indexes
                    .iter()
                    .find(|i| i.is_primary())
                    .or_else(|| {
                        t.indexes.iter().find(|i| {
                            i.unique
                                && i.kind.eq_ignore_ascii_case("BTREE")
                                && !self.nullable.contains(&(ti, i.name.clone()))
                                && i.columns.iter().all(|c| c.sub_part.is_none())
                        })
                    })
                    .map(|i| i.name.clone()),
            };
            if let Some(name) = pick
                && let Some(i) = t.indexes.iter_mut().find(|i| i.name == name)
            {
                i.clustered = true;
            }
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

    /// The tables (name pairs) `f` picks, at most `n`, in the builder's order.
    fn pick(&self, n: usize, f: impl Fn(&Table) -> bool) -> Vec<(String, String)> {
        self.tables
            .iter()
            .filter(|t| f(t))
            .take(n)
            .map(|t| (t.schema.clone(), t.name.clone()))
            .collect()
    }

    /// The snapshot's facts: the tables a rule can judge (largest first, at most
    /// `max_tables`). With performance_schema's write counts read, a table without one was not
    /// written. A name never opened (the cap) or a view is dropped: `counts` say how many.
    pub(crate) fn finish(
        mut self,
        max_tables: usize,
        writes_read: bool,
        index_usage_unread: Option<String>,
        read_at: i64,
        counts: Counts,
    ) -> Schema {
        if writes_read {
            for t in &mut self.tables {
                t.writes.get_or_insert(0);
            }
        }
        let before = self.tables.len() as u64;
        let others_read = self
            .tables
            .iter()
            .filter(|t| {
                t.engine
                    .as_ref()
                    .is_some_and(|e| !e.eq_ignore_ascii_case("InnoDB"))
            })
            .count() as u64;
        let mut listed: Vec<Table> = self
            .tables
            .into_iter()
            .filter(|t| t.engine.is_some() && Schema::lists(t))
            .collect();
        // Kept for an index that might be unread, and it was read: not a candidate after all.
        let dropped = before - listed.len() as u64;
        let candidates = (counts.candidates + counts.others_listed + counts.others_unread)
            .saturating_sub(dropped);
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
                "InnoDB's dictionary (INNODB_SYS_*, mysql.innodb_table_stats and innodb_index_stats), information_schema for {} table(s) it lacks{}",
                counts.opened,
                if writes_read {
                    ", performance_schema.table_io_waits_summary_by_table"
                } else {
                    ""
                }
            ),
            read_at: Some(read_at),
            tables_total: counts.innodb_tables + others_read + counts.others_unread,
            innodb_tables: counts.innodb_tables,
            candidates,
            tables: listed,
            index_usage_unread,
        }
    }
}

/// What the dictionary fold counted, for [`Builder::finish`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    /// InnoDB user tables.
    pub(crate) innodb_tables: u64,
    /// InnoDB tables a rule may judge (before the cap).
    pub(crate) candidates: u64,
    /// Names InnoDB does not know, opened (tables of other engines and views).
    pub(crate) others_listed: u64,
    /// Names InnoDB does not know, beyond the cap: not opened.
    pub(crate) others_unread: u64,
    /// Tables opened by the read.
    pub(crate) opened: u64,
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

fn why(e: powerdiag_rules::DbError, what: &str) -> String {
    if e.hint.is_empty() {
        format!("{what}: {}", e.message)
    } else {
        format!("{what}: {}; fix: {}", e.message, e.hint)
    }
}

/// Whether performance_schema's summaries are read for a server with `tables` InnoDB tables
/// and a table cache of `cache` handles (`table_open_cache`; `None` when unread, taken as
/// large as the tables), and why the index counts are not, for PD706, if they are not.
fn pfs_plan(on: bool, tables: u64, cache: Option<u64>) -> (bool, String) {
    let handles = cache.map_or(tables, |c| c.min(tables));
    if !on {
        (
            false,
            "performance_schema = OFF (set performance_schema=ON in [mariadbd]; a restart)".into(),
        )
    } else if tables > PFS_MAX_TABLES {
        (
            false,
            format!(
                "not read: {tables} InnoDB tables, above the {PFS_MAX_TABLES} up to which powerdiag reads performance_schema's index counts (~0.9 s of server CPU per read at 100,000 tables with the table cache full)"
            ),
        )
    } else if handles > PFS_MAX_HANDLES {
        let cache = cache.map_or("unread".to_string(), |c| c.to_string());
        (
            false,
            format!(
                "not read: up to {handles} open table handles (table_open_cache {cache}, {tables} InnoDB tables), above the {PFS_MAX_HANDLES} up to which powerdiag reads performance_schema's index counts: each row visits every open handle (~1.15 s of server CPU per read at 4,000 handles and 10,000 tables); sys.schema_unused_indexes reads the same counts at the same cost: query it at a quiet hour"
            ),
        )
    } else {
        (true, String::new())
    }
}

/// Reads the schema: InnoDB's dictionary must be readable (PROCESS); the sizes, the foreign
/// keys, performance_schema's counts and the opened tables only add to it (their failure is
/// a note).
pub(crate) async fn read(
    s: &mut Session,
    max_tables: usize,
    performance_schema: bool,
    table_cache: Option<u64>,
    notes: &mut Vec<String>,
) -> Gathered<Schema> {
    let process = |e: powerdiag_rules::DbError, what: &str, s: &Session| {
        Gathered::Unavailable(format!(
            "{}; InnoDB's dictionary needs GRANT PROCESS ON *.* TO {}",
            why(e, what),
            s.account()
        ))
    };
    let mut d = Dictionary::new(max_tables, performance_schema);
    let system = powerdiag_rules::SYSTEM_SCHEMAS;
    if let Err(e) = s
        .query_each(SYS_TABLES_SQL, |r| {
            if let (Some(id), Some(name)) = (tcol_u64(&r, 0), tcol(&r, 1)) {
                d.sys_table(id, &name, &system);
            }
        })
        .await
    {
        return process(e, "reading information_schema.INNODB_SYS_TABLES", s);
    }
    d.index_tables();
    // performance_schema's per-table and per-index summaries cost ~4.5 µs of server CPU per
    // row with the table cache full (each row visits every open table handle): above
    // PFS_MAX_TABLES or PFS_MAX_HANDLES they are not read, and the read stays under a second.
    let (performance_schema, pfs_unread) =
        pfs_plan(performance_schema, d.innodb_tables, table_cache);
    d.set_performance_schema(performance_schema);
    // The names InnoDB does not know: with performance_schema, those written since the server
    // started (its writes per table, which PD708 needs anyway); else the `.frm` listing.
    let mut others_unread = 0u64;
    let mut writes_read = false;
    if performance_schema {
        match s
            .query_each(&writes_sql(), |r| {
                if let (Some(schema), Some(name), Some(w)) =
                    (tcol(&r, 0), tcol(&r, 1), tcol_u64(&r, 2))
                    && !d.written(schema, name, w, OPEN_MAX)
                {
                    others_unread += 1;
                }
            })
            .await
        {
            Ok(_) => writes_read = true,
            Err(e) => notes.push(format!(
                "writes per table unknown ({}; GRANT SELECT ON performance_schema.* TO {})",
                e.message,
                s.account()
            )),
        }
    }
    if !writes_read
        && let Err(e) = s
            .query_each(&names_sql(), |r| {
                if let (Some(schema), Some(name)) = (tcol(&r, 0), tcol(&r, 1))
                    && !d.listed(schema, name, OPEN_MAX)
                {
                    others_unread += 1;
                }
            })
            .await
    {
        notes.push(format!(
            "other engines' tables unknown ({}): PD708 sees none",
            e.message
        ));
    }
    if let Err(e) = s
        .query_each(TABLE_STATS_SQL, |r| {
            if let (Some(db), Some(name), Some(rows), Some(data), Some(index)) = (
                tcol(&r, 0),
                tcol(&r, 1),
                tcol_u64(&r, 2),
                tcol_u64(&r, 3),
                tcol_u64(&r, 4),
            ) {
                d.table_stats(&db, &name, rows, data, index);
            }
        })
        .await
    {
        notes.push(format!(
            "InnoDB table sizes unknown ({}; GRANT SELECT ON mysql.innodb_table_stats TO {})",
            e.message,
            s.account()
        ));
    }
    if let Err(e) = s
        .query_each(SYS_FIELDS_SQL, |r| {
            if let (Some(id), Some(name)) = (tcol_u64(&r, 0), tcol(&r, 1)) {
                d.field(id, name);
            }
        })
        .await
    {
        return process(e, "reading information_schema.INNODB_SYS_FIELDS", s);
    }
    d.index_fields();
    if let Err(e) = s
        .query_each(SYS_INDEXES_SQL, |r| {
            if let (Some(t), Some(i), Some(name), Some(kind)) = (
                tcol_u64(&r, 0),
                tcol_u64(&r, 1),
                tcol(&r, 2),
                tcol_u64(&r, 3),
            ) {
                d.sys_index(t, i, name, kind as u32);
            }
        })
        .await
    {
        return process(e, "reading information_schema.INNODB_SYS_INDEXES", s);
    }
    // The last table's index rows: folded before anything is counted.
    d.close();
    let others = std::mem::take(&mut d.others);
    let partitioned = std::mem::take(&mut d.partitioned);
    let mut counts = Counts {
        innodb_tables: d.innodb_tables,
        candidates: d.candidates,
        others_listed: others.len() as u64,
        others_unread,
        opened: 0,
    };
    let mut b = Builder::from_tables(d.finish());
    let others: Vec<(String, String)> = others
        .into_iter()
        .map(|(schema, name, writes)| {
            b.other(&schema, &name, writes);
            (schema, name)
        })
        .collect();

    // What the dictionary lacks, from the tables opened (at most OPEN_MAX): the other
    // engines' tables first, then prefix lengths where an index looks redundant by names.
    let mut opened: std::collections::HashSet<(String, String)> = others.iter().cloned().collect();
    let mut reread = b.pick(OPEN_MAX.saturating_sub(opened.len()), |t| {
        t.prefix_lengths_unknown
    });
    let mut clustered = HashMap::new();
    for (schema, name) in &reread {
        if let Some(&ti) = b.by_name.get(&(schema.clone(), name.clone())) {
            clustered.insert(ti, b.reread_indexes(schema, name));
        }
    }
    for (schema, name) in &others {
        if let Some(&ti) = b.by_name.get(&(schema.clone(), name.clone())) {
            clustered.insert(ti, None);
        }
    }
    reread.extend(others.iter().cloned());
    opened.extend(reread.iter().cloned());
    if let Err(e) = s
        .query_each(&statistics_sql(&reread), |r| b.statistics_row(&r))
        .await
    {
        notes.push(format!(
            "indexes of {} table(s) unknown (reading information_schema.STATISTICS: {})",
            reread.len(),
            e.message
        ));
    }
    let hidden = b.restore_unread();
    if hidden > 0 {
        notes.push(format!(
            "prefix lengths of {hidden} table(s) unread: information_schema does not show them to {account} (GRANT SHOW VIEW ON *.* TO {account} lets it see every table without reading a row)",
            account = s.account()
        ));
    }

    let innodb = b.pick(usize::MAX, |t| t.is_engine("InnoDB"));
    let parts: Vec<(String, String)> = innodb
        .iter()
        .filter(|k| partitioned.contains(*k))
        .cloned()
        .collect();
    if let Err(e) = s
        .query_each(&index_sizes_sql(&innodb, &parts), |r| b.size_row(&r))
        .await
    {
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
    let mut index_usage_unread = Some(pfs_unread);
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
    }

    // Engines, sizes and last writes of the other names; the creation time (when
    // performance_schema's counts restarted) of tables with an unread index, largest first.
    // A table already opened above is opened again at no cost to the cap.
    let mut room = OPEN_MAX.saturating_sub(opened.len());
    let mut fill: Vec<(String, String)> = others.clone();
    for k in b.pick(usize::MAX, |t| {
        t.is_engine("InnoDB")
            && t.created_at.is_none()
            && t.indexes.iter().any(|i| !i.unique && i.reads == Some(0))
    }) {
        if opened.contains(&k) {
            fill.push(k);
        } else if room > 0 {
            room -= 1;
            fill.push(k);
        }
    }
    opened.extend(fill.iter().cloned());
    if let Err(e) = s.query_each(&tables_sql(&fill), |r| b.table_row(&r)).await {
        notes.push(format!(
            "{} table(s) not read (information_schema.TABLES: {})",
            fill.len(),
            e.message
        ));
    }
    b.mark_clustered(&clustered);
    counts.opened = opened.len() as u64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Gathered::Available(b.finish(max_tables, writes_read, index_usage_unread, now, counts))
}

/// The indexes of `tables` (one `information_schema.STATISTICS` statement, opening only
/// them; sent with `FALSE` when there are none, so the statement count does not depend on the
/// workload): for PD701 and PD703, which name the indexes a scanning statement's tables have.
pub(crate) async fn indexes_of(
    s: &mut Session,
    tables: &[(String, String)],
) -> Result<Vec<Table>, powerdiag_rules::DbError> {
    let mut b = Builder::default();
    for (schema, name) in tables {
        b.other(schema, name, None);
    }
    s.query_each(&statistics_sql(tables), |r| b.statistics_row(&r))
        .await?;
    // A table information_schema did not show (dropped, or no privilege on it) is left out.
    Ok(b.tables
        .into_iter()
        .filter(|t| !t.indexes.is_empty())
        .collect())
}

/// Hands the memory freed after a large read back to the system: glibc keeps freed heap
/// pages for reuse otherwise (after a read of 100,000 tables, ~24 MB stayed resident).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas, under their locks; any pad is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the agent keeps between samples: the last schema, when it was read and the DDL mark
/// then.
#[derive(Debug, Clone)]
pub struct SchemaCache {
    pub interval: Duration,
    pub max_tables: usize,
    last: Arc<Mutex<Option<KeptSchema>>>,
}

/// When the schema was read, how long the read took, the DDL mark then, and what it gave.
type KeptSchema = (Instant, Duration, Option<ChangeMark>, Gathered<Schema>);

/// After DDL the schema is read again at the next sample, but not sooner than this many
/// times the last read's duration after it: a server with 100,000 tables (a ~3 s read)
/// creating a table a minute is read every 5 minutes, not every sample — at most ~1% of the
/// time spent reading it.
const DDL_REREAD_FACTOR: u32 = 100;

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
        let (at, took, mark, schema) = k.as_ref()?;
        let same = matches!((mark, now), (Some(then), Some(now)) if then.unchanged_at(now))
            || at.elapsed() < *took * DDL_REREAD_FACTOR;
        // A failed read (a timeout at scale, a missing grant) is tried again sooner, but not
        // every sample.
        let keep = match schema {
            Gathered::Available(_) => self.interval,
            Gathered::Unavailable(_) => self.interval.min(RETRY),
        };
        (same && super::due::still_fresh(*at, keep)).then(|| schema.clone())
    }

    fn store(&self, took: Duration, mark: Option<ChangeMark>, schema: &Gathered<Schema>) {
        if let Ok(mut k) = self.last.lock() {
            *k = Some((Instant::now(), took, mark, schema.clone()));
        }
    }
}

/// The `mariadb_schema` collector.
pub(super) struct SchemaPart<'o> {
    /// The agent's cache; `None` reads every time with the default cap (doctor).
    pub(super) cache: Option<&'o SchemaCache>,
    /// Doctor's bound on the tables it reads the dictionary for.
    pub(super) bound: Option<super::DictionaryBound>,
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
            if let Some(bound) = self.bound.and_then(|b| b.schema_max_tables)
                && let Some(n) = super::tables_above(ctx.facts, bound)
            {
                let why = if self.cache.is_some() {
                    format!(
                        "left out: the server has {n} InnoDB tables with statistics, above the agent's bound of {bound} ([schema] max_dictionary_tables): the read holds every table's dictionary rows at once (~10 MB of the agent's memory for some seconds at 100,000 tables) and costs the server about 0.9 s of CPU there. Raise the bound, or set it to 0, to read the schema once a day anyway; `powerdiag doctor --collector.mariadb_schema` reads it once"
                    )
                } else {
                    format!(
                        "left out: the server has {n} InnoDB tables with statistics, above doctor's bound of {bound} (--dictionary-max-tables): reading InnoDB's dictionary for them would cost the server about 0.9 s of CPU at 100,000 tables. `powerdiag doctor --collector.mariadb_schema` reads it here anyway"
                    )
                };
                ctx.facts.schema = Gathered::Unavailable(why.clone());
                return Err(CollectError::skipped(why));
            }
            let max_tables = self.cache.map_or(DEFAULT_MAX_TABLES, |c| c.max_tables);
            let pfs = ctx
                .facts
                .var_bool(powerdiag_rules::Var::PerformanceSchema)
                .unwrap_or(false);
            let table_cache = ctx.facts.var_u64(powerdiag_rules::Var::TableOpenCache).ok();
            let mut notes = Vec::new();
            let started = Instant::now();
            let schema = read(ctx.s, max_tables, pfs, table_cache, &mut notes).await;
            ctx.facts.notes.extend(notes);
            release_freed_memory();
            if let Some(c) = self.cache {
                c.store(started.elapsed(), mark, &schema);
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

    fn col(name: &str) -> IndexColumn {
        IndexColumn {
            name: name.into(),
            sub_part: None,
        }
    }

    fn innodb(name: &str, indexes: Vec<Index>) -> Table {
        Table {
            schema: "shop".into(),
            name: name.into(),
            engine: Some("InnoDB".into()),
            data_bytes: Some(1 << 20),
            indexes,
            ..Default::default()
        }
    }

    fn index(name: &str, unique: bool, cols: &[&str]) -> Index {
        Index {
            name: name.into(),
            unique,
            kind: "BTREE".into(),
            clustered: name == "PRIMARY",
            columns: cols.iter().map(|c| col(c)).collect(),
            bytes: None,
            reads: None,
        }
    }

    /// Rows as MariaDB 11.8 returns them (captured from a test server's schema), on tables the
    /// dictionary fold kept and names it did not know.
    #[test]
    fn fills_what_the_dictionary_lacks_and_keeps_the_judged_ones() {
        let mut b = Builder::from_tables(vec![
            innodb(
                "orders",
                vec![
                    index("PRIMARY", true, &["id"]),
                    index("k_a", false, &["a"]),
                    index("k_ab", false, &["a", "b"]),
                ],
            ),
            innodb(
                "plain",
                vec![index("PRIMARY", true, &["id"]), index("k", false, &["x"])],
            ),
        ]);
        b.other("shop", "sessions", Some(42));
        b.other("shop", "v", None);
        b.other("shop", "gone", None);
        // orders' prefix lengths re-read: k_ab's second column is a prefix.
        let clustered: HashMap<usize, Option<String>> =
            [(0, b.reread_indexes("shop", "orders"))].into();
        assert_eq!(clustered[&0].as_deref(), Some("PRIMARY"));
        for r in [
            ["orders", "PRIMARY", "0", "id", "", "NO"],
            ["orders", "k_a", "1", "a", "", "YES"],
            ["orders", "k_ab", "1", "a", "", "YES"],
            ["orders", "k_ab", "1", "b", "10", "YES"],
            ["sessions", "u", "0", "token", "", "NO"],
        ] {
            let sub = (!r[4].is_empty()).then_some(r[4]);
            b.statistics_row(&row(&[
                Some("shop"),
                Some(r[0]),
                Some(r[1]),
                Some(r[2]),
                Some("BTREE"),
                Some(r[3]),
                sub,
                Some(r[5]),
            ]));
        }
        b.mark_clustered(&clustered);
        for r in [
            [
                Some("sessions"),
                Some("Aria"),
                Some("3"),
                Some("8192"),
                Some("1795809000.000000"),
                Some("BASE TABLE"),
            ],
            [Some("v"), None, None, None, None, Some("VIEW")],
        ] {
            b.table_row(&row(&[
                Some("shop"),
                r[0],
                r[1],
                r[2],
                r[3],
                Some("8192"),
                r[4],
                Some("1795000000"),
                r[5],
            ]));
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
        b.index_usage_row(&row(&[Some("shop"), Some("plain"), Some("k"), Some("5")]));
        let mut open = None;
        for r in [
            ["shop/orders", "shop/sessions", "a", "x", "shop/fk1"],
            ["shop/orders", "shop/sessions", "b", "y", "shop/fk1"],
            ["shop@002dx/t", "shop/orders", "c", "id", "shop@002dx/fk2"],
        ] {
            b.foreign_key_row(&row(&r.map(Some)), &mut open);
        }
        b.close_key(open);
        let counts = Counts {
            innodb_tables: 102,
            candidates: 2,
            others_listed: 3,
            others_unread: 0,
            opened: 4,
        };
        let s = b.finish(10, true, None, 1_795_809_600, counts);
        // `plain`'s only index was read: not a candidate; the view and the vanished name are
        // dropped, the Aria table stays.
        assert_eq!(
            (s.tables_total, s.innodb_tables, s.candidates),
            (103, 102, 2)
        );
        let names: Vec<&str> = s.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["orders", "sessions"]);
        let orders = &s.tables[0];
        assert_eq!(orders.indexes.len(), 3);
        assert!(orders.indexes[0].clustered && !orders.prefix_lengths_unknown);
        assert_eq!(orders.indexes[2].columns[1].sub_part, Some(10));
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
        let sessions = &s.tables[1];
        assert_eq!(sessions.engine.as_deref(), Some("Aria"));
        assert_eq!(
            (sessions.writes, sessions.updated_at),
            (Some(42), Some(1_795_809_000))
        );
        assert_eq!(sessions.foreign_keys, [vec!["x".to_owned(), "y".into()]]);
        // Not InnoDB: never marked clustered.
        assert!(!sessions.indexes[0].clustered);
        assert_eq!(
            decode_table("shop@002dx/my@0020t"),
            Some(("shop-x".into(), "my t".into()))
        );
        assert_eq!(decode_table("bad@zz/t"), None);
        assert!(
            s.source.contains("information_schema for 4 table(s)"),
            "{}",
            s.source
        );
    }

    /// A table without a primary key re-read from information_schema: the first UNIQUE key of
    /// NOT NULL whole columns is the clustered one, as InnoDB picks it.
    #[test]
    fn the_clustered_key_of_a_reread_table() {
        let mut b = Builder::default();
        b.other("s", "t", None);
        b.table_row(&row(&[
            Some("s"),
            Some("t"),
            Some("InnoDB"),
            None,
            None,
            None,
            None,
            None,
            Some("BASE TABLE"),
        ]));
        for (index, column, nullable) in [("u_null", "a", "YES"), ("u", "b", "NO")] {
            b.statistics_row(&row(&[
                Some("s"),
                Some("t"),
                Some(index),
                Some("0"),
                Some("BTREE"),
                Some(column),
                None,
                Some(nullable),
            ]));
        }
        b.mark_clustered(&[(0, None)].into());
        let t = &b.tables[0];
        assert_eq!(t.clustered_key().map(|i| i.name.as_str()), Some("u"));
    }

    #[test]
    fn names_go_to_the_server_as_hex() {
        let sql = tables_sql(&[("we'ird".into(), "t`\\".into())]);
        assert!(
            sql.ends_with("WHERE (TABLE_SCHEMA, TABLE_NAME) IN ((_utf8mb4 X'776527697264', _utf8mb4 X'74605C'))"),
            "{sql}"
        );
        let sizes = index_sizes_sql(
            &[("s".into(), "t".into()), ("s".into(), "p".into())],
            &[("s".into(), "p".into())],
        );
        assert!(
            sizes.ends_with("AND ((database_name, table_name) IN ((_utf8mb4 X'73', _utf8mb4 X'74'), (_utf8mb4 X'73', _utf8mb4 X'70')) OR (database_name = _utf8mb4 X'73' AND table_name LIKE CONCAT(_utf8mb4 X'70', '#P#%')))"),
            "{sizes}"
        );
        assert!(statistics_sql(&[]).ends_with("WHERE FALSE"));
    }

    /// After DDL the schema is read again, unless the last read was less than 100 times its
    /// own duration ago (a costly read is not repeated every sample).
    #[test]
    fn ddl_rereads_unless_the_last_read_was_costly_and_recent() {
        let status = |alter: &str| -> std::collections::BTreeMap<String, String> {
            let mut m: std::collections::BTreeMap<String, String> = SCHEMA_CHANGES
                .iter()
                .map(|v| (v.name().to_owned(), "3".to_owned()))
                .collect();
            m.insert("uptime".into(), "100".into());
            m.insert("com_alter_table".into(), alter.into());
            m
        };
        let then = ChangeMark::of(&status("7"), &SCHEMA_CHANGES);
        let after_ddl = ChangeMark::of(&status("8"), &SCHEMA_CHANGES);
        let read = Gathered::Available(Schema::default());
        let cache = SchemaCache::new(Duration::from_secs(86_400), 10);
        cache.store(Duration::from_millis(1), then.clone(), &read);
        assert!(cache.fresh(then.as_ref()).is_some(), "no DDL: kept");
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            cache.fresh(after_ddl.as_ref()).is_none(),
            "a 1 ms read: read again"
        );
        cache.store(Duration::from_secs(3), then, &read);
        assert!(
            cache.fresh(after_ddl.as_ref()).is_some(),
            "a 3 s read 0 s ago: kept for 5 minutes"
        );
    }

    /// performance_schema's summaries are read up to 20,000 InnoDB tables and 2,000 open
    /// table handles (a full `table_open_cache`, at most one a table); above, PD706 is told why
    /// its counts are missing.
    #[test]
    fn performance_schema_is_read_up_to_its_table_and_handle_limits() {
        assert!(pfs_plan(true, 20_000, Some(2_000)).0);
        let (read, why) = pfs_plan(true, 100_000, Some(2_000));
        assert!(!read);
        assert!(
            why.starts_with("not read: 100000 InnoDB tables, above the 20000"),
            "{why}"
        );
        // A raised cache: as many handles as tables, up to the cache.
        assert!(pfs_plan(true, 1_500, Some(100_000)).0);
        let (read, why) = pfs_plan(true, 10_000, Some(4_000));
        assert!(!read);
        assert!(
            why.starts_with(
                "not read: up to 4000 open table handles (table_open_cache 4000, 10000 InnoDB tables), above the 2000"
            ),
            "{why}"
        );
        // An unread cache is taken as large as the tables.
        assert!(pfs_plan(true, 2_000, None).0);
        let (read, why) = pfs_plan(true, 2_001, None);
        assert!(
            !read && why.contains("(table_open_cache unread, 2001 InnoDB"),
            "{why}"
        );
        let (read, why) = pfs_plan(false, 10, Some(2_000));
        assert!(
            !read && why.starts_with("performance_schema = OFF"),
            "{why}"
        );
    }
}
