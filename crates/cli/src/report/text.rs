use std::fmt::Write;

use owo_colors::OwoColorize;
use powerdiag_rules::{Check, Gathered, Report, Severity, Snapshot, Status, format_bytes};

use super::{esc, secs};

pub(crate) fn render(
    s: &Snapshot,
    r: &Report,
    code: u8,
    top: Option<&super::statements::TopStatements>,
    blocking: Option<&super::blocking::Blocking>,
) -> String {
    // Every verdict's text escaped once; snapshot fields are escaped where they are printed.
    let r = &super::escaped_report(r);
    let mut o = String::new();
    header(&mut o, s);
    os(&mut o, s);
    mariadb(&mut o, s);
    let findings = r.findings();
    let tally = super::Tally::of(r);
    let _ = writeln!(o);
    let headline = format!("{}.", tally.line);
    if !findings.is_empty() {
        let _ = writeln!(o, "{}", format!("Findings ({})", counts(r)).bold());
        let _ = writeln!(o, "{headline}");
    } else if tally.insufficient_data == 0 {
        let _ = writeln!(o, "{}", headline.green().bold());
    } else {
        let _ = writeln!(o, "{}", headline.yellow().bold());
    }
    if !tally.insufficient_data_reasons.is_empty() {
        let _ = writeln!(o, "  Could not decide:");
        for u in &tally.insufficient_data_reasons {
            // The connection error is explained once, above.
            let reason = if u.reason.starts_with("MariaDB not reachable") {
                "MariaDB not reachable (see above)"
            } else {
                u.reason.as_str()
            };
            let _ = writeln!(o, "    {}: {reason}", u.codes.join(", "));
        }
    }
    for c in findings {
        finding(&mut o, c);
    }
    if let Some(b) = blocking.filter(|b| b.shown()) {
        let _ = writeln!(o, "\n{}", "Blocking".bold());
        o.push_str(&super::blocking::text(b));
    }
    if let Some(t) = top {
        let _ = writeln!(o, "\n{}", "Top statements".bold());
        o.push_str(&super::statements::text(t));
    }
    let _ = writeln!(o, "\n{}", "Checks".bold());
    for c in &r.checks {
        let status = match c.status {
            Status::Fail => format!("{:<17}", "fail").red().to_string(),
            Status::Pass => format!("{:<17}", "pass").green().to_string(),
            Status::NotApplicable => format!("{:<17}", "not_applicable").dimmed().to_string(),
            Status::InsufficientData => format!("{:<17}", "insufficient_data").yellow().to_string(),
        };
        // The connection error is explained once, above; don't repeat it on every line.
        let summary = if c.summary.starts_with("MariaDB not reachable") {
            "MariaDB not reachable (see above)"
        } else {
            c.summary.as_str()
        };
        let _ = writeln!(o, "  {status} {} {:<30} {summary}", c.code, c.name);
    }
    let runs: Vec<String> = s
        .collectors
        .iter()
        .map(|c| {
            format!(
                "{} {}{}",
                esc(&c.name),
                secs(c.duration_seconds),
                if c.success { "" } else { " (failed)" }
            )
        })
        .collect();
    let configured = super::configured_thresholds(r);
    if !configured.is_empty() {
        let _ = writeln!(o, "\nConfigured thresholds: {}", configured.join("; "));
    }
    // A snapshot recorded without collector timings (a hand-made or older one) has none to show.
    if !runs.is_empty() {
        let _ = writeln!(o, "\nCollectors: {}", runs.join(", "));
    } else {
        let _ = writeln!(o);
    }
    let verdict = match code {
        0 => "0: no warning or critical finding".green().to_string(),
        1 => "1: worst finding is a warning".yellow().to_string(),
        2 => "2: worst finding is critical".red().to_string(),
        _ => "3".to_string(),
    };
    let _ = writeln!(
        o,
        "Exit status {verdict}. Details of a rule: powerdiag explain CODE"
    );
    o
}

fn counts(r: &Report) -> String {
    let f = r.findings();
    let n = |sev| f.iter().filter(|c| c.severity == sev).count();
    format!(
        "{} critical, {} warning, {} info",
        n(Severity::Critical),
        n(Severity::Warning),
        n(Severity::Info)
    )
}

fn header(o: &mut String, s: &Snapshot) {
    let _ = write!(o, "{}", "powerdiag doctor".bold());
    match s.host.as_ref() {
        Ok(h) => {
            let mut parts = vec![
                esc(h.os_release.as_deref().unwrap_or(&h.os)).into_owned(),
                esc(&h.arch).into_owned(),
            ];
            if let Some(t) = h.hardware_threads {
                parts.push(format!("{t} hardware threads"));
            }
            if let Some(m) = h.memory_total_bytes {
                parts.push(format!("{} RAM", format_bytes(m)));
            }
            if let Some(k) = &h.kernel {
                parts.push(format!("kernel {}", esc(k)));
            }
            if let Some(p) = h.page_size_bytes {
                parts.push(format!("{} pages", format_bytes(p)));
            }
            let _ = writeln!(o, " — {} ({})", esc(&h.hostname).bold(), parts.join(", "));
        }
        Err(why) => {
            let _ = writeln!(o, " — host facts unavailable: {}", esc(why));
        }
    }
}

fn os(o: &mut String, s: &Snapshot) {
    let Ok(f) = s.os.as_ref() else { return };
    let na = |why: &str| format!("unavailable ({})", esc(why));
    let cpu = match f.cpu.as_ref() {
        Ok(c) => {
            let mut line = esc(c.model.as_deref().unwrap_or(&c.architecture)).into_owned();
            if let (Some(sk), Some(co), Some(t)) = (c.sockets, c.cores, c.threads_per_core) {
                let threads = if t == 1 { "thread" } else { "threads" };
                line += &format!(
                    ", {sk} socket(s) × {} cores × {t} {threads}",
                    co / sk.max(1)
                );
            }
            if let Some(smt) = &c.smt_control {
                // The kernel's words for /sys/devices/system/cpu/smt/control, in English. On
                // a platform without the control (POWER's pseries, QEMU) it says nothing
                // about the threads themselves: those come first then.
                line += &match (smt.as_str(), c.threads_per_core) {
                    ("notimplemented", Some(t)) if t > 1 => format!(
                        ", SMT{t} active (the kernel's SMT control is not implemented on this platform)"
                    ),
                    // POWER threads offline by hand (ppc64_cpu --smt=1): PD405 says more.
                    ("notimplemented", Some(1)) if c.power => {
                        ", SMT off (the kernel's SMT control is not implemented on this platform)"
                            .into()
                    }
                    // A CPU without SMT (arm64, most VMs): nothing to say.
                    ("notimplemented", Some(1)) => String::new(),
                    ("notimplemented", _) => {
                        ", the kernel's SMT control is not implemented on this platform".into()
                    }
                    ("forceoff", _) => ", SMT forced off".into(),
                    ("notsupported", _) => ", SMT not supported".into(),
                    (other, _) => format!(", SMT {}", esc(other)),
                };
            }
            // cpuinfo's `cpu MHz` without cpufreq is shown as what it is, not as a frequency
            // the CPUs were measured at.
            let unmeasured = c.current_source.as_deref() == Some(powerdiag_rules::CPUINFO_MHZ);
            let cur = if unmeasured {
                c.effective_mhz
            } else {
                c.current_mhz.or(c.effective_mhz)
            };
            match (cur, c.nominal_mhz) {
                (Some(cur), Some(nom)) => line += &format!(", {cur:.0} MHz (nominal {nom:.0})"),
                (Some(cur), None) => line += &format!(", {cur:.0} MHz"),
                (None, Some(nom)) => line += &format!(", nominal {nom:.0} MHz"),
                (None, None) => {}
            }
            if let (true, None, Some(mhz)) = (unmeasured, cur, c.current_mhz) {
                line += &format!(", cpuinfo {mhz:.0} MHz (no cpufreq: not measured)");
            }
            line
        }
        Err(why) => na(why),
    };
    let _ = writeln!(o, "  cpu: {cpu}");
    match f.topology.as_ref() {
        Ok(t) => {
            let cpus = esc(t.l3_cpus.as_deref().unwrap_or("?"));
            // No level-3 cache listed is not an unknown size: say which.
            let top = t
                .caches
                .iter()
                .filter(|c| c.kind != "Instruction")
                .map(|c| c.level)
                .max();
            let l3 = match (t.l3_total_bytes, top) {
                (Some(b), _) => format!("L3 {} over CPUs {cpus}", format_bytes(b)),
                (None, Some(l)) if l >= 3 => format!("L3 of unknown size over CPUs {cpus}"),
                (None, Some(l)) => format!("no L3 listed (caches up to L{l})"),
                (None, None) => "no caches listed".to_owned(),
            };
            let _ = writeln!(
                o,
                "  topology: {l3}, {} NUMA node(s)",
                t.numa_nodes.len().max(1)
            );
        }
        Err(why) => {
            let _ = writeln!(o, "  topology: {}", na(why));
        }
    }
    if let Ok(m) = f.memory.as_ref() {
        let mut line = format!(
            "  memory: {} pages",
            m.base_page_bytes
                .map(format_bytes)
                .unwrap_or_else(|| "?".into())
        );
        if let Some(thp) = &m.thp_enabled {
            line += &format!(
                ", THP {} (defrag {})",
                esc(thp),
                esc(m.thp_defrag.as_deref().unwrap_or("?"))
            );
        }
        if m.page_sizes.len() > 1 {
            let sizes: Vec<String> = m.page_sizes.iter().map(|b| format_bytes(*b)).collect();
            line += &format!(", supported {}", sizes.join("/"));
        }
        line += &format!(", HugeTLB pool {}", m.hugepages_total.unwrap_or(0));
        let _ = writeln!(o, "{line}");
    }
    match f.process.as_ref() {
        Ok(p) => {
            let pages = match (p.data_page_bytes, p.text_page_bytes, p.stack_page_bytes) {
                (Some(d), t, st) => format!(
                    "data/text/stack pages {}/{}/{}",
                    format_bytes(d),
                    t.map(format_bytes).unwrap_or_else(|| "?".into()),
                    st.map(format_bytes).unwrap_or_else(|| "?".into())
                ),
                _ if p.kernel_page_sizes.is_empty() => "pages ?".into(),
                _ => format!(
                    "pages {}",
                    p.kernel_page_sizes
                        .iter()
                        .map(|b| format_bytes(*b))
                        .collect::<Vec<_>>()
                        .join("/")
                ),
            };
            let mut line = format!(
                "  {} pid {} (from {}): {} resident",
                esc(&p.name),
                p.pid,
                esc(&p.found_by),
                p.rss_bytes.map(format_bytes).unwrap_or_else(|| "?".into())
            );
            if let Some(h) = p.anon_huge_bytes {
                line += &format!(", {} in huge pages", format_bytes(h));
            }
            line += &format!(", {pages}");
            if let Some(l) = &p.ldr_cntrl {
                line += &format!(
                    ", LDR_CNTRL {}",
                    if l.is_empty() { "unset".into() } else { esc(l) }
                );
            }
            if let Some(a) = p.allocator {
                line += &format!(", allocator {}", format!("{a:?}").to_ascii_lowercase());
            }
            if let Some(c) = p.compiler {
                line += &format!(", built with {}", format!("{c:?}").to_ascii_lowercase());
            }
            if let Some(cpus) = &p.affinity {
                line += &format!(", CPUs {}", esc(cpus));
            }
            let _ = writeln!(o, "{line}");
        }
        Err(why) => {
            let _ = writeln!(o, "  mariadbd: {}", na(why));
        }
    }
    if let Ok(t) = f.cpu_time.as_ref() {
        let share = |x: Option<f64>| {
            x.map(|v| format!("{:.1}%", v * 100.0))
                .unwrap_or_else(|| "n/a".into())
        };
        let _ = writeln!(
            o,
            "  cpu time: steal {}, busy {} ({})",
            share(t.steal_share),
            share(t.busy_share),
            esc(&t.basis)
        );
    }
    match f.partition.as_ref() {
        Ok(Some(p)) => {
            let _ = writeln!(
                o,
                "  partition: {} {}{}, entitlement {}, {} virtual processors",
                if p.shared { "shared" } else { "dedicated" },
                if p.capped { "capped" } else { "uncapped" },
                if p.donating { ", DONATING" } else { "" },
                p.entitled_capacity
                    .map(|e| format!("{e:.2}"))
                    .unwrap_or_else(|| "?".into()),
                p.online_vcpus
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "?".into())
            );
        }
        Ok(None) => {}
        Err(why) => {
            let _ = writeln!(o, "  partition: {}", na(why));
        }
    }
    match f.counters.as_ref() {
        Ok(c) if !c.events.is_empty() => {
            let counted: Vec<String> = c
                .events
                .iter()
                .filter_map(|e| e.value.map(|v| format!("{} {v}", esc(&e.name))))
                .collect();
            let missing: Vec<String> = c
                .events
                .iter()
                .filter(|e| e.value.is_none())
                .map(|e| esc(&e.name).into_owned())
                .collect();
            let _ = write!(
                o,
                "  counters over {:.2} s: {}",
                c.window_seconds,
                if counted.is_empty() {
                    "none".into()
                } else {
                    counted.join(", ")
                }
            );
            if let Some(why) = c.events.iter().find_map(|e| e.unavailable.as_deref()) {
                let _ = write!(o, "; {} {}", missing.join(", "), esc(why));
            }
            let _ = writeln!(o);
        }
        Ok(_) => {}
        Err(why) => {
            let _ = writeln!(o, "  counters: {}", esc(why));
        }
    }
}

fn mariadb(o: &mut String, s: &Snapshot) {
    let m = &s.mariadb;
    match &m.facts {
        Some(f) => {
            let place = match f.same_host {
                Some(true) => "this host",
                Some(false) => "another host",
                None => "host unknown",
            };
            let _ = writeln!(
                o,
                "MariaDB {} at {} ({place})",
                esc(&f.version.raw).bold(),
                esc(m.target.as_deref().unwrap_or("?"))
            );
            match &f.vector_indexes {
                Gathered::Available(v) if !v.is_empty() => {
                    let names: Vec<String> = v
                        .iter()
                        .map(|i| esc(&i.qualified_name()).into_owned())
                        .collect();
                    let _ = writeln!(o, "  vector indexes: {}", names.join(", "));
                }
                Gathered::Unavailable(why) => {
                    let _ = writeln!(o, "  vector indexes: unavailable ({})", esc(why));
                }
                _ => {}
            }
            match &f.probe {
                Gathered::Available(p) => {
                    for ip in &p.indexes {
                        let mut lat: Vec<u64> =
                            ip.queries.iter().skip(1).map(|q| q.latency_us).collect();
                        lat.sort_unstable();
                        let med = lat.get(lat.len() / 2).copied().unwrap_or(0);
                        let rebuilds = ip
                            .queries
                            .iter()
                            .skip(1)
                            .map(|q| q.handler_read_last)
                            .fold(0u64, u64::saturating_add);
                        let first = ip.queries.first().map(|q| q.latency_us).unwrap_or(0);
                        let _ = write!(
                            o,
                            "  probe {}.{} ({}): {} queries, first {:.2} ms, median {:.2} ms, {} cache rebuilds",
                            esc(&ip.schema),
                            esc(&ip.table),
                            esc(&ip.index),
                            ip.queries.len(),
                            first as f64 / 1000.0,
                            med as f64 / 1000.0,
                            rebuilds
                        );
                        if let Some(e) = &ip.error {
                            let _ = write!(o, " — stopped: {}", esc(e));
                        } else if ip.budget_exhausted {
                            let _ = write!(o, " — time budget reached");
                        }
                        let _ = writeln!(o);
                    }
                }
                Gathered::Unavailable(why) => {
                    let _ = writeln!(o, "  probe: {}", esc(why));
                }
            }
            for l in super::replication::lines(f) {
                let _ = writeln!(o, "  replication: {l}");
            }
            if let Some(l) = super::replication::galera_line(f) {
                let _ = writeln!(o, "  galera: {l}");
            }
            for n in &f.notes {
                let _ = writeln!(o, "  {} {}", "note:".yellow(), esc(n));
            }
        }
        None => {
            let _ = writeln!(o, "{} {}", "MariaDB:".bold(), "not reachable".red().bold());
            if let Some(e) = &m.error {
                let _ = writeln!(o, "  {}", esc(&e.message));
            }
            if m.attempts.len() > 1 {
                let _ = writeln!(o, "  tried:");
                for a in &m.attempts {
                    let _ = writeln!(
                        o,
                        "    {} — {}",
                        esc(&a.target),
                        esc(a.error.as_deref().unwrap_or("ok"))
                    );
                }
            }
            // One way forward: the error's own fix when it has one, else how to point
            // powerdiag at a server.
            match &m.error {
                Some(e) if !e.hint.is_empty() => {
                    let _ = writeln!(o, "  fix: {}", esc(&e.hint));
                }
                _ => {
                    let _ = writeln!(
                        o,
                        "  Point powerdiag at the server with POWERDIAG_MARIADB_URL=mysql://USER:PASSWORD@HOST:PORT/\n  \
                         or --mariadb.defaults-file PATH (a my.cnf with a [client] section)."
                    );
                }
            }
            let _ = writeln!(
                o,
                "  Database checks below report insufficient_data until then; host checks still ran."
            );
        }
    }
}

fn finding(o: &mut String, c: &Check) {
    let sev = match c.severity {
        Severity::Critical => "CRITICAL".red().bold().to_string(),
        Severity::Warning => "WARNING ".yellow().bold().to_string(),
        Severity::Info => "INFO    ".cyan().bold().to_string(),
    };
    let _ = writeln!(o, "\n  {sev} {} {}", c.code.bold(), c.name.bold());
    let _ = writeln!(o, "    {}", c.summary);
    if !c.evidence.is_empty() {
        let _ = writeln!(o, "    {}", "evidence:".dimmed());
        for e in &c.evidence {
            let _ = writeln!(o, "      - {e}");
        }
    }
    let _ = writeln!(o, "    {}", "fix:".dimmed());
    for line in c.remediation.lines() {
        let _ = writeln!(o, "      {line}");
    }
}

#[cfg(test)]
mod tests {
    use powerdiag_rules::testing::{SnapshotBuilder, power9_cpu};

    /// A platform without the kernel's SMT control (POWER's pseries, QEMU) says which SMT is
    /// active, not "SMT not implemented" beside "× 4 threads".
    #[test]
    fn smt_without_the_kernels_control_says_what_is_active() {
        let line = |smt: u32, control: &str| {
            let s = SnapshotBuilder::new()
                .os(|f| {
                    let mut cpu = power9_cpu(8, smt);
                    cpu.smt_control = Some(control.into());
                    f.cpu = powerdiag_rules::Gathered::Available(cpu);
                })
                .build();
            let mut o = String::new();
            super::os(&mut o, &s);
            o
        };
        let four = line(4, "notimplemented");
        assert!(
            four.contains("× 4 threads, SMT4 active (the kernel's SMT control is not implemented on this platform)"),
            "{four}"
        );
        assert!(!four.contains("SMT not implemented"), "{four}");
        let one = line(1, "notimplemented");
        assert!(
            one.contains(
                "× 1 thread, SMT off (the kernel's SMT control is not implemented on this platform)"
            ),
            "{one}"
        );
        // Not POWER (arm64 under QEMU virt): one thread per core is the CPU, not a choice.
        let s = SnapshotBuilder::new()
            .os(|f| {
                let mut cpu = power9_cpu(4, 1);
                cpu.power = false;
                cpu.model = Some("ARM Cortex-A72".into());
                cpu.smt_control = Some("notimplemented".into());
                f.cpu = powerdiag_rules::Gathered::Available(cpu);
            })
            .build();
        let mut arm = String::new();
        super::os(&mut arm, &s);
        assert!(
            arm.contains("ARM Cortex-A72, 1 socket(s) × 4 cores × 1 thread,"),
            "{arm}"
        );
        assert!(!arm.contains("SMT"), "{arm}");
        assert!(line(2, "forceoff").contains(", SMT forced off"));
    }
}
