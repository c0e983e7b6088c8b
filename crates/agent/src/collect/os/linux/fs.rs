//! Small, strict readers for procfs/sysfs files. Every error names the file.
//!
//! Every file under [`crate::collect::os::Roots`] is read through here, including the files
//! the procfs crate parses (it gets our bytes through `FromRead`, never a path): a recorded
//! tree is outside input, so a file must be a regular file (a FIFO in place of `stat` would
//! block forever, a directory in place of `cpuinfo` made the procfs crate's line reader spin),
//! is opened without blocking, and is read up to a cap (a sparse 1 GB `node/online` must not
//! become 1 GB of memory and of report).

use std::{fs::File, path::Path};

use powerdiag_safe_read::{Kind, ReadError};

use crate::collect::CollectError;

/// The cap for one procfs/sysfs text file: `cpuinfo` of a 2,000-CPU machine is ~2 MiB.
pub(crate) const MAX_FILE: u64 = 8 << 20;

/// Opens a regular file without blocking (`O_NONBLOCK`: a FIFO never stalls the open), checking
/// the opened file (a symlink is followed; its target must be a regular file), for a stream
/// that ends after `cap` bytes and one more: a truncation, not an error. The size `fstat`
/// reports is not used (procfs says 0).
pub(crate) fn open(path: &Path, cap: u64) -> Result<std::io::Take<File>, CollectError> {
    powerdiag_safe_read::open_truncated(path, cap.saturating_add(1))
        .map_err(|e| collect_error(path, e))
}

/// The file's bytes, at most `cap` of them (more is [`CollectError::TooLarge`]). The size
/// `fstat` reports is not used: procfs says 0 and sysfs 4096 whatever the content.
pub(crate) fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, CollectError> {
    powerdiag_safe_read::read_pseudo_file(path, cap).map_err(|e| collect_error(path, e))
}

/// A refused or failed read of `path` as the collectors report it: not found and permission
/// denied classified as for any I/O error, the kinds of non-regular files in the agent's words.
fn collect_error(path: &Path, e: ReadError) -> CollectError {
    match e {
        ReadError::Io(e) => CollectError::io(path, &e),
        ReadError::NotRegular(kind) => CollectError::NotRegular {
            path: path.into(),
            kind: match kind {
                Kind::Directory => "a directory",
                Kind::Fifo => "a FIFO",
                Kind::CharDevice | Kind::BlockDevice => "a device",
                Kind::Socket => "a socket",
                _ => "not a regular file",
            },
        },
        ReadError::TooLarge(limit) => CollectError::TooLarge {
            path: path.into(),
            limit,
        },
        e => CollectError::Io {
            path: path.into(),
            message: e.to_string(),
        },
    }
}

/// The file's text; the error names the path and the reason.
pub(crate) fn read(path: &Path) -> Result<String, CollectError> {
    let bytes = read_bytes(path, MAX_FILE)?;
    String::from_utf8(bytes).map_err(|_| CollectError::parse(path, "not UTF-8 text"))
}

pub(crate) fn read_trim(path: &Path) -> Result<String, CollectError> {
    read(path).map(|s| s.trim().to_owned())
}

pub(crate) fn read_u64(path: &Path) -> Result<u64, CollectError> {
    let t = read_trim(path)?;
    t.parse().map_err(|_| {
        CollectError::parse(
            path,
            format!("{:?} is not a number", crate::collect::error::clip(&t, 40)),
        )
    })
}

/// A procfs crate type parsed from our capped, regular-file read of `path`.
pub(crate) fn parse_procfs<T: procfs::FromRead>(path: &Path) -> Result<T, CollectError> {
    let bytes = read_bytes(path, MAX_FILE)?;
    T::from_read(bytes.as_slice()).map_err(|e| CollectError::procfs(path, e))
}

/// `0-3,8,10-11` → [0,1,2,3,8,10,11]. At most 65,536 CPUs.
/// A CPU list or mask sysfs wrote that cannot be read; the text is clipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CpuListError {
    #[error("bad CPU list {0:?}")]
    List(String),
    #[error("{0:?} is not a CPU mask")]
    Mask(String),
    #[error("CPU mask {0:?} is too long")]
    MaskTooLong(String),
}

pub(crate) fn parse_cpu_list(s: &str) -> Result<Vec<u32>, CpuListError> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (part.parse::<u32>(), part.parse::<u32>()),
        };
        let (Ok(a), Ok(b)) = (a, b) else {
            return Err(bad_list(s));
        };
        if b < a || b - a > 65_536 || out.len() > 65_536 {
            return Err(bad_list(s));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// A CPU list back in kernel form: [0,1,2,3,8] → `0-3,8`.
/// A sysfs CPU bit mask (`cpumap`, `shared_cpu_map`): comma-separated 32-bit hex words, most
/// significant first, e.g. `00000000,0000ffff` → CPUs 0-15. Older kernels have only these.
pub(crate) fn parse_cpu_mask(s: &str) -> Result<Vec<u32>, CpuListError> {
    let mut cpus = Vec::new();
    let words: Vec<&str> = s.trim().split(',').collect();
    // 65,536 CPUs at most, as for lists.
    if words.len() > 2048 {
        return Err(CpuListError::MaskTooLong(crate::collect::error::clip(
            s, 40,
        )));
    }
    for (i, word) in words.iter().rev().enumerate() {
        let w = u32::from_str_radix(word.trim(), 16)
            .map_err(|_| CpuListError::Mask(crate::collect::error::clip(s, 40)))?;
        let base = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(32))
            .ok_or_else(|| CpuListError::MaskTooLong(crate::collect::error::clip(s, 40)))?;
        cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| base + b));
    }
    cpus.sort_unstable();
    Ok(cpus)
}

fn bad_list(s: &str) -> CpuListError {
    CpuListError::List(crate::collect::error::clip(s, 40))
}

pub(crate) fn format_cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        while i + 1 < v.len() && v[i + 1] == v[i] + 1 {
            i += 1;
        }
        parts.push(if v[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", v[i])
        });
        i += 1;
    }
    parts.join(",")
}

/// sysfs cache sizes: `32K`, `10240K`, `1M`.
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    powerdiag_rules::parse_u64(s)
}

/// The bracketed choice of a sysfs selector: `always [madvise] never` → `madvise`.
pub(crate) fn bracketed(s: &str) -> Option<String> {
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(s[start..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_reads_in_the_collectors_words() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is a directory, not a regular file; refusing to read it",
                dir.path().display()
            )
        );
        let e = read(Path::new("/dev/null")).unwrap_err();
        assert_eq!(
            e,
            CollectError::NotRegular {
                path: "/dev/null".into(),
                kind: "a device"
            }
        );
        let fifo = dir.path().join("stat");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        assert!(
            matches!(
                read(&fifo),
                Err(CollectError::NotRegular { kind: "a FIFO", .. })
            ),
            "a FIFO is refused, not waited on"
        );
        assert!(open(&fifo, 10).is_err());
        let absent = dir.path().join("absent");
        assert_eq!(
            read(&absent).unwrap_err().to_string(),
            format!("{} does not exist", absent.display())
        );
        // Over the cap: an error for a read, a truncation (one byte past it) for a stream.
        let online = dir.path().join("online");
        std::fs::write(&online, "0-3\n").unwrap();
        assert_eq!(read_bytes(&online, 4).unwrap(), b"0-3\n");
        assert_eq!(
            read_bytes(&online, 3).unwrap_err(),
            CollectError::TooLarge {
                path: online.clone(),
                limit: 3
            }
        );
        let mut streamed = Vec::new();
        std::io::Read::read_to_end(&mut open(&online, 1).unwrap(), &mut streamed).unwrap();
        assert_eq!(streamed, b"0-");
    }

    #[test]
    fn procfs_sizes_are_not_trusted() {
        // stat says 0 bytes: the file is read whole all the same.
        let status = read(Path::new("/proc/self/status")).unwrap();
        assert!(status.starts_with("Name:"), "{status}");
    }

    #[test]
    fn cpu_masks_as_older_kernels_write_them() {
        assert_eq!(
            parse_cpu_mask("0000ffff").unwrap(),
            (0..16).collect::<Vec<_>>()
        );
        assert_eq!(parse_cpu_mask("00000001,00000000\n").unwrap(), vec![32]);
        assert_eq!(
            parse_cpu_mask("00000000,00000000,000000f0").unwrap(),
            vec![4, 5, 6, 7]
        );
        assert!(parse_cpu_mask("zz").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("0-4294967295").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert_eq!(format_cpu_list(&[8, 0, 1, 2, 3, 10, 11]), "0-3,8,10-11");
    }

    #[test]
    fn selectors_and_sizes() {
        assert_eq!(
            bracketed("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed("always madvise never"), None);
        assert_eq!(parse_size("10240K"), Some(10 << 20));
    }
}
