//! MariaDB 10.11 (Debian 12's own): no vector features, everything else evaluates.

use crate::support::*;

#[test]
fn vector_rules_are_not_applicable_and_the_rest_evaluates() {
    let server = Server::m1011();
    let r = doctor_json(&server.root_url(), &[]);
    let j = r.json();
    assert_eq!(j["mariadb"]["reachable"], true, "{}", r.stdout);
    assert!(
        j["mariadb"]["version"]
            .as_str()
            .unwrap()
            .starts_with("10.11.")
    );
    for code in ["PD101", "PD102", "PD103"] {
        assert_eq!(status(&j, code), "not_applicable", "{:#}", check(&j, code));
    }
    assert!(
        check(&j, "PD101")["summary"]
            .as_str()
            .unwrap()
            .contains("11.7")
    );
    // 10.6+ accepts only CRC-32C checksums: PD201 judges the CRC-32 implementation InnoDB
    // named at start-up in the error log it reads (the test server's own file).
    let pd201 = check(&j, "PD201");
    assert!(
        ["pass", "fail"].contains(&pd201["status"].as_str().unwrap())
            && pd201["evidence"][0]
                .as_str()
                .unwrap()
                .contains("InnoDB: Using "),
        "{pd201:#}"
    );
    assert_eq!(status(&j, "PD202"), "pass");
    assert_eq!(status(&j, "PD203"), "pass");
    // The harness runs 10.11 with performance_schema OFF (MariaDB's default): an info finding.
    assert_eq!(status(&j, "PD204"), "fail");
    assert_eq!(j["findings"][0]["code"], "PD204");
    assert_eq!(j["summary"]["worst"], "info");
    assert_eq!(r.code, 0, "info findings do not change the exit status");

    // Every check has the documented fields.
    for c in j["checks"].as_array().unwrap() {
        for field in [
            "code",
            "name",
            "status",
            "severity",
            "summary",
            "evidence",
            "remediation",
        ] {
            assert!(!c[field].is_null(), "{field} missing in {c:#}");
        }
    }
    // Markdown renders the same verdicts.
    let md = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", server.root_url())
        .args(["doctor", "--format", "markdown", "--sample-window", "0"]));
    // 0: info findings only — unless the host itself is saturated meanwhile (PD806, a real
    // warning, seen when the suite shared the machine with a build).
    assert!(
        md.code == 0
            || (md.code == 1 && md.stdout.contains("| **fail** | PD806 | cpu-saturated |")),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout
            .contains("| **fail** | PD204 | performance-schema-off | info |"),
        "{}",
        md.stdout
    );
}
