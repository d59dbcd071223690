//! Whole task runs: real git worktree, fake MCP server, scripted and OpenAI-compatible providers.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasm_mcp_harness::mcp::connection::Connector;
use wasm_mcp_harness::provider::openai::OpenAiProvider;
use wasm_mcp_harness::run::task::ProviderChoice;
use wasm_mcp_harness::tools::naming::local_name;
use wasm_mcp_harness::{run_task, RunOptions};
use wasm_mcp_harness_testing::{openai_standin, tool, Behavior, FakeConfig, FakeServer};

const POLICY: &str = r#"
max_rounds = 8
[[servers]]
id = "ws"
command = "target/debug/wasm-mcp"
args = ["serve", "--worktree", "{worktree}", "--plugins", "{repo}/dist/plugins"]
allowed_tools = ["read_file", "list_dir", "write_file"]
request_timeout_ms = 2000
[servers.tools.read_file]
approval = "auto"
[servers.tools.list_dir]
approval = "auto"
[servers.tools.write_file]
approval = "auto"
"#;

const TASK: &str = r#"
id = "demo task"
prompt = "Summarise the repo into NOTES.md"
[scripted]
final_message = "Wrote notes for {{ls.path}} ({{read.path}})"
[[scripted.steps]]
id = "ls"
tool = "list_dir"
args = { path = "." }
[[scripted.steps]]
id = "read"
tool = "read_file"
args = { path = "README.md" }
expect_contains = "README"
[[scripted.steps]]
tool = "write_file"
args = { path = "NOTES.md", content = "notes about {{read.path}}" }
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(task: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        wasm_mcp_harness_testing::repo_in(dir.path(), &[("README.md", "# Demo\n")]);
        std::fs::write(dir.path().join("policy.toml"), POLICY).unwrap();
        std::fs::write(dir.path().join("task.toml"), task).unwrap();
        Self { dir }
    }
    fn repo(&self) -> std::path::PathBuf {
        self.dir.path().join("repo")
    }
    fn opts(&self, fake: &FakeServer) -> RunOptions {
        let mut c: HashMap<String, Arc<dyn Connector>> = HashMap::new();
        c.insert("ws".into(), fake.connector());
        RunOptions {
            provider: ProviderChoice::Scripted,
            repo: Some(self.repo()),
            out_dir: Some(self.dir.path().join("out")),
            connectors: Some(c),
            ..Default::default()
        }
    }
    /// A run on an OpenAI-compatible stand-in whose model first asks for
    /// `calls`, then answers "All done."; the report and the requests seen.
    async fn run_openai(
        &self,
        fake: &FakeServer,
        calls: Value,
    ) -> (wasm_mcp_harness::RunReport, Vec<(String, String, Value)>) {
        let replies = vec![
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}]}),
            json!({"choices": [{"message": {"role": "assistant", "content": "All done."}}]}),
        ];
        let (base, seen) = openai_standin(replies).await;
        let mut opts = self.opts(fake);
        opts.provider_override = Some(Arc::new(
            OpenAiProvider::new(&base, Some("sk-test".into()), "test-model").unwrap(),
        ));
        let report = self.run(opts).await;
        let seen = seen.lock().unwrap().clone();
        (report, seen)
    }

    async fn run(&self, opts: RunOptions) -> wasm_mcp_harness::RunReport {
        run_task(
            &self.dir.path().join("policy.toml"),
            &self.dir.path().join("task.toml"),
            opts,
        )
        .await
        .unwrap()
    }
}

fn fake() -> FakeServer {
    FakeServer::new(FakeConfig {
        pages: vec![vec![
            tool("read_file"),
            tool("list_dir"),
            tool("write_file"),
        ]],
        ..Default::default()
    })
}

fn branches(repo: &Path) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["branch", "--list", "agent/*"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn trace(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn scripted_run_creates_worktree_runs_and_cleans_up() {
    let env = Env::new(TASK);
    let fake = fake();
    let report = env.run(env.opts(&fake)).await;
    assert!(report.ok(), "{:?}", report.error);
    let r = report.result.as_ref().unwrap();
    assert_eq!(r.final_message, "Wrote notes for . (README.md)");
    assert_eq!(r.tool_calls, 3);
    assert_eq!(r.rounds, 4);
    // Tool calls reached the server with rendered args, under remote names.
    let calls = fake.calls();
    assert_eq!(
        calls[2],
        (
            "write_file".to_string(),
            json!({"path": "NOTES.md", "content": "notes about README.md"})
        )
    );
    // The fake server changed no file: no commit, worktree and branch gone; trace persisted.
    assert_eq!(
        report.work.work,
        wasm_mcp_harness::run::keep::WorkOutcome::NoChanges
    );
    assert!(!report.worktree.exists());
    assert!(report.worktree.starts_with(env.repo().join(".worktrees")));
    assert_eq!(branches(&env.repo()), "");
    let ev = trace(&report.trace_path);
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"task_start"));
    assert_eq!(kinds.last(), Some(&"task_end"));
    let rounds: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "round_start").collect();
    assert_eq!(rounds.len(), 4);
    assert!(rounds.iter().all(|e| e["catalog_version"] == 1));
    let call = ev.iter().find(|e| e["kind"] == "tool_call").unwrap();
    assert_eq!(call["tool"], local_name("ws", "list_dir"));
    assert_eq!(call["origin"]["remote_name"], "list_dir");
    assert_eq!(call["state"], "completed");
    // close MCP happens before task_end / worktree removal.
    let closed = kinds.iter().position(|k| *k == "server_closed").unwrap();
    assert!(closed < kinds.len() - 1);
    // ... and after the rounds stopped: final answer, then close, then task_end.
    let final_at = kinds.iter().position(|k| *k == "final").unwrap();
    assert!(final_at < closed, "{kinds:?}");
    assert_eq!(
        closed,
        kinds.len() - 2,
        "nothing between closing MCP and task_end: {kinds:?}"
    );
    assert!(!kinds[closed..]
        .iter()
        .any(|k| *k == "tool_call" || *k == "round_start"));
}

#[tokio::test]
async fn unexpected_tool_error_fails_run_but_still_cleans_up() {
    let env = Env::new(TASK);
    let fake = fake();
    fake.0.config.lock().unwrap().behaviors.insert(
        "read_file".into(),
        Behavior::Result(
            json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
        ),
    );
    let report = env.run(env.opts(&fake)).await;
    let err = report.error.clone().unwrap();
    assert!(
        err.contains("step 2") && err.contains("failed unexpectedly"),
        "{err}"
    );
    assert_eq!(
        fake.calls().len(),
        2,
        "the run stopped; write_file never sent"
    );
    assert!(!report.worktree.exists());
    assert_eq!(branches(&env.repo()), "");
    let ev = trace(&report.trace_path);
    assert_eq!(ev.last().unwrap()["ok"], false);
}

#[tokio::test]
async fn keep_worktree_and_startup_failure_cleanup() {
    let env = Env::new(TASK);
    let fake = fake();
    let mut opts = env.opts(&fake);
    opts.keep_worktree = true;
    let report = env.run(opts).await;
    assert!(report.ok());
    assert!(report.worktree.join("README.md").exists());
    assert!(branches(&env.repo()).contains("agent/demo-task-"));
    // Server missing an allowed tool → discovery error; worktree still removed.
    let env2 = Env::new(TASK);
    let broken = FakeServer::new(FakeConfig {
        pages: vec![vec![tool("read_file")]],
        ..Default::default()
    });
    let report2 = env2.run(env2.opts(&broken)).await;
    assert!(
        report2.error.as_deref().unwrap().contains("missing"),
        "{:?}",
        report2.error
    );
    assert!(!report2.worktree.exists());
    assert_eq!(branches(&env2.repo()), "");
    // explicit cleanup of the kept one
    let _ = Command::new("git")
        .arg("-C")
        .arg(env.repo())
        .args(["worktree", "remove", "--force"])
        .arg(&report.worktree)
        .status();
}

#[tokio::test]
async fn openai_compatible_provider_round_trip() {
    let env = Env::new(TASK);
    let fake = fake();
    let read = local_name("ws", "read_file");
    let calls = json!([
        {"id": "call_1", "type": "function", "function": {"name": read, "arguments": "{\"path\":\"README.md\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": read, "arguments": "{\"path\": 5}"}}
    ]);
    let (report, seen) = env.run_openai(&fake, calls).await;
    assert!(report.ok(), "{:?}", report.error);
    assert_eq!(report.provider, "openai");
    let r = report.result.unwrap();
    assert_eq!(r.final_message, "All done.");
    assert_eq!(r.tool_calls, 2);
    assert_eq!(
        r.tool_errors, 1,
        "the bad-args call is an error for the model"
    );
    assert_eq!(fake.calls().len(), 1, "bad args were not sent");

    assert_eq!(seen.len(), 2);
    let (line, auth, first) = &seen[0];
    assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
    assert_eq!(auth.to_lowercase(), "authorization: bearer sk-test");
    assert_eq!(first["model"], "test-model");
    let tools = first["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|t| t["type"] == "function"));
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&read.as_str()));
    assert!(tools[0]["function"]["parameters"]["type"] == "object");
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(first["messages"][1]["role"], "user");
    let second = &seen[1].2;
    let msgs = second["messages"].as_array().unwrap();
    let tool_msgs: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2);
    assert_eq!(tool_msgs[0]["tool_call_id"], "call_1");
    assert_eq!(
        serde_json::from_str::<Value>(tool_msgs[0]["content"].as_str().unwrap()).unwrap(),
        json!({"path": "README.md"})
    );
    assert_eq!(tool_msgs[1]["tool_call_id"], "call_2");
    assert!(tool_msgs[1]["content"]
        .as_str()
        .unwrap()
        .starts_with("error: invalid arguments"));
    assert!(msgs
        .iter()
        .any(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == "call_1"));
}

#[test]
fn shipped_policy_and_sample_task_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let p = wasm_mcp_harness::run::policy::Policy::load(&root.join("policy/default.toml")).unwrap();
    let ws = p.server("ws").unwrap();
    assert_eq!(
        ws.required_tools(),
        ["read_file", "list_dir", "search", "write_file"]
    );
    assert_eq!(
        ws.tool_policy("write_file").approval,
        wasm_mcp_harness::run::policy::Approval::Auto
    );
    let t = wasm_mcp_harness::run::task::TaskFile::load(&root.join("tasks/sample.toml")).unwrap();
    let script = t.scripted.unwrap();
    assert!(script.steps.len() >= 4);
    assert!(
        script.steps.iter().all(|s| ws.is_exposed(&s.tool)),
        "every step uses an allowed tool"
    );
    assert!(script.steps.iter().any(|s| s.tool == "write_file"));
}

/// One raw HTTP response to whatever request arrives.
async fn http_once(status_line: &str, body: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let status_line = status_line.to_string();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut tmp = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut tmp).await.unwrap();
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        let resp = format!(
            "HTTP/1.1 {status_line}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = sock.write_all(resp.as_bytes()).await;
        let _ = sock.shutdown().await;
    });
    format!("http://{addr}/v1")
}

/// The error of one chat completion asking `text` of `p`.
async fn failed_completion(
    p: &OpenAiProvider,
    text: &str,
) -> wasm_mcp_harness::provider::ProviderError {
    use wasm_mcp_harness::provider::{ChatMessage, ChatProvider, ChatRequest};
    let msgs = [ChatMessage::user(text)];
    let catalog = Arc::new(wasm_mcp_harness::tools::catalog::CatalogSnapshot::default());
    p.complete(ChatRequest {
        messages: &msgs,
        tools: &[],
        names: &*catalog,
    })
    .await
    .unwrap_err()
}

#[tokio::test]
async fn openai_error_body_with_multibyte_text_is_reported_not_a_panic() {
    use wasm_mcp_harness::provider::ProviderError;
    // 3-byte chars: a cut at byte 2000 would split one.
    let base = http_once("500 Internal Server Error", "€".repeat(3000)).await;
    let p = OpenAiProvider::new(&base, None, "m").unwrap();
    let e = failed_completion(&p, "hi").await;
    match e {
        ProviderError::Status { status, body } => {
            assert_eq!(status, 500);
            assert_eq!(body, "€".repeat(2000));
        }
        other => panic!("expected Status, got {other}"),
    }
}

/// A reply whose text holds a lone UTF-16 surrogate escape (a model's text
/// cut inside an emoji's pair) is read with U+FFFD in its place, as a lossy
/// decoder does; it failed the whole round.
#[tokio::test]
async fn openai_reply_with_a_lone_surrogate_is_read() {
    use wasm_mcp_harness::provider::{ChatMessage, ChatProvider, ChatRequest};
    let reply = r#"{"choices":[{"message":{"role":"assistant","content":"cut \ud83d here, whole \ud83d\ude00"}}]}"#;
    let base = http_once("200 OK", reply.to_string()).await;
    let p = OpenAiProvider::new(&base, None, "m").unwrap();
    let msgs = [ChatMessage::user("hi")];
    let catalog = Arc::new(wasm_mcp_harness::tools::catalog::CatalogSnapshot::default());
    let m = p
        .complete(ChatRequest {
            messages: &msgs,
            tools: &[],
            names: &*catalog,
        })
        .await
        .unwrap();
    assert_eq!(
        m.content.as_deref(),
        Some("cut \u{fffd} here, whole \u{1f600}")
    );
}

/// A provider that answers with a redirect does not get the conversation
/// re-sent to where it points (another origin): the 3xx is the request's
/// error, as for the MCP HTTP client. It was followed.
#[tokio::test]
async fn openai_redirects_are_not_followed() {
    use wasm_mcp_harness::provider::ProviderError;
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = format!(
        "http://{}/v1/chat/completions",
        elsewhere.local_addr().unwrap()
    );
    let base = http_once(
        &format!("307 Temporary Redirect\r\nlocation: {target}"),
        String::new(),
    )
    .await;
    let p = OpenAiProvider::new(&base, Some("sk-test".into()), "m").unwrap();
    let e = failed_completion(&p, "a secret conversation").await;
    assert!(
        matches!(e, ProviderError::Status { status: 307, .. }),
        "{e}"
    );
    let reached =
        tokio::time::timeout(std::time::Duration::from_millis(300), elsewhere.accept()).await;
    assert!(reached.is_err(), "the redirect was followed");
}

#[tokio::test]
async fn openai_transport_error_keeps_its_cause() {
    // A port nobody listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let p = OpenAiProvider::new(&format!("http://{addr}/v1"), None, "m").unwrap();
    let e = failed_completion(&p, "hi").await;
    assert!(
        e.to_string().to_lowercase().contains("refused"),
        "cause lost: {e}"
    );
}

/// A provider reply of too many JSON values is refused before it is
/// parsed, with a clear error: 16 MB of tiny values parse to hundreds of
/// MB (a helper's find).
#[tokio::test]
async fn a_reply_of_too_many_json_values_is_refused_unparsed() {
    let env = Env::new(TASK);
    let fake = fake();
    let zeros = vec![0u8; wasm_mcp_harness::provider::openai::MAX_REPLY_JSON_VALUES + 1];
    let replies = vec![
        json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}],
        "padding": zeros}),
    ];
    let (base, _seen) = openai_standin(replies).await;
    let mut opts = env.opts(&fake);
    opts.provider_override = Some(Arc::new(
        OpenAiProvider::new(&base, Some("sk-test".into()), "test-model").unwrap(),
    ));
    let report = env.run(opts).await;
    let error = report.error.clone().unwrap_or_default();
    assert!(error.contains("JSON values"), "{error:?}");
}

/// A reply asking for more tool calls than the harness runs from one reply:
/// the first `MAX_TOOL_CALLS_PER_REPLY` run, the rest are dropped from the
/// conversation (the assistant message keeps only those that ran, so every
/// call in it has its result) and the model is told so in a note. 10,000
/// calls of a 64 KB file held 2.7 GB.
#[tokio::test]
async fn a_reply_with_too_many_tool_calls_runs_only_the_first() {
    use wasm_mcp_harness::run::agent::MAX_TOOL_CALLS_PER_REPLY;
    let env = Env::new(TASK);
    let fake = fake();
    let read = local_name("ws", "read_file");
    let asked = MAX_TOOL_CALLS_PER_REPLY + 68;
    let calls: Vec<Value> = (0..asked)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
            "function": {"name": read, "arguments": "{\"path\":\"README.md\"}"}})
        })
        .collect();
    let (report, seen) = env.run_openai(&fake, Value::Array(calls)).await;
    assert!(report.ok(), "{:?}", report.error);
    // The trace keeps the calls that ran and a count of the rest (it kept
    // every call: 360,000 a reply took the harness past 2.9 GB).
    let ev = trace(&report.trace_path);
    let reply = ev.iter().find(|e| e["kind"] == "model_reply").unwrap();
    assert_eq!(
        reply["tool_calls"].as_array().unwrap().len(),
        MAX_TOOL_CALLS_PER_REPLY
    );
    assert_eq!(reply["tool_calls_dropped"], 68, "{reply}");
    let r = report.result.unwrap();
    assert_eq!(r.tool_calls, MAX_TOOL_CALLS_PER_REPLY);
    assert_eq!(fake.calls().len(), MAX_TOOL_CALLS_PER_REPLY);

    let msgs = seen[1].2["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    let kept = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(kept.len(), MAX_TOOL_CALLS_PER_REPLY);
    let answered: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(answered.len(), MAX_TOOL_CALLS_PER_REPLY);
    for (call, result) in kept.iter().zip(&answered) {
        assert_eq!(call["id"], result["tool_call_id"]);
    }
    let note = msgs.last().unwrap();
    assert_eq!(note["role"], "user", "{note}");
    let text = note["content"].as_str().unwrap();
    assert!(
        text.contains(&asked.to_string()) && text.contains(&MAX_TOOL_CALLS_PER_REPLY.to_string()),
        "{text}"
    );
}

/// A model whose every reply is 6 MB of text and one tool call.
struct Verbose {
    replies: std::sync::atomic::AtomicUsize,
}

impl wasm_mcp_harness::provider::ChatProvider for Verbose {
    fn name(&self) -> &str {
        "verbose"
    }
    fn complete<'a>(
        &'a self,
        _req: wasm_mcp_harness::provider::ChatRequest<'a>,
    ) -> wasm_mcp_harness::BoxFut<
        'a,
        Result<wasm_mcp_harness::provider::ChatMessage, wasm_mcp_harness::provider::ProviderError>,
    > {
        use wasm_mcp_harness::provider::{ChatMessage, FunctionCall, ToolCall};
        let n = self
            .replies
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            Ok(ChatMessage {
                role: "assistant".into(),
                content: Some("x".repeat(6 << 20)),
                tool_calls: Some(vec![ToolCall {
                    id: format!("call_{n}"),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: local_name("ws", "read_file"),
                        arguments: "{\"path\":\"README.md\"}".into(),
                    },
                }]),
                ..Default::default()
            })
        })
    }
}

/// The conversation is bounded in all, not only per reply: replies each
/// within the provider's cap, kept and sent again every round, grew a run
/// by ~58 MB a round (2.3 GB at 40 rounds; a helper's find). Past
/// `MAX_CONVERSATION_BYTES` the run ends as failed, its work committed.
#[tokio::test]
async fn the_conversation_is_bounded_in_all() {
    use wasm_mcp_harness::run::agent::MAX_CONVERSATION_BYTES;
    let env = Env::new("id = \"chatty\"\nprompt = \"go\"\nmax_rounds = 40\n");
    let fake = fake();
    let mut opts = env.opts(&fake);
    let verbose = Arc::new(Verbose {
        replies: Default::default(),
    });
    opts.provider_override = Some(verbose.clone());
    let report = env.run(opts).await;
    let error = report.error.clone().unwrap_or_default();
    assert!(error.contains("conversation reached"), "{error:?}");
    let replies = verbose.replies.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(replies, MAX_CONVERSATION_BYTES / (6 << 20) + 1, "{error}");
    let ev = trace(&report.trace_path);
    assert!(ev.iter().any(|e| e["kind"] == "conversation_too_large"));
}

/// OpenAI-compatible servers that send a call's `arguments` as a JSON
/// object, or no call `id`, are understood: the arguments are read as
/// their JSON text, and a call with no id gets one, which its result then
/// names. Either failed the run ("invalid type: map", "missing field id").
#[tokio::test]
async fn calls_with_object_arguments_or_no_id_are_understood() {
    let env = Env::new(TASK);
    let fake = fake();
    let read = local_name("ws", "read_file");
    let calls = json!([{"type": "function",
        "function": {"name": read, "arguments": {"path": "README.md"}}}]);
    let (report, seen) = env.run_openai(&fake, calls).await;
    assert!(report.ok(), "{:?}", report.error);
    assert_eq!(report.result.unwrap().tool_calls, 1);
    let msgs = seen[1].2["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], "{\"path\":\"README.md\"}");
    let id = call["id"].as_str().unwrap();
    assert!(!id.is_empty());
    let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], id);
    assert!(
        result["content"].as_str().unwrap().contains("README.md"),
        "{result}"
    );
}
