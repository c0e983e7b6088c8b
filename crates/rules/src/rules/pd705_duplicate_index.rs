use crate::{
    Index, Limits, Rule, Snapshot, Table, Verdict, declare_rule, ddl_line, format_bytes,
    quote_ident, shown,
};

declare_rule! {
    /// ### What it does
    /// Finds indexes whose columns are the first columns, in the same order and with the same
    /// prefix lengths, of another B-tree index on the same table — pt-duplicate-key-checker's
    /// semantics: `KEY (a)` beside `KEY (a, b)` or `PRIMARY KEY (a, b)`, and exact duplicates
    /// (the later of two identical non-unique indexes). The index to drop is never a PRIMARY
    /// or UNIQUE key (they enforce a constraint, whatever else covers their columns); FULLTEXT,
    /// SPATIAL, VECTOR and HASH indexes are neither dropped for nor in favour of a B-tree one.
    /// A foreign key served by the dropped index is served by the longer one, which starts
    /// with the same columns.
    ///
    /// ### Why is this bad?
    /// Every write maintains every index: a redundant one costs its share of each `INSERT`,
    /// of every `UPDATE` of its columns and of each `DELETE`, its pages in the buffer pool and
    /// on disk, and more choices for the optimizer — for lookups the longer index already
    /// serves (a left prefix of an index is usable wherever the index alone is).
    ///
    /// ### Remediation
    /// Drop the redundant index with the `ALTER TABLE … DROP INDEX` line the finding prints
    /// (powerdiag never runs it). On a large table use an online change (`ALGORITHM=INPLACE,
    /// LOCK=NONE` is the default for dropping a secondary index in InnoDB) and check first that
    /// no query names the index in an `USE/FORCE INDEX` hint.
    pub struct DuplicateIndex {
        code: "PD705",
        name: "duplicate-index",
        severity: Info,
        scope: Database,
        summary: "an index is a left prefix of another index on the same table",
        fails_when: "a non-unique index's columns are the leading columns (same order, same prefix lengths) of another B-tree index of its table, or an exact duplicate of an earlier one",
        severity_why: "info: a redundant index costs every write, buffer pool and disk, but nothing fails because of it",
    }
}

/// One redundant index and the index that makes it so.
pub(crate) struct Redundant<'a> {
    pub(crate) table: &'a Table,
    pub(crate) index: &'a Index,
    pub(crate) covered_by: &'a Index,
}

/// Why a table's prefix lengths are unknown.
const WHY_UNKNOWN: &str = "InnoDB's dictionary does not keep column prefix lengths and information_schema was not read for them (at most 200 tables are opened per read; an account without SHOW VIEW does not see the table there)";

fn btree(i: &Index) -> bool {
    i.kind.eq_ignore_ascii_case("BTREE")
}

/// The redundant indexes of `table`, each with the index covering it.
pub(crate) fn redundant(table: &Table) -> Vec<Redundant<'_>> {
    let mut out = Vec::new();
    for (ai, a) in table.indexes.iter().enumerate() {
        if a.unique || !btree(a) {
            continue;
        }
        let cover = table.indexes.iter().enumerate().find(|&(bi, b)| {
            bi != ai
                && btree(b)
                && a.is_left_prefix_of(b)
                // Identical columns: drop the later of two non-unique ones, never for itself.
                && (a.columns.len() < b.columns.len() || b.unique || bi < ai)
        });
        if let Some((_, b)) = cover {
            out.push(Redundant {
                table,
                index: a,
                covered_by: b,
            });
        }
    }
    out
}

impl Rule for DuplicateIndex {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let schema = s.db()?.schema_facts()?;
        let mut found: Vec<Redundant> = schema
            .tables
            .iter()
            .filter(|t| !t.prefix_lengths_unknown)
            .flat_map(redundant)
            .collect();
        // Read from InnoDB's dictionary without their prefix lengths: `KEY (a(10))` may not
        // be a prefix of `KEY (a, b)`, so they are counted, not judged.
        let unknown = schema
            .tables
            .iter()
            .filter(|t| t.prefix_lengths_unknown && !redundant(t).is_empty())
            .count();
        let unknown_note = if unknown > 0 {
            format!(
                "; {unknown} table(s) whose indexes look redundant by column names not judged ({WHY_UNKNOWN})"
            )
        } else {
            String::new()
        };
        if found.is_empty() && unknown > 0 {
            return Err(Verdict::insufficient(format!(
                "{unknown} table(s) have an index that looks like a left prefix of another by column names, but {WHY_UNKNOWN}; no other index is redundant in {} table(s){}",
                schema.tables_total,
                schema.left_out_note()
            )));
        }
        if found.is_empty() {
            return Ok(Verdict::pass(format!(
                "no index is a left prefix of another in {} table(s){}",
                schema.tables_total,
                schema.left_out_note()
            )));
        }
        // Largest first: the most to gain.
        found.sort_by_key(|r| std::cmp::Reverse(r.index.bytes.unwrap_or(0)));
        let bytes: u64 = found.iter().filter_map(|r| r.index.bytes).sum();
        let evidence = shown(&found, |r| {
            format!(
                "{}: {} is a left prefix of {}{}",
                r.table.display(),
                r.index.definition(),
                r.covered_by.definition(),
                r.index
                    .bytes
                    .map(|b| format!(" ({})", format_bytes(b)))
                    .unwrap_or_default()
            )
        });
        let mut by_table: Vec<(&Table, Vec<&Index>)> = Vec::new();
        for r in &found {
            match by_table.iter_mut().find(|(t, _)| std::ptr::eq(*t, r.table)) {
                Some((_, v)) => v.push(r.index),
                None => by_table.push((r.table, vec![r.index])),
            }
        }
        let ddl = shown(&by_table, |(t, indexes)| {
            ddl_line(t, "drop its redundant index(es)", |q| {
                let drops: Option<Vec<String>> = indexes
                    .iter()
                    .map(|i| Some(format!("DROP INDEX {}", quote_ident(&i.name)?)))
                    .collect();
                Some(format!("ALTER TABLE {q} {};", drops?.join(", ")))
            })
        });
        Ok(Verdict::fail(format!(
            "{} redundant index(es) in {} table(s){}, each a left prefix of another index of its table{}",
            found.len(),
            by_table.len(),
            if bytes > 0 {
                format!(" ({} of indexes)", format_bytes(bytes))
            } else {
                String::new()
            },
            schema.left_out_note()
        ) + &unknown_note)
        .with_evidence_lines(evidence)
        .with_remediation(format!(
            "Drop them (text only: powerdiag never runs it; check no query forces these indexes with USE/FORCE INDEX first):\n{}",
            ddl.join("\n")
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Status;
    use crate::testing::{SnapshotBuilder, schema_index as index, schema_table as table, verdict, with_tables};

    pub(crate) fn failing_example() -> Snapshot {
        with_tables(vec![table(
            "orders",
            "InnoDB",
            vec![
                index("PRIMARY", true, &["id"]),
                index("cust", false, &["customer_id"]),
                index("cust_date", false, &["customer_id", "created"]),
            ],
        )])
    }

    #[test]
    fn a_left_prefix_fails_with_its_drop_line() {
        let v = verdict(&DuplicateIndex, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[0].contains("KEY `cust` (`customer_id`) is a left prefix of KEY `cust_date`"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(fix.contains("ALTER TABLE `shop`.`orders` DROP INDEX `cust`;"), "{fix}");
        // After the drop it passes.
        let fixed = with_tables(vec![table(
            "orders",
            "InnoDB",
            vec![
                index("PRIMARY", true, &["id"]),
                index("cust_date", false, &["customer_id", "created"]),
            ],
        )]);
        assert_eq!(verdict(&DuplicateIndex, &fixed).status, Status::Pass);
    }

    /// Read from InnoDB's dictionary without prefix lengths: not judged, and alone it is
    /// `insufficient_data` naming why; beside a judged redundant index it is counted.
    #[test]
    fn unknown_prefix_lengths_are_counted_not_judged() {
        let crate::Gathered::Available(mut sc) = failing_example().mariadb.facts.unwrap().schema else { unreachable!() };
        let mut t = sc.tables.remove(0);
        t.prefix_lengths_unknown = true;
        let v = verdict(&DuplicateIndex, &with_tables(vec![t.clone()]));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("1 table(s) have an index that looks like a left prefix"), "{v:?}");
        assert!(v.summary.contains("prefix lengths"), "{v:?}");
        let mut judged = t.clone();
        judged.name = "judged".into();
        judged.prefix_lengths_unknown = false;
        let v = verdict(&DuplicateIndex, &with_tables(vec![judged, t]));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert_eq!(v.evidence.len(), 1, "{v:?}");
        assert!(v.summary.contains("1 table(s) whose indexes look redundant by column names not judged"), "{v:?}");
    }

    /// A UNIQUE key is never the one to drop; the PRIMARY key covers a prefix of itself;
    /// of two identical non-unique indexes the later goes; other kinds are not B-tree prefixes.
    #[test]
    fn what_is_and_is_not_redundant() {
        let names = |t: &Table| -> Vec<String> {
            redundant(t).iter().map(|r| r.index.name.clone()).collect()
        };
        let t = table(
            "t",
            "InnoDB",
            vec![
                index("PRIMARY", true, &["a", "b"]),
                index("u_a", true, &["a"]),
                index("k_a", false, &["a"]),
                index("k_c", false, &["c"]),
                index("k_c2", false, &["c"]),
                index("k_cd", false, &["C", "d"]),
            ],
        );
        assert_eq!(names(&t), ["k_a", "k_c", "k_c2"]);
        let mut ft = index("ft", false, &["title"]);
        ft.kind = "FULLTEXT".into();
        let t = table("t", "InnoDB", vec![ft, index("k_title", false, &["title", "x"])]);
        assert!(names(&t).is_empty());
        let mut pre = index("k_p", false, &["title"]);
        pre.columns[0].sub_part = Some(10);
        let t = table("t", "InnoDB", vec![pre, index("k_title", false, &["title"])]);
        assert!(names(&t).is_empty());
        // Hostile names: backticks doubled in DDL, control characters never printed raw.
        let t = table(
            "we`ird",
            "InnoDB",
            vec![index("x`y", false, &["a"]), index("ab", false, &["a", "b"])],
        );
        let v = verdict(&DuplicateIndex, &with_tables(vec![t]));
        let fix = v.remediation.unwrap();
        assert!(fix.contains("ALTER TABLE `shop`.`we``ird` DROP INDEX `x``y`;"), "{fix}");
        let t = table(
            "bad\nname",
            "InnoDB",
            vec![index("a", false, &["a"]), index("ab", false, &["a", "b"])],
        );
        let v = verdict(&DuplicateIndex, &with_tables(vec![t]));
        let fix = v.remediation.clone().unwrap();
        assert!(!fix.contains("bad\nname") && fix.contains("by hand"), "{fix}");
        assert!(!v.evidence[0].contains('\n'), "{v:?}");
    }

    #[test]
    fn without_the_schema_it_is_insufficient() {
        let s = SnapshotBuilder::new().mariadb("11.8.5-MariaDB").build();
        let v = verdict(&DuplicateIndex, &s);
        assert_eq!(v.status, Status::InsufficientData);
    }
}
