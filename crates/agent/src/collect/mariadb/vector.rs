//! Vector indexes and the raw facts about their size. Bounded: statements scale with the
//! number of vector indexes (capped at [`MAX_INDEXES`]), never with the number of tables.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use powerdiag_rules::{DbError, DbErrorKind, Gathered, StatusVar, Var, VectorIndex};

use super::due::still_fresh;
use super::part::{Ctx, Part, PartFuture};
use super::server::{ChangeMark, GRANT_CHANGES};
use super::session::{Session, TextRow, col, col_u64, ident, sql_str, tcol, tcol_u64, text_rows};
use crate::collect::CollectError;
use crate::collect::collector::{Descriptor, Requires};

/// Most vector indexes described in detail.
pub(crate) const MAX_INDEXES: usize = 64;

/// InnoDB page size assumed when `@@innodb_page_size` is unknown.
const DEFAULT_PAGE: u64 = 16384;

/// What discovery found, and what limited it.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    pub(crate) indexes: Vec<VectorIndex>,
    pub(crate) notes: Vec<String>,
    /// How the indexes were listed (`None`: not listed).
    pub(crate) listing: Option<Listing>,
}

/// The counters that move when a table or index is created, altered, renamed or dropped
/// ([`DDL_CHANGES`], counted for every session, replication's applier included) or a privilege
/// is granted or revoked ([`GRANT_CHANGES`]). The list of vector indexes and their
/// definitions change only when one of them does or the server restarts, and what the agent's
/// user may see of them only with a grant, so the agent reads the dictionary and the
/// definitions again only then ([`ChangeMark`]).
pub(crate) const SCHEMA_CHANGES: [StatusVar; DDL_CHANGES.len() + GRANT_CHANGES.len()] = {
    let mut all = [StatusVar::ComCreateTable; DDL_CHANGES.len() + GRANT_CHANGES.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < DDL_CHANGES.len() {
            DDL_CHANGES[i]
        } else {
            GRANT_CHANGES[i - DDL_CHANGES.len()]
        };
        i += 1;
    }
    all
};

/// The statements that create, alter, rename or drop a table or an index.
const DDL_CHANGES: [StatusVar; 7] = [
    StatusVar::ComCreateTable,
    StatusVar::ComAlterTable,
    StatusVar::ComDropTable,
    StatusVar::ComRenameTable,
    StatusVar::ComCreateIndex,
    StatusVar::ComDropIndex,
    StatusVar::ComDropDb,
];

/// How the vector indexes were listed: what a refresh reads again while no schema changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Listing {
    /// `INFORMATION_SCHEMA.VECTOR_INDEXES` (names, dimensions and sizes in one view).
    View,
    /// The hidden graph tables InnoDB's dictionary listed; their sizes are read again.
    Hidden(Vec<String>),
    /// `INFORMATION_SCHEMA.STATISTICS` without the PROCESS privilege: the indexes' names (all
    /// of them, before [`MAX_INDEXES`]), kept as the list itself (it opens every table the
    /// user may see).
    Statistics(Vec<VectorIndex>),
}

/// An earlier discovery on the same server run with no schema change since (the agent, see
/// [`SCHEMA_CHANGES`]): how it listed, and its indexes with their definitions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known<'a> {
    pub(crate) listing: &'a Listing,
    pub(crate) indexes: &'a [VectorIndex],
}

/// Lists vector indexes with their sizes.
///
/// 1. `INFORMATION_SCHEMA.VECTOR_INDEXES` where the server has it (MariaDB 13.1+).
/// 2. Else the hidden `<table>#i#NN` tables from `INNODB_SYS_TABLES` (needs PROCESS), sized by
///    their persistent statistics (`mysql.innodb_table_stats`, by primary key), and only those
///    it does not size by `INNODB_SYS_TABLESTATS`.
/// 3. Without PROCESS, `INFORMATION_SCHEMA.STATISTICS` filtered on `INDEX_TYPE='VECTOR'` (only
///    tables the user has privileges on) and the base tables' row estimates.
///
/// Then each base table's index definition and row estimate ([`define`]) by exact-name
/// lookups; on a refresh, the row estimates alone ([`base_rows`]).
///
/// `known`: an earlier discovery, when no schema changed since. Its listing is not read again
/// (the dictionary or the view's existence), only the sizes; its definitions (column,
/// dimensions, `M`, distance: they change only with a schema change) are kept, so a refresh
/// sends the sizes and the row estimates, two statements, where a full discovery sends
/// 4 + one `SHOW CREATE TABLE` per vector table (measured at 10,000 tables with 4 vector
/// indexes, back to back: the definitions' join, row estimates included, 1.04 ms of server
/// CPU, the row estimates alone 0.23 ms). With a hidden list that is empty, no statement at
/// all.
pub(crate) async fn discover(
    s: &mut Session,
    page_size: Option<u64>,
    known: Option<Known<'_>>,
    no_dictionary: Option<NoDictionary<'_>>,
) -> Result<Discovery, DbError> {
    let page = page_size.unwrap_or(DEFAULT_PAGE);
    let mut d = Discovery::default();
    let listing = match known {
        Some(k) => k.listing.clone(),
        None if has_view(s).await? => Listing::View,
        None => match s.query(HIDDEN_LIST_SQL).await {
            Ok(rows) => {
                Listing::Hidden(text_rows(&rows).iter().filter_map(|r| tcol(r, 0)).collect())
            }
            Err(e) if e.kind == DbErrorKind::MissingPrivilege => {
                Listing::Statistics(list_by_statistics(s, &e.message).await?)
            }
            Err(e) => return Err(e),
        },
    };
    match &listing {
        Listing::View => {
            let rows = s.query(VIEW_SQL).await?;
            d.indexes = parse_vector_indexes_view(&text_rows(&rows));
        }
        Listing::Hidden(names) if names.is_empty() => {}
        Listing::Hidden(names) => d.indexes = size_hidden(s, names, page, no_dictionary).await?,
        Listing::Statistics(names) => {
            d.indexes = names.clone();
            d.notes.push(format!(
                "vector index sizes need the PROCESS privilege (GRANT PROCESS ON *.* TO {}); using the base tables' row estimates",
                s.account()
            ));
        }
    }
    d.listing = Some(listing);
    if d.indexes.len() > MAX_INDEXES {
        d.notes.push(format!(
            "{} vector indexes found; described the first {MAX_INDEXES}",
            d.indexes.len()
        ));
        d.indexes.truncate(MAX_INDEXES);
    }
    if d.indexes.is_empty() {
        return Ok(d);
    }
    let undefined = match known {
        Some(k) => keep_definitions(&mut d.indexes, k.indexes),
        None => tables_of(d.indexes.iter()),
    };
    if !undefined.is_empty() {
        define(s, &mut d.indexes, &undefined).await?;
    }
    base_rows(s, &mut d.indexes, &undefined).await?;
    name_unnamed(&mut d.indexes);
    Ok(d)
}

async fn has_view(s: &mut Session) -> Result<bool, DbError> {
    Ok(!s
        .query("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA='information_schema' AND TABLE_NAME='VECTOR_INDEXES'")
        .await?
        .is_empty())
}

const VIEW_SQL: &str = "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, VECTOR_DIMENSIONS, INDEX_SIZE, TOTAL_NODES, MEMORY_SIZE, CACHE_OVERFLOWS FROM information_schema.VECTOR_INDEXES";

/// Above the dictionary bound (doctor's `--dictionary-max-tables`; the agent's 20,000 tables):
/// the hidden tables the persistent statistics do not size
/// are not looked up in InnoDB's dictionary (`INNODB_SYS_TABLESTATS` and `_TABLESPACES` cost
/// ~0.1 s and more of server CPU each at 100,000 tables, whatever the `WHERE`); their files'
/// sizes stand in when the graph tables were listed from the data directory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoDictionary<'a> {
    /// The graph tables' file sizes by dictionary name (`datadir::Tablespaces`).
    pub(crate) file_bytes: Option<&'a [(String, u64)]>,
}

/// The hidden tables the persistent statistics did not size, above the dictionary bound.
pub(crate) fn size_without_dictionary(
    lacking: &[String],
    page: u64,
    nd: NoDictionary<'_>,
) -> Vec<VectorIndex> {
    const WHY: &str = "mysql.innodb_table_stats has no pages for it yet, and above the dictionary bound (doctor's --dictionary-max-tables) InnoDB's dictionary is not read";
    parse_hidden_tables(&hidden_rows(lacking, &[]), page)
        .into_iter()
        .map(|h| {
            let mut idx = h.index;
            let file = nd.file_bytes.and_then(|files| {
                let name = idx.hidden_table.as_deref()?;
                files.iter().find(|(n, _)| n == name).map(|(_, b)| *b)
            });
            idx.hidden_table_bytes = file;
            idx.size_source = Some(match file {
                Some(_) => format!(
                    "sized from its tablespace file in the data directory (an upper bound): {WHY}"
                ),
                None => format!("not sized: {WHY}"),
            });
            idx
        })
        .collect()
}

/// Sizes the hidden tables `names`: the persistent statistics first, by primary key (their
/// cost does not grow with the tables on the server, and where they exist they are the
/// figures InnoDB holds in memory too); the in-memory statistics and the file allocation only
/// for tables those do not size — or, above the dictionary bound, the files ([`NoDictionary`]).
async fn size_hidden(
    s: &mut Session,
    names: &[String],
    page: u64,
    no_dictionary: Option<NoDictionary<'_>>,
) -> Result<Vec<VectorIndex>, DbError> {
    let persistent = s.query(&persistent_sql(names)).await.map(|r| text_rows(&r));
    let (mut found, lacking) = sized_by_persistent(names, persistent.as_deref().ok(), page);
    if let Some(nd) = no_dictionary.filter(|_| !lacking.is_empty()) {
        found.extend(size_without_dictionary(&lacking, page, nd));
        found.sort_by(|a, b| a.hidden_table.cmp(&b.hidden_table));
    } else if !lacking.is_empty() {
        let stats = text_rows(&s.query(HIDDEN_STATS_SQL).await?);
        let mut hidden = parse_hidden_tables(&hidden_rows(&lacking, &stats), page);
        // The file allocation, the last resort: INNODB_SYS_TABLESPACES stats every tablespace
        // file, so it is read only when nothing better sized a table.
        if hidden.iter().any(|h| !h.loaded)
            && let Ok(rows) = s.query(HIDDEN_ALLOCATED_SQL).await
        {
            set_allocated(&mut hidden, &text_rows(&rows));
        }
        let unread = persistent.as_ref().err().map(|e| e.message.as_str());
        found.extend(resolve_sizes(hidden, unread));
        found.sort_by(|a, b| a.hidden_table.cmp(&b.hidden_table));
    }
    Ok(found)
}

/// Without PROCESS: the vector indexes of the tables the user has privileges on.
/// `denied`: why the dictionary could not be listed.
async fn list_by_statistics(s: &mut Session, denied: &str) -> Result<Vec<VectorIndex>, DbError> {
    let rows = s
        .query("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS WHERE INDEX_TYPE='VECTOR'")
        .await?;
    let indexes: Vec<VectorIndex> = rows
        .iter()
        .filter_map(|r| {
            Some(VectorIndex {
                schema: col(r, 0)?,
                table: col(r, 1)?,
                index: col(r, 2)?,
                ..Default::default()
            })
        })
        .collect();
    if indexes.is_empty() {
        // Without PROCESS and table privileges the user sees no index at all: that is not
        // "no vector indexes".
        return Err(DbError {
            kind: DbErrorKind::MissingPrivilege,
            message: format!(
                "vector indexes cannot be listed without the PROCESS privilege ({denied})"
            ),
            hint: format!("GRANT PROCESS ON *.* TO {};", s.account()),
        });
    }
    Ok(indexes)
}

/// Hidden MHNSW tables are named `<table>#i#<key number>`; InnoDB spells names `db/table` with
/// special characters encoded as `@XXXX`.
///
/// The dictionary reads cost the server per table on it (measured at 10,000 file-per-table
/// tables, mariadbd CPU per statement, tests/harness/many-tables.sh): the dictionary's table
/// names 15–17 ms; `INNODB_SYS_TABLESTATS` 90–124 ms (it loads every table's dictionary
/// entry); `INNODB_SYS_TABLESPACES` ~55 ms (it stats every tablespace file). One statement
/// joining all three cost ~320 ms. So only the names are always read; the sizes come from
/// the persistent statistics by primary key ([`persistent_sql`], well under 1 ms), and the
/// two expensive reads run only for hidden tables those do not size.
const HIDDEN_LIST_SQL: &str =
    "SELECT NAME FROM information_schema.INNODB_SYS_TABLES WHERE NAME LIKE '%#i#%'";
/// The hidden tables InnoDB keeps persistent statistics of (doctor above its dictionary bound:
/// ~35 ms of server CPU at 100,000 tables against ~0.23 s for [`HIDDEN_LIST_SQL`]; a graph
/// table without persistent statistics is not listed).
const STATS_LIST_SQL: &str = "SELECT CONCAT(database_name, '/', table_name) \
     FROM mysql.innodb_table_stats WHERE table_name LIKE '%#i#%'";
/// The in-memory statistics of the hidden tables (read only when there are some).
const HIDDEN_STATS_SQL: &str = "SELECT NAME, NUM_ROWS, CLUST_INDEX_SIZE \
     FROM information_schema.INNODB_SYS_TABLESTATS WHERE NAME LIKE '%#i#%'";
/// The hidden tables' file allocation (read only when no statistics size one of them).
const HIDDEN_ALLOCATED_SQL: &str = "SELECT NAME, ALLOCATED_SIZE \
     FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME LIKE '%#i#%'";

/// Above the dictionary bound, with the server's data directory on this host: the graph
/// tables from its files (no statement; [`STATS_LIST_SQL`] costs ~35 ms of server CPU at
/// 100,000 tables). `None` (a note says why when listing failed) sends that statement instead.
async fn bounded_listing(ctx: &mut Ctx<'_>) -> Option<Vec<(String, u64)>> {
    match super::datadir::list_local(ctx.facts, false, ctx.s.timeout()).await? {
        Ok(t) => Some(t.graph_tables),
        Err(why) => {
            ctx.facts.notes.push(format!(
                "vector indexes listed by the server: its data directory could not be listed ({why})"
            ));
            None
        }
    }
}

/// Above the dictionary bound: the graph tables from the data directory's files on this host,
/// else from the persistent statistics ([`STATS_LIST_SQL`]), described without a dictionary
/// scan ([`NoDictionary`]); `kept`: the agent's earlier listing and indexes while no schema
/// changed since — their definitions are reused, and on this host only their files' sizes are
/// read (one `lstat` each, not a listing of every table: ~0.26 s of the agent's CPU at 100,000
/// tables).
async fn bounded_discover(
    ctx: &mut Ctx<'_>,
    page: Option<u64>,
    kept: Option<&(Listing, Vec<powerdiag_rules::VectorIndex>)>,
    max: u64,
    tables: u64,
) -> Result<Discovery, DbError> {
    let known_names = match kept {
        Some((Listing::Hidden(names), _)) => Some(names.clone()),
        _ => None,
    };
    let resized = match known_names {
        Some(names) => super::datadir::sizes_local(ctx.facts, names)
            .await
            .and_then(Result::ok),
        None => None,
    };
    let (files, how) = match resized {
        Some(files) => (
            Some(files),
            "as before, their sizes from the known graph tables' files in the server's data directory on this host (no table created, altered or dropped since it listed them)",
        ),
        None => (
            bounded_listing(ctx).await,
            "from the graph tables' files (<table>#i#<nn>.ibd) in the server's data directory on this host",
        ),
    };
    let kept = kept.map_or(&[][..], |(_, i)| i.as_slice());
    let (names, how) = match &files {
        Some(files) => (files.iter().map(|(n, _)| n.clone()).collect(), how),
        None => (
            text_rows(&ctx.s.query(STATS_LIST_SQL).await?)
                .iter()
                .filter_map(|r| tcol(r, 0))
                .collect(),
            "from InnoDB's persistent statistics (mysql.innodb_table_stats; a graph table without them is not seen)",
        ),
    };
    let listing = Listing::Hidden(names);
    let known = Known {
        listing: &listing,
        indexes: kept,
    };
    let nd = NoDictionary {
        file_bytes: files.as_deref(),
    };
    let mut d = discover(ctx.s, page, Some(known), Some(nd)).await?;
    d.notes.push(format!(
        "vector indexes listed {how}: the server has {tables} InnoDB tables, above the dictionary bound of {max} (doctor's --dictionary-max-tables), so InnoDB's dictionary was not scanned (about 0.23 s of server CPU at 100,000 tables, and seconds when it loads every table)"
    ));
    Ok(d)
}

/// The rows [`parse_hidden_tables`] reads — name, `NUM_ROWS`, `CLUST_INDEX_SIZE`, allocation
/// (filled later, see [`set_allocated`]) — from the list of names and the statistics rows.
pub(crate) fn hidden_rows(names: &[String], stats: &[TextRow]) -> Vec<TextRow> {
    names
        .iter()
        .map(|name| {
            let st = stats
                .iter()
                .find(|r| tcol(r, 0).as_deref() == Some(name.as_str()));
            let col = |i| st.and_then(|r| r.get(i).cloned().flatten());
            vec![Some(name.clone()), col(1), col(2), None]
        })
        .collect()
}

/// What `mysql.innodb_table_stats` (rows of [`persistent_sql`]) says of the hidden table
/// `name` when it sizes it: (rows, clustered-index pages > 0, age in seconds as the server
/// printed it).
fn persistent_size(rows: &[TextRow], name: &str) -> Option<(Option<u64>, u64, Option<String>)> {
    let (db, t) = name.split_once('/')?;
    let decoded = format!("{}/{}", decode_innodb_name(db), decode_innodb_name(t));
    let r = rows.iter().find(|r| tcol(r, 0) == Some(decoded.clone()))?;
    let pages = tcol_u64(r, 2).filter(|p| *p > 0)?;
    Some((tcol_u64(r, 1), pages, tcol(r, 3)))
}

/// Sets each hidden table's file allocation from [`HIDDEN_ALLOCATED_SQL`]'s rows.
pub(crate) fn set_allocated(hidden: &mut [Hidden], rows: &[TextRow]) {
    for h in hidden {
        let name = h.index.hidden_table.as_deref();
        h.allocated = rows
            .iter()
            .find(|r| tcol(r, 0).as_deref() == name)
            .and_then(|r| tcol_u64(r, 1))
            .filter(|a| *a > 0);
    }
}

/// A hidden graph table as `INNODB_SYS_TABLESTATS` shows it.
#[derive(Debug)]
pub(crate) struct Hidden {
    pub(crate) index: VectorIndex,
    /// `INNODB_SYS_TABLESPACES.ALLOCATED_SIZE`: the file's allocation, an upper bound.
    allocated: Option<u64>,
    /// False when the in-memory statistics are not loaded (`CLUST_INDEX_SIZE` 0 or NULL: a
    /// clustered index always has its root page): `NUM_ROWS` is then 0, not a count.
    loaded: bool,
}

pub(crate) fn parse_hidden_tables(rows: &[TextRow], page: u64) -> Vec<Hidden> {
    let mut out = Vec::new();
    for r in rows {
        let Some(name) = tcol(r, 0) else { continue };
        let Some((schema, table, _key)) = split_hidden_name(&name) else {
            continue;
        };
        let clust_pages = tcol_u64(r, 2).filter(|p| *p > 0);
        let loaded = clust_pages.is_some();
        let rows_n = tcol_u64(r, 1).filter(|_| loaded);
        out.push(Hidden {
            index: VectorIndex {
                schema,
                table,
                rows: rows_n,
                rows_source: rows_n
                    .map(|_| "innodb_sys_tablestats (hidden graph table)".to_owned()),
                hidden_table: Some(name),
                hidden_table_bytes: clust_pages.map(|p| p.saturating_mul(page)),
                ..Default::default()
            },
            allocated: tcol_u64(r, 3).filter(|a| *a > 0),
            loaded,
        });
    }
    out
}

/// The persistent statistics (`mysql.innodb_table_stats`) of the hidden tables `names` (rows of
/// [`HIDDEN_LIST_SQL`], in the dictionary's file-name encoding: `we@0023ird` is the table
/// `we#ird`, which the statistics name decoded), looked up by primary key: the statement grows with the number of
/// vector indexes, never with the tables. The age is computed by the server (its clock and
/// time zone). With persistent statistics (InnoDB's default) the in-memory figures are loaded
/// from and recalculated into these rows: measured on 11.8, a 5,000-row index read 4,907 rows
/// and 97 pages in both. Only `NUM_ROWS` moves in memory between recalculations, and the base
/// table's row estimate (read after, see [`define`] and [`base_rows`]) covers that.
pub(crate) fn persistent_sql(names: &[String]) -> String {
    let keys: Vec<String> = names
        .iter()
        .filter_map(|n| {
            let (db, t) = n.split_once('/')?;
            Some(format!(
                "(database_name = {} AND table_name = {})",
                sql_str(&decode_innodb_name(db)),
                sql_str(&decode_innodb_name(t))
            ))
        })
        .collect();
    let cond = if keys.is_empty() {
        "FALSE".to_owned()
    } else {
        keys.join(" OR ")
    };
    // FORCE INDEX: the optimizer judges from mysql.innodb_table_stats' own statistics, which
    // lag while tables are created (730 rows estimated against 100,000); it then read 103 keys
    // by a full scan, 240 ms of server CPU against 9 ms by the primary key (measured, 11.8).
    format!(
        "SELECT CONCAT(database_name, '/', table_name), n_rows, clustered_index_size, \
         TIMESTAMPDIFF(SECOND, last_update, NOW()) FROM mysql.innodb_table_stats \
         FORCE INDEX (PRIMARY) WHERE {cond}"
    )
}

/// The hidden tables the persistent statistics size, as vector indexes, and the names
/// (from [`HIDDEN_LIST_SQL`]) they do not (no row, or 0 pages: never computed).
pub(crate) fn sized_by_persistent(
    names: &[String],
    persistent: Option<&[TextRow]>,
    page: u64,
) -> (Vec<VectorIndex>, Vec<String>) {
    let mut found = Vec::new();
    let mut lacking = Vec::new();
    for name in names {
        let Some((schema, table, _key)) = split_hidden_name(name) else {
            continue;
        };
        match persistent.and_then(|rows| persistent_size(rows, name)) {
            Some((rows, pages, age)) => found.push(VectorIndex {
                schema,
                table,
                rows,
                rows_source: rows.map(|_| "mysql.innodb_table_stats (hidden graph table)".into()),
                hidden_table: Some(name.clone()),
                hidden_table_bytes: Some(pages.saturating_mul(page)),
                size_source: Some(format!(
                    "sized from InnoDB's persistent statistics (mysql.innodb_table_stats), updated {} ago",
                    age_text(age.as_deref())
                )),
                ..Default::default()
            }),
            None => lacking.push(name.clone()),
        }
    }
    (found, lacking)
}

fn age_text(age: Option<&str>) -> String {
    age.and_then(|a| a.parse::<i64>().ok())
        .map(|a| humanize_secs(a.max(0)))
        .unwrap_or_else(|| "at an unknown time".into())
}

/// Sizes for hidden tables the persistent statistics did not size ([`sized_by_persistent`]):
/// the in-memory statistics when loaded, else the file allocation (an upper bound), else
/// unknown — never 0 bytes. `persistent_unread` says why the persistent statistics could not
/// be read, when they could not.
pub(crate) fn resolve_sizes(
    hidden: Vec<Hidden>,
    persistent_unread: Option<&str>,
) -> Vec<VectorIndex> {
    const UNLOADED: &str = "InnoDB's in-memory statistics of the hidden graph table were not loaded (NUM_ROWS and CLUST_INDEX_SIZE read 0: the table was evicted from the dictionary cache)";
    hidden
        .into_iter()
        .map(|h| {
            let mut idx = h.index;
            if h.loaded {
                return idx;
            }
            if let Some(allocated) = h.allocated {
                idx.hidden_table_bytes = Some(allocated);
                idx.size_source = Some(format!(
                    "{UNLOADED}; sized from the file allocation (INNODB_SYS_TABLESPACES.ALLOCATED_SIZE, an upper bound){}",
                    match persistent_unread {
                        Some(why) => format!(": mysql.innodb_table_stats could not be read ({why})"),
                        None => ": mysql.innodb_table_stats has no row for it".into(),
                    }
                ));
            } else {
                idx.size_source = Some(format!("{UNLOADED}; no other source of its size"));
            }
            idx
        })
        .collect()
}

fn humanize_secs(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// `db/t#i#01` → (`db`, `t`, 1).
pub(crate) fn split_hidden_name(name: &str) -> Option<(String, String, u32)> {
    let (db, rest) = name.split_once('/')?;
    let (table, key) = rest.rsplit_once("#i#")?;
    let key = key.parse().ok()?;
    Some((decode_innodb_name(db), decode_innodb_name(table), key))
}

/// Decodes InnoDB's file-name encoding (`my@002ddb` → `my-db`).
pub(crate) fn decode_innodb_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('@') {
        out.push_str(&rest[..i]);
        let hex = rest.get(i + 1..i + 5);
        match hex
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
        {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 5..];
            }
            None => {
                out.push('@');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn parse_vector_indexes_view(rows: &[TextRow]) -> Vec<VectorIndex> {
    rows.iter()
        .filter_map(|r| {
            Some(VectorIndex {
                schema: tcol(r, 0)?,
                table: tcol(r, 1)?,
                index: tcol(r, 2)?,
                dimensions: tcol_u64(r, 3).and_then(|d| u32::try_from(d).ok()),
                hidden_table_bytes: tcol_u64(r, 4),
                rows: tcol_u64(r, 5),
                rows_source: Some("information_schema.VECTOR_INDEXES.TOTAL_NODES".into()),
                cache_memory_bytes: tcol_u64(r, 6),
                cache_overflows: tcol_u64(r, 7),
                ..Default::default()
            })
        })
        .collect()
}

/// A base table: (schema, table).
type TableKey = (String, String);

fn tables_of<'a>(indexes: impl Iterator<Item = &'a VectorIndex>) -> Vec<TableKey> {
    let mut tables: Vec<TableKey> = indexes
        .map(|i| (i.schema.clone(), i.table.clone()))
        .collect();
    tables.sort();
    tables.dedup();
    tables
}

/// Copies each index's definition (name, column, dimensions, `M`, distance) from the same
/// index in `known`: the same hidden table, or the same schema, table and index name. Returns
/// the tables with an index `known` does not have, which [`define`] reads.
pub(crate) fn keep_definitions(
    indexes: &mut [VectorIndex],
    known: &[VectorIndex],
) -> Vec<TableKey> {
    let mut undefined = Vec::new();
    for idx in indexes.iter_mut() {
        let same = known.iter().find(|k| {
            k.schema == idx.schema
                && k.table == idx.table
                && match (&idx.hidden_table, &k.hidden_table) {
                    (Some(a), Some(b)) => a == b,
                    _ => !idx.index.is_empty() && idx.index == k.index,
                }
        });
        let Some(k) = same else {
            undefined.push((idx.schema.clone(), idx.table.clone()));
            continue;
        };
        if idx.index.is_empty() {
            idx.index = k.index.clone();
        }
        idx.column = k.column.clone();
        idx.dimensions = idx.dimensions.or(k.dimensions);
        idx.m = k.m;
        idx.distance = k.distance.clone();
    }
    undefined.sort();
    undefined.dedup();
    undefined
}

/// Fills the index name, column, dimensions and the base table's row estimate of the indexes
/// on `tables` with one statement of exact-name lookups (INFORMATION_SCHEMA opens only the
/// named tables), and `M` and the distance from `SHOW CREATE TABLE` of each.
async fn define(
    s: &mut Session,
    indexes: &mut [VectorIndex],
    tables: &[TableKey],
) -> Result<(), DbError> {
    let parts: Vec<String> = tables
        .iter()
        .map(|(db, t)| {
            let (db, t) = (sql_str(db), sql_str(t));
            format!(
                "SELECT s.TABLE_SCHEMA, s.TABLE_NAME, s.INDEX_NAME, s.COLUMN_NAME, c.COLUMN_TYPE, t.TABLE_ROWS \
                 FROM information_schema.STATISTICS s \
                 JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA={db} AND c.TABLE_NAME={t} AND c.COLUMN_NAME=s.COLUMN_NAME \
                 JOIN information_schema.TABLES t ON t.TABLE_SCHEMA={db} AND t.TABLE_NAME={t} \
                 WHERE s.TABLE_SCHEMA={db} AND s.TABLE_NAME={t} AND s.INDEX_TYPE='VECTOR'"
            )
        })
        .collect();
    let rows = s.query(&parts.join(" UNION ALL ")).await?;
    let mut by_table: BTreeMap<TableKey, Vec<IndexDef>> = BTreeMap::new();
    for r in &rows {
        let (Some(db), Some(t), Some(ix), Some(column)) =
            (col(r, 0), col(r, 1), col(r, 2), col(r, 3))
        else {
            continue;
        };
        let dims = col(r, 4).as_deref().and_then(parse_vector_type);
        by_table.entry((db, t)).or_default().push(IndexDef {
            name: ix,
            column,
            dims,
            table_rows: col_u64(r, 5),
        });
    }
    for idx in indexes.iter_mut() {
        let Some(defs) = by_table.get(&(idx.schema.clone(), idx.table.clone())) else {
            continue;
        };
        // One vector index per table in MariaDB 11.x; match by name when the view gave one.
        let def = defs
            .iter()
            .find(|d| d.name == idx.index)
            .or_else(|| defs.first());
        if let Some(def) = def {
            if idx.index.is_empty() {
                idx.index = def.name.clone();
            }
            idx.column = Some(def.column.clone());
            idx.dimensions = idx.dimensions.or(def.dims);
            if let Some(base) = def.table_rows {
                merge_base_rows(idx, base);
            }
        }
    }
    for (db, t) in tables {
        let Ok(rows) = s
            .query(&format!("SHOW CREATE TABLE {}.{}", ident(db), ident(t)))
            .await
        else {
            continue;
        };
        let Some(ddl) = rows.first().and_then(|r| col(r, 1)) else {
            continue;
        };
        for idx in indexes
            .iter_mut()
            .filter(|i| &i.schema == db && &i.table == t)
        {
            let (m, distance) = parse_index_options(&ddl, &idx.index);
            idx.m = m;
            idx.distance = distance;
        }
    }
    Ok(())
}

/// The base tables' row estimates (`information_schema.TABLES.TABLE_ROWS`, InnoDB's in-memory
/// count, which follows the table's DML), one statement of exact-name lookups, read at every
/// refresh: the graph has a node per base-table row, and the hidden table's own statistics can
/// be missing (not loaded) or stale. `defined`: tables [`define`] just read (with their
/// estimate); no statement when that is all of them.
async fn base_rows(
    s: &mut Session,
    indexes: &mut [VectorIndex],
    defined: &[TableKey],
) -> Result<(), DbError> {
    let parts: Vec<String> = tables_of(indexes.iter())
        .iter()
        .filter(|t| !defined.contains(t))
        .map(|(db, t)| {
            format!(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA={} AND TABLE_NAME={}",
                sql_str(db),
                sql_str(t)
            )
        })
        .collect();
    if parts.is_empty() {
        return Ok(());
    }
    let rows = s.query(&parts.join(" UNION ALL ")).await?;
    let estimates: BTreeMap<TableKey, u64> = rows
        .iter()
        .filter_map(|r| Some(((col(r, 0)?, col(r, 1)?), col_u64(r, 2)?)))
        .collect();
    for idx in indexes.iter_mut() {
        if let Some(base) = estimates.get(&(idx.schema.clone(), idx.table.clone())) {
            merge_base_rows(idx, *base);
        }
    }
    Ok(())
}

/// The larger count wins: MariaDB 11.8 recalculates the hidden table's statistics rarely
/// (measured: 14 rows and 1 page persisted for a 5,000-row index after ANALYZE TABLE of the
/// base table), while the base table's estimate follows its own DML. A smaller base estimate
/// never lowers the hidden table's, and the view's exact node count is kept.
pub(crate) fn merge_base_rows(idx: &mut VectorIndex, base: u64) {
    let from_view = idx
        .rows_source
        .as_deref()
        .is_some_and(|s| s.starts_with("information_schema.VECTOR_INDEXES"));
    match idx.rows {
        None => {
            idx.rows = Some(base);
            idx.rows_source =
                Some("information_schema.TABLES.TABLE_ROWS of the base table (estimate)".into());
        }
        Some(hidden) if base > hidden && !from_view => {
            idx.rows = Some(base);
            idx.rows_source = Some(format!(
                "information_schema.TABLES.TABLE_ROWS of the base table (estimate); the hidden graph table's statistics say {hidden} rows (stale)"
            ));
        }
        Some(_) => {}
    }
}

/// No privilege on the base table: the hidden table's key number is all there is to name it.
fn name_unnamed(indexes: &mut [VectorIndex]) {
    for idx in indexes.iter_mut().filter(|i| i.index.is_empty()) {
        idx.index = idx
            .hidden_table
            .as_deref()
            .and_then(|h| h.rsplit_once("#i#"))
            .map(|(_, k)| format!("key #{k}"))
            .unwrap_or_else(|| "?".into());
    }
}

struct IndexDef {
    name: String,
    column: String,
    dims: Option<u32>,
    table_rows: Option<u64>,
}

/// `vector(768)` → 768.
pub(crate) fn parse_vector_type(t: &str) -> Option<u32> {
    let t = t.trim().to_ascii_lowercase();
    t.strip_prefix("vector(")?
        .strip_suffix(')')?
        .trim()
        .parse()
        .ok()
}

/// Reads ``VECTOR KEY `ix` (`e`) `M`=8 `DISTANCE`=cosine`` from `SHOW CREATE TABLE`. Options the
/// DDL does not show are the server defaults (`mhnsw_default_m`, `mhnsw_default_distance`).
pub(crate) fn parse_index_options(ddl: &str, index: &str) -> (Option<u32>, Option<String>) {
    let needle = format!("VECTOR KEY {} ", ident(index));
    let Some(line) = ddl.lines().map(str::trim).find(|l| l.starts_with(&needle)) else {
        return (None, None);
    };
    let mut m = None;
    let mut distance = None;
    for token in line.trim_end_matches(',').split_whitespace() {
        let Some((k, v)) = token.split_once('=') else {
            continue;
        };
        let v = v.trim_matches(|c| c == '\'' || c == '`' || c == ',');
        match k.trim_matches('`').to_ascii_uppercase().as_str() {
            "M" => m = v.parse().ok(),
            "DISTANCE" => distance = Some(v.to_ascii_lowercase()),
            _ => {}
        }
    }
    (m, distance)
}

/// The `mariadb_vector_indexes` collector: discovery, or the agent's recent list. A server
/// without vector indexes (before 11.7) reports no run.
pub(super) struct VectorIndexes<'o> {
    /// The agent's cache; `None` lists and sizes the indexes every time (doctor).
    pub(super) cache: Option<&'o VectorCache>,
    /// Doctor's bound on the tables it scans the dictionary for.
    pub(super) bound: Option<super::DictionaryBound>,
}

/// When the indexes were listed, what was found, the hidden tables listed (when InnoDB's
/// dictionary was read) and the server's schema-change counters then.
#[derive(Debug)]
struct CachedIndexes {
    at: Instant,
    indexes: Vec<powerdiag_rules::VectorIndex>,
    listing: Option<Listing>,
    mark: Option<ChangeMark>,
}

/// Vector indexes listed earlier, shared between samples. After `refresh` their sizes and row
/// estimates are read again; the list itself (InnoDB's dictionary, whose read costs the server
/// per table on it: 12–17 ms at 10,000 tables) and the indexes' definitions are read again only
/// when the server's schema-change or grant counters moved or it restarted (see
/// `ChangeMark`).
#[derive(Debug, Clone)]
pub struct VectorCache {
    pub refresh: Duration,
    last: std::sync::Arc<std::sync::Mutex<Option<CachedIndexes>>>,
}

impl VectorCache {
    pub fn new(refresh: Duration) -> VectorCache {
        VectorCache {
            refresh,
            last: Default::default(),
        }
    }

    fn fresh(&self) -> Option<Vec<powerdiag_rules::VectorIndex>> {
        let guard = self.last.lock().ok()?;
        let c = guard.as_ref()?;
        still_fresh(c.at, self.refresh).then(|| c.indexes.clone())
    }

    /// The last listing and its indexes, when no schema changed since (`now` is the server's
    /// mark at this sample).
    fn unchanged(
        &self,
        now: Option<&ChangeMark>,
    ) -> Option<(Listing, Vec<powerdiag_rules::VectorIndex>)> {
        let guard = self.last.lock().ok()?;
        let c = guard.as_ref()?;
        let (then, now) = (c.mark.as_ref()?, now?);
        if !then.unchanged_at(now) {
            return None;
        }
        Some((c.listing.clone()?, c.indexes.clone()))
    }

    fn store(
        &self,
        v: &[powerdiag_rules::VectorIndex],
        listing: Option<Listing>,
        mark: Option<ChangeMark>,
    ) {
        if let Ok(mut guard) = self.last.lock() {
            *guard = Some(CachedIndexes {
                at: Instant::now(),
                indexes: v.to_vec(),
                listing,
                mark,
            });
        }
    }
}

/// The `mariadb_vector_indexes` collector.
pub(super) const DESCRIPTOR: Descriptor = Descriptor {
    name: "mariadb_vector_indexes",
    help: "vector indexes: definitions, rows and the size of each graph",
    default_enabled: true,
    requires: Requires::Mariadb(11, 7),
};

/// Why the vector indexes are unknown, with the fix when there is one.
fn unavailable(e: &DbError) -> String {
    if e.hint.is_empty() {
        e.message.clone()
    } else {
        format!("{}; fix: {}", e.message, e.hint)
    }
}

impl Part for VectorIndexes<'_> {
    fn descriptor(&self) -> &'static Descriptor {
        &DESCRIPTOR
    }

    fn disabled(&self, facts: &mut powerdiag_rules::MariadbFacts, why: String) {
        facts.vector_indexes = Gathered::Unavailable(why);
    }

    fn collect<'a, 'b: 'a>(&'a self, ctx: &'a mut Ctx<'b>) -> PartFuture<'a> {
        Box::pin(async move {
            if !ctx.facts.version.has_vector_indexes() {
                return Err(CollectError::skipped(
                    "this server version has no vector indexes",
                ));
            }
            let page = ctx
                .facts
                .variables
                .get(Var::InnodbPageSize.name())
                .and_then(|p| p.parse().ok());
            let cache = self.cache;
            let mark = ChangeMark::of(&ctx.facts.status, &SCHEMA_CHANGES);
            // Above the dictionary bound (doctor's --dictionary-max-tables; the agent's default),
            // no dictionary scan: the graph tables from the data directory or the persistent
            // statistics.
            let bounded = self
                .bound
                .and_then(|b| Some((b.max_tables, b.exceeded(ctx.facts)?)));
            // The kept list while it is fresh is not stored again (that would restart its age,
            // and it would never be read again).
            let (discovered, store) = match cache.and_then(VectorCache::fresh) {
                Some(indexes) => (
                    Ok(Discovery {
                        indexes,
                        ..Default::default()
                    }),
                    false,
                ),
                None => {
                    let known = cache.and_then(|c| c.unchanged(mark.as_ref()));
                    let found = match bounded {
                        Some((max, n)) => bounded_discover(ctx, page, known.as_ref(), max, n).await,
                        None => {
                            let known = known
                                .as_ref()
                                .map(|(listing, indexes)| Known { listing, indexes });
                            discover(ctx.s, page, known, None).await
                        }
                    };
                    (found, true)
                }
            };
            match discovered {
                Ok(d) => {
                    if let Some(cache) = cache.filter(|_| store) {
                        cache.store(&d.indexes, d.listing, mark);
                    }
                    ctx.facts.notes.extend(d.notes);
                    ctx.facts.vector_indexes = Gathered::Available(d.indexes);
                    Ok(())
                }
                Err(e) => {
                    ctx.facts.vector_indexes = Gathered::Unavailable(unavailable(&e));
                    Err(CollectError::database(e))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names() {
        assert_eq!(
            split_hidden_name("x/t#i#01"),
            Some(("x".into(), "t".into(), 1))
        );
        assert_eq!(
            split_hidden_name("my@002ddb/we@0023ird#i#02"),
            Some(("my-db".into(), "we#ird".into(), 2))
        );
        assert_eq!(split_hidden_name("x/t"), None);
        assert_eq!(split_hidden_name("x/t#i#zz"), None);
        assert_eq!(decode_innodb_name("a@zzzzb@"), "a@zzzzb@");
    }

    fn row(cells: &[Option<&str>]) -> TextRow {
        cells.iter().map(|c| c.map(str::to_owned)).collect()
    }

    #[test]
    fn hidden_table_rows() {
        let rows = [
            row(&[
                Some("powerdiag_it/docs#i#01"),
                Some("17792"),
                Some("2276"),
                Some("46137344"),
            ]),
            row(&[Some("x/t#i#01"), None, None, Some("65536")]),
            row(&[Some("not-hidden"), Some("1"), Some("1"), None]),
            row(&[None]),
        ];
        let got = resolve_sizes(parse_hidden_tables(&rows, 16384), Some("denied"));
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].schema.as_str(), got[0].table.as_str()),
            ("powerdiag_it", "docs")
        );
        assert_eq!(got[0].rows, Some(17792));
        assert_eq!(got[0].hidden_table_bytes, Some(2276 * 16384));
        assert_eq!(got[0].size_source, None);
        assert_eq!(got[1].rows, None);
        assert_eq!(
            got[1].hidden_table_bytes,
            Some(65536),
            "falls back to the allocated size"
        );
        assert!(got[1].size_source.as_deref().unwrap().contains("denied"));
    }

    /// The three reads joined in Rust: names from the dictionary, statistics where the table
    /// has them (missing: not loaded), the allocation only when asked for.
    #[test]
    fn names_statistics_and_allocation_join_by_name() {
        let names = ["a/t#i#01".to_owned(), "b/u#i#02".to_owned()];
        let stats = [
            row(&[Some("b/u#i#02"), Some("500"), Some("7")]),
            row(&[Some("c/other"), Some("1"), Some("1")]),
        ];
        let rows = hidden_rows(&names, &stats);
        assert_eq!(rows[0], row(&[Some("a/t#i#01"), None, None, None]));
        assert_eq!(
            rows[1],
            row(&[Some("b/u#i#02"), Some("500"), Some("7"), None])
        );
        let mut hidden = parse_hidden_tables(&rows, 16384);
        assert_eq!(
            hidden.iter().map(|h| h.loaded).collect::<Vec<_>>(),
            [false, true]
        );
        let persistent = [row(&[Some("b/u#i#02"), Some("500"), Some("7"), Some("1")])];
        assert_eq!(persistent_size(&persistent, "a/t#i#01"), None);
        assert_eq!(
            persistent_size(&persistent, "b/u#i#02"),
            Some((Some(500), 7, Some("1".into())))
        );
        set_allocated(
            &mut hidden,
            &[
                row(&[Some("a/t#i#01"), Some("65536")]),
                row(&[Some("b/u#i#02"), Some("0")]),
            ],
        );
        assert_eq!(hidden[0].allocated, Some(65536));
        assert_eq!(hidden[1].allocated, None, "0 bytes allocated is unknown");
    }

    /// The dictionary is listed again after any schema change or a restart, and whenever the
    /// counters cannot be read.
    #[test]
    fn schema_marks() {
        let status = |uptime: &str, alter: &str| -> BTreeMap<String, String> {
            let mut m: BTreeMap<String, String> = SCHEMA_CHANGES
                .iter()
                .map(|v| (v.name().to_owned(), "3".to_owned()))
                .collect();
            m.insert("uptime".into(), uptime.into());
            m.insert("com_alter_table".into(), alter.into());
            m
        };
        let then = ChangeMark::of(&status("100", "7"), &SCHEMA_CHANGES).unwrap();
        assert!(then.unchanged_at(&ChangeMark::of(&status("400", "7"), &SCHEMA_CHANGES).unwrap()));
        assert!(!then.unchanged_at(&ChangeMark::of(&status("400", "8"), &SCHEMA_CHANGES).unwrap()));
        assert!(
            !then.unchanged_at(&ChangeMark::of(&status("50", "7"), &SCHEMA_CHANGES).unwrap()),
            "a restart"
        );
        assert!(
            !then.unchanged_at(&ChangeMark::of(&status("400", "0"), &SCHEMA_CHANGES).unwrap()),
            "FLUSH STATUS"
        );
        let mut missing = status("100", "7");
        missing.remove("com_drop_db");
        assert_eq!(ChangeMark::of(&missing, &SCHEMA_CHANGES), None);
        assert_eq!(ChangeMark::of(&status("100", "x"), &SCHEMA_CHANGES), None);
    }

    /// The persistent statistics size what they have a row with pages for, by primary key;
    /// the rest is left for the in-memory statistics.
    #[test]
    fn persistent_statistics_first() {
        // The dictionary's (and the files') names are encoded, the statistics' decoded.
        let names = [
            "a/t#i#01",
            "b@002dx/u'v#i#02",
            "c/w#i#01",
            "d/we@0023ird#i#01",
        ]
        .map(str::to_owned);
        let sql = persistent_sql(&names);
        assert!(
            sql.ends_with(
                "WHERE (database_name = 'a' AND table_name = 't#i#01') OR (database_name = 'b-x' AND table_name = 'u\\'v#i#02') OR (database_name = 'c' AND table_name = 'w#i#01') OR (database_name = 'd' AND table_name = 'we#ird#i#01')"
            ),
            "{sql}"
        );
        assert!(persistent_sql(&[]).ends_with("WHERE FALSE"));
        let persistent = [
            row(&[Some("a/t#i#01"), Some("4907"), Some("97"), Some("30")]),
            row(&[Some("b-x/u'v#i#02"), Some("0"), Some("0"), Some("5")]),
            row(&[Some("d/we#ird#i#01"), Some("12"), Some("1"), Some("5")]),
        ];
        let (found, lacking) = sized_by_persistent(&names, Some(&persistent), 16384);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[1].schema.as_str(), found[1].table.as_str()),
            ("d", "we#ird")
        );
        assert_eq!(
            (found[0].schema.as_str(), found[0].table.as_str()),
            ("a", "t")
        );
        assert_eq!(found[0].rows, Some(4907));
        assert_eq!(found[0].hidden_table_bytes, Some(97 * 16384));
        assert!(
            found[0]
                .size_source
                .as_deref()
                .unwrap()
                .contains("updated 30 s ago"),
            "{:?}",
            found[0].size_source
        );
        // 0 pages were never computed; no row at all: both left for INNODB_SYS_TABLESTATS.
        assert_eq!(lacking, [names[1].clone(), names[2].clone()]);
        let (found, lacking) = sized_by_persistent(&names, None, 16384);
        assert!(found.is_empty());
        assert_eq!(lacking.len(), 4);
    }

    /// Above doctor's bound, what the statistics do not size is sized by its file, or not at
    /// all — never by a dictionary scan.
    #[test]
    fn above_the_bound_the_files_size_what_the_statistics_do_not() {
        let lacking = ["shop/docs#i#01", "we@0023ird/v#i#02"].map(str::to_owned);
        let files = [("shop/docs#i#01".to_owned(), 98_304)];
        let out = size_without_dictionary(
            &lacking,
            16384,
            NoDictionary {
                file_bytes: Some(&files),
            },
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].table.as_str(), out[0].hidden_table_bytes),
            ("docs", Some(98_304))
        );
        assert!(
            out[0]
                .size_source
                .as_deref()
                .unwrap()
                .starts_with("sized from its tablespace file")
        );
        assert_eq!(
            (out[1].table.as_str(), out[1].hidden_table_bytes),
            ("v", None)
        );
        assert!(
            out[1]
                .size_source
                .as_deref()
                .unwrap()
                .starts_with("not sized: mysql.innodb_table_stats has no pages")
        );
    }

    /// Measured on 11.8: after 2,000 other tables were opened, the evicted hidden table read
    /// NUM_ROWS = 0 and CLUST_INDEX_SIZE = 0 for minutes while ALLOCATED_SIZE said 46 MB.
    /// 0 pages are unknown, never 0 bytes.
    #[test]
    fn unloaded_statistics_are_not_zero_bytes() {
        let rows = [row(&[
            Some("app/docs#i#01"),
            Some("0"),
            Some("0"),
            Some("46137344"),
        ])];
        let persistent = [row(&[
            Some("app/docs#i#01"),
            Some("20000"),
            Some("2276"),
            Some("300"),
        ])];
        // Its persistent statistics size it before the in-memory ones are read.
        let names = ["app/docs#i#01".to_owned()];
        let (got, lacking) = sized_by_persistent(&names, Some(&persistent), 16384);
        assert!(lacking.is_empty());
        assert_eq!(got[0].rows, Some(20000));
        assert_eq!(got[0].hidden_table_bytes, Some(2276 * 16384));
        let why = got[0].size_source.as_deref().unwrap();
        assert!(
            why.contains("(mysql.innodb_table_stats), updated 5 min ago"),
            "{why}"
        );
        // No persistent row: the allocation, said to be an upper bound.
        let got = resolve_sizes(parse_hidden_tables(&rows, 16384), None);
        assert_eq!(got[0].rows, None);
        assert_eq!(got[0].hidden_table_bytes, Some(46137344));
        assert!(
            got[0]
                .size_source
                .as_deref()
                .unwrap()
                .contains("upper bound")
        );
        // Nothing at all: unknown.
        let bare = [row(&[Some("app/docs#i#01"), Some("0"), Some("0"), None])];
        let got = resolve_sizes(parse_hidden_tables(&bare, 16384), None);
        assert_eq!((got[0].rows, got[0].hidden_table_bytes), (None, None));
        assert!(
            got[0]
                .size_source
                .as_deref()
                .unwrap()
                .contains("no other source")
        );
    }

    /// MariaDB 13.1's INFORMATION_SCHEMA.VECTOR_INDEXES, with the columns of its documentation.
    /// Not verified against a running 13.1 server (none is packaged for Debian 12).
    #[test]
    fn vector_indexes_view_rows() {
        let rows = [row(&[
            Some("app"),
            Some("docs"),
            Some("e"),
            Some("768"),
            Some("197132288"),
            Some("100000"),
            Some("16000000"),
            Some("4211"),
        ])];
        let got = parse_vector_indexes_view(&rows);
        assert_eq!(got[0].dimensions, Some(768));
        assert_eq!(got[0].rows, Some(100_000));
        assert_eq!(got[0].cache_overflows, Some(4211));
        assert_eq!(got[0].cache_memory_bytes, Some(16_000_000));
        assert!(parse_vector_indexes_view(&[row(&[Some("app"), None])]).is_empty());
    }

    #[test]
    fn ddl_options() {
        let ddl = "CREATE TABLE `t2` (\n  `e` vector(4) NOT NULL,\n  PRIMARY KEY (`id`),\n  VECTOR KEY `ix` (`e`) `M`=8 `DISTANCE`=cosine\n) ENGINE=InnoDB";
        assert_eq!(
            parse_index_options(ddl, "ix"),
            (Some(8), Some("cosine".into()))
        );
        let ddl = "  VECTOR KEY `e` (`e`)\n) ENGINE=InnoDB";
        assert_eq!(parse_index_options(ddl, "e"), (None, None));
        assert_eq!(parse_index_options(ddl, "other"), (None, None));
        assert_eq!(parse_vector_type("vector(768)"), Some(768));
        assert_eq!(parse_vector_type("int(11)"), None);
    }

    fn sized(schema: &str, table: &str, hidden: &str, rows: u64) -> VectorIndex {
        VectorIndex {
            schema: schema.into(),
            table: table.into(),
            rows: Some(rows),
            rows_source: Some("mysql.innodb_table_stats (hidden graph table)".into()),
            hidden_table: Some(hidden.into()),
            hidden_table_bytes: Some(65536),
            ..Default::default()
        }
    }

    /// A refresh with no schema change keeps each index's definition and reads its sizes;
    /// an index the earlier discovery did not have is defined again, alone.
    #[test]
    fn a_refresh_keeps_the_definitions_of_the_indexes_it_knows() {
        let known = vec![VectorIndex {
            index: "ix".into(),
            column: Some("e".into()),
            dimensions: Some(768),
            m: Some(8),
            distance: Some("cosine".into()),
            ..sized("app", "docs", "app/docs#i#01", 10)
        }];
        let mut now = vec![
            sized("app", "docs", "app/docs#i#01", 500),
            sized("app", "new", "app/new#i#01", 7),
        ];
        let undefined = keep_definitions(&mut now, &known);
        assert_eq!(undefined, vec![("app".to_owned(), "new".to_owned())]);
        assert_eq!(now[0].index, "ix");
        assert_eq!(now[0].column.as_deref(), Some("e"));
        assert_eq!(now[0].dimensions, Some(768));
        assert_eq!(
            (now[0].m, now[0].distance.as_deref()),
            (Some(8), Some("cosine"))
        );
        assert_eq!(now[0].rows, Some(500), "sizes are this read's");
        assert_eq!(now[1].column, None);
        assert!(now[1].index.is_empty());

        // The same table with another hidden table (the index was dropped and created again)
        // is not the same index.
        let mut rebuilt = vec![sized("app", "docs", "app/docs#i#02", 5)];
        assert_eq!(keep_definitions(&mut rebuilt, &known).len(), 1);
        assert_eq!(rebuilt[0].m, None);

        // Without hidden tables (the view, or names from STATISTICS), by index name.
        let named = |ix: &str| VectorIndex {
            schema: "app".into(),
            table: "docs".into(),
            index: ix.into(),
            ..Default::default()
        };
        let known = vec![VectorIndex {
            m: Some(16),
            ..named("ix")
        }];
        let mut now = vec![named("ix"), named("other")];
        assert_eq!(keep_definitions(&mut now, &known).len(), 1);
        assert_eq!((now[0].m, now[1].m), (Some(16), None));
    }

    #[test]
    fn the_base_tables_estimate_wins_only_when_larger() {
        let mut stale = sized("app", "docs", "app/docs#i#01", 14);
        merge_base_rows(&mut stale, 5000);
        assert_eq!(stale.rows, Some(5000));
        assert!(
            stale
                .rows_source
                .as_deref()
                .unwrap()
                .contains("say 14 rows (stale)")
        );

        let mut fresh = sized("app", "docs", "app/docs#i#01", 5000);
        merge_base_rows(&mut fresh, 4900);
        assert_eq!(
            fresh.rows,
            Some(5000),
            "a smaller estimate never lowers the count"
        );

        let mut no_size = VectorIndex::default();
        merge_base_rows(&mut no_size, 3);
        assert_eq!(no_size.rows, Some(3));
        assert!(
            no_size
                .rows_source
                .as_deref()
                .unwrap()
                .starts_with("information_schema.TABLES")
        );

        let mut view = VectorIndex {
            rows: Some(100),
            rows_source: Some("information_schema.VECTOR_INDEXES.TOTAL_NODES".into()),
            ..Default::default()
        };
        merge_base_rows(&mut view, 200);
        assert_eq!(view.rows, Some(100), "the view's node count is exact");
    }
}
