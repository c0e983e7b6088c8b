//! Build facts for `powerdiag --version` and the agent's `powerdiag_build_info`: git revision,
//! build date, target and the rustc version. Outside a git
//! checkout (a source tarball, a crate package) or without git, the revision is "unknown"; the
//! build honours SOURCE_DATE_EPOCH for reproducible dates.
use std::process::Command;

fn main() {
    let rev = git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|s| s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    // Days since the epoch to a civil date (Howard Hinnant's algorithm), to avoid a build dependency.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=POWERDIAG_GIT_REVISION={rev}");
    println!("cargo:rustc-env=POWERDIAG_BUILD_DATE={y:04}-{m:02}-{d:02}");
    println!("cargo:rustc-env=POWERDIAG_TARGET={target}");
    // `rustc 1.95.0 (hash date)` -> `1.95.0`, from the compiler cargo builds with.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=POWERDIAG_RUSTC_VERSION={rustc_version}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit changes HEAD or the ref it points at; ask git where they are (a worktree's
    // .git is a file). Outside a checkout there is nothing to watch.
    let mut watch = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        if let Some(p) = git(&["rev-parse", "--git-path", &w])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}
