//! Compares the committed layout with a C compiler's view of a header (tests only).
//!
//! The test generates a C program that prints `sizeof` of each bound struct and `offsetof` and
//! `sizeof` of each of its fields, compiles it with the system C compiler, runs it and compares
//! the numbers with `size_of`/`offset_of!` of the Rust types.
//!
//! - On AIX, against `/usr/include/libperfstat.h` (IBM's header: `double processorMHz`, the
//!   bitfield union): every bound field must have the same offset and size; the system struct
//!   may be larger (newer AIX levels append fields and the library versions by size). Skipped
//!   with a message if the header or a compiler is missing. Compiled only on AIX, where it has
//!   never been run by the project so far.
//! - Everywhere else, against this crate's own `include/perfstat.h`, sizes equal: this runs the
//!   same generator, compiler invocation, parser and comparison end to end.

use core::mem::{offset_of, size_of};
use std::format;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::string::{String, ToString};
use std::vec::Vec;

use crate::bindings::*;

struct FieldLayout {
    c_name: &'static str,
    offset: usize,
    size: usize,
}

struct StructLayout {
    name: &'static str,
    size: usize,
    fields: Vec<FieldLayout>,
}

/// Size of the field `f` projects out of a `T`.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! c_name {
    ($rust:ident) => {
        stringify!($rust)
    };
    ($rust:ident, $c:literal) => {
        $c
    };
}

macro_rules! layouts {
    ($($ty:ident { $($field:ident $(= $c:literal)?),* $(,)? })*) => {
        std::vec![$(
            StructLayout {
                name: stringify!($ty),
                size: size_of::<$ty>(),
                fields: std::vec![$(
                    FieldLayout {
                        c_name: c_name!($field $(, $c)?),
                        offset: offset_of!($ty, $field),
                        size: field_size(|s: &$ty| &s.$field),
                    }
                ),*],
            }
        ),*]
    };
}

fn table() -> Vec<StructLayout> {
    layouts! {
        perfstat_id_t { name }
        perfstat_psize_t { psize }
        perfstat_value_t { online, max, min, desired }
        perfstat_partition_total_t {
            name, type_ = "type", lpar_id, group_id, pool_id, online_cpus, max_cpus, min_cpus,
            online_memory, max_memory, min_memory, entitled_proc_capacity, max_proc_capacity,
            min_proc_capacity, proc_capacity_increment, unalloc_proc_capacity,
            var_proc_capacity_weight, unalloc_var_proc_capacity_weight, online_phys_cpus_sys,
            max_phys_cpus_sys, phys_cpus_pool, puser, psys, pidle, pwait, pool_idle_time,
            phantintrs, invol_virt_cswitch, vol_virt_cswitch, timebase_last, reserved_pages,
            reserved_pagesize, idle_donated_purr, idle_donated_spurr, busy_donated_purr,
            busy_donated_spurr, idle_stolen_purr, idle_stolen_spurr, busy_stolen_purr,
            busy_stolen_spurr, shcpus_in_sys, max_pool_capacity, entitled_pool_capacity,
            pool_max_time, pool_busy_time, pool_scaled_busy_time, shcpu_tot_time,
            shcpu_busy_time, shcpu_scaled_busy_time, ams_pool_id, var_mem_weight, iome, pmem,
            hpi, hpit, hypv_pagesize, online_lcpus, smt_thrds, puser_spurr, psys_spurr,
            pidle_spurr, pwait_spurr, spurrflag, hardwareid, power_save_mode, ame_version,
            true_memory, expanded_memory, target_memexp_factr, current_memexp_factr,
            target_cpool_size, max_cpool_size, min_ucpool_size, ame_deficit_size, version,
            cmcs_total_time, purr_coalescing, spurr_coalescing, MemPoolSize, IOMemEntInUse,
            IOMemEntFree, IOHighWaterMark, purr_counter, spurr_counter, real_free, real_avail,
        }
        perfstat_partition_config_t {
            version, partitionname, nodename, conf, partitionnum, groupid, processorFamily,
            processorModel, machineID, processorMHz, numProcessors, OSName, OSVersion, OSBuild,
            lcpus, smtthreads, drives, nw_adapters, cpucap, cpucap_weightage,
            entitled_proc_capacity, vcpus, processor_poolid, activecpusinpool,
            cpupool_weightage, sharedpcpu, maxpoolcap, entpoolcap, mem, mem_weightage,
            totiomement, mempoolid, hyperpgsize, exp_mem, targetmemexpfactor, targetmemexpsize,
            subprocessor_mode,
        }
        perfstat_cpu_total_t {
            ncpus, ncpus_cfg, description, processorHZ, user, sys, idle, wait, pswitch, syscall,
            sysread, syswrite, sysfork, sysexec, readch, writech, devintrs, softintrs, lbolt,
            loadavg, runque, swpque, bread, bwrite, lread, lwrite, phread, phwrite, runocc,
            swpocc, iget, namei, dirblk, msg, sema, rcvint, xmtint, mdmint, tty_rawinch,
            tty_caninch, tty_rawoutch, ksched, koverf, kexit, rbread, rcread, rbwrt, rcwrt,
            traps, ncpus_high, puser, psys, pidle, pwait, decrintrs, mpcrintrs, mpcsintrs,
            phantintrs, idle_donated_purr, idle_donated_spurr, busy_donated_purr,
            busy_donated_spurr, idle_stolen_purr, idle_stolen_spurr, busy_stolen_purr,
            busy_stolen_spurr, iowait, physio, twait, hpi, hpit, puser_spurr, psys_spurr,
            pidle_spurr, pwait_spurr, spurrflag, version, tb_last, purr_coalescing,
            spurr_coalescing,
        }
        perfstat_cpu_t {
            name, user, sys, idle, wait, pswitch, syscall, sysread, syswrite, sysfork, sysexec,
            readch, writech, bread, bwrite, lread, lwrite, phread, phwrite, iget, namei,
            dirblk, msg, sema, minfaults, majfaults, puser, psys, pidle, pwait, redisp_sd0,
            redisp_sd1, redisp_sd2, redisp_sd3, redisp_sd4, redisp_sd5, migration_push,
            migration_S3grq, migration_S3pul, invol_cswitch, vol_cswitch, runque, bound,
            decrintrs, mpcrintrs, mpcsintrs, devintrs, softintrs, phantintrs,
            idle_donated_purr, idle_donated_spurr, busy_donated_purr, busy_donated_spurr,
            idle_stolen_purr, idle_stolen_spurr, busy_stolen_purr, busy_stolen_spurr, hpi,
            hpit, puser_spurr, psys_spurr, pidle_spurr, pwait_spurr, spurrflag, localdispatch,
            neardispatch, fardispatch, cswitches, version, tb_last,
        }
        perfstat_memory_total_t {
            virt_total, real_total, real_free, real_pinned, real_inuse, pgbad, pgexct, pgins,
            pgouts, pgspins, pgspouts, scans, cycles, pgsteals, numperm, pgsp_total, pgsp_free,
            pgsp_rsvd, real_system, real_user, real_process, virt_active, iome, iomu, iohwm,
            pmem, comprsd_total, comprsd_wseg_pgs, cpgins, cpgouts, true_size, expanded_memory,
            comprsd_wseg_size, target_cpool_size, max_cpool_size, min_ucpool_size, cpool_size,
            ucpool_size, cpool_inuse, ucpool_inuse, version, real_avail, bytes_coalesced,
            bytes_coalesced_mempool,
        }
        perfstat_memory_page_t {
            psize, real_total, real_free, real_pinned, real_inuse, pgexct, pgins, pgouts,
            pgspins, pgspouts, scans, cycles, pgsteals, numperm, numpgsp, real_system, real_user,
            real_process, virt_active, comprsd_total, comprsd_wseg_pgs, cpgins, cpgouts,
            cpool_inuse, ucpool_size, comprsd_wseg_size, version, real_avail,
        }
        perfstat_process_t {
            version, pid, proc_name, proc_priority, num_threads, proc_uid, proc_classid,
            proc_size, proc_real_mem_data, proc_real_mem_text, proc_virt_mem_data,
            proc_virt_mem_text, shared_lib_data_size, heap_size, real_inuse, virt_inuse, pinned,
            pgsp_inuse, filepages, real_inuse_map, virt_inuse_map, pinned_inuse_map, ucpu_time,
            scpu_time, last_timebase, inBytes, outBytes, inOps, outOps,
        }
    }
}

/// C source printing `S <struct> <sizeof>` and `F <struct> <field> <offsetof> <sizeof>`.
fn c_program(include: &str) -> String {
    let mut src = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include {include}\n\
         #define F(t, f) printf(\"F %s %s %lu %lu\\n\", #t, #f, \
         (unsigned long)offsetof(t, f), (unsigned long)sizeof(((t *)0)->f))\n\
         int main(void) {{\n"
    );
    for s in table() {
        src += &format!(
            "    printf(\"S %s %lu\\n\", \"{0}\", (unsigned long)sizeof({0}));\n",
            s.name
        );
        for f in &s.fields {
            src += &format!("    F({}, {});\n", s.name, f.c_name);
        }
    }
    src += "    return 0;\n}\n";
    src
}

/// Mismatches between the program's output and the Rust layout. With `exact_size`, struct sizes
/// must be equal; otherwise the C struct may be larger (a newer version).
fn compare(output: &str, exact_size: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = 0;
    for s in table() {
        let c_size = output.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("S") && w.next() == Some(s.name))
                .then(|| w.next()?.parse::<usize>().ok())
                .flatten()
        });
        match c_size {
            None => problems.push(format!("{}: no size in the output", s.name)),
            Some(c) if c == s.size || (!exact_size && c > s.size) => {}
            Some(c) => problems.push(format!("{}: C size {c}, Rust size {}", s.name, s.size)),
        }
        for f in &s.fields {
            seen += 1;
            let c = output.lines().find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                match w.as_slice() {
                    ["F", t, name, off, size] if *t == s.name && *name == f.c_name => {
                        Some((off.parse::<usize>().ok()?, size.parse::<usize>().ok()?))
                    }
                    _ => None,
                }
            });
            match c {
                Some((off, size)) if off == f.offset && size == f.size => {}
                Some((off, size)) => problems.push(format!(
                    "{}.{}: C offset {off} size {size}, Rust offset {} size {}",
                    s.name, f.c_name, f.offset, f.size
                )),
                None => problems.push(format!("{}.{}: not in the output", s.name, f.c_name)),
            }
        }
    }
    if seen == 0 {
        problems.push("no fields compared".to_string());
    }
    problems
}

/// Compilers to try: `$CC` (with `$CFLAGS`) first, then the usual ones on AIX and Linux with
/// their 64-bit flag.
fn compilers() -> Vec<(String, Vec<String>)> {
    let mut list = Vec::new();
    if let Ok(cc) = std::env::var("CC") {
        let flags = std::env::var("CFLAGS").unwrap_or_default();
        list.push((cc, flags.split_whitespace().map(String::from).collect()));
    }
    let known: [(&str, &[&str]); 8] = [
        ("ibm-clang_r", &["-m64"]),
        ("ibm-clang", &["-m64"]),
        ("xlclang", &["-q64"]),
        ("xlc_r", &["-q64"]),
        ("xlc", &["-q64"]),
        (
            "gcc",
            &[if cfg!(target_os = "aix") {
                "-maix64"
            } else {
                "-m64"
            }],
        ),
        ("clang", &["-m64"]),
        // AIX `cc` is XL C, 32-bit unless told otherwise.
        (
            "cc",
            if cfg!(target_os = "aix") {
                &["-q64"]
            } else {
                &[]
            },
        ),
    ];
    for (cc, flags) in known {
        list.push((
            cc.to_string(),
            flags.iter().map(|f| f.to_string()).collect(),
        ));
    }
    list
}

/// Compiles and runs the layout program against `include` (a `#include` argument). `None` if
/// no compiler could build even a trivial program here.
fn run_layout_program(include: &str, include_dir: Option<&Path>) -> Option<String> {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "perfstat-sys-layout-{}-{}",
        std::process::id(),
        include.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("probe.c"), "int main(void) { return 0; }\n").unwrap();
    let works = |cc: &str, flags: &[String]| {
        Command::new(cc)
            .args(flags)
            .arg("-o")
            .arg(dir.join("probe"))
            .arg(dir.join("probe.c"))
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let Some((cc, flags)) = compilers().into_iter().find(|(cc, flags)| works(cc, flags)) else {
        std::eprintln!("perfstat-sys header check: no working C compiler, skipped");
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    };
    std::fs::write(dir.join("layout.c"), c_program(include)).unwrap();
    let mut cmd = Command::new(&cc);
    cmd.args(&flags);
    if let Some(inc) = include_dir {
        cmd.arg("-I").arg(inc);
    }
    let out = cmd
        .arg("-o")
        .arg(dir.join("layout"))
        .arg(dir.join("layout.c"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cc} {flags:?} failed on the layout program:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.join("layout")).output().unwrap();
    assert!(run.status.success(), "layout program failed");
    let _ = std::fs::remove_dir_all(&dir);
    Some(String::from_utf8(run.stdout).unwrap())
}

#[test]
fn generated_program_covers_every_field() {
    let src = c_program("<libperfstat.h>");
    assert!(src.contains("F(perfstat_partition_total_t, type);"));
    assert!(src.contains("F(perfstat_partition_config_t, processorMHz);"));
    let fields: usize = table().iter().map(|s| s.fields.len()).sum();
    assert_eq!(src.matches("    F(").count(), fields);
}

#[test]
fn compare_reports_the_processor_mhz_trap() {
    // What a Linux x86_64 compiler would print for IBM's header: the double at 344.
    let rust = table();
    let mut out = String::new();
    for s in &rust {
        out += &format!("S {} {}\n", s.name, s.size);
        for f in &s.fields {
            let off = if f.c_name == "processorMHz" {
                344
            } else {
                f.offset
            };
            out += &format!("F {} {} {} {}\n", s.name, f.c_name, off, f.size);
        }
    }
    assert_eq!(
        compare(&out, true),
        ["perfstat_partition_config_t.processorMHz: C offset 344 size 8, Rust offset 340 size 8"]
    );
    // A larger struct (a newer AIX) is fine unless sizes must be exact.
    let grown = out.replace(
        "S perfstat_partition_config_t 808",
        "S perfstat_partition_config_t 816",
    );
    assert_eq!(compare(&grown, false).len(), 1);
    assert_eq!(compare(&grown, true).len(), 2);
    assert!(compare("", false).len() > 100);
}

#[test]
fn own_header_matches_with_the_host_compiler() {
    let include_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let Some(out) = run_layout_program("\"perfstat.h\"", Some(&include_dir)) else {
        return;
    };
    let problems = compare(&out, true);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// On a real AIX host: the committed layout against IBM's header.
#[cfg(target_os = "aix")]
#[test]
fn system_libperfstat_h_matches() {
    if !Path::new("/usr/include/libperfstat.h").exists() {
        std::eprintln!("perfstat-sys header check: /usr/include/libperfstat.h missing, skipped");
        return;
    }
    let Some(out) = run_layout_program("<libperfstat.h>", None) else {
        return;
    };
    let problems = compare(&out, false);
    assert!(problems.is_empty(), "{problems:#?}");
}
