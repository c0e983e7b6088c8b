//! What a recorded tree holds besides kernel files: its `recorded/` directory, beside `proc/`.
//!
//! A live sample reads some files twice (at the window's start and end) and asks the kernel
//! for what no file holds (`statvfs`). A tree records both, so a replay judges the same window
//! a live sample did:
//!
//! - `window-seconds`: the window's length, a decimal number of seconds (above 0, at most a
//!   day);
//! - `window-start/proc/`: the files read when the window opened (`vmstat`, `diskstats`,
//!   `stat`, `lparcfg`, …) — every collector's first reading comes from there, the second from
//!   the tree's `proc/`; a file missing there leaves its section since boot, as a live sample
//!   without a first reading;
//! - `statvfs`: one line per server directory, `path<TAB>f_frsize<TAB>f_blocks<TAB>f_bavail`,
//!   then `<TAB>f_files<TAB>f_favail` (the inodes, since PD807), as statvfs(3) returned them
//!   (`stat -f -c '%S %b %a %c %d' PATH`); `#` starts a comment;
//! - `uname-m`: the machine's architecture as `uname -m` printed it (`ppc64le`, `aarch64`):
//!   POWER's byte order is in no kernel file of a tree older than Linux 6.1;
//! - `page-size`: the base page size in bytes (`getconf PAGESIZE`): Debian's ppc64el kernel
//!   uses 64 KiB pages, which no file of the tree states when mariadbd is not running.
//!
//! `tests/fixtures/linux/record.sh` writes it; without it a tree has no window and no free
//! space, and the sections say so.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::Duration,
};

use super::Roots;
use crate::collect::CollectError;

/// The largest `recorded/` file read (the `statvfs` table, `window-seconds`).
const MAX_BYTES: u64 = 1 << 20;
/// The longest window a recording may claim.
const MAX_WINDOW: Duration = Duration::from_secs(86_400);

/// The `recorded/` directory beside a tree's `procfs` (`<tree>/proc` → `<tree>/recorded`),
/// when there is one.
pub fn beside(procfs: &Path) -> Option<PathBuf> {
    let dir = procfs.parent()?.join("recorded");
    dir.is_dir().then_some(dir)
}

/// The recorded `uname -m` (see the module), when present and plausible (a short word).
pub(crate) fn machine(dir: &Path) -> Option<String> {
    let m = read_text(&dir.join("uname-m")).ok()?.trim().to_owned();
    (!m.is_empty() && m.len() < 32 && m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(m)
}

/// The recorded base page size (see the module), when present and a power of two from 4 KiB
/// to 1 MiB.
pub(crate) fn page_size(dir: &Path) -> Option<u64> {
    let n: u64 = read_text(&dir.join("page-size"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (n.is_power_of_two() && (4096..=1 << 20).contains(&n)).then_some(n)
}

/// Checks everything in `dir` a replay will read, naming the file and the fix: for `doctor`
/// to refuse a broken recording before it collects anything.
pub fn check(dir: &Path) -> Result<(), CollectError> {
    window(dir)?;
    let vfs = dir.join("statvfs");
    if vfs.exists() {
        statvfs(dir)?;
    }
    Ok(())
}

/// The recorded window: the roots of its first reading (only `procfs` differs) and its
/// length. `Ok(None)` when the tree recorded no window.
pub(crate) fn window(dir: &Path) -> Result<Option<(PathBuf, Duration)>, CollectError> {
    let start = dir.join("window-start/proc");
    let secs_file = dir.join("window-seconds");
    match (start.is_dir(), secs_file.exists()) {
        (false, false) => return Ok(None),
        (true, false) | (false, true) => {
            return Err(CollectError::parse(
                dir,
                "a recorded window needs both window-start/proc/ and window-seconds (record the tree again with tests/fixtures/linux/record.sh)",
            ));
        }
        (true, true) => {}
    }
    let text = read_text(&secs_file)?;
    let secs: f64 = text.trim().parse().map_err(|_| {
        CollectError::parse(
            &secs_file,
            format!(
                "{:?} is not a number of seconds (write the window's length, e.g. 30.0)",
                text.trim().chars().take(40).collect::<String>()
            ),
        )
    })?;
    let length = Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero() && *d <= MAX_WINDOW)
        .ok_or_else(|| {
            CollectError::parse(
                &secs_file,
                format!(
                    "{secs} s is not a window length (above 0, at most {} s)",
                    MAX_WINDOW.as_secs()
                ),
            )
        })?;
    Ok(Some((start, length)))
}

/// One directory's `statvfs` as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Vfs {
    pub frsize: u64,
    pub blocks: u64,
    pub bavail: u64,
    /// `(f_files, f_favail)`: recorded by `record.sh` since inodes are judged (PD807); older
    /// trees have four columns.
    pub inodes: Option<(u64, u64)>,
}

/// [`Vfs`] per directory as the server names it (a trailing `/` does not matter).
pub(crate) type Statvfs = HashMap<String, Vfs>;

/// The `statvfs` table of `dir`.
pub(crate) fn statvfs(dir: &Path) -> Result<Statvfs, CollectError> {
    let path = dir.join("statvfs");
    let text = read_text(&path)?;
    let mut out = Statvfs::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            CollectError::Parse {
            file: path.clone(),
            line: u32::try_from(i + 1).ok(),
            what: "expected `path<TAB>f_frsize<TAB>f_blocks<TAB>f_bavail[<TAB>f_files<TAB>f_favail]` (stat -f -c '%S %b %a %c %d' PATH)"
                .into(),
        }
        };
        let f: Vec<&str> = line.split('\t').collect();
        let n = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
        let (p, frsize, blocks, avail, inodes) = match f[..] {
            [p, frsize, blocks, avail] => (p, n(frsize)?, n(blocks)?, n(avail)?, None),
            [p, frsize, blocks, avail, files, favail] => {
                let (files, favail) = (n(files)?, n(favail)?);
                if favail > files {
                    return Err(bad());
                }
                (p, n(frsize)?, n(blocks)?, n(avail)?, Some((files, favail)))
            }
            _ => return Err(bad()),
        };
        if frsize == 0 || avail > blocks {
            return Err(bad());
        }
        out.insert(
            normal(p),
            Vfs {
                frsize,
                blocks,
                bavail: avail,
                inodes,
            },
        );
    }
    Ok(out)
}

/// A directory's key in [`Statvfs`]: without trailing slashes (`/` stays `/`).
pub(crate) fn normal(path: &str) -> String {
    let t = path.trim_end_matches('/');
    if t.is_empty() { "/".into() } else { t.into() }
}

fn read_text(path: &Path) -> Result<String, CollectError> {
    let bytes =
        powerdiag_safe_read::read_regular_file(path, MAX_BYTES).map_err(|e| CollectError::Io {
            path: path.into(),
            message: e.to_string(),
        })?;
    String::from_utf8(bytes).map_err(|_| CollectError::parse(path, "not UTF-8 text"))
}

impl Roots {
    /// The roots of a recorded window's first reading, and the window's length, when the tree
    /// recorded one (a broken recording counts as none: [`check`] reports it).
    pub(crate) fn recorded_window(&self) -> Option<(Roots, Duration)> {
        let dir = self.recorded.as_deref()?;
        let (procfs, length) = window(dir).ok()??;
        Some((
            Roots {
                procfs,
                recorded: None,
                ..self.clone()
            },
            length,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A ppc64le tree replayed keeps its byte order and its 64 KiB pages: the host facts and
    /// the CPU's architecture come from `recorded/`, not from a guess.
    #[test]
    fn the_machine_and_page_size_come_from_the_recording() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("recorded");
        put(dir.path(), "recorded/uname-m", "ppc64le\n");
        put(dir.path(), "recorded/page-size", "65536\n");
        assert_eq!(machine(&rec).as_deref(), Some("ppc64le"));
        assert_eq!(page_size(&rec), Some(65536));
        put(dir.path(), "recorded/uname-m", "ppc64le; rm -rf /\n");
        put(dir.path(), "recorded/page-size", "65535\n");
        assert_eq!(
            (machine(&rec), page_size(&rec)),
            (None, None),
            "implausible"
        );
        put(dir.path(), "recorded/uname-m", "ppc64le\n");
        put(dir.path(), "recorded/page-size", "65536\n");
        put(
            dir.path(),
            "proc/cpuinfo",
            "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\nclock\t\t: 2750.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\ntimebase\t: 512000000\nplatform\t: pSeries\n",
        );
        put(dir.path(), "proc/sys/kernel/hostname", "p9\n");
        let roots = Roots::tree(dir.path());
        let h = crate::collect::host::collect(&roots).unwrap();
        assert_eq!(
            (h.arch.as_str(), h.page_size_bytes),
            ("ppc64le", Some(65536))
        );
    }

    #[test]
    fn a_window_needs_both_halves_and_a_sane_length() {
        let d = tempfile::tempdir().unwrap();
        let rec = d.path().join("recorded");
        std::fs::create_dir_all(&rec).unwrap();
        assert_eq!(window(&rec), Ok(None));
        put(&rec, "window-seconds", "30.5\n");
        let e = window(&rec).unwrap_err().to_string();
        assert!(
            e.contains("needs both window-start/proc/ and window-seconds"),
            "{e}"
        );
        put(&rec, "window-start/proc/vmstat", "pswpin 1\npswpout 2\n");
        let (start, len) = window(&rec).unwrap().unwrap();
        assert_eq!(
            (start, len),
            (rec.join("window-start/proc"), Duration::from_millis(30_500))
        );
        for bad in ["0", "-3", "NaN", "1e9", "thirty"] {
            put(&rec, "window-seconds", bad);
            let e = window(&rec).unwrap_err().to_string();
            assert!(e.contains("window-seconds"), "{bad}: {e}");
            assert!(check(&rec).is_err());
        }
        // The tree's roots find it beside proc/, and its first reading differs only in procfs.
        put(&rec, "window-seconds", "10");
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        let roots = Roots::tree(d.path());
        assert_eq!(roots.recorded.as_deref(), Some(rec.as_path()));
        let (start, len) = roots.recorded_window().unwrap();
        assert_eq!(len, Duration::from_secs(10));
        assert_eq!(start.procfs, rec.join("window-start/proc"));
        assert_eq!((start.sysfs, start.recorded), (roots.sysfs.clone(), None));
    }

    #[test]
    fn statvfs_lines() {
        let d = tempfile::tempdir().unwrap();
        put(
            d.path(),
            "statvfs",
            "# path\tf_frsize\tf_blocks\tf_bavail\n/var/lib/mysql/\t4096\t1000\t10\t640\t600\n/\t4096\t50\t5\n",
        );
        let t = statvfs(d.path()).unwrap();
        let v = t["/var/lib/mysql"];
        assert_eq!(
            (v.frsize, v.blocks, v.bavail, v.inodes),
            (4096, 1000, 10, Some((640, 600)))
        );
        let v = t["/"];
        assert_eq!(
            (v.frsize, v.blocks, v.bavail, v.inodes),
            (4096, 50, 5, None)
        );
        assert!(check(d.path()).is_ok());
        for bad in [
            "/x\t4096\t10\n",
            "/x\t0\t10\t1\n",
            "/x\t4096\t10\t11\n",
            "/x\tmany\t10\t1\n",
            "/x\t4096\t10\t1\t5\n",
            "/x\t4096\t10\t1\t5\t6\n",
        ] {
            put(d.path(), "statvfs", bad);
            let e = statvfs(d.path()).unwrap_err().to_string();
            assert!(e.contains("statvfs:1: expected"), "{bad:?}: {e}");
        }
        assert_eq!(normal("/a/b//"), "/a/b");
        assert_eq!(normal("/"), "/");
    }
}
