//! The harness's Streamable HTTP client against a hostile endpoint: a raw
//! HTTP/1.1 server on 127.0.0.1 that answers the handshake and discovery
//! properly, then misbehaves at one method (never answers, an endless
//! body, garbage, HTML, 401, a redirect to another origin, an SSE stream
//! that never ends or one endless event). Each must become a clear error for
//! that call (or that connect) within its timeout, never a hang, holding no
//! more than the frame limit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use wasm_mcp_harness::mcp::adapter::ArtifactStore;
use wasm_mcp_harness::mcp::connection::{ConnectError, Connection, Connector};
use wasm_mcp_harness::mcp::http_transport::HttpConnector;
use wasm_mcp_harness::run::policy::{Endpoint, Placeholders, Policy};
use wasm_mcp_harness::run::session::ToolSession;
use wasm_mcp_harness::run::trace::Trace;
use wasm_mcp_harness::tools::faults::CallState;
use wasm_mcp_harness::tools::naming::local_name;
use wasm_mcp_harness::tools::pipeline::{FailureKind, NonInteractiveApprover, ToolPipeline};

/// What the endpoint does at the chosen method.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// Reads the request, never answers.
    Silence,
    /// `200 application/json`, a chunked body that never ends.
    EndlessJson,
    /// `200 application/json` that is not JSON.
    Garbage,
    /// `200 text/html`.
    Html,
    /// `401` with a challenge.
    Unauthorized,
    /// `307` to another origin (the decoy listener).
    Redirect,
    /// `200 text/event-stream`: keep-alive comments forever, no answer.
    EndlessSse,
    /// `200 text/event-stream`: one event whose data never ends.
    HugeSseEvent,
    /// The handshake issues a session; then `404` (the server restarted).
    ForgetSession,
}

struct Hostile {
    url: String,
    /// Connections the decoy (the redirect target) accepted.
    decoy_hits: Arc<AtomicUsize>,
    /// `initialize` requests answered.
    initializes: Arc<AtomicUsize>,
}

/// Serve MCP properly except at `method`, where `how` happens.
async fn hostile(method: &'static str, how: Misbehaviour) -> Hostile {
    let decoy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let decoy_port = decoy.local_addr().unwrap().port();
    let decoy_hits = Arc::new(AtomicUsize::new(0));
    let hits = decoy_hits.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = decoy.accept().await {
            hits.fetch_add(1, Ordering::SeqCst);
            drop(s);
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let initializes = Arc::new(AtomicUsize::new(0));
    let count = initializes.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(connection(s, method, how, decoy_port, count.clone()));
        }
    });
    Hostile {
        url,
        decoy_hits,
        initializes,
    }
}

async fn connection(
    s: TcpStream,
    method: &str,
    how: Misbehaviour,
    decoy_port: u16,
    initializes: Arc<AtomicUsize>,
) {
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    while let Some((verb, body)) = read_request(&mut r).await {
        if verb != "POST" {
            let _ = w
                .write_all(&response("405 Method Not Allowed", "text/plain", ""))
                .await;
            continue;
        }
        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if msg["method"] == "initialize" {
            initializes.fetch_add(1, Ordering::SeqCst);
        }
        let reply = if msg["method"] == method {
            misbehave(&mut w, how, decoy_port).await;
            return;
        } else {
            answer(&msg, matches!(how, Misbehaviour::ForgetSession))
        };
        if w.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// The request line's method and the body (by Content-Length).
async fn read_request(
    r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    r.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let verb = line.split(' ').next()?.to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).await.ok().filter(|n| *n > 0)?;
        if h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).await.ok()?;
    Some((verb, body))
}

fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    response_with(status, content_type, "", body)
}

fn response_with(status: &str, content_type: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A well-behaved answer: initialize (issuing a session if `session`),
/// tools/list, tools/call; 202 for the rest.
fn answer(msg: &Value, session: bool) -> Vec<u8> {
    let result = match msg["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }),
        Some("tools/list") => json!({"tools": [{
            "name": "read_file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }]}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": "fine"}]}),
        _ => return response("202 Accepted", "text/plain", ""),
    };
    let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string();
    let session = if session && msg["method"] == "initialize" {
        "mcp-session-id: s1\r\n"
    } else {
        ""
    };
    response_with("200 OK", "application/json", session, &body)
}

/// Write `first`, then `each` again and again (for at most a minute, so a
/// broken client cannot keep the test process busy).
async fn forever(
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    first: Vec<u8>,
    each: Vec<u8>,
    pause: Duration,
) {
    if w.write_all(&first).await.is_err() {
        return;
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if w.write_all(&each).await.is_err() {
            return;
        }
        tokio::time::sleep(pause).await;
    }
}

async fn misbehave(w: &mut tokio::net::tcp::OwnedWriteHalf, how: Misbehaviour, decoy_port: u16) {
    let head = |status: &str, ct: &str, extra: &str| {
        format!("HTTP/1.1 {status}\r\ncontent-type: {ct}\r\n{extra}\r\n").into_bytes()
    };
    let chunk = |data: &[u8]| {
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    match how {
        Misbehaviour::Silence => tokio::time::sleep(Duration::from_secs(60)).await,
        Misbehaviour::EndlessJson => {
            let mut first = head(
                "200 OK",
                "application/json",
                "transfer-encoding: chunked\r\n",
            );
            first.extend(chunk(br#"{"jsonrpc":"2.0","id":1,"result":{"x":""#));
            forever(w, first, chunk(&[b'a'; 64 << 10]), Duration::ZERO).await
        }
        Misbehaviour::Garbage => {
            let _ = w
                .write_all(&response("200 OK", "application/json", "<<not json>>"))
                .await;
        }
        Misbehaviour::Html => {
            let _ = w
                .write_all(&response("200 OK", "text/html", "<html>hello</html>"))
                .await;
        }
        Misbehaviour::Unauthorized => {
            let r = "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer error=\"invalid_token\"\r\ncontent-length: 0\r\n\r\n";
            let _ = w.write_all(r.as_bytes()).await;
        }
        Misbehaviour::ForgetSession => {
            let _ = w
                .write_all(&response("404 Not Found", "text/plain", ""))
                .await;
        }
        Misbehaviour::Redirect => {
            let r = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{decoy_port}/mcp\r\ncontent-length: 0\r\n\r\n"
            );
            let _ = w.write_all(r.as_bytes()).await;
        }
        Misbehaviour::EndlessSse => {
            let first = head(
                "200 OK",
                "text/event-stream",
                "transfer-encoding: chunked\r\n",
            );
            forever(
                w,
                first,
                chunk(b": still here\n\n"),
                Duration::from_millis(50),
            )
            .await
        }
        Misbehaviour::HugeSseEvent => {
            let mut first = head(
                "200 OK",
                "text/event-stream",
                "transfer-encoding: chunked\r\n",
            );
            first.extend(chunk(b"event: message\ndata: "));
            forever(w, first, chunk(&[b'a'; 64 << 10]), Duration::ZERO).await
        }
    }
    // Hold the connection open (a closed socket would be an easy error).
    tokio::time::sleep(Duration::from_secs(60)).await;
}

fn policy(url: &str, timeout_ms: u64) -> Policy {
    Policy::from_toml(&format!(
        "[[servers]]\nid = \"h\"\nurl = \"{url}\"\nallowed_tools = [\"read_file\"]\n\
         request_timeout_ms = {timeout_ms}\n[servers.tools.read_file]\napproval = \"auto\"\n"
    ))
    .unwrap()
}

fn connector(p: &Policy) -> Arc<dyn Connector> {
    let ph = Placeholders {
        worktree: "/unused".into(),
        runtime_dir: "/unused".into(),
        repo: "/unused".into(),
    };
    let Endpoint::Http(spec) = p.servers[0].endpoint(&ph).unwrap() else {
        panic!("a url server")
    };
    Arc::new(HttpConnector {
        server_id: "h".into(),
        spec,
    })
}

/// Handshake + discovery over HTTP (well-behaved so far).
async fn session(url: &str, timeout_ms: u64) -> (ToolSession, tempfile::TempDir) {
    let p = policy(url, timeout_ms);
    let dir = tempfile::tempdir().unwrap();
    let mut connectors = HashMap::new();
    connectors.insert("h".to_string(), connector(&p));
    let base = ToolPipeline::new(Arc::new(NonInteractiveApprover::default()));
    let s = ToolSession::start(
        p,
        connectors,
        &base,
        "t",
        Arc::new(ArtifactStore::new(dir.path().join("a"))),
        Arc::new(Trace::new()),
    )
    .await
    .expect("handshake and discovery are well-behaved");
    (s, dir)
}

/// One `read_file` call at a misbehaving endpoint: its error text, state and
/// how long it took.
async fn one_call(
    how: Misbehaviour,
    timeout_ms: u64,
) -> (String, Option<FailureKind>, CallState, Duration) {
    let h = hostile("tools/call", how).await;
    let (mut s, _dir) = session(&h.url, timeout_ms).await;
    let started = Instant::now();
    let o = s
        .pipeline()
        .invoke(&local_name("h", "read_file"), r#"{"path": "x"}"#)
        .await;
    let took = started.elapsed();
    eprintln!("{how:?} after {took:?}: {}", o.model_text);
    assert_eq!(
        h.decoy_hits.load(Ordering::SeqCst),
        0,
        "followed a redirect"
    );
    let (text, error, state) = (o.model_text.clone(), o.error(), o.state());
    tokio::time::timeout(Duration::from_secs(10), s.shutdown())
        .await
        .expect("shutdown never hangs");
    (text, error, state, took)
}

#[tokio::test]
async fn silence_and_an_endless_sse_stream_end_at_the_call_timeout() {
    for how in [Misbehaviour::Silence, Misbehaviour::EndlessSse] {
        let (text, error, state, took) = one_call(how, 1000).await;
        assert_eq!(error, Some(FailureKind::Fault), "{how:?}: {text}");
        assert!(text.contains("timed out"), "{how:?}: {text}");
        assert_eq!(state, CallState::Unknown, "{how:?}");
        assert!(took < Duration::from_secs(5), "{how:?}: took {took:?}");
    }
}

#[tokio::test]
async fn an_endless_body_or_event_is_cut_at_the_frame_limit_promptly() {
    for how in [Misbehaviour::EndlessJson, Misbehaviour::HugeSseEvent] {
        let (text, error, state, took) = one_call(how, 30_000).await;
        assert_eq!(error, Some(FailureKind::Fault), "{how:?}: {text}");
        assert!(!text.contains("timed out"), "{how:?}: {text}");
        assert_eq!(state, CallState::Unknown, "{how:?}");
        assert!(took < Duration::from_secs(20), "{how:?}: took {took:?}");
    }
}

#[tokio::test]
async fn garbage_html_401_and_redirects_are_clear_errors_for_the_call() {
    for (how, says) in [
        (Misbehaviour::Garbage, "json"),
        (Misbehaviour::Html, "text/html"),
        (Misbehaviour::Unauthorized, "auth"),
        (Misbehaviour::Redirect, "307"),
    ] {
        let (text, error, _, took) = one_call(how, 30_000).await;
        assert_eq!(error, Some(FailureKind::Fault), "{how:?}: {text}");
        assert!(
            text.to_lowercase().contains(says),
            "{how:?} should say {says}: {text}"
        );
        assert!(took < Duration::from_secs(10), "{how:?}: took {took:?}");
    }
}

#[tokio::test]
async fn a_forgotten_session_ends_the_connection_and_the_safe_point_reconnects() {
    let h = hostile("tools/call", Misbehaviour::ForgetSession).await;
    let (mut s, _dir) = session(&h.url, 30_000).await;
    let o = s
        .pipeline()
        .invoke(&local_name("h", "read_file"), r#"{"path": "x"}"#)
        .await;
    assert_eq!(o.error(), Some(FailureKind::Fault), "{}", o.model_text);
    assert!(o.model_text.contains("404"), "{}", o.model_text);
    let conn = s.connection("h").unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while conn.is_alive() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !conn.is_alive(),
        "a forgotten session must end the connection"
    );
    s.safe_point().await.expect("reconnects and rediscovers");
    assert!(s.connection("h").unwrap().is_alive());
    assert_eq!(h.initializes.load(Ordering::SeqCst), 2, "a fresh handshake");
    s.shutdown().await;
}

#[tokio::test]
async fn a_hostile_handshake_fails_the_connect_within_its_timeout() {
    for how in [
        Misbehaviour::Silence,
        Misbehaviour::EndlessSse,
        Misbehaviour::EndlessJson,
        Misbehaviour::Garbage,
        Misbehaviour::Unauthorized,
        Misbehaviour::Redirect,
    ] {
        let h = hostile("initialize", how).await;
        let p = policy(&h.url, 1000);
        let started = Instant::now();
        let r = Connection::open(
            "h",
            connector(&p),
            &["2025-11-25".into()],
            Duration::from_secs(1),
        )
        .await;
        let e = r.err().expect("refused");
        eprintln!("{how:?}: {e}");
        assert!(
            matches!(
                e,
                ConnectError::InitTimeout { .. } | ConnectError::Initialize { .. }
            ),
            "{how:?}: {e}"
        );
        assert!(e.to_string().contains("`h`"), "names the server: {e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{how:?}");
        assert_eq!(
            h.decoy_hits.load(Ordering::SeqCst),
            0,
            "followed a redirect"
        );
    }
}

#[tokio::test]
async fn a_missing_token_variable_is_named_and_nothing_is_sent() {
    let h = hostile("tools/call", Misbehaviour::Garbage).await;
    let p = Policy::from_toml(&format!(
        "[[servers]]\nid = \"h\"\nurl = \"{}\"\nbearer_token_env = \"HOSTILE_TEST_TOKEN_UNSET\"\n",
        h.url
    ))
    .unwrap();
    let r = Connection::open(
        "h",
        connector(&p),
        &["2025-11-25".into()],
        Duration::from_secs(1),
    )
    .await;
    let e = r.err().expect("refused").to_string();
    assert!(
        e.contains("HOSTILE_TEST_TOKEN_UNSET") && e.contains("not set") && e.contains("`h`"),
        "{e}"
    );
}

#[test]
fn url_servers_are_checked_by_the_policy() {
    let bad = |entry: &str| {
        let toml = format!("[[servers]]\nid = \"r\"\n{entry}\n");
        let e = Policy::from_toml(&toml).expect_err(entry).to_string();
        assert!(e.contains("`r`"), "names the server: {e}");
        e
    };
    let both = bad("command = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"");
    assert!(both.contains("exactly one"), "{both}");
    assert!(bad("allowed_tools = []").contains("`url`"));
    assert!(bad("url = \"https://example.com/mcp\"").contains("https"));
    assert!(bad("url = \"http://user:pw@127.0.0.1:1/mcp\"").contains("credentials"));
    assert!(bad("url = \"not a url\"").contains("url"));
    assert!(bad("url = \"http://127.0.0.1:1/mcp\"\nargs = [\"a\"]").contains("args"));
    assert!(bad("url = \"http://127.0.0.1:1/mcp\"\nenv = { A = \"1\" }").contains("env"));
    assert!(bad("command = \"x\"\nbearer_token_env = \"T\"").contains("bearer_token_env"));
    let json = r#"{"mcpServers": {"r": {"type": "http", "url": "http://127.0.0.1:9/mcp", "bearerTokenEnv": "T"}}}"#;
    let p = Policy::from_json(json).unwrap();
    assert_eq!(p.servers[0].bearer_token_env.as_deref(), Some("T"));
    let mixed = r#"{"mcpServers": {"r": {"type": "stdio", "url": "http://127.0.0.1:9/mcp"}}}"#;
    assert!(Policy::from_json(mixed).is_err());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy/http.example.toml");
    let p = Policy::load(&example).unwrap();
    assert_eq!(
        p.servers[0].url.as_deref(),
        Some("http://127.0.0.1:8080/mcp")
    );
    assert_eq!(
        p.servers[0].bearer_token_env.as_deref(),
        Some("WASM_MCP_TOKEN")
    );
}
