//! `wasm-mcp serve --http`: the real binary on 127.0.0.1:0, driven with raw
//! HTTP. Hostile cases first: missing/wrong tokens, bad JWTs (expired, wrong
//! audience or issuer, `alg: none`, a stranger's key), a missing scope,
//! huge bodies (with and without Content-Length), foreign Origin, spoofed
//! Host, too many requests in flight, an open non-loopback bind. Then the
//! stateless 2026-07-28 mode across two replicas and a 2025-11-25 session.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;
use serde_json::{json, Value};

mod support;
use support::http::{post, refused_start, rpc_message, stateless_request, HttpServer};
use support::{each_str, plugin_dir, repo_root};

const TOKEN: &str = "test-token-0123456789abcdef";
const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "wasm-mcp-test";

fn worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("inside.txt"), "inside\n").unwrap();
    wt
}

fn workspace_plugins() -> tempfile::TempDir {
    plugin_dir(&["plugins/workspace.wasm"])
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn list_body() -> Value {
    stateless_request(1, "tools/list", json!({}))
}

fn call_body(id: u64, tool: &str, args: Value) -> Value {
    stateless_request(id, "tools/call", json!({"name": tool, "arguments": args}))
}

fn www_authenticate(r: &reqwest::Response) -> String {
    r.headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// POST `body` with the test token.
async fn post_authed(c: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    post(c, url, body).bearer_auth(TOKEN).send().await.unwrap()
}

/// `tools/list` with one more header (`name: value`), no token.
async fn list_with(c: &reqwest::Client, url: &str, name: &str, value: &str) -> reqwest::Response {
    post(c, url, &list_body())
        .header(name, value)
        .send()
        .await
        .unwrap()
}

/// GET `url`, read as JSON.
async fn get_json(c: &reqwest::Client, url: &str) -> Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// The JSON-RPC message a response carries.
async fn message_of(r: reqwest::Response) -> Value {
    rpc_message(&r.text().await.unwrap())
}

/// A token-protected server (token from an env var).
fn token_server(wt: &Path, plugins: &Path, extra: &[&str]) -> HttpServer {
    let mut args = vec!["--auth-token-env", "TEST_MCP_TOKEN"];
    args.extend_from_slice(extra);
    HttpServer::start(wt, plugins, &args, &[("TEST_MCP_TOKEN", TOKEN)])
}

/// A static token has no authorization server: the 401's challenge is a
/// plain `Bearer` one, and no protected-resource metadata is served
/// (metadata naming no authorization server sent the MCP Inspector into an
/// OAuth flow that could not succeed instead of asking for the token).
#[tokio::test]
async fn no_or_wrong_token_is_401_with_a_bearer_challenge() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();

    let r = post(&c, &s.url, &list_body()).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(www_authenticate(&r), "Bearer");
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", s.base);

    for bad in [
        format!("Bearer {TOKEN}x"),
        format!("Bearer {}", &TOKEN[1..]),
        format!("Basic {TOKEN}"),
        "Bearer".to_string(),
    ] {
        let r = list_with(&c, &s.url, "Authorization", &bad).await;
        assert_eq!(r.status(), 401, "{bad}");
        let challenge = www_authenticate(&r);
        assert!(
            challenge.contains("error=\"invalid_token\"")
                && !challenge.contains("resource_metadata"),
            "{bad}: {challenge}"
        );
    }
    for path in [
        metadata_url,
        format!("{}/.well-known/oauth-protected-resource", s.base),
    ] {
        let r = c.get(&path).send().await.unwrap();
        assert!(
            [401, 404].contains(&r.status().as_u16()),
            "{path}: {}",
            r.status()
        );
    }

    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200);
    let msg = message_of(r).await;
    let names = each_str(&msg["result"]["tools"], "name");
    assert!(names.contains(&"read_file"), "{msg}");
}

#[tokio::test]
async fn token_file_works_and_a_bad_one_refuses_to_start() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let s = HttpServer::start(
        wt.path(),
        plugins.path(),
        &["--auth-token-file", file.to_str().unwrap()],
        &[],
    );
    let c = client();
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200);
    let r = post(&c, &s.url, &list_body()).send().await.unwrap();
    assert_eq!(r.status(), 401);

    std::fs::write(&file, "short\n").unwrap();
    let wt_arg = wt.path().to_str().unwrap();
    let err = refused_start(
        &[
            "--http",
            "127.0.0.1:0",
            "--worktree",
            wt_arg,
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--auth-token-file",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(err.contains("at least 16 characters"), "{err}");
}

#[test]
fn non_loopback_bind_without_auth_is_refused() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let err = refused_start(
        &[
            "--http",
            "0.0.0.0:0",
            "--worktree",
            wt.path().to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(err.contains("without authentication"), "{err}");
    assert!(err.contains("--allow-unauthenticated-remote"), "{err}");
}

/// A page of an `--allowed-origin` can talk to the server: its preflight
/// is answered (with the headers it asks for, `Authorization` among them),
/// and it can read the session id and the auth challenge. With no CORS,
/// every MCP request from such a page failed at its preflight (405). Other
/// origins get no CORS headers, and their requests are still 403.
#[tokio::test]
async fn allowed_browser_origins_get_cors() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let page = "http://app.example.com";
    // Written as copied from an address bar: compared as the Origin check
    // compares it (it let the page in and gave it no CORS).
    let s = token_server(
        wt.path(),
        plugins.path(),
        &["--allowed-origin", "http://App.Example.com/"],
    );
    let c = client();
    let preflight = |origin: &'static str| {
        c.request(reqwest::Method::OPTIONS, &s.url)
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type, mcp-protocol-version, mcp-method, mcp-param-region",
            )
            .send()
    };
    let r = preflight(page).await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let h = r.headers();
    // Answered with no token: not kept for the next request (tokenless
    // preflights held connections and pushed out token holders').
    let mut tcp = raw_connection(&s.base);
    let authority = s.base.trim_start_matches("http://");
    let head = format!(
        "OPTIONS /mcp HTTP/1.1\r\nHost: {authority}\r\nOrigin: {page}\r\n\
         Access-Control-Request-Method: POST\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).unwrap();
    assert!(
        closed_by_server(&mut tcp),
        "a preflight's connection was kept"
    );
    assert_eq!(h["access-control-allow-origin"], page);
    let methods = h["access-control-allow-methods"].to_str().unwrap();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("mcp-param-region"),
        "{allowed}"
    );
    // Inside the Origin and Host checks: a preflight of another origin, or
    // with another Host, is 403 (it was answered 200 whatever it named).
    let r = preflight("http://evil.example").await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let port = s.base.rsplit(':').next().unwrap().to_string();
    let r = c
        .request(reqwest::Method::OPTIONS, &s.url)
        .header("Host", format!("evil.example:{port}"))
        .header("Origin", page)
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Origins no page should be trusted with are refused at start.
    for bad in ["null", "*", "http://*.example.com", "app.example.com"] {
        let err = refused_start(
            &[
                "--worktree",
                ".",
                "--plugins",
                ".",
                "--http",
                "127.0.0.1:0",
                "--allowed-origin",
                bad,
            ],
            &[],
        );
        assert!(err.contains("--allowed-origin"), "{bad}: {err}");
    }
    // The page's own requests: answered with what it may read.
    let r = post(&c, &s.url, &list_body())
        .bearer_auth(TOKEN)
        .header("Origin", page)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], page);
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        exposed.contains("mcp-session-id") && exposed.contains("www-authenticate"),
        "{exposed}"
    );
    let r = post(&c, &s.url, &list_body())
        .header("Origin", page)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["access-control-allow-origin"], page);
    let r = post(&c, &s.url, &list_body())
        .bearer_auth(TOKEN)
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn foreign_origin_and_spoofed_host_are_403() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = HttpServer::start(wt.path(), plugins.path(), &[], &[]);
    let c = client();
    let port = s.base.rsplit(':').next().unwrap().to_string();

    let own = format!("http://localhost:{port}");
    let ok = list_with(&c, &s.url, "Origin", &own).await;
    assert_eq!(ok.status(), 200, "own origin");

    for origin in [
        "http://evil.example".to_string(),
        format!("http://evil.example:{port}"),
        "http://localhost:1".to_string(),
        "null".to_string(),
    ] {
        let r = list_with(&c, &s.url, "Origin", &origin).await;
        assert_eq!(r.status(), 403, "Origin {origin}");
    }
    // DNS rebinding: a name that resolves to 127.0.0.1 for the attacker.
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
    ] {
        let r = list_with(&c, &s.url, "Host", &host).await;
        assert_eq!(r.status(), 403, "Host {host}");
        let r = c
            .get(format!("{}/.well-known/oauth-protected-resource", s.base))
            .header("Host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "metadata with Host {host}");
    }
    // An absolute-form target names the host (RFC 9112 3.2.2: Host is then
    // ignored), so it is checked as Host is (the server's own: past that
    // check, 404, as this server has no OAuth metadata).
    let meta = "/.well-known/oauth-protected-resource";
    let authority = s.base.trim_start_matches("http://");
    for (target, want) in [
        (format!("http://{authority}{meta}"), 404),
        (format!("http://evil.example:{port}{meta}"), 403),
        (format!("http://127.0.0.1.nip.io:{port}{meta}"), 403),
    ] {
        let head = format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        assert_eq!(raw_status(authority, &head), want, "target {target}");
    }
}

/// Sends `head` (a whole request without a body); the status code.
fn raw_status(authority: &str, head: &str) -> u16 {
    let mut tcp = std::net::TcpStream::connect(authority).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(head.as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let n = tcp.read(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]).to_string();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn huge_bodies_are_413_with_or_without_content_length() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &["--max-body-bytes", "65536"]);
    let c = client();
    let big = "x".repeat(200_000);
    let body = call_body(1, "read_file", json!({"path": big}));
    let r = post_authed(&c, &s.url, &body).await;
    assert_eq!(r.status(), 413);

    // Chunked: no Content-Length to refuse up front; the limit must still hold.
    let status = chunked_post(&s.base, &body.to_string());
    assert_eq!(status, 413);

    let small = call_body(2, "read_file", json!({"path": "inside.txt"}));
    let r = post_authed(&c, &s.url, &small).await;
    assert_eq!(r.status(), 200, "small body still served");
}

/// POST `body` to /mcp with `Transfer-Encoding: chunked`; the status code.
fn chunked_post(base: &str, body: &str) -> u16 {
    let authority = base.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(authority).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).unwrap();
    for chunk in body.as_bytes().chunks(8192) {
        let frame = format!("{:x}\r\n", chunk.len());
        if tcp.write_all(frame.as_bytes()).is_err()
            || tcp.write_all(chunk).is_err()
            || tcp.write_all(b"\r\n").is_err()
        {
            break; // the server may answer and close before reading it all
        }
    }
    let _ = tcp.write_all(b"0\r\n\r\n");
    let mut buf = [0u8; 64];
    let n = tcp.read(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]).to_string();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn requests_beyond_the_in_flight_limit_are_503() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let s = HttpServer::start(
        wt.path(),
        plugins.path(),
        // A long deadline: on a loaded machine the slow call must still hold
        // the slot while the probes run.
        &["--max-in-flight", "1", "--timeout-ms", "8000"],
        &[],
    );
    let c = client();
    // The slow call itself can be the one refused if a probe holds the slot
    // when it arrives (seen under load): it retries until it gets in.
    let slow = {
        let (c, url) = (c.clone(), s.url.clone());
        tokio::spawn(async move {
            loop {
                let body = call_body(1, "sleep_forever", json!({}));
                let status = post(&c, &url, &body).send().await.unwrap().status();
                if status != 503 {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    // Until the slow call holds the one slot, a probe may still get in.
    let deadline = Instant::now() + Duration::from_secs(7);
    let mut refused = None;
    while Instant::now() < deadline {
        let r = post(&c, &s.url, &list_body()).send().await.unwrap();
        if r.status() == 503 {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = refused.expect("no 503 while a call held the only slot");
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(
        slow.await.unwrap(),
        200,
        "the slow call ends at its deadline"
    );
    let r = post(&c, &s.url, &list_body()).send().await.unwrap();
    assert_eq!(r.status(), 200, "slot freed");
}

/// Notifications take no in-flight slot (they are answered 202 and run
/// nothing): with every slot held by a call, its `notifications/cancelled`
/// was refused 503, so the call kept its slot until its deadline and every
/// client got 503 meanwhile (a helper's find).
#[tokio::test]
async fn a_cancel_gets_through_when_every_slot_is_held() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let args = ["--max-in-flight", "1", "--timeout-ms", "20000"];
    let s = HttpServer::start(wt.path(), plugins.path(), &args, &[]);
    let c = client();
    let (sid, _) = open_session(&c, &s.url).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sleep_forever", "arguments": {}}});
    let held = in_session(&c, &s.url, &sid, &call).send();
    let held = tokio::spawn(held);
    let held_slot = until_listing_is(&c, &s.url, 503, Duration::from_secs(10)).await;
    assert!(held_slot, "the call never held the slot");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7}});
    let r = in_session(&c, &s.url, &sid, &cancel).send().await.unwrap();
    assert_eq!(r.status(), 202, "the cancel was refused");
    let freed = until_listing_is(&c, &s.url, 200, Duration::from_secs(5)).await;
    assert!(freed, "the cancelled call kept its slot");
    held.abort();
}

/// Whether a stateless `tools/list` is answered `status` within `within`
/// (asked every 20 ms).
async fn until_listing_is(c: &reqwest::Client, url: &str, status: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if post(c, url, &list_body()).send().await.unwrap().status() == status {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

// ---- OAuth 2.1 resource server (JWT + JWKS) ----

fn jwt_dir() -> PathBuf {
    repo_root().join("tests/support/http")
}

/// An OAuth config: `write_file` needs `tools:write`.
fn oauth_config(dir: &Path) -> PathBuf {
    let path = dir.join("oauth.toml");
    let text = format!(
        "issuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\njwks = \"{}\"\n\n[tool_scopes]\nwrite_file = \"tools:write\"\n",
        jwt_dir().join("jwks.json").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// With OAuth, the public metadata and any path's 404 are answered with no
/// token asked: their connections are closed after the answer, as a 401's
/// (kept, 300 tokenless clients fetching them pushed out a token holder's
/// session: 0 of 34 requests answered; a helper's find).
#[test]
fn public_answers_close_their_connection() {
    let (wt, plugins, dir) = (
        worktree(),
        workspace_plugins(),
        tempfile::tempdir().unwrap(),
    );
    let s = oauth_server(wt.path(), plugins.path(), dir.path());
    let authority = s.base.trim_start_matches("http://").to_string();
    for (path, status) in [
        ("/.well-known/oauth-protected-resource", "200"),
        ("/.well-known/oauth-protected-resource/mcp", "200"),
        ("/x", "404"),
        ("/mcp", "401"),
    ] {
        let mut tcp = raw_connection(&s.base);
        let head = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        tcp.write_all(head.as_bytes()).unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tcp.read(&mut buf).unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{path}: {answer}"
        );
        tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        assert!(
            closed_by_server(&mut tcp),
            "GET {path} left its connection open"
        );
    }
}

/// A server taking JWTs ([`oauth_config`] written in `dir`).
fn oauth_server(wt: &Path, plugins: &Path, dir: &Path) -> HttpServer {
    let cfg = oauth_config(dir);
    HttpServer::start(wt, plugins, &["--oauth-config", cfg.to_str().unwrap()], &[])
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "agent", "exp": now() + 600, "iat": now(), "scope": scope})
}

/// Sign `claims` with `key` (a PEM file in tests/support/http).
fn jwt(claims: &Value, key: &str) -> String {
    let pem = std::fs::read(jwt_dir().join(key)).unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("test-key-1".into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_pem(&pem).unwrap()).unwrap()
}

fn unsigned_jwt(claims: &Value) -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(claims)
    )
}

#[tokio::test]
async fn jwts_are_validated_and_tool_scopes_enforced() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let dir = tempfile::tempdir().unwrap();
    let s = oauth_server(wt.path(), plugins.path(), dir.path());
    let c = client();
    let send = |token: String, body: Value| {
        let (c, url) = (c.clone(), s.url.clone());
        async move {
            post(&c, &url, &body)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
        }
    };

    let mut expired = claims("tools:read");
    expired["exp"] = json!(now() - 3600);
    let mut wrong_aud = claims("tools:read");
    wrong_aud["aud"] = json!("some-other-api");
    let mut wrong_iss = claims("tools:read");
    wrong_iss["iss"] = json!("https://evil.example");
    let mut no_exp = claims("tools:read");
    no_exp.as_object_mut().unwrap().remove("exp");
    let hostile = [
        (jwt(&expired, "issuer-key.pem"), "token expired"),
        (jwt(&wrong_aud, "issuer-key.pem"), "wrong audience"),
        (jwt(&wrong_iss, "issuer-key.pem"), "wrong issuer"),
        (jwt(&no_exp, "issuer-key.pem"), "missing exp"),
        (
            jwt(&claims("tools:read"), "stranger-key.pem"),
            "bad signature",
        ),
        (
            unsigned_jwt(&claims("tools:read tools:write")),
            "malformed token",
        ),
    ];
    for (token, why) in hostile {
        let r = send(token, list_body()).await;
        assert_eq!(r.status(), 401, "{why}");
        let challenge = www_authenticate(&r);
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(challenge.contains(why), "{why}: {challenge}");
    }

    let reader = jwt(&claims("tools:read"), "issuer-key.pem");
    let r = send(reader.clone(), list_body()).await;
    assert_eq!(r.status(), 200);
    let r = send(
        reader.clone(),
        call_body(2, "read_file", json!({"path": "inside.txt"})),
    )
    .await;
    assert_eq!(r.status(), 200, "unscoped tool");

    let write = call_body(
        3,
        "write_file",
        json!({"path": "out.txt", "content": "hi\n"}),
    );
    let r = send(reader, write.clone()).await;
    assert_eq!(r.status(), 403);
    let challenge = www_authenticate(&r);
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"tools:write\""), "{challenge}");
    assert!(!wt.path().join("out.txt").exists(), "refused call ran");

    let writer = jwt(&claims("tools:read tools:write"), "issuer-key.pem");
    let r = send(writer, write).await;
    assert_eq!(r.status(), 200);
    let msg = message_of(r).await;
    assert_ne!(msg["result"]["isError"], json!(true), "{msg}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("out.txt")).unwrap(),
        "hi\n"
    );

    let meta = get_json(
        &c,
        &format!("{}/.well-known/oauth-protected-resource", s.base),
    )
    .await;
    assert_eq!(meta["authorization_servers"], json!([ISSUER]));
    assert_eq!(meta["scopes_supported"], json!(["tools:write"]));
}

/// A 2025-11-25 session belongs to the subject whose token made it (the
/// spec's SHOULD: session ids bound to who the user is). Another subject's
/// valid token naming it gets 404, as for a session that does not exist:
/// its requests, its GET stream, its DELETE, and its notifications, none
/// run or reserve anything in it. The subject that made it goes on with a
/// new token (as after a refresh).
#[tokio::test]
async fn a_session_is_used_only_by_the_subject_that_made_it() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let dir = tempfile::tempdir().unwrap();
    let s = oauth_server(wt.path(), plugins.path(), dir.path());
    let c = client();
    let token_of = |sub: &str, ttl: i64| {
        let mut cl = claims("tools:read");
        cl["sub"] = json!(sub);
        cl["exp"] = json!(now() + ttl);
        jwt(&cl, "issuer-key.pem")
    };
    let (alice, mallory) = (token_of("alice", 600), token_of("mallory", 600));
    let r = initialize_2025_as(&c, &s.url, &alice).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let in_sid = |token: &str, method: Method| {
        c.request(method, &s.url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", sid.as_str())
            .header("MCP-Protocol-Version", "2025-11-25")
    };
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = in_sid(&alice, Method::POST)
        .json(&done)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let r = in_sid(&mallory, Method::POST)
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another subject's request in the session");
    let r = in_sid(&mallory, Method::POST)
        .json(&done)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another subject's notification");
    let r = in_sid(&mallory, Method::GET).send().await.unwrap();
    assert_eq!(r.status(), 404, "another subject's GET stream");
    let r = in_sid(&mallory, Method::DELETE).send().await.unwrap();
    assert_eq!(r.status(), 404, "another subject's DELETE");

    let refreshed = token_of("alice", 900);
    assert_ne!(refreshed, alice);
    let r = in_sid(&refreshed, Method::POST)
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        200,
        "the session outlived the other subject's DELETE"
    );
    let msg = message_of(r).await;
    assert!(
        msg["result"]["tools"].to_string().contains("read_file"),
        "{msg}"
    );
    let r = in_sid(&refreshed, Method::DELETE).send().await.unwrap();
    assert_eq!(r.status(), 204);

    // A token with no subject is known by itself: another such token,
    // valid, is another principal.
    let anonymous = |ttl: i64| {
        let mut cl = claims("tools:read");
        cl.as_object_mut().unwrap().remove("sub");
        cl["exp"] = json!(now() + ttl);
        jwt(&cl, "issuer-key.pem")
    };
    let (first, second) = (anonymous(600), anonymous(700));
    let r = initialize_2025_as(&c, &s.url, &first).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let in_sid = |token: &str| {
        c.post(&s.url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", sid.as_str())
            .header("MCP-Protocol-Version", "2025-11-25")
    };
    let r = in_sid(&second).json(&list).send().await.unwrap();
    assert_eq!(r.status(), 404, "another token without a subject");
    let r = in_sid(&first).json(&done).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let r = in_sid(&first).json(&list).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

// ---- stateless 2026-07-28 behind a load balancer ----

#[tokio::test]
async fn two_replicas_serve_one_worktree_alternately_without_sessions() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let replicas = [
        token_server(wt.path(), plugins.path(), &[]),
        token_server(wt.path(), plugins.path(), &[]),
    ];
    assert_ne!(replicas[0].pid(), replicas[1].pid());
    let c = client();
    for i in 0..6u64 {
        // Round robin: write on one replica, read it back on the other.
        let (w, r) = (
            &replicas[(i % 2) as usize],
            &replicas[((i + 1) % 2) as usize],
        );
        let content = format!("round {i}\n");
        let body = call_body(
            i * 2,
            "write_file",
            json!({"path": "lb.txt", "content": content}),
        );
        let resp = post_authed(&c, &w.url, &body).await;
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers().get("mcp-session-id").is_none(),
            "stateless: no session"
        );
        let msg = message_of(resp).await;
        assert_ne!(msg["result"]["isError"], json!(true), "{msg}");

        let body = call_body(i * 2 + 1, "read_file", json!({"path": "lb.txt"}));
        let resp = post_authed(&c, &r.url, &body).await;
        assert_eq!(resp.status(), 200);
        let msg = message_of(resp).await;
        assert!(
            msg["result"].to_string().contains(&format!("round {i}")),
            "{msg}"
        );
    }
}

/// A 2025-11-25 `initialize` with the test token (a new session).
async fn initialize_2025(c: &reqwest::Client, url: &str) -> reqwest::Response {
    initialize_2025_as(c, url, TOKEN).await
}

/// A 2025-11-25 `initialize` with `token`.
async fn initialize_2025_as(c: &reqwest::Client, url: &str, token: &str) -> reqwest::Response {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "http-test", "version": "1"}}});
    c.post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap()
}

/// A POST of `body` in the 2025-11-25 session `sid`.
fn in_session(c: &reqwest::Client, url: &str, sid: &str, body: &Value) -> reqwest::RequestBuilder {
    c.post(url)
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", sid)
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(body)
}

/// A 2025-11-25 session, initialized (`notifications/initialized` sent):
/// its id and the `initialize` answer.
async fn open_session(c: &reqwest::Client, url: &str) -> (String, Value) {
    let r = initialize_2025(c, url).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let init = message_of(r).await;
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = in_session(c, url, &sid, &done).send().await.unwrap();
    assert_eq!(r.status(), 202);
    (sid, init)
}

#[tokio::test]
async fn a_2025_11_25_client_gets_a_session() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let (sid, init) = open_session(&c, &s.url).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let legacy = |body: Value| in_session(&c, &s.url, &sid, &body);
    let r = legacy(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "inside.txt"}}}))
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let msg = message_of(r).await;
    assert!(msg["result"].to_string().contains("inside"), "{msg}");
    // Ending the session is 204 (rmcp's 202 made the Python SDK 1.x log a
    // warning at every close); ending one that does not exist is 404, as
    // any request naming one is (it was 202).
    let end = |sid: &str| {
        c.delete(&s.url)
            .bearer_auth(TOKEN)
            .header("Mcp-Session-Id", sid.to_owned())
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
    };
    assert_eq!(end(&sid).await.unwrap().status(), 204);
    assert_eq!(end("no-such-session").await.unwrap().status(), 404);
}

/// A 2025-11-25 session whose client holds its GET stream open stays
/// alive past the idle time (rmcp ended it after 5 quiet minutes, and the
/// Python and TypeScript SDKs' next call failed "Session not found",
/// neither starting a new one: a helper's find); one with no stream open
/// still ends when idle, so abandoned sessions do not fill
/// `--max-sessions`. Here with `--session-idle-secs 2`.
#[tokio::test]
async fn a_session_lives_while_its_client_listens_and_ends_when_idle() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &["--session-idle-secs", "2"]);
    let c = client();
    let (listened, _) = open_session(&c, &s.url).await;
    let (quiet, _) = open_session(&c, &s.url).await;
    let stream = c
        .get(&s.url)
        .bearer_auth(TOKEN)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &listened)
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "inside.txt"}}});
    let r = in_session(&c, &s.url, &listened, &read)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the listened session ended");
    assert!(message_of(r).await["result"].to_string().contains("inside"));
    let r = in_session(&c, &s.url, &quiet, &read).send().await.unwrap();
    assert_eq!(r.status(), 404, "the quiet session lived on");
    drop(stream);
}

// ---- Hostile clients at the connection and body level ----

/// A raw connection to `base`, with a read timeout.
fn raw_connection(base: &str) -> std::net::TcpStream {
    let tcp = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp
}

/// Whether the server closed `tcp` (a read returns end of file or a reset)
/// rather than leaving it open past the read timeout.
fn closed_by_server(tcp: &mut std::net::TcpStream) -> bool {
    let mut buf = [0u8; 256];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => closed_by_server(tcp),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// A client that asks for large answers and reads none of them has its
/// connections closed, and with them the answers held in the server's
/// memory (8 MB each here, up to 15 MiB on each of 256 connections), while
/// other clients are served. An answer hyper has queued whole is cut by
/// the header timeout (10 s: the server is waiting for the next request);
/// a stream with more to send than hyper queues, which that timeout never
/// reaches, by the write stall timeout (30 s; `listener::tests` pins it: a
/// session stream fed a shared progress token's notifications held its
/// slot, and rmcp's session worker with it, for good: a helper's find).
#[tokio::test]
async fn a_client_that_reads_nothing_has_its_connections_closed() {
    let wt = worktree();
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n";
    std::fs::write(
        wt.path().join("big.txt"),
        line.repeat((8 << 20) / line.len()),
    )
    .unwrap();
    let plugins = workspace_plugins();
    let args = ["--max-output-bytes", "16777216"];
    let s = token_server(wt.path(), plugins.path(), &args);
    let c = client();
    let (sid, _) = open_session(&c, &s.url).await;
    let authority = s.base.trim_start_matches("http://");
    let unread_post = |body: Value, headers: &str| {
        let body = body.to_string();
        let mut tcp = raw_connection(&s.base);
        tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             {headers}Content-Length: {}\r\n\r\n",
            body.len()
        );
        tcp.write_all(format!("{head}{body}").as_bytes()).unwrap();
        tcp
    };
    let big = json!({"path": "big.txt"});
    let in_session = format!("Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n");
    let session_call = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "read_file", "arguments": big}});
    let stateless = format!(
        "MCP-Protocol-Version: {}\r\nMcp-Method: tools/call\r\nMcp-Name: read_file\r\n",
        support::http::STATELESS
    );
    let mut unread = [
        unread_post(session_call, &in_session),
        unread_post(call_body(20, "read_file", big), &stateless),
    ];
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200, "another client is served meanwhile");
    tokio::time::sleep(Duration::from_secs(35)).await;
    for tcp in &mut unread {
        let mut got = Vec::new();
        let read = tcp.read_to_end(&mut got);
        let closed = match &read {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(
            closed,
            "the connection was kept: {read:?} after {} bytes",
            got.len()
        );
        assert!(got.len() < 6 << 20, "{} bytes came", got.len());
    }
}

/// Clients posting bodies of many small values (2 MB of 49,000 objects
/// each, a notification the server parses and drops) do not hold up other
/// clients: each such body was parsed on the server's one executor thread,
/// and eight clients posting them in a loop made another client's listing
/// take ~240 ms instead of ~1 ms (a helper's find). Bodies over 64 KiB are
/// parsed off the executor, one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_bodies_do_not_hold_up_other_clients() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = HttpServer::start(wt.path(), plugins.path(), &[], &[]);
    let c = client();
    let median_listing = |c: reqwest::Client, url: String| async move {
        let mut took = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            let r = post(&c, &url, &list_body()).send().await.unwrap();
            assert_eq!(r.status(), 200);
            took.push(t.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        took.sort();
        took[took.len() / 2]
    };
    let quiet = median_listing(c.clone(), s.url.clone()).await;
    let values: Vec<Value> = (0..49_000).map(|i| json!({"k": i})).collect();
    let heavy = json!({"jsonrpc": "2.0", "method": "notifications/initialized",
        "params": {"_meta": {"x": values}}});
    let heavy = bytes::Bytes::from(heavy.to_string());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..8)
        .map(|_| {
            let (c, url, heavy, stop) = (client(), s.url.clone(), heavy.clone(), stop.clone());
            tokio::spawn(async move {
                let mut sent = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = c
                        .post(&url)
                        .header("Content-Type", "application/json")
                        .header("Accept", "application/json, text/event-stream")
                        .header("MCP-Protocol-Version", support::http::STATELESS)
                        .header("Mcp-Method", "notifications/initialized")
                        .body(heavy.clone())
                        .send()
                        .await;
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let flooded = median_listing(c.clone(), s.url.clone()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut sent = 0;
    for f in flood {
        sent += f.await.unwrap();
    }
    eprintln!("listing median: quiet {quiet:?}, under {sent} heavy bodies {flooded:?}");
    assert!(sent >= 8, "the flood sent {sent} bodies");
    assert!(
        flooded < quiet * 10 + Duration::from_millis(50),
        "quiet {quiet:?}, flooded {flooded:?}"
    );
}

/// Connections cost the server a descriptor each, shared with the plugins'
/// calls: at most `--max-connections` stay open, and one that sends
/// nothing, or trickles its headers, is closed after 10 s. Both were kept
/// forever: 1,100 idle connections, no token needed, took the last
/// descriptor and `read_file` failed. A connection past the bound takes the
/// place of the one that has waited longest for a request: 300 that sent
/// half a head and waited out the timeout kept every client with a token
/// out (a helper's find). When every connection is serving a request, one
/// more is closed at once.
#[test]
fn idle_and_surplus_connections_are_closed() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let s = token_server(
        wt.path(),
        plugins.path(),
        &["--max-connections", "4", "--timeout-ms", "6000"],
    );
    let mut idle: Vec<_> = (0..4)
        .map(|_| {
            let mut tcp = raw_connection(&s.base);
            tcp.write_all(b"POST /mcp HTTP/1.1\r\nHost: x").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            tcp
        })
        .collect();
    let t = Instant::now();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let list =
        || rt.block_on(async { post_authed(&client(), &s.url, &list_body()).await.status() });
    assert_eq!(list(), 200, "a client with a token was kept out");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        closed_by_server(&mut idle[0]),
        "the longest waiting was kept"
    );
    for tcp in &mut idle[1..] {
        assert!(closed_by_server(tcp), "an idle connection was kept");
    }
    let waited = t.elapsed();
    assert!(waited >= Duration::from_secs(8), "closed after {waited:?}");
    // Four connections serving calls: a fifth is closed at once.
    let authority = s.base.trim_start_matches("http://").to_string();
    let mut serving: Vec<_> = (0..4)
        .map(|id| {
            let mut tcp = raw_connection(&s.base);
            let body = call_body(id, "sleep_forever", json!({})).to_string();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\nMcp-Method: tools/call\r\nMcp-Name: sleep_forever\r\nContent-Length: {}\r\n\r\n{body}",
                support::http::STATELESS,
                body.len()
            );
            tcp.write_all(head.as_bytes()).unwrap();
            tcp
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let mut surplus = raw_connection(&s.base);
    assert!(closed_by_server(&mut surplus), "a 5th connection was kept");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    drop(serving.drain(..));
}

/// A connection whose request head is in but whose body trickles has not
/// begun to be served: past `--max-connections` it is closed for a new
/// connection like one idle. 300 such POSTs, each with a token and one body
/// byte every 2 s, kept every other client out for the 30 s body timeout
/// each (0 of 79 answered; a helper's find).
#[test]
fn a_trickling_body_gives_its_connection_up_to_a_new_one() {
    let wt = worktree();
    let s = token_server(
        wt.path(),
        workspace_plugins().path(),
        &["--max-connections", "4"],
    );
    let authority = s.base.trim_start_matches("http://").to_string();
    let mut trickling: Vec<_> = (0..4)
        .map(|_| {
            let mut tcp = raw_connection(&s.base);
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
            );
            tcp.write_all(head.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            tcp
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async { post_authed(&client(), &s.url, &list_body()).await.status() });
    assert_eq!(status, 200, "a client with a token was kept out");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(
        closed_by_server(&mut trickling[0]),
        "the longest waiting was kept"
    );
}

/// Connections that connect and send nothing, made again as they are
/// closed, take the places of one another, not of a client's keep-alive
/// connection between its requests: they closed the idle connections of
/// clients with a token, and the official Python SDK failed its session
/// (a helper's find). A connection never served goes first.
#[test]
fn connections_that_send_nothing_do_not_close_a_client_s_keep_alive() {
    let wt = worktree();
    let s = token_server(
        wt.path(),
        workspace_plugins().path(),
        &["--max-connections", "4"],
    );
    let authority = s.base.trim_start_matches("http://").to_string();
    let body = list_body().to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{body}",
        support::http::STATELESS,
        body.len()
    );
    let exchange = |tcp: &mut std::net::TcpStream| -> String {
        tcp.write_all(request.as_bytes()).unwrap();
        tcp.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let (mut got, mut buf) = (Vec::new(), [0u8; 8192]);
        while let Ok(n) = tcp.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    let mut client = raw_connection(&s.base);
    assert!(exchange(&mut client).starts_with("HTTP/1.1 200"));
    let silent: Vec<_> = (0..4)
        .map(|_| {
            let tcp = raw_connection(&s.base);
            std::thread::sleep(Duration::from_millis(100));
            tcp
        })
        .collect();
    let again = exchange(&mut client);
    assert!(
        again.starts_with("HTTP/1.1 200"),
        "the client's connection was closed: {again:?}"
    );
    drop(silent);
}

/// At SIGTERM a 2026-07-28 listen stream completes with its final result
/// and a 2025-11-25 session ends, with its GET stream: both held their
/// connections through the whole 10 s grace period (the Python and
/// TypeScript SDKs 1.x always hold a GET stream open).
#[tokio::test(flavor = "multi_thread")]
async fn a_signal_ends_listen_and_get_streams_at_once() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let mut s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let (sid, _) = open_session(&c, &s.url).await;
    let get = c
        .get(&s.url)
        .bearer_auth(TOKEN)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &sid)
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    let body = stateless_request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let listen = post(&c, &s.url, &body)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(listen.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let took = tokio::task::block_in_place(|| s.terminate(Duration::from_secs(20)));
    let took = took.expect("the server exited");
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after SIGTERM"
    );
    let text = listen.text().await.unwrap_or_default();
    assert!(
        text.contains("complete"),
        "the listen stream's final result: {text}"
    );
    drop(get);
}

/// Long-lived streams hold a connection each for as long as they are
/// open: 256 listen streams took every connection of a default server, and
/// every new client was then closed as accepted (a helper's find). They
/// get three quarters of `--max-connections` (6 of 8 here); one more is
/// 503, requests are still served, and a closed stream frees its place.
#[tokio::test]
async fn listening_streams_leave_connections_for_requests() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &["--max-connections", "8"]);
    let c = client();
    let listen = |id| {
        let body = stateless_request(
            id,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        );
        post(&c, &s.url, &body).bearer_auth(TOKEN).send()
    };
    let mut open = Vec::new();
    for id in 0..6 {
        let r = listen(id).await.unwrap();
        assert_eq!(r.status(), 200, "listen stream {id}");
        open.push(r);
    }
    let r = listen(6).await.unwrap();
    assert_eq!(r.status(), 503);
    // Closed after it: a client retrying on the same connection held it.
    assert_eq!(r.headers()["connection"], "close");
    assert!(r.text().await.unwrap().contains("--max-connections"));
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200, "a request is served beside the streams");
    drop(open.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(listen(7).await.unwrap().status(), 200);
}

/// A request's body is read before it takes an in-flight slot: clients
/// that send headers and never their body hold none (they held all 64 for
/// good), and listening streams take none either (64 of them locked every
/// other request out). The stalled ones are answered 408 after 30 s.
#[tokio::test]
async fn stalled_bodies_and_listening_streams_hold_no_slot() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &["--max-in-flight", "2"]);
    let authority = s.base.trim_start_matches("http://").to_string();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut tcp = raw_connection(&s.base);
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nContent-Length: 100\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).unwrap();
        stalled.push(tcp);
    }
    let c = client();
    let mut listening = Vec::new();
    for id in 0..3 {
        let body = stateless_request(
            id,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        );
        let r = post(&c, &s.url, &body)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "listen stream {id}");
        listening.push(r);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = post_authed(
        &c,
        &s.url,
        &call_body(9, "read_file", json!({"path": "inside.txt"})),
    )
    .await;
    assert_eq!(r.status(), 200);
    let msg = message_of(r).await;
    assert_eq!(
        msg["result"]["structuredContent"]["content"], "inside\n",
        "{msg}"
    );
    drop(listening);
    // A body not sent within 30 s is answered 408 (and its connection closed).
    let started = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        let mut tcp = stalled.pop().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(45))).unwrap();
        let mut head = [0u8; 64];
        let n = tcp.read(&mut head).unwrap();
        String::from_utf8_lossy(&head[..n]).to_string()
    })
    .await
    .unwrap();
    assert!(status.starts_with("HTTP/1.1 408"), "{status:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}

/// A body that is not a JSON-RPC message gets 400 and the JSON-RPC error
/// (answering its id when it can be read), as on stdio; it got 415 with a
/// plain-text deserializer message.
#[tokio::test]
async fn unreadable_bodies_get_a_json_rpc_error() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let cases: [(&[u8], i64, Value); 4] = [
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}",
            -32700,
            json!(5),
        ),
        (
            br#"{"jsonrpc":"2.0","id":"a","method":"ping"} {}"#,
            -32700,
            json!("a"),
        ),
        (br#"{"jsonrpc":"2.0","id":6}"#, -32600, json!(6)),
        (b"garbage", -32700, Value::Null),
    ];
    for (body, code, id) in cases {
        let r = c
            .post(&s.url)
            .bearer_auth(TOKEN)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{}", String::from_utf8_lossy(body));
        let msg: Value = r.json().await.unwrap();
        assert_eq!(
            (&msg["error"]["code"], &msg["id"]),
            (&json!(code), &id),
            "{msg}"
        );
    }
}

/// 2025-11-25 sessions hold memory until they expire (5 minutes idle):
/// past `--max-sessions` an `initialize` is 503 (30,000 took 2.5 GB).
#[tokio::test]
async fn sessions_are_bounded() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &["--max-sessions", "3"]);
    let c = client();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(initialize_2025(&c, &s.url).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 503]);
    // An id that is not visible ASCII, or two of them, is 400: one that was
    // not text read as no session, here and to rmcp, which made a session
    // past the bound for each (3,000 against 3; a helper's find).
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "http-test", "version": "1"}}});
    let odd = reqwest::header::HeaderValue::from_bytes(b"\xff\xfe").unwrap();
    let spaced = reqwest::header::HeaderValue::from_static("a b");
    for ids in [
        vec![odd],
        vec![spaced],
        vec!["a".parse().unwrap(), "b".parse().unwrap()],
    ] {
        let mut r = c
            .post(&s.url)
            .bearer_auth(TOKEN)
            .header("Accept", "application/json, text/event-stream")
            .json(&init);
        for id in ids {
            r = r.header("Mcp-Session-Id", id);
        }
        assert_eq!(r.send().await.unwrap().status(), 400);
    }
    assert_eq!(initialize_2025(&c, &s.url).await.status(), 503);
    // Stateless requests need no session and are still served.
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200);
}

/// A body with a `Content-Encoding` is 415 (it was parsed as it came,
/// a gzip body as JSON text), and an MCP header sent twice is 400 (rmcp
/// read the first, a proxy in front may read the last); `identity` and
/// one of each are served.
#[tokio::test]
async fn encoded_bodies_and_doubled_mcp_headers_are_refused() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let with = |name: &'static str, value: &'static str| {
        post(&c, &s.url, &list_body())
            .bearer_auth(TOKEN)
            .header(name, value)
    };
    for encoding in ["gzip", "br, identity", "deflate", "identity, gzip"] {
        let r = with("Content-Encoding", encoding).send().await.unwrap();
        assert_eq!(r.status(), 415, "Content-Encoding: {encoding}");
        assert_eq!(r.headers()["accept-encoding"], "identity");
        let text = r.text().await.unwrap();
        assert!(text.contains("Content-Encoding"), "{text}");
    }
    // No coding at all, however it is written.
    for encoding in ["identity", "", "identity, IDENTITY", " identity ,"] {
        let r = with("Content-Encoding", encoding).send().await.unwrap();
        assert_eq!(r.status(), 200, "Content-Encoding: {encoding:?}");
    }
    // Twice: a JSON-RPC error the SDKs map (-32020 for MCP's headers).
    for (doubled, value, code) in [
        ("MCP-Protocol-Version", "2025-11-25", -32020),
        ("Mcp-Method", "tools/list", -32020),
        ("Content-Type", "text/plain", -32600),
    ] {
        let r = with(doubled, value).send().await.unwrap();
        assert_eq!(r.status(), 400, "{doubled} twice");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("must be one header"), "{answer}");
    }
    // A transfer coding hyper does not decode, before `chunked`: 501 (it
    // was taken as chunked, the gzip bytes read as the body).
    let authority = s.url.trim_start_matches("http://").trim_end_matches("/mcp");
    for (coding, want) in [("gzip, chunked", 501), ("chunked", 200)] {
        let body = serde_json::to_string(&list_body()).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n\
             Transfer-Encoding: {coding}\r\nConnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        );
        assert_eq!(
            raw_status(authority, &head),
            want,
            "Transfer-Encoding: {coding}"
        );
    }
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(r.status(), 200);
}

/// `Mcp-Method` and `Mcp-Name`, when sent, must say what the body asks for
/// in a 2025-11-25 session too (rmcp checks them on 2026-07-28 requests
/// only): a call of `write_file` whose headers said `tools/list` or
/// `read_file` ran, and a proxy routing on the headers could be steered
/// (a helper's find). Now 400 with -32020, by the request's id, not run.
#[tokio::test]
async fn mcp_headers_that_disagree_with_the_body_are_refused_in_sessions() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let (sid, _) = open_session(&c, &s.url).await;
    let write = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "steered.txt", "content": "x"}}});
    let not_text = |v: &[u8]| reqwest::header::HeaderValue::from_bytes(v).unwrap();
    for (header, value) in [
        ("Mcp-Method", not_text(b"tools/list")),
        ("Mcp-Name", not_text(b"read_file")),
        ("Mcp-Name", not_text(b"=?base64?cmVhZF9maWxl?=")),
        // Not text: it read as not sent, and the call ran.
        ("Mcp-Method", not_text(b"tools/call\xff")),
        ("Mcp-Name", not_text(b"write_file\xa0")),
    ] {
        let r = in_session(&c, &s.url, &sid, &write)
            .header(header, value.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{header}: {value:?}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
        assert_eq!(answer["id"], 7, "{answer}");
        assert!(
            !wt.path().join("steered.txt").exists(),
            "{header} ran the call"
        );
    }
    let r = in_session(&c, &s.url, &sid, &write)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "=?base64?d3JpdGVfZmlsZQ==?=")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer = message_of(r).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(wt.path().join("steered.txt").exists());
}

/// A 2026-07-28 `tools/call` of a tool whose input schema mirrors an
/// argument into a header (`x-mcp-header`): the `Mcp-Param-*` header must
/// agree with the body, be there, and come once; else 400 with -32020, as
/// the spec asks, and nothing runs. rmcp checks it with the server's
/// `get_tool`, which the server lacked: every such request passed, and a
/// proxy routing on the header could be steered (a helper's find).
#[tokio::test]
async fn tool_argument_headers_are_checked_against_the_body() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/conformance.wasm"]);
    let s = token_server(wt.path(), plugins.path(), &[]);
    let c = client();
    let body = call_body(1, "routed_by_header", json!({"region": "eu-west"}));
    let with = |regions: &[&'static str]| {
        let mut r = post(&c, &s.url, &body).bearer_auth(TOKEN);
        for region in regions {
            r = r.header("Mcp-Param-Region", *region);
        }
        r
    };
    for (regions, why) in [
        (&["us-east"][..], "disagrees"),
        (&[][..], "missing"),
        (&["eu-west", "us-east"][..], "twice"),
    ] {
        let r = with(regions).send().await.unwrap();
        assert_eq!(r.status(), 400, "{why}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{why}: {answer}");
    }
    // An integer past JavaScript's safe range, whose header clients leave
    // out (and rmcp would read back as a float): numeric headers go
    // unchecked, the call is served (it was refused -32020).
    let big = call_body(
        2,
        "routed_by_header",
        json!({"region": "eu-west", "n": 1u64 << 60}),
    );
    let r = post(&c, &s.url, &big)
        .bearer_auth(TOKEN)
        .header("Mcp-Param-Region", "eu-west")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = with(&["eu-west"]).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let answer = rpc_message(&r.text().await.unwrap());
    assert_eq!(
        answer["result"]["structuredContent"]["received"]["region"], "eu-west",
        "{answer}"
    );
}

/// In a 2025-11-25 session, a request reusing the id of one still running
/// is refused (400, -32600) and not run: rmcp's session answered only one
/// of the two, and the other's stream waited forever holding its slot.
#[tokio::test]
async fn a_session_request_reusing_an_id_in_flight_is_refused() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let s = token_server(wt.path(), plugins.path(), &["--timeout-ms", "2000"]);
    let c = client();
    let (sid, _) = open_session(&c, &s.url).await;
    let in_session = |body: Value| in_session(&c, &s.url, &sid, &body);
    let call = |tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": 42, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
    };
    let slow = tokio::spawn(in_session(call("sleep_far", json!({}))).send());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = json!({"path": "second.txt", "content": "x"});
    let r = in_session(call("write_file", second)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let msg: Value = r.json().await.unwrap();
    assert_eq!(
        (&msg["error"]["code"], &msg["id"]),
        (&json!(-32600), &json!(42)),
        "{msg}"
    );
    assert!(
        !wt.path().join("second.txt").exists(),
        "the refused request ran"
    );
    let first = tokio::time::timeout(Duration::from_secs(20), slow)
        .await
        .expect("the first request is answered")
        .unwrap()
        .unwrap();
    let msg = message_of(first).await;
    assert_eq!(msg["id"], 42, "{msg}");
    assert!(
        msg["result"]["isError"] == json!(true),
        "its deadline: {msg}"
    );
    // Once answered, the id may be used again.
    let r = in_session(call("read_file", json!({"path": "inside.txt"})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// A chunked body that breaks the chunked encoding is the client's error:
/// 400, not 500, and the server serves the next request.
#[tokio::test]
async fn a_malformed_chunked_body_is_400() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let authority = s.base.trim_start_matches("http://").to_string();
    let mut tcp = raw_connection(&s.base);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    );
    tcp.write_all(head.as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let n = tcp.read(&mut buf).unwrap();
    let status = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    let r = post_authed(&client(), &s.url, &list_body()).await;
    assert_eq!(r.status(), 200);
}

/// A session's request keeps its in-flight slot while it runs, also after
/// its client closed the POST: rmcp's session worker goes on running it
/// (a disconnection is not a cancellation), and with the slot freed at the
/// close one client ran 16 calls at once past `--max-in-flight 2` and
/// queued 30,000 (a helper's find).
#[tokio::test]
async fn a_session_call_keeps_its_slot_after_its_post_is_closed() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let s = token_server(
        wt.path(),
        plugins.path(),
        &["--max-in-flight", "2", "--timeout-ms", "4000"],
    );
    let (sid, _) = open_session(&client(), &s.url).await;
    let mut statuses = Vec::new();
    for id in 100..104 {
        // A client of its own for each, so that dropping the response
        // closes its connection.
        let c = client();
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "sleep_forever", "arguments": {}}});
        let r = in_session(&c, &s.url, &sid, &call).send().await.unwrap();
        statuses.push(r.status().as_u16());
        drop((r, c));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(statuses, [200, 200, 503, 503], "the closed calls' slots");
    let c = client();
    let r = post_authed(&c, &s.url, &list_body()).await;
    assert_eq!(
        r.status(),
        503,
        "the two calls still run and hold both slots"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while post_authed(&c, &s.url, &list_body()).await.status() != 200 {
        assert!(
            Instant::now() < deadline,
            "the slots come back at the calls' deadline"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A refusal of who is asking (401 without a token, 403 for a foreign
/// Host or Origin) closes its connection: a client without a token kept
/// 256 keep-alive connections by asking again every 5 s, and clients with
/// the token got none (a helper's find). A refused value is named by its
/// head (a 500 KB `Host` was logged whole at every request).
#[test]
fn refusals_of_who_is_asking_close_their_connection() {
    let (wt, plugins) = (worktree(), workspace_plugins());
    let s = token_server(wt.path(), plugins.path(), &[]);
    let authority = s.base.trim_start_matches("http://").to_string();
    let body = list_body().to_string();
    let request = |extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\n{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{body}",
            support::http::STATELESS,
            body.len()
        )
    };
    let answer_then_closed = |head: String| {
        let mut tcp = raw_connection(&s.base);
        tcp.write_all(head.as_bytes()).unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tcp.read(&mut buf).unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]).to_string();
        tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        (answer, closed_by_server(&mut tcp))
    };
    let (answer, closed) = answer_then_closed(request(""));
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(closed, "a 401 left its connection open");
    let long_origin = format!("http://{}.example", "o".repeat(100_000));
    let (answer, closed) = answer_then_closed(request(&format!("Origin: {long_origin}\r\n")));
    assert!(answer.starts_with("HTTP/1.1 403"), "{}", &answer[..200]);
    assert!(
        answer.contains("(100015 bytes)") && answer.len() < 1024,
        "{answer}"
    );
    assert!(closed, "a 403 left its connection open");
    // Answered with no token asked (any path's 404, the public metadata):
    // closed too (kept, they counted as a client's keep-alive, and
    // tokenless clients pushed out token holders').
    for path in ["/x", "/", "/.well-known/oauth-protected-resource"] {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        let (answer, closed) = answer_then_closed(head);
        let refused = ["HTTP/1.1 401", "HTTP/1.1 404"]
            .iter()
            .any(|s| answer.starts_with(s));
        assert!(refused, "{path}: {answer}");
        assert!(closed, "GET {path} left its connection open");
    }
    // With the token, the connection is kept for the next request.
    let (answer, closed) =
        answer_then_closed(request(&format!("Authorization: Bearer {TOKEN}\r\n")));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!closed, "a served request's connection was closed");
}
