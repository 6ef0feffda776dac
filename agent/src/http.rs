//! The HTTP API: `/metrics`, `/healthz`, `/readyz`, `/v1/topology`, `/v1/results` and
//! `POST /v1/calibrate`. Every handler reads the cache; none waits on NVML or a benchmark.
//! Requests are bounded in time (`request_timeout`) and body size ([`BODY_LIMIT`]);
//! connections are bounded by [`crate::listener`]. Large bodies are rendered once per change
//! and shared by every client ([`Serialized`]), never copied per connection (issue 13).

use crate::cache::{Cache, Discovery};
use crate::metrics;
use crate::negotiation;
use crate::scheduler::Trigger;
use crate::state::Calibration;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use microbench::discovery::Topology;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower_http::timeout::TimeoutLayer;

/// Largest request body accepted; no endpoint needs one.
pub const BODY_LIMIT: usize = 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// What the scheduler and sampler last learnt.
    pub cache: Arc<Cache>,
    /// Run-now requests for the scheduler.
    pub trigger: Arc<Trigger>,
    /// Bearer token of `POST /v1/calibrate`; `None` disables it.
    pub token: Option<Arc<str>>,
    /// Longest a request may take.
    pub request_timeout: Duration,
    /// The last `/metrics` bodies, shared by scrapes until the cache changes.
    pub rendered: Arc<metrics::Rendered>,
    /// The last `/v1/results` and `/v1/topology` bodies, shared the same way.
    pub serialized: Arc<Serialized>,
}

/// The JSON bodies of `/v1/results` and `/v1/topology`, each rendered once per calibration or
/// discovery and shared: a client that does not read holds a reference, not its own copy
/// (1,500 such clients took the agent to 1.66 GB; issue 13).
#[derive(Default)]
pub struct Serialized {
    results: SharedJson<Calibration>,
    topology: SharedJson<Topology>,
}

/// One value's JSON, kept with the `Arc` it was rendered from. Keeping the `Arc` makes the
/// pointer comparison sound: the value cannot be freed and its address reused, and the cache
/// replaces a value rather than changing it in place.
struct SharedJson<T>(Mutex<Option<(Arc<T>, Bytes)>>);

impl<T> Default for SharedJson<T> {
    fn default() -> Self {
        SharedJson(Mutex::new(None))
    }
}

impl<T: Serialize> SharedJson<T> {
    /// The JSON of `current`, rendered only when it is not the value rendered last.
    fn get(&self, current: &Arc<T>) -> serde_json::Result<Bytes> {
        // A panic while rendering leaves the last whole pair behind: keep serving.
        let mut last = match self.0.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((of, body)) = &*last {
            if Arc::ptr_eq(of, current) {
                return Ok(body.clone());
            }
        }
        let body = Bytes::from(serde_json::to_vec(&**current)?);
        *last = Some((current.clone(), body.clone()));
        Ok(body)
    }
}

/// A shared JSON body as a response.
fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The API's routes with their limits.
pub fn router(state: AppState) -> Router {
    let timeout = state.request_timeout;
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/v1/topology", get(topology))
        .route("/v1/results", get(results))
        .route("/v1/calibrate", post(calibrate))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        .with_state(state)
}

/// Errors as statuses with a JSON body. Client errors are not logged; internal ones are
/// logged and not leaked.
#[derive(Debug)]
pub enum ApiError {
    /// No token configured, or a missing or wrong one.
    Unauthorized(&'static str),
    /// A calibration is already running or requested.
    Conflict,
    /// Discovery has not found GPUs.
    Unavailable(String),
    /// A body could not be rendered; the message is logged, not sent.
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::Unauthorized(why) => (StatusCode::UNAUTHORIZED, why.to_string()),
            ApiError::Conflict => (
                StatusCode::CONFLICT,
                "a calibration is already running or requested".to_string(),
            ),
            ApiError::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
            ApiError::Internal(why) => {
                tracing::error!("{why}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error; the agent's log says more".to_string(),
                )
            }
        };
        let mut response = (status, Json(serde_json::json!({ "error": message }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// `/metrics` in the format and coding the request prefers ([`crate::negotiation`]).
async fn metrics_text(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let format = negotiation::format(value(header::ACCEPT));
    let encoding = negotiation::encoding(value(header::ACCEPT_ENCODING));
    let body = state
        .rendered
        .get(&state.cache, format, encoding)
        .map_err(ApiError::Internal)?;
    let mut response = (
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "Accept, Accept-Encoding"),
        ],
        body,
    )
        .into_response();
    if encoding == metrics::Encoding::Gzip {
        response.headers_mut().insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    Ok(response)
}

async fn ready(State(state): State<AppState>) -> (StatusCode, String) {
    match state.cache.snapshot().discovery {
        Discovery::Pending => (StatusCode::SERVICE_UNAVAILABLE, "discovering\n".into()),
        Discovery::Found(_) => (StatusCode::OK, "ready\n".into()),
        // Ready all the same: the agent serves host metrics and meshfit_up 0, and a restart
        // would not bring a driver.
        Discovery::Down { message, .. } => {
            (StatusCode::OK, format!("ready without GPUs: {message}\n"))
        }
    }
}

async fn topology(State(state): State<AppState>) -> Result<Response, ApiError> {
    match state.cache.snapshot().discovery {
        Discovery::Found(t) => state
            .serialized
            .topology
            .get(&t)
            .map(json_response)
            .map_err(|e| ApiError::Internal(format!("rendering /v1/topology: {e}"))),
        Discovery::Pending => Err(ApiError::Unavailable("discovery has not finished".into())),
        Discovery::Down { message, .. } => Err(ApiError::Unavailable(message)),
    }
}

async fn results(State(state): State<AppState>) -> Result<Response, ApiError> {
    state
        .serialized
        .results
        .get(&state.cache.snapshot().calibration)
        .map(json_response)
        .map_err(|e| ApiError::Internal(format!("rendering /v1/results: {e}")))
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is case-insensitive
/// (RFC 9110 §11.1), so `bearer tok` is as good as `Bearer tok`.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

/// The body is read (and ignored) so that [`BODY_LIMIT`] applies to it.
async fn calibrate(
    State(state): State<AppState>,
    headers: HeaderMap,
    _body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let Some(token) = &state.token else {
        return Err(ApiError::Unauthorized(
            "POST /v1/calibrate is disabled: no calibrate_token is configured",
        ));
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match presented {
        None => return Err(ApiError::Unauthorized("missing bearer token")),
        Some(p) if !same(p.as_bytes(), token.as_bytes()) => {
            return Err(ApiError::Unauthorized("wrong bearer token"))
        }
        Some(_) => {}
    }
    if state.cache.snapshot().running || !state.trigger.request() {
        return Err(ApiError::Conflict);
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "status": "requested; it runs once the GPUs are idle" })),
    )
        .into_response())
}

/// Compares in time independent of where the first difference is, so the token cannot be
/// guessed byte by byte from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    fn state(token: Option<&str>) -> AppState {
        AppState {
            cache: Arc::new(Cache::new(
                "n1".into(),
                record::Backend::Sim,
                Calibration::default(),
            )),
            trigger: Arc::new(Trigger::default()),
            token: token.map(Arc::from),
            request_timeout: Duration::from_secs(5),
            rendered: Arc::default(),
            serialized: Arc::default(),
        }
    }

    async fn call(state: AppState, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
        let response = router(state).oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    fn post(token: Option<&str>) -> Request<Body> {
        let mut req = Request::post("/v1/calibrate");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        req.body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn metrics_have_the_text_format_content_type() {
        let (status, headers, body) = call(
            state(None),
            Request::get("/metrics").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(headers[header::VARY], "Accept, Accept-Encoding");
        assert!(!headers.contains_key(header::CONTENT_ENCODING));
        assert!(
            body.contains("meshfit_up{hostname=\"n1\",backend=\"sim\"} 0"),
            "{body}"
        );
        assert!(
            body.contains(
                "meshfit_down_reason_info{reason=\"discovering\",hostname=\"n1\",backend=\"sim\"} 1"
            ),
            "{body}"
        );
    }

    #[tokio::test]
    async fn openmetrics_and_gzip_when_asked_for() {
        let request = Request::get("/metrics")
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3",
            )
            .header("accept-encoding", "gzip")
            .body(Body::empty())
            .unwrap();
        let response = router(state(None)).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
        assert_eq!(headers[header::VARY], "Accept, Accept-Encoding");
        let gzipped = response.into_body().collect().await.unwrap().to_bytes();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gzipped[..]), &mut text)
            .unwrap();
        assert!(text.contains("# TYPE meshfit_down_reason info\n"), "{text}");
        assert!(text.ends_with("\n# EOF\n"), "{text}");
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer t0k"), Some("t0k"));
        assert_eq!(bearer_token("bearer t0k"), Some("t0k"));
        assert_eq!(bearer_token("BEARER  t0k"), Some("t0k"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[tokio::test]
    async fn calibrate_needs_a_configured_and_presented_token() {
        let (status, headers, body) = call(state(None), post(Some("x"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        assert!(body.contains("no calibrate_token"), "{body}");
        assert_eq!(
            call(state(Some("t0k")), post(None)).await.0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            call(state(Some("t0k")), post(Some("t0K"))).await.0,
            StatusCode::UNAUTHORIZED
        );
        let s = state(Some("t0k"));
        assert_eq!(
            call(s.clone(), post(Some("t0k"))).await.0,
            StatusCode::ACCEPTED
        );
        // Asked for and not yet started: a second request is a conflict.
        assert_eq!(
            call(s.clone(), post(Some("t0k"))).await.0,
            StatusCode::CONFLICT
        );
        let running = state(Some("t0k"));
        running.cache.update(|c| c.running = true);
        assert_eq!(
            call(running, post(Some("t0k"))).await.0,
            StatusCode::CONFLICT
        );
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused() {
        let s = state(Some("t0k"));
        let req = Request::post("/v1/calibrate")
            .header("authorization", "Bearer t0k")
            .header("content-length", BODY_LIMIT + 1)
            .body(Body::from(vec![b'x'; BODY_LIMIT + 1]))
            .unwrap();
        assert_eq!(call(s, req).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn a_body_is_rendered_once_per_value_and_shared() {
        let shared = SharedJson::<Calibration>::default();
        let first = Arc::new(Calibration::default());
        let body = shared.get(&first).unwrap();
        // The same allocation, not an equal copy: each client holds a reference (issue 13).
        assert_eq!(body.as_ptr(), shared.get(&first).unwrap().as_ptr());
        let second = Arc::new(Calibration {
            node: "n2".into(),
            ..Calibration::default()
        });
        let text = shared.get(&second).unwrap();
        assert!(String::from_utf8_lossy(&text).contains("\"node\":\"n2\""));
    }

    #[tokio::test]
    async fn topology_waits_for_discovery_and_results_are_json() {
        let (status, _, body) = call(
            state(None),
            Request::get("/v1/topology").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("discovery has not finished"));
        let (status, _, body) = call(
            state(None),
            Request::get("/readyz").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "discovering\n")
        );
        let (status, _, body) = call(
            state(None),
            Request::get("/v1/results").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["records"], serde_json::json!([]));
    }
}
