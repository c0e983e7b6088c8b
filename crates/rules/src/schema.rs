//! The schema's tables and indexes (PD705 duplicate-index, PD707 table-without-primary-key,
//! PD708 non-transactional-tables), from the collector's bounded reads: what each table is,
//! how big, its indexes with their columns in order. Names come from outside: rules show them
//! through [`crate::display_text`] and write DDL through [`quote_ident`].

use serde::{Deserialize, Serialize};

/// The user tables (system schemas excluded) and their indexes. To stay small at 100,000
/// tables, only the tables a schema rule can judge are listed (see [`Schema::lists`]), largest
/// first and at most `[schema] max_tables`; the others are counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schema {
    /// Where the facts came from (`information_schema.TABLES and STATISTICS`).
    pub source: String,
    /// Unix time (UTC) of the read: the agent refreshes it rarely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<i64>,
    /// User base tables on the server.
    pub tables_total: u64,
    /// Of which InnoDB.
    pub innodb_tables: u64,
    /// Tables that qualified for the list (before the cap).
    pub candidates: u64,
    /// The listed tables, largest first.
    pub tables: Vec<Table>,
    /// Why the indexes' reads (PD706) are unknown: performance_schema OFF, a failed read.
    /// `None` when they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_usage_unread: Option<String>,
}

impl Schema {
    /// Tables that qualified but were left out by the cap.
    pub fn left_out(&self) -> u64 {
        self.candidates.saturating_sub(self.tables.len() as u64)
    }

    /// `; N smaller tables not judged ([schema] max_tables)` when the cap left some out, else
    /// empty.
    pub fn left_out_note(&self) -> String {
        match self.left_out() {
            0 => String::new(),
            n => format!(
                "; {n} smaller table(s) not judged ([schema] max_tables = {})",
                self.tables.len()
            ),
        }
    }

    /// Whether the collector lists `t` (see [`Schema`]): another engine than InnoDB, no
    /// clustered key, an index that is a left prefix of another by column names, or a
    /// non-unique index never read.
    pub fn lists(t: &Table) -> bool {
        !t.is_engine("InnoDB")
            || t.clustered_key().is_none()
            || t.has_prefix_by_names()
            || t.indexes.iter().any(|i| !i.unique && i.reads == Some(0))
    }
}

/// One base table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Table {
    pub schema: String,
    pub name: String,
    /// `InnoDB`, `Aria`, `MyISAM`, ...; `None` when the server could not open it.
    pub engine: Option<String>,
    /// The engine's row estimate (`TABLE_ROWS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_bytes: Option<u64>,
    /// Rows written (inserted, updated, deleted) since statistics began, from
    /// `performance_schema.table_io_waits_summary_by_table`; `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// Unix time (UTC) of its last write by the engine's own account (`UPDATE_TIME`: MyISAM
    /// and Aria keep it; InnoDB only since the server started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    /// Unix time (UTC) of its creation or last rebuild by `ALTER TABLE` (`CREATE_TIME`):
    /// performance_schema's counts for it restart then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// Its indexes in the server's order (`PRIMARY` first).
    pub indexes: Vec<Index>,
    /// Its indexes come from InnoDB's dictionary, which does not keep column prefix lengths
    /// (`KEY (name(10))` reads as `KEY (name)`), and `information_schema` was not read for
    /// them (the per-read cap on opened tables, or an account it does not show the table
    /// to): PD705 does not judge it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefix_lengths_unknown: bool,
    /// The column lists of its foreign keys, as the child (its columns) and as the parent
    /// (the referenced ones): each needs an index starting with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<Vec<String>>,
}

impl Table {
    /// `` `schema`.`table` `` for DDL; `None` when either name holds control characters.
    pub fn quoted(&self) -> Option<String> {
        Some(format!(
            "{}.{}",
            quote_ident(&self.schema)?,
            quote_ident(&self.name)?
        ))
    }

    /// `schema.table` for a report (escaped, bounded).
    pub fn display(&self) -> String {
        format!(
            "{}.{}",
            crate::display_text(&self.schema, 64),
            crate::display_text(&self.name, 64)
        )
    }

    /// Whether a non-unique B-tree index's columns are the first columns of another B-tree
    /// index by name alone (prefix lengths aside): what PD705 judges, once they are known.
    pub fn has_prefix_by_names(&self) -> bool {
        let btree = || {
            self.indexes
                .iter()
                .enumerate()
                .filter(|(_, i)| i.kind.eq_ignore_ascii_case("BTREE"))
        };
        btree().any(|(ai, a)| {
            !a.unique
                && !a.columns.is_empty()
                && btree().any(|(bi, b)| {
                    bi != ai
                        && a.columns.len() <= b.columns.len()
                        && a.columns
                            .iter()
                            .zip(&b.columns)
                            .all(|(x, y)| x.name.eq_ignore_ascii_case(&y.name))
                })
        })
    }

    pub fn is_engine(&self, engine: &str) -> bool {
        self.engine
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case(engine))
    }

    /// The index InnoDB clusters the rows by (see [`Index::clustered`]); `None` means InnoDB
    /// invented a hidden row id (`GEN_CLUST_INDEX`).
    pub fn clustered_key(&self) -> Option<&Index> {
        self.indexes.iter().find(|i| i.clustered)
    }
}

/// One index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Index {
    pub name: String,
    /// UNIQUE or PRIMARY.
    pub unique: bool,
    /// `BTREE`, `HASH`, `FULLTEXT`, `SPATIAL` (`RTREE`), `VECTOR`.
    pub kind: String,
    /// The index InnoDB stores the rows in: `PRIMARY`, else the first UNIQUE key whose
    /// columns are all NOT NULL (InnoDB's dictionary says; from `information_schema` it is
    /// worked out the same way). Never set on another engine's table.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clustered: bool,
    /// Its columns in order.
    pub columns: Vec<IndexColumn>,
    /// Its size, bytes, when the engine says (InnoDB's persistent statistics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Rows read through it since statistics began (performance_schema's
    /// `table_io_waits_summary_by_index_usage`); `None` when not read or its table was not
    /// opened since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
}

impl Index {
    pub fn is_primary(&self) -> bool {
        self.name == "PRIMARY"
    }

    /// `UNIQUE KEY `u` (`a`,`b`(10))`, names escaped, for a report.
    pub fn definition(&self) -> String {
        let kind = if self.is_primary() {
            "PRIMARY KEY".to_owned()
        } else {
            match self.kind.to_ascii_uppercase().as_str() {
                "FULLTEXT" => "FULLTEXT KEY".to_owned(),
                "SPATIAL" | "RTREE" => "SPATIAL KEY".to_owned(),
                "VECTOR" => "VECTOR KEY".to_owned(),
                _ if self.unique => "UNIQUE KEY".to_owned(),
                _ => "KEY".to_owned(),
            }
        };
        let name = if self.is_primary() {
            String::new()
        } else {
            format!(" `{}`", crate::display_text(&self.name, 64))
        };
        let cols: Vec<String> = self
            .columns
            .iter()
            .map(|c| {
                format!(
                    "`{}`{}",
                    crate::display_text(&c.name, 64),
                    c.sub_part.map(|n| format!("({n})")).unwrap_or_default()
                )
            })
            .collect();
        format!("{kind}{name} ({})", cols.join(","))
    }

    /// Whether a foreign key of `table` needs it: the key's columns are its leading columns.
    pub fn serves_foreign_key(&self, table: &Table) -> bool {
        table.foreign_keys.iter().any(|fk| {
            !fk.is_empty()
                && fk.len() <= self.columns.len()
                && fk
                    .iter()
                    .zip(&self.columns)
                    .all(|(f, c)| f.eq_ignore_ascii_case(&c.name))
        })
    }

    /// Whether its columns are the first columns of `other`, in order, with the same prefix
    /// lengths (column names compare without case, as MariaDB's do).
    pub fn is_left_prefix_of(&self, other: &Index) -> bool {
        !self.columns.is_empty()
            && self.columns.len() <= other.columns.len()
            && self
                .columns
                .iter()
                .zip(&other.columns)
                .all(|(a, b)| a.name.eq_ignore_ascii_case(&b.name) && a.sub_part == b.sub_part)
    }
}

/// One column of an index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexColumn {
    pub name: String,
    /// Indexed prefix length (`SUB_PART`), characters or bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_part: Option<u64>,
}

/// An identifier for DDL printed in a report: in backticks, a backtick doubled; `None` for a
/// name holding control characters, which a report never prints raw (and an escaped one would
/// name another object).
pub fn quote_ident(name: &str) -> Option<String> {
    (!name.chars().any(char::is_control)).then(|| format!("`{}`", name.replace('`', "``")))
}

/// How many tables or indexes a schema finding names; the rest are counted.
pub const SHOWN: usize = 20;

/// `f` of the first [`SHOWN`] items, then `… and N more` when there are more.
pub fn shown<T>(items: &[T], f: impl FnMut(&T) -> String) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().take(SHOWN).map(f).collect();
    if items.len() > SHOWN {
        lines.push(format!("… and {} more", items.len() - SHOWN));
    }
    lines
}

/// A printed DDL statement on `table`: `ddl` of its quoted name, or — a name holding control
/// characters, which a report never prints raw — a comment saying to `what` by hand.
pub fn ddl_line(table: &Table, what: &str, ddl: impl FnOnce(&str) -> Option<String>) -> String {
    table.quoted().and_then(|q| ddl(&q)).unwrap_or_else(|| {
        format!(
            "-- {}: a name holds control characters; {what} by hand",
            table.display()
        )
    })
}

/// Schemas of the server itself, never judged.
pub const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

pub(crate) fn schema_not_recorded() -> crate::Gathered<Schema> {
    crate::Gathered::Unavailable("not recorded (a snapshot from an older powerdiag)".into())
}

impl crate::MariadbFacts {
    /// The schema facts, or the `insufficient_data` verdict saying why there are none.
    pub fn schema_facts(&self) -> Result<&Schema, crate::Verdict> {
        self.schema
            .as_ref()
            .map_err(|why| crate::Verdict::insufficient(format!("the schema was not read: {why}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str) -> IndexColumn {
        IndexColumn {
            name: name.into(),
            sub_part: None,
        }
    }

    fn index(name: &str, unique: bool, cols: &[&str]) -> Index {
        Index {
            name: name.into(),
            unique,
            kind: "BTREE".into(),
            columns: cols.iter().map(|c| col(c)).collect(),
            clustered: false,
            bytes: None,
            reads: None,
        }
    }

    #[test]
    fn prefixes_quoting_and_the_clustered_key() {
        let a = index("a", false, &["a"]);
        let ab = index("ab", false, &["A", "b"]);
        assert!(a.is_left_prefix_of(&ab));
        assert!(!ab.is_left_prefix_of(&a));
        let mut a10 = a.clone();
        a10.columns[0].sub_part = Some(10);
        assert!(!a10.is_left_prefix_of(&ab));
        assert_eq!(quote_ident("we`ird").as_deref(), Some("`we``ird`"));
        assert_eq!(quote_ident("a\nb"), None);
        assert_eq!(ab.definition(), "KEY `ab` (`A`,`b`)");
        assert_eq!(a10.definition(), "KEY `a` (`a`(10))");
        let mut t = Table {
            schema: "s".into(),
            name: "t".into(),
            engine: Some("InnoDB".into()),
            indexes: vec![a.clone()],
            ..Default::default()
        };
        assert_eq!(t.clustered_key(), None);
        let mut u = index("u", true, &["x"]);
        t.indexes.push(u.clone());
        assert_eq!(t.clustered_key(), None);
        u.clustered = true;
        t.indexes.push(u);
        assert_eq!(t.clustered_key().map(|i| i.name.as_str()), Some("u"));
        assert_eq!(t.quoted().as_deref(), Some("`s`.`t`"));
    }
}
