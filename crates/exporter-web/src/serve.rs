//! Serving an axum app with a web configuration: axum-server's accept loop (its rustls acceptor,
//! certificate reload, graceful shutdown), a cap on open connections, and the guard in front of
//! every route (HTTP/2 only by ALPN, basic auth, the configured headers).

use std::{
    collections::HashMap,
    future::{Future, Ready},
    io,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{Duration, Instant, SystemTime},
};

use axum::{
    Router,
    extract::{ConnectInfo, Request, State},
    http::{HeaderValue, StatusCode, Version, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use axum_server::{
    Handle,
    accept::Accept,
    tls::TlsInfo,
    tls_rustls::{RustlsAcceptor, RustlsConfig},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::watch,
};

use crate::{
    auth::{AuthLimits, AuthStats, BcryptPool, Check, lock},
    config::WebConfig,
};

/// The `WWW-Authenticate` challenge of a 401 answer.
const CHALLENGE: &str = "Basic realm=\"powerdiag\"";
/// A client must finish the TLS handshake within this time, else its connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client must send a request's headers within this time (slow-loris guard).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// After the shutdown signal, open requests get this long to finish before [`serve`] returns.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections open at once, whatever the file descriptor limit allows.
pub const MAX_CONNECTIONS: usize = 512;
/// The certificate's expiry is checked this often (and on every reload).
const EXPIRY_CHECK_EVERY: Duration = Duration::from_secs(12 * 3600);

/// How [`serve_with`] bounds its work.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Connections open at once; one more is closed at once (and logged, at most once a
    /// minute). Default: [`default_max_connections`].
    pub max_connections: usize,
    /// The bcrypt pool's bounds.
    pub auth: AuthLimits,
    /// The bcrypt pool's counters (shared so a caller can read them).
    pub auth_stats: Arc<AuthStats>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_connections: default_max_connections(),
            auth: AuthLimits::default(),
            auth_stats: Arc::default(),
        }
    }
}

/// [`MAX_CONNECTIONS`], or half the soft file-descriptor limit (`ulimit -n`, systemd's
/// `LimitNOFILE=`) if that is lower, so connections never take the descriptors the rest of the
/// process needs (database connection, files); at least 16.
pub fn default_max_connections() -> usize {
    #[cfg(unix)]
    let by_limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(MAX_CONNECTIONS, |soft| {
            usize::try_from(soft / 2).unwrap_or(MAX_CONNECTIONS)
        });
    #[cfg(not(unix))]
    let by_limit = MAX_CONNECTIONS;
    by_limit.clamp(16, MAX_CONNECTIONS)
}

/// Serves `app` on `listener` until `shutdown` completes: plain HTTP/1.1 without a web config or
/// without `tls_server_config`, else TLS (HTTP/2 by ALPN unless `http2: false`). With
/// `basic_auth_users`, every request, unknown paths included, needs valid credentials, else 401
/// with `WWW-Authenticate: Basic realm="powerdiag"`; the configured headers go on every response.
///
/// After `shutdown`, no new connection is accepted and open requests get 10 s to finish. An
/// error is returned only before serving starts (the TLS files cannot be used); failed
/// handshakes and accept errors are logged and serving goes on.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    web: Option<Arc<WebConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (_keep, updates) = watch::channel(web);
    serve_with(listener, app, updates, shutdown, ServeOptions::default()).await
}

/// [`serve`] with a web configuration that can change while serving (SIGHUP): each request takes
/// the users and headers current at that moment, each new TLS connection the certificate and TLS
/// settings; open connections keep what they started with. Whether the listener speaks TLS is
/// fixed at start (as in exporter-toolkit): send only configurations [`crate::reload`] accepted.
pub async fn serve_reloadable(
    listener: tokio::net::TcpListener,
    app: Router,
    web: watch::Receiver<Option<Arc<WebConfig>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with(listener, app, web, shutdown, ServeOptions::default()).await
}

/// [`serve_reloadable`] with explicit bounds.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: Router,
    web: watch::Receiver<Option<Arc<WebConfig>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> io::Result<()> {
    let current = web.borrow().clone();
    let tls = match &current {
        Some(w) => w.server_config().map_err(|e| e.into_io())?,
        None => None,
    };
    let pool = Arc::new(BcryptPool::new(
        options.auth.clone(),
        options.auth_stats.clone(),
    )?);
    let slots = Arc::new(Slots::new(options.max_connections));
    let app = app
        .layer(middleware::from_fn_with_state(
            GuardState {
                web: web.clone(),
                pool,
                slots: slots.clone(),
            },
            guard,
        ))
        .into_make_service_with_connect_info::<SocketAddr>();

    let handle: Handle<SocketAddr> = Handle::new();
    let stop = tokio::spawn({
        let handle = handle.clone();
        async move {
            shutdown.await;
            handle.graceful_shutdown(Some(DRAIN_TIMEOUT));
        }
    });
    let cap = CapAcceptor { slots };
    let on_error = |peer: Option<&SocketAddr>, e: &io::Error| {
        tracing::debug!("connection from {peer:?}: {e}");
    };
    let served = match tls {
        None => {
            let mut server = axum_server::Server::from_listener(listener)
                .acceptor(cap)
                .handle(handle)
                .accept_error_handler(on_error)
                .first_request_timeout(HEADER_READ_TIMEOUT);
            server
                .http_builder()
                .http1()
                .header_read_timeout(HEADER_READ_TIMEOUT);
            server.serve(app).await
        }
        Some(config) => {
            let rustls = RustlsConfig::from_config(config);
            let watcher = tokio::spawn(watch_tls(web, rustls.clone()));
            let acceptor = RustlsAcceptor::new(rustls)
                .handshake_timeout(TLS_HANDSHAKE_TIMEOUT)
                .acceptor(cap);
            let mut server = axum_server::Server::from_listener(listener)
                .acceptor(acceptor)
                .handle(handle)
                .accept_error_handler(on_error)
                .first_request_timeout(HEADER_READ_TIMEOUT);
            server
                .http_builder()
                .http1()
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let served = server.serve(app).await;
            watcher.abort();
            served
        }
    };
    stop.abort();
    served
}

/// Follows reloads of a TLS server: new connections get the new certificate and settings; warns
/// on every reload and twice a day when the certificate has expired or expires soon.
async fn watch_tls(mut web: watch::Receiver<Option<Arc<WebConfig>>>, rustls: RustlsConfig) {
    let mut check = tokio::time::interval(EXPIRY_CHECK_EVERY);
    loop {
        tokio::select! {
            changed = web.changed() => {
                if changed.is_err() {
                    return;
                }
                let new = web.borrow_and_update().clone();
                match new.as_deref().map(WebConfig::server_config) {
                    Some(Ok(Some(config))) => rustls.reload_from_config(config),
                    Some(Err(e)) => tracing::error!(
                        error = %e,
                        "new web configuration unusable; keeping the previous TLS settings"
                    ),
                    // crate::reload refuses these: a TLS listener never drops TLS.
                    Some(Ok(None)) | None => tracing::error!(
                        "a web configuration without TLS was sent to a TLS listener; keeping the previous TLS settings"
                    ),
                }
                warn_expiry(new.as_deref());
            }
            _ = check.tick() => warn_expiry(web.borrow().as_deref()),
        }
    }
}

fn warn_expiry(web: Option<&WebConfig>) {
    if let Some(warning) = web.and_then(|w| w.certificate_warning(SystemTime::now())) {
        tracing::warn!("{warning}");
    }
}

#[derive(Clone)]
struct GuardState {
    web: watch::Receiver<Option<Arc<WebConfig>>>,
    pool: Arc<BcryptPool>,
    /// Told which addresses complete requests (they keep a place in the reserve).
    slots: Arc<Slots>,
}

/// The middleware in front of every route: HTTP/2 only where ALPN chose it, basic auth, then the
/// configured headers.
async fn guard(State(state): State<GuardState>, request: Request, next: Next) -> Response {
    let web = state.web.borrow().clone();
    // Go serves HTTP/2 only over TLS with ALPN "h2"; hyper would also take a bare HTTP/2
    // preface (h2c, or over TLS without ALPN), which `http2: false` must refuse.
    let alpn_h2 = request
        .extensions()
        .get::<Arc<TlsInfo>>()
        .is_some_and(|t| t.alpn_protocol.as_deref() == Some(b"h2".as_slice()));
    let h2_refused = request.version() == Version::HTTP_2 && !alpn_h2;
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let Some(web) = web else {
        return if h2_refused {
            http2_refused()
        } else {
            state.slots.known(client);
            next.run(request).await
        };
    };
    let mut response = if h2_refused {
        http2_refused()
    } else {
        // A header that is not visible ASCII cannot be valid Basic credentials: treated as absent.
        let check = web.check_cached(
            request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok()),
        );
        let allowed = match check {
            Check::Allow => Ok(true),
            Check::Deny => Ok(false),
            Check::Bcrypt(pending) => state.pool.check(web.clone(), pending, client).await,
        };
        match allowed {
            Ok(true) => {
                state.slots.known(client);
                next.run(request).await
            }
            Ok(false) => unauthorized(),
            Err(_busy) => busy(),
        }
    };
    for (name, value) in &web.response_headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

fn http2_refused() -> Response {
    (
        StatusCode::HTTP_VERSION_NOT_SUPPORTED,
        "HTTP/2 is served only over TLS when negotiated (ALPN h2)\n",
    )
        .into_response()
}

fn unauthorized() -> Response {
    let challenge = HeaderValue::from_static(CHALLENGE);
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "Unauthorized\n",
    )
        .into_response()
}

/// Too many password checks pending (for this client or in all): nothing was checked.
fn busy() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
        "Too many password checks pending; retry later\n",
    )
        .into_response()
}

/// The connection slots: [`ServeOptions::max_connections`] in all, at most
/// `per_address` from one source address, and the last `reserve` only for addresses that
/// completed a request recently ([`Slots::known`]), so that a client opening idle connections
/// (without credentials, from one address or a few) can neither fill the server nor keep a
/// scraper out. A connection is refused, closed at once, when it would break one of these.
#[derive(Debug)]
pub(crate) struct Slots {
    max: usize,
    per_address: usize,
    reserve: usize,
    state: Mutex<SlotState>,
    last_warning: Mutex<Option<Instant>>,
}

#[derive(Debug, Default)]
struct SlotState {
    open: usize,
    by_address: HashMap<IpAddr, usize>,
    /// Addresses that completed a request, with when they last did.
    known: HashMap<IpAddr, Instant>,
}

/// An address that completed a request keeps its place in the reserve this long.
const KNOWN_FOR: Duration = Duration::from_secs(3600);
/// Addresses remembered at most (the oldest is forgotten first).
const MAX_KNOWN: usize = 1024;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Full,
    Reserved,
    Address,
}

impl Slots {
    pub(crate) fn new(max: usize) -> Slots {
        let max = max.max(1);
        Slots {
            max,
            // Prometheus keeps one connection per target; a few scrapers from one host fit.
            per_address: (max / 16).max(4).min(max),
            reserve: max / 8,
            state: Mutex::new(SlotState::default()),
            last_warning: Mutex::new(None),
        }
    }

    fn take(self: &Arc<Self>, address: IpAddr) -> Result<Slot, Refused> {
        let mut s = lock(&self.state);
        let from_here = s.by_address.get(&address).copied().unwrap_or(0);
        if from_here >= self.per_address {
            return Err(Refused::Address);
        }
        if s.open >= self.max {
            return Err(Refused::Full);
        }
        let known = s
            .known
            .get(&address)
            .is_some_and(|t| t.elapsed() < KNOWN_FOR);
        if s.open >= self.max - self.reserve && !known {
            return Err(Refused::Reserved);
        }
        s.open += 1;
        *s.by_address.entry(address).or_default() += 1;
        Ok(Slot {
            slots: self.clone(),
            address,
        })
    }

    /// `address` completed a request: it may use the reserve for the next hour.
    pub(crate) fn known(&self, address: IpAddr) {
        let mut s = lock(&self.state);
        if s.known.len() >= MAX_KNOWN && !s.known.contains_key(&address) {
            let oldest = s.known.iter().min_by_key(|(_, t)| **t).map(|(a, _)| *a);
            if let Some(a) = oldest {
                s.known.remove(&a);
            }
        }
        s.known.insert(address, Instant::now());
    }

    fn warn(&self, why: Refused, address: IpAddr) {
        let mut last = lock(&self.last_warning);
        if last.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
            *last = Some(Instant::now());
            let what = match why {
                Refused::Full => "connection limit reached: closing new connections until some end",
                Refused::Reserved => {
                    "connection limit reached but for the reserve of clients that completed a request: closing new connections from others"
                }
                Refused::Address => {
                    "too many connections from one address: closing its new connections until some end"
                }
            };
            tracing::warn!(max = self.max, per_address = self.per_address, %address, "{what}");
        }
    }
}

/// One taken slot, given back when the connection closes.
#[derive(Debug)]
struct Slot {
    slots: Arc<Slots>,
    address: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = lock(&self.slots.state);
        s.open = s.open.saturating_sub(1);
        if let Some(n) = s.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                s.by_address.remove(&self.address);
            }
        }
    }
}

/// Takes a slot for each connection, before its TLS handshake; without one the connection is
/// closed at once.
#[derive(Clone)]
struct CapAcceptor {
    slots: Arc<Slots>,
}

impl<S> Accept<TcpStream, S> for CapAcceptor {
    type Stream = Capped;
    type Service = S;
    type Future = Ready<io::Result<(Capped, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let address = stream
            .peer_addr()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
        match self.slots.take(address) {
            Ok(slot) => {
                let _ = stream.set_nodelay(true);
                std::future::ready(Ok((
                    Capped {
                        stream,
                        _slot: slot,
                    },
                    service,
                )))
            }
            Err(why) => {
                self.slots.warn(why, address);
                std::future::ready(Err(io::Error::other("connection limit reached")))
            }
        }
    }
}

/// A connection holding its slot until it closes.
struct Capped {
    stream: TcpStream,
    _slot: Slot,
}

impl AsyncRead for Capped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Capped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
