use std::{fs, net::SocketAddr, path::Path};

use crate::auth::{AuthLimits, AuthStats};

use axum::routing::get;
use rustls::{
    RootCertStore,
    crypto::ring,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

use super::*;
use crate::{config::load, testing::*};

fn app() -> Router {
    Router::new().route("/metrics", get(|| async { "powerdiag_up 1\n" }))
}

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

impl Server {
    async fn start(web: Option<WebConfig>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, app(), web.map(Arc::new), async move {
            let _ = stopped.await;
        }));
        Server { addr, stop, task }
    }

    /// Plain HTTP with at most `max_connections` open at once.
    async fn capped(max_connections: usize) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_web_tx, web) = watch::channel(None);
        let options = ServeOptions {
            max_connections,
            ..ServeOptions::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with(
            listener,
            app(),
            web,
            async move {
                let _ = stopped.await;
            },
            options,
        ));
        Server { addr, stop, task }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        // The drain takes up to 10 s (DRAIN_TIMEOUT) when a connection is still open.
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

/// A plain-HTTP client builder (reqwest needs a TLS configuration all the same: ring, no roots).
fn builder() -> reqwest::ClientBuilder {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(tls)
}

/// A client that trusts `roots` (none: trusts nothing), with the ring provider, optionally
/// presenting the test client certificate.
fn client(roots: &[&str], client_cert: bool) -> reqwest::Client {
    let mut store = RootCertStore::empty();
    for root in roots {
        for cert in CertificateDer::pem_file_iter(testdata(root)).unwrap() {
            store.add(cert.unwrap()).unwrap();
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store);
    let mut tls = if client_cert {
        let chain = CertificateDer::pem_file_iter(testdata("test-client.crt"))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_file(testdata("test-client.key")).unwrap();
        builder.with_client_auth_cert(chain, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap()
}

async fn get_status(client: &reqwest::Client, url: &str, auth: Option<&str>) -> reqwest::Response {
    let mut request = client.get(url);
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    request.send().await.unwrap()
}

fn tls_web_config(dir: &Path, extra: &str) -> WebConfig {
    let yaml = tls_yaml("test-server.crt", "test-server.key") + extra;
    load(&write_config(dir, &yaml)).unwrap()
}

#[tokio::test]
async fn https_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let extra =
        users_yaml() + "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n";
    let server = Server::start(Some(tls_web_config(dir.path(), &extra))).await;
    let client = client(&["test-ca.crt"], false);
    let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());

    let ok = get_status(&client, &url, Some(&basic("alice", "s3cret"))).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.version(), reqwest::Version::HTTP_2, "h2 by ALPN");
    assert_eq!(ok.headers()["x-content-type-options"], "nosniff");
    assert_eq!(ok.text().await.unwrap(), "powerdiag_up 1\n");
    // Again: now from the cache.
    assert_eq!(
        get_status(&client, &url, Some(&basic("alice", "s3cret")))
            .await
            .status(),
        200
    );

    for auth in [
        Some(basic("alice", "wrong")),
        Some(basic("eve", "s3cret")),
        Some("Bearer x".to_owned()),
        None,
    ] {
        let denied = get_status(&client, &url, auth.as_deref()).await;
        assert_eq!(denied.status(), 401, "{auth:?}");
        assert_eq!(
            denied.headers()["www-authenticate"],
            "Basic realm=\"powerdiag\""
        );
        assert_eq!(
            denied.headers()["x-content-type-options"],
            "nosniff",
            "headers on 401s too"
        );
    }
    // Unknown paths are behind the guard as well: 401, not 404.
    let other = format!("https://127.0.0.1:{}/nope", server.addr.port());
    assert_eq!(get_status(&client, &other, None).await.status(), 401);
    assert_eq!(
        get_status(&client, &other, Some(&basic("bob", "hunter2")))
            .await
            .status(),
        404
    );
    server.stop().await;
}

#[tokio::test]
async fn https_without_http2_speaks_http1() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(tls_web_config(
        dir.path(),
        "http_server_config:\n  http2: false\n",
    )))
    .await;
    let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
    let response = get_status(&client(&["test-ca.crt"], false), &url, None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_certificate_fails() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(tls_web_config(dir.path(), ""))).await;
    let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
    let e = client(&[], false).get(&url).send().await.unwrap_err();
    assert!(e.is_connect(), "{e:?}");
    // Plain HTTP to the TLS port does not get an answer either.
    let plain = client(&[], false);
    assert!(
        plain
            .get(format!("http://127.0.0.1:{}/metrics", server.addr.port()))
            .send()
            .await
            .is_err()
    );
    // The server survived both.
    let ok = get_status(&client(&["test-ca.crt"], false), &url, None).await;
    assert_eq!(ok.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn client_certificates_are_required_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
        testdata("test-ca.crt").display()
    );
    let server = Server::start(Some(tls_web_config(dir.path(), &extra))).await;
    let url = format!("https://127.0.0.1:{}/metrics", server.addr.port());
    assert_eq!(
        get_status(&client(&["test-ca.crt"], true), &url, None)
            .await
            .status(),
        200
    );
    assert!(
        client(&["test-ca.crt"], false)
            .get(&url)
            .send()
            .await
            .is_err()
    );
    server.stop().await;
}

#[tokio::test]
async fn plain_http_with_and_without_a_web_config() {
    let server = Server::start(None).await;
    let url = format!("http://127.0.0.1:{}/metrics", server.addr.port());
    let plain = client(&[], false);
    let response = get_status(&plain, &url, None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    server.stop().await;

    let server = Server::start(Some(parse(&users_yaml()).unwrap())).await;
    let url = format!("http://127.0.0.1:{}/metrics", server.addr.port());
    assert_eq!(
        get_status(&plain, &url, Some(&basic("alice", "s3cret")))
            .await
            .status(),
        200
    );
    assert_eq!(
        get_status(&plain, &url, Some(&basic("alice", "nope")))
            .await
            .status(),
        401
    );
    assert_eq!(get_status(&plain, &url, None).await.status(), 401);
    server.stop().await;
}

#[tokio::test]
async fn shutdown_stops_accepting_and_returns() {
    let server = Server::start(None).await;
    let addr = server.addr;
    server.stop().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed"
    );
}

#[tokio::test]
async fn serve_refuses_unusable_tls_files() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(testdata("test-server.crt"), dir.path().join("server.crt")).unwrap();
    fs::copy(testdata("test-server.key"), dir.path().join("server.key")).unwrap();
    let yaml = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    // Parsed, not loaded: serve builds the TLS configuration and reads the files itself.
    let config = WebConfig::parse(yaml, &write_config(dir.path(), yaml)).unwrap();
    // The key disappears between parse and serve.
    fs::remove_file(dir.path().join("server.key")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web = Some(Arc::new(config));
    let e = serve(listener, app(), web, std::future::pending())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = e.to_string();
    assert!(
        e.contains("tls_server_config.key_file: cannot read ") && e.contains("server.key"),
        "{e}"
    );
}

/// HTTP/2 only where ALPN chose it, as in Go: h2c (prior knowledge over plain HTTP) is refused.
#[tokio::test]
async fn http2_without_alpn_is_refused() {
    for web in [None, Some(parse(&users_yaml()).unwrap())] {
        let server = Server::start(web).await;
        let url = format!("http://127.0.0.1:{}/metrics", server.addr.port());
        let h2c = builder().http2_prior_knowledge().build().unwrap();
        let response = get_status(&h2c, &url, Some(&basic("alice", "s3cret"))).await;
        assert_eq!(response.status(), 505);
        server.stop().await;
    }
}

/// Connections beyond the cap are closed at once (no descriptor or memory kept for them), and
/// serving resumes when connections end.
#[tokio::test]
async fn connections_beyond_the_cap_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::capped(4).await;
    let addr = server.addr;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    // Let the server take the four slots.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = fifth
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut buf = [0; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), fifth.read(&mut buf))
        .await
        .expect("the fifth connection is closed at once, not kept waiting");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "closed without an answer: {read:?}"
    );
    drop(idle);
    let url = format!("http://{addr}/metrics");
    let plain = client(&[], false);
    let mut ok = false;
    for _ in 0..50 {
        if let Ok(r) = plain.get(&url).send().await {
            ok = r.status() == 200;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "served again once the idle connections closed");
    server.stop().await;
}

/// Issue 16, item 4: wrong passwords from many connections neither delay a legitimate scraper
/// (a first login, so it needs bcrypt too) nor tokio's blocking pool (host-name lookups, as the
/// MariaDB connection makes), and the work stops when the clients stop.
#[test]
fn a_flood_of_wrong_passwords_is_bounded() {
    // A small blocking pool, as a busy process has left: bcrypt must not take it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Cost 8: a few tens of milliseconds even in a debug build, so the flood saturates it.
        let alice = bcrypt::hash("s3cret", 8).unwrap();
        let web = parse(&format!("basic_auth_users:\n  alice: {alice}\n")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stats = Arc::new(AuthStats::default());
        let limits = AuthLimits {
            workers: 1,
            queue: 4,
            per_client: 2,
            wait: Duration::from_secs(5),
        };
        let options = ServeOptions {
            max_connections: 256,
            auth: limits.clone(),
            auth_stats: stats.clone(),
        };
        let (_web_tx, web_rx) = watch::channel(Some(Arc::new(web)));
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve_with(
            listener,
            app(),
            web_rx,
            async move {
                let _ = stopped.await;
            },
            options,
        ));
        let url = format!("http://127.0.0.1:{port}/metrics");

        // 64 attackers from 127.0.0.2, each with a new wrong password per request and a short
        // client timeout (they give up and reconnect), for three seconds.
        let flood_until = tokio::time::Instant::now() + Duration::from_secs(3);
        let attacker = builder()
            .local_address(IpAddr::from([127, 0, 0, 2]))
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let mut attackers = Vec::new();
        for a in 0..64 {
            let (client, url) = (attacker.clone(), url.clone());
            attackers.push(tokio::spawn(async move {
                let mut sent = 0u32;
                while tokio::time::Instant::now() < flood_until {
                    let auth = basic("alice", &format!("wrong-{a}-{sent}"));
                    let _ = client
                        .get(&url)
                        .header(header::AUTHORIZATION, auth)
                        .send()
                        .await;
                    sent += 1;
                }
                sent
            }));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;

        // During the flood: a name lookup on the blocking pool, and a first login.
        let lookup = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::lookup_host("localhost:3306"),
        )
        .await
        .map(|r| r.map(Iterator::count));
        assert!(
            matches!(lookup, Ok(Ok(n)) if n > 0),
            "a host-name lookup waited behind bcrypt: {lookup:?}"
        );
        let legit = builder().timeout(Duration::from_secs(10)).build().unwrap();
        let response = get_status(&legit, &url, Some(&basic("alice", "s3cret"))).await;
        assert_eq!(
            response.status(),
            200,
            "the right password, during the flood"
        );
        assert!(
            tokio::time::Instant::now() < flood_until,
            "the flood was still on when the scraper got in"
        );

        let mut requests = 0;
        for a in attackers {
            requests += a.await.unwrap();
        }
        // The queue bound held, most attempts were refused before bcrypt...
        assert!(stats.max_queued() <= limits.queue, "{stats:?}");
        assert!(stats.busy() > 0, "{stats:?}");
        assert!(
            stats.bcrypt_runs() < u64::from(requests),
            "{requests} requests, {stats:?}"
        );
        // ... and no work outlives the clients: the queue is empty soon after they left.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while stats.queued() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(stats.queued(), 0, "{stats:?}");
        // Cached now: the scraper's next scrape needs no bcrypt.
        let runs = stats.bcrypt_runs();
        assert_eq!(
            get_status(&legit, &url, Some(&basic("alice", "s3cret")))
                .await
                .status(),
            200
        );
        assert_eq!(stats.bcrypt_runs(), runs);

        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(15), server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
}

/// Opens a connection from `source` (an address of the loopback range) to `addr`.
async fn connect_from(source: [u8; 4], addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((source, 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

/// True when the server closed the connection without an answer.
async fn closed_at_once(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut buf = [0; 64];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) => false,
        Err(_) => panic!("neither answered nor closed within 5 s"),
    }
}

/// Issue 38, item 2: idle connections without credentials cannot keep a scraper out. One
/// address gets at most a sixteenth of the slots; the last eighth is kept for addresses that
/// completed a request, so a scraper gets through while many addresses hold the rest.
#[tokio::test]
async fn idle_connections_cannot_keep_a_scraper_out() {
    let server = Server::capped(64).await;
    let addr = server.addr;
    let url = format!("http://{addr}/metrics");
    let scraper = client(&[], false);
    assert_eq!(scraper.get(&url).send().await.unwrap().status(), 200);

    // One address: 4 connections held, the fifth closed at once.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from([127, 0, 0, 2], addr).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = connect_from([127, 0, 0, 2], addr).await;
    assert!(closed_at_once(&mut fifth).await, "the per-address limit");

    // Thirteen more addresses hold all but the reserve (4 + 13 × 4 = 56 of 64).
    for last in 10..23u8 {
        for _ in 0..4 {
            held.push(connect_from([127, 0, 0, last], addr).await);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut newcomer = connect_from([127, 0, 0, 50], addr).await;
    assert!(
        closed_at_once(&mut newcomer).await,
        "an address that never completed a request does not get the reserve"
    );
    // The scraper, which completed a request, still gets through (a new connection).
    let fresh = client(&[], false);
    assert_eq!(fresh.get(&url).send().await.unwrap().status(), 200);
    drop(held);
    server.stop().await;
}
