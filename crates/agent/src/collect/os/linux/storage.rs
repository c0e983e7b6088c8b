//! The filesystems under the server's directories (`datadir`, `tmpdir`, the InnoDB log
//! directory): free space (`statvfs`; a recorded tree's `recorded/statvfs`), the mount
//! (`/proc/PID/mountinfo`, the server's own mount namespace), and the busy time and queue of
//! its block device over the window (`/proc/diskstats`).

use crate::collect::{collector::Descriptor, os::sections};
use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
};

use powerdiag_rules::{Filesystem, Gathered, OsFacts};
use procfs::process::MountInfos;

use super::fs::{parse_procfs, read};
use crate::collect::{
    CollectError,
    os::{
        Roots, recorded,
        registry::{Collector, Ctx},
    },
};

/// The `storage` section.
pub(super) struct Storage;

/// Per device (`major:minor`): (name, ms doing I/O, weighted ms of I/O), from `/proc/diskstats`.
type DiskStats = HashMap<String, (String, u64, u64)>;

impl Collector for Storage {
    const SECTION: &'static Descriptor = &sections::STORAGE;
    type Baseline = DiskStats;
    type Output = Vec<Filesystem>;

    fn begin(&self, ctx: &Ctx) -> Option<DiskStats> {
        ctx.server_dirs.as_ref().ok()?;
        read_diskstats(ctx.roots).ok()
    }

    fn collect(
        &self,
        ctx: &Ctx,
        baseline: Option<DiskStats>,
        _: &OsFacts,
    ) -> Result<Vec<Filesystem>, CollectError> {
        let dirs = ctx.server_dirs.as_ref().map_err(Clone::clone)?;
        // Free space: statvfs on the live system; a recorded tree's `recorded/statvfs`.
        let recorded = if ctx.roots.is_live() {
            None
        } else {
            let dir = ctx
                .roots
                .recorded
                .as_deref()
                .filter(|d| d.join("statvfs").exists());
            let dir = dir.ok_or_else(|| {
                CollectError::skipped(
                    "unavailable: free space is read from the live filesystems (this recorded tree has no recorded/statvfs)",
                )
            })?;
            Some(recorded::statvfs(dir)?)
        };
        // The server's view: its mount namespace and root, when we may look (root or the same
        // user); else ours. A tree holds the server's mountinfo (`proc/PID/mountinfo`).
        let pid = ctx.process.as_ref().ok().map(|f| f.pid);
        let ns_root = pid
            .filter(|_| ctx.roots.is_live())
            .map(|p| ctx.roots.proc(format!("{p}/root")))
            .filter(|p| std::fs::read_dir(p).is_ok());
        let own = pid.map(|p| ctx.roots.proc(format!("{p}/mountinfo")));
        let mountinfo = match (&own, &ns_root) {
            (Some(m), Some(_)) => m.clone(),
            (Some(m), None) if !ctx.roots.is_live() && m.is_file() => m.clone(),
            _ => ctx.roots.proc("self/mountinfo"),
        };
        let mounts: MountInfos = parse_procfs(&mountinfo)?;
        let now = read_diskstats(ctx.roots).ok();
        let window_ms = ctx.window.as_secs_f64() * 1000.0;

        // One entry per filesystem, the roles it holds in order.
        let mut by_mount: BTreeMap<String, Filesystem> = BTreeMap::new();
        for (role, path) in dirs {
            let on_host = match &ns_root {
                Some(root) => root.join(path.trim_start_matches('/')),
                None => ctx.roots.root(path),
            };
            // One directory that cannot be read (removed, no permission) costs only its own
            // entry: the others are still judged, and the rules say which one is unknown.
            let vfs = match &recorded {
                None => rustix::fs::statvfs(&on_host)
                    .map(|v| {
                        let frsize = if v.f_frsize > 0 {
                            v.f_frsize
                        } else {
                            v.f_bsize
                        };
                        recorded::Vfs {
                            frsize,
                            blocks: v.f_blocks,
                            bavail: v.f_bavail,
                            inodes: Some((v.f_files, v.f_favail)),
                        }
                    })
                    .map_err(|e| {
                        CollectError::io(
                            &on_host,
                            &std::io::Error::from_raw_os_error(e.raw_os_error()),
                        )
                    }),
                Some(table) => table.get(&recorded::normal(path)).copied().ok_or_else(|| {
                    CollectError::NotFound {
                        path: format!("recorded/statvfs: {path}").into(),
                    }
                }),
            };
            let mount = mount_of(&mounts, Path::new(path));
            let key = match (&vfs, mount) {
                (Ok(_), Some(m)) => m.mount_point.display().to_string(),
                _ => path.clone(),
            };
            let fs = by_mount.entry(key).or_insert_with(|| {
                let mut fs = Filesystem {
                    roles: Vec::new(),
                    path: path.clone(),
                    mount_point: mount.map(|m| m.mount_point.display().to_string()),
                    fs_type: mount.map(|m| m.fs_type.clone()),
                    device: None,
                    ..Default::default()
                };
                match &vfs {
                    Ok(v) => {
                        fs.total_bytes = v.blocks.saturating_mul(v.frsize);
                        fs.available_bytes = v.bavail.saturating_mul(v.frsize);
                        fs.inodes_total = v.inodes.map(|i| i.0);
                        fs.inodes_available = v.inodes.map(|i| i.1);
                    }
                    Err(e) => fs.space_unread = Some(e.to_string()),
                }
                let majmin = mount.map(|m| m.majmin.clone());
                match (&majmin, &baseline, &now) {
                    (Some(mm), _, _) if mm.starts_with("0:") => {
                        fs.io_unread = Some(format!(
                            "{} has no block device",
                            fs.fs_type.as_deref().unwrap_or("this filesystem")
                        ));
                    }
                    (Some(mm), Some(before), Some(after)) if window_ms > 0.0 => {
                        match (before.get(mm), after.get(mm)) {
                            (Some(b), Some(a)) => {
                                fs.device = Some(format!("{mm} {}", a.0));
                                fs.busy_share =
                                    Some((a.1.saturating_sub(b.1) as f64 / window_ms).min(1.0));
                                fs.avg_in_flight = Some(a.2.saturating_sub(b.2) as f64 / window_ms);
                                fs.io_basis = Some(format!("window {:.2} s", window_ms / 1000.0));
                            }
                            _ => {
                                fs.io_unread =
                                    Some(format!("device {mm} is not in /proc/diskstats"));
                            }
                        }
                    }
                    (Some(_), _, _) => {
                        fs.io_unread = Some(if ctx.roots.is_live() {
                            "no sample window (--sample-window 0): device busy time not measured"
                                .into()
                        } else {
                            "the recorded tree has no recorded window (recorded/window-start/proc/diskstats): device busy time not measured".into()
                        });
                    }
                    (None, _, _) => {
                        fs.io_unread = Some(format!(
                            "no mount found for {path} in {}",
                            mountinfo.display()
                        ));
                    }
                }
                fs
            });
            fs.roles.push(role.clone());
        }
        Ok(by_mount.into_values().collect())
    }

    fn store(facts: &mut OsFacts, section: Gathered<Vec<Filesystem>>) {
        facts.storage = section;
    }
}

/// The mount holding `path`: the longest mount point it lies under (the last one mounted there
/// when several are stacked).
fn mount_of<'a>(mounts: &'a MountInfos, path: &Path) -> Option<&'a procfs::process::MountInfo> {
    mounts
        .0
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.mount_point))
        .max_by_key(|(i, m)| (m.mount_point.components().count(), *i))
        .map(|(_, m)| m)
}

/// `/proc/diskstats`: `major minor name` then the counters; the 10th counter is the ms spent
/// doing I/O, the 11th the weighted ms (Documentation/admin-guide/iostats.rst).
fn read_diskstats(r: &Roots) -> Result<DiskStats, CollectError> {
    let path = r.proc("diskstats");
    Ok(parse_diskstats(&read(&path)?))
}

fn parse_diskstats(text: &str) -> DiskStats {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f.get(i)?.parse::<u64>().ok();
            Some((
                format!("{}:{}", n(0)?, n(1)?),
                (f.get(2)?.to_string(), n(12)?, n(13)?),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::FromRead;

    #[test]
    fn diskstats_lines() {
        let d = parse_diskstats(
            "   8       0 sda 100 0 800 50 20 0 160 40 0 900 1200 0 0 0 0\n 259 1 nvme0n1p1 1 2 3\n",
        );
        assert_eq!(d["8:0"], ("sda".to_owned(), 900, 1200));
        assert!(!d.contains_key("259:1"));
    }

    #[test]
    fn the_deepest_mount_holds_the_path() {
        let text = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 8:16 / /var/lib/mysql rw - xfs /dev/sdb rw
31 22 0:40 / /var/lib/mysql-tmp rw - tmpfs tmpfs rw
";
        let m = MountInfos::from_read(text.as_bytes()).unwrap();
        let at = |p: &str| mount_of(&m, Path::new(p)).unwrap().majmin.clone();
        assert_eq!(at("/var/lib/mysql/"), "8:16");
        assert_eq!(at("/var/lib/mysql/ib_logs"), "8:16");
        // A sibling whose name only starts like the mount point is not under it.
        assert_eq!(at("/var/lib/mysql-tmp"), "0:40");
        assert_eq!(at("/tmp"), "8:1");
    }
}
