//! `powerdiag diff` against hostile or mistaken agents (issue 38, item 7): a bounded, non-zero
//! `--agent.timeout`; a TLS failure named with its cause and the fix; no basic auth over
//! `http://` without `--agent.allow-insecure-auth`; a huge `Content-Length` refused on the
//! header. The servers are small loopback listeners answering a fixed response.

use std::{
    io::{Read, Write},
    net::TcpListener,
    time::Duration,
};

use crate::agent::{eventually, testdata};
use crate::diff_agents::tls_agent;
use crate::support::*;

/// A loopback HTTP server on a free port that answers every request with `response` and then
/// holds the connection open for `hold` (a client that waits for more waits that long).
fn fixed_server(response: &'static [u8], hold: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                // Read the request head, then answer.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(response);
                let _ = stream.flush();
                std::thread::sleep(hold);
            });
        }
    });
    port
}

/// A snapshot-free second side: the same URL again is enough, diff reads A first.
fn diff_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

#[test]
fn agent_timeout_is_bounded_and_never_zero() {
    for bad in ["0s", "0", "100000000years", "11m"] {
        let r = run(powerdiag().args(["diff", "a.json", "b.json", "--agent.timeout", bad]));
        assert_eq!(r.code, 3, "{bad}: {}", r.stderr);
        assert!(
            r.stderr.contains("--agent.timeout") && r.stderr.contains("between 1s and 10m"),
            "{bad}: {}",
            r.stderr
        );
    }
    // In range, the flag is accepted: the error is about the missing files.
    let r = run(powerdiag().args(["diff", "a.json", "b.json", "--agent.timeout", "10m"]));
    assert_eq!(r.code, 3);
    assert!(!r.stderr.contains("--agent.timeout"), "{}", r.stderr);
}

#[test]
fn basic_auth_over_http_needs_the_insecure_flag() {
    let port = fixed_server(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        Duration::ZERO,
    );
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("password");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let diff = |extra: &[&str]| {
        let mut c = powerdiag();
        c.args(["diff", &diff_url(port), &diff_url(port)])
            .args(["--agent.timeout", "5s", "--agent.username", "u"])
            .arg("--agent.password-file")
            .arg(&pw)
            .args(extra);
        run(&mut c)
    };
    let r = diff(&[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("--agent.allow-insecure-auth")
            && r.stderr.contains("http://")
            && r.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("s3cret"), "{}", r.stderr);
    // With the flag, the request goes out (and this server answers 503).
    let r = diff(&["--agent.allow-insecure-auth"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("HTTP 503"), "{}", r.stderr);
    // The flag is documented.
    let help = run(powerdiag().args(["diff", "--help"]));
    assert!(
        help.stdout.contains("--agent.allow-insecure-auth"),
        "{}",
        help.stdout
    );
}

#[test]
fn a_huge_content_length_is_refused_on_the_header() {
    let port = fixed_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{\"a\":",
        Duration::from_secs(20),
    );
    let r = run(powerdiag().args([
        "diff",
        &diff_url(port),
        &diff_url(port),
        "--agent.timeout",
        "8s",
    ]));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("10737418240") && r.stderr.contains("64 MiB"),
        "{}",
        r.stderr
    );
    assert!(
        r.elapsed < Duration::from_secs(5),
        "refused on the header, not after the deadline: {:?}",
        r.elapsed
    );
}

#[test]
fn a_wrong_ca_file_names_the_certificate_problem_and_the_fix() {
    let (_agent, port) = tls_agent(&format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        testdata("test-server.crt").display(),
        testdata("test-server.key").display()
    ));
    // A certificate that did not sign the agent's: the client's, not the CA.
    let wrong_ca = testdata("test-client.crt");
    let url = format!("https://localhost:{port}");
    let diff = || {
        let mut c = powerdiag();
        c.args([
            "diff",
            &url,
            &url,
            "--agent.timeout",
            "5s",
            "--agent.ca-file",
        ])
        .arg(&wrong_ca);
        run(&mut c)
    };
    // Until the agent listens, the error is "cannot connect".
    let mut last = String::new();
    let named = eventually(Duration::from_secs(15), || {
        let r = diff();
        assert_eq!(r.code, 3, "{}", r.stderr);
        last = r.stderr;
        last.contains("not trusted")
    });
    assert!(named, "{last}");
    assert!(
        last.contains("UnknownIssuer")
            && last.contains("--agent.ca-file must be the CA that signed the agent's certificate"),
        "{last}"
    );
}
