//! `wasm-mcp serve --http ADDR`: the MCP server over Streamable HTTP.
//!
//! rmcp's [`StreamableHttpService`] speaks the protocol (2026-07-28 requests
//! statelessly, so replicas behind a load balancer need nothing shared;
//! 2025-11-25 clients get rmcp's sessions). In front of it, in this order:
//!
//! 0. connections ([`listener`]): at most `--max-connections` open, headers
//!    within 10 s (an idle connection is closed after as long), a client
//!    that reads nothing while the server writes closed after 30 s
//!    ([`write_stall`]);
//! 1. `Host` / `Origin` checks ([`origin`]) on every route → 403;
//! 2. authentication ([`auth`]): static bearer token and/or JWT → 401 with
//!    `WWW-Authenticate: Bearer resource_metadata=...`;
//! 3. a POST's body, read whole within [`BODY_TIMEOUT`] (→ 408) and the
//!    body limit (→ 413), before it takes a slot, so a client that never
//!    sends its body holds none; a body that is not a JSON-RPC message →
//!    400 with the JSON-RPC error (-32700 / -32600) answering its id when
//!    the id can be read, as on stdio;
//! 4. a request naming a 2025-11-25 session that another principal made
//!    (another JWT subject) → 404, as for a session that does not exist
//!    ([`session_owners`]); a 2025-11-25 `initialize` past `--max-sessions`
//!    open sessions → 503 (each holds ~84 KB until 5 minutes idle: 30,000
//!    took 2.5 GB);
//! 5. the in-flight limit → 503 with `Retry-After` (a request holds its slot
//!    until its response body ends, so an unread large answer counts, until
//!    its connection is closed for it; a
//!    listening stream, a session's `GET` or `subscriptions/listen`, takes
//!    none: it stays open by design and has its own bound, and 64 of them
//!    locked every other request out);
//! 6. per-tool scopes of `tools/call` for JWT grants → 403 `insufficient_scope`.
//!
//! RFC 9728 metadata ([`metadata`]) is public (after step 1).

pub mod auth;
pub mod listener;
pub mod listening;
pub mod metadata;
pub mod origin;
mod session_owners;
pub mod write_stall;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::BodyExt;
use rmcp::model::RequestId;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::repeats::Repeats;
use crate::server::McpServer;
use crate::stdio_reader::Answer;
use auth::{AuthError, Authenticator, Grant, OAuthConfig, Verified};
use metadata::{Resource, MCP_PATH, WELL_KNOWN};
use origin::OriginPolicy;
use session_owners::SessionOwners;

/// Default largest request body (bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;
/// Default HTTP requests handled at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
/// Default 2025-11-25 sessions open at once.
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// Default idle time after which a 2025-11-25 session with no GET stream
/// open ends (rmcp's).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);
/// How long shutdown waits for 2025-11-25 sessions to close.
const SESSIONS_CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Time a client has to send a request's body once its headers are in.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// What `serve --http` was asked for.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub oauth: Option<OAuthConfig>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// `scheme://authority` clients use to reach us (default: the bound address).
    pub public_url: Option<String>,
    pub max_body_bytes: usize,
    pub max_in_flight: usize,
    pub max_connections: usize,
    pub max_sessions: usize,
    /// A session with no request and no GET stream open this long ends.
    pub session_idle: Duration,
    pub allow_unauthenticated_remote: bool,
}

/// Everything the guards need, fixed at start-up.
struct Gate {
    origin: OriginPolicy,
    auth: Authenticator,
    oauth: Option<OAuthConfig>,
    resource: Resource,
    in_flight: Arc<Semaphore>,
    max_body_bytes: usize,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    session_ids: SessionIds,
    owners: SessionOwners,
    listening: Arc<listening::Listening>,
    /// Long-lived streams (GET streams, `subscriptions/listen`) open at
    /// once: [`stream_slots`] of `--max-connections`.
    streams: Arc<Semaphore>,
    max_streams: usize,
    /// One turn: bodies over [`HEAVY_BODY_BYTES`] are read one at a time.
    heavy: Arc<Semaphore>,
}

/// Long-lived streams one server holds at once: three quarters of its
/// connections, the rest kept for requests. Each holds a connection for
/// as long as it is open; 256 listen streams took every connection of a
/// default server, and every new client was then closed as accepted (a
/// helper's find).
pub fn stream_slots(max_connections: usize) -> usize {
    (max_connections.max(1) * 3 / 4).max(1)
}

/// Bind, print `listening on http://ADDR/mcp` on stderr, serve until
/// SIGINT/SIGTERM.
pub async fn serve(server: McpServer, opts: HttpOptions) -> Result<()> {
    let auth = Authenticator::new(opts.token.clone(), opts.oauth.as_ref())?;
    refuse_open_remote(&opts, &auth)?;
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .with_context(|| format!("binding {}", opts.addr))?;
    let bound = listener.local_addr()?;
    let base = opts
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{bound}"));
    let max_streams = stream_slots(opts.max_connections);
    let gate = Arc::new(Gate {
        origin: OriginPolicy::new(bound, &opts.allowed_hosts, &opts.allowed_origins),
        auth,
        oauth: opts.oauth.clone(),
        resource: Resource::new(&base, opts.oauth.is_some()),
        in_flight: Arc::new(Semaphore::new(opts.max_in_flight.max(1))),
        max_body_bytes: opts.max_body_bytes,
        sessions: Arc::new(session_manager(opts.session_idle)),
        max_sessions: opts.max_sessions.max(1),
        session_ids: SessionIds::default(),
        owners: SessionOwners::default(),
        listening: Arc::default(),
        streams: Arc::new(Semaphore::new(max_streams)),
        max_streams,
        heavy: Arc::new(Semaphore::new(1)),
    });
    let _keep_alive = crate::dispatch::AbortOnDrop(listening::keep_alive(
        gate.listening.clone(),
        gate.sessions.clone(),
        opts.session_idle,
    ));
    let listeners = server.listeners().clone();
    let sessions = gate.sessions.clone();
    let app = router(server, gate, browser_pages(&opts.allowed_origins)?);
    eprintln!("wasm-mcp: listening on http://{bound}{MCP_PATH}");
    tracing::info!(%bound, auth = opts.token.is_some() || opts.oauth.is_some(), "serving over HTTP");
    // Listen streams complete with their final result as shutdown begins,
    // not cut when the connections are.
    // So do 2025-11-25 sessions, and their GET streams with them: those
    // held the connections open through the whole grace period.
    let shutdown = async move {
        shutdown_signal().await;
        listeners.end_streams();
        let open: Vec<_> = sessions.sessions.read().await.values().cloned().collect();
        // All at once, and not waited for past a second: one session
        // whose worker is stuck on a client that reads nothing kept the
        // server from ever stopping (a helper's find).
        let mut closing = tokio::task::JoinSet::new();
        for session in open {
            closing.spawn(async move { session.close().await });
        }
        let all = closing.join_all();
        if tokio::time::timeout(SESSIONS_CLOSE_WAIT, all)
            .await
            .is_err()
        {
            tracing::warn!(
                "sessions still closing after {SESSIONS_CLOSE_WAIT:?}: left to the grace period"
            );
        }
    };
    listener::serve(
        listener,
        app,
        opts.max_connections,
        write_stall::WRITE_STALL_TIMEOUT,
        shutdown,
    )
    .await
    .context("HTTP server failed")
}

/// rmcp's session manager, its sessions ending after `idle` with nothing
/// to do (kept alive while a GET stream is open: `listening`).
fn session_manager(idle: Duration) -> LocalSessionManager {
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(idle);
    manager
}

/// A non-loopback bind needs authentication unless explicitly forced.
fn refuse_open_remote(opts: &HttpOptions, auth: &Authenticator) -> Result<()> {
    if opts.addr.ip().is_loopback() || auth.is_enabled() {
        return Ok(());
    }
    if opts.allow_unauthenticated_remote {
        tracing::warn!(addr = %opts.addr, "serving a non-loopback address WITHOUT authentication");
        return Ok(());
    }
    bail!(
        "refusing to serve {} (not loopback) without authentication: give --auth-token-file, \
         --auth-token-env or --oauth-config, or --allow-unauthenticated-remote",
        opts.addr
    )
}

fn router(server: McpServer, gate: Arc<Gate>, cors: Option<tower_http::cors::CorsLayer>) -> Router {
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by `origin` for every route.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_json_response(true)
        .with_max_request_body_bytes(gate.max_body_bytes);
    let mcp = StreamableHttpService::new(
        move || Ok(server.for_session()),
        gate.sessions.clone(),
        config,
    );
    let mcp_routes = Router::new()
        .route_service(MCP_PATH, mcp)
        .layer(from_fn_with_state(gate.clone(), guard_mcp));
    // Protected-resource metadata only when it has an authorization server
    // to name (`Resource::metadata_url`).
    let routes = match gate.resource.metadata_url {
        Some(_) => mcp_routes.merge(
            Router::new()
                .route(WELL_KNOWN, get(resource_metadata))
                .route(&format!("{WELL_KNOWN}{MCP_PATH}"), get(resource_metadata))
                .with_state(gate.clone()),
        ),
        None => mcp_routes,
    };
    // Inside the `Host`/`Origin` check: the layer answers preflights
    // itself, and outside it answered any OPTIONS 200 (any Host, any
    // Origin, no token) on a connection left open, which then counted as
    // a client's keep-alive: tokenless clients pushed out token holders'
    // connections (a helper's find).
    let routes = match cors {
        Some(cors) => routes.layer(cors),
        None => routes,
    };
    routes.layer(from_fn_with_state(gate, guard_origin))
}

/// CORS for the browser pages of `--allowed-origin` (none without it): a
/// preflight from one is answered (the methods MCP uses; the headers it
/// asks for, `Authorization` and `Mcp-Param-*` among them), and its
/// responses let it read `Mcp-Session-Id`, `MCP-Protocol-Version` and
/// `WWW-Authenticate`. The origin was let through, but with no CORS a page
/// could never send an MCP request (each needs a preflight, answered 405)
/// nor read a session id (a helper's find). Other origins get none of it,
/// and their requests are still refused 403 (`origin.rs`).
fn browser_pages(allowed: &[String]) -> Result<Option<tower_http::cors::CorsLayer>> {
    use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
    if allowed.is_empty() {
        return Ok(None);
    }
    for o in allowed {
        origin::check_allowed_origin(o)
            .map_err(|why| anyhow::anyhow!("--allowed-origin {o:?}: {why}"))?;
    }
    // Compared as `origin.rs` compares them (a trailing `/` and letter
    // case aside): a flag copied from an address bar let the page in and
    // gave it no CORS (a helper's find).
    let origins: Vec<String> = allowed.iter().map(|o| origin::normalized(o)).collect();
    let listed = move |o: &axum::http::HeaderValue, _: &axum::http::request::Parts| {
        o.to_str()
            .is_ok_and(|o| origins.contains(&origin::normalized(o)))
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::predicate(listed))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([
                header::HeaderName::from_static(SESSION_HEADER),
                header::HeaderName::from_static("mcp-protocol-version"),
                header::WWW_AUTHENTICATE,
            ])
            .max_age(Duration::from_secs(600)),
    ))
}

async fn resource_metadata(State(gate): State<Arc<Gate>>) -> Json<Value> {
    Json(gate.resource.document(gate.oauth.as_ref()))
}

/// Step 1, every route.
async fn guard_origin(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    if let Err(refusal) = gate.origin.check(req.uri(), req.headers()) {
        static REFUSED: Repeats = Repeats::new();
        let message = refusal.message();
        if let Some(n) = REFUSED.note() {
            tracing::warn!(refused = n, "{message}");
        }
        return (refusal.status(), CLOSE, message).into_response();
    }
    // Only a request that authenticated keeps its connection: a preflight,
    // the public metadata and every path's 404 are answered with no token
    // asked, and their kept connections counted as a client's keep-alive,
    // which tokenless clients pushed token holders' out with (helpers'
    // finds; see `router`).
    let response = next.run(req).await;
    match response.extensions().get::<Authenticated>() {
        Some(_) => response,
        None => (CLOSE, response).into_response(),
    }
}

/// Steps 2–6, the MCP endpoint.
async fn guard_mcp(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let verified = match gate.auth.verify(req.headers()) {
        Ok(v) => v,
        Err(e) => return unauthorized(&gate, &e),
    };
    let mut response = serve_verified(gate, verified, req, next).await;
    response.extensions_mut().insert(Authenticated);
    response
}

/// Marks a response to a request that authenticated: only its connection
/// is kept for the next request (`guard_origin`).
#[derive(Clone, Copy)]
struct Authenticated;

/// Steps 3–6, for a request that authenticated.
async fn serve_verified(
    gate: Arc<Gate>,
    Verified { grant, principal }: Verified,
    req: Request,
    next: Next,
) -> Response {
    if let Some(refused) = headers_refused(req.headers()) {
        return refused;
    }
    let mark = req.extensions().get::<listener::ServingMark>().cloned();
    let (req, requested, heavy) = match read_body(&gate, req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    if let Some(refused) = requested
        .as_ref()
        .and_then(|r| headers_disagree(req.headers(), r))
    {
        return refused;
    }
    // From here the request is served; while its body came, its connection
    // could still be closed for a new one.
    if let Some(mark) = mark {
        mark.start();
    }
    let method = requested.as_ref().map(|r| r.method.clone());
    let session = match session_named(req.headers()) {
        Ok(session) => session,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    if let Some(session) = &session {
        if !gate.owners.admits(session, &principal) {
            return no_such_session();
        }
    }
    let held_id = match (&session, requested) {
        (Some(session), Some(r)) => match hold_session_id(&gate, session, r.id) {
            Ok(held) => Some(held),
            Err(id) => return id_in_use(id),
        },
        _ => None,
    };
    if req.method() == Method::DELETE {
        if let Some(gone) = unknown_session(&gate, session.as_deref()).await {
            return gone;
        }
    }
    // An `initialize` naming no session makes one.
    let opens = method.as_deref() == Some("initialize") && session.is_none();
    if opens {
        if let Some(full) = sessions_full(&gate).await {
            return full;
        }
    }
    // Only a request that runs something takes an in-flight slot: not a
    // listening stream (GET, `subscriptions/listen`), and not a POST of a
    // notification or response (answered 202; a `notifications/cancelled`
    // refused 503 left the call it cancels holding the last slot).
    let runs = method.is_some() && method.as_deref() != Some("subscriptions/listen");
    let permit = if !runs {
        None
    } else {
        match gate.in_flight.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => return busy("too many requests in flight"),
        }
    };
    // A GET stream keeps its session alive while it is open.
    let listener = match (req.method(), &session) {
        (&Method::GET, Some(session)) => Some(gate.listening.open(session)),
        _ => None,
    };
    let streams = req.method() == Method::GET || method.as_deref() == Some("subscriptions/listen");
    let stream = match streams.then(|| gate.streams.clone().try_acquire_owned()) {
        Some(Err(_)) => {
            let max = gate.max_streams;
            return busy(&format!("{max} listening streams are open (GET, subscriptions/listen: three quarters of --max-connections, the rest kept for requests); close one or retry"));
        }
        Some(Ok(permit)) => Some(permit),
        None => None,
    };
    let deletes = req.method() == Method::DELETE;
    let running = Running {
        _held: Arc::new((permit, held_id)),
    };
    let mut req = req;
    req.extensions_mut().insert(running.clone());
    match check_scopes(&gate, &grant, req).await {
        Ok(req) => {
            let read_again = heavy.map(hold_turn);
            let (mut parts, body) = next.run(req).await.into_parts();
            drop(read_again);
            // A session ended is 204 (rmcp's 202 made the Python SDK 1.x,
            // which takes 200 or 204, log a warning at every close).
            if deletes && parts.status == StatusCode::ACCEPTED {
                parts.status = StatusCode::NO_CONTENT;
            }
            if deletes && parts.status.is_success() {
                gate.owners.forget(session.as_deref().unwrap_or_default());
            }
            if let Some(made) = opens.then(|| session_of(&parts.headers)).flatten() {
                let sessions = &gate.sessions;
                let max = gate.max_sessions;
                gate.owners.record(made, principal, sessions, max).await;
            }
            // The slot is freed when the response body is done or dropped
            // and the request has stopped running ([`Running`]).
            let body = holding(body, (running, listener, stream));
            Response::from_parts(parts, body)
        }
        Err(resp) => resp,
    }
}

/// `body`, with `held` kept until it is done or dropped (how a response
/// holds a request's slots, and marks its connection serving).
fn holding<T: Send + Sync + 'static>(body: Body, held: T) -> Body {
    Body::new(body.map_frame(move |frame| {
        let _held = &held;
        frame
    }))
}

/// What a request holds while it runs: its in-flight slot and its id in
/// its session. Both the response body and the request's handler hold it:
/// rmcp carries the request's `http::request::Parts`, extensions and all,
/// into the handler's context, and in a 2025-11-25 session the handler goes
/// on running in the session's worker after its client closed the POST
/// (the spec: a disconnection is not a cancellation). Held by the body
/// alone, the slot was freed at the close: 16 calls ran at once past
/// `--max-in-flight 2`, and 30,000 were queued in one session (a helper's
/// find).
#[derive(Clone)]
struct Running {
    _held: Arc<(Option<OwnedSemaphorePermit>, Option<HeldId>)>,
}

/// The 2025-11-25 session header.
const SESSION_HEADER: &str = "mcp-session-id";

/// 503, and the connection closed after it: a client retrying on the same
/// keep-alive connection (as `Retry-After` asks) held it for good, so
/// refused listen streams retried every second kept every new client out
/// (a helper's find).
fn busy(what: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        CLOSE,
        format!("Service Unavailable: {what}"),
    )
        .into_response()
}

/// 404 for a session id no session has (rmcp answered a DELETE of one 202;
/// the spec answers any request naming an unknown session 404).
async fn unknown_session(gate: &Gate, session: Option<&str>) -> Option<Response> {
    let id = session?;
    let known = gate.sessions.sessions.read().await.contains_key(id);
    (!known).then(no_such_session)
}

/// 404 for a session that does not exist, or is another principal's.
fn no_such_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: no such session").into_response()
}

/// The session a request names: none, or one `Mcp-Session-Id` of visible
/// ASCII (as the spec defines an id); anything else is 400. An id that was
/// not text read as none here and as none to rmcp, which made a session
/// for each such `initialize` past `--max-sessions`: 3,000 sessions
/// against a bound of 3 (a helper's find).
fn session_named(headers: &axum::http::HeaderMap) -> Result<Option<String>, &'static str> {
    let mut named = headers.get_all(SESSION_HEADER).iter();
    let Some(id) = named.next() else {
        return Ok(None);
    };
    let visible = !id.is_empty() && id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
    if named.next().is_some() || !visible {
        return Err("Bad Request: Mcp-Session-Id must be one header of visible ASCII");
    }
    Ok(id.to_str().ok().map(str::to_owned))
}

/// MCP's own headers other than the session's, each of which a request
/// may send once (`Mcp-Param-*` ones rmcp checks against the body).
const ONCE_HEADERS: [&str; 3] = ["mcp-protocol-version", "mcp-method", "mcp-name"];

/// A request whose headers the server does not take, answered before its
/// body is read:
/// - one of [`ONCE_HEADERS`] sent twice: 400 with -32020 (the spec's
///   header mismatch); a `Content-Type` sent twice: 400 with -32600. rmcp
///   reads the first, a proxy in front may have read the last;
/// - a `Content-Encoding` other than `identity`: 415, naming `identity` in
///   `Accept-Encoding` (the body is read as it comes: a gzip body was
///   parsed as JSON text);
/// - a `Transfer-Encoding` other than `chunked` alone: 501 (hyper
///   decodes only that, and took `gzip, chunked` as chunked).
fn headers_refused(headers: &axum::http::HeaderMap) -> Option<Response> {
    let twice = |name: &str| headers.get_all(name).iter().nth(1).is_some();
    if let Some(name) = ONCE_HEADERS.iter().find(|name| twice(name)) {
        let error = rmcp::model::ErrorData::new(
            rmcp::model::ErrorCode::HEADER_MISMATCH,
            format!("{name} must be one header"),
            None,
        );
        return Some(bad_message(&Answer::error(error, None)));
    }
    if twice(header::CONTENT_TYPE.as_str()) {
        let error =
            rmcp::model::ErrorData::invalid_request("content-type must be one header", None);
        return Some(bad_message(&Answer::error(error, None)));
    }
    let codings = |name| {
        let values = headers.get_all(name).into_iter();
        let listed = values.flat_map(|v| v.as_bytes().split(|b| *b == b','));
        listed
            .map(<[u8]>::trim_ascii)
            .filter(|c| !c.is_empty())
            .map(<[u8]>::to_ascii_lowercase)
            .collect::<Vec<_>>()
    };
    if codings(header::CONTENT_ENCODING)
        .iter()
        .any(|c| c != b"identity")
    {
        let why = "Unsupported Media Type: no Content-Encoding is taken; send the body as it is";
        let accept = [(header::ACCEPT_ENCODING, "identity")];
        return Some((StatusCode::UNSUPPORTED_MEDIA_TYPE, accept, why).into_response());
    }
    let transfer = codings(header::TRANSFER_ENCODING);
    if !(transfer.is_empty() || transfer == [b"chunked".to_vec()]) {
        let why = "Not Implemented: the only Transfer-Encoding taken is chunked";
        return Some((StatusCode::NOT_IMPLEMENTED, why).into_response());
    }
    None
}

/// The session id a response names.
fn session_of(headers: &axum::http::HeaderMap) -> Option<String> {
    let id = headers.get(SESSION_HEADER)?.to_str().ok()?;
    Some(id.to_owned())
}

/// 503 when `--max-sessions` sessions are open.
async fn sessions_full(gate: &Gate) -> Option<Response> {
    let open = gate.sessions.sessions.read().await.len();
    (open >= gate.max_sessions).then(|| {
        tracing::warn!(open, "initialize refused: --max-sessions sessions open");
        busy("too many sessions open (--max-sessions); close one or retry when one expires")
    })
}

/// A POST's body read whole (within [`BODY_TIMEOUT`] and the body limit)
/// and checked to be a JSON-RPC message, with the method it names; other
/// requests as they are.
async fn read_body(gate: &Gate, req: Request) -> Result<BodyRead, Response> {
    if req.method() != Method::POST {
        return Ok((req, None, None));
    }
    let (parts, body) = req.into_parts();
    let collected = collect_within(body, gate.max_body_bytes);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, collected).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyFailure::TooLarge)) => {
            return Err((StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response())
        }
        Ok(Err(BodyFailure::Unreadable(e))) => return Err(body_failed(&e)),
        Err(_) => {
            tracing::warn!("request body not sent within {BODY_TIMEOUT:?}");
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body was not sent in time",
            )
                .into_response());
        }
    };
    let (line, heavy) = parse_body(gate, bytes.clone()).await;
    let requested = match line {
        crate::stdio_reader::Line::Message(m) => match m {
            rmcp::model::JsonRpcMessage::Request(r) => Some(Requested {
                method: r.request.method().to_owned(),
                name: match &r.request {
                    rmcp::model::ClientRequest::CallToolRequest(call) => {
                        Some(call.params.name.to_string())
                    }
                    _ => None,
                },
                id: r.id,
            }),
            _ => None,
        },
        crate::stdio_reader::Line::Refused(answer) => return Err(bad_message(&answer)),
        // Blank, or unreadable with no id: answered with a null id here.
        _ => {
            let error = rmcp::model::ErrorData::new(
                rmcp::model::ErrorCode::PARSE_ERROR,
                "the request is not JSON this server can read",
                None,
            );
            return Err(bad_message(&Answer::error(error, None)));
        }
    };
    Ok((
        Request::from_parts(parts, Body::from(bytes)),
        requested,
        heavy,
    ))
}

/// A request with its body read, the method it names, and (for a heavy
/// body) its turn in the heavy lane, held until rmcp has read it too.
type BodyRead = (Request, Option<Requested>, Option<OwnedSemaphorePermit>);

/// Bodies longer than this are parsed in the heavy lane.
const HEAVY_BODY_BYTES: usize = 64 << 10;

/// How long a heavy body keeps its turn while rmcp reads it again (it
/// does as the request begins: far less than this). Not for the whole
/// request: a stateless call's response is made when its call ends.
const HEAVY_HOLD: Duration = Duration::from_millis(100);

/// Keeps a heavy body's `turn` until the returned sender is dropped (the
/// request answered) or [`HEAVY_HOLD`] has passed, whichever is first.
fn hold_turn(turn: OwnedSemaphorePermit) -> tokio::sync::oneshot::Sender<()> {
    let (answered, done) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(HEAVY_HOLD, done).await;
        drop(turn);
    });
    answered
}

/// `bytes` read as a message. A body over [`HEAVY_BODY_BYTES`] is read off
/// the executor, one at a time, and keeps its turn (the returned permit)
/// until rmcp has read it again: the server's one executor thread parsed
/// every body, so clients posting 2 MB bodies of 49,000 small objects
/// (each refused, after its parse) made every other client's calls wait
/// ~1 s (a helper's find); now they wait for each other.
async fn parse_body(
    gate: &Gate,
    bytes: bytes::Bytes,
) -> (crate::stdio_reader::Line, Option<OwnedSemaphorePermit>) {
    if bytes.len() <= HEAVY_BODY_BYTES {
        return (crate::stdio_reader::parse_line(&bytes), None);
    }
    let turn = gate.heavy.clone().acquire_owned().await.ok();
    let parsed = tokio::task::spawn_blocking(move || crate::stdio_reader::parse_line(&bytes));
    let line = parsed.await.unwrap_or(crate::stdio_reader::Line::Skipped);
    (line, turn)
}

/// 400 for a body that could not be read (a malformed chunk, the
/// connection gone), which hyper reported as 500.
fn body_failed(e: &axum::Error) -> Response {
    tracing::info!("request body not read: {e}");
    (
        StatusCode::BAD_REQUEST,
        "Bad Request: the body could not be read",
    )
        .into_response()
}

/// Why a body was not taken.
enum BodyFailure {
    TooLarge,
    Unreadable(axum::Error),
}

/// Most of a body over the limit read and dropped before the 413, so the
/// client, still sending it, gets the answer rather than a reset
/// connection (refused at once, the socket closed with its bytes unread).
const DRAINED_PAST_LIMIT: usize = 16 << 20;

/// The body whole, if it is at most `max` bytes; one over it is read on
/// (and dropped) up to [`DRAINED_PAST_LIMIT`] before it is refused.
async fn collect_within(mut body: Body, max: usize) -> Result<axum::body::Bytes, BodyFailure> {
    let mut kept = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyFailure::Unreadable)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen <= max {
            kept.extend_from_slice(&data);
        } else if seen > DRAINED_PAST_LIMIT {
            break;
        }
    }
    if seen > max {
        return Err(BodyFailure::TooLarge);
    }
    Ok(kept.into())
}

/// What a POST asks for.
struct Requested {
    method: String,
    /// The tool a `tools/call` names.
    name: Option<String>,
    id: RequestId,
}

/// 400 with -32020 when `Mcp-Method` or `Mcp-Name` is sent and is not what
/// the body asks for, whatever the protocol version: rmcp checks them on
/// 2026-07-28 requests only, and a 2025-11-25 session's request saying
/// `tools/list` in its headers ran a `write_file` (a proxy in front routing
/// on the headers could be steered; a helper's find).
fn headers_disagree(headers: &axum::http::HeaderMap, requested: &Requested) -> Option<Response> {
    // A value that is not text disagrees too: read as "not sent", a
    // `tools/list\xff` let a `write_file` through (a helper's find).
    let said = |name: &str| {
        let value = headers.get(name)?;
        Some(match value.to_str() {
            Ok(value) => decoded_header_value(value).unwrap_or_else(|| value.to_owned()),
            Err(_) => String::from_utf8_lossy(value.as_bytes()).into_owned(),
        })
    };
    let method = said("mcp-method").filter(|m| *m != requested.method);
    let name = said("mcp-name").filter(|n| requested.name.as_ref().is_some_and(|t| t != n));
    let (header, value) = match (method, name) {
        (Some(m), _) => ("Mcp-Method", m),
        (None, Some(n)) => ("Mcp-Name", n),
        (None, None) => return None,
    };
    let error = rmcp::model::ErrorData::new(
        rmcp::model::ErrorCode::HEADER_MISMATCH,
        format!(
            "the {header} header ({}) is not what the request's body asks for; it was not run",
            wasm_mcp_protocol::text::head_chars(&value, 64)
        ),
        None,
    );
    Some(bad_message(&Answer::error(
        error,
        Some(requested.id.clone()),
    )))
}

/// A header value sent as `=?base64?…?=` (MCP's form for values that are
/// not plain ASCII), decoded; `None` for a value in another form.
fn decoded_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    let inner = value.strip_prefix("=?base64?")?.strip_suffix("?=")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Ids of requests running in 2025-11-25 sessions, by session: JSON-RPC
/// requires an id unique among a client's requests in flight, and rmcp's
/// session answered only one of two requests sharing one (the other
/// request's stream never got its answer and held its slot).
#[derive(Default)]
struct SessionIds(std::sync::Mutex<std::collections::HashSet<(String, RequestId)>>);

/// A request id held in its session until its response body ends.
struct HeldId(Arc<Gate>, (String, RequestId));

impl Drop for HeldId {
    fn drop(&mut self) {
        self.0.session_ids.lock().remove(&self.1);
    }
}

impl SessionIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, RequestId)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Holds `id` in `session` while its request runs, or gives it back when a
/// request of that session already runs under it.
fn hold_session_id(gate: &Arc<Gate>, session: &str, id: RequestId) -> Result<HeldId, RequestId> {
    let key = (session.to_owned(), id);
    if !gate.session_ids.lock().insert(key.clone()) {
        return Err(key.1);
    }
    Ok(HeldId(gate.clone(), key))
}

/// 400 with -32600: `id` is in use in its session.
fn id_in_use(id: RequestId) -> Response {
    let error = rmcp::model::ErrorData::invalid_request(
        format!("request id {id} is already in use by a request still in flight in this session; this request was not run"),
        None,
    );
    bad_message(&Answer::error(error, Some(id)))
}

/// 400 with `answer` (a JSON-RPC error) as its body.
fn bad_message(answer: &Answer) -> Response {
    (StatusCode::BAD_REQUEST, Json(answer)).into_response()
}

fn unauthorized(gate: &Gate, e: &AuthError) -> Response {
    // Logged the first time and at each power of two: a client without a
    // token is not to write the operator's log at its own rate.
    static REFUSED: Repeats = Repeats::new();
    if let AuthError::Invalid(reason) = e {
        if let Some(n) = REFUSED.note() {
            tracing::warn!(refused = n, "refused bearer token: {reason}");
        }
    }
    // Its connection is closed by `guard_origin`, as every answer to a
    // request that did not authenticate.
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, gate.resource.challenge(e))],
        "Unauthorized",
    )
        .into_response()
}

/// Closes the connection after an answer to a request that did not
/// authenticate (`guard_origin`: a refusal of who is asking, a preflight,
/// the public metadata) and after a 503 (see [`busy`]): a client without a
/// token kept 256 keep-alive connections open by asking again every 5 s,
/// and clients with the token got no connection (a helper's find).
const CLOSE: [(header::HeaderName, &str); 1] = [(header::CONNECTION, "close")];

/// Step 5: a JWT grant calling a tool that needs a scope it lacks → 403.
/// Reads the (size-limited) body only when per-tool scopes apply.
async fn check_scopes(gate: &Gate, grant: &Grant, req: Request) -> Result<Request, Response> {
    let Some(oauth) = gate.oauth.as_ref().filter(|o| !o.tool_scopes.is_empty()) else {
        return Ok(req);
    };
    if *grant == Grant::All || req.method() != Method::POST {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, gate.max_body_bytes)
        .await
        .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response())?;
    let missing = called_tools(&bytes)
        .into_iter()
        .filter_map(|tool| oauth.tool_scopes.get(&tool))
        .find(|scope| !grant.has(scope));
    if let Some(scope) = missing {
        tracing::warn!(%scope, "tools/call refused: insufficient_scope");
        return Err((
            StatusCode::FORBIDDEN,
            [(
                header::WWW_AUTHENTICATE,
                gate.resource.insufficient_scope(scope),
            )],
            "Forbidden: insufficient_scope",
        )
            .into_response());
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Names of the tools a JSON-RPC body calls (a message or a batch).
fn called_tools(body: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let messages = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    messages
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .filter_map(|m| m["params"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("HTTP server shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn called_tools_reads_messages_and_batches() {
        let one = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#;
        assert_eq!(called_tools(one), vec!["a"]);
        let batch = br#"[{"method":"tools/list"},{"method":"tools/call","params":{"name":"b"}}]"#;
        assert_eq!(called_tools(batch), vec!["b"]);
        assert!(called_tools(b"not json").is_empty());
    }
}
