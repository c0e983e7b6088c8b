//! MariaDB's release series and their end of life (PD805).
//!
//! Source: the MariaDB Foundation's maintenance policy, <https://mariadb.org/about/#maintenance-policy>
//! (long-term series five years from GA up to 11.4, three from 11.8 on; the others until the
//! next series' GA or about a year), as mirrored with exact dates by endoflife.date (`products/mariadb.md` of
//! github.com/endoflife-date/endoflife.date, revision of 2026-08-22). Series newer than the
//! table are unknown here: PD805 says so rather than guessing. Update the table, and
//! [`CHECKED`], when a series is announced.

/// The day this table was last compared with the maintenance policy.
pub(crate) const CHECKED: &str = "2026-11-27";

/// One release series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Series {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    /// First GA release, `YYYY-MM-DD`.
    pub(crate) ga: &'static str,
    /// End of life: the last day of maintenance, `YYYY-MM-DD`.
    pub(crate) eol: &'static str,
    /// A long-term maintenance series.
    pub(crate) lts: bool,
}

const fn s(major: u32, minor: u32, ga: &'static str, eol: &'static str, lts: bool) -> Series {
    Series {
        major,
        minor,
        ga,
        eol,
        lts,
    }
}

/// Every series from 5.1 on, oldest first.
pub(crate) const SERIES: &[Series] = &[
    s(5, 1, "2010-02-01", "2015-02-01", false),
    s(5, 2, "2010-11-10", "2015-11-10", false),
    s(5, 3, "2012-02-29", "2017-03-01", false),
    s(5, 5, "2012-04-11", "2020-04-11", true),
    s(10, 0, "2014-03-31", "2019-03-31", false),
    s(10, 1, "2015-10-17", "2020-10-17", false),
    s(10, 2, "2017-05-23", "2022-05-23", false),
    s(10, 3, "2018-05-25", "2023-05-25", false),
    s(10, 4, "2019-06-18", "2024-06-18", true),
    s(10, 5, "2020-06-24", "2025-06-24", true),
    s(10, 6, "2021-07-06", "2026-07-06", true),
    s(10, 7, "2022-02-08", "2023-02-09", false),
    s(10, 8, "2022-05-20", "2023-05-20", false),
    s(10, 9, "2022-08-15", "2023-08-22", false),
    s(10, 10, "2022-11-07", "2023-11-17", false),
    s(10, 11, "2023-02-16", "2028-02-16", true),
    s(11, 0, "2023-06-06", "2024-06-06", false),
    s(11, 1, "2023-08-21", "2024-08-21", false),
    s(11, 2, "2023-11-21", "2024-11-21", false),
    s(11, 3, "2024-02-16", "2024-05-29", false),
    s(11, 4, "2024-05-29", "2029-05-29", true),
    s(11, 5, "2024-08-14", "2024-11-21", false),
    s(11, 6, "2024-11-13", "2025-02-13", false),
    s(11, 7, "2025-02-12", "2025-05-12", false),
    s(11, 8, "2025-06-04", "2028-06-04", true),
    s(12, 0, "2025-08-07", "2025-11-18", false),
    s(12, 1, "2025-11-18", "2026-02-13", false),
    s(12, 2, "2026-02-13", "2026-05-28", false),
    s(12, 3, "2026-05-28", "2029-06-12", true),
];

/// The series of `major.minor`, if the table knows it.
pub(crate) fn series(major: u32, minor: u32) -> Option<&'static Series> {
    SERIES.iter().find(|s| s.major == major && s.minor == minor)
}

/// The newest series the table knows.
pub(crate) fn newest() -> &'static Series {
    SERIES.last().expect("the table is not empty")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_ordered_and_its_dates_are_dates() {
        let fmt = time::macros::format_description!("[year]-[month]-[day]");
        let mut last = (0, 0);
        for s in SERIES {
            assert!((s.major, s.minor) > last, "{s:?} out of order");
            last = (s.major, s.minor);
            let ga = time::Date::parse(s.ga, &fmt).unwrap();
            let eol = time::Date::parse(s.eol, &fmt).unwrap();
            assert!(eol > ga, "{s:?}");
            if s.lts {
                // Long-term series: five years up to 11.4, three from 11.8 on.
                assert!((eol - ga).whole_days() >= 3 * 365, "{s:?}");
            }
        }
        assert!(time::Date::parse(CHECKED, &fmt).is_ok());
    }
}
