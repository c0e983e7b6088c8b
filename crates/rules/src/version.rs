use std::fmt;

use serde::{Deserialize, Serialize};

/// Which server family answered, from `@@version` / `@@version_comment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    Mariadb,
    Mysql,
    Percona,
    Unknown,
}

/// A parsed server version such as `11.8.6-MariaDB-0+deb13u1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerVersion {
    /// The string the server reported, verbatim.
    pub raw: String,
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    pub flavour: Flavour,
}

impl ServerVersion {
    /// Parses `@@version` and `@@version_comment`. Returns `None` when the string does not start
    /// with `MAJOR.MINOR`.
    pub fn parse(version: &str, comment: &str) -> Option<ServerVersion> {
        // Replication-compatible prefix of old MariaDB builds: "5.5.5-10.1.48-MariaDB".
        let v = version.strip_prefix("5.5.5-").unwrap_or(version);
        let numeric: &str = v
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()?;
        let mut parts = numeric.split('.').filter(|p| !p.is_empty());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let haystack = format!("{version} {comment}").to_ascii_lowercase();
        let flavour = if haystack.contains("mariadb") {
            Flavour::Mariadb
        } else if haystack.contains("percona") {
            Flavour::Percona
        } else if haystack.contains("mysql") {
            Flavour::Mysql
        } else {
            Flavour::Unknown
        };
        Some(ServerVersion {
            raw: version.to_owned(),
            major,
            minor,
            patch,
            flavour,
        })
    }

    /// True when this version is at least `major.minor.patch`.
    pub fn at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        (self.major, self.minor, self.patch) >= (major, minor, patch)
    }

    /// MariaDB 11.7 introduced the `VECTOR` type and MHNSW indexes.
    pub fn has_vector_indexes(&self) -> bool {
        self.flavour == Flavour::Mariadb && self.at_least(11, 7, 0)
    }

    pub fn short(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_version_strings() {
        let v = ServerVersion::parse("11.8.6-MariaDB-0+deb13u1", "Debian 13").unwrap();
        assert_eq!(
            (v.major, v.minor, v.patch, v.flavour),
            (11, 8, 6, Flavour::Mariadb)
        );
        let v = ServerVersion::parse("5.5.5-10.1.48-MariaDB", "").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (10, 1, 48));
        let v = ServerVersion::parse("8.0.36", "MySQL Community Server - GPL").unwrap();
        assert_eq!(v.flavour, Flavour::Mysql);
        let v = ServerVersion::parse("8.0.36-28", "Percona Server (GPL)").unwrap();
        assert_eq!(v.flavour, Flavour::Percona);
        assert!(v.at_least(8, 0, 36) && !v.at_least(8, 0, 37));
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "MariaDB", "11", ".", "x.y.z", "99999999999999999999.1"] {
            assert_eq!(ServerVersion::parse(s, ""), None, "{s}");
        }
    }
}
