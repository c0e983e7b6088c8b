//! The server's file-per-table tablespaces, read from its data directory on this host instead
//! of asking the server (doctor above its dictionary bound, `--dictionary-max-tables`): at
//! 100,000 tables the sum over `mysql.innodb_table_stats` costs the server ~57 ms of CPU and
//! its `LIKE '%#i#%'` list of vector graph tables ~35 ms, while listing the directory costs the
//! server nothing (docs/performance.md, "At 100,000 tables").
//!
//! Only names and sizes are read (`readdir` and `lstat`, never a file's contents), one level
//! of schema directories deep, under a deadline and an entry cap. What the files miss is said
//! on [`powerdiag_rules::InnodbSize::from_files`].

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use powerdiag_rules::{MariadbFacts, Var};

/// Most directory entries looked at (schemas and their files); a data directory with more is
/// left to the SQL reads.
pub(crate) const MAX_ENTRIES: usize = 2_000_000;

/// What the data directory holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tablespaces {
    /// `.ibd` files in the schema directories: tables, partitions and vector graph tables.
    pub(crate) files: u64,
    /// Their sizes, bytes (when asked for).
    pub(crate) bytes: u64,
    /// The vector graph tables (`<table>#i#<nn>.ibd`) as InnoDB's dictionary names them —
    /// `schema/table#i#01` in the server's file-name encoding (`we@0023ird`) — and their file
    /// sizes, bytes.
    pub(crate) graph_tables: Vec<(String, u64)>,
}

/// The data directory of a server on this host, when this process can list it: the server
/// is known to run here (`same_host`) and `@@datadir` holds a `mysql` directory.
pub(crate) fn local_datadir(facts: &MariadbFacts) -> Option<PathBuf> {
    if facts.same_host != Some(true) {
        return None;
    }
    let dir = PathBuf::from(facts.variables.get(Var::Datadir.name())?.trim());
    (dir.is_absolute() && dir.join("mysql").is_dir()).then_some(dir)
}

/// [`tablespaces`] of the server's data directory on a blocking thread, when it is on this
/// host ([`local_datadir`]); `None` when it is not.
pub(crate) async fn list_local(
    facts: &MariadbFacts,
    sizes: bool,
    limit: Duration,
) -> Option<Result<Tablespaces, String>> {
    let dir = local_datadir(facts)?;
    Some(
        tokio::task::spawn_blocking(move || tablespaces(&dir, sizes, limit))
            .await
            .unwrap_or_else(|e| Err(format!("the listing stopped: {e}"))),
    )
}

/// The file sizes of graph tables already known (names as [`tablespaces`] gives them, which is
/// also how InnoDB's dictionary and `mysql.innodb_table_stats` name them), one `lstat` each
/// instead of listing every table: what the agent's refresh needs while no table was created,
/// altered, renamed or dropped. `Err` when a name is not a plain `schema/table` pair or its file
/// is gone or not a regular file (the caller lists again).
pub(crate) fn sizes_of(datadir: &Path, names: &[String]) -> Result<Vec<(String, u64)>, String> {
    let plain = |c: &str| !c.is_empty() && c != "." && c != ".." && !c.contains(['/', '\\', '\0']);
    names
        .iter()
        .map(|name| {
            let (schema, table) = name
                .split_once('/')
                .filter(|(s, t)| plain(s) && plain(t))
                .ok_or_else(|| format!("{name:?} is not a schema/table name"))?;
            let path = datadir.join(schema).join(format!("{table}.ibd"));
            let m =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if !m.is_file() {
                return Err(format!("{} is not a regular file", path.display()));
            }
            Ok((name.clone(), m.len()))
        })
        .collect()
}

/// [`sizes_of`] in the server's data directory on a blocking thread, when it is on this host
/// ([`local_datadir`]); `None` when it is not.
pub(crate) async fn sizes_local(
    facts: &MariadbFacts,
    names: Vec<String>,
) -> Option<Result<Vec<(String, u64)>, String>> {
    let dir = local_datadir(facts)?;
    Some(
        tokio::task::spawn_blocking(move || sizes_of(&dir, &names))
            .await
            .unwrap_or_else(|e| Err(format!("the sizes stopped: {e}"))),
    )
}

/// Lists `datadir`'s schema directories and their `.ibd` files, with the sizes of all of them
/// when `sizes` (one `lstat` each) and of the graph tables always, within `limit`. `Err` says
/// what stopped it (the caller falls back to SQL).
pub(crate) fn tablespaces(
    datadir: &Path,
    sizes: bool,
    limit: Duration,
) -> Result<Tablespaces, String> {
    let deadline = Instant::now() + limit;
    let mut out = Tablespaces::default();
    let mut seen = 0usize;
    let mut tick = |what: &Path| -> Result<(), String> {
        seen += 1;
        if seen > MAX_ENTRIES {
            return Err(format!(
                "{} holds more than {MAX_ENTRIES} entries",
                datadir.display()
            ));
        }
        if seen.is_multiple_of(1024) && Instant::now() > deadline {
            return Err(format!(
                "listing {} took longer than {} (at {})",
                datadir.display(),
                humantime::format_duration(limit),
                what.display()
            ));
        }
        Ok(())
    };
    let read = |d: &Path| std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()));
    for schema in read(datadir)? {
        let schema = schema.map_err(|e| format!("{}: {e}", datadir.display()))?;
        tick(&schema.path())?;
        // A schema is a directory (InnoDB follows a symbolic link to one, as the server does).
        let path = schema.path();
        if !path.is_dir() {
            continue;
        }
        let Some(schema_name) = schema.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // A schema dropped, or a table dropped or renamed, while the listing runs is skipped:
        // the listing is of the moment, as the server's own is.
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        let files = match std::fs::read_dir(&path) {
            Ok(files) => files,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        for file in files {
            let file = file.map_err(|e| format!("{}: {e}", path.display()))?;
            tick(&file.path())?;
            let name = file.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".ibd")) else {
                continue;
            };
            // The directory entry's own type (no system call): a tablespace is a regular file.
            if !file.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let graph = stem.contains("#i#");
            let len = if sizes || graph {
                match file.metadata() {
                    Ok(m) => m.len(),
                    Err(e) if gone(&e) => continue,
                    Err(e) => return Err(format!("{}: {e}", file.path().display())),
                }
            } else {
                0
            };
            out.files += 1;
            if sizes {
                out.bytes = out.bytes.saturating_add(len);
            }
            if graph {
                out.graph_tables
                    .push((format!("{schema_name}/{stem}"), len));
            }
        }
    }
    out.graph_tables.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_tables_partitions_and_graph_tables() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (path, len) in [
            ("mysql/innodb_table_stats.ibd", 65_536),
            ("shop/orders.ibd", 131_072),
            ("shop/orders.frm", 1_000),
            ("shop/logs#P#p0.ibd", 65_536),
            ("shop/docs#i#01.ibd", 98_304),
            ("we@0023ird/v@0023x#i#02.ibd", 98_304),
            ("ibdata1", 12 << 20),
            ("ib_logfile0", 96 << 20),
        ] {
            let p = d.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::File::create(&p).unwrap().set_len(len).unwrap();
        }
        std::fs::create_dir(d.join("shop/not-a-table.ibd")).unwrap();
        let t = tablespaces(d, true, Duration::from_secs(10)).unwrap();
        assert_eq!(t.files, 5);
        assert_eq!(t.bytes, 65_536 + 131_072 + 65_536 + 98_304 + 98_304);
        let graph = [
            ("shop/docs#i#01".to_owned(), 98_304),
            ("we@0023ird/v@0023x#i#02".to_owned(), 98_304),
        ];
        assert_eq!(t.graph_tables, graph);
        // Without sizes: the graph tables' only.
        let names_only = tablespaces(d, false, Duration::from_secs(10)).unwrap();
        assert_eq!(
            (names_only.files, names_only.bytes, names_only.graph_tables),
            (5, 0, graph.to_vec())
        );
        // An unreadable directory is an error naming it, for the caller's fallback.
        let e = tablespaces(&d.join("nowhere"), true, Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("nowhere"), "{e}");

        // A refresh of the known graph tables: the same sizes, one lstat each.
        let names: Vec<String> = graph.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(sizes_of(d, &names).unwrap(), graph);
        std::fs::File::create(d.join("shop/docs#i#01.ibd"))
            .unwrap()
            .set_len(131_072)
            .unwrap();
        assert_eq!(sizes_of(d, &names).unwrap()[0].1, 131_072);
        assert_eq!(sizes_of(d, &[]).unwrap(), vec![]);
        // Gone, not a regular file, or not a plain schema/table pair (a name from the server
        // never leaves the data directory): an error, and the caller lists again.
        for bad in [
            "shop/gone#i#01",
            "shop/not-a-table",
            "../etc/passwd",
            "shop/../../x",
            "shop",
            "/shop/docs#i#01",
            "shop/docs/x",
        ] {
            assert!(sizes_of(d, &[bad.to_owned()]).is_err(), "{bad}");
        }
    }
}
