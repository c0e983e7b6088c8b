//! Small, strict readers for procfs/sysfs files. Every error names the file.

use std::path::Path;

/// The file's text; the error names the path and the reason.
pub(crate) fn read(path: &Path) -> Result<String, String> {
    // procfs files report size 0: read to the end, but refuse absurd sizes from a hostile tree.
    use std::io::Read;
    const MAX: u64 = 64 << 20;
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    f.take(MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text)
}

pub(crate) fn read_trim(path: &Path) -> Result<String, String> {
    read(path).map(|s| s.trim().to_owned())
}

pub(crate) fn read_u64(path: &Path) -> Result<u64, String> {
    let t = read_trim(path)?;
    t.parse()
        .map_err(|_| format!("{}: {t:?} is not a number", path.display()))
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
            return Err(format!("bad CPU list {s:?}"));
        };
        if b < a || b - a > 65_536 || out.len() > 65_536 {
            return Err(format!("bad CPU list {s:?}"));
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
    for (i, word) in words.iter().rev().enumerate() {
        let w = u32::from_str_radix(word.trim(), 16)
            .map_err(|_| format!("'{}' is not a CPU mask", s.trim()))?;
        let base = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(32))
            .ok_or_else(|| format!("CPU mask '{}' is too long", s.trim()))?;
        cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| base + b));
    }
    cpus.sort_unstable();
    Ok(cpus)
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
