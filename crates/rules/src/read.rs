//! Reading a snapshot back: from `powerdiag collect` output, or from a `doctor --format json`
//! report (which embeds one). Older schema versions are migrated; newer ones are refused.
//! Parsing text is not I/O: the caller reads the file.

use std::fmt;

use serde_json::Value;

use crate::{SCHEMA_VERSION, Snapshot};

/// Largest snapshot accepted. A real one is tens of KiB; the cap keeps a hostile file from
/// exhausting memory.
pub const MAX_SNAPSHOT_BYTES: usize = 64 << 20;

/// Why a text is not a usable snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    TooLarge {
        bytes: usize,
    },
    NotJson {
        line: usize,
        column: usize,
        message: String,
    },
    NotASnapshot {
        reason: String,
    },
    NewerVersion {
        found: u64,
    },
    /// A field has the wrong shape; `path` is where, e.g. `host.available.hardware_threads`.
    Invalid {
        path: String,
        message: String,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::TooLarge { bytes } => write!(
                f,
                "{bytes} bytes is larger than any snapshot ({} MiB at most)",
                MAX_SNAPSHOT_BYTES >> 20
            ),
            SnapshotError::NotJson {
                line,
                column,
                message,
            } => {
                write!(
                    f,
                    "not valid JSON at line {line}, column {column}: {message} (truncated file?)"
                )
            }
            SnapshotError::NotASnapshot { reason } => write!(
                f,
                "not a powerdiag snapshot: {reason} (write one with `powerdiag collect -o FILE`)"
            ),
            SnapshotError::NewerVersion { found } => write!(
                f,
                "snapshot schema_version {found} is newer than this powerdiag understands ({SCHEMA_VERSION}); upgrade powerdiag to read it"
            ),
            SnapshotError::Invalid { path, message } => {
                write!(f, "invalid snapshot at {path}: {message}")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Parses a snapshot (or a doctor JSON report), migrating older schema versions.
pub fn read_snapshot(text: &str) -> Result<Snapshot, SnapshotError> {
    if text.len() > MAX_SNAPSHOT_BYTES {
        return Err(SnapshotError::TooLarge { bytes: text.len() });
    }
    // serde_json limits nesting to 128 levels, so hostile depth cannot overflow the stack.
    let mut value: Value = serde_json::from_str(text).map_err(|e| SnapshotError::NotJson {
        line: e.line(),
        column: e.column(),
        message: e
            .to_string()
            .split(" at line")
            .next()
            .unwrap_or_default()
            .to_owned(),
    })?;
    // A doctor report carries the snapshot it judged.
    if value.get("checks").is_some()
        && let Some(inner) = value.get_mut("snapshot").map(Value::take)
    {
        value = inner;
    }
    let Some(obj) = value.as_object() else {
        return Err(SnapshotError::NotASnapshot {
            reason: "the top level is not an object".into(),
        });
    };
    let version = match obj.get("schema_version") {
        Some(v) => v.as_u64().ok_or_else(|| SnapshotError::NotASnapshot {
            reason: format!("schema_version is {v}, not a number"),
        })?,
        None => {
            return Err(SnapshotError::NotASnapshot {
                reason: "it has no schema_version".into(),
            });
        }
    };
    if version > u64::from(SCHEMA_VERSION) {
        return Err(SnapshotError::NewerVersion { found: version });
    }
    if version == 0 {
        return Err(SnapshotError::NotASnapshot {
            reason: "schema_version 0 does not exist".into(),
        });
    }
    migrate(&mut value, version);
    serde_path_to_error::deserialize(value).map_err(|e| SnapshotError::Invalid {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

/// Brings an older snapshot up to [`SCHEMA_VERSION`], one version at a time.
fn migrate(value: &mut Value, mut version: u64) {
    while version < u64::from(SCHEMA_VERSION) {
        // Schema 1 (powerdiag's first release) had no OS facts.
        if version == 1
            && let Some(obj) = value.as_object_mut()
        {
            obj.entry("os").or_insert_with(|| {
                serde_json::json!({"unavailable": "not recorded: snapshot schema 1 predates OS facts"})
            });
        }
        // Schema 2 had one status read and no InnoDB sizes or transactions.
        if version == 2
            && let Some(facts) = value
                .pointer_mut("/mariadb/facts")
                .and_then(Value::as_object_mut)
        {
            for (key, what) in [
                ("status_window", "status windows"),
                ("innodb_size", "InnoDB sizes"),
                ("transactions", "transaction reads"),
            ] {
                facts.entry(key).or_insert_with(|| {
                    serde_json::json!({"unavailable": format!("not recorded: snapshot schema 2 predates {what}")})
                });
            }
        }
        version += 1;
    }
    if let Some(obj) = value.as_object_mut() {
        obj.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SnapshotBuilder;

    fn current() -> String {
        serde_json::to_string(&SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build()).unwrap()
    }

    #[test]
    fn round_trip() {
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert_eq!(read_snapshot(&serde_json::to_string(&s).unwrap()), Ok(s));
    }

    #[test]
    fn a_doctor_report_yields_its_snapshot() {
        let s = SnapshotBuilder::new().build();
        let report =
            serde_json::json!({"schema_version": SCHEMA_VERSION, "checks": [], "snapshot": s});
        assert_eq!(read_snapshot(&report.to_string()), Ok(s));
    }

    #[test]
    fn schema_1_is_migrated() {
        let mut v: Value = serde_json::from_str(&current()).unwrap();
        v["schema_version"] = 1.into();
        v.as_object_mut().unwrap().remove("os");
        let s = read_snapshot(&v.to_string()).unwrap();
        assert_eq!(s.schema_version, SCHEMA_VERSION);
        assert!(s.os.as_ref().is_err_and(|why| why.contains("schema 1")));
    }

    #[test]
    fn schema_2_is_migrated() {
        let mut v: Value = serde_json::from_str(&current()).unwrap();
        v["schema_version"] = 2.into();
        for key in ["status_window", "innodb_size", "transactions"] {
            v["mariadb"]["facts"].as_object_mut().unwrap().remove(key);
        }
        let s = read_snapshot(&v.to_string()).unwrap();
        assert_eq!(s.schema_version, SCHEMA_VERSION);
        let f = s.mariadb.facts.unwrap();
        assert!(
            f.status_window
                .as_ref()
                .is_err_and(|w| w.contains("schema 2"))
        );
        assert!(
            f.innodb_size
                .as_ref()
                .is_err_and(|w| w.contains("schema 2"))
        );
        assert!(
            f.transactions
                .as_ref()
                .is_err_and(|w| w.contains("schema 2"))
        );
    }

    #[test]
    fn newer_and_foreign_documents_are_refused_clearly() {
        let mut v: Value = serde_json::from_str(&current()).unwrap();
        v["schema_version"] = 99.into();
        let e = read_snapshot(&v.to_string()).unwrap_err().to_string();
        assert!(
            e.contains("schema_version 99") && e.contains("upgrade powerdiag"),
            "{e}"
        );
        for (text, needle) in [
            ("[1,2,3]", "not an object"),
            ("{\"hello\": 1}", "no schema_version"),
            ("{\"schema_version\": \"one\"}", "not a number"),
            ("{\"schema_version\": 0}", "does not exist"),
        ] {
            let e = read_snapshot(text).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains("powerdiag collect"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn truncated_and_wrongly_typed_input_names_the_place() {
        let full = current();
        let e = read_snapshot(&full[..full.len() / 2]).unwrap_err();
        assert!(matches!(e, SnapshotError::NotJson { line: 1, .. }), "{e:?}");
        assert!(e.to_string().contains("truncated"));
        let mut v: Value = serde_json::from_str(&full).unwrap();
        v["host"]["available"]["hardware_threads"] = "many".into();
        let e = read_snapshot(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("host.available.hardware_threads"), "{e}");
    }

    #[test]
    fn hostile_input_does_not_panic() {
        let deep = "[".repeat(100_000);
        assert!(matches!(
            read_snapshot(&deep),
            Err(SnapshotError::NotJson { .. })
        ));
        let big = " ".repeat(MAX_SNAPSHOT_BYTES + 1);
        assert!(matches!(
            read_snapshot(&big),
            Err(SnapshotError::TooLarge { .. })
        ));
        let nulls =
            "{\"schema_version\":2,\"powerdiag_version\":null,\"host\":null,\"mariadb\":null}";
        assert!(matches!(
            read_snapshot(nulls),
            Err(SnapshotError::Invalid { .. })
        ));
    }
}

/// The JSON Schema of [`Snapshot`] (`docs/snapshot.schema.json` is this, checked by a test).
pub fn snapshot_schema() -> String {
    let schema = schemars::schema_for!(Snapshot);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod schema_tests {
    /// The published schema is the one the types generate. `UPDATE_SCHEMA=1 cargo test -p
    /// powerdiag-rules schema` rewrites it after a change.
    #[test]
    fn published_schema_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/snapshot.schema.json"
        );
        let generated = super::snapshot_schema();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let published = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            published == generated,
            "docs/snapshot.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test -p powerdiag-rules schema`"
        );
    }
}
