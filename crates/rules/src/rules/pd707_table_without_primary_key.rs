use crate::{Limits, Rule, Snapshot, Table, Var, Verdict, ddl_line, declare_rule, format_bytes, shown};

declare_rule! {
    /// ### What it does
    /// Lists the InnoDB tables without a primary key — nor a UNIQUE key whose columns are all
    /// NOT NULL, which InnoDB would cluster the rows by instead — largest first, with their
    /// row estimates. Evidence names the server's binary log format and Galera, where the
    /// missing key costs most.
    ///
    /// ### Why is this bad?
    /// InnoDB then clusters the rows by a hidden 6-byte row id (`GEN_CLUST_INDEX`) from one
    /// counter shared by all such tables (a global mutex on every insert), and no query can
    /// use it. With row-based replication (`binlog_format=ROW` or `MIXED`) a replica applies
    /// each changed row by finding it: without a key, one full table scan per row — an
    /// `UPDATE` of 10,000 rows of a 1,000,000-row table is 10,000 scans on every replica, the
    /// classic cause of a lag that never catches up. Galera certifies writes by key: it needs a
    /// primary key on every replicated table (`wsrep_certify_nonPK` works around it with a
    /// generated one, badly), and `innodb_force_primary_key` exists to refuse such tables.
    ///
    /// ### Remediation
    /// Add a primary key: the columns that identify a row (`ALTER TABLE t ADD PRIMARY KEY
    /// (a, b)`, after making them NOT NULL), or a surrogate one — the finding prints the
    /// statement per table (powerdiag never runs it). Then consider
    /// `innodb_force_primary_key = ON` so new tables cannot be created without one.
    pub struct TableWithoutPrimaryKey {
        code: "PD707",
        name: "table-without-primary-key",
        severity: Warning,
        scope: Database,
        summary: "InnoDB tables have no primary key",
        fails_when: "an InnoDB table has neither a PRIMARY KEY nor a UNIQUE key on NOT NULL columns",
        severity_why: "warning: every row change of such a table costs a full scan on each row-based replica, and Galera cannot certify it safely; nothing fails on a standalone server",
    }
}

impl Rule for TableWithoutPrimaryKey {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let schema = db.schema_facts()?;
        let mut found: Vec<&Table> = schema
            .tables
            .iter()
            .filter(|t| t.is_engine("InnoDB") && t.clustered_key().is_none())
            .collect();
        let innodb = schema.innodb_tables;
        if found.is_empty() {
            return Ok(Verdict::pass(format!(
                "every InnoDB table has a primary key ({innodb} InnoDB table(s){})",
                schema.left_out_note()
            )));
        }
        found.sort_by_key(|t| std::cmp::Reverse((t.rows.unwrap_or(0), t.data_bytes.unwrap_or(0))));
        let mut evidence = shown(&found, |t| {
            format!(
                "{}: ~{} rows{}",
                t.display(),
                t.rows.map_or("?".into(), |r| r.to_string()),
                t.data_bytes
                    .map(|b| format!(", {}", format_bytes(b)))
                    .unwrap_or_default()
            )
        });
        let binlog = db.var(Var::BinlogFormat).ok().map(str::to_ascii_uppercase);
        let log_bin = db.var_bool(Var::LogBin).ok();
        match (log_bin, binlog.as_deref()) {
            (Some(true), Some(f @ ("ROW" | "MIXED"))) => evidence.push(format!(
                "binary log on, binlog_format = {f}: a replica applies each changed row of these tables with a full scan"
            )),
            (Some(true), Some(f)) => evidence.push(format!("binary log on, binlog_format = {f}")),
            (Some(false), _) => evidence.push("binary log off: no replica reads this server's changes".into()),
            _ => {}
        }
        if db.var_bool(Var::WsrepOn).unwrap_or(false) {
            evidence.push("wsrep_on = ON: Galera needs a primary key on every replicated table".into());
        }
        let ddl = shown(&found, |t| {
            ddl_line(t, "add a primary key", |q| {
                Some(format!(
                    "ALTER TABLE {q} ADD COLUMN `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST;"
                ))
            })
        });
        let rows: u64 = found.iter().filter_map(|t| t.rows).sum();
        Ok(Verdict::fail(format!(
            "{} InnoDB table(s) without a primary key (~{rows} rows), the largest {} (~{} rows){}",
            found.len(),
            found[0].display(),
            found[0].rows.map_or("?".into(), |r| r.to_string()),
            schema.left_out_note()
        ))
        .with_evidence_lines(evidence)
        .with_remediation(format!(
            "Give each a primary key — better the columns that identify a row (`ALTER TABLE … ADD PRIMARY KEY (a, b)` after making them NOT NULL); else a surrogate key (text only: powerdiag never runs it; pick another column name if `id` exists, and expect a table rebuild):\n{}\nThen `innodb_force_primary_key = ON` refuses new tables without one.",
            ddl.join("\n")
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Status;
    use crate::testing::{schema_index as index, schema_table as table, with_tables};
    use crate::testing::verdict;

    pub(crate) fn failing_example() -> Snapshot {
        let mut big = table("events", "InnoDB", vec![index("k_at", false, &["at"])]);
        big.rows = Some(1_000_000);
        with_tables(vec![
            table("small", "InnoDB", Vec::new()),
            big,
            table("ok", "InnoDB", vec![index("PRIMARY", true, &["id"])]),
            table("legacy", "Aria", Vec::new()),
        ])
    }

    #[test]
    fn innodb_tables_without_a_key_fail_largest_first() {
        let v = verdict(&TableWithoutPrimaryKey, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.starts_with("2 InnoDB table(s)"), "{v:?}");
        assert!(v.evidence[0].starts_with("shop.events: ~1000000 rows"), "{v:?}");
        let fix = v.remediation.unwrap();
        assert!(fix.contains("ALTER TABLE `shop`.`events` ADD COLUMN `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST;"), "{fix}");
    }

    #[test]
    fn a_unique_not_null_key_clusters_and_passes() {
        let mut u = index("u", true, &["code"]);
        u.clustered = true;
        let t = table("t", "InnoDB", vec![u.clone()]);
        assert_eq!(verdict(&TableWithoutPrimaryKey, &with_tables(vec![t])).status, Status::Pass);
        u.clustered = false;
        let t = table("t", "InnoDB", vec![u]);
        assert_eq!(verdict(&TableWithoutPrimaryKey, &with_tables(vec![t])).status, Status::Fail);
    }
}
