use crate::{
    Index, Limits, Rule, Snapshot, StatusVar, Table, Threshold, Unit, Verdict, ddl_line,
    declare_rule, format_bytes, format_secs, quote_ident, shown,
};

declare_rule! {
    /// ### What it does
    /// Finds indexes no row was read through since statistics began
    /// (`performance_schema.table_io_waits_summary_by_index_usage`, `COUNT_READ` 0) — judged
    /// only once that period is long enough: the server's uptime of at least {min_period} s
    /// (a weekly report or a monthly job must have had its chance), otherwise
    /// `insufficient_data` saying how long is left. The counts of a table restart when
    /// `ALTER TABLE` rebuilds it (`CREATE_TIME`): a table changed within the period is judged
    /// once the period has passed since, and the verdict says how many wait. PRIMARY and UNIQUE keys are never listed
    /// (they enforce a constraint), nor an index a foreign key needs (its leading columns are
    /// the key's), nor FULLTEXT, SPATIAL or VECTOR indexes (their reads are not counted per
    /// index). A table not opened since the server started has no counts and is not judged.
    /// performance_schema OFF gives `insufficient_data` naming the setting, and so do counts
    /// the collector leaves out for their cost (each row of that summary visits every open
    /// table handle): above 20,000 InnoDB tables or 2,000 open table handles (estimated as
    /// `min(table_open_cache, tables)`), naming the limit.
    ///
    /// The counters start at the server's start; a `TRUNCATE` of that performance_schema table
    /// restarts them too, which powerdiag cannot see: do not truncate it within the period.
    ///
    /// ### Why is this bad?
    /// An index nobody reads still costs every write to its table (the evidence gives the
    /// table's rows written over the period), its pages in the buffer pool and on disk, and
    /// the optimizer's time to consider it.
    ///
    /// ### Remediation
    /// Check it is not needed by a rare job beyond the period (month-end reports), then drop it
    /// with the printed `ALTER TABLE … DROP INDEX` (powerdiag never runs it). MariaDB 10.6+ can
    /// hide it first instead — `ALTER TABLE t ALTER INDEX k IGNORED` — and drop it once nothing
    /// slowed down.
    pub struct UnusedIndex {
        code: "PD706",
        name: "unused-index",
        severity: Info,
        scope: Database,
        summary: "an index was never read over a long enough period",
        fails_when: "a non-unique B-tree index, not needed by a foreign key, has no row read through it since statistics began, and they began at least `min_period` (7 days) ago",
        severity_why: "info: an unused index costs every write and memory, but removing it only saves; nothing fails because of it",
        thresholds: [MIN_PERIOD],
    }
}

const MIN_PERIOD: Threshold = Threshold {
    key: "min_period",
    default: 604_800.0,
    min: 1.0,
    max: 31_536_000.0,
    unit: Unit::Count,
    doc: "seconds of statistics (server uptime) before an index without reads is judged unused",
};

fn judged(i: &Index, t: &Table) -> bool {
    !i.unique && i.kind.eq_ignore_ascii_case("BTREE") && !i.serves_foreign_key(t)
}

impl Rule for UnusedIndex {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let schema = db.schema_facts()?;
        if let Some(why) = &schema.index_usage_unread {
            return Err(Verdict::insufficient(format!(
                "the indexes' reads are unknown: {why}"
            )));
        }
        let uptime = db.status_u64(StatusVar::Uptime)?;
        let min = limits.count(&MIN_PERIOD);
        if uptime < min {
            return Err(Verdict::insufficient(format!(
                "the index statistics cover {} since the server started: an index is judged unused after {} ({} left)",
                format_secs(uptime),
                format_secs(min),
                format_secs(min - uptime)
            )));
        }
        let now = s.taken()?.unix_timestamp();
        // A table rebuilt within the period has counts since then only; one whose creation
        // time was not read (not opened by the bounded read) is not judged either.
        let recent = |t: &Table| t.created_at.is_none_or(|c| now - c < min as i64);
        let unknown = schema
            .tables
            .iter()
            .filter(|t| t.created_at.is_none() && t.indexes.iter().any(|i| judged(i, t) && i.reads == Some(0)))
            .count();
        let waiting = schema
            .tables
            .iter()
            .filter(|t| t.created_at.is_some() && recent(t) && t.indexes.iter().any(|i| judged(i, t)))
            .count();
        let mut found: Vec<(&Table, &Index)> = schema
            .tables
            .iter()
            .filter(|t| !recent(t))
            .flat_map(|t| t.indexes.iter().map(move |i| (t, i)))
            .filter(|(t, i)| judged(i, t) && i.reads == Some(0))
            .collect();
        let waiting_note = if waiting > 0 {
            format!(
                "; {waiting} table(s) created or rebuilt within {} are judged once that has passed",
                format_secs(min)
            )
        } else {
            String::new()
        };
        let waiting_note = if unknown > 0 {
            format!(
                "{waiting_note}; {unknown} table(s) with an unread index not judged: their creation time (when their counts restarted) was not read (the read opens a bounded number of tables)"
            )
        } else {
            waiting_note
        };
        if found.is_empty() && unknown > 0 {
            return Err(Verdict::insufficient(format!(
                "no judged index is unread in {} since the server started{}{waiting_note}",
                format_secs(uptime),
                schema.left_out_note()
            )));
        }
        if found.is_empty() {
            return Ok(Verdict::pass(format!(
                "every judged index was read in the last {} (since the server started){}{waiting_note}",
                format_secs(uptime),
                schema.left_out_note()
            )));
        }
        found.sort_by_key(|(t, i)| std::cmp::Reverse((t.writes.unwrap_or(0), i.bytes.unwrap_or(0))));
        let bytes: u64 = found.iter().filter_map(|(_, i)| i.bytes).sum();
        let evidence = shown(&found, |(t, i)| {
            let mut cost = Vec::new();
            if let Some(w) = t.writes {
                cost.push(format!("{w} rows written to its table"));
            }
            if let Some(b) = i.bytes {
                cost.push(format_bytes(b));
            }
            format!(
                "{}: {}: no row read in {}{}",
                t.display(),
                i.definition(),
                format_secs(uptime),
                if cost.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", cost.join(", "))
                }
            )
        });
        let ddl = shown(&found, |(t, i)| {
            ddl_line(t, "drop its index", |q| {
                Some(format!("ALTER TABLE {q} DROP INDEX {};", quote_ident(&i.name)?))
            })
        });
        Ok(Verdict::fail(format!(
            "{} index(es) never read in {} since the server started{}{}{waiting_note}",
            found.len(),
            format_secs(uptime),
            if bytes > 0 {
                format!(" ({})", format_bytes(bytes))
            } else {
                String::new()
            },
            schema.left_out_note()
        ))
        .with_evidence_lines(evidence)
        .with_remediation(format!(
            "Check no rare job needs them, then drop them (text only: powerdiag never runs it; on 10.6+ `ALTER TABLE … ALTER INDEX k IGNORED` hides one first):\n{}",
            ddl.join("\n")
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Status;
    use crate::testing::{SCHEMA_NOW as NOW, schema_index as index, schema_table as table, with_tables};
    use crate::testing::verdict;

    fn read(mut i: Index, n: u64) -> Index {
        i.reads = Some(n);
        i
    }

    fn up(mut s: Snapshot, secs: u64) -> Snapshot {
        s.mariadb
            .facts
            .as_mut()
            .unwrap()
            .status
            .insert(StatusVar::Uptime.name().into(), secs.to_string());
        s
    }

    pub(crate) fn failing_example() -> Snapshot {
        let mut orders = table(
            "orders",
            "InnoDB",
            vec![
                read(index("PRIMARY", true, &["id"]), 0),
                read(index("u_ref", true, &["ref"]), 0),
                read(index("k_used", false, &["customer_id"]), 1200),
                read(index("k_unused", false, &["note"]), 0),
                read(index("k_fk", false, &["shop_id"]), 0),
            ],
        );
        orders.writes = Some(90_000);
        orders.foreign_keys = vec![vec!["shop_id".into()]];
        up(with_tables(vec![orders]), 8 * 86_400)
    }

    #[test]
    fn only_the_unread_non_unique_index_without_a_foreign_key_fails() {
        let v = verdict(&UnusedIndex, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert_eq!(v.evidence.len(), 1, "{v:?}");
        assert!(v.evidence[0].starts_with("shop.orders: KEY `k_unused` (`note`): no row read in 8 d 0 h"), "{v:?}");
        assert!(v.evidence[0].contains("90000 rows written"), "{v:?}");
        assert!(v.remediation.unwrap().contains("ALTER TABLE `shop`.`orders` DROP INDEX `k_unused`;"));
    }

    #[test]
    fn too_short_a_period_or_no_counts_is_insufficient() {
        let v = verdict(&UnusedIndex, &up(failing_example(), 2 * 86_400));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("(5 d 0 h left)"), "{v:?}");
        let mut s = failing_example();
        if let crate::Gathered::Available(sc) = &mut s.mariadb.facts.as_mut().unwrap().schema {
            sc.index_usage_unread = Some("performance_schema = OFF".into());
        }
        let v = verdict(&UnusedIndex, &s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("performance_schema = OFF"), "{v:?}");
    }

    /// `ALTER TABLE` restarts a table's counts: rebuilt within the period, it waits.
    #[test]
    fn a_table_rebuilt_within_the_period_is_judged_later() {
        let mut s = failing_example();
        if let crate::Gathered::Available(sc) = &mut s.mariadb.facts.as_mut().unwrap().schema {
            sc.tables[0].created_at = Some(NOW - 3600);
        }
        let v = verdict(&UnusedIndex, &s);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("1 table(s) created or rebuilt within 7 d 0 h"), "{v:?}");
    }

    /// A creation time not read (the table was not opened): its counts may have restarted
    /// yesterday, so it is not judged; alone, that is `insufficient_data`.
    #[test]
    fn an_unknown_creation_time_is_not_judged() {
        let mut s = failing_example();
        if let crate::Gathered::Available(sc) = &mut s.mariadb.facts.as_mut().unwrap().schema {
            sc.tables[0].created_at = None;
        }
        let v = verdict(&UnusedIndex, &s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("1 table(s) with an unread index not judged: their creation time"), "{v:?}");
    }
}
