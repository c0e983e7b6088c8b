use time::{Date, macros::format_description};

use crate::{
    Flavour, Limits, Rule, Severity, Snapshot, Threshold, Unit, Verdict, declare_rule,
    releases::{self, CHECKED, SERIES, Series},
};

declare_rule! {
    /// ### What it does
    /// Looks up the running MariaDB release series in the table of the MariaDB Foundation's
    /// maintenance policy (<https://mariadb.org/about/#maintenance-policy>; the table's
    /// source and the day it was last checked are in `crates/rules/src/releases.rs` and
    /// `powerdiag explain` shows the date) and compares its end of life with the day the
    /// snapshot was taken. Fails, critical, once the series is past its end of life; as a
    /// warning when it ends within {warn_days} days. A series newer than the table is
    /// `insufficient_data` (powerdiag does not guess its date); MySQL and Percona servers are
    /// not judged. MySQLTuner and PMM's advisors flag unsupported versions the same way.
    ///
    /// ### Why is this bad?
    /// A series past its end of life gets no more releases: no fixes for security
    /// vulnerabilities, crashes or data corruption found after that day, and no packages for
    /// new distribution releases. Short-term series (everything but the long-term ones, every
    /// second year or so) end within a year of their GA.
    ///
    /// ### Remediation
    /// Upgrade to a maintained long-term series — the finding names the nearest one and the
    /// newest — after testing the application on it: read the upgrade notes of each series
    /// in between, take a backup, upgrade a replica first, then run `mariadb-upgrade`. Within
    /// a series, stay on its latest release.
    pub struct VersionEndOfLife {
        code: "PD805",
        name: "version-end-of-life",
        severity: Critical,
        scope: Database,
        summary: "the server's release series is past or near its end of life",
        fails_when: "the series is past its end of life (critical) or ends within 90 days (warning), per MariaDB's maintenance policy",
        severity_why: "critical: a series past its end of life gets no more security or crash fixes (a warning while it has days left)",
        thresholds: [WARN_DAYS],
    }
}

const WARN_DAYS: Threshold = Threshold {
    key: "warn_days",
    default: 90.0,
    min: 0.0,
    max: 3650.0,
    unit: Unit::Count,
    doc: "days before the end of life that already warn",
};

fn date(s: &str) -> Option<Date> {
    Date::parse(s, &format_description!("[year]-[month]-[day]")).ok()
}

/// Where to go from `from`: the nearest long-term series after it that is still maintained
/// for more than `margin` days, and the newest such one.
fn targets(from: (u32, u32), today: Date, margin: i64) -> Vec<&'static Series> {
    let ok: Vec<&Series> = SERIES
        .iter()
        .filter(|s| s.lts && (s.major, s.minor) > from)
        .filter(|s| date(s.eol).is_some_and(|e| (e - today).whole_days() > margin))
        .collect();
    let mut out: Vec<&Series> = ok.first().copied().into_iter().collect();
    if let Some(last) = ok.last()
        && !out.contains(last)
    {
        out.push(last);
    }
    out
}

impl Rule for VersionEndOfLife {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let v = &db.version;
        if v.flavour != Flavour::Mariadb {
            return Err(Verdict::not_applicable(format!(
                "{} is not MariaDB: the table is MariaDB's maintenance policy",
                crate::display_text(&v.raw, 80)
            )));
        }
        let today = s.taken()?.date();
        let warn = limits.count(&WARN_DAYS) as i64;
        let series = match releases::series(v.major, v.minor) {
            Some(series) => series,
            None => {
                let newest = releases::newest();
                if (v.major, v.minor) > (newest.major, newest.minor) {
                    return Err(Verdict::insufficient(format!(
                        "MariaDB {}.{} is newer than powerdiag's release table (newest {}.{}, checked {CHECKED}): check its end of life at https://mariadb.org/about/#maintenance-policy",
                        v.major, v.minor, newest.major, newest.minor
                    )));
                }
                return Err(Verdict::insufficient(format!(
                    "MariaDB {}.{} is not a release series of powerdiag's table (checked {CHECKED})",
                    v.major, v.minor
                )));
            }
        };
        let eol = date(series.eol).ok_or_else(|| Verdict::insufficient("the release table has a bad date"))?;
        let left = (eol - today).whole_days();
        let kind = if series.lts { "long-term " } else { "" };
        let evidence = vec![
            format!(
                "MariaDB {} ({}series {}.{}, GA {}, end of life {}); the snapshot was taken on {today}",
                v.short(),
                kind,
                series.major,
                series.minor,
                series.ga,
                series.eol
            ),
            format!("release table from MariaDB's maintenance policy, checked {CHECKED}"),
        ];
        if left > warn {
            return Ok(Verdict::pass(format!(
                "MariaDB {}.{} is maintained until {} ({left} days)",
                series.major, series.minor, series.eol
            ))
            .with_evidence_lines(evidence));
        }
        let to = targets((series.major, series.minor), today, warn);
        let rem = if to.is_empty() {
            "No newer long-term series is maintained long enough yet: plan the upgrade to the next one, https://mariadb.org/about/#maintenance-policy".to_owned()
        } else {
            let names: Vec<String> = to
                .iter()
                .map(|t| format!("{}.{} (maintained until {})", t.major, t.minor, t.eol))
                .collect();
            format!(
                "Upgrade to a maintained long-term series: {}. Test the application on it, read the upgrade notes of each series in between, back up, upgrade a replica first, then run mariadb-upgrade.",
                names.join(" or ")
            )
        };
        let v = if left < 0 {
            Verdict::fail(format!(
                "MariaDB {}.{} reached its end of life on {} ({} days ago): no more security or crash fixes",
                series.major,
                series.minor,
                series.eol,
                -left
            ))
        } else {
            Verdict::fail(format!(
                "MariaDB {}.{} reaches its end of life on {} (in {left} days)",
                series.major, series.minor, series.eol
            ))
            .at_most(Severity::Warning)
        };
        Ok(v.with_evidence_lines(evidence).with_remediation(rem))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    fn at(version: &str, taken: &str) -> crate::Snapshot {
        let mut s = SnapshotBuilder::new().mariadb(version).build();
        s.taken_at = Some(taken.into());
        s
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        at("10.6.21-MariaDB", "2026-11-27T10:00:00Z")
    }

    #[test]
    fn past_near_and_far_from_the_end() {
        let v = verdict(&VersionEndOfLife, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("reached its end of life on 2026-07-06 (144 days ago)"), "{v:?}");
        let rem = v.remediation.unwrap();
        assert!(rem.contains("10.11 (maintained until 2028-02-16) or 12.3"), "{rem}");
        let r = crate::evaluate(&failing_example());
        let c = r.checks.iter().find(|c| c.code == "PD805").unwrap();
        assert_eq!(c.severity, Severity::Critical);
        // 10.11 in December 2027: 77 days left, a warning.
        let near = at("10.11.9-MariaDB", "2027-12-01T00:00:00Z");
        let v = verdict(&VersionEndOfLife, &near);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("in 77 days"), "{v:?}");
        let r = crate::evaluate(&near);
        let c = r.checks.iter().find(|c| c.code == "PD805").unwrap();
        assert_eq!(c.severity, Severity::Warning);
        // 11.8 today: maintained.
        let v = verdict(&VersionEndOfLife, &at("11.8.6-MariaDB", "2026-11-27T10:00:00Z"));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("until 2028-06-04"), "{v:?}");
    }

    #[test]
    fn unknown_series_times_and_flavours_are_not_guessed() {
        let v = verdict(&VersionEndOfLife, &at("13.0.1-MariaDB", "2026-11-27T10:00:00Z"));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(v.summary.contains("newer than powerdiag's release table"), "{v:?}");
        let mut s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        s.taken_at = None;
        assert_eq!(verdict(&VersionEndOfLife, &s).status, Status::InsufficientData);
        let v = verdict(&VersionEndOfLife, &at("11.8.6-MariaDB", "yesterday"));
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
    }
}
