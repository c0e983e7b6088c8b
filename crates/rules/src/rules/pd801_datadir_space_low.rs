use crate::{
    Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, os::pct, value::format_bytes,
};

declare_rule! {
    /// ### What it does
    /// Checks the free space of every filesystem that holds the server's `datadir`, `tmpdir`
    /// or InnoDB log directory (`innodb_log_group_home_dir`): less than {min_free} of it free
    /// fails, and below {critical_free} the finding says the server is about to stop. Free
    /// space is what mariadbd can use (`statvfs` `f_bavail`, net of the root reserve), read in
    /// the server's own mount namespace. Only a server on this host is checked; for a remote
    /// server, or a snapshot without the filesystems, the verdict is `insufficient_data`.
    ///
    /// ### Why is this bad?
    /// A full `datadir` stops every write: InnoDB cannot extend a tablespace or write its redo
    /// log, and the server waits or fails statements with "The table is full". A full `tmpdir`
    /// fails the large sorts and GROUP BYs that spill there (PD208, PD704), often long before
    /// anyone looks at the disk. MySQLTuner 2.9.1 warns at 85% used (space or inodes) on every
    /// mount point of `df -P` (`mysqltuner.pl` 4892–4928); the node-mixin warns below 5% free
    /// and goes critical below 3%, each for 30 min (`alerts.libsonnet` 48–80); powerdiag
    /// follows the 10% / 5% of the common database-host runbooks.
    ///
    /// ### Remediation
    /// Free space (old binary logs: `PURGE BINARY LOGS BEFORE NOW() - INTERVAL 3 DAY`; dumps
    /// and core files left in the datadir), grow the filesystem, or move `tmpdir` to a larger
    /// one (`tmpdir = /path` under `[mysqld]` in my.cnf; a restart). Watch it from the agent:
    /// `powerdiag_filesystem_avail_bytes`.
    pub struct DatadirSpaceLow {
        code: "PD801",
        name: "datadir-space-low",
        severity: Warning,
        scope: Host,
        summary: "a filesystem of the server's datadir, tmpdir or redo log is nearly full",
        fails_when: "the filesystem of `datadir`, `tmpdir` or the InnoDB log directory has < 10% free (critically low < 5%); a server on this host only",
        severity_why: "warning: a nearly full filesystem makes failed writes likely as the present load grows it",
        thresholds: [MIN_FREE, CRITICAL_FREE],
    }
}

const MIN_FREE: Threshold = Threshold {
    key: "min_free",
    default: 0.10,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "free share of the filesystem below which it is reported",
};
const CRITICAL_FREE: Threshold = Threshold {
    key: "critical_free",
    default: 0.05,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "free share below which the finding says writes are about to stop",
};

impl Rule for DatadirSpaceLow {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let filesystems = s.storage()?;
        if filesystems.is_empty() {
            return Err(Verdict::insufficient(
                "no filesystem of the server was read",
            ));
        }
        let mut evidence = Vec::new();
        let mut low = Vec::new();
        // A directory whose size is unknown is never "enough free": it keeps the verdict from
        // passing, though another directory's low space still fails.
        let mut unread = Vec::new();
        for f in filesystems {
            if let Some(why) = &f.space_unread {
                unread.push(format!("{} ({}): {why}", f.roles.join(", "), f.path));
                continue;
            }
            if f.total_bytes == 0 {
                unread.push(format!(
                    "{} ({}): the filesystem reports a size of 0",
                    f.roles.join(", "),
                    f.path
                ));
                continue;
            }
            let free = f.available_bytes as f64 / f.total_bytes as f64;
            let line = format!(
                "{} ({}) on {} ({}): {} free of {} ({})",
                f.roles.join(", "),
                f.path,
                f.mount_point.as_deref().unwrap_or("?"),
                f.fs_type.as_deref().unwrap_or("?"),
                format_bytes(f.available_bytes),
                format_bytes(f.total_bytes),
                pct(free)
            );
            evidence.push(line);
            if free < limits.get(&MIN_FREE) {
                let critical = free < limits.get(&CRITICAL_FREE);
                low.push(format!(
                    "{} {} {} free ({}){}",
                    f.roles.join(" and "),
                    if f.roles.len() > 1 { "have" } else { "has" },
                    format_bytes(f.available_bytes),
                    pct(free),
                    if critical {
                        ": critically low, writes will stop soon"
                    } else {
                        ""
                    }
                ));
            }
        }
        let mut v = if !low.is_empty() {
            Verdict::fail(low.join("; "))
        } else if !unread.is_empty() {
            Verdict::insufficient(format!("free space unknown for {}", unread.join("; ")))
        } else {
            Verdict::pass(format!(
                "every filesystem of the server has at least {} free",
                pct(limits.get(&MIN_FREE))
            ))
        };
        for e in evidence
            .into_iter()
            .chain(unread.into_iter().map(|u| format!("unknown: {u}")))
        {
            v = v.with_evidence(e);
        }
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Gathered, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn with_free(available: u64, total: u64) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(fs) = &mut o.storage {
                    fs[0].available_bytes = available;
                    fs[0].total_bytes = total;
                }
            })
            .build();
        verdict(&DatadirSpaceLow, &s)
    }

    #[test]
    fn thresholds() {
        assert_eq!(with_free(50, 100).status, Status::Pass);
        let v = with_free(8 << 20, 100 << 20);
        assert_eq!(v.status, Status::Fail);
        assert!(!v.summary.contains("critically"), "{}", v.summary);
        let v = with_free(3 << 20, 100 << 20);
        assert!(v.summary.contains("critically low"), "{}", v.summary);
        assert!(
            v.summary
                .starts_with("datadir and innodb_log_group_home_dir have 3 MiB free"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn a_directory_whose_space_is_unknown_never_passes() {
        let with = |available: u64, unread: &str| {
            let s = SnapshotBuilder::new()
                .os(|o| {
                    if let Gathered::Available(fs) = &mut o.storage {
                        fs[0].available_bytes = available;
                        fs[0].total_bytes = 100 << 20;
                        let mut other = fs[0].clone();
                        other.roles = vec!["tmpdir".into()];
                        other.path = "/srv/tmp".into();
                        other.total_bytes = 0;
                        other.available_bytes = 0;
                        if !unread.is_empty() {
                            other.space_unread = Some(unread.into());
                        }
                        fs.push(other);
                    }
                })
                .build();
            verdict(&DatadirSpaceLow, &s)
        };
        let v = with(50 << 20, "/srv/tmp: permission denied");
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(
            v.summary
                .contains("tmpdir (/srv/tmp): /srv/tmp: permission denied"),
            "{}",
            v.summary
        );
        // A size of 0 is not a filesystem with room to spare.
        let v = with(50 << 20, "");
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("size of 0"), "{}", v.summary);
        // What is known to be low still fails.
        let v = with(2 << 20, "/srv/tmp: permission denied");
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.evidence.iter().any(|e| e.starts_with("unknown: tmpdir")),
            "{v:?}"
        );
    }

    #[test]
    fn unknown_is_insufficient() {
        let s = SnapshotBuilder::new()
            .os(|o| {
                o.storage = Gathered::Unavailable(
                    "unavailable: the server runs on another host (its filesystems are not here)"
                        .into(),
                )
            })
            .build();
        let v = verdict(&DatadirSpaceLow, &s);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("another host"), "{}", v.summary);
    }
}
