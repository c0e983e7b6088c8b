//! Vector indexes and the raw facts about their size. Bounded: statements scale with the
//! number of vector indexes (capped at [`MAX_INDEXES`]), never with the number of tables.

use std::collections::BTreeMap;

use powerdiag_rules::{DbError, DbErrorKind, VectorIndex};

use super::session::{Session, TextRow, col, col_u64, ident, sql_str, tcol, tcol_u64, text_rows};

/// Most vector indexes described in detail.
pub(crate) const MAX_INDEXES: usize = 64;

/// InnoDB page size assumed when `@@innodb_page_size` is unknown.
const DEFAULT_PAGE: u64 = 16384;

/// What discovery found, and what limited it.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    pub(crate) indexes: Vec<VectorIndex>,
    pub(crate) notes: Vec<String>,
}

/// Lists vector indexes with their sizes.
///
/// 1. `INFORMATION_SCHEMA.VECTOR_INDEXES` where the server has it (MariaDB 13.1+).
/// 2. Else the hidden `<table>#i#NN` tables from `INNODB_SYS_TABLES` with `INNODB_SYS_TABLESTATS`
///    (needs PROCESS), then each base table's index definition by exact-name lookups.
/// 3. Without PROCESS, `INFORMATION_SCHEMA.STATISTICS` filtered on `INDEX_TYPE='VECTOR'` (only
///    tables the user has privileges on) and the base tables' row estimates.
pub(crate) async fn discover(
    s: &mut Session,
    page_size: Option<u64>,
) -> Result<Discovery, DbError> {
    let page = page_size.unwrap_or(DEFAULT_PAGE);
    let mut d = Discovery::default();
    let has_view = !s
        .query("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA='information_schema' AND TABLE_NAME='VECTOR_INDEXES'")
        .await?
        .is_empty();
    if has_view {
        let rows = s
            .query("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, VECTOR_DIMENSIONS, INDEX_SIZE, TOTAL_NODES, MEMORY_SIZE, CACHE_OVERFLOWS FROM information_schema.VECTOR_INDEXES")
            .await?;
        d.indexes = parse_vector_indexes_view(&text_rows(&rows));
    } else {
        match s.query(HIDDEN_SQL).await {
            Ok(rows) => {
                d.indexes = parse_hidden_tables(&text_rows(&rows), page);
            }
            Err(e) if e.kind == DbErrorKind::MissingPrivilege => {
                let grant = format!("GRANT PROCESS ON *.* TO {}", s.account());
                let rows = s
                    .query("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS WHERE INDEX_TYPE='VECTOR'")
                    .await?;
                d.indexes = rows
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
                if d.indexes.is_empty() {
                    // Without PROCESS and table privileges the user sees no index at all: that
                    // is not "no vector indexes".
                    return Err(DbError {
                        kind: DbErrorKind::MissingPrivilege,
                        message: format!(
                            "vector indexes cannot be listed without the PROCESS privilege ({})",
                            e.message
                        ),
                        hint: format!("{grant};"),
                    });
                }
                d.notes.push(format!(
                    "vector index sizes need the PROCESS privilege ({grant}); using the base tables' row estimates"
                ));
            }
            Err(e) => return Err(e),
        }
    }
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
    describe(s, &mut d.indexes).await?;
    Ok(d)
}

/// Hidden MHNSW tables are named `<table>#i#<key number>`; InnoDB spells names `db/table` with
/// special characters encoded as `@XXXX`.
const HIDDEN_SQL: &str = "SELECT t.NAME, s.NUM_ROWS, s.CLUST_INDEX_SIZE, ts.ALLOCATED_SIZE \
     FROM information_schema.INNODB_SYS_TABLES t \
     LEFT JOIN information_schema.INNODB_SYS_TABLESTATS s ON s.TABLE_ID = t.TABLE_ID \
     LEFT JOIN information_schema.INNODB_SYS_TABLESPACES ts ON ts.SPACE = t.SPACE \
     WHERE t.NAME LIKE '%#i#%'";

pub(crate) fn parse_hidden_tables(rows: &[TextRow], page: u64) -> Vec<VectorIndex> {
    let mut out = Vec::new();
    for r in rows {
        let Some(name) = tcol(r, 0) else { continue };
        let Some((schema, table, _key)) = split_hidden_name(&name) else {
            continue;
        };
        let rows_n = tcol_u64(r, 1);
        let clust_pages = tcol_u64(r, 2);
        let allocated = tcol_u64(r, 3);
        out.push(VectorIndex {
            schema,
            table,
            rows: rows_n,
            rows_source: rows_n.map(|_| "innodb_sys_tablestats (hidden graph table)".to_owned()),
            hidden_table: Some(name),
            hidden_table_bytes: clust_pages.map(|p| p.saturating_mul(page)).or(allocated),
            ..Default::default()
        });
    }
    out
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

/// Fills index name, column, dimensions, row estimate, M and distance with one statement of
/// exact-name lookups (INFORMATION_SCHEMA opens only the named tables) plus `SHOW CREATE TABLE`
/// per vector table.
async fn describe(s: &mut Session, indexes: &mut [VectorIndex]) -> Result<(), DbError> {
    let mut tables: Vec<(String, String)> = indexes
        .iter()
        .map(|i| (i.schema.clone(), i.table.clone()))
        .collect();
    tables.sort();
    tables.dedup();
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
    let mut by_table: BTreeMap<(String, String), Vec<IndexDef>> = BTreeMap::new();
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
            if idx.rows.is_none() {
                idx.rows = def.table_rows;
                idx.rows_source = def
                    .table_rows
                    .map(|_| "information_schema.TABLES.TABLE_ROWS (estimate)".into());
            }
        }
    }
    for (db, t) in &tables {
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
    for idx in indexes.iter_mut().filter(|i| i.index.is_empty()) {
        // No privilege on the base table: the hidden table's key number is all we know.
        idx.index = idx
            .hidden_table
            .as_deref()
            .and_then(|h| h.rsplit_once("#i#"))
            .map(|(_, k)| format!("key #{k}"))
            .unwrap_or_else(|| "?".into());
    }
    Ok(())
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
        let got = parse_hidden_tables(&rows, 16384);
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].schema.as_str(), got[0].table.as_str()),
            ("powerdiag_it", "docs")
        );
        assert_eq!(got[0].rows, Some(17792));
        assert_eq!(got[0].hidden_table_bytes, Some(2276 * 16384));
        assert_eq!(got[1].rows, None);
        assert_eq!(
            got[1].hidden_table_bytes,
            Some(65536),
            "falls back to the allocated size"
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
}
