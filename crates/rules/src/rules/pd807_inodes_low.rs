use crate::{Limits, Rule, Severity, Snapshot, Threshold, Unit, Verdict, declare_rule, os::pct};

declare_rule! {
    /// ### What it does
    /// Checks the inodes of every filesystem that holds the server's `datadir`, `tmpdir` or
    /// InnoDB log directory: fails, critical, when less than {critical_free} of them are free
    /// (`statvfs` `f_favail` of `f_files`), and as a warning below {min_free} — the node
    /// mixin's `NodeFilesystemAlmostOutOfFiles` limits (5% warning, 3% critical). A filesystem
    /// that allocates inodes as it needs them (btrfs reports 0) cannot run out this way and is
    /// passed over, saying so. Only a server on this host. On AIX the figures come from
    /// `df -k`'s `Iused` and `%Iused`: a rounded percentage, so the free share is known within
    /// about half a point (`%Iused` 0 counts as 99.5% free, its lower bound); JFS2 allocates
    /// inodes from free space, so there running out of inodes goes with running out of space
    /// (PD801).
    ///
    /// ### Why is this bad?
    /// Every table of a file-per-table server is at least one file (`.ibd`, `.frm`), and
    /// every binary log, relay log, temporary table and sort file another: a filesystem can
    /// run out of inodes with gigabytes free — typical of multi-tenant schemas with hundreds of
    /// thousands of tables, or a `tmpdir` littered with leftover files. Then `CREATE TABLE`,
    /// the next binary log, and any statement that spills to disk fail with "No space left on
    /// device" while `df -h` shows room.
    ///
    /// ### Remediation
    /// Find what holds them (`find DIR -xdev -type f | cut -d/ -f1-4 | sort | uniq -c | sort -n`):
    /// purge old binary logs (`PURGE BINARY LOGS BEFORE NOW() - INTERVAL 3 DAY`), remove
    /// leftover temporary and core files, drop unused tables. For the longer term, a
    /// filesystem made with more inodes (`mkfs.ext4 -i 8192`, or XFS, whose inodes grow with
    /// the space: `xfs_growfs -m` raises the share), or `tmpdir` on another filesystem.
    pub struct InodesLow {
        code: "PD807",
        name: "inodes-low",
        severity: Critical,
        scope: Host,
        summary: "a filesystem of the server's datadir, tmpdir or redo log is running out of inodes",
        fails_when: "< 3% of the inodes free (critical) or < 5% (warning) on the filesystem of `datadir`, `tmpdir` or the InnoDB log directory (node mixin); a server on this host only",
        severity_why: "critical: with no inode left, creating a table, a binary log or a temporary file fails now (a warning while 3–5% are left)",
        thresholds: [MIN_FREE, CRITICAL_FREE],
    }
}

const MIN_FREE: Threshold = Threshold {
    key: "min_free",
    default: 0.05,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "free share of the inodes below which it warns (node mixin: 5%)",
};
const CRITICAL_FREE: Threshold = Threshold {
    key: "critical_free",
    default: 0.03,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "free share of the inodes below which it is critical (node mixin: 3%)",
};

impl Rule for InodesLow {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let filesystems = s.storage()?;
        if filesystems.is_empty() {
            return Err(Verdict::insufficient(
                "no filesystem of the server was read",
            ));
        }
        let (warn, crit) = (limits.get(&MIN_FREE), limits.get(&CRITICAL_FREE));
        let mut evidence = Vec::new();
        let mut unread = Vec::new();
        let mut low: Vec<(f64, String)> = Vec::new();
        for f in filesystems {
            let name = format!(
                "{} ({}) on {} ({})",
                f.roles.join(", "),
                crate::display_text(&f.path, 128),
                crate::display_text(f.mount_point.as_deref().unwrap_or("?"), 128),
                crate::display_text(f.fs_type.as_deref().unwrap_or("?"), 32)
            );
            let (Some(total), Some(avail)) = (f.inodes_total, f.inodes_available) else {
                unread.push(format!(
                    "{name}: inodes not read{}",
                    f.space_unread
                        .as_deref()
                        .map(|w| format!(" ({w})"))
                        .unwrap_or_default()
                ));
                continue;
            };
            if total == 0 {
                evidence.push(format!(
                    "{name}: no fixed inode count (allocated as needed)"
                ));
                continue;
            }
            let free = avail as f64 / total as f64;
            evidence.push(format!(
                "{name}: {avail} of {total} inodes free ({})",
                pct(free)
            ));
            if free < warn {
                low.push((free, name));
            }
        }
        if !unread.is_empty() && low.is_empty() {
            let mut v = Verdict::insufficient(format!(
                "inodes unknown for {} (read from statvfs on Linux and df on AIX; trees recorded without them and filesystems that report none have none)",
                unread.join("; ")
            ));
            v.evidence = evidence;
            return Err(v);
        }
        evidence.extend(unread);
        if low.is_empty() {
            return Ok(Verdict::pass(format!(
                "every filesystem of the server has at least {} of its inodes free",
                pct(warn)
            ))
            .with_evidence_lines(evidence));
        }
        low.sort_by(|a, b| a.0.total_cmp(&b.0));
        let worst = low[0].0;
        let v = Verdict::fail(format!(
            "{} has only {} of its inodes free{}",
            low[0].1,
            pct(worst),
            if low.len() > 1 {
                format!(" ({} filesystems low)", low.len())
            } else {
                String::new()
            }
        ))
        .with_evidence_lines(evidence);
        Ok(if worst < crit {
            v
        } else {
            v.at_most(Severity::Warning)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Gathered, Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn with_inodes(total: Option<u64>, avail: Option<u64>) -> crate::Snapshot {
        SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(fs) = &mut o.storage {
                    fs[0].inodes_total = total;
                    fs[0].inodes_available = avail;
                }
            })
            .build()
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        with_inodes(Some(1_000_000), Some(12_000))
    }

    fn severity(s: &crate::Snapshot) -> Severity {
        crate::evaluate(s)
            .checks
            .into_iter()
            .find(|c| c.code == "PD807")
            .unwrap()
            .severity
    }

    #[test]
    fn thresholds_and_severities() {
        let s = failing_example();
        let v = verdict(&InodesLow, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("only 1.2% of its inodes free"), "{v:?}");
        assert_eq!(severity(&s), Severity::Critical);
        let s = with_inodes(Some(1_000_000), Some(40_000));
        assert_eq!(verdict(&InodesLow, &s).status, Status::Fail);
        assert_eq!(severity(&s), Severity::Warning);
        let s = with_inodes(Some(1_000_000), Some(400_000));
        assert_eq!(verdict(&InodesLow, &s).status, Status::Pass);
    }

    #[test]
    fn unknown_and_dynamic_inodes() {
        let v = verdict(&InodesLow, &with_inodes(None, None));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("inodes unknown"), "{v:?}");
        let v = verdict(&InodesLow, &with_inodes(Some(0), Some(0)));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.evidence[0].contains("allocated as needed"), "{v:?}");
    }
}
