use std::fmt::Write;

use powerdiag_rules::{Report, Snapshot, Status};

use super::{esc, md_cell, md_code, md_fence};

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
    let host = esc(s
        .host
        .as_ref()
        .map(|h| h.hostname.as_str())
        .unwrap_or("unknown host"));
    let _ = writeln!(o, "# powerdiag doctor: {host}\n");
    if let Ok(h) = s.host.as_ref() {
        let _ = writeln!(
            o,
            "- Host: {} {}, {} hardware threads, kernel {}",
            esc(h.os_release.as_deref().unwrap_or(&h.os)),
            esc(&h.arch),
            h.hardware_threads
                .map(|t| t.to_string())
                .unwrap_or_else(|| "?".into()),
            esc(h.kernel.as_deref().unwrap_or("?"))
        );
    }
    match (&s.mariadb.facts, &s.mariadb.error) {
        (Some(f), _) => {
            let _ = writeln!(
                o,
                "- MariaDB: {} at {}",
                esc(&f.version.raw),
                md_code(s.mariadb.target.as_deref().unwrap_or("?"))
            );
            for l in super::replication::lines(f) {
                let _ = writeln!(o, "- Replication: {}", md_cell(&l));
            }
            if let Some(l) = super::replication::galera_line(f) {
                let _ = writeln!(o, "- Galera: {}", md_cell(&l));
            }
        }
        (None, Some(e)) => {
            let _ = writeln!(
                o,
                "- MariaDB: **not reachable**: {} (fix: {})",
                esc(&e.message),
                esc(&e.hint)
            );
        }
        (None, None) => {
            let _ = writeln!(o, "- MariaDB: not queried");
        }
    }
    if let Some(t) = &s.taken_at {
        let _ = writeln!(o, "- Taken at: {}", esc(t));
    }
    let _ = writeln!(o, "- Exit status: {code}\n");
    let findings = r.findings();
    let tally = super::Tally::of(r);
    let _ = writeln!(o, "## Findings\n");
    let _ = writeln!(o, "{}.\n", tally.line);
    if !tally.insufficient_data_reasons.is_empty() {
        let _ = writeln!(o, "Could not decide:\n");
        for u in &tally.insufficient_data_reasons {
            let _ = writeln!(o, "- {}: {}", u.codes.join(", "), u.reason);
        }
        let _ = writeln!(o);
    }
    for c in findings {
        let _ = writeln!(
            o,
            "### {} {} ({})\n\n{}\n",
            c.code, c.name, c.severity, c.summary
        );
        for e in &c.evidence {
            let _ = writeln!(o, "- {e}");
        }
        let remediation = c.remediation.trim();
        let fence = md_fence(remediation);
        let _ = writeln!(o, "\nRemediation:\n\n{fence}\n{remediation}\n{fence}\n");
    }
    if let Some(b) = blocking.filter(|b| b.shown()) {
        o.push_str(&super::blocking::markdown(b));
    }
    if let Some(t) = top {
        o.push_str(&super::statements::markdown(t));
    }
    let _ = writeln!(
        o,
        "## Checks\n\n| status | code | name | severity | summary |\n|---|---|---|---|---|"
    );
    for c in &r.checks {
        let status = match c.status {
            Status::Fail => "**fail**",
            other => other.as_str(),
        };
        let _ = writeln!(
            o,
            "| {status} | {} | {} | {} | {} |",
            md_cell(&c.code),
            md_cell(&c.name),
            c.severity,
            md_cell(&c.summary)
        );
    }
    let configured = super::configured_thresholds(r);
    if !configured.is_empty() {
        let _ = writeln!(o, "\nConfigured thresholds:\n");
        for t in configured {
            let _ = writeln!(o, "- {t}");
        }
    }
    o
}
