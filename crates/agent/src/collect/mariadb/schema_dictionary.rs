//! InnoDB's dictionary, folded for the `mariadb_schema` collector (see `schema.rs`): the user
//! tables, their indexes and columns in order, without opening one table.
//!
//! `information_schema.TABLES` and `STATISTICS` open every table (~0.3 ms of server CPU each
//! per read, minutes at 100,000 tables); InnoDB's own `INNODB_SYS_TABLES`, `INNODB_SYS_INDEXES`
//! and `INNODB_SYS_FIELDS` and `mysql.innodb_table_stats` answer the same questions from its
//! system tables for a fraction (docs/performance.md). Two things they do not keep: column
//! prefix lengths (`KEY (name(10))` reads as `KEY (name)`), and which of the server's names are
//! not InnoDB tables — the `.frm`-only listing of `information_schema.TABLES` (schema and name,
//! a directory read) gives those, and the collector opens just them (bounded).
//!
//! The fold keeps ~40 bytes per table while reading (names in one arena, column names
//! interned) and builds the model of a table only for those a schema rule can judge, the
//! `max_tables` with the most to judge and the largest first.

use std::{cmp::Reverse, collections::BinaryHeap, collections::HashMap};

use powerdiag_rules::{Index, IndexColumn, Table};

/// `INNODB_SYS_INDEXES.TYPE` bits (`dict0mem.h`).
const CLUSTERED: u32 = 1;
const UNIQUE: u32 = 2;
const FULLTEXT: u32 = 32;
const SPATIAL: u32 = 64;

/// A table's name split off a partition's (`t#P#p0`; `#p#` before 10.x).
fn base_name(name: &str) -> &str {
    name.split_once("#P#")
        .or_else(|| name.split_once("#p#"))
        .map_or(name, |(b, _)| b)
}

#[derive(Debug)]
struct DTable {
    schema: u32,
    /// Its name in [`Dictionary::names`].
    name: (u32, u32),
    /// Rows, data and index bytes (persistent statistics), rows written since statistics
    /// began (performance_schema): [`UNKNOWN`] when not read — plain numbers keep the table at
    /// 48 bytes.
    rows: u64,
    data_bytes: u64,
    index_bytes: u64,
    writes: u64,
    partitioned: bool,
}

/// A count not read.
const UNKNOWN: u64 = u64::MAX;

fn known(v: u64) -> Option<u64> {
    (v != UNKNOWN).then_some(v)
}

/// Adds `n` to a count that may be [`UNKNOWN`].
fn add(v: &mut u64, n: u64) {
    *v = known(*v).unwrap_or(0).saturating_add(n).min(UNKNOWN - 1);
}

/// One index of the table being folded.
#[derive(Debug)]
struct DIndex {
    id: u64,
    name: String,
    kind: u32,
}

/// A name InnoDB does not know: schema, name, rows written (when read from
/// performance_schema).
pub(crate) type Other = (String, String, Option<u64>);

/// Why a table is listed: a finding it may have (judged first) or only an index that may be
/// unread (performance_schema says after the fold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    MaybeUnused = 0,
    Definite = 1,
}

/// InnoDB's dictionary as it is read, one source after another.
#[derive(Debug, Default)]
pub(crate) struct Dictionary {
    schemas: Vec<String>,
    schema_ids: HashMap<String, u32>,
    names: String,
    tables: Vec<DTable>,
    /// (table id, index into `tables`, a later partition of it).
    ids: Vec<(u64, u32, bool)>,
    /// `tables` indices sorted by (schema, name).
    by_name: Vec<u32>,
    /// (index id, start, len) into `columns`, ascending by index id.
    fields: Vec<(u64, u32, u32)>,
    columns: Vec<u32>,
    words: Vec<String>,
    word_ids: HashMap<String, u32>,
    /// The table whose `INNODB_SYS_INDEXES` rows are being read.
    open: Option<(u64, Vec<DIndex>)>,
    /// Kept tables: (class, size, seq) → slot.
    heap: BinaryHeap<Reverse<(Class, u64, u32)>>,
    slots: HashMap<u32, Table>,
    seq: u32,
    max_tables: usize,
    /// performance_schema's index reads will be read: a non-unique index may be unread.
    pfs: bool,
    /// Tables that qualified (before the cap).
    pub(crate) candidates: u64,
    /// The server's names that are not InnoDB tables (other engines, views), to be opened.
    pub(crate) others: Vec<Other>,
    /// Listed InnoDB tables.
    pub(crate) innodb_tables: u64,
    /// Partitioned tables among those folded (their statistics are per partition).
    pub(crate) partitioned: std::collections::HashSet<(String, String)>,
}

impl Dictionary {
    pub(crate) fn new(max_tables: usize, pfs: bool) -> Dictionary {
        Dictionary {
            max_tables,
            pfs,
            ..Default::default()
        }
    }

    fn intern_schema(&mut self, s: String) -> u32 {
        if let Some(&i) = self.schema_ids.get(&s) {
            return i;
        }
        let i = self.schemas.len() as u32;
        self.schemas.push(s.clone());
        self.schema_ids.insert(s, i);
        i
    }

    fn word(&mut self, w: String) -> u32 {
        if let Some(&i) = self.word_ids.get(&w) {
            return i;
        }
        let i = self.words.len() as u32;
        self.words.push(w.clone());
        self.word_ids.insert(w, i);
        i
    }

    fn name_of(&self, t: &DTable) -> &str {
        &self.names[t.name.0 as usize..(t.name.0 + t.name.1) as usize]
    }

    /// One `INNODB_SYS_TABLES` row: `TABLE_ID`, `NAME` (`db/table`, file-name encoded).
    /// Partitions of one table come one after another (the rows are in name order).
    pub(crate) fn sys_table(&mut self, id: u64, encoded: &str, system: &[&str]) {
        let Some((db, name)) = decode_table(encoded) else {
            return; // InnoDB's own SYS_* tables have no schema
        };
        if system.contains(&db.as_str()) || internal(&name) {
            return;
        }
        let base = base_name(&name);
        let schema = self.intern_schema(db);
        if base.len() != name.len()
            && let Some(last) = self.tables.last()
            && last.schema == schema
            && self.name_of(last) == base
        {
            let i = self.tables.len() as u32 - 1;
            self.ids.push((id, i, true));
            if let Some(t) = self.tables.last_mut() {
                t.partitioned = true;
            }
            return;
        }
        let start = self.names.len() as u32;
        self.names.push_str(base);
        self.ids.push((id, self.tables.len() as u32, false));
        self.innodb_tables += 1;
        self.tables.push(DTable {
            schema,
            name: (start, base.len() as u32),
            rows: UNKNOWN,
            data_bytes: UNKNOWN,
            index_bytes: UNKNOWN,
            writes: UNKNOWN,
            partitioned: false,
        });
    }

    /// Whether performance_schema's index counts will be read (a non-unique index may then be
    /// unread: its table is kept).
    pub(crate) fn set_performance_schema(&mut self, on: bool) {
        self.pfs = on;
    }

    /// After `INNODB_SYS_TABLES`: the look-ups by id and by name.
    pub(crate) fn index_tables(&mut self) {
        self.ids.sort_unstable_by_key(|&(id, ..)| id);
        let mut by_name: Vec<u32> = (0..self.tables.len() as u32).collect();
        by_name.sort_unstable_by(|&a, &b| self.key(a).cmp(&self.key(b)));
        self.by_name = by_name;
    }

    fn key(&self, i: u32) -> (&str, &str) {
        let t = &self.tables[i as usize];
        (&self.schemas[t.schema as usize], self.name_of(t))
    }

    fn find(&self, schema: &str, name: &str) -> Option<u32> {
        let base = base_name(name);
        self.by_name
            .binary_search_by(|&i| self.key(i).cmp(&(schema, base)))
            .ok()
            .map(|p| self.by_name[p])
    }

    /// One row of the `.frm` listing (`information_schema.TABLES`, schema and name only: the
    /// tables the account may see): a name InnoDB does not know (another engine's table, a
    /// view) is kept to be opened, at most `cap`; returns whether it was kept.
    pub(crate) fn listed(&mut self, schema: String, name: String, cap: usize) -> bool {
        self.other(schema, name, None, cap)
    }

    fn other(&mut self, schema: String, name: String, writes: Option<u64>, cap: usize) -> bool {
        match self.find(&schema, &name) {
            Some(_) => true,
            None if self.others.len() < cap => {
                self.others.push((schema, name, writes));
                true
            }
            None => false,
        }
    }

    /// One row of performance_schema's writes per table (with performance_schema ON, instead
    /// of the `.frm` listing): an InnoDB table's count is kept; another name (a table of
    /// another engine written since the server started) is kept to be opened, at most `cap`;
    /// returns whether it was kept.
    pub(crate) fn written(
        &mut self,
        schema: String,
        name: String,
        writes: u64,
        cap: usize,
    ) -> bool {
        match self.find(&schema, &name) {
            Some(i) => {
                add(&mut self.tables[i as usize].writes, writes);
                true
            }
            None => self.other(schema, name, Some(writes), cap),
        }
    }

    /// One `mysql.innodb_table_stats` row (rows, sizes in bytes): partitions add up.
    pub(crate) fn table_stats(
        &mut self,
        schema: &str,
        name: &str,
        rows: u64,
        data: u64,
        index: u64,
    ) {
        if let Some(i) = self.find(schema, name) {
            let t = &mut self.tables[i as usize];
            add(&mut t.rows, rows);
            add(&mut t.data_bytes, data);
            add(&mut t.index_bytes, index);
        }
    }

    /// One `INNODB_SYS_FIELDS` row (`INDEX_ID`, `NAME`), in index-id and position order.
    pub(crate) fn field(&mut self, index_id: u64, column: String) {
        let w = self.word(column);
        let at = self.columns.len() as u32;
        self.columns.push(w);
        match self.fields.last_mut() {
            Some((id, _, len)) if *id == index_id => *len += 1,
            _ => self.fields.push((index_id, at, 1)),
        }
    }

    /// After `INNODB_SYS_FIELDS`: sorted by index id (they come so; made sure).
    pub(crate) fn index_fields(&mut self) {
        if !self.fields.is_sorted_by_key(|&(id, ..)| id) {
            self.fields.sort_by_key(|&(id, ..)| id);
        }
    }

    fn columns_of(&self, index_id: u64) -> &[u32] {
        match self.fields.binary_search_by_key(&index_id, |&(id, ..)| id) {
            Ok(p) => {
                let (_, at, len) = self.fields[p];
                &self.columns[at as usize..(at + len) as usize]
            }
            Err(_) => &[],
        }
    }

    /// One `INNODB_SYS_INDEXES` row (`TABLE_ID`, `INDEX_ID`, `NAME`, `TYPE`), grouped by table
    /// (the clustered order of `SYS_INDEXES`).
    pub(crate) fn sys_index(&mut self, table_id: u64, index_id: u64, name: String, kind: u32) {
        if self.open.as_ref().is_none_or(|(t, _)| *t != table_id) {
            self.close();
            self.open = Some((table_id, Vec::new()));
        }
        if let Some((_, v)) = self.open.as_mut() {
            v.push(DIndex {
                id: index_id,
                name,
                kind,
            });
        }
    }

    /// Folds the table whose index rows were being read.
    pub(crate) fn close(&mut self) {
        let Some((table_id, indexes)) = self.open.take() else {
            return;
        };
        let Ok(p) = self.ids.binary_search_by_key(&table_id, |&(id, ..)| id) else {
            return;
        };
        let (_, ti, alias) = self.ids[p];
        if alias {
            return; // a later partition: the first one's indexes are the table's
        }
        // Folded once: a second group of rows for it (not expected: they come in the
        // clustered order of `SYS_INDEXES`, by table id) is not folded again.
        self.ids[p].2 = true;
        let dt = &self.tables[ti as usize];
        let partitioned = dt.partitioned;
        let table = self.model(dt, &indexes);
        let Some(class) = self.class(&table) else {
            return;
        };
        self.candidates += 1;
        let size = table
            .data_bytes
            .unwrap_or(0)
            .saturating_add(table.index_bytes.unwrap_or(0));
        let seq = self.seq;
        self.seq += 1;
        if partitioned {
            self.partitioned
                .insert((table.schema.clone(), table.name.clone()));
        }
        self.heap.push(Reverse((class, size, seq)));
        self.slots.insert(seq, table);
        if self.heap.len() > self.max_tables
            && let Some(Reverse((_, _, gone))) = self.heap.pop()
        {
            self.slots.remove(&gone);
        }
    }

    fn model(&self, dt: &DTable, indexes: &[DIndex]) -> Table {
        let mut out: Vec<Index> = Vec::new();
        for i in indexes {
            // InnoDB's own: the hidden row id's clustered index, full-text's document ids.
            if i.name == "GEN_CLUST_INDEX" || i.name == "FTS_DOC_ID_INDEX" {
                continue;
            }
            let kind = if i.kind & FULLTEXT != 0 {
                "FULLTEXT"
            } else if i.kind & SPATIAL != 0 {
                "SPATIAL"
            } else {
                "BTREE"
            };
            out.push(Index {
                name: i.name.clone(),
                unique: i.kind & UNIQUE != 0,
                kind: kind.into(),
                clustered: i.kind & CLUSTERED != 0,
                columns: self
                    .columns_of(i.id)
                    .iter()
                    .map(|&w| IndexColumn {
                        name: self.words[w as usize].clone(),
                        sub_part: None,
                    })
                    .collect(),
                bytes: None,
                reads: None,
            });
        }
        let mut t = Table {
            schema: self.schemas[dt.schema as usize].clone(),
            name: self.name_of(dt).to_owned(),
            engine: Some("InnoDB".into()),
            rows: known(dt.rows),
            data_bytes: known(dt.data_bytes),
            index_bytes: known(dt.index_bytes),
            writes: known(dt.writes),
            indexes: out,
            ..Default::default()
        };
        t.prefix_lengths_unknown = t.has_prefix_by_names();
        t
    }

    /// Whether a rule may judge `t`, and how surely.
    fn class(&self, t: &Table) -> Option<Class> {
        if t.clustered_key().is_none() || t.prefix_lengths_unknown {
            Some(Class::Definite)
        } else if self.pfs
            && t.indexes
                .iter()
                .any(|i| !i.unique && i.kind.eq_ignore_ascii_case("BTREE"))
        {
            Some(Class::MaybeUnused)
        } else {
            None
        }
    }

    /// The kept tables, most to judge and largest first (the partitioned ones are in
    /// [`Dictionary::partitioned`], taken before).
    pub(crate) fn finish(mut self) -> Vec<Table> {
        self.close();
        let mut order: Vec<(Class, u64, u32)> = self.heap.into_iter().map(|Reverse(k)| k).collect();
        order.sort_unstable_by(|a, b| b.cmp(a));
        order
            .into_iter()
            .filter_map(|(_, _, seq)| self.slots.remove(&seq))
            .collect()
    }
}

/// InnoDB's own tables beside the user's: full-text search's auxiliary tables
/// (`FTS_<16 hex>_CONFIG`, `FTS_<16 hex>_<16 hex>_INDEX_1`, ...), `#sql` leftovers of an
/// interrupted `ALTER TABLE`, a vector index's hidden table (`t#i#01`).
fn internal(name: &str) -> bool {
    let fts = name
        .strip_prefix("FTS_")
        .and_then(|r| r.get(..17))
        .is_some_and(|h| h.ends_with('_') && h[..16].bytes().all(|b| b.is_ascii_hexdigit()));
    fts || name.starts_with("#sql") || name.contains("#i#")
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

#[cfg(test)]
mod tests {
    use super::*;

    const SYSTEM: [&str; 4] = powerdiag_rules::SYSTEM_SCHEMAS;

    /// `INNODB_SYS_*` rows as MariaDB 11.8 returns them (captured from a test server): a
    /// table with a redundant-looking index, one without a primary key, a plain one, a
    /// partitioned one, full-text's auxiliary tables, a vector index's hidden table.
    fn dictionary(max_tables: usize, pfs: bool) -> Dictionary {
        let mut d = Dictionary::new(max_tables, pfs);
        for (id, name) in [
            (18, "d/p"),
            (19, "d/nopk"),
            (20, "d/plain"),
            (21, "d/part#P#p0"),
            (22, "d/part#P#p1"),
            (23, "we@002dird/my@0020t"),
            (26, "we@002dird/FTS_0000000000000017_CONFIG"),
            (
                29,
                "we@002dird/FTS_0000000000000017_0000000000000027_INDEX_1",
            ),
            (35, "we@002dird/my@0020t#i#02"),
            (36, "d/#sql-ib40"),
            (5, "mysql/innodb_table_stats"),
            (1, "SYS_FOREIGN"),
        ] {
            d.sys_table(id, name, &SYSTEM);
        }
        d.index_tables();
        for (s, n) in [("d", "p"), ("d", "m"), ("d", "v"), ("we-ird", "my t")] {
            assert!(d.listed(s.into(), n.into(), 10));
        }
        d.table_stats("d", "p", 1000, 16384, 49152);
        d.table_stats("d", "part#P#p0", 10, 16384, 0);
        d.table_stats("d", "part#P#p1", 20, 16384, 0);
        for (id, col) in [
            (23, "id"),
            (24, "name"),
            (25, "name"),
            (25, "x"),
            (28, "a"),
            (30, "id"),
            (31, "x"),
            (32, "id"),
            (33, "id"),
            (34, "k"),
            (38, "FTS_DOC_ID"),
            (39, "body"),
        ] {
            d.field(id, col.into());
        }
        d.index_fields();
        for (t, i, name, kind) in [
            (18, 23, "PRIMARY", 3),
            (18, 24, "k1", 0),
            (18, 25, "k2", 0),
            (19, 27, "GEN_CLUST_INDEX", 1),
            (19, 28, "u", 2),
            (20, 30, "PRIMARY", 3),
            (20, 31, "k", 0),
            (21, 32, "PRIMARY", 3),
            (21, 34, "k", 0),
            (22, 33, "PRIMARY", 3),
            (23, 36, "PRIMARY", 3),
            (23, 38, "FTS_DOC_ID_INDEX", 2),
            (23, 39, "f", 32),
            (35, 46, "GEN_CLUST_INDEX", 1),
        ] {
            d.sys_index(t, i, name.into(), kind);
        }
        d
    }

    #[test]
    fn folds_the_dictionary_into_the_tables_a_rule_can_judge() {
        let d = dictionary(10, true);
        assert_eq!(d.innodb_tables, 5, "p, nopk, plain, part, my t");
        let others: Vec<&str> = d.others.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(others, ["m", "v"]);
        let tables = d.finish();
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        // Findings first (p looks redundant, nopk has no clustered key), largest first; then
        // the tables whose non-unique index may be unread; `my t` has none.
        assert_eq!(names, ["p", "nopk", "part", "plain"]);
        let p = &tables[0];
        assert!(p.prefix_lengths_unknown);
        assert_eq!(
            (p.rows, p.data_bytes, p.index_bytes),
            (Some(1000), Some(16384), Some(49152))
        );
        assert_eq!(p.indexes[2].columns.len(), 2);
        assert!(p.indexes[0].clustered && p.indexes[0].unique);
        let nopk = &tables[1];
        assert_eq!(nopk.clustered_key(), None);
        assert_eq!(nopk.indexes.len(), 1, "GEN_CLUST_INDEX is InnoDB's own");
        let part = &tables[2];
        assert_eq!(part.rows, Some(30), "partitions add up");
        assert_eq!(part.indexes.len(), 2, "the first partition's indexes");
    }

    #[test]
    fn without_performance_schema_or_past_the_cap_fewer_are_kept() {
        let names =
            |d: Dictionary| -> Vec<String> { d.finish().into_iter().map(|t| t.name).collect() };
        assert_eq!(names(dictionary(10, false)), ["p", "nopk"]);
        // The cap keeps the findings before the maybe-unused, and counts all.
        let d = dictionary(2, true);
        assert_eq!(d.candidates, 4);
        assert_eq!(names(d), ["p", "nopk"]);
        // The last group of index rows counts once closed.
        let mut d = Dictionary::new(10, false);
        d.sys_table(1, "d/t", &SYSTEM);
        d.index_tables();
        d.field(1, "a".into());
        d.sys_index(1, 1, "GEN_CLUST_INDEX".into(), CLUSTERED);
        d.sys_index(1, 2, "k".into(), 0);
        assert_eq!(d.candidates, 0);
        d.close();
        assert_eq!(d.candidates, 1);
        let mut d = Dictionary::new(10, true);
        d.sys_table(1, "d/t", &SYSTEM);
        d.index_tables();
        assert!(d.listed("d".into(), "m1".into(), 1));
        assert!(
            !d.listed("d".into(), "m2".into(), 1),
            "past the cap: counted, not kept"
        );
        assert!(internal("FTS_00000000000000ab_DELETED"));
        assert!(!internal("FTS_notes"));
    }
}
