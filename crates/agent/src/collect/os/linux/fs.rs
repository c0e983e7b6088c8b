//! Small, strict readers for procfs/sysfs files. Every error names the file.
//!
//! Every file under [`crate::collect::os::Roots`] is read through here, including the files
//! the procfs crate parses (it gets our bytes through `FromRead`, never a path): a recorded
//! tree is outside input, so a file must be a regular file (a FIFO in place of `stat` would
//! block forever, a directory in place of `cpuinfo` made the procfs crate's line reader spin),
//! is opened without blocking, and is read up to a cap (a sparse 1 GB `node/online` must not
//! become 1 GB of memory and of report).

use std::{fs::File, io::Read, path::Path};

use crate::collect::CollectError;

/// The cap for one procfs/sysfs text file: `cpuinfo` of a 2,000-CPU machine is ~2 MiB.
pub(crate) const MAX_FILE: u64 = 8 << 20;
/// The cap for the mapping lists streamed by [`open`] (`maps`, `smaps_rollup`).
pub(crate) const MAX_STREAM: u64 = 256 << 20;

/// Opens a regular file without blocking (`O_NONBLOCK`: a FIFO never stalls the open) and
/// without following a symlink's target onto a non-regular file, limited to `cap` bytes.
pub(crate) fn open(path: &Path, cap: u64) -> Result<std::io::Take<File>, CollectError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(
            rustix::fs::OFlags::NONBLOCK.bits() as i32 | rustix::fs::OFlags::NOCTTY.bits() as i32,
        )
        .open(path)
        .map_err(|e| CollectError::io(path, &e))?;
    let meta = f.metadata().map_err(|e| CollectError::io(path, &e))?;
    let t = meta.file_type();
    let kind = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(kind) = kind {
        return Err(CollectError::NotRegular {
            path: path.into(),
            kind,
        });
    }
    Ok(f.take(cap.saturating_add(1)))
}

/// The file's bytes, at most `cap` of them (more is [`CollectError::TooLarge`]).
pub(crate) fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, CollectError> {
    let mut r = open(path, cap)?;
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)
        .map_err(|e| CollectError::io(path, &e))?;
    if buf.len() as u64 > cap {
        return Err(CollectError::TooLarge {
            path: path.into(),
            limit: cap,
        });
    }
    Ok(buf)
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
pub(crate) fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
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
pub(crate) fn parse_cpu_mask(s: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    let words: Vec<&str> = s.trim().split(',').collect();
    // 65,536 CPUs at most, as for lists.
    if words.len() > 2048 {
        return Err(format!(
            "CPU mask {:?} is too long",
            crate::collect::error::clip(s, 40)
        ));
    }
    for (i, word) in words.iter().rev().enumerate() {
        let w = u32::from_str_radix(word.trim(), 16)
            .map_err(|_| format!("{:?} is not a CPU mask", crate::collect::error::clip(s, 40)))?;
        let base = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(32))
            .ok_or_else(|| {
                format!(
                    "CPU mask {:?} is too long",
                    crate::collect::error::clip(s, 40)
                )
            })?;
        cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| base + b));
    }
    cpus.sort_unstable();
    Ok(cpus)
}

fn bad_list(s: &str) -> String {
    format!("bad CPU list {:?}", crate::collect::error::clip(s, 40))
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
