//! `doctor` on this VM: host facts match what the test reads itself; hardware counters are
//! reported unavailable with the reason; software counters are present.

use crate::support::*;

fn bracketed(s: &str) -> String {
    let a = s.find('[').unwrap() + 1;
    let b = s[a..].find(']').unwrap() + a;
    s[a..b].to_owned()
}

#[test]
fn live_host_facts_and_counters() {
    // Connected to a server, so its pid_file names the one mariadbd to look at.
    let server = Server::m1011();
    let r = doctor_json(&server.root_url(), &["--no-probe", "--sample-window", "1s"]);
    let j = r.json();
    let os = &j["snapshot"]["os"]["available"];
    assert_eq!(os["source"], "live");

    let cpu = &os["cpu"]["available"];
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online_count: u64 = count_cpus(&online);
    assert_eq!(cpu["threads"], online_count);
    assert_eq!(cpu["threads"], j["host"]["hardware_threads"]);
    let model = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let model = model
        .lines()
        .find(|l| l.starts_with("model name"))
        .map(|l| l.split_once(':').unwrap().1.trim().to_owned());
    if let Some(m) = model {
        assert_eq!(cpu["model"], m);
    }

    let mem = &os["memory"]["available"];
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap();
    assert_eq!(mem["thp_enabled"], bracketed(&thp));
    assert_eq!(mem["base_page_bytes"], 4096);

    let pid: u64 = server.pid() as u64;
    let p = &os["process"]["available"];
    assert_eq!(p["pid"], pid, "found through the server's pid_file: {p:#}");
    assert_eq!(p["found_by"], "pid_file");
    assert_eq!(p["name"], "mariadbd");
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads: u64 = proc_status
        .lines()
        .find(|l| l.starts_with("Threads:"))
        .unwrap()[8..]
        .trim()
        .parse()
        .unwrap();
    assert!(
        p["threads"].as_u64().unwrap().abs_diff(threads) <= 4,
        "threads {} vs {threads}",
        p["threads"]
    );

    let t = &os["cpu_time"]["available"];
    // The measured window: at least the 1 s asked for; doctor's last status read and closing
    // the connection may end it a few milliseconds later on a loaded machine.
    let basis = t["basis"].as_str().unwrap();
    let secs: f64 = basis
        .strip_prefix("window ")
        .and_then(|b| b.strip_suffix(" s"))
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("basis {basis:?}"));
    assert!((1.0..1.25).contains(&secs), "{basis}");
    assert!(t["steal_share"].as_f64().unwrap() >= 0.0);

    // No PMU in this VM: hardware events say why (ENOENT); software events count.
    let events = os["counters"]["available"]["events"].as_array().unwrap();
    let ev = |n: &str| events.iter().find(|e| e["name"] == n).unwrap().clone();
    for hw in ["instructions", "cycles", "dTLB-load-misses"] {
        let e = ev(hw);
        assert!(e["value"].is_null(), "{e:#}");
        assert!(
            e["unavailable"].as_str().unwrap().contains("ENOENT"),
            "{e:#}"
        );
    }
    for sw in ["context-switches", "page-faults", "cpu-migrations"] {
        let e = ev(sw);
        assert!(
            e["value"].is_u64(),
            "software counter {sw} must be counted: {e:#}"
        );
    }
    assert_eq!(status(&j, "PD303"), "insufficient_data");
    assert!(
        check(&j, "PD303")["summary"]
            .as_str()
            .unwrap()
            .contains("ENOENT")
    );
}
