//! The AIX collector's external commands: the documented exception to "collectors run no
//! external commands".
//!
//! Some facts about mariadbd are not in libperfstat: its data, text and stack page sizes
//! (`getprocs64`'s `pi_data_l2psize`, ...), its environment (`getevars`) and its loaded
//! modules. `getprocs64`, `getevars` and `struct procentry64` are not in the `libc` crate and
//! their layout cannot be checked without an AIX system, so instead of hand-written bindings
//! the collector asks the AIX commands that print them:
//!
//! | fact | command |
//! |---|---|
//! | mariadbd's pid by name | `ps -A -o pid= -o comm=` |
//! | data/text/stack page sizes | `ps -o pid= -o dpgsz= -o tpgsz= -o spgsz= -p PID` (the `ps -Z` columns) |
//! | `LDR_CNTRL` | `ps eww PID` (environment after the arguments) |
//! | loaded modules (compiler, allocator) | `procldd PID` |
//! | DSCR default | `dscrctl -q` (`os_default_pd`) |
//! | a server directory's filesystem, size, free space and inodes | `df -k DIR` (AIX's default format, with `Iused` and `%Iused`) |
//!
//! Every command runs with an absolute path, `LC_ALL=C`, no stdin and a deadline
//! ([`TIMEOUT`]); its output is parsed here by pure functions, tested on every platform with
//! text in the documented formats. This module is the only place the AIX collector spawns
//! anything.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::collect::CollectError;

/// AIX `ps`.
pub(crate) const PS: &str = "/usr/bin/ps";
/// AIX `procldd` (proctools): the modules loaded into a process.
pub(crate) const PROCLDD: &str = "/usr/bin/procldd";
/// AIX `dscrctl`: the Data Stream Control Register settings.
pub(crate) const DSCRCTL: &str = "/usr/sbin/dscrctl";
/// AIX `df`: `-k` 1024-byte blocks, in the default format (not `-P`, whose POSIX columns have
/// no inodes). It runs `statvfs` on the directory, as the Linux collector does, and names the
/// mount and its logical volume, which `statvfs` alone does not.
pub(crate) const DF: &str = "/usr/bin/df";
/// Longest a command may run before it is killed.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
/// Most output read from a command (`ps eww` of a process with a large environment is the
/// longest).
const MAX_OUTPUT: u64 = 1 << 20;

/// `ps` arguments listing every process's pid and command name.
pub(crate) fn find_args() -> Vec<String> {
    ["-A", "-o", "pid=", "-o", "comm="]
        .map(String::from)
        .to_vec()
}

/// `ps` arguments printing `pid`'s data, text and stack page sizes (`ps -Z`'s DPGSZ, TPGSZ,
/// SPGSZ), in that order.
pub(crate) fn page_size_args(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = [
        "-o", "pid=", "-o", "dpgsz=", "-o", "tpgsz=", "-o", "spgsz=", "-p",
    ]
    .map(String::from)
    .to_vec();
    v.push(pid.to_string());
    v
}

/// `ps` arguments printing `pid`'s command line followed by its environment.
pub(crate) fn environment_args(pid: u32) -> Vec<String> {
    vec!["eww".into(), pid.to_string()]
}

/// A command's failure, or what it printed that could not be understood.
fn command_error(program: &str, message: String) -> CollectError {
    CollectError::Command {
        program: program.to_owned(),
        message,
    }
}

/// Runs `program` with `args` and returns its standard output. A non-zero exit status, a
/// spawn error or running past `timeout` is an error naming the command and, when it printed
/// one, its first line of standard error.
pub(crate) fn run(
    program: &str,
    args: &[String],
    timeout: Duration,
) -> Result<String, CollectError> {
    let fail = |m: String| command_error(program, m);
    let shown = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("{shown}: {e}")))?;
    // Read both pipes on their own threads so that a chatty command cannot block on a full
    // pipe while we wait for it.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(MAX_OUTPUT).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                // Our own child, by its handle.
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "{shown}: no answer within {:.0} s",
                    timeout.as_secs_f64()
                )));
            }
            Err(e) => return Err(fail(format!("{shown}: {e}"))),
        }
    };
    let stdout = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if status.success() {
        Ok(stdout)
    } else {
        let first = stderr.lines().map(str::trim).find(|l| !l.is_empty());
        Err(match first {
            Some(line) => fail(format!("{shown}: {status}: {line}")),
            None => fail(format!("{shown}: {status}")),
        })
    }
}

/// Pids whose command name (`comm`, or the last path component of it) is one of `names`, from
/// `ps -A -o pid= -o comm=` output. A heading line, if `ps` prints one, is skipped.
pub(crate) fn pids_named(out: &str, names: &[&str]) -> Vec<u32> {
    let mut pids: Vec<u32> = out
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let pid = cols.next()?.parse().ok()?;
            let comm = cols.next()?;
            let base = comm.rsplit('/').next().unwrap_or(comm);
            names.contains(&base).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Page sizes of a process's segments, bytes; `None` where `ps` printed `-`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PageSizes {
    pub(crate) data: Option<u64>,
    pub(crate) text: Option<u64>,
    pub(crate) stack: Option<u64>,
}

/// The line of `pid` in `ps -o pid= -o dpgsz= -o tpgsz= -o spgsz= -p PID` output: `8454302
/// 64K 64K 4K`.
pub(crate) fn parse_page_sizes(out: &str, pid: u32) -> Result<PageSizes, CollectError> {
    let fail = |m: String| command_error(PS, m);
    let line = line_of(out, pid).ok_or_else(|| {
        fail(format!(
            "ps printed no page sizes for pid {pid} (has it exited?)"
        ))
    })?;
    let cols: Vec<&str> = line.split_whitespace().skip(1).collect();
    let [data, text, stack] = cols.as_slice() else {
        return Err(fail(format!(
            "ps page sizes of pid {pid}: expected 3 columns after the pid, got `{}`",
            line.trim()
        )));
    };
    let size = |s: &str| -> Result<Option<u64>, CollectError> {
        if s == "-" {
            return Ok(None);
        }
        parse_size(s).map(Some).ok_or_else(|| {
            fail(format!(
                "ps page sizes of pid {pid}: `{s}` is not a page size"
            ))
        })
    };
    Ok(PageSizes {
        data: size(data)?,
        text: size(text)?,
        stack: size(stack)?,
    })
}

/// `4K`, `64K`, `16M`, `16G` (or a plain number of bytes) → bytes.
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 10),
        'm' | 'M' => (&s[..s.len() - 1], 20),
        'g' | 'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1 << shift).filter(|b| *b > 0)
}

/// `LDR_CNTRL` from `ps eww PID` output, whose line for the process is `PID TTY STAT TIME
/// command args... NAME=value...`.
///
/// `Ok(Some(value))`: set; `Ok(None)`: the environment was shown and has no `LDR_CNTRL`;
/// `Err`: no environment was shown at all (`ps` shows another user's environment only to
/// root), so nothing can be said.
pub(crate) fn parse_ldr_cntrl(out: &str, pid: u32) -> Result<Option<String>, CollectError> {
    let fail = |m: String| command_error(PS, m);
    let line = line_of(out, pid).ok_or_else(|| {
        fail(format!(
            "ps eww printed no line for pid {pid} (has it exited?)"
        ))
    })?;
    let env: Vec<(&str, &str)> = line
        .split_whitespace()
        .skip(4) // PID TTY STAT TIME
        .filter_map(env_pair)
        .collect();
    if env.is_empty() {
        return Err(fail(format!(
            "ps eww showed no environment for pid {pid}; run powerdiag as root or as mariadbd's user"
        )));
    }
    Ok(env
        .iter()
        .find(|(k, _)| *k == "LDR_CNTRL")
        .map(|(_, v)| (*v).to_owned()))
}

/// `NAME=value` with a shell-style variable name; command-line options (`--datadir=...`) and
/// paths are not environment entries.
fn env_pair(token: &str) -> Option<(&str, &str)> {
    let (name, value) = token.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, value))
}

/// The module paths of `procldd PID` output: the first line (`PID: command args`) is skipped,
/// every other non-empty line is a loaded module such as `/usr/lib/libc.a[shr_64.o]`.
pub(crate) fn parse_modules(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| {
            // `8454302:   /opt/mariadb/bin/mariadbd ...`
            !l.split_once(':')
                .is_some_and(|(pid, _)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
        .collect()
}

/// The OS default DSCR (`os_default_pd`) from `dscrctl -q` output, whose lines read
/// `os_default_pd = 0x0 (...)`: hexadecimal with `0x`, else decimal.
pub(crate) fn parse_dscr(out: &str) -> Option<u64> {
    out.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("os_default_pd")?;
        let value = rest.trim_start().strip_prefix(['=', ':'])?;
        let token = value.split_whitespace().next()?;
        match token
            .strip_prefix("0x")
            .or_else(|| token.strip_prefix("0X"))
        {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => token.parse().ok(),
        }
    })
}

/// `df` arguments for one directory (its filesystem's line only): the default (not `-P`)
/// format, whose `Iused` and `%Iused` columns are the only inode figures AIX's `df` prints.
pub(crate) fn df_args(dir: &str) -> Vec<String> {
    vec!["-k".into(), dir.into()]
}

/// One filesystem from `df -k DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DfRow {
    /// The device (`/dev/fslv00`, a logical volume) or remote name (`host:/export`).
    pub(crate) device: String,
    pub(crate) total_kb: u64,
    /// The `Free` column.
    pub(crate) available_kb: u64,
    /// Inodes derived from `Iused` and `%Iused`; `None` when `df` printed `-` or nothing for
    /// them (NFS and other remote filesystems), or `%Iused` is 0 (no total can be derived).
    pub(crate) inodes: Option<Inodes>,
    pub(crate) mount_point: String,
}

/// A filesystem's inodes as AIX `df` lets them be derived.
///
/// `df` prints the inodes in use (`Iused`) and their share (`%Iused`), not the total, so the
/// total is derived: `round(Iused × 100 / %Iused)`. `%Iused` is a rounded whole percentage,
/// so the derived total is approximate: the free share `available / total` it gives is
/// within ±0.5 percentage points of the true one (the rounding of `%Iused`), whatever the
/// filesystem's size. Enough for limits of a few percent (PD807), not for exact counts.
///
/// JFS2 (the usual AIX filesystem) allocates inodes dynamically from free space: its
/// `%Iused` is measured against the inodes the free space could still hold, so on JFS2
/// running out of inodes goes with running out of space (PD801), and the inode figures add
/// little beyond the space. JFS (JFS1) has a fixed inode count set at `crfs` time, like ext4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inodes {
    /// `Iused`.
    pub(crate) used: u64,
    /// `round(Iused × 100 / %Iused)` (approximate, see above).
    pub(crate) total: u64,
    /// `total - used`.
    pub(crate) available: u64,
}

impl Inodes {
    /// From `Iused` and `%Iused`. `%Iused` 0 means under 0.5% used: the total is then taken as
    /// `Iused × 200`, the least it can be, so the free share (99.5%) is a lower bound — enough
    /// to judge against PD807's limits of a few percent. `None` when `Iused` is 0 too.
    pub(crate) fn derive(used: u64, used_pct: u64) -> Option<Inodes> {
        if used_pct == 0 {
            let total = used.checked_mul(200).filter(|t| *t > 0)?;
            return Some(Inodes {
                used,
                total,
                available: total - used,
            });
        }
        // Rounded to nearest: (used × 100 + pct / 2) / pct, in integers (no f64 precision
        // loss on large counts).
        let total = u128::from(used)
            .checked_mul(100)?
            .checked_add(u128::from(used_pct / 2))?
            / u128::from(used_pct);
        let total = u64::try_from(total).ok()?.max(used);
        Some(Inodes {
            used,
            total,
            available: total - used,
        })
    }
}

/// The filesystem line of `df -k DIR` in AIX's default format:
///
/// ```text
/// Filesystem    1024-blocks      Free %Used    Iused %Iused Mounted on
/// /dev/fslv00     104857600   3145728   98%    41210     6% /var/lib/mysql
/// ```
///
/// The mount point is the rest of the line (it may hold spaces). The header line is skipped
/// when present; a device name alone on its line (as a long name may be printed) is joined
/// with the next line. `Iused` and `%Iused` may be `-` or missing (NFS and other remote
/// filesystems): the row then has no inodes. `-` in a size column (a filesystem without
/// sizes, e.g. `/proc`) and a line with columns missing are errors naming `df` and the line.
pub(crate) fn parse_df(out: &str) -> Result<DfRow, CollectError> {
    let fail = |m: String| command_error(DF, m);
    let mut lines = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Filesystem"));
    let first = lines
        .next()
        .ok_or_else(|| fail("df printed no filesystem line".to_owned()))?;
    let joined;
    let line = if first.split_whitespace().nth(1).is_none() {
        match lines.next() {
            Some(next) => {
                joined = format!("{first} {next}");
                joined.as_str()
            }
            None => first,
        }
    } else {
        first
    };
    let missing = || {
        fail(format!(
            "df: expected 7 columns (Filesystem 1024-blocks Free %Used Iused %Iused Mounted on) in {line:?}"
        ))
    };
    // Splits off the next whitespace-delimited column.
    let next = |rest: &str| -> Option<(String, String)> {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        (end > 0).then(|| (t[..end].to_owned(), t[end..].to_owned()))
    };
    let mut rest = line.to_owned();
    let mut cols = Vec::with_capacity(4);
    for _ in 0..4 {
        let (col, r) = next(&rest).ok_or_else(missing)?;
        cols.push(col);
        rest = r;
    }
    let size = |i: usize| {
        cols[i].parse::<u64>().map_err(|_| {
            fail(format!(
                "df: `{}` is not a size in {line:?} ({} reports no sizes)",
                cols[i], cols[0]
            ))
        })
    };
    let (total_kb, available_kb) = (size(1)?, size(2)?);
    // `Iused` and `%Iused`: numbers, `-`, or absent (a remote filesystem printing blanks; the
    // mount point, an absolute path, cannot be mistaken for them).
    let is_count = |s: &str| s == "-" || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    let is_pct = |s: &str| {
        s == "-"
            || s.strip_suffix('%')
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut inodes = None;
    if let Some((iused, r)) = next(&rest).filter(|(c, _)| is_count(c)) {
        let (ipct, r) = next(&r).filter(|(c, _)| is_pct(c)).ok_or_else(missing)?;
        rest = r;
        if let (Ok(used), Ok(pct)) = (
            iused.parse::<u64>(),
            ipct.trim_end_matches('%').parse::<u64>(),
        ) {
            inodes = Inodes::derive(used, pct);
        }
    }
    let mount_point = rest.trim();
    if mount_point.is_empty() {
        return Err(missing());
    }
    Ok(DfRow {
        device: cols[0].clone(),
        total_kb,
        available_kb,
        inodes,
        mount_point: mount_point.to_owned(),
    })
}

/// The line whose first column is `pid`.
fn line_of(out: &str, pid: u32) -> Option<&str> {
    out.lines().find(|l| {
        l.split_whitespace()
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            == Some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact command lines, as ARCHITECTURE.md and the README name them.
    #[test]
    fn command_lines() {
        let line = |program: &str, args: Vec<String>| format!("{program} {}", args.join(" "));
        assert_eq!(line(PS, find_args()), "/usr/bin/ps -A -o pid= -o comm=");
        assert_eq!(
            line(PS, page_size_args(42)),
            "/usr/bin/ps -o pid= -o dpgsz= -o tpgsz= -o spgsz= -p 42"
        );
        assert_eq!(line(PS, environment_args(42)), "/usr/bin/ps eww 42");
        assert_eq!(line(PROCLDD, vec!["42".into()]), "/usr/bin/procldd 42");
        assert_eq!(line(DSCRCTL, vec!["-q".into()]), "/usr/sbin/dscrctl -q");
        assert_eq!(
            line(DF, df_args("/data/mariadb/")),
            "/usr/bin/df -k /data/mariadb/"
        );
    }

    #[test]
    fn finds_mariadbd_by_name() {
        let out = "       1 init\n 4325670 mysqld_safe\n 8454302 mariadbd\n 9000000 /opt/mariadb/bin/mariadbd\n   77 ksh\n";
        assert_eq!(
            pids_named(out, &["mariadbd", "mysqld"]),
            [8_454_302, 9_000_000]
        );
        let with_header = "     PID COMMAND\n 8454302 mariadbd\n";
        assert_eq!(pids_named(with_header, &["mariadbd"]), [8_454_302]);
        assert!(pids_named("", &["mariadbd"]).is_empty());
    }

    #[test]
    fn page_sizes() {
        let out = " 8454302   64K   64K    4K\n";
        assert_eq!(
            parse_page_sizes(out, 8_454_302),
            Ok(PageSizes {
                data: Some(64 << 10),
                text: Some(64 << 10),
                stack: Some(4096),
            })
        );
        // A heading line (when `=` headers are not honoured) and an unknown size.
        let out = "     PID DPGSZ TPGSZ SPGSZ\n 8454302   16M    -    64K\n";
        assert_eq!(
            parse_page_sizes(out, 8_454_302),
            Ok(PageSizes {
                data: Some(16 << 20),
                text: None,
                stack: Some(64 << 10),
            })
        );
        assert!(
            parse_page_sizes(out, 1)
                .unwrap_err()
                .to_string()
                .contains("no page sizes")
        );
        let err = parse_page_sizes("8454302 64K 64K\n", 8_454_302)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected 3 columns"), "{err}");
        let err = parse_page_sizes("8454302 64K big 4K\n", 8_454_302)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`big`"), "{err}");
    }

    const DF_HEADER: &str =
        "Filesystem    1024-blocks      Free %Used    Iused %Iused Mounted on\n";

    /// IBM's example for `df -k /test`, and a JFS2 datadir.
    #[test]
    fn df_jfs2_line() {
        let out = format!(
            "{DF_HEADER}/dev/lv11           16384     15824    4%       18     1% /tmp/ravi1\n"
        );
        assert_eq!(
            parse_df(&out),
            Ok(DfRow {
                device: "/dev/lv11".into(),
                total_kb: 16_384,
                available_kb: 15_824,
                inodes: Some(Inodes {
                    used: 18,
                    total: 1_800,
                    available: 1_782,
                }),
                mount_point: "/tmp/ravi1".into(),
            })
        );
        let out = format!(
            "{DF_HEADER}/dev/fslv00     104857600   3145728   98%   412107     7% /var/lib/mysql\n"
        );
        let row = parse_df(&out).unwrap();
        assert_eq!(
            (
                row.device.as_str(),
                row.total_kb,
                row.available_kb,
                row.mount_point.as_str()
            ),
            ("/dev/fslv00", 104_857_600, 3_145_728, "/var/lib/mysql")
        );
        // round(412107 × 100 / 7) = 5887243 (5887242.86).
        assert_eq!(
            row.inodes,
            Some(Inodes {
                used: 412_107,
                total: 5_887_243,
                available: 5_475_136,
            })
        );
        // Without the header.
        let row = parse_df("/dev/hd3 4194304 3145728 25% 120 1% /tmp\n").unwrap();
        assert_eq!(row.inodes.map(|i| i.total), Some(12_000));
    }

    #[test]
    fn df_nfs_line_has_no_inodes() {
        let out =
            format!("{DF_HEADER}nas1:/export/db   2097152   1048576   50%        -      - /db\n");
        assert_eq!(
            parse_df(&out),
            Ok(DfRow {
                device: "nas1:/export/db".into(),
                total_kb: 2_097_152,
                available_kb: 1_048_576,
                inodes: None,
                mount_point: "/db".into(),
            })
        );
        // Blanks instead of `-`: the mount point follows %Used.
        let row = parse_df(&format!(
            "{DF_HEADER}nas1:/export/db 2097152 1048576 50% /db\n"
        ))
        .unwrap();
        assert_eq!((row.inodes, row.mount_point.as_str()), (None, "/db"));
    }

    #[test]
    fn df_iused_share_zero_gives_a_lower_bound_of_the_free_share() {
        let row = parse_df(&format!(
            "{DF_HEADER}/dev/fslv02 1048576 1048000 1% 4 0% /data2\n"
        ))
        .unwrap();
        // Under 0.5% used: at least 99.5% free.
        assert_eq!(
            (row.inodes, row.mount_point.as_str()),
            (
                Some(Inodes {
                    used: 4,
                    total: 800,
                    available: 796
                }),
                "/data2"
            )
        );
        assert_eq!(Inodes::derive(0, 0), None);
        // A full inode table: nothing available.
        assert_eq!(
            Inodes::derive(500, 100),
            Some(Inodes {
                used: 500,
                total: 500,
                available: 0
            })
        );
        // Rounded to nearest: 10 × 100 / 3 = 333.3 → 333; 20 × 100 / 3 = 666.7 → 667.
        assert_eq!(Inodes::derive(10, 3).map(|i| i.total), Some(333));
        assert_eq!(Inodes::derive(20, 3).map(|i| i.total), Some(667));
        // Counts near u64::MAX do not overflow the intermediate product.
        assert_eq!(
            Inodes::derive(u64::MAX / 2, 100).map(|i| i.available),
            Some(0)
        );
    }

    #[test]
    fn df_mount_point_with_a_space() {
        let row = parse_df(&format!(
            "{DF_HEADER}/dev/fslv03 2048 1024 50% 30 2% /db data\n"
        ))
        .unwrap();
        assert_eq!(
            (
                row.device.as_str(),
                row.mount_point.as_str(),
                row.inodes.map(|i| i.total)
            ),
            ("/dev/fslv03", "/db data", Some(1_500))
        );
        // A device name alone on its line is joined with the next.
        let row = parse_df(&format!(
            "{DF_HEADER}/dev/a_very_long_logical_volume_name\n  2048 1024 50% 30 2% /db\n"
        ))
        .unwrap();
        assert_eq!(
            (row.device.as_str(), row.total_kb, row.mount_point.as_str()),
            ("/dev/a_very_long_logical_volume_name", 2_048, "/db")
        );
    }

    #[test]
    fn df_garbage_is_an_error_naming_df_and_the_line() {
        let err = parse_df(&format!("{DF_HEADER}/proc - - - - - /proc\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("df") && err.contains("/proc reports no sizes"),
            "{err}"
        );
        assert!(
            parse_df("")
                .unwrap_err()
                .to_string()
                .contains("no filesystem line")
        );
        assert!(
            parse_df(DF_HEADER)
                .unwrap_err()
                .to_string()
                .contains("no filesystem line")
        );
        for line in [
            "/dev/hd4 100 50\n",
            "/dev/hd4 100 50 50%\n",
            "/dev/hd4 100 50 50% 18\n",
            "/dev/hd4 100 50 50% 18 1%\n",
            "/dev/hd4 100 50 50% 18 x% /\n",
            "garbage\n",
        ] {
            let err = parse_df(line).unwrap_err().to_string();
            assert!(
                err.contains("df: expected 7 columns") && err.contains(line.trim()),
                "{line:?}: {err}"
            );
        }
        let err = parse_df("/dev/hd4 lots 50 50% 18 1% /\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`lots` is not a size"), "{err}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("16G"), Some(16 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    const EWW: &str = "      PID    TTY STAT  TIME COMMAND\n  8454302      - A    41:07 /opt/mariadb/bin/mariadbd --basedir=/opt/mariadb --datadir=/data/mariadb _=/opt/mariadb/bin/mysqld_safe LANG=C PATH=/usr/bin:/etc HOME=/home/mysql LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K\n";

    #[test]
    fn ldr_cntrl_from_the_environment() {
        assert_eq!(
            parse_ldr_cntrl(EWW, 8_454_302),
            Ok(Some(
                "DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K".into()
            ))
        );
        let without = EWW.replace(
            " LDR_CNTRL=DATAPSIZE=64K@TEXTPSIZE=64K@STACKPSIZE=64K@SHMPSIZE=64K",
            "",
        );
        assert_eq!(parse_ldr_cntrl(&without, 8_454_302), Ok(None));
    }

    #[test]
    fn no_environment_shown_is_not_absence() {
        // Another user's process seen without root: the command line only.
        let out = "      PID    TTY STAT  TIME COMMAND\n  8454302      - A    41:07 /opt/mariadb/bin/mariadbd --basedir=/opt/mariadb --user=mysql\n";
        let err = parse_ldr_cntrl(out, 8_454_302).unwrap_err().to_string();
        assert!(err.contains("no environment"), "{err}");
        assert!(
            parse_ldr_cntrl(out, 42)
                .unwrap_err()
                .to_string()
                .contains("no line")
        );
        // An argument that looks like an option assignment is not the environment.
        assert_eq!(env_pair("--datadir=/data"), None);
        assert_eq!(env_pair("9X=1"), None);
        assert_eq!(env_pair("=x"), None);
        assert_eq!(env_pair("_=/usr/bin/nohup"), Some(("_", "/usr/bin/nohup")));
    }

    #[test]
    fn modules() {
        let out = "8454302:  /opt/mariadb/bin/mariadbd --basedir=/opt/mariadb\n/usr/lib/libc.a[shr_64.o]\n\n  /usr/lib/libpthreads.a[shr_xpg5_64.o]\n";
        assert_eq!(
            parse_modules(out),
            [
                "/usr/lib/libc.a[shr_64.o]",
                "/usr/lib/libpthreads.a[shr_xpg5_64.o]"
            ]
        );
        assert!(parse_modules("").is_empty());
    }

    #[test]
    fn dscr() {
        let out = "\nCurrent DSCR settings:\n    Data Streams Version = V2.06\n    number_of_streams = 16\n    platform_default_pd = 0x5 (DPFD_DEEP)\n    os_default_pd = 0x0 (DPFD_DEFAULT)\n";
        assert_eq!(parse_dscr(out), Some(0));
        assert_eq!(
            parse_dscr("os_default_pd = 0x1d (DPFD_DEEP, SSE)"),
            Some(0x1d)
        );
        assert_eq!(parse_dscr("os_default_pd: 7"), Some(7));
        assert_eq!(parse_dscr("platform_default_pd = 0x5"), None);
        assert_eq!(parse_dscr("os_default_pd = deep"), None);
    }

    #[test]
    fn runs_commands_with_a_deadline() {
        let ok = run(
            "/bin/sh",
            &["-c".into(), "echo \"$LC_ALL\"".into()],
            TIMEOUT,
        );
        assert_eq!(ok.as_deref(), Ok("C\n"));
        let failed = run(
            "/bin/sh",
            &[
                "-c".into(),
                "echo 'ps: 0509-048 Flag -Z is not valid' >&2; exit 1".into(),
            ],
            TIMEOUT,
        )
        .unwrap_err()
        .to_string();
        assert!(failed.contains("0509-048"), "{failed}");
        let started = Instant::now();
        let slow = run(
            "/bin/sh",
            &["-c".into(), "exec sleep 5".into()],
            Duration::from_millis(100),
        )
        .unwrap_err()
        .to_string();
        assert!(slow.contains("no answer"), "{slow}");
        assert!(started.elapsed() < Duration::from_secs(4));
        let missing = run("/nonexistent/ps", &[], TIMEOUT)
            .unwrap_err()
            .to_string();
        assert!(missing.starts_with("/nonexistent/ps"), "{missing}");
    }
}
