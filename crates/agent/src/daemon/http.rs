//! `app(state) -> Router`: `/metrics` (Prometheus text or OpenMetrics by `Accept`, gzip when
//! asked), `/api/v1/snapshot`, `/healthz`, `/`. Handlers only read the latest sample.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use tokio::sync::watch;
use tower_http::{compression::CompressionLayer, timeout::TimeoutLayer};

use super::{
    body::{self, Format},
    config::Config,
    metrics,
    sampler::Sample,
};

/// What the handlers read.
#[derive(Debug, Clone)]
pub struct AppState {
    pub samples: watch::Receiver<Option<Arc<Sample>>>,
    pub config: watch::Receiver<Arc<Config>>,
    pub telemetry_path: String,
    pub started: SystemTime,
    /// The last configuration load's outcome (SIGHUP).
    pub reload: watch::Receiver<metrics::ReloadStatus>,
}

/// How long a scrape that arrives before the first sample waits for it (under the 5 s
/// request timeout): the first sample takes the connection, its statements and the sample
/// window, about a second, and is bounded by `[sample] timeout`.
const FIRST_SAMPLE_WAIT: Duration = Duration::from_secs(4);

pub fn app(state: AppState) -> Router {
    let path = state.telemetry_path.clone();
    Router::new()
        .route(&path, get(metrics_handler))
        .route("/api/v1/snapshot", get(snapshot_handler))
        .route("/healthz", get(health_handler))
        .route("/", get(index_handler))
        .layer(CompressionLayer::new().gzip(true))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_secs(5),
        ))
        .with_state(state)
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn metrics_handler(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    // A scrape right after start-up waits for the first sample rather than answering with
    // `powerdiag_up` alone (which a dashboard would read as every other series missing);
    // without one in time it is a 503, a failed scrape, never a partial one.
    let mut samples = s.samples.clone();
    let sample =
        match tokio::time::timeout(FIRST_SAMPLE_WAIT, samples.wait_for(Option::is_some)).await {
            Ok(Ok(v)) => v.clone(),
            _ => None,
        };
    let Some(x) = sample else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "powerdiag: the first sample is not ready yet; scrape again after it (one interval at most)\n",
        )
            .into_response();
    };
    let reload = *s.reload.borrow();
    let format = if openmetrics {
        Format::OpenMetrics
    } else {
        Format::Text
    };
    let lines = metrics::scrape_lines(Some(x.taken_at), SystemTime::now(), openmetrics, &reload);
    let content_type = (
        header::CONTENT_TYPE,
        if openmetrics { OPENMETRICS } else { TEXT },
    );
    // Gzip here rather than in the compression layer, which would deflate the whole body on
    // every scrape: the sample's part is deflated once (daemon/body.rs). A response with a
    // Content-Encoding passes the layer untouched.
    let gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(body::accepts_gzip);
    if gzip {
        let gz = x.encoded.deflated(format).gzip_with(lines.as_bytes());
        return (
            [
                content_type,
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            gz,
        )
            .into_response();
    }
    let encoded = x.encoded.body(format);
    let mut text = String::with_capacity(encoded.len() + lines.len());
    text.push_str(encoded);
    text.push_str(&lines);
    ([content_type], text).into_response()
}

async fn snapshot_handler(State(s): State<AppState>) -> Response {
    let sample = s.samples.borrow().clone();
    match sample {
        Some(x) => match serde_json::to_string_pretty(&x.snapshot) {
            Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        },
        None => (StatusCode::SERVICE_UNAVAILABLE, "no sample yet\n").into_response(),
    }
}

/// Time allowed beyond the sampler's budget before a first sample counts as late.
const FIRST_SAMPLE_MARGIN: Duration = Duration::from_secs(5);

async fn health_handler(State(s): State<AppState>) -> Response {
    // Stale after three intervals without a finished sample. The validator bounds the interval;
    // saturating all the same, so no configuration can make this panic.
    let stale_after = s
        .config
        .borrow()
        .sample
        .interval
        .checked_mul(3)
        .unwrap_or(Duration::MAX);
    // The first sample ends (or is abandoned) within the sampler's budget for one sample: "starting"
    // past that, with a margin for the process to come up, is a first sample that is late.
    let first_due = {
        let c = s.config.borrow();
        c.sample
            .interval
            .saturating_sub(Duration::from_millis(100))
            .max(c.sample.timeout)
            .saturating_add(c.sample.window)
            .saturating_add(FIRST_SAMPLE_MARGIN)
            .min(stale_after)
    };
    let sample = s.samples.borrow().clone();
    let now = SystemTime::now();
    match sample {
        Some(x) => {
            let age = now.duration_since(x.taken_at).unwrap_or_default();
            if age > stale_after {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("stale: the last sample is {:.0} s old\n", age.as_secs_f64()),
                )
                    .into_response()
            } else {
                (
                    StatusCode::OK,
                    format!("ok: sample {} is {:.1} s old\n", x.seq, age.as_secs_f64()),
                )
                    .into_response()
            }
        }
        None if now.duration_since(s.started).unwrap_or_default() > first_due => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no sample has finished yet: the first was due within {:.0} s of the start\n",
                first_due.as_secs_f64()
            ),
        )
            .into_response(),
        None => (StatusCode::OK, "starting: first sample in progress\n").into_response(),
    }
}

async fn index_handler(State(s): State<AppState>) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><title>powerdiag agent</title></head><body><h1>powerdiag agent {}</h1><ul>\
         <li><a href=\"{p}\">{p}</a>: metrics (Prometheus text or OpenMetrics)</li>\
         <li><a href=\"/api/v1/snapshot\">/api/v1/snapshot</a>: the last snapshot as JSON (powerdiag doctor --from reads it)</li>\
         <li><a href=\"/healthz\">/healthz</a>: 200 while samples are fresh</li></ul></body></html>",
        env!("CARGO_PKG_VERSION"),
        p = s.telemetry_path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval no validator would pass (a configuration built in code, or a future
    /// validator bug) still answers instead of panicking on `interval * 3`.
    #[tokio::test]
    async fn healthz_does_not_overflow_on_a_huge_interval() {
        let mut config = Config::default();
        config.sample.interval = Duration::MAX;
        let (_samples_tx, samples) = watch::channel(None);
        let (_config_tx, config) = watch::channel(Arc::new(config));
        let (_reload_tx, reload) =
            watch::channel(metrics::ReloadStatus::loaded(SystemTime::UNIX_EPOCH));
        let state = AppState {
            samples,
            config,
            telemetry_path: "/metrics".into(),
            started: SystemTime::UNIX_EPOCH,
            reload,
        };
        let response = health_handler(State(state)).await;
        assert_eq!(response.status(), StatusCode::OK);
    }

    /// Issue 38: "starting" lasts as long as a first sample may take (the sampler's budget
    /// and the OS window), not three intervals.
    #[tokio::test]
    async fn starting_is_bounded_by_the_first_sample_budget() {
        let mut config = Config::default();
        config.sample.interval = Duration::from_secs(60);
        config.sample.timeout = Duration::from_secs(5);
        config.sample.window = Duration::from_secs(1);
        let state = |started: SystemTime| {
            let (_s, samples) = watch::channel(None);
            let (_c, config) = watch::channel(Arc::new(config.clone()));
            let (_r, reload) =
                watch::channel(metrics::ReloadStatus::loaded(SystemTime::UNIX_EPOCH));
            std::mem::forget((_s, _c, _r));
            AppState {
                samples,
                config,
                telemetry_path: "/metrics".into(),
                started,
                reload,
            }
        };
        let ago = |s: u64| SystemTime::now() - Duration::from_secs(s);
        // Budget 59.9 s + window 1 s + margin 5 s: starting at 60 s, late at 70 s (stale was 180).
        let r = health_handler(State(state(ago(60)))).await;
        assert_eq!(r.status(), StatusCode::OK);
        let r = health_handler(State(state(ago(70)))).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
