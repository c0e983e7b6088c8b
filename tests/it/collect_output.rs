//! `collect -o`: the snapshot replaces only a regular file, through a temporary file nobody can
//! predict or plant a link at. Needs no server: without one the snapshot says MariaDB is not
//! reachable, which is all these tests write.

use std::{os::unix::fs::symlink, path::Path};

use crate::support::*;

fn collect_to(path: &Path) -> Run {
    run(powerdiag()
        .args(["collect", "--no-probe", "--sample-window", "0", "-o"])
        .arg(path))
}

#[test]
fn writes_and_replaces_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("snap.json");
    std::fs::write(&out, "old").unwrap();
    let r = collect_to(&out);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"schema_version\""), "{text}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left behind: {left:?}");
}

#[test]
fn refuses_a_symlink_and_leaves_its_target_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path().join("snap.json");
    symlink(&victim, &link).unwrap();
    let r = collect_to(&link);
    assert_ne!(r.code, 0, "a symlink target is refused");
    assert!(
        r.stderr.contains(&link.display().to_string())
            && r.stderr.contains("symbolic link")
            && r.stderr.contains("-o -"),
        "names the file, what it is and the way out: {}",
        r.stderr
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

/// Special files are made in a temporary directory, never the real `/dev/null`: a regression
/// run as root would replace the machine's `/dev/null` with a regular file.
#[test]
fn refuses_fifos_sockets_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    for (path, kind) in [
        (&fifo, "a FIFO"),
        (&socket, "a socket"),
        (&sub, "a directory"),
    ] {
        let r = collect_to(path);
        assert_ne!(r.code, 0, "{} is refused", path.display());
        assert!(
            r.stderr.contains(&path.display().to_string())
                && r.stderr.contains(kind)
                && r.stderr.contains("-o -"),
            "{}: {}",
            path.display(),
            r.stderr
        );
    }
    use std::os::unix::fs::FileTypeExt;
    let t = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(
        t(&fifo).is_fifo() && t(&socket).is_socket(),
        "left as they were"
    );
    assert!(sub.is_dir() && std::fs::read_dir(&sub).unwrap().next().is_none());
}

#[test]
fn a_link_planted_at_the_old_temporary_name_is_not_followed() {
    // The old code wrote `<target>.tmp-<pid>`, created following links. Plant a link at every
    // such name a child may get (pids are bounded by pid_max) and check none is written through.
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = dir.path().join("snap.json");
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32768)
        .min(1 << 22);
    // Planting millions of links is slow; the child's pid comes after ours, so plant the next
    // range above our own pid (wrapping), which the spawned child lands in on a quiet machine.
    let me = std::process::id();
    for pid in (me..me + 4096).map(|p| p % pid_max) {
        let _ = symlink(&victim, out.with_extension(format!("tmp-{pid}")));
    }
    let r = collect_to(&out);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::read_to_string(&victim).unwrap() == "precious",
        "the snapshot was written through a planted link"
    );
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("\"schema_version\"")
    );
}
