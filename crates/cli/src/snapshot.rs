//! `powerdiag collect`, and loading snapshots for `doctor --from` and `diff`.

use std::{
    io::{Read, Write},
    path::Path,
};

use anyhow::{Context, Result, bail};
use powerdiag_rules::{MAX_SNAPSHOT_BYTES, Snapshot, read_snapshot};

use crate::{args::CollectCmd, doctor, exit, report};

pub(crate) fn collect(args: &CollectCmd) -> Result<u8> {
    let snapshot = doctor::collect_snapshot(&args.collect)?;
    let json = serde_json::to_string_pretty(&snapshot)? + "\n";
    if args.output.as_os_str() == "-" {
        report::write_stdout(&json)?;
    } else {
        write_atomically(&args.output, json.as_bytes())
            .with_context(|| format!("-o {}: cannot write the snapshot", args.output.display()))?;
        let db = match (&snapshot.mariadb.facts, &snapshot.mariadb.error) {
            (Some(f), _) => format!("MariaDB {}", f.version.raw),
            (None, Some(e)) => format!("MariaDB not reachable ({})", e.message),
            (None, None) => "no MariaDB".to_owned(),
        };
        report::note(&format!(
            "wrote {} ({} bytes): {db}",
            args.output.display(),
            json.len()
        ));
    }
    Ok(exit::OK)
}

/// Writes next to the target and renames, so a reader never sees half a snapshot.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads a snapshot file (`-` is stdin), refusing anything larger than a snapshot can be.
pub(crate) fn load(path: &Path) -> Result<Snapshot> {
    let name = path.display();
    let mut bytes = Vec::new();
    let limit = MAX_SNAPSHOT_BYTES as u64 + 1;
    if path.as_os_str() == "-" {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut bytes)
            .context("cannot read the snapshot from stdin")?;
    } else {
        let f = std::fs::File::open(path)
            .with_context(|| format!("{name}: cannot open the snapshot"))?;
        f.take(limit)
            .read_to_end(&mut bytes)
            .with_context(|| format!("{name}: cannot read the snapshot"))?;
    }
    if bytes.len() > MAX_SNAPSHOT_BYTES {
        bail!(
            "{name}: larger than {} MiB: not a powerdiag snapshot",
            MAX_SNAPSHOT_BYTES >> 20
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{name}: not UTF-8 text: not a powerdiag snapshot"))?;
    read_snapshot(&text).with_context(|| format!("{name}"))
}
