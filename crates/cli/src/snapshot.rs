//! `powerdiag collect`, and loading snapshots for `doctor --from` and `diff`.

use std::{
    io::{Read, Write},
    path::Path,
};

use anyhow::{Context, Result, bail};
use powerdiag_rules::{MAX_SNAPSHOT_BYTES, Snapshot, read_snapshot};

use crate::{args::CollectCmd, collection, exit, report};

pub(crate) fn collect(args: &CollectCmd) -> Result<u8> {
    let snapshot = collection::collect_snapshot(&args.collect)?;
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

/// Writes the snapshot to `path` without ever writing through it: a new temporary file with an
/// unpredictable name is created in the target's directory (`O_EXCL|O_NOFOLLOW`, mode 0600, by
/// the tempfile crate), written, synced and renamed over the target. A reader never sees half a
/// snapshot, a failed write leaves the old file as it was, and a planted link at any name can
/// not redirect the write. A target that exists and is not a regular file (a symbolic link, a
/// device, a FIFO, a socket, a directory) is refused: `-o -` writes to stdout, which can be
/// redirected anywhere on purpose.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => bail!(
            "it is {}, not a regular file: powerdiag replaces only regular files. Give a new \
             or regular file's path, or write to stdout with `-o -` and redirect it",
            kind(&m.file_type())
        ),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context("cannot inspect the target"),
    }
    replace_file(path, ".powerdiag-snapshot-", None, bytes)
}

/// Writes `bytes` to a new temporary file in `path`'s directory (created exclusively with
/// `O_EXCL|O_NOFOLLOW`, an unpredictable name starting with `prefix`, mode 0600 or `mode` less
/// the umask), syncs it and renames it over `path`. rename(2) replaces the directory entry
/// itself: whatever is at `path` (a regular file, a planted symbolic link) is replaced, never
/// written through.
pub(crate) fn replace_file(
    path: &Path,
    prefix: &str,
    mode: Option<u32>,
    bytes: &[u8],
) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix).suffix(".tmp");
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = builder
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .context("cannot write the temporary file")?;
    // rename(2) replaces the directory entry itself: it never follows a link planted there
    // (for `collect -o`, after the caller's check). On error the temporary file is removed when
    // `tmp` drops.
    tmp.persist(path)
        .map_err(|e| e.error)
        .context("cannot rename the temporary file over the target")?;
    Ok(())
}

/// What a non-regular file is, for the error message.
fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
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
