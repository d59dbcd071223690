//! The harness over Streamable HTTP against the real `wasm-mcp serve --http`
//! with `--auth-token-env`: a policy `url` server with `bearer_token_env`
//! goes through the same handshake, discovery, validation and calls as a
//! stdio one, sees `list_changed` after a hot reload, and never writes the
//! token to its trace; a wrong or missing token is a clear connect error;
//! and `run_task` runs the sample task end to end over HTTP.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use wasm_mcp_harness::mcp::adapter::ArtifactStore;
use wasm_mcp_harness::mcp::connection::{ConnectError, Connector};
use wasm_mcp_harness::mcp::http_transport::HttpConnector;
use wasm_mcp_harness::run::keep::WorkOutcome;
use wasm_mcp_harness::run::policy::{Endpoint, Placeholders, Policy};
use wasm_mcp_harness::run::session::{SessionError, ToolSession};
use wasm_mcp_harness::run::trace::Trace;
use wasm_mcp_harness::tools::naming::local_name;
use wasm_mcp_harness::tools::pipeline::{NonInteractiveApprover, ToolPipeline};
use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions};

mod support;
use support::http::HttpServer;
use support::{plugin, plugin_dir};

const TOKEN: &str = "harness-http-token-0123456789abcdef";

/// A server protected by `TOKEN` (given to the child only).
fn token_server(worktree: &Path, plugins: &Path) -> HttpServer {
    HttpServer::start(
        worktree,
        plugins,
        &["--auth-token-env", "SERVER_SIDE_TOKEN", "--watch-ms", "200"],
        &[("SERVER_SIDE_TOKEN", TOKEN)],
    )
}

fn policy_text(url: &str, token_env: &str) -> String {
    let tools = ["read_file", "list_dir", "search", "write_file"];
    let mut text = format!(
        "max_rounds = 16\n[[servers]]\nid = \"ws\"\nurl = \"{url}\"\n\
         bearer_token_env = \"{token_env}\"\nallowed_tools = {tools:?}\nrequest_timeout_ms = 30000\n"
    );
    for t in tools {
        text.push_str(&format!("[servers.tools.{t}]\napproval = \"auto\"\n"));
    }
    text
}

async fn session(policy: Policy) -> Result<(ToolSession, Arc<Trace>), SessionError> {
    let ph = Placeholders {
        worktree: "/unused".into(),
        runtime_dir: "/unused".into(),
        repo: "/unused".into(),
    };
    let Endpoint::Http(spec) = policy.servers[0].endpoint(&ph).unwrap() else {
        panic!("a url server")
    };
    let mut connectors: HashMap<String, Arc<dyn Connector>> = HashMap::new();
    connectors.insert(
        "ws".into(),
        Arc::new(HttpConnector {
            server_id: "ws".into(),
            spec,
        }),
    );
    let trace = Arc::new(Trace::new());
    let base = ToolPipeline::new(Arc::new(NonInteractiveApprover::default()));
    let artifacts = Arc::new(ArtifactStore::new(std::env::temp_dir().join("unused")));
    let s = ToolSession::start(policy, connectors, &base, "t", artifacts, trace.clone()).await?;
    Ok((s, trace))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_calls_and_list_changed_over_http_with_the_token_from_env() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("inside.txt"), "inside over http\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let server = token_server(wt.path(), plugins.path());
    std::env::set_var("HARNESS_HTTP_TOKEN_OK", TOKEN);
    let policy = Policy::from_toml(&policy_text(&server.url, "HARNESS_HTTP_TOKEN_OK")).unwrap();
    let (mut s, trace) = session(policy).await.expect("connects with the token");

    let read = local_name("ws", "read_file");
    let o = s
        .pipeline()
        .invoke(&read, r#"{"path": "inside.txt"}"#)
        .await;
    assert!(!o.is_error(), "{}", o.model_text);
    assert!(
        o.model_text.contains("inside over http"),
        "{}",
        o.model_text
    );
    // Validation is the harness's own, before any request.
    let bad = s.pipeline().invoke(&read, r#"{"path": 7}"#).await;
    assert!(bad.is_error(), "{}", bad.model_text);
    // The server's sandbox answers as a tool error, over HTTP as over stdio.
    let escape = s.pipeline().invoke(&read, r#"{"path": "../x"}"#).await;
    assert!(escape.is_error(), "{}", escape.model_text);

    // Hot reload on the server reaches the harness (rmcp's GET stream).
    let conn = s.connection("ws").unwrap().clone();
    std::fs::copy(
        plugin("test-plugins/conformance.wasm"),
        plugins.path().join("conformance.wasm"),
    )
    .unwrap();
    tokio::time::timeout(Duration::from_secs(60), conn.list_changed_notified())
        .await
        .expect("list_changed over HTTP");
    s.shutdown().await;

    let path = tempfile::NamedTempFile::new().unwrap();
    trace.write_jsonl(path.path()).unwrap();
    let written = std::fs::read_to_string(path.path()).unwrap();
    assert!(written.contains("server_connected"), "{written}");
    assert!(!written.contains(TOKEN), "the token reached the trace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_token_is_a_clear_connect_error() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let server = token_server(wt.path(), plugins.path());

    let wrong = format!("{TOKEN}-not");
    std::env::set_var("HARNESS_HTTP_TOKEN_WRONG", &wrong);
    let policy = Policy::from_toml(&policy_text(&server.url, "HARNESS_HTTP_TOKEN_WRONG")).unwrap();
    let e = session(policy).await.err().expect("refused").to_string();
    assert!(e.contains("`ws`") && e.contains("invalid_token"), "{e}");
    assert!(!e.contains(&wrong), "the token is never in a message: {e}");

    let policy = Policy::from_toml(&policy_text(&server.url, "HARNESS_HTTP_TOKEN_UNSET")).unwrap();
    match session(policy).await.err().expect("refused") {
        SessionError::Connect(e @ ConnectError::Token { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains("HARNESS_HTTP_TOKEN_UNSET") && e.contains("not set"),
                "{e}"
            );
        }
        other => panic!("{other}"),
    }
}

/// A call the harness cancels over HTTP (`notifications/cancelled`, as on
/// stdio) stops the guest: with one call slot, another client's call is
/// answered at once instead of after the 20 s deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_over_http_frees_its_slot() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use wasm_mcp_harness::mcp::connection::Connection;
    use wasm_mcp_harness::tools::faults::CallFault;

    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("inside.txt"), "inside\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let server = HttpServer::start(
        wt.path(),
        plugins.path(),
        &[
            "--auth-token-env",
            "SERVER_SIDE_TOKEN",
            "--max-concurrency",
            "1",
        ],
        &[("SERVER_SIDE_TOKEN", TOKEN), ("WASM_MCP_LOG", "warn")],
    );
    std::env::set_var("HARNESS_HTTP_TOKEN_CANCEL", TOKEN);
    let policy = Policy::from_toml(&policy_text(&server.url, "HARNESS_HTTP_TOKEN_CANCEL")).unwrap();
    let ph = Placeholders {
        worktree: "/unused".into(),
        runtime_dir: "/unused".into(),
        repo: "/unused".into(),
    };
    let Endpoint::Http(spec) = policy.servers[0].endpoint(&ph).unwrap() else {
        panic!("a url server")
    };
    let versions = ["2025-11-25".to_string()];
    let open = || {
        let connector = Arc::new(HttpConnector {
            server_id: "ws".into(),
            spec: spec.clone(),
        });
        Connection::open("ws", connector, &versions, Duration::from_secs(20))
    };
    let call = |tool: &str, args: serde_json::Value| {
        let params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().unwrap().clone());
        ClientRequest::CallToolRequest(CallToolRequest::new(params))
    };
    let (spinner, other) = (open().await.unwrap(), open().await.unwrap());
    let spin = {
        let (c, req) = (spinner.clone(), call("spin", serde_json::json!({})));
        tokio::spawn(async move { c.request(req, Duration::from_secs(60)).await })
    };
    // Time for the call to reach the server and start (a cancel that
    // arrives first finds nothing to stop).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    spinner.cancel_in_flight("test");
    let spun = tokio::time::timeout(Duration::from_secs(5), spin)
        .await
        .expect("the cancelled call returns at once")
        .unwrap();
    assert!(matches!(spun, Err(CallFault::Cancelled(_))), "{spun:?}");
    let started = std::time::Instant::now();
    let read = other
        .request(
            call("read_file", serde_json::json!({"path": "inside.txt"})),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert!(read.to_string().contains("inside"), "{read}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the slot was still held: {:?}",
        started.elapsed()
    );
    spinner.close().await;
    other.close().await;
}

/// `wasm-agent run-task` with `policy/http.example.toml`'s shape: the sample
/// task runs on the server's own worktree, so the task's git worktree has
/// nothing to commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_task_runs_over_http() {
    let repo = support::sample_repo();
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("Cargo.toml"), "[workspace]\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let server = token_server(served.path(), plugins.path());
    std::env::set_var("HARNESS_HTTP_TOKEN_RUN", TOKEN);
    let scratch = tempfile::tempdir().unwrap();
    let policy = scratch.path().join("policy.toml");
    std::fs::write(&policy, policy_text(&server.url, "HARNESS_HTTP_TOKEN_RUN")).unwrap();
    let report = run_task(
        &policy,
        &support::repo_root().join("tasks/sample.toml"),
        RunOptions {
            provider: ProviderChoice::Scripted,
            repo: Some(repo.path().to_path_buf()),
            out_dir: Some(scratch.path().join("runs")),
            ..RunOptions::default()
        },
    )
    .await
    .expect("run_task");
    assert!(report.ok(), "run failed: {:?}", report.error);
    assert_eq!(report.result.as_ref().unwrap().tool_calls, 6);
    let notes = std::fs::read_to_string(served.path().join("NOTES.md")).unwrap();
    assert!(notes.starts_with("# Notes"), "{notes}");
    assert!(
        matches!(report.work.work, WorkOutcome::NoChanges),
        "{:?}",
        report.work.work
    );
    let trace = std::fs::read_to_string(&report.trace_path).unwrap();
    assert!(trace.contains("HARNESS_HTTP_TOKEN_RUN") && !trace.contains(TOKEN));
}
