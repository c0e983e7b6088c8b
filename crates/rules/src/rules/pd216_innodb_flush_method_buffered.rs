use crate::{Limits, Rule, Snapshot, Var, Verdict, declare_rule};

use super::fix::{restart_with, set_global};

declare_rule! {
    /// ### What it does
    /// On Linux, checks that InnoDB reads and writes its data files with `O_DIRECT`, bypassing
    /// the kernel's page cache: on MariaDB 11.0 and later `innodb_data_file_buffering = OFF`
    /// (the variable that replaced `innodb_flush_method` for data files), before that
    /// `innodb_flush_method` = `O_DIRECT` or `O_DIRECT_NO_FSYNC`. pt-variable-advisor (3.5.7,
    /// `bin/pt-variable-advisor` 3738–3743) and PMM's advisor
    /// (`mysql_configuration_innodb_flush_method.yml`) flag anything but exactly `O_DIRECT`,
    /// so also `O_DIRECT_NO_FSYNC`, which passes here; neither reads
    /// `innodb_data_file_buffering`. MariaDB's default since 10.6 is `O_DIRECT`, which passes.
    ///
    /// ### Why is this bad?
    /// With buffered I/O every InnoDB page is cached twice: once in the buffer pool and again
    /// in the page cache. The copy in the page cache is memory the buffer pool could have
    /// used, and under memory pressure the kernel may swap the buffer pool out to keep it
    /// (PD504). Every write is also copied once more, through the page cache.
    ///
    /// ### Remediation
    /// MariaDB 11.0 and later: `SET GLOBAL innodb_data_file_buffering = OFF;` (dynamic;
    /// persist it under `[mariadbd]`). Before: `innodb_flush_method = O_DIRECT` under
    /// `[mariadbd]` and a restart. Keep buffered I/O only on a file system without
    /// `O_DIRECT` support (old tmpfs), and say so in the configuration.
    pub struct InnodbFlushMethodBuffered {
        code: "PD216",
        name: "innodb-flush-method-buffered",
        severity: Info,
        scope: Database,
        summary: "InnoDB data files go through the OS page cache: pages are cached twice",
        fails_when: "Linux and InnoDB data files buffered (`innodb_data_file_buffering=ON` on 11.x; else `innodb_flush_method` not `O_DIRECT*`)",
        severity_why: "info: double caching wastes memory but no slowdown is measured here, so it is advice",
    }
}

const DIRECT: [&str; 2] = ["o_direct", "o_direct_no_fsync"];

impl Rule for InnodbFlushMethodBuffered {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let os = match db.var(Var::VersionCompileOs) {
            Ok(os) => os.to_ascii_lowercase(),
            Err(_) if db.same_host == Some(true) => s.host()?.os.clone(),
            Err(v) => return Err(v),
        };
        if !os.contains("linux") {
            return Err(Verdict::not_applicable(format!(
                "O_DIRECT for InnoDB data files is judged on Linux; the server was built for {os}"
            )));
        }
        // MariaDB 11.0+: innodb_data_file_buffering decides for data files.
        if db.var(Var::InnodbDataFileBuffering).is_ok() {
            let buffered = db.var_bool(Var::InnodbDataFileBuffering)?;
            let evidence = format!(
                "innodb_data_file_buffering = {}",
                if buffered { "ON" } else { "OFF" }
            );
            return Ok(if buffered {
                Verdict::fail("innodb_data_file_buffering is ON: InnoDB data files go through the page cache as well as the buffer pool")
                    .with_evidence(evidence)
                    .with_remediation(set_global(&[(
                        "innodb_data_file_buffering",
                        "OFF".into(),
                        "OFF".into(),
                    )]))
            } else {
                Verdict::pass("InnoDB data files bypass the page cache (O_DIRECT)")
                    .with_evidence(evidence)
            });
        }
        let method = db.var(Var::InnodbFlushMethod)?.trim().to_ascii_lowercase();
        let evidence = format!("innodb_flush_method = {method}");
        Ok(if DIRECT.contains(&method.as_str()) {
            Verdict::pass(format!(
                "InnoDB data files bypass the page cache ({method})"
            ))
            .with_evidence(evidence)
        } else {
            Verdict::fail(format!(
                "innodb_flush_method is {method}: InnoDB data files go through the page cache as well as the buffer pool"
            ))
            .with_evidence(evidence)
            .with_remediation(restart_with(&[(
                "innodb_flush_method",
                String::new(),
                "O_DIRECT".into(),
            )]))
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    #[test]
    fn verdicts() {
        let check = |method: &str| {
            let s = SnapshotBuilder::new()
                .mariadb("10.11.14-MariaDB")
                .var(Var::InnodbFlushMethod, method)
                .build();
            verdict(&InnodbFlushMethodBuffered, &s)
        };
        assert_eq!(check("O_DIRECT").status, Status::Pass);
        assert_eq!(check("O_DIRECT_NO_FSYNC").status, Status::Pass);
        let v = check("fsync");
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.remediation
                .unwrap()
                .contains("innodb_flush_method = O_DIRECT")
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::InnodbDataFileBuffering, "ON")
            .build();
        let v = verdict(&InnodbFlushMethodBuffered, &s);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.remediation
                .unwrap()
                .starts_with("SET GLOBAL innodb_data_file_buffering = OFF;")
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .var(Var::VersionCompileOs, "Win64")
            .build();
        assert_eq!(
            verdict(&InnodbFlushMethodBuffered, &s).status,
            Status::NotApplicable
        );
    }
}
