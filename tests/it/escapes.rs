//! Terminal escape injection (issue 38, item 6): a crafted `@@version`, host name, kernel,
//! CPU model, variable value, vector index name, file path or collector error must not reach
//! the terminal raw. `doctor --from` and `diff` on a snapshot whose strings carry ESC, BEL,
//! CR, LF, a C1 CSI, DEL and bidirectional overrides print them escaped (`\u{1b}`, `\r`,
//! `\n`, `\u{202e}`) in text and Markdown; JSON keeps the raw value. No server needed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;

/// Clears the screen, sets the terminal title, starts a forged line, a C1 CSI, DEL and
/// right-to-left override/isolate.
const PAYLOAD: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\r\nINJECTED\u{9b}31m\u{7f}\u{202e}RTL\u{2066}";

/// What the payload must look like in a text or Markdown report.
const ESCAPED: &str =
    "\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\r\\nINJECTED\\u{9b}31m\\u{7f}\\u{202e}RTL\\u{2066}";

/// Characters of the payload that must never appear raw (ESC only as the report's own SGR
/// colour codes, checked separately).
const FORBIDDEN: [char; 7] = [
    '\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{7f}', '\u{202e}', '\u{2066}',
];

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/s924-linux-dedicated.json")
}

/// Appends the payload to the string at each JSON pointer (which must exist).
fn poison(v: &mut Value, pointers: &[&str]) {
    for p in pointers {
        let s = v
            .pointer_mut(p)
            .unwrap_or_else(|| panic!("{p} not in the example"));
        let old = s.as_str().unwrap_or_else(|| panic!("{p} is not a string"));
        *s = Value::String(format!("{old}{PAYLOAD}"));
    }
}

/// The Linux example with the payload in every free-text field the reports show.
fn hostile() -> Value {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(example()).unwrap()).unwrap();
    poison(
        &mut v,
        &[
            "/taken_at",
            "/host/available/hostname",
            "/host/available/os_release",
            "/host/available/kernel",
            "/host/available/arch",
            "/os/available/cpu/available/model",
            "/os/available/cpu/available/smt_control",
            "/os/available/topology/available/l3_cpus",
            "/os/available/memory/available/thp_enabled",
            "/os/available/memory/available/thp_defrag",
            "/os/available/process/available/name",
            "/os/available/process/available/affinity",
            "/os/available/cpu_time/available/basis",
            "/os/available/counters/available/events/0/name",
            "/os/available/counters/available/events/0/unavailable",
            "/os/available/storage/available/0/path",
            "/os/available/storage/available/0/mount_point",
            "/mariadb/target",
            "/mariadb/facts/version/raw",
            "/mariadb/facts/variables/version",
            "/mariadb/facts/variables/innodb_flush_method",
            "/mariadb/facts/variables/thread_handling",
            "/mariadb/facts/vector_indexes/available/0/schema",
            "/mariadb/facts/vector_indexes/available/0/table",
            "/mariadb/facts/vector_indexes/available/0/index",
            "/mariadb/facts/probe/available/indexes/0/schema",
            "/mariadb/facts/probe/available/indexes/0/table",
            "/mariadb/facts/probe/available/indexes/0/index",
            "/mariadb/facts/status_window/unavailable",
            "/mariadb/facts/innodb_size/unavailable",
            "/mariadb/facts/transactions/unavailable",
            "/mariadb/facts/statements/unavailable",
        ],
    );
    v
}

/// The same host with the server unreachable: the error, its fix and the attempts.
fn hostile_unreachable() -> Value {
    let mut v = hostile();
    v["mariadb"]["reachable"] = Value::Bool(false);
    v["mariadb"]["facts"] = Value::Null;
    v["mariadb"]["error"] = serde_json::json!({
        "kind": "access_denied",
        "message": format!("Access denied for user 'x{PAYLOAD}'"),
        "hint": format!("check the password in {PAYLOAD}"),
    });
    v["mariadb"]["attempts"] = serde_json::json!([
        {"target": format!("a{PAYLOAD}"), "error": format!("refused{PAYLOAD}")},
        {"target": format!("b{PAYLOAD}"), "error": format!("denied{PAYLOAD}")},
    ]);
    v
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    path
}

/// No raw payload character (the report's own `\x1b[…m` colour codes removed first when
/// `colour`), no line the payload started, and the escaped form present.
fn assert_escaped(what: &str, out: &str, colour: bool) {
    assert!(!out.trim().is_empty(), "{what}: empty output");
    let plain = if colour {
        strip_sgr(out)
    } else {
        out.to_owned()
    };
    if let Some(c) = plain.chars().find(|c| FORBIDDEN.contains(c)) {
        panic!("{what}: raw {c:?} in the output:\n{out:?}");
    }
    assert!(
        !plain.lines().any(|l| l
            .trim_start_matches([' ', '-', '|', '`', '#', '*'])
            .starts_with("INJECTED")),
        "{what}: the payload started a line:\n{plain}"
    );
    assert!(
        plain.contains(ESCAPED),
        "{what}: no escaped payload:\n{plain}"
    );
}

/// `out` without the SGR sequences `ESC [ digits/; m` (the only escapes a report may print).
fn strip_sgr(out: &str) -> String {
    let mut o = String::new();
    let mut rest = out;
    while let Some(i) = rest.find("\u{1b}[") {
        o.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[end..].starts_with('m') {
            rest = &after[end + 1..];
        } else {
            // Not an SGR: keep the ESC so the check above finds it.
            o.push('\u{1b}');
            rest = &rest[i + 1..];
        }
    }
    o.push_str(rest);
    o
}

#[test]
fn reports_escape_outside_strings() {
    let dir = tempfile::tempdir().unwrap();
    let reachable = write(dir.path(), "hostile.json", &hostile());
    let unreachable = write(dir.path(), "hostile-down.json", &hostile_unreachable());
    for path in [&reachable, &unreachable] {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (format, colour) in [("text", "never"), ("text", "always"), ("markdown", "never")] {
            let r = run(powerdiag()
                .env_remove("NO_COLOR")
                .args(["doctor", "--format", format, "--color", colour, "--from"])
                .arg(path));
            assert!(r.code <= 2, "{name} {format}: {r:?}");
            assert_escaped(
                &format!("{name} doctor {format} {colour}"),
                &r.stdout,
                colour == "always",
            );
            if colour == "always" {
                // The report's own colours still work.
                assert!(
                    r.stdout.contains("\u{1b}[1m"),
                    "{name}: no colour:\n{}",
                    r.stdout
                );
            }
        }
        // The escaped payload shows up where the server's fields are printed.
        let text = run(powerdiag()
            .args(["doctor", "--color", "never", "--from"])
            .arg(path));
        let version_line = if path == &reachable {
            format!("MariaDB 11.8.5-MariaDB-ubu2404{ESCAPED} at root@127.0.0.1:3306{ESCAPED}")
        } else {
            format!("Access denied for user 'x{ESCAPED}'")
        };
        assert!(text.stdout.contains(&version_line), "{}", text.stdout);
        assert!(
            text.stdout.contains(&format!("s924-linux{ESCAPED}")),
            "{}",
            text.stdout
        );

        // JSON escapes control characters itself and keeps the raw value.
        let j = run(powerdiag()
            .args(["doctor", "--format", "json", "--from"])
            .arg(path))
        .json();
        assert_eq!(
            j["host"]["hostname"].as_str(),
            Some(format!("s924-linux{PAYLOAD}").as_str()),
            "{j:#}"
        );
        if path == &reachable {
            assert_eq!(
                j["mariadb"]["version"].as_str(),
                Some(format!("11.8.5-MariaDB-ubu2404{PAYLOAD}").as_str())
            );
        }
    }

    // diff, both ways round and against a clean snapshot, so each side and each difference
    // carries the payload.
    for (a, b) in [(&reachable, &example()), (&example(), &unreachable)] {
        for (format, colour) in [("text", "never"), ("text", "always"), ("markdown", "never")] {
            let r = run(powerdiag()
                .env_remove("NO_COLOR")
                .args(["diff", "--format", format, "--color", colour])
                .arg(a)
                .arg(b));
            assert_eq!(r.code, 0, "{r:?}");
            assert_escaped(
                &format!("diff {format} {colour}"),
                &r.stdout,
                colour == "always",
            );
        }
    }
    let j = run(powerdiag()
        .args(["diff", "--format", "json"])
        .arg(&reachable)
        .arg(example()))
    .json();
    assert_eq!(
        j["a"]["host"].as_str(),
        Some(format!("s924-linux{PAYLOAD}").as_str()),
        "{j:#}"
    );
}

/// A file path given on the command line is outside text too (diff prints both).
#[test]
fn diff_escapes_file_paths() {
    let dir = tempfile::tempdir().unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(example()).unwrap()).unwrap();
    let odd = write(dir.path(), "a\u{1b}]0;owned\u{7}\u{202e}.json", &v);
    for format in ["text", "markdown"] {
        let r = run(powerdiag()
            .args(["diff", "--color", "never", "--format", format])
            .arg(&odd)
            .arg(example()));
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            !r.stdout.contains(['\u{1b}', '\u{7}', '\u{202e}']),
            "{format}: {:?}",
            r.stdout
        );
        assert!(
            r.stdout.contains("a\\u{1b}]0;owned\\u{7}\\u{202e}.json"),
            "{}",
            r.stdout
        );
    }
}
