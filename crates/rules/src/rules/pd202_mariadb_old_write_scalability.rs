use crate::{Flavour, Impact, Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Flags MariaDB servers older than 10.3.4 on hosts with {min_hardware_threads} or more
    /// hardware threads.
    ///
    /// ### Why is this bad?
    /// MariaDB 10.3.4 rewrote the hot paths of InnoDB write transactions: undo logging, the
    /// TRX_SYS page, ReadView creation, the rw_trx lists (replaced by a lock-free hash),
    /// rw-lock memory barriers and `Threads_running` accounting (MDEV-15090, MDEV-15132,
    /// MDEV-15019, MDEV-14756, MDEV-14482, MDEV-15158, MDEV-15104, MDEV-14638, MDEV-14529,
    /// MDEV-14374, MDEV-14505). On a 48-core ARM server (Centriq 2400) single-row updates ran
    /// up to 48% faster than on 10.2 at high thread counts. Older servers leave that on the
    /// table on every many-core machine, POWER and x86 alike.
    ///
    /// ### Remediation
    /// Upgrade to a maintained MariaDB release (10.6 or later; 10.11 or 11.4/11.8 LTS).
    /// Follow the upgrade path one major version at a time and run `mariadb-upgrade` after
    /// each step.
    pub struct MariadbOldWriteScalability {
        code: "PD202",
        name: "mariadb-old-write-scalability",
        severity: Warning,
        scope: Database,
        summary: "MariaDB older than 10.3.4 on a many-core host misses the write-scalability fixes",
        fails_when: "MariaDB older than 10.3.4 on a host with ≥ 16 hardware threads",
        severity_why: "warning: servers before 10.3.4 lose write throughput on many cores (up to 48% measured elsewhere), likely under a concurrent write load",
        thresholds: [MIN_THREADS],
        impact: [VERSION_DIFFERS],
    }
}

/// Two different MariaDB releases.
const VERSION_DIFFERS: Impact = Impact {
    factor: 1.1,
    evidence: "versions differ in their defaults and code paths; 10.3.4's write-scalability work gave up to 48% on 48 cores",
};

const MIN_THREADS: Threshold = Threshold {
    key: "min_hardware_threads",
    default: 16.0,
    min: 1.0,
    max: 1e6,
    unit: Unit::Count,
    doc: "hardware threads from which the 10.3.4 fixes matter",
};

impl Rule for MariadbOldWriteScalability {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let v = &db.version;
        if v.flavour != Flavour::Mariadb {
            return Err(Verdict::not_applicable(format!("{} is not MariaDB", v.raw)));
        }
        if v.at_least(10, 3, 4) {
            return Ok(Verdict::pass(format!(
                "MariaDB {} has the 10.3.4 scalability fixes",
                v.short()
            )));
        }
        let host = s.db_host()?;
        let Some(threads) = host.hardware_threads else {
            return Err(Verdict::insufficient(
                "the host's hardware thread count is unknown",
            ));
        };
        let evidence = format!("MariaDB {}; {threads} hardware threads", v.short());
        let min_threads = limits.count(&MIN_THREADS);
        if u64::from(threads) >= min_threads {
            Ok(Verdict::fail(format!(
                "MariaDB {} predates the 10.3.4 write-scalability fixes and runs on {threads} hardware threads",
                v.short()
            ))
            .with_evidence(evidence))
        } else {
            Ok(Verdict::pass(format!(
                "MariaDB {} is old, but {threads} hardware threads are below the {min_threads} where it matters",
                v.short()
            ))
            .with_evidence(evidence))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::old_server()
    }

    fn check(version: &str, threads: Option<u32>) -> Verdict {
        let s = SnapshotBuilder::new()
            .mariadb(version)
            .host(|h| h.hardware_threads = threads)
            .build();
        verdict(&MariadbOldWriteScalability, &s)
    }

    #[test]
    fn verdicts() {
        assert_eq!(check("10.2.44-MariaDB", Some(48)).status, Status::Fail);
        assert_eq!(check("10.3.3-MariaDB", Some(16)).status, Status::Fail);
        assert_eq!(check("10.3.4-MariaDB", Some(48)).status, Status::Pass);
        assert_eq!(check("10.2.44-MariaDB", Some(8)).status, Status::Pass);
        assert_eq!(
            check("10.2.44-MariaDB", None).status,
            Status::InsufficientData
        );
    }

    #[test]
    fn other_flavours_and_remote_hosts() {
        let s = SnapshotBuilder::new().mariadb("10.1.0-MariaDB").build();
        let mut s2 = s.clone();
        if let Some(f) = s2.mariadb.facts.as_mut() {
            f.version = crate::ServerVersion::parse("5.7.44", "MySQL Community Server").unwrap();
        }
        assert_eq!(
            verdict(&MariadbOldWriteScalability, &s2).status,
            Status::NotApplicable
        );
        let remote = SnapshotBuilder::new()
            .mariadb("10.2.1-MariaDB")
            .host(|h| h.hardware_threads = Some(64))
            .remote_server()
            .build();
        let v = verdict(&MariadbOldWriteScalability, &remote);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("another host"));
    }
}
