//! docs/runbooks/: one page per rule, generated from the rule's doc comment (the text
//! `powerdiag explain` prints), so a page cannot drift from its rule. This test is the
//! generator: it renders every page and fails when a committed one differs, is missing, or
//! names no rule; `POWERDIAG_BLESS=1 cargo test -p powerdiag --test it runbooks` writes them.
//! The alert runbooks (`Powerdiag*.md`, for the alerts that are not a rule) are written by hand.

use std::{collections::BTreeSet, path::PathBuf};

use powerdiag_rules::RULES;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/runbooks")
}

#[test]
fn runbooks_are_generated_from_the_rules_and_current() {
    let bless = std::env::var_os("POWERDIAG_BLESS").is_some_and(|v| v == "1");
    let dir = dir();
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut problems = Vec::new();
    let mut wanted = BTreeSet::new();
    for rule in RULES {
        let m = rule.meta();
        let name = format!("{}.md", m.code);
        let path = dir.join(&name);
        let page = m.runbook();
        wanted.insert(name.clone());
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == page => {}
            _ if bless => std::fs::write(&path, &page).unwrap(),
            Ok(_) => problems.push(format!("{name} is stale")),
            Err(_) => problems.push(format!("{name} is missing")),
        }
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let generated = name.starts_with("PD") && name.ends_with(".md");
        if generated && !wanted.contains(&name) {
            if bless {
                std::fs::remove_file(dir.join(&name)).unwrap();
            } else {
                problems.push(format!("{name} names no rule"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/runbooks is out of date with the rules' doc comments: {}. Regenerate: \
         POWERDIAG_BLESS=1 cargo test -p powerdiag --test it runbooks",
        problems.join("; ")
    );
}

/// The generated page says what the rule says, and where to change it.
#[test]
fn a_runbook_page_is_the_explanation() {
    // Rendered, not read: the test above may be rewriting the files (POWERDIAG_BLESS=1), and
    // it proves the committed files equal the rendering.
    let pd403 = powerdiag_rules::find_rule("PD403")
        .unwrap()
        .meta()
        .runbook();
    assert!(pd403.contains("# PD403 hypervisor-preemption"));
    assert!(pd403.contains("do not edit here"));
    assert!(pd403.contains("## Remediation") && pd403.contains("### PowerVM"));
    assert!(pd403.contains("| `max_steal` | 5.0% |"), "{pd403}");
    let explain = crate::support::run(crate::support::powerdiag().args(["explain", "PD403"]));
    assert_eq!(explain.code, 0);
    for section in ["### Why is this bad?", "dispatch_dispersions"] {
        assert!(explain.stdout.contains(section), "{}", explain.stdout);
    }
}
