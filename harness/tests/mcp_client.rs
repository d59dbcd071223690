//! Client side against the in-process fake MCP server.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use wasm_mcp_harness::mcp::adapter::ArtifactStore;
use wasm_mcp_harness::mcp::connection::{ConnectError, Connection, ConnectionHandle, Connector};
use wasm_mcp_harness::mcp::discovery::{discover, Discovery, DiscoveryError, MAX_PAGES};
use wasm_mcp_harness::run::policy::{Policy, ServerPolicy};
use wasm_mcp_harness::run::session::ToolSession;
use wasm_mcp_harness::run::trace::Trace;
use wasm_mcp_harness::tools::faults::CallState;
use wasm_mcp_harness::tools::naming::local_name;
use wasm_mcp_harness::tools::pipeline::{
    FailureKind, NonInteractiveApprover, ToolPipeline, MAX_MODEL_TEXT,
};
use wasm_mcp_harness_testing::{
    tool, tool_with_output, Behavior, CursorMode, FakeConfig, FakeServer,
};

const V: &str = "2025-11-25";

fn policy(extra: &str) -> Policy {
    Policy::from_toml(&format!(
        r#"
[[servers]]
id = "ws"
command = "unused"
args = ["--worktree", "{{worktree}}"]
allowed_tools = ["read_file", "list_dir"]
request_timeout_ms = 2000
[servers.tools.read_file]
approval = "auto"
[servers.tools.list_dir]
approval = "auto"
{extra}
"#
    ))
    .unwrap()
}

fn sp(p: &Policy) -> ServerPolicy {
    p.servers[0].clone()
}

async fn open(fake: &FakeServer) -> Result<ConnectionHandle, ConnectError> {
    Connection::open(
        "ws",
        fake.connector(),
        &[V.to_string()],
        Duration::from_secs(5),
    )
    .await
}

#[tokio::test]
async fn handshake_checks_version_and_capability() {
    let ok = FakeServer::new(FakeConfig::default());
    let c = open(&ok).await.unwrap();
    assert_eq!(c.facts().protocol_version, V);
    assert!(c.facts().tools_list_changed);
    assert!(c.is_alive());
    c.close().await;
    assert!(!c.is_alive(), "closed by its owner");

    let old = FakeServer::new(FakeConfig {
        protocol_version: Some("2024-11-05".into()),
        ..Default::default()
    });
    match open(&old).await {
        Err(ConnectError::VersionRejected { negotiated, .. }) => {
            assert_eq!(negotiated, "2024-11-05")
        }
        other => panic!("expected VersionRejected, got {:?}", other.err()),
    }
    let no_tools = FakeServer::new(FakeConfig {
        tools_capability: false,
        ..Default::default()
    });
    assert!(matches!(
        open(&no_tools).await,
        Err(ConnectError::NoToolsCapability { .. })
    ));
}

/// The client offers the newest allowed version, whatever the list order.
#[tokio::test]
async fn the_newest_allowed_version_is_offered() {
    let echo = FakeServer::new(FakeConfig::default());
    let allowed = ["2025-06-18", V, "2025-03-26"].map(String::from);
    let c = Connection::open("ws", echo.connector(), &allowed, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(c.facts().protocol_version, V);
    c.close().await;
    let bad =
        Policy::from_toml("[[servers]]\nid='ws'\ncommand='x'\nprotocol_versions=['latest']\n")
            .unwrap_err();
    assert!(
        format!("{bad:#}").contains("`latest` is not an MCP version"),
        "{bad:#}"
    );
}

#[tokio::test]
async fn pagination_and_limits() {
    let p = policy("");
    // Three pages, all collected.
    let fake = FakeServer::new(FakeConfig {
        pages: vec![
            vec![tool("read_file")],
            vec![tool("x")],
            vec![tool("list_dir")],
        ],
        ..Default::default()
    });
    let c = open(&fake).await.unwrap();
    let tools = discover(&c, &sp(&p), Discovery::First).await.unwrap().tools;
    let names: Vec<_> = tools.iter().filter_map(|t| t.remote_name()).collect();
    assert_eq!(
        names,
        ["read_file", "list_dir"],
        "x is not allowed → not exposed"
    );
    assert_eq!(fake.0.list_requests.load(Ordering::SeqCst), 3);

    let repeat = FakeServer::new(FakeConfig {
        pages: vec![vec![tool("read_file"), tool("list_dir")]],
        cursor_mode: CursorMode::Repeat,
        ..Default::default()
    });
    let c = open(&repeat).await.unwrap();
    assert!(matches!(
        discover(&c, &sp(&p), Discovery::First).await,
        Err(DiscoveryError::RepeatedCursor(_))
    ));

    // An empty cursor ends the list, as the official SDKs read it.
    let empty_at_end = FakeServer::new(FakeConfig {
        pages: vec![vec![tool("read_file")], vec![tool("list_dir")]],
        cursor_mode: CursorMode::EmptyAtEnd,
        ..Default::default()
    });
    let c = open(&empty_at_end).await.unwrap();
    let found = discover(&c, &sp(&p), Discovery::First).await.unwrap();
    assert_eq!(found.tools.len(), 2);
    assert_eq!(empty_at_end.0.list_requests.load(Ordering::SeqCst), 2);

    let endless = FakeServer::new(FakeConfig {
        cursor_mode: CursorMode::Endless,
        ..Default::default()
    });
    let c = open(&endless).await.unwrap();
    assert!(matches!(
        discover(&c, &sp(&p), Discovery::First).await,
        Err(DiscoveryError::TooManyPages)
    ));
    assert_eq!(endless.0.list_requests.load(Ordering::SeqCst), MAX_PAGES);

    let many: Vec<Value> = (0..1001).map(|i| tool(&format!("t{i}"))).collect();
    let big = FakeServer::new(FakeConfig {
        pages: vec![many],
        ..Default::default()
    });
    let c = open(&big).await.unwrap();
    assert!(matches!(
        discover(&c, &sp(&p), Discovery::First).await,
        Err(DiscoveryError::TooManyTools)
    ));

    let dup = FakeServer::new(FakeConfig {
        pages: vec![
            vec![tool("read_file"), tool("list_dir")],
            vec![tool("read_file")],
        ],
        ..Default::default()
    });
    let c = open(&dup).await.unwrap();
    assert!(
        matches!(discover(&c, &sp(&p), Discovery::First).await, Err(DiscoveryError::DuplicateName(n)) if n == "read_file")
    );

    let mut bad = tool("read_file");
    bad["inputSchema"] = json!("string");
    let bad_schema = FakeServer::new(FakeConfig {
        pages: vec![vec![bad, tool("list_dir")]],
        ..Default::default()
    });
    let c = open(&bad_schema).await.unwrap();
    let e = discover(&c, &sp(&p), Discovery::First).await.unwrap_err();
    assert!(
        matches!(e, DiscoveryError::NonObjectInputSchema { .. }),
        "{e}"
    );

    let missing = FakeServer::new(FakeConfig {
        pages: vec![vec![tool("read_file")]],
        ..Default::default()
    });
    let c = open(&missing).await.unwrap();
    assert!(
        matches!(discover(&c, &sp(&p), Discovery::First).await, Err(DiscoveryError::MissingAllowedTools(m)) if m == ["list_dir"])
    );
}

async fn session(fake: &FakeServer, p: Policy) -> (ToolSession, Arc<Trace>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let trace = Arc::new(Trace::new());
    let mut connectors: HashMap<String, Arc<dyn Connector>> = HashMap::new();
    connectors.insert("ws".into(), fake.connector());
    let base = ToolPipeline::new(Arc::new(NonInteractiveApprover::default()));
    let s = ToolSession::start(
        p,
        connectors,
        &base,
        "t",
        Arc::new(ArtifactStore::new(dir.path().join("artifacts"))),
        trace.clone(),
    )
    .await
    .unwrap();
    (s, trace, dir)
}

fn read_file() -> String {
    local_name("ws", "read_file")
}

#[tokio::test]
async fn adapter_validates_before_sending_and_maps_errors() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert(
        "list_dir".into(),
        Behavior::Result(
            json!({"content": [{"type": "text", "text": "no such dir"}], "isError": true}),
        ),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    let r = s.pipeline();
    let ok = r.invoke(&read_file(), r#"{"path": "README.md"}"#).await;
    assert!(!ok.is_error(), "{}", ok.model_text);
    assert_eq!(
        serde_json::from_str::<Value>(&ok.model_text).unwrap(),
        json!({"path": "README.md"})
    );
    assert_eq!(ok.origin.as_ref().unwrap().remote_name, "read_file");

    let bad = r.invoke(&read_file(), r#"{"path": 7}"#).await;
    assert_eq!(bad.error(), Some(FailureKind::InvalidArguments));
    assert_eq!(bad.state(), CallState::NotSent);
    assert_eq!(fake.calls().len(), 1, "invalid args never reach the server");

    let err = r
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "nope"}"#)
        .await;
    assert_eq!(err.error(), Some(FailureKind::ToolError));
    assert_eq!(err.model_text, "error: no such dir");
    s.shutdown().await;
}

#[tokio::test]
async fn the_servers_error_kind_is_kept_for_tool_errors() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert(
        "list_dir".into(),
        Behavior::Result(json!({
            "content": [{"type": "text", "text": "tool timed out"}],
            "isError": true,
            "_meta": {wasm_mcp_protocol::ERROR_KIND_META: "timeout"},
        })),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    let r = s.pipeline();
    let err = r
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "x"}"#)
        .await;
    assert_eq!(err.error(), Some(FailureKind::ToolError));
    assert_eq!(
        err.server_error_kind(),
        Some(wasm_mcp_protocol::ErrorKind::Timeout)
    );
    let ok = r.invoke(&read_file(), r#"{"path": "x"}"#).await;
    assert_eq!(ok.server_error_kind(), None);
    s.shutdown().await;
}

#[tokio::test]
async fn output_contract_violation_goes_to_audit_not_model() {
    let mut cfg = FakeConfig {
        pages: vec![vec![tool_with_output("read_file"), tool("list_dir")]],
        ..Default::default()
    };
    cfg.behaviors.insert(
        "read_file".into(),
        Behavior::Result(json!({"content": [{"type": "text", "text": "leak"}], "structuredContent": {"path": 42, "secret": "leak"}})),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(o.error(), Some(FailureKind::Contract));
    assert!(o.contract_violation().is_some());
    assert!(!o.model_text.contains("leak"));
    assert_eq!(o.state(), CallState::Completed);
    s.shutdown().await;
}

#[tokio::test]
async fn image_content_becomes_artifact_or_is_refused() {
    let png = [0x89u8, b'P', b'N', b'G', 1, 2, 3];
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(png);
    let result = json!({"content": [{"type": "text", "text": "see image"}, {"type": "image", "data": b64, "mimeType": "image/png"}]});
    let mut cfg = FakeConfig::default();
    cfg.behaviors
        .insert("read_file".into(), Behavior::Result(result));
    let fake = FakeServer::new(cfg.clone());
    let (mut s, _t, dir) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(!o.is_error(), "{}", o.model_text);
    assert_eq!(o.artifacts.len(), 1);
    assert!(o.artifacts[0].starts_with(dir.path().join("artifacts")));
    assert_eq!(std::fs::read(&o.artifacts[0]).unwrap(), png);
    assert!(!o.model_text.contains(&b64), "base64 never inlined");
    assert!(o.model_text.contains("artifact"));
    s.shutdown().await;

    let p = policy("").servers[0].clone();
    let toml = format!(
        "[[servers]]\nid='ws'\ncommand='x'\nargs=['--worktree','{{worktree}}']\nallowed_tools={:?}\nartifacts='refuse'\n[servers.tools.read_file]\napproval='auto'\n",
        p.allowed_tools
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, dir) = session(&fake, Policy::from_toml(&toml).unwrap()).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(o.error(), Some(FailureKind::ContentRefused));
    assert!(!dir.path().join("artifacts").exists());
    s.shutdown().await;
}

/// An image repeated as base64 in `structuredContent` (and a data: URL of
/// other bytes) is stored as artifacts and never reaches the model; with a
/// result far over the model-text cap, the artifact references still do.
#[tokio::test]
async fn binary_in_structured_content_is_an_artifact_and_its_reference_is_never_cut() {
    use base64::Engine;
    let png: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    let gif: Vec<u8> = png.iter().rev().copied().collect();
    let enc = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let huge = "y ".repeat(200_000);
    let result = json!({
        "content": [{"type": "image", "data": enc(&png), "mimeType": "image/png"}],
        "structuredContent": {
            "image": {"data": enc(&png), "mimeType": "image/png"},
            "thumb": format!("data:image/gif;base64,{}", enc(&gif)),
            "notes": huge,
        }
    });
    let mut cfg = FakeConfig::default();
    cfg.behaviors
        .insert("read_file".into(), Behavior::Result(result));
    let fake = FakeServer::new(cfg);
    let (mut s, _t, dir) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(!o.is_error(), "{}", &o.model_text[..200]);
    // One artifact for the image (block and structured copy), one for the gif.
    assert_eq!(o.artifacts.len(), 2, "{:?}", o.artifacts);
    assert_eq!(std::fs::read(&o.artifacts[0]).unwrap(), png);
    assert_eq!(std::fs::read(&o.artifacts[1]).unwrap(), gif);
    assert!(o.artifacts[1].extension().is_some_and(|e| e == "gif"));
    assert!(
        !o.model_text.contains(&enc(&png)[..100]),
        "base64 never inlined"
    );
    assert!(
        !o.model_text.contains(&enc(&gif)[..100]),
        "base64 never inlined"
    );
    assert!(o.model_text.contains("[output truncated]"));
    assert!(o.model_text.len() <= MAX_MODEL_TEXT);
    for a in &o.artifacts {
        assert!(
            o.model_text.contains(&a.display().to_string()),
            "reference to {} cut off",
            a.display()
        );
    }
    assert!(o.artifacts[0].starts_with(dir.path().join("artifacts")));
    s.shutdown().await;
}

/// A result of 2,000 distinct images: only the first
/// `MAX_ARTIFACTS_PER_RESULT` are stored, and the model's text stays under
/// its cap with their references and a count of the rest (15,000 image
/// blocks made a 2.3 MB tool message, references being exempt from the cap,
/// and as many files).
#[tokio::test]
async fn a_result_of_thousands_of_images_keeps_a_bounded_few() {
    use base64::Engine;
    use wasm_mcp_harness::mcp::adapter::MAX_ARTIFACTS_PER_RESULT;
    let enc = |i: u32| base64::engine::general_purpose::STANDARD.encode(i.to_le_bytes());
    let blocks: Vec<Value> = (0..2000u32)
        .map(|i| json!({"type": "image", "data": enc(i), "mimeType": "image/png"}))
        .collect();
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert(
        "read_file".into(),
        Behavior::Result(json!({"content": blocks})),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, dir) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(
        !o.is_error(),
        "{}",
        &o.model_text[..200.min(o.model_text.len())]
    );
    assert_eq!(o.artifacts.len(), MAX_ARTIFACTS_PER_RESULT);
    let files = std::fs::read_dir(dir.path().join("artifacts"))
        .unwrap()
        .count();
    assert_eq!(files, MAX_ARTIFACTS_PER_RESULT);
    assert!(
        o.model_text.len() <= MAX_MODEL_TEXT,
        "{}",
        o.model_text.len()
    );
    for a in &o.artifacts {
        assert!(o.model_text.contains(&a.display().to_string()));
    }
    let rest = 2000 - MAX_ARTIFACTS_PER_RESULT;
    assert!(
        o.model_text.contains(&format!("{rest} more")),
        "{}",
        o.model_text
    );
    s.shutdown().await;
}

#[tokio::test]
async fn timeout_is_unknown_and_retried_only_when_policy_allows() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors
        .insert("read_file".into(), Behavior::Sleep(Duration::from_secs(3)));
    let fake = FakeServer::new(cfg.clone());
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(o.error(), Some(FailureKind::Fault));
    assert_eq!(o.state(), CallState::Unknown);
    assert!(o.model_text.contains("unknown"), "{}", o.model_text);
    assert_eq!(fake.calls().len(), 1, "no automatic retry");
    assert_eq!(o.attempts, 1);
    s.shutdown().await;

    let retry = policy("").servers[0].clone();
    let toml = format!(
        "[[servers]]\nid='ws'\ncommand='x'\nargs=['--worktree','{{worktree}}']\nallowed_tools={:?}\nrequest_timeout_ms=200\n[servers.tools.read_file]\napproval='auto'\nread_only=true\nidempotent=true\n",
        retry.allowed_tools
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, Policy::from_toml(&toml).unwrap()).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(o.state(), CallState::Unknown);
    assert_eq!(o.attempts, 2);
    assert_eq!(fake.calls().len(), 2, "read-only + idempotent → one retry");
    s.shutdown().await;
}

#[tokio::test]
async fn server_death_mid_call_then_reconnect_at_safe_point() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert("list_dir".into(), Behavior::Die);
    let fake = FakeServer::new(cfg);
    let (mut s, trace, _d) = session(&fake, policy("")).await;
    let v1 = s.snapshot().version;
    let o = s
        .pipeline()
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "."}"#)
        .await;
    assert_eq!(o.state(), CallState::Unknown, "{}", o.model_text);
    assert_eq!(o.error(), Some(FailureKind::Fault));
    // Wait for the owner to notice.
    for _ in 0..40 {
        if !s.connection("ws").unwrap().is_alive() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!s.connection("ws").unwrap().is_alive());
    s.safe_point().await.unwrap();
    assert!(s.connection("ws").unwrap().is_alive());
    assert_eq!(fake.0.connections.load(Ordering::SeqCst), 2);
    assert_eq!(s.snapshot().version, v1 + 1, "rediscovered");
    assert_eq!(trace.of_kind("server_reconnected").len(), 1);
    let ok = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(!ok.is_error(), "works after reconnect: {}", ok.model_text);
    s.shutdown().await;
}

#[tokio::test]
async fn list_changed_refreshes_only_at_safe_point() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert(
        "list_dir".into(),
        Behavior::ChangeTools(vec![vec![
            tool("read_file"),
            tool("list_dir"),
            tool("search"),
        ]]),
    );
    let p = policy("").servers[0].clone();
    let toml = format!(
        "[[servers]]\nid='ws'\ncommand='x'\nargs=['--worktree','{{worktree}}']\nallowed_tools=['read_file','list_dir','search']\n[servers.tools.list_dir]\napproval='auto'\n# {}\n",
        p.id
    );
    // search isn't listed initially, so start with it not required: list it from the beginning too.
    cfg.pages = vec![vec![tool("read_file"), tool("list_dir"), {
        let mut t = tool("search");
        t["description"] = json!("old");
        t
    }]];
    let fake = FakeServer::new(cfg);
    let (mut s, _trace, _d) = session(&fake, Policy::from_toml(&toml).unwrap()).await;
    let before = s.snapshot();
    assert_eq!(before.version, 1);
    let o = s
        .pipeline()
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "."}"#)
        .await;
    assert!(!o.is_error(), "{}", o.model_text);
    s.connection("ws").unwrap().list_changed_notified().await;
    // Still round N: snapshot unchanged until the safe point.
    assert_eq!(s.snapshot().version, 1);
    let desc = |snap: &wasm_mcp_harness::tools::catalog::CatalogSnapshot| {
        snap.get(&local_name("ws", "search"))
            .unwrap()
            .description
            .clone()
    };
    assert_eq!(desc(&s.snapshot()), "old");
    s.safe_point().await.unwrap();
    assert_eq!(s.snapshot().version, 2);
    assert_eq!(desc(&s.snapshot()), "fake search");
    assert_eq!(desc(&before), "old", "the old round's snapshot is frozen");
    // No further change → no refresh.
    s.safe_point().await.unwrap();
    assert_eq!(s.snapshot().version, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn undecodable_or_missing_binary_content_is_refused_not_faked() {
    let result = json!({"content": [
        {"type": "text", "text": "see image"},
        {"type": "image", "data": "%%% not base64 %%%", "mimeType": "image/png"},
    ]});
    let mut cfg = FakeConfig::default();
    cfg.behaviors
        .insert("read_file".into(), Behavior::Result(result));
    cfg.behaviors.insert(
        "list_dir".into(),
        Behavior::Result(json!({"content": [{"type": "audio", "mimeType": "audio/wav"}]})),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, dir) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(
        o.error(),
        Some(FailureKind::ContentRefused),
        "{}",
        o.model_text
    );
    assert!(o.model_text.contains("base64"), "{}", o.model_text);
    assert!(o.artifacts.is_empty());
    let o = s
        .pipeline()
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "a"}"#)
        .await;
    assert_eq!(
        o.error(),
        Some(FailureKind::ContentRefused),
        "{}",
        o.model_text
    );
    assert!(
        !dir.path().join("artifacts").exists(),
        "no placeholder file stored"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn null_structured_content_leaves_the_text_result() {
    let mut cfg = FakeConfig::default();
    cfg.behaviors.insert(
        "read_file".into(),
        Behavior::Result(
            json!({"content": [{"type": "text", "text": "hello"}], "structuredContent": null}),
        ),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(!o.is_error(), "{}", o.model_text);
    assert_eq!(o.model_text, "hello");
    s.shutdown().await;
}

#[tokio::test]
async fn call_on_a_dead_connection_is_not_sent_rather_than_unknown() {
    let fake = FakeServer::new(FakeConfig::default());
    let (mut s, _t, _d) = session(&fake, policy("")).await;
    s.connection("ws").unwrap().close().await;
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert_eq!(o.error(), Some(FailureKind::Fault));
    assert_eq!(o.state(), CallState::NotSent, "{}", o.model_text);
    assert!(!o.model_text.contains("unknown"), "{}", o.model_text);
    assert!(fake.calls().is_empty());
    s.shutdown().await;
}

/// Frames rmcp would drop (over its 16 MiB line limit) or ignore (not JSON)
/// end their call promptly with a clear error instead of a timeout; a bad
/// frame naming no id ends the connection, so the pending call fails at once.
#[tokio::test]
async fn oversized_or_garbage_frames_fail_their_call_promptly() {
    use wasm_mcp_harness::mcp::frame_guard::MAX_FRAME_BYTES;
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":{{id}},"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(MAX_FRAME_BYTES + 1024)
    );
    let mut cfg = FakeConfig::default();
    cfg.behaviors
        .insert("read_file".into(), Behavior::RawLine(huge));
    cfg.behaviors.insert(
        "list_dir".into(),
        Behavior::RawLine(r#"{"jsonrpc":"2.0","id":{id},"result":{"#.into()),
    );
    let fake = FakeServer::new(cfg.clone());
    let slow = policy("");
    let toml_timeout = |p: &Policy| {
        let mut p = p.clone();
        p.servers[0].request_timeout_ms = 20_000;
        p
    };
    let (mut s, _t, _d) = session(&fake, toml_timeout(&slow)).await;
    let started = std::time::Instant::now();
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.error(), Some(FailureKind::Fault), "{}", o.model_text);
    assert!(
        o.model_text.contains("exceeds the frame limit"),
        "{}",
        o.model_text
    );
    assert_eq!(
        o.state(),
        CallState::Unknown,
        "the call ran; its answer was lost"
    );
    let o = s
        .pipeline()
        .invoke(&local_name("ws", "list_dir"), r#"{"path": "."}"#)
        .await;
    assert!(o.model_text.contains("not valid JSON"), "{}", o.model_text);
    assert!(
        s.connection("ws").unwrap().is_alive(),
        "errors with an id keep the connection"
    );
    s.shutdown().await;

    // A broken frame naming no id (a line that does not start as JSON does
    // is a server's stray output, skipped: `frame_guard`).
    cfg.behaviors.insert(
        "read_file".into(),
        Behavior::RawLine(r#"{"jsonrpc":"2.0","result":{"content":"#.into()),
    );
    let fake = FakeServer::new(cfg);
    let (mut s, _t, _d) = session(&fake, toml_timeout(&slow)).await;
    let started = std::time::Instant::now();
    let o = s.pipeline().invoke(&read_file(), r#"{"path": "a"}"#).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.error(), Some(FailureKind::Fault), "{}", o.model_text);
    assert!(!o.model_text.contains("timed out"), "{}", o.model_text);
    s.shutdown().await;
}
