use crate::{LogEventKind, Limits, Rule, Snapshot, Var, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Checks `innodb_checksum_algorithm`: page checksums should use CRC-32C (`crc32`,
    /// `full_crc32` and their `strict_` forms), which MariaDB computes with the CPU's CRC
    /// instructions where the CPU has them (POWER8+ `vpmsum`, x86 SSE4.2/PCLMUL, ARMv8 CRC32).
    ///
    /// MariaDB 10.6 and later accept only the CRC-32C family
    /// (`innodb_checksum_algorithm_names` in `storage/innobase/handler/ha_innodb.cc`), so the
    /// setting cannot be wrong there; what is left is whether the CPU accelerates CRC-32C, a
    /// property of the build and the CPU that InnoDB prints at start-up (`srv_start()`):
    /// `InnoDB: Using generic crc32 instructions` in the error log is the software fallback;
    /// `Using crc32 + pclmulqdq`, `Using POWER8 crc32 instructions` or `Using ARMv8 crc32` are
    /// hardware. On these versions the rule judges that line of the running server's start
    /// (the error log's events; the agent keeps it while the server runs), and says
    /// `insufficient_data` when what was read of the log does not reach the start.
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
    ///
    /// "generic crc32" on 10.6+ means the CPU the server sees lacks the instructions: on x86
    /// SSE4.2 and PCLMULQDQ, most often hidden by a virtual machine's generic CPU model (give
    /// the guest the host's CPU: libvirt `host-passthrough`, QEMU `-cpu host`, or a named
    /// model that has both); on ARM the ARMv8 CRC32 extension; on POWER, POWER8 or later.
    pub struct InnodbChecksumSoftware {
        code: "PD201",
        name: "innodb-checksum-software",
        severity: Warning,
        scope: Database,
        summary: "InnoDB page checksums are computed in software instead of with hardware CRC-32C",
        fails_when: "`innodb_checksum_algorithm` is not a crc32 variant; on 10.6+ (crc32 only), the error log shows InnoDB chose the generic (software) CRC-32 at this start",
        severity_why: "warning: a software checksum costs CPU on every page read and written, likely under a write-heavy load (up to ~30% measured on POWER8)",
    }
}

const HARDWARE: [&str; 4] = ["crc32", "strict_crc32", "full_crc32", "strict_full_crc32"];

impl Rule for InnodbChecksumSoftware {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        if db.version.flavour == crate::Flavour::Mariadb && db.version.at_least(10, 6, 0) {
            return implementation_at_start(s, db);
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

/// How long before the start computed from `Uptime` a start-up line may be stamped and still
/// be this start's (the log's clock and the status read are not one instant).
const START_SLACK_SECS: i64 = 300;

/// MariaDB 10.6+: the CRC-32 implementation InnoDB logged at the running server's start.
fn implementation_at_start(s: &Snapshot, db: &crate::MariadbFacts) -> Result<Verdict, Verdict> {
    let series = format!("MariaDB {}.{}", db.version.major, db.version.minor);
    let log = db.error_log.as_ref().map_err(|why| {
        Verdict::insufficient(format!(
            "{series} accepts only CRC-32C page checksums; whether InnoDB computes them with CPU instructions is in the error log at start-up, which is not read: {why}"
        ))
    })?;
    let started = match (s.taken(), db.status_u64(crate::StatusVar::Uptime)) {
        (Ok(now), Ok(uptime)) => Some(now.unix_timestamp() - uptime as i64),
        _ => None,
    };
    // The newest CRC-32 line, if it belongs to this start: stamped no earlier than the start
    // (when both are known), and not followed by a later start-up.
    let newest = log.events.iter().rposition(|e| matches!(e.kind, LogEventKind::Crc32 { .. }));
    let this_start = newest.filter(|&i| {
        let e = &log.events[i];
        let later_start = log.events[i + 1..]
            .iter()
            .any(|e| e.kind == LogEventKind::Starting);
        let before_start = matches!((e.at, started), (Some(at), Some(st)) if at < st - START_SLACK_SECS);
        !later_start && !before_start
    });
    let Some(i) = this_start else {
        return Err(Verdict::insufficient(format!(
            "{series} accepts only CRC-32C page checksums; the line where InnoDB names its CRC-32 implementation at start-up is not in what was read of the error log ({}: {}){}",
            crate::display_text(&log.path, 160),
            log.read,
            if newest.is_some() { ": the one found is from an earlier start" } else { "" }
        )));
    };
    let e = &log.events[i];
    let LogEventKind::Crc32 { implementation } = &e.kind else {
        unreachable!("found by its kind")
    };
    let what = crate::display_text(implementation, 80);
    let evidence = format!("error log: {}", crate::display_text(&e.line, 200));
    if implementation.to_ascii_lowercase().contains("generic") {
        Ok(Verdict::fail(format!(
            "InnoDB computes CRC-32C page checksums in software ('Using {what} instructions'): the CPU the server sees has no CRC instructions (in a virtual machine, often a generic CPU model hiding SSE4.2/PCLMULQDQ)"
        ))
        .with_evidence(evidence))
    } else {
        Ok(Verdict::pass(format!(
            "InnoDB computes CRC-32C page checksums with CPU instructions ({what})"
        ))
        .with_evidence(evidence))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Gathered, LogEvent, StatusVar, Status, testing::SnapshotBuilder};

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

    const NOW: i64 = 1_795_809_600; // 2026-11-27T20:00:00Z, the taken_at below

    fn ev(at: i64, kind: LogEventKind, line: &str) -> LogEvent {
        LogEvent {
            at: Some(at),
            kind,
            line: line.into(),
        }
    }

    fn crc(at: i64, what: &str) -> LogEvent {
        ev(
            at,
            LogEventKind::Crc32 {
                implementation: what.into(),
            },
            &format!("2026-11-27 15:00:00 0 [Note] InnoDB: Using {what} instructions"),
        )
    }

    /// A server up `uptime` s whose log holds `events`.
    fn on(version: &str, uptime: u64, events: Vec<LogEvent>) -> Snapshot {
        let mut s = SnapshotBuilder::new()
            .mariadb(version)
            .status(StatusVar::Uptime, &uptime.to_string())
            .var(Var::InnodbChecksumAlgorithm, "full_crc32")
            .build();
        s.taken_at = Some("2026-11-27T20:00:00Z".into());
        if let Some(db) = s.mariadb.facts.as_mut()
            && let Gathered::Available(l) = &mut db.error_log
        {
            l.events = events;
        }
        s
    }

    /// From 10.6 the setting cannot be wrong: the start-up line decides, for every CPU family.
    #[test]
    fn from_10_6_the_start_up_line_decides() {
        for version in ["10.6.21-MariaDB", "11.8.6-MariaDB"] {
            for (what, status) in [
                ("crc32 + pclmulqdq", Status::Pass),
                ("POWER8 crc32", Status::Pass),
                ("ARMv8 crc32 + pmull", Status::Pass),
                ("generic crc32", Status::Fail),
            ] {
                let events = vec![
                    ev(NOW - 601, LogEventKind::Starting, "Starting MariaDB"),
                    crc(NOW - 600, what),
                    ev(NOW - 599, LogEventKind::Ready, "ready for connections."),
                ];
                let v = verdict(&InnodbChecksumSoftware, &on(version, 600, events));
                assert_eq!(v.status, status, "{version} {what}: {v:?}");
                assert!(v.evidence[0].contains(what), "{v:?}");
            }
        }
        let v = verdict(&InnodbChecksumSoftware, &failing_on_a_vm());
        assert!(v.summary.contains("virtual machine"), "{v:?}");
    }

    pub(crate) fn failing_on_a_vm() -> Snapshot {
        on("11.8.6-MariaDB", 60, vec![crc(NOW - 60, "generic crc32")])
    }

    /// The line must be this start's: an older one (before the start `Uptime` gives, or before
    /// a later start-up line) or none at all is not enough, and says what was read.
    #[test]
    fn without_this_starts_line_it_is_insufficient() {
        let old = vec![
            crc(NOW - 90_000, "generic crc32"),
            ev(NOW - 600, LogEventKind::Starting, "Starting MariaDB"),
        ];
        let v = verdict(&InnodbChecksumSoftware, &on("11.8.6-MariaDB", 600, old));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("earlier start"), "{v:?}");
        // Stamped a day before the start (an untimed later start-up line is not needed).
        let v = verdict(
            &InnodbChecksumSoftware,
            &on("11.8.6-MariaDB", 600, vec![crc(NOW - 90_000, "generic crc32")]),
        );
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        let v = verdict(&InnodbChecksumSoftware, &on("10.11.9-MariaDB", 600, Vec::new()));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("the last 4.0 MiB"), "{v:?}");
        let mut s = on("10.11.9-MariaDB", 600, Vec::new());
        s.mariadb.facts.as_mut().unwrap().error_log =
            Gathered::Unavailable("the server runs on another host".into());
        let v = verdict(&InnodbChecksumSoftware, &s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("another host"), "{v:?}");
    }

    #[test]
    fn unreachable_server_is_insufficient() {
        let s = SnapshotBuilder::new().build();
        let v = verdict(&InnodbChecksumSoftware, &s);
        assert_eq!(v.status, Status::InsufficientData);
    }
}
