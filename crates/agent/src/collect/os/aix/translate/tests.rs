//! Data-driven tests: each directory under `tests/fixtures/aix` holds raw perfstat values
//! (`perfstat.txt`, `field = value`; `dir.<role> = path` for the server's directories;
//! `process.` for mariadbd's `perfstat_process` at both ends of the window, `process_before.`
//! for its reading when the window opened only) and the
//! output of the commands in `ps.rs` (`<command>.out`, or `<command>.err` for a failed run;
//! `df-<role>.out` per directory); the facts and verdicts they give are insta snapshots
//! in `tests/fixtures/aix/snapshots/`. The raw values
//! are set field by field on zeroed perfstat-sys structs — never byte dumps — so the tests hold
//! on every platform and endianness.

use std::{
    collections::BTreeMap,
    ffi::c_char,
    path::{Path, PathBuf},
};

use perfstat_sys::{
    PartitionFlags, PartitionTotal, PartitionTotalLayout, mask, perfstat_cpu_total_t,
    perfstat_memory_page_t, perfstat_memory_total_t, perfstat_partition_config_t,
    perfstat_partition_total_t, perfstat_process_t,
};
use powerdiag_rules::{Compiler, Gathered, evaluate, testing::SnapshotBuilder};
use serde_json::json;

use super::*;
use crate::collect::os::aix::ps;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/aix")
}

/// `key = value` lines; `#` starts a comment line.
fn pairs(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not key = value: {l}"));
            (k.trim().to_owned(), v.trim().to_owned())
        })
        .collect()
}

fn flags(value: &str) -> Result<PartitionFlags, CollectError> {
    let mut w = 0;
    for name in value.split('|').map(str::trim).filter(|n| !n.is_empty()) {
        w |= match name {
            "SMT_CAPABLE" => mask::SMT_CAPABLE,
            "SMT_ENABLED" => mask::SMT_ENABLED,
            "LPAR_CAPABLE" => mask::LPAR_CAPABLE,
            "LPAR_ENABLED" => mask::LPAR_ENABLED,
            "SHARED_CAPABLE" => mask::SHARED_CAPABLE,
            "SHARED_ENABLED" => mask::SHARED_ENABLED,
            "DLPAR_CAPABLE" => mask::DLPAR_CAPABLE,
            "CAPPED" => mask::CAPPED,
            "KERNEL_IS_64" => mask::KERNEL_IS_64,
            "POOL_UTIL_AUTHORITY" => mask::POOL_UTIL_AUTHORITY,
            "DONATE_CAPABLE" => mask::DONATE_CAPABLE,
            "DONATE_ENABLED" => mask::DONATE_ENABLED,
            "POWER_SAVE" => mask::POWER_SAVE,
            other => return Err(fixture(format!("unknown flag {other}"))),
        };
    }
    Ok(PartitionFlags(w))
}

fn set_text(dst: &mut [c_char], s: &str) {
    assert!(s.len() < dst.len(), "{s} is too long");
    for (d, b) in dst.iter_mut().zip(s.bytes()) {
        // ASCII: the same value as `i8` or `u8`.
        *d = b as c_char;
    }
}

/// Sets numeric fields by name.
macro_rules! numbers {
    ($t:expr, $key:expr, $value:expr; $($field:ident),* $(,)?) => {{
        let v = $value.replace('_', "");
        match $key {
            $(stringify!($field) => {
                $t.$field = v.parse().map_err(|e| fixture(format!("{} = {}: {e}", $key, $value)))?;
            })*
            other => return Err(fixture(format!("unknown field {other}"))),
        }
    }};
}

fn set_total(
    t: &mut perfstat_partition_total_t,
    key: &str,
    value: &str,
) -> Result<(), CollectError> {
    if key == "type" {
        t.type_ = flags(value)?.into();
        return Ok(());
    }
    numbers!(t, key, value;
        lpar_id, entitled_proc_capacity, online_cpus, max_cpus, min_cpus, pool_id,
        phys_cpus_pool, puser, psys, pidle, pwait, pool_idle_time, phantintrs,
        invol_virt_cswitch, vol_virt_cswitch, timebase_last, idle_donated_purr,
        busy_donated_purr, idle_stolen_purr, busy_stolen_purr, online_lcpus, smt_thrds,
        puser_spurr, psys_spurr, pidle_spurr, pwait_spurr, spurrflag, purr_counter,
        spurr_counter);
    Ok(())
}

fn set_config(
    c: &mut perfstat_partition_config_t,
    key: &str,
    value: &str,
) -> Result<(), CollectError> {
    match key {
        // The library stores a native double: on AIX, big-endian; here, the host's order.
        "processorMHz" => {
            let mhz: f64 = value
                .parse()
                .map_err(|e| fixture(format!("processorMHz: {e}")))?;
            c.processorMHz = mhz.to_ne_bytes();
        }
        "conf" => c.conf = flags(value)?.into(),
        "processorFamily" => set_text(&mut c.processorFamily, value),
        "processorModel" => set_text(&mut c.processorModel, value),
        _ => numbers!(c, key, value; lcpus, smtthreads, entitled_proc_capacity, partitionnum),
    }
    Ok(())
}

fn set_cpu_total(c: &mut perfstat_cpu_total_t, key: &str, value: &str) -> Result<(), CollectError> {
    match key {
        "description" => set_text(&mut c.description, value),
        // Three fixed-point values (<< 16), as perfstat returns them.
        "loadavg" => {
            let v: Vec<u64> = value
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| CollectError::Unreadable {
                    what: format!("cpu_total.loadavg {value:?}"),
                })?;
            c.loadavg = v.try_into().map_err(|_| CollectError::Unreadable {
                what: format!("cpu_total.loadavg {value:?}: three values"),
            })?;
        }
        _ => numbers!(c, key, value; processorHZ, ncpus),
    }
    Ok(())
}

fn set_page(p: &mut perfstat_memory_page_t, key: &str, value: &str) -> Result<(), CollectError> {
    numbers!(p, key, value; real_total, real_free, real_pinned, real_inuse, pgexct);
    Ok(())
}

fn set_process(p: &mut perfstat_process_t, key: &str, value: &str) -> Result<(), CollectError> {
    match key {
        "proc_name" => set_text(&mut p.proc_name, value),
        _ => {
            numbers!(p, key, value; pid, num_threads, real_inuse, pgsp_inuse, ucpu_time, scpu_time)
        }
    }
    Ok(())
}

fn set_memory(m: &mut perfstat_memory_total_t, key: &str, value: &str) -> Result<(), CollectError> {
    numbers!(m, key, value; pgspins, pgspouts, pgsp_total, pgsp_free, real_avail, real_total);
    Ok(())
}

/// A command's captured output: `<name>.out`, else the error in `<name>.err`.
fn command(dir: &Path, name: &str) -> Read<String> {
    let failed = |message: String| CollectError::Command {
        program: name.to_owned(),
        message,
    };
    if let Ok(out) = std::fs::read_to_string(dir.join(format!("{name}.out"))) {
        return Ok(out);
    }
    match std::fs::read_to_string(dir.join(format!("{name}.err"))) {
        Ok(err) => Err(failed(err.trim().to_owned())),
        Err(_) => Err(failed(format!("{name}: not captured in this fixture"))),
    }
}

/// A fixture's perfstat.txt that says what it should not.
fn fixture(what: String) -> CollectError {
    CollectError::parse(Path::new("perfstat.txt"), what)
}

/// A libperfstat call's failure as the live collector reports it.
fn lib(call: &'static str, message: &str) -> CollectError {
    CollectError::Library {
        call,
        message: message.to_owned(),
    }
}

fn load_raw(dir: &Path) -> Result<Raw, CollectError> {
    let path = dir.join("perfstat.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| CollectError::io(&path, &e))?;
    let mut secs = 1.0;
    let mut layout = PartitionTotalLayout::Aix71;
    let mut has_before = true;
    let mut before = perfstat_partition_total_t::default();
    let mut now = perfstat_partition_total_t::default();
    let mut config = perfstat_partition_config_t::default();
    let mut cpu_total = perfstat_cpu_total_t::default();
    let mut process = perfstat_process_t::default();
    // `process_before.` lines, applied over `process.` after the loop (any order in the file).
    let mut process_before_lines: Vec<(String, String)> = Vec::new();
    let mut pages: BTreeMap<u64, perfstat_memory_page_t> = BTreeMap::new();
    let mut memory_before = perfstat_memory_total_t::default();
    let mut memory_now = perfstat_memory_total_t::default();
    let mut has_memory = false;
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    let (mut pid, mut found_by) = (None, String::new());
    let mut dirs: Vec<(String, String)> = Vec::new();
    for (key, value) in pairs(&text) {
        if let Some(e) = value.strip_prefix("error: ") {
            errors.insert(key, e.to_owned());
            continue;
        }
        let (section, field) = key.split_once('.').unwrap_or((key.as_str(), ""));
        match section {
            "window_secs" => {
                secs = value
                    .parse()
                    .map_err(|e| fixture(format!("window_secs: {e}")))?
            }
            "layout" => {
                layout = match value.as_str() {
                    "aix71" => PartitionTotalLayout::Aix71,
                    "aix61" => PartitionTotalLayout::Aix61,
                    other => return Err(fixture(format!("layout {other}"))),
                }
            }
            "before" if field.is_empty() && value == "none" => has_before = false,
            "pid" => {
                pid = Some(
                    value
                        .parse::<u32>()
                        .map_err(|e| fixture(format!("pid: {e}")))?,
                )
            }
            "found_by" => found_by = value,
            // The server's directories as it reports them; `df-<role>.out` holds df's output.
            "dir" => dirs.push((field.to_owned(), value)),
            "total" => {
                set_total(&mut before, field, &value)?;
                set_total(&mut now, field, &value)?;
            }
            "before" => set_total(&mut before, field, &value)?,
            "now" => set_total(&mut now, field, &value)?,
            "config" => set_config(&mut config, field, &value)?,
            "cpu_total" => set_cpu_total(&mut cpu_total, field, &value)?,
            "process" => set_process(&mut process, field, &value)?,
            "process_before" => process_before_lines.push((field.to_owned(), value)),
            "memory" => {
                has_memory = true;
                set_memory(&mut memory_before, field, &value)?;
                set_memory(&mut memory_now, field, &value)?;
            }
            "memory_before" => set_memory(&mut memory_before, field, &value)?,
            "memory_now" => {
                has_memory = true;
                set_memory(&mut memory_now, field, &value)?;
            }
            "page" => {
                let (size, field) = field
                    .split_once('.')
                    .ok_or_else(|| fixture(format!("page key {key}")))?;
                let psize =
                    ps::parse_size(size).ok_or_else(|| fixture(format!("page size {size}")))?;
                let page = pages.entry(psize).or_default();
                page.psize = psize;
                set_page(page, field, &value)?;
            }
            other => return Err(fixture(format!("unknown key {other}"))),
        }
    }
    let failed = |name: &'static str| errors.get(name).map(|e| lib(name, e));
    let pid = pid.ok_or_else(|| fixture("no pid".into()))?;
    // mariadbd's reading when the window opened: none without a window; a windowed fixture
    // without `process_before.` lines did not capture it.
    let process_before = if !has_before {
        None
    } else if let Some(e) = errors.get("process_before") {
        Some(Err(lib("perfstat_process", e)))
    } else if process_before_lines.is_empty() {
        Some(Err(lib(
            "perfstat_process",
            "perfstat_process at the window's start: not captured in this fixture",
        )))
    } else {
        let mut b = process;
        for (field, value) in &process_before_lines {
            set_process(&mut b, field, value)?;
        }
        Some(Ok(b))
    };
    Ok(Raw {
        window_secs: secs,
        before: has_before.then_some(PartitionTotal {
            data: before,
            layout,
        }),
        now: failed("now").map_or(Ok(PartitionTotal { data: now, layout }), Err),
        config: failed("config").map_or(Ok(config), Err),
        cpu_total: failed("cpu_total").map_or(Ok(cpu_total), Err),
        pages: failed("pages").map_or(Ok(pages.into_values().collect()), Err),
        memory_before: (has_before && has_memory).then_some(memory_before),
        memory_total: match failed("memory") {
            Some(e) => Err(e),
            None if has_memory => Ok(memory_now),
            None => Err(lib(
                "perfstat_memory_total",
                "perfstat_memory_total: not captured in this fixture",
            )),
        },
        dscr: command(dir, "dscrctl").and_then(|out| {
            ps::parse_dscr(&out).ok_or_else(|| CollectError::Command {
                program: "dscrctl".into(),
                message: "dscrctl -q printed no os_default_pd".into(),
            })
        }),
        process: match errors.get("process") {
            Some(e) => Err(CollectError::ServerProcess { why: e.clone() }),
            None => Ok(RawProcess {
                pid,
                found_by,
                perfstat: Ok(process),
                page_sizes: command(dir, "ps-pagesizes")
                    .and_then(|out| ps::parse_page_sizes(&out, pid)),
                ldr_cntrl: command(dir, "ps-eww").and_then(|out| ps::parse_ldr_cntrl(&out, pid)),
                modules: command(dir, "procldd").map(|out| ps::parse_modules(&out)),
            }),
        },
        storage: if dirs.is_empty() {
            Err(CollectError::skipped(
                "unavailable: no server connected, so its directories are unknown",
            ))
        } else {
            Ok(dirs
                .into_iter()
                .map(|(role, path)| RawDir {
                    df: command(dir, &format!("df-{role}")),
                    role,
                    path,
                })
                .collect())
        },
        process_before,
    })
}

fn machines() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("tests/fixtures/aix")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("perfstat.txt").is_file())
        .collect();
    v.sort();
    v
}

/// Each machine's facts, window and host verdicts, compared with an insta snapshot under
/// `tests/fixtures/aix/snapshots/` (as the Linux trees' in `tests/it/snapshots/`): review a
/// change with `cargo insta review`, or `INSTA_UPDATE=always` and `git diff`.
#[test]
fn every_machine_translates_to_its_expected_facts_and_verdicts() {
    let machines = machines();
    assert!(
        machines.len() >= 5,
        "expected the five AIX fixture machines, found {machines:?}"
    );
    for dir in machines {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let raw = load_raw(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        let facts = os_facts(&raw);
        let w = Window::of(
            raw.now.as_ref().unwrap(),
            raw.before.as_ref(),
            raw.window_secs,
        );
        let mut snapshot = SnapshotBuilder::new().aix().build();
        snapshot.os = Gathered::Available(facts.clone());
        let report = evaluate(&snapshot);
        let verdicts: Vec<_> = report
            .checks
            .iter()
            .filter(|c| c.scope == powerdiag_rules::Scope::Host)
            .map(|c| json!({"code": c.code, "status": c.status, "summary": c.summary}))
            .collect();
        // The window's deltas that have no snapshot field yet (README, "Open items").
        let window = json!({
            "basis": w.basis,
            "busy_share": w.busy_share,
            "spurr_ratio": w.spurr_ratio,
            "spurr_source": w.spurr_source,
            "steal_share": w.steal_share,
            "involuntary_vcsw": w.involuntary_vcsw,
            "voluntary_vcsw": w.voluntary_vcsw,
            "phantom_interrupts": w.phantom_interrupts,
            "consumed_cpus": w.consumed_cpus,
            "pool_idle_cpus": w.pool_idle_cpus,
            "donated_purr": w.donated_purr,
            "stolen_purr": w.stolen_purr,
        });
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(fixtures().join("snapshots"));
        settings.set_snapshot_suffix(name.clone());
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| {
            insta::assert_json_snapshot!(
                "aix_machine",
                json!({"os": facts, "window": window, "verdicts": verdicts})
            );
        });
    }
}

/// Each issue machine, its headline facts and verdicts, stated here as well as in the files.
#[test]
fn the_field_report_machines() {
    let status = |machine: &str, code: &str| {
        let raw = load_raw(&fixtures().join(machine)).unwrap();
        let mut s = SnapshotBuilder::new().aix().build();
        s.os = Gathered::Available(os_facts(&raw));
        let report = evaluate(&s);
        let c = report.checks.iter().find(|c| c.code == code).unwrap();
        (c.status.as_str(), c.summary.clone())
    };
    // 12-vCPU shared uncapped, boosting to 3.8 GHz: 3800/2750 = 1.38, not throttled.
    let (s, why) = status("p9-shared-12vcpu-boost", "PD404");
    assert_eq!(s, "pass", "{why}");
    assert!(why.contains("138.2%"), "{why}");
    assert_eq!(status("p9-shared-12vcpu-boost", "PD407").0, "fail");
    // 21-core dedicated capped at nominal.
    let (s, why) = status("p9-dedicated-21core-capped", "PD402");
    assert_eq!(s, "fail", "{why}");
    // Dedicated donating.
    let (s, why) = status("p9-dedicated-12core-donating", "PD401");
    assert_eq!(s, "fail", "{why}");
    // mariadbd with 4 KB pages and no LDR_CNTRL; with 64 KB pages.
    assert_eq!(status("p9-shared-12vcpu-boost", "PD301").0, "fail");
    assert_eq!(status("p9-shared-since-boot-env-only", "PD301").0, "fail");
    assert_eq!(status("p9-dedicated-21core-capped", "PD301").0, "pass");
    assert_eq!(status("p9-shared-capped-ldr-cntrl-only", "PD301").0, "pass");
    // GCC build.
    let (s, why) = status("p9-shared-12vcpu-boost", "PD601");
    assert_eq!(s, "fail", "{why}");
}

fn total(flags: u32) -> perfstat_partition_total_t {
    perfstat_partition_total_t {
        type_: PartitionFlags(flags).into(),
        ..Default::default()
    }
}

fn aix71(data: perfstat_partition_total_t) -> PartitionTotal {
    PartitionTotal {
        data,
        layout: PartitionTotalLayout::Aix71,
    }
}

#[test]
fn frequency_falls_back_to_the_total_counters_without_spurr_mode() {
    let mut a = total(mask::LPAR_ENABLED);
    a.timebase_last = 1_000;
    let mut b = a;
    b.timebase_last = 513_001_000;
    b.puser = 400;
    b.purr_counter = 1_000;
    b.spurr_counter = 900;
    let w = Window::of(&aix71(b), Some(&aix71(a)), 1.0);
    assert_eq!(w.spurr_ratio, Some(0.9));
    assert_eq!(w.spurr_source.as_deref(), Some("SPURR/PURR over 1.00 s"));
    // A 6.1 fill has no total counters: no frequency.
    let w = Window::of(
        &PartitionTotal {
            data: b,
            layout: PartitionTotalLayout::Aix61,
        },
        None,
        0.0,
    );
    assert_eq!(w.spurr_ratio, None);
    assert_eq!(w.basis, "since boot");
}

#[test]
fn a_stalled_timebase_reads_since_boot() {
    let mut a = total(mask::LPAR_ENABLED | mask::SHARED_ENABLED);
    a.timebase_last = 5_000;
    a.puser = 10;
    a.pidle = 30;
    let w = Window::of(&aix71(a), Some(&aix71(a)), 1.0);
    assert_eq!(w.basis, "since boot");
    assert_eq!(w.busy_share, Some(0.25));
    // No counters at all.
    let w = Window::of(&aix71(total(0)), None, 0.0);
    assert_eq!(w.busy_share, None);
    assert_eq!(w.consumed_cpus, None);
}

fn raw_with(now: Result<PartitionTotal, &str>) -> Raw {
    Raw {
        window_secs: 1.0,
        before: None,
        now: now.map_err(|e| lib("perfstat_partition_total", e)),
        config: Err(lib(
            "perfstat_partition_config",
            "perfstat_partition_config failed: EINVAL (errno 22)",
        )),
        cpu_total: Err(lib(
            "perfstat_cpu_total",
            "perfstat_cpu_total failed: EFAULT (errno 14)",
        )),
        pages: Err(lib(
            "perfstat_memory_page",
            "perfstat_memory_page failed: EINVAL (errno 22)",
        )),
        memory_before: None,
        memory_total: Err(lib(
            "perfstat_memory_total",
            "perfstat_memory_total failed: EINVAL (errno 22)",
        )),
        dscr: Err(CollectError::Command {
            program: "dscrctl".into(),
            message: "not read".into(),
        }),
        process: Err(CollectError::ServerProcess {
            why: "no mariadbd or mysqld process on this host".into(),
        }),
        storage: Err(CollectError::skipped(
            "unavailable: no server connected, so its directories are unknown",
        )),
        process_before: None,
    }
}

/// `df -k` per server directory: grouped by mount point like the Linux collector, inodes
/// derived from `Iused` and `%Iused`, a directory df could not read is its own entry with the
/// reason, and no disk busy time is claimed.
#[test]
fn storage_from_df_per_directory() {
    let df = |line: &str| {
        Ok(format!(
            "Filesystem    1024-blocks      Free %Used    Iused %Iused Mounted on\n{line}\n"
        ))
    };
    let dir = |role: &str, path: &str, out: Result<String, &str>| RawDir {
        role: role.into(),
        path: path.into(),
        df: out.map_err(|m| CollectError::Command {
            program: "df".into(),
            message: m.to_owned(),
        }),
    };
    let mut raw = raw_with(Err("x"));
    raw.storage = Ok(vec![
        dir(
            "datadir",
            "/data/mariadb/",
            df("/dev/fslv01 209715200 6291456 98% 96000 3% /data"),
        ),
        dir(
            "tmpdir",
            "/tmp",
            df("/dev/hd3 4194304 3145728 25% 88 0% /tmp"),
        ),
        dir(
            "innodb_log_group_home_dir",
            "/data/mariadb/",
            df("/dev/fslv01 209715200 6291456 98% 96000 3% /data"),
        ),
        dir(
            "log_bin",
            "/nfs/aria",
            df("nas1:/export/aria 1048576 524288 50% - - /nfs/aria"),
        ),
        dir(
            "aria_log_dir_path",
            "/gone",
            Err(
                "/usr/bin/df -k /gone: exit status: 1: df: /gone: A file or directory in the path name does not exist.",
            ),
        ),
    ]);
    let (o, runs) = collect(&raw, &Selection::defaults());
    let fs = o.storage.as_ref().unwrap();
    assert_eq!(fs.len(), 4, "{fs:?}");
    assert_eq!(fs[0].roles, ["datadir", "innodb_log_group_home_dir"]);
    assert_eq!(
        (fs[0].mount_point.as_deref(), fs[0].device.as_deref()),
        (Some("/data"), Some("/dev/fslv01"))
    );
    assert_eq!(
        (fs[0].total_bytes, fs[0].available_bytes),
        (209_715_200 * 1024, 6_291_456 * 1024)
    );
    // round(96000 × 100 / 3) = 3_200_000 inodes, 3_104_000 free (97%, ±0.5 points).
    assert_eq!(
        (fs[0].inodes_total, fs[0].inodes_available),
        (Some(3_200_000), Some(3_104_000))
    );
    assert_eq!(fs[0].busy_share, None);
    assert_eq!(fs[0].io_unread.as_deref(), Some(NO_DISK_BUSY));
    assert_eq!(fs[1].roles, ["tmpdir"]);
    // %Iused 0 (under 0.5% used): 88 used × 200 = the least total, 99.5% free at least.
    assert_eq!(
        (fs[1].inodes_total, fs[1].inodes_available),
        (Some(17_600), Some(17_512))
    );
    // NFS prints `-`: no figures.
    assert_eq!(fs[2].mount_point.as_deref(), Some("/nfs/aria"));
    assert_eq!((fs[2].inodes_total, fs[2].inodes_available), (None, None));
    assert_eq!(fs[2].total_bytes, 1_048_576 * 1024);
    assert!(
        fs[3]
            .space_unread
            .as_deref()
            .unwrap()
            .contains("does not exist")
    );
    // PD801 judges the free space; PD802 says why it cannot judge the disk.
    let mut s = SnapshotBuilder::new().aix().build();
    s.os = Gathered::Available(o.clone());
    let report = evaluate(&s);
    let check = |code: &str| report.checks.iter().find(|c| c.code == code).unwrap();
    assert_eq!(
        check("PD801").status.as_str(),
        "fail",
        "{:?}",
        check("PD801")
    );
    assert_eq!(check("PD802").status.as_str(), "insufficient_data");
    assert!(
        check("PD802")
            .summary
            .contains("perfstat_disk_t is not bound")
    );
    // One run per section: storage succeeded.
    assert!(
        runs.iter().any(|r| r.name == "storage" && r.success),
        "{runs:?}"
    );
}

#[test]
fn failed_calls_lose_only_their_own_facts() {
    let (o, runs) = collect(
        &raw_with(Err("perfstat_partition_total failed: EINVAL (errno 22)")),
        &Selection::defaults(),
    );
    for g in [
        o.cpu.as_ref().err(),
        o.cpu_time.as_ref().err(),
        o.partition.as_ref().err(),
        o.memory.as_ref().err(),
        o.process.as_ref().err(),
        o.swap.as_ref().err(),
    ] {
        assert!(g.is_some());
    }
    let cpu = o.cpu.as_ref().unwrap_err();
    assert!(
        cpu.contains("perfstat_partition_total") && cpu.contains("perfstat_cpu_total"),
        "{cpu}"
    );
    assert!(o.topology.as_ref().unwrap_err().starts_with("unavailable"));
    assert!(o.counters.as_ref().unwrap_err().starts_with("unavailable"));
    // One run per section that failed or worked; none for the sections AIX does not read yet.
    let names: Vec<(&str, bool)> = runs.iter().map(|r| (r.name.as_str(), r.success)).collect();
    assert_eq!(
        names,
        [
            ("process", false),
            ("cpu_time", false),
            ("cpu", false),
            ("memory", false),
            ("partition", false),
            ("swap", false),
            // The load averages come from perfstat_cpu_total, which failed too.
            ("saturation", false)
        ]
    );
    assert_eq!(
        runs[0].error.as_deref(),
        Some("no mariadbd or mysqld process on this host")
    );

    // Only partition_total worked: CPU facts without a nominal frequency.
    let mut t = total(mask::LPAR_ENABLED | mask::SMT_ENABLED);
    t.online_lcpus = 8;
    t.smt_thrds = 8;
    t.online_cpus = 1;
    let o = os_facts(&raw_with(Ok(aix71(t))));
    let Gathered::Available(c) = &o.cpu else {
        panic!("{:?}", o.cpu)
    };
    assert_eq!(
        (c.threads, c.smt_control.as_deref(), c.nominal_mhz),
        (8, Some("smt8"), None)
    );
    assert!(o.partition.as_ref().unwrap().is_some());
}

#[test]
fn not_a_partition_and_smt_off() {
    let mut t = total(mask::SMT_CAPABLE);
    t.smt_thrds = 1;
    t.online_lcpus = 4;
    let o = os_facts(&raw_with(Ok(aix71(t))));
    assert_eq!(o.partition, Gathered::Available(None));
    let Gathered::Available(c) = &o.cpu else {
        panic!()
    };
    assert_eq!(c.smt_control.as_deref(), Some("off"));
    assert_eq!(c.smt_active, Some(false));
}

fn modules(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn compilers_from_loaded_modules() {
    let (c, why) = compiler(&modules(&[
        "/usr/lib/libc.a[shr_64.o]",
        "/opt/freeware/lib/pthread/ppc64/libgcc_s.a[shr.o]",
    ]));
    assert_eq!(c, Some(Compiler::Gcc));
    assert!(why.ends_with("libgcc_s.a[shr.o] (AIX Toolbox)"), "{why}");
    // A GCC runtime outside the Toolbox still means GCC.
    let (c, why) = compiler(&modules(&["/opt/gcc13/lib/libstdc++.a[libstdc++.so.6]"]));
    assert_eq!(c, Some(Compiler::Gcc));
    assert!(!why.contains("Toolbox"), "{why}");
    let (c, _) = compiler(&modules(&["/usr/lib/libc++abi.a[libc++abi.so.1]"]));
    assert_eq!(c, Some(Compiler::OpenXl));
    // IBM XL C/C++ (classic) runtime: libC.a, not libc.a.
    let (c, why) = compiler(&modules(&[
        "/usr/lib/libc.a[shr_64.o]",
        "/usr/lpp/xlC/lib/libC.a[shr_64.o]",
    ]));
    assert_eq!(c, Some(Compiler::Other), "{why}");
    // Both runtimes: cannot tell.
    let (c, why) = compiler(&modules(&[
        "/usr/lib/libc++.a[libc++.so.1]",
        "/opt/freeware/lib/libstdc++.a[libstdc++.so.6]",
    ]));
    assert_eq!(c, None);
    assert!(why.contains("both"), "{why}");
    let (c, why) = compiler(&[]);
    assert_eq!(c, None);
    assert!(why.contains("0 loaded modules"), "{why}");
}

#[test]
fn allocators_from_loaded_modules() {
    assert_eq!(
        allocator(&modules(&[
            "/opt/freeware/lib64/libtcmalloc.a[libtcmalloc.so.4]"
        ]))
        .0,
        Allocator::Tcmalloc
    );
    assert_eq!(
        allocator(&modules(&["/usr/lib/libmimalloc.so.2"])).0,
        Allocator::Mimalloc
    );
    assert_eq!(
        allocator(&modules(&["/usr/lib/libc.a[shr_64.o]"])).0,
        Allocator::Libc
    );
    assert_eq!(module_names("libc.a"), ("libc.a", ""));
    assert_eq!(
        module_names("/usr/lib/libc.a[shr_64.o]"),
        ("libc.a", "shr_64.o")
    );
}

/// A raw window of `secs` with 8 online logical CPUs and mariadbd's two `perfstat_process`
/// readings: (ucpu_time, scpu_time) in ms at the start (`None`: no window) and at the end.
fn raw_with_process_cpu(secs: f64, before: Option<(f64, f64)>, now: (f64, f64)) -> Raw {
    let mut t = total(mask::LPAR_ENABLED | mask::SMT_ENABLED);
    t.online_lcpus = 8;
    t.smt_thrds = 4;
    t.online_cpus = 2;
    let mut raw = raw_with(Ok(aix71(t)));
    raw.window_secs = secs;
    raw.cpu_total = Ok(perfstat_cpu_total_t::default());
    let reading = |(u, s): (f64, f64)| perfstat_process_t {
        pid: 8_454_302,
        ucpu_time: u,
        scpu_time: s,
        ..Default::default()
    };
    raw.process = Ok(RawProcess {
        pid: 8_454_302,
        found_by: "pid_file".into(),
        perfstat: Ok(reading(now)),
        page_sizes: Ok(PageSizes::default()),
        ldr_cntrl: Ok(None),
        modules: Ok(Vec::new()),
    });
    raw.process_before = before.map(|b| Ok(reading(b)));
    raw
}

fn saturation_of(raw: &Raw) -> CpuSaturation {
    match os_facts(raw).saturation {
        Gathered::Available(s) => s,
        other => panic!("{other:?}"),
    }
}

/// Δ(ucpu_time + scpu_time) in ms over the window, against the online logical CPUs.
#[test]
fn process_cpu_over_the_window() {
    // 6 000 ms user + 1 000 ms system over 2 s: 3.5 CPUs of 8.
    let s = saturation_of(&raw_with_process_cpu(
        2.0,
        Some((10_000.0, 2_000.0)),
        (16_000.0, 3_000.0),
    ));
    assert_eq!(s.process_unread, None);
    let p = s.process.unwrap();
    assert_eq!(
        p,
        ProcessCpu {
            basis: "window 2.00 s".into(),
            window_seconds: 2.0,
            ticks: 700,
            ticks_per_second: 100,
            allowed_cpus: 8.0,
            allowed_by: "online logical CPUs".into(),
            cgroup: None,
        }
    );
    assert!((p.cpus_used() - 3.5).abs() < 1e-9, "{}", p.cpus_used());
    assert_eq!(s.online_cpus, Some(8));
    // Counted in 10 ms clock ticks, rounded: 600.75 ms → 60 ticks.
    let p = saturation_of(&raw_with_process_cpu(
        1.0,
        Some((100.25, 0.5)),
        (600.5, 100.75),
    ))
    .process
    .unwrap();
    assert_eq!(p.ticks, 60);
    // PD806 judges it: 7.6 of 8 CPUs over 10 s (95%) is saturated.
    let raw = raw_with_process_cpu(10.0, Some((0.0, 0.0)), (70_000.0, 6_000.0));
    let mut snap = SnapshotBuilder::new().aix().build();
    snap.os = Gathered::Available(os_facts(&raw));
    let report = evaluate(&snap);
    let c = report.checks.iter().find(|c| c.code == "PD806").unwrap();
    assert_eq!(c.status.as_str(), "fail", "{c:?}");
}

#[test]
fn process_cpu_without_a_start_reading_says_why() {
    // No window (--sample-window 0).
    let s = saturation_of(&raw_with_process_cpu(0.0, None, (16_000.0, 3_000.0)));
    assert_eq!(s.process, None);
    let why = s.process_unread.unwrap();
    assert!(why.starts_with("no window"), "{why}");
    // The reading at the window's start failed.
    let mut raw = raw_with_process_cpu(1.0, None, (16_000.0, 3_000.0));
    raw.process_before = Some(Err(lib(
        "perfstat_process",
        "perfstat_process failed: ESRCH (errno 3)",
    )));
    let why = saturation_of(&raw).process_unread.unwrap();
    assert!(
        why.contains("reading at the window's start failed") && why.contains("ESRCH"),
        "{why}"
    );
    // The reading at its end failed.
    let mut raw = raw_with_process_cpu(1.0, Some((1.0, 1.0)), (0.0, 0.0));
    if let Ok(p) = &mut raw.process {
        p.perfstat = Err(lib(
            "perfstat_process",
            "perfstat_process failed: EINVAL (errno 22)",
        ));
    }
    let why = saturation_of(&raw).process_unread.unwrap();
    assert!(why.contains("reading at the window's end failed"), "{why}");
    // mariadbd not found: its reason.
    let mut raw = raw_with_process_cpu(1.0, None, (0.0, 0.0));
    raw.process = Err(CollectError::ServerProcess {
        why: "no mariadbd or mysqld process on this host".into(),
    });
    let why = saturation_of(&raw).process_unread.unwrap();
    assert_eq!(why, "no mariadbd or mysqld process on this host");
}

#[test]
fn process_cpu_going_backwards_or_another_pid_says_why() {
    let s = saturation_of(&raw_with_process_cpu(
        1.0,
        Some((16_000.0, 3_000.0)),
        (100.0, 20.0),
    ));
    assert_eq!(s.process, None);
    let why = s.process_unread.unwrap();
    assert!(why.contains("went backwards"), "{why}");
    assert!(why.contains("19000 ms") && why.contains("120 ms"), "{why}");
    // A reading of another process.
    let mut raw = raw_with_process_cpu(1.0, Some((1.0, 1.0)), (2.0, 2.0));
    if let Some(Ok(b)) = &mut raw.process_before {
        b.pid = 42;
    }
    let why = saturation_of(&raw).process_unread.unwrap();
    assert!(why.contains("pid 42") && why.contains("restarted"), "{why}");
    // A counter that is not a number.
    let raw = raw_with_process_cpu(1.0, Some((f64::NAN, 0.0)), (2.0, 2.0));
    let why = saturation_of(&raw).process_unread.unwrap();
    assert!(why.contains("no usable CPU time"), "{why}");
}
