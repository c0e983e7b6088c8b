use crate::{Limits, Rule, Snapshot, Var, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Checks `innodb_checksum_algorithm`: page checksums should use CRC-32C (`crc32`,
    /// `full_crc32` and their `strict_` forms), which MariaDB computes with the CPU's CRC
    /// instructions where the CPU has them (POWER8+ `vpmsum`, x86 SSE4.2/PCLMUL, ARMv8 CRC32).
    ///
    /// Not applicable on MariaDB 10.6 and later: they accept only the CRC-32C family
    /// (`innodb_checksum_algorithm_names` in `storage/innobase/handler/ha_innodb.cc`), so the
    /// setting cannot be wrong. Whether the CPU accelerates it is a property of the build and
    /// the CPU, which InnoDB prints at start-up (`srv_start()`): `InnoDB: Using generic crc32
    /// instructions` in the error log is the software fallback; `Using crc32 + pclmulqdq`,
    /// `Using POWER8 crc32 instructions` or `Using ARMv8 crc32` are hardware.
    ///
    /// ### Why is this bad?
    /// The legacy `innodb` checksum is computed in software on every page read and write. On
    /// POWER8, software CRC32 cost about 30% of the CPU on write- and I/O-heavy loads; the
    /// vpmsum-accelerated CRC32 (merged in MariaDB 10.1) was indistinguishable from checksums
    /// off, and hardware CRC32 is about 41× faster than the best software one. x86 with SSE4.2
    /// tells the same story. `none` avoids the cost but gives up corruption detection.
    ///
    /// ### Remediation
    /// ```ini
    /// [mariadbd]
    /// innodb_checksum_algorithm = full_crc32
    /// ```
    ///
    /// `full_crc32` applies to tablespaces created afterwards; existing files keep their format
    /// and are still read (use `crc32` to keep the old page format). On MariaDB before 10.6 the
    /// variable is dynamic: `SET GLOBAL innodb_checksum_algorithm = 'full_crc32';`.
    pub struct InnodbChecksumSoftware {
        code: "PD201",
        name: "innodb-checksum-software",
        severity: Warning,
        scope: Database,
        summary: "InnoDB page checksums are computed in software instead of with hardware CRC-32C",
        fails_when: "`innodb_checksum_algorithm` is not a crc32 variant",
        severity_why: "warning: a software checksum costs CPU on every page read and written, likely under a write-heavy load (up to ~30% measured on POWER8)",
    }
}

const HARDWARE: [&str; 4] = ["crc32", "strict_crc32", "full_crc32", "strict_full_crc32"];

impl Rule for InnodbChecksumSoftware {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        if db.version.flavour == crate::Flavour::Mariadb && db.version.at_least(10, 6, 0) {
            return Err(Verdict::not_applicable(format!(
                "MariaDB {}.{} accepts only CRC-32C page checksums (crc32, full_crc32 and their strict_ forms); whether the CPU accelerates them is in the error log at start-up ('InnoDB: Using generic crc32 instructions' is software)",
                db.version.major, db.version.minor
            )));
        }
        let algo = db
            .var(Var::InnodbChecksumAlgorithm)?
            .trim()
            .to_ascii_lowercase();
        let evidence = format!("innodb_checksum_algorithm = {algo}");
        if HARDWARE.contains(&algo.as_str()) {
            Ok(
                Verdict::pass(format!(
                    "InnoDB uses {algo} (CRC-32C, hardware-accelerated where the CPU has CRC instructions)"
                ))
                    .with_evidence(evidence),
            )
        } else {
            Ok(Verdict::fail(format!(
                "innodb_checksum_algorithm is {algo}: page checksums are not hardware-accelerated CRC-32C"
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

    fn check(value: Option<&str>) -> Verdict {
        let b = SnapshotBuilder::new().mariadb("10.5.27-MariaDB");
        let b = match value {
            Some(v) => b.var(Var::InnodbChecksumAlgorithm, v),
            None => b.without_var(Var::InnodbChecksumAlgorithm),
        };
        verdict(&InnodbChecksumSoftware, &b.build())
    }

    #[test]
    fn verdicts() {
        assert_eq!(check(Some("full_crc32")).status, Status::Pass);
        assert_eq!(check(Some("STRICT_CRC32")).status, Status::Pass);
        assert_eq!(check(Some("innodb")).status, Status::Fail);
        assert_eq!(check(Some("none")).status, Status::Fail);
        assert_eq!(check(None).status, Status::InsufficientData);
    }

    #[test]
    fn not_applicable_from_10_6() {
        for version in ["10.6.21-MariaDB", "11.8.6-MariaDB"] {
            let s = SnapshotBuilder::new()
                .mariadb(version)
                .var(Var::InnodbChecksumAlgorithm, "full_crc32")
                .build();
            let v = verdict(&InnodbChecksumSoftware, &s);
            assert_eq!(v.status, Status::NotApplicable, "{version}: {v:?}");
            assert!(v.summary.contains("generic crc32"), "{v:?}");
        }
    }

    #[test]
    fn unreachable_server_is_insufficient() {
        let s = SnapshotBuilder::new().build();
        let v = verdict(&InnodbChecksumSoftware, &s);
        assert_eq!(v.status, Status::InsufficientData);
    }
}
