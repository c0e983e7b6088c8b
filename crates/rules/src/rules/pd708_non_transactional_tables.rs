use crate::{
    Limits, Rule, Snapshot, Table, Threshold, Unit, Verdict, ddl_line, declare_rule, format_bytes,
    format_secs, shown,
};

declare_rule! {
    /// ### What it does
    /// Lists the MyISAM and Aria tables of user schemas (system schemas excluded) written to
    /// recently — rows written since statistics began (performance_schema), else a last write
    /// (`UPDATE_TIME`, which both engines keep) within {window} s — on a server whose other
    /// tables are InnoDB; busiest and largest first. A server with no InnoDB table at all is
    /// an application built on them: not applicable.
    ///
    /// ### Why is this bad?
    /// MyISAM and Aria lock whole tables: one slow `UPDATE` queues every reader and writer of
    /// the table behind it (`Table_locks_waited`). MyISAM has no crash recovery — a crash can
    /// leave a table marked crashed, to be repaired, with lost rows; Aria recovers its own
    /// tables (`TRANSACTIONAL=1`) but neither takes part in InnoDB's transactions: a rollback
    /// or a failed multi-table change leaves their rows behind, and a consistent backup
    /// (`mariadb-dump --single-transaction`, Mariabackup) must lock them.
    ///
    /// ### Remediation
    /// Convert them — `ALTER TABLE t ENGINE=InnoDB` per table, printed by the finding
    /// (powerdiag never runs it); FULLTEXT and SPATIAL indexes work in InnoDB; a table rebuild
    /// that needs room for a copy of the table.
    pub struct NonTransactionalTables {
        code: "PD708",
        name: "non-transactional-tables",
        severity: Warning,
        scope: Database,
        summary: "MyISAM or Aria tables are being written on an InnoDB server",
        fails_when: "a user MyISAM/Aria table was written since statistics began or within `window` (1 day), while the server has InnoDB tables",
        severity_why: "warning: table locks queue every session behind one write, and a crash or rollback can lose or keep rows InnoDB's transactions would not",
        thresholds: [WINDOW],
    }
}

const WINDOW: Threshold = Threshold {
    key: "window",
    default: 86_400.0,
    min: 60.0,
    max: 31_536_000.0,
    unit: Unit::Count,
    doc: "seconds: a table whose last write (UPDATE_TIME) is this recent counts as written",
};

fn non_transactional(t: &Table) -> bool {
    (t.is_engine("MyISAM") || t.is_engine("Aria"))
        && !crate::SYSTEM_SCHEMAS
            .iter()
            .any(|s| s.eq_ignore_ascii_case(&t.schema))
}

impl Rule for NonTransactionalTables {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let schema = s.db()?.schema_facts()?;
        let window = limits.count(&WINDOW);
        let innodb = schema.innodb_tables;
        let candidates: Vec<&Table> = schema.tables.iter().filter(|t| non_transactional(t)).collect();
        if innodb == 0 {
            return Err(Verdict::not_applicable(format!(
                "no InnoDB table among the {}: an application on {} only",
                schema.tables_total,
                if candidates.is_empty() { "other engines" } else { "MyISAM/Aria" },
            )));
        }
        let now = s.taken()?.unix_timestamp();
        let ago = |t: &Table| t.updated_at.map(|at| (now - at).max(0) as u64);
        let written = |t: &Table| {
            t.writes.is_some_and(|w| w > 0) || ago(t).is_some_and(|a| a <= window)
        };
        let mut found: Vec<&Table> = candidates.iter().copied().filter(|t| written(t)).collect();
        let idle = candidates.len() - found.len();
        if found.is_empty() {
            return Ok(Verdict::pass(format!(
                "no MyISAM/Aria table written within {} beside {innodb} InnoDB table(s){}{}",
                format_secs(window),
                if idle > 0 {
                    format!(" ({idle} MyISAM/Aria table(s) not written)")
                } else {
                    String::new()
                },
                schema.left_out_note()
            )));
        }
        found.sort_by_key(|t| std::cmp::Reverse((t.writes.unwrap_or(0), t.data_bytes.unwrap_or(0))));
        let evidence = shown(&found, |t| {
            let mut what = vec![t.engine.clone().unwrap_or_default()];
            if let Some(w) = t.writes.filter(|w| *w > 0) {
                what.push(format!("{w} rows written since statistics began"));
            }
            if let Some(a) = ago(t) {
                what.push(format!("last written {} ago", format_secs(a)));
            }
            if let Some(b) = t.data_bytes {
                what.push(format_bytes(b));
            }
            format!("{}: {}", t.display(), what.join(", "))
        });
        let ddl = shown(&found, |t| {
            ddl_line(t, "convert it", |q| Some(format!("ALTER TABLE {q} ENGINE=InnoDB;")))
        });
        Ok(Verdict::fail(format!(
            "{} MyISAM/Aria table(s) written beside {innodb} InnoDB table(s), the busiest {}{}",
            found.len(),
            found[0].display(),
            schema.left_out_note()
        ))
        .with_evidence_lines(evidence)
        .with_remediation(format!(
            "Convert them to InnoDB (text only: powerdiag never runs it; each is a table rebuild):\n{}",
            ddl.join("\n")
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Status;
    use crate::testing::{SCHEMA_NOW as NOW, schema_table as table, with_tables};
    use crate::testing::verdict;

    pub(crate) fn failing_example() -> Snapshot {
        let mut aria = table("sessions", "Aria", Vec::new());
        aria.updated_at = Some(NOW - 30);
        let mut old = table("archive", "MyISAM", Vec::new());
        old.updated_at = Some(NOW - 30 * 86_400);
        let mut sys = table("user", "Aria", Vec::new());
        sys.schema = "mysql".into();
        sys.updated_at = Some(NOW - 5);
        with_tables(vec![table("orders", "InnoDB", Vec::new()), aria, old, sys])
    }

    #[test]
    fn written_tables_fail_idle_and_system_ones_do_not() {
        let v = verdict(&NonTransactionalTables, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.starts_with("1 MyISAM/Aria table(s)"), "{v:?}");
        assert!(v.evidence[0].starts_with("shop.sessions: Aria, last written 30 s ago"), "{v:?}");
        assert!(v.remediation.unwrap().contains("ALTER TABLE `shop`.`sessions` ENGINE=InnoDB;"));
        // Writes counted by performance_schema decide too.
        let mut s = failing_example();
        if let crate::Gathered::Available(sc) = &mut s.mariadb.facts.as_mut().unwrap().schema {
            sc.tables[1].updated_at = None;
            sc.tables[1].writes = Some(0);
            sc.tables[2].writes = Some(12);
        }
        let v = verdict(&NonTransactionalTables, &s);
        assert!(v.evidence[0].starts_with("shop.archive: MyISAM, 12 rows written"), "{v:?}");
    }

    #[test]
    fn converted_passes_and_an_all_aria_server_is_not_applicable() {
        let v = verdict(
            &NonTransactionalTables,
            &with_tables(vec![table("orders", "InnoDB", Vec::new()), table("sessions", "InnoDB", Vec::new())]),
        );
        assert_eq!(v.status, Status::Pass);
        let mut s = with_tables(vec![table("sessions", "Aria", Vec::new())]);
        if let crate::Gathered::Available(sc) = &mut s.mariadb.facts.as_mut().unwrap().schema {
            sc.innodb_tables = 0;
        }
        let v = verdict(&NonTransactionalTables, &s);
        assert_eq!(v.status, Status::NotApplicable, "{v:?}");
    }
}
