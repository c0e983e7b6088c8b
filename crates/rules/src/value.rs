//! Raw server strings become typed values here, once, at the edge of the rules.

/// Parses MariaDB's boolean spellings (`ON`, `OFF`, `YES`, `NO`, `1`, `0`, `TRUE`, `FALSE`).
pub fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_uppercase().as_str() {
        "ON" | "YES" | "1" | "TRUE" => Some(true),
        "OFF" | "NO" | "0" | "FALSE" | "DISABLED" => Some(false),
        _ => None,
    }
}

/// Parses an unsigned integer, accepting the `K`/`M`/`G`/`T` suffixes of my.cnf sizes.
pub fn parse_u64(raw: &str) -> Option<u64> {
    let s = raw.trim();
    let (digits, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// Human-readable binary size: `16 MiB`, `1.5 GiB`, `512 B`.
/// `0.123` → `12.3%`.
pub(crate) fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || (value - value.round()).abs() < 0.05 {
        format!("{} {}", value.round(), UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `1 vector index`, `3 vector indexes`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A size for my.cnf and `SET GLOBAL`: `bytes` rounded up to a whole number of MiB, written
/// with the largest exact suffix (`64M`, `2G`).
pub(crate) fn my_cnf_size(bytes: u64) -> String {
    let mib = bytes.div_ceil(1 << 20).max(1);
    if mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

/// `90 s`, `15 min`, `3 h 20 min`, `2 d 4 h`.
pub fn format_secs(s: u64) -> String {
    match s {
        0..120 => format!("{s} s"),
        120..7200 if s.is_multiple_of(60) => format!("{} min", s / 60),
        120..7200 => format!("{} min {} s", s / 60, s % 60),
        7200..172_800 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Unix seconds as `2026-11-27T20:00:00Z` (`?` for a time out of range).
pub fn format_unix_utc(secs: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools() {
        assert_eq!(parse_bool("ON"), Some(true));
        assert_eq!(parse_bool(" off "), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_u64("16777216"), Some(16 << 20));
        assert_eq!(parse_u64("16M"), Some(16 << 20));
        assert_eq!(parse_u64("4g"), Some(4 << 30));
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("99999999999T"), None);
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(16 << 20), "16 MiB");
        assert_eq!(format_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(format_bytes(10), "10 B");
        assert_eq!(format_bytes(u64::MAX), "16384 PiB");
        assert_eq!(my_cnf_size(33_900_000), "33M");
        assert_eq!(my_cnf_size(2 << 30), "2G");
        assert_eq!(my_cnf_size(0), "1M");
    }
}
